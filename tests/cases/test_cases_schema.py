from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any, Callable

import pytest

from helpers.case_data import CASE_ID
from helpers.case_data import valid_case_dict as _valid_dict

from fdeval.benchmarks.instructfd.records import InstructFDCase as IFD
from fdeval.benchmarks.instructfd.records import ReferenceLine, Trigger
from fdeval.cases import case_from_dict, case_to_dict, load_case, load_cases, write_case
from fdeval.errors import CaseError


def test_round_trip(root: Path) -> None:
    d = _valid_dict()
    case = case_from_dict(d, "x.json", root, IFD)
    assert case.case_id == CASE_ID and len(case.turns) == 2
    assert all(t.case_id == CASE_ID for t in case.turns)
    assert [t.index for t in case.turns] == [0, 1]
    assert case.turns[0].barge_in_after_s is None and case.turns[1].subtype == "interrupt"
    assert case.data.reference[-1] == ReferenceLine("model", "Sure, go ahead.", "")
    assert case.data.triggers == ((Trigger("backchannel", 1.9, 6, "yeah"),), ())
    again = case_to_dict(case)
    assert case_from_dict(again, "x.json", root, IFD) == case
    assert again["judge_instructions"] == d["judge_instructions"]
    path = root / "cases" / f"{CASE_ID}.json"
    write_case(case, path)
    assert load_case(path, root, IFD) == case
    assert json.loads(path.read_text())["test_case_id"] == CASE_ID
    assert not [p for p in path.parent.iterdir() if p.name.startswith(".")]


def test_empty_reference_and_defaults(root: Path) -> None:
    d = _valid_dict()
    d["reference"] = []
    for key in ("judge_instructions", "seed", "version"):
        del d[key]
    del d["turns"][0]["triggers"]
    case = case_from_dict(d, "x.json", root, IFD)
    assert case.data.reference == () and case.seed == 0 and case.data.judge_instructions == {}
    assert case.data.triggers == ((), ())


def test_baseline_case(root: Path) -> None:
    d = _valid_dict()
    d["test_case_id"] = "conv1__none"
    d["policy_name"] = "none"
    d["system_instruction"] = None
    d["judge_policies"] = ["backchannel", "listen"]
    d["judge_instructions"] = {"backchannel": "a", "listen": "b"}
    case = case_from_dict(d, "x.json", root, IFD)
    assert case.system_instruction is None and case.data.judge_policies == ("backchannel", "listen")


def test_written_form_is_the_file_format(root: Path) -> None:
    """`case_to_dict` gives back every key of an Instruct-FD case file, its record's included: it is
    what write_case writes and what a run's case digest hashes (sorted keys), so a digest of a case
    made before its Instruct-FD fields moved into `TestCase.data` stays the same."""
    d = _valid_dict()
    d["turns"][1]["triggers"] = []  # written for every turn
    d["reference"][-1]["tag"] = ""  # the default, written
    d["voice"] = {
        "voice": "en-us+f2",
        "backend": "espeak",
        "rate_wpm": 165,
    }  # optional, written when known
    again = case_to_dict(case_from_dict(d, "x.json", root, IFD))
    assert again == d
    assert list(again) == [
        "schema_version",
        "test_case_id",
        "conversation_id",
        "benchmark",
        "scenario",
        *IFD.case_keys,
        "system_instruction",
        "seed",
        "version",
        "turns",
    ]


def test_a_case_without_a_record(root: Path) -> None:
    """The generic keys alone load as a case with no benchmark record; a record's keys are then
    unknown keys, named with the valid ones."""
    d = _valid_dict()
    for key in IFD.case_keys:
        d.pop(key, None)
    for turn in d["turns"]:
        turn.pop("triggers", None)
    case = case_from_dict(d, "x.json", root)
    assert case.data is None and case.system_instruction == d["system_instruction"]
    assert case_to_dict(case) == d
    path = root / "cases" / "plain.json"
    write_case(case, path)
    assert load_case(path, root) == case
    with pytest.raises(CaseError) as info:
        case_from_dict(_valid_dict(), "x.json", root)
    assert (
        info.value.field == "policy_name"
        and "unknown key 'policy_name'; valid keys: schema_version" in info.value.message
    )


