"""TACT's LLM intent judge (issue 27, item 6): strict answers, re-asks, errors recorded as errors,
episodes written without losing anything, relaunch from cache; the calibration report on a
synthetic set with a known miscalibration; Krippendorff's alpha on published and hand-computed
examples. The judge talks to the local stand-ins over real HTTP on 127.0.0.1."""

from __future__ import annotations

import json
import math
import socket
from pathlib import Path

import numpy as np
import pytest
from helpers.fake_messages_server import fake_api, text as anthropic_text  # noqa: F401
from helpers.fake_openai_server import drop, error as openai_error, fake_openai, text as openai_text  # noqa: F401

from fdeval.benchmarks.tact.agreement import (
    episode_agreement,
    krippendorff_alpha,
    overlap_acceptance_s,
    window_coverage,
    window_grid,
)
from fdeval.benchmarks.tact.calibration import calibration_report, report_markdown
from fdeval.benchmarks.tact.episodes import (
    Annotations,
    Episode,
    HistoryLine,
    HumanContinuation,
    ReplayTurn,
    SpeakerProfile,
    episode_to_dict,
    load_episodes,
)
from fdeval.benchmarks.tact.intent_judge import (
    DEFAULTS,
    PROB_FLOOR,
    check_settings,
    judge_data_root,
    main,
    parse_answer,
    probabilities_to_logits,
    prompt_hash,
    render_prompt,
)
from fdeval.benchmarks.tact.laws import INTENTS
from fdeval.benchmarks.tact.posterior import expected_calibration_error, reliability_table
from fdeval.errors import ConfigError
from fdeval.files import write_json_atomic

NAN = math.nan
PROFILE = SpeakerProfile(
    12.5,
    0.21,
    -0.1,
    0.7,
    0.4,
    0.9,
    1.5,
    4.0,
    6.0,
    4.5,
    {"filled_pause": 2.0, "trailing_conjunction": 1.0},
)


def _episode(
    eid: str,
    split: str,
    labels: tuple[str, ...],
    category: str = "smooth_turn_taking",
    judge_logits=None,
) -> Episode:
    k = len(labels)
    ann = Annotations(
        labels,
        tuple(0.1 * i for i in range(k)),
        tuple(((-0.2 + 0.1 * i, 0.8),) for i in range(k)),
        tuple(() for _ in range(k)),
    )
    history = (
        HistoryLine("other", "So how was the trip back?", -4.2, -2.9),
        HistoryLine("focal", f"Long, and the train was late, marker-{eid}", -1.8, 0.0),
    )
    return Episode(
        eid,
        "synthetic",
        category,
        f"audio/{eid}.wav",
        0,
        16000,
        2.0,
        (ReplayTurn("take-turn", f"audio/{eid}.turn0.wav", -2.0, 0.0),),
        ((-1.8, 0.0),),
        history,
        "spk1",
        PROFILE,
        ann,
        {
            "gender": "f",
            "age_band": "30-49",
            "l1_region": "north_america",
            "snr": "high",
            "rate_tercile": "mid",
        },
        category,
        split,
        judge_logits,
        HumanContinuation(0.3, 1.2),
        {"note": "hand-made"},
    )


def _data_root(tmp_path: Path) -> Path:
    root = tmp_path / "data"
    eps = [
        _episode("ep1", "dev", ("ans", "ans", "ref")),
        _episode("ep2", "dev", ("hold", "hold", "abn")),
        _episode("ep3", "test", ("ans", "ref", "ans", "ans")),
        _episode("ep4", "test", ("bck", "hold", "bck"), "backchanneling"),
        _episode(
            "ep5", "test", ("ans", "ans", "ans"), judge_logits=(0.0, -1.0, -2.0, -3.0, -4.0, -5.0)
        ),
    ]
    for e in eps:
        write_json_atomic(root / "episodes" / f"{e.episode_id}.json", episode_to_dict(e))
    return root


