"""Fit TACT's reference laws h_z (and the judge weight lambda) to an annotated corpus; write a law file.

    python -m fdeval.benchmarks.tact.fit_laws DATA_ROOT OUT.json [--split all|dev|test]
        [--posterior annotators|fused] [--beta continuations|acceptability] [--judge-weight X]
        [--min-onsets N]
    python -m fdeval.benchmarks.tact.fit_laws --paper OUT.json     # the paper's laws as a law file

DATA_ROOT is a TACT data folder (`episodes/*.json`, e.g. what the corpus importer wrote). Each
episode brings its human continuation y_e (an onset on T, or no response within the horizon;
episodes whose continuation is unknown are left out) and its intent posterior q_e. The model is
the one the scorer assumes for an episode,

    y_e ~ sum_z q_e(z) h_z,    h_z = (1 - beta_z) f_z + beta_z delta_none,

with f_z in the paper's family for z (ex-Gaussian for ans, bck, abn; log-normal shifted to -T_a
for ref, rhe, hold) restricted to T = [-T_a, T_h] and renormalised. All parameters are fitted
jointly by maximum likelihood with EM over the unknown intent: the E-step gives each episode's
responsibilities r_e(z) proportional to q_e(z) h_z(y_e); the M-step sets beta_z to the
responsibility-weighted share of no-responses and fits f_z by weighted maximum likelihood of the
*truncated* density on the onsets (log f(y) - log of the family's mass on T, analytic
gradients). With one-hot posteriors this is one pass of plain per-intent maximum likelihood.

* An onset at exactly -T_a is speech already running when the window opened: its true onset is
  not inside T, so it counts as a response (for beta) but not as an onset (for f).
* An intent whose onsets carry less weight than `--min-onsets` (default 20) keeps the paper's
  density (its beta is still fitted): a truncated fit to a handful of onsets can run off.
* `--beta acceptability` is the paper's own estimator instead: beta_z is the mean silence
  acceptability that annotators gave when they labelled z (each annotator's rating paired with
  their own label); only f_z is then fitted (EM with beta held).
* lambda (`judge_weight`), the weight of the judge in the posterior fusion q = (1 - lambda) qA +
  lambda softmax(l / T*), is the paper's other fitted scoring constant. It is refitted as the
  paper chose it, by the leave-one-annotator-out log-likelihood (`posterior.fit_judge_weight`),
  with T* from the dev split (all episodes without one), on the episodes that carry judge logits;
  without any it stays the paper's 0.3 and the file says so. `--posterior fused` fits the laws on
  the fused posterior with that lambda; the default fits them on the annotators' label shares.

Nothing here runs a system: the law file is then given to the benchmark (`benchmark.laws=<file>`).
"""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from scipy import optimize
from scipy.special import log_ndtr, logsumexp, ndtr

import fdeval
from fdeval.errors import FdevalError
from fdeval.files import write_text_atomic

from .episodes import load_episodes
from .lawfile import write_law_file
from .laws import (
    DOMAIN_S,
    INTENTS,
    N_INTENTS,
    PAPER_JUDGE_WEIGHT,
    T_A_S,
    ReferenceLaw,
    law_file_dict,
    law_params,
    paper_law_file_bytes,
    reference_laws,
)
from .posterior import (
    empirical_posterior,
    fit_judge_weight,
    fit_temperature,
    fuse_posterior,
    label_counts,
    scaled_judge,
)
from .scoring import as_onsets, as_posteriors

LO, HI = DOMAIN_S
_LOG_2PI = math.log(2.0 * math.pi)
AT_WINDOW_START_TOL_S = (
    1e-6  # an onset this close to -T_a is speech already running at the window start
)
# Search box of the M-step (unconstrained coordinates mu, log sigma, log tau / m, log s).
_EXG_BOUNDS = [(-10.0, 10.0), (math.log(1e-3), math.log(20.0)), (math.log(1e-3), math.log(20.0))]
_LN_BOUNDS = [(-10.0, 10.0), (math.log(1e-3), math.log(10.0))]


