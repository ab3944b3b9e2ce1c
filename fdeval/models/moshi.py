"""Moshi (kyutai-labs/moshi) through its official WebSocket server, started inside the job.

Protocol (checked against `moshi/server.py` of moshi 0.2.13): WebSocket `GET /api/chat`; binary
messages with a kind byte (`fdeval.models.kindbyte`): the server sends 0x00 once this session has
the model (one session per server, behind a lock), then both sides stream 0x01 Ogg/Opus audio at
24 kHz, and the server sends 0x02 text pieces. The client sends nothing before the handshake
(audio sent earlier would be stale). It sends one 80 ms frame (1920 samples) per tick; the
orchestrator paces the frames at wall time (realtime clock) and pumps silence between user turns,
since Moshi needs continuous input. The server decodes the model's frame t, sends its audio and
then its text token's piece; a reader task stamps every message with its arrival time and puts a
text piece before the audio it belongs to (`ModelEvent` placement). Text rule `text_stream =
"pieces"`: each 0x02 piece is `id_to_piece(token)` with "▁" made a space (a SentencePiece piece).

Decoding (Instruct-FD A.8): text temperature 0.7, audio temperature 0.8, top-k text 25, audio 250
(Moshi's own defaults). `moshi.server` has no flags for them; `moshi_launch.py` hands them to the
server through the checkpoint's `lm_gen_config`, the server's own route. Turn completion: 2.5 s of
model silence. The kyutai server reads no query parameter: the instruction is sent as
`text_prompt` (as the paper's harness did) but Moshi never sees it, so Moshi runs un-instructed.
The server seeds its sampler once at start; a session's seed cannot be passed.

`model.port` (host default 127.0.0.1) means a server someone else runs: no pool, whatever
`model.server` says, and the identity says `server: external host:port` with the checkpoint and
decoding unknown (or the user's `checkpoint_label`): fdeval cannot see what that server runs.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import time
from pathlib import Path
from typing import Any, Mapping
from urllib.parse import urlencode

import numpy as np

from fdeval.errors import ConfigError
from fdeval.files import file_sha256
from fdeval.models import kindbyte
from fdeval.models.base import DuplexModel, DuplexSession, ModelEvent, require_client, server_identity
from fdeval.models.servers import (PooledServerModel, ServerDied, ServerError, ServerInstance, ServerPool,
                                   ServerSpec)

log = logging.getLogger("fdeval")

ADAPTER_VERSION = "1"
LAUNCHER = str(Path(__file__).with_name("moshi_launch.py"))
CHECKPOINT_FILES = ("config_path", "moshi_weight", "mimi_weight", "tokenizer")  # model.<key>: local files


def hf_revision(repo: str) -> str | None:
    """The commit of `repo` in the local Hugging Face cache (refs/main), if it was downloaded."""
    home = os.environ.get("HF_HUB_CACHE") or os.path.join(
        os.environ.get("HF_HOME", os.path.expanduser("~/.cache/huggingface")), "hub")
    ref = Path(home) / f"models--{repo.replace('/', '--')}" / "refs" / "main"
    try:
        return ref.read_text().strip() or None
    except OSError:
        return None


def checkpoint_identity(m: Any) -> dict[str, Any]:
    """Which Moshi checkpoint `m` loads: sha256 of its local files, else the hub repo and revision."""
    files = {}
    for key in CHECKPOINT_FILES:
        value = getattr(m, key)
        if value:
            files[key] = {"path": str(value), "sha256": file_sha256(value)}
    local = bool(files.get("moshi_weight"))
    return {"hf_repo": None if local else m.hf_repo,
            "hf_revision": None if local or not m.hf_repo else hf_revision(m.hf_repo), "files": files}


def check_local_files(m: Any) -> None:
    """Every checkpoint file given must exist (one line naming the key, not a traceback later)."""
    for key in CHECKPOINT_FILES:
        value = getattr(m, key)
        if value and not Path(value).is_file():
            raise ConfigError(f"model.{key}: no such file: {value}")


async def handshake(host: str, port: int, path: str = "/api/chat", query: Mapping[str, str] | None = None,
                    timeout_s: float = 30.0) -> None:
    """Connect, wait for the 0x00 handshake, close: the health check of a Moshi-family server."""
    import aiohttp

    url = f"ws://{host}:{port}{path}" + (f"?{urlencode(dict(query))}" if query else "")
    async with aiohttp.ClientSession() as http:
        async with http.ws_connect(url, max_msg_size=0, autoping=True) as ws:
            msg = await ws.receive(timeout=timeout_s)
            if msg.type != aiohttp.WSMsgType.BINARY:
                raise ConnectionError(f"expected the 0x00 handshake, got {msg.type.name} {msg.data!r}"[:200])
            kind, _ = kindbyte.decode(msg.data)
            if kind != kindbyte.HANDSHAKE:
                raise ConnectionError(f"expected the 0x00 handshake, got kind {kind}")


class KindByteServerModel(PooledServerModel, DuplexModel):
    """Shared by Moshi and PersonaPlex: a kind-byte WebSocket server run by a `ServerPool`."""

    sample_rate = 24000
    frame_s = 0.08
    clock = "realtime"
    # Moshi's server sends a frame's audio, then its text; PersonaPlex sends the text first.
    text_follows_audio = True
    text_stream = "pieces"  # SentencePiece pieces (both servers send id_to_piece, "▁" -> " ")
    audio_per_frame = True  # the server answers every 80 ms input frame with one of audio

    def __init__(self, name: str, turn_silence_s: float | None, server: Mapping[str, Any] | None,
                 host: str | None = "127.0.0.1", port: int | None = None, handshake_timeout_s: float = 600.0,
                 case_retries: int = 2, path: str = "/api/chat", checkpoint_label: str | None = None):
        require_client(name, ("sphn", "aiohttp"), "moshi-client")
        self.name = name
        self.turn_silence_s = turn_silence_s
        self.handshake_timeout_s = handshake_timeout_s
        self.case_retries = int(case_retries)
        self.path = path
        self.checkpoint_label = checkpoint_label
        # model.port means a server someone else runs: no pool, whatever model.server says
        self.external = (host or "127.0.0.1", int(port)) if port is not None else None
        self.spec = None if self.external else ServerSpec.from_config(dict(server) if server is not None else None)
        if self.spec is None and self.external is None:
            raise ConfigError(f"model.server: {name} needs a server: block, or model.port of a running server")
        if self.external and server is not None:
            log.info("%s: model.port given: using the server on %s:%d, model.server is not started", name, *self.external)
        self.pool: ServerPool | None = None
        if self.spec is not None:
            self._init_pool(name, None, self.probe, placeholders={"launcher": LAUNCHER},
                            extra_env=self.server_env(), spec=_with_args(self.spec, self.server_args()))

    # -- what subclasses say ------------------------------------------------------------------
    def server_args(self) -> list[str]:
        """Arguments appended to server.command (weights, device)."""
        return []

    def server_env(self) -> dict[str, str]:
        return {}

    def query(self, instruction: str | None, seed: int) -> dict[str, str]:
        return {}

    async def probe(self, host: str, port: int) -> None:
        await handshake(host, port, self.path, self.query(None, 0), timeout_s=30.0)

    # -- DuplexModel (concurrency, set_run_dir, close: PooledServerModel) -----------------------
    def session(self, instruction: str | None, seed: int) -> "KindByteSession":
        return KindByteSession(self, instruction, seed)


class _External:
    """A server someone else runs (host/port given): nothing to restart."""

    def __init__(self, host: str, port: int):
        self.host, self.port, self.name, self.proc = host, port, f"{host}:{port}", None

    def alive(self) -> bool:
        return True

    def log_tail(self, n_bytes: int = 4000) -> str:
        return "(external server: no log)"

    def exit_code(self, wait_s: float = 0.0) -> int | None:
        return None


class KindByteSession(DuplexSession):
    """One WebSocket conversation: handshake first, then Opus frames out, audio and text in."""

    def __init__(self, model: KindByteServerModel, instruction: str | None, seed: int):
        self.model, self.instruction, self.seed = model, instruction, seed
        self._pending: list[ModelEvent] = []
        self._error: BaseException | None = None
        self._reader: asyncio.Task | None = None
        self._closing = False
        self.inst: ServerInstance | _External | None = None
        self.n_sent = self.n_audio_msgs = self.n_text = 0

    async def __aenter__(self) -> "KindByteSession":
        import aiohttp

        m = self.model
        if m.pool is not None:
            self.inst = await m.pool.acquire()
        else:
            assert m.external is not None
            self.inst = _External(*m.external)
        try:
            q = m.query(self.instruction, self.seed)
            url = f"ws://{self.inst.host}:{self.inst.port}{m.path}" + (f"?{urlencode(q)}" if q else "")
            self._http = aiohttp.ClientSession()
            try:
                self._ws = await self._http.ws_connect(url, max_msg_size=0, autoping=True)
                msg = await self._ws.receive(timeout=m.handshake_timeout_s)
            except (aiohttp.ClientError, OSError, asyncio.TimeoutError) as e:
                raise await self._failure(f"no handshake: {type(e).__name__}: {e}") from None
            if msg.type != aiohttp.WSMsgType.BINARY or kindbyte.decode(msg.data)[0] != kindbyte.HANDSHAKE:
                raise await self._failure(f"expected the 0x00 handshake, got {msg.type.name}")
            self.codec = kindbyte.OpusCodec(m.sample_rate)
            self.t_handshake = time.monotonic()
            self._reader = asyncio.create_task(self._read())
        except BaseException:
            await self._close()
            raise
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self._close()

    async def _close(self) -> None:
        self._closing = True
        if self._reader is not None:
            self._reader.cancel()
            try:
                await self._reader
            except BaseException:
                pass
        ws = getattr(self, "_ws", None)
        if ws is not None and not ws.closed:
            try:
                await asyncio.wait_for(ws.close(), 5.0)
            except BaseException:
                pass
        http = getattr(self, "_http", None)
        if http is not None:
            await http.close()
        if self.inst is not None and self.model.pool is not None:
            self.model.pool.release(self.inst)  # type: ignore[arg-type]
        self.inst = None

    async def _failure(self, what: str) -> ServerError:
        """The error for a lost session: ServerDied (retryable) with the server's log tail."""
        inst = self.inst
        code = None
        for _ in range(60):  # give a dying server up to 3 s to be reaped, without blocking the loop
            code = inst.exit_code() if inst is not None else None
            if code is not None or inst is None or isinstance(inst, _External):
                break
            await asyncio.sleep(0.05)
        name = inst.name if inst is not None else "?"
        state = f"exited with code {code}" if code is not None else "is still running"
        cls = ServerDied if (code is not None or self.model.pool is not None) else ServerError
        tail = inst.log_tail() if inst is not None else ""
        return cls(f"{self.model.name} server {name} {state}; session lost ({what}); server log tail:\n{tail}")

    async def _read(self) -> None:
        import aiohttp

        ws = self._ws
        try:
            async for msg in ws:
                t = time.monotonic()
                if msg.type != aiohttp.WSMsgType.BINARY:
                    if msg.type == aiohttp.WSMsgType.ERROR:
                        break
                    continue
                kind, payload = kindbyte.decode(msg.data)
                if kind == kindbyte.AUDIO:
                    self.n_audio_msgs += 1
                    pcm = self.codec.decode(payload)
                    if len(pcm):
                        self._pending.append(ModelEvent("audio", audio=pcm, arrival_mono=t))
                elif kind == kindbyte.TEXT:
                    self.n_text += 1
                    ev = ModelEvent("text", text=payload.decode("utf-8", "replace"), arrival_mono=t)
                    if self.model.text_follows_audio and self._pending and self._pending[-1].kind == "audio":
                        self._pending.insert(len(self._pending) - 1, ev)  # before the frame's audio
                    else:
                        self._pending.append(ev)
        except asyncio.CancelledError:
            raise
        except Exception as e:  # a broken connection
            if not self._closing:
                self._error = await self._failure(f"{type(e).__name__}: {e}")
            return
        if not self._closing:
            self._error = await self._failure(f"the server closed the connection (close code {ws.close_code})")

    def _check(self) -> None:
        if self._error is not None:
            raise self._error

    async def send(self, frame: np.ndarray) -> None:
        self._check()
        data = self.codec.encode(frame)
        if data:
            try:
                await self._ws.send_bytes(kindbyte.encode(kindbyte.AUDIO, data))
            except (ConnectionError, RuntimeError, OSError) as e:
                await asyncio.sleep(0.05)  # let the reader see the close
                self._check()
                raise await self._failure(f"send failed: {type(e).__name__}: {e}") from None
        self.n_sent += 1

    async def receive(self) -> list[ModelEvent]:
        out, self._pending = self._pending, []
        if not out:
            self._check()
        return out


