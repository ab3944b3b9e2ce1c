"""TACT component scores of a system's actions: timing (twCRPS), length and overlap.

Which laws: every timing function below takes a `table` (`laws.law_table(laws=...)`); without one it
uses `laws.law_table()`, the active law set (the paper's printed laws unless a `laws.use_laws`
block, e.g. the benchmark's score step with `benchmark.laws=<file>`, says otherwise).

Timing (Sec. IV). The paper's copy we work from prints the per-episode s_T, W_e and the
divergence d_z, but not the twCRPS and S_T displays; those follow its description (a w-weighted
integrated squared gap between P and the outcome's step function [49]; S_T maps the divergence
to [0, 1] with the normaliser W_z of its R_z / W_z term). With reference laws h_z and weights w_z
from `laws`, the twCRPS of a sub-probability CDF P against an outcome y in T or the no-response
atom (NaN here) is

    twCRPS_w(P, y) = integral over T of w(t) (P(t) - 1[y <= t])^2 dt,   1[none <= t] = 0,

* per episode (printed): s_T(e) = 1 - twCRPS(P_q, y_e) / W_e with P_q = sum_z q_z h_z,
  W_e = sum_z q_z W_z and W_z = integral of w_z over T. Which weight the twCRPS uses here is not
  said; we use w_q = sum_z q_z w_z, the one whose integral is W_e, so 0 <= twCRPS <= W_e and
  s_T is in [0, 1]. By linearity in the weight this equals sum_z q_z twCRPS_{w_z}(P_q, y_e);
* population: S_T = 1 - sum_z pi(z) d_z(P_z || h_z) / W_z with the proper divergence
  d_z(P || h) = E_h twCRPS(P, y) - E_h twCRPS(h, y) = integral of w_z (P - H_z)^2, and P_z the
  law of the system's onsets on episodes whose posterior mode is z. d_z <= W_z, so S_T is in
  [0, 1], and it is 1 exactly when every P_z equals h_z (w_z > 0 makes the divergence strict).

Consequence worth knowing: d/dy twCRPS(P_q, y) = -w_q(y) (1 - 2 P_q(y)), so the single onset
that maximises s_T is where P_q crosses 1/2, and silence when it never does (beta >= 1/2).

Length (Sec. IV, described in words): the same construction with uniform weight on the
duration support [0, D]: S_L = 1 - sum pi d^L / D with d^L the CRPS divergence to the human duration law g of the
(intent, context bucket) cell and D the length of the human durations' support; per episode
s_L(e) = 1 - CRPS(sum_z q_z G_z, d_e) / D for episodes with a response. Durations past D count
as D.

Overlap (Sec. IV; the formula is not printed, so this is a choice meeting the stated
properties): every competitive (non-backchannel) overlap o of duration d_o, starting where the
focal speech has completion probability psi_o, costs (1 - psi_o) d_o seconds; backchannels cost
nothing. s_O(e) = 1 - min(1, penalty / T_a): a mid-clause overlap as long as the whole observed
pre-horizon scores 0, one at a completion point (psi = 1) costs nothing, and between those the
cost is proportional to duration.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from .laws import (
    DOMAIN_S,
    INTENTS,
    N_INTENTS,
    PAPER_INTENT_PRIOR,
    T_A_S,
    T_H_S,
    LawTable,
    intent_index,
    law_table,
)

CATEGORIES: tuple[str, ...] = (
    "pause_handling",
    "backchanneling",
    "smooth_turn_taking",
    "user_interruption",
)
OVERLAP_SCALE_S = T_A_S  # penalty seconds that drive s_O to 0 (choice, see module docstring)
_ONSET_TOL_S = 1e-9


@dataclass(frozen=True)
class OverlapEvent:
    """One overlap of the system's speech with focal-speaker speech, on the episode clock.

    `psi` is the completion probability of the focal speech at `onset_s` (see `completion`);
    `backchannel` marks overlaps that are backchannels, which the overlap score exempts.
    """

    onset_s: float
    duration_s: float
    psi: float
    backchannel: bool = False

    def __post_init__(self):
        if not self.duration_s >= 0:
            raise ValueError(f"overlap duration_s must be >= 0, got {self.duration_s}")
        if not 0.0 <= self.psi <= 1.0:
            raise ValueError(f"overlap psi must be in [0, 1], got {self.psi}")


@dataclass(frozen=True)
class EpisodeScoreInput:
    """What scoring needs from one episode and one system run (or one human continuation).

    `posterior` is q(z | e) over `laws.INTENTS`; `onset_s` the first responsive onset relative
    to the decision point (NaN: no response within the horizon; past T_h counts as none);
    `duration_s` that response's length (NaN when there is none); `context_bucket` selects the
    human duration law; `slices` carries slice metadata (gender, age band, ...) for tables.
    """

    episode_id: str
    category: str
    posterior: tuple[float, ...]
    onset_s: float = math.nan
    duration_s: float = math.nan
    overlaps: tuple[OverlapEvent, ...] = ()
    context_bucket: str = ""
    slices: Mapping[str, str] = field(default_factory=dict, compare=False, hash=False)

    def __post_init__(self):
        if self.category not in CATEGORIES:
            raise ValueError(
                f"{self.episode_id}: unknown category {self.category!r}; valid: {CATEGORIES}"
            )
        if len(self.posterior) != N_INTENTS:
            raise ValueError(f"{self.episode_id}: posterior needs {N_INTENTS} entries ({INTENTS})")
        if self.onset_s < DOMAIN_S[0] - _ONSET_TOL_S:
            raise ValueError(
                f"{self.episode_id}: onset_s {self.onset_s} is before -T_a = {DOMAIN_S[0]}"
            )


# ---------------------------------------------------------------------------------------------
# Input checks


def as_onsets(onsets_s) -> np.ndarray:
    """Float onsets with NaN for no response; onsets past T_h become NaN, before -T_a raise."""
    y = np.array(onsets_s, dtype=float, ndmin=1)
    if np.any(y < DOMAIN_S[0] - _ONSET_TOL_S):
        raise ValueError(
            f"{int(np.sum(y < DOMAIN_S[0] - _ONSET_TOL_S))} onset(s) before -T_a = {DOMAIN_S[0]} s"
        )
    y = np.where(y > T_H_S, np.nan, y)
    return np.clip(y, *DOMAIN_S)  # clip keeps NaN; only absorbs the tolerance above


def as_posteriors(posteriors, n: int | None = None) -> np.ndarray:
    """(n, 6) nonnegative rows summing to 1 (to 1e-6; renormalised exactly)."""
    q = np.array(posteriors, dtype=float, ndmin=2)
    if q.ndim != 2 or q.shape[1] != N_INTENTS or (n is not None and q.shape[0] != n):
        raise ValueError(
            f"posteriors must have shape ({n if n is not None else 'n'}, {N_INTENTS}), got {q.shape}"
        )
    s = q.sum(axis=1)
    if np.any(q < 0) or np.any(np.abs(s - 1.0) > 1e-6):
        raise ValueError("posterior rows must be nonnegative and sum to 1")
    return q / s[:, None]


def intent_modes(posteriors) -> np.ndarray:
    """Index of each episode's posterior mode (ties go to the earlier intent in `INTENTS`)."""
    return np.argmax(as_posteriors(posteriors), axis=1)