# ---------------------------------------------------------------------------------------------
# Truncated families: negative weighted log-likelihood with gradient


def _exgauss_cdf_grad(t: float, mu: float, sigma: float, tau: float) -> tuple[float, np.ndarray]:
    """F(t) of the ex-Gaussian and dF/d(mu, sigma, tau).

    F = Phi(v) - G, v = (t - mu) / sigma, G = exp(A) Phi(u), A = -(t - mu) / tau + sigma^2 / (2 tau^2),
    u = v - sigma / tau; with exp(A) phi(u) = phi(v) the derivatives are
    dF/dmu = -G / tau, dF/dsigma = phi(v) / tau - G sigma / tau^2,
    dF/dtau = -G ((t - mu) / tau^2 - sigma^2 / tau^3) - phi(v) sigma / tau^2.
    """
    v = (t - mu) / sigma
    u = v - sigma / tau
    G = math.exp(-(t - mu) / tau + sigma * sigma / (2 * tau * tau) + float(log_ndtr(u)))
    phi_v = math.exp(-0.5 * v * v - 0.5 * _LOG_2PI)
    F = float(ndtr(v)) - G
    grad = np.array(
        [
            -G / tau,
            phi_v / tau - G * sigma / tau**2,
            -G * ((t - mu) / tau**2 - sigma**2 / tau**3) - phi_v * sigma / tau**2,
        ]
    )
    return F, grad


def _exgauss_nll(theta: np.ndarray, y: np.ndarray, w: np.ndarray) -> tuple[float, np.ndarray]:
    """Mean (over weight) negative log-likelihood of the ex-Gaussian truncated to T,
    theta = (mu, log sigma, log tau)."""
    mu, sigma, tau = theta[0], math.exp(theta[1]), math.exp(theta[2])
    W = w.sum()
    u = (y - mu) / sigma - sigma / tau
    lncdf = log_ndtr(u)
    lam = np.exp(-0.5 * u * u - 0.5 * _LOG_2PI - lncdf)  # phi(u) / Phi(u)
    logf = -math.log(tau) + (mu - y) / tau + sigma * sigma / (2 * tau * tau) + lncdf
    d_mu = 1.0 / tau - lam / sigma
    d_sigma = sigma / tau**2 + lam * (-(y - mu) / sigma**2 - 1.0 / tau)
    d_tau = -1.0 / tau - (mu - y) / tau**2 - sigma**2 / tau**3 + lam * sigma / tau**2
    F_hi, g_hi = _exgauss_cdf_grad(HI, mu, sigma, tau)
    F_lo, g_lo = _exgauss_cdf_grad(LO, mu, sigma, tau)
    Z = F_hi - F_lo
    if not Z > 0:
        return 1e30, np.zeros(3)
    ll = float(w @ logf) - W * math.log(Z)
    grad = np.array([w @ d_mu, w @ d_sigma, w @ d_tau]) - W * (g_hi - g_lo) / Z
    grad *= np.array([1.0, sigma, tau])  # to (mu, log sigma, log tau)
    return -ll / W, -grad / W


def _lognormal_nll(
    theta: np.ndarray, y: np.ndarray, w: np.ndarray, shift: float
) -> tuple[float, np.ndarray]:
    """Same for the log-normal shifted to `shift`, truncated to T; theta = (m, log s)."""
    m, s = theta[0], math.exp(theta[1])
    W = w.sum()
    ell = np.log(y - shift)
    z = (ell - m) / s
    logf = -ell - math.log(s) - 0.5 * _LOG_2PI - 0.5 * z * z
    d_m = z / s
    d_s = -1.0 / s + z * z / s
    b = (math.log(HI - shift) - m) / s
    a = (math.log(LO - shift) - m) / s if LO > shift else -math.inf
    Z = float(ndtr(b) - ndtr(a))
    if not Z > 0:
        return 1e30, np.zeros(2)
    pdf = lambda x: 0.0 if math.isinf(x) else math.exp(-0.5 * x * x - 0.5 * _LOG_2PI)  # noqa: E731
    xpdf = lambda x: 0.0 if math.isinf(x) else x * pdf(x)  # noqa: E731
    dZ = np.array([-(pdf(b) - pdf(a)) / s, -(xpdf(b) - xpdf(a)) / s])
    ll = float(w @ logf) - W * math.log(Z)
    grad = (np.array([w @ d_m, w @ d_s]) - W * dZ / Z) * np.array([1.0, s])
    return -ll / W, -grad / W