def _set(path: str, value: Any) -> Callable[[dict], None]:
    """Mutator: set a dotted/indexed path (e.g. 'turns.1.subtype') to value; DELETE removes it."""

    def apply(d: dict) -> None:
        keys = [int(k) if k.isdigit() else k for k in path.split(".")]
        obj: Any = d
        for k in keys[:-1]:
            obj = obj[k]
        if value is DELETE:
            del obj[keys[-1]]
        else:
            obj[keys[-1]] = value

    return apply


DELETE = object()

BAD_INPUTS: list[tuple[str, Callable[[dict], None], str, str]] = [
    # (id, mutation, expected field, expected message fragment)
    ("missing_case_field", _set("scenario", DELETE), "scenario", "missing"),
    ("missing_turn_field", _set("turns.0.audio_path", DELETE), "turns[0].audio_path", "missing"),
    (
        "missing_barge_in_handling",
        _set("turns.1.barge_in_handling", DELETE),
        "turns[1].barge_in_handling",
        "required",
    ),
    (
        "bad_turn_type",
        _set("turns.0.turn_type", "take_turn"),
        "turns[0].turn_type",
        "invalid value",
    ),
    ("bad_subtype", _set("turns.1.subtype", "cough"), "turns[1].subtype", "invalid value"),
    (
        "bad_handling",
        _set("turns.1.barge_in_handling", "pause"),
        "turns[1].barge_in_handling",
        "invalid value",
    ),
    ("bad_policy", _set("policy_name", "shout"), "policy_name", "invalid value"),
    (
        "bad_judge_policy",
        _set("judge_policies", ["backchannel", "none"]),
        "judge_policies[1]",
        "invalid value",
    ),
    ("empty_judge_policies", _set("judge_policies", []), "judge_policies", "empty"),
    ("bad_tag", _set("reference.1.tag", "laugh"), "reference[1].tag", "invalid value"),
    ("bad_speaker", _set("turns.0.speaker", "model"), "turns[0].speaker", "invalid value"),
    ("negative_delay", _set("turns.1.barge_in_after_s", -0.5), "turns[1].barge_in_after_s", ">= 0"),
    ("zero_timeout", _set("turns.0.timeout_s", 0), "turns[0].timeout_s", "> 0"),
    ("string_number", _set("turns.0.timeout_s", "20"), "turns[0].timeout_s", "expected a number"),
    ("bool_number", _set("seed", True), "seed", "expected an integer"),
    (
        "barge_in_key_on_take_turn",
        _set("turns.0.subtype", "interrupt"),
        "turns[0].subtype",
        "only allowed",
    ),
    (
        "path_escape",
        _set("turns.0.audio_path", "audio/../../etc/passwd"),
        "turns[0].audio_path",
        "'..'",
    ),
    ("absolute_path", _set("turns.0.audio_path", "/etc/passwd"), "turns[0].audio_path", "absolute"),
    (
        "missing_audio",
        _set("turns.1.audio_path", "audio/conv1/nope.wav"),
        "turns[1].audio_path",
        "not found",
    ),
    ("unknown_key", _set("turns.1.volume", 3), "turns[1].volume", "valid keys: speaker"),
    ("unknown_case_key", _set("notes", "x"), "notes", "valid keys: schema_version"),
    (
        "non_monotonic_words",
        _set("turns.1.words.2.start_s", 0.1),
        "turns[1].words[2].start_s",
        "monotonic",
    ),
    (
        "word_end_before_start",
        _set("turns.1.words.1.end_s", 0.2),
        "turns[1].words[1].end_s",
        "before start",
    ),
    (
        "word_past_duration",
        _set("turns.1.words.2.end_s", 1.5),
        "turns[1].words[2].end_s",
        "past the turn duration",
    ),
    ("word_count", _set("turns.1.text", "wait hold on now"), "turns[1].words", "whitespace tokens"),
    (
        "trigger_past_duration",
        _set("turns.0.triggers.0.at_s", 3.5),
        "turns[0].triggers[0].at_s",
        "past the turn duration",
    ),
    (
        "trigger_not_between_words",
        _set("turns.0.triggers.0.at_s", 0.5),
        "turns[0].triggers[0].at_s",
        "before the end of word",
    ),
    (
        "trigger_bad_kind",
        _set("turns.0.triggers.0.kind", "laugh"),
        "turns[0].triggers[0].kind",
        "invalid value",
    ),
    ("null_instruction", _set("system_instruction", None), "system_instruction", "only 'none'"),
    ("instruction_on_baseline", _set("policy_name", "none"), "system_instruction", "must be null"),
    ("own_policy_not_judged", _set("judge_policies", ["listen"]), "judge_policies", "own policy"),
    ("duplicate_label", _set("turns.1.label", "turn1"), "turns[1].label", "duplicate label"),
    ("bad_schema_version", _set("schema_version", 99), "schema_version", "unsupported"),
    ("empty_turns", _set("turns", []), "turns", "empty"),
]


