"""Local stand-in for the Freeze-Omni demo server (not the real model).

Written from VITA-MLLM/Freeze-Omni `bin/server.py`, `web/parms.py` and `web/resources/demo.html`:
Socket.IO over HTTPS (self-signed certificate); on connect `too_many_users` when full (then
every event of that client is answered by a disconnect); `prompt_text` -> `prompt_success`;
`recording-started` / `recording-stopped` -> `stop_tts` (the real server emits it twice on
start); `audio` = JSON string {"sample_rate", "audio": [int16 LE bytes]}: first one queued TTS
segment (raw int16 24 kHz bytes) goes out per incoming event, then `stop_tts` if an interruption
happened since, then the input is consumed.

Behind it, a scripted model: it answers each finished user utterance with its reply cut in 0.5 s
TTS segments; user speech while the reply should still be playing (by the server's reckoning)
interrupts it: the queue is cleared and `stop_tts` goes out with the next event, as in the real
server (`GlobalParams.interrupt` -> `tts_over_time`).
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field

import numpy as np
import socketio
from aiohttp import web
from fake_servers_common import Heard, Reply, SpeechGate, append_record


@dataclass
class _User:
    gate: SpeechGate = field(default_factory=lambda: SpeechGate(16000))
    queue: list[bytes] = field(default_factory=list)
    pending_stop: bool = False
    playing_until: float = 0.0
    n_reply: int = 0
    heard: Heard = field(default_factory=Heard)


@dataclass
class FakeFreezeOmniServer:
    replies: list[Reply]
    max_users: int = 1
    segment_s: float = 0.5
    log: list[tuple[str, object]] = field(default_factory=list)  # (event, detail) in arrival order
    audio_events: list[tuple[float, int, int]] = field(
        default_factory=list
    )  # (t, sample_rate, n bytes)
    barge_ins: int = 0
    segments_sent: int = 0
    users: dict[str, _User] = field(default_factory=dict)
    heard: list[dict] = field(
        default_factory=list
    )  # per session: digest of the audio events received
    record: str | None = None  # also appended here, one JSON line per session

    def app(self) -> web.Application:
        sio = self.sio = socketio.AsyncServer(async_mode="aiohttp", max_http_buffer_size=2**24)
        app = web.Application()
        sio.attach(app)
        app.router.add_get("/", self.index)
        sio.on("connect", self.connect)
        sio.on("disconnect", self.disconnect)
        sio.on("prompt_text", self.prompt_text)
        sio.on("recording-started", self.recording_started)
        sio.on("recording-stopped", self.recording_stopped)
        sio.on("audio", self.audio)
        return app

    async def index(self, request):  # render_template('demo.html')
        return web.Response(text="<html>demo</html>", content_type="text/html")

    async def connect(self, sid, environ, auth=None):
        self.log.append(("connect", sid))
        if len(self.users) >= self.max_users:
            await self.sio.emit("too_many_users", to=sid)
            return
        self.users[sid] = _User()

    async def disconnect(self, sid, *reason):
        self.log.append(("disconnect", sid))
        user = self.users.pop(sid, None)
        if user is not None:
            self.heard.append(user.heard.record())
            append_record(self.record, user.heard.record())

    async def _known(self, sid) -> _User | None:
        user = self.users.get(sid)
        if user is None:
            await self.sio.disconnect(sid)
        return user

    async def prompt_text(self, sid, text):
        self.log.append(("prompt_text", text))
        if await self._known(sid):
            await self.sio.emit("prompt_success", to=sid)

    async def recording_started(self, sid):
        self.log.append(("recording-started", None))
        if await self._known(sid):
            await self.sio.emit("stop_tts", to=sid)
            self.users[sid] = _User(heard=self.users[sid].heard)
            await self.sio.emit("stop_tts", to=sid)

    async def recording_stopped(self, sid):
        self.log.append(("recording-stopped", None))
        if await self._known(sid):
            self.users[sid] = _User(heard=self.users[sid].heard)
            await self.sio.emit("stop_tts", to=sid)

    async def audio(self, sid, data):
        user = await self._known(sid)
        if user is None:
            return
        if not self.audio_events:
            self.log.append(("audio", None))
        now = time.monotonic()
        if user.queue:
            if user.playing_until < now:  # first segment of a reply: the client starts playing now
                user.playing_until = now + sum(len(s) for s in user.queue) / 2 / 24000
            await self.sio.emit("audio", user.queue.pop(0), to=sid)
            self.segments_sent += 1
        if user.pending_stop:
            user.pending_stop = False
            await self.sio.emit("stop_tts", to=sid)
        msg = json.loads(data)
        pcm = np.frombuffer(bytes(msg["audio"]), dtype="<i2").astype(np.float32) / 32768.0
        user.heard.add(pcm)
        self.audio_events.append((now, msg["sample_rate"], len(msg["audio"])))
        for what, _t in user.gate.push(pcm):
            if what == "start" and (user.queue or user.playing_until > now):
                self.barge_ins += 1
                user.queue.clear()
                user.playing_until = 0.0
                user.pending_stop = True
            elif what == "end":
                reply = self.replies[user.n_reply % len(self.replies)]
                user.n_reply += 1
                seg = int(self.segment_s * reply.sample_rate)
                pcm16 = (np.clip(reply.samples, -1, 1) * 32767).astype("<i2")
                user.queue = [pcm16[i : i + seg].tobytes() for i in range(0, len(pcm16), seg)]
