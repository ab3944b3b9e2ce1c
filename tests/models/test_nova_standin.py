"""The Nova 2 Sonic stand-in (tests/models/fake_servers_nova.py), driven by a raw HTTP/2 client
written here that sends what `aws-sdk-bedrock-runtime` sends (hosted-realtime.md, section 4): a
SigV4-signed POST, then signed envelopes around `chunk` messages carrying the events of
`fdeval.models.nova_sonic.NovaProtocol`, then an empty envelope. The server's frames are decoded
with botocore's `EventStreamBuffer` and fed to `NovaProtocol.handle`.

Runs on Python 3.11: the real SDK (3.12 only) is never imported. Local only: a scripted model
behind the protocol, not Amazon's service.
"""

from __future__ import annotations

import asyncio
import base64
import datetime
import ssl
import time
from typing import Any, Callable

import numpy as np
import pytest

h2_config = pytest.importorskip("h2.config")
pytest.importorskip("botocore")
pytest.importorskip("cryptography")

import h2.connection  # noqa: E402
import h2.events  # noqa: E402
import h2.settings  # noqa: E402
from botocore.eventstream import ChecksumMismatch, EventStreamBuffer  # noqa: E402
from fake_servers_common import Heard, make_reply, self_signed_cert  # noqa: E402
from fake_servers_nova import (  # noqa: E402
    BARGE_IN_TEXT,
    CHUNK_HEADERS,
    EVENTSTREAM,
    OUTPUT_RATE,
    FakeNovaSonic,
    chunk_message,
    encode_message,
    serve_in_thread,
    signed_envelope,
    unwrap_chunk,
)

from fdeval.audio.resample import resample  # noqa: E402
from fdeval.models.nova_sonic import NovaProtocol  # noqa: E402

MODEL_ID = "amazon.nova-2-sonic-v1:0"
PATH = "/model/amazon.nova-2-sonic-v1%3A0/invoke-with-bidirectional-stream"
AUTH = (
    "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20260101/us-east-1/bedrock/aws4_request, "
    "SignedHeaders=content-type;host;x-amz-content-sha256;x-amz-date, Signature=" + "0" * 64
)
FRAME_N = 512  # 32 ms at 16 kHz, as the adapter sends
FRAME_S = FRAME_N / 16000
STREAM_WINDOW = (
    6000  # the client's receive window per stream: smaller than one 200 ms audio event (~17 kB)
)
BARGE_IN_AFTER_S = 0.4  # after the answer's first audio arrives: the stand-in is still sending it


@pytest.fixture(scope="module")
def replies():
    # The first is long (7.5 s, sent in ~1.9 s) so the barge-in comes while it is still being sent.
    return [
        make_reply(
            "Sure. Start with short easy runs, three times a week, and walk when you need to. "
            "Add a few minutes every week, and rest on the other days."
        ),
        make_reply("Okay, sorry."),
    ]


@pytest.fixture(scope="module")
def speech():
    """(question, barge-in) at 16 kHz."""
    out = []
    for text in ("How do I start running?", "Wait, stop please."):
        r = make_reply(text)
        out.append(resample(r.samples, r.sample_rate, 16000).astype(np.float32))
    return out


