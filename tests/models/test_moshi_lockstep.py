"""Batched lockstep Moshi (in-process LMGen + Mimi) against the official server, on a tiny random Moshi.

- Greedy token equality: with temperature 0, the server path (moshi.server, tokens logged by the
  launcher) and the lockstep path (tokens logged per session) give the same text and audio tokens
  for the same input; the lockstep side runs it in a batch of 2 rows, next to another session, and
  once more in a row that an earlier session used (per-row reset).
- The run stage drives B lockstep sessions at once (`python -m fdeval.launch model=moshi_lockstep`
  inside the moshi venv).

This file is also the script the moshi venv runs for the lockstep side (`__main__`).
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

if __name__ != "__main__":  # (the moshi venv runs this file as a script, without pytest)
    import pytest
    from helpers.moshi_fixtures import run_stage

    pytestmark = [pytest.mark.server, pytest.mark.slow]

N_FRAMES = 60
FRAME = 1920


def lockstep_tokens(tiny: dict, frames_path: str, out_path: str) -> None:
    """(moshi venv) The lockstep path's tokens for the input, three ways, as JSON."""
    from fdeval.models.moshi_lockstep import MoshiLockstep

    frames = np.load(frames_path)
    noise = np.random.RandomState(0).randn(*frames.shape).astype(np.float32) * 0.05

    def make(batch, kv_cache_s=None):
        return MoshiLockstep(
            batch_size=batch,
            hf_repo=None,
            config_path=tiny["config"],
            moshi_weight=tiny["moshi_weight"],
            mimi_weight=tiny["mimi_weight"],
            tokenizer=tiny["tokenizer"],
            device="cpu",
            dtype="bfloat16",
            temp=0,
            temp_text=0,
            torch_threads=1,
            log_tokens=True,
            kv_cache_s=kv_cache_s,
        )

    async def session(model, x, n):
        async with model.session(None, 0) as s:
            for f in x[:n]:
                await s.send(f)
                await s.receive()
            return s.token_log

    async def alone():
        return await session(make(1), frames, len(frames))

    async def batched():
        model = make(
            2, kv_cache_s=6.0
        )  # KV ring buffers of 6 s of steps (83), not the 3000 of the context

        async def other_then_same():
            # row 1: a shorter session on other input, then the test input in the freed row
            t = await session(model, noise, 17)
            return t, await session(model, frames, len(frames))

        a, (b, c) = await asyncio.gather(session(model, frames, len(frames)), other_then_same())
        return a, b, c, model.pool.steps, model.pool.row_steps, model.pool.rows.kv_capacity

    b1 = asyncio.run(alone())
    a, b, c, steps, rows, kv = asyncio.run(batched())
    Path(out_path).write_text(
        json.dumps(
            {
                "b1": b1,
                "b2_row0": a,
                "b2_other": b,
                "b2_reused_row": c,
                "steps": steps,
                "rows": rows,
                "kv_capacity": kv,
            }
        )
    )


def server_tokens(tiny: dict, py: Path, frames: np.ndarray, tmp: Path) -> list:
    """The server path: the adapter streams the frames to moshi.server (greedy), which logs its tokens."""
    from fdeval.models.moshi import Moshi

    log = tmp / "server-tokens.jsonl"
    model = Moshi(
        server={
            "python": str(py),
            "command": [
                "{python}",
                "{launcher}",
                "--host",
                "{host}",
                "--port",
                "{port}",
                "--static",
                "none",
            ],
            "env": {"OMP_NUM_THREADS": "1"},
            "log_dir": str(tmp / "servers"),
            "startup_timeout_s": 240,
        },
        hf_repo=None,
        config_path=tiny["config"],
        moshi_weight=tiny["moshi_weight"],
        mimi_weight=tiny["mimi_weight"],
        tokenizer=tiny["tokenizer"],
        device="cpu",
        temp=0,
        temp_text=0,
        token_log=str(log),
    )

    def session_lines():
        lines = [json.loads(x) for x in log.read_text().splitlines()] if log.exists() else []
        starts = [i for i, x in enumerate(lines) if x["offset"] == 1]
        return lines[starts[-1] :] if len(starts) >= 2 else []  # the first stream is the warmup

    async def stream():
        async with model.session(None, 0) as s:
            for f in frames:
                await s.send(f)
                await asyncio.sleep(0.01)
            deadline = (
                time.monotonic() + 600
            )  # generous: the loop ends as soon as the steps stop growing
            n = -1
            while (
                time.monotonic() < deadline
            ):  # until the server has stepped every frame it decoded
                await asyncio.sleep(1.0)
                m = len(session_lines())
                if m == n and m > 0:
                    break
                n = m

    try:
        asyncio.run(stream())
    finally:
        model.close()
    return [x["tokens"] for x in session_lines()]


