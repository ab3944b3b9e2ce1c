"""Significance tests and bootstrap intervals for the Instruct-FD tables.

* :func:`mcnemar_exact`: the exact (binomial) McNemar test on the discordant pairs of a paired
  2x2 table, two-sided. With ``b`` pairs where only the first condition passes and ``c`` where
  only the second does, under the null each discordant pair goes either way with probability
  1/2, so ``p = min(1, 2 * P[Binom(b + c, 1/2) <= min(b, c)])``; ``b + c = 0`` gives ``p = 1``.
  This is what ``statsmodels.stats.contingency_tables.mcnemar(table, exact=True)`` computes.
* :func:`holm`: Holm's step-down adjusted p-values for one family of tests: sort the m p-values
  ascending, multiply the k-th smallest (k = 0..m-1) by ``m - k``, take the running maximum and
  cap at 1 (``statsmodels.stats.multitest.multipletests(p, method="holm")[1]``). Missing values
  (``None``, a test that could not be run) are not part of the family and stay ``None``.
* :func:`bootstrap_mean`: a seeded bootstrap interval for the mean of one value per unit, the
  unit being what is resampled whole: a case for IAS (its 0/1 verdict), a pair (instructed case
  and its baseline) for delta-IAS (the pair's difference of verdicts, -1, 0 or 1). Resampling the
  differences of whole pairs keeps each pair's two verdicts together. Optional strata resample
  units within each stratum (stratum sizes stay fixed): the overall IAS resamples cases within
  their instruction, so a resample has the design's mix of instructions.

The resampling stream is the one of :mod:`fdeval.metrics.bootstrap` (a
``numpy.random.default_rng(seed)``, index rows drawn 128 resamples at a time), so the same seed
gives the same interval on any machine, and the BCa step is shared with it.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy.special import bdtr

from fdeval.metrics.bootstrap import bca_interval, resample_indices

CI_METHODS = ("bca", "percentile")


def discordant(pairs: Iterable[tuple[bool, bool]]) -> tuple[int, int]:
    """``(b, c)`` of paired outcomes: b = first passes and second fails, c = the reverse."""
    b = c = 0
    for first, second in pairs:
        b += bool(first) and not second
        c += bool(second) and not first
    return b, c


def mcnemar_exact(b: int, c: int) -> float:
    """Two-sided exact McNemar p-value from the discordant counts `b` and `c` (1.0 when b + c = 0)."""
    b, c = int(b), int(c)
    if b < 0 or c < 0:
        raise ValueError(f"discordant counts must be >= 0, got b={b}, c={c}")
    n = b + c
    if n == 0:
        return 1.0
    return float(min(1.0, 2.0 * bdtr(min(b, c), n, 0.5)))  # binomial CDF


def holm(pvalues: Sequence[float | None]) -> list[float | None]:
    """Holm step-down adjusted p-values, in input order; ``None`` entries are skipped and stay ``None``."""
    idx = [i for i, p in enumerate(pvalues) if p is not None]
    for i in idx:
        p = pvalues[i]
        if not 0.0 <= float(p) <= 1.0:  # type: ignore[arg-type]
            raise ValueError(f"p-values must lie in [0, 1], got {p!r}")
    out: list[float | None] = [None] * len(pvalues)
    m = len(idx)
    order = sorted(idx, key=lambda i: float(pvalues[i]))  # type: ignore[arg-type]
    running = 0.0
    for k, i in enumerate(order):
        running = max(running, min(1.0, (m - k) * float(pvalues[i])))  # type: ignore[arg-type]
        out[i] = running
    return out


@dataclass(frozen=True)
class BootstrapCI:
    """A mean over `n` units with its bootstrap interval (``low``/``high`` None when n < 2)."""

    estimate: float | None
    low: float | None
    high: float | None
    method: str
    level: float
    n: int
    resamples: int
    seed: int
    unit: str

    def columns(self, prefix: str) -> dict[str, Any]:
        """The interval and its recipe as row columns: ``<prefix>_ci_low``, ``<prefix>_ci_high``,
        ``ci_*``, ``boot_*``."""
        return {
            f"{prefix}_ci_low": self.low,
            f"{prefix}_ci_high": self.high,
            "ci_method": self.method,
            "ci_level": self.level,
            "boot_unit": self.unit,
            "boot_n": self.n,
            "boot_resamples": self.resamples,
            "boot_seed": self.seed,
        }


def bootstrap_mean(
    values: Sequence[float] | np.ndarray,
    *,
    resamples: int = 10_000,
    seed: int = 0,
    level: float = 0.95,
    method: str = "bca",
    strata: Sequence[Hashable] | None = None,
    unit: str = "case",
) -> BootstrapCI:
    """Bootstrap interval for the mean of `values` (one per unit), resampling whole units.

    `method` is ``"bca"`` (bias-corrected and accelerated, jackknife acceleration) or
    ``"percentile"``. `strata` (one label per value) resamples within each stratum. With fewer
    than two units there is no interval (``low = high = None``); with no units no estimate either.
    """
    if method not in CI_METHODS:
        raise ValueError(f"bootstrap method must be one of {CI_METHODS}, got {method!r}")
    if not 0.0 < level < 1.0:
        raise ValueError(f"confidence level must be in (0, 1), got {level!r}")
    if int(resamples) < 1:
        raise ValueError(f"resamples must be >= 1, got {resamples!r}")
    x = np.asarray(values, dtype=float).reshape(-1)
    n = x.size
    out = dict(
        method=method,
        level=float(level),
        n=int(n),
        resamples=int(resamples),
        seed=int(seed),
        unit=unit,
    )
    if n == 0:
        return BootstrapCI(None, None, None, **out)
    estimate = float(x.mean())
    if n < 2:
        return BootstrapCI(estimate, None, None, **out)
    codes = None
    if strata is not None:
        if len(strata) != n:
            raise ValueError(f"strata has {len(strata)} labels for {n} values")
        labels = {s: k for k, s in enumerate(dict.fromkeys(strata))}
        codes = np.array([labels[s] for s in strata])
    rng = np.random.default_rng(int(seed))
    reps = np.concatenate(
        [x[idx].mean(axis=1) for idx in resample_indices(rng, n, int(resamples), strata=codes)]
    )
    if method == "percentile":
        low, high = np.quantile(reps, [(1 - level) / 2, (1 + level) / 2])
    else:
        jack = (x.sum() - x) / (n - 1)  # leave one unit out
        lo, hi = bca_interval(np.array([estimate]), reps[:, None], jack[:, None], level)
        low, high = lo[0], hi[0]
    # a mean of values in [a, b] stays in [a, b]; clip float noise from quantile interpolation
    low, high = float(np.clip(low, x.min(), x.max())), float(np.clip(high, x.min(), x.max()))
    return BootstrapCI(estimate, low, high, **out)
