"""Gemini Live adapter, through the real google-genai SDK, against a local stand-in WebSocket
server speaking the Live API's BidiGenerateContent JSON (tests/models/fake_servers_gemini.py).

The server side is a local stand-in written from the upstream protocol (the Live API WebSocket
messages as google-genai's `live.py` sends and parses them), with a scripted model: not Google's
service or model. The SDK is pointed at it through `http_options.base_url` (its Live client
always speaks `wss://`, so the stand-in serves TLS with a certificate made here and the SDK is
given an SSL context that trusts it through `http_options.async_client_args`).
"""

from __future__ import annotations

import asyncio
import logging
import ssl

import numpy as np
import pytest

pytest.importorskip("google.genai")
pytest.importorskip("cryptography")

from helpers import health
from fake_servers_common import (
    free_port,
    make_reply,
    question_and_barge_in,
    run_realtime_session,
    self_signed_cert,
    serve_and_run,
    server_ssl,
)
from fake_servers_gemini import FakeGeminiLive

from fdeval.errors import ConfigError
from fdeval.models.gemini import DEFAULT_MODEL, GeminiLive, GeminiLiveError
from fdeval.orchestrator.session import OrchestratorConfig
from fdeval.orchestrator.turns import TurnConfig

INSTRUCTION = "Keep every answer short."
KEY = "test-key-0123456789"


@pytest.fixture(scope="module")
def replies():
    return [
        make_reply(
            "Sure. Start with short easy runs, three times a week, and walk when you need to."
        ),
        make_reply("Okay, sorry."),
    ]


@pytest.fixture(scope="module")
def certs(tmp_path_factory):
    return self_signed_cert(tmp_path_factory.mktemp("tls"))


@pytest.fixture
def api_key(monkeypatch):
    monkeypatch.delenv("GOOGLE_API_KEY", raising=False)
    monkeypatch.setenv("GEMINI_API_KEY", KEY)
    return KEY


def _local(port: int, cert_file) -> dict:
    return {
        "base_url": f"https://127.0.0.1:{port}",
        "async_client_args": {"ssl": ssl.create_default_context(cafile=str(cert_file))},
    }


def test_realtime_session_through_the_sdk(tts, vad, replies, certs, api_key, caplog):
    caplog.set_level(logging.DEBUG)
    case, audio = question_and_barge_in(tts, "gemini_protocol")
    fake = FakeGeminiLive(replies)
    port = free_port()
    model = GeminiLive(http_options=_local(port, certs[0]))
    # health bounds no loaded machine reaches: a session behind real time is stopped early
    cfg = OrchestratorConfig(
        turns=TurnConfig(silence_s=0.8, trailing_silence_s=0.3, max_session_s=10.0),
        health=health.LENIENT,
    )

    res = run_realtime_session(
        fake.app(), port, model, case, audio, vad, cfg, INSTRUCTION, server_ssl(*certs)
    )
    log = res.log
    # the setup message, as the SDK builds it from the adapter's LiveConnectConfig
    setup = fake.setups[0]["setup"]
    assert setup["model"] == f"models/{DEFAULT_MODEL}"
    assert setup["generationConfig"]["responseModalities"] == ["AUDIO"]
    assert (
        setup["generationConfig"]["speechConfig"]["voiceConfig"]["prebuiltVoiceConfig"]["voiceName"]
        == "Zephyr"
    )
    assert setup["systemInstruction"]["parts"][0]["text"] == INSTRUCTION
    assert setup["proactivity"] == {"proactiveAudio": True}
    assert setup["inputAudioTranscription"] == {} and setup["outputAudioTranscription"] == {}
    assert setup["realtimeInputConfig"] == {
        "automaticActivityDetection": {"disabled": False},
        "activityHandling": "START_OF_ACTIVITY_INTERRUPTS",
    }
    assert fake.paths == [
        "/ws/google.ai.generativelanguage.v1alpha.GenerativeService.BidiGenerateContent"
    ]
    # the key went in the header, from the environment, and nowhere else
    assert fake.api_keys == [KEY]
    assert (
        KEY not in caplog.text
        and KEY not in str(model.identity())
        and KEY not in repr(model.__dict__)
    )
    if "x-goog-api-key" in caplog.text:  # websockets logs request headers at DEBUG: masked
        assert "x-goog-api-key: ***" in caplog.text
    # user audio: PCM16 at 16 kHz, one 40 ms message per frame at the real-time rate
    assert {(mt, n) for _, mt, n in fake.audio_in} == {("audio/pcm;rate=16000", 640)}
    t = np.array([a[0] for a in fake.audio_in])
    assert 23 < (len(t) - 1) / (t[-1] - t[0]) < 27
    assert not fake.other_messages
    # the answer (24 kHz PCM16) lands on the model channel at 16 kHz, with its transcription
    assert log.model_chunks
    first_play = log.model_chunks[0][1]
    assert (
        np.sqrt(np.mean(res.model[int(first_play * 16000) : int((first_play + 0.5) * 16000)] ** 2))
        > 0.01
    )
    words = "".join(row[3] for row in log.model_text).split()
    assert words[:3] == ["Sure.", "Start", "with"]
    assert log.model_text[0][1] == pytest.approx(first_play, abs=0.01)
    # the barge-in made the server send `interrupted`: the unplayed answer was flushed, and its
    # words that were never played are marked so
    turns = {t["index"]: t for t in log.turns}
    assert turns[1]["wait_reason"] == "onset" and fake.barge_ins == 1
    assert len(log.flushes) == 1
    t_flush, dropped = log.flushes[0]
    assert turns[1]["actual_s"] < t_flush < turns[1]["actual_s"] + 0.5 and dropped > 16000
    dropped_words = [row for row in log.model_text if row[4]]
    assert dropped_words and all(row[1] >= t_flush for row in dropped_words)
    assert "Okay," in words  # the answer to the barge-in


def test_missing_key_is_a_one_line_config_error(monkeypatch):
    for var in ("GOOGLE_API_KEY", "GEMINI_API_KEY"):
        monkeypatch.delenv(var, raising=False)
    with pytest.raises(ConfigError, match="GEMINI_API_KEY") as e:
        GeminiLive()
    assert "\n" not in str(e.value)


def test_refused_session_is_an_infrastructure_error(api_key, certs):
    from aiohttp import web

    async def reject(request):
        ws = web.WebSocketResponse()
        await ws.prepare(request)
        await ws.receive()  # the setup
        await ws.close(code=1008, message=b"API key not valid")
        return ws

    app = web.Application()
    app.router.add_get(
        "/ws/google.ai.generativelanguage.v1alpha.GenerativeService.BidiGenerateContent", reject
    )
    port = free_port()
    model = GeminiLive(http_options=_local(port, certs[0]))

    async def open_session():
        async with model.session(None, 0):
            pass

    with pytest.raises(GeminiLiveError, match="cannot open a session") as e:
        asyncio.run(serve_and_run(app, port, open_session, server_ssl(*certs)))
    assert KEY not in str(e.value)


def test_yaml_instantiates_like_the_run_stage(api_key):
    import json

    from fake_servers_common import model_from_yaml

    m = model_from_yaml("gemini")
    assert isinstance(m, GeminiLive) and m.voice == "Zephyr" and m.server is None
    cfg = m.connect_config(None)
    assert cfg.system_instruction is None and cfg.proactivity.proactive_audio
    json.dumps(m.identity())
