"""Freeze-Omni adapter against a local stand-in server (tests/models/fake_servers_freezeomni.py).

The server side is a local stand-in written from the upstream protocol (VITA-MLLM/Freeze-Omni
`bin/server.py`, `web/parms.py`, `web/resources/demo.html`: Socket.IO over HTTPS with a
self-signed certificate made here) with a scripted model, not the real model.
"""

from __future__ import annotations

import asyncio

import numpy as np
import pytest

pytest.importorskip("socketio")
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
from fake_servers_freezeomni import FakeFreezeOmniServer

from fdeval.models.freezeomni import (
    SERVER_DEFAULT_ROLE,
    FreezeOmni,
    FreezeOmniServerError,
)
from fdeval.orchestrator.session import OrchestratorConfig
from fdeval.orchestrator.turns import TurnConfig

INSTRUCTION = "Keep every answer short."


@pytest.fixture(scope="module")
def replies():
    return [
        make_reply(
            "Sure. Start with short easy runs, three times a week, and walk when you need to."
        ),
        make_reply("Okay, sorry."),
    ]


@pytest.fixture(scope="module")
def tls(tmp_path_factory):
    return server_ssl(*self_signed_cert(tmp_path_factory.mktemp("tls")))


def test_realtime_session_audio_piggyback_and_stop_tts(tts, vad, replies, tls):
    case, audio = question_and_barge_in(tts, "freezeomni_protocol")
    fake = FakeFreezeOmniServer(replies)
    port = free_port()
    model = FreezeOmni(port=port)
    assert model.frame_s == 0.016
    # health bounds no loaded machine reaches: a session behind real time is stopped early
    cfg = OrchestratorConfig(
        turns=TurnConfig(silence_s=0.8, trailing_silence_s=0.3, max_session_s=12.0),
        health=health.LENIENT,
    )

    res = run_realtime_session(fake.app(), port, model, case, audio, vad, cfg, INSTRUCTION, tls)
    log = res.log
    # order: role first (acknowledged), then recording-started, then audio
    names = [e for e, _ in fake.log if e != "connect"]
    assert names[:3] == ["prompt_text", "recording-started", "audio"]
    assert fake.log[1][1] == f"{SERVER_DEFAULT_ROLE}\n{INSTRUCTION}"
    assert ("recording-stopped", None) in fake.log
    # audio events: JSON {"sample_rate": 16000, "audio": 512 int16 bytes}, paced at 16 ms
    assert {(sr, n) for _, sr, n in fake.audio_events} == {(16000, 512)}
    t = np.array([e[0] for e in fake.audio_events])
    rate = (len(t) - 1) / (t[-1] - t[0])
    assert 55 < rate < 68, rate
    # the reply's 24 kHz int16 segments land on the model channel, resampled to 16 kHz
    assert fake.segments_sent >= 3 and log.model_chunks
    first_play = log.model_chunks[0][1]
    assert (
        np.sqrt(np.mean(res.model[int(first_play * 16000) : int((first_play + 0.5) * 16000)] ** 2))
        > 0.01
    )
    assert not log.model_text  # Freeze-Omni sends no text
    # the barge-in (injected after the model's onset) made the server send stop_tts: the queued
    # rest of the reply was flushed from playback
    turns = {t["index"]: t for t in log.turns}
    assert turns[1]["wait_reason"] == "onset"
    assert fake.barge_ins == 1
    assert len(log.flushes) == 1
    flush_t, dropped = log.flushes[0]
    assert dropped > 16000 and turns[1]["actual_s"] < flush_t < turns[1]["actual_s"] + 0.5
    played = res.model[int(flush_t * 16000) + 10 : int((flush_t + 0.5) * 16000)]
    assert np.sqrt(np.mean(played**2)) < 1e-3  # silence right after the flush


def test_too_many_users_is_an_infrastructure_error(replies, tls):
    fake = FakeFreezeOmniServer(replies, max_users=0)
    port = free_port()
    model = FreezeOmni(port=port, transports=["websocket"])

    async def open_session():
        async with model.session(None, 0):
            pass

    with pytest.raises(FreezeOmniServerError, match="too many users"):
        asyncio.run(serve_and_run(fake.app(), port, open_session, tls))


def test_no_server_is_an_infrastructure_error():
    model = FreezeOmni(port=free_port(), connect_timeout_s=2.0)

    async def main():
        async with model.session(None, 0):
            pass

    with pytest.raises(FreezeOmniServerError, match="cannot connect"):
        asyncio.run(main())


def test_yaml_instantiates_like_the_run_stage():
    import json

    from fake_servers_common import model_from_yaml

    m = model_from_yaml("freezeomni")
    assert isinstance(m, FreezeOmni) and m.frame_s == 0.016 and m.sample_rate == 16000
    assert m.prompt(None) == SERVER_DEFAULT_ROLE and "--top_k" in m.server["command"]
    json.dumps(m.identity())


def test_probe_gets_the_demo_page_over_unverified_https(replies, tls):
    fake = FakeFreezeOmniServer(replies)
    port = free_port()

    asyncio.run(serve_and_run(fake.app(), port, FreezeOmni(port=port).probe, tls))
    with pytest.raises(FreezeOmniServerError, match="not reachable"):
        asyncio.run(FreezeOmni(port=port).probe(timeout_s=2.0))
