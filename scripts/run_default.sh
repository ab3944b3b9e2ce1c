#!/usr/bin/env bash
# Install (if needed) and run the default benchmark end to end: reference agent on the
# built-in Instruct-FD set, on the CPU. Extra arguments are Hydra overrides.
set -euo pipefail
cd "$(dirname "$0")/.."
EXTRAS= bash scripts/setup.sh
. .venv/bin/activate
python -m fdeval.launch "$@"