def _law_logpdf(law: ReferenceLaw, y: np.ndarray) -> np.ndarray:
    """log f_z(y) of the family truncated to T (what the M-step maximises, per onset)."""
    if law.family == "exgauss":
        mu, sigma, tau = law.params
        u = (y - mu) / sigma - sigma / tau
        logf = -math.log(tau) + (mu - y) / tau + sigma * sigma / (2 * tau * tau) + log_ndtr(u)
        mass = _exgauss_cdf_grad(HI, mu, sigma, tau)[0] - _exgauss_cdf_grad(LO, mu, sigma, tau)[0]
        return logf - math.log(mass)
    shift, m, s = law.params
    ell = np.log(y - shift)
    z = (ell - m) / s
    b = (math.log(HI - shift) - m) / s
    a = (math.log(LO - shift) - m) / s if LO > shift else -math.inf
    return -ell - math.log(s) - 0.5 * _LOG_2PI - 0.5 * z * z - math.log(float(ndtr(b) - ndtr(a)))


def fit_onset_density(
    family: str, onsets_s, weights=None, start: tuple[float, float, float] | None = None
) -> tuple[float, float, float]:
    """Weighted maximum-likelihood parameters of one family truncated to T (untruncated parameters,
    as `ReferenceLaw.params`). `start`: where the search begins (default: a moment guess); the
    shifted log-normal keeps the shift of `start` (-T_a by default)."""
    y = np.asarray(onsets_s, dtype=float)
    w = np.ones_like(y) if weights is None else np.asarray(weights, dtype=float)
    keep = w > 0
    y, w = y[keep], w[keep]
    if y.size == 0:
        raise ValueError("no onsets to fit")
    if np.any((y < LO) | (y > HI)):
        raise ValueError(f"onsets must lie in T = [{LO:g}, {HI:g}]")
    mean = float(w @ y / w.sum())
    sd = max(float(np.sqrt(w @ (y - mean) ** 2 / w.sum())), 1e-2)
    if family == "exgauss":
        mu, sigma, tau = start if start is not None else (mean - 0.5 * sd, 0.7 * sd, 0.7 * sd)
        x0 = np.clip([mu, math.log(sigma), math.log(tau)], *np.array(_EXG_BOUNDS).T)
        res = optimize.minimize(
            _exgauss_nll,
            x0,
            args=(y, w),
            jac=True,
            method="L-BFGS-B",
            bounds=_EXG_BOUNDS,
            options={"ftol": 1e-13, "gtol": 1e-9, "maxiter": 500},
        )
        return float(res.x[0]), math.exp(res.x[1]), math.exp(res.x[2])
    if family != "shifted_lognormal":
        raise ValueError(f"unknown family {family!r}")
    shift = start[0] if start is not None else -T_A_S
    if np.any(y <= shift):
        raise ValueError(f"onsets at or below the shift {shift:g} have no log-normal density")
    if start is not None:
        x0 = np.array([start[1], math.log(start[2])])
    else:
        ell = np.log(y - shift)
        m0 = float(w @ ell / w.sum())
        x0 = np.array([m0, math.log(max(float(np.sqrt(w @ (ell - m0) ** 2 / w.sum())), 1e-2))])
    x0 = np.clip(x0, *np.array(_LN_BOUNDS).T)
    res = optimize.minimize(
        _lognormal_nll,
        x0,
        args=(y, w, shift),
        jac=True,
        method="L-BFGS-B",
        bounds=_LN_BOUNDS,
        options={"ftol": 1e-13, "gtol": 1e-9, "maxiter": 500},
    )
    return float(shift), float(res.x[0]), math.exp(res.x[1])


