"""Length score (S_L, s_L) and the completion-weighted overlap penalty."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from fdeval.benchmarks.tact.scoring import (
    DurationReference,
    OverlapEvent,
    length_divergence,
    length_scores,
    overlap_penalty_s,
    overlap_score,
    population_length_score,
)


@pytest.fixture(scope="module")
def human():
    rng = np.random.default_rng(0)
    return {
        ("bck", "a"): rng.lognormal(np.log(1.1), 0.5, 300),
        ("ans", "a"): rng.lognormal(np.log(3.0), 0.6, 300),
        ("bck", "b"): rng.lognormal(np.log(1.4), 0.5, 200),
        "ref": rng.lognormal(np.log(4.0), 0.6, 100),
    }


def _crps_by_grid(reference, bucket, q, d):
    u = np.linspace(0, reference.support_s, 400001)
    b = reference.buckets.index(bucket)
    G = sum(
        q[z]
        * np.searchsorted(reference.samples[b][z], u, side="right")
        / reference.samples[b][z].size
        for z in range(6)
    )
    return np.trapezoid((G - (min(d, reference.support_s) <= u)) ** 2, u)


def test_support_defaults_to_the_human_range_and_cells_fall_back(human):
    ref = DurationReference.from_samples(human)
    assert ref.buckets == ("", "a", "b")
    assert ref.support_s == pytest.approx(max(v.max() for v in human.values()))
    # ("ans", "b") is missing: it falls back to ans pooled over buckets.
    assert np.array_equal(ref.samples[2][0], np.sort(human[("ans", "a")]))
    with pytest.raises(ValueError):
        DurationReference.from_samples({("maybe", "a"): [1.0]})


def test_episode_length_score_matches_direct_integration(human):
    ref = DurationReference.from_samples(human)
    rng = np.random.default_rng(1)
    q = rng.dirichlet(np.ones(6), size=4)
    d = np.array([0.3, 1.2, 7.0, 1e3])
    s = length_scores(d, q, ["a", "b", "a", "b"], ref)
    for i, bucket in enumerate(["a", "b", "a", "b"]):
        assert s[i] == pytest.approx(
            1 - _crps_by_grid(ref, bucket, q[i], d[i]) / ref.support_s, abs=1e-5
        )
    assert np.all((s >= 0) & (s <= 1))
    assert np.isnan(length_scores([np.nan], q[:1], ["a"], ref)[0])
    with pytest.raises(ValueError):
        length_scores([1.0], q[:1], ["unknown"], ref)


def test_population_length_score_is_one_only_at_the_human_law(human):
    ref = DurationReference.from_samples(human)
    bck = human[("bck", "a")]
    q = np.tile(np.eye(6)[4], (bck.size, 1))
    buckets = ["a"] * bck.size
    assert population_length_score(bck, q, buckets, ref) == pytest.approx(1.0, abs=1e-12)
    # The paper's failure: backchannels several times too long (8.4 s vs 1.1 s).
    for factor in (0.8, 1.2, 8.4 / 1.1):
        s = population_length_score(bck * factor, q, buckets, ref)
        assert 0.0 <= s < 1.0
    assert population_length_score(bck * 8.4 / 1.1, q, buckets, ref) < population_length_score(
        bck * 1.2, q, buckets, ref
    )
    assert np.isnan(population_length_score([np.nan], q[:1], ["a"], ref))


def test_length_divergence_closed_form(human):
    ref = DurationReference.from_samples(human)
    x = np.array([0.5, 1.0, 1.0, 2.5, 30.0])
    u = np.linspace(0, ref.support_s, 400001)
    Q = np.searchsorted(np.sort(np.minimum(x, ref.support_s)), u, side="right") / x.size
    G = np.searchsorted(ref.samples[1][4], u, side="right") / ref.samples[1][4].size
    assert length_divergence(x, "bck", "a", ref) == pytest.approx(
        np.trapezoid((Q - G) ** 2, u), abs=1e-5
    )


def test_overlap_penalty_properties():
    mid = OverlapEvent(onset_s=-0.8, duration_s=0.5, psi=0.0)
    assert overlap_penalty_s([]) == 0.0 and overlap_score(0.0) == 1.0
    # Backchannels are exempt.
    assert overlap_penalty_s(
        [mid, OverlapEvent(-0.3, 1.0, 0.0, backchannel=True)]
    ) == overlap_penalty_s([mid])
    # Proportional to duration at a fixed completion probability.
    long = OverlapEvent(-0.8, 1.0, 0.0)
    assert overlap_penalty_s([long]) == pytest.approx(2 * overlap_penalty_s([mid]))
    # At a completion point (psi = 1) overlap is free; the cost falls as psi rises.
    costs = [overlap_penalty_s([OverlapEvent(-0.1, 1.0, p)]) for p in (0.0, 0.3, 0.7, 1.0)]
    assert costs[-1] == 0.0 and all(a > b for a, b in itertools.pairwise(costs))
    # Score: in [0, 1], 0 once the penalty reaches T_a seconds.
    scores = overlap_score(np.array([0.0, 0.5, 2.0, 10.0]))
    assert scores.tolist() == [1.0, 0.75, 0.0, 0.0]
    with pytest.raises(ValueError):
        OverlapEvent(0.0, 1.0, 1.5)
