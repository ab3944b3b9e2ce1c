"""Local stand-in for the Fun-Audio-Chat web demo server (not the real model).

Written from FunAudioLLM/Fun-Audio-Chat `web_demo/server/server.py` and `protocal.py`: aiohttp
WebSocket `/api/chat`; handshake `00 00 00` first; binary kind-byte messages; the receive loop
decodes 0x01 Ogg/Opus (sphn, 24 kHz) only while recording, sets recording off on 0x03 PAUSE /
END_TURN and on at START, and queues the signal for the inference loop; 0x04 metadata
{"system_prompt"} replaces the session prompt. The inference loop handles one signal at a time:
PAUSE with recorded audio -> "[Processing...]" text, then the answer as 40 ms Opus frames sent
every 10 ms, its text pieces every 200 ms from the first audio frame, and "\\n[Final: ...]"
when the cleaned text differs from the streamed pieces; START -> drop the recorded audio and the
queued output, fresh Opus reader. While an answer is being sent the loop is busy, so a START
waits until the answer went out, as in the real server.

Behind it, a scripted model: every PAUSE with recorded audio is answered with the next reply.
"""

from __future__ import annotations

import asyncio
import json
import time
from dataclasses import dataclass, field

import numpy as np
import sphn
from aiohttp import WSMsgType, web
from fake_servers_common import Heard, Reply, append_record

START, END_TURN, PAUSE, RESTART = 0, 1, 2, 3


@dataclass
class FakeFunAudioChatServer:
    replies: list[Reply]
    final_text: bool = True
    log: list[tuple[float, str, object]] = field(default_factory=list)  # (monotonic, what, detail)
    turns_heard: list[float] = field(
        default_factory=list
    )  # seconds of user audio each answer was computed on
    prompts: list[str] = field(default_factory=list)
    audio_before_handshake: int = 0
    heard: list[dict] = field(
        default_factory=list
    )  # per session: digest of the audio recorded (what it answers)
    record: str | None = None  # also appended here, one JSON line per session

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_get("/api/chat", self.handle_chat)
        return app

    async def handle_chat(self, request: web.Request):
        ws = web.WebSocketResponse(heartbeat=30.0)
        await ws.prepare(request)
        st = {
            "recording": True,
            "pcm": [],
            "reader": sphn.OpusStreamReader(24000),
            # what the client sent, decoded in arrival order by a reader of the receive loop's own,
            # fresh at each START as it arrives: the inference loop replaces the server's reader
            # only when it gets to the START (after a running answer), so audio in between is
            # decoded by the old one, a timing the client does not control
            "heard_reader": sphn.OpusStreamReader(24000),
            "n_reply": 0,
            "busy": False,  # the inference loop is sending an answer (a START then waits for it)
            "writer": sphn.OpusStreamWriter(
                24000
            ),  # one output stream per connection, as the server's encode thread
            "heard": Heard(),
        }
        signals: asyncio.Queue = asyncio.Queue()
        prompt = ["(server default)"]

        async def recv_loop():
            async for msg in ws:
                if msg.type != WSMsgType.BINARY or not msg.data:
                    continue
                kind, payload = msg.data[0], msg.data[1:]
                if kind == 0x01:
                    self.log.append((time.monotonic(), "audio", len(payload)))
                    if st["recording"]:
                        pcm = st["reader"].append_bytes(payload)
                        if pcm is not None and len(pcm):
                            st["pcm"].append(np.asarray(pcm, np.float32))
                        sent = st["heard_reader"].append_bytes(payload)
                        if sent is not None and len(sent):
                            st["heard"].add(sent)
                elif kind == 0x03:
                    action = payload[0]
                    self.log.append((time.monotonic(), "control", action))
                    if action in (PAUSE, END_TURN):
                        st["recording"] = False
                        await signals.put("pause")
                    elif action == START:
                        st["recording"] = True
                        st["heard_reader"] = sphn.OpusStreamReader(24000)
                        if not st["busy"]:
                            # an idle loop takes the START at once: done here, so that audio this
                            # loop reads before the inference loop runs again is not dropped with
                            # the old recording (a wall-clock race the real server's idle loop,
                            # waiting on its queue, does not have)
                            st["pcm"], st["reader"], st["reset"] = (
                                [],
                                sphn.OpusStreamReader(24000),
                                True,
                            )
                        await signals.put("start")
                elif kind == 0x04:
                    meta = json.loads(payload.decode("utf-8"))
                    self.log.append((time.monotonic(), "metadata", meta))
                    if isinstance(meta, dict) and "system_prompt" in meta:
                        prompt[0] = meta["system_prompt"]
                        self.prompts.append(meta["system_prompt"])

        async def inference_loop():
            while not ws.closed:
                try:
                    signal = await asyncio.wait_for(signals.get(), 0.1)
                except TimeoutError:
                    continue
                if signal == "start":
                    if not st.pop("reset", False):  # a START that waited for an answer to go out
                        st["pcm"], st["reader"] = [], sphn.OpusStreamReader(24000)
                    if st.get("texts") is not None:
                        st["texts"].cancel()  # the real server empties its text queue
                elif signal == "pause" and st["pcm"]:
                    heard = sum(len(p) for p in st["pcm"]) / 24000
                    self.turns_heard.append(heard)
                    reply = self.replies[st["n_reply"] % len(self.replies)]
                    st["n_reply"] += 1
                    st["busy"] = True
                    try:
                        st["texts"] = await self._answer(ws, reply, st["writer"])
                    finally:
                        st["busy"] = False

        await ws.send_bytes(bytes([0x00, 0, 0]))
        self.log.append((time.monotonic(), "handshake", None))
        tasks = [asyncio.create_task(recv_loop()), asyncio.create_task(inference_loop())]
        try:
            await tasks[0]
        finally:
            tasks[1].cancel()
            self.heard.append(st["heard"].record())
            append_record(self.record, st["heard"].record())
        return ws

    async def _answer(self, ws, reply: Reply, writer) -> asyncio.Task | None:
        """Send the answer's audio (the loop is busy meanwhile); its text keeps flowing after."""
        await ws.send_bytes(b"\x02" + b"[Processing...]")
        frame = 960  # 40 ms
        frames = []
        for i in range(0, len(reply.samples), frame):
            chunk = reply.samples[i : i + frame]
            if len(chunk) < frame:
                chunk = np.concatenate([chunk, np.zeros(frame - len(chunk), np.float32)])
            data = writer.append_pcm(chunk)
            if data:
                frames.append(bytes(data))
        words = [w for w, _ in reply.words]

        async def texts():
            for i, w in enumerate(words):
                await ws.send_bytes(b"\x02" + (w if i == 0 else " " + w).encode())
                await asyncio.sleep(0.2)
            if self.final_text:
                await ws.send_bytes(b"\x02" + ("\n[Final: " + " ".join(words) + "]").encode())

        text_task = None
        for data in frames:
            await ws.send_bytes(b"\x01" + data)
            if text_task is None:
                text_task = asyncio.create_task(texts())
            await asyncio.sleep(0.010)
        return text_task
