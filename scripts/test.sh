#!/usr/bin/env bash
# Install (if needed) and run the whole test suite.
set -euo pipefail
cd "$(dirname "$0")/.."
EXTRAS=${EXTRAS:-test,asr} bash scripts/setup.sh
. .venv/bin/activate
python -m pytest -q "$@"
