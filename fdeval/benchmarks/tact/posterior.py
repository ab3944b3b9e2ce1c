"""Intent posterior q(z | e): annotators' empirical distribution fused with a calibrated LLM judge.

The paper's fusion formula (its Eq. 1) is not printed; it calls the result a consensus that
blends the annotators' labels with the temperature-scaled judge, with lambda = 0.3 chosen by
held-out annotator log-likelihood. The definition used here is the linear opinion pool

    q(z | e) = (1 - lambda) * qA(z | e) + lambda * softmax(l_J(e) / T*)(z),   lambda = 0.3,

with qA the annotators' label frequencies and l_J the judge's logits (log-probabilities do as
well). Why this pool: it is a distribution for every lambda in [0, 1]; it gives annotators 70%
of the say; it keeps full support whenever the judge does, so a held-out annotator's label always
has finite log-likelihood (a geometric pool would zero every class the 3 annotators missed); and
lambda = 0 is the annotator-only mode the paper ships. T* minimises the negative log-likelihood
of the dev split's annotator labels under the scaled judge (standard temperature scaling).

Calibration is measured by `expected_calibration_error` over the bins of `reliability_table`,
and the paper's claim about the fusion by `held_out_by_source` (leave-one-annotator-out
log-likelihood of each source). `intent_judge.py` produces judge logits and reports all three.

Arrays are (n_episodes, 6) in `laws.INTENTS` order.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np
from scipy import optimize
from scipy.special import log_softmax, softmax

from .laws import INTENTS, N_INTENTS, intent_index

JUDGE_WEIGHT = 0.3  # lambda (Sec. IV)


def label_counts(labels: Iterable[Sequence[str | int]]) -> np.ndarray:
    """(n, 6) label counts from each episode's annotator labels (intent names or indices)."""
    rows = []
    for ep in labels:
        row = np.zeros(N_INTENTS)
        for z in ep:
            row[intent_index(z) if isinstance(z, str) else int(z)] += 1
        if row.sum() == 0:
            raise ValueError("an episode has no annotator labels")
        rows.append(row)
    return np.array(rows).reshape(-1, N_INTENTS)


def empirical_posterior(counts) -> np.ndarray:
    """qA(z | e) = K_e^-1 sum_k 1[z_k = z] (Sec. IV) from (n, 6) label counts."""
    c = _as_matrix(counts, "counts")
    k = c.sum(axis=1, keepdims=True)
    if np.any(c < 0) or np.any(k <= 0):
        raise ValueError("counts must be nonnegative with at least one label per episode")
    return c / k


def scaled_judge(judge_logits, temperature: float) -> np.ndarray:
    """softmax(logits / T): the temperature-scaled judge distribution."""
    if not temperature > 0:
        raise ValueError(f"temperature must be > 0, got {temperature}")
    return softmax(_as_matrix(judge_logits, "judge_logits") / temperature, axis=1)


def fuse_posterior(
    counts, judge_logits=None, temperature: float = 1.0, judge_weight: float = JUDGE_WEIGHT
) -> np.ndarray:
    """q(z | e) = (1 - lambda) qA + lambda softmax(l_J / T); annotators only when no judge is given."""
    q_a = empirical_posterior(counts)
    if judge_logits is None:
        return q_a
    if not 0.0 <= judge_weight <= 1.0:
        raise ValueError(f"judge_weight must be in [0, 1], got {judge_weight}")
    p_j = scaled_judge(judge_logits, temperature)
    if p_j.shape != q_a.shape:
        raise ValueError(f"judge_logits shape {p_j.shape} != counts shape {q_a.shape}")
    return (1.0 - judge_weight) * q_a + judge_weight * p_j


def fit_temperature(judge_logits, counts, bounds: tuple[float, float] = (0.05, 20.0)) -> float:
    """T* maximising the log-likelihood of the (dev split's) annotator labels under the scaled judge."""
    logits = _as_matrix(judge_logits, "judge_logits")
    c = _as_matrix(counts, "counts")

    def nll(log_t: float) -> float:
        return float(-(c * log_softmax(logits / np.exp(log_t), axis=1)).sum())

    res = optimize.minimize_scalar(
        nll, bounds=np.log(bounds), method="bounded", options={"xatol": 1e-8}
    )
    return float(np.exp(res.x))


