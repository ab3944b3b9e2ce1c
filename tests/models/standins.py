"""One stand-in per model config in fdeval/conf/model/, for the contract suite (test_contract.py).

Each entry builds the model from its own YAML (as the run does) and points it at something that
speaks its API here: the local stand-in servers of tests/models (written from each upstream
protocol with a scripted model, not the real models), started by the adapter's own `ServerPool`
as a real process where the adapter has one; Gemini's against a TLS stand-in in a thread; the
reference agent as it is; the real `moshi.server` and the in-process batched Moshi on a tiny
random checkpoint where the moshi venv can be built. A config without an entry here fails the
suite: a new adapter needs a stand-in.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import os
import ssl
import sys
import threading
from pathlib import Path
from typing import Callable, Iterator

import numpy as np
from contract_checks import Target
from omegaconf import OmegaConf
from fake_servers_common import Reply, make_reply, model_from_yaml, read_records, self_signed_cert, server_ssl

from fdeval.audio.resample import resample
from fdeval.models.network import NetworkModel

HERE = Path(__file__).resolve().parent
CONF = HERE.parents[1] / "fdeval" / "conf" / "model"
ADAPTERS = sorted(p.stem for p in CONF.glob("*.yaml"))
REPLY = "Sure. Start with short easy runs, three times a week."  # what standin_server.py answers
QUESTION = "How do I start running?"
GEMINI_KEY = "test-key-0123456789"


def user_audio(tts, rate: int) -> np.ndarray:
    """A question, then 3 s of silence, at `rate`."""
    q = tts.synthesize(QUESTION)
    x = resample(q.samples, q.sample_rate, rate).astype(np.float32)
    return np.concatenate([np.zeros(int(0.2 * rate), np.float32), x, np.zeros(3 * rate, np.float32)])


def reply_due(reply: Reply) -> Callable[[list[str]], list[float]]:
    """Where each text piece's first word starts in the reply (the stand-in's only audio)."""
    words = [t for _, t in reply.words]

    def due(texts: list[str]) -> list[float]:
        out, k = [], 0
        for text in texts:
            out.append(words[min(k, len(words) - 1)])
            k += len(text.split())
        return out

    return due


def frame_due(texts: list[str]) -> list[float]:
    """The Moshi-protocol stand-ins send the text ` p<n>` (` w<n>`) with the echo of input frame n."""
    return [(int(t.strip()[1:]) - 1) * 0.08 for t in texts]


def pool_held(model: NetworkModel) -> Callable[[], int]:
    return lambda: sum(inst.busy for inst in model.pool.instances)


def pooled(command: list[str], tmp: Path, **kw) -> dict:
    """A `server:` block that starts `command` (with {python}, {host}, {port}) as one CPU instance."""
    return {"python": sys.executable, "command": command, "log_dir": str(tmp / "servers"), "startup_timeout_s": 60,
            "instances_per_gpu": 1, **kw}


def heard_rows(record: Path, key: str | None = None) -> Callable[[], list]:
    """The sessions a stand-in process recorded (health checks, which hear nothing, left out)."""
    def rows() -> list:
        out = [r[key] if key else r for r in read_records(record)]
        return [r for r in out if r["samples"] > 0]

    return rows


@contextlib.contextmanager
def one_cpu_instance() -> Iterator[None]:
    """The pools start one instance on the CPU, whatever GPUs this machine has."""
    old = os.environ.get("CUDA_VISIBLE_DEVICES")
    os.environ["CUDA_VISIBLE_DEVICES"] = ""
    try:
        yield
    finally:
        if old is None:
            os.environ.pop("CUDA_VISIBLE_DEVICES", None)
        else:
            os.environ["CUDA_VISIBLE_DEVICES"] = old


def started(model: NetworkModel) -> NetworkModel:
    """The pool's size fixed now (one CPU instance), before any session starts it."""
    with one_cpu_instance():
        assert model.pool is not None and model.pool.size == 1
    return model


# -- the stand-ins: each yields a Target, then closes the model (twice: that must be safe) -----
@contextlib.contextmanager
def reference(tts, tmp: Path, request) -> Iterator[Target]:
    m = model_from_yaml("reference")
    yield Target(m, user_audio(tts, m.sample_rate), has_text=True, quiet_s=0.0)


@contextlib.contextmanager
def moshi(tts, tmp: Path, request) -> Iterator[Target]:
    record = tmp / "moshi.jsonl"
    m = started(model_from_yaml("moshi", hf_repo=None, device="cpu", server=pooled(
        ["{python}", str(HERE / "test_moshi_adapter.py"), "--port", "{port}", "--busy-s", "0", "--record", str(record)],
        tmp)))
    yield Target(m, user_audio(tts, m.sample_rate), has_text=True, due=frame_due,
                 heard=heard_rows(record, "heard"), held=pool_held(m))


