#!/usr/bin/env bash
# Create .venv (once) and install fdeval into it with the CPU-only dependencies.
# EXTRAS selects optional dependency groups (default: test; empty: none); torch is pinned to the CPU wheel.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
. .venv/bin/activate
python -m pip install -q --upgrade pip
EXTRAS=${EXTRAS-test}
if [ -n "$EXTRAS" ]; then
  python -m pip install -q -e ".[$EXTRAS]"
else
  python -m pip install -q -e .
fi
