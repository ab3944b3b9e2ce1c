"""OpenAI Realtime / Grok Voice adapter (fdeval/models/openai_realtime.py), through the real openai
SDK, against a local stand-in of the Realtime API on 127.0.0.1 (fake_servers_openai_realtime.py):
a scripted model, not OpenAI's or xAI's service. The stand-in validates every event both ways
against the openai package's own pydantic event types (extra keys included) and records what it
was sent, so these tests check the wire, not the adapter's view of it.
"""

from __future__ import annotations

import asyncio
import logging

import numpy as np
import pytest

pytest.importorskip("openai")

from helpers import health
from fake_servers_common import (
    free_port,
    make_reply,
    question_and_barge_in,
    run_realtime_session,
    serve_and_run,
)
from fake_servers_openai_realtime import FakeRealtime

from fdeval.errors import ConfigError
from fdeval.models.openai_realtime import (
    GrokVoice,
    OpenAIRealtime,
    RealtimeServiceError,
    RealtimeUnavailable,
)
from fdeval.orchestrator.recorder import flush_played_ms
from fdeval.orchestrator.session import OrchestratorConfig
from fdeval.orchestrator.turns import TurnConfig

INSTRUCTION = "Keep every answer short."
KEY = "sk-test-0123456789abcdef"
XKEY = "xai-test-0123456789abcdef"
PRICES = {
    "date": "2026-12-05",
    "source": "test",
    "usd_per_1m_tokens": {
        "audio_in": 32.0,
        "audio_in_cached": 0.4,
        "text_in": 4.0,
        "text_in_cached": 0.4,
        "audio_out": 64.0,
        "text_out": 16.0,
    },
}
CFG = OrchestratorConfig(
    turns=TurnConfig(silence_s=0.8, trailing_silence_s=0.3, max_session_s=12.0),
    health=health.LENIENT,
)


@pytest.fixture(scope="module")
def replies():
    return [
        make_reply(
            "Sure. Start with short easy runs, three times a week, and walk when you need to."
        ),
        make_reply("Okay, sorry."),
    ]


@pytest.fixture
def keys(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    monkeypatch.setenv("XAI_API_KEY", XKEY)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)


def _barge_in_rows(fake: FakeRealtime, log) -> list[tuple[str, int, float]]:
    """(item, audio_end_ms the stand-in received, ms fdeval's log says were played) per truncate."""
    played: dict[str, float] = {}
    for e in log.events:
        if e[1] == "playback_flush":
            played.update(flush_played_ms(e[3]))
    return [
        (t.item_id, t.audio_end_ms, played[t.item_id]) for s in fake.sessions for t in s.truncates
    ]


