"""Batched lockstep Moshi: the run step's speed per batch size B, against the bare batched forward.

For each B in `--batch`, the real run step (`stage=run model=moshi_lockstep model.batch_size=B`,
through `fdeval.bench.common.launch`) records the same cases, and prints session-seconds per
wall-second, the batched steps it took and how busy its rows were; the bare batched forward (Mimi
encode, `LMGen.step`, Mimi decode on the same cases' user audio, every row busy, no turn managers,
VAD, events or recording, on a second copy of the model with its own streaming state) runs at the
same B between the harness's own steps: every `--probe-every-s` two forward steps, the second timed
(the first brings the copy's weights back into the caches, as a loop of forward steps has them; at
most a sixth of the time goes to it), their time left out of the harness's wall. Both are then
measured in the same minutes, on a machine whose speed drifts by 10 % and more from one minute to
the next. The forward also runs alone just before and just after the harness (printed; the ratio
uses their mean only with `--no-probe` or where the GPU cannot hold the copy's streaming state
beside the harness's). The last line printed is `harness/forward at B=8: R`: the harness's speed
over the interleaved forward's.

Model, random weights, no download: by default the tiny random Moshi (`fdeval/models/moshi_tiny.py`)
on the CPU; `--moshiko-shapes` builds a model with moshiko's real shapes (Moshi 7B LM, the real
Mimi; the tokenizer is the tiny one padded to moshiko's text vocabulary) for a GPU. On CUDA it also
prints the peak GPU memory per row and the GPU-minutes the full Instruct-FD set would take at the
measured speed on one GPU: the full set's expected session-seconds (what `stage=plan`'s
`fdeval.cluster.plan.estimate_session` gives for `model=moshi_lockstep`) divided by the speed.
That total comes from `--full-cases DIR` (a generated full set, e.g. `<out_root>/instructfd/_data/full-...`)
or else from benchmarks/moshi_lockstep_full_set.json (computed the same way, its source inside).

It needs `moshi` and `torch`: run with any python that has them (fdeval is taken from this checkout),
or with fdeval's python, which hands over to the moshi venv (`python -m fdeval.models.moshi_env`):

    python benchmarks/moshi_lockstep_speed.py                       # tiny model, CPU, B = 1,8
    python benchmarks/moshi_lockstep_speed.py --moshiko-shapes      # GPU, B = 1,8,32,64

The cases are Instruct-FD's (`--size sample`, two per scenario, by default) with every take-turn's
timeout at `--turn-timeout-s` (the random model never falls silent, so a turn waits that long),
sessions cut at `--max-session-s` (which also sizes each row's KV cache; both the harness and the
forward use it). Each B's harness speed leaves out its model load (`model.load_s`, which includes
the model's warm-up steps: torch.compile's graphs, CUDA graph capture).
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import json
import os
import platform
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

import numpy as np  # noqa: E402

from fdeval.models.lockstep import SlotPool  # noqa: E402  (no torch: the pool's probe seam)
from fdeval.models.moshi_env import build_tiny, default_venv  # noqa: E402

FULL_SET = Path(__file__).with_name("moshi_lockstep_full_set.json")
FULL_CASES = 1608
FRAME_S = 0.08


class Timeout(BaseException):
    """The script's own --timeout-s ran out (exit 124; the JSON so far is kept). A BaseException, as
    KeyboardInterrupt is, so that no `except Exception` on the way (a model load, a session) takes it
    for an error of its own."""


def have_moshi() -> bool:
    import importlib.util

    return all(importlib.util.find_spec(m) is not None for m in ("moshi", "torch"))


def hand_over(argv: list[str]) -> int:
    """Run this script again with the moshi venv's python (this interpreter lacks moshi or torch)."""
    py = default_venv() / "bin" / "python"
    if not py.exists():
        print(
            f"moshi_lockstep_speed: error: no moshi/torch here and no moshi venv at {py.parent.parent} "
            "(build it with `python -m fdeval.models.moshi_env --with-fdeval`)",
            file=sys.stderr,
        )
        return 2
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])),
    }
    return subprocess.run([str(py), __file__, *argv], env=env, cwd=REPO).returncode