ANSWERS = {  # episode -> the judge's probabilities
    "ep1": {"ans": 0.7, "ref": 0.2, "rhe": 0.05, "hold": 0.05, "bck": 0.0, "abn": 0.0},
    "ep2": {"ans": 0.0, "ref": 0.05, "rhe": 0.05, "hold": 0.8, "bck": 0.05, "abn": 0.05},
    "ep3": {"ans": 0.6, "ref": 0.3, "rhe": 0.1, "hold": 0.0, "bck": 0.0, "abn": 0.0},
    "ep4": {"ans": 0.0, "ref": 0.0, "rhe": 0.0, "hold": 0.3, "bck": 0.7, "abn": 0.0},
    "ep5": {"ans": 0.9, "ref": 0.1, "rhe": 0.0, "hold": 0.0, "bck": 0.0, "abn": 0.0},
}


def _answer(eid: str) -> str:
    return json.dumps({"reasoning": "A asked a plain question.", "probabilities": ANSWERS[eid]})


def _episode_of(body) -> str:
    """Which episode a recorded request asks about (its transcript carries a marker)."""
    msgs = body["messages"]
    content = msgs[-1]["content"]
    return content.split("marker-")[1].split("\n")[0]


def _raw(root: Path, eid: str) -> dict:
    return json.loads((root / "episodes" / f"{eid}.json").read_text())


# ---------------------------------------------------------------------------------------------
# Answers, prompt, settings


def test_parse_answer_is_strict_and_says_why():
    ok = json.dumps({"reasoning": "x", "probabilities": ANSWERS["ep1"]})
    p, why = parse_answer(ok)
    assert p.tolist() == pytest.approx([0.7, 0.2, 0.05, 0.05, 0, 0]) and why == "x"
    assert parse_answer(f"```json\n{ok}\n```")[0].tolist() == pytest.approx(p.tolist())
    p2, _ = parse_answer(
        json.dumps({"probabilities": {**ANSWERS["ep1"], "ans": 0.71}})
    )  # within 0.02: renormalised
    assert p2.sum() == pytest.approx(1.0)
    bad = [
        ("Sure! " + ok, "one JSON object"),
        ("{not json", "not valid JSON"),
        (json.dumps({"probabilities": {**ANSWERS["ep1"], "ans": 70}}), "number from 0 to 1"),
        (
            json.dumps({"probabilities": {k: v for k, v in ANSWERS["ep1"].items() if k != "abn"}}),
            "missing ['abn']",
        ),
        (json.dumps({"probabilities": {**ANSWERS["ep1"], "other": 0}}), "unknown ['other']"),
        (json.dumps({"probabilities": {**ANSWERS["ep1"], "ans": 0.3}}), "add up to 0.6"),
        (json.dumps({"probabilities": ANSWERS["ep1"], "label": "ans"}), "unexpected key"),
        (json.dumps({"probabilities": {**ANSWERS["ep1"], "bck": True}}), "number from 0 to 1"),
    ]
    for text, reason in bad:
        with pytest.raises(ValueError, match=reason.replace("[", r"\[").replace("]", r"\]")):
            parse_answer(text)
    with pytest.raises(ValueError, match="cut off"):
        parse_answer(ok, "max_tokens")


def test_logits_give_back_the_stated_distribution_with_a_floor():
    p = np.array([0.7, 0.3, 0, 0, 0, 0])
    l = probabilities_to_logits(p)
    q = np.exp(l) / np.exp(l).sum()
    assert np.all(np.isfinite(l)) and q[2] == pytest.approx(PROB_FLOOR, rel=1e-3)
    assert q[:2] == pytest.approx([0.7, 0.3], abs=1e-3)


def test_prompt_gives_history_profile_and_situation_but_no_answers():
    e = _episode("ep1", "dev", ("rhe", "rhe", "rhe"))
    text = render_prompt(e)
    assert "[-4.20, -2.90] B: So how was the trip back?" in text
    assert "[-1.80, 0.00] A: Long, and the train was late" in text
    assert "+0.21 s" in text and "12.5 minutes" in text and "4.5 syllables per second" in text
    assert (
        "rhe" not in text and "smooth_turn_taking" not in text and "0.30" not in text
    )  # no labels, category, continuation
    assert "talking over B" in render_prompt(_episode("x", "dev", ("ans",), "user_interruption"))
    assert len(prompt_hash()) == 16


