"""Pieces shared by the local stand-in servers of the network-model protocol tests.

The stand-ins speak each upstream protocol as read in the upstream code, with a scripted "model"
behind them, not the real model: it hears the user by signal energy, answers each finished user
utterance with a pre-synthesized espeak-ng reply (real speech, so the orchestrator's Silero VAD
sees the model talk) and its words, and treats user speech while its reply is still playing (by
the server's own reckoning) as a barge-in.
"""

from __future__ import annotations

import datetime
import hashlib
import ipaddress
import json
import socket
import ssl
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from fdeval.types import TestCase, Turn


@dataclass(frozen=True)
class Reply:
    """What the scripted model says: audio at `sample_rate` and its words with start times."""

    samples: np.ndarray
    sample_rate: int
    words: tuple[tuple[str, float], ...]

    @property
    def duration_s(self) -> float:
        return len(self.samples) / self.sample_rate

    def words_between(self, t0: float, t1: float) -> list[str]:
        return [w for w, t in self.words if t0 <= t < t1]


def make_reply(text: str, sample_rate: int = 24000) -> Reply:
    from fdeval.audio.tts import EspeakTTS

    syn = EspeakTTS(voice="en-us+f3", rate_wpm=190, sample_rate=sample_rate).synthesize(text)
    return Reply(
        syn.samples.astype(np.float32), sample_rate, tuple((w.text, w.start_s) for w in syn.words)
    )


class Heard:
    """What a stand-in server heard from the user in one session: a digest of the audio it
    decoded, in arrival order (the contract tests compare it across ways of sending the audio)."""

    def __init__(self) -> None:
        self._sha = hashlib.sha256()
        self.samples = 0

    def add(self, pcm: np.ndarray) -> None:
        pcm = np.ascontiguousarray(pcm, dtype="<f4")
        self._sha.update(pcm.tobytes())
        self.samples += len(pcm)

    def record(self) -> dict:
        return {"sha256": self._sha.hexdigest(), "samples": self.samples}


def append_record(path: str | Path | None, row: dict) -> None:
    """One JSON line per session, for a stand-in run as a process (the test reads them back)."""
    if path:
        with open(path, "a") as f:
            f.write(json.dumps(row) + "\n")


def read_records(path: Path) -> list[dict]:
    return [json.loads(x) for x in path.read_text().splitlines()] if path.exists() else []


