"""The labelled EchoChain conversations (tests/benchmarks/echochain/labelled/): the set's shape, and
the offline classifier and grader against it (no model sessions: a few seconds).

Labels were decided by reading the paper (sections 2, 5, 6 and A.4), never by running the
pipeline; an agreement below the bar is a finding about the offline rules, not a reason to change
a label. ``scripts/echochain_agreement.py`` prints the same figures as a table.
"""

from __future__ import annotations

import copy
import json
from collections import Counter

import pytest

import echochain_labelled_set as L

from fdeval.benchmarks.echochain.classifier import ClassifierOutput, said, vote
from fdeval.benchmarks.echochain.steps import propose_taxonomy
from fdeval.benchmarks.echochain.taxonomy import TAXONOMY, category

MIN_ITEMS, MIN_PER_CATEGORY = 44, 5
MIN_PASSES, MIN_PARAPHRASES, MIN_NAMES_REPLACED = 12, 3, 3
# Issue 26's bars. Measured with classifier v3 (commit message and docs/echochain.md have the table):
# 54/63 (85.7 %) failure detection, 37/39 taxonomy, 144/159 criteria. On the ten items marked
# held_out (written for v3 by a reader of the paper who never saw the rules, and not used to make
# them) detection is 7/10: paraphrases and a negation word the rules do not know are what they miss.
MIN_DETECTION, MIN_TAXONOMY, MIN_CRITERIA = 0.85, 0.70, 0.80


@pytest.fixture(scope="module")
def items() -> list[L.LabelledItem]:
    return L.load()


@pytest.fixture(scope="module")
def result(items) -> L.Agreement:
    return L.agreement(items)


def test_set_meets_the_counts(items):
    assert len(items) >= MIN_ITEMS
    groups = Counter(it.group for it in items)
    for c in TAXONOMY:
        assert groups[c] >= MIN_PER_CATEGORY, f"{c}: {groups[c]} items"
    assert groups[L.PASS] >= MIN_PASSES
    tags = Counter(t for it in items for t in it.tags)
    assert (
        tags["pass:paraphrase"] >= MIN_PARAPHRASES
        and tags["pass:names-replaced"] >= MIN_NAMES_REPLACED
    )
    # the cases the issue names, each present
    assert (
        tags["ia:two-later"] >= 1 and tags["ia:one-later"] >= 3
    )  # constraint dropped one or two exchanges on
    assert tags["hard-negative:objective_displacement"] >= 2 and tags["other:factual"] >= 1
    assert tags["ci:contradictory"] >= 2 and tags["ci:wrong-change"] >= 2
    assert all(
        it.evaluated.index > 2
        for it in items
        if "ia:one-later" in it.tags or "ia:two-later" in it.tags
    )


def test_every_item_is_a_scripted_conversation_the_offline_roles_read(items):
    for it in items:
        assert it.evaluated.interrupted and all(e.case_id == it.id for e in it.exchanges)
        script = it.seed.exchanges[it.evaluated.index - 1]
        assert [e.message for e in it.exchanges] == [
            s.message for s in it.seed.exchanges[: len(it.exchanges)]
        ]
        assert it.evaluated.barge_in == script.barge_in
        assert [cid for cid, _ in it.grades] == [c.criterion_id for c in it.rubric().criteria]
        # a paraphrase shares no word with the script's evidence or the rubric's required words
        if "pass:paraphrase" in it.tags:
            words = set(script.evidence) | {w for c in it.rubric().criteria for w in c.require_any}
            assert not said(it.evaluated.continuation, words), it.id


def test_the_offline_pipeline_agrees_with_the_labels(result):
    s = result.overall
    report = result.table() + "\n" + "\n".join(result.disagreements())
    assert s["detect"] >= MIN_DETECTION * s["n"], report
    assert s["taxonomy"] >= MIN_TAXONOMY * s["both"], report
    assert s["criteria_agree"] >= MIN_CRITERIA * s["criteria"], report


def test_unflagged_conversations_get_no_category_even_when_a_criterion_fails(result):
    for r in result.rows:
        if not r.flagged:
            assert r.category is None, r.item.id
    assert any(
        not r.flagged and not all(p for _, p in r.grades) for r in result.rows
    )  # the case exists


# ------------------------------------------------------------------------------------------------
# The mapping from A.4 fields to the paper's categories (taxonomy.category), and propose_taxonomy


@pytest.mark.parametrize(
    "memory, integration, code, want",
    [
        (True, "NONE", "dsr_f1_ignores", "contextual_inertia"),  # acknowledged, content unchanged
        (True, "NONE", "dsr_f3_contradictory", "contextual_inertia"),  # old and new side by side
        (True, "PARTIAL", "dsr_f4_double_count", "contextual_inertia"),
        (
            False,
            "GOOD",
            "dsr_f2_stale_later",
            "interruption_amnesia",
        ),  # an earlier constraint dropped
        (True, "PARTIAL", "dsr_f2_stale_later", "interruption_amnesia"),
        (False, "GOOD", "dsr_f1_ignores", "objective_displacement"),  # only the barge-in answered
        (False, "PARTIAL", None, "objective_displacement"),
        (False, "NONE", "dsr_f1_ignores", "other"),  # neither the task nor the update
    ],
)
def test_category_of_a4_fields(memory, integration, code, want):
    assert category(memory, integration, code) == want


