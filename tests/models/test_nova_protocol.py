"""model=nova_sonic: what can be checked without its SDK (which needs Python 3.12): the events the
adapter sends and what it makes of the service's events (fdeval.models.nova_sonic.NovaProtocol),
on scripted event sequences written from the Nova 2 Sonic event reference; the one-line refusal
on Python 3.11; a run whose cases could outlast the 8-minute stream refused before any session.
With Python 3.12: a session with a barge-in through the real SDK against the TLS HTTP/2 stand-in
(fake_servers_nova.py); skipped in one line on older interpreters, as are its contract checks."""

from __future__ import annotations

import base64
import json
import sys

import numpy as np
import pytest

from fdeval.engine.shared import check_model_limit
from fdeval.errors import ConfigError
from fdeval.models.nova_sonic import BARGE_IN_TEXT, NovaProtocol, NovaSonic
from fdeval.orchestrator.turns import TurnConfig
from fdeval.types import TestCase, Turn


def _proto(instruction="Keep it short."):
    return NovaProtocol(
        instruction, "matthew", {"maxTokens": 1024, "topP": 0.9, "temperature": 0.7}, "HIGH"
    )


def _names(events):
    return [next(iter(e["event"])) for e in events]


def test_the_session_opens_streams_and_closes_in_the_documented_order():
    p = _proto()
    opening = p.opening()
    assert _names(opening) == [
        "sessionStart",
        "promptStart",
        "contentStart",
        "textInput",
        "contentEnd",
        "contentStart",
    ]
    system, audio = opening[2]["event"]["contentStart"], opening[5]["event"]["contentStart"]
    assert (system["role"], system["type"], system["interactive"]) == ("SYSTEM", "TEXT", False)
    assert opening[3]["event"]["textInput"]["content"] == "Keep it short."
    assert (audio["role"], audio["type"], audio["audioInputConfiguration"]["sampleRateHertz"]) == (
        "USER",
        "AUDIO",
        16000,
    )
    assert (
        opening[1]["event"]["promptStart"]["audioOutputConfiguration"]["sampleRateHertz"] == 24000
    )
    assert opening[0]["event"]["sessionStart"]["turnDetectionConfiguration"] == {
        "endpointingSensitivity": "HIGH"
    }
    # every event after sessionStart names the prompt; audio goes into the one AUDIO content
    names = {e["event"][n].get("promptName") for e, n in zip(opening[1:], _names(opening[1:]))}
    assert names == {p.prompt_name}
    frame = np.full(512, 0.5, np.float32)
    ev = p.audio(frame)["event"]["audioInput"]
    assert ev["contentName"] == audio["contentName"]
    assert np.all(np.frombuffer(base64.b64decode(ev["content"]), "<i2") == 16383)
    assert _names(p.closing()) == ["contentEnd", "promptEnd", "sessionEnd"]
    assert p.closing()[0]["event"]["contentEnd"]["contentName"] == audio["contentName"]
    assert _names(_proto(None).opening()) == [
        "sessionStart",
        "promptStart",
        "contentStart",
    ]  # no instruction, no system text


def _ev(name, **body):
    return {"event": {name: body}}


def _start(cid, type_, role, stage=None):
    extra = json.dumps({"generationStage": stage}) if stage else None
    return _ev("contentStart", contentId=cid, type=type_, role=role, additionalModelFields=extra)


def _audio(cid, n=4800):
    pcm = (np.sin(np.arange(n) / 10) * 8000).astype("<i2")
    return _ev(
        "audioOutput",
        contentId=cid,
        role="ASSISTANT",
        content=base64.b64encode(pcm.tobytes()).decode(),
    )


def _answer(p, k, t):
    out = []
    for e in [
        _ev("completionStart", completionId=f"c{k}"),
        _start(f"t{k}", "TEXT", "ASSISTANT", "SPECULATIVE"),
        _ev("textOutput", contentId=f"t{k}", role="ASSISTANT", content="Sure, start slowly."),
        _ev("contentEnd", contentId=f"t{k}", stopReason="PARTIAL_TURN"),
        _start(f"a{k}", "AUDIO", "ASSISTANT"),
        _audio(f"a{k}"),
        _audio(f"a{k}"),
    ]:
        out += p.handle(e, t)
    return out


