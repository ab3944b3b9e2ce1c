"""Table I in full (issue 27, item 7): the binary v1 and latency baselines, Fig. 2's per-intent
cells as a table and a figure, and slice tables with per-slice kernels where the data allow."""

from __future__ import annotations

import math

import numpy as np
import pytest

from fdeval.bench import tact as bench_tact
from fdeval.benchmarks.tact import simulate
from fdeval.benchmarks.tact.analysis import (
    binary_v1,
    intent_cells,
    median_latency,
    slice_table,
    takeovers,
)
from fdeval.benchmarks.tact.composite import episode_scores, score_episodes
from fdeval.benchmarks.tact.figure import write_intent_figure
from fdeval.benchmarks.tact.laws import INTENTS
from fdeval.benchmarks.tact.scoring import CATEGORIES, EpisodeScoreInput
from fdeval.benchmarks.tact.topline import fit_episode_reference

ANS = tuple(np.eye(6)[0])


def ep(i, category, onset, duration=math.nan, slices=None):
    return EpisodeScoreInput(f"e{i}", category, ANS, onset, duration, (), "", slices or {})


def test_binary_v1_counts_right_takeover_decisions_per_category():
    eps = [
        ep(0, "pause_handling", math.nan),  # stays silent: right
        ep(1, "pause_handling", 0.4, 2.0),  # takes the floor: wrong
        ep(2, "backchanneling", -0.2, 0.5),  # a short backchannel is no takeover: right
        ep(3, "smooth_turn_taking", 0.3, 3.0),  # answers: right
        ep(4, "user_interruption", math.nan),  # never answers the interruption: wrong
        ep(5, "user_interruption", 6.0, 3.0),
    ]  # past T_h counts as none: wrong
    assert takeovers(eps).tolist() == [False, True, False, True, False, False]
    v1 = binary_v1(eps, n_resamples=200)
    assert v1["pause_handling"].estimate == 0.5 and v1["backchanneling"].estimate == 1.0
    assert v1["smooth_turn_taking"].estimate == 1.0 and v1["user_interruption"].estimate == 0.0
    assert v1["S"].estimate == pytest.approx(0.625)
    assert v1["S"].low <= 0.625 <= v1["S"].high


def test_latency_is_the_median_onset_of_answers_in_turn_taking_and_interruption():
    eps = [
        ep(0, "smooth_turn_taking", 0.2, 1.0),
        ep(1, "smooth_turn_taking", 0.8, 1.0),
        ep(2, "user_interruption", 0.5, 1.0),
        ep(3, "user_interruption", -0.5, 1.0),  # anticipatory: left out
        ep(4, "pause_handling", 0.1, 1.0),
        ep(5, "smooth_turn_taking", math.nan),
    ]
    assert median_latency(eps) == (pytest.approx(0.5), 3)
    assert math.isnan(median_latency([ep(0, "pause_handling", 0.1, 1.0)])[0])


def test_intent_cells_average_back_to_the_category_scores():
    """Fig. 2 and Table I are orthogonal cuts: each category score is its intent cells weighted by
    the category's own mode shares (exact when length is undefined everywhere, as here)."""
    eps = simulate.random_episodes(np.random.default_rng(5), {c: 80 for c in CATEGORIES})
    res = score_episodes(eps, None, n_resamples=100)
    q = np.array([e.posterior for e in eps])
    cells = intent_cells(res.episodes, q)
    modes = np.argmax(q, axis=1)
    for k, c in enumerate(CATEGORIES):
        mine = [r for r in cells if r["category"] == c]
        n_c = sum(r["n_episodes"] for r in mine)
        assert n_c == int(np.sum(res.episodes.category == k))
        avg = sum(r["n_episodes"] * r["score"] for r in mine) / n_c
        assert avg == pytest.approx(res.categories[c].estimate, abs=1e-12)
    for r in (r for r in cells if r["category"] == "all"):
        assert r["n_episodes"] == int(np.sum(modes == INTENTS.index(r["intent"])))
        assert 0 <= r["score"] <= 1


