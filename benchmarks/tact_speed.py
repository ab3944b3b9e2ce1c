#!/usr/bin/env python
"""Speed benchmark of the TACT scorer, with a naive reference implementation in the same run.

Scores 9,728 synthetic episodes (the paper's category sizes) with 10^4 BCa resamples on one core,
then recomputes everything the slow, obvious way: every episode's twCRPS by Simpson integration
of the mixture law evaluated from scipy.stats, lengths by exact piecewise integration of the step
CDFs, population S_T / S_L by piecewise Simpson, and the bootstrap by one Python-level composite
per resample (same seeded index stream) plus an explicit leave-one-out jackknife. Prints both
times, their ratio, the share of the warm time spent on BCa intervals, the time of the population
S_T's BCa interval (which the score step adds), and the largest disagreement; exits 1 if they
disagree by more than 1e-6. `python -m fdeval.bench --only tact` runs it at 10,000 episodes.

    python benchmarks/tact_speed.py [--episodes N] [--resamples B] [--seed S] [--skip-naive]
"""

from __future__ import annotations

import os

# One core, one BLAS thread: set before numpy is imported.
for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "NUMEXPR_NUM_THREADS"):
    os.environ[_var] = "1"
if hasattr(os, "sched_setaffinity"):
    os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})

import argparse
import math
import sys
import time

import numpy as np
from scipy import optimize, stats
from scipy.special import ndtr, ndtri

from fdeval.benchmarks.tact import laws, simulate
from fdeval.metrics.bootstrap import CHUNK, bootstrap_sums
from fdeval.benchmarks.tact.composite import (
    CATEGORY_WEIGHTS,
    composite_statistic,
    episode_scores,
    features,
    population_timing_interval,
    score_episodes,
)
from fdeval.benchmarks.tact.scoring import CATEGORIES

TOL = 1e-6


# ---------------------------------------------------------------------------------------------
# Naive reference


class NaiveLaw:
    """h_z straight from scipy.stats, with its own truncation constant and mode search."""

    def __init__(self, law: laws.ReferenceLaw):
        a, b, c = law.params
        self.dist = (
            stats.exponnorm(c / b, loc=a, scale=b)
            if law.family == "exgauss"
            else stats.lognorm(c, loc=a, scale=math.exp(b))
        )
        self.beta = law.no_response_mass
        self.lo = self.dist.cdf(-2.0)
        self.mass = self.dist.cdf(5.0) - self.lo
        grid = np.linspace(-2, 5, 70001)
        k = int(np.argmax(self.dist.pdf(grid)))
        res = optimize.minimize_scalar(
            lambda t: -self.dist.pdf(t),
            bounds=(grid[k - 1], grid[k + 1]),
            method="bounded",
            options={"xatol": 1e-12},
        )
        self.peak = float(self.dist.pdf(res.x)) / self.mass

    def cdf(self, t):
        return (1 - self.beta) * (self.dist.cdf(t) - self.lo) / self.mass

    def weight(self, t):
        return laws.EPS + (1 - laws.EPS) * (self.dist.pdf(t) / self.mass / self.peak) ** laws.GAMMA


def simpson(f, a: float, b: float, n: int = 4000) -> float:
    if b <= a:
        return 0.0
    x = np.linspace(a, b, n + 1)
    y = f(x)
    return (b - a) / (3 * n) * (y[0] + y[-1] + 4 * y[1:-1:2].sum() + 2 * y[2:-1:2].sum())


def naive_timing(naive: list[NaiveLaw], q: np.ndarray, y: float) -> float:
    P = lambda t: sum(qz * law.cdf(t) for qz, law in zip(q, naive))
    w = lambda t: sum(qz * law.weight(t) for qz, law in zip(q, naive))
    W = simpson(w, -2.0, 5.0)
    if math.isnan(y) or y > 5.0:
        crps = simpson(lambda t: w(t) * P(t) ** 2, -2.0, 5.0)
    else:
        crps = simpson(lambda t: w(t) * P(t) ** 2, -2.0, y, 2000) + simpson(
            lambda t: w(t) * (1 - P(t)) ** 2, y, 5.0, 2000
        )
    return 1 - crps / W


def naive_length(samples: tuple[np.ndarray, ...], top: float, q: np.ndarray, d: float) -> float:
    """Exact integral of (G_q - 1[d <= u])^2 over [0, D]: both are constant between breakpoints."""
    d = min(d, top)
    pts = np.unique(np.concatenate([[0.0, top, d], *samples]))
    mid = (pts[:-1] + pts[1:]) / 2
    G = sum(qz * np.searchsorted(s, mid, side="right") / s.size for qz, s in zip(q, samples))
    return 1 - float(np.sum(np.diff(pts) * (G - (d <= mid)) ** 2)) / top