def test_settings_errors_are_one_line():
    with pytest.raises(
        ConfigError,
        match=r"intent_judge\.colour: unknown key; valid: \[backend, base_url, cache_dir",
    ):
        check_settings({"colour": "red"})
    with pytest.raises(
        ConfigError, match=r"intent_judge\.temperature: must be a number in \[0, 2\]"
    ):
        check_settings({"temperature": 3})
    with pytest.raises(ConfigError, match="intent_judge.model: required for backend vllm"):
        check_settings({"backend": "vllm"})
    with pytest.raises(
        ConfigError, match="intent_judge.reasoning_effort: a setting of the OpenAI protocol"
    ):
        check_settings({"reasoning_effort": "low"})
    assert check_settings({})["model"] == "claude-sonnet-4-6" and set(check_settings({})) == set(
        DEFAULTS
    )


# ---------------------------------------------------------------------------------------------
# The judge over HTTP


def test_judge_over_the_messages_api_writes_logits_and_relaunches_from_cache(fake_api, tmp_path):
    root = _data_root(tmp_path)
    before = {e: _raw(root, e) for e in ANSWERS}
    seen: list[str] = []

    def respond(body):
        eid = _episode_of(body)
        seen.append(eid)
        if eid == "ep3" and seen.count("ep3") == 1:
            return anthropic_text("I think it is ans with 0.6")  # not JSON: asked again
        return anthropic_text(_answer(eid))

    fake_api.responder = respond
    settings = {"base_url": fake_api.base_url, "workers": 2, "max_retries": 0}
    s = judge_data_root(root, settings)
    assert len(fake_api.message_requests) == 6 and sorted(seen) == [
        "ep1",
        "ep2",
        "ep3",
        "ep3",
        "ep4",
        "ep5",
    ]
    assert (
        s["ok"] == 5
        and not s["errors"]
        and s["episodes"] == {"written": 4, "unchanged": 0, "kept": 1}
    )
    reask = fake_api.message_requests[[i for i, e in enumerate(seen) if e == "ep3"][1]].body
    assert (
        "could not be used: the answer must be one JSON object" in reask["messages"][-1]["content"]
    )
    assert reask["model"] == "claude-sonnet-4-6" and reask.get("temperature", 0.0) == 0.0

    folder = Path(s["folder"])
    rec3 = json.loads((folder / "records" / "ep3.json").read_text())
    assert (
        rec3["status"] == "ok"
        and len(rec3["answers"]) == 2
        and "one JSON object" in rec3["rejected"][0]
    )
    assert rec3["identity"]["prompt_hash"] == prompt_hash()
    for eid in ("ep1", "ep2", "ep3", "ep4"):
        after = _raw(root, eid)
        p = np.exp(after["judge_logits"])
        assert p / p.sum() == pytest.approx([ANSWERS[eid][z] for z in INTENTS], abs=1e-3)
        assert after["meta"]["intent_judge"]["judge_key"] == s["judge_key"]
        # nothing else changed
        assert {k: v for k, v in after.items() if k not in ("judge_logits", "meta")} == {
            k: v for k, v in before[eid].items() if k not in ("judge_logits", "meta")
        }
        assert after["meta"]["note"] == "hand-made"
    assert _raw(root, "ep5") == before["ep5"]  # logits from another source are kept
    assert all(e.judge_logits is not None for e in load_episodes(root, check_audio=False))
    rep = json.loads((folder / "report.json").read_text())
    assert (
        rep["calibration"]["temperature_fit_on"] == "dev"
        and rep["calibration"]["n_episodes"]["evaluated"] == 3
    )
    assert rep["agreement"]["intent"]["level"] == "nominal" and (folder / "report.md").is_file()

    # A relaunch sends nothing: every record is reused ...
    n = len(fake_api.message_requests)
    s2 = judge_data_root(root, settings)
    assert (
        len(fake_api.message_requests) == n
        and s2["reused"] == 5
        and s2["episodes"]["unchanged"] == 4
    )
    # ... and without the records, every answer (the rejected one included) comes from the cache.
    for f in (folder / "records").iterdir():
        f.unlink()
    s3 = judge_data_root(root, settings)
    assert len(fake_api.message_requests) == n and s3["judged"] == 5 and s3["ok"] == 5
    # --replace overwrites the imported logits, still from the cache
    s4 = judge_data_root(root, settings, replace=True)
    assert len(fake_api.message_requests) == n and s4["episodes"]["written"] == 1
    assert _raw(root, "ep5")["meta"]["intent_judge"]["judge_key"] == s["judge_key"]


