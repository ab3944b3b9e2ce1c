"""MiniCPM-o adapter against a local stand-in worker (tests/models/fake_servers_minicpmo.py).

The server side is a local stand-in written from the upstream protocol (OpenBMB/MiniCPM-o-Demo
`worker.py`, `core/schemas/duplex.py`) with a scripted model, not the real model: these tests
check the wire protocol, the 1 Hz pacing and what lands on the session timeline.
"""

from __future__ import annotations

import asyncio
import re

import numpy as np
import pytest

pytest.importorskip("aiohttp")

from helpers import health
from fake_servers_common import (
    free_port,
    make_reply,
    question_and_barge_in,
    run_realtime_session,
    serve_and_run,
)
from fake_servers_minicpmo import FakeMiniCPMOWorker

from fdeval.models.minicpmo import MiniCPMO, MiniCPMOServerError
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


def _run(coro):
    return asyncio.run(coro)


def test_realtime_session_one_chunk_per_second(tts, vad, replies):
    case, audio = question_and_barge_in(tts, "minicpmo_protocol")
    fake = FakeMiniCPMOWorker(replies)
    port = free_port()
    model = MiniCPMO(
        host="127.0.0.1",
        port=port,
        base_prompt="You are a helpful assistant.",
        config={"length_penalty": 1.05},
    )
    # health bounds no loaded machine reaches: a session behind real time is stopped early
    cfg = OrchestratorConfig(
        turns=TurnConfig(silence_s=0.8, trailing_silence_s=0.3, max_session_s=14.0),
        health=health.LENIENT,
    )

    res = run_realtime_session(fake.app(), port, model, case, audio, vad, cfg, INSTRUCTION)
    log = res.log
    assert not fake.protocol_errors
    # prepare first, with the field names the worker reads
    first = fake.messages[0]
    assert first["type"] == "prepare"
    assert first["system_prompt"] == f"You are a helpful assistant.\n{INSTRUCTION}"
    assert first["config"] == {"length_penalty": 1.05}
    assert re.fullmatch(r"fdeval_0_[0-9a-f]{8}", fake.session_ids[0])
    chunks = [m for m in fake.messages if m["type"] == "audio_chunk"]
    assert chunks and all(m["audio_base64"] == 16000 for m in chunks)  # 1 s of float32 at 16 kHz
    assert fake.messages[-1]["type"] == "stop"
    # pacing: one chunk per second of wall time. A chunk leaves with the frame that completes its
    # second, at most the session's recorded pacing lag late (load): each gap is 1 s to within twice
    # that lag and 0.2 s of the event loop's turns (the figure, not a guess at the machine's load).
    # A client sending as fast as it can has gaps near 0 (while the lag stays small: it never sends
    # a frame early); one that batches seconds, gaps of 2 s and more.
    gaps = np.diff(fake.chunk_times)
    lag = health.check_pacing(log)
    assert (
        abs(np.median(gaps) - 1.0) < 0.05 + 2 * lag and np.abs(gaps - 1.0).max() < 0.2 + 2 * lag
    ), (gaps, lag)
    # the answer lands on the model channel (24 kHz resampled to the session's 16 kHz)
    assert log.model_chunks and all(abs(n - 16000) <= 16 for _, _, n in log.model_chunks[:-1])
    first_play = log.model_chunks[0][1]
    assert (
        np.sqrt(np.mean(res.model[int(first_play * 16000) : int((first_play + 1) * 16000)] ** 2))
        > 0.01
    )
    # text pieces logged, placed where their second of audio starts playing
    words = " ".join(row[3] for row in log.model_text).split()
    assert words[:3] == ["Sure.", "Start", "with"]
    assert log.model_text[0][1] == pytest.approx(first_play, abs=1e-6)
    # the barge-in was injected after the model's onset; the scripted model stopped: its long
    # reply (~5 s) was cut short, and the short one followed the barge-in
    turns = {t["index"]: t for t in log.turns}
    assert turns[1]["wait_reason"] == "onset" and not np.isnan(turns[1]["actual_s"])
    assert fake.barge_ins == 1
    long_reply_end = max(
        p + n / 16000 for _, p, n in log.model_chunks if p < turns[1]["actual_s"] + 1.0
    )
    assert long_reply_end - first_play < replies[0].duration_s - 1.0
    assert "Okay," in words
    assert not log.flushes  # MiniCPM-o sends no interruption signal; nothing is flushed


@pytest.mark.parametrize("busy", ["403", "1013"])
def test_busy_worker_is_an_infrastructure_error(replies, busy):
    fake = FakeMiniCPMOWorker(replies, busy=busy)
    port = free_port()
    model = MiniCPMO(port=port)

    async def one_chunk():
        async with model.session(None, 0) as sess:
            await sess.send(np.zeros(16000, np.float32))
            await asyncio.sleep(0.2)
            await sess.receive()

    with pytest.raises(MiniCPMOServerError, match="busy"):
        _run(serve_and_run(fake.app(), port, one_chunk))


def test_no_server_is_an_infrastructure_error():
    model = MiniCPMO(port=free_port(), connect_timeout_s=2.0)

    async def main():
        async with model.session(None, 0):
            pass

    with pytest.raises(MiniCPMOServerError, match="cannot connect"):
        _run(main())


def test_uninstructed_prompt_and_identity():
    m = MiniCPMO(base_prompt=None)
    assert m.prompt(None) is None and m.prompt("Be brief.") == "Be brief."
    ident = m.identity()
    assert "port" not in ident and ident["output_sample_rate"] == 24000 and ident["frame_s"] == 1.0


def test_yaml_instantiates_like_the_run_stage():
    import json

    from fake_servers_common import model_from_yaml

    m = model_from_yaml("minicpmo")
    assert isinstance(m, MiniCPMO) and m.frame_s == 1.0 and m.sample_rate == 16000
    assert m.config == {"length_penalty": 1.05} and isinstance(m.server["command"], list)
    json.dumps(m.identity())


def test_probe_reads_the_health_endpoint(replies):
    fake = FakeMiniCPMOWorker(replies)
    port = free_port()

    _run(serve_and_run(fake.app(), port, MiniCPMO(port=port).probe))
    with pytest.raises(MiniCPMOServerError, match="not reachable"):
        _run(MiniCPMO(port=port).probe(timeout_s=2.0))