def build_moshiko_shapes(
    out: Path, device: str, seed: int = 0, layers: int | None = None
) -> dict[str, Any]:
    """Random weights in moshiko's shapes, written as a local checkpoint (what `hf_repo: null` reads).
    The tokenizer: the tiny one's pieces padded with placeholders up to moshiko's text_card, so that
    any text token the random model draws has a piece. `layers`: fewer transformer layers (main and
    depth) than moshiko's, every width kept: a check of this path on a machine without the memory."""
    info = out / ("moshiko.json" if layers is None else f"moshiko-{layers}-layers.json")
    if info.exists():
        return json.loads(info.read_text())
    import sentencepiece as spm
    import torch
    from moshi.models import loaders
    from safetensors.torch import save_file
    from sentencepiece import sentencepiece_model_pb2 as pb

    tiny = build_tiny(Path(sys.executable), out / "tiny", seed)
    lm_kw = dict(loaders._lm_kwargs)
    if layers is not None:
        lm_kw.update(num_layers=layers, depformer_num_layers=layers)
        out = out / f"{layers}-layers"
    out.mkdir(parents=True, exist_ok=True)
    proto = pb.ModelProto()
    proto.ParseFromString(Path(tiny["tokenizer"]).read_bytes())
    for i in range(len(proto.pieces), int(lm_kw["text_card"])):
        proto.pieces.add(
            piece=f"\u2581p{i}", score=-100.0 - i, type=pb.ModelProto.SentencePiece.NORMAL
        )
    tok = out / "tokenizer.model"
    tok.write_bytes(proto.SerializeToString())
    assert spm.SentencePieceProcessor(str(tok)).vocab_size() >= lm_kw["text_card"]
    mimi_cfg = dict(loaders._mimi_config)
    (out / "mimi.json").write_text(json.dumps(mimi_cfg))
    torch.manual_seed(seed)
    with torch.device(device):
        mimi = loaders.get_mimi(None, mimi_cfg, device=device)
        save_file(
            {k: v.contiguous().cpu() for k, v in mimi.state_dict().items()},
            str(out / "mimi.safetensors"),
        )
        del mimi
        lm = loaders.get_moshi_lm(None, lm_kwargs=lm_kw, device=device, dtype=torch.bfloat16)
        save_file(
            {k: v.contiguous().cpu() for k, v in lm.state_dict().items()},
            str(out / "model.safetensors"),
        )
        del lm
    config = {
        **lm_kw,
        "model_type": "moshi",
        "mimi_config_name": f"file://{out / 'mimi.json'}",
        "moshi_name": "model.safetensors",
        "mimi_name": "mimi.safetensors",
        "tokenizer_name": "tokenizer.model",
    }
    (out / "config.json").write_text(json.dumps(config))
    res = {
        "config": str(out / "config.json"),
        "moshi_weight": str(out / "model.safetensors"),
        "mimi_weight": str(out / "mimi.safetensors"),
        "tokenizer": str(tok),
    }
    info.write_text(json.dumps(res))
    return res


def full_set_session_s(full_cases: Path | None, out: Path) -> dict[str, Any]:
    """The full Instruct-FD set's expected session-seconds under `model=moshi_lockstep`, as stage=plan
    sizes it (run here on `full_cases`), or the figure stored beside this script."""
    if full_cases is None:
        return {**json.loads(FULL_SET.read_text()), "source": str(FULL_SET.relative_to(REPO))}
    from fdeval.bench.common import compose_cfg
    from fdeval.cluster.plan import plan
    from fdeval.engine.run import Run

    cfg = compose_cfg(
        [
            f"out_root={out}",
            "benchmark.size=full",
            f"benchmark.cases_dir={full_cases}",
            "model=moshi_lockstep",
            "progress=false",
        ]
    )
    shutil.rmtree(out / "plan", ignore_errors=True)
    (out / "plan").mkdir(parents=True)
    with contextlib.redirect_stdout(sys.stderr):  # its table; the figures are in plan.json
        plan(Run(cfg, out / "plan", out))
    figures = json.loads((out / "plan" / "plan.json").read_text())
    return {
        "cases": figures["cases"],
        "session_s_expected": figures["session_s_expected"],
        "session_s_worst": figures["session_s_worst"],
        "data": str(full_cases),
        "how": "stage=plan benchmark.size=full model=moshi_lockstep (fdeval.cluster.plan.estimate_session per case)",
        "source": "computed now",
    }


