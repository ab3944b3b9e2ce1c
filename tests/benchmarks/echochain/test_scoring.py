"""EchoChain metrics: MPR, MCP (pooled and per-conversation mean), the >= 2 share, intervals,
classifier errors, taxonomy counts, the half-duplex comparison and the written tables."""

from __future__ import annotations

import csv
import math

import pytest

from fdeval.benchmarks.echochain.review import apply_human
from fdeval.benchmarks.echochain.rubrics import Grade
from fdeval.benchmarks.echochain.scoring import (
    POOLED,
    GradedConversation,
    conversation_passed,
    net_reduction,
    score_tables,
    write_tables,
)

KW = {"n_resamples": 2000, "confidence": 0.95, "seed": 7}


def grades(*passed: bool, source: str = "auto", prefix: str = "c") -> tuple[Grade, ...]:
    return tuple(Grade(f"{prefix}{i}", p, "test", source) for i, p in enumerate(passed))


def conv(
    case: str,
    gs: tuple[Grade, ...],
    model: str = "m",
    control: tuple[Grade, ...] = (),
    *,
    flagged: bool | None = None,
    error: bool = False,
    taxonomy: str | None = None,
    source: str = "auto",
    screened_out: bool = False,
) -> GradedConversation:
    if flagged is None and not error:
        flagged = not all(g.passed for g in gs)
    return GradedConversation(
        case,
        case,
        model,
        "seed",
        "topic",
        flagged,
        error,
        gs,
        control,
        taxonomy,
        source,
        screened_out,
    )


def row(table, model):
    return next(r for r in table.rows if r["model"] == model)


def test_net_reduction_reproduces_the_papers_half_duplex_arithmetic():
    assert net_reduction(92, 55) == pytest.approx(0.402174, abs=5e-7)
    assert f"{100 * net_reduction(92, 55):.2f}%" == "40.22%"
    assert net_reduction(10, 12) == pytest.approx(-0.2)
    assert math.isnan(net_reduction(0, 3))
    with pytest.raises(ValueError):
        net_reduction(-1, 0)


def test_conversation_passed_needs_every_criterion_and_some_grade():
    assert conversation_passed(conv("a", grades(True, True)))
    assert not conversation_passed(conv("b", grades(True, False)))
    with pytest.raises(ValueError, match="no grades"):
        conversation_passed(conv("c", ()))


def test_mpr_and_both_mcps_on_hand_made_conversations():
    # criteria counts differ, so pooled MCP (12/16) and the per-conversation mean differ
    convs = [
        conv("a", grades(True, True)),  # pass, 2/2
        conv("b", grades(True, False, False, False)),  # fail, 1/4 (3 failed)
        conv("c", grades(*[True] * 9, False)),  # fail, 9/10 (1 failed)
        conv("x", grades(True), model="other"),
    ]
    scores = score_tables(convs, **KW)[0]
    r = row(scores, "m")
    assert r["n_scored"] == 3 and r["n_criteria"] == 16 and r["n_failed"] == 2
    assert r["mpr"][0] == pytest.approx(1 / 3)
    assert r["mcp_pooled"][0] == pytest.approx(12 / 16)
    assert r["mcp_mean"][0] == pytest.approx((1 + 0.25 + 0.9) / 3)
    assert r["mcp_pooled"][0] != pytest.approx(r["mcp_mean"][0])
    # share of failed conversations with two or more failed criteria: b of {b, c}
    assert r["n_failed_multi"] == 1 and r["share_failed_multi"] == pytest.approx(0.5)
    # each interval brackets its estimate
    for k in ("mpr", "mcp_pooled", "mcp_mean"):
        est, low, high = r[k]
        assert low <= est <= high


def test_intervals_shrink_with_more_conversations_and_a_single_one_has_none():
    def widths(n_copies: int) -> list[float]:
        base = [
            grades(True, True),
            grades(True, False),
            grades(False, False, True),
            grades(True, True, True),
        ]
        convs = [conv(f"c{k}-{i}", g) for k in range(n_copies) for i, g in enumerate(base)]
        r = row(score_tables(convs, **KW)[0], "m")
        return [r[k][2] - r[k][1] for k in ("mpr", "mcp_pooled", "mcp_mean")]

    small, large = widths(2), widths(20)
    assert all(w_l < w_s for w_s, w_l in zip(small, large)), (small, large)

    tables = score_tables([conv("one", grades(True, False))], **KW)
    r = row(tables[0], "m")
    assert r["mpr"] == (0.0, None, None) and r["mcp_pooled"] == (0.5, None, None)
    assert any("fewer than two" in n for n in tables[0].notes)


def test_classifier_errors_and_screened_out_conversations_are_not_failures():
    convs = [
        conv("ok", grades(True, True), flagged=False),
        conv("flag", grades(True, False), flagged=True),
        conv("err", (), error=True),  # classifier error, no grades
        conv("err-graded", grades(True, True), error=True),  # graded: the grades decide
        conv("rej", grades(False, False), flagged=True, screened_out=True),
    ]
    r = row(score_tables(convs, **KW)[0], "m")
    assert r["n_conversations"] == 5 and r["n_scored"] == 3
    assert r["n_failed"] == 1 and r["mpr"][0] == pytest.approx(2 / 3)
    assert r["n_classifier_errors"] == 2 and r["n_screened_out"] == 1 and r["n_ungraded"] == 1
    # flag rate over the conversations with a verdict: flag and rej of ok, flag, rej
    assert r["classifier_flag_rate"] == pytest.approx(2 / 3)


