"""Freeze-Omni through its official demo server (Flask-SocketIO over HTTPS).

Protocol, as read in VITA-MLLM/Freeze-Omni `bin/server.py`, `web/parms.py` and the demo client
`web/resources/demo.html`:

- Socket.IO (Engine.IO v4) over HTTPS with a self-signed certificate the server writes itself
  (`web/pem.py`): the client skips certificate verification.
- on connect the server emits `too_many_users` when `--max_users` sessions are already open; it
  then disconnects every event of that client. `out_time` comes when the session's timer runs
  out (`--timeout`, reset whenever the server sends audio). Both, and an unexpected disconnect,
  become a `FreezeOmniServerError` (an infrastructure error: recorded, retried, never scored).
- client `prompt_text` (a string: the LLM's system role) -> server `prompt_success`. The role
  must be set before `recording-started`, which resets the dialogue state to that role.
- client `recording-started` -> the server interrupts and resets, emitting `stop_tts` (twice).
- client `audio`: a JSON string `{"sample_rate": 16000, "audio": [bytes of int16 LE PCM]}`; the
  demo sends one event per 256 samples (16 ms). The server's own VAD (Silero, threshold 0.8,
  2 s minimum silence) finds the user's turns and barge-ins.
- server `audio`: raw int16 LE PCM at 24 kHz, one queued TTS segment per client `audio` event:
  the output rides on the input, so the client keeps sending (silence too) at the real-time rate.
- server `stop_tts`: drop what is queued for playback (a barge-in, or the resets above); the
  adapter turns it into `ModelEvent("interrupted")` when model audio has arrived since the last
  one (a `stop_tts` with nothing received since cannot drop anything).
- client `recording-stopped` at the end.

The server sends no text: Freeze-Omni's words come from ASR on the model channel (`text_stream` is
the default "words"; it never applies). Model audio is
resampled 24 -> 16 kHz in the adapter (`DuplexModel` has one `sample_rate`, 16 kHz here).
`frame_s` is one `audio` event (`samples_per_event / 16000`).

The role sent is `base_prompt` (default: the server's own default role, tidied), plus a newline
and the test instruction when there is one, so instructed and un-instructed sessions differ only
by the instruction.

Tested against a local stand-in server written from that upstream code
(`tests/models/fake_servers_freezeomni.py`), not against the real model.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from typing import Any

import numpy as np

from fdeval.audio.resample import StreamResampler
from fdeval.models.base import ModelEvent, server_identity
from fdeval.models.network import NetworkModel, NetworkSession, ServerConnectionError, plain

log = logging.getLogger("fdeval")

INPUT_RATE = 16000
OUTPUT_RATE = 24000
# web/parms.py: GlobalParams' initial role (its source string carries line-continuation spaces).
SERVER_DEFAULT_ROLE = (
    "You are a helpful voice assistant. Your answer should be coherent, natural, simple, complete. "
    "Your name is Xiao Yun. Your inventor is Tencent."
)


class FreezeOmniServerError(ServerConnectionError):
    """The server refused, timed out or dropped the session (an infrastructure error)."""


class FreezeOmni(NetworkModel):
    """Client of Freeze-Omni demo servers (`bin/server.py`): a fixed host/port, or (`port: null`
    and a `server:` block) servers started by a `ServerPool`."""

    sample_rate = INPUT_RATE
    clock = "realtime"
    text_stream = "words"  # sends no text
    client_modules = ("socketio", "aiohttp")  # python-socketio's asyncio client runs on aiohttp
    client_extra = "freezeomni"

    def __init__(
        self,
        name: str = "freezeomni",
        host: str = "127.0.0.1",
        port: int | None = 8081,
        base_prompt: str | None = SERVER_DEFAULT_ROLE,
        samples_per_event: int = 256,
        checkpoint: str = "VITA-MLLM/Freeze-Omni + Qwen/Qwen2-7B-Instruct",
        transports: list[str] | None = None,
        connect_timeout_s: float = 30.0,
        prompt_timeout_s: float = 60.0,
        turn_silence_s: float | None = None,
        server: dict[str, Any] | None = None,
        case_retries: int = 2,
        checkpoint_label: str | None = None,
    ):
        self.name = name
        self.require_clients()
        self.checkpoint_label = checkpoint_label
        self.base_prompt = base_prompt
        self.samples_per_event = int(samples_per_event)
        self.frame_s = self.samples_per_event / INPUT_RATE
        self.checkpoint = checkpoint
        self.transports = (
            list(transports) if transports else None
        )  # None: polling, then upgrade to websocket
        self.connect_timeout_s, self.prompt_timeout_s = (
            float(connect_timeout_s),
            float(prompt_timeout_s),
        )
        self.turn_silence_s = turn_silence_s
        self.server = plain(server)
        self.case_retries = int(case_retries)
        self._init_server(self.server, host, port, self.probe)

    @property
    def url(self) -> str:
        return f"https://{self.host}:{self.port}"

    def identity(self) -> dict[str, Any]:
        return server_identity(
            {
                "name": self.name,
                "adapter": "freezeomni-socketio",
                "checkpoint": self.checkpoint,
                "base_prompt": self.base_prompt,
                "samples_per_event": self.samples_per_event,
                "sample_rate": self.sample_rate,
                "output_sample_rate": OUTPUT_RATE,
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
        """Readiness check for a server launcher: GET / (the demo page) answers over HTTPS (the
        server listens only once its models are loaded; a Socket.IO connection would take a
        user slot)."""
        aiohttp = self.client_module("aiohttp")
        url = f"https://{host or self.host}:{port or self.port}/"
        try:
            async with (
                aiohttp.ClientSession() as http,
                http.get(url, ssl=False, timeout=aiohttp.ClientTimeout(total=timeout_s)) as r,
            ):
                status = r.status
        except (aiohttp.ClientError, OSError) as e:
            raise FreezeOmniServerError(
                f"freezeomni server {url}: not reachable ({type(e).__name__}: {e})"
            ) from None
        if status != 200:
            raise FreezeOmniServerError(f"freezeomni server {url}: not ready (HTTP {status})")

    def session(self, instruction: str | None, seed: int) -> FreezeOmniSession:
        return FreezeOmniSession(self, self.prompt(instruction))


class FreezeOmniSession(NetworkSession):
    """Socket.IO callbacks instead of a reader task: they queue events and record failures."""

    error_type = FreezeOmniServerError
    send_errors = (Exception,)  # socketio raises its own BadNamespaceError when disconnected
    model: FreezeOmni

    def __init__(self, model: FreezeOmni, prompt: str | None):
        super().__init__(model)
        self.prompt = prompt
        self._sio: Any = None
        self._prompted = asyncio.Event()
        self._out = StreamResampler(OUTPUT_RATE, INPUT_RATE)
        self._audio_since_stop = False
        self.n_sent = 0
        self.n_audio = 0
        self.n_stop_tts = 0

    @property
    def url(self) -> str:
        return f"https://{self.host}:{self.port}"

    async def _connect(self) -> None:
        socketio = self.model.client_module("socketio")
        m = self.model
        sio = self._sio = socketio.AsyncClient(
            reconnection=False, ssl_verify=False, handle_sigint=False
        )
        sio.on("audio", self._on_audio)
        sio.on("stop_tts", self._on_stop_tts)
        sio.on("prompt_success", lambda *a: self._prompted.set())
        sio.on(
            "too_many_users",
            lambda *a: self._fail(
                self.error("too many users (the server's --max_users sessions are open)")
            ),
        )
        sio.on(
            "out_time",
            lambda *a: self._fail(self.error("the server timed the session out (out_time)")),
        )
        sio.on("disconnect", lambda *a: self._fail(self.error("the server closed the connection")))
        try:
            await asyncio.wait_for(
                sio.connect(self.url, transports=m.transports, wait_timeout=m.connect_timeout_s),
                m.connect_timeout_s + 5.0,
            )
        except (socketio.exceptions.ConnectionError, OSError) as e:
            raise self.error(f"cannot connect ({type(e).__name__}: {e})") from None
        if self.prompt is not None:
            await sio.emit("prompt_text", self.prompt)
            await self._until(self._prompted, m.prompt_timeout_s, "prompt_success")
        self._check()
        await sio.emit("recording-started")

    def _on_audio(self, data: bytes) -> None:
        arrival = time.monotonic()
        pcm = np.frombuffer(bytes(data), dtype="<i2").astype(np.float32) / 32768.0
        self.n_audio += 1
        samples = self._out.push(pcm)
        if len(samples):
            self._audio_since_stop = True
            self._emit(ModelEvent("audio", audio=samples, arrival_mono=arrival))

    def _on_stop_tts(self, *args: object) -> None:
        self.n_stop_tts += 1
        if self._audio_since_stop:
            self._audio_since_stop = False
            self._out = StreamResampler(
                OUTPUT_RATE, INPUT_RATE
            )  # the dropped audio's tail goes too
            self._emit(ModelEvent("interrupted", arrival_mono=time.monotonic()))

    async def _send(self, frame: np.ndarray) -> None:
        pcm = (np.clip(np.asarray(frame, dtype=np.float32), -1.0, 1.0) * 32767.0).astype("<i2")
        await self._sio.emit(
            "audio", json.dumps({"sample_rate": INPUT_RATE, "audio": list(pcm.tobytes())})
        )
        self.n_sent += 1

    async def _goodbye(self) -> None:
        if (
            self._sio is not None and self._sio.connected
        ):  # acknowledged, so it is delivered before the disconnect
            await self._sio.call("recording-stopped", timeout=2.0)

    async def _disconnect(self) -> None:
        if self._sio is not None:
            await asyncio.wait_for(self._sio.disconnect(), 5.0)
