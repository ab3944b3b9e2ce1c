#!/usr/bin/env bash
# Install (if needed) and run the whole test suite. The environments the tests share are built
# first, each as its own timed step (a no-op when current), so no test's time hides a build.
# FDEVAL_TEST_WORKERS: pytest-xdist workers (default 3: on 2 cores the third fills the time the others
# wait on realtime sessions, servers and Slurm; 1,537 s at -n 2, 1,399 s at -n 3 on one clone; in
# another session on a quiet machine, 2,009 s serial beside 1,090-1,158 s at -n 3; 0 runs in this
# process, one test at a time).
set -euo pipefail
cd "$(dirname "$0")/.."
step() {  # step NAME CMD...: run CMD, then say how long it took
  local name=$1 t0=$SECONDS
  shift
  "$@"
  echo "test: $name: $((SECONDS - t0)) s"
}
# The moshi venv (kyutai's real server, torch<2.10, so apart from .venv) for the Moshi tests. It is
# built beside .venv and the browser (pip waits on unpacking and disk as much as on the CPU), with
# the python that makes .venv: building it needs nothing of .venv (fdeval.models.moshi_env imports
# only the standard library and fdeval.errors).
moshi_log=$(mktemp)
step "moshi venv (.cache/moshi-venv), beside the next two" bash -c '"${PYTHON:-python3}" -m fdeval.models.moshi_env --with-fdeval >/dev/null || echo "test: the moshi venv could not be built; the Moshi server tests will be skipped"' >"$moshi_log" 2>&1 &
moshi_pid=$!
step "venv (.venv)" env EXTRAS="${EXTRAS:-test,asr}" bash scripts/setup.sh
step "browser" bash -c 'bash scripts/install_browser.sh || echo "test: no chromium (needs root and Debian apt); the browser test will be skipped"'
wait "$moshi_pid" || true
cat "$moshi_log"
rm -f "$moshi_log"
. .venv/bin/activate
# lint and format first ([tool.ruff] in pyproject.toml): a second, and a failure names file and line
step "lint (ruff check, ruff format --check)" bash -c 'ruff check --quiet . && ruff format --check --quiet .'
workers=${FDEVAL_TEST_WORKERS:-3}
if [ "$workers" = 0 ]; then
  python -m pytest -q "$@"
else
  python -m pytest -q -n "$workers" --dist loadgroup "$@"
fi
