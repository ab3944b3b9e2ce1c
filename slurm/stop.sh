#!/usr/bin/env bash
# Stop the local Slurm started by slurm/start.sh: by PID file, in reverse start order; TERM, then
# KILL after 15 s. Never by process name (other Slurms or databases on the machine are left alone).
set -uo pipefail
D=${FDEVAL_SLURM_DIR:-/tmp/fdeval-slurm}
for name in slurmd slurmctld slurmdbd mariadb munged; do
  f="$D/run/$name.pid"
  [ -s "$f" ] || continue
  pid=$(cat "$f")
  kill -0 "$pid" 2>/dev/null || continue
  kill -TERM "$pid" 2>/dev/null
  for _ in $(seq 150); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  kill -0 "$pid" 2>/dev/null && kill -KILL "$pid" 2>/dev/null
  echo "slurm: stopped $name ($pid)"
done
exit 0
