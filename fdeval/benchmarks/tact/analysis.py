"""TACT analyses beyond one system's score: profile-swap JSD_2, agreement with human ratings,
slice tables and the human topline (the paper's results sections).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy.stats import rankdata

from fdeval.metrics.bootstrap import N_RESAMPLES, Interval, bootstrap_indices, bootstrap_sums

from .composite import (
    TactResult,
    composite_statistic,
    episode_scores,
    features,
    score_episodes,
)
from .laws import DOMAIN_S, LawTable
from .scoring import DurationReference, EpisodeScoreInput, as_onsets

SWAP_BIN_S = 0.25  # onset histogram bin for JSD_2 (choice: 28 bins over T plus the atom)


def onset_histogram(onsets_s, bin_s: float = SWAP_BIN_S) -> np.ndarray:
    """Probabilities of onsets in equal bins over T, with the no-response share as the last entry."""
    y = as_onsets(onsets_s)
    n_bins = round((DOMAIN_S[1] - DOMAIN_S[0]) / bin_s)
    fin = y[np.isfinite(y)]
    idx = np.minimum(((fin - DOMAIN_S[0]) / bin_s).astype(np.intp), n_bins - 1)
    counts = np.bincount(idx, minlength=n_bins).astype(float)
    counts = np.append(counts, y.size - fin.size)
    return counts / y.size


def jsd2(p, q) -> float:
    """Jensen-Shannon divergence in bits (in [0, 1]) between two discrete distributions."""
    p = np.asarray(p, dtype=float) / np.sum(p)
    q = np.asarray(q, dtype=float) / np.sum(q)
    m = (p + q) / 2

    def kl(a):
        nz = a > 0
        return float(np.sum(a[nz] * np.log2(a[nz] / m[nz])))

    return max(0.0, 0.5 * kl(p) + 0.5 * kl(q))


def profile_swap_jsd(onsets_true_s, onsets_swapped_s, bin_s: float = SWAP_BIN_S) -> float:
    """JSD_2 between the onset distributions (bins over T plus no response) under the true and the
    swapped speaker profiles (Sec. VI). Sample histograms bias JSD upward for small samples.
    """
    return jsd2(onset_histogram(onsets_true_s, bin_s), onset_histogram(onsets_swapped_s, bin_s))


def _spearman_rows(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Spearman rho of each row pair (average ranks for ties)."""
    rx = rankdata(x, axis=1)
    ry = rankdata(y, axis=1)
    rx -= rx.mean(axis=1, keepdims=True)
    ry -= ry.mean(axis=1, keepdims=True)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.sum(rx * ry, axis=1) / np.sqrt(np.sum(rx * rx, axis=1) * np.sum(ry * ry, axis=1))


def spearman_ci(metric, human, *, n_resamples: int = N_RESAMPLES, confidence: float = 0.95,
                seed: int = 0) -> Interval:
    """Spearman rho between metric scores and human ratings over cells, with a BCa interval from
    resampling cells (the paper reports rho over 88 judged cells).
    """
    x = np.asarray(metric, dtype=float)
    y = np.asarray(human, dtype=float)
    if x.shape != y.shape or x.ndim != 1 or x.size < 3:
        raise ValueError("metric and human must be equal-length 1-d arrays of at least 3 cells")
    stat = lambda idx: _spearman_rows(x[idx], y[idx])[:, None]
    return bootstrap_indices(x.size, stat, n_resamples=n_resamples, confidence=confidence, seed=seed)[0]


@dataclass(frozen=True)
class SliceRow:
    """The composite S of one slice value (e.g. key "gender", value "female") with its interval."""

    key: str
    value: str
    n_episodes: int
    composite: Interval


def slice_table(inputs: Sequence[EpisodeScoreInput], keys: Sequence[str] | None = None,
                duration_reference: DurationReference | None = None, *, n_resamples: int = N_RESAMPLES,
                confidence: float = 0.95, seed: int = 0, table: LawTable | None = None) -> list[SliceRow]:
    """Composite S per value of each slice key in the episodes' `slices` metadata, with BCa
    intervals. Episodes without a key are left out of that key's rows.
    """
    scores = episode_scores(inputs, duration_reference, table)
    X = features(scores)
    if keys is None:
        keys = sorted({k for e in inputs for k in e.slices})
    rows = []
    for key in keys:
        values = np.array([e.slices.get(key) for e in inputs], dtype=object)
        for value in sorted({v for v in values if v is not None}):
            mask = values == value
            ci = bootstrap_sums(X[mask], composite_statistic, n_resamples=n_resamples,
                                confidence=confidence, seed=seed)[0]
            rows.append(SliceRow(key, str(value), int(mask.sum()), ci))
    return rows


def slice_gaps(rows: Sequence[SliceRow]) -> dict[str, float]:
    """Per slice key, the spread (max - min) of the composite across its values."""
    out: dict[str, list[float]] = {}
    for r in rows:
        out.setdefault(r.key, []).append(r.composite.estimate)
    return {k: float(np.max(v) - np.min(v)) for k, v in out.items()}


def human_topline(human_inputs: Sequence[EpisodeScoreInput], duration_reference: DurationReference | None = None,
                  **kwargs) -> TactResult:
    """Score held-out human continuations exactly as a system is scored (Table I's topline).

    Even a perfect match to h_z stays below 1 per episode: see `scoring.single_draw_ceiling`.
    """
    return score_episodes(human_inputs, duration_reference, **kwargs)