def test_intent_figure_is_deterministic_and_not_redrawn(tmp_path):
    eps = simulate.random_episodes(np.random.default_rng(6), {c: 20 for c in CATEGORIES})
    res = score_episodes(eps, None, n_resamples=100)
    series = [("system", intent_cells(res.episodes, [e.posterior for e in eps]))]
    path = tmp_path / "tact_intents.png"
    assert write_intent_figure(series, path) and path.read_bytes().startswith(b"\x89PNG")
    before = (path.read_bytes(), path.stat().st_mtime_ns)
    assert not write_intent_figure(series, path)
    assert (path.read_bytes(), path.stat().st_mtime_ns) == before


def test_slice_kernels_where_the_data_allow():
    rng = np.random.default_rng(7)
    eps = simulate.random_episodes(
        rng, {c: 40 for c in CATEGORIES}
    )  # slices: snr high/mid/low (i % 3)
    humans = simulate.random_episodes(rng, {c: 60 for c in CATEGORIES})
    ref = fit_episode_reference(humans).durations
    rows = slice_table(
        eps, ["snr"], ref, n_resamples=200, kernel_humans=humans, min_kernel_humans=42
    )
    counts = {
        r.value: sum(1 for h in humans if h.slices["snr"] == r.value and math.isfinite(h.onset_s))
        for r in rows
    }
    assert [r.kernel_humans for r in rows] == [counts[r.value] for r in rows]
    big = [r for r in rows if r.kernel_humans >= 42]
    small = [r for r in rows if r.kernel_humans < 42]
    assert (
        big and small and all(r.kernel is None for r in small)
    )  # too few continuations: no kernel
    for r in big:
        own = fit_episode_reference(
            [h for h in humans if h.slices["snr"] == r.value],
            sorted({e.context_bucket for e in eps}),
        )
        expected = score_episodes(
            [e for e in eps if e.slices["snr"] == r.value], own.durations, n_resamples=10
        )
        assert r.kernel.estimate == pytest.approx(expected.composite.estimate, abs=1e-12)
        assert r.kernel.estimate != pytest.approx(
            r.composite.estimate, abs=1e-6
        )  # the slice's own durations
    # precomputed per-episode scores (e.g. cross-fitted ones) are sliced as given
    sc = episode_scores(eps, None)
    again = slice_table(eps, ["gender"], ref, n_resamples=200, scores=sc)
    plain = slice_table(eps, ["gender"], None, n_resamples=200)
    assert [r.composite for r in again] == [r.composite for r in plain]


def test_bench_section_reads_the_ratio_and_the_share_of_time_on_intervals():
    text = """10000 episodes, 10000 BCa resamples, 1 core (cpu [0]), numpy 2.4.6
fast :   1.379 s cold (incl. law table), 0.8055 s warm   S = 0.915293 [0.913906, 0.916650]  \
S_T(pop) = 0.99  S_L(pop) = 0.98
       warm parts: per-episode scores 0.0189 s, BCa with 10000 resamples 0.7618 s \
(95% of the warm time on intervals); population S_T BCa (not in the warm time) 1.4700 s
naive:   45.00 s                          S = 0.915293 [0.913906, 0.916650]  S_T(pop) = 0.99  S_L(pop) = 0.98
ratio naive / fast: 33x cold, 56x warm
max |fast - naive|: s_T 1.2e-10, s_L 1.1e-15, S 5.6e-13
agreement within 1e-06: yes; fast under 10 s: yes
"""
    out = bench_tact.parse(text)
    assert (
        out["episodes"] == 10000 and out["agree"] and out["max_abs_diff"] == pytest.approx(1.2e-10)
    )
    assert (out["episode_scores_s"], out["intervals_s"], out["timing_interval_s"]) == (
        0.0189,
        0.7618,
        1.47,
    )
    assert bench_tact.FULL_ARGS[:2] == ["--episodes", "10000"]
