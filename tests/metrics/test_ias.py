"""IAS, baseline IAS and delta-IAS arithmetic, and the score writers."""

from __future__ import annotations

import csv

import pytest

from fdeval.errors import FdevalError
from fdeval.benchmarks.instructfd.metrics.ias import METRIC_VERSION, ias_rows, write_markdown
from fdeval.benchmarks.instructfd.records import InstructFDCase, Verdict
from fdeval.metrics.csvio import write_csv
from fdeval.types import TestCase


def case(
    conv: str, policy: str, judge_policies: tuple[str, ...] | None = None, seed: int = 0
) -> TestCase:
    return TestCase(
        case_id=f"{conv}__{policy}",
        conversation_id=conv,
        benchmark="instructfd",
        scenario="s",
        system_instruction=None if policy == "none" else "x",
        turns=(),
        data=InstructFDCase(policy, (), judge_policies or (policy,)),
        seed=seed,
    )


def V(case_id: str, policy: str, label: str) -> Verdict:
    return Verdict(case_id, policy, label, "", "rules", "1", "h")


# Four listen conversations (c1..c4), two backchannel ones (c1, c2); each has a baseline.
CASES = {
    c.case_id: c
    for c in [
        case("c1", "listen"),
        case("c2", "listen"),
        case("c3", "listen"),
        case("c4", "listen"),
        case("c1", "backchannel"),
        case("c2", "backchannel"),
        case("c1", "none", ("listen", "backchannel")),
        case("c2", "none", ("listen", "backchannel")),
        case("c3", "none", ("listen",)),
        case("c4", "none", ("listen",)),
    ]
}
VERDICTS = [
    V("c1__listen", "listen", "adhere"),
    V("c2__listen", "listen", "adhere"),
    V("c3__listen", "listen", "not_adhere"),
    V("c4__listen", "listen", "error"),
    V("c1__backchannel", "backchannel", "adhere"),
    V("c2__backchannel", "backchannel", "not_adhere"),
    V("c1__none", "listen", "not_adhere"),
    V("c2__none", "listen", "adhere"),
    V("c3__none", "listen", "error"),
    V("c4__none", "listen", "adhere"),
    V("c1__none", "backchannel", "not_adhere"),
    V("c2__none", "backchannel", "not_adhere"),
]


def rows_by_instruction(verdicts=VERDICTS, cases=CASES, provenance=None):
    return {r["instruction"]: r for r in ias_rows(verdicts, cases, provenance)}


def test_ias_per_instruction_errors_excluded():
    rows = rows_by_instruction()
    assert list(rows) == ["backchannel", "listen", "overall"]  # the taxonomy's order, then overall
    listen = rows["listen"]
    # 4 cases, one error: IAS = 2 / 3.
    assert (listen["n"], listen["n_pass"], listen["n_error"]) == (4, 2, 1)
    assert listen["ias"] == pytest.approx(2 / 3)
    # Pairs: c1 (adhere, not_adhere), c2 (adhere, adhere); c3's baseline and c4's case are errors.
    assert listen["n_pairs"] == 2
    assert listen["baseline_ias"] == pytest.approx(1 / 2)
    assert listen["delta_ias"] == pytest.approx(1.0 - 1 / 2)  # instructed rate over the same pairs


def test_backchannel_and_overall():
    rows = rows_by_instruction()
    bc = rows["backchannel"]
    assert (bc["n"], bc["n_pass"], bc["n_error"], bc["ias"]) == (2, 1, 0, 0.5)
    assert (bc["n_pairs"], bc["baseline_ias"], bc["delta_ias"]) == (2, 0.0, 0.5)
    overall = rows["overall"]
    assert (overall["n"], overall["n_pass"], overall["n_error"]) == (6, 3, 1)
    assert overall["ias"] == pytest.approx(3 / 5)
    # All four pairs: instructed 3/4 pass, baseline 1/4 pass.
    assert overall["n_pairs"] == 4
    assert overall["baseline_ias"] == pytest.approx(1 / 4)
    assert overall["delta_ias"] == pytest.approx(3 / 4 - 1 / 4)


