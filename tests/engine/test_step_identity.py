"""The run folder's identity covers what changes a recording; a later step's settings are its own
(issue 24, section 3): another judge setting reuses every session, judges again into a folder of
its own beside the first judge's, and selecting the first judge again redoes nothing. A verdict
file holding `{}` is damaged (made again), not another run's.

Real launches of two built-in cases (one default launch, copied: these tests change the run).
"""

from __future__ import annotations

import csv
import hashlib
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from fdeval.engine.run import step_dir

CASES = "benchmark.cases=[fresh_pasta_stop__acknowledge,job_offer_move__listen]"
GAP = "judge.utterance_gap_s=1.1"  # a rules-judge threshold: changes verdicts, never a recording


def launch(tmp: Path, *args: str) -> subprocess.CompletedProcess:
    cmd = [
        sys.executable,
        "-m",
        "fdeval.launch",
        f"out_root={tmp / 'outputs'}",
        "progress=false",
        CASES,
        *args,
    ]
    try:
        proc = subprocess.run(cmd, cwd=tmp, capture_output=True, text=True, timeout=900)
    except subprocess.TimeoutExpired:
        raise AssertionError(
            f"`{' '.join(args) or 'the default launch'}` still ran after 900 s (a loaded machine, "
            "or the launch hangs)"
        ) from None
    assert proc.returncode == 0, (
        f"exit {proc.returncode}\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    )
    return proc


def files(d: Path) -> dict[str, tuple[str, int]]:
    """Every file under `d`: (sha256, mtime_ns)."""
    return {
        str(p.relative_to(d)): (hashlib.sha256(p.read_bytes()).hexdigest(), p.stat().st_mtime_ns)
        for p in sorted(d.rglob("*"))
        if p.is_file()
    }


def ias(scores: Path) -> list[dict[str, str]]:
    with (scores / "ias.csv").open(newline="") as f:
        return list(csv.DictReader(f))


@pytest.fixture(scope="module")
def default_run(tmp_path_factory) -> Path:
    """One default launch of the two cases, made once (each test changes its own copy)."""
    tmp = tmp_path_factory.mktemp("default-run")
    launch(tmp)
    return tmp


@pytest.fixture()
def run(default_run, tmp_path) -> tuple[Path, Path]:
    """(folder, run folder) of a copy of the default run (copy2 keeps the files' times)."""
    shutil.copytree(default_run / "outputs", tmp_path / "outputs")
    (rd,) = (p for p in (tmp_path / "outputs" / "instructfd" / "reference").iterdir() if p.is_dir())
    return tmp_path, rd


def test_another_judge_setting_reuses_the_recordings_and_keeps_both_verdict_sets(run):
    tmp, rd = run
    sessions, first_dir = files(rd / "sessions"), step_dir(rd, "judge")
    first, first_scores = files(first_dir), step_dir(rd, "score")
    transcripts = files(step_dir(rd, "transcribe"))

    out = launch(tmp, GAP).stdout
    assert f"fdeval: run folder {rd}\n" in out  # the same folder: the judge does not name it
    assert "run: all 2 cases already recorded" in out and "judge: 2 new of 2" in out
    assert (
        files(rd / "sessions") == sessions
    )  # no session recorded again: every WAV and HDF5 untouched
    assert files(step_dir(rd, "transcribe")) == transcripts
    assert len([n for n in first if "@" in n]) == 2 and first_dir.parent == rd / "verdicts"
    second_dir = step_dir(rd, "judge")
    assert second_dir != first_dir and second_dir.parent == first_dir.parent
    assert files(first_dir) == first  # the first judge's verdicts are kept as they were
    second = {p.name: json.loads(p.read_text()) for p in second_dir.glob("*@*.json")}
    assert sorted(second) == sorted(n for n in first if "@" in n)
    hashes = {d["prompt_hash"] for d in second.values()}
    old = {json.loads((first_dir / n).read_text())["prompt_hash"] for n in second}
    assert len(hashes) == 1 and hashes != old  # made by the other judge settings
    # the scores say which judge they show, and the first judge's tables are still there
    scores = step_dir(rd, "score")
    assert scores != first_scores and (first_scores / "ias.csv").is_file()
    rows = ias(scores)
    assert {r["prompt_hash"] for r in rows} == hashes
    assert {r["verdicts_dir"] for r in rows} == {str(second_dir.relative_to(rd))}
    assert {r["verdicts_dir"] for r in ias(first_scores)} == {str(first_dir.relative_to(rd))}

    # selecting the first judge again: both verdict sets reused, nothing made again
    kept = files(rd / "verdicts")
    again = launch(tmp).stdout
    assert "judge: 0 new of 2" in again and "transcribe: 0 new of 2" in again
    assert files(rd / "verdicts") == kept and files(rd / "sessions") == sessions
    assert step_dir(rd, "judge") == first_dir and step_dir(rd, "score") == first_scores
    assert {r["verdicts_dir"] for r in ias(first_scores)} == {str(first_dir.relative_to(rd))}
    # stage=status counts the verdicts of the judge it is given
    for args, d in (((GAP,), second_dir), ((), first_dir)):
        status = launch(tmp, *args, "stage=status").stdout
        assert f"step judge (judge) {d.relative_to(rd)}: 2/2" in status


def test_an_empty_verdict_file_is_damaged_and_made_again(run):
    tmp, rd = run
    victim, other = sorted(step_dir(rd, "judge").glob("*@*.json"))
    made = other.stat().st_mtime_ns
    victim.write_text("{}")
    proc = launch(tmp, "stage=judge")
    assert "made by another run" not in proc.stderr and "resume=redo" not in proc.stderr
    assert "is unreadable; making it again" in proc.stdout + proc.stderr
    d = json.loads(victim.read_text())
    assert d["verdict"] in ("adhere", "not_adhere") and d["provenance"]["step"]["name"] == "judge"
    assert other.stat().st_mtime_ns == made  # the whole one is not rewritten
