"""EchoChain human review: the blind export hides the model, labels import back through the key,
bad labels are one-line errors, and imported labels override the automatic ones."""

from __future__ import annotations

import json
import re
import subprocess
import sys

import numpy as np
import pytest
import soundfile as sf

from fdeval.benchmarks.echochain import review
from fdeval.benchmarks.echochain.rubrics import Grade
from fdeval.benchmarks.echochain.scoring import GradedConversation, score_tables
from fdeval.errors import ConfigError

MODEL = "Secret-Model-X7"  # must appear nowhere in an export


def _wav(path, channels=2, seconds=0.2, rate=16000):
    rng = np.random.default_rng(0)
    data = (rng.uniform(-0.5, 0.5, size=(int(rate * seconds), channels)) * 32767).astype(np.int16)
    path.parent.mkdir(parents=True, exist_ok=True)
    sf.write(path, data, rate, subtype="PCM_16")
    return data


def _inputs(run_dir, n=2):
    out = []
    for i in range(n):
        case = f"travel_{i}__{MODEL.lower()}__r0"
        _wav(run_dir / "sessions" / f"{case}.wav")
        out.append(
            {
                "case_id": case,
                "conversation_id": f"travel_{i}",
                "model": [MODEL, "x7-endpoint"],
                "transcript_text": f"[user] plan a trip\n[assistant ({MODEL})] I am secret-model-x7, here is a plan\n",
                "exchanges": [
                    {
                        "case_id": case,
                        "index": 2,
                        "model": MODEL,
                        "message": "plan a trip",
                        "barge_in": "budget dropped",
                        "continuation": f"as {MODEL.upper()} I cut costs",
                        "start_s": 1.5,
                        "end_s": 9.0,
                    }
                ],
                "rubric": [
                    {"criterion_id": "ex2.c1", "text": "uses the new budget"},
                    {"criterion_id": "ex2.c2", "text": "keeps the trip's dates"},
                ],
                "wav_path": f"sessions/{case}.wav",
            }
        )
    return out


@pytest.fixture()
def exported(tmp_path):
    run_dir, out = tmp_path / "run", tmp_path / "export"
    convs = _inputs(run_dir)
    ids = review.export(run_dir, out, convs)
    return run_dir, out, convs, ids


def _label(bid, **kw):
    base = {
        "blind_id": bid,
        "reviewer": "rater-1",
        "time": "2025-03-01T10:00:00+00:00",
        "screening": {
            "coherent": True,
            "naturalistic": True,
            "audio_quality": True,
            "accepted": True,
            "note": "",
        },
        "grades": {"ex2.c1": "fail"},
        "taxonomy": "contextual_inertia",
    }
    base.update(kw)
    return base


def _write(tmp_path, items, name="labels.json"):
    p = tmp_path / name
    p.write_text(json.dumps(items))
    return p


def test_export_hides_the_model_and_keeps_the_key_in_the_run(exported):
    run_dir, out, convs, ids = exported
    assert sorted(p.name for p in out.iterdir()) == sorted(
        [*ids, "index.json", "labels_template.json"]
    )
    for bid in ids:
        assert sorted(p.name for p in (out / bid).iterdir()) == [
            "audio.wav",
            "exchanges.json",
            "rubric.json",
            "transcript.txt",
        ]
    # grep the whole export, audio included, for the model's names and the case ids
    needles = [MODEL.lower(), "x7-endpoint", *[c["case_id"] for c in convs], "travel_0"]
    for f in out.rglob("*"):
        if f.is_file():
            blob = f.read_bytes().lower()
            for s in needles:
                assert s.encode() not in blob, (f, s)
    key = json.loads((run_dir / "review" / "key.json").read_text())
    salt = key["exports"][0]["salt"]
    assert all(salt.encode() not in f.read_bytes() for f in out.rglob("*") if f.is_file())
    assert {v["case_id"] for v in key["exports"][0]["cases"].values()} == {
        c["case_id"] for c in convs
    }
    # the content survives: text, exchange windows, rubric, the same stereo samples
    bid = ids[0]
    text = (out / bid / "transcript.txt").read_text()
    assert "plan a trip" in text and "[hidden]" in text
    ex = json.loads((out / bid / "exchanges.json").read_text())
    assert ex["exchanges"][0]["start_s"] == 1.5 and "model" not in ex["exchanges"][0]
    rub = json.loads((out / bid / "rubric.json").read_text())
    assert [c["criterion_id"] for c in rub["criteria"]] == ["ex2.c1", "ex2.c2"]
    src = next(c for c in convs if review.blind_id(c["case_id"], salt) == bid)
    a, _ = sf.read(run_dir / src["wav_path"], dtype="int16")
    b, _ = sf.read(out / bid / "audio.wav", dtype="int16")
    assert b.shape[1] == 2 and np.array_equal(a, b)


def test_a_second_export_uses_a_new_salt(exported, tmp_path):
    run_dir, _, convs, ids = exported
    ids2 = review.export(run_dir, tmp_path / "export2", convs)
    assert set(ids).isdisjoint(ids2)
    assert len(review.load_key(run_dir)["exports"]) == 2


