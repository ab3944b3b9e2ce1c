"""fdeval's FDB metrics (fdeval/benchmarks/fdb/metrics.py) against FDB's own evaluators, and their branches.

The agreement tests rebuild the fixture set of benchmarks/fdb_agreement.py (its `build_fixtures`
is the one definition), check every file's sha256 against data/fdb_reference.json, score the
set with fdeval and compare with the numbers FDB's unmodified evaluators printed on it (stored in
that JSON by `python benchmarks/fdb_agreement.py --run-fdb --fdb-python ...`). The unit tests
pin each branch of the rules on hand-built words and segments.
"""

from __future__ import annotations

import importlib.util
import json
import math
import sys
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf
from scipy.signal import resample_poly

from fdeval.audio.tts import EspeakTTS
from fdeval.benchmarks.fdb import metrics as m
from fdeval.benchmarks.fdb.metrics import Chunk

REPO = Path(__file__).resolve().parents[3]
SCRIPT = REPO / "benchmarks" / "fdb_agreement.py"
REFERENCE = Path(__file__).with_name("data") / "fdb_reference.json"

# Latencies, interval ends and frequencies: both sides do the same float operations on the same
# ms-rounded inputs, so they agree to the last bit today; 1 microsecond (or 1e-6 /s) leaves room
# for another numpy's summation order while staying far below the 1 ms input resolution, so no
# differing decision (a VAD boundary moves by >= 1 ms, a flipped rule by far more) can hide in it.
TIME_TOL_S = 1e-6
# JSD on full-precision values (recorded from FDB's lists): same reasoning; one VAD window or
# one 0.2 s bin of difference moves it by more than 1e-3.
JSD_TOL = 1e-6
# FDB prints its backchannel means to 4 decimals: a printed value is within half a unit of that.
PRINTED_TOL = 0.5e-4


