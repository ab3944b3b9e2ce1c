"""Completion probability psi(tau) of the focal speaker's speech, for weighting overlap penalties.

The paper uses a VAP-style estimator [28, 29] calibrated on annotator completion marks and
gives no further detail. This module is a light stand-in with the same inputs and output:

* input: the focal speaker's voice-activity track only (the system's own channel must not
  move psi, or an interruption that makes the speaker stop would look licensed), read causally
  (features at tau use frames up to tau), summarised over VAP's bin layout (0.2, 0.4, 0.6, 0.8 s
  bins, here looking back instead of forward) plus the elapsed speech and pause lengths;
* model: logistic regression psi = sigmoid(b + x . theta), fitted by L2-penalised maximum
  likelihood (Newton) on annotator marks (1 = the annotators marked a completion point at tau).
  Any extra columns (prosodic cues, or a neural VAP model's turn-shift logit) are fitted the same
  way, which for a single logit column is Platt calibration.

Properties (tested): psi is in [0, 1]; features at tau ignore everything after tau; with an
unpenalised intercept the fitted psi averages to the marks' rate on the fitting data.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.special import expit

VAP_BINS_S = (0.2, 0.4, 0.6, 0.8)  # VAP projection bin widths (Ekstedt & Skantze 2022)
FEATURE_NAMES = (
    "speech_frac_0.2s",
    "speech_frac_0.6s",
    "speech_frac_1.2s",
    "speech_frac_2.0s",
    "log1p_speech_run_s",
    "log1p_pause_run_s",
)


def va_history_features(va, frame_hz: float, at_s) -> np.ndarray:
    """(m, 6) causal voice-activity features of the focal track `va` (bool per frame) at `at_s`.

    Columns (`FEATURE_NAMES`): share of speech frames in the last 0.2 / 0.6 / 1.2 / 2.0 s (VAP
    bin edges, looking back; frames before the track start count as silence), and log(1 + s) of
    the current speech run and of the current pause run ending at tau (one of the two is 0).
    """
    act = np.asarray(va, dtype=bool)
    k = np.clip(np.floor(np.asarray(at_s, dtype=float) * frame_hz).astype(np.intp), 0, act.size - 1)
    csum = np.concatenate([[0], np.cumsum(act)])
    cols = []
    for edge_s in np.cumsum(VAP_BINS_S):
        n = max(1, round(edge_s * frame_hz))
        cols.append((csum[k + 1] - csum[np.maximum(k + 1 - n, 0)]) / n)
    # Length of the run of equal frames ending at k (causal): k - (last change before k).
    change = np.flatnonzero(np.diff(act.astype(np.int8)) != 0) + 1  # first frame of each new run
    run_start = np.concatenate([[0], change])[np.searchsorted(change, k, side="right")]
    run_s = (k - run_start + 1) / frame_hz
    cols.append(np.where(act[k], np.log1p(run_s), 0.0))
    cols.append(np.where(act[k], 0.0, np.log1p(run_s)))
    return np.stack(cols, axis=1)


@dataclass(frozen=True)
class CompletionEstimator:
    """psi = sigmoid(intercept + features . coef), fitted on annotator completion marks."""

    coef: tuple[float, ...]
    intercept: float

    def psi(self, features) -> np.ndarray:
        x = np.asarray(features, dtype=float)
        return expit(self.intercept + x @ np.asarray(self.coef))

    @classmethod
    def fit(cls, features, marks, l2: float = 1e-3, max_iter: int = 100) -> CompletionEstimator:
        """Penalised maximum likelihood (Newton-Raphson); the intercept is not penalised."""
        x = np.asarray(features, dtype=float)
        y = np.asarray(marks, dtype=float)
        if x.ndim != 2 or y.shape != (x.shape[0],) or np.any((y < 0) | (y > 1)):
            raise ValueError("features must be (m, k) and marks (m,) in [0, 1]")
        X = np.hstack([np.ones((x.shape[0], 1)), x])
        pen = np.full(X.shape[1], l2 * x.shape[0])
        pen[0] = 0.0
        beta = np.zeros(X.shape[1])
        for _ in range(max_iter):
            p = expit(X @ beta)
            grad = X.T @ (y - p) - pen * beta
            hess = (X * (p * (1 - p))[:, None]).T @ X + np.diag(pen) + 1e-12 * np.eye(X.shape[1])
            step = np.linalg.solve(hess, grad)
            beta += step
            if np.max(np.abs(step)) < 1e-10:
                break
        return cls(tuple(float(b) for b in beta[1:]), float(beta[0]))