def test_errors_are_recorded_as_errors_on_the_openai_protocol(fake_openai, tmp_path, capsys):
    root = _data_root(tmp_path)
    before = _raw(root, "ep2")

    def respond(body):
        eid = _episode_of(body)
        if eid == "ep2":
            return openai_error(500, message="overloaded")  # an infrastructure error
        if eid == "ep4":
            return openai_text('{"probabilities": {"ans": 1}}')  # never a valid answer
        return openai_text(_answer(eid))

    fake_openai.responder = respond
    args = [
        str(root),
        "backend=vllm",
        "model=stand-in/judge",
        f"base_url={fake_openai.base_url}",
        "max_retries=0",
        "max_attempts=2",
        "workers=1",
        "seed=7",
    ]
    assert main(args) == 1
    out = capsys.readouterr().out
    assert "5 episode(s), 3 ok" in out and "2 error(s)" in out and "ECE" in out
    folder = next(p.parent for p in (root / "intent_judge").glob("*/identity.json"))
    r2 = json.loads((folder / "records" / "ep2.json").read_text())
    r4 = json.loads((folder / "records" / "ep4.json").read_text())
    assert (
        r2["status"] == "error" and "request failed" in r2["error"] and "overloaded" in r2["error"]
    )
    assert "probabilities" not in r2 and "judge_logits" not in r2
    assert (
        r4["status"] == "error"
        and "no valid answer in 2 attempt(s)" in r4["error"]
        and len(r4["rejected"]) == 2
    )
    assert (
        _raw(root, "ep2") == before and _raw(root, "ep4")["judge_logits"] is None
    )  # never written as a label
    body = fake_openai.chat_requests[0].body
    assert body["model"] == "stand-in/judge" and body["temperature"] == 0.0 and body["seed"] == 7

    # The relaunch asks again only for what failed (the rejected answers of ep4 come from the cache).
    fake_openai.responder = lambda body: openai_text(_answer(_episode_of(body)))
    n = len(fake_openai.chat_requests)
    assert main(args + ["max_attempts=3"]) == 0
    new = [_episode_of(r.body) for r in fake_openai.chat_requests[n:]]
    assert new == ["ep2", "ep4"]
    assert (
        _raw(root, "ep2")["judge_logits"] is not None
        and _raw(root, "ep4")["judge_logits"] is not None
    )


