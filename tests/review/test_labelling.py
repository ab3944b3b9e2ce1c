"""The review app for a day of labelling, server side (no browser): the session list's filters
"unlabelled" and "human ≠ judge" (each benchmark's view says when a label disagrees with the
automatic result), a session's previous and next in the filtered list, runs named by what differs
between them, TACT's named values, the favicon."""

from __future__ import annotations

import json
import shutil
import threading
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

import pytest

from fdeval.benchmarks.echochain.taxonomy import TAXONOMY
from fdeval.benchmarks.tact.review import ONSET_TOLERANCE_S, decision_point_s
from fdeval.review import labels as L
from fdeval.review.server import ReviewApp, make_server


def copy_run(run: Path, tmp: Path, name: str | None = None) -> Path:
    """A private copy of a shared run (labels written here stay out of the other tests)."""
    dst = tmp / "out" / run.parents[1].name / run.parent.name / (name or run.name)
    shutil.copytree(run, dst)
    data = run.parents[1] / "_data"
    if data.is_dir() and not (dst.parents[1] / "_data").exists():
        shutil.copytree(data, dst.parents[1] / "_data")
    return dst


class Served:
    def __init__(self, runs: list[Path], reviewer: str = "tester"):
        self.app = ReviewApp(runs, reviewer)
        self.srv = make_server(self.app)
        threading.Thread(target=self.srv.serve_forever, daemon=True).start()
        self.base = f"http://127.0.0.1:{self.srv.server_address[1]}"

    def get(self, path: str, **query) -> tuple[int, dict, bytes]:
        url = self.base + path + ("?" + urllib.parse.urlencode(query) if query else "")
        try:
            with urllib.request.urlopen(url, timeout=60) as r:
                return r.status, dict(r.headers), r.read()
        except urllib.error.HTTPError as e:
            return e.code, dict(e.headers), e.read()

    def rows(self, **query) -> list[dict]:
        status, _, body = self.get("/api/sessions", **query)
        assert status == 200, body
        return json.loads(body)["rows"]

    def around(self, run: int, case: str, **query) -> dict:
        status, _, body = self.get("/api/sessions", at_run=run, at_case=case, **query)
        assert status == 200, body
        return json.loads(body)["around"]

    def label(self, run: int, case: str, key: str, fields: dict) -> None:
        v = self.app.views[run]
        s = v.session(case)
        review = v.review()
        L.save_label(
            v.run_dir,
            v.benchmark,
            case,
            key,
            self.app.reviewer,
            fields,
            review,
            review.label_form(v, s),
        )

    def close(self) -> None:
        self.srv.shutdown()
        self.srv.server_close()


@pytest.fixture()
def ifd(instructfd_run, tmp_path):
    served = Served([copy_run(instructfd_run, tmp_path)])
    yield served
    served.close()


def test_unlabelled_until_every_label_key_has_a_label(ifd):
    view = ifd.app.views[0]
    n = len(view.sessions)
    assert len(ifd.rows(unlabelled="1")) == n  # nothing saved yet
    two = next(s for s in view.sessions if len(view.review().label_keys(view, s)) == 2)
    first, second = view.review().label_keys(view, two)
    ifd.label(0, two.case_id, first, {"label": "adhere"})
    row = next(r for r in ifd.rows() if r["case_id"] == two.case_id)
    assert row["unlabelled"] and row["labelled"] == 1  # one of its two instructions is labelled
    ifd.label(0, two.case_id, second, {"label": "adhere"})
    left = ifd.rows(unlabelled="1")
    assert len(left) == n - 1 and two.case_id not in {r["case_id"] for r in left}
    # with another filter: both apply
    listen = ifd.rows(unlabelled="1", instruction="listen")
    assert listen and all(r["instruction"] == "listen" and r["unlabelled"] for r in listen)


def test_human_vs_judge_is_a_saved_label_against_the_judges_verdict(ifd):
    view = ifd.app.views[0]
    judged = [s for s in view.sessions if s.results.get("judge")]
    agree, differ = judged[0], judged[1]
    r_agree, r_differ = agree.results["judge"][0], differ.results["judge"][0]
    assert ifd.rows(human_vs_judge="1") == []
    ifd.label(0, agree.case_id, r_agree.key, {"label": r_agree.value})
    other = "not_adhere" if r_differ.value == "adhere" else "adhere"
    ifd.label(0, differ.case_id, r_differ.key, {"label": other})
    rows = ifd.rows(human_vs_judge="1")
    assert [r["case_id"] for r in rows] == [differ.case_id] and rows[0]["human_vs_judge"]
    # saved again, agreeing: no longer flagged (the current label counts, not its history)
    ifd.label(0, differ.case_id, r_differ.key, {"label": r_differ.value})
    assert ifd.rows(human_vs_judge="1") == []


def test_previous_and_next_follow_the_filtered_list_even_for_a_session_it_leaves_out(ifd):
    every = ifd.rows()
    listen = ifd.rows(instruction="listen")
    assert len(listen) >= 3
    a = ifd.around(0, listen[1]["case_id"], instruction="listen")
    assert (
        a["prev"]["case_id"] == listen[0]["case_id"]
        and a["next"]["case_id"] == listen[2]["case_id"]
    )
    assert (a["position"], a["n"]) == (2, len(listen))
    first = ifd.around(0, every[0]["case_id"])
    assert (
        first["prev"] is None
        and first["next"]["case_id"] == every[1]["case_id"]
        and first["position"] == 1
    )
    assert ifd.around(0, every[-1]["case_id"])["next"] is None
    # labelled with the "unlabelled" filter on: out of the list, and its next is still the one after it
    ifd.label(0, listen[1]["case_id"], listen[1]["results"][0]["key"], {"label": "adhere"})
    a = ifd.around(0, listen[1]["case_id"], instruction="listen", unlabelled="1")
    assert a["position"] is None and a["next"]["case_id"] == listen[2]["case_id"]
    assert a["prev"]["case_id"] == listen[0]["case_id"]
    status, _, body = ifd.get("/api/sessions", at_run=0, at_case="no-such-case")
    assert status == 404 and "no-such-case" in json.loads(body)["error"]
    assert ifd.get("/api/sessions", at_run=0)[0] == 400  # at_case missing


