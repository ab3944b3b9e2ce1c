"""Where the notebooks find their run folders: environment variables with defaults.

    FDEVAL_OUT_ROOT       the out_root the defaults are looked up in (default: <repo>/outputs)
    FDEVAL_RUN            a run folder, any benchmark (01_read_run; unset: the default run of
                          FDEVAL_RUN_BENCHMARK, default instructfd)
    FDEVAL_RUN_INSTRUCTFD an Instruct-FD run folder (02_instructfd_ias)
    FDEVAL_RUN_TACT       a TACT run folder (04_tact_composites)
    FDEVAL_RUN_ECHOCHAIN  an EchoChain run folder (05_echochain_mpr_mcp)
    FDEVAL_SWEEP_RUNS     run folders, or folders holding them, separated by os.pathsep
                          (03_barge_in_sweep; default <out_root>/instructfd/reference)

A run folder's default is the newest `<out_root>/<benchmark>/reference/default-*` (the folder
`python -m fdeval.launch benchmark=<benchmark>` writes), so each notebook runs as is after the
default launch.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def out_root() -> Path:
    return Path(os.environ.get("FDEVAL_OUT_ROOT") or REPO / "outputs").expanduser()


def run_dir(benchmark: str, env: str) -> Path:
    """The run folder named by `env`, else the newest default run of `benchmark`."""
    if os.environ.get(env):
        return Path(os.environ[env]).expanduser()
    runs = sorted(
        (out_root() / benchmark / "reference").glob("default-*/run.json"),
        key=lambda p: p.stat().st_mtime,
    )
    if not runs:
        raise FileNotFoundError(
            f"no default {benchmark} run under {out_root()}: run `python -m fdeval.launch benchmark={benchmark} "
            f"out_root={out_root()}` first, or set {env} to a run folder"
        )
    return runs[-1].parent


def run_folders(env: str, default: Path) -> list[Path]:
    """Run folders from `env` (os.pathsep-separated; a folder that is not a run stands for the runs
    directly inside it), else the runs inside `default`."""
    entries = [Path(p).expanduser() for p in os.environ.get(env, "").split(os.pathsep) if p] or [
        default
    ]
    found: list[Path] = []
    for e in entries:
        found += (
            [e] if (e / "run.json").is_file() else sorted(p.parent for p in e.glob("*/run.json"))
        )
    return found


def identity(run: Path) -> dict:
    """The identity the run folder's hash was made from (run.json's `identity`)."""
    return json.loads((run / "run.json").read_text(encoding="utf-8"))["identity"]
