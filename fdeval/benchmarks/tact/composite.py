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

The population S_T (the proper score: its divergence is minimised only by the human law) is not
a function of column sums (the empirical law enters squared), so its interval
(`population_timing_interval`) resamples episode counts and evaluates the closed-form divergence
of each resample: with episodes sorted by onset once, the pair sum is a cumulative sum of counts.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from fdeval.metrics.bootstrap import (
    N_RESAMPLES,
    Interval,
    bca_interval,
    bootstrap_sums,
    resample_indices,
)

from .laws import N_INTENTS, LawTable, law_table
from .scoring import (
    CATEGORIES,
    DurationReference,
    EpisodeScoreInput,
    as_onsets,
    as_posteriors,
    intent_modes,
    length_scores,
    overlap_penalty_s,
    overlap_score,
    population_length_score,
    population_timing_score,
    prior_array,
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
    timing_population_ci: Interval | None = (
        None  # BCa of S_T when asked for (`score_episodes(timing_interval=True)`)
    )


def episode_scores(
    inputs: Sequence[EpisodeScoreInput],
    duration_reference: DurationReference | None = None,
    table: LawTable | None = None,
) -> EpisodeScores:
    """Component scores of every episode (s_L only with a duration reference)."""
    if not inputs:
        raise ValueError("no episodes to score")
    q = np.array([e.posterior for e in inputs], dtype=float)
    onsets = np.array([e.onset_s for e in inputs], dtype=float)
    timing = score_onsets(onsets, q, table)
    length = np.full(len(inputs), np.nan)
    if duration_reference is not None:
        # Length is defined for episodes with a response within the horizon only.
        dur = np.where(
            np.isfinite(as_onsets(onsets)),
            np.array([e.duration_s for e in inputs], dtype=float),
            np.nan,
        )
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
        comps = np.stack(
            [s[..., 1] / s[..., 0], s[..., 3] / s[..., 2], s[..., 4] / s[..., 0]], axis=-1
        )
        w = np.array([CATEGORY_WEIGHTS[c] for c in CATEGORIES])[None]
        ok = np.isfinite(comps) & (w > 0)
        cat = np.sum(np.where(ok, w * comps, 0.0), axis=-1) / np.sum(np.where(ok, w, 0.0), axis=-1)
        present = s[..., 0] > 0
        cat = np.where(present, cat, np.nan)
        composite = np.nansum(cat, axis=1) / present.sum(axis=1)
    return np.concatenate([composite[:, None], cat], axis=1)


def summarise(
    cis: Sequence[Interval],
    X: np.ndarray,
    timing_population: float,
    length_population: float,
    scores: EpisodeScores,
    seed: int,
    timing_population_ci: Interval | None = None,
) -> TactResult:
    """A `TactResult` from the composite's intervals (S, then the categories) and the feature rows."""
    sums = X.sum(axis=0).reshape(len(CATEGORIES), _N_FEATURES)
    components = {}
    for ci, c in enumerate(CATEGORIES):
        n, st, nl, sl, so = sums[ci]
        components[c] = {
            "timing": st / n if n else math.nan,
            "length": sl / nl if nl else math.nan,
            "overlap": so / n if n else math.nan,
        }
    return TactResult(
        cis[0],
        dict(zip(CATEGORIES, cis[1:])),
        components,
        timing_population,
        length_population,
        scores,
        seed,
        timing_population_ci,
    )


def score_episodes(
    inputs: Sequence[EpisodeScoreInput],
    duration_reference: DurationReference | None = None,
    *,
    n_resamples: int = N_RESAMPLES,
    confidence: float = 0.95,
    seed: int = 0,
    prior: Mapping[str, float] | None = None,
    table: LawTable | None = None,
    timing_interval: bool = False,
) -> TactResult:
    """Score one system on a set of episodes: composite S and categories with BCa intervals.

    `prior` is the intent prior for the population S_T / S_L (default: the share of episodes per
    posterior mode). `timing_interval`: also a BCa interval for the population S_T
    (`population_timing_interval`, same resamples and seed).
    """
    scores = episode_scores(inputs, duration_reference, table)
    X = features(scores)
    cis = bootstrap_sums(
        X, composite_statistic, n_resamples=n_resamples, confidence=confidence, seed=seed
    )
    q = np.array([e.posterior for e in inputs], dtype=float)
    onsets = np.array([e.onset_s for e in inputs], dtype=float)
    s_t = population_timing_score(onsets, q, prior, table)
    s_l = math.nan
    if duration_reference is not None:
        dur = np.where(np.isnan(scores.length), np.nan, [e.duration_s for e in inputs])
        s_l = population_length_score(
            dur, q, [e.context_bucket for e in inputs], duration_reference, prior
        )
    t_ci = (
        population_timing_interval(
            onsets, q, prior, table, n_resamples=n_resamples, confidence=confidence, seed=seed
        )
        if timing_interval
        else None
    )
    return summarise(cis, X, s_t, s_l, scores, seed, t_ci)


class _PopulationTiming:
    """The population S_T as a function of episode counts, for the bootstrap.

    Per mode z, with c the counts of z's episodes in onset order (no response last, where both
    tail integrals are 0), n_z = sum c, and A, B the tail integrals of w_z H_z and w_z from each
    onset: d_z = cubic_zzz - 2 (c . A) / n_z + sum c (2 C - c) B / n_z^2, C the running sum of c
    (the pair sum of B(max(y, y')) in `scoring.empirical_timing_divergence`, with multiplicities).
    """

    def __init__(self, onsets_s, posteriors, prior=None, table: LawTable | None = None):
        self.tab = tab = table or law_table()
        y = as_onsets(onsets_s)
        self.n = n = y.size
        modes = intent_modes(as_posteriors(posteriors, n))
        self.given = None if prior is None else prior_array(prior)
        order = np.lexsort((np.where(np.isnan(y), np.inf, y), modes))  # by mode, then onset
        self.pos = np.empty(n, dtype=np.intp)
        self.pos[order] = np.arange(n)  # column of each episode in the sorted count matrix
        self.mode_sorted = modes[order]
        self.A, self.B = np.zeros(n), np.zeros(n)
        self.parts = []
        for z in range(N_INTENTS):
            sel = np.flatnonzero(self.mode_sorted == z)
            if sel.size == 0:
                continue
            yz = y[order[sel]]
            fin = np.isfinite(yz)
            tails = tab.tail_at(yz[fin])
            self.A[sel[fin]] = tails[N_INTENTS + N_INTENTS * z + z]
            self.B[sel[fin]] = tails[z]
            self.parts.append((z, int(sel[0]), int(sel[-1]) + 1))

    def _divergence(self, z: int, k, sum_a, pair_sum):
        with np.errstate(invalid="ignore", divide="ignore"):
            d = self.tab.cubic[z, z, z] - 2.0 * sum_a / k + pair_sum / (k * k)
        return np.where(k > 0, d / self.tab.total_weight[z], 0.0)

    def _combine(self, div: np.ndarray, nz: np.ndarray) -> np.ndarray:
        pi = nz if self.given is None else np.where(nz > 0, self.given[None, :], 0.0)
        pi = pi / pi.sum(axis=1, keepdims=True)
        return (1.0 - np.sum(pi * div, axis=1))[:, None]

    def __call__(self, rows: np.ndarray) -> np.ndarray:
        """(m, 1) S_T of m resamples given as rows of episode indices."""
        cols = self.pos[np.asarray(rows)]
        m, n = cols.shape[0], self.n
        counts = np.bincount((cols + (np.arange(m) * n)[:, None]).ravel(), minlength=m * n).reshape(
            m, n
        )
        counts = counts.astype(float)
        div, nz = np.zeros((m, N_INTENTS)), np.zeros((m, N_INTENTS))
        for z, lo, hi in self.parts:
            c = counts[:, lo:hi]
            k = c.sum(axis=1)
            C = np.cumsum(c, axis=1)
            C *= 2.0
            C -= c
            C *= c
            div[:, z] = self._divergence(z, k, c @ self.A[lo:hi], C @ self.B[lo:hi])
            nz[:, z] = k
        return self._combine(div, nz)

    def jackknife(self) -> np.ndarray:
        """(n, 1) S_T with each episode left out, in closed form (O(n), not O(n^2))."""
        n = self.n
        div, nz = np.zeros(N_INTENTS), np.zeros(N_INTENTS)
        out_div, out_k = np.zeros(n), np.zeros(n)
        for z, lo, hi in self.parts:
            A, B = self.A[lo:hi], self.B[lo:hi]
            k = hi - lo
            r = np.arange(k)
            pair = float(np.sum((2 * r + 1) * B))
            div[z], nz[z] = self._divergence(z, float(k), A.sum(), pair), k
            # leaving out the episode at sorted position r: its pairs with every other episode go
            # (2 (B_r (r + 1) + sum_{j > r} B_j) - B_r), with it its A and one count
            later = np.concatenate([np.cumsum(B[::-1])[::-1][1:], [0.0]])
            pair_i = pair - 2.0 * (B * (r + 1) + later) + B
            out_div[lo:hi] = self._divergence(z, float(k - 1), A.sum() - A, pair_i)
            out_k[lo:hi] = k - 1
        D = np.tile(div, (n, 1))
        K = np.tile(nz, (n, 1))
        rows = np.arange(n)
        D[rows, self.mode_sorted] = out_div
        K[rows, self.mode_sorted] = out_k
        jack_sorted = self._combine(D, K)
        return jack_sorted[self.pos]  # back to the episodes' own order


def population_timing_statistic(onsets_s, posteriors, prior=None, table: LawTable | None = None):
    """The population S_T as a function of resampled episode indices, vectorised over resamples:
    stat(idx (m, n')) -> (m, 1). Equals `population_timing_score` on the identity resample."""
    return _PopulationTiming(onsets_s, posteriors, prior, table)


def population_timing_interval(
    onsets_s,
    posteriors,
    prior=None,
    table: LawTable | None = None,
    *,
    n_resamples: int = N_RESAMPLES,
    confidence: float = 0.95,
    seed: int = 0,
) -> Interval:
    """The population S_T with its BCa interval over episodes (10^4 resamples by default).

    The resamples are `bootstrap_indices`'s seeded stream; the jackknife for the acceleration is in
    closed form."""
    stat = _PopulationTiming(onsets_s, posteriors, prior, table)
    rng = np.random.default_rng(seed)
    theta = stat(np.arange(stat.n)[None, :])[0]
    reps = np.concatenate([stat(idx) for idx in resample_indices(rng, stat.n, n_resamples)])
    low, high = bca_interval(theta, reps, stat.jackknife(), confidence)
    return Interval(float(theta[0]), float(low[0]), float(high[0]), confidence, n_resamples)


def median_runs(
    runs: Sequence[Sequence[EpisodeScoreInput]],
    duration_reference: DurationReference | None = None,
    table: LawTable | None = None,
) -> list[EpisodeScoreInput]:
    """Per episode, the run whose per-episode composite is the median (lower median for even
    counts): the paper runs every episode three times and keeps the median-scoring run.

    `runs[r][i]` is run r of episode i; all runs list the same episodes in the same order.
    """
    if not runs:
        raise ValueError("no runs")
    ids = [e.episode_id for e in runs[0]]
    if any([e.episode_id for e in run] != ids for run in runs):
        raise ValueError("every run must list the same episodes in the same order")
    comp = np.stack(
        [episode_scores(run, duration_reference, table).composite for run in runs]
    )  # (R, n)
    order = np.argsort(comp, axis=0, kind="stable")
    pick = order[(len(runs) - 1) // 2]
    return [runs[r][i] for i, r in enumerate(pick)]