def test_failure_distribution_counts_types_and_sources():
    convs = [
        conv("a", grades(False), taxonomy="contextual_inertia"),
        conv("b", grades(False, False), taxonomy="contextual_inertia", source="human"),
        conv("c", grades(True, False), taxonomy="objective_displacement"),
        conv("d", grades(False)),  # failed, no type
        conv("e", grades(True), taxonomy="interruption_amnesia"),
    ]  # passed: not counted
    failures = score_tables(convs, **KW)[1]
    by_type = {r["taxonomy"]: r for r in failures.rows}
    ci = by_type["contextual_inertia"]
    assert (ci["n_failed"], ci["n_auto"], ci["n_human"], ci["n_failures"]) == (2, 1, 1, 3)
    assert ci["share"] == pytest.approx(0.5)
    assert by_type["objective_displacement"]["n_failed"] == 1
    assert by_type["interruption_amnesia"]["n_failed"] == 0
    assert by_type["(no label)"]["n_failed"] == 1
    assert sum(r["share"] for r in failures.rows) == pytest.approx(1.0)


def test_half_duplex_table_per_model_and_pooled():
    convs = [
        # m1: interrupted fails c0, c1; control fails only c1 -> 2 vs 1
        conv("a", grades(False, False, True), model="m1", control=grades(True, False, True)),
        # m1: control fails a criterion the interrupted delivery passed -> 1 vs 1
        conv("b", grades(False, True), model="m1", control=grades(True, False)),
        # m2: 2 vs 0; the control lacks c2, so c2 (failed interrupted) is not paired
        conv("c", grades(False, False, False), model="m2", control=grades(True, True)),
        conv("d", grades(False), model="m2"),  # no control: not in the comparison
    ]
    half = score_tables(convs, **KW)[2]
    m1, m2, pooled = row(half, "m1"), row(half, "m2"), row(half, POOLED)
    assert (
        m1["failures_interrupted"],
        m1["failures_control"],
        m1["fixed_by_control"],
        m1["new_in_control"],
    ) == (3, 2, 2, 1)
    assert m1["net_reduction"][0] == pytest.approx(net_reduction(3, 2))
    assert (
        m2["n_conversations"],
        m2["n_criteria"],
        m2["failures_interrupted"],
        m2["failures_control"],
    ) == (1, 2, 2, 0)
    assert m2["net_reduction"] == (1.0, None, None)  # one conversation: no interval
    assert (pooled["failures_interrupted"], pooled["failures_control"]) == (5, 2)
    assert pooled["net_reduction"][0] == pytest.approx(0.6)
    assert (
        pooled["failed_conversations_interrupted"] == 3
        and pooled["failed_conversations_control"] == 2
    )
    assert pooled["net_reduction_conversations"] == pytest.approx(1 / 3)


def test_a_reviewers_grades_score_the_conversation_but_the_control_is_compared_with_the_graders():
    """Human grades replace the grader's in MPR / MCP; the half-duplex table pairs the control
    (graded automatically) with the grader's grades of the interrupted delivery, never a human's."""
    auto = conv("a", grades(False, False), control=grades(True, False))
    label = {
        "case_id": "a",
        "reviewer": "r1",
        "time": "t",
        "grades": {"c0": "pass", "c1": "pass"},
        "screening": {"accepted": True},
        "taxonomy": None,
    }
    reviewed = apply_human(auto, label)
    assert [g.source for g in reviewed.grades] == [
        "human",
        "human",
    ] and reviewed.graded_like_control == auto.grades
    scores, _, half = score_tables([reviewed], **KW)
    assert row(scores, "m")["n_failed"] == 0  # the reviewer passed both criteria
    h = row(half, "m")  # the grader failed both, the control one
    assert (h["failures_interrupted"], h["failures_control"], h["fixed_by_control"]) == (2, 1, 1)
    assert any("never set against an automatic one" in n for n in half.notes)
    assert (
        apply_human(reviewed, label).graded_like_control == auto.grades
    )  # a second import keeps the grader's


def test_write_tables_writes_one_csv_per_table_and_the_markdown(tmp_path):
    convs = [
        conv("a", grades(True, False), taxonomy="other", control=grades(True, True)),
        conv("b", grades(True, True), control=grades(True, False)),
        conv("c", grades(True), model="solo"),
    ]
    md = write_tables(score_tables(convs, **KW), tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "echochain.md",
        "echochain_failures.csv",
        "echochain_half_duplex.csv",
        "echochain_scores.csv",
    ]
    assert (tmp_path / "echochain.md").read_text() == md
    assert "MCP (per-conversation mean)" in md and "Net reduction" in md
    with open(tmp_path / "echochain_scores.csv", newline="") as f:
        rows = {r["model"]: r for r in csv.DictReader(f)}
    assert float(rows["m"]["mpr"]) == pytest.approx(0.5)
    assert (
        rows["m"]["mpr_ci_low"] != "" and rows["solo"]["mpr_ci_low"] == ""
    )  # one conversation: no interval
    assert rows["m"]["boot_unit"] == "conversation"
    # the solo model's MPR shows its estimate alone in the markdown
    solo_line = next(line for line in md.splitlines() if line.startswith("| solo |"))
    assert "| 100.0% |" in solo_line