# ---------------------------------------------------------------------------------------------
# EM over the unknown intent


@dataclass(frozen=True)
class LawFit:
    """Fitted laws (in `INTENTS` order) and how the fit went."""

    laws: tuple[ReferenceLaw, ...]
    log_likelihood: float  # sum over episodes of log sum_z q_z h_z(y_e)
    iterations: int
    converged: bool
    effective_n: tuple[float, ...]  # sum of responsibilities per intent
    effective_onsets: tuple[float, ...]  # the same over episodes with an onset inside T
    n_episodes: int
    n_at_window_start: int  # responses already running at -T_a (count for beta only)
    beta_held: bool = False
    shape_held: tuple[str, ...] = ()  # intents whose density stayed at the start (too few onsets)


def fit_reference_laws(
    onsets_s,
    posteriors,
    *,
    fixed_beta: Sequence[float] | None = None,
    start: Sequence[ReferenceLaw] | None = None,
    min_onsets: float = 0.0,
    tol: float = 1e-10,
    max_iter: int = 2000,
) -> LawFit:
    """Maximum-likelihood laws h_z from episodes' human continuations and intent posteriors.

    `onsets_s`: (n,) onsets relative to the decision point, NaN = no response within T_h (later
    onsets count as none, as in scoring). `posteriors`: (n, 6) q(z | e) over `INTENTS`.
    `fixed_beta`: hold the no-response masses at these values (e.g. the annotators' mean
    silence acceptability) and fit the densities only. `start`: the laws EM starts from and whose
    families it keeps (default the paper's). `min_onsets`: an intent whose onsets carry less
    weight than this under the starting laws' responsibilities keeps its starting density (its
    beta is still fitted): a handful of onsets gives a truncated fit that can run off to
    absurd parameters. EM stops when an iteration raises the log-likelihood by less than `tol`
    per episode.
    """
    y = as_onsets(onsets_s)
    q = as_posteriors(posteriors, y.size)
    n = y.size
    if n == 0:
        raise ValueError("no episodes to fit")
    laws = list(start or reference_laws())
    if fixed_beta is not None:
        fb = np.asarray(fixed_beta, dtype=float)
        if fb.shape != (N_INTENTS,) or np.any(~(fb >= 0) | ~(fb <= 1)):
            raise ValueError(f"fixed_beta needs {N_INTENTS} values in [0, 1]")
        laws = [
            ReferenceLaw(law.intent, law.family, law.params, float(b)) for law, b in zip(laws, fb)
        ]
    none = np.isnan(y)
    at_start = ~none & (y <= LO + AT_WINDOW_START_TOL_S)
    onset = ~none & ~at_start
    y_on = y[onset]
    if any(law.family == "shifted_lognormal" and np.any(y_on <= law.params[0]) for law in laws):
        raise ValueError("an onset lies at or below a log-normal's shift")
    with np.errstate(divide="ignore"):
        log_q = np.log(q)

    def log_h(laws_now) -> np.ndarray:
        beta = np.array([law.no_response_mass for law in laws_now])
        with np.errstate(divide="ignore"):
            lb, l1b = np.log(beta), np.log1p(-beta)
        out = np.empty((n, N_INTENTS))
        out[none] = lb
        out[at_start] = l1b
        if y_on.size:
            out[onset] = l1b + np.stack([_law_logpdf(law, y_on) for law in laws_now], axis=1)
        return out

    prev = -math.inf
    converged = False
    it = 0
    r = q
    ll = -math.inf
    held: set[int] | None = None  # decided on the first E-step, then fixed
    for it in range(1, max_iter + 1):
        lp = log_q + log_h(laws)
        norm = logsumexp(lp, axis=1)
        ll = float(norm.sum())
        if not math.isfinite(ll):
            raise ValueError(
                "an episode has probability 0 under every intent its posterior allows "
                "(a no-mass outcome for a law with beta 0 or 1)"
            )
        r = np.exp(lp - norm[:, None])
        if held is None:
            held = {z for z in range(N_INTENTS) if r[onset, z].sum() < min_onsets}
        if ll - prev < tol * n:
            converged = ll >= prev - 1e-9 * n
            break
        prev = ll
        new = []
        for z, law in enumerate(laws):
            rz = r[:, z]
            total = rz.sum()
            beta = (
                law.no_response_mass
                if fixed_beta is not None or total <= 0
                else float(rz[none].sum() / total)
            )
            params = law.params
            w = rz[onset]
            if z not in held and w.sum() > 1e-9:
                params = fit_onset_density(law.family, y_on, w, start=law.params)
            new.append(ReferenceLaw(law.intent, law.family, params, beta))
        laws = new
    return LawFit(
        tuple(laws),
        ll,
        it,
        converged,
        tuple(float(x) for x in r.sum(axis=0)),
        tuple(float(x) for x in r[onset].sum(axis=0)),
        n,
        int(at_start.sum()),
        fixed_beta is not None,
        tuple(INTENTS[z] for z in sorted(held or ())),
    )