def bare_forward(
    rows: Any, batch: int, frames: np.ndarray, steps: int, warmup: int
) -> dict[str, Any]:
    """Mimi encode + LMGen.step + Mimi decode at `batch` rows, all busy, as the harness's step does,
    without its masks, resets, events or anything of the session around it, `steps` in a loop after
    `warmup` (`rows`: a closed `MoshiRows`, whose modules get a streaming state of `batch` rows here)."""
    import torch

    cuda = str(rows.device).startswith("cuda")
    if cuda:
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        base = torch.cuda.memory_allocated()
    with ForwardProbe(rows, batch, frames, 0.0) as fwd:
        for _ in range(warmup):
            fwd.step()
        if fwd.cuda:
            torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(steps):
            fwd.step()
        if fwd.cuda:
            torch.cuda.synchronize()
        wall = time.perf_counter() - t0
    out = {
        "batch": batch,
        "steps": steps,
        "wall_s": wall,
        "step_ms": 1e3 * wall / steps,
        "speed": batch * steps * FRAME_S / wall,
    }
    if cuda:  # its streaming state and activations: what the interleaved copy will hold beside the harness
        out["gpu_bytes"] = torch.cuda.max_memory_allocated() - base
    return out


class ForwardProbe:
    """The bare forward (as `bare_forward`) timed between the harness's steps: `SlotPool.probe`
    while the harness runs. Every `every_s` (or longer: at most a sixth of the time goes to it) it
    runs two forward steps on `rows` (the copy's model, streaming state of `batch` rows) and times
    the second; `spent_s` is all the time it took (the
    harness's wall less that is the harness's own)."""

    def __init__(
        self, rows: Any, batch: int, frames: np.ndarray, every_s: float, skip: str | None = None
    ):
        self.rows, self.batch, self.frames, self.every_s = rows, batch, frames, every_s
        self.skip = skip  # why it does not run (the GPU cannot hold a second streaming state)
        self.cuda = str(rows.device).startswith("cuda")
        self.step_s: list[float] = []
        self.spent_s = 0.0
        self.k = 0
        self.next_t = 0.0
        self.stack = contextlib.ExitStack()

    def __enter__(self) -> "ForwardProbe":
        if self.skip:
            return self
        self.stack.enter_context(self.rows.lm_gen.streaming(self.batch))
        self.stack.enter_context(self.rows.mimi.streaming(self.batch))
        return self

    def __exit__(self, *exc: object) -> None:
        self.stack.close()

    def step(self) -> None:
        """One forward step on the next frames (cycling through them)."""
        import torch

        n_frames = self.frames.shape[1]
        x = np.ascontiguousarray(self.frames[: self.batch, self.k % n_frames][:, None, :])
        self.k += 1
        with torch.no_grad():
            codes = self.rows.mimi.encode(torch.from_numpy(x).to(self.rows.device))
            tokens = self.rows.lm_gen.step(codes[:, :, :1])
            self.rows.mimi.decode(tokens[:, 1:].clamp(min=0)).float().cpu().numpy()
            tokens[:, :, 0].cpu().numpy()

    def __call__(self) -> None:
        import torch

        t0 = time.perf_counter()
        if self.skip or t0 < self.next_t:
            return
        self.step()
        if self.cuda:
            torch.cuda.synchronize()
        t1 = time.perf_counter()
        self.step()
        if self.cuda:
            torch.cuda.synchronize()
        t2 = time.perf_counter()
        self.step_s.append(t2 - t1)
        self.spent_s += t2 - t0
        # at least every_s apart, and at most a sixth of the run (a slow step, e.g. moshiko's on a CPU)
        self.next_t = t2 + max(self.every_s, 5 * (t2 - t0))

    def result(self) -> dict[str, Any]:
        n = len(self.step_s)
        wall = sum(self.step_s)
        return {
            "batch": self.batch,
            "steps": n,
            "wall_s": wall,
            "step_ms": 1e3 * wall / max(1, n),
            "speed": self.batch * n * FRAME_S / wall if wall else float("nan"),
            "spent_s": self.spent_s,
            "every_s": self.every_s,
            "skipped": self.skip,
        }


