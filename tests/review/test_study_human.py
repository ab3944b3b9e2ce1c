"""The human-study tables (fdeval.benchmarks.instructfd.metrics.human) on hand-made answers.

Every expected figure below is worked out by hand in the comment beside it.
"""

from __future__ import annotations

import pytest

from fdeval.benchmarks.instructfd.metrics.human import (
    Answer,
    StudyError,
    StudyItem,
    case_rows,
    delta_rows,
    frame_rows,
    plan_item,
    proactive_points,
    score,
    summary_rows,
)
from fdeval.benchmarks.instructfd.records import InstructFDCase, ReferenceLine, Trigger
from fdeval.metrics.stats import holm
from fdeval.types import TestCase, Turn, WordTiming

# A backchannel item: points at 2, 4, 6, 8 s, one cue at 4.5 s -> window [2.5, 6.5] holds 4 and 6.
BC = StudyItem(
    "bc",
    "c1__backchannel",
    "c1",
    "Floor Hold Signal",
    "with",
    "give signals",
    ("backchannel",),
    "proactive",
    1,
    (2.0, 4.0, 6.0, 8.0),
    {"backchannel": (4.5,)},
)
BC0 = StudyItem(
    "bc0",
    "c1__none",
    "c1",
    "Floor Hold Signal",
    "without",
    None,
    ("backchannel", "listen"),
    "proactive",
    1,
    (2.0, 4.0, 6.0, 8.0),
    {"backchannel": (4.5,)},
)
LI = StudyItem(
    "li",
    "c1__listen",
    "c1",
    "Floor Hold Signal",
    "with",
    "stay quiet",
    ("listen",),
    "proactive",
    1,
    (2.0, 4.0, 6.0, 8.0),
    {"backchannel": (4.5,)},
)
IN = StudyItem(
    "in",
    "c2__interrupt",
    "c2",
    "Safety Correction",
    "with",
    "cut in",
    ("interrupt",),
    "proactive",
    1,
    (2.0, 4.0, 6.0),
    {"interrupt": (3.0,)},
)
AK = StudyItem(
    "ak",
    "c3__acknowledge",
    "c3",
    "Short Stop Repair",
    "with",
    "yield",
    ("acknowledge",),
    "responsive",
    1,
    (1.2,),
)
AK0 = StudyItem(
    "ak0",
    "c3__none",
    "c3",
    "Short Stop Repair",
    "without",
    None,
    ("acknowledge",),
    "responsive",
    1,
    (1.2,),
)
L, B, I = "listen", "backchannel", "interrupt"


def test_backchannel_strict_no_false_alarm():
    # hit at 4 s (in window), quiet at 2 and 8: correct
    assert score(BC, [L, B, L, L], B).correct is True
    # hit at 6 s is also inside the +-2 s window
    assert score(BC, [L, L, B, L], B).correct is True
    # premature signal at 2 s (outside the window) fails the case although the cue was hit (A.13)
    o = score(BC, [B, B, L, L], B)
    assert (o.correct, o.cues_hit, o.false_alarms, o.quiet) == (False, 1, 1, 2)
    # never signalling misses the cue
    o = score(BC, [L, L, L, L], B)
    assert (o.correct, o.cues_hit) == (False, 0)
    # an interrupt inside the window ends the item and is the wrong action
    assert score(BC, [L, I], B).correct is False


def test_interrupt_ends_the_item_and_incomplete_is_not_scored():
    assert score(IN, [L, I], I).correct is True  # 4 s is inside [1, 5]; later points not asked
    assert score(IN, [I], I).correct is True  # 2 s is inside [1, 5] too
    assert score(IN, [L, L, L], I).correct is False
    assert score(IN, [L, L], I).correct is None  # stopped before the end without interrupting
    with pytest.raises(StudyError, match="after an interrupt"):
        score(IN, [I, L], I)
    with pytest.raises(StudyError, match="expected one of"):
        score(AK, ["listen"], "acknowledge")


def test_baseline_scored_against_each_instruction():
    # the same un-instructed answer: a signal at 4 s passes backchannel and fails listen
    assert score(BC0, [L, B, L, L], B).correct is True
    assert score(BC0, [L, B, L, L], L).correct is False
    assert score(BC0, [L, L, L, L], L).correct is True


