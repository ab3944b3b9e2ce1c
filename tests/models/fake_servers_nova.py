"""Local stand-in for Amazon Bedrock's `InvokeModelWithBidirectionalStream` with Nova 2 Sonic behind
it (a scripted model, not Amazon's service or model).

Transport, as the real client (`aws-sdk-bedrock-runtime` over CRT) speaks it (docs/reference:
hosted-realtime.md, sections 4 and 7): TLS with ALPN `h2`, one HTTP/2 `POST
/model/{modelId}/invoke-with-bidirectional-stream` per session (the model id URL-encoded, e.g.
`amazon.nova-2-sonic-v1%3A0`) with a SigV4 `authorization` header (recorded, never verified),
answered `:status 200`, `content-type: application/vnd.amazon.eventstream`; both bodies are AWS
event streams and the response stays open while the client sends.

Frames (the AWS event stream format): total length, headers length, CRC32 of those 8 bytes,
headers, payload, CRC32 of everything before it. Incoming frames are decoded with botocore's
`EventStreamBuffer` (an implementation independent of `encode_message` here). Every client frame is
a *signed envelope*: headers `:date` (timestamp) and `:chunk-signature` (bytes), its payload the
inner message `{":message-type": "event", ":event-type": "chunk", ":content-type":
"application/json"}` with body `{"bytes": "<base64 of the JSON event>"}`; an envelope with an empty
payload ends the client's input. Server events are unsigned `chunk` messages with the same body.

Protocol checks (`problems`, one line each): `sessionStart` first, then `promptStart`; the same
`promptName` on every later event (`sessionEnd{}` carries none); exactly one USER AUDIO content,
16 kHz 16-bit mono base64 LPCM, `audioInput` only inside it; close order audio `contentEnd` ->
`promptEnd` -> `sessionEnd`, then the empty envelope.

The scripted model hears the user with `SpeechGate` and answers each finished utterance with the
next `Reply`, as the AWS output-events guide orders a response: per answer a `completionStart`,
the user's FINAL text (ASR), the assistant's SPECULATIVE text, the AUDIO content (one
`audioOutput` of 200 ms of 24 kHz LPCM every 50 ms, faster than real time), the assistant's FINAL
text, a `usageEvent` and, once the audio has played by the server's reckoning, `completionEnd`.
User speech while an answer is still being sent or playing stops it: the open AUDIO content ends
with `stopReason: "INTERRUPTED"`, an assistant text `{ "interrupted" : true }` follows, then the
usage and `completionEnd{stopReason: "INTERRUPTED"}`.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import contextlib
import datetime
import hashlib
import json
import re
import struct
import threading
import time
import urllib.parse
import uuid
import zlib
from collections import Counter
from pathlib import Path
from typing import Any, Mapping

import h2.config
import h2.connection
import h2.errors
import h2.events
import h2.exceptions
import numpy as np
from botocore.eventstream import EventStreamBuffer, EventStreamError
from fake_servers_common import Heard, Reply, SpeechGate, server_ssl

from fdeval.audio.resample import resample

INPUT_RATE = 16000
OUTPUT_RATE = 24000
BARGE_IN_TEXT = '{ "interrupted" : true }'
EVENTSTREAM = "application/vnd.amazon.eventstream"
PATH = re.compile(r"^/model/([^/?]+)/invoke-with-bidirectional-stream$")
CLIENT_EVENTS = (
    "sessionStart",
    "promptStart",
    "contentStart",
    "textInput",
    "audioInput",
    "toolResult",
    "contentEnd",
    "promptEnd",
    "sessionEnd",
)
CHUNK_HEADERS = {
    ":message-type": "event",
    ":event-type": "chunk",
    ":content-type": "application/json",
}
TOKENS_PER_S = 25.0  # the scripted model's speech-token rate, for usageEvent


# -- event stream frames ---------------------------------------------------------------------------
def _header(name: str, value: str | bytes | datetime.datetime) -> bytes:
    key = name.encode("utf-8")
    if len(key) > 255:
        raise ValueError(f"header name too long: {name!r}")
    out = bytes([len(key)]) + key
    if isinstance(value, str):
        raw = value.encode("utf-8")
        return out + b"\x07" + struct.pack(">H", len(raw)) + raw
    if isinstance(value, (bytes, bytearray)):
        return out + b"\x06" + struct.pack(">H", len(value)) + bytes(value)
    if isinstance(value, datetime.datetime):
        return out + b"\x08" + struct.pack(">q", int(value.timestamp() * 1000))
    raise TypeError(f"header {name!r}: unsupported value type {type(value).__name__}")


def encode_message(headers: Mapping[str, str | bytes | datetime.datetime], payload: bytes) -> bytes:
    """One AWS event stream message. Header values: str (type 7, string), bytes (type 6, byte
    array), datetime (type 8, timestamp in ms)."""
    head = b"".join(_header(k, v) for k, v in headers.items())
    total = 12 + len(head) + len(payload) + 4
    prelude = struct.pack(">II", total, len(head))
    body = prelude + struct.pack(">I", zlib.crc32(prelude)) + head + payload
    return body + struct.pack(">I", zlib.crc32(body))


def event_payload(event: dict[str, Any]) -> bytes:
    """The JSON body of a `chunk` message: {"bytes": base64 of the event's JSON}."""
    raw = json.dumps(event, separators=(",", ":")).encode("utf-8")
    return json.dumps({"bytes": base64.b64encode(raw).decode("ascii")}).encode("utf-8")


def chunk_message(event: dict[str, Any]) -> bytes:
    """A `chunk` event message (what the server sends; what a client wraps in an envelope)."""
    return encode_message(CHUNK_HEADERS, event_payload(event))


def signed_envelope(
    inner: bytes, when: datetime.datetime | None = None, signature: bytes | None = None
) -> bytes:
    """A client frame as the SDK sends it: `:date` (timestamp) and `:chunk-signature` (bytes)
    around `inner` (b"" ends the input). The signature here is a stand-in value, never checked."""
    when = when or datetime.datetime.now(datetime.timezone.utc)
    signature = signature if signature is not None else hashlib.sha256(inner).digest()
    return encode_message({":date": when, ":chunk-signature": signature}, inner)


def unwrap_chunk(message) -> dict[str, Any]:
    """The JSON event inside a decoded `chunk` message (a botocore EventStreamMessage)."""
    body = json.loads(message.payload)
    return json.loads(base64.b64decode(body["bytes"], validate=True))


# -- one stream = one session ----------------------------------------------------------------------
class _Connection:
    def __init__(self, server: FakeNovaSonic, writer: asyncio.StreamWriter):
        self.server, self.writer = server, writer
        self.h2 = h2.connection.H2Connection(
            h2.config.H2Configuration(client_side=False, header_encoding="utf-8")
        )
        self.window = asyncio.Event()
        self.streams: dict[int, _Session] = {}

    def flush(self) -> None:
        data = self.h2.data_to_send()
        if data and not self.writer.is_closing():
            self.writer.write(data)


class _Session:
    """One POST: the event stream both ways, the protocol checks and the scripted model."""

    def __init__(
        self, server: FakeNovaSonic, conn: _Connection, stream_id: int, record: dict[str, Any]
    ):
        self.server, self.conn, self.sid, self.record = server, conn, stream_id, record
        self.index = len(server.sessions) - 1
        self.buffer = EventStreamBuffer()
        self.outbox = bytearray()
        self.more = asyncio.Event()
        self.closing = self.dead = self.input_ended = False
        self.writer_task = asyncio.create_task(self._writer())
        # protocol state
        self.n_events = 0
        self.prompt_name: str | None = None
        self.contents: dict[str, str] = {}  # contentName -> type, open ones
        self.seen_contents: set[str] = set()
        self.audio_content: str | None = None
        self.audio_contents = 0
        self.audio_closed = self.prompt_ended = self.session_ended = False
        self.counts: Counter[str] = Counter()
        # the scripted model
        self.session_id = str(uuid.uuid4())
        self.gate = SpeechGate(INPUT_RATE)
        self.heard = Heard()
        self.answer: dict[str, Any] | None = None  # the current answer's record
        self.task: asyncio.Task | None = None
        self.playing_until = 0.0
        self.heard_since_answer = 0
        self.total = {
            "input": {"speechTokens": 0, "textTokens": 0},
            "output": {"speechTokens": 0, "textTokens": 0},
        }

    def problem(self, text: str) -> None:
        line = f"session {self.index}: {text}"
        if line not in self.server.problems:
            self.server.problems.append(line)

    # -- outgoing ------------------------------------------------------------------------------
    def send(self, name: str, body: dict[str, Any]) -> None:
        """Queue one server event (the writer sends whole frames, in order, as the windows allow)."""
        if self.closing or self.dead:
            return
        self.outbox += chunk_message({"event": {name: body}})
        self.record["sent"][name] = self.record["sent"].get(name, 0) + 1
        self.more.set()

    async def _writer(self) -> None:
        h2c = self.conn.h2
        try:
            while not self.dead:
                if self.outbox:
                    try:
                        n = min(
                            len(self.outbox),
                            h2c.local_flow_control_window(self.sid),
                            h2c.max_outbound_frame_size,
                        )
                    except h2.exceptions.StreamClosedError:
                        break
                    if n <= 0:
                        self.conn.window.clear()
                        await self.conn.window.wait()
                        continue
                    h2c.send_data(self.sid, bytes(self.outbox[:n]))
                    del self.outbox[:n]
                    self.conn.flush()
                    await self.conn.writer.drain()
                elif self.closing:
                    h2c.end_stream(self.sid)
                    self.conn.flush()
                    break
                else:
                    self.more.clear()
                    await self.more.wait()
        except (ConnectionError, h2.exceptions.ProtocolError):
            pass
        finally:
            self.dead = True

    def ids(self) -> dict[str, Any]:
        return {
            "sessionId": self.session_id,
            "promptName": self.prompt_name,
            "completionId": self.answer["completion_id"] if self.answer else None,
        }

    # -- incoming ------------------------------------------------------------------------------
    def data(self, data: bytes) -> None:
        if self.input_ended and data:
            self.problem("data after the empty envelope that ended the input")
            return
        self.buffer.add_data(data)
        try:
            messages = list(self.buffer)
        except EventStreamError as e:
            self.problem(f"undecodable frame ({type(e).__name__}: {e})")
            self.fail()
            return
        for message in messages:
            self.envelope(message)

    def envelope(self, message) -> None:
        h = message.headers
        if not isinstance(h.get(":date"), int):
            self.problem(f"envelope without a timestamp :date header (headers {sorted(h)})")
        if not isinstance(h.get(":chunk-signature"), bytes):
            self.problem(
                f"envelope without a byte-array :chunk-signature header (headers {sorted(h)})"
            )
        if not message.payload:
            self.end_input("the empty envelope")
            return
        if self.input_ended:
            self.problem("an envelope after the one that ended the input")
            return
        inner = EventStreamBuffer()
        inner.add_data(message.payload)
        try:
            found = list(inner)
        except EventStreamError as e:
            self.problem(f"undecodable inner message ({type(e).__name__}: {e})")
            return
        if len(found) != 1 or inner._data:
            self.problem(
                f"an envelope must hold exactly one message (found {len(found)}, {len(inner._data)} bytes left)"
            )
            return
        (chunk,) = found
        if chunk.headers != CHUNK_HEADERS:
            self.problem(f"inner message headers {chunk.headers!r}, expected {CHUNK_HEADERS!r}")
        try:
            event = unwrap_chunk(chunk)
            ((name, body),) = event["event"].items()
        except (ValueError, KeyError, TypeError, binascii.Error, AttributeError) as e:
            self.problem(f"malformed chunk body ({type(e).__name__}: {e}): {chunk.payload[:80]!r}")
            return
        if not isinstance(body, dict):
            self.problem(f"{name}: the body is not an object")
            return
        self.event(name, body)

    def event(self, name: str, body: dict[str, Any]) -> None:
        n, self.n_events = self.n_events, self.n_events + 1
        self.counts[name] += 1
        self.record["events"][name] = self.counts[name]
        if name != "audioInput":
            self.record["sequence"].append(name)
        if n == 0 and name != "sessionStart":
            self.problem(f"the first event is {name}, not sessionStart")
        if n == 1 and name != "promptStart":
            self.problem(f"the second event is {name}, not promptStart")
        if self.session_ended:
            self.problem(f"{name} after sessionEnd")
        if name not in CLIENT_EVENTS:
            self.problem(f"unknown client event {name}")
            return
        if name == "promptStart":
            if self.prompt_name is not None:
                self.problem("a second promptStart")
            elif not body.get("promptName"):
                self.problem("promptStart without promptName")
            else:
                self.prompt_name = body["promptName"]
                self.record["prompt_name"] = self.prompt_name
            out = body.get("audioOutputConfiguration") or {}
            if out.get("sampleRateHertz", OUTPUT_RATE) != OUTPUT_RATE:
                self.problem(
                    f"audioOutputConfiguration.sampleRateHertz {out.get('sampleRateHertz')}: "
                    f"this stand-in speaks {OUTPUT_RATE} Hz only"
                )
        elif (
            name not in ("sessionStart", "sessionEnd")
            and body.get("promptName") != self.prompt_name
        ):
            self.problem(
                f"{name} with promptName {body.get('promptName')!r}, not {self.prompt_name!r}"
            )
        handler = getattr(self, f"on_{name}", None)
        if handler is not None:
            handler(body)

    def on_sessionStart(self, body: dict[str, Any]) -> None:
        if self.counts["sessionStart"] > 1:
            self.problem("a second sessionStart")
        self.record["session_start"] = body

    def on_contentStart(self, body: dict[str, Any]) -> None:
        cname, kind = body.get("contentName"), body.get("type")
        if self.prompt_ended:
            self.problem("contentStart after promptEnd")
        if not cname or cname in self.seen_contents:
            self.problem(f"contentStart with a missing or reused contentName {cname!r}")
            return
        self.seen_contents.add(cname)
        self.contents[cname] = kind
        if kind == "AUDIO":
            if body.get("role") != "USER":
                self.problem(f"AUDIO contentStart with role {body.get('role')!r}, not USER")
            self.audio_contents += 1
            if self.audio_contents > 1:
                self.problem("more than one USER AUDIO contentStart")
                return
            self.audio_content = cname
            cfg = body.get("audioInputConfiguration") or {}
            want = {
                "mediaType": "audio/lpcm",
                "sampleRateHertz": INPUT_RATE,
                "sampleSizeBits": 16,
                "channelCount": 1,
                "encoding": "base64",
            }
            wrong = {k: cfg.get(k) for k, v in want.items() if cfg.get(k) != v}
            if wrong:
                self.problem(f"audioInputConfiguration {wrong}, expected {want}")
        elif kind == "TEXT":
            if body.get("role") not in ("SYSTEM", "USER", "ASSISTANT"):
                self.problem(f"TEXT contentStart with role {body.get('role')!r}")
        else:
            self.problem(f"contentStart of type {kind!r}")

    def on_textInput(self, body: dict[str, Any]) -> None:
        if self.contents.get(body.get("contentName")) != "TEXT":
            self.problem(f"textInput outside an open TEXT content ({body.get('contentName')!r})")

    def on_contentEnd(self, body: dict[str, Any]) -> None:
        cname = body.get("contentName")
        if cname not in self.contents:
            self.problem(f"contentEnd of a content that is not open ({cname!r})")
            return
        del self.contents[cname]
        if cname == self.audio_content:
            self.audio_closed = True

    def on_promptEnd(self, body: dict[str, Any]) -> None:
        if self.audio_content is None:
            self.problem("promptEnd without any USER AUDIO content")
        elif not self.audio_closed:
            self.problem("promptEnd before the audio contentEnd")
        if self.contents:
            self.problem(f"promptEnd with contents still open: {sorted(self.contents)}")
        self.prompt_ended = True

    def on_sessionEnd(self, body: dict[str, Any]) -> None:
        if not self.prompt_ended:
            self.problem("sessionEnd before promptEnd")
        self.session_ended = True

    def on_audioInput(self, body: dict[str, Any]) -> None:
        cname = body.get("contentName")
        if self.audio_content is None or cname != self.audio_content or self.audio_closed:
            self.problem(f"audioInput outside the open USER AUDIO content ({cname!r})")
            return
        try:
            raw = base64.b64decode(body.get("content", ""), validate=True)
        except (binascii.Error, TypeError, ValueError):
            self.problem("audioInput content is not base64")
            return
        if len(raw) % 2:
            self.problem("audioInput content is not whole 16-bit samples")
            return
        pcm = np.frombuffer(raw, dtype="<i2").astype(np.float32) / 32768.0
        self.heard.add(pcm)
        self.heard_since_answer += len(pcm)
        self.record["audio_frames"] += 1
        self.record["audio_samples"] = self.heard.samples
        self.hear(pcm)

    # -- the scripted model --------------------------------------------------------------------
    def answering(self) -> bool:
        return self.task is not None and not self.task.done()

    def hear(self, pcm: np.ndarray) -> None:
        for what, t in self.gate.push(pcm):
            now = time.monotonic()
            self.record["gate"].append((what, round(t, 3)))
            if what == "start" and (self.answering() or self.playing_until > now):
                self.barge_in()
            elif what == "end" and not self.answering():
                reply = self.server.replies[self.server.n_reply % len(self.server.replies)]
                self.server.n_reply += 1
                self.task = asyncio.create_task(self.speak(reply))

    def usage(self, speech_in: int, text_in: int, speech_out: int, text_out: int) -> None:
        delta = {
            "input": {"speechTokens": speech_in, "textTokens": text_in},
            "output": {"speechTokens": speech_out, "textTokens": text_out},
        }
        for side in delta:
            for k in delta[side]:
                self.total[side][k] += delta[side][k]
        t_in = sum(self.total["input"].values())
        t_out = sum(self.total["output"].values())
        self.send(
            "usageEvent",
            {
                **self.ids(),
                "details": {"delta": delta, "total": json.loads(json.dumps(self.total))},
                "totalInputTokens": t_in,
                "totalOutputTokens": t_out,
                "totalTokens": t_in + t_out,
            },
        )

    def text_block(self, role: str, stage: str, text: str, stop: str = "END_TURN") -> str:
        cid = str(uuid.uuid4())
        self.send(
            "contentStart",
            {
                **self.ids(),
                "contentId": cid,
                "type": "TEXT",
                "role": role,
                "textOutputConfiguration": {"mediaType": "text/plain"},
                "additionalModelFields": json.dumps({"generationStage": stage}),
            },
        )
        self.send("textOutput", {**self.ids(), "contentId": cid, "content": text, "role": role})
        self.send(
            "contentEnd",
            {**self.ids(), "contentId": cid, "type": "TEXT", "role": role, "stopReason": stop},
        )
        return cid

    async def speak(self, reply: Reply) -> None:
        samples = (
            reply.samples
            if reply.sample_rate == OUTPUT_RATE
            else resample(reply.samples, reply.sample_rate, OUTPUT_RATE)
        )
        pcm16 = (np.clip(samples, -1.0, 1.0) * 32767.0).astype("<i2")
        text = " ".join(word for word, _ in reply.words)
        self.answer = {
            "completion_id": str(uuid.uuid4()),
            "text": text,
            "audio_content_id": None,
            "audio_samples": 0,
            "audio_s": 0.0,
            "first_audio_t": None,
            "audio_open": False,
            "ended": None,
        }
        self.record["answers"].append(self.answer)
        self.send("completionStart", self.ids())
        heard_s = self.heard_since_answer / INPUT_RATE
        self.heard_since_answer = 0
        self.text_block("USER", "FINAL", "(user)")
        self.text_block("ASSISTANT", "SPECULATIVE", text)
        self.usage(round(heard_s * TOKENS_PER_S), 0, 0, len(reply.words))
        aid = str(uuid.uuid4())
        self.answer["audio_content_id"] = aid
        self.send(
            "contentStart",
            {
                **self.ids(),
                "contentId": aid,
                "type": "AUDIO",
                "role": "ASSISTANT",
                "audioOutputConfiguration": {
                    "mediaType": "audio/lpcm",
                    "sampleRateHertz": OUTPUT_RATE,
                    "sampleSizeBits": 16,
                    "channelCount": 1,
                    "encoding": "base64",
                    "audioType": "SPEECH",
                },
            },
        )
        self.answer["audio_open"] = True
        step = int(self.server.chunk_s * OUTPUT_RATE)
        for i in range(0, len(pcm16), step):
            part = pcm16[i : i + step]
            self.send(
                "audioOutput",
                {
                    **self.ids(),
                    "contentId": aid,
                    "role": "ASSISTANT",
                    "content": base64.b64encode(part.tobytes()).decode("ascii"),
                },
            )
            if self.answer["first_audio_t"] is None:
                self.answer["first_audio_t"] = time.monotonic()
            self.answer["audio_samples"] += len(part)
            self.answer["audio_s"] = self.answer["audio_samples"] / OUTPUT_RATE
            self.playing_until = self.answer["first_audio_t"] + self.answer["audio_s"]
            await asyncio.sleep(self.server.interval_s)
        self.send(
            "contentEnd",
            {
                **self.ids(),
                "contentId": aid,
                "type": "AUDIO",
                "role": "ASSISTANT",
                "stopReason": "END_TURN",
            },
        )
        self.answer["audio_open"] = False
        self.text_block("ASSISTANT", "FINAL", text)
        self.usage(0, 0, round(self.answer["audio_s"] * TOKENS_PER_S), 0)
        # The completion stays open while its audio plays by the server's reckoning (a barge-in
        # until then still interrupts it).
        await asyncio.sleep(max(0.0, self.playing_until - time.monotonic()))
        self.send("completionEnd", {**self.ids(), "stopReason": "END_TURN"})
        self.answer["ended"] = "completed"

    def barge_in(self) -> None:
        self.server.barge_ins += 1
        answer = self.answer
        if self.task is not None:
            self.task.cancel()
        self.task = None
        self.playing_until = 0.0
        if answer is None:
            return
        answer["ended"] = "interrupted"
        answer["interrupted_at"] = time.monotonic()
        if answer["audio_open"]:
            self.send(
                "contentEnd",
                {
                    **self.ids(),
                    "contentId": answer["audio_content_id"],
                    "type": "AUDIO",
                    "role": "ASSISTANT",
                    "stopReason": "INTERRUPTED",
                },
            )
            answer["audio_open"] = False
        self.text_block("ASSISTANT", "FINAL", BARGE_IN_TEXT, stop="INTERRUPTED")
        self.usage(0, 0, round(answer["audio_s"] * TOKENS_PER_S), 0)
        self.send("completionEnd", {**self.ids(), "stopReason": "INTERRUPTED"})

    # -- the end -------------------------------------------------------------------------------
    def end_input(self, how: str) -> None:
        if self.input_ended:
            return
        self.input_ended = True
        self.record["input_end"] = how
        if how != "the empty envelope":
            self.problem(f"the input ended by {how}, without the empty envelope")
        if not self.session_ended:
            self.problem("the input ended without sessionEnd")
        if self.audio_contents != 1:
            self.problem(f"{self.audio_contents} USER AUDIO contents (exactly one expected)")
        self.stop_answer("closed")
        self.closing = True  # the writer sends what is queued, then ends the response stream
        self.more.set()
        self.finish()

    def stop_answer(self, how: str) -> None:
        if self.answering():
            self.task.cancel()
            if self.answer is not None and self.answer["ended"] is None:
                self.answer["ended"] = how

    def fail(self) -> None:
        """The stream is unusable (undecodable input): reset it."""
        self.stop_answer("reset")
        if not self.dead:
            with contextlib.suppress(h2.exceptions.ProtocolError):
                self.conn.h2.reset_stream(self.sid, h2.errors.ErrorCodes.PROTOCOL_ERROR)
                self.conn.flush()
        self.gone("reset by the stand-in")

    def gone(self, how: str) -> None:
        """The stream or connection went away (reset, connection lost, server stopped)."""
        if not self.input_ended:
            self.problem(f"the stream ended before the client ended its input ({how})")
            self.input_ended = True
        self.stop_answer("reset")
        self.dead = True
        self.more.set()
        self.conn.window.set()
        self.finish()

    def finish(self) -> None:
        self.record["heard"] = self.heard.record()
        self.record["audio_samples"] = self.heard.samples


class FakeNovaSonic:
    """The stand-in server. `FakeNovaSonic(replies, cert_file, key_file)`; `port = await start()` /
    `await stop()` or `async with`; `serve_in_thread(server)` runs it on a loop of its own.

    Records: `sessions` (one dict per accepted POST, updated live), `problems` (protocol errors,
    one line each), `barge_ins`, `connections` (TLS connections accepted), `rejected` (requests
    answered 4xx: (method, path, status))."""

    def __init__(
        self,
        replies: list[Reply],
        cert_file: str | Path,
        key_file: str | Path,
        port: int = 0,
        chunk_s: float = 0.2,
        interval_s: float = 0.05,
    ):
        if not replies:
            raise ValueError("at least one reply")
        self.replies, self.cert_file, self.key_file = list(replies), Path(cert_file), Path(key_file)
        self.port, self.chunk_s, self.interval_s = port, chunk_s, interval_s
        self.sessions: list[dict[str, Any]] = []
        self.problems: list[str] = []
        self.rejected: list[tuple[str, str, int]] = []
        self.barge_ins = 0
        self.connections = 0
        self.n_reply = 0
        self._server: asyncio.AbstractServer | None = None
        self._conns: set[_Connection] = set()
        self._tasks: set[asyncio.Task] = set()

    @property
    def ca_file(self) -> Path:
        """The certificate a client must trust (self-signed: it is its own CA)."""
        return self.cert_file

    def url(self) -> str:
        return f"https://127.0.0.1:{self.port}"

    async def start(self) -> int:
        ctx = server_ssl(self.cert_file, self.key_file)
        ctx.set_alpn_protocols(["h2"])
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", self.port, ssl=ctx)
        self.port = self._server.sockets[0].getsockname()[1]
        return self.port

    async def stop(self) -> None:
        if self._server is None:
            return
        self._server.close()
        for conn in list(self._conns):
            for s in list(conn.streams.values()):
                s.gone("the stand-in stopped")
            with contextlib.suppress(Exception):
                conn.h2.close_connection()
                conn.flush()
            conn.writer.close()
        for t in list(self._tasks):
            t.cancel()
        if self._tasks:
            await asyncio.wait(self._tasks, timeout=5)
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(self._server.wait_closed(), 5)
        self._server = None

    async def __aenter__(self) -> FakeNovaSonic:
        await self.start()
        return self

    async def __aexit__(self, *exc) -> None:
        await self.stop()

    # -- HTTP/2 ------------------------------------------------------------------------------
    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        task = asyncio.current_task()
        self._tasks.add(task)
        conn = _Connection(self, writer)
        self._conns.add(conn)
        try:
            ssl_object = writer.get_extra_info("ssl_object")
            alpn = ssl_object.selected_alpn_protocol() if ssl_object is not None else None
            if alpn != "h2":
                self.problems.append(f"connection {self.connections}: ALPN {alpn!r}, not h2")
                return
            conn.h2.initiate_connection()
            conn.flush()
            while True:
                data = await reader.read(65536)
                if not data:
                    break
                try:
                    events = conn.h2.receive_data(data)
                except h2.exceptions.ProtocolError as e:
                    self.problems.append(
                        f"connection {self.connections}: HTTP/2 protocol error: {e}"
                    )
                    conn.flush()
                    break
                for ev in events:
                    self._h2_event(conn, ev)
                conn.flush()
                await writer.drain()
        except (ConnectionError, asyncio.CancelledError):
            pass
        finally:
            for s in list(conn.streams.values()):
                s.gone("the connection closed")
            for s in list(conn.streams.values()):
                s.writer_task.cancel()
            self._conns.discard(conn)
            self._tasks.discard(task)
            writer.close()

    def _h2_event(self, conn: _Connection, ev) -> None:
        if isinstance(ev, h2.events.RequestReceived):
            self._request(conn, ev)
        elif isinstance(ev, h2.events.DataReceived):
            with contextlib.suppress(h2.exceptions.ProtocolError):
                conn.h2.acknowledge_received_data(ev.flow_controlled_length, ev.stream_id)
            s = conn.streams.get(ev.stream_id)
            if s is not None and not s.dead:
                s.data(ev.data)
        elif isinstance(ev, h2.events.StreamEnded):
            s = conn.streams.get(ev.stream_id)
            if s is not None:
                s.end_input("END_STREAM")
        elif isinstance(ev, h2.events.StreamReset):
            s = conn.streams.pop(ev.stream_id, None)
            if s is not None:
                s.gone(f"reset by the client ({ev.error_code!r})")
        elif isinstance(ev, (h2.events.WindowUpdated, h2.events.RemoteSettingsChanged)):
            conn.window.set()
        elif isinstance(ev, h2.events.ConnectionTerminated):
            for s in list(conn.streams.values()):
                s.gone("GOAWAY from the client")

    def _reject(
        self,
        conn: _Connection,
        stream_id: int,
        method: str,
        path: str,
        status: int,
        kind: str,
        message: str,
    ) -> None:
        self.rejected.append((method, path, status))
        body = json.dumps({"message": message}).encode("utf-8")
        conn.h2.send_headers(
            stream_id,
            [
                (":status", str(status)),
                ("content-type", "application/json"),
                ("x-amzn-errortype", kind),
                ("content-length", str(len(body))),
            ],
        )
        conn.h2.send_data(stream_id, body, end_stream=True)  # small: fits the initial window

    def _request(self, conn: _Connection, ev) -> None:
        headers: dict[str, str] = {}
        for k, v in ev.headers:
            headers[k.lower()] = v if k.lower() not in headers else f"{headers[k.lower()]},{v}"
        method, path = headers.get(":method", ""), headers.get(":path", "")
        m = PATH.match(path.split("?", 1)[0])
        if m is None:
            self._reject(
                conn,
                ev.stream_id,
                method,
                path,
                404,
                "UnknownOperationException",
                f"no route for {path}",
            )
            return
        if method != "POST":
            self._reject(
                conn,
                ev.stream_id,
                method,
                path,
                400,
                "ValidationException",
                f"{method} is not POST",
            )
            return
        record: dict[str, Any] = {
            "path": path,
            "model_id": urllib.parse.unquote(m.group(1)),
            "authorization": headers.get("authorization", ""),
            "headers": {k: v for k, v in headers.items() if k != "authorization"},
            "prompt_name": None,
            "session_start": None,
            "events": {},
            "sequence": [],
            "sent": {},
            "audio_frames": 0,
            "audio_samples": 0,
            "heard": Heard().record(),
            "gate": [],
            "answers": [],
            "input_end": None,
        }
        self.sessions.append(record)
        conn.h2.send_headers(
            ev.stream_id,
            [
                (":status", "200"),
                ("content-type", EVENTSTREAM),
                ("x-amzn-requestid", str(uuid.uuid4())),
            ],
        )
        conn.streams[ev.stream_id] = session = _Session(self, conn, ev.stream_id, record)
        if ev.stream_ended:
            session.end_input("END_STREAM on the request headers")


@contextlib.contextmanager
def serve_in_thread(server: FakeNovaSonic):
    """Serve `server` from a thread with its own event loop (a client in another loop, e.g. under
    `asyncio.run`, can use it); yields the port. The records are read from the caller's thread."""
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, name="nova-standin", daemon=True)
    thread.start()
    try:
        port = asyncio.run_coroutine_threadsafe(server.start(), loop).result(30)
        yield port
    finally:
        with contextlib.suppress(Exception):
            asyncio.run_coroutine_threadsafe(server.stop(), loop).result(30)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)
        loop.close()