def test_category_rejects_unknown_values():
    with pytest.raises(ValueError, match="integration"):
        category(True, "OK", None)
    with pytest.raises(ValueError, match="failure type"):
        category(True, "NONE", "dsr_f9")


def _sample(memory: bool, integration: str, code: str | None) -> ClassifierOutput:
    return ClassifierOutput(
        code is not None, 2 if code else None, code, "e", "b", "a", memory, integration, "r", "LOW"
    )


def test_propose_taxonomy_labels_flagged_verdicts_only():
    ok = _sample(True, "GOOD", None)
    assert (
        propose_taxonomy(vote("c", 2, [ok, ok, ok], rule="paper", k=3, errors=(), classifier={}))
        is None
    )
    # a rubric failure the classifier did not flag has no automatic category (paper section 5)
    rubric_only = vote(
        "c",
        2,
        [_sample(True, "PARTIAL", "dsr_f3_contradictory")],
        rule="paper",
        k=1,
        errors=(),
        classifier={},
    )
    assert rubric_only.flagged is False and propose_taxonomy(rubric_only) is None
    assert (
        propose_taxonomy(vote("c", 2, [], rule="paper", k=1, errors=("x",), classifier={})) is None
    )  # error
    od, ci = _sample(False, "GOOD", "dsr_f1_ignores"), _sample(True, "NONE", "dsr_f1_ignores")
    assert (
        propose_taxonomy(vote("c", 2, [od, ci, od], rule="paper", k=3, errors=(), classifier={}))
        == "objective_displacement"
    )  # the most common category among the flagging samples
    assert (
        propose_taxonomy(vote("c", 2, [od, ci], rule="paper", k=2, errors=(), classifier={}))
        == "contextual_inertia"
    )  # a tie: TAXONOMY order


# ------------------------------------------------------------------------------------------------
# The loader names a bad item


def _doc(**over) -> tuple[dict, dict]:
    """A copy of the first pass item as `bad_item`, with `over` applied ("a/b/0/c": value; KeyError
    deletes the key), and the file document holding both."""
    src = json.loads((L.LABELLED_DIR / "pass.json").read_text())
    good = copy.deepcopy(src["items"][0])
    bad = copy.deepcopy(good)
    bad["id"] = "bad_item"
    for path, value in over.items():
        target = bad
        keys = path.split("/")
        for k in keys[:-1]:
            target = target[int(k)] if k.isdigit() else target[k]
        if value is KeyError:
            del target[keys[-1]]
        else:
            target[int(keys[-1]) if keys[-1].isdigit() else keys[-1]] = value
    return {"group": "pass", "description": "x", "items": [good, bad]}, good


@pytest.mark.parametrize(
    "over, field",
    [
        ({"failure": "no"}, "failure"),
        ({"colour": "red"}, "colour"),
        ({"why": "Fine. Really fine."}, "why"),
        ({"seed": "no-such-seed"}, "seed"),
        ({"grades/ex2.c1": "ok"}, "grades.ex2.c1"),
        ({"grades/ex2.c2": KeyError}, "grades"),
        ({"category": "contextual_inertia"}, "category"),  # a passing reply has none
        ({"exchanges/1/message": "Something the seed never scripted?"}, "exchanges[1].message"),
        ({"exchanges/1/index": 3}, "exchanges[1].index"),
        ({"exchanges/0/answer_before": "cut in"}, "exchanges[0].answer_before"),
        ({"exchanges/1/continuation": KeyError}, "exchanges[1].continuation"),
        ({"extra_criteria": [{"criterion_id": "r.c1", "text": "t"}]}, "extra_criteria[0]"),
    ],
)
def test_a_bad_item_is_named_by_file_item_and_field(tmp_path, over, field):
    doc, _ = _doc(**over)
    path = tmp_path / "pass.json"
    path.write_text(json.dumps(doc))
    with pytest.raises(L.LabelledSetError) as e:
        L.load(tmp_path)
    assert str(path) in str(e.value) and "'bad_item'" in str(e.value) and e.value.field == field, (
        str(e.value)
    )


def test_a_failing_reply_needs_its_category_and_the_right_file(tmp_path):
    doc, _ = _doc(**{"grades/ex2.c1": "fail"})
    (tmp_path / "pass.json").write_text(json.dumps(doc))
    with pytest.raises(L.LabelledSetError, match="needs its category"):
        L.load(tmp_path)
    doc, _ = _doc(**{"grades/ex2.c1": "fail", "category": "other"})
    (tmp_path / "pass.json").write_text(json.dumps(doc))
    with pytest.raises(L.LabelledSetError, match="in the file of group 'pass'"):
        L.load(tmp_path)


def test_duplicate_ids_across_files_are_refused(tmp_path):
    doc, good = _doc()
    (tmp_path / "pass.json").write_text(json.dumps({**doc, "items": [good]}))
    other = copy.deepcopy(good) | {"failure": True, "category": "other"}
    (tmp_path / "other.json").write_text(
        json.dumps({"group": "other", "description": "x", "items": [other]})
    )
    with pytest.raises(L.LabelledSetError, match="already used in other.json"):
        L.load(tmp_path)
