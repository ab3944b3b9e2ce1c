"""The OpenAI Realtime / xAI Grok Voice Agent stand-in (tests/models/fake_servers_openai_realtime.py),
driven by the real openai SDK client: the protocol it speaks, its barge-in and truncation rules, and
that every event both ways validates against the SDK's own types (`invalid == []`).

Local only: the stand-in is a scripted model behind the protocol as the SDK's types describe it,
not OpenAI's or xAI's service.
"""

from __future__ import annotations

import asyncio
import base64
import json
import time

import numpy as np
import pydantic
import pytest

pytest.importorskip("openai")
pytest.importorskip("websockets")

from fake_servers_common import free_port, make_reply, serve_and_run  # noqa: E402
from fake_servers_openai_realtime import FakeRealtime, check_event  # noqa: E402
from openai import AsyncOpenAI  # noqa: E402
from openai.types.realtime import RealtimeClientEvent, RealtimeServerEvent  # noqa: E402

from fdeval.audio.resample import resample  # noqa: E402

MODEL = "gpt-realtime-2025-08-28"
KEY = "test-key-0123456789"
FRAME_S = 0.04


@pytest.fixture(scope="module")
def replies():
    # The first is long enough to still be sending when the barge-in comes; the second is short.
    return [
        make_reply(
            "Sure. Start with short easy runs, three times a week, and walk when you need to."
        ),
        make_reply("Okay, sorry."),
    ]


@pytest.fixture(scope="module")
def speech(tts):
    """(question, barge-in) at 16 kHz."""
    return tts.synthesize("How do I start running?").samples, tts.synthesize(
        "wait, stop please"
    ).samples


def client(port: int, key: str = KEY) -> AsyncOpenAI:
    return AsyncOpenAI(
        api_key=key,
        websocket_base_url=f"ws://127.0.0.1:{port}/v1",
        base_url=f"http://127.0.0.1:{port}/v1",
        max_retries=0,
    )


def pcm16_b64(x: np.ndarray) -> str:
    return base64.b64encode((np.clip(x, -1, 1) * 32767).astype("<i2").tobytes()).decode()


class Events:
    """Every server event, with its arrival time, read in the background."""

    def __init__(self, conn):
        self.conn, self.items = conn, []
        self.task = asyncio.create_task(self._read())

    async def _read(self) -> None:
        while True:
            raw = await self.conn.recv_bytes()
            self.items.append((time.monotonic(), json.loads(raw)))

    def of(self, typ: str, **match) -> list[dict]:
        return [
            e
            for _, e in self.items
            if e["type"] == typ and all(e.get(k) == v for k, v in match.items())
        ]

    async def wait(self, typ: str, n: int = 1, timeout: float = 8.0, where=lambda e: True) -> dict:
        deadline = time.monotonic() + timeout
        while True:
            found = [e for e in self.of(typ) if where(e)]
            if len(found) >= n:
                return found[n - 1]
            if self.task.done():
                raise AssertionError(
                    f"connection ended waiting for {typ}: {self.task.exception()!r}"
                )
            if time.monotonic() > deadline:
                raise AssertionError(
                    f"no {typ} (#{n}) in {timeout}s; got {[e['type'] for _, e in self.items]}"
                )
            await asyncio.sleep(0.01)

    def index(self, ev: dict) -> int:
        return next(i for i, (_, e) in enumerate(self.items) if e is ev)


class Mic:
    """A client that streams the user's channel continuously, as fdeval does: 40 ms frames at
    `pace` x real time, silence unless something is queued with `say`."""

    def __init__(self, conn, rate: int, pace: float = 1.0):
        self.conn, self.rate, self.pace = conn, rate, pace
        self.queue = np.zeros(0, np.float32)
        self.sent = 0
        self.task = asyncio.create_task(self._run())

    def say(self, x16k: np.ndarray) -> None:
        self.queue = np.concatenate(
            [self.queue, resample(x16k, 16000, self.rate).astype(np.float32)]
        )

    async def _run(self) -> None:
        n, t0, k = int(FRAME_S * self.rate), time.monotonic(), 0
        while True:
            frame, self.queue = self.queue[:n], self.queue[n:]
            frame = np.concatenate([frame, np.zeros(n - len(frame), np.float32)])
            await self.conn.input_audio_buffer.append(audio=pcm16_b64(frame))
            self.sent += n
            k += 1
            await asyncio.sleep(max(0.0, t0 + k * FRAME_S / self.pace - time.monotonic()))

    async def stop(self) -> None:
        self.task.cancel()
        await asyncio.gather(self.task, return_exceptions=True)