def beta_from_acceptability(
    labels: Sequence[Sequence[str]], acceptability: Sequence[Sequence[float]]
) -> tuple[np.ndarray, np.ndarray]:
    """The paper's beta_z: mean silence acceptability of the ratings whose annotator labelled z.

    Returns (beta, count of ratings) per intent; beta is NaN for an intent nobody chose.
    """
    s = np.zeros(N_INTENTS)
    c = np.zeros(N_INTENTS)
    for labs, accs in zip(labels, acceptability):
        for z, a in zip(labs, accs):
            k = INTENTS.index(z)
            s[k] += float(a)
            c[k] += 1
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(c > 0, s / np.maximum(c, 1), np.nan), c


# ---------------------------------------------------------------------------------------------
# From a data folder to a law file

SPLIT_CHOICES = ("all", "dev", "test")
MIN_ONSETS = (
    20.0  # fewer (responsibility-weighted) onsets than this: the intent keeps the paper's density
)
POSTERIOR_CHOICES = ("annotators", "fused")
BETA_CHOICES = ("continuations", "acceptability")


@dataclass(frozen=True)
class CorpusFit:
    """A corpus fit: the EM result, the lambda chosen, and the law file's content (a dict)."""

    fit: LawFit
    judge_weight: float
    file: dict[str, Any]


def fit_judge_weight_from(episodes) -> tuple[float | None, float | None, str]:
    """(lambda, T*, how) from the episodes that carry judge logits; (None, None, why) without any."""
    with_logits = [e for e in episodes if e.judge_logits is not None]
    if not with_logits:
        return None, None, "no episode has judge logits"
    counts = label_counts([e.annotations.labels for e in with_logits])
    logits = np.array([e.judge_logits for e in with_logits], dtype=float)
    dev = np.array([e.split == "dev" for e in with_logits])
    fit_on = dev if dev.any() else np.ones(len(with_logits), dtype=bool)
    temperature = fit_temperature(logits[fit_on], counts[fit_on])
    if not np.any(counts.sum(axis=1) >= 2):
        return None, temperature, "no episode with judge logits has two or more annotators"
    lam = fit_judge_weight(counts, scaled_judge(logits, temperature))
    return (
        lam,
        temperature,
        (
            f"leave-one-annotator-out log-likelihood over {len(with_logits)} episode(s) with judge "
            f"logits; T* on the {'dev split' if dev.any() else 'same episodes'}"
        ),
    )


