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

import json
import os
import time
from pathlib import Path
from typing import Any, Mapping
from urllib.parse import urlencode

import numpy as np

from fdeval.errors import ConfigError
from fdeval.files import file_sha256
from fdeval.models import kindbyte
from fdeval.models.base import ModelEvent, optional_import, pip_extra, server_identity
from fdeval.models.network import NetworkModel, ServerConnectionError, WebSocketSession

ADAPTER_VERSION = "1"
LAUNCHER = str(Path(__file__).with_name("moshi_launch.py"))
CHECKPOINT_FILES = (
    "config_path",
    "moshi_weight",
    "mimi_weight",
    "tokenizer",
)  # model.<key>: local files


def hf_revision(repo: str) -> str | None:
    """The commit of `repo` in the local Hugging Face cache (refs/main), if it was downloaded."""
    home = os.environ.get("HF_HUB_CACHE") or os.path.join(
        os.environ.get("HF_HOME", os.path.expanduser("~/.cache/huggingface")), "hub"
    )
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
    return {
        "hf_repo": None if local else m.hf_repo,
        "hf_revision": None if local or not m.hf_repo else hf_revision(m.hf_repo),
        "files": files,
    }


def check_local_files(m: Any) -> None:
    """Every checkpoint file given must exist (one line naming the key, not a traceback later)."""
    for key in CHECKPOINT_FILES:
        value = getattr(m, key)
        if value and not Path(value).is_file():
            raise ConfigError(f"model.{key}: no such file: {value}")


async def handshake(
    host: str,
    port: int,
    path: str = "/api/chat",
    query: Mapping[str, str] | None = None,
    timeout_s: float = 30.0,
) -> None:
    """Connect, wait for the 0x00 handshake, close: the health check of a Moshi-family server."""
    aiohttp = optional_import("aiohttp", pip_extra("moshi-client"), "the Moshi-family health check")
    url = f"ws://{host}:{port}{path}" + (f"?{urlencode(dict(query))}" if query else "")
    async with aiohttp.ClientSession() as http:
        async with http.ws_connect(url, max_msg_size=0, autoping=True) as ws:
            msg = await ws.receive(timeout=timeout_s)
            if msg.type != aiohttp.WSMsgType.BINARY:
                raise ConnectionError(
                    f"expected the 0x00 handshake, got {msg.type.name} {msg.data!r}"[:200]
                )
            kind, _ = kindbyte.decode(msg.data)
            if kind != kindbyte.HANDSHAKE:
                raise ConnectionError(f"expected the 0x00 handshake, got kind {kind}")


class KindByteServerError(ServerConnectionError):
    """A Moshi-family server someone else runs refused or dropped the session (with a server
    from the job's pool, the session raises `ServerDied` instead)."""


class KindByteServerModel(NetworkModel):
    """Shared by Moshi and PersonaPlex: a kind-byte WebSocket server run by a `ServerPool`."""

    sample_rate = 24000
    frame_s = 0.08
    clock = "realtime"
    # Moshi's server sends a frame's audio, then its text; PersonaPlex sends the text first.
    text_follows_audio = True
    text_stream = "pieces"  # SentencePiece pieces (both servers send id_to_piece, "▁" -> " ")
    audio_per_frame = True  # the server answers every 80 ms input frame with one of audio
    client_modules = ("sphn", "aiohttp")
    client_extra = "moshi-client"

    def __init__(
        self,
        name: str,
        turn_silence_s: float | None,
        server: Mapping[str, Any] | None,
        host: str | None = "127.0.0.1",
        port: int | None = None,
        handshake_timeout_s: float = 600.0,
        case_retries: int = 2,
        path: str = "/api/chat",
        checkpoint_label: str | None = None,
    ):
        self.name = name
        self.require_clients()
        self.turn_silence_s = turn_silence_s
        self.handshake_timeout_s = handshake_timeout_s
        self.case_retries = int(case_retries)
        self.path = path
        self.checkpoint_label = checkpoint_label
        self._init_server(
            server,
            host,
            port,
            self.probe,
            placeholders={"launcher": LAUNCHER},
            extra_env=self.server_env(),
            extra_args=self.server_args(),
        )

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

    # -- DuplexModel (concurrency, set_run_dir, close: NetworkModel) ---------------------------
    def session(self, instruction: str | None, seed: int) -> "KindByteSession":
        return KindByteSession(self, instruction, seed)


