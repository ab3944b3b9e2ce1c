"""Fun-Audio-Chat through its official web demo server (aiohttp WebSocket `/api/chat`).

Protocol, as read in FunAudioLLM/Fun-Audio-Chat `web_demo/server/server.py` and `protocal.py` and
the demo client (`web_demo/client/src/protocol/*.ts`, `pages/Conversation/*`):

- binary messages, first byte = kind (`fdeval.models.kindbyte`): the server sends the handshake
  `00 00 00` (kind, version 0, model 0) once the session is set up; the demo client waits for it
  before it sends anything, and so does this adapter.
- 0x04 metadata, client -> server: UTF-8 JSON `{"system_prompt": str}`; it REPLACES the server's
  whole system prompt for the session (`SPOKEN_S2M_PROMPT` by default).
- 0x01 audio, both ways: pieces of one Ogg/Opus stream, 24 kHz mono (`kindbyte.OpusCodec`). The
  server decodes user audio only while it is recording, and sends its answer in 40 ms Opus
  frames every 10 ms (4x faster than real time); the orchestrator's playback queues it.
- 0x02 text, server -> client: the answer's text pieces, paced at 200 ms from the moment its
  first audio frame went out; also the status strings "[Processing...]" (generation started) and
  "\\n[Final: ...]" (the cleaned full text, when it differs), which are not the model's speech
  and are dropped here.
- 0x03 control + action byte, client -> server: 0 START, 1 END_TURN, 2 PAUSE, 3 RESTART. PAUSE
  (like END_TURN) stops recording and runs one generation on all audio recorded since the last
  START (the model is turn-based: it answers the whole user turn). START resumes recording,
  drops the recorded audio, and clears the server's queued output; the server only handles it
  once it is idle (after the running generation and its audio were sent).
- 0x05 error, server -> client: "Processing failed: ..." -> `FunAudioChatServerError`.

The demo client leaves START / PAUSE to a button. Here the harness presses it, with Silero VAD on
the user audio this adapter sends (Instruct-FD A.8): START at a user speech onset, PAUSE once the
user has been silent `pause_after_silence_s` (longer than the pauses inside one user turn of the
built-in Instruct-FD set, 2 s at most, so a turn is answered as a whole). Two details make the
start of each user turn reach the model: the server ignores audio while paused, and handles
START asynchronously, so after START the adapter holds the user audio for `start_settle_s` and
then sends it from `preroll_s` before the detected onset (the onset is found ~64 ms into the
speech). While paused, the user stream (silence) is still sent, as the demo client does.

A barge-in is a START while the model's answer is still playing. The server has already sent
that answer (faster than real time) and the demo client keeps playing what it received, so by
default nothing is flushed (`flush_on_start: false`); `flush_on_start: true` turns each START
that follows model audio into `ModelEvent("interrupted")` (the client drops the answer's unplayed
rest) for an experiment that wants START to silence the model at once.

Text placement: the server paces text by wall time since its answer's first audio frame, not
by the audio, so each piece is placed at its arrival on the session clock (where the official
client shows it), with a negative `offset_s` against the audio queued ahead of it. Word times from
it are approximate; prefer ASR on the model channel for Fun-Audio-Chat. Text rule `text_stream =
"pieces"`: each piece is one decoded BPE token (`FunaudioChatStreamer.put` in the server).

`turn_silence_s` is 5.0 (Instruct-FD's content-absence timeout for this model). The prompt sent is
`base_prompt` (default: the server's instruction to produce both text and speech tokens, the part
of its default prompt the model needs to speak), plus a space and the test instruction.

Tested against a local stand-in server written from that upstream code
(`tests/models/fake_servers_funaudiochat.py`), not against the real model.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from typing import Any

import numpy as np

from fdeval.audio.resample import StreamResampler
from fdeval.audio.vad import SileroVAD
from fdeval.models import kindbyte
from fdeval.models.base import ModelEvent, server_identity
from fdeval.models.network import NetworkModel, ServerConnectionError, WebSocketSession, plain

log = logging.getLogger("fdeval")

RATE = kindbyte.SAMPLE_RATE  # 24 kHz, both ways
ERROR = 0x05
START, END_TURN, PAUSE, RESTART = 0, 1, 2, 3
# utils/constant.py: DEFAULT_S2M_PROMPT, the first sentence of the server's default prompt.
S2M_PROMPT = "You are asked to generate both text and speech tokens at the same time."
STATUS_TEXTS = ("[Processing...]",)


class FunAudioChatServerError(ServerConnectionError):
    """The server failed or dropped the session (an infrastructure error)."""


class FunAudioChat(NetworkModel):
    """Client of Fun-Audio-Chat demo servers (`python -m web_demo.server.server`): a fixed
    host/port, or (`port: null` and a `server:` block) servers started by a `ServerPool`."""

    sample_rate = RATE
    frame_s = 0.04  # the demo client's Ogg pages: two 20 ms Opus frames
    clock = "realtime"
    text_stream = "pieces"
    client_modules = ("aiohttp", "sphn")
    client_extra = "funaudiochat"

    def __init__(
        self,
        name: str = "funaudiochat",
        host: str = "127.0.0.1",
        port: int | None = 11235,
        base_prompt: str | None = S2M_PROMPT,
        checkpoint: str = "FunAudioLLM/Fun-Audio-Chat-8B",
        vad_threshold: float = 0.5,
        pause_after_silence_s: float = 2.5,
        preroll_s: float = 0.3,
        start_settle_s: float = 0.1,
        flush_on_start: bool = False,
        connect_timeout_s: float = 30.0,
        handshake_timeout_s: float = 60.0,
        turn_silence_s: float | None = 5.0,
        server: dict[str, Any] | None = None,
        case_retries: int = 2,
        checkpoint_label: str | None = None,
    ):
        self.name = name
        self.require_clients()
        self.checkpoint_label = checkpoint_label
        self.base_prompt = base_prompt
        self.checkpoint = checkpoint
        self.vad_threshold = float(vad_threshold)
        self.pause_after_silence_s = float(pause_after_silence_s)
        self.preroll_s, self.start_settle_s = float(preroll_s), float(start_settle_s)
        self.flush_on_start = bool(flush_on_start)
        self.connect_timeout_s, self.handshake_timeout_s = (
            float(connect_timeout_s),
            float(handshake_timeout_s),
        )
        self.turn_silence_s = turn_silence_s
        self.server = plain(server)
        self.case_retries = int(case_retries)
        self._init_server(self.server, host, port, self.probe)
        self._vad = SileroVAD()

    @property
    def url(self) -> str:
        return f"ws://{self.host}:{self.port}/api/chat"

    def identity(self) -> dict[str, Any]:
        return server_identity(
            {
                "name": self.name,
                "adapter": "funaudiochat-kindbyte-ws",
                "checkpoint": self.checkpoint,
                "base_prompt": self.base_prompt,
                "vad_threshold": self.vad_threshold,
                "pause_after_silence_s": self.pause_after_silence_s,
                "preroll_s": self.preroll_s,
                "start_settle_s": self.start_settle_s,
                "flush_on_start": self.flush_on_start,
                "turn_silence_s": self.turn_silence_s,
                "sample_rate": self.sample_rate,
                "frame_s": self.frame_s,
            },
            self.external,
            self.checkpoint_label,
        )

    def prompt(self, instruction: str | None) -> str | None:
        if not instruction:
            return self.base_prompt
        return f"{self.base_prompt} {instruction}" if self.base_prompt else instruction

    async def probe(
        self, host: str | None = None, port: int | None = None, timeout_s: float = 30.0
    ) -> None:
        """Readiness check for a server launcher: /api/chat sends its 00 00 00 handshake."""
        aiohttp = self.client_module("aiohttp")
        url = f"ws://{host or self.host}:{port or self.port}/api/chat"
        try:
            async with aiohttp.ClientSession() as http, http.ws_connect(url) as ws:
                msg = await ws.receive(timeout=timeout_s)
        except (aiohttp.ClientError, OSError) as e:
            raise FunAudioChatServerError(
                f"funaudiochat server {url}: not reachable ({type(e).__name__}: {e})"
            ) from None
        if (
            msg.type != aiohttp.WSMsgType.BINARY
            or not msg.data
            or msg.data[0] != kindbyte.HANDSHAKE
        ):
            raise FunAudioChatServerError(
                f"funaudiochat server {url}: no handshake ({msg.type.name})"
            )

    def session(self, instruction: str | None, seed: int) -> FunAudioChatSession:
        return FunAudioChatSession(self, self.prompt(instruction))


class FunAudioChatSession(WebSocketSession):
    error_type = FunAudioChatServerError
    send_errors = (ConnectionError, RuntimeError)
    model: FunAudioChat

    def __init__(self, model: FunAudioChat, prompt: str | None):
        super().__init__(model)
        self.prompt = prompt
        self._codec = kindbyte.OpusCodec(RATE)
        # the user side: VAD on what is sent, the START / PAUSE state, recent audio for the pre-roll
        self._vad = model._vad.stream(
            threshold=model.vad_threshold, min_silence_s=model.pause_after_silence_s
        )
        self._to_vad = StreamResampler(RATE, 16000)
        self._state = "paused"  # paused | settling | talking
        self._settle_until = 0.0
        self._replay_from = 0
        self._hist = np.zeros(0, np.float32)
        self._hist_start = 0  # stream index of self._hist[0]
        self._n_in = 0
        self._keep = int((model.preroll_s + 2.0) * RATE)
        # the model side: where the audio received so far ends when played (monotonic), for text placement
        self._audio_end = 0.0
        self._audio_since_flush = False
        self.controls: list[tuple[float, int]] = []  # (monotonic, action) sent
        self.n_audio_messages = 0

    @property
    def url(self) -> str:
        return f"ws://{self.host}:{self.port}/api/chat"

    def closed_why(self, code: int | None) -> str:
        return f"closed the session (code {code})"

    async def _connect(self) -> None:
        m = self.model
        ws = await self._open_ws(self.url, m.connect_timeout_s, 16 * 2**20)
        try:
            first = await asyncio.wait_for(ws.receive(), m.handshake_timeout_s)
        except TimeoutError:
            raise self.error(f"no handshake within {m.handshake_timeout_s:g} s") from None
        if first.type != self.WSMsgType.BINARY or first.data[:1] != bytes((kindbyte.HANDSHAKE,)):
            raise self.error(f"expected the 0x00 handshake, got {first.type} {first.data!r:.40}")
        if self.prompt is not None:
            meta = json.dumps({"system_prompt": self.prompt}, ensure_ascii=False).encode("utf-8")
            await ws.send_bytes(kindbyte.encode(kindbyte.METADATA, meta))
        self._start_reader()

    # -- model -> client --------------------------------------------------------------------
    def _on_message(self, msg: Any, arrival: float) -> None:
        if msg.type == self.WSMsgType.BINARY:
            self._handle(*kindbyte.decode(msg.data), arrival)

    def _handle(self, kind: int, payload: bytes, arrival: float) -> None:
        if kind == kindbyte.AUDIO:
            self.n_audio_messages += 1
            pcm = self._codec.decode(payload)
            if len(pcm):
                self._audio_end = max(arrival, self._audio_end) + len(pcm) / RATE
                self._audio_since_flush = True
                self._emit(ModelEvent("audio", audio=pcm, arrival_mono=arrival))
        elif kind == kindbyte.TEXT:
            text = payload.decode("utf-8", errors="replace")
            if (
                not text.strip()
                or text.strip() in STATUS_TEXTS
                or text.lstrip().startswith("[Final:")
            ):
                return
            # shown on arrival: back from where the audio queued so far ends
            offset = arrival - max(arrival, self._audio_end)
            self._emit(ModelEvent("text", text=text, offset_s=offset, arrival_mono=arrival))
        elif kind == ERROR:
            raise self.error(f"reported: {payload.decode('utf-8', errors='replace')}")
        elif kind != kindbyte.HANDSHAKE:
            log.debug("funaudiochat: ignored message kind 0x%02x", kind)

    # -- client -> model --------------------------------------------------------------------
    async def _control(self, action: int) -> None:
        await self._ws.send_bytes(kindbyte.encode(kindbyte.CONTROL, bytes((action,))))
        self.controls.append((time.monotonic(), action))

    async def _audio(self, pcm: np.ndarray) -> None:
        data = self._codec.encode(pcm)
        if data:
            await self._ws.send_bytes(kindbyte.encode(kindbyte.AUDIO, data))

    async def _send(self, frame: np.ndarray) -> None:
        frame = np.asarray(frame, dtype=np.float32)
        self._hist = np.concatenate([self._hist, frame])
        self._n_in += len(frame)
        # keep the pre-roll (and, while settling, everything since it: it is replayed)
        cut = len(self._hist) - self._keep
        if self._state == "settling":
            cut = min(cut, self._replay_from - self._hist_start)
        if cut > 0:
            self._hist_start += cut
            self._hist = self._hist[cut:]
        now = time.monotonic()
        sent = False  # whether this frame went out already
        for ev in self._vad.push(self._to_vad.push(frame)):
            if ev.kind == "onset" and self._state == "paused":
                await self._control(START)
                self._state, self._settle_until = "settling", now + self.model.start_settle_s
                onset_n = int(round(ev.t_s * RATE))
                self._replay_from = max(
                    self._hist_start, onset_n - int(self.model.preroll_s * RATE)
                )
                if self.model.flush_on_start and self._audio_since_flush:
                    self._audio_since_flush = False
                    self._audio_end = now
                    self._emit(ModelEvent("interrupted", arrival_mono=now))
            elif ev.kind == "offset" and self._state != "paused":
                if self._state == "settling":
                    await self._replay()
                elif not sent:
                    await self._audio(frame)
                sent = True
                await self._control(PAUSE)
                self._state = "paused"
        if not sent:
            if self._state != "settling":
                await self._audio(frame)
            elif now >= self._settle_until:
                await self._replay()
                self._state = "talking"

    async def _replay(self) -> None:
        await self._audio(self._hist[self._replay_from - self._hist_start :])
