"""TACT category composites, the composite S, and their BCa intervals for one system.

Each category combines the mean per-episode component scores (timing s_T, length s_L, overlap
s_O) over its episodes with fixed convex weights (Sec. IV: timing dominates pause handling and
smooth turn-taking, overlap dominates interruption, timing and length share backchanneling; the
numbers are not printed, `CATEGORY_WEIGHTS` is the choice made here). A component with no
defined value in a category (length when the system never responded, or no duration reference)
drops out and the remaining weights are renormalised. S is the unweighted mean of the category
scores present. A category mean over its episodes equals the prior-weighted average of its
per-intent cells with the category's own mode shares as prior (as the paper's results relate
Table I to Fig. 2).

Intervals: BCa over whole episodes, 10^4 resamples, seeded (`fdeval.metrics.bootstrap.bootstrap_sums`): every
reported number is a function of per-category sums, so resampling is one matrix product.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from fdeval.metrics.bootstrap import N_RESAMPLES, Interval, bootstrap_sums

from .laws import LawTable
from .scoring import (
    CATEGORIES,
    DurationReference,
    EpisodeScoreInput,
    as_onsets,
    length_scores,
    overlap_penalty_s,
    overlap_score,
    population_length_score,
    population_timing_score,
    score_onsets,
)

# Convex weights (timing, length, overlap) per category; see module docstring.
CATEGORY_WEIGHTS: dict[str, tuple[float, float, float]] = {
    "pause_handling": (0.6, 0.2, 0.2),
    "backchanneling": (0.5, 0.5, 0.0),
    "smooth_turn_taking": (0.6, 0.2, 0.2),
    "user_interruption": (0.2, 0.2, 0.6),
}
_N_FEATURES = 5  # per category: n, sum s_T, n with s_L, sum s_L, sum s_O


@dataclass(frozen=True, eq=False)
class EpisodeScores:
    """Per-episode component scores (arrays aligned with `episode_ids`; s_L NaN when undefined)."""

    episode_ids: tuple[str, ...]
    category: np.ndarray  # (n,) index into CATEGORIES
    timing: np.ndarray
    length: np.ndarray
    overlap: np.ndarray

    @property
    def composite(self) -> np.ndarray:
        """Per-episode convex combination with the category's weights (renormalised if s_L is NaN)."""
        w = np.array([CATEGORY_WEIGHTS[c] for c in CATEGORIES])[self.category]
        comps = np.stack([self.timing, self.length, self.overlap], axis=1)
        ok = np.isfinite(comps)
        return np.sum(np.where(ok, w * comps, 0.0), axis=1) / np.sum(np.where(ok, w, 0.0), axis=1)


@dataclass(frozen=True, eq=False)
class TactResult:
    """One system's TACT scores: composite S, categories, components, population metrics."""

    composite: Interval
    categories: dict[str, Interval]
    components: dict[str, dict[str, float]]  # category -> component -> mean score (NaN if none)
    timing_population: float  # S_T through the proper divergence
    length_population: float  # S_L (NaN without a duration reference or responses)
    episodes: EpisodeScores
    seed: int


def episode_scores(inputs: Sequence[EpisodeScoreInput], duration_reference: DurationReference | None = None,
                   table: LawTable | None = None) -> EpisodeScores:
    """Component scores of every episode (s_L only with a duration reference)."""
    if not inputs:
        raise ValueError("no episodes to score")
    q = np.array([e.posterior for e in inputs], dtype=float)
    onsets = np.array([e.onset_s for e in inputs], dtype=float)
    timing = score_onsets(onsets, q, table)
    length = np.full(len(inputs), np.nan)
    if duration_reference is not None:
        # Length is defined for episodes with a response within the horizon only.
        dur = np.where(np.isfinite(as_onsets(onsets)), np.array([e.duration_s for e in inputs], dtype=float),
                       np.nan)
        length = length_scores(dur, q, [e.context_bucket for e in inputs], duration_reference)
    overlap = overlap_score(np.array([overlap_penalty_s(e.overlaps) for e in inputs]))
    cat = np.array([CATEGORIES.index(e.category) for e in inputs], dtype=np.intp)
    return EpisodeScores(tuple(e.episode_id for e in inputs), cat, timing, length, overlap)