def test_export_refuses_a_folder_holding_the_key_a_used_folder_and_mono_audio(tmp_path):
    run_dir = tmp_path / "run"
    convs = _inputs(run_dir, 1)
    with pytest.raises(ConfigError, match="review key"):
        review.export(run_dir, run_dir, convs)
    (tmp_path / "used").mkdir()
    (tmp_path / "used" / "x").write_text("keep")
    with pytest.raises(ConfigError, match="new or empty"):
        review.export(run_dir, tmp_path / "used", convs)
    leaky = [dict(convs[0], rubric=[{"criterion_id": f"{MODEL}.c1", "text": "t"}])]
    with pytest.raises(
        ConfigError, match="would show"
    ):  # criterion ids are not rewritten: refuse instead
        review.export(run_dir, tmp_path / "leaky", leaky)
    _wav(run_dir / convs[0]["wav_path"], channels=1)
    with pytest.raises(ConfigError, match=r"conversation 0 .*field wav_path: .*1 channel"):
        review.export(run_dir, tmp_path / "e", convs)


def test_import_maps_blind_ids_back_to_cases(exported, tmp_path):
    run_dir, _, convs, ids = exported
    cases = review.import_labels(
        run_dir, _write(tmp_path, [_label(ids[0]), _label(ids[1], taxonomy=None)])
    )
    key = review.load_key(run_dir)["exports"][0]
    assert cases == [key["cases"][ids[0]]["case_id"], key["cases"][ids[1]]["case_id"]]
    labels = review.human_labels(run_dir)
    assert set(labels) == {c["case_id"] for c in convs}
    rec = labels[cases[0]]
    assert (
        rec["blind_id"] == ids[0]
        and rec["reviewer"] == "rater-1"
        and rec["grades"] == {"ex2.c1": "fail"}
    )
    assert (run_dir / "review" / "labels" / f"{cases[0]}.json").is_file()


@pytest.mark.parametrize(
    "change, message",
    [
        (lambda lab: lab.pop("reviewer"), r"field reviewer: missing"),
        (lambda lab: lab.update(time="yesterday"), r"field time: expected an ISO 8601"),
        (lambda lab: lab.update(blind_id="0" * 16), r"field blind_id: not a conversation"),
        (
            lambda lab: lab["screening"].update(coherent="yes"),
            r"field screening.coherent: expected true or false",
        ),
        (
            lambda lab: lab["screening"].update(naturalistic=False),
            r"field screening.accepted: true although naturalistic",
        ),
        (
            lambda lab: lab.update(grades={"ex9.c1": "pass"}),
            r"field grades.ex9.c1: not a criterion",
        ),
        (
            lambda lab: lab.update(grades={"ex2.c1": "ok"}),
            r"field grades.ex2.c1: expected pass or fail",
        ),
        (lambda lab: lab.update(taxonomy="amnesia"), r"field taxonomy: expected one of"),
        (lambda lab: lab.update(extra=1), r"field extra: unknown"),
        (
            lambda lab: lab.update(rubric=[{"criterion_id": "h1", "text": "t"}], grades={}),
            r"field grades: .*ungraded.*h1",
        ),
        (
            lambda lab: lab.update(
                audit={"auditor": lab["reviewer"], "time": lab["time"], "verdict": "confirmed"}
            ),
            r"field audit.auditor: the reviewer cannot audit their own label",
        ),
        (
            lambda lab: lab.update(
                audit={"auditor": "expert", "time": lab["time"], "verdict": "ok"}
            ),
            r"field audit.verdict: expected one of confirmed, corrected",
        ),
    ],
)
def test_bad_labels_are_one_line_errors_naming_file_item_and_field(
    exported, tmp_path, change, message
):
    run_dir, _, _, ids = exported
    bad = _label(ids[1])
    change(bad)
    path = _write(tmp_path, [_label(ids[0]), bad])
    with pytest.raises(ConfigError) as e:
        review.import_labels(run_dir, path)
    msg = str(e.value)
    assert "\n" not in msg and msg.startswith(f"{path}: item 1 ")
    assert re.search(message, msg), msg
    assert review.human_labels(run_dir) == {}  # nothing written from a file with a bad label


def test_duplicate_labels_and_a_run_without_export_are_errors(exported, tmp_path):
    run_dir, _, _, ids = exported
    with pytest.raises(ConfigError, match="item 1 .*also labelled by item 0"):
        review.import_labels(run_dir, _write(tmp_path, [_label(ids[0]), _label(ids[0])]))
    with pytest.raises(ConfigError, match="no review export"):
        review.import_labels(tmp_path / "other", _write(tmp_path, [_label(ids[0])]))


def _auto(case_id, passed=(True, True), taxonomy=None):
    gs = tuple(Grade(f"ex2.c{i + 1}", p, "auto grader", "auto") for i, p in enumerate(passed))
    return GradedConversation(
        case_id, case_id, MODEL, "seed", "travel", not all(passed), False, gs, gs, taxonomy, "auto"
    )


