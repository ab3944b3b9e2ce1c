"""`fdeval.report.runview.open_run` on real run folders of all three benchmarks (reference model,
offline judges), and on one whose sessions were then made invalid, failed and missing."""

from __future__ import annotations

import json
import shutil

import h5py
import pytest

from fdeval.engine.run import step_dir
from fdeval.errors import FdevalError
from fdeval.report.runview import open_run
from fdeval.report.timeline import session_log, session_words, triggers_of


def test_instructfd_run_lists_every_case_with_its_verdicts(ifd_run):
    v = open_run(ifd_run)
    meta = json.loads((ifd_run / "run.json").read_text())
    assert (v.benchmark, v.model, v.run_id) == ("instructfd", "reference", meta["run_id"])
    assert v.model_id == json.loads((ifd_run / "model.json").read_text())["model_id"]
    assert sorted(s.case.case_id for s in v.sessions) == sorted(
        [
            "fresh_pasta_stop__acknowledge",
            "fresh_pasta_stop__none",
            "bathroom_cleaning_mix__interrupt",
            "house_savings_plan__backchannel",
        ]
    )
    for s in v.sessions:
        assert (s.state, s.reason) == ("usable", "")
        assert s.wav == ifd_run / "sessions" / f"{s.case.case_id}.wav" and s.log.is_file()
        assert s.transcript == step_dir(ifd_run, "transcribe") / f"{s.case.case_id}.json"
        verdicts = s.results["judge"]
        assert [r.key for r in verdicts] == list(s.case.data.judge_policies)
        for r in verdicts:  # the same value the verdict file holds
            d = json.loads(
                (step_dir(ifd_run, "judge") / f"{s.case.case_id}@{r.key}.json").read_text()
            )
            assert r.value == d["verdict"] and r.status == "ok"
    assert v.steps == {
        "transcribe": meta["steps"]["transcribe"],
        "judge": meta["steps"]["judge"],
    }  # which judge
    assert v.session("fresh_pasta_stop__none").case.system_instruction is None
    with pytest.raises(FdevalError, match="no case 'nope'"):
        v.session("nope")


def test_echochain_and_tact_runs_read_with_no_benchmark_code(echo_run, tact_run):
    e = open_run(echo_run)
    assert e.benchmark == "echochain" and e.sessions
    for s in e.sessions:
        assert s.state == "usable"
        assert s.transcript == step_dir(echo_run, "segment") / f"{s.case.case_id}.json"
        assert "grade" in s.results and all(r.case_id == s.case.case_id for r in s.results["grade"])
    t = open_run(tact_run)
    assert t.benchmark == "tact" and len(t.sessions) == 4
    for s in t.sessions:
        assert (
            s.state == "usable"
            and s.transcript == step_dir(tact_run, "measure") / f"{s.case.case_id}.json"
        )
        assert set(s.results) <= {"measure", "posterior"} and s.results


def test_invalid_failed_and_missing_sessions_say_why(ifd_run, tmp_path):
    out = shutil.copytree(
        ifd_run.parents[2], tmp_path / "out"
    )  # a moved tree: out_root is the third parent
    run = out / ifd_run.relative_to(ifd_run.parents[2])
    with h5py.File(
        run / "sessions" / "fresh_pasta_stop__none.h5", "r+"
    ) as f:  # what a broken clock records
        f.attrs["valid"], f.attrs["invalid_reason"] = (
            False,
            "pacing lag 0.31 s over the 0.1 s bound",
        )
    (run / "sessions" / "bathroom_cleaning_mix__interrupt.h5").unlink()
    (run / "sessions" / "bathroom_cleaning_mix__interrupt.error.json").write_text(
        json.dumps({"error": "ModelUnavailable: server lost"})
    )
    (run / "sessions" / "house_savings_plan__backchannel.h5").unlink()
    v = open_run(run)
    assert v.run_dir == run.resolve()
    got = {s.case.case_id: (s.state, s.reason, bool(s.results)) for s in v.sessions}
    assert got == {
        "fresh_pasta_stop__none": ("invalid", "pacing lag 0.31 s over the 0.1 s bound", False),
        "bathroom_cleaning_mix__interrupt": ("failed", "ModelUnavailable: server lost", False),
        "house_savings_plan__backchannel": ("missing", "missing", False),
        "fresh_pasta_stop__acknowledge": ("usable", "", True),
    }
    assert v.session("house_savings_plan__backchannel").log is None


def test_a_folder_that_is_not_a_run_is_one_line(tmp_path):
    with pytest.raises(FdevalError, match="run.json"):
        open_run(tmp_path)
    (tmp_path / "run.json").write_text("{}")
    with pytest.raises(FdevalError, match="no benchmark"):
        open_run(tmp_path)


def test_a_tact_session_shows_its_decision_point_the_focal_lines_and_names_its_onset(tact_run):
    """A TACT turn has text but no word timings: readers show the episode's focal lines (timed by
    line) in the user lane, mark the decision point, and key the posterior step's value as what it
    is, the onset in seconds."""
    t = open_run(tact_run)
    for s in t.sessions:
        log = session_log(s.log)
        words, source = session_words(s, log)
        user = [w for w in words if w["speaker"] == "user"]
        shown = [w.text for ws in s.case.data.shown_words for w in ws]
        assert shown and [w["text"] for w in user] == shown, source
        assert all(
            not turn.words for turn in s.case.turns
        )  # display only: never streamed to the model
        last = log["turns"][-1]
        (mark,) = triggers_of(s, log["turns"])
        decision_s = float(last["start_s"]) + s.case.data.decision_after_last_turn_s
        assert mark == (pytest.approx(decision_s), "decision point")
        assert all(
            w["start_s"] < decision_s for w in user
        )  # the context ends at the decision point
        (r,) = s.results["posterior"]
        assert r.key == "onset_s"
        assert (
            r.value is None or f"response {r.value:+.2f} s from the decision point" in r.explanation
        )