def test_case_rows_average_is_mean_of_scenarios():
    answers = [
        Answer("p1", "bc", (L, B, L, L)),  # correct
        Answer("p2", "bc", (B, B, L, L)),  # false alarm
        Answer("p3", "bc", (L, B, L, L)),  # correct -> Floor Hold backchannel 2/3
        Answer("p1", "in", (L, I)),  # correct
        Answer("p2", "in", (L, L, L)),  # missed  -> Safety interrupt 1/2
        Answer("p1", "li", (L, L, L, L)),  # correct -> listen 1/1
        Answer("p1", "ak", ("acknowledge",)),
        Answer("p2", "ak", ("continue",)),
    ]  # acknowledge 1/2
    rows = {(r["scenario"], r["action"]): r for r in case_rows([BC, IN, LI, AK], answers)}
    assert rows[("Floor Hold Signal", "backchannel")]["accuracy"] == pytest.approx(2 / 3)
    assert rows[("Safety Correction", "interrupt")]["accuracy"] == 0.5
    assert rows[("Floor Hold Signal", "listen")]["accuracy"] == 1.0
    assert rows[("average", "acknowledge")]["accuracy"] == 0.5
    assert rows[("pooled", "backchannel")]["n"] == 3
    s = {(r["group"], r["condition"]): r for r in summary_rows([BC, IN, LI, AK], answers)}
    # overall with the instruction: 2 + 1 + 1 + 1 = 5 correct of 8
    assert (s[("overall", "with")]["n_correct"], s[("overall", "with")]["n"]) == (5, 8)
    assert s[("proactive", "with")]["accuracy"] == pytest.approx(4 / 6)
    assert s[("responsive", "without")]["accuracy"] is None


def test_macro_average_differs_from_pooled():
    other = StudyItem(
        "bc2",
        "c9__backchannel",
        "c9",
        "User Attention Check",
        "with",
        "x",
        ("backchannel",),
        "proactive",
        1,
        (2.0, 4.0),
        {"backchannel": (2.0,)},
    )
    answers = [
        Answer("p1", "bc", (L, B, L, L)),
        Answer("p1", "bc2", (B, L)),
        Answer("p2", "bc2", (L, L)),
        Answer("p3", "bc2", (L, L)),
    ]
    rows = {(r["scenario"], r["action"]): r for r in case_rows([BC, other], answers)}
    # scenarios 1/1 and 1/3: average (1 + 1/3) / 2 = 2/3, pooled 2/4
    assert rows[("average", "backchannel")]["accuracy"] == pytest.approx(2 / 3)
    assert rows[("pooled", "backchannel")]["accuracy"] == 0.5


def test_frame_rows_detection_and_false_alarms():
    answers = [
        Answer("p1", "bc", (L, B, L, L)),
        Answer("p2", "bc", (B, B, L, L)),
        Answer("p3", "bc", (L, L, L, L)),
    ]
    (row,) = frame_rows([BC], answers)
    # cues 3, hit 2; quiet points (2 s and 8 s) 6, false alarms 1; frames 3 + 6 = 9, correct 2 + 5 = 7
    assert (row["n_cues"], row["n_cues_hit"], row["n_quiet_points"], row["n_false_alarms"]) == (
        3,
        2,
        6,
        1,
    )
    assert row["detection_rate"] == pytest.approx(2 / 3)
    assert row["false_alarm_rate"] == pytest.approx(1 / 6)
    assert row["frame_accuracy"] == pytest.approx(7 / 9)
    assert row["n_points"] == 12


