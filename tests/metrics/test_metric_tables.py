"""IAS with intervals, the delta-IAS significance table and scenario rows."""

from __future__ import annotations

import pytest
from statsmodels.stats.contingency_tables import mcnemar as sm_mcnemar
from statsmodels.stats.multitest import multipletests

from fdeval.benchmarks.instructfd.metrics.ias import ias_rows
from fdeval.benchmarks.instructfd.metrics.tables import (
    DELTA_COLUMNS,
    delta_rows,
    ias_ci_rows,
    scenario_order,
    scenario_rows,
)
from fdeval.benchmarks.instructfd.records import InstructFDCase, Verdict
from fdeval.types import TestCase


def case(conv: str, policy: str, scenario: str, judge_policies=None) -> TestCase:
    return TestCase(
        case_id=f"{conv}__{policy}",
        conversation_id=conv,
        benchmark="instructfd",
        scenario=scenario,
        system_instruction=None if policy == "none" else "x",
        turns=(),
        data=InstructFDCase(policy, (), judge_policies or (policy,)),
    )


def V(case_id: str, policy: str, label: str) -> Verdict:
    return Verdict(case_id, policy, label, "", "rules", "1", "h")


def design():
    """10 listen conversations (scenario A: 0-4, B: 5-9) and 6 acknowledge ones (scenario C).

    listen: instructed passes 0-7, fails 8-9; baseline passes 0-1 and 9 -> b = 6, c = 1.
    acknowledge: instructed passes 0-2, c4 is an error; baseline passes 0-3 -> b = 0, c = 1 (c3).
    """
    cases, verdicts = {}, []
    for i in range(10):
        s = "A" if i < 5 else "B"
        for c in (case(f"l{i}", "listen", s), case(f"l{i}", "none", s, ("listen",))):
            cases[c.case_id] = c
        verdicts.append(V(f"l{i}__listen", "listen", "adhere" if i < 8 else "not_adhere"))
        verdicts.append(V(f"l{i}__none", "listen", "adhere" if i in (0, 1, 9) else "not_adhere"))
    for i in range(6):
        for c in (case(f"a{i}", "acknowledge", "C"), case(f"a{i}", "none", "C", ("acknowledge",))):
            cases[c.case_id] = c
        verdicts.append(
            V(
                f"a{i}__acknowledge",
                "acknowledge",
                "error" if i == 4 else ("adhere" if i < 3 else "not_adhere"),
            )
        )
        verdicts.append(V(f"a{i}__none", "acknowledge", "adhere" if i < 4 else "not_adhere"))
    return cases, verdicts


PROV = {"model_id": "m:1", "judge": "rules", "seed": 0}


def test_ias_with_intervals_matches_ias_rows():
    cases, verdicts = design()
    rows = {r["instruction"]: r for r in ias_ci_rows(verdicts, cases, PROV, resamples=500, seed=1)}
    plain = {r["instruction"]: r for r in ias_rows(verdicts, cases, PROV)}
    assert list(rows) == ["listen", "acknowledge", "overall"]
    for k in rows:
        assert rows[k]["ias"] == pytest.approx(plain[k]["ias"])
        assert (rows[k]["n"], rows[k]["n_pass"], rows[k]["n_error"]) == (
            plain[k]["n"],
            plain[k]["n_pass"],
            plain[k]["n_error"],
        )
        assert rows[k]["ias_ci_low"] <= rows[k]["ias"] <= rows[k]["ias_ci_high"]
        assert (rows[k]["boot_resamples"], rows[k]["boot_seed"], rows[k]["model_id"]) == (
            500,
            1,
            "m:1",
        )
    assert (
        rows["acknowledge"]["n_judged"] == rows["acknowledge"]["boot_n"] == 5
    )  # the error is not resampled
    assert (
        rows["overall"]["boot_unit"] == "case (within instruction)"
        and rows["overall"]["boot_n"] == 15
    )


def test_delta_table_counts_mcnemar_and_holm():
    cases, verdicts = design()
    rows = {
        r["instruction"]: r
        for r in delta_rows(verdicts, cases, PROV, resamples=500, seed=0, alpha=0.05)
    }
    listen, ack, overall = rows["listen"], rows["acknowledge"], rows["overall"]
    assert list(listen)[: len(DELTA_COLUMNS)] == list(DELTA_COLUMNS)
    assert (listen["n_pairs"], listen["b"], listen["c"]) == (10, 6, 1)
    assert listen["delta_ias"] == pytest.approx(0.8 - 0.3)
    assert (ack["n_pairs"], ack["b"], ack["c"]) == (5, 0, 1)  # the errored pair is left out
    assert ack["delta_ias"] == pytest.approx(0.6 - 0.8)
    p = [
        sm_mcnemar([[2, 6], [1, 1]], exact=True).pvalue,
        sm_mcnemar([[3, 0], [1, 1]], exact=True).pvalue,
    ]
    assert [listen["mcnemar_p"], ack["mcnemar_p"]] == pytest.approx(p)
    assert [listen["holm_p"], ack["holm_p"]] == pytest.approx(
        list(multipletests(p, method="holm")[1])
    )
    assert listen["significant"] is False  # p = 0.125 -> Holm 0.25
    assert (overall["b"], overall["c"], overall["holm_p"]) == (6, 2, None)
    assert overall["significant"] == (overall["mcnemar_p"] < 0.05)
    assert listen["delta_ias_ci_low"] <= listen["delta_ias"] <= listen["delta_ias_ci_high"]
    assert listen["boot_unit"] == "pair" and listen["boot_n"] == 10


def test_significance_flag():
    # 12 instructed passes whose baselines all fail: p = 2 / 2^12, significant after Holm
    cases, verdicts = {}, []
    for i in range(12):
        for c in (case(f"x{i}", "interrupt", "S"), case(f"x{i}", "none", "S", ("interrupt",))):
            cases[c.case_id] = c
        verdicts += [
            V(f"x{i}__interrupt", "interrupt", "adhere"),
            V(f"x{i}__none", "interrupt", "not_adhere"),
        ]
    row = delta_rows(verdicts, cases, resamples=200)[0]
    assert row["mcnemar_p"] == pytest.approx(2 / 2**12) and row["holm_p"] == row["mcnemar_p"]
    assert row["significant"] is True
    assert (row["delta_ias_ci_low"], row["delta_ias_ci_high"]) == (1.0, 1.0)


def test_no_pairs_give_empty_tests():
    cases = {c.case_id: c for c in [case("c1", "continue", "S")]}
    row = delta_rows([V("c1__continue", "continue", "adhere")], cases, resamples=10)[0]
    assert (
        row["n_pairs"],
        row["delta_ias"],
        row["mcnemar_p"],
        row["holm_p"],
        row["significant"],
    ) == (0, None, None, None, None)


def test_scenario_rows():
    cases, verdicts = design()
    rows = scenario_rows(verdicts, cases, PROV)
    got = {(r["scenario"], r["instruction"]): r for r in rows}
    assert list(got) == [("A", "listen"), ("B", "listen"), ("C", "acknowledge")]
    assert got[("A", "listen")]["ias"] == 1.0 and got[("B", "listen")]["ias"] == pytest.approx(
        3 / 5
    )
    assert got[("B", "listen")]["baseline_ias"] == pytest.approx(1 / 5)
    assert got[("C", "acknowledge")]["n_error"] == 1 and got[("C", "acknowledge")][
        "ias"
    ] == pytest.approx(3 / 5)
    assert all(r["model_id"] == "m:1" and r["metric_version"] for r in rows)
    assert scenario_order(cases) == ["A", "B", "C"]
