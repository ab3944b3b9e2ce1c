"""What the stand-ins share: the user audio they are sent, and local servers run by the adapter's
own `ServerPool` as one CPU instance."""

from __future__ import annotations

import asyncio
import contextlib
import os
import ssl
import sys
import threading
from pathlib import Path
from typing import Callable, Iterator

import numpy as np
from fake_servers_common import Reply, model_from_yaml, read_records, start_app

from fdeval.audio.resample import resample
from fdeval.models.network import NetworkModel

MODELS = Path(__file__).resolve().parents[1]  # tests/models: the stand-in servers' scripts
CONF = MODELS.parents[1] / "fdeval" / "conf" / "model"
REPLY = "Sure. Start with short easy runs, three times a week."  # what standin_server.py answers
QUESTION = "How do I start running?"


def user_audio(tts, rate: int) -> np.ndarray:
    """A question, then 3 s of silence, at `rate`."""
    q = tts.synthesize(QUESTION)
    x = resample(q.samples, q.sample_rate, rate).astype(np.float32)
    return np.concatenate(
        [np.zeros(int(0.2 * rate), np.float32), x, np.zeros(3 * rate, np.float32)]
    )


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
    return {
        "python": sys.executable,
        "command": command,
        "log_dir": str(tmp / "servers"),
        "startup_timeout_s": 60,
        "instances_per_gpu": 1,
        **kw,
    }


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


def standin_process(name: str, tmp: Path, **overrides) -> tuple[NetworkModel, Path]:
    """model=<name> on `standin_server.py <name>` (a process its pool starts), and where that
    server records what it heard."""
    record = tmp / f"{name}.jsonl"
    m = started(
        model_from_yaml(
            name,
            port=None,
            server=pooled(
                [
                    "{python}",
                    str(MODELS / "standin_server.py"),
                    name,
                    "--host",
                    "{host}",
                    "--port",
                    "{port}",
                    "--record",
                    str(record),
                ],
                tmp,
            ),
            **overrides,
        )
    )
    return m, record


class ThreadServer:
    """An aiohttp app served on 127.0.0.1 from a thread with its own event loop, so that the
    client's loop holds only the client's tasks."""

    def __init__(self, app, port: int, ssl_context: ssl.SSLContext | None = None):
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self.runner = asyncio.run_coroutine_threadsafe(
            start_app(app, port, ssl_context), self.loop
        ).result(30)

    def close(self) -> None:
        asyncio.run_coroutine_threadsafe(self.runner.cleanup(), self.loop).result(30)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)
        self.loop.close()