# -- a raw HTTP/2 client ---------------------------------------------------------------------------
class RawClient:
    """One TLS + HTTP/2 connection and one request stream, as the CRT client opens them; every
    server frame is decoded with botocore and its chunk event handed to `on_event(event, arrival)`."""

    def __init__(
        self,
        port: int,
        ca_file,
        on_event: Callable[[dict[str, Any], float], None] | None = None,
        stream_window: int | None = None,
    ):
        self.port, self.ca_file, self.on_event, self.stream_window = (
            port,
            ca_file,
            on_event,
            stream_window,
        )
        self.status: str | None = None
        self.headers: dict[str, str] = {}
        self.body = b""
        self.received = 0  # response body bytes
        self.events: list[tuple[float, dict[str, Any]]] = []
        self.frames: list[Any] = []  # the botocore messages, in order
        self.responded, self.ended, self.got, self.window = (asyncio.Event() for _ in range(4))
        self.buffer = EventStreamBuffer()

    async def open(self, path: str = PATH, method: str = "POST", authorization: str = AUTH) -> None:
        ctx = ssl.create_default_context(cafile=str(self.ca_file))
        ctx.set_alpn_protocols(["h2"])
        self.reader, self.writer = await asyncio.open_connection("127.0.0.1", self.port, ssl=ctx)
        assert self.writer.get_extra_info("ssl_object").selected_alpn_protocol() == "h2"
        self.h2 = h2.connection.H2Connection(
            h2_config.H2Configuration(client_side=True, header_encoding="utf-8")
        )
        if self.stream_window:  # a small receive window: the server must wait for WINDOW_UPDATEs
            self.h2.local_settings = h2.settings.Settings(
                client=True,
                initial_values={h2.settings.SettingCodes.INITIAL_WINDOW_SIZE: self.stream_window},
            )
        self.h2.initiate_connection()
        self.sid = self.h2.get_next_available_stream_id()
        self.h2.send_headers(
            self.sid,
            [
                (":method", method),
                (":scheme", "https"),
                (":authority", f"127.0.0.1:{self.port}"),
                (":path", path),
                ("authorization", authorization),
                ("content-type", EVENTSTREAM),
                ("x-amz-content-sha256", "STREAMING-AWS4-HMAC-SHA256-EVENTS"),
                ("x-amz-date", "20260101T000000Z"),
            ],
        )
        self.flush()
        self.task = asyncio.create_task(self._read())

    def flush(self) -> None:
        data = self.h2.data_to_send()
        if data:
            self.writer.write(data)

    async def send(self, data: bytes) -> None:
        """Body bytes, within the server's flow-control windows."""
        view = memoryview(data)
        while view:
            n = min(
                len(view),
                self.h2.local_flow_control_window(self.sid),
                self.h2.max_outbound_frame_size,
            )
            if n <= 0:
                self.window.clear()
                await asyncio.wait_for(self.window.wait(), 5)
                continue
            self.h2.send_data(self.sid, bytes(view[:n]))
            view = view[n:]
            self.flush()
        await self.writer.drain()

    async def put(self, event: dict[str, Any]) -> None:
        await self.send(signed_envelope(chunk_message(event)))

    async def end(self) -> None:
        """The SDK's close: an empty signed envelope, then END_STREAM."""
        await self.send(signed_envelope(b""))
        self.h2.end_stream(self.sid)
        self.flush()
        await self.writer.drain()

    async def _read(self) -> None:
        while True:
            data = await self.reader.read(65536)
            if not data:
                self.ended.set()
                return
            for ev in self.h2.receive_data(data):
                if isinstance(ev, h2.events.ResponseReceived):
                    self.headers = dict(ev.headers)
                    self.status = self.headers[":status"]
                    self.responded.set()
                elif isinstance(ev, h2.events.DataReceived):
                    self.h2.acknowledge_received_data(ev.flow_controlled_length, ev.stream_id)
                    self.received += len(ev.data)
                    self._data(ev.data)
                elif isinstance(ev, h2.events.StreamEnded):
                    self.ended.set()
                elif isinstance(ev, (h2.events.WindowUpdated, h2.events.RemoteSettingsChanged)):
                    self.window.set()
            self.flush()

    def _data(self, data: bytes) -> None:
        if self.status != "200":
            self.body += data
            return
        now = time.monotonic()
        self.buffer.add_data(data)
        for message in self.buffer:
            self.frames.append(message)
            event = unwrap_chunk(message)
            self.events.append((now, event))
            if self.on_event is not None:
                self.on_event(event, now)
        self.got.set()

    async def close(self) -> None:
        self.task.cancel()
        self.writer.close()
        try:
            await self.writer.wait_closed()
        except (ConnectionError, ssl.SSLError):
            pass


def name(event: dict[str, Any]) -> str:
    return next(iter(event["event"]))


def body(event: dict[str, Any]) -> dict[str, Any]:
    return next(iter(event["event"].values()))


def n_samples(audio_output: dict[str, Any]) -> int:
    return len(base64.b64decode(audio_output["content"])) // 2