def prior_array(prior=None) -> np.ndarray:
    """A prior over `INTENTS` (dict or array; default the paper's label shares), normalised."""
    if prior is None:
        prior = PAPER_INTENT_PRIOR
    p = np.array([prior[z] for z in INTENTS] if isinstance(prior, Mapping) else prior, dtype=float)
    if p.shape != (N_INTENTS,) or np.any(p < 0) or p.sum() <= 0:
        raise ValueError(f"prior must be {N_INTENTS} nonnegative weights over {INTENTS}")
    return p / p.sum()


def _prior_over(groups: np.ndarray, n_groups: int, prior) -> np.ndarray:
    """pi over groups: given (dict or array) restricted to groups present, else group frequencies."""
    freq = np.bincount(groups, minlength=n_groups).astype(float)
    if prior is None:
        return freq / freq.sum()
    p = np.where(freq > 0, prior_array(prior), 0.0)
    if p.sum() <= 0:
        raise ValueError("the prior gives no mass to any intent present")
    return p / p.sum()


# ---------------------------------------------------------------------------------------------
# Timing


def reference_twcrps(
    onsets_s, posteriors, table: LawTable | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """(twCRPS_{w_q}(P_q, y_e), W_q) per episode, from the precomputed `LawTable`.

    Expanding the square: integral of w_q P_q^2 over T (a cubic form in q) plus, for a finite y,
    the integral from y to T_h of w_q (1 - 2 P_q) (tail integrals read at y).
    """
    tab = table or law_table()
    y = as_onsets(onsets_s)
    q = as_posteriors(posteriors, y.size)
    qq = (q[:, :, None] * q[:, None, :]).reshape(-1, N_INTENTS * N_INTENTS)
    crps = np.einsum("na,nb,ab->n", q, qq, tab.cubic.reshape(N_INTENTS, -1))
    fin = ~np.isnan(y)
    tails = tab.tail_at(y[fin])  # (42, m)
    w_tail = np.einsum("nz,zn->n", q[fin], tails[:N_INTENTS])
    wh_tail = np.einsum("nk,kn->n", qq[fin], tails[N_INTENTS:])
    crps[fin] += w_tail - 2.0 * wh_tail
    return crps, q @ tab.total_weight


def score_onsets(onsets_s, posteriors, table: LawTable | None = None) -> np.ndarray:
    """Public API: per-episode timing scores s_T in [0, 1].

    `onsets_s`: (n,) first-response onsets in seconds relative to the decision point, NaN for
    no response within T_h = 5 s (later onsets count as none; earlier than -T_a = -2 s is an
    error). `posteriors`: (n, 6) intent posteriors q(z | e) over `INTENTS`.
    """
    crps, w = reference_twcrps(onsets_s, posteriors, table)
    return np.clip(1.0 - crps / w, 0.0, 1.0)  # clip only absorbs rounding at the bounds


def twcrps_on_grid(cdf, onsets_s, weight, grid_s) -> np.ndarray:
    """twCRPS of an arbitrary sub-probability CDF given on `grid_s` (covering T), for each onset.

    Trapezoid rule on the grid, with the step's cell split exactly at y; O(h^2) accurate.
    `cdf` and `weight` are (G,) arrays on `grid_s`.
    """
    grid = np.asarray(grid_s, dtype=float)
    P, w = np.asarray(cdf, dtype=float), np.asarray(weight, dtype=float)
    y = as_onsets(onsets_s)
    full = np.trapezoid(w * P * P, grid)
    g = w * (1.0 - 2.0 * P)  # integrand above y
    cell = np.diff(grid) * (g[:-1] + g[1:]) / 2
    tail = np.concatenate([np.cumsum(cell[::-1])[::-1], [0.0]])
    out = np.full(y.shape, full)
    fin = ~np.isnan(y)
    i = np.clip(np.searchsorted(grid, y[fin], side="right") - 1, 0, grid.size - 2)
    frac = (y[fin] - grid[i]) / (grid[i + 1] - grid[i])
    g_y = g[i] + frac * (g[i + 1] - g[i])
    out[fin] += tail[i + 1] + (grid[i + 1] - y[fin]) * (g_y + g[i + 1]) / 2
    return out


def timing_divergence(cdf, intent: str | int, table: LawTable | None = None) -> float:
    """d_z(P || h_z) = integral of w_z (P - H_z)^2 over T for a CDF P on `table.grid_s`."""
    tab = table or law_table()
    z = intent_index(intent) if isinstance(intent, str) else int(intent)
    diff = np.asarray(cdf, dtype=float) - tab.cdf[z]
    return float(np.trapezoid(tab.weight[z] * diff * diff, tab.grid_s))


def timing_score_of_laws(cdfs, prior=None, table: LawTable | None = None) -> float:
    """S_T = 1 - sum_z pi(z) d_z(P_z || h_z) / W_z for predictive CDFs (6, G) on `table.grid_s`.

    `prior`: dict or array over `INTENTS`; default the paper's empirical intent distribution.
    """
    tab = table or law_table()
    p = prior_array(prior)
    d = np.array([timing_divergence(np.asarray(cdfs)[z], z, tab) for z in range(N_INTENTS)])
    return float(1.0 - np.sum(p * d / tab.total_weight))


def empirical_timing_divergence(
    onsets_s, intent: str | int, table: LawTable | None = None
) -> float:
    """d_z between the empirical law of `onsets_s` (NaN = no response) and h_z, in closed form.

    With P the empirical sub-CDF of n outcomes, integral w P^2 = n^-2 sum_{e,e'} B(max(y_e, y_e'))
    and integral w P H = n^-1 sum_e A(y_e), where B(y) and A(y) are the tail integrals of w_z and
    w_z H_z from y (zero for no response); the double sum is sum_i B(y_(i)) (2i - 1) over sorted y.
    """
    tab = table or law_table()
    z = intent_index(intent) if isinstance(intent, str) else int(intent)
    y = as_onsets(onsets_s)
    n = y.size
    fin = np.sort(y[~np.isnan(y)])
    tails = tab.tail_at(fin)
    A = tails[N_INTENTS + N_INTENTS * z + z]
    B = tails[z]
    rank = np.arange(1, fin.size + 1)
    return float(tab.cubic[z, z, z] - 2.0 * A.sum() / n + np.sum(B * (2 * rank - 1)) / n**2)


def population_timing_score(
    onsets_s, posteriors, prior=None, table: LawTable | None = None
) -> float:
    """S_T of a system from its onsets, grouping episodes by posterior mode (Sec. IV).

    P_z is the empirical law of the onsets on episodes whose mode is z. `prior` defaults to the
    share of episodes per mode; a given prior is restricted to the intents present. The plug-in
    divergence carries a finite-sample bias R_z / n_z, so even h_z's own draws score just below 1.
    """
    tab = table or law_table()
    y = as_onsets(onsets_s)
    modes = intent_modes(as_posteriors(posteriors, y.size))
    pi = _prior_over(modes, N_INTENTS, prior)
    total = 0.0
    for z in np.flatnonzero(pi > 0):
        total += pi[z] * empirical_timing_divergence(y[modes == z], z, tab) / tab.total_weight[z]
    return float(1.0 - total)


def single_draw_ceiling(prior=None, table: LawTable | None = None) -> float:
    """Expected s_T of a forecaster that *is* h_z, judged on one draw per episode: 1 - sum pi R_z/W_z.

    This is the paper's irreducible single-draw term R_z / W_z (the human topline sits below it).
    """
    tab = table or law_table()
    return float(1.0 - np.sum(prior_array(prior) * tab.single_draw / tab.total_weight))


# ---------------------------------------------------------------------------------------------
# Length


def _sum_max(x_sorted: np.ndarray, y_sorted: np.ndarray) -> float:
    """sum over all pairs (i, j) of max(x_i, y_j), for sorted arrays, in O((n + m) log m)."""
    cy = np.concatenate([[0.0], np.cumsum(y_sorted)])
    k = np.searchsorted(y_sorted, x_sorted, side="right")  # y_j <= x_i
    return float(np.sum(x_sorted * k) + np.sum(cy[-1] - cy[k]))


@dataclass(frozen=True, eq=False)
class DurationReference:
    """Human response durations per (context bucket, intent): the empirical laws g of Sec. IV.

    All integrals are exact for the empirical (step) CDFs on the support [0, D]: for sorted
    samples, integral of G_x G_y = D - mean over pairs of max(x_i, y_j), and the integral of G
    from d to D is D - mean_j max(d, y_j).
    """

    buckets: tuple[str, ...]
    samples: tuple[tuple[np.ndarray, ...], ...]  # [bucket][intent], sorted, clipped to [0, D]
    support_s: float  # D
    gram: np.ndarray  # (n_buckets, 6, 6): integral over [0, D] of G_z G_z'

    @classmethod
    def from_samples(
        cls, samples: Mapping, max_duration_s: float | None = None
    ) -> DurationReference:
        """Human durations keyed by (intent, bucket) or by intent alone (bucket "").

        The support is [0, D] with D the largest human duration unless `max_duration_s` is given
        (longer durations, human or system, then count as D). A missing (intent, bucket) cell
        falls back to that intent pooled over buckets, then to all durations pooled.
        """
        cells: dict[tuple[str, str], np.ndarray] = {}
        for key, vals in samples.items():
            z, b = (key, "") if isinstance(key, str) else key
            intent_index(z)
            v = np.asarray(vals, dtype=float).ravel()
            if v.size == 0 or np.any(~np.isfinite(v)) or np.any(v < 0):
                raise ValueError(
                    f"durations for {key!r} must be a nonempty set of finite values >= 0"
                )
            cells[(z, b)] = np.concatenate([cells.get((z, b), np.empty(0)), v])
        if not cells:
            raise ValueError("no human durations given")
        pooled = np.concatenate(list(cells.values()))
        top = float(pooled.max()) if max_duration_s is None else float(max_duration_s)
        if not top > 0:
            raise ValueError("the duration support must have positive length")
        buckets = tuple(sorted({b for _, b in cells}))
        table = []
        for b in buckets:
            row = []
            for z in INTENTS:
                v = cells.get((z, b))
                if v is None:
                    by_intent = [vals for (zz, _), vals in cells.items() if zz == z]
                    v = np.concatenate(by_intent) if by_intent else pooled
                row.append(np.sort(np.clip(v, 0.0, top)))
            table.append(tuple(row))
        gram = np.array(
            [
                [[top - _sum_max(x, y) / (x.size * y.size) for y in row] for x in row]
                for row in table
            ]
        )
        return cls(buckets, tuple(table), top, gram)

    def bucket_indices(self, buckets: Sequence[str]) -> np.ndarray:
        index = {b: i for i, b in enumerate(self.buckets)}
        missing = sorted({b for b in buckets if b not in index})
        if missing:
            raise ValueError(
                f"no human duration law for context bucket(s) {missing}; known: {self.buckets}"
            )
        return np.array([index[b] for b in buckets], dtype=np.intp)

    def tail_at(self, bucket_idx: np.ndarray, durations_s: np.ndarray) -> np.ndarray:
        """(n, 6): integral from d to D of each G_z of the episode's bucket (d clipped to [0, D])."""
        d = np.clip(np.asarray(durations_s, dtype=float), 0.0, self.support_s)
        out = np.empty((d.size, N_INTENTS))
        for b in np.unique(bucket_idx):
            m = bucket_idx == b
            for z, y in enumerate(self.samples[b]):
                cy = np.concatenate([[0.0], np.cumsum(y)])
                k = np.searchsorted(y, d[m], side="right")  # samples <= d
                out[m, z] = self.support_s - (d[m] * k + cy[-1] - cy[k]) / y.size
        return out


def length_scores(
    durations_s, posteriors, buckets: Sequence[str], reference: DurationReference
) -> np.ndarray:
    """Per-episode s_L(e) = 1 - CRPS(sum_z q_z G_z, d_e) / D; NaN where there is no response."""
    d = np.array(durations_s, dtype=float, ndmin=1)
    q = as_posteriors(posteriors, d.size)
    out = np.full(d.size, np.nan)
    ok = np.isfinite(d)
    if np.any(d[ok] < 0):
        raise ValueError("durations must be >= 0")
    if not ok.any():
        return out
    bi = reference.bucket_indices([buckets[i] for i in np.flatnonzero(ok)])
    dd = np.clip(d[ok], 0.0, reference.support_s)
    qo = q[ok]
    full = np.einsum("ni,nij,nj->n", qo, reference.gram[bi], qo)
    tail = np.einsum("nz,nz->n", qo, reference.tail_at(bi, dd))
    crps = full - 2.0 * tail + (reference.support_s - dd)
    out[ok] = np.clip(1.0 - crps / reference.support_s, 0.0, 1.0)
    return out


def length_divergence(
    durations_s, intent: str | int, bucket: str, reference: DurationReference
) -> float:
    """d^L = integral over [0, D] of (Q - G)^2 for the empirical law Q of `durations_s`."""
    z = intent_index(intent) if isinstance(intent, str) else int(intent)
    b = int(reference.bucket_indices([bucket])[0])
    x = np.sort(np.clip(np.asarray(durations_s, dtype=float), 0.0, reference.support_s))
    if x.size == 0:
        raise ValueError("no durations")
    top = reference.support_s
    qq = top - _sum_max(x, x) / x.size**2
    qg = reference.tail_at(np.full(x.size, b), x)[:, z].mean()
    return float(qq - 2.0 * qg + reference.gram[b, z, z])


def population_length_score(
    durations_s, posteriors, buckets: Sequence[str], reference: DurationReference, prior=None
) -> float:
    """S_L = 1 - sum_cells pi d^L(Q || G) / D over (mode intent, bucket) cells of responsive episodes.

    Q is the empirical law of the system's durations in the cell; pi the cell's share of the
    responsive episodes (with a given intent prior: prior(z) times the bucket share within z).
    NaN when no episode has a response.
    """
    d = np.array(durations_s, dtype=float, ndmin=1)
    q = as_posteriors(posteriors, d.size)
    ok = np.isfinite(d)
    if not ok.any():
        return math.nan
    modes = np.argmax(q[ok], axis=1)
    cell_buckets = np.array([buckets[i] for i in np.flatnonzero(ok)], dtype=object)
    pi_z = _prior_over(modes, N_INTENTS, prior)
    total = 0.0
    for z in np.flatnonzero(pi_z > 0):
        in_z = modes == z
        for b in sorted(set(cell_buckets[in_z])):
            m = in_z & (cell_buckets == b)
            total += pi_z[z] * (m.sum() / in_z.sum()) * length_divergence(d[ok][m], z, b, reference)
    return float(1.0 - total / reference.support_s)


# ---------------------------------------------------------------------------------------------
# Overlap


def overlap_penalty_s(overlaps: Sequence[OverlapEvent]) -> float:
    """sum over competitive overlaps of (1 - psi_o) d_o; backchannels are exempt."""
    return float(sum((1.0 - o.psi) * o.duration_s for o in overlaps if not o.backchannel))


def overlap_score(penalty_s, scale_s: float = OVERLAP_SCALE_S):
    """s_O = 1 - min(1, penalty / scale): 1 without competitive overlap, 0 at `scale_s` or more."""
    return 1.0 - np.minimum(1.0, np.asarray(penalty_s, dtype=float) / scale_s)
