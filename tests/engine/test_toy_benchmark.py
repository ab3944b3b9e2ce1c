"""A benchmark from outside fdeval (tests/engine/toy: one module, one YAML, one custom step, one
metric) runs end to end through the local and the Slurm launcher, and status and the report walk
its declared steps."""

from __future__ import annotations

import csv
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import health
from helpers.launching import run_launch

from fdeval.engine.run import step_dir
from fdeval.orchestrator.recorder import read_session_log
from fdeval.review.server import Request, ReviewApp, dispatch, session_detail

TOY = Path(__file__).resolve().parent / "toy"
ARGS = ["benchmark=toy", f"hydra.searchpath=[file://{TOY / 'conf'}]", "progress=false"]
SLURM = [
    "launcher=slurm",
    "launcher.wait=true",
    "launcher.cases_per_task=1",
    "launcher.gpus_per_task=1",
    "launcher.cpus_per_task=1",
    "launcher.mem_gb=1",
    "launcher.cpu_job.cpus_per_task=1",
    "launcher.cpu_job.mem_gb=1",
    "launcher.timeout_min=10",
    "launcher.signal_delay_s=30",
]


def launch(
    tmp: Path, *args: str, check: bool = True, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess:
    env = {
        **os.environ,
        **(env or {}),
        "PYTHONPATH": os.pathsep.join([str(TOY), os.environ.get("PYTHONPATH", "")]).rstrip(
            os.pathsep
        ),
    }
    proc = run_launch([f"out_root={tmp / 'out'}", *ARGS, *args], tmp, timeout_s=900, env=env)
    if check and proc.returncode != 0:
        raise AssertionError(
            f"exit {proc.returncode}\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
        )
    return proc


def the_run(tmp: Path) -> Path:
    (run,) = (tmp / "out" / "toy" / "reference").iterdir()
    return run


def speech(run: Path) -> dict[str, float]:
    out = {}
    for f in sorted(step_dir(run, "speech").glob("*.json")):
        d = json.loads(f.read_text())
        assert d["status"] == "ok" and d["provenance"]["step"]["name"] == "speech"
        out[d["case_id"]] = d["value"]
    return out


def test_toy_benchmark_runs_locally_with_status_and_report(tmp_path, monkeypatch):
    out = launch(tmp_path).stdout
    run = the_run(tmp_path)
    values = speech(run)
    assert sorted(values) == ["toy0", "toy1"] and all(
        v > 0 for v in values.values()
    )  # the reference agent answers
    (row,) = csv.DictReader((step_dir(run, "score") / "toy_speech.csv").open())
    assert int(row["n"]) == 2 and float(row["mean_speech_s"]) == pytest.approx(
        sum(values.values()) / 2, abs=1e-6
    )
    assert "toy: 2/2 sessions with model speech" in out
    status = launch(tmp_path, "stage=status").stdout
    speech_dir, scores_dir = (step_dir(run, s).relative_to(run) for s in ("speech", "score"))
    assert (
        f"step speech (judge) {speech_dir}: 2/2" in status
        and f"step score {scores_dir}: 1/1 tables" in status
    )
    # stage=judge names the toy's own step by its stage; a relaunch remakes nothing
    before = {p.name: p.stat().st_mtime_ns for p in step_dir(run, "speech").glob("*.json")}
    launch(tmp_path, "stage=judge")
    assert {p.name: p.stat().st_mtime_ns for p in step_dir(run, "speech").glob("*.json")} == before
    rep = subprocess.run(
        [sys.executable, "-m", "fdeval.report", str(run), "--out", str(tmp_path / "rep")],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(TOY)},
    )
    assert rep.returncode == 0, rep.stderr
    (r,) = csv.DictReader((tmp_path / "rep" / "toy_speech.csv").open())
    assert r["run"] == run.name and r["mean_speech_s"] == row["mean_speech_s"]
    # the review app shows and labels its sessions through the engine's generic review view (no line of
    # fdeval/review names the toy): agree / disagree with the result, a note; no judge-validation table
    monkeypatch.syspath_prepend(
        str(TOY)
    )  # the run's benchmark object is built from run.json, as a launch does
    app = ReviewApp([run], "tester")
    view = app.views[0]
    assert type(view.bench).__name__ == "Toy"
    d = session_detail(app, 0, view, view.session("toy0"))
    assert (d["kind"], d["keys"], d["sections"]) == ("generic", ["case"], [])
    assert [(f["name"], f["choices"]) for f in d["form"]["fields"]] == [
        ("label", ["agree", "disagree"]),
        ("note", []),
    ]
    body = json.dumps(
        {"run": 0, "case": "toy0", "key": "case", "fields": {"label": "disagree", "note": "n"}}
    )
    saved = dispatch(app, Request("POST", "/api/label", {}, {}, body.encode()))
    assert saved.status == 200, saved.body
    rec = json.loads((run / "review" / "labels" / "toy0@case.json").read_text())
    assert (rec["kind"], rec["label"], rec["note"], rec["reviewer"]) == (
        "generic",
        "disagree",
        "n",
        "tester",
    )
    bad = dispatch(
        app, Request("POST", "/api/label", {}, {}, body.replace("disagree", "maybe").encode())
    )
    assert bad.status == 400 and b"field label" in bad.body
    assert json.loads(dispatch(app, Request("GET", "/api/validation", {}, {})).body) == {
        "tables": []
    }


