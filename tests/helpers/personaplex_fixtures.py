"""Fixtures for the tests that run NVIDIA's real PersonaPlex server (registered once for the whole
suite by tests/conftest.py).

`personaplex_python`: the interpreter named by FDEVAL_PERSONAPLEX_PYTHON, which must have NVIDIA's
fork of moshi (`moshi-personaplex`, not on PyPI), or a skip saying how to get one.
`tiny_personaplex`: a tiny random PersonaPlex checkpoint (`fdeval/models/personaplex_tiny.py`,
built with the kyutai moshi venv, so it builds where PersonaPlex is not installed; a test that uses
it uses the `moshi_python` fixture as well), as a dict of
paths: dir, config, arch, moshi_weight, mimi_weight, tokenizer, voice_prompt_dir, voice_wav, ...
`tiny_personaplex_pt`: the same dict once the fork has written its `.pt` voice prompt from the
WAV (`voice_pt`: its file name in voice_prompt_dir); needs `personaplex_python`.
`personaplex_server_tokens(python, tiny, frames, text_prompt, voice_prompt, tmp_path)`: one
session with the real server on CPU, greedy, with its tokens.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import subprocess
import time
from pathlib import Path
from urllib.parse import urlencode

import numpy as np
import pytest

MODELS = Path(__file__).resolve().parents[2] / "fdeval" / "models"
LAUNCHER = MODELS / "personaplex_launch.py"
BUILDER = MODELS / "personaplex_tiny.py"
FRAME = 1920
GREEDY = {"temp": 0, "temp_text": 0}

NO_FORK = (
    "NVIDIA's PersonaPlex fork of moshi (pip name moshi-personaplex, imported as `moshi`) is not on PyPI, "
    "so the real-server tests need a venv you built from a checkout of github.com/NVIDIA/personaplex "
    "(pip install --no-deps <checkout>/moshi, its runtime dependencies as docs/models.md lists them, "
    "pyloudnorm included, and torch==2.13.0); "
    "point FDEVAL_PERSONAPLEX_PYTHON at that venv's bin/python"
)


@pytest.fixture(scope="session")
def personaplex_python() -> Path:
    value = os.environ.get("FDEVAL_PERSONAPLEX_PYTHON")
    if not value:
        pytest.skip(f"FDEVAL_PERSONAPLEX_PYTHON is not set. {NO_FORK}")
    check = (
        "import os, moshi; from moshi.models.lm import LMGen; print(os.path.dirname(moshi.__file__)); "
        "raise SystemExit(0 if hasattr(LMGen, 'step_system_prompts') else 3)"
    )
    try:
        proc = subprocess.run([value, "-c", check], capture_output=True, text=True, timeout=120)
    except (OSError, subprocess.SubprocessError) as e:
        pytest.skip(f"FDEVAL_PERSONAPLEX_PYTHON={value} cannot run: {e}. {NO_FORK}")
    if proc.returncode == 3:
        pytest.skip(
            f"FDEVAL_PERSONAPLEX_PYTHON={value}: its moshi ({proc.stdout.strip()}) is not NVIDIA's fork "
            f"(no LMGen.step_system_prompts). {NO_FORK}"
        )
    if proc.returncode != 0:
        last = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        pytest.skip(f"FDEVAL_PERSONAPLEX_PYTHON={value} cannot import moshi ({last}). {NO_FORK}")
    return Path(value)


def _build(python: Path, out: Path, *args: str) -> dict:
    proc = subprocess.run(
        [str(python), str(BUILDER), str(out), *args], capture_output=True, text=True, timeout=600
    )
    if proc.returncode != 0:
        raise RuntimeError(
            f"{BUILDER.name} {' '.join(args)} failed:\n{proc.stdout[-2000:]}\n{proc.stderr[-3000:]}"
        )
    return json.loads((out / "tiny.json").read_text())


@pytest.fixture(scope="session")
def tiny_personaplex(moshi_python, tmp_path_factory) -> dict:
    out = tmp_path_factory.mktemp("tiny-personaplex")
    try:
        return _build(moshi_python, out)
    except RuntimeError as e:
        pytest.skip(f"the tiny PersonaPlex cannot be built: {str(e)[:300]}")


@pytest.fixture(scope="session")
def tiny_personaplex_pt(personaplex_python, tiny_personaplex) -> dict:
    info = json.loads((Path(tiny_personaplex["dir"]) / "tiny.json").read_text())
    if info.get("voice_pt"):
        return info
    return _build(personaplex_python, Path(tiny_personaplex["dir"]), "--voice-embeddings")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_listening(proc: subprocess.Popen, port: int, log: Path, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(
                f"the PersonaPlex server exited ({proc.returncode}):\n{log.read_text()[-4000:]}"
            )
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1.0):
                return
        except OSError:
            time.sleep(0.3)
    raise RuntimeError(
        f"the PersonaPlex server did not listen within {timeout_s:g} s:\n{log.read_text()[-4000:]}"
    )


def _rows(path: Path) -> list[dict]:
    return [json.loads(x) for x in path.read_text().splitlines()] if path.exists() else []


async def _session(
    port: int,
    frames: np.ndarray,
    text_prompt: str,
    voice_prompt: str,
    token_log: Path,
    timeout_s: float,
) -> list[str]:
    """Stream `frames` through one session (after the 0x00 handshake) and keep the connection until
    the server has stepped every frame it decoded; the 0x02 text pieces it sent."""
    import aiohttp

    from fdeval.models.kindbyte import OpusCodec

    url = f"ws://127.0.0.1:{port}/api/chat?" + urlencode(
        {"text_prompt": text_prompt, "voice_prompt": voice_prompt}
    )
    pieces: list[str] = []
    async with aiohttp.ClientSession() as http:
        async with http.ws_connect(url, max_msg_size=0) as ws:
            msg = await ws.receive(timeout=timeout_s)  # the prompts run before the handshake
            if msg.type != aiohttp.WSMsgType.BINARY or msg.data[:1] != b"\x00":
                raise RuntimeError(
                    f"no 0x00 handshake from the PersonaPlex server: {msg.type.name} {msg.data!r}"[
                        :300
                    ]
                )

            async def read() -> None:
                async for m in ws:
                    if m.type == aiohttp.WSMsgType.BINARY and m.data[:1] == b"\x02":
                        pieces.append(m.data[1:].decode("utf-8", "replace"))

            reader = asyncio.create_task(read())
            codec = OpusCodec(24000)
            for frame in frames:
                data = codec.encode(np.asarray(frame, np.float32))
                if data:
                    await ws.send_bytes(b"\x01" + data)
                await asyncio.sleep(0.005)
            deadline, seen, still = time.monotonic() + timeout_s, -1, 0
            while time.monotonic() < deadline:  # until the conversation steps stop growing
                await asyncio.sleep(0.5)
                n = sum(1 for r in _rows(token_log) if r["phase"] == "conversation")
                still = still + 1 if n == seen and n > 0 else 0
                seen = n
                if still >= 4:
                    break
            await ws.close()
            reader.cancel()
    return pieces


def personaplex_server_tokens(
    python: Path,
    tiny: dict,
    frames: np.ndarray,
    text_prompt: str,
    voice_prompt: str,
    tmp_path: Path,
    timeout_s: float = 300.0,
) -> dict:
    """One session with NVIDIA's real server (`personaplex_launch.py`) on 127.0.0.1, CPU, greedy
    decoding, the tiny architecture: the (n, 1920) float32 24 kHz `frames` are streamed as Ogg/Opus
    after the handshake; `voice_prompt` is a file name in tiny["voice_prompt_dir"].

    Returns {"conversation": [[text, 16 audio tokens] per step, in order] (one row per frame the
    server decoded), "prompt": [{"part", "call", "offset", "tokens"} per prompt step, in order]
    (voice, silence_after_voice, text, silence_after_text; tokens null while held back),
    "server_input": (n, 1920) float32, the PCM frames the server's Mimi encoded (logged by the
    launcher), "pieces": the 0x02 text pieces the client received, "session": the server's session
    number, "log": the server's log file}."""
    tmp_path = Path(tmp_path)
    tmp_path.mkdir(parents=True, exist_ok=True)
    token_log, input_log, log = (
        tmp_path / "personaplex-tokens.jsonl",
        tmp_path / "personaplex-input",
        tmp_path / "personaplex-server.log",
    )
    for p in (token_log, log, *input_log.glob("session-*.f32")):
        p.unlink(missing_ok=True)
    port = _free_port()
    env = {
        **os.environ,
        "OMP_NUM_THREADS": "1",
        "HF_HUB_OFFLINE": "1",
        "FDEVAL_PERSONAPLEX_ARCH": tiny["arch"],
        "FDEVAL_PERSONAPLEX_LM_GEN": json.dumps(GREEDY),
        "FDEVAL_PERSONAPLEX_TOKEN_LOG": str(token_log),
        "FDEVAL_PERSONAPLEX_INPUT_LOG": str(input_log),
    }
    cmd = [
        str(python),
        str(LAUNCHER),
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--static",
        "none",
        "--voice-prompt-dir",
        tiny["voice_prompt_dir"],
        "--moshi-weight",
        tiny["moshi_weight"],
        "--mimi-weight",
        tiny["mimi_weight"],
        "--tokenizer",
        tiny["tokenizer"],
        "--device",
        "cpu",
    ]
    with open(log, "w") as out:
        proc = subprocess.Popen(
            cmd, stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True
        )
    try:
        _wait_listening(proc, port, log, timeout_s)
        pieces = asyncio.run(
            _session(port, frames, text_prompt, voice_prompt, token_log, timeout_s)
        )
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
    rows = _rows(token_log)
    session = max(r["session"] for r in rows)
    mine = [r for r in rows if r["session"] == session]
    pcm_file = input_log / f"session-{session}.f32"
    pcm = np.fromfile(pcm_file, "<f4") if pcm_file.exists() else np.zeros(0, np.float32)
    return {
        "conversation": [r["tokens"] for r in mine if r["phase"] == "conversation"],
        "prompt": [
            {k: r[k] for k in ("part", "call", "offset", "tokens")}
            for r in mine
            if r["phase"] == "prompt"
        ],
        "server_input": pcm.reshape(-1, FRAME),
        "pieces": pieces,
        "session": session,
        "log": str(log),
    }