def server_side_input(frames: np.ndarray) -> np.ndarray:
    """The PCM the server decodes from what the client sends (Opus both ways is deterministic)."""
    import sphn

    from fdeval.models.kindbyte import OpusCodec

    tx, rx = OpusCodec(), sphn.OpusStreamReader(24000)
    pcm = []
    for f in frames:
        data = tx.encode(f)
        if data:
            out = rx.append_bytes(data)
            pcm.append(np.asarray(out, np.float32).reshape(-1))
    x = np.concatenate(pcm)
    return x[: len(x) // FRAME * FRAME].reshape(-1, FRAME)


def test_greedy_tokens_equal_server(moshi_python, tiny_moshi, tmp_path, tts):
    from fdeval.audio.resample import resample

    syn = tts.synthesize("Can you tell me how to start running when I have never done it before?")
    x = resample(syn.samples, syn.sample_rate, 24000).astype(np.float32)
    x = np.concatenate([np.zeros(12000, np.float32), x, np.zeros(N_FRAMES * FRAME, np.float32)])[
        : N_FRAMES * FRAME
    ]
    frames = x.reshape(-1, FRAME)
    server = server_tokens(tiny_moshi, moshi_python, frames, tmp_path)
    inp = server_side_input(frames)
    np.save(tmp_path / "frames.npy", inp)
    out = tmp_path / "lockstep.json"
    proc = subprocess.run(
        [
            str(moshi_python),
            __file__,
            json.dumps(tiny_moshi),
            str(tmp_path / "frames.npy"),
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    lock = json.loads(out.read_text())
    n = min(len(server), len(inp))
    assert n >= N_FRAMES - 3, (len(server), len(inp))
    assert server[0] is None and server[1] is not None  # the first step yields nothing (delays)
    n_text = sum(1 for t in server[:n] if t is not None and t[0] not in (0, 3))
    for key in ("b1", "b2_row0", "b2_reused_row"):
        got = lock[key][:n]
        diff = [i for i in range(n) if got[i] != server[i]]
        assert not diff, (
            f"{key}: first difference at step {diff[0]}: lockstep {got[diff[0]]} vs server {server[diff[0]]}"
        )
    assert lock["steps"] < lock["rows"]  # the batch of 2 really ran rows together
    assert (
        lock["kv_capacity"] == 83
    )  # ring buffers sized from kv_cache_s, and the tokens are the same
    # the input reaches the model: the session on noise answered otherwise than the one on speech
    other = lock["b2_other"]
    assert other[2:] != lock["b1"][2 : len(other)]
    print(
        f"greedy token equality over {n} steps x 9 tokens ({n_text} text pieces): server == lockstep B=1 == "
        f"B=2 row 0 == B=2 reused row; {lock['rows']} session frames in {lock['steps']} batched steps"
    )


def test_run_stage_runs_a_batch(moshi_python, tiny_moshi, tmp_path):
    cases = ["balcony_tomatoes__continue", "fresh_pasta_stop__acknowledge"]
    _, h5s = run_stage(
        moshi_python,
        tmp_path,
        "moshi_lockstep",
        cases,
        f"model.config_path={tiny_moshi['config']}",
        *(f"model.{k}={tiny_moshi[k]}" for k in ("moshi_weight", "mimi_weight", "tokenizer")),
    )
    import h5py

    assert [p.stem for p in h5s] == sorted(cases)
    for p in h5s:
        with h5py.File(p) as f:
            assert (
                f.attrs["clock"] == "lockstep"
                and len(f["model_chunks"]) > 50
                and len(f["model_text"]) > 0
            )
            uf = f["user_frames"][()]
            assert np.all(uf["t_sent_s"] == uf["t_nominal_s"])  # lockstep: exact times
            assert json.loads(f.attrs["model"])["batch_size"] == 2


if __name__ == "__main__":
    lockstep_tokens(json.loads(sys.argv[1]), sys.argv[2], sys.argv[3])