def held_out_log_likelihood(counts, judge_probs, judge_weight: float) -> float:
    """Mean log-likelihood of each annotator's label under the fusion of the *other* annotators and
    the judge (leave one annotator out). Episodes with a single annotator are skipped.

    For a label z with count c_z out of K, the remaining annotators give (c_z - 1) / (K - 1).
    """
    c = _as_matrix(counts, "counts")
    p = _as_matrix(judge_probs, "judge_probs")
    k = c.sum(axis=1, keepdims=True)
    keep = k[:, 0] >= 2
    c, p, k = c[keep], p[keep], k[keep]
    if c.size == 0:
        raise ValueError("need episodes with at least two annotators")
    q = (1.0 - judge_weight) * np.maximum(c - 1.0, 0.0) / (k - 1.0) + judge_weight * p
    with np.errstate(divide="ignore"):
        ll = c * np.log(np.where(c > 0, q, 1.0))  # -inf when a held-out label gets probability 0
    return float(ll.sum() / c.sum())


def fit_judge_weight(counts, judge_probs) -> float:
    """lambda in [0, 1] maximising `held_out_log_likelihood` (concave in lambda, so global)."""
    res = optimize.minimize_scalar(
        lambda lam: -held_out_log_likelihood(counts, judge_probs, lam),
        bounds=(0.0, 1.0),
        method="bounded",
        options={"xatol": 1e-6},
    )
    return float(res.x)


def reliability_table(probs, counts, n_bins: int = 15) -> list[dict[str, float]]:
    """The top-label reliability diagram of `probs` against annotator labels, as rows.

    Confidence is the top probability of each episode; [0, 1] is cut into `n_bins` equal bins
    (a confidence of exactly 1 goes to the last). Every annotator label is one observation, so an
    episode with K labels counts K times. One row per non-empty bin: `lo`, `hi`,
    `mean_confidence` and `accuracy` (the share of labels equal to the top intent), both
    label-weighted, and `n_labels`, `n_episodes`.
    """
    p = _as_matrix(probs, "probs")
    c = _as_matrix(counts, "counts")
    if p.shape != c.shape:
        raise ValueError(f"probs shape {p.shape} != counts shape {c.shape}")
    if not (isinstance(n_bins, int) and n_bins >= 1):
        raise ValueError(f"n_bins must be a positive integer, got {n_bins!r}")
    top = p.argmax(axis=1)
    conf = p[np.arange(len(p)), top]
    n_labels = c.sum(axis=1)
    hits = c[np.arange(len(c)), top]
    bins = np.minimum((conf * n_bins).astype(int), n_bins - 1)
    rows = []
    for b in np.unique(bins):
        m = bins == b
        w = n_labels[m].sum()
        if w > 0:
            rows.append(
                {
                    "lo": b / n_bins,
                    "hi": (b + 1) / n_bins,
                    "mean_confidence": float((conf[m] * n_labels[m]).sum() / w),
                    "accuracy": float(hits[m].sum() / w),
                    "n_labels": int(w) if float(w).is_integer() else float(w),
                    "n_episodes": int(m.sum()),
                }
            )
    return rows


def expected_calibration_error(probs, counts, n_bins: int = 15) -> float:
    """Top-label ECE of `probs` against annotator labels (each label one observation): the
    label-weighted mean gap |accuracy - mean confidence| over the bins of `reliability_table`."""
    rows = reliability_table(probs, counts, n_bins)
    total = sum(r["n_labels"] for r in rows)
    return float(
        sum(abs(r["accuracy"] - r["mean_confidence"]) * r["n_labels"] for r in rows) / total
    )


def held_out_by_source(counts, judge_probs, judge_weight: float = JUDGE_WEIGHT) -> dict[str, float]:
    """`held_out_log_likelihood` of each source: the other annotators alone (lambda = 0; -inf
    as soon as one held-out label was given by nobody else), the judge alone (lambda = 1) and
    their fusion at `judge_weight`."""
    return {
        "annotators": held_out_log_likelihood(counts, judge_probs, 0.0),
        "judge": held_out_log_likelihood(counts, judge_probs, 1.0),
        "fused": held_out_log_likelihood(counts, judge_probs, judge_weight),
    }


def _as_matrix(a, name: str) -> np.ndarray:
    m = np.asarray(a, dtype=float)
    if m.ndim == 1:
        m = m[None, :]
    if m.ndim != 2 or m.shape[1] != N_INTENTS:
        raise ValueError(f"{name} must be (n, {N_INTENTS}) in order {INTENTS}, got shape {m.shape}")
    return m