def test_an_unreachable_endpoint_stops_with_one_line(tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    root = _data_root(tmp_path)
    before = {e: _raw(root, e) for e in ANSWERS}
    with socket.socket() as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    assert (
        main(
            [
                str(root),
                "backend=vllm",
                "model=m",
                f"base_url=http://127.0.0.1:{port}/v1",
                "max_retries=0",
                "workers=1",
            ]
        )
        == 2
    )
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "unavailable" in err and f"127.0.0.1:{port}" in err
    assert {e: _raw(root, e) for e in ANSWERS} == before
    assert main([str(root), "colour=red"]) == 2
    assert "intent_judge.colour: unknown key; valid: [" in capsys.readouterr().err


def test_a_server_that_goes_away_keeps_what_was_judged(fake_openai, tmp_path, capsys):
    root = _data_root(tmp_path)
    fake_openai.responder = lambda body: (
        openai_text(_answer(_episode_of(body))) if _episode_of(body) in ("ep1", "ep2") else drop()
    )
    assert (
        main(
            [
                str(root),
                "backend=vllm",
                "model=m",
                f"base_url={fake_openai.base_url}",
                "max_retries=0",
                "workers=1",
            ]
        )
        == 2
    )
    assert "unavailable" in capsys.readouterr().err
    assert (
        _raw(root, "ep1")["judge_logits"] is not None
        and _raw(root, "ep2")["judge_logits"] is not None
    )
    assert _raw(root, "ep3")["judge_logits"] is None and _raw(root, "ep4")["judge_logits"] is None
    folder = next(p.parent for p in (root / "intent_judge").glob("*/identity.json"))
    assert json.loads((folder / "records" / "ep3.json").read_text())["status"] == "error"
    assert not (folder / "report.json").exists()


# ---------------------------------------------------------------------------------------------
# Calibration report


def _panel(rng, n, scale, noise=0.3, concentration=0.5):
    """n episodes: a latent intent distribution, 3-5 annotators drawn from it, and a judge whose
    logits are `scale` x (the truth's log-probabilities + N(0, noise)): scale > 1 overconfident,
    < 1 underconfident; the noise sets how much of the truth the judge knows."""
    truth = rng.dirichlet(np.full(6, concentration), size=n)
    k = rng.integers(3, 6, size=n)
    counts = np.array([rng.multinomial(ki, p) for ki, p in zip(k, truth)], dtype=float)
    logits = scale * (np.log(truth) + rng.normal(0, noise, truth.shape))
    return counts, logits


@pytest.mark.parametrize("scale", [3.0, 0.4])
def test_calibration_lowers_ece_on_a_miscalibrated_synthetic_set(scale):
    rng = np.random.default_rng(27)
    counts, logits = _panel(rng, 2000, scale)
    dev = np.arange(2000) < 1000
    rep = calibration_report(counts, logits, dev)
    assert (
        rep["temperature_fit_on"] == "dev"
        and rep["evaluated_on"] == "test"
        and not rep["in_sample"]
    )
    assert rep["temperature"] == pytest.approx(
        scale, rel=0.1
    )  # the known miscalibration is recovered
    assert rep["ece_after"] < 0.25 * rep["ece_before"] and rep["ece_after"] < 0.02
    assert rep["nll_after"] < rep["nll_before"]
    for name in ("reliability_before", "reliability_after"):
        rows = rep[name]
        assert sum(r["n_labels"] for r in rows) == rep["n_labels_evaluated"]
        assert sum(r["n_episodes"] for r in rows) == 1000
        assert all(
            r["lo"] <= r["mean_confidence"] <= r["hi"] and 0 <= r["accuracy"] <= 1 for r in rows
        )
    md = report_markdown({"calibration": rep})
    assert "| ECE (10 bins) |" in md and "Reliability after calibration" in md


def test_held_out_annotator_fusion_against_each_source():
    # A judge that knows part of the truth: the fusion beats the other annotators alone (which
    # give 0 to labels nobody else chose), the judge alone, and the annotators smoothed toward uniform.
    counts, logits = _panel(np.random.default_rng(5), 2000, 3.0, noise=1.5, concentration=0.3)
    ho = calibration_report(counts, logits, np.arange(2000) < 1000)["held_out_annotator"]
    src = ho["sources"]
    assert ho["fusion_beats_both"] and ho["fitted_fusion_beats_both"]
    assert (
        src["annotators"]["log_likelihood"] is None
        and src["annotators"]["zero_probability_labels"] > 0
    )
    assert src["fused"]["log_likelihood"] > src["judge"]["log_likelihood"]
    assert (
        src["fused"]["log_likelihood"] > src["annotators_smoothed"]["log_likelihood"]
    )  # more than smoothing
    assert 0 < src["fused_fitted"]["judge_weight"] < 1
    assert "Fusion better than either source alone: yes at lambda = 0.3, yes" in report_markdown(
        {"calibration": {**calibration_report(counts, logits, np.arange(2000) < 1000)}}
    )
    # A judge that nearly sees the truth is better alone than blended 30/70 with 2-4 annotators:
    # the report says so instead of assuming the paper's claim.
    counts, logits = _panel(np.random.default_rng(5), 2000, 3.0, noise=0.3)
    ho = calibration_report(counts, logits, np.arange(2000) < 1000)["held_out_annotator"]
    assert not ho["fusion_beats_both"]


def test_without_a_dev_split_the_report_says_in_sample():
    counts, logits = _panel(np.random.default_rng(3), 200, 2.0)
    rep = calibration_report(counts, logits, np.zeros(200, dtype=bool))
    assert (
        rep["in_sample"]
        and rep["temperature_fit_on"] == "all"
        and rep["n_episodes"]["evaluated"] == 200
    )


def test_reliability_table_by_hand():
    probs = np.array(
        [
            [0.95, 0.01, 0.01, 0.01, 0.01, 0.01],  # top ans, conf .95, labels ans ans ref
            [0.05, 0.55, 0.1, 0.1, 0.1, 0.1],  # top ref, conf .55, labels ref hold
            [0.1, 0.1, 0.1, 0.6, 0.05, 0.05],
        ]
    )  # top hold, conf .60, labels hold hold
    counts = np.array([[2, 1, 0, 0, 0, 0], [0, 1, 0, 1, 0, 0], [0, 0, 0, 2, 0, 0]], dtype=float)
    rows = reliability_table(probs, counts, n_bins=10)
    assert [(r["lo"], r["n_labels"], r["n_episodes"]) for r in rows] == [
        (0.5, 2, 1),
        (0.6, 2, 1),
        (0.9, 3, 1),
    ]
    assert (
        rows[0]["accuracy"] == 0.5
        and rows[1]["accuracy"] == 1.0
        and rows[2]["accuracy"] == pytest.approx(2 / 3)
    )
    # ECE = (2 * |.5 - .55| + 2 * |1 - .6| + 3 * |2/3 - .95|) / 7
    assert expected_calibration_error(probs, counts, 10) == pytest.approx(
        (0.1 + 0.8 + 3 * (0.95 - 2 / 3)) / 7
    )


# ---------------------------------------------------------------------------------------------
# Krippendorff's alpha

# Krippendorff (2011), "Computing Krippendorff's alpha-reliability", section C: 4 coders (rows),
# 12 units, missing values; the paper gives nominal .743, ordinal .815, interval .849, ratio .797.
K2011 = [
    [1, 2, 3, 3, 2, 1, 4, 1, 2, NAN, NAN, NAN],
    [1, 2, 3, 3, 2, 2, 4, 1, 2, 5, NAN, 3],
    [NAN, 3, 3, 3, 2, 3, 4, 2, 2, 5, 1, NAN],
    [1, 2, 3, 3, 2, 4, 4, 1, 2, 5, 1, NAN],
]
# The worked example of Wikipedia's article: 3 coders, 15 units; nominal .691, interval .811.
WIKI = [
    [NAN, NAN, NAN, NAN, NAN, 3, 4, 1, 2, 1, 1, 3, 3, NAN, 3],
    [1, NAN, 2, 1, 3, 3, 4, 3, NAN, NAN, NAN, NAN, NAN, NAN, NAN],
    [NAN, NAN, 2, 1, 3, 4, 4, NAN, 2, 1, 1, 3, 3, NAN, 4],
]


def _units(coders):
    return [list(u) for u in zip(*coders)]


@pytest.mark.parametrize(
    "level, expected",
    [("nominal", 0.743), ("ordinal", 0.815), ("interval", 0.849), ("ratio", 0.797)],
)
def test_alpha_reproduces_krippendorffs_worked_example(level, expected):
    assert round(krippendorff_alpha(_units(K2011), level), 3) == expected


def test_alpha_reproduces_the_wikipedia_example():
    assert krippendorff_alpha(_units(WIKI), "nominal") == pytest.approx(0.691358, abs=1e-6)
    assert krippendorff_alpha(_units(WIKI), "interval") == pytest.approx(0.810845, abs=1e-6)


def test_alpha_by_hand():
    # Nominal: units (a, a), (a, b), (b, b). n = 6, o_ab = o_ba = 1, n_a = n_b = 3:
    # D_o = 2/6, D_e = 2 * 3 * 3 / (6 * 5) = 0.6, alpha = 1 - (1/3) / 0.6 = 4/9.
    assert krippendorff_alpha([["a", "a"], ["a", "b"], ["b", "b"]]) == pytest.approx(4 / 9)
    # Interval: units (1, 2), (3, 3). D_o = (2 * 1) / 4 = 0.5; all ordered pairs sum to 22, D_e = 22 / 12;
    # alpha = 1 - 0.5 * 12 / 22 = 8/11.
    assert krippendorff_alpha([[1, 2], [3, 3]], "interval") == pytest.approx(8 / 11)
    # Units (a, a, b) and (b, b): the three-value unit weighs each ordered pair by 1/(3 - 1), so
    # o_aa = 2/2 = 1, o_ab = o_ba = 2/2 = 1, and (b, b) adds o_bb = 2. n_a = 2, n_b = 3, n = 5:
    # D_o = 2/5, D_e = 2 * 2 * 3 / (5 * 4) = 0.6, alpha = 1 - 0.4 / 0.6 = 1/3.
    assert krippendorff_alpha([["a", "a", "b"], ["b", "b"]]) == pytest.approx(1 / 3)
    # Perfect agreement is 1; one coder only, or no variation at all, is undefined (NaN).
    assert krippendorff_alpha([[1, 1], [2, 2, None]], "interval") == 1.0
    assert math.isnan(krippendorff_alpha([[1], [2]])) and math.isnan(
        krippendorff_alpha([["a", "a"], ["a", "a"]])
    )
    with pytest.raises(ValueError, match="unknown level"):
        krippendorff_alpha([[1, 2]], "cosine")


def test_episode_agreement_on_the_stored_annotations():
    grid = window_grid()
    assert len(grid) == 70 and grid[0] == pytest.approx(-1.95) and grid[-1] == pytest.approx(4.95)
    assert window_coverage([(-0.5, 0.5)], grid).sum() == 10
    assert overlap_acceptance_s([(-2.0, -1.5), (-0.5, 0.8)]) == pytest.approx(1.0)
    same = Annotations(("ans", "ans"), (0.1, 0.1), (((0.0, 0.6),), ((0.0, 0.6),)), ((), ()))
    other = Annotations(("bck", "bck"), (0.5, 0.5), (((-0.6, 0.1),), ((-0.6, 0.1),)), ((), ()))
    single = Annotations(("hold",), (0.9,), ((),), ((),))  # one annotator: not pairable, left out
    ag = episode_agreement([same, other, single])
    assert {k: v["alpha"] for k, v in ag.items()} == {
        "intent": 1.0,
        "silence_acceptability": 1.0,
        "onset_windows": 1.0,
        "overlap_acceptance": 1.0,
    }
    assert ag["intent"]["units"] == 2 and ag["onset_windows"]["units"] == 140
    split = Annotations(("ans", "ref"), (0.1, 0.6), (((0.0, 0.6),), ((1.0, 3.0),)), ((), ()))
    ag2 = episode_agreement([same, other, split])
    assert (
        ag2["intent"]["alpha"] < 1
        and ag2["onset_windows"]["alpha"] < 1
        and ag2["silence_acceptability"]["alpha"] < 1
    )
    # The intent figure is the nominal alpha of the label lists.
    assert ag2["intent"]["alpha"] == pytest.approx(
        krippendorff_alpha([["ans", "ans"], ["bck", "bck"], ["ans", "ref"]])
    )
