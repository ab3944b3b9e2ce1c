"""The human topline, in-sample and held out (cross-fitted).

The in-sample topline scores each episode's human continuation against a reference built from
those very continuations: the duration laws g are the episodes' own durations, so S_L is 1 by
construction and the composite is flattered. The held-out topline splits the episodes into k
folds; each fold's continuations are scored against a reference fitted on the other folds only,
and the per-episode scores of all folds are pooled into one composite with a BCa interval.

What "fitting a reference" means is passed in (`fit`): a function from human continuations
(scorer inputs) to a `Reference`. The default, `fit_episode_reference`, fits what the score step
fits from episodes, the empirical duration laws per (posterior-mode intent, context bucket); the
onset laws stay the configured ones (table None: `benchmark.laws`, the paper's by default).
`fit_laws_reference` also fits the onset laws h_z by maximum likelihood on the training folds
(`fit_laws.fit_reference_laws`) and returns their `LawTable`, so the timing score is held out
too; it needs enough responding continuations per intent for EM to be meaningful.

Population S_T / S_L of the held-out topline: when every fold uses the same onset table, S_T is
computed on all episodes at once (it is the in-sample figure, nothing was fitted); otherwise
each fold's population score is weighted by its size. S_L is always the size-weighted mean of
the folds' population scores, each against its own fold's duration laws (so each carries the
plug-in bias of a fold-sized sample). The bootstrap resamples episodes with the fitted
references held fixed: the intervals leave the fitting variability out.
"""

from __future__ import annotations

import inspect
import math
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from fdeval.metrics.bootstrap import N_RESAMPLES, bootstrap_sums

from .composite import (
    EpisodeScores,
    TactResult,
    composite_statistic,
    episode_scores,
    features,
    summarise,
)
from .fit_laws import fit_reference_laws
from .laws import INTENTS, LawTable, law_table
from .measure import LENGTH_HORIZON_S
from .scoring import (
    DurationReference,
    EpisodeScoreInput,
    as_onsets,
    population_length_score,
    population_timing_score,
)


@dataclass(frozen=True, eq=False)
class Reference:
    """What episodes are scored against: human duration laws (None: no length score) and the
    onset-law table (None: the paper's laws, `laws.law_table()`)."""

    durations: DurationReference | None
    table: LawTable | None = None


Fit = Callable[[Sequence[EpisodeScoreInput]], Reference]


def human_durations(
    humans: Sequence[EpisodeScoreInput], buckets: Sequence[str] = ()
) -> dict[tuple[str, str], list]:
    """Durations of the responding continuations per (posterior-mode intent, context bucket).

    A bucket in `buckets` (or among the humans) with no response at all borrows each intent's
    durations pooled over the other buckets; a missing (intent, bucket) cell inside a known bucket
    is left to `DurationReference.from_samples` (intent pooled, then everything pooled).
    """
    cells: dict[tuple[str, str], list[float]] = defaultdict(list)
    for h in humans:
        if math.isfinite(h.onset_s) and math.isfinite(h.duration_s):
            cells[(INTENTS[int(np.argmax(h.posterior))], h.context_bucket)].append(
                float(h.duration_s)
            )
    if not cells:
        return {}
    have = {b for _, b in cells}
    for b in sorted((set(buckets) | {h.context_bucket for h in humans}) - have):
        for z in INTENTS:
            pooled = [d for (zz, _), ds in list(cells.items()) if zz == z for d in ds]
            if pooled:
                cells[(z, b)] = pooled
    return dict(cells)


def fit_episode_reference(
    humans: Sequence[EpisodeScoreInput],
    buckets: Sequence[str] = (),
    max_duration_s: float = LENGTH_HORIZON_S,
) -> Reference:
    """The reference the score step fits from episodes today: empirical duration laws on the
    support [0, `max_duration_s`], the paper's onset laws. Durations None without any response."""
    cells = human_durations(humans, buckets)
    return Reference(
        DurationReference.from_samples(cells, max_duration_s=max_duration_s) if cells else None
    )


def fit_laws_reference(
    humans: Sequence[EpisodeScoreInput],
    buckets: Sequence[str] = (),
    max_duration_s: float = LENGTH_HORIZON_S,
) -> Reference:
    """`fit_episode_reference`'s duration laws plus onset laws h_z fitted on the continuations'
    onsets and posteriors (EM over the intent, the paper's families)."""
    ref = fit_episode_reference(humans, buckets, max_duration_s)
    fit = fit_reference_laws([h.onset_s for h in humans], [h.posterior for h in humans])
    return Reference(ref.durations, law_table(laws=fit.laws))