def test_delta_rows_pairs_and_mcnemar():
    # acknowledge: with-instruction answers by p1..p4 (correct, correct, correct, wrong); without by
    # q1..q3 (wrong, wrong, correct). Pairs by name order: (T,F) (T,F) (T,T); p4 unpaired.
    answers = [
        Answer("p1", "ak", ("acknowledge",)),
        Answer("p2", "ak", ("acknowledge",)),
        Answer("p3", "ak", ("acknowledge",)),
        Answer("p4", "ak", ("continue",)),
        Answer("q1", "ak0", ("continue",)),
        Answer("q2", "ak0", ("continue",)),
        Answer("q3", "ak0", ("acknowledge",)),
        Answer("p1", "bc", (L, B, L, L)),
        Answer("q1", "bc0", (L, L, L, L)),
    ]
    rows = {r["action"]: r for r in delta_rows([AK, AK0, BC, BC0], answers)}
    ak = rows["acknowledge"]
    assert (ak["n_pairs"], ak["b"], ak["c"]) == (3, 2, 0)
    assert ak["delta"] == pytest.approx(1 - 1 / 3)
    assert ak["mcnemar_p"] == pytest.approx(0.5)  # 2 * P[Bin(2, .5) <= 0] = 0.5
    assert (ak["n_with"], ak["n_without"], ak["accuracy_with_all"]) == (4, 3, 0.75)
    # backchannel: one pair (T, F): p = 1.0; listen has only the baseline side (no pair)
    assert rows["backchannel"]["mcnemar_p"] == 1.0
    assert rows["listen"]["n_pairs"] == 0 and rows["listen"]["mcnemar_p"] is None
    assert rows["listen"]["accuracy_without_all"] == 1.0
    hp = holm([rows[a]["mcnemar_p"] for a in ("listen", "backchannel", "acknowledge")])
    assert [rows[a]["holm_p"] for a in ("listen", "backchannel", "acknowledge")] == hp
    assert ak["significant"] is False


def _case(policy: str, triggers=()) -> TestCase:
    words = tuple(
        WordTiming(w, i * 0.5, i * 0.5 + 0.4)
        for i, w in enumerate("one two three four five six seven eight nine ten eleven".split())
    )
    t0 = Turn("c", 0, "turn1", "take-turn", "a.wav", "hello", (WordTiming("hello", 0.0, 0.5),), 1.0)
    t1 = Turn("c", 1, "turn2", "take-turn", "b.wav", " ".join(w.text for w in words), words, 5.6)
    data = InstructFDCase(
        policy,
        (ReferenceLine("user", "hello"),),
        (policy,) if policy != "none" else ("backchannel",),
        {},
        ((), tuple(triggers)),
    )
    return TestCase(
        f"c__{policy}",
        "c",
        "instructfd",
        "Floor Hold Signal",
        None if policy == "none" else "x",
        (t0, t1),
        data=data,
    )


def test_plan_item_points_snap_to_word_ends():
    # nominal 2 s and 4 s; word ends at 0.4, 0.9, ..., 1.9 (word 3), 2.4, ... 3.9 (word 7), 4.4, 4.9 ...
    # limit 5.6 - 0.3 = 5.3 -> points 1.9 and 3.9
    case = _case("backchannel", [Trigger("backchannel", 2.45, 5, "mm-hmm")])
    assert proactive_points(case.turns[1]) == (1.9, 3.9)
    item = plan_item(case, "with")
    assert (item.turn, item.points, item.cues) == (1, (1.9, 3.9), {"backchannel": (2.45,)})
    base = plan_item(_case("none", [Trigger("backchannel", 2.45, 5, "mm-hmm")]), "without")
    assert base.judged == ("backchannel",) and base.instruction is None
    with pytest.raises(StudyError, match="no backchannel trigger"):
        plan_item(_case("backchannel"), "with")
    with pytest.raises(StudyError, match="no instruction to show"):
        plan_item(_case("none"), "with")


def test_plan_study_hides_the_instruction_when_there_is_no_baseline():
    from fdeval.benchmarks.instructfd.metrics.human import plan_study

    trig = [Trigger("backchannel", 2.45, 5, "mm-hmm")]
    items = plan_study([_case("backchannel", trig)])
    assert [(i.item_id, i.condition, i.instruction) for i in items] == [
        ("c__backchannel", "with", "x"),
        ("c__backchannel@without", "without", None),
    ]
    with_baseline = plan_study([_case("backchannel", trig), _case("none", trig)])
    assert [i.item_id for i in with_baseline] == ["c__backchannel", "c__none"]
