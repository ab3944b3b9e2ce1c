"""Status, report and the command line walk the steps a benchmark declares (TACT here; the
Instruct-FD default run is covered by tests/test_trust.py and tests/report)."""

from __future__ import annotations

import csv
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from helpers.launching import run_launch

from fdeval.benchmarks.tact.steps import Composite
from fdeval.engine.run import step_dir

TACT = [
    "benchmark=tact",
    "benchmark.n_episodes=4",
    "benchmark.repeats=2",
    "benchmark.n_resamples=200",
    "progress=false",
]


def launch(tmp: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess:
    proc = run_launch([f"out_root={tmp / 'out'}", *args], tmp, timeout_s=900)
    if check and proc.returncode != 0:
        raise AssertionError(
            f"exit {proc.returncode}\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
        )
    return proc


@pytest.fixture(scope="module")
def tact_run(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("tact")
    launch(tmp, *TACT)
    (run,) = (tmp / "out" / "tact" / "reference").iterdir()
    return tmp, run


def test_status_lists_each_tact_step_with_its_counts(tact_run):
    tmp, run = tact_run
    n = len(list((run / "sessions").glob("*.h5")))
    assert n > 0
    out = launch(tmp, *TACT, "stage=status").stdout
    assert f"recorded: {n}" in out
    measures, judged, scores = (
        step_dir(run, s).relative_to(run) for s in ("measure", "posterior", "score")
    )
    assert (
        f"step measure (transcribe) {measures}: {n}/{n}" in out
        and f"step posterior (judge) {judged}: {n}/{n}" in out
    )
    n_tables = len(Composite.tables)  # every table TACT's metric declares
    assert f"step score {scores}: {n_tables}/{n_tables} tables  scored: True" in out
    status = json.loads((run / "status.json").read_text())
    assert [s["step"] for s in status["steps"]] == ["measure", "posterior", "score"]
    # a judged file removed is counted as to do, and only it is made again by stage=judge
    victim = sorted((run / judged).glob("*.json"))[0]
    others = {p.name: p.stat().st_mtime_ns for p in (run / judged).glob("*.json") if p != victim}
    victim.unlink()
    assert f"{judged}: {n - 1}/{n}" in launch(tmp, *TACT, "stage=status").stdout
    launch(tmp, *TACT, "stage=judge")
    assert victim.exists() and all(
        (run / judged / k).stat().st_mtime_ns == v for k, v in others.items()
    )


def test_report_puts_tact_runs_side_by_side(tact_run, tmp_path):
    _, run = tact_run
    proc = subprocess.run(
        [sys.executable, "-m", "fdeval.report", str(run), str(run), "--out", str(tmp_path / "rep")],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr
    rows = list(csv.DictReader((tmp_path / "rep" / "tact_composite.csv").open()))
    mine = list(csv.DictReader((step_dir(run, "score") / "tact_composite.csv").open()))
    assert len(rows) == 2 * len(mine) and {r["run"] for r in rows} == {run.name}
    assert [r["estimate"] for r in rows[: len(mine)]] == [r["estimate"] for r in mine]
    assert {p.name for p in (tmp_path / "rep").iterdir()} >= {
        "tact_composite.csv",
        "tact_episodes.csv",
        "tact_slices.csv",
    }


def test_a_group_no_step_uses_is_refused(tmp_path):
    proc = launch(tmp_path, *TACT, "judge=llm", check=False)
    assert proc.returncode == 2
    assert re.fullmatch(
        r"fdeval: error: judge: benchmark tact has no step that uses a judge; steps: generate, run, "
        r"measure, posterior, score\n",
        proc.stderr,
    ), proc.stderr
    assert not (tmp_path / "out" / "tact").exists()  # refused before any work


def test_unknown_step_lists_the_benchmarks_steps(tmp_path):
    proc = launch(tmp_path, *TACT, "stage.steps=[measure,verdicts]", check=False)
    assert (
        proc.returncode == 2 and "stage.steps: unknown step(s) ['verdicts']; valid: " in proc.stderr
    )
    assert "'measure', 'posterior'" in proc.stderr and "\n" not in proc.stderr.strip()