@pytest.mark.parametrize(
    "mutate,field,fragment", [b[1:] for b in BAD_INPUTS], ids=[b[0] for b in BAD_INPUTS]
)
def test_bad_input_names_file_case_and_field(root: Path, mutate, field: str, fragment: str) -> None:
    d = _valid_dict()
    mutate(d)
    path = root / "cases" / "bad.json"
    path.write_text(json.dumps(d))
    with pytest.raises(CaseError) as info:
        load_case(path, root, IFD)
    err = info.value
    assert err.path == str(path)
    assert err.case_id == CASE_ID
    assert err.field == field
    assert fragment in err.message
    line = str(err)
    assert str(path) in line and CASE_ID in line and field in line and "\n" not in line


def test_symlink_escaping_root_is_rejected(
    root: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    outside = tmp_path_factory.mktemp("outside") / "x.wav"
    outside.write_bytes(b"RIFF")
    (root / "audio" / "link.wav").symlink_to(outside)
    d = _valid_dict()
    d["turns"][0]["audio_path"] = "audio/link.wav"
    with pytest.raises(CaseError, match="outside the dataset root") as info:
        case_from_dict(d, "c.json", root, IFD)
    assert info.value.field == "turns[0].audio_path"


def test_root_none_skips_existence_but_not_shape() -> None:
    d = _valid_dict()
    case_from_dict(d, "c.json", None, IFD)
    d["turns"][0]["audio_path"] = "../x.wav"
    with pytest.raises(CaseError):
        case_from_dict(d, "c.json", None, IFD)


def test_not_an_object_and_bad_json(root: Path) -> None:
    with pytest.raises(CaseError, match="expected an object"):
        case_from_dict([1, 2], "c.json", root, IFD)
    p = root / "cases" / "broken.json"
    p.write_text("{not json")
    with pytest.raises(CaseError, match="invalid JSON") as info:
        load_case(p, root, IFD)
    assert info.value.path == str(p)


def test_load_cases_sorted_and_duplicates(root: Path) -> None:
    cases_dir = root / "cases"
    for cid in ("b_case__listen", "a_case__listen"):
        d = _valid_dict()
        d.update(
            test_case_id=cid, policy_name="listen", judge_policies=["listen"], judge_instructions={}
        )
        (cases_dir / f"{cid}.json").write_text(json.dumps(d))
    (cases_dir / ".tmp_ignored.json").write_text("garbage")
    assert [c.case_id for c in load_cases(cases_dir, root, IFD)] == [
        "a_case__listen",
        "b_case__listen",
    ]

    d = _valid_dict()
    d.update(
        test_case_id="a_case__listen",
        policy_name="listen",
        judge_policies=["listen"],
        judge_instructions={},
    )
    (cases_dir / "zz_copy.json").write_text(json.dumps(d))
    with pytest.raises(CaseError, match="duplicate case id") as info:
        load_cases(cases_dir, root, IFD)
    err = info.value
    assert err.case_id == "a_case__listen" and err.field == "test_case_id"
    assert "zz_copy.json" in str(err) and "a_case__listen.json" in str(err)


def test_load_cases_missing_dir(tmp_path: Path) -> None:
    with pytest.raises(CaseError, match="not found"):
        load_cases(tmp_path / "nope", tmp_path, IFD)


def test_write_case_refuses_invalid(root: Path) -> None:
    case = case_from_dict(_valid_dict(), "x.json", root, IFD)
    bad = dataclasses.replace(case, turns=())
    with pytest.raises(CaseError, match="must not be empty"):
        write_case(bad, root / "cases" / "bad.json")
    assert not (root / "cases" / "bad.json").exists()