def audio_s(deltas: list[dict], rate: int) -> float:
    return sum(len(base64.b64decode(d["delta"])) for d in deltas) / 2 / rate


def test_sdk_union_rejects_beta_names_and_16k():
    server, client_ = (
        pydantic.TypeAdapter(RealtimeServerEvent),
        pydantic.TypeAdapter(RealtimeClientEvent),
    )
    beta = {
        "type": "response.audio.delta",
        "event_id": "e",
        "response_id": "r",
        "item_id": "i",
        "output_index": 0,
        "content_index": 0,
        "delta": "",
    }
    with pytest.raises(pydantic.ValidationError):
        server.validate_python(beta)
    assert check_event(beta, "server") is not None
    ga = dict(beta, type="response.output_audio.delta")
    server.validate_python(ga)
    assert check_event(ga, "server") is None
    s16 = {
        "type": "session.update",
        "session": {
            "type": "realtime",
            "audio": {"input": {"format": {"type": "audio/pcm", "rate": 16000}}},
        },
    }
    with pytest.raises(pydantic.ValidationError):
        client_.validate_python(s16)
    assert check_event(s16, "client") is not None
    assert check_event(s16, "client", "xai") is None  # xAI takes 16 kHz
    # The models keep unknown keys: the stand-in's own check catches them.
    xai_style = {
        "type": "session.update",
        "session": {"type": "realtime", "voice": "eve", "turn_detection": {"type": "server_vad"}},
    }
    client_.validate_python(xai_style)
    assert "unknown fields" in check_event(xai_style, "client").line
    assert check_event(xai_style, "client", "xai") is None
    assert (
        check_event(
            {
                "type": "session.update",
                "session": {"type": "realtime", "reasoning": {"effort": "none"}},
            },
            "client",
            "xai",
        )
        is None
    )
    semantic = {
        "type": "session.update",
        "session": {"type": "realtime", "turn_detection": {"type": "semantic_vad"}},
    }
    assert check_event(semantic, "client", "xai") is not None  # xAI: server_vad or null only
    assert check_event({"type": "ping", "event_id": "e", "timestamp": 1}, "server", "xai") is None
    assert check_event({"type": "ping", "event_id": "e", "timestamp": 1}, "server") is not None