def test_human_labels_override_grades_taxonomy_and_screening(exported, tmp_path):
    run_dir, _, convs, ids = exported
    key = review.load_key(run_dir)["exports"][0]["cases"]
    case0, case1 = key[ids[0]]["case_id"], key[ids[1]]["case_id"]
    rejected = _label(
        ids[1],
        screening={
            "coherent": True,
            "naturalistic": False,
            "audio_quality": True,
            "accepted": False,
            "note": "test-like phrasing",
        },
    )
    review.import_labels(run_dir, _write(tmp_path, [_label(ids[0]), rejected]))
    labels = review.human_labels(run_dir)

    before = _auto(case0)  # the grader passed both criteria
    after = review.apply_human(before, labels[case0])
    assert [(g.criterion_id, g.passed, g.source) for g in after.grades] == [
        ("ex2.c1", False, "human"),
        ("ex2.c2", True, "auto"),
    ]
    assert (after.taxonomy, after.taxonomy_source) == ("contextual_inertia", "human")
    assert after.control_grades == before.control_grades and not after.screened_out

    rej = review.apply_human(_auto(case1, (False, True), "other"), labels[case1])
    assert rej.screened_out
    r = score_tables(
        [before, _auto(case1, (False, True), "other")], n_resamples=200, confidence=0.9, seed=0
    )[0].rows[0]
    r2 = score_tables([after, rej], n_resamples=200, confidence=0.9, seed=0)[0].rows[0]
    assert (r["n_scored"], r["n_failed"]) == (2, 1)
    assert (r2["n_scored"], r2["n_failed"], r2["n_screened_out"]) == (1, 1, 1)

    # a human pass clears the automatic type; a label's own rubric replaces the automatic criteria
    passing = dict(labels[case0], grades={"ex2.c1": "pass"}, taxonomy=None)
    cleared = review.apply_human(_auto(case0, (False, True), "objective_displacement"), passing)
    assert all(g.passed for g in cleared.grades) and cleared.taxonomy is None
    own = dict(
        labels[case0], rubric=[{"criterion_id": "h1", "text": "new budget"}], grades={"h1": "fail"}
    )
    assert [(g.criterion_id, g.source) for g in review.apply_human(before, own).grades] == [
        ("h1", "human")
    ]
    with pytest.raises(ValueError):
        review.apply_human(_auto("someone-else"), labels[case0])


def test_an_audited_label_is_kept_with_its_audit_and_counted(exported, tmp_path):
    """§5: an expert audits each reviewer's annotations; the audit travels with the label."""
    run_dir, _, _, ids = exported
    case0 = review.load_key(run_dir)["exports"][0]["cases"][ids[0]]["case_id"]
    audited = _label(
        ids[0],
        audit={"auditor": " expert ", "time": "2025-02-01T09:00:00+00:00", "verdict": "corrected"},
    )
    review.import_labels(run_dir, _write(tmp_path, [audited, _label(ids[1])]))
    label = review.human_labels(run_dir)[case0]
    assert label["audit"] == {
        "auditor": "expert",
        "time": "2025-02-01T09:00:00+00:00",
        "verdict": "corrected",
        "note": "",
    }
    conv = review.apply_human(_auto(case0), label)
    assert conv.reviewed and conv.audited
    notes = score_tables([conv], n_resamples=200, confidence=0.9, seed=0)[0].notes
    assert any("1 of 1 reviewed conversations audited by a second person" in n for n in notes)


def test_cli_export_import_and_one_line_errors(tmp_path):
    run_dir = tmp_path / "run"
    convs = _inputs(run_dir)
    assert review.save_review_input(run_dir, convs) == run_dir / "review" / "conversations.json"
    cmd = [sys.executable, "-m", "fdeval.benchmarks.echochain.review"]
    out = tmp_path / "export"
    p = subprocess.run([*cmd, "export", str(run_dir), str(out)], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    assert "exported 2 conversation(s)" in p.stdout
    template = json.loads((out / "labels_template.json").read_text())
    filled = [_label(t["blind_id"]) for t in template]
    p = subprocess.run(
        [*cmd, "import", str(run_dir), str(_write(tmp_path, filled))],
        capture_output=True,
        text=True,
    )
    assert p.returncode == 0, p.stderr
    assert len(review.human_labels(run_dir)) == 2
    filled[0]["taxonomy"] = "nope"
    p = subprocess.run(
        [*cmd, "import", str(run_dir), str(_write(tmp_path, filled, "bad.json"))],
        capture_output=True,
        text=True,
    )
    assert (
        p.returncode == 2
        and "Traceback" not in p.stderr
        and len(p.stderr.strip().splitlines()) == 1
    )
    assert "bad.json: item 0" in p.stderr and "field taxonomy" in p.stderr
    p = subprocess.run(
        [*cmd, "export", str(tmp_path / "nothing"), str(tmp_path / "e2")],
        capture_output=True,
        text=True,
    )
    assert (
        p.returncode == 2
        and "no review input" in p.stderr
        and len(p.stderr.strip().splitlines()) == 1
    )
