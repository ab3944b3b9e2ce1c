#!/usr/bin/env bash
# Install a single-node Slurm (controller, node daemon, accounting with MariaDB, munge) from
# Debian's packages. Idempotent; needs root. Used by CI and for local development.
set -euo pipefail
need=()
for bin in slurmctld slurmd slurmdbd sinfo munged mariadbd; do
  command -v "$bin" >/dev/null 2>&1 || need+=("$bin")
done
if [ ${#need[@]} -eq 0 ]; then
  echo "slurm: already installed"
  exit 0
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends slurmctld slurmd slurm-client munge slurmdbd mariadb-server >/dev/null
echo "slurm: installed $(sinfo --version)"