def naive_population_timing(naive: list[NaiveLaw], y: np.ndarray, modes: np.ndarray) -> float:
    total = 0.0
    for z in np.unique(modes):
        law = naive[z]
        yz = y[modes == z]
        fin = np.sort(yz[np.isfinite(yz)])
        breaks = np.concatenate([[-2.0], fin, [5.0]])
        div = 0.0
        for i in range(breaks.size - 1):  # empirical CDF is i / n on [breaks[i], breaks[i+1])
            c = i / yz.size
            n_sub = 2 * max(1, math.ceil((breaks[i + 1] - breaks[i]) / 2e-3))
            div += simpson(
                lambda t, c=c, law=law: law.weight(t) * (c - law.cdf(t)) ** 2,
                breaks[i],
                breaks[i + 1],
                n_sub,
            )
        W = simpson(law.weight, -2.0, 5.0, 20000)
        total += (modes == z).mean() * div / W
    return 1 - total


def naive_population_length(ref, d: np.ndarray, modes: np.ndarray, buckets: list[str]) -> float:
    """Exact integral of (Q - G)^2 per (mode, bucket) cell; both CDFs are steps."""
    ok = np.isfinite(d)
    total = 0.0
    for z in np.unique(modes[ok]):
        in_z = ok & (modes == z)
        for b in sorted({buckets[i] for i in np.flatnonzero(in_z)}):
            m = in_z & (np.array(buckets) == b)
            x = np.sort(np.minimum(d[m], ref.support_s))
            g = ref.samples[ref.buckets.index(b)][z]
            pts = np.unique(np.concatenate([[0.0, ref.support_s], x, g]))
            mid = (pts[:-1] + pts[1:]) / 2
            Q = np.searchsorted(x, mid, side="right") / x.size
            G = np.searchsorted(g, mid, side="right") / g.size
            total += m.sum() / ok.sum() * np.sum(np.diff(pts) * (Q - G) ** 2)
    return 1 - total / ref.support_s


def naive_composite(cat, s_t, s_l, s_o) -> float:
    scores = []
    for c, name in enumerate(CATEGORIES):
        m = cat == c
        if not m.any():
            continue
        lens = s_l[m][np.isfinite(s_l[m])]
        comps = [s_t[m].mean(), lens.mean() if lens.size else math.nan, s_o[m].mean()]
        w = [wk for wk, v in zip(CATEGORY_WEIGHTS[name], comps) if wk > 0 and not math.isnan(v)]
        v = [v for wk, v in zip(CATEGORY_WEIGHTS[name], comps) if wk > 0 and not math.isnan(v)]
        scores.append(sum(a * b for a, b in zip(w, v)) / sum(w))
    return sum(scores) / len(scores)


def naive_bca(cat, s_t, s_l, s_o, n_resamples: int, seed: int, confidence: float = 0.95):
    n = cat.size
    theta = naive_composite(cat, s_t, s_l, s_o)
    rng = np.random.default_rng(seed)
    reps = []
    for start in range(
        0, n_resamples, CHUNK
    ):  # the scorer's documented stream: CHUNK rows per draw
        for idx in rng.integers(0, n, size=(min(CHUNK, n_resamples - start), n)):
            reps.append(naive_composite(cat[idx], s_t[idx], s_l[idx], s_o[idx]))
    reps = np.array(reps)
    jack = np.array(
        [naive_composite(*(np.delete(a, i) for a in (cat, s_t, s_l, s_o))) for i in range(n)]
    )
    z0 = ndtri((np.sum(reps < theta) + 0.5 * np.sum(reps == theta)) / reps.size)
    d = jack.mean() - jack
    a = np.sum(d**3) / (6 * np.sum(d**2) ** 1.5)
    za = ndtri(np.array([(1 - confidence) / 2, (1 + confidence) / 2]))
    lo, hi = np.quantile(reps, ndtr(z0 + (z0 + za) / (1 - a * (z0 + za))))
    return theta, lo, hi


def naive_run(eps, ref, n_resamples: int, seed: int):
    naive = [NaiveLaw(law) for law in laws.reference_laws()]
    q = np.array([e.posterior for e in eps])
    y = np.array([e.onset_s for e in eps])
    s_t = np.array([naive_timing(naive, qi, yi) for qi, yi in zip(q, y)])
    s_l = np.full(len(eps), np.nan)
    for i, e in enumerate(eps):
        if np.isfinite(e.onset_s) and e.onset_s <= 5.0 and np.isfinite(e.duration_s):
            samples = ref.samples[ref.buckets.index(e.context_bucket)]
            s_l[i] = naive_length(samples, ref.support_s, q[i], e.duration_s)
    s_o = np.empty(len(eps))
    for i, e in enumerate(eps):
        pen = 0.0
        for o in e.overlaps:
            if not o.backchannel:
                pen += (1 - o.psi) * o.duration_s
        s_o[i] = 1 - min(1.0, pen / laws.T_A_S)
    cat = np.array([CATEGORIES.index(e.category) for e in eps])
    composite = naive_bca(cat, s_t, s_l, s_o, n_resamples, seed)
    modes = np.argmax(q, axis=1)
    pop_t = naive_population_timing(naive, np.where(y > 5.0, np.nan, y), modes)
    d = np.where(np.isfinite(s_l), [e.duration_s for e in eps], np.nan)
    pop_l = naive_population_length(ref, d, modes, [e.context_bucket for e in eps])
    return s_t, s_l, s_o, composite, pop_t, pop_l


