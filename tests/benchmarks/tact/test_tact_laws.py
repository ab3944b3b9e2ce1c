"""Reference laws and weights: the figures the paper states, and the weight's stated properties."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import integrate, stats

from fdeval.benchmarks.tact.laws import (
    EPS,
    EXGAUSS_PARAMS_S,
    INTENTS,
    LOGNORMAL_MEDIAN_S,
    NO_RESPONSE_MASS,
    law_table,
    reference_cdf,
    reference_law,
    reference_laws,
)


def test_bck_mode_and_overlap_share_match_the_paper():
    bck = reference_law("bck")
    assert round(bck.mode_s, 2) == -0.19
    assert round(float(bck.onset_cdf(0.0)), 2) == 0.72
    # The parameterisation matters: tau is the exponential's mean, not its rate.
    mu, sigma, tau = EXGAUSS_PARAMS_S["bck"]
    as_rate = stats.exponnorm((1 / tau) / sigma, loc=mu, scale=sigma)
    assert as_rate.cdf(0.0) < 0.5


def test_no_response_masses_follow_the_papers_intent_order():
    # The paper lists beta in the order ans, ref, rhe, hold, bck, abn.
    assert INTENTS == ("ans", "ref", "rhe", "hold", "bck", "abn")
    assert [NO_RESPONSE_MASS[z] for z in INTENTS] == [0.05, 0.40, 0.85, 0.90, 0.45, 0.50]
    beta = {law.intent: law.no_response_mass for law in reference_laws()}
    # The text: most rhe/hold mass sits on no-response; ans is the most answer-seeking.
    assert beta["rhe"] > 0.5 and beta["hold"] > 0.5
    assert min(beta, key=beta.get) == "ans" and max(beta, key=beta.get) == "hold"
    for law in reference_laws():  # the CDF's defect at T_h is exactly beta
        assert float(law.cdf(5.0)) == pytest.approx(1 - law.no_response_mass, abs=1e-12)


def test_families_and_printed_parameters():
    for z in ("ans", "bck", "abn"):
        law = reference_law(z)
        assert law.family == "exgauss" and law.params == EXGAUSS_PARAMS_S[z]
    for z, median in LOGNORMAL_MEDIAN_S.items():
        law = reference_law(z)
        assert law.family == "shifted_lognormal"
        assert float(law.base.median()) == pytest.approx(median, abs=1e-12)
    # ref's spread reproduces "humans respond within 1 s in 12% of ref episodes".
    assert float(reference_law("ref").cdf(1.0)) == pytest.approx(0.12, abs=1e-9)
    # rhe and hold are wider than ref on the log scale.
    assert reference_law("rhe").params[2] > reference_law("ref").params[2]


@pytest.mark.parametrize("intent", INTENTS)
def test_onset_density_integrates_to_one_on_the_domain(intent):
    law = reference_law(intent)
    total, _ = integrate.quad(law.pdf, -2.0, 5.0, points=[law.mode_s], limit=200)
    assert total == pytest.approx(1.0, abs=1e-8)
    assert float(law.onset_cdf(-2.0)) == 0.0 and float(law.onset_cdf(5.0)) == pytest.approx(
        1.0, abs=1e-12
    )


@pytest.mark.parametrize("intent", INTENTS)
def test_weight_is_floored_positive_and_peaks_at_the_mode(intent):
    law = reference_law(intent)
    t = np.linspace(-2, 5, 20001)
    w = law.weight(t)
    assert np.all(w >= EPS) and np.all(w <= 1.0 + 1e-12)
    assert float(law.weight(law.mode_s)) == pytest.approx(1.0, abs=1e-12)
    # A strictly increasing function of the kernel: orderings of f_z carry over to w_z.
    f = law.pdf(t)
    order = np.argsort(f, kind="stable")
    assert np.all(np.diff(w[order]) >= -1e-15)


def test_ans_weights_late_offsets_above_equally_premature_ones():
    ans = reference_law("ans")
    m = ans.mode_s
    delta = np.linspace(0.01, 2.0, 400)
    late, early = ans.weight(m + delta), ans.weight(m - delta)
    assert np.all(late >= early)
    live = late > EPS + 1e-9  # beyond this both sides sit on the floor
    assert live.sum() > 100 and np.all(late[live] > early[live])


def test_bck_well_placed_overlap_outweighs_any_post_completion_onset():
    bck = reference_law("bck")
    after = bck.weight(np.linspace(0.0, 5.0, 5001)).max()
    assert float(bck.weight(bck.mode_s)) > after
    assert float(bck.weight(-0.1)) > after  # not just the single best point


def test_reference_cdf_api():
    grid = np.linspace(-3, 6, 91)
    r = reference_cdf("hold", grid)
    assert r.no_response_mass == 0.90
    assert np.all(np.diff(r.cdf) >= 0)
    assert r.cdf[0] == 0.0 and r.cdf[-1] == pytest.approx(0.10)
    with pytest.raises(ValueError):
        reference_cdf("maybe", grid)


def test_table_tail_integrals_match_adaptive_quadrature():
    tab = law_table()
    ans, bck = reference_law("ans"), reference_law("bck")
    for y in (-1.7, -0.19, 0.2771, 1.3, 4.2):
        got = tab.tail_at(np.array([y]))[:, 0]
        want_w = integrate.quad(lambda t: bck.weight(t), y, 5.0, limit=400, epsabs=1e-13)[0]
        want_wh = integrate.quad(
            lambda t: ans.weight(t) * bck.cdf(t), y, 5.0, limit=400, epsabs=1e-13
        )[0]
        assert got[4] == pytest.approx(want_w, abs=1e-9)
        assert got[6 + 6 * 0 + 4] == pytest.approx(want_wh, abs=1e-9)


def test_sampling_matches_the_law():
    rng = np.random.default_rng(3)
    law = reference_law("abn")
    y = law.sample(rng, 20000)
    assert np.isnan(y).mean() == pytest.approx(0.5, abs=0.015)
    res = stats.kstest(y[~np.isnan(y)], law.onset_cdf)
    assert res.pvalue > 1e-3