def test_a_barge_in_truncates_the_item_to_exactly_what_was_played(tts, vad, replies, keys, caplog):
    caplog.set_level(logging.DEBUG)
    case, audio = question_and_barge_in(tts, "openai_protocol")
    # 2x real time (not 4x): the barge-in 1 s into the answer finds the server still sending it, with
    # room to spare on a loaded machine, so the server cancels it
    fake, port = FakeRealtime(replies, api_key=KEY, send_every_s=0.1), free_port()
    model = OpenAIRealtime(base_url=f"ws://127.0.0.1:{port}/v1", prices=PRICES)
    res = run_realtime_session(fake.app(), port, model, case, audio, vad, CFG, INSTRUCTION)
    log = res.log
    assert fake.invalid == []  # every event, both ways, validates against the SDK's types
    (s,) = fake.sessions
    assert s.model == "gpt-realtime-2025-08-28" and s.authorization == f"Bearer {KEY}"
    upd = s.session_updates[0]
    assert upd["instructions"] == INSTRUCTION and upd["audio"]["output"]["voice"] == "marin"
    assert upd["audio"]["input"]["format"] == {"type": "audio/pcm", "rate": 24000}
    assert upd["audio"]["input"]["turn_detection"]["interrupt_response"] is True
    # user audio: PCM16 at 24 kHz, one 40 ms append per frame, at the real-time rate
    assert {(n, r) for _, n, r in s.audio_in} == {(960, 24000)}
    t = np.array([a[0] for a in s.audio_in])
    assert 23 < (len(t) - 1) / (t[-1] - t[0]) < 27
    # the answer on the model channel, with its transcript pieces
    assert log.model_chunks
    words = "".join(row[3] for row in log.model_text).split()
    assert words[:3] == ["Sure.", "Start", "with"]
    # the barge-in: the server cancelled its answer, fdeval flushed and truncated the item
    turns = {t["index"]: t for t in log.turns}
    assert turns[1]["wait_reason"] == "onset" and fake.barge_ins == 1
    assert [r.status for r in s.responses][:1] == ["cancelled"]
    (row,) = _barge_in_rows(fake, log)
    item, end_ms, played_ms = row
    assert all(t.accepted for t in s.truncates) and not s.deletes
    assert abs(end_ms - played_ms) <= 1.0  # floor of the played ms
    # ... and the played ms is what the recording holds: the item's chunks up to the flush
    flush_t = log.flushes[0][0]
    chunk_ms = (
        sum(
            min(n, max(0, round((flush_t - p) * 16000)))
            for a, p, n in log.model_chunks
            if p < flush_t
        )
        / 16.0
    )
    assert abs(chunk_ms - played_ms) <= 20.0
    kinds = {e[1] for e in log.events}
    assert {
        "vendor:speech_started",
        "vendor:response.created",
        "vendor:response.done",
        "vendor:truncate",
        "vendor:truncated",
    } <= kinds
    # usage priced from the config's table; the key nowhere but the header
    rep = log.attrs["model_report"]
    u = rep["usage"]
    assert (
        u["audio_out"] > 0
        and u["audio_in"] > 0
        and rep["prices"] == {"date": "2026-12-05", "source": "test"}
    )
    rates = PRICES["usd_per_1m_tokens"]
    assert rep["cost_usd"] == pytest.approx(sum(u[k] * rates[k] for k in rates) / 1e6, rel=1e-4)
    assert KEY not in caplog.text and KEY not in str(model.identity()) and KEY not in str(rep)
    assert "Dropped" not in caplog.text


def test_grok_voice_speaks_the_xai_dialect(tts, vad, replies, keys):
    case, audio = question_and_barge_in(tts, "xai_protocol")
    fake, port = FakeRealtime(replies, dialect="xai", api_key=XKEY), free_port()
    model = GrokVoice(
        base_url=f"ws://127.0.0.1:{port}/v1",
        prices={"date": "2026-05-25", "source": "test", "usd_per_audio_minute": 0.05},
    )
    res = run_realtime_session(fake.app(), port, model, case, audio, vad, CFG, INSTRUCTION)
    assert fake.invalid == []
    (s,) = fake.sessions
    assert s.authorization == f"Bearer {XKEY}" and s.model == "grok-voice-think-fast-1.0"
    upd = s.session_updates[0]
    assert upd["voice"] == "eve" and upd["turn_detection"]["type"] == "server_vad"
    assert upd["audio"]["input"]["format"]["rate"] == 16000
    assert {(n, r) for _, n, r in s.audio_in} == {(640, 16000)}
    assert res.log.attrs["model_report"]["events"].get("ping", 0) >= 1
    (row,) = _barge_in_rows(fake, res.log)
    assert abs(row[1] - row[2]) <= 1.0
    rep = res.log.attrs["model_report"]
    minutes = (rep["usage"]["audio_sent_s"] + rep["usage"]["audio_received_s"]) / 60
    assert rep["cost_usd"] == pytest.approx(minutes * 0.05, rel=1e-4)


def test_manual_turns_commit_create_and_cancel(tts, vad, replies, keys):
    """turn_detection null: fdeval commits the user's turn and asks for the answer; a barge-in
    cancels the answer and truncates it."""
    case, audio = question_and_barge_in(tts, "manual_protocol")
    fake, port = FakeRealtime(replies, send_every_s=0.1), free_port()
    model = OpenAIRealtime(base_url=f"ws://127.0.0.1:{port}/v1", turn_detection=None)
    res = run_realtime_session(fake.app(), port, model, case, audio, vad, CFG, INSTRUCTION)
    assert fake.invalid == []
    (s,) = fake.sessions
    assert s.session_updates[0]["audio"]["input"]["turn_detection"] is None
    assert (
        s.client_events["input_audio_buffer.commit"] >= 1
        and s.client_events["response.create"] >= 1
    )
    assert s.client_events["response.cancel"] == 1
    (row,) = _barge_in_rows(fake, res.log)
    assert abs(row[1] - row[2]) <= 1.0


