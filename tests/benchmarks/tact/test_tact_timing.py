"""Timing score: S_T's optimum, strict propriety of twCRPS, and the range of s_T."""

from __future__ import annotations

import numpy as np
import pytest

from fdeval.benchmarks.tact.laws import INTENTS, law_table, reference_laws
from fdeval.benchmarks.tact.scoring import (
    empirical_timing_divergence,
    population_timing_score,
    reference_twcrps,
    score_onsets,
    single_draw_ceiling,
    timing_divergence,
    timing_score_of_laws,
    twcrps_on_grid,
)


def _perturbed(tab, z, kind):
    """Sub-probability CDFs on the table grid that differ from H_z."""
    t, H = tab.grid_s, tab.cdf[z]
    law = reference_laws()[z]
    if kind == "shift":  # onsets 0.3 s later
        return law.cdf(t - 0.3) * (t - 0.3 >= -2)
    if kind == "atom":  # more no-response mass
        return H * 0.9
    if kind == "less_atom":
        return np.minimum(1.0, H / (1 - law.no_response_mass) * (1 - law.no_response_mass / 2))
    if kind == "mix":  # a little of another intent's law
        return 0.9 * H + 0.1 * tab.cdf[(z + 1) % 6]
    raise ValueError(kind)


KINDS = ("shift", "atom", "less_atom", "mix")


def test_population_score_is_one_exactly_at_the_reference_and_below_elsewhere():
    tab = law_table()
    assert timing_score_of_laws(tab.cdf) == 1.0
    for z in range(6):
        for kind in KINDS:
            cdfs = tab.cdf.copy()
            cdfs[z] = _perturbed(tab, z, kind)
            s = timing_score_of_laws(cdfs)
            assert 0.0 <= s < 1.0, (INTENTS[z], kind)


def test_population_score_is_bounded_by_zero_at_the_worst_law():
    tab = law_table()
    # The divergence cannot exceed W_z because |P - H| <= 1, so S_T stays in [0, 1].
    worst = np.where(tab.cdf > 0.5, 0.0, 1.0)
    assert 0.0 <= timing_score_of_laws(worst) < 0.5


def _expected_score(tab, z, cdf):
    """E_{y ~ h_z} twCRPS(P, y) by quadrature over y (density part) plus the atom's term."""
    law = reference_laws()[z]
    y = np.linspace(-2, 5, 14001)
    dens = (1 - law.no_response_mass) * law.pdf(y)
    scores = twcrps_on_grid(cdf, y, tab.weight[z], tab.grid_s)
    return (
        np.trapezoid(dens * scores, y)
        + law.no_response_mass * twcrps_on_grid(cdf, [np.nan], tab.weight[z], tab.grid_s)[0]
    )


@pytest.mark.parametrize("z", range(6))
def test_twcrps_is_strictly_proper_under_the_reference(z):
    tab = law_table()
    own = _expected_score(tab, z, tab.cdf[z])
    assert own == pytest.approx(tab.single_draw[z], rel=1e-5)  # R_z = integral of w H (1 - H)
    for kind in KINDS:
        P = _perturbed(tab, z, kind)
        gap = _expected_score(tab, z, P) - own
        assert gap > 0, (INTENTS[z], kind)
        # The gap is the divergence d_z(P || h_z) = integral of w (P - H)^2.
        assert gap == pytest.approx(timing_divergence(P, z), rel=1e-3)


@pytest.mark.parametrize("z", (0, 4))
def test_reference_wins_on_sampled_continuations(z):
    # Monte Carlo, same draws for every forecast: h_z has the lowest mean twCRPS.
    rng = np.random.default_rng(10 + z)
    tab = law_table()
    y = reference_laws()[z].sample(rng, 40000)
    own = twcrps_on_grid(tab.cdf[z], y, tab.weight[z], tab.grid_s)
    for kind in KINDS:
        diff = twcrps_on_grid(_perturbed(tab, z, kind), y, tab.weight[z], tab.grid_s) - own
        assert diff.mean() > 4 * diff.std() / np.sqrt(diff.size), (INTENTS[z], kind)


def test_episode_scores_stay_in_the_unit_interval():
    rng = np.random.default_rng(0)
    n = 5000
    q = rng.dirichlet(np.full(6, 0.3), size=n)
    q[:6] = np.eye(6)  # one-hot posteriors
    y = rng.uniform(-2, 5, n)
    y[6:20] = [
        -2.0,
        5.0,
        np.nan,
        7.5,
        -1.99999,
        4.99999,
        0.0,
        np.nan,
        -2.0,
        5.0,
        0.3,
        2.0,
        np.nan,
        6.0,
    ]
    s = score_onsets(y, q)
    assert s.shape == (n,) and np.all((s >= 0) & (s <= 1)) and np.all(np.isfinite(s))
    crps, w = reference_twcrps(y, q)
    assert np.all(crps >= -1e-12) and np.all(crps <= w + 1e-12)
    # Past the horizon is the same outcome as no response.
    assert score_onsets([7.5, np.nan], q[[9, 9]]).tolist() == [s[9]] * 2