def test_speculative_text_audio_and_one_interruption_per_answer():
    p = _proto()
    events = _answer(p, 0, 1.0)
    kinds = [e.kind for e in events]
    assert kinds.count("text") == 1 and kinds.count("audio") == 2 and "interrupted" not in kinds
    assert events[kinds.index("text")].text == "Sure, start slowly."
    audio = [e for e in events if e.kind == "audio"]
    assert sum(len(e.audio) for e in audio) == pytest.approx(
        2 * 4800 * 2 / 3, abs=16
    )  # 24 kHz -> 16 kHz
    assert {e.item for e in audio} == {"a0"}
    # the barge-in: both signals, one interruption; the answer's late audio is dropped
    sig = p.handle(_start("i0", "TEXT", "ASSISTANT", "FINAL"), 2.0)
    sig += p.handle(_ev("textOutput", contentId="i0", role="ASSISTANT", content=BARGE_IN_TEXT), 2.0)
    sig += p.handle(_ev("contentEnd", contentId="a0", stopReason="INTERRUPTED"), 2.01)
    assert [e.kind for e in sig].count("interrupted") == 1
    assert p.handle(_audio("a0"), 2.05) == [] and p.dropped_audio_s == pytest.approx(0.2)
    # the next answer is heard whole, and can be interrupted again
    nxt = _answer(p, 1, 3.0)
    assert [e.kind for e in nxt].count("audio") == 2
    assert [
        e.kind for e in p.handle(_ev("contentEnd", contentId="a1", stopReason="INTERRUPTED"), 4.0)
    ] == ["vendor", "interrupted"]


def test_final_text_user_text_and_usage_are_logged_not_spoken():
    p = _proto()
    out = p.handle(_start("u0", "TEXT", "USER", "FINAL"), 1.0)
    out += p.handle(_ev("textOutput", contentId="u0", role="USER", content="how do I start"), 1.0)
    out += p.handle(_start("f0", "TEXT", "ASSISTANT", "FINAL"), 1.1)
    out += p.handle(_ev("textOutput", contentId="f0", role="ASSISTANT", content="Sure, start"), 1.1)
    assert [(e.kind, e.text) for e in out] == [("vendor", "user_text"), ("vendor", "spoken_text")]
    for _ in range(2):
        p.handle(
            _ev(
                "usageEvent",
                details={
                    "delta": {
                        "input": {"speechTokens": 10, "textTokens": 2},
                        "output": {"speechTokens": 30, "textTokens": 5},
                    }
                },
            ),
            1.2,
        )
    assert p.usage == {"speech_in": 20, "speech_out": 60, "text_in": 4, "text_out": 10}


@pytest.mark.skipif(sys.version_info >= (3, 12), reason="the refusal is for Python 3.11")
def test_python_311_is_refused_in_one_line():
    with pytest.raises(ConfigError, match=r"model=nova_sonic needs Python 3.12 or later") as e:
        NovaSonic()
    assert "\n" not in str(e.value)


class _Bench:
    @staticmethod
    def planned_turns(case):
        return case.turns


class _Limited:
    name, max_session_s = "nova_sonic", 480.0


def _case(cid, timeout_s):
    t = Turn(cid, 0, "t0", "take-turn", "a.wav", "hi", (), 2.0, timeout_s)
    return TestCase(
        cid,
        cid,
        "b",
        "s",
        None,
        (t, Turn(cid, 1, "t1", "take-turn", "b.wav", "ok", (), 2.0, timeout_s)),
    )


def test_cases_that_could_outlast_the_stream_are_refused_before_any_session():
    short, long = _case("short", 60.0), _case("long", 400.0)
    check_model_limit(
        [short, long], _Limited(), _Bench, TurnConfig(max_session_s=300.0)
    )  # cut at 300 s anyway
    check_model_limit([short], _Limited(), _Bench, TurnConfig(max_session_s=900.0))
    with pytest.raises(
        ConfigError,
        match=r"case 'long': planned to last up to \d+ s, longer than model=nova_sonic "
        r"allows in one session \(480 s\)",
    ) as e:
        check_model_limit([short, long], _Limited(), _Bench, TurnConfig(max_session_s=900.0))
    assert "\n" not in str(e.value)


def test_a_barge_in_through_the_sdk_against_the_stand_in(tts, vad, tmp_path, monkeypatch):
    from fake_servers_common import make_reply, question_and_barge_in
    from standins.nova_sonic import nova_model

    from fdeval.orchestrator.clock import RealtimeClock
    from fdeval.orchestrator.session import OrchestratorConfig, run_session
    from helpers import health

    replies = [
        make_reply(
            "Sure. Start with short easy runs, three times a week, and walk when you need to."
        ),
        make_reply("Okay, sorry."),
    ]
    case, audio = question_and_barge_in(tts, "nova_protocol")
    cfg = OrchestratorConfig(
        turns=TurnConfig(silence_s=0.8, trailing_silence_s=0.3, max_session_s=12.0),
        health=health.LENIENT,
    )
    with nova_model(tmp_path, monkeypatch, replies) as (model, server):
        import asyncio

        res = asyncio.run(
            run_session(case, audio, model, cfg, RealtimeClock(), vad, instruction="Keep it short.")
        )
    log = res.log
    (s,) = server.sessions
    assert s["model_id"] == "amazon.nova-2-sonic-v1:0" and s["authorization"].startswith(
        "AWS4-HMAC-SHA256"
    )
    assert server.barge_ins == 1 and len(log.flushes) == 1
    assert "Sure." in "".join(row[3] for row in log.model_text)
    assert [a["ended"] for a in s["answers"]][:1] == ["interrupted"]
    assert log.attrs["model_report"]["interrupted_answers"] == 1
