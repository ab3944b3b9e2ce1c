#!/usr/bin/env python
"""Speed of batched lockstep Moshi: session-seconds per wall-second at B=8 vs B=1, side by side.

Runs the real run stage (`fdeval.stages.stage_run`: B cases at once, each through `run_session`
with its own LockstepClock and turn manager, one batched LMGen + Mimi step per frame) on the same
built-in Instruct-FD cases, once with `model.batch_size=1` and once with 8, and prints both speeds
and their ratio. The model is loaded and warmed up (its first step compiles kernels, ~3 s) before
the clock starts. By default it builds the tiny random Moshi (`fdeval/models/moshi_tiny.py`) on the
CPU with one torch thread; pass real weights (and --device cuda) on a GPU node.

It runs inside the moshi venv (it re-executes itself with .cache/moshi-venv/bin/python, building
that venv with fdeval --no-deps when needed):

    python benchmarks/moshi_lockstep_speed.py [--cases 8] [--batch 8] [--dtype bfloat16]
        [--device cpu] [--threads 1] [--config-path C --moshi-weight W --mimi-weight M --tokenizer T]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))


def in_moshi_venv() -> bool:
    try:
        import moshi.models  # noqa: F401
        import fdeval  # noqa: F401
    except ImportError:
        return False
    return True


def reexec() -> None:
    from fdeval.models.moshi_env import ensure_moshi_venv

    py = ensure_moshi_venv(with_fdeval=True)
    os.execv(str(py), [str(py), __file__, *sys.argv[1:]])


def compose(overrides: list[str]):
    from hydra import compose as hcompose, initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra

    from fdeval.launch import CONF_DIR

    GlobalHydra.instance().clear()
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base=None):
        cfg = hcompose("config", overrides=overrides)
    GlobalHydra.instance().clear()
    return cfg


def warm_up(model) -> None:
    """Load the weights and run a few frames through every row (outside the timed run)."""
    import numpy as np

    async def one():
        async with model.session(None, 0) as s:
            for _ in range(3):
                await s.send(np.zeros(1920, np.float32))
                await s.receive()

    async def all_rows():
        await asyncio.gather(*(one() for _ in range(model.batch_size)))

    asyncio.run(all_rows())


def run(batch: int, args, out_root: Path, weights: list[str]) -> dict:
    from fdeval.stages import RunContext, stage_generate, stage_run

    cases = args.case_ids
    cfg = compose([
        "model=moshi_lockstep", f"model.batch_size={batch}", f"model.device={args.device}", f"model.dtype={args.dtype}",
        f"model.torch_threads={args.threads}", f"out_root={out_root}", "progress=false", "benchmark.timeout_s=4",
        f"benchmark.cases=[{','.join(cases)}]", *weights,
    ])
    run_dir = out_root / f"b{batch}"
    ctx = RunContext(cfg, run_dir, out_root)
    stage_generate(ctx)
    t0 = time.perf_counter()
    warm_up(ctx.model)
    warm = time.perf_counter() - t0
    ctx.model.stepper.steps = ctx.model.stepper.row_steps = 0
    stage_run(ctx)
    st = ctx.stats["run"]
    stepper = ctx.model.stepper
    st.update(batch=batch, load_and_warmup_s=warm, batched_steps=stepper.steps, row_steps=stepper.row_steps)
    ctx.model.close()
    return st


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--cases", type=int, default=8, help="how many built-in cases each side runs")
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--dtype", default="bfloat16")
    p.add_argument("--device", default="cpu")
    p.add_argument("--threads", type=int, default=1, help="torch threads (CPU)")
    p.add_argument("--config-path")
    p.add_argument("--moshi-weight")
    p.add_argument("--mimi-weight")
    p.add_argument("--tokenizer")
    p.add_argument("--hf-repo")
    args = p.parse_args()
    if not in_moshi_venv():
        reexec()
    tmp = Path(tempfile.mkdtemp(prefix="moshi-lockstep-speed-"))
    if args.config_path:
        weights = [f"model.config_path={args.config_path}", f"model.moshi_weight={args.moshi_weight}",
                   f"model.mimi_weight={args.mimi_weight}", f"model.tokenizer={args.tokenizer}", "model.hf_repo=null"]
    elif args.hf_repo:
        weights = [f"model.hf_repo={args.hf_repo}"]
    else:
        from fdeval.models.moshi_env import build_tiny

        tiny = build_tiny(Path(sys.executable), tmp / "tiny")
        weights = [f"model.config_path={tiny['config']}", f"model.moshi_weight={tiny['moshi_weight']}",
                   f"model.mimi_weight={tiny['mimi_weight']}", f"model.tokenizer={tiny['tokenizer']}", "model.hf_repo=null"]
    # the built-in cases, in their stable order (generated once, shared by both runs)
    from fdeval.stages import RunContext, stage_generate

    ctx = RunContext(compose([f"out_root={tmp}", "progress=false", "benchmark.timeout_s=4"]), tmp / "gen", tmp)
    stage_generate(ctx)
    args.case_ids = [c.case_id for c in ctx.all_cases][: args.cases]
    print(f"{len(args.case_ids)} cases, device {args.device}, dtype {args.dtype}, torch threads {args.threads}, "
          f"{os.cpu_count()} CPUs", flush=True)
    rows = [run(1, args, tmp, weights), run(args.batch, args, tmp, weights)]
    print(f"{'B':>3} {'cases':>5} {'session-s':>10} {'wall-s':>8} {'speed':>8} {'steps':>7} {'frames':>7}")
    for r in rows:
        print(f"{r['batch']:>3} {r['cases']:>5} {r['session_s']:>10.1f} {r['wall_s']:>8.1f} {r['speed']:>8.2f} "
              f"{r['batched_steps']:>7} {r['row_steps']:>7}")
    ratio = rows[1]["speed"] / rows[0]["speed"]
    print(f"B={args.batch} vs B=1: {ratio:.2f}x session-seconds per wall-second "
          f"(speed = session-seconds per wall-second, load and warm-up excluded)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
