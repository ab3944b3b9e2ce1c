"""BCa bootstrap: seeding, agreement of the two entry points, asymmetry and coverage."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from fdeval.metrics.bootstrap import (
    bca_interval,
    bootstrap_indices,
    bootstrap_sums,
    resample_indices,
)


def _mean_of_sums(s):
    s = np.asarray(s)
    return (s[:, 1] / s[:, 0])[:, None]


def _rows(x):
    return np.stack([np.ones_like(x), x], axis=1)


def test_seeded_and_reproducible():
    x = np.random.default_rng(0).exponential(size=200)
    a = bootstrap_sums(_rows(x), _mean_of_sums, n_resamples=2000, seed=7)[0]
    b = bootstrap_sums(_rows(x), _mean_of_sums, n_resamples=2000, seed=7)[0]
    c = bootstrap_sums(_rows(x), _mean_of_sums, n_resamples=2000, seed=8)[0]
    assert a == b and (a.low, a.high) != (c.low, c.high)
    assert a.estimate == pytest.approx(x.mean()) and a.low < a.estimate < a.high


def test_sums_and_indices_paths_agree_on_the_same_stream():
    x = np.random.default_rng(1).gamma(2.0, size=150)
    fast = bootstrap_sums(_rows(x), _mean_of_sums, n_resamples=3000, seed=3)[0]
    generic = bootstrap_indices(
        x.size, lambda idx: x[idx].mean(axis=1)[:, None], n_resamples=3000, seed=3
    )[0]
    assert fast.estimate == pytest.approx(generic.estimate, abs=1e-12)
    assert fast.low == pytest.approx(generic.low, abs=1e-12)
    assert fast.high == pytest.approx(generic.high, abs=1e-12)


def test_bca_leans_with_the_skew_of_the_data():
    x = np.random.default_rng(2).exponential(size=200)
    ci = bootstrap_sums(_rows(x), _mean_of_sums, n_resamples=10_000, seed=0)[0]
    assert ci.high - ci.estimate > ci.estimate - ci.low
    # Close to the exact interval for an exponential mean (chi-square pivot).
    n = x.size
    exact = (2 * x.sum() / stats.chi2.ppf(0.975, 2 * n), 2 * x.sum() / stats.chi2.ppf(0.025, 2 * n))
    assert ci.low == pytest.approx(exact[0], rel=0.05) and ci.high == pytest.approx(
        exact[1], rel=0.05
    )


def test_coverage_is_near_nominal():
    rng = np.random.default_rng(4)
    hits = 0
    reps = 200
    for r in range(reps):
        x = rng.exponential(size=40)
        ci = bootstrap_sums(_rows(x), _mean_of_sums, n_resamples=1000, seed=r)[0]
        hits += ci.low <= 1.0 <= ci.high
    assert 0.88 <= hits / reps <= 0.99


def test_strata_keep_their_sizes_and_degenerate_statistics_collapse():
    strata = np.array([0] * 5 + [1] * 3)
    for idx in resample_indices(np.random.default_rng(0), 8, 50, chunk=16, strata=strata):
        assert np.all(idx[:, :5] < 5) and np.all(idx[:, 5:] >= 5)
    lo, hi = bca_interval(np.array([2.0]), np.full((100, 1), 2.0), np.full((10, 1), 2.0))
    assert lo[0] == hi[0] == 2.0