def fold_ids(n: int, k: int, seed: int = 0, groups: Sequence[str] | None = None) -> np.ndarray:
    """Fold of each of n episodes: a seeded shuffle dealt round-robin into k folds; with `groups`
    (e.g. speaker ids) whole groups are dealt, so no group spans two folds."""
    if k < 2:
        raise ValueError("cross-fitting needs at least 2 folds")
    rng = np.random.default_rng([seed, 27])
    if groups is None:
        if n < k:
            raise ValueError(f"{n} episodes cannot fill {k} folds")
        out = np.empty(n, dtype=np.intp)
        out[rng.permutation(n)] = np.arange(n) % k
        return out
    names = sorted(set(groups))
    if len(names) < k:
        raise ValueError(f"{len(names)} groups cannot fill {k} folds")
    fold_of = {g: i % k for i, g in enumerate(names[j] for j in rng.permutation(len(names)))}
    return np.array([fold_of[g] for g in groups], dtype=np.intp)


@dataclass(frozen=True, eq=False)
class CrossFit:
    """Per-episode scores of the held-out continuations, their folds and each fold's reference."""

    scores: EpisodeScores
    folds: np.ndarray
    references: tuple[Reference, ...]


def cross_fit(
    humans: Sequence[EpisodeScoreInput],
    fit: Callable[..., Reference] = fit_episode_reference,
    *,
    k: int = 5,
    seed: int = 0,
    groups: Sequence[str] | None = None,
) -> CrossFit:
    """Score each fold's continuations against `fit(other folds' continuations)`.

    `fit` is called as fit(train) or, when it accepts them, fit(train, buckets=...) with every
    context bucket of the data (so a bucket absent from the training folds still has a law).
    """
    humans = list(humans)
    folds = fold_ids(len(humans), k, seed, groups)
    buckets = sorted({h.context_bucket for h in humans})
    n = len(humans)
    params = inspect.signature(fit).parameters
    takes_buckets = "buckets" in params or any(p.kind is p.VAR_KEYWORD for p in params.values())
    timing, length, overlap = np.full(n, np.nan), np.full(n, np.nan), np.full(n, np.nan)
    category = np.zeros(n, dtype=np.intp)
    refs = []
    for f in range(k):
        test = np.flatnonzero(folds == f)
        train = [humans[i] for i in np.flatnonzero(folds != f)]
        ref = fit(train, buckets=buckets) if takes_buckets else fit(train)
        refs.append(ref)
        sc = episode_scores([humans[i] for i in test], ref.durations, ref.table)
        timing[test], length[test], overlap[test], category[test] = (
            sc.timing,
            sc.length,
            sc.overlap,
            sc.category,
        )
    scores = EpisodeScores(tuple(h.episode_id for h in humans), category, timing, length, overlap)
    return CrossFit(scores, folds, tuple(refs))


def held_out_topline(
    humans: Sequence[EpisodeScoreInput],
    fit: Callable[..., Reference] = fit_episode_reference,
    *,
    k: int = 5,
    n_resamples: int = N_RESAMPLES,
    confidence: float = 0.95,
    seed: int = 0,
    groups: Sequence[str] | None = None,
    prior: Mapping[str, float] | None = None,
) -> TactResult:
    """The human topline with every continuation scored against a reference fitted without it
    (k-fold cross-fitting; the fold split is seeded by `seed`)."""
    humans = list(humans)
    cf = cross_fit(humans, fit, k=k, seed=seed, groups=groups)
    X = features(cf.scores)
    cis = bootstrap_sums(
        X, composite_statistic, n_resamples=n_resamples, confidence=confidence, seed=seed
    )
    q = np.array([h.posterior for h in humans], dtype=float)
    onsets = as_onsets([h.onset_s for h in humans])
    dur = np.where(np.isnan(cf.scores.length), np.nan, [h.duration_s for h in humans])
    buckets = [h.context_bucket for h in humans]
    tables = {id(r.table) for r in cf.references}
    weights, s_t, s_l = [], [], []
    for f, ref in enumerate(cf.references):
        m = cf.folds == f
        weights.append(m.sum())
        s_t.append(population_timing_score(onsets[m], q[m], prior, ref.table))
        ok = m & np.isfinite(dur)
        s_l.append(
            population_length_score(
                dur[m], q[m], [b for b, mm in zip(buckets, m) if mm], ref.durations, prior
            )
            if ref.durations is not None and ok.any()
            else math.nan
        )
    w = np.array(weights, dtype=float)
    if len(tables) == 1:
        timing_pop = population_timing_score(onsets, q, prior, cf.references[0].table)
    else:
        timing_pop = float(np.sum(w * np.array(s_t)) / w.sum())
    sl = np.array(s_l)
    length_pop = (
        float(np.sum(w[np.isfinite(sl)] * sl[np.isfinite(sl)]) / w[np.isfinite(sl)].sum())
        if np.isfinite(sl).any()
        else math.nan
    )
    return summarise(cis, X, timing_pop, length_pop, cf.scores, seed)


__all__ = [
    "CrossFit",
    "Fit",
    "Reference",
    "cross_fit",
    "fit_episode_reference",
    "fit_laws_reference",
    "fold_ids",
    "held_out_topline",
    "human_durations",
]
