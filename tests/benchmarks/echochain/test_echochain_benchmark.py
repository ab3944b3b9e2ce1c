"""The EchoChain benchmark object: responder assignment, config errors, the replay guard."""

from __future__ import annotations

import collections

import pytest

from fdeval.audio.tts import EspeakTTS
from fdeval.benchmarks.echochain.benchmark import EchoChain
from fdeval.errors import ConfigError


def test_each_conversation_gets_one_responder_at_random_seeded_and_recorded(tmp_path):
    kw = dict(n_conversations=8, responders=["model_a", "model_b"], voices=["en-us+m1", "en-us+f2"])
    a, b = EchoChain(model_name="model_a", **kw), EchoChain(model_name="model_b", **kw)
    tts = EspeakTTS(voice="en-us+m1")
    a.generate(tmp_path, tts, seed=0, progress=False)
    mine, theirs = a.load(tmp_path), b.load(tmp_path)
    assert {c.data.responder for c in mine} == {"model_a"} and {
        c.data.responder for c in theirs
    } == {"model_b"}
    assert (
        len(mine) + len(theirs) == 8 and mine and theirs
    )  # every conversation to exactly one of them
    assert {c.case_id for c in mine}.isdisjoint({c.case_id for c in theirs})
    # seeded: the same assignment for the same seed, another for another seed (over many ids)
    ids = [f"ec{k:03d}-x" for k in range(200)]
    assert [a.responder_for(i, 0) for i in ids] == [b.responder_for(i, 0) for i in ids]
    assert [a.responder_for(i, 0) for i in ids] != [a.responder_for(i, 1) for i in ids]
    counts = collections.Counter(a.responder_for(i, 0) for i in ids)
    assert 70 <= counts["model_a"] <= 130  # uniform-ish
    voices = {c.data.voice for c in mine + theirs}
    assert (
        voices <= {"en-us+m1", "en-us+f2"} and len(voices) == 2
    )  # one voice per conversation, drawn per case


@pytest.mark.parametrize(
    "kw, field",
    [
        (dict(model_name="c", responders=["a", "b"]), "benchmark.responders"),
        (dict(max_exchanges=1), "benchmark.max_exchanges"),
        (dict(mode="replay"), "benchmark.replay_from"),
        (dict(score_on="some"), "benchmark.score_on"),
        (dict(planner={"backend": "offline", "colour": 1}), "benchmark.planner"),
        (dict(simulator={"backend": "anthropic"}), "benchmark.classifier.backend"),
    ],
)
def test_bad_settings_are_one_line_naming_the_key(kw, field):
    with pytest.raises(ConfigError) as e:
        EchoChain(**kw)
    assert field in str(e.value) and "\n" not in str(e.value)