# -- event stream framing ---------------------------------------------------------------------------
def test_encode_message_decodes_with_botocore():
    headers = {
        ":message-type": "event",
        ":event-type": "chunk",
        ":content-type": "application/json",
        "x-ünïcode": "välue",
    }
    payload = b'{"bytes": "eyJldmVudCI6IHt9fQ=="}'
    data = encode_message(headers, payload) + encode_message({"a": ""}, b"")
    buf = EventStreamBuffer()
    for i in range(0, len(data), 7):  # fed in pieces, as HTTP/2 frames cut it
        buf.add_data(data[i : i + 7])
    messages = list(buf)
    assert [m.headers for m in messages] == [headers, {"a": ""}]
    assert [m.payload for m in messages] == [payload, b""]

    for where in (len(data) // 4, 9, -1):  # payload byte, prelude CRC, message CRC
        bad = bytearray(encode_message(headers, payload))
        bad[where] ^= 0x01
        buf = EventStreamBuffer()
        buf.add_data(bytes(bad))
        with pytest.raises(ChecksumMismatch):
            list(buf)


def test_signed_envelope_header_types():
    when = datetime.datetime(2026, 1, 2, 3, 4, 5, 678000, tzinfo=datetime.timezone.utc)
    event = {"event": {"sessionEnd": {}}}
    buf = EventStreamBuffer()
    buf.add_data(signed_envelope(chunk_message(event), when, b"\x01\x02\xff"))
    (outer,) = list(buf)
    assert outer.headers == {
        ":date": int(when.timestamp() * 1000),
        ":chunk-signature": b"\x01\x02\xff",
    }
    inner = EventStreamBuffer()
    inner.add_data(outer.payload)
    (chunk,) = list(inner)
    assert chunk.headers == CHUNK_HEADERS
    assert unwrap_chunk(chunk) == event


# -- the stand-in --------------------------------------------------------------------------------------
async def converse(port: int, ca_file, speech: list[np.ndarray]) -> dict[str, Any]:
    """A question, a barge-in into the (long) answer, a wait for the second answer, then the close."""
    question, interruption = speech
    proto = NovaProtocol(
        "Keep every answer short.",
        "matthew",
        {"maxTokens": 1024, "topP": 0.9, "temperature": 0.7},
        "HIGH",
    )
    model_events: list[Any] = []
    client = RawClient(
        port,
        ca_file,
        lambda ev, t: model_events.extend(proto.handle(ev, t)),
        stream_window=STREAM_WINDOW,
    )
    await client.open()
    await asyncio.wait_for(client.responded.wait(), 5)
    for ev in proto.opening():
        await client.put(ev)

    heard = Heard()  # what the server should hear: the frames as 16-bit PCM
    source = np.concatenate([np.zeros(3200, np.float32), question])
    pos, k, state, t0, barge_t = 0, 0, "question", time.monotonic(), None
    completions_ended = lambda: sum(1 for _, e in client.events if name(e) == "completionEnd")  # noqa: E731
    first_audio = lambda: next((t for t, e in client.events if name(e) == "audioOutput"), None)  # noqa: E731
    while True:
        frame = source[pos : pos + FRAME_N]
        pos += FRAME_N
        if len(frame) < FRAME_N:
            frame = np.concatenate([frame, np.zeros(FRAME_N - len(frame), np.float32)])
        await client.put(proto.audio(frame))
        heard.add((np.clip(frame, -1, 1) * 32767).astype("<i2").astype(np.float32) / 32768.0)
        k += 1
        await asyncio.sleep(max(0.0, t0 + k * FRAME_S - time.monotonic()))
        now = time.monotonic()
        if (
            state == "question"
            and first_audio() is not None
            and now >= first_audio() + BARGE_IN_AFTER_S
        ):
            source, pos, state, barge_t = interruption, 0, "barge-in", now
        elif state == "barge-in" and completions_ended() >= 2:
            break
        assert now - t0 < 15, (
            f"no second completionEnd: {[name(e) for _, e in client.events][-20:]}"
        )
    for ev in proto.closing():
        await client.put(ev)
    await client.end()
    await asyncio.wait_for(client.ended.wait(), 5)
    await client.close()
    return {
        "client": client,
        "proto": proto,
        "model_events": model_events,
        "heard": heard.record(),
        "frames_sent": k,
        "barge_t": barge_t,
        "wall_s": time.monotonic() - t0,
    }


@pytest.fixture(scope="module")
def run(tmp_path_factory, replies, speech):
    cert, key = self_signed_cert(tmp_path_factory.mktemp("nova-tls"))
    server = FakeNovaSonic(replies, cert, key)
    with serve_in_thread(server) as port:
        out = asyncio.run(converse(port, server.ca_file, speech))
    out["server"] = server
    return out


def test_request_and_protocol_are_right(run):
    server, client = run["server"], run["client"]
    assert server.problems == []
    assert server.connections == 1 and len(server.sessions) == 1
    s = server.sessions[0]
    assert s["path"] == PATH and s["model_id"] == MODEL_ID
    assert s["authorization"].startswith("AWS4-HMAC-SHA256 ")
    assert client.status == "200" and client.headers["content-type"] == EVENTSTREAM
    assert s["input_end"] == "the empty envelope"
    assert s["heard"] == run["heard"] and s["audio_frames"] == run["frames_sent"]
    assert s["events"]["audioInput"] == run["frames_sent"]
    assert s["sequence"] == [
        "sessionStart",
        "promptStart",
        "contentStart",
        "textInput",
        "contentEnd",
        "contentStart",
        "contentEnd",
        "promptEnd",
        "sessionEnd",
    ]
    assert client.ended.is_set()  # the server ended the response after the client's close
    # Far more than the client's stream window came: the stand-in waited for WINDOW_UPDATEs (and
    # the client's ~300 kB of envelopes got through the 64 kB windows: the stand-in acknowledged them).
    assert client.received > 10 * STREAM_WINDOW
    for m in client.frames:  # every server frame is an unsigned chunk message
        assert m.headers == CHUNK_HEADERS


def test_answer_text_and_audio_arrive_in_chunks(run, replies):
    client, events = run["client"], run["model_events"]
    texts = [e.text for e in events if e.kind == "text"]
    assert texts[:2] == [" ".join(w for w, _ in r.words) for r in replies]
    spoken = [e.text for e in events if e.kind == "vendor" and e.text == "spoken_text"]
    assert len(spoken) == 1  # the second answer's FINAL text (the first was interrupted)
    first = run["server"].sessions[0]["answers"][0]
    audio1 = [
        (t, e)
        for t, e in client.events
        if name(e) == "audioOutput" and body(e)["contentId"] == first["audio_content_id"]
    ]
    assert len(audio1) >= 4
    # faster than real time by construction (chunk_s of audio every interval_s); a test never bounds wall time
    assert {n_samples(body(e)) for _, e in audio1[:-1]} == {int(round(0.2 * OUTPUT_RATE))}
    audio_s = sum(len(e.audio) for e in events if e.kind == "audio") / 16000
    assert audio_s > 1.0


def test_barge_in_interrupts_once_and_stops_the_audio(run, replies):
    server, client, proto, events = run["server"], run["client"], run["proto"], run["model_events"]
    assert server.barge_ins == 1
    assert [e.kind for e in events].count("interrupted") == 1
    a1, a2 = server.sessions[0]["answers"]
    assert a1["ended"] == "interrupted" and a2["ended"] == "completed"
    assert proto.interrupted == {a1["audio_content_id"]}
    # Both signals came, in stream order: the audio content's INTERRUPTED end, then the text.
    order = [(name(e), body(e)) for _, e in client.events]
    i_end = next(
        i
        for i, (n, b) in enumerate(order)
        if n == "contentEnd" and b.get("contentId") == a1["audio_content_id"]
    )
    assert order[i_end][1]["stopReason"] == "INTERRUPTED"
    i_text = next(
        i for i, (n, b) in enumerate(order) if n == "textOutput" and b["content"] == BARGE_IN_TEXT
    )
    assert i_text > i_end
    # No audio of the first answer after the interruption; less of it than the reply holds.
    assert not any(
        n == "audioOutput" and b["contentId"] == a1["audio_content_id"] for n, b in order[i_end:]
    )
    full1 = len(replies[0].samples) / replies[0].sample_rate
    assert a1["audio_s"] < full1 - 1.0
    assert proto.dropped_audio_s == 0.0
    # The second answer is complete.
    got2 = sum(
        n_samples(b)
        for n, b in order
        if n == "audioOutput" and b["contentId"] == a2["audio_content_id"]
    )
    assert got2 == len(replies[1].samples)
    # Completion bookkeeping: one completionStart/End pair per answer, the first INTERRUPTED.
    ends = [b["stopReason"] for n, b in order if n == "completionEnd"]
    assert [n for n, _ in order].count("completionStart") == 2 and ends == [
        "INTERRUPTED",
        "END_TURN",
    ]
    assert proto.usage["speech_out"] > 0 and proto.usage["speech_in"] > 0


def test_rejects_other_paths_and_flags_protocol_errors(tmp_path, replies):
    cert, key = self_signed_cert(tmp_path)

    async def go():
        async with FakeNovaSonic(replies, cert, key) as server:
            bad = RawClient(server.port, server.ca_file)
            await bad.open(path="/model/x/invoke")
            await asyncio.wait_for(bad.ended.wait(), 5)
            assert bad.status == "404" and b"no route" in bad.body
            await bad.close()

            c = RawClient(server.port, server.ca_file)
            await c.open()
            await asyncio.wait_for(c.responded.wait(), 5)
            proto = NovaProtocol(None, "matthew", {}, "HIGH")
            opening = proto.opening()
            await c.put(opening[1])  # promptStart first
            await c.put(opening[0])
            await c.put(proto.audio(np.zeros(FRAME_N, np.float32)))  # before the audio content
            await c.put({"event": {"promptEnd": {"promptName": "another"}}})
            await c.end()
            await asyncio.wait_for(c.ended.wait(), 5)
            await c.close()
            return server

    server = asyncio.run(go())
    assert server.rejected == [("POST", "/model/x/invoke", 404)]
    text = "\n".join(server.problems)
    for expected in (
        "the first event is promptStart",
        "the second event is sessionStart",
        "audioInput outside",
        "promptName 'another'",
        "promptEnd without any USER AUDIO",
        "without sessionEnd",
        "0 USER AUDIO contents",
    ):
        assert expected in text, text
    assert server.sessions[0]["sent"] == {}  # heard nothing: said nothing
