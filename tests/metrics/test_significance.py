"""McNemar and Holm against statsmodels; the bootstrap's seeding and whole-unit resampling."""

from __future__ import annotations

import numpy as np
import pytest
from statsmodels.stats.contingency_tables import mcnemar as sm_mcnemar
from statsmodels.stats.multitest import multipletests

from fdeval.metrics.bootstrap import bootstrap_sums, resample_indices
from fdeval.metrics.stats import bootstrap_mean, discordant, holm, mcnemar_exact

# [[both pass, instructed only], [baseline only, both fail]]: b = table[0][1], c = table[1][0]
TABLES = [
    [[0, 0], [0, 0]],  # no pairs
    [[7, 0], [0, 5]],  # no discordant pairs: p = 1
    [[3, 1], [0, 2]],  # a single discordant pair
    [[10, 5], [0, 3]],
    [[1, 0], [6, 1]],  # only c
    [[4, 4], [4, 4]],  # b = c
    [[20, 9], [3, 15]],
    [[50, 30], [10, 30]],
    [[0, 17], [2, 0]],
    [[100, 120], [80, 5]],  # large counts
]


@pytest.mark.parametrize("table", TABLES)
def test_mcnemar_equals_statsmodels_exact(table):
    expected = sm_mcnemar(np.array(table), exact=True).pvalue
    assert mcnemar_exact(table[0][1], table[1][0]) == pytest.approx(expected, rel=1e-12, abs=1e-15)


def test_mcnemar_edge_cases():
    assert mcnemar_exact(0, 0) == 1.0
    assert mcnemar_exact(1, 0) == 1.0  # 2 * P[X <= 0] = 1
    assert mcnemar_exact(5, 0) == pytest.approx(2 * 0.5**5)
    assert mcnemar_exact(3, 9) == mcnemar_exact(9, 3)
    with pytest.raises(ValueError):
        mcnemar_exact(-1, 2)


def test_discordant_counts():
    pairs = [(True, False), (True, False), (False, True), (True, True), (False, False)]
    assert discordant(pairs) == (2, 1)


P_FAMILIES = [
    [0.01, 0.04, 0.03, 0.005, 0.5],
    [0.2],
    [0.0, 1.0, 0.5],
    [0.01, 0.01, 0.01, 0.02],  # ties
    [0.03, 0.03, 0.9, 0.9, 0.001],
    [0.6, 0.7, 0.8],  # capped at 1
    [1.0, 1.0],
    list(np.linspace(0.001, 0.05, 12)),
]


@pytest.mark.parametrize("ps", P_FAMILIES)
def test_holm_equals_statsmodels(ps):
    expected = multipletests(ps, method="holm")[1]
    got = holm(ps)
    assert got == pytest.approx(list(expected), rel=1e-12, abs=1e-15)
    assert all(0 <= x <= 1 for x in got)
    order = np.argsort(ps, kind="stable")  # monotone in the raw p-values
    assert all(got[i] <= got[j] + 1e-15 for i, j in zip(order, order[1:]))


def test_holm_skips_missing_tests():
    ps = [0.01, None, 0.04, 0.03, None]
    expected = multipletests([0.01, 0.04, 0.03], method="holm")[1]
    got = holm(ps)
    assert got[1] is None and got[4] is None
    assert [got[0], got[2], got[3]] == pytest.approx(list(expected))
    assert holm([]) == [] and holm([None]) == [None]
    with pytest.raises(ValueError):
        holm([1.2])


def test_mcnemar_holm_on_a_delta_table():
    """The Table-4 recipe end to end: McNemar per instruction, Holm over them, vs statsmodels."""
    tables = [
        [[5, 12], [1, 6]],
        [[10, 2], [3, 9]],
        [[0, 0], [0, 24]],
        [[8, 9], [0, 7]],
        [[12, 1], [8, 3]],
    ]
    ours = holm([mcnemar_exact(t[0][1], t[1][0]) for t in tables])
    theirs = multipletests(
        [sm_mcnemar(np.array(t), exact=True).pvalue for t in tables], method="holm"
    )[1]
    assert ours == pytest.approx(list(theirs), rel=1e-12)