# ---------------------------------------------------------------------------------------------


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--episodes", type=int, default=sum(simulate.PAPER_CATEGORY_SIZES.values()))
    ap.add_argument("--resamples", type=int, default=10_000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--skip-naive", action="store_true")
    args = ap.parse_args()

    total = sum(simulate.PAPER_CATEGORY_SIZES.values())
    sizes = {c: round(n * args.episodes / total) for c, n in simulate.PAPER_CATEGORY_SIZES.items()}
    largest = max(sizes, key=sizes.get)
    sizes[largest] += args.episodes - sum(sizes.values())  # exactly --episodes after rounding
    rng = np.random.default_rng(args.seed)
    eps = simulate.random_episodes(rng, sizes)
    ref = simulate.duration_reference(rng)
    print(
        f"{len(eps)} episodes, {args.resamples} BCa resamples, 1 core (cpu {sorted(os.sched_getaffinity(0))}), "
        f"numpy {np.__version__}"
    )

    for cached in (laws.law_table, laws.reference_laws, laws.ref_log_sigma):
        cached.cache_clear()  # the cold run pays for deriving the laws and building the table
    times = []
    for _ in range(3):
        t0 = time.perf_counter()
        result = score_episodes(eps, ref, n_resamples=args.resamples, seed=args.seed)
        times.append(time.perf_counter() - t0)
    fast_s = times[0]
    print(
        f"fast : {fast_s:7.3f} s cold (incl. law table), {min(times[1:]):.4f} s warm   "
        f"S = {result.composite.estimate:.6f} [{result.composite.low:.6f}, {result.composite.high:.6f}]  "
        f"S_T(pop) = {result.timing_population:.6f}  S_L(pop) = {result.length_population:.6f}"
    )
    t0 = time.perf_counter()
    scores = episode_scores(eps, ref)
    t1 = time.perf_counter()
    bootstrap_sums(
        features(scores), composite_statistic, n_resamples=args.resamples, seed=args.seed
    )
    t2 = time.perf_counter()
    population_timing_interval(
        [e.onset_s for e in eps],
        [e.posterior for e in eps],
        n_resamples=args.resamples,
        seed=args.seed,
    )
    t3 = time.perf_counter()
    print(
        f"       warm parts: per-episode scores {t1 - t0:.4f} s, BCa with {args.resamples} resamples {t2 - t1:.4f} s "
        f"({(t2 - t1) / min(times[1:]):.0%} of the warm time on intervals); "
        f"population S_T BCa (not in the warm time) {t3 - t2:.4f} s"
    )
    if args.skip_naive:
        return 0 if fast_s < 10 else 1

    t0 = time.perf_counter()
    s_t, s_l, s_o, (theta, lo, hi), pop_t, pop_l = naive_run(eps, ref, args.resamples, args.seed)
    naive_s = time.perf_counter() - t0
    print(
        f"naive: {naive_s:7.2f} s                          "
        f"S = {theta:.6f} [{lo:.6f}, {hi:.6f}]  S_T(pop) = {pop_t:.6f}  S_L(pop) = {pop_l:.6f}"
    )
    ep = result.episodes
    diffs = {
        "s_T": np.max(np.abs(ep.timing - s_t)),
        "s_L": np.nanmax(np.abs(ep.length - s_l)),
        "s_O": np.max(np.abs(ep.overlap - s_o)),
        "S": abs(result.composite.estimate - theta),
        "S low": abs(result.composite.low - lo),
        "S high": abs(result.composite.high - hi),
        "S_T(pop)": abs(result.timing_population - pop_t),
        "S_L(pop)": abs(result.length_population - pop_l),
    }
    same_nan = np.array_equal(np.isnan(ep.length), np.isnan(s_l))
    print(f"ratio naive / fast: {naive_s / fast_s:.0f}x cold, {naive_s / min(times[1:]):.0f}x warm")
    print("max |fast - naive|: " + ", ".join(f"{k} {v:.1e}" for k, v in diffs.items()))
    ok = same_nan and all(v <= TOL for v in diffs.values())
    print(
        f"agreement within {TOL:g}: {'yes' if ok else 'NO'}; fast under 10 s: {'yes' if fast_s < 10 else 'NO'}"
    )
    return 0 if ok and fast_s < 10 else 1


if __name__ == "__main__":
    sys.exit(main())
