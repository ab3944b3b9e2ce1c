"""TACT human reference laws h_z, their importance weights w_z, and a precomputed grid table.

For each intent z the reference law of the first response onset y on T = [-T_a, T_h] is

    h_z = (1 - beta_z) f_z + beta_z * delta_none                     (paper, Sec. IV)

where f_z is a continuous onset density on T and beta_z the no-response mass. Parameters are the
paper's (Sec. IV); `docs/tact.md` lists what the paper leaves open and the choices made here:

* every family is parameterised as printed (untruncated) and f_z is its restriction to T,
  renormalised, so the no-response mass is exactly beta_z (mass past T_h is not moved to the
  atom);
* ex-Gaussian (mu, sigma, tau): Normal(mu, sigma) plus an Exponential with mean tau. This is the
  parameterisation under which the bck law has its mode at -0.19 s and 72% of its onset mass
  before 0, as the paper states;
* shifted log-normal: y = -T_a + LogNormal(m, s); its median -T_a + exp(m) is the printed
  median. The spread of ref is set so that 12% of ref episodes see a human onset within 1 s
  (the only figure in the paper's results that pins it); rhe and hold use the wider s = 0.5;
* weight: w_z(t) = eps + (1 - eps) * (f_z(t) / max f_z) ** gamma with gamma = 0.7, eps = 0.02.

Times are seconds; a sub-probability CDF P(t) = Pr(y <= t) has the no-response mass as its
defect 1 - P(T_h).

The printed laws are the default everywhere. A `LawSet` is six laws plus the judge weight
lambda, named and content-hashed: `paper_laws()`, or one read from a law file (`lawfile`;
`fit_laws` writes them from a corpus). `law_table()` without `laws` builds the table of the
active set, which is the paper's unless a `use_laws(...)` block is open; `reference_law`,
`reference_laws` and `reference_cdf` always give the printed laws.
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import hashlib
import json
import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
from scipy import optimize, stats
from scipy.special import ndtr

INTENTS: tuple[str, ...] = ("ans", "ref", "rhe", "hold", "bck", "abn")
N_INTENTS = len(INTENTS)
T_A_S = 2.0  # pre-horizon: onsets down to -T_a are observable (anticipatory overlap)
T_H_S = 5.0  # evaluation horizon
DOMAIN_S = (-T_A_S, T_H_S)

GAMMA = 0.7  # weight exponent (Sec. IV)
EPS = 0.02  # weight floor (Sec. IV)

# Sec. IV, in the paper's order ans, ref, rhe, hold, bck, abn: mean annotator silence acceptability.
NO_RESPONSE_MASS: dict[str, float] = {
    "ans": 0.05,
    "ref": 0.40,
    "rhe": 0.85,
    "hold": 0.90,
    "bck": 0.45,
    "abn": 0.50,
}
# Sec. IV: ex-Gaussian (mu, sigma, tau) in seconds for the responsive intents.
EXGAUSS_PARAMS_S: dict[str, tuple[float, float, float]] = {
    "ans": (0.16, 0.11, 0.24),
    "bck": (-0.32, 0.18, 0.20),
    "abn": (1.95, 0.50, 0.80),
}
# Sec. IV: medians of the shifted log-normals.
LOGNORMAL_MEDIAN_S: dict[str, float] = {"ref": 1.9, "rhe": 2.6, "hold": 3.0}
LOGNORMAL_SHIFT_S = -T_A_S  # support starts where observation starts (choice, see docstring)
HEAVY_TAIL_SIGMA = 0.5  # log-scale spread of rhe and hold (choice; wider than ref's)
# Results text: humans answer within 1 s in 12% of ref episodes -> fixes ref's log-scale spread.
REF_WITHIN_1S_FRACTION = 0.12

# Data section: empirical intent distribution of the annotations (an option for the prior pi).
PAPER_INTENT_PRIOR: dict[str, float] = {
    "ans": 0.316,
    "ref": 0.161,
    "rhe": 0.092,
    "hold": 0.182,
    "bck": 0.153,
    "abn": 0.096,
}

Family = Literal["exgauss", "shifted_lognormal"]


def intent_index(intent: str) -> int:
    try:
        return INTENTS.index(intent)
    except ValueError:
        raise ValueError(f"unknown intent {intent!r}; valid: {INTENTS}") from None


@dataclass(frozen=True)
class ReferenceLaw:
    """The reference onset law of one intent: a truncated continuous part plus a no-response atom.

    `params` are the untruncated family's parameters: (mu, sigma, tau) for "exgauss",
    (shift, log_median, log_sigma) for "shifted_lognormal" (median = shift + exp(log_median)).
    """

    intent: str
    family: Family
    params: tuple[float, float, float]
    no_response_mass: float

    @property
    def base(self):
        """The untruncated scipy distribution."""
        return _base_dist(self.family, self.params)

    @functools.cached_property
    def _mass_in_domain(self) -> float:
        lo, hi = DOMAIN_S
        return float(self.base.cdf(hi) - self.base.cdf(lo))

    def pdf(self, t_s) -> np.ndarray:
        """Density f_z of the onset given a response, restricted to T and renormalised."""
        t = np.asarray(t_s, dtype=float)
        inside = (t >= DOMAIN_S[0]) & (t <= DOMAIN_S[1])
        return np.where(inside, self.base.pdf(t) / self._mass_in_domain, 0.0)

    def onset_cdf(self, t_s) -> np.ndarray:
        """CDF of f_z on T (0 below -T_a, 1 from T_h on)."""
        t = np.clip(np.asarray(t_s, dtype=float), *DOMAIN_S)
        return (self.base.cdf(t) - self.base.cdf(DOMAIN_S[0])) / self._mass_in_domain

    def cdf(self, t_s) -> np.ndarray:
        """Sub-probability CDF H_z(t) = Pr(y <= t) of h_z; its defect at T_h is beta_z."""
        return (1.0 - self.no_response_mass) * self.onset_cdf(t_s)

    @functools.cached_property
    def mode_s(self) -> float:
        """Where f_z peaks (inside T for all six intents)."""
        if self.family == "shifted_lognormal":
            shift, m, s = self.params
            return shift + math.exp(m - s * s)
        mu, sigma, tau = self.params
        res = optimize.minimize_scalar(
            lambda t: -self.base.logpdf(t),
            bounds=(mu - 3 * sigma, mu + 3 * sigma + tau),
            method="bounded",
            options={"xatol": 1e-12},
        )
        return float(res.x)

    @functools.cached_property
    def peak_density(self) -> float:
        """max of f_z on T: at the mode (inside T for the paper's laws; a fitted law whose mode
        falls outside T peaks at the nearer end, the density being unimodal)."""
        return float(self.pdf(min(max(self.mode_s, DOMAIN_S[0]), DOMAIN_S[1])))

    def weight(self, t_s) -> np.ndarray:
        """w_z(t) = eps + (1 - eps) (f_z(t) / max f_z)^gamma: in [eps, 1], 1 at the mode.

        The paper gives gamma, eps and the properties but not the formula. This one is positive
        on T (strict propriety), equals 1 exactly at the kernel's mode, and is a strictly
        increasing function of f_z, so every ordering of the kernel (its asymmetry) carries over
        to w_z; only far tails, where f_z^gamma is negligible, flatten onto the floor eps.
        """
        shape = np.power(self.pdf(t_s) / self.peak_density, GAMMA)
        return EPS + (1.0 - EPS) * shape

    def sample(self, rng: np.random.Generator, n: int) -> np.ndarray:
        """n draws from h_z: onsets in T, NaN for the no-response atom."""
        if self.family == "exgauss":  # Normal + Exponential, redrawn until inside T (ppf is slow)
            mu, sigma, tau = self.params
            y = np.empty(0)
            while y.size < n:
                d = rng.normal(mu, sigma, 2 * n) + rng.exponential(tau, 2 * n)
                y = np.concatenate([y, d[(d >= DOMAIN_S[0]) & (d <= DOMAIN_S[1])]])
            y = y[:n]
        else:  # inverse CDF, closed form for the log-normal
            lo, hi = self.base.cdf(DOMAIN_S[0]), self.base.cdf(DOMAIN_S[1])
            y = np.clip(self.base.ppf(lo + (hi - lo) * rng.random(n)), *DOMAIN_S)
        return np.where(rng.random(n) < self.no_response_mass, np.nan, y)


@functools.cache
def _base_dist(family: str, params: tuple[float, float, float]):
    if family == "exgauss":
        mu, sigma, tau = params
        return stats.exponnorm(tau / sigma, loc=mu, scale=sigma)
    shift, m, s = params
    return stats.lognorm(s, loc=shift, scale=math.exp(m))


@functools.cache
def ref_log_sigma() -> float:
    """Spread of the ref log-normal such that (1 - beta_ref) * F_ref(1 s) = 12% (paper, results text)."""
    m = math.log(LOGNORMAL_MEDIAN_S["ref"] - LOGNORMAL_SHIFT_S)
    target = REF_WITHIN_1S_FRACTION / (1.0 - NO_RESPONSE_MASS["ref"])
    z = lambda t, s: (math.log(t - LOGNORMAL_SHIFT_S) - m) / s
    frac = lambda s: ndtr(z(1.0, s)) / ndtr(z(T_H_S, s)) - target
    return float(optimize.brentq(frac, 0.05, 3.0, xtol=1e-14))


@functools.cache
def reference_laws() -> tuple[ReferenceLaw, ...]:
    """The six reference laws in `INTENTS` order."""
    laws = []
    for z in INTENTS:
        beta = NO_RESPONSE_MASS[z]
        if z in EXGAUSS_PARAMS_S:
            laws.append(ReferenceLaw(z, "exgauss", EXGAUSS_PARAMS_S[z], beta))
        else:
            s = ref_log_sigma() if z == "ref" else HEAVY_TAIL_SIGMA
            m = math.log(LOGNORMAL_MEDIAN_S[z] - LOGNORMAL_SHIFT_S)
            laws.append(ReferenceLaw(z, "shifted_lognormal", (LOGNORMAL_SHIFT_S, m, s), beta))
    return tuple(laws)


def reference_law(intent: str) -> ReferenceLaw:
    return reference_laws()[intent_index(intent)]


# ---------------------------------------------------------------------------------------------
# Law sets: the paper's printed laws, or a set fitted to a corpus (`lawfile`, `fit_laws`).

PAPER_JUDGE_WEIGHT = 0.3  # lambda of the posterior fusion (Sec. IV)


@dataclass(frozen=True)
class LawSet:
    """The six reference laws (in `INTENTS` order) and the judge weight lambda scoring uses.

    `name` says where they come from ("paper", or a law file's path) and `sha256` identifies the
    content: for a law file the hash of its bytes, for the paper's laws the hash of their
    canonical law-file rendering (`lawfile.paper_law_file_bytes`). Two sets with the same laws
    share one `law_table`.
    """

    laws: tuple[ReferenceLaw, ...]
    judge_weight: float
    name: str
    sha256: str

    def __post_init__(self):
        if tuple(law.intent for law in self.laws) != INTENTS:
            raise ValueError(f"a law set needs one law per intent in the order {INTENTS}")

    def law(self, intent: str) -> ReferenceLaw:
        return self.laws[intent_index(intent)]

    @property
    def label(self) -> str:
        """How tables name the laws: "paper", or "<file name>@<first 12 hex of its sha256>"."""
        if self.name == "paper":
            return "paper"
        return f"{self.name.rsplit('/', 1)[-1]}@{self.sha256[:12]}"


LAW_FILE_FORMAT = "tact-laws"
LAW_FILE_VERSION = 1
PAPER_PROVENANCE = {
    "source": "TACT paper, Sec. IV: the printed laws, with the choices docs/tact.md lists "
    "(shift -T_a, ref's spread from its 12% within 1 s, rhe/hold spread 0.5)"
}


def law_params(law: ReferenceLaw) -> dict[str, Any]:
    """One law as a law file writes it: family, named parameters, no-response mass (`lawfile`)."""
    if law.family == "exgauss":
        mu, sigma, tau = law.params
        named = {"mu_s": mu, "sigma_s": sigma, "tau_s": tau}
    else:
        shift, m, s = law.params
        named = {"shift_s": shift, "median_s": _lognormal_median(shift, m), "log_sigma": s}
    return {
        "family": law.family,
        **{k: float(v) for k, v in named.items()},
        "no_response_mass": float(law.no_response_mass),
    }


def _lognormal_median(shift: float, m: float) -> float:
    """shift + exp(m), as the shortest decimal that reads back to exactly m (a reader takes
    m = log(median - shift)); the paper's medians come out as printed (1.9, 2.6, 3.0)."""
    median = shift + math.exp(m)
    for cand in [float(f"{median:.{d}g}") for d in range(1, 18)] + [
        math.nextafter(median, -math.inf),
        math.nextafter(median, math.inf),
    ]:
        if cand > shift and math.log(cand - shift) == m:
            return cand
    return median  # m then reads back to within an ulp


def law_file_dict(
    laws: Sequence[ReferenceLaw], judge_weight: float, provenance: dict[str, Any] | None = None
) -> dict[str, Any]:
    """The content of a law file (format in `lawfile`'s docstring)."""
    d: dict[str, Any] = {
        "format": LAW_FILE_FORMAT,
        "format_version": LAW_FILE_VERSION,
        "domain_s": [float(DOMAIN_S[0]), float(DOMAIN_S[1])],
        "judge_weight": float(judge_weight),
        "laws": {law.intent: law_params(law) for law in laws},
    }
    if provenance is not None:
        d["provenance"] = provenance
    return d


def law_file_bytes(d: dict[str, Any]) -> bytes:
    """The canonical text of a law file (floats written so that they read back exactly)."""
    return (json.dumps(d, indent=2, allow_nan=False) + "\n").encode("utf-8")


def paper_law_file_bytes() -> bytes:
    """The paper's laws rendered as a law file; their hash is the paper set's `sha256`."""
    return law_file_bytes(law_file_dict(reference_laws(), PAPER_JUDGE_WEIGHT, PAPER_PROVENANCE))


@functools.cache
def paper_laws() -> LawSet:
    """The paper's printed laws as a `LawSet` (what scoring uses unless told otherwise)."""
    return LawSet(
        reference_laws(),
        PAPER_JUDGE_WEIGHT,
        "paper",
        hashlib.sha256(paper_law_file_bytes()).hexdigest(),
    )


_ACTIVE: contextvars.ContextVar[LawSet | None] = contextvars.ContextVar(
    "tact_active_laws", default=None
)


def active_laws() -> LawSet:
    """The law set that scoring functions use when they are given no `table`: the paper's,
    unless a `use_laws` block says otherwise."""
    return _ACTIVE.get() or paper_laws()


@contextlib.contextmanager
def use_laws(law_set: LawSet | None) -> Iterator[LawSet]:
    """Within the block, scoring without an explicit `table` uses `law_set` (None: the paper's).

    This is how the benchmark's score step applies `benchmark.laws` to code that builds its
    tables from the default (`law_table()`); passing `table=law_table(laws=...)` works as well.
    """
    token = _ACTIVE.set(law_set)
    try:
        yield active_laws()
    finally:
        _ACTIVE.reset(token)


@dataclass(frozen=True, eq=False)
class ReferenceCDF:
    """A reference law evaluated on a grid: sub-probability CDF values and the no-response mass."""

    intent: str
    grid_s: np.ndarray
    cdf: np.ndarray
    no_response_mass: float


def reference_cdf(intent: str, grid_s) -> ReferenceCDF:
    """Public API: h_z's CDF Pr(y <= t) on `grid_s` (any times; clamped to T) and its atom mass."""
    law = reference_law(intent)
    grid = np.asarray(grid_s, dtype=float)
    return ReferenceCDF(intent, grid, law.cdf(grid), law.no_response_mass)


# ---------------------------------------------------------------------------------------------
# Precomputed table: everything the per-episode score needs, on one fixed grid.

# 4-point Gauss-Legendre nodes/weights on [0, 1]; exact for degree-7 polynomials per cell.
_GL_X, _GL_W = np.polynomial.legendre.leggauss(4)
_GL_X = (_GL_X + 1.0) / 2.0
_GL_W = _GL_W / 2.0


def _tail_integrals(values_at_gl: np.ndarray, h: float) -> np.ndarray:
    """C(t_i) = integral from t_i to T_h, given integrand values at the GL nodes of every cell."""
    per_cell = h * (values_at_gl @ _GL_W)  # (..., n_cells)
    tail = np.zeros(per_cell.shape[:-1] + (per_cell.shape[-1] + 1,))
    tail[..., :-1] = np.cumsum(per_cell[..., ::-1], axis=-1)[..., ::-1]
    return tail


@dataclass(frozen=True, eq=False)
class LawTable:
    """Reference CDFs, weights and their integrals on a fixed grid over T.

    Integrals are exact up to 4-point Gauss-Legendre error per cell (far below 1e-9 at the default
    1 ms step); between nodes, tail integrals are read by cubic Hermite interpolation using the
    integrand at the nodes as derivative, so a point y anywhere in T costs O(1).

    `tail[k, i]` is the integral from grid_s[i] to T_h of `integrand[k]`, with k running over
    w_z (6 rows, index z) and then w_z * H_z' (36 rows, index 6 + 6 z + z').
    """

    grid_s: np.ndarray  # (G,)
    cdf: np.ndarray  # (6, G) H_z
    weight: np.ndarray  # (6, G) w_z
    total_weight: np.ndarray  # (6,) W_z = integral of w_z over T
    single_draw: np.ndarray  # (6,) R_z = integral of w_z H_z (1 - H_z)
    cubic: np.ndarray  # (6, 6, 6) integral of w_z H_z' H_z''
    tail: np.ndarray  # (42, G)
    integrand: np.ndarray  # (42, G)

    @property
    def step_s(self) -> float:
        return float(self.grid_s[1] - self.grid_s[0])

    def tail_at(self, y_s: np.ndarray) -> np.ndarray:
        """(42, n) tail integrals from each finite y in T to T_h (Hermite interpolation)."""
        y = np.asarray(y_s, dtype=float)
        h = self.step_s
        pos = (y - self.grid_s[0]) / h
        i = np.clip(np.floor(pos).astype(np.intp), 0, self.grid_s.size - 2)
        s = pos - i
        s2, s3 = s * s, s * s * s
        h00, h10 = 2 * s3 - 3 * s2 + 1, s3 - 2 * s2 + s
        h01, h11 = -2 * s3 + 3 * s2, s3 - s2
        # d/dt of a tail integral is minus the integrand.
        return (
            h00 * self.tail[:, i]
            - h10 * h * self.integrand[:, i]
            + h01 * self.tail[:, i + 1]
            - h11 * h * self.integrand[:, i + 1]
        )


def law_table(
    step_s: float = 1e-3, laws: LawSet | Sequence[ReferenceLaw] | None = None
) -> LawTable:
    """The (cached) table of a law set on a grid of `step_s` over T.

    `laws`: a `LawSet` or six `ReferenceLaw`s in `INTENTS` order; None is `active_laws()`, which
    is the paper's printed laws unless a `use_laws` block is open.
    """
    if laws is None:
        laws = active_laws()
    members = tuple(laws.laws if isinstance(laws, LawSet) else laws)
    if tuple(law.intent for law in members) != INTENTS:
        raise ValueError(f"law_table needs one law per intent in the order {INTENTS}")
    return _law_table(float(step_s), members)


@functools.cache
def _law_table(step_s: float, laws: tuple[ReferenceLaw, ...]) -> LawTable:
    lo, hi = DOMAIN_S
    n_cells = round((hi - lo) / step_s)
    grid = np.linspace(lo, hi, n_cells + 1)
    h = (hi - lo) / n_cells
    gl_t = grid[:-1, None] + h * _GL_X[None, :]  # (n_cells, 4)

    def evaluate(t):
        H = np.stack([law.cdf(t) for law in laws])
        w = np.stack([law.weight(t) for law in laws])
        wH = (w[:, None] * H[None, :]).reshape((N_INTENTS * N_INTENTS,) + np.shape(t))
        return H, w, np.concatenate([w, wH])

    H_gl, w_gl, f_gl = evaluate(gl_t)
    H, w, f = evaluate(grid)
    tail = _tail_integrals(f_gl, h)
    cell = lambda v: h * (v @ _GL_W)
    cubic = cell(np.einsum("agk,bgk,cgk->abcgk", w_gl, H_gl, H_gl)).sum(-1)
    diag = np.arange(N_INTENTS)
    total = tail[:N_INTENTS, 0]
    wH_full = tail[N_INTENTS:, 0].reshape(N_INTENTS, N_INTENTS)[diag, diag]
    single = wH_full - cubic[diag, diag, diag]
    arrays = [grid, H, w, total, single, cubic, tail, f]
    for a in arrays:
        a.setflags(write=False)
    return LawTable(*arrays)


def _clear_law_caches() -> None:
    _law_table.cache_clear()
    paper_laws.cache_clear()


law_table.cache_clear = _clear_law_caches  # type: ignore[attr-defined]  # the speed benchmark's cold run
