#!/usr/bin/env bash
# The full Instruct-FD set (912 instructed cases + 696 baselines) on every open model, as Slurm
# arrays on 8 x H100 nodes: one array per model, chained run -> transcribe+judge -> score.
# Size it first:   bash launchers/instructfd_full_open_models.sh stage=plan
# Extra arguments are Hydra overrides (e.g. launcher.partition=..., launcher.account=...).
set -euo pipefail
cd "$(dirname "$0")/.."
exec python -m fdeval.launch -m \
  model=moshi,personaplex,minicpmo,freezeomni,funaudiochat \
  benchmark=instructfd benchmark.size=full \
  launcher=h100x8 "$@"