def features(scores: EpisodeScores) -> np.ndarray:
    """(n, 4 * 5) per-episode rows whose column sums determine every category and composite score."""
    n = scores.timing.size
    X = np.zeros((n, len(CATEGORIES), _N_FEATURES))
    has_len = np.isfinite(scores.length)
    rows = np.arange(n)
    X[rows, scores.category, 0] = 1.0
    X[rows, scores.category, 1] = scores.timing
    X[rows, scores.category, 2] = has_len
    X[rows, scores.category, 3] = np.where(has_len, scores.length, 0.0)
    X[rows, scores.category, 4] = scores.overlap
    return X.reshape(n, -1)


def composite_statistic(sums: np.ndarray) -> np.ndarray:
    """(m, 20) feature sums -> (m, 5): composite S, then the four category scores."""
    s = np.asarray(sums, dtype=float).reshape(-1, len(CATEGORIES), _N_FEATURES)
    with np.errstate(invalid="ignore", divide="ignore"):
        comps = np.stack([s[..., 1] / s[..., 0], s[..., 3] / s[..., 2], s[..., 4] / s[..., 0]], axis=-1)
        w = np.array([CATEGORY_WEIGHTS[c] for c in CATEGORIES])[None]
        ok = np.isfinite(comps) & (w > 0)
        cat = np.sum(np.where(ok, w * comps, 0.0), axis=-1) / np.sum(np.where(ok, w, 0.0), axis=-1)
        present = s[..., 0] > 0
        cat = np.where(present, cat, np.nan)
        composite = np.nansum(cat, axis=1) / present.sum(axis=1)
    return np.concatenate([composite[:, None], cat], axis=1)


def score_episodes(inputs: Sequence[EpisodeScoreInput], duration_reference: DurationReference | None = None, *,
                   n_resamples: int = N_RESAMPLES, confidence: float = 0.95, seed: int = 0,
                   prior: Mapping[str, float] | None = None, table: LawTable | None = None) -> TactResult:
    """Score one system on a set of episodes: composite S and categories with BCa intervals.

    `prior` is the intent prior for the population S_T / S_L (default: the share of episodes per
    posterior mode).
    """
    scores = episode_scores(inputs, duration_reference, table)
    X = features(scores)
    cis = bootstrap_sums(X, composite_statistic, n_resamples=n_resamples, confidence=confidence, seed=seed)
    sums = X.sum(axis=0).reshape(len(CATEGORIES), _N_FEATURES)
    components = {}
    for ci, c in enumerate(CATEGORIES):
        n, st, nl, sl, so = sums[ci]
        components[c] = {"timing": st / n if n else math.nan, "length": sl / nl if nl else math.nan,
                         "overlap": so / n if n else math.nan}
    q = np.array([e.posterior for e in inputs], dtype=float)
    onsets = np.array([e.onset_s for e in inputs], dtype=float)
    s_t = population_timing_score(onsets, q, prior, table)
    s_l = math.nan
    if duration_reference is not None:
        dur = np.where(np.isnan(scores.length), np.nan, [e.duration_s for e in inputs])
        s_l = population_length_score(dur, q, [e.context_bucket for e in inputs], duration_reference, prior)
    return TactResult(cis[0], dict(zip(CATEGORIES, cis[1:])), components, s_t, s_l, scores, seed)


def median_runs(runs: Sequence[Sequence[EpisodeScoreInput]], duration_reference: DurationReference | None = None,
                table: LawTable | None = None) -> list[EpisodeScoreInput]:
    """Per episode, the run whose per-episode composite is the median (lower median for even
    counts): the paper runs every episode three times and keeps the median-scoring run.

    `runs[r][i]` is run r of episode i; all runs list the same episodes in the same order.
    """
    if not runs:
        raise ValueError("no runs")
    ids = [e.episode_id for e in runs[0]]
    if any([e.episode_id for e in run] != ids for run in runs):
        raise ValueError("every run must list the same episodes in the same order")
    comp = np.stack([episode_scores(run, duration_reference, table).composite for run in runs])  # (R, n)
    order = np.argsort(comp, axis=0, kind="stable")
    pick = order[(len(runs) - 1) // 2]
    return [runs[r][i] for i, r in enumerate(pick)]
