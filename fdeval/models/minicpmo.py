"""MiniCPM-o 4.5 through the official MiniCPM-o-Demo worker's duplex WebSocket (JSON frames).

Protocol, as the worker code reads it (OpenBMB/MiniCPM-o-Demo `worker.py`, `duplex_ws`, and
`core/schemas/duplex.py`; `docs/en/api/duplex.md` names the fields `prefix_system_prompt` and
`audio`, the code reads `system_prompt` and `audio_base64`: the code wins):

- connect `ws://HOST:PORT/ws/duplex?session_id=ID` (ID: letters, digits, `_` and `-`).
  A worker that is busy or still loading closes with 1013 before accepting; uvicorn answers
  that as an HTTP 403 handshake rejection, a gateway in front of it accepts and then closes with
  1013. Both become a `MiniCPMOServerError` naming the worker (an infrastructure error: the
  case is recorded as failed and retried on relaunch, never scored).
- client `{"type": "prepare", "system_prompt": str, "config": {...}}` -> server
  `{"type": "prepared", "prompt_length": n}` (or `{"type": "error", "error": str}`).
  `config` becomes the worker's `DuplexConfig` (fields omitted keep its defaults).
- client `{"type": "audio_chunk", "audio_base64": b64(float32 16 kHz mono, 1 s)}` -> one
  `{"type": "result", "is_listen": bool, "text": str, "audio_data": b64(float32 24 kHz) | null,
  "end_of_turn": bool, "current_time": int, ...}` per chunk, in order. `text` is the new piece
  of the model's text for that chunk; the official web client plays `audio_data` and appends
  `text` only when `is_listen` is false, and so does this adapter.
- client `{"type": "stop"}` -> `{"type": "stopped"}`.

The client paces: one chunk per second of audio, silence when the user is silent (the worker
only computes when a chunk arrives). So `frame_s = 1.0` and `sample_rate = 16000`; the
orchestrator's realtime clock sends one chunk per second and the adapter does not wait for the
result before the next one (as the official client). The model's audio comes back at 24 kHz:
`DuplexModel` has one `sample_rate` (16 kHz here, what the model hears), so the adapter
resamples the output stream 24 -> 16 kHz with one `StreamResampler` per session before it
becomes a `ModelEvent` (0.6 ms latency; the orchestrator resamples 16 kHz to the session rate).
Each result's text is emitted before its audio, so the text is placed where that second of audio
starts playing. Text rule `text_stream = "pieces"`: a result's `text` is its chunk's BPE tokens
decoded (cut at a token, so a word can span two chunks); the demo client appends it to the last.

The prompt sent is `base_prompt`, plus a newline and the test instruction when there is one (the
default base is the demo's English duplex preset, `assets/presets/audio_duplex/english_call.yaml`).

Tested against a local stand-in server written from that upstream code
(`tests/models/fake_servers_minicpmo.py`), not against the real model.
"""

from __future__ import annotations

import asyncio
import base64
import json
import logging
import re
import uuid
from typing import Any

import numpy as np

from fdeval.audio.resample import StreamResampler
from fdeval.models.base import ModelEvent, server_identity
from fdeval.models.network import NetworkModel, ServerConnectionError, WebSocketSession, plain

log = logging.getLogger("fdeval")

INPUT_RATE = 16000
OUTPUT_RATE = 24000
BUSY_CODE = 1013  # "try again later": the worker closes with it when it is not idle


class MiniCPMOServerError(ServerConnectionError):
    """The worker refused, failed or dropped the session (an infrastructure error)."""


class MiniCPMO(NetworkModel):
    """Client of MiniCPM-o-Demo workers (one duplex session at a time per worker): a fixed
    host/port, or (`port: null` and a `server:` block) workers started by a `ServerPool`."""

    sample_rate = INPUT_RATE
    frame_s = 1.0
    clock = "realtime"
    text_stream = "pieces"
    client_modules = ("aiohttp",)
    client_extra = "minicpmo"

    def __init__(
        self,
        name: str = "minicpmo",
        host: str = "127.0.0.1",
        port: int | None = 22400,
        base_prompt: str | None = None,
        config: dict[str, Any] | None = None,
        ref_audio_path: str | None = None,
        checkpoint: str = "openbmb/MiniCPM-o-4_5",
        connect_timeout_s: float = 30.0,
        prepare_timeout_s: float = 120.0,
        turn_silence_s: float | None = None,
        server: dict[str, Any] | None = None,
        case_retries: int = 2,
        checkpoint_label: str | None = None,
    ):
        self.name = name
        self.require_clients()
        self.checkpoint_label = checkpoint_label
        self.base_prompt = base_prompt
        self.config = plain(config) or {}
        self.ref_audio_path = ref_audio_path
        self.checkpoint = checkpoint
        self.connect_timeout_s, self.prepare_timeout_s = (
            float(connect_timeout_s),
            float(prepare_timeout_s),
        )
        self.turn_silence_s = turn_silence_s
        self.server = plain(server)  # how to launch the workers (port null: a ServerPool runs them)
        self.case_retries = int(case_retries)
        self._init_server(self.server, host, port, self.probe)

    @property
    def url(self) -> str:
        return f"ws://{self.host}:{self.port}/ws/duplex"

    def identity(self) -> dict[str, Any]:
        return server_identity(
            {
                "name": self.name,
                "adapter": "minicpmo-duplex-ws",
                "checkpoint": self.checkpoint,
                "base_prompt": self.base_prompt,
                "config": self.config,
                "ref_audio_path": self.ref_audio_path,
                "sample_rate": self.sample_rate,
                "output_sample_rate": OUTPUT_RATE,
                "frame_s": self.frame_s,
            },
            self.external,
            self.checkpoint_label,
        )

    def prompt(self, instruction: str | None) -> str | None:
        if not instruction:
            return self.base_prompt
        return f"{self.base_prompt}\n{instruction}" if self.base_prompt else instruction

    async def probe(
        self, host: str | None = None, port: int | None = None, timeout_s: float = 10.0
    ) -> None:
        """Readiness check for a server launcher: the worker's GET /health says "healthy" (a
        duplex connection would take the worker's one session)."""
        aiohttp = self.client_module("aiohttp")
        url = f"http://{host or self.host}:{port or self.port}/health"
        try:
            async with (
                aiohttp.ClientSession() as http,
                http.get(url, timeout=aiohttp.ClientTimeout(total=timeout_s)) as r,
            ):
                status, body = r.status, await r.json(content_type=None)
        except (aiohttp.ClientError, OSError, ValueError) as e:
            raise MiniCPMOServerError(
                f"minicpmo worker {url}: not reachable ({type(e).__name__}: {e})"
            ) from None
        if status != 200 or not isinstance(body, dict) or body.get("status") != "healthy":
            raise MiniCPMOServerError(
                f"minicpmo worker {url}: not ready (HTTP {status}: {body!r:.200})"
            )

    def session(self, instruction: str | None, seed: int) -> MiniCPMOSession:
        return MiniCPMOSession(self, self.prompt(instruction), seed)