def test_fast_episode_score_matches_direct_integration_of_the_mixture():
    rng = np.random.default_rng(1)
    laws = reference_laws()
    grid = np.linspace(-2, 5, 140001)
    H = np.stack([law.cdf(grid) for law in laws])
    W = np.stack([law.weight(grid) for law in laws])
    q = rng.dirichlet(np.ones(6), size=8)
    y = np.array([-1.5, -0.3, 0.0, 0.42, 1.7, 3.14, np.nan, 5.0])
    fast = score_onsets(y, q)
    for i in range(8):
        crps = twcrps_on_grid(q[i] @ H, [y[i]], q[i] @ W, grid)[0]
        assert fast[i] == pytest.approx(1 - crps / np.trapezoid(q[i] @ W, grid), abs=1e-7)


def test_silence_and_timing_are_ranked_by_intent():
    q = np.eye(6)
    ans, rhe, bck = INTENTS.index("ans"), INTENTS.index("rhe"), INTENTS.index("bck")
    # Answering promptly beats silence under ans; silence beats an instant reply under rhe.
    assert score_onsets([0.25], q[[ans]])[0] > score_onsets([np.nan], q[[ans]])[0]
    assert score_onsets([np.nan], q[[rhe]])[0] > score_onsets([0.1], q[[rhe]])[0]
    # Under bck an onset in overlap beats a premature one, but (see below) not silence.
    assert score_onsets([-0.19], q[[bck]])[0] > score_onsets([-1.0], q[[bck]])[0]


@pytest.mark.parametrize("z", range(6))
def test_best_single_onset_is_where_the_reference_cdf_crosses_one_half(z):
    # d/dy twCRPS(H, y) = -w(y) (1 - 2 H(y)): the per-episode optimum is H's median, and silence
    # when H never reaches 1/2 (beta_z >= 1/2). Documented consequence of the paper's s_T.
    tab = law_table()
    grid = tab.grid_s
    s = score_onsets(grid, np.tile(np.eye(6)[z], (grid.size, 1)))
    silent = score_onsets([np.nan], np.eye(6)[[z]])[0]
    H = tab.cdf[z]
    if H[-1] > 0.5:
        median = grid[np.searchsorted(H, 0.5)]
        assert abs(grid[np.argmax(s)] - median) < 2e-3
        assert s.max() > silent
    else:
        assert s.max() <= silent + 1e-12


def test_expected_episode_score_of_the_reference_is_the_single_draw_ceiling():
    rng = np.random.default_rng(5)
    tab = law_table()
    for z, law in enumerate(reference_laws()):
        y = law.sample(rng, 20000)
        q = np.tile(np.eye(6)[z], (y.size, 1))
        expected = 1 - tab.single_draw[z] / tab.total_weight[z]
        assert score_onsets(y, q).mean() == pytest.approx(expected, abs=0.01)
    assert 0.8 < single_draw_ceiling() < 0.9


def test_empirical_divergence_closed_form_matches_the_grid():
    rng = np.random.default_rng(2)
    tab = law_table()
    y = np.concatenate([rng.uniform(-2, 5, 300), [np.nan] * 50, [0.5, 0.5]])
    for z in (0, 4):
        P = (y[None, :] <= tab.grid_s[:, None]).mean(axis=1)
        assert empirical_timing_divergence(y, z) == pytest.approx(timing_divergence(P, z), abs=2e-5)


def test_population_score_of_reference_draws_approaches_one():
    rng = np.random.default_rng(4)
    laws = reference_laws()
    n = 3000
    q = np.repeat(np.eye(6), n, axis=0)
    y = np.concatenate([law.sample(rng, n) for law in laws])
    good = population_timing_score(y, q)
    eager = population_timing_score(np.full(y.size, 0.2), q)
    assert good > 0.995 and eager < 0.8
    # Bias of the plug-in divergence is R_z / n_z on average.
    assert 1 - good < 10 * np.mean(law_table().single_draw / law_table().total_weight) / n


def test_invalid_inputs_are_rejected():
    with pytest.raises(ValueError):
        score_onsets([-2.5], [np.eye(6)[0]])
    with pytest.raises(ValueError):
        score_onsets([0.1], [[0.5] * 6])
    with pytest.raises(ValueError):
        score_onsets([0.1, 0.2], [np.eye(6)[0]])