def test_all_errors_and_no_baseline_give_empty_scores():
    cases = {c.case_id: c for c in [case("c1", "continue")]}
    row = rows_by_instruction([V("c1__continue", "continue", "error")], cases)["continue"]
    assert (
        row["n"],
        row["n_error"],
        row["ias"],
        row["n_pairs"],
        row["baseline_ias"],
        row["delta_ias"],
    ) == (1, 1, None, 0, None, None)


def test_provenance_in_every_row():
    prov = {
        "benchmark_version": "1.0",
        "model_id": "moshi",
        "judge": "rules",
        "judge_version": "1",
        "prompt_hash": "h",
        "seed": 0,
    }
    rows = ias_rows(VERDICTS, CASES, prov)
    assert all(
        r["metric_version"] == METRIC_VERSION and r["model_id"] == "moshi" and r["seed"] == 0
        for r in rows
    )
    with pytest.raises(ValueError, match="overwrite"):
        ias_rows(VERDICTS, CASES, {"ias": 1})


@pytest.mark.parametrize(
    "verdicts, message",
    [
        ([V("zz__listen", "listen", "adhere")], "unknown case"),
        ([V("c1__listen", "listen", "adhere")] * 2, "two verdicts"),
        ([V("c1__listen", "backchannel", "adhere")], "own instruction"),
    ],
)
def test_inconsistent_input(verdicts, message):
    with pytest.raises(FdevalError, match=message):
        ias_rows(verdicts, CASES)


def test_two_baselines_for_one_pair_is_an_error():
    cases = dict(CASES)
    dup = case("c1", "none", ("listen",))
    dup = TestCase(**{**dup.__dict__, "case_id": "c1__none_b"})
    cases[dup.case_id] = dup
    with pytest.raises(FdevalError, match="both pair"):
        ias_rows(VERDICTS + [V("c1__none_b", "listen", "adhere")], cases)


def test_seed_separates_pairs():
    cases = {
        c.case_id: c
        for c in [case("c1", "listen", seed=1), case("c1", "none", ("listen",), seed=2)]
    }
    row = rows_by_instruction(
        [V("c1__listen", "listen", "adhere"), V("c1__none", "listen", "adhere")], cases
    )["listen"]
    assert row["n_pairs"] == 0 and row["delta_ias"] is None


def test_writers(tmp_path):
    prov = {"model_id": "moshi", "judge": "rules"}
    rows = ias_rows(VERDICTS, CASES, prov)
    write_csv(rows, tmp_path / "scores" / "ias.csv")
    with open(tmp_path / "scores" / "ias.csv", newline="") as f:
        read = list(csv.DictReader(f))
    assert [r["instruction"] for r in read] == ["backchannel", "listen", "overall"]
    assert read[1]["ias"] == "0.666667" and read[1]["model_id"] == "moshi"
    write_markdown(rows, tmp_path / "scores" / "ias.md")
    md = (tmp_path / "scores" / "ias.md").read_text()
    assert "- model_id: moshi" in md and f"- metric_version: {METRIC_VERSION}" in md
    assert "| instruction | n | n_pass | n_error | ias | n_pairs | baseline_ias | delta_ias |" in md
    assert "| listen | 4 | 2 | 1 | 0.667 | 2 | 0.500 | 0.500 |" in md
    assert sorted(p.name for p in (tmp_path / "scores").iterdir()) == [
        "ias.csv",
        "ias.md",
    ]  # no temp files


def test_markdown_shows_missing_values(tmp_path):
    cases = {c.case_id: c for c in [case("c1", "continue")]}
    write_markdown(ias_rows([V("c1__continue", "continue", "error")], cases), tmp_path / "x.md")
    assert "| continue | 1 | 0 | 1 | n/a | 0 | n/a | n/a |" in (tmp_path / "x.md").read_text()