# -- failures: one line each, infrastructure, never a verdict --------------------------------------
async def _open(model):
    async with model.session(None, 0) as sess:
        for _ in range(50):  # 2 s of silence
            await sess.send(np.zeros(960, np.float32))
            await sess.receive()
            await asyncio.sleep(0.04)


def _fails(fake, model_kw=None, **kw):
    port = free_port()
    model = OpenAIRealtime(base_url=f"ws://127.0.0.1:{port}/v1", **(model_kw or {}))
    with pytest.raises(RealtimeServiceError) as e:
        asyncio.run(serve_and_run(fake.app(), port, lambda: _open(model)))
    msg = str(e.value)
    assert "\n" not in msg and KEY not in msg
    return e.value, fake


def test_no_key_is_one_line(monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with pytest.raises(ConfigError, match="OPENAI_API_KEY") as e:
        OpenAIRealtime()
    assert "\n" not in str(e.value)
    monkeypatch.delenv("XAI_API_KEY", raising=False)
    monkeypatch.setenv("OPENAI_API_KEY", KEY)  # the other vendor's key is never used
    with pytest.raises(ConfigError, match="XAI_API_KEY"):
        GrokVoice()


def test_a_rejected_key_is_an_infrastructure_error_not_retried(replies, keys):
    err, fake = _fails(FakeRealtime(replies, api_key="another-key"))
    assert (
        "HTTP 401" in str(err)
        and "OPENAI_API_KEY" in str(err)
        and not isinstance(err, RealtimeUnavailable)
    )
    assert fake.connections == 1


def test_a_429_is_waited_out_and_retried_then_unavailable(replies, keys):
    fake, port = FakeRealtime(replies, reject_status=429, reject_times=1), free_port()
    model = OpenAIRealtime(base_url=f"ws://127.0.0.1:{port}/v1")
    asyncio.run(serve_and_run(fake.app(), port, lambda: _open(model)))  # Retry-After 1 s, then in
    assert fake.rejected == [429] and len(fake.sessions) == 1
    err, fake = _fails(
        FakeRealtime(replies, reject_status=429, reject_times=9), {"connect_retries": 1}
    )
    assert (
        isinstance(err, RealtimeUnavailable)
        and "HTTP 429" in str(err)
        and fake.rejected == [429, 429]
    )


def test_a_connection_the_service_drops_is_retryable(replies, keys):
    err, _ = _fails(FakeRealtime(replies, close_after_s=0.5))
    assert isinstance(err, RealtimeUnavailable) and "closed the connection" in str(err)


def test_a_malformed_event_fails_the_session(replies, keys):
    err, _ = _fails(FakeRealtime(replies, malformed_after_s=0.5))
    assert "malformed response.output_audio.delta" in str(err) and not isinstance(
        err, RealtimeUnavailable
    )


def test_rates_the_service_does_not_take_are_refused_at_once(keys):
    with pytest.raises(
        ConfigError, match=r"model.input_rate: openai takes PCM16 at 24000 Hz; got 16000"
    ) as e:
        OpenAIRealtime(input_rate=16000)
    assert "\n" not in str(e.value)
    with pytest.raises(ConfigError, match="semantic_vad"):
        GrokVoice(turn_detection={"type": "semantic_vad"})


def test_the_deprecated_snapshot_warns_with_its_shutdown_date(keys, caplog):
    OpenAIRealtime(model="gpt-realtime-2025-08-28")
    assert "announced shutdown date is 2027-01-20" in caplog.text
    caplog.clear()
    OpenAIRealtime(model="gpt-realtime-2")
    assert "deprecated" not in caplog.text
