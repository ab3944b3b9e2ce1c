"""The labelled Instruct-FD set (tests/judges/labelled/): its shape, and the rules judge against it.

Labels were decided by reading the paper's judge prompt (A.11), never by running a judge; an
agreement below the bar is a finding about the judge, not a reason to change a label.
"""

from __future__ import annotations

import json
from collections import Counter

import pytest

import labelled_set as L

from fdeval.benchmarks.instructfd.judges.rules import RulesJudge
from fdeval.benchmarks.instructfd.records import POLICIES

MIN_ITEMS, MIN_PER_POLICY, MIN_PER_LABEL = 48, 8, 3
MIN_OVERALL, MIN_PER_INSTRUCTION = 0.90, 0.80

# The hard cases of issue 12 ("What is wrong" item 4) and both sides of each boundary, by tag.
HARD_CASES = {
    "issue12:ack-adapts": "adhere",
    "issue12:ack-resumes-verbatim": "not_adhere",
    "issue12:ack-generic": "not_adhere",
    "issue12:yield-overlap<2s": "adhere",
    "issue12:yield-overlap>2s": "not_adhere",
    "issue12:continue-completes": "adhere",
    "issue12:continue-gap<2s": "adhere",
    "issue12:continue-gap>2s": "not_adhere",
    "issue12:continue-breaks-off": "not_adhere",
    "issue12:bc-at-cue": "adhere",
    "issue12:bc-2.6s-next-boundary": "adhere",
    "issue12:bc-far-from-cue": "not_adhere",
    "issue12:bc-4-words": "not_adhere",
    "issue12:clause-boundary-unmarked": "adhere",
    "issue12:int-at-claim": "adhere",
    "issue12:int-0.57s-before-clause-end": "adhere",
    "issue12:int-4s-late": "not_adhere",
    "issue12:int-terse-relevant": "adhere",
    "issue12:int-off-topic": "not_adhere",
    "issue12:listen-end-overlap<=5": "adhere",
    "issue12:listen-midturn-backchannel": "not_adhere",
    "issue12:no-model-speech": "not_adhere",
    "issue12:unanswered-turn": "not_adhere",
}


@pytest.fixture(scope="module")
def items() -> list[L.LabelledItem]:
    return L.load()


def test_set_meets_the_counts(items):
    assert len(items) >= MIN_ITEMS
    counts = Counter((it.policy, it.label) for it in items)
    for p in POLICIES:
        n = counts[p, "adhere"] + counts[p, "not_adhere"]
        assert n >= MIN_PER_POLICY, f"{p}: {n} items"
        for label in L.LABELS:  # roughly balanced: both verdicts well represented
            assert counts[p, label] >= MIN_PER_LABEL, f"{p}: {counts[p, label]} {label}"
    share = sum(it.label == "adhere" for it in items) / len(items)
    assert 0.35 <= share <= 0.65, f"adhere share {share:.2f}"


def test_hard_cases_are_present_with_their_verdicts(items):
    by_tag = {tag: it for it in items for tag in it.tags}
    missing = sorted(set(HARD_CASES) - set(by_tag))
    assert not missing, f"no item tagged {missing}"
    wrong = {
        t: (by_tag[t].id, by_tag[t].label)
        for t, lab in HARD_CASES.items()
        if by_tag[t].label != lab
    }
    assert not wrong, wrong


def test_every_item_builds_a_judgeable_session(items):
    for it in items:
        case, transcript = it.build()
        assert case.case_id == transcript.case_id == it.id
        assert case.data.policy_name == it.policy and case.system_instruction == it.instruction
        assert len(transcript.user_turns) == len(it.turns)
        # the turn specs' trigger points reach the case (the judges read them from there)
        assert sum(len(t) for t in case.data.triggers) == sum(len(t["triggers"]) for t in it.turns)
        assert (
            any(w.speaker == "model" for w in transcript.words)
            or "degenerate:no-model-speech" in it.tags
        )


def _item(**over):
    base = {
        "id": "bad_item",
        "policy": "listen",
        "label": "adhere",
        "why": "Silent, then answers.",
        "instruction": "Listen.",
        "tags": [],
        "transcript": ["[0.00-1.20] USER: how are you today", "[2.00-3.00] MODEL: fine thanks"],
        "turns": [
            {"span": [0.0, 1.2], "kind": "take-turn", "text": "How are you today?", "triggers": []}
        ],
    }
    base.update(over)
    return base


@pytest.mark.parametrize(
    "over, field",
    [
        ({"label": "yes"}, "label"),
        ({"policy": "interrupt"}, "policy"),
        ({"colour": "red"}, "colour"),
        ({"why": ""}, "why"),
        ({"why": "Silent. Then answers."}, "why"),
        ({"transcript": ["[2.0-1.0] USER: hi"]}, "transcript.line 1"),
        (
            {
                "turns": [
                    {
                        "span": [0.0, 1.2],
                        "kind": "take-turn",
                        "text": "How were you today?",
                        "triggers": [],
                    }
                ]
            },
            "turns[0].text",
        ),
        (
            {
                "turns": [
                    {
                        "span": [0.0, 1.2],
                        "kind": "take-turn",
                        "text": "How are you today?",
                        "triggers": [["backchannel", 9, "mm-hmm"]],
                    }
                ]
            },
            "turns[0].triggers[0]",
        ),
        (
            {
                "turns": [
                    {
                        "span": [0.0, 0.6],
                        "kind": "take-turn",
                        "text": "How are you today?",
                        "triggers": [],
                    }
                ]
            },
            "turns",
        ),
        (
            {
                "turns": [
                    {
                        "span": [0.0, 1.2],
                        "kind": "barge",
                        "text": "How are you today?",
                        "triggers": [],
                    }
                ]
            },
            "turns[0].kind",
        ),
    ],
)
def test_a_bad_item_is_named_by_file_item_and_field(tmp_path, over, field):
    path = tmp_path / "listen.json"
    path.write_text(
        json.dumps(
            {
                "instruction": "listen",
                "description": "x",
                "items": [_item(), _item(**over, id="b2")],
            }
        )
    )
    with pytest.raises(L.LabelledSetError) as e:
        L.load(tmp_path)
    assert str(path) in str(e.value) and "'b2'" in str(e.value) and e.value.field == field, str(
        e.value
    )


def test_the_good_stand_in_item_loads(tmp_path):
    (tmp_path / "listen.json").write_text(
        json.dumps({"instruction": "listen", "description": "x", "items": [_item()]})
    )
    (it,) = L.load(tmp_path)
    assert it.build()[1].user_turns[0].n_words_total == 4


def test_duplicate_ids_across_files_are_refused(tmp_path):
    for name in ("a.json", "b.json"):
        (tmp_path / name).write_text(
            json.dumps({"instruction": "listen", "description": "x", "items": [_item()]})
        )
    with pytest.raises(L.LabelledSetError, match="already used in a.json"):
        L.load(tmp_path)


def test_rules_judge_agrees_with_the_labels(items):
    result = L.agreement(RulesJudge(), items)
    n, k = result.overall
    low = {
        p: (k_p, n_p)
        for p, (n_p, k_p) in result.by_policy().items()
        if k_p < MIN_PER_INSTRUCTION * n_p
    }
    report = (
        result.table()
        + "\ndisagreements: "
        + ", ".join(f"{it.id} (label {it.label}, judge {v})" for it, v, _ in result.disagreements())
    )
    assert k >= MIN_OVERALL * n and not low, report
