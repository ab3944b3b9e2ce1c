"""Fixtures shared by the Moshi tests (registered once for the whole suite by tests/conftest.py).

`moshi_python`: the moshi venv's interpreter (built once, cached at .cache/moshi-venv or
FDEVAL_MOSHI_VENV, with fdeval installed --no-deps), or a skip with the reason.
`tiny_moshi`: a tiny random Moshi checkpoint built inside that venv (paths as a dict).
`last_session_record`: what such a server wrote about its last streaming session;
`stream_tone`: a client side that streams a tone at wall time through an open session.
"""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def moshi_python() -> Path:
    from fdeval.models.moshi_env import MoshiEnvError, ensure_moshi_venv

    try:
        return ensure_moshi_venv(with_fdeval=True)
    except (MoshiEnvError, OSError, subprocess.SubprocessError) as e:
        pytest.skip(f"the moshi venv cannot be built here: {str(e)[:300]}")


@pytest.fixture(scope="session")
def tiny_moshi(moshi_python, tmp_path_factory) -> dict:
    from fdeval.models.moshi_env import MoshiEnvError, build_tiny

    try:
        return build_tiny(moshi_python, tmp_path_factory.mktemp("tiny-moshi"))
    except MoshiEnvError as e:
        pytest.skip(f"the tiny Moshi cannot be built: {str(e)[:300]}")


def last_session_record(path: Path, timeout_s: float = 10.0) -> dict:
    """The last JSON line with frames > 0 (the server writes it once the client has closed)."""
    deadline = time.monotonic() + timeout_s
    while True:
        rows = [json.loads(x) for x in path.read_text().splitlines()] if path.exists() else []
        rows = [r for r in rows if r.get("frames", 0) > 0]
        if rows or time.monotonic() > deadline:
            assert rows, f"no streaming session recorded in {path}"
            return rows[-1]
        time.sleep(0.05)


async def stream_tone(session, n_frames: int, tail_s: float = 0.4) -> list:
    """Send `n_frames` 80 ms frames of a tone paced at wall time; the event batches received."""
    import asyncio

    import numpy as np

    batches = []
    t0 = time.monotonic()
    for k in range(n_frames):
        await asyncio.sleep(max(0.0, t0 + k * 0.08 - time.monotonic()))
        await session.send(0.1 * np.sin(np.arange(1920) / 6).astype(np.float32))
        batches.append(await session.receive())
    await asyncio.sleep(tail_s)
    batches.append(await session.receive())
    return batches


def run_stage(python: Path, tmp_path: Path, model: str, cases: list[str], *overrides: str):
    """`python -m fdeval.launch model=MODEL stage.steps=[generate,run]` in the moshi venv on the CPU
    with a batch of 2 and 4 s take-turn timeouts: the finished process and its session logs."""
    cmd = [
        str(python),
        "-m",
        "fdeval.launch",
        f"out_root={tmp_path / 'outputs'}",
        "progress=false",
        f"model={model}",
        "model.batch_size=2",
        "model.device=cpu",
        "model.torch_threads=1",
        "model.hf_repo=null",
        *overrides,
        "benchmark.timeout_s=4",
        "stage.steps=[generate,run]",
        f"benchmark.cases=[{','.join(cases)}]",
    ]
    proc = subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-5000:]
    assert [x for x in proc.stdout.splitlines() if "session-seconds per wall-second" in x], (
        proc.stdout[-2000:]
    )
    return proc, sorted((tmp_path / "outputs" / "instructfd" / model).rglob("sessions/*.h5"))