def test_openai_dialect_turn_barge_in_truncate(replies, speech):
    question, barge = speech
    fake, port = FakeRealtime(replies, api_key=KEY), free_port()

    async def run():
        async with client(port).realtime.connect(model=MODEL) as conn:
            ev = Events(conn)
            await ev.wait("session.created")
            await conn.session.update(
                session={
                    "type": "realtime",
                    "model": MODEL,
                    "instructions": "Keep every answer short.",
                    "output_modalities": ["audio"],
                    "audio": {
                        "input": {
                            "format": {"type": "audio/pcm", "rate": 24000},
                            "noise_reduction": None,
                            "turn_detection": {
                                "type": "server_vad",
                                "threshold": 0.5,
                                "prefix_padding_ms": 300,
                                "silence_duration_ms": 300,
                                "create_response": True,
                                "interrupt_response": True,
                            },
                        },
                        "output": {
                            "format": {"type": "audio/pcm", "rate": 24000},
                            "voice": "marin",
                        },
                    },
                }
            )
            await ev.wait("session.updated")
            mic = Mic(conn, 24000)
            mic.say(question)
            # The answer: wait for three audio deltas, then barge in while it is still being sent.
            r1 = (await ev.wait("response.created"))["response"]["id"]
            await ev.wait("response.output_audio.delta", 3)
            mic.say(barge)
            done1 = await ev.wait("response.done", where=lambda e: e["response"]["id"] == r1)
            deltas1 = ev.of("response.output_audio.delta", response_id=r1)
            item1 = deltas1[0]["item_id"]
            sent_ms = audio_s(deltas1, 24000) * 1000
            await conn.conversation.item.truncate(item_id=item1, content_index=0, audio_end_ms=300)
            await conn.conversation.item.truncate(
                item_id=item1, content_index=0, audio_end_ms=int(sent_ms) + 1000
            )
            await conn.response.cancel()  # the server already cancelled: a benign error
            # The barge-in ends: the second (short) answer, in full.
            done2 = await ev.wait("response.done", 2)
            # Each response.done is followed by its rate_limits.updated: wait for the second too.
            await ev.wait("rate_limits.updated", 2)
            await mic.stop()
            await ev.wait("error", 2)
            ev.task.cancel()
            return ev, done1, done2, deltas1, sent_ms, mic.sent

    ev, done1, done2, deltas1, sent_ms, n_sent = asyncio.run(serve_and_run(fake.app(), port, run))
    assert fake.invalid == []
    types = [e["type"] for _, e in ev.items]
    assert types[0] == "session.created"
    # The turn: VAD events, then the answer's events in the API's order.
    start, stop = (
        ev.of("input_audio_buffer.speech_started")[0],
        ev.of("input_audio_buffer.speech_stopped")[0],
    )
    assert (
        start["item_id"] == stop["item_id"] == ev.of("input_audio_buffer.committed")[0]["item_id"]
    )
    assert (
        0.3 * len(question) / 16
        < stop["audio_end_ms"] - start["audio_start_ms"]
        < 1.3 * len(question) / 16 + 400
    )
    first = types.index("input_audio_buffer.speech_started")
    assert types[first : first + 9] == [
        "input_audio_buffer.speech_started",
        "input_audio_buffer.speech_stopped",
        "input_audio_buffer.committed",
        "conversation.item.added",
        "conversation.item.done",
        "response.created",
        "response.output_item.added",
        "conversation.item.added",
        "response.content_part.added",
    ]
    # Faster than real time by construction (chunk_s of audio every send_every_s), not measured here:
    # a test never bounds a wall time. Each delta holds one chunk.
    assert {round(audio_s([d], 24000), 3) for d in deltas1[:-1]} == {fake.chunk_s}
    # The barge-in cancelled the first answer; nothing of it came after.
    r1 = done1["response"]
    assert r1["status"] == "cancelled" and r1["status_details"] == {
        "type": "cancelled",
        "reason": "turn_detected",
    }
    assert ev.of("input_audio_buffer.speech_started")[1]["audio_start_ms"] > stop["audio_end_ms"]
    i_done = ev.index(done1)
    assert not [e for _, e in ev.items[i_done:] if e.get("response_id") == r1["id"]]
    assert fake.barge_ins == 1
    rec = fake.sessions[0]
    assert [c.reason for c in rec.cancels] == ["turn_detected", "not_active"]
    assert [s.barge_in for s in rec.speech_starts] == [False, True]
    # Truncation within the sent audio is accepted, past it refused.
    assert ev.of("conversation.item.truncated") == [
        {
            "type": "conversation.item.truncated",
            "event_id": ev.of("conversation.item.truncated")[0]["event_id"],
            "item_id": deltas1[0]["item_id"],
            "content_index": 0,
            "audio_end_ms": 300,
        }
    ]
    errors = [e["error"] for e in ev.of("error")]
    assert errors[0]["param"] == "audio_end_ms" and errors[0]["type"] == "invalid_request_error"
    assert f"{sent_ms:.0f}ms" in errors[0]["message"]
    assert errors[1]["code"] == "response_cancel_not_active"
    assert [(t.audio_end_ms, t.accepted) for t in rec.truncates] == [
        (300, True),
        (int(sent_ms) + 1000, False),
    ]
    assert rec.truncates[0].sent_ms == pytest.approx(sent_ms)
    # The second answer, complete, with usage and rate limits.
    r2 = done2["response"]
    assert r2["status"] == "completed" and r2["id"] != r1["id"]
    u = r2["usage"]
    assert u["output_token_details"]["audio_tokens"] == int(replies[1].duration_s * 20)
    assert u["output_token_details"]["text_tokens"] == len(replies[1].words)
    assert u["input_token_details"]["audio_tokens"] > 10 * len(question) / 16000
    assert u["total_tokens"] == u["input_tokens"] + u["output_tokens"]
    transcript = ev.of("response.output_audio_transcript.done", response_id=r2["id"])[0][
        "transcript"
    ]
    pieces = [
        e["delta"] for e in ev.of("response.output_audio_transcript.delta", response_id=r2["id"])
    ]
    assert transcript == "".join(pieces) == " ".join(w for w, _ in replies[1].words)
    tail = types[types.index("response.output_audio.done", ev.index(done1)) :]
    assert tail[:7] == [
        "response.output_audio.done",
        "response.output_audio_transcript.done",
        "response.content_part.done",
        "response.output_item.done",
        "conversation.item.done",
        "response.done",
        "rate_limits.updated",
    ]
    # What the server recorded: the key only in the header, the model, the audio heard.
    assert rec.authorization == f"Bearer {KEY}" and rec.model == MODEL
    assert KEY not in json.dumps(rec.query) and "openai-beta" not in {
        k.lower() for k in rec.headers
    }
    assert rec.session_updates[0]["audio"]["input"]["turn_detection"]["silence_duration_ms"] == 300
    assert rec.heard["samples"] == n_sent == sum(n for _, n, _ in rec.audio_in)
    assert {r for _, _, r in rec.audio_in} == {24000}
    assert rec.client_events["conversation.item.truncate"] == 2 and fake.connections == 1


