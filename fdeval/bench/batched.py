"""Batched lockstep Moshi: session-seconds per wall-second at B=8 vs B=1 (the baseline).

The real run step with `model=moshi_lockstep` on the same built-in cases, once with
`model.batch_size=1` and once with 8, on the tiny random Moshi (`fdeval/models/moshi_tiny.py`)
on the CPU with one torch thread. It runs inside the moshi venv (`.cache/moshi-venv`, or
`$FDEVAL_MOSHI_VENV`): this module is also its worker, `python -m fdeval.bench.batched OUT N B`.
Each side's wall includes its model load and first-step
compile, which the tiny model keeps to about a second.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from fdeval.bench.common import REPO, launch, row, skipped
from fdeval.models.moshi_env import build_tiny, default_venv

BATCH = 8
CASES = 8  # one full batch
BUILD = "python -m fdeval.models.moshi_env"


def worker(out: Path, n_cases: int, batch: int) -> dict[str, Any]:
    """(moshi venv) Both sides' run stats."""
    tiny = build_tiny(Path(sys.executable), out / "tiny")
    weights = [
        f"model.config_path={tiny['config']}",
        f"model.moshi_weight={tiny['moshi_weight']}",
        f"model.mimi_weight={tiny['mimi_weight']}",
        f"model.tokenizer={tiny['tokenizer']}",
        "model.hf_repo=null",
    ]
    short = "benchmark.timeout_s=4"  # a take-turn waits at most 4 s for the random model's silence
    gen, _ = launch(out, "stage=generate", short)
    cases = f"benchmark.cases=[{','.join(c.case_id for c in gen.cases[:n_cases])}]"
    sides = []
    for b in (1, batch):
        run, wall = launch(
            out,
            "stage=run",
            "model=moshi_lockstep",
            f"model.batch_size={b}",
            "model.device=cpu",
            "model.torch_threads=1",
            short,
            cases,
            *weights,
        )
        st = run.stats["run"]
        sides.append(
            {
                "batch": b,
                "cases": st["recorded"],
                "session_s": st["session_s"],
                "wall_s": st["wall_s"],
                "step_wall_s": wall,
                "speed": st["speed"],
            }
        )
    return {"sides": sides}


def run(ctx) -> dict[str, Any]:
    if ctx.quick:  # the tiny Moshi steps slowly on a CPU: minutes, not a CI-sized figure
        return skipped("not in --quick (run python -m fdeval.bench --only batched)")
    py = default_venv() / "bin" / "python"
    if not py.exists():
        return skipped(f"no moshi venv at {py.parent.parent} (build it with `{BUILD}`)")
    out = ctx.fresh("batched")
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])),
    }
    proc = subprocess.run(
        [str(py), "-m", "fdeval.bench.batched", str(out), str(CASES), str(BATCH)],
        capture_output=True,
        text=True,
        timeout=3600,
        env=env,
        cwd=REPO,
    )
    if proc.returncode != 0:
        raise RuntimeError(
            f"the moshi venv worker failed (exit {proc.returncode}): "
            f"{(proc.stderr.strip().splitlines() or [''])[-1]}"
        )
    res = json.loads(proc.stdout.strip().splitlines()[-1])
    one, many = res["sides"]
    res["rows"] = [
        row(
            f"B={many['batch']}, lockstep speed",
            many["speed"],
            "session-s per wall-s",
            f"B={one['batch']}, same cases",
            one["speed"],
            note=f"{many['cases']} cases, tiny random Moshi, CPU, 1 torch thread, bfloat16",
        )
    ]
    return res


if __name__ == "__main__":
    print(json.dumps(worker(Path(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]))))
