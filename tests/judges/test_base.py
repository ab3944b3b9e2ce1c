"""Verdicts on disk, and the judge interface."""

from __future__ import annotations

import json

import pytest

from judge_fixtures import Session

from fdeval.benchmarks.instructfd.judges.base import (
    Judge,
    VerdictError,
    judge_case,
    load_verdict,
    verdict_from_dict,
    verdict_to_dict,
    write_verdict,
)
from fdeval.benchmarks.instructfd.judges.rules import RulesJudge
from fdeval.benchmarks.instructfd.records import Verdict

V = Verdict(
    "c1__listen",
    "listen",
    "not_adhere",
    "Step 1 ...",
    "rules",
    "1",
    "abcd",
    {"no_backchannel": False},
)


def test_round_trip(tmp_path):
    d = verdict_to_dict(V)
    assert list(d) == [
        "case_id",
        "policy",
        "verdict",
        "reasoning",
        "judge",
        "judge_version",
        "prompt_hash",
        "checks",
    ]
    back = verdict_from_dict(json.loads(json.dumps(d)))
    assert back == V and back.checks == V.checks
    # A runner may add provenance to the file; it is ignored on reading.
    assert verdict_from_dict({**d, "model_id": "moshi"}) == V
    write_verdict(V, tmp_path / "v.json")
    assert load_verdict(tmp_path / "v.json") == V


@pytest.mark.parametrize(
    "edit, field",
    [
        (lambda d: d.pop("prompt_hash"), "prompt_hash"),
        (lambda d: d.update(verdict="yes"), "verdict"),
        (lambda d: d.update(case_id=3), "case_id"),
        (lambda d: d.update(judge=" "), "judge"),
        (lambda d: d.update(checks=[True]), "checks"),
        (lambda d: d.update(checks={"x": 1}), "checks.x"),
    ],
)
def test_validation(edit, field):
    d = verdict_to_dict(V)
    edit(d)
    with pytest.raises(VerdictError) as e:
        verdict_from_dict(d, "verdicts/c1__listen@listen.json")
    assert e.value.field == field and str(e.value).startswith(
        "verdicts/c1__listen@listen.json: case "
    )


def test_load_missing(tmp_path):
    with pytest.raises(VerdictError, match="not found"):
        load_verdict(tmp_path / "nope.json")


def test_judge_interface_and_judge_case():
    judge = RulesJudge()
    assert isinstance(judge, Judge)
    assert judge.provenance() == {
        "judge": "rules",
        "judge_version": judge.version,
        "prompt_hash": judge.prompt_hash,
    }
    case, transcript = (
        Session("c__none", "none", judge_policies=("listen", "backchannel"))
        .user("one two three four five six", 0.0)
        .model("sure thing", 3.0)
        .build()
    )
    verdicts = judge_case(judge, case, transcript)
    assert [(v.policy, v.verdict) for v in verdicts] == [
        ("listen", "adhere"),
        ("backchannel", "error"),
    ]
    assert all(v.judge == "rules" and v.prompt_hash == judge.prompt_hash for v in verdicts)
    with pytest.raises(ValueError):
        judge.verdict("c", "listen", "maybe", "")
