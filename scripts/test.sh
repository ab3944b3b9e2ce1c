#!/usr/bin/env bash
# Install (if needed) and run the whole test suite.
set -euo pipefail
cd "$(dirname "$0")/.."
EXTRAS=${EXTRAS:-test,asr} bash scripts/setup.sh
bash scripts/install_browser.sh || echo "test: no chromium (needs root and Debian's apt); the browser test will be skipped"
. .venv/bin/activate
python -m pytest -q "$@"