# --------------------------------------------------------------------------------------------
# bootstrap

X = np.array([1, 0, 1, 1, 0, 1, 1, 1, 0, 1, 1, 0, 1, 1, 1], dtype=float)


@pytest.mark.parametrize("method", ["bca", "percentile"])
def test_bootstrap_reproducible_per_seed(method):
    a = bootstrap_mean(X, resamples=2000, seed=7, method=method)
    b = bootstrap_mean(X, resamples=2000, seed=7, method=method)
    assert a == b
    y = np.random.default_rng(0).normal(size=30)  # continuous values: another seed moves the limits
    assert bootstrap_mean(y, resamples=500, seed=7, method=method) != bootstrap_mean(
        y, resamples=500, seed=8, method=method
    )
    assert a.estimate == pytest.approx(X.mean())
    assert a.low <= a.estimate <= a.high
    assert (a.n, a.resamples, a.seed, a.method) == (15, 2000, 7, method)
    cols = a.columns("ias")
    assert {
        "ias_ci_low",
        "ias_ci_high",
        "boot_n",
        "boot_resamples",
        "boot_seed",
        "ci_method",
        "ci_level",
    } <= set(cols)


def test_bca_matches_the_tact_bootstrap():
    """Same stream and BCa step as fdeval.metrics.bootstrap, the TACT one (mean = ratio of column sums)."""
    ours = bootstrap_mean(X, resamples=3000, seed=3, method="bca")
    ref = bootstrap_sums(
        np.c_[X, np.ones_like(X)], lambda s: s[:, :1] / s[:, 1:2], n_resamples=3000, seed=3
    )[0]
    assert (ours.low, ours.high) == pytest.approx((ref.low, ref.high))


def test_pairs_are_resampled_whole():
    """Bootstrapping the per-pair differences = resampling whole (instructed, baseline) pairs."""
    rng = np.random.default_rng(0)
    inst = rng.integers(0, 2, 20).astype(float)
    base = rng.integers(0, 2, 20).astype(float)
    got = bootstrap_mean(inst - base, resamples=1000, seed=11, method="percentile", unit="pair")
    reps = np.concatenate(
        [
            inst[i].mean(1) - base[i].mean(1)
            for i in resample_indices(np.random.default_rng(11), 20, 1000)
        ]
    )
    assert (got.low, got.high) == pytest.approx(tuple(np.quantile(reps, [0.025, 0.975])))
    assert got.unit == "pair"


def test_strata_keep_their_sizes():
    # stratum A all pass, stratum B all fail: resampling within strata keeps the mean fixed
    values = [1.0] * 5 + [0.0] * 5
    strata = ["a"] * 5 + ["b"] * 5
    fixed = bootstrap_mean(values, strata=strata, resamples=500, seed=0, method="percentile")
    assert (fixed.low, fixed.high) == (0.5, 0.5)
    free = bootstrap_mean(values, resamples=500, seed=0, method="percentile")
    assert free.low < 0.5 < free.high


def test_bootstrap_small_samples():
    empty = bootstrap_mean([], resamples=10)
    assert (empty.estimate, empty.low, empty.high, empty.n) == (None, None, None, 0)
    one = bootstrap_mean([1.0], resamples=10)
    assert (one.estimate, one.low, one.high) == (1.0, None, None)
    same = bootstrap_mean([1.0, 1.0, 1.0], resamples=10)
    assert (same.low, same.high) == (1.0, 1.0)
    with pytest.raises(ValueError):
        bootstrap_mean(X, method="studentized")
    with pytest.raises(ValueError):
        bootstrap_mean(X, strata=["a"])