def test_a_changed_step_setting_is_refused_then_remade_with_redo(tmp_path):
    launch(tmp_path)
    run = the_run(tmp_path)
    # a file whose step stamp is not the step's current one (as if made by other step settings)
    f = step_dir(run, "speech") / "toy0.json"
    d = json.loads(f.read_text())
    d["provenance"]["step"]["settings"] = "0" * 12
    f.write_text(json.dumps(d))
    bad = launch(tmp_path, "stage=judge", check=False)
    assert (
        bad.returncode == 2
        and f"speech file {f.relative_to(run)} was made by another run" in bad.stderr
    )
    assert "\n" not in bad.stderr.strip()
    launch(tmp_path, "stage=judge", "resume=redo")
    assert json.loads(f.read_text())["provenance"]["step"]["settings"] != "0" * 12


def test_a_failing_unit_is_recorded_tried_again_and_the_others_are_made(tmp_path):
    """An infrastructure fault of one unit (injected through the environment, so the folder is the
    same): tried 1 + retries times, recorded next to its file, the step fails with one line after
    the other units are made; the relaunch without the fault makes only that unit."""
    launch(tmp_path, "stage.steps=[generate,run]")
    bad = launch(tmp_path, "stage=judge", check=False, env={"TOY_FAIL_CASES": "toy1"})
    assert bad.returncode == 2, bad.stderr
    assert (
        "speech: 1 unit(s) failed (e.g. toy1.json" in bad.stderr and "\n" not in bad.stderr.strip()
    )
    run = the_run(tmp_path)
    sp = step_dir(run, "speech")
    err = json.loads((sp / "toy1.error.json").read_text())
    assert "injected fault #2 for toy1" in err["error"]  # the step's one retry ran too
    assert (sp / "toy0.json").exists() and not (sp / "toy1.json").exists()
    made0 = (sp / "toy0.json").stat().st_mtime_ns
    assert ": 1/2  failed: 1" in launch(tmp_path, "stage=status").stdout
    launch(tmp_path, "stage=judge")
    assert (sp / "toy0.json").stat().st_mtime_ns == made0  # finished work is not rewritten
    assert not (sp / "toy1.error.json").exists() and sorted(speech(run)) == ["toy0", "toy1"]


@pytest.mark.parametrize("clock", ["lockstep", pytest.param("realtime", marks=pytest.mark.slow)])
def test_an_interactive_user_policy_answers_the_model_through_the_engine(tmp_path, clock):
    """The toy's echo user (`Benchmark.user_policy`) says back what the model said, under both clocks.
    The health bounds are far above any lag of a loaded machine: this is about the policy's turns,
    and a realtime session past a bound ends there, before the echo (the bounds: test_trust.py)."""
    launch(
        tmp_path,
        "benchmark.echo=true",
        "benchmark.n_cases=1",
        f"orchestrator.clock={clock}",
        "orchestrator.silence_s=0.8",
        "stage.steps=[generate,run]",
        "orchestrator.max_pacing_lag_s=60",
        "orchestrator.max_model_lag_s=60",
    )
    run = the_run(tmp_path)
    log = read_session_log(run / "sessions" / "toy0.h5")
    assert log["attrs"]["clock"] == clock and log["attrs"]["valid"], log["attrs"]["invalid_reason"]
    health.check_verdict(log["attrs"])
    assert [t["label"] for t in log["turns"]] == ["question", "echo"] and log["attrs"][
        "user_policy"
    ] == "echo"
    first, echo = log["turns"]
    heard = [
        r
        for r in log["model_text"]
        if not r["dropped"] and first["end_s"] <= r["play_s"] < echo["start_s"]
    ]
    assert heard and echo["start_s"] > max(
        r["play_s"] for r in heard
    )  # the echo came after the answer it repeats


@pytest.mark.slurm
def test_toy_benchmark_runs_through_slurm_like_locally(tmp_path):
    if not os.environ.get("SLURM_CONF") or shutil.which("sinfo") is None:
        pytest.skip(
            "no local Slurm: run `bash slurm/install.sh && bash slurm/start.sh` and export SLURM_CONF"
        )
    out = launch(tmp_path, *SLURM).stdout
    assert (
        "slurm: run array" in out and "2 task(s) ['run']" in out and "2 task(s) ['speech']" in out
    )
    run = the_run(tmp_path)
    jobs = json.loads((run / "slurm" / "jobs.json").read_text())
    assert [j["phase"] for j in jobs] == ["run", "post", "score"] and [
        j["steps"] for j in jobs
    ] == [["run"], ["speech"], ["score"]]
    local = tmp_path / "local"
    local.mkdir()
    launch(local)
    assert speech(run) == speech(
        the_run(local)
    )  # lockstep sessions: the same recordings, the same results
    (a,) = csv.DictReader((step_dir(run, "score") / "toy_speech.csv").open())
    (b,) = csv.DictReader((step_dir(the_run(local), "score") / "toy_speech.csv").open())
    assert a["mean_speech_s"] == b["mean_speech_s"]
