"""Fun-Audio-Chat adapter against a local stand-in server (tests/models/fake_servers_funaudiochat.py).

The server side is a local stand-in written from the upstream protocol (FunAudioLLM/Fun-Audio-Chat
`web_demo/server/server.py`, `protocal.py`: kind-byte WebSocket, Ogg/Opus 24 kHz, START / PAUSE
control) with a scripted model, not the real model.
"""

from __future__ import annotations

import asyncio

import numpy as np
import pytest

pytest.importorskip("aiohttp")
pytest.importorskip("sphn")

from helpers import health
from fake_servers_common import (
    free_port,
    make_reply,
    question_and_barge_in,
    run_realtime_session,
    serve_and_run,
)
from fake_servers_funaudiochat import PAUSE, START, FakeFunAudioChatServer

from fdeval.models.funaudiochat import S2M_PROMPT, FunAudioChat, FunAudioChatServerError
from fdeval.orchestrator.session import OrchestratorConfig
from fdeval.orchestrator.turns import TurnConfig

INSTRUCTION = "Keep every answer short."


@pytest.fixture(scope="module")
def replies():
    return [
        make_reply("Sure. Start with short easy runs, three times a week."),
        make_reply("Okay, sorry."),
    ]


def _session(tts, vad, fake, max_session_s, **kw):
    case, audio = question_and_barge_in(tts, "funaudiochat_protocol")
    port = free_port()
    model = FunAudioChat(port=port, pause_after_silence_s=0.6, turn_silence_s=0.8, **kw)
    # health bounds no loaded machine reaches: a session behind real time is stopped early
    cfg = OrchestratorConfig(
        turns=TurnConfig(silence_s=0.8, trailing_silence_s=0.3, max_session_s=max_session_s),
        health=health.LENIENT,
    )

    return case, run_realtime_session(fake.app(), port, model, case, audio, vad, cfg, INSTRUCTION)


def test_realtime_session_start_pause_and_opus(tts, vad, replies):
    fake = FakeFunAudioChatServer(replies)
    case, res = _session(tts, vad, fake, 10.0)
    log = res.log
    turns = {t["index"]: t for t in log.turns}
    # handshake before anything from the client; the prompt as metadata first
    kinds = [what for _, what, _ in fake.log]
    assert kinds[0] == "handshake" and kinds[1] == "metadata"
    assert fake.prompts == [f"{S2M_PROMPT} {INSTRUCTION}"]
    # START at each user speech onset, PAUSE after the user's silence
    t0 = fake.log[0][0]
    controls = [(t - t0, a) for t, what, a in fake.log if what == "control"]
    assert [a for _, a in controls] == [START, PAUSE, START, PAUSE]
    q_start, q_end = turns[0]["actual_s"], turns[0]["end_s"]
    assert q_start < controls[0][0] < q_start + 0.4
    assert q_end + 0.5 < controls[1][0] < q_end + 1.2
    # the whole question reached the model (pre-roll replayed after START) and both turns were answered
    assert len(fake.turns_heard) == 2
    assert fake.turns_heard[0] >= case.turns[0].duration_s
    # Opus audio decoded onto the model channel
    assert log.model_chunks
    first_play = log.model_chunks[0][1]
    assert (
        np.sqrt(np.mean(res.model[int(first_play * 16000) : int((first_play + 1) * 16000)] ** 2))
        > 0.01
    )
    # text pieces: status strings dropped, placed at arrival
    texts = [row[3] for row in log.model_text]
    assert "".join(texts).split()[:3] == ["Sure.", "Start", "with"]
    assert not any("[" in t for t in texts)
    for arrival, play, *_ in log.model_text:
        assert play == pytest.approx(arrival, abs=0.05)
    assert log.model_text[0][1] >= first_play - 0.05
    # a barge-in is a START; the answer was already sent and keeps playing (no flush by default)
    assert turns[1]["wait_reason"] == "onset"
    assert controls[2][0] > turns[1]["actual_s"]
    assert not log.flushes
    b = turns[1]["actual_s"]
    assert np.sqrt(np.mean(res.model[int((b + 0.2) * 16000) : int((b + 0.7) * 16000)] ** 2)) > 0.01


def test_flush_on_start_drops_the_unplayed_answer(tts, vad, replies):
    fake = FakeFunAudioChatServer(replies, final_text=False)
    _, res = _session(tts, vad, fake, 5.0, flush_on_start=True)
    log = res.log
    turns = {t["index"]: t for t in log.turns}
    assert len(log.flushes) == 1
    t_flush, dropped = log.flushes[0]
    assert turns[1]["actual_s"] < t_flush < turns[1]["actual_s"] + 0.4 and dropped > 8000
    # text whose audio position is after the flush is marked as never played
    assert all(not row[4] or row[1] >= t_flush for row in log.model_text)


def test_server_error_message_is_an_infrastructure_error(replies):
    from aiohttp import web

    async def handler(request):
        ws = web.WebSocketResponse()
        await ws.prepare(request)
        await ws.send_bytes(bytes([0, 0, 0]))
        await ws.receive()  # the metadata
        await ws.send_bytes(b"\x05Processing failed: CUDA out of memory")
        await asyncio.sleep(0.5)
        return ws

    app = web.Application()
    app.router.add_get("/api/chat", handler)
    port = free_port()
    model = FunAudioChat(port=port)

    async def wait_and_receive():
        async with model.session(None, 0) as sess:
            await asyncio.sleep(0.2)
            await sess.receive()

    with pytest.raises(FunAudioChatServerError, match="CUDA out of memory"):
        asyncio.run(serve_and_run(app, port, wait_and_receive))


def test_yaml_instantiates_like_the_run_stage():
    import json

    from fake_servers_common import model_from_yaml

    m = model_from_yaml("funaudiochat")
    assert isinstance(m, FunAudioChat) and m.sample_rate == 24000 and m.turn_silence_s == 5.0
    assert m.prompt(None) == S2M_PROMPT and not m.flush_on_start
    json.dumps(m.identity())


def test_probe_waits_for_the_handshake(replies):
    fake = FakeFunAudioChatServer(replies)
    port = free_port()

    asyncio.run(serve_and_run(fake.app(), port, FunAudioChat(port=port).probe))
    with pytest.raises(FunAudioChatServerError, match="not reachable"):
        asyncio.run(FunAudioChat(port=port).probe(timeout_s=2.0))