class KindByteSession(WebSocketSession):
    """One WebSocket conversation: handshake first, then Opus frames out, audio and text in."""

    error_type = KindByteServerError
    model: KindByteServerModel

    def __init__(self, model: KindByteServerModel, instruction: str | None, seed: int):
        super().__init__(model)
        self.instruction, self.seed = instruction, seed
        self.n_sent = self.n_audio_msgs = self.n_text = 0
        self._last_audio_s = (
            0.0  # the length of the audio in the message just read, if it was audio
        )

    @property
    def url(self) -> str:
        return f"ws://{self.host}:{self.port}{self.model.path}"

    async def _connect(self) -> None:
        aiohttp = self.model.client_module("aiohttp")
        q = self.model.query(
            self.instruction, self.seed
        )  # (the instruction: not in error messages)
        ws = await self._open_ws(self.url + (f"?{urlencode(q)}" if q else ""))
        try:
            msg = await ws.receive(timeout=self.model.handshake_timeout_s)
        except (aiohttp.ClientError, OSError) as e:
            raise self.error(f"no handshake: {type(e).__name__}: {e}") from None
        if msg.type != self.WSMsgType.BINARY or msg.data[:1] != bytes((kindbyte.HANDSHAKE,)):
            raise self.error(f"expected the 0x00 handshake, got {msg.type.name}")
        self.codec = kindbyte.OpusCodec(self.model.sample_rate)
        self.t_handshake = time.monotonic()
        self._start_reader()

    def _on_message(self, msg: Any, arrival: float) -> None:
        if msg.type != self.WSMsgType.BINARY:
            return
        kind, payload = kindbyte.decode(msg.data)
        last_audio_s, self._last_audio_s = self._last_audio_s, 0.0
        if kind == kindbyte.AUDIO:
            self.n_audio_msgs += 1
            pcm = self.codec.decode(payload)
            if len(pcm):
                self._emit(ModelEvent("audio", audio=pcm, arrival_mono=arrival))
                self._last_audio_s = len(pcm) / self.model.sample_rate
        elif kind == kindbyte.TEXT:
            self.n_text += 1
            text = payload.decode("utf-8", "replace")
            if not (
                self.model.text_follows_audio and last_audio_s
            ):  # PersonaPlex: the text comes first
                self._emit(ModelEvent("text", text=text, arrival_mono=arrival))
            elif self._pending and self._pending[-1].kind == "audio":
                self._pending.insert(
                    len(self._pending) - 1, ModelEvent("text", text=text, arrival_mono=arrival)
                )
            else:  # its frame's audio was handed over already: placed back by that audio's length
                self._emit(
                    ModelEvent("text", text=text, offset_s=-last_audio_s, arrival_mono=arrival)
                )

    async def _send(self, frame: np.ndarray) -> None:
        data = self.codec.encode(frame)
        if data:
            await self._ws.send_bytes(kindbyte.encode(kindbyte.AUDIO, data))
        self.n_sent += 1


class Moshi(KindByteServerModel):
    """Moshi behind `moshi.server` (see the module docstring)."""

    def __init__(
        self,
        name: str = "moshi",
        turn_silence_s: float | None = 2.5,
        server: Mapping[str, Any] | None = None,
        hf_repo: str | None = "kyutai/moshiko-pytorch-bf16",
        config_path: str | None = None,
        moshi_weight: str | None = None,
        mimi_weight: str | None = None,
        tokenizer: str | None = None,
        device: str = "cuda",
        half: bool = False,
        temp: float = 0.8,
        temp_text: float = 0.7,
        top_k: int = 250,
        top_k_text: int = 25,
        send_text_prompt: bool = True,
        host: str | None = "127.0.0.1",
        port: int | None = None,
        handshake_timeout_s: float = 600.0,
        case_retries: int = 2,
        token_log: str | None = None,
        checkpoint_label: str | None = None,
    ):
        self.hf_repo, self.config_path = hf_repo, config_path
        self.moshi_weight, self.mimi_weight, self.tokenizer = moshi_weight, mimi_weight, tokenizer
        self.device, self.half = device, bool(half)
        self.decoding = {
            "temp": float(temp),
            "temp_text": float(temp_text),
            "top_k": int(top_k),
            "top_k_text": int(top_k_text),
        }
        self.send_text_prompt = bool(send_text_prompt)
        self.token_log = token_log
        super().__init__(
            name,
            turn_silence_s,
            server,
            host,
            port,
            handshake_timeout_s,
            case_retries,
            checkpoint_label=checkpoint_label,
        )
        if (
            self.external is None
        ):  # the weights of a server fdeval starts are hashed for the identity
            check_local_files(self)

    def server_args(self) -> list[str]:
        args: list[str] = []
        for flag, value in (
            ("--hf-repo", self.hf_repo),
            ("--config-path", self.config_path),
            ("--moshi-weight", self.moshi_weight),
            ("--mimi-weight", self.mimi_weight),
            ("--tokenizer", self.tokenizer),
        ):
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
            "name": self.name,
            "kind": "moshi-server",
            "adapter_version": ADAPTER_VERSION,
            "protocol": "websocket /api/chat kind-byte, Ogg/Opus 24 kHz, 80 ms frames",
            "turn_silence_s": self.turn_silence_s,
            "instruction_read_by_server": False,
        }
        if (
            self.external is None
        ):  # an external server's checkpoint, dtype and decoding are its owner's
            ident.update(
                checkpoint_identity(self),
                dtype="float16" if self.half else "bfloat16",
                decoding=self.decoding,
                server_python=self.spec.python,
            )
        return server_identity(ident, self.external, self.checkpoint_label)