class Moshi(KindByteServerModel):
    """Moshi behind `moshi.server` (see the module docstring)."""

    def __init__(self, name: str = "moshi", turn_silence_s: float | None = 2.5, server: Mapping[str, Any] | None = None,
                 hf_repo: str | None = "kyutai/moshiko-pytorch-bf16", config_path: str | None = None,
                 moshi_weight: str | None = None, mimi_weight: str | None = None, tokenizer: str | None = None,
                 device: str = "cuda", half: bool = False, temp: float = 0.8, temp_text: float = 0.7,
                 top_k: int = 250, top_k_text: int = 25, send_text_prompt: bool = True,
                 host: str | None = "127.0.0.1", port: int | None = None, handshake_timeout_s: float = 600.0,
                 case_retries: int = 2, token_log: str | None = None, checkpoint_label: str | None = None):
        self.hf_repo, self.config_path = hf_repo, config_path
        self.moshi_weight, self.mimi_weight, self.tokenizer = moshi_weight, mimi_weight, tokenizer
        self.device, self.half = device, bool(half)
        self.decoding = {"temp": float(temp), "temp_text": float(temp_text), "top_k": int(top_k),
                         "top_k_text": int(top_k_text)}
        self.send_text_prompt = bool(send_text_prompt)
        self.token_log = token_log
        super().__init__(name, turn_silence_s, server, host, port, handshake_timeout_s, case_retries,
                         checkpoint_label=checkpoint_label)
        if self.external is None:  # the weights of a server fdeval starts are hashed for the identity
            check_local_files(self)

    def server_args(self) -> list[str]:
        args: list[str] = []
        for flag, value in (("--hf-repo", self.hf_repo), ("--config-path", self.config_path),
                            ("--moshi-weight", self.moshi_weight), ("--mimi-weight", self.mimi_weight),
                            ("--tokenizer", self.tokenizer)):
            if value:
                args += [flag, str(value)]
        args += ["--device", self.device]
        if self.half:
            args.append("--half")
        return args

    def server_env(self) -> dict[str, str]:
        env = {"FDEVAL_MOSHI_LM_GEN": json.dumps(self.decoding)}
        if self.token_log:
            env["FDEVAL_MOSHI_TOKEN_LOG"] = str(self.token_log)
        return env

    def query(self, instruction: str | None, seed: int) -> dict[str, str]:
        return {"text_prompt": instruction or ""} if self.send_text_prompt else {}

    def identity(self) -> dict[str, Any]:
        ident: dict[str, Any] = {
            "name": self.name, "kind": "moshi-server", "adapter_version": ADAPTER_VERSION,
            "protocol": "websocket /api/chat kind-byte, Ogg/Opus 24 kHz, 80 ms frames",
            "turn_silence_s": self.turn_silence_s, "instruction_read_by_server": False,
        }
        if self.external is None:  # an external server's checkpoint, dtype and decoding are its owner's
            ident.update(checkpoint_identity(self), dtype="float16" if self.half else "bfloat16",
                         decoding=self.decoding, server_python=self.spec.python)
        return server_identity(ident, self.external, self.checkpoint_label)


def _with_args(spec: ServerSpec, extra: list[str]) -> ServerSpec:
    from dataclasses import replace

    return replace(spec, command=tuple(spec.command) + tuple(extra))