def test_xai_dialect(replies, speech):
    fake, port = (
        FakeRealtime(replies[1:], dialect="xai", api_key=KEY, ping_every_s=0.1),
        free_port(),
    )

    async def run():
        async with client(port).realtime.connect(model="grok-voice-fast-1.0") as conn:
            ev = Events(conn)
            await ev.wait("conversation.created")
            await conn.session.update(
                session={
                    "type": "realtime",
                    "instructions": "Keep every answer short.",
                    "voice": "eve",
                    "turn_detection": {"type": "server_vad", "silence_duration_ms": 300},
                    "audio": {
                        "input": {"format": {"type": "audio/pcm", "rate": 16000}},
                        "output": {"format": {"type": "audio/pcm", "rate": 16000}},
                    },
                }
            )
            await ev.wait("session.updated")
            await conn.response.cancel()
            mic = Mic(conn, 16000, pace=3.0)
            mic.say(speech[0])
            done = await ev.wait("response.done")
            await ev.wait("ping")
            await mic.stop()
            ev.task.cancel()
            return ev, done

    ev, done = asyncio.run(serve_and_run(fake.app(), port, run))
    assert fake.invalid == []
    assert ev.items[0][1]["type"] == "conversation.created"
    assert "session.created" not in [e["type"] for _, e in ev.items]
    updated = ev.of("session.updated")[0]["session"]
    assert updated["voice"] == "eve" and updated["turn_detection"]["silence_duration_ms"] == 300
    assert updated["audio"]["input"]["format"]["rate"] == 16000
    assert ev.of("error")[0]["error"]["message"] == "no active response"
    assert done["response"]["status"] == "completed"
    deltas = ev.of("response.output_audio.delta")
    assert len(base64.b64decode(deltas[0]["delta"])) == 2 * int(0.2 * 16000)
    assert audio_s(deltas, 16000) == pytest.approx(replies[1].duration_s, abs=0.01)
    assert {r for _, _, r in fake.sessions[0].audio_in} == {16000}
    assert fake.sessions[0].session_updates[0]["voice"] == "eve"


