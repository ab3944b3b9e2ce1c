#!/usr/bin/env bash
# On the lent GPU machine (the device tool, with `carry: [".whl"]` from benchmarks/device_wheels.sh):
# install the carried wheels, then run the lockstep speed script with moshiko's shapes at
# B = 1, 8, 32, 64 under its own timeout, its JSON and log into $OUT. One call, e.g.
#   run(command="bash benchmarks/device_speed.sh", carry=[".whl"], timeout_s=600)
# Extra arguments go to the script (e.g. --batch 1,8 for a shorter check).
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-$(mktemp -d)}
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv | tee "$OUT/gpu.txt"
python3 benchmarks/moshi_lockstep_speed.py --moshiko-shapes --timeout-s 540 --out /tmp/speed --json "$OUT/speed.json" \
  "$@" 2>&1 | tee "$OUT/speed.log"