def probe_skip(before: dict[str, Any], weights_bytes: int) -> str | None:
    """Why the interleaved forward cannot run beside the harness (None: it can). On CUDA its
    streaming state stays allocated while the harness loads its own weights and fills its own rows
    (moshiko at B = 64: two sets of KV caches): it runs only where the GPU has room for both, with
    a tenth to spare."""
    if "gpu_bytes" not in before:
        return None
    import torch

    free, _ = torch.cuda.mem_get_info()
    need = int(1.1 * (2 * before["gpu_bytes"] + weights_bytes))
    if need <= free:
        return None
    return f"the GPU has {free / 2**30:.1f} GiB free, the copy's state and the harness need {need / 2**30:.1f} GiB"


def case_frames(cases: list[Any], root: Path, rows: int, frame_n: int, sr: int) -> np.ndarray:
    """(rows, frames, frame_n) float32: row i plays case i's user turns back to back (cases repeat
    when there are fewer than rows), cut to the shortest row."""
    from fdeval.engine.shared import turn_audio

    audio = [np.concatenate(turn_audio(c, root, sr)).astype(np.float32) for c in cases]
    n = min(len(a) for a in audio) // frame_n
    return np.stack([audio[i % len(audio)][: n * frame_n].reshape(n, frame_n) for i in range(rows)])


def harness(
    a: argparse.Namespace,
    b: int,
    ids: list[str],
    common: list[str],
    stamp: str,
    probe: ForwardProbe,
) -> dict[str, Any]:
    """The real run step at batch size `b` on the cases `ids`, with `probe` timing the bare forward
    between its steps: its speed after the model's load and without the probe's time, the batched
    steps it took, and (CUDA) the GPU memory it added."""
    import torch

    from fdeval.bench.common import launch

    cuda = a.device.startswith("cuda")
    if cuda:
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        base = torch.cuda.memory_allocated()
    # a run folder of its own each time: one left by an earlier call would be resumed, measuring nothing
    SlotPool.probe = probe
    try:
        run, step_wall = launch(
            a.out.resolve(),
            f"run_tag=speed-{stamp}-b{b}",
            "stage=run",
            "model=moshi_lockstep",
            f"model.batch_size={b}",
            f"benchmark.cases=[{','.join(ids)}]",
            *common,
        )
    finally:
        SlotPool.probe = None
    st = run.stats["run"]
    load_s = float(run.model.load_s)
    n = run.model.counters()
    compute_s = st["wall_s"] - load_s - probe.spent_s
    h = {
        "batch": b,
        "cases": st["recorded"],
        "failed": st["failed"],
        "invalid": st["invalid"],
        "session_s": st["session_s"],
        "wall_s": st["wall_s"],
        "load_s": load_s,
        "probe_s": probe.spent_s,
        "step_wall_s": step_wall,
        "speed_with_load": st["speed"],
        "speed": st["session_s"] / compute_s,
        "cpu_s": st["cpu_s"],
        "steps": int(n["steps"]),
        "row_steps": int(n["row_steps"]),
        "rows_busy": n["row_steps"] / max(1, n["steps"]),
        "step_ms": 1e3 * compute_s / max(1, n["steps"]),
        "in_model_step": n["step_s"] / compute_s,
    }
    if cuda:
        h["gpu_peak_bytes"] = (
            torch.cuda.max_memory_allocated() - base
        )  # this run's model: weights + rows
    del run
    gc.collect()
    if cuda:
        torch.cuda.empty_cache()
    return h