@contextlib.contextmanager
def moshi_tiny_server(tts, tmp: Path, request) -> Iterator[Target]:
    """The official moshi.server on a tiny random checkpoint (greedy, so that it is deterministic)."""
    py, tiny = request.getfixturevalue("moshi_python"), request.getfixturevalue("tiny_moshi")
    command = list(OmegaConf.load(CONF / "moshi.yaml").server.command)  # the launcher, as configured
    tokens = tmp / "tokens.jsonl"  # the server's LMGen.step outputs: what the model made of what it heard
    m = started(model_from_yaml(
        "moshi", hf_repo=None, config_path=tiny["config"], moshi_weight=tiny["moshi_weight"],
        mimi_weight=tiny["mimi_weight"], tokenizer=tiny["tokenizer"], device="cpu", temp=0, temp_text=0,
        token_log=str(tokens),
        server=pooled(command, tmp, python=str(py), env={"OMP_NUM_THREADS": "1"}, startup_timeout_s=240)))

    def sessions() -> list:  # one list of step outputs per stream; the first is the server's warm-up
        out: list = []
        for row in read_records(tokens):
            if row["offset"] == 1:
                out.append([])
            if out:
                out[-1].append(row["tokens"])
        return [{"steps": len(x), "sha256": hashlib.sha256(json.dumps(x).encode()).hexdigest()} for x in out[1:]]

    yield Target(m, user_audio(tts, m.sample_rate), has_text=True, held=pool_held(m), quiet_s=2.0, max_wait_s=120,
                 heard=sessions,
                 text_check="random weights: no known word times (the stand-in of model=moshi checks the rule)")


@contextlib.contextmanager
def personaplex(tts, tmp: Path, request) -> Iterator[Target]:
    record, voices = tmp / "personaplex.jsonl", tmp / "voices"
    voices.mkdir(exist_ok=True)
    (voices / "NATF0.pt").write_bytes(b"embedding")
    m = started(model_from_yaml("personaplex", hf_repo=None, device="cpu", voice_prompt_dir=str(voices), server=pooled(
        ["{python}", str(HERE / "test_personaplex.py"), "--port", "{port}", "--prompt-s", "0.1", "--record", str(record)],
        tmp)))
    yield Target(m, user_audio(tts, m.sample_rate), has_text=True, due=frame_due,
                 heard=heard_rows(record, "heard"), held=pool_held(m))


def _standin_process(name: str, tts, tmp: Path, **overrides) -> tuple[NetworkModel, Path]:
    record = tmp / f"{name}.jsonl"
    m = started(model_from_yaml(name, port=None, server=pooled(
        ["{python}", str(HERE / "standin_server.py"), name, "--host", "{host}", "--port", "{port}",
         "--record", str(record)], tmp), **overrides))
    return m, record


@contextlib.contextmanager
def minicpmo(tts, tmp: Path, request) -> Iterator[Target]:
    m, record = _standin_process("minicpmo", tts, tmp)
    yield Target(m, user_audio(tts, m.sample_rate), has_text=True, due=reply_due(make_reply(REPLY)),
                 heard=heard_rows(record), held=pool_held(m))


@contextlib.contextmanager
def freezeomni(tts, tmp: Path, request) -> Iterator[Target]:
    m, record = _standin_process("freezeomni", tts, tmp)
    yield Target(m, user_audio(tts, m.sample_rate), has_text=False, heard=heard_rows(record), held=pool_held(m))


@contextlib.contextmanager
def funaudiochat(tts, tmp: Path, request) -> Iterator[Target]:
    # start_settle_s=0: the adapter's only wall-clock rule (hold the audio after START) off, so
    # that what it sends depends on the audio alone
    m, record = _standin_process("funaudiochat", tts, tmp, pause_after_silence_s=0.6, start_settle_s=0.0)
    yield Target(m, user_audio(tts, m.sample_rate), has_text=True, due=reply_due(make_reply(REPLY)),
                 heard=heard_rows(record), held=pool_held(m), quiet_s=0.8)


class _ThreadServer:
    """An aiohttp app served on 127.0.0.1 from a thread with its own event loop, so that the
    client's loop holds only the client's tasks."""

    def __init__(self, app, port: int, ssl_context: ssl.SSLContext | None):
        from fake_servers_common import start_app

        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self.runner = asyncio.run_coroutine_threadsafe(start_app(app, port, ssl_context), self.loop).result(30)

    def close(self) -> None:
        asyncio.run_coroutine_threadsafe(self.runner.cleanup(), self.loop).result(30)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)
        self.loop.close()


@contextlib.contextmanager
def gemini(tts, tmp: Path, request) -> Iterator[Target]:
    from fake_servers_common import free_port
    from fake_servers_gemini import FakeGeminiLive

    monkeypatch = request.getfixturevalue("monkeypatch_module")
    monkeypatch.delenv("GOOGLE_API_KEY", raising=False)
    monkeypatch.setenv("GEMINI_API_KEY", GEMINI_KEY)
    cert, key = self_signed_cert(tmp)
    fake, port = FakeGeminiLive([make_reply(REPLY)]), free_port()
    server = _ThreadServer(fake.app(), port, server_ssl(cert, key))
    try:
        m = model_from_yaml("gemini", http_options={
            "base_url": f"https://127.0.0.1:{port}",
            "async_client_args": {"ssl": ssl.create_default_context(cafile=str(cert))}})
        yield Target(m, user_audio(tts, m.sample_rate), has_text=True, due=reply_due(make_reply(REPLY)),
                     heard=lambda: [h for h in fake.heard if h["samples"] > 0])
    finally:
        server.close()


STAND_INS: dict[str, Callable] = {
    "reference": reference, "moshi": moshi, "personaplex": personaplex, "minicpmo": minicpmo,
    "freezeomni": freezeomni, "funaudiochat": funaudiochat, "gemini": gemini,
    # in-process in the moshi venv: test_contract.py runs its checks there (contract_runner.py)
    "moshi_lockstep": None, "personaplex_lockstep": None,
}
EXTRA = {"moshi:tiny-server": moshi_tiny_server}  # the real server too, where the moshi venv exists