def test_runs_are_named_by_what_differs(instructfd_run, tmp_path, monkeypatch):
    """Two runs that differ in nothing are named by their folders (fdeval.report.runnames); the
    list and the session carry the name, the URLs the index; a blind run's name hides its run id."""
    a = copy_run(instructfd_run, tmp_path, "first-" + instructfd_run.name)
    b = copy_run(instructfd_run, tmp_path, "second-" + instructfd_run.name)
    served = Served([a, b])
    try:
        runs = json.loads(served.get("/api/runs")[2])["runs"]
        assert [r["name"] for r in runs] == [a.name, b.name]
        case = served.app.views[1].sessions[0].case_id
        assert {r["run_name"] for r in served.rows() if r["run"] == 1} == {b.name}
        assert json.loads(served.get("/api/session", run=1, case=case)[2])["run_name"] == b.name
    finally:
        served.close()
    from fdeval.benchmarks.instructfd.review import InstructFDReview

    monkeypatch.setattr(InstructFDReview, "blind", True)
    served = Served([a, b])
    try:
        names = [r["name"] for r in json.loads(served.get("/api/runs")[2])["runs"]]
        assert all(v.run_id not in n and "[hidden]" in n for n, v in zip(names, served.app.views))
    finally:
        served.close()


def test_the_favicon_is_a_static_svg(ifd):
    for path in ("/favicon.ico", "/static/favicon.svg"):
        status, headers, body = ifd.get(path)
        assert (
            status == 200
            and headers["Content-Type"] == "image/svg+xml"
            and body.startswith(b"<svg")
        )
    assert b'rel="icon" href="/static/favicon.svg"' in ifd.get("/")[2]


def test_tact_page_names_its_values_and_a_label_against_the_onset(tact_run, tmp_path):
    run = copy_run(tact_run, tmp_path)
    served = Served([run])
    try:
        view = served.app.views[0]
        s = next(s for s in view.sessions if s.results.get("posterior"))
        d = json.loads(served.get("/api/session", run=0, case=s.case_id)[2])
        (sec,) = d["sections"]
        values = dict(sec["values"])
        assert {"decision point", "onset", "intent", "score"} <= set(values)
        at = decision_point_s(view, s)
        measure = json.loads(next((run / "measures").glob(f"*/{s.case_id}.json")).read_text())
        assert at == pytest.approx(measure["decision_session_s"])
        assert values["decision point"].startswith(f"{at:.2f} s into the session")
        onset = s.results["posterior"][0].value
        judged = json.loads(next((run / "judged").glob(f"*/{s.case_id}.json")).read_text())
        assert values["intent"].startswith(judged["posterior_mode"] + " (posterior ")
        assert values["score"].startswith("composite ")
        assert [m["label"] for m in sec["marks"]][0] == "decision point"
        assert d["words"] and {w["speaker"] for w in d["words"]} == {"user", "model"}
        # human ≠ judge for TACT: an onset far from the measured one, or "missed" where one was measured
        assert onset is not None
        served.label(0, s.case_id, "onset_s", {"onset": "timely", "onset_s": round(at + onset, 3)})
        assert served.rows(human_vs_judge="1") == []
        far = round(at + onset + 2 * ONSET_TOLERANCE_S, 3)
        served.label(0, s.case_id, "onset_s", {"onset": "timely", "onset_s": far})
        assert [r["case_id"] for r in served.rows(human_vs_judge="1")] == [s.case_id]
        served.label(0, s.case_id, "onset_s", {"onset": "missed"})
        assert [r["case_id"] for r in served.rows(human_vs_judge="1")] == [s.case_id]
        assert [r["case_id"] for r in served.rows(unlabelled="1")] == [
            x.case_id for x in view.sessions if x is not s
        ]
    finally:
        served.close()


def test_echochain_label_against_the_automatic_grades_and_taxonomy(echochain_run, tmp_path):
    run = copy_run(echochain_run, tmp_path)
    served = Served([run])
    try:
        view = served.app.views[0]
        s = next(s for s in view.sessions if s.results.get("grade"))
        graded = json.loads(next((run / "graded").glob(f"*/{s.case_id}.json")).read_text())
        auto = {g["criterion_id"]: "pass" if g["passed"] else "fail" for g in graded["grades"]}
        cid, grade = next(iter(auto.items()))
        screening = {
            "coherent": True,
            "naturalistic": True,
            "audio_quality": True,
            "accepted": True,
            "note": "",
        }
        ok = {"screening": screening, "grades": {cid: grade}, "taxonomy": graded["taxonomy"]}
        served.label(0, s.case_id, "review", ok)
        assert served.rows(human_vs_judge="1") == []
        served.label(
            0, s.case_id, "review", {**ok, "grades": {cid: "fail" if grade == "pass" else "pass"}}
        )
        assert [r["case_id"] for r in served.rows(human_vs_judge="1")] == [s.case_id]
        other = next(t for t in TAXONOMY if t != graded["taxonomy"])
        served.label(0, s.case_id, "review", {**ok, "taxonomy": other})
        assert [r["case_id"] for r in served.rows(human_vs_judge="1")] == [s.case_id]
        assert served.rows(unlabelled="1") == [
            r for r in served.rows() if r["case_id"] != s.case_id
        ]
    finally:
        served.close()
