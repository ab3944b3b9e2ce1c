"""Intent posterior fusion, temperature fit, and the completion-probability estimator."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.special import softmax

from fdeval.benchmarks.tact.completion import CompletionEstimator, va_history_features
from fdeval.benchmarks.tact.posterior import (
    JUDGE_WEIGHT,
    empirical_posterior,
    expected_calibration_error,
    fit_judge_weight,
    fit_temperature,
    fuse_posterior,
    held_out_log_likelihood,
    label_counts,
    scaled_judge,
)


def _synthetic_panel(rng, n=3000, true_t=2.5):
    """Episodes with a latent intent distribution, 3-5 annotators drawn from it, and an
    overconfident judge whose logits are the truth's log-probs times `true_t` plus noise."""
    truth = rng.dirichlet(np.full(6, 0.6), size=n)
    k = rng.integers(3, 6, size=n)
    counts = np.array([rng.multinomial(ki, p) for ki, p in zip(k, truth)], dtype=float)
    logits = true_t * (np.log(truth) + rng.normal(0, 0.3, truth.shape))
    return truth, counts, logits


def test_empirical_posterior_and_label_counts():
    c = label_counts([["ans", "ans", "ref"], [4, 4, 4, 0]])
    assert c.tolist() == [[2, 1, 0, 0, 0, 0], [1, 0, 0, 0, 3, 0]]
    q = empirical_posterior(c)
    assert q[0].tolist() == pytest.approx([2 / 3, 1 / 3, 0, 0, 0, 0])
    with pytest.raises(ValueError):
        label_counts([[]])


def test_fusion_is_the_stated_convex_blend():
    counts = np.array([[3, 0, 0, 0, 0, 0], [1, 1, 1, 0, 0, 0]], dtype=float)
    logits = np.log(np.array([[0.1, 0.5, 0.1, 0.1, 0.1, 0.1], [0.6, 0.1, 0.1, 0.1, 0.05, 0.05]]))
    q = fuse_posterior(counts, logits, temperature=1.0)
    assert JUDGE_WEIGHT == 0.3
    assert np.allclose(q, 0.7 * empirical_posterior(counts) + 0.3 * softmax(logits, axis=1))
    assert np.allclose(q.sum(axis=1), 1.0) and np.all(q > 0)  # full support from the judge
    assert np.allclose(fuse_posterior(counts), empirical_posterior(counts))  # annotator-only mode
    assert np.allclose(fuse_posterior(counts, logits, judge_weight=1.0), softmax(logits, axis=1))
    # Temperature: T > 1 flattens the judge, T < 1 sharpens it.
    assert (
        scaled_judge(logits, 4.0).max()
        < scaled_judge(logits, 1.0).max()
        < scaled_judge(logits, 0.5).max()
    )


def test_temperature_fit_undoes_overconfidence_and_cuts_calibration_error():
    rng = np.random.default_rng(0)
    _, counts, logits = _synthetic_panel(rng)
    t_star = fit_temperature(logits, counts)
    assert 1.8 < t_star < 3.5
    raw, scaled = softmax(logits, axis=1), scaled_judge(logits, t_star)
    assert expected_calibration_error(scaled, counts) < expected_calibration_error(raw, counts)


def test_fusion_beats_either_source_on_a_held_out_annotator():
    rng = np.random.default_rng(1)
    _, counts, logits = _synthetic_panel(rng)
    p_j = scaled_judge(logits, fit_temperature(logits, counts))
    lam = fit_judge_weight(counts, p_j)
    assert 0.0 < lam < 1.0
    fused = held_out_log_likelihood(counts, p_j, lam)
    assert fused > held_out_log_likelihood(counts, p_j, 1.0)  # judge alone
    assert held_out_log_likelihood(counts, p_j, 0.0) == -np.inf  # annotators alone miss labels
    assert fused >= held_out_log_likelihood(counts, p_j, JUDGE_WEIGHT)


def test_completion_features_are_causal_and_bounded():
    rng = np.random.default_rng(2)
    hz = 50.0
    va = rng.random(1000) < 0.7
    at = np.array([1.0, 5.0, 12.34])
    f = va_history_features(va, hz, at)
    assert f.shape == (3, 6) and np.all(f[:, :4] >= 0) and np.all(f[:, :4] <= 1)
    future_changed = va.copy()
    future_changed[int(5.0 * hz) + 1 :] = ~future_changed[int(5.0 * hz) + 1 :]
    assert np.array_equal(va_history_features(future_changed, hz, at[:2]), f[:2])
    # Speech run vs pause run: exactly one of the two is nonzero.
    va2 = np.r_[np.ones(100, bool), np.zeros(30, bool)]
    g = va_history_features(va2, hz, [1.5, 2.5])
    assert g[0, 4] == pytest.approx(np.log1p(76 / hz)) and g[0, 5] == 0.0
    assert g[1, 4] == 0.0 and g[1, 5] == pytest.approx(np.log1p(26 / hz))


def test_completion_estimator_fits_marks_and_stays_calibrated_in_the_large():
    rng = np.random.default_rng(3)
    x = rng.normal(size=(4000, 3))
    true = np.array([1.5, -1.0, 0.0])
    marks = (rng.random(4000) < 1 / (1 + np.exp(-(0.3 + x @ true)))).astype(float)
    est = CompletionEstimator.fit(x, marks)
    psi = est.psi(x)
    assert np.all((psi >= 0) & (psi <= 1))
    assert psi.mean() == pytest.approx(marks.mean(), abs=1e-6)
    assert np.allclose(est.coef, true, atol=0.2)