def test_manual_turns_and_items(replies, speech):
    """turn_detection null: no VAD events; the client commits and asks for the answer."""
    fake, port = FakeRealtime(replies[1:]), free_port()

    async def run():
        async with client(port).realtime.connect(model=MODEL) as conn:
            ev = Events(conn)
            await ev.wait("session.created")
            await conn.session.update(
                session={"type": "realtime", "audio": {"input": {"turn_detection": None}}}
            )
            await ev.wait("session.updated")
            await conn.conversation.item.create(
                item={
                    "type": "message",
                    "role": "user",
                    "content": [{"type": "input_text", "text": "Hello there."}],
                }
            )
            await conn.conversation.item.create(
                item={
                    "type": "message",
                    "role": "assistant",
                    "content": [{"type": "output_text", "text": "Hi."}],
                }
            )
            user_text = (await ev.wait("conversation.item.done"))["item"]["id"]
            await conn.conversation.item.delete(item_id=user_text)
            await conn.conversation.item.delete(item_id="item_unknown")
            x = resample(speech[0], 16000, 24000)
            n = int(FRAME_S * 24000)
            for i in range(0, len(x), n):  # faster than real time: nothing listens for speech
                await conn.input_audio_buffer.append(audio=pcm16_b64(x[i : i + n]))
            await conn.input_audio_buffer.commit()
            await ev.wait("input_audio_buffer.committed")
            await conn.response.create()
            await conn.response.create()  # one is already under way
            done = await ev.wait("response.done")
            ev.task.cancel()
            return ev, done, user_text

    ev, done, user_text = asyncio.run(serve_and_run(fake.app(), port, run))
    assert fake.invalid == []
    assert (
        not ev.of("input_audio_buffer.speech_started") and done["response"]["status"] == "completed"
    )
    assert ev.of("conversation.item.deleted")[0]["item_id"] == user_text
    codes = [e["error"]["code"] for e in ev.of("error")]
    assert codes == ["invalid_value", "conversation_already_has_active_response"]
    rec = fake.sessions[0]
    assert [i["role"] for i in rec.item_creates] == ["user", "assistant"]
    assert [(d.item_id, d.accepted) for d in rec.deletes] == [
        (user_text, True),
        ("item_unknown", False),
    ]
    assert done["response"]["usage"]["input_token_details"]["text_tokens"] == 3


def test_rejections_and_faults(replies):
    fake, port = (
        FakeRealtime(replies[1:], api_key=KEY, close_after_s=0.4, malformed_after_s=0.1),
        free_port(),
    )

    async def run():
        with pytest.raises(Exception) as wrong_key:
            async with client(port, key="wrong-key").realtime.connect(model=MODEL):
                pass
        async with client(port).realtime.connect(model=MODEL) as conn:
            ev = Events(conn)
            await ev.wait("session.created")
            # 16 kHz is not an OpenAI rate: an error event, and one invalid client event on record.
            await conn.session.update(
                session={
                    "type": "realtime",
                    "audio": {"input": {"format": {"type": "audio/pcm", "rate": 16000}}},
                }
            )
            err = await ev.wait("error")
            malformed = await ev.wait("response.output_audio.delta")
            await asyncio.wait([ev.task], timeout=3)
            return wrong_key.value, err, malformed, ev.task.exception()

    exc, err, malformed, closed = asyncio.run(serve_and_run(fake.app(), port, run))
    assert "401" in str(exc)
    assert fake.rejected == [401] and fake.connections == 2 and len(fake.sessions) == 1
    assert (
        err["error"]["code"] == "invalid_value"
        and err["error"]["param"] == "session.audio.input.format.rate"
    )
    assert err["error"]["type"] == "invalid_request_error"
    assert len(fake.invalid) == 1 and fake.invalid[0].startswith("client session.update")
    assert "delta" not in malformed and "response_id" not in malformed
    assert getattr(closed, "rcvd", None) is not None and closed.rcvd.code == 1011
    assert fake.sessions[0].closed_by_server == 1011


def test_reject_429_with_retry_after(replies):
    fake, port = FakeRealtime(replies[1:], reject_status=429, reject_times=1), free_port()

    async def run():
        with pytest.raises(Exception) as first:
            async with client(port).realtime.connect(model=MODEL):
                pass
        async with client(port).realtime.connect(model=MODEL) as conn:
            return first.value, json.loads(await conn.recv_bytes())

    exc, ev = asyncio.run(serve_and_run(fake.app(), port, run))
    response = getattr(exc, "response", None)
    assert (
        response is not None
        and response.status_code == 429
        and response.headers["Retry-After"] == "1"
    )
    assert ev["type"] == "session.created" and fake.rejected == [429] and fake.connections == 2
