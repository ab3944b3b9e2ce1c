"""Krippendorff's alpha, and the agreement of TACT's annotators on each kind of annotation.

    alpha = 1 - D_o / D_e

D_o is the disagreement seen inside units (pairs of values that coders gave the same unit) and
D_e the disagreement expected by chance (pairs drawn from all pairable values). Both come from
the coincidence matrix o_ck: each unit u with m_u >= 2 values adds each ordered pair of its
values (c, k), from different coders, with weight 1 / (m_u - 1). With n_c = sum_k o_ck and
n = sum_c n_c,

    alpha = 1 - (n - 1) * sum_ck o_ck d_ck / sum_ck n_c n_k d_ck

where d_ck is the squared distance of the level of measurement: nominal 1[c != k]; ordinal
(sum of n_g for g from c to k - (n_c + n_k) / 2)^2 over the sorted values; interval (c - k)^2;
ratio ((c - k) / (c + k))^2. Units with fewer than two values are not pairable and drop out;
coders may skip units, and a unit's coders need not be the same people.

`episode_agreement` applies it to the annotations of `episodes.py` (see its docstring for what
each figure measures). The paper reports alpha for intent (nominal), onset windows and "overlap
acceptability"; the episode format stores no overlap rating, so the last is derived from the
windows (how much of the pre-completion span [-2, 0) each annotator accepts); the stored
silence-acceptability rating gets its own interval alpha.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Iterable, Sequence
from typing import Any

import numpy as np

from .laws import DOMAIN_S

LEVELS = ("nominal", "ordinal", "interval", "ratio")
WINDOW_STEP_S = 0.1  # onset-window agreement: one unit per 0.1 s of the offset domain


def _missing(v: Any) -> bool:
    return v is None or (isinstance(v, float) and math.isnan(v))


def krippendorff_alpha(units: Iterable[Iterable[Any]], level: str = "nominal") -> float:
    """Krippendorff's alpha of `units`: one sequence of values per unit (any length; None or NaN
    is a missing value). Nominal values may be any hashable; the other levels need numbers.

    NaN when no unit has two values, or when all pairable values are equal (no variation: alpha
    is undefined, not 1).
    """
    if level not in LEVELS:
        raise ValueError(f"unknown level {level!r}; valid: {list(LEVELS)}")
    kept: list[list[Hashable]] = []
    for u in units:
        vals = [v for v in u if not _missing(v)]
        if level != "nominal":
            vals = [float(v) for v in vals]
            if any(not math.isfinite(v) for v in vals):
                raise ValueError("values must be finite numbers (None or NaN for missing)")
            if level == "ratio" and any(v < 0 for v in vals):
                raise ValueError("ratio values must be >= 0")
        if len(vals) >= 2:
            kept.append(vals)
    if not kept:
        return math.nan
    domain = (
        sorted({v for u in kept for v in u}, key=lambda v: (str(type(v)), v))
        if level == "nominal"
        else sorted({v for u in kept for v in u})
    )
    if len(domain) < 2:
        return math.nan
    index = {v: i for i, v in enumerate(domain)}
    counts = np.zeros((len(kept), len(domain)))  # n_uc: how often unit u got value c
    for i, u in enumerate(kept):
        for v in u:
            counts[i, index[v]] += 1
    m = counts.sum(axis=1, keepdims=True)
    weighted = counts / (m - 1.0)
    o = weighted.T @ counts - np.diag(weighted.sum(axis=0))  # coincidences (pairs within a unit)
    n_c = o.sum(axis=0)
    n = n_c.sum()
    d = _distance(
        np.asarray(domain, dtype=float) if level != "nominal" else None, n_c, level, len(domain)
    )
    expected = float(n_c @ d @ n_c)
    if expected <= 0:
        return math.nan
    return float(1.0 - (n - 1.0) * float((o * d).sum()) / expected)


def _distance(values: np.ndarray | None, n_c: np.ndarray, level: str, size: int) -> np.ndarray:
    """The squared-distance matrix d_ck of the level over the sorted domain."""
    if level == "nominal":
        return 1.0 - np.eye(size)
    if level == "interval":
        return (values[:, None] - values[None, :]) ** 2
    if level == "ratio":
        s = values[:, None] + values[None, :]
        with np.errstate(invalid="ignore", divide="ignore"):
            r = np.where(s > 0, (values[:, None] - values[None, :]) / s, 0.0)
        return r**2
    cum = np.concatenate([[0.0], np.cumsum(n_c)])  # ordinal: ranks by marginal counts
    lo = np.minimum.outer(np.arange(size), np.arange(size))
    hi = np.maximum.outer(np.arange(size), np.arange(size))
    between = cum[hi + 1] - cum[lo]
    return (between - (n_c[:, None] + n_c[None, :]) / 2.0) ** 2


# ---------------------------------------------------------------------------------------------
# TACT's annotations


def window_grid(step_s: float = WINDOW_STEP_S) -> np.ndarray:
    """Centres of the steps of the offset domain [-2, 5] used for onset-window agreement."""
    lo, hi = DOMAIN_S
    n = int(round((hi - lo) / step_s))
    return lo + step_s * (np.arange(n) + 0.5)


def window_coverage(windows: Sequence[Sequence[float]], grid: np.ndarray) -> np.ndarray:
    """1.0 where a grid point lies inside one of an annotator's `[lo, hi]` windows, else 0.0."""
    inside = np.zeros(len(grid), dtype=bool)
    for lo, hi in windows:
        inside |= (grid >= lo) & (grid <= hi)
    return inside.astype(float)


