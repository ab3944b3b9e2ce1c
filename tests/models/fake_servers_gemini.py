"""Local stand-in for the Gemini Live API's BidiGenerateContent WebSocket (not Google's service).

Written from the Live API's WebSocket reference and google-genai's `live.py` / `_live_converters.py`:
the client's first message is `{"setup": {...}}`, answered by `{"setupComplete": {}}`; then
`{"realtimeInput": {"audio": {"data": base64 PCM16, "mimeType": "audio/pcm;rate=16000"}}}`.
The server answers with `{"serverContent": {"modelTurn": {"parts": [{"inlineData": {"mimeType":
"audio/pcm;rate=24000", "data": ...}}]}}}`, `{"serverContent": {"outputTranscription": {"text"}}}`,
`{"serverContent": {"inputTranscription": {"text"}}}`, `{"serverContent": {"generationComplete":
true}}`, `{"serverContent": {"turnComplete": true}}` and, when its VAD hears the user during the
answer, `{"serverContent": {"interrupted": true}}`. Served over TLS on the path
`/ws/google.ai.generativelanguage.{version}.GenerativeService.BidiGenerateContent`; the API key
arrives in the `x-goog-api-key` header. The SDK mixes lowerCamelCase and snake_case field names
(e.g. `realtime_input`, `voice_config`); the service's protobuf JSON parser accepts both, so the
stand-in reads every message through `camel()`.

Behind it, a scripted model: each finished user utterance is answered with the next reply, sent
in 200 ms audio messages every 50 ms (faster than real time, like the service) with each word's
transcription just before the audio it starts in; user speech while the answer should still be
playing stops it with `interrupted`.
"""

from __future__ import annotations

import asyncio
import base64
import json
import re
import time
from dataclasses import dataclass, field

import numpy as np
from aiohttp import WSMsgType, web
from fake_servers_common import Heard, Reply, SpeechGate


def camel(obj):
    """Field names as protobuf JSON canonicalises them (snake_case -> lowerCamelCase)."""
    if isinstance(obj, dict):
        return {
            re.sub(r"_([a-z])", lambda m: m.group(1).upper(), k): camel(v) for k, v in obj.items()
        }
    if isinstance(obj, list):
        return [camel(v) for v in obj]
    return obj


def b64bytes(text: str) -> bytes:
    """A protobuf JSON `bytes` field: standard or URL-safe base64, padded or not (the SDK sends
    URL-safe)."""
    text = text.replace("-", "+").replace("_", "/")
    return base64.b64decode(text + "=" * (-len(text) % 4), validate=True)


@dataclass
class FakeGeminiLive:
    replies: list[Reply]
    api_version: str = "v1alpha"
    setups: list[dict] = field(default_factory=list)
    api_keys: list[str] = field(default_factory=list)
    paths: list[str] = field(default_factory=list)
    audio_in: list[tuple[float, str, int]] = field(default_factory=list)  # (t, mimeType, samples)
    other_messages: list[dict] = field(default_factory=list)
    barge_ins: int = 0
    heard: list[dict] = field(default_factory=list)  # per session: digest of the audio received

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_get(
            f"/ws/google.ai.generativelanguage.{self.api_version}.GenerativeService.BidiGenerateContent",
            self.bidi,
        )
        return app

    async def bidi(self, request: web.Request):
        self.paths.append(request.path)
        self.api_keys.append(request.headers.get("x-goog-api-key", ""))
        ws = web.WebSocketResponse(max_msg_size=2**24)
        await ws.prepare(request)
        first = await ws.receive()
        self.setups.append(camel(json.loads(first.data)))
        await ws.send_str(json.dumps({"setupComplete": {}}))
        gate = SpeechGate(16000)
        heard = Heard()
        state = {"task": None, "playing_until": 0.0, "n_reply": 0}
        async for msg in ws:
            if msg.type not in (WSMsgType.TEXT, WSMsgType.BINARY):
                continue
            data = camel(json.loads(msg.data))
            audio = data.get("realtimeInput", {}).get("audio")
            if audio is None:
                self.other_messages.append(data)
                continue
            pcm = np.frombuffer(b64bytes(audio["data"]), dtype="<i2").astype(np.float32) / 32768.0
            heard.add(pcm)
            now = time.monotonic()
            self.audio_in.append((now, audio.get("mimeType", ""), len(pcm)))
            for what, _t in gate.push(pcm):
                answering = state["task"] is not None and not state["task"].done()
                if what == "start" and (answering or state["playing_until"] > now):
                    self.barge_ins += 1
                    if answering:
                        state["task"].cancel()
                    state["playing_until"] = 0.0
                    await ws.send_str(json.dumps({"serverContent": {"interrupted": True}}))
                elif what == "end":
                    await ws.send_str(
                        json.dumps({"serverContent": {"inputTranscription": {"text": "(user)"}}})
                    )
                    reply = self.replies[state["n_reply"] % len(self.replies)]
                    state["n_reply"] += 1
                    state["playing_until"] = now + reply.duration_s
                    state["task"] = asyncio.create_task(self._answer(ws, reply))
        if state["task"] is not None:
            state["task"].cancel()
        self.heard.append(heard.record())
        return ws

    async def _answer(self, ws, reply: Reply) -> None:
        step = int(0.2 * reply.sample_rate)
        pcm16 = (np.clip(reply.samples, -1, 1) * 32767).astype("<i2")
        for i in range(0, len(pcm16), step):
            t0, t1 = i / reply.sample_rate, (i + step) / reply.sample_rate
            for w in reply.words_between(t0, t1):
                await ws.send_str(
                    json.dumps({"serverContent": {"outputTranscription": {"text": " " + w}}})
                )
            part = {
                "inlineData": {
                    "mimeType": f"audio/pcm;rate={reply.sample_rate}",
                    "data": base64.b64encode(pcm16[i : i + step].tobytes()).decode(),
                }
            }
            await ws.send_str(json.dumps({"serverContent": {"modelTurn": {"parts": [part]}}}))
            await asyncio.sleep(0.05)
        await ws.send_str(json.dumps({"serverContent": {"generationComplete": True}}))
        await ws.send_str(json.dumps({"serverContent": {"turnComplete": True}}))