class MiniCPMOSession(WebSocketSession):
    error_type = MiniCPMOServerError
    send_errors = (ConnectionError, RuntimeError)
    model: MiniCPMO

    def __init__(self, model: MiniCPMO, prompt: str | None, seed: int):
        super().__init__(model)
        self.prompt, self.seed = prompt, seed
        self.session_id = re.sub(r"[^A-Za-z0-9_-]", "_", f"fdeval_{seed}_{uuid.uuid4().hex[:8]}")
        self._prepared = asyncio.Event()
        self._stopped = asyncio.Event()
        self._out = StreamResampler(OUTPUT_RATE, INPUT_RATE)
        self.n_sent = 0
        self.n_results = 0
        self.n_end_of_turn = 0

    @property
    def url(self) -> str:
        return f"ws://{self.host}:{self.port}/ws/duplex"

    def where(self) -> str:
        return f"minicpmo worker {self.url}"

    def refused(self, status: int) -> ServerConnectionError:
        if status == 403:
            return self.error(
                f"refused the session (HTTP 403: the worker closes with {BUSY_CODE} when it is busy "
                "or still loading; one session per worker)"
            )
        return super().refused(status)

    def closed_why(self, code: int | None) -> str:
        if code == BUSY_CODE:
            return f"busy (close {BUSY_CODE}: one session per worker)"
        return f"closed the session (code {code})"

    async def _connect(self) -> None:
        m = self.model
        ws = await self._open_ws(
            f"{self.url}?session_id={self.session_id}", m.connect_timeout_s, 64 * 2**20
        )
        self._start_reader()
        msg: dict[str, Any] = {
            "type": "prepare",
            "system_prompt": self.prompt or "",
            "config": dict(m.config),
        }
        if self.prompt is None:
            del msg["system_prompt"]  # the worker then uses its own default
        if m.ref_audio_path:
            msg["ref_audio_path"] = m.ref_audio_path
        try:
            await ws.send_str(json.dumps(msg))
        except self.send_errors as e:
            raise await self._send_failed(e) from None
        await self._until(self._prepared, m.prepare_timeout_s, "'prepared'")

    def _on_message(self, msg: Any, arrival: float) -> None:
        if msg.type == self.WSMsgType.TEXT:
            self._handle(json.loads(msg.data), arrival)

    def _handle(self, msg: dict[str, Any], arrival: float) -> None:
        kind = msg.get("type")
        if kind == "result":
            self.n_results += 1
            if msg.get("end_of_turn"):
                self.n_end_of_turn += 1
            if msg.get("is_listen", True):
                return
            text = msg.get("text") or ""
            if text:
                self._emit(ModelEvent("text", text=text, arrival_mono=arrival))
            if msg.get("audio_data"):
                pcm = np.frombuffer(base64.b64decode(msg["audio_data"]), dtype="<f4")
                samples = self._out.push(pcm)
                if len(samples):
                    self._emit(ModelEvent("audio", audio=samples, arrival_mono=arrival))
        elif kind == "prepared":
            self._prepared.set()
        elif kind == "stopped":
            self._stopped.set()
        elif kind == "error":
            raise self.error(f"reported an error: {msg.get('error')}")
        elif kind == "timeout":
            raise self.error(f"timed the session out: {msg.get('reason')}")
        else:
            log.debug("minicpmo: ignored message %r", kind)

    async def _send(self, frame: np.ndarray) -> None:
        pcm = np.ascontiguousarray(frame, dtype="<f4")
        payload = {
            "type": "audio_chunk",
            "audio_base64": base64.b64encode(pcm.tobytes()).decode("ascii"),
        }
        await self._ws.send_str(json.dumps(payload))
        self.n_sent += 1

    async def _goodbye(self) -> None:
        if self._ws is not None and not self._ws.closed:
            await self._ws.send_str(json.dumps({"type": "stop"}))
            await self._until(self._stopped, 2.0, "'stopped'")
