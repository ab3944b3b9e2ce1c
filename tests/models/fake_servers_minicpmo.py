"""Local stand-in for the MiniCPM-o-Demo worker's `/ws/duplex` endpoint (not the real model).

Written from OpenBMB/MiniCPM-o-Demo `worker.py` (`duplex_ws`) and `core/schemas/duplex.py`:
JSON text frames; `prepare` {system_prompt, config, ...} -> `prepared` {prompt_length};
`audio_chunk` {audio_base64: float32 16 kHz} -> one `result` per chunk with the
`DuplexGenerateResult` fields (is_listen, text, audio_data = float32 24 kHz base64, end_of_turn,
current_time, cost_*); a missing `audio_base64` -> `error` "Missing audio_base64"; `stop` ->
`stopped`. A busy worker closes before accepting, which uvicorn turns into an HTTP 403
(`busy="403"`); a gateway accepts and closes with 1013 (`busy="1013"`).

Behind it, a scripted model: it listens until the user's utterance ends, then speaks its reply
one second per result; user speech while it speaks makes it stop (listen), as the real model may.
"""

from __future__ import annotations

import base64
import json
import time
from dataclasses import dataclass, field

import numpy as np
from aiohttp import WSMsgType, web
from fake_servers_common import Heard, Reply, SpeechGate, append_record


@dataclass
class FakeMiniCPMOWorker:
    replies: list[Reply]
    busy: str | None = None  # None | "403" | "1013"
    messages: list[dict] = field(
        default_factory=list
    )  # every client message (audio replaced by its length)
    chunk_times: list[float] = field(default_factory=list)  # monotonic arrival of each audio_chunk
    session_ids: list[str] = field(default_factory=list)
    barge_ins: int = 0
    protocol_errors: list[str] = field(default_factory=list)
    heard: list[dict] = field(
        default_factory=list
    )  # per session: digest of the audio chunks received
    record: str | None = None  # also appended here, one JSON line per session

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_get("/ws/duplex", self.duplex_ws)
        app.router.add_get("/health", self.health)
        return app

    async def health(self, request: web.Request):
        # worker.py `health`: WorkerHealthResponse
        return web.json_response(
            {"status": "healthy", "worker_status": "idle", "gpu_id": 0, "model_loaded": True}
        )

    async def duplex_ws(self, request: web.Request):
        if self.busy == "403":
            return web.Response(status=403)
        ws = web.WebSocketResponse(max_msg_size=128 * 2**20)
        await ws.prepare(request)
        if self.busy == "1013":
            await ws.close(code=1013, message=b"Worker busy after waiting 5s: duplex_active")
            return ws
        self.session_ids.append(request.query.get("session_id", ""))
        gate = SpeechGate(16000)
        heard = Heard()
        prepared = False
        reply: Reply | None = None
        pos = 0.0
        n_reply = 0
        chunk_idx = 0
        async for raw in ws:
            if raw.type != WSMsgType.TEXT:
                self.protocol_errors.append(f"non-text frame {raw.type}")
                continue
            msg = json.loads(raw.data)
            kind = msg.get("type", "")
            if kind == "prepare":
                self.messages.append(msg)
                prepared = True
                prompt = msg.get("system_prompt", "You are a helpful assistant.")
                await ws.send_json({"type": "prepared", "prompt_length": len(prompt)})
            elif kind == "audio_chunk":
                self.chunk_times.append(time.monotonic())
                if not prepared:
                    self.protocol_errors.append("audio_chunk before prepare")
                b64 = msg.get("audio_base64")
                if not b64:
                    await ws.send_json({"type": "error", "error": "Missing audio_base64"})
                    continue
                audio = np.frombuffer(base64.b64decode(b64), dtype=np.float32)
                heard.add(audio)
                self.messages.append({**msg, "audio_base64": len(audio)})
                for what, _t in gate.push(audio):
                    if what == "start" and reply is not None:
                        reply, self.barge_ins = (
                            None,
                            self.barge_ins + 1,
                        )  # barge-in: stop and listen
                    elif what == "end" and reply is None:
                        reply, pos = self.replies[n_reply % len(self.replies)], 0.0
                        n_reply += 1
                result = {"is_listen": True, "text": "", "audio_data": None, "end_of_turn": False}
                if reply is not None:
                    sr = reply.sample_rate
                    piece = reply.samples[int(pos * sr) : int((pos + 1.0) * sr)]
                    words = reply.words_between(pos, pos + 1.0)
                    pos += 1.0
                    end = pos >= reply.duration_s
                    result = {
                        "is_listen": False,
                        "text": "".join(" " + w for w in words),
                        "audio_data": base64.b64encode(piece.astype(np.float32).tobytes()).decode(),
                        "end_of_turn": end,
                    }
                    if end:
                        reply = None
                await ws.send_json(
                    {
                        "type": "result",
                        **result,
                        "current_time": chunk_idx,
                        "cost_all_ms": 12.0,
                        "server_send_ts": time.time(),
                        "wall_clock_ms": 15.0,
                        "kv_cache_length": 100,
                    }
                )
                chunk_idx += 1
            elif kind == "stop":
                self.messages.append(msg)
                await ws.send_json({"type": "stopped"})
                break
            else:
                self.messages.append(msg)
                await ws.send_json({"type": "error", "error": f"Unknown message type: {kind}"})
        self.heard.append(heard.record())
        append_record(self.record, heard.record())
        await ws.close()
        return ws