def measure(a: argparse.Namespace, res: dict[str, Any]) -> None:
    import torch

    from fdeval.bench.common import _cpu_model, launch
    from fdeval.models.moshi_lockstep import MoshiLockstep

    torch.set_num_threads(a.threads)
    cuda = a.device.startswith("cuda")
    out = a.out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    res["env"] = {
        "device": torch.cuda.get_device_name() if cuda else _cpu_model(),
        "device_kind": a.device,
        "torch": torch.__version__,
        "torch_threads": torch.get_num_threads(),
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
        "dtype": a.dtype,
        "model": (
            "tiny random Moshi"
            if not a.moshiko_shapes
            else "moshiko shapes, random"
            if a.moshiko_layers is None
            else f"moshiko shapes with {a.moshiko_layers} layer(s), random"
        ),
        "kv_cache_s": a.max_session_s,
    }
    w = (
        build_moshiko_shapes(out / "moshiko", a.device, layers=a.moshiko_layers)
        if a.moshiko_shapes
        else build_tiny(Path(sys.executable), out / "tiny")
    )
    weights = [
        f"model.config_path={w['config']}",
        f"model.moshi_weight={w['moshi_weight']}",
        f"model.mimi_weight={w['mimi_weight']}",
        f"model.tokenizer={w['tokenizer']}",
        "model.hf_repo=null",
    ]
    # sessions are cut (and invalid) at max_session_s, which also sizes each row's KV cache
    short = [
        f"benchmark.timeout_s={a.turn_timeout_s:g}",
        f"orchestrator.max_session_s={a.max_session_s:g}",
    ]
    gen, _ = launch(out, "stage=generate", f"benchmark.size={a.size}", short[0])
    # --cases N: the same first N cases at every B; else on a CPU 4 x the largest B for all, on CUDA
    # 2 x B at each B (prefixes of one list: B=1 alone would take an hour at real time). A whole
    # number of cases per row: sessions of similar length then keep every row busy to the end, as
    # the many cases of a real run do (26 cases on 8 rows leave 2 alone in a fourth wave).
    per_b = {
        b: min(len(gen.cases), a.cases or (2 * b if cuda else 4 * max(a.batch))) for b in a.batch
    }
    cases = gen.cases[: max(per_b.values())]
    for b, n in per_b.items():
        if n < b:
            print(f"note: {n} cases for B={b}: its rows are never all busy", flush=True)
    res["cases"] = [c.case_id for c in cases]
    res["cases_per_batch"] = per_b
    common = [
        f"model.device={a.device}",
        f"model.dtype={a.dtype}",
        f"model.torch_threads={a.threads}",
        f"benchmark.size={a.size}",
        *short,
        *weights,
    ]
    # the bare forward's model: loaded once (kept beside the harness's own), a streaming state per call
    if cuda:
        torch.cuda.empty_cache()
    fmodel = MoshiLockstep(
        batch_size=1,
        hf_repo=None,
        config_path=w["config"],
        moshi_weight=w["moshi_weight"],
        mimi_weight=w["mimi_weight"],
        tokenizer=w["tokenizer"],
        device=a.device,
        dtype=a.dtype,
        torch_threads=a.threads,
        kv_cache_s=a.max_session_s,
    )
    rows = fmodel.pool.rows
    rows.close()  # its streaming(1) state; bare_forward opens streaming(B)
    res["env"]["kv_cache_steps"] = rows.kv_capacity
    params = [p for mod in (rows.lm_gen.lm_model, rows.mimi) for p in mod.parameters()]
    res["weights_bytes"] = int(sum(p.numel() * p.element_size() for p in params))
    frames = case_frames(
        cases, gen.case_root, max(a.batch), rows.frame_n, int(rows.mimi.sample_rate)
    )
    res["harness"], res["forward"] = [], []
    stamp = time.strftime("%Y%m%d-%H%M%S")
    print(
        f"{'/'.join(str(n) for n in per_b.values())} cases at B={','.join(map(str, a.batch))} ({a.size} set, "
        f"take-turn timeout {a.turn_timeout_s:g} s, KV cache {rows.kv_capacity} steps), {res['env']['model']}, "
        f"{a.device} ({res['env']['device']}), torch {torch.__version__}, {torch.get_num_threads()} thread(s)",
        flush=True,
    )
    for b in a.batch:
        # the forward between the harness's steps (the ratio's), and alone just before and after
        before = bare_forward(rows, b, frames, a.forward_steps, a.warmup_steps)
        skip = "--no-probe" if a.no_probe else probe_skip(before, res["weights_bytes"])
        with ForwardProbe(rows, b, frames, a.probe_every_s, skip) as probe:
            h = harness(a, b, res["cases"][: per_b[b]], common, stamp, probe)
        after = bare_forward(rows, b, frames, a.forward_steps, a.warmup_steps)
        f = {**probe.result(), "before": before, "after": after}
        if probe.skip:  # then the mean of the forward alone before and after the harness
            f.update(
                speed=(before["speed"] + after["speed"]) / 2,
                step_ms=(before["step_ms"] + after["step_ms"]) / 2,
            )
        line = (
            f"harness B={b}: {h['speed']:.2f} session-s per wall-s ({h['session_s']:.1f} session-s of "
            f"{h['cases']} cases in {h['wall_s'] - h['load_s'] - h['probe_s']:.1f} s after a {h['load_s']:.1f} s "
            f"load, less {h['probe_s']:.1f} s of interleaved forward; "
            f"{h['steps']} steps of {h['step_ms']:.1f} ms, {h['rows_busy']:.2f} rows busy on average, "
            f"{100 * h['in_model_step']:.1f}% of the time in the model step)"
        )
        if h["invalid"] or h["failed"]:
            line += f"; {h['invalid']} session(s) invalid, {h['failed']} failed"
        if cuda:
            h["gpu_mem_per_row_bytes"] = (h["gpu_peak_bytes"] - res["weights_bytes"]) / b
            line += (
                f", GPU {h['gpu_peak_bytes'] / 2**30:.2f} GiB "
                f"({h['gpu_mem_per_row_bytes'] / 2**30:.3f} GiB per row)"
            )
        res["harness"].append(h)
        res["forward"].append(f)
        print(line, flush=True)
        how = (
            f"the mean of the forward alone, not interleaved: {probe.skip}"
            if probe.skip
            else f"{f['steps']} steps timed between the harness's"
        )
        print(
            f"forward B={b}: {f['speed']:.2f} session-s per wall-s ({f['step_ms']:.1f} ms per step, {how}; alone "
            f"{before['speed']:.2f} before the harness, {after['speed']:.2f} after, {before['steps']} steps each)",
            flush=True,
        )
    if cuda:
        full = full_set_session_s(a.full_cases, out)
        res["full_set"] = full
        print(
            f"full Instruct-FD set: {full['cases']} sessions, {full['session_s_expected'] / 3600:.2f} h expected "
            f"session time ({full['source']}); GPU-minutes on one GPU = that / harness speed / 60:",
            flush=True,
        )
        for h in res["harness"]:
            h["full_set_gpu_min"] = full["session_s_expected"] / h["speed"] / 60
            print(
                f"  B={h['batch']}: {h['full_set_gpu_min']:.1f} GPU-min; GPU memory per row "
                f"{h['gpu_mem_per_row_bytes'] / 2**30:.3f} GiB "
                f"(the run's peak less {res['weights_bytes'] / 2**30:.2f} GiB "
                "of weights, over B)",
                flush=True,
            )
    ref = 8 if 8 in a.batch else max(a.batch)
    h8 = next(h for h in res["harness"] if h["batch"] == ref)
    f8 = next(f for f in res["forward"] if f["batch"] == ref)
    res["harness_over_forward"] = {"batch": ref, "ratio": h8["speed"] / f8["speed"]}
    print(f"harness/forward at B={ref}: {h8['speed'] / f8['speed']:.2f}", flush=True)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument(
        "--batch",
        type=lambda s: [int(x) for x in s.split(",")],
        default=None,
        help="batch sizes (default 1,8 on a CPU, 1,8,32,64 on CUDA)",
    )
    p.add_argument(
        "--moshiko-shapes",
        action="store_true",
        help="a random model with moshiko's shapes (for a GPU)",
    )
    p.add_argument(
        "--moshiko-layers",
        type=int,
        default=None,
        help="with --moshiko-shapes: this many layers instead of moshiko's (a check of the path, not a figure)",
    )
    p.add_argument(
        "--device", default=None, help="cpu | cuda (default: cuda with --moshiko-shapes, else cpu)"
    )
    p.add_argument("--dtype", default="bfloat16")
    p.add_argument("--threads", type=int, default=1, help="torch threads")
    p.add_argument(
        "--size",
        default="sample",
        help="Instruct-FD size the cases come from (default sample: 134 "
        "cases, enough to fill B=64 twice)",
    )
    p.add_argument(
        "--cases",
        type=int,
        default=None,
        help="the same first N cases at every B (default: CPU 4 x the largest B, CUDA 2 x B at each B)",
    )
    p.add_argument("--turn-timeout-s", type=float, default=4.0)
    p.add_argument(
        "--max-session-s",
        type=float,
        default=120.0,
        help="orchestrator.max_session_s, which also sizes each row's KV cache (model.kv_cache_s)",
    )
    p.add_argument(
        "--forward-steps", type=int, default=150, help="steps of the forward alone before and after"
    )
    p.add_argument(
        "--probe-every-s",
        type=float,
        default=0.5,
        help="seconds between two timings of the forward inside the harness's run",
    )
    p.add_argument(
        "--no-probe",
        action="store_true",
        help="time the forward only alone before and after the harness (the ratio uses their mean)",
    )
    p.add_argument("--warmup-steps", type=int, default=3)
    p.add_argument(
        "--full-cases",
        type=Path,
        default=None,
        help="a generated full Instruct-FD set (for the projection)",
    )
    p.add_argument("--out", type=Path, default=REPO / ".cache" / "moshi_lockstep_speed")
    p.add_argument(
        "--json", type=Path, default=None, help="where the figures go (default OUT/speed.json)"
    )
    p.add_argument(
        "--timeout-s", type=float, default=1800.0, help="stop (exit 124) after this long"
    )
    a = p.parse_args(argv)
    if not have_moshi():
        return hand_over(argv)
    a.device = a.device or ("cuda" if a.moshiko_shapes else "cpu")
    a.batch = a.batch or ([1, 8, 32, 64] if a.device.startswith("cuda") else [1, 8])
    a.json = a.json or a.out / "speed.json"
    res: dict[str, Any] = {
        "args": {k: str(v) if isinstance(v, Path) else v for k, v in vars(a).items()}
    }

    def on_alarm(*_: Any) -> None:
        raise Timeout()

    signal.signal(signal.SIGALRM, on_alarm)
    signal.setitimer(signal.ITIMER_REAL, a.timeout_s)
    t0, rc = time.perf_counter(), 0
    try:
        measure(a, res)
    except Timeout:
        res["timed_out"] = True
        print(
            f"moshi_lockstep_speed: timed out after {a.timeout_s:g} s (--timeout-s); partial figures in {a.json}",
            file=sys.stderr,
        )
        rc = 124
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        res["total_s"] = time.perf_counter() - t0
        a.json.parent.mkdir(parents=True, exist_ok=True)
        a.json.write_text(json.dumps(res, indent=1))
    return rc


if __name__ == "__main__":
    sys.exit(main())