def fit_corpus(
    data_root: str | Path,
    *,
    split: str = "all",
    posterior: str = "annotators",
    beta: str = "continuations",
    judge_weight: float | None = None,
    min_onsets: float = MIN_ONSETS,
) -> CorpusFit:
    """Fit the laws (and lambda) of a TACT data folder; see the module docstring."""
    for name, value, choices in (
        ("split", split, SPLIT_CHOICES),
        ("posterior", posterior, POSTERIOR_CHOICES),
        ("beta", beta, BETA_CHOICES),
    ):
        if value not in choices:
            raise FdevalError(f"fit_laws: --{name} {value!r}: valid: {', '.join(choices)}")
    root = Path(data_root)
    episodes = load_episodes(root, check_audio=False)
    if split != "all":
        episodes = [e for e in episodes if e.split == split]
    if not episodes:
        raise FdevalError(
            f"fit_laws: {root}: no episodes{'' if split == 'all' else f' in the {split} split'}"
        )
    lam_fit, temperature, lam_how = fit_judge_weight_from(episodes)
    if judge_weight is not None:
        lam, lam_source = float(judge_weight), "given (--judge-weight)"
    elif lam_fit is not None:
        lam, lam_source = lam_fit, f"fitted: {lam_how}"
    else:
        lam, lam_source = PAPER_JUDGE_WEIGHT, f"the paper's ({lam_how})"
    if not 0.0 <= lam <= 1.0:
        raise FdevalError(f"fit_laws: --judge-weight must be in [0, 1], got {lam}")
    known = [e for e in episodes if e.human is not None]
    if not known:
        raise FdevalError(f"fit_laws: {root}: no episode records its human continuation")
    counts = label_counts([e.annotations.labels for e in known])
    if posterior == "annotators":
        q = empirical_posterior(counts)
    else:
        missing = [e.episode_id for e in episodes if e.judge_logits is None]
        if missing:
            raise FdevalError(
                f"fit_laws: --posterior fused: {len(missing)} episode(s) have no judge_logits, "
                f"e.g. {missing[0]}"
            )
        logits = np.array([e.judge_logits for e in known], dtype=float)
        if temperature is None:
            temperature = fit_temperature(logits, counts)
        q = fuse_posterior(counts, logits, temperature, lam)
    onsets = np.array(
        [np.nan if e.human.onset_s is None else e.human.onset_s for e in known], dtype=float
    )
    fixed = None
    notes = []
    if beta == "acceptability":
        b, c = beta_from_acceptability(
            [e.annotations.labels for e in episodes],
            [e.annotations.silence_acceptability for e in episodes],
        )
        paper = np.array([law.no_response_mass for law in reference_laws()])
        fixed = np.where(np.isnan(b), paper, b)
        notes += [
            f"{z}: no annotator chose it; beta kept at the paper's"
            for z, k in zip(INTENTS, c)
            if k == 0
        ]
    fit = fit_reference_laws(onsets, q, fixed_beta=fixed, min_onsets=min_onsets)
    if not fit.converged:
        notes.append(f"EM stopped after {fit.iterations} iterations without converging")
    notes += [
        f"{z}: fewer than {min_onsets:g} onsets carry its weight; its density stays the paper's "
        f"(beta fitted)"
        for z in fit.shape_held
    ]
    prov = {
        "fitted_by": "fdeval.benchmarks.tact.fit_laws",
        "fdeval_version": fdeval.__version__,
        "data_root": str(root.resolve()),
        "split": split,
        "posterior": posterior,
        "beta_from": "human continuations (EM)"
        if beta == "continuations"
        else "annotator silence acceptability",
        "judge_weight_from": lam_source,
        "temperature": None if temperature is None else round(temperature, 6),
        "n_episodes": len(episodes),
        "n_used": len(known),
        "n_unknown_continuation": len(episodes) - len(known),
        "n_at_window_start": fit.n_at_window_start,
        "min_onsets": min_onsets,
        "density_kept": list(fit.shape_held),
        "em": {
            "iterations": fit.iterations,
            "converged": fit.converged,
            "log_likelihood": round(fit.log_likelihood, 6),
        },
        "effective_n": {z: round(x, 3) for z, x in zip(INTENTS, fit.effective_n)},
        "effective_onsets": {z: round(x, 3) for z, x in zip(INTENTS, fit.effective_onsets)},
        "notes": notes,
    }
    return CorpusFit(fit, lam, law_file_dict(fit.laws, lam, prov))