@dataclass
class SpeechGate:
    """Energy detector on the user's audio: 'start' at the first loud sample run, 'end' after
    `end_silence_s` of quiet. Times are seconds of audio heard (the stream's own clock)."""

    sample_rate: int = 16000
    threshold: float = 0.01
    end_silence_s: float = 0.3
    block: int = 160  # 10 ms at 16 kHz
    n: int = 0
    speaking: bool = False
    quiet_n: int = 0
    _pending: np.ndarray = field(default_factory=lambda: np.zeros(0, np.float32))

    def push(self, samples: np.ndarray) -> list[tuple[str, float]]:
        x = np.concatenate([self._pending, np.asarray(samples, np.float32)])
        whole = len(x) // self.block * self.block
        self._pending = x[whole:]
        out = []
        for i in range(0, whole, self.block):
            loud = float(np.sqrt(np.mean(x[i : i + self.block] ** 2))) > self.threshold
            t = (self.n + i) / self.sample_rate
            if loud and not self.speaking:
                self.speaking, self.quiet_n = True, 0
                out.append(("start", t))
            elif self.speaking:
                self.quiet_n = 0 if loud else self.quiet_n + self.block
                if self.quiet_n >= self.end_silence_s * self.sample_rate:
                    self.speaking = False
                    out.append(("end", t))
        self.n += whole
        return out


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def self_signed_cert(directory: Path) -> tuple[Path, Path]:
    """A throwaway certificate for 127.0.0.1 / localhost (cert.pem, key.pem) in `directory`."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(
            x509.SubjectAlternativeName(
                [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
            ),
            False,
        )
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), True)
        .sign(key, hashes.SHA256())
    )
    cert_file, key_file = directory / "cert.pem", directory / "key.pem"
    cert_file.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_file.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return cert_file, key_file


def server_ssl(cert_file: Path, key_file: Path) -> ssl.SSLContext:
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(cert_file, key_file)
    return ctx


async def start_app(app, port: int, ssl_context: ssl.SSLContext | None = None):
    """Serve an aiohttp app on 127.0.0.1:`port`; returns the runner (await runner.cleanup())."""
    from aiohttp import web

    runner = web.AppRunner(app)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", port, ssl_context=ssl_context).start()
    return runner


def question_and_barge_in(
    tts, case_id: str, barge_in_after_s: float = 1.0, last_timeout_s: float = 3.0
) -> tuple[TestCase, list[np.ndarray]]:
    """A short hand-made case: a question, then an interrupting barge-in into the answer."""
    q = tts.synthesize("How do I start running?")
    bi = tts.synthesize("wait, stop please")
    turns = (
        Turn(
            case_id,
            0,
            "turn0",
            "take-turn",
            f"{case_id}/turn0.wav",
            q.text,
            q.words,
            q.duration_s,
            10.0,
        ),
        Turn(
            case_id,
            1,
            "turn1_interrupt",
            "barge-in",
            f"{case_id}/turn1.wav",
            bi.text,
            bi.words,
            bi.duration_s,
            last_timeout_s,
            barge_in_after_s=barge_in_after_s,
            barge_in_handling="hold",
            subtype="interrupt",
        ),
    )
    case = TestCase(case_id, case_id, "protocol-test", "Add Constraint", None, turns)
    return case, [q.samples, bi.samples]


def model_node(name: str) -> dict:
    """conf/model/<name>.yaml as a plain dict, a preset's `defaults` (other model configs it
    builds on) merged first, as Hydra does."""
    from omegaconf import OmegaConf

    root = Path(__file__).resolve().parents[2]
    node = OmegaConf.to_container(
        OmegaConf.load(root / "fdeval" / "conf" / "model" / f"{name}.yaml"), resolve=True
    )
    base: dict = {}
    for parent in node.pop("defaults", None) or ():
        if parent != "_self_":
            base = OmegaConf.to_container(OmegaConf.merge(base, model_node(parent)), resolve=True)
    return OmegaConf.to_container(OmegaConf.merge(base, node), resolve=True) if base else node


def model_from_yaml(name: str, **overrides):
    """Instantiate conf/model/<name>.yaml the way the run stage does (minus `resources`)."""
    from hydra.utils import instantiate

    node = model_node(name)
    node.pop("resources", None)
    node.update(overrides)
    return instantiate(node)


async def serve_and_run(app, port: int, coro_fn, ssl_context: ssl.SSLContext | None = None):
    """Serve `app` on 127.0.0.1:`port` while `await coro_fn()` runs; stop it afterwards."""
    runner = await start_app(app, port, ssl_context)
    try:
        return await coro_fn()
    finally:
        await runner.cleanup()


def run_realtime_session(
    app,
    port: int,
    model,
    case,
    audio,
    vad,
    cfg,
    instruction: str | None,
    ssl_context: ssl.SSLContext | None = None,
):
    """One orchestrator session (realtime clock) against the stand-in `app`."""
    import asyncio

    from fdeval.orchestrator.clock import RealtimeClock
    from fdeval.orchestrator.session import run_session

    return asyncio.run(
        serve_and_run(
            app,
            port,
            lambda: run_session(
                case, audio, model, cfg, RealtimeClock(), vad, instruction=instruction
            ),
            ssl_context,
        )
    )


async def opus_frames(ws, frame_n: int = 1920):
    """The 24 kHz frames of the 0x01 Ogg/Opus messages a client sends on `ws` (aiohttp, server side):
    for the local servers of the Moshi-family protocol tests."""
    import aiohttp
    import sphn

    reader, buf = sphn.OpusStreamReader(24000), np.zeros(0, np.float32)
    async for msg in ws:
        if msg.type != aiohttp.WSMsgType.BINARY or msg.data[:1] != b"\x01":
            continue
        buf = np.concatenate([buf, reader.append_bytes(msg.data[1:])])
        while len(buf) >= frame_n:
            frame, buf = buf[:frame_n], buf[frame_n:]
            yield frame
