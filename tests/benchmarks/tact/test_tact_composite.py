"""Category composites, the composite S with BCa intervals, analyses, and the public API."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from fdeval.benchmarks import tact
from fdeval.benchmarks.tact import simulate
from fdeval.benchmarks.tact.analysis import onset_histogram, slice_gaps, slice_table
from fdeval.benchmarks.tact.composite import (
    CATEGORY_WEIGHTS,
    composite_statistic,
    episode_scores,
    features,
    median_runs,
    score_episodes,
)
from fdeval.benchmarks.tact.scoring import CATEGORIES, EpisodeScoreInput

SIZES = {
    "pause_handling": 120,
    "backchanneling": 100,
    "smooth_turn_taking": 110,
    "user_interruption": 80,
}


@pytest.fixture(scope="module")
def setup():
    rng = np.random.default_rng(0)
    return simulate.random_episodes(rng, SIZES), simulate.duration_reference(rng), rng


def test_category_weights_are_convex_and_follow_the_papers_emphasis():
    for c in CATEGORIES:
        w = CATEGORY_WEIGHTS[c]
        assert min(w) >= 0 and sum(w) == pytest.approx(1.0)
    for c in ("pause_handling", "smooth_turn_taking"):
        assert CATEGORY_WEIGHTS[c][0] == max(CATEGORY_WEIGHTS[c]) and CATEGORY_WEIGHTS[c][0] > 0.5
    assert (
        CATEGORY_WEIGHTS["user_interruption"][2] == max(CATEGORY_WEIGHTS["user_interruption"]) > 0.5
    )
    bc = CATEGORY_WEIGHTS["backchanneling"]
    assert bc[0] == bc[1] and bc[0] + bc[1] == pytest.approx(1.0)


def test_composite_is_the_mean_of_convex_category_scores(setup):
    eps, ref, _ = setup
    r = score_episodes(eps, ref, n_resamples=2000, seed=1)
    cats = []
    for ci, c in enumerate(CATEGORIES):
        m = r.episodes.category == ci
        comp = [
            r.episodes.timing[m].mean(),
            np.nanmean(r.episodes.length[m]),
            r.episodes.overlap[m].mean(),
        ]
        expected = float(np.dot(CATEGORY_WEIGHTS[c], comp))
        assert r.categories[c].estimate == pytest.approx(expected, abs=1e-12)
        assert r.components[c]["timing"] == pytest.approx(comp[0])
        assert r.categories[c].low < expected < r.categories[c].high
        cats.append(expected)
    assert r.composite.estimate == pytest.approx(np.mean(cats), abs=1e-12)
    assert 0 <= r.composite.low < r.composite.estimate < r.composite.high <= 1
    assert 0 < r.timing_population <= 1 and 0 < r.length_population <= 1
    again = score_episodes(eps, ref, n_resamples=2000, seed=1)
    assert again.composite == r.composite


def test_components_without_values_drop_out_and_weights_renormalise(setup):
    eps, _, _ = setup
    r = score_episodes(eps, None, n_resamples=500)  # no duration reference: no length
    for ci, c in enumerate(CATEGORIES):
        m = r.episodes.category == ci
        wt, _, wo = CATEGORY_WEIGHTS[c]
        expected = (wt * r.episodes.timing[m].mean() + wo * r.episodes.overlap[m].mean()) / (
            wt + wo
        )
        assert r.categories[c].estimate == pytest.approx(expected)
        assert math.isnan(r.components[c]["length"])
    # A category that is absent leaves the composite as the mean of the others.
    sums = features(r.episodes).sum(axis=0).reshape(4, 5)
    sums[3] = 0
    out = composite_statistic(sums.reshape(1, -1))[0]
    assert math.isnan(out[4]) and out[0] == pytest.approx(np.mean(out[1:4]))


def test_reference_behaviour_beats_an_eager_policy(setup):
    eps, ref, _ = setup
    eager = simulate.random_episodes(np.random.default_rng(9), SIZES, system="eager")
    good, bad = (
        score_episodes(eps, ref, n_resamples=1000),
        score_episodes(eager, ref, n_resamples=1000),
    )
    assert good.composite.low > bad.composite.high
    assert good.timing_population > bad.timing_population


def test_median_run_is_kept(setup):
    eps, ref, _ = setup
    base = eps[:30]
    silent = [
        EpisodeScoreInput(
            e.episode_id, e.category, e.posterior, math.nan, context_bucket=e.context_bucket
        )
        for e in base
    ]
    eager = [
        EpisodeScoreInput(
            e.episode_id, e.category, e.posterior, 0.1, 2.0, context_bucket=e.context_bucket
        )
        for e in base
    ]
    runs = [base, silent, eager]
    kept = median_runs(runs, ref)
    comp = np.stack([episode_scores(run, ref).composite for run in runs])
    for i, e in enumerate(kept):
        r = [run[i] for run in runs].index(e)
        assert comp[r, i] == np.sort(comp[:, i])[1]
    with pytest.raises(ValueError):
        median_runs([base, base[::-1]])


def test_jsd2_and_profile_swap():
    p = np.array([0.5, 0.5, 0.0])
    assert tact.jsd2(p, p) == 0.0 and tact.jsd2(p, [0, 0, 1]) == pytest.approx(1.0)
    assert tact.jsd2(p, [0.2, 0.3, 0.5]) == pytest.approx(tact.jsd2([0.2, 0.3, 0.5], p))
    rng = np.random.default_rng(0)
    y = rng.normal(0.3, 0.3, 4000)
    h = onset_histogram(np.r_[y, [np.nan] * 1000])
    assert h.size == 29 and h[-1] == pytest.approx(0.2) and h.sum() == pytest.approx(1.0)
    assert tact.profile_swap_jsd(y, y) == 0.0
    assert (
        tact.profile_swap_jsd(y, y + 1.0)
        > 0.3
        > tact.profile_swap_jsd(y, rng.normal(0.3, 0.3, 4000))
    )


def test_spearman_with_interval():
    rng = np.random.default_rng(0)
    human = rng.normal(size=88)
    metric = human + rng.normal(scale=0.6, size=88)
    ci = tact.spearman_ci(metric, human, n_resamples=2000)
    assert ci.estimate == pytest.approx(stats.spearmanr(metric, human).statistic)
    assert -1 <= ci.low < ci.estimate < ci.high <= 1
    perfect = tact.spearman_ci(np.arange(10.0), np.arange(10.0) ** 3, n_resamples=200)
    assert perfect.estimate == perfect.low == perfect.high == pytest.approx(1.0)


def test_slice_table_and_human_topline(setup):
    eps, ref, _ = setup
    rows = slice_table(eps, ["gender", "snr"], ref, n_resamples=500)
    assert [(r.key, r.value) for r in rows] == [
        ("gender", "f"),
        ("gender", "m"),
        ("snr", "high"),
        ("snr", "low"),
        ("snr", "mid"),
    ]
    assert sum(r.n_episodes for r in rows if r.key == "gender") == len(eps)
    female = [e for e in eps if e.slices["gender"] == "f"]
    assert rows[0].composite.estimate == pytest.approx(
        score_episodes(female, ref, n_resamples=10).composite.estimate
    )
    gaps = slice_gaps(rows)
    assert set(gaps) == {"gender", "snr"} and all(g >= 0 for g in gaps.values())
    top = tact.human_topline(eps, ref, n_resamples=500)
    assert top.composite.estimate == pytest.approx(
        score_episodes(eps, ref, n_resamples=10).composite.estimate
    )


def test_public_api():
    for name in tact.__all__:
        assert hasattr(tact, name), name
    s = tact.score_onsets([0.3, np.nan, -0.2], np.eye(6)[[0, 2, 4]])
    assert s.shape == (3,) and np.all((s >= 0) & (s <= 1))
    r = tact.reference_cdf("bck", np.linspace(-2, 5, 8))
    assert r.no_response_mass == 0.45 and r.cdf[-1] == pytest.approx(0.55)