def parameter_table(
    laws: Sequence[ReferenceLaw],
    reference: Sequence[ReferenceLaw] | None = None,
    effective: Sequence[float] | None = None,
) -> str:
    """A plain-text table of the laws' named parameters (and a reference set's beside them)."""
    lines = [
        f"{'intent':6} {'family':17} {'parameter':16} {'value':>10}"
        + (f" {'paper':>10}" if reference else "")
    ]
    for i, law in enumerate(laws):
        named = law_params(law)
        ref = law_params(reference[i]) if reference else None
        for k, v in named.items():
            if k == "family":
                continue
            line = f"{law.intent:6} {law.family:17} {k:16} {v:10.4f}"
            if ref is not None:
                line += f" {ref[k]:10.4f}" if k in ref else f" {'-':>10}"
            lines.append(line)
        if effective is not None:
            lines.append(f"{law.intent:6} {'':17} {'effective n':16} {effective[i]:10.1f}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m fdeval.benchmarks.tact.fit_laws",
        description="Fit TACT's reference laws to an annotated data folder and write a law file.",
    )
    ap.add_argument(
        "paths", nargs="+", metavar="PATH", help="DATA_ROOT OUT.json (or, with --paper, OUT.json)"
    )
    ap.add_argument(
        "--paper", action="store_true", help="write the paper's printed laws as a law file"
    )
    ap.add_argument(
        "--split",
        default="all",
        choices=SPLIT_CHOICES,
        help="which episodes to fit on (default all)",
    )
    ap.add_argument(
        "--posterior",
        default="annotators",
        choices=POSTERIOR_CHOICES,
        help="the intent posterior the laws are fitted under (default annotators)",
    )
    ap.add_argument(
        "--beta",
        default="continuations",
        choices=BETA_CHOICES,
        help="beta_z from the human continuations (default) or the annotators' silence acceptability",
    )
    ap.add_argument(
        "--judge-weight", type=float, default=None, help="lambda to write instead of fitting it"
    )
    ap.add_argument(
        "--min-onsets",
        type=float,
        default=MIN_ONSETS,
        help=f"an intent with fewer weighted onsets keeps the paper's density (default {MIN_ONSETS:g})",
    )
    a = ap.parse_args(argv)
    want = 1 if a.paper else 2
    if len(a.paths) != want:
        ap.error("expected OUT.json with --paper" if a.paper else "expected DATA_ROOT OUT.json")
    try:
        if a.paper:
            out = Path(a.paths[0])
            write_text_atomic(out, paper_law_file_bytes().decode("utf-8"))
            print(f"fdeval: the paper's laws -> {out}")
            return 0
        root, out = Path(a.paths[0]), Path(a.paths[1])
        res = fit_corpus(
            root,
            split=a.split,
            posterior=a.posterior,
            beta=a.beta,
            judge_weight=a.judge_weight,
            min_onsets=a.min_onsets,
        )
        saved = write_law_file(out, res.file)
    except (FdevalError, ValueError) as err:
        print(f"fdeval: error: {err}", file=sys.stderr)
        return 2
    prov = res.file["provenance"]
    print(parameter_table(res.fit.laws, reference_laws(), res.fit.effective_n))
    print(f"judge_weight (lambda) {saved.judge_weight:.4f}: {prov['judge_weight_from']}")
    print(
        f"{prov['n_used']} episode(s) fitted ({prov['n_unknown_continuation']} with unknown continuation left out); "
        f"EM {res.fit.iterations} iteration(s), converged {res.fit.converged}"
    )
    for note in prov["notes"]:
        print(f"note: {note}")
    print(f"fdeval: laws -> {out} (sha256 {saved.sha256[:12]}); score with benchmark.laws={out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