def _load_builder():
    spec = importlib.util.spec_from_file_location("fdb_agreement", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


builder = _load_builder()
STORED = json.loads(REFERENCE.read_text(encoding="utf-8"))
FDB = STORED["results"]


@pytest.fixture(scope="module")
def fixtures(tmp_path_factory) -> tuple[Path, dict[str, str]]:
    root = tmp_path_factory.mktemp("fdb-fixtures")
    return root, builder.build_fixtures(root)


@pytest.fixture(scope="module")
def root(fixtures) -> Path:
    """The fixture folder, once its files are known to be the ones FDB was run on."""
    folder, hashes = fixtures
    stored = STORED["fixtures"]["sha256"]
    changed = sorted(p for p in stored.keys() | hashes.keys() if stored.get(p) != hashes.get(p))
    if changed:
        pytest.fail(
            f"{len(changed)} fixture file(s) differ from those FDB's numbers were computed on "
            f"(espeak-ng, fdeval's TTS or the builder changed?): {', '.join(changed[:8])}. "
            "Refresh the stored numbers with: python benchmarks/fdb_agreement.py --run-fdb "
            "--fdb-python /tmp/fdb-venv/bin/python"
        )
    return folder


def _json(path: Path):
    return json.loads(path.read_text(encoding="utf-8"))


def _samples(root: Path, task: str) -> list[Path]:
    return sorted((root / task).iterdir(), key=lambda p: int(p.name))


def _chunks(folder: Path) -> tuple[Chunk, ...]:
    return m.chunks_from_output_json(_json(folder / "output.json"))


def _vad(path: Path) -> tuple[list[tuple[float, float]], float]:
    samples, rate = sf.read(path, dtype="float32")
    return m.vad_segments_s(samples, rate), len(samples) / rate


# ------------------------------------------------------------------------- agreement with FDB


def test_fixture_files_match_stored_hashes(fixtures):
    _, hashes = fixtures
    assert hashes == STORED["fixtures"]["sha256"], "fixture bytes changed: see the root fixture"


def test_stored_numbers_name_the_pinned_fdb_commit():
    assert STORED["fdb"]["commit"] == builder.FDB_COMMIT
    assert STORED["fdb"]["evaluators"] == list(builder.FDB_EVALUATORS)
    assert STORED["judge_rating"] == builder.JUDGE_RATING


def test_smooth_turn_taking_agrees(root):
    fdb = FDB["smooth_turn_taking"]
    scores = []
    for folder in _samples(root, "smooth_turn_taking"):
        turn_end = m.turn_taking_end_s(_json(folder / "turn_taking.json"))
        score = m.smooth_turn_taking_sample(_chunks(folder), turn_end)
        theirs = fdb["samples"][folder.name]
        assert score.took_turn == bool(theirs["take_turn"]), folder.name
        if theirs["latency_unclipped"] is None:
            assert score.latency_s is None
        else:
            clipped = max(0.0, theirs["latency_unclipped"])
            assert score.latency_s == pytest.approx(clipped, abs=TIME_TOL_S), folder.name
        scores.append(score)
    summary = m.summarize_turns(scores)
    assert summary.take_turn_rate == pytest.approx(fdb["average_take_turn"], abs=TIME_TOL_S)
    assert summary.mean_latency_s == pytest.approx(fdb["average_latency"], abs=TIME_TOL_S)
    # the sample that starts before the turn end is clipped, not dropped
    assert min(s["latency_unclipped"] or 0 for s in fdb["samples"].values()) < 0
    assert summary.n_latencies == sum(s.took_turn for s in scores)


def test_pause_handling_agrees(root):
    fdb = FDB["pause_handling"]
    scores = [m.pause_handling_sample(_chunks(f)) for f in _samples(root, "pause_handling")]
    for folder, score in zip(_samples(root, "pause_handling"), scores):
        assert float(score.took_turn) == fdb["samples"][folder.name]["take_turn"], folder.name
    # one sample ends on a null end and is only a non-turn because its start is used
    assert any(c.end_s is None for f in _samples(root, "pause_handling") for c in _chunks(f))
    assert m.summarize_turns(scores).take_turn_rate == pytest.approx(fdb["average_take_turn"])


def test_user_interruption_agrees(root):
    fdb = FDB["user_interruption"]
    all_words = _json(root / "user_interruption_words.json")
    scores = []
    for folder in _samples(root, "user_interruption"):
        end_s = m.interrupt_end_s(_json(folder / "interrupt.json"))
        words = [Chunk(w["text"], *w["timestamp"]) for w in all_words[folder.name]]
        score = m.user_interruption_sample(words, end_s)
        # fdeval crops the whole word list itself; FDB's output.json holds the cropped words
        assert score.response == _chunks(folder)
        assert m.user_interruption_sample(_chunks(folder), end_s) == score
        theirs = fdb["samples"][folder.name]
        assert score.took_turn == (theirs["judge_calls"] > 0), folder.name
        if score.took_turn:
            assert score.latency_s == pytest.approx(theirs["average_latency"], abs=TIME_TOL_S)
        scores.append(score)
    assert any(
        len(all_words[f.name]) > len(_chunks(f)) for f in _samples(root, "user_interruption")
    )
    ratings = [STORED["judge_rating"]] * sum(s.took_turn for s in scores)
    summary = m.summarize_user_interruption(scores, ratings)
    assert summary.n_ratings == fdb["judge_calls"]
    assert summary.mean_rating == pytest.approx(fdb["average_rating"])
    assert summary.take_turn_rate == pytest.approx(fdb["average_take_turn"], abs=TIME_TOL_S)
    assert summary.mean_latency_s == pytest.approx(fdb["average_latency"], abs=TIME_TOL_S)


def _backchannel(root: Path, task: str) -> dict[str, m.BackchannelScore]:
    references = _json(root / "backchannel_reference.json")
    scores = {}
    for folder in _samples(root, task):
        segments, duration_s = _vad(folder / "output.wav")
        reference = references.get(folder.name)
        scores[folder.name] = m.backchannel_sample(segments, _chunks(folder), duration_s, reference)
    return scores


def test_backchannel_agrees(root):
    fdb = FDB["backchannel"]
    scores = _backchannel(root, "backchannel")
    assert scores.keys() == fdb["samples"].keys()
    for name, score in scores.items():
        theirs = fdb["samples"][name]
        assert len(score.backchannels_s) == len(theirs["backchannels"]), name
        for ours, fdbs in zip(score.backchannels_s, theirs["backchannels"]):
            assert ours == pytest.approx(tuple(fdbs), abs=TIME_TOL_S), name
        assert float(score.took_turn) == theirs["take_turn"], name
        assert score.frequency_hz == pytest.approx(theirs["frequency"], abs=TIME_TOL_S), name
        assert score.jsd == pytest.approx(theirs["jsd"], abs=JSD_TOL), name
    summary = m.summarize_backchannel(list(scores.values()))
    printed = fdb["printed"]
    assert summary.mean_jsd == pytest.approx(printed["jsd_mean"], abs=PRINTED_TOL)
    assert summary.take_turn_rate == pytest.approx(printed["take_turn_mean"], abs=PRINTED_TOL)
    assert summary.mean_frequency_hz == pytest.approx(printed["frequency_mean"], abs=PRINTED_TOL)
    # the branches the set was built for: a turn listed as a backchannel, a flag set by the
    # last segment, a sample without speech
    assert any(s.turn_segments and not s.took_turn for s in scores.values())
    assert any(not s.backchannels_s and s.jsd == 1.0 for s in scores.values())


def test_backchannel_without_reference_scores_instead_of_crashing(root):
    fdb = FDB["backchannel_missing_key"]
    assert fdb["error"].startswith("KeyError")
    scores = _backchannel(root, "backchannel_missing_key")
    for name, score in scores.items():
        assert [list(iv) for iv in score.backchannels_s] == fdb["samples"][name]["backchannels"]
        assert score.jsd is None
    summary = m.summarize_backchannel(list(scores.values()))
    assert (summary.n_no_reference, summary.n_jsd, summary.mean_jsd) == (1, 0, None)


def test_v15_timing_agrees(root):
    fdb = FDB["v1_5"]
    for folder in _samples(root, "v1_5"):
        user, _ = _vad(folder / "input.wav")
        model, _ = _vad(folder / "output.wav")
        score = m.timing_sample(user, model)
        theirs = fdb["samples"][folder.name]
        for ours, fdbs in (
            (score.stop_intervals_s, theirs["latency_stop_list"]),
            (score.response_intervals_s, theirs["latency_resp_list"]),
        ):
            assert len(ours) == len(fdbs), folder.name
            for a, b in zip(ours, fdbs):
                assert a == pytest.approx(tuple(b), abs=TIME_TOL_S), folder.name
    assert any(s["latency_stop_list"] for s in fdb["samples"].values())


# ------------------------------------------------------------------------- turn-over rule


def words(*spans) -> list[Chunk]:
    return [Chunk(f"w{i}", s, e) for i, (s, e) in enumerate(spans)]


def test_take_turn_rule():
    assert not m.take_turn([])
    assert not m.take_turn(words((0.0, 0.3), (0.4, 0.6), (0.7, 0.99)))  # 3 words under 1 s
    assert m.take_turn(words((0.0, 0.2), (0.2, 0.4), (0.4, 0.6), (0.6, 0.8)))  # 4 words
    assert m.take_turn(words((2.0, 3.0)))  # exactly 1 s is a turn
    assert m.take_turn(words((0.0, 0.3), (0.9, 1.2)))
    # the span ends at the last word's end, not the latest end
    assert not m.take_turn(words((0.0, 2.0), (0.5, 0.6)))


def test_none_end_needs_the_pause_rule():
    with pytest.raises(ValueError, match="no end time"):
        m.take_turn(words((0.0, 0.3), (0.8, None)))
    assert not m.take_turn(words((0.0, 0.3), (0.8, None)), pause_rule=True)
    assert m.take_turn(words((0.0, 0.3), (1.2, None)), pause_rule=True)
    assert not m.pause_handling_sample(words((0.0, 0.3), (0.8, None))).took_turn
    # a None end before the last word is never read
    assert m.take_turn(words((0.0, None), (0.5, 1.5)))


def test_latency_clipped_and_none_without_turn():
    answer = words((1.5, 2.0), (2.0, 2.8))
    assert m.turn_latency_s(answer, 1.0) == pytest.approx(0.5)
    assert m.turn_latency_s(answer, 2.0) == 0.0
    assert m.turn_latency_s(words((1.5, 1.8)), 1.0) is None
    score = m.smooth_turn_taking_sample(answer, 2.0)
    assert (score.took_turn, score.latency_s) == (True, 0.0)


def test_user_interruption_crops_at_the_end():
    session = words((0.0, 0.5), (4.9, 5.2), (5.0, 5.4), (5.5, 6.2))
    score = m.user_interruption_sample(session, 5.0)
    assert [c.start_s for c in score.response] == [5.0, 5.5]  # starting exactly at the end counts
    assert score.took_turn and score.latency_s == 0.0
    assert score.response_text == "w2 w3"
    assert not m.user_interruption_sample(session, 5.1).took_turn  # one 0.7 s word left
    assert m.user_interruption_sample(session, 7.0) == m.InterruptionScore(False, None, ())


# ------------------------------------------------------------------------- backchannel


def test_backchannel_long_segment_stops_the_loop():
    score = m.backchannel_sample([(1.0, 1.5), (2.0, 5.5), (6.0, 6.4)], [], 10.0, [1.0, 1.0])
    assert score.took_turn
    assert score.backchannels_s == ((1.0, 1.5),)
    assert score.frequency_hz == pytest.approx(0.1)


def test_backchannel_flag_is_the_last_segments_and_turns_are_listed():
    talk = words((2.0, 2.5), (2.5, 3.0), (3.0, 3.4))
    score = m.backchannel_sample([(1.0, 1.4), (2.0, 3.5), (5.0, 5.3)], talk, 10.0, [1.0, 1.0])
    assert not score.took_turn
    assert score.backchannels_s == ((1.0, 1.4), (2.0, 3.5), (5.0, 5.3))
    assert score.turn_segments == (1,)
    reversed_order = m.backchannel_sample([(1.0, 1.4), (2.0, 3.5)], talk, 10.0, [1.0, 1.0])
    assert reversed_order.took_turn


def test_backchannel_word_attribution():
    seg = [(1.0, 1.5)]
    inside, over_start, over_end = (1.1, 1.2), (0.8, 1.05), (1.4, 1.7)
    assert m.backchannel_sample(seg, words(inside, over_start, over_end), 5.0, None).took_turn
    assert not m.backchannel_sample(seg, words(inside, over_start), 5.0, None).took_turn
    # ending exactly at the segment's start, or lying wholly after it, does not count
    assert not m.backchannel_sample(seg, words(inside, over_start, (0.5, 1.0)), 5.0, None).took_turn
    assert not m.backchannel_sample(seg, words(inside, over_start, (1.6, 1.8)), 5.0, None).took_turn
    # a None end: dropped when it starts before the segment's end, zero-length at the end counts
    assert not m.backchannel_sample(
        seg, words(inside, over_start, (1.2, None)), 5.0, None
    ).took_turn
    assert m.backchannel_sample(seg, words(inside, over_start, (1.5, None)), 5.0, None).took_turn


def test_backchannel_segments_rounded_like_silero_seconds():
    raw = [(1.04, 1.96)]  # 0.92 s as measured, 1.0 s once rounded to 0.1 s
    assert m.backchannel_sample(raw, [], 5.0, None).took_turn
    assert not m.backchannel_sample(raw, [], 5.0, None, segment_decimals=None).took_turn
    clipped = m.backchannel_sample([(4.5, 4.98)], [], 4.96, None)
    assert clipped.backchannels_s == ((4.5, 4.96),)


def test_backchannel_histogram_and_jsd():
    hist = m.backchannel_histogram([(0.2, 0.5), (0.9, 1.6)], 1.0)  # 6 windows of 0.2 s
    counts = np.array([0, 1, 1, 0, 1, 1]) + m.HISTOGRAM_EPSILON
    np.testing.assert_allclose(hist, counts / counts.sum(), rtol=1e-12)
    np.testing.assert_allclose(m.resize_distribution([0.0, 1.0], 3), [0.0, 0.5, 1.0])
    with pytest.raises(ValueError, match="2 values"):
        m.resize_distribution([1.0], 3)
    reference = [0.1, 0.2, 0.3, 0.4]
    q = m.resize_distribution(reference, len(hist))
    q = q / q.sum()
    mid = (hist + q) / 2
    kl = lambda a, b: float(np.sum(a * np.log(a / b)))
    expected = math.sqrt((kl(hist, mid) + kl(q, mid)) / 2)  # natural log, square root
    assert m.backchannel_jsd(hist, reference) == pytest.approx(expected, rel=1e-12)
    score = m.backchannel_sample([(0.2, 0.5), (0.9, 1.6)], [], 1.0, reference)
    assert score.jsd == pytest.approx(expected, rel=1e-12)
    assert score.histogram == pytest.approx(tuple(hist))
    assert m.backchannel_sample([(0.2, 0.5)], [], 1.0, None).jsd is None
    assert m.backchannel_sample([], [], 1.0, None).jsd == m.NO_BACKCHANNEL_JSD


# ------------------------------------------------------------------------- v1.5 timing


def test_merge_segments_gap_is_inclusive():
    segs = [(2.25, 3.0), (0.0, 1.0), (1.5, 2.0)]  # gaps of exactly 0.5 and 0.25 s
    assert m.merge_segments(segs, 0.5) == [(0.0, 3.0)]
    assert m.merge_segments(segs, 0.4) == [(0.0, 1.0), (1.5, 3.0)]


def test_stop_latencies_keep_the_shortest_per_ms_end():
    user = [(0.0, 1.0002), (1.0003, 3.0)]
    model = [(0.5, 1.0004)]
    assert m.stop_latencies(user, model) == [(1.0, 1.0)]  # (1.0003, 1.0004) beats (0.5, 1.0002)
    assert m.stop_latencies([(0.0, 2.0), (3.0, 4.0)], [(1.0, 3.5)]) == [(1.0, 2.0), (3.0, 3.5)]
    assert m.stop_latencies([(0.0, 1.0)], [(1.0, 2.0)]) == []  # touching is no overlap


def test_response_latencies_next_start_strictly_after_and_latest_user_end():
    user = [(0.0, 1.0), (1.5, 2.0)]
    assert m.response_latencies(user, [(2.0, 3.0), (3.5, 4.0)]) == [(1.0, 2.0), (2.0, 3.5)]
    assert m.response_latencies(user, [(2.8, 3.0)]) == [(2.0, 2.8)]  # not (1.0, 2.8)
    assert m.response_latencies(user, [(0.5, 0.9)]) == []
    timing = m.timing_sample([(0.0, 1.0), (1.4, 2.0)], [(2.5, 3.0), (3.3, 4.0)])
    assert timing.response_intervals_s == ((2.0, 2.5),)
    assert timing.response_latencies_s == pytest.approx((0.5,))


def test_timing_merges_user_and_model_gaps_before_pairing():
    # a 0.5625 s user pause (merged at 0.6) holds a model word: an overlap, not a response;
    # a 0.4375 s model pause (merged at 0.5) holds a user word: an overlap too
    user = [(0.0, 1.0), (1.5625, 3.0), (5.1, 5.3)]
    model = [(1.25, 1.5), (4.0, 5.0), (5.4375, 6.0)]
    timing = m.timing_sample(user, model)
    assert timing.stop_intervals_s == ((1.25, 1.5), (5.1, 5.3))
    assert timing.response_intervals_s == ((3.0, 4.0),)
    assert timing.stop_latencies_s == pytest.approx((0.25, 0.2))


# ------------------------------------------------------------------------- VAD and summaries


@pytest.fixture(scope="module")
def yeah() -> np.ndarray:
    speech = EspeakTTS(voice="en-us", rate_wpm=175, sample_rate=16000).synthesize("yeah").samples
    pad = np.zeros(8000, dtype=np.float32)
    return np.concatenate([pad, speech, pad])


def test_vad_resamples_to_16k_and_keeps_min_speech_a_parameter(yeah):
    at_16k = m.vad_segments_s(yeah, 16000)
    assert len(at_16k) == 1 and at_16k[0][0] == pytest.approx(0.5, abs=0.05)
    at_48k = m.vad_segments_s(resample_poly(yeah, 3, 1).astype(np.float32), 48000)
    assert len(at_48k) == 1
    assert at_48k[0] == pytest.approx(at_16k[0], abs=0.04)
    assert m.vad_segments_s(yeah, 16000, min_speech_s=0.6) == []
    with pytest.raises(ValueError, match="mono"):
        m.vad_segments_s(np.stack([yeah, yeah]), 16000)


def test_summaries_count_and_average():
    turns = [m.TurnScore(True, 0.5), m.TurnScore(False, None), m.TurnScore(True, 0.0)]
    summary = m.summarize_turns(turns)
    assert (summary.n_samples, summary.n_latencies) == (3, 2)
    assert summary.take_turn_rate == pytest.approx(2 / 3)
    assert summary.mean_latency_s == pytest.approx(0.25)
    assert m.summarize_turns([]).take_turn_rate is None
    bc = [
        m.BackchannelScore(False, ((1.0, 1.2),), (), 0.1, (1.0,), 0.4),
        m.BackchannelScore(True, (), (), 0.0, (), 1.0),
        m.BackchannelScore(False, ((1.0, 1.2),), (), 0.3, (1.0,), None),
    ]
    s = m.summarize_backchannel(bc)
    assert (s.n_samples, s.n_jsd, s.n_no_reference) == (3, 2, 1)
    assert s.mean_jsd == pytest.approx(0.7) and s.jsd_std == pytest.approx(0.3)
    assert s.mean_frequency_hz == pytest.approx(0.4 / 3)
    assert s.take_turn_rate == pytest.approx(1 / 3)


def test_paper_rule_never_counts_a_turn_as_a_backchannel():
    """FDB's loop lists the 2 s answer among the backchannels and reads the sample by its last
    segment (no turn); the papers' definition: two backchannels, and the model took the turn."""
    segments = [(1.0, 1.4), (3.0, 5.0), (7.0, 7.3)]
    words = [
        Chunk("yeah", 1.05, 1.35),
        *[
            Chunk(w, 3.1 + 0.4 * i, 3.4 + 0.4 * i)
            for i, w in enumerate("that is a fair point".split())
        ],
        Chunk("right", 7.05, 7.25),
    ]
    code = m.backchannel_sample(segments, words, 10.0, None, rule="fdb_code")
    paper = m.backchannel_sample(segments, words, 10.0, None, rule="paper")
    assert (code.took_turn, len(code.backchannels_s)) == (False, 3)
    assert (paper.took_turn, paper.backchannels_s) == (True, ((1.0, 1.4), (7.0, 7.3)))
    assert paper.frequency_hz == pytest.approx(0.2)