def overlap_acceptance_s(windows: Sequence[Sequence[float]]) -> float:
    """Seconds of [-2, 0) that an annotator's windows accept as an onset (an onset there overlaps
    the focal speaker's turn): 0 when they accept no overlapping onset, 2 when they accept all."""
    lo_d = DOMAIN_S[0]
    return float(sum(max(0.0, min(hi, 0.0) - max(lo, lo_d)) for lo, hi in windows))


def episode_agreement(
    annotations: Sequence[Any], step_s: float = WINDOW_STEP_S
) -> dict[str, dict[str, Any]]:
    """Krippendorff's alpha of each annotation, over the episodes with at least two annotators.

    `annotations`: `episodes.Annotations` (labels, silence_acceptability, onset_windows) per
    episode. Returns, per figure, `alpha` (None where undefined), `level`, `units` (pairable
    units) and `values`:

    * `intent`: the labels, nominal; one unit per episode.
    * `silence_acceptability`: the [0, 1] ratings, interval; one unit per episode.
    * `onset_windows`: whether each `step_s` step of [-2, 5] lies inside the annotator's windows
      (1) or not (0); one unit per (episode, step). With two values nominal and interval alpha
      coincide. An annotator who marked no window accepts no onset: zeros throughout.
    * `overlap_acceptance`: `overlap_acceptance_s` of each annotator's windows, interval; one unit
      per episode (our stand-in for the paper's overlap acceptability, see the module docstring).
    """
    multi = [a for a in annotations if len(a.labels) >= 2]
    grid = window_grid(step_s)
    window_units: list[list[float]] = []
    for a in multi:
        cov = np.array([window_coverage(w, grid) for w in a.onset_windows])  # (K, steps)
        window_units.extend(cov.T.tolist())
    figures = {
        "intent": ([list(a.labels) for a in multi], "nominal"),
        "silence_acceptability": ([list(a.silence_acceptability) for a in multi], "interval"),
        "onset_windows": (window_units, "nominal"),
        "overlap_acceptance": (
            [[overlap_acceptance_s(w) for w in a.onset_windows] for a in multi],
            "interval",
        ),
    }
    out = {}
    for name, (units, level) in figures.items():
        alpha = krippendorff_alpha(units, level)
        out[name] = {
            "alpha": None if math.isnan(alpha) else alpha,
            "level": level,
            "units": len(units),
            "values": int(sum(len(u) for u in units)),
        }
    out["onset_windows"]["step_s"] = step_s
    return out
