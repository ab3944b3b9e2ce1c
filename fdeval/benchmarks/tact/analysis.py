"""TACT analyses beyond one system's score: profile-swap JSD_2, agreement with human ratings,
slice tables (with per-slice kernels where the data allow), the human topline, the baselines of
Table I (binary v1 and latency) and the per-intent cells of Fig. 2 (the paper's results sections).

Baselines (the paper names them, after Full-Duplex-Bench v1 [5], but prints no formula):

* **binary v1**: each episode is a yes/no takeover decision, right or wrong by category. A
  takeover is a response within the horizon longer than `takeover_min_s` (1 s, the measure's
  backchannel length: a short reply is a backchannel, not a takeover). Pause handling and
  backchanneling want no takeover, smooth turn-taking and user interruption want one. A category
  scores its share of right decisions; the composite is their unweighted mean, like S.
* **latency**: the median onset of the responses at or after the decision point in smooth
  turn-taking and user interruption (the two categories where v1 measures a response delay);
  lower reads as better, whatever the intent.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
from scipy.stats import rankdata

from fdeval.metrics.bootstrap import N_RESAMPLES, Interval, bootstrap_indices, bootstrap_sums

from .composite import (
    EpisodeScores,
    TactResult,
    composite_statistic,
    episode_scores,
    features,
    score_episodes,
)
from .laws import DOMAIN_S, INTENTS, LawTable
from .scoring import CATEGORIES, DurationReference, EpisodeScoreInput, as_onsets
from .topline import Reference, fit_episode_reference

SWAP_BIN_S = 0.25  # onset histogram bin for JSD_2 (choice: 28 bins over T plus the atom)
TAKEOVER_MIN_S = (
    1.0  # binary v1: a response longer than this is a takeover (the measure's backchannel length)
)
# binary v1: whether each category wants a takeover (pause handling, backchanneling: no)
TAKEOVER_WANTED = {
    "pause_handling": False,
    "backchanneling": False,
    "smooth_turn_taking": True,
    "user_interruption": True,
}
LATENCY_CATEGORIES = ("smooth_turn_taking", "user_interruption")
MIN_KERNEL_HUMANS = 30  # responding human continuations a slice needs for a kernel of its own


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


def spearman_ci(
    metric, human, *, n_resamples: int = N_RESAMPLES, confidence: float = 0.95, seed: int = 0
) -> Interval:
    """Spearman rho between metric scores and human ratings over cells, with a BCa interval from
    resampling cells (the paper reports rho over 88 judged cells).
    """
    x = np.asarray(metric, dtype=float)
    y = np.asarray(human, dtype=float)
    if x.shape != y.shape or x.ndim != 1 or x.size < 3:
        raise ValueError("metric and human must be equal-length 1-d arrays of at least 3 cells")
    stat = lambda idx: _spearman_rows(x[idx], y[idx])[:, None]
    return bootstrap_indices(
        x.size, stat, n_resamples=n_resamples, confidence=confidence, seed=seed
    )[0]


@dataclass(frozen=True)
class SliceRow:
    """The composite S of one slice value (e.g. key "gender", value "female") with its interval.

    `kernel`: S of the slice scored against a reference fitted on the slice's own human
    continuations (None when the slice has fewer than `MIN_KERNEL_HUMANS` responding ones);
    `kernel_humans`: how many responding continuations that reference was fitted on.
    """

    key: str
    value: str
    n_episodes: int
    composite: Interval
    kernel: Interval | None = None
    kernel_humans: int = 0


def slice_table(
    inputs: Sequence[EpisodeScoreInput],
    keys: Sequence[str] | None = None,
    duration_reference: DurationReference | None = None,
    *,
    n_resamples: int = N_RESAMPLES,
    confidence: float = 0.95,
    seed: int = 0,
    table: LawTable | None = None,
    scores: EpisodeScores | None = None,
    kernel_humans: Sequence[EpisodeScoreInput] | None = None,
    fit: Callable[..., Reference] = fit_episode_reference,
    min_kernel_humans: int = MIN_KERNEL_HUMANS,
) -> list[SliceRow]:
    """Composite S per value of each slice key in the episodes' `slices` metadata, with BCa
    intervals. Episodes without a key are left out of that key's rows.

    `scores`: per-episode scores already computed (e.g. cross-fitted ones), aligned with `inputs`.
    `kernel_humans`: human continuations (any episodes, with `slices`); a slice value with at least
    `min_kernel_humans` responding ones also gets S against `fit(those continuations)` (the paper's
    "kernels fitted per slice where data permit"; with the default `fit`, the slice's own
    duration laws, the onset laws staying the paper's until a fitter of onset laws is passed).
    """
    if scores is None:
        scores = episode_scores(inputs, duration_reference, table)
    X = features(scores)
    if keys is None:
        keys = sorted({k for e in inputs for k in e.slices})
    buckets = sorted(
        {e.context_bucket for e in inputs} | {h.context_bucket for h in kernel_humans or ()}
    )
    rows = []
    for key in keys:
        values = np.array([e.slices.get(key) for e in inputs], dtype=object)
        for value in sorted({v for v in values if v is not None}):
            mask = values == value
            kw = {"n_resamples": n_resamples, "confidence": confidence, "seed": seed}
            ci = bootstrap_sums(X[mask], composite_statistic, **kw)[0]
            kernel, n_h = None, 0
            if kernel_humans is not None:
                mine = [h for h in kernel_humans if h.slices.get(key) == value]
                n_h = sum(
                    1 for h in mine if math.isfinite(h.onset_s) and math.isfinite(h.duration_s)
                )
                if n_h >= min_kernel_humans:
                    ref = fit(mine, buckets=buckets)
                    sub = [e for e, m in zip(inputs, mask) if m]
                    kx = features(episode_scores(sub, ref.durations, ref.table))
                    kernel = bootstrap_sums(kx, composite_statistic, **kw)[0]
            rows.append(SliceRow(key, str(value), int(mask.sum()), ci, kernel, n_h))
    return rows


def slice_gaps(rows: Sequence[SliceRow]) -> dict[str, float]:
    """Per slice key, the spread (max - min) of the composite across its values."""
    out: dict[str, list[float]] = {}
    for r in rows:
        out.setdefault(r.key, []).append(r.composite.estimate)
    return {k: float(np.max(v) - np.min(v)) for k, v in out.items()}


def human_topline(
    human_inputs: Sequence[EpisodeScoreInput],
    duration_reference: DurationReference | None = None,
    **kwargs,
) -> TactResult:
    """Score human continuations exactly as a system is scored (Table I's topline), against the
    reference given. When that reference was fitted on these same continuations (the score
    step's in-sample default), the topline is flattered; `topline.held_out_topline` cross-fits.

    Even a perfect match to h_z stays below 1 per episode: see `scoring.single_draw_ceiling`.
    """
    return score_episodes(human_inputs, duration_reference, **kwargs)


# ---------------------------------------------------------------------------------------------
# Table I baselines and Fig. 2 cells


def takeovers(
    inputs: Sequence[EpisodeScoreInput], takeover_min_s: float = TAKEOVER_MIN_S
) -> np.ndarray:
    """Per episode: did the system take the floor (a response within T_h longer than `takeover_min_s`)?"""
    y = as_onsets([e.onset_s for e in inputs])
    d = np.array([e.duration_s for e in inputs], dtype=float)
    return np.isfinite(y) & (np.nan_to_num(d, nan=0.0) > takeover_min_s)


def _binary_statistic(sums: np.ndarray) -> np.ndarray:
    s = np.asarray(sums, dtype=float).reshape(-1, len(CATEGORIES), 2)
    with np.errstate(invalid="ignore", divide="ignore"):
        cat = s[..., 1] / s[..., 0]
        present = s[..., 0] > 0
        composite = np.nansum(np.where(present, cat, 0.0), axis=1) / present.sum(axis=1)
    return np.concatenate([composite[:, None], np.where(present, cat, np.nan)], axis=1)


def binary_v1(
    inputs: Sequence[EpisodeScoreInput],
    takeover_min_s: float = TAKEOVER_MIN_S,
    *,
    n_resamples: int = N_RESAMPLES,
    confidence: float = 0.95,
    seed: int = 0,
) -> dict[str, Interval]:
    """The binary v1 baseline (module docstring): {"S": composite, category: share right}, BCa."""
    took = takeovers(inputs, takeover_min_s)
    X = np.zeros((len(inputs), len(CATEGORIES), 2))
    for i, e in enumerate(inputs):
        c = CATEGORIES.index(e.category)
        X[i, c, 0] = 1.0
        X[i, c, 1] = float(took[i] == TAKEOVER_WANTED[e.category])
    cis = bootstrap_sums(
        X.reshape(len(inputs), -1),
        _binary_statistic,
        n_resamples=n_resamples,
        confidence=confidence,
        seed=seed,
    )
    return dict(zip(("S", *CATEGORIES), cis))


def median_latency(inputs: Sequence[EpisodeScoreInput]) -> tuple[float, int]:
    """The latency baseline: (median onset in s, number of responses) over the responses at or
    after the decision point in `LATENCY_CATEGORIES`; (NaN, 0) without any."""
    y = as_onsets([e.onset_s for e in inputs if e.category in LATENCY_CATEGORIES])
    y = y[np.isfinite(y) & (y >= 0)]
    return (float(np.median(y)) if y.size else math.nan), int(y.size)


def intent_cells(scores: EpisodeScores, posteriors) -> list[dict]:
    """Fig. 2's cells: per (category, posterior-mode intent) the category score of those episodes
    (the composite's category formula on them), with their mean timing, length and overlap, and
    per intent over all categories (category "all": the mean of its category cells, as S is).
    Each category's score is its cells averaged with the category's own mode shares (exactly so
    when length is defined for every episode or for none)."""
    modes = np.argmax(np.asarray(posteriors, dtype=float), axis=1)
    X = features(scores)
    rows = []
    for z, intent in enumerate(INTENTS):
        in_z = modes == z
        if not in_z.any():
            continue
        stat = composite_statistic(X[in_z].sum(axis=0)[None, :])[0]
        for label, m, value in [("all", in_z, stat[0])] + [
            (c, in_z & (scores.category == k), stat[1 + k]) for k, c in enumerate(CATEGORIES)
        ]:
            if not m.any():
                continue
            with np.errstate(invalid="ignore"):
                rows.append(
                    {
                        "category": label,
                        "intent": intent,
                        "n_episodes": int(m.sum()),
                        "score": float(value),
                        "timing": float(np.mean(scores.timing[m])),
                        "length": float(np.nanmean(scores.length[m]))
                        if np.isfinite(scores.length[m]).any()
                        else math.nan,
                        "overlap": float(np.mean(scores.overlap[m])),
                    }
                )
    return rows
