"""BCa bootstrap intervals (Efron 1987) over whole units, seeded and vectorised.

A unit is what is resampled whole: a TACT episode (all of its scores move together), an
Instruct-FD case or pair (:mod:`fdeval.metrics.stats`). The TACT paper reports BCa intervals over
10^4 resamples (Sec. IV). Resamples come from a seeded `numpy.random.Generator` in fixed-size
chunks, so a given seed gives the same intervals on any machine.

Two entry points share the BCa step:

* `bootstrap_sums`: for statistics that are a smooth function of column sums of a per-episode
  matrix X (means, ratios, category composites). A resample is then a count vector c and the
  sums are c @ X, so 10^4 resamples of ~10^4 units cost one matrix product per chunk, and the
  jackknife is `statistic(X.sum(0) - X)`.
* `bootstrap_indices`: for any statistic of resampled indices (e.g. Spearman's rho), vectorised
  over a chunk of resamples.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

import numpy as np
from scipy.special import ndtr, ndtri

N_RESAMPLES = 10_000  # Sec. IV
CHUNK = 128  # resamples drawn and evaluated together (part of the seeded stream's definition)


@dataclass(frozen=True)
class Interval:
    """A point estimate with its BCa interval."""

    estimate: float
    low: float
    high: float
    confidence: float
    n_resamples: int


def resample_indices(
    rng: np.random.Generator,
    n: int,
    n_resamples: int,
    chunk: int = CHUNK,
    strata: np.ndarray | None = None,
) -> Iterator[np.ndarray]:
    """Yield (b, n) arrays of unit indices drawn with replacement, `chunk` rows at a time.

    With `strata` (an int label per unit), each stratum is resampled within itself, so
    stratum sizes stay fixed.
    """
    groups = None if strata is None else [np.flatnonzero(strata == s) for s in np.unique(strata)]
    for start in range(0, n_resamples, chunk):
        b = min(chunk, n_resamples - start)
        if groups is None:
            yield rng.integers(0, n, size=(b, n))
        else:
            yield np.concatenate(
                [g[rng.integers(0, g.size, size=(b, g.size))] for g in groups], axis=1
            )


def bca_interval(
    theta_hat: np.ndarray, replicates: np.ndarray, jackknife: np.ndarray, confidence: float = 0.95
) -> tuple[np.ndarray, np.ndarray]:
    """BCa limits for k statistics from (B, k) bootstrap and (n, k) jackknife values.

    z0 = Phi^-1(share of replicates below the estimate, ties counted half); the acceleration is
    the jackknife skewness a = sum(d^3) / (6 (sum d^2)^1.5), d = mean(jack) - jack. Non-finite
    replicates are dropped; a statistic whose replicates are all equal gets [estimate, estimate].
    """
    theta_hat = np.atleast_1d(np.asarray(theta_hat, dtype=float))
    reps = np.asarray(replicates, dtype=float).reshape(-1, theta_hat.size)
    jack = np.asarray(jackknife, dtype=float).reshape(-1, theta_hat.size)
    alphas = np.array([(1 - confidence) / 2, (1 + confidence) / 2])
    z_alpha = ndtri(alphas)
    low = np.full(theta_hat.size, np.nan)
    high = np.full(theta_hat.size, np.nan)
    for j in range(theta_hat.size):
        r = reps[:, j][np.isfinite(reps[:, j])]
        if r.size == 0 or not np.isfinite(theta_hat[j]):
            continue
        if np.ptp(r) == 0:
            low[j] = high[j] = theta_hat[j]
            continue
        below = (
            np.count_nonzero(r < theta_hat[j]) + 0.5 * np.count_nonzero(r == theta_hat[j])
        ) / r.size
        below = np.clip(below, 0.5 / r.size, 1 - 0.5 / r.size)  # keep z0 finite
        z0 = ndtri(below)
        jk = jack[:, j][np.isfinite(jack[:, j])]
        d = jk.mean() - jk
        ss = np.sum(d * d)
        a = np.sum(d**3) / (6.0 * ss**1.5) if ss > 0 else 0.0
        adj = ndtr(z0 + (z0 + z_alpha) / (1 - a * (z0 + z_alpha)))
        low[j], high[j] = np.quantile(r, adj)
    return low, high


def bootstrap_sums(
    X: np.ndarray,
    statistic: Callable[[np.ndarray], np.ndarray],
    *,
    n_resamples: int = N_RESAMPLES,
    confidence: float = 0.95,
    seed: int | np.random.Generator = 0,
    strata: np.ndarray | None = None,
    chunk: int = CHUNK,
) -> list[Interval]:
    """BCa intervals for statistic(column sums of X) with X (n, p) per-unit rows.

    `statistic` maps sums of shape (m, p) to (m, k) and must be vectorised over m.
    """
    X = np.asarray(X, dtype=float)
    n = X.shape[0]
    rng = np.random.default_rng(seed)
    total = X.sum(axis=0)
    theta = np.asarray(statistic(total[None, :]), dtype=float)[0]
    reps = []
    for idx in resample_indices(rng, n, n_resamples, chunk, strata):
        b = idx.shape[0]
        counts = np.bincount((idx + (np.arange(b) * n)[:, None]).ravel(), minlength=b * n)
        reps.append(statistic(counts.reshape(b, n).astype(float) @ X))
    jack = statistic(total[None, :] - X)  # leave one unit out
    low, high = bca_interval(theta, np.concatenate(reps), jack, confidence)
    return [
        Interval(float(t), float(lo), float(hi), confidence, n_resamples)
        for t, lo, hi in zip(theta, low, high)
    ]


def bootstrap_indices(
    n: int,
    statistic: Callable[[np.ndarray], np.ndarray],
    *,
    n_resamples: int = N_RESAMPLES,
    confidence: float = 0.95,
    seed: int | np.random.Generator = 0,
    strata: np.ndarray | None = None,
    chunk: int = CHUNK,
) -> list[Interval]:
    """BCa intervals for any statistic of resampled indices: statistic((m, n') int array) -> (m, k).

    The jackknife calls it on the n leave-one-out index rows (in chunks).
    """
    rng = np.random.default_rng(seed)
    theta = np.asarray(statistic(np.arange(n)[None, :]), dtype=float)[0]
    reps = np.concatenate(
        [
            np.asarray(statistic(idx), dtype=float)
            for idx in resample_indices(rng, n, n_resamples, chunk, strata)
        ]
    )
    jack = np.concatenate(
        [
            np.asarray(statistic(_leave_one_out(n, rows)), dtype=float)
            for rows in _chunks(n, max(1, (chunk * n) // max(n - 1, 1)))
        ]
    )
    low, high = bca_interval(theta, reps, jack, confidence)
    return [
        Interval(float(t), float(lo), float(hi), confidence, n_resamples)
        for t, lo, hi in zip(theta, low, high)
    ]


def _chunks(n: int, size: int) -> Sequence[np.ndarray]:
    return [np.arange(s, min(s + size, n)) for s in range(0, n, size)]


def _leave_one_out(n: int, rows: np.ndarray) -> np.ndarray:
    """(len(rows), n - 1): row r lists every index but rows[r], in order."""
    base = np.arange(n - 1)[None, :]
    return base + (base >= rows[:, None])
