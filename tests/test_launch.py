"""`python -m fdeval.launch` end to end, as a user runs it (subprocess, real everything).

Runs use a few built-in cases to stay quick; the full default run is what the README's first
command does.
"""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import h5py
import numpy as np
import pytest
import soundfile as sf
from helpers.launching import run_launch, seed_data

from fdeval.engine.run import step_dir

CASES = (
    "benchmark.cases=[fresh_pasta_stop__acknowledge,fresh_pasta_stop__none,job_offer_move__listen]"
)
CASES_TAG = "benchmark.cases=3items"


def launch(tmp: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess:
    out = seed_data(tmp / "outputs")  # the built-in set, generated once for the suite
    proc = run_launch([f"out_root={out}", "progress=false", *args], cwd=tmp)
    if check and proc.returncode != 0:
        raise AssertionError(f"exit {proc.returncode}\n{proc.stdout}\n{proc.stderr}")
    return proc


def run_dir(tmp: Path, tag: str = "") -> Path:
    """The one run folder under reference/ whose name starts with `tag` (then -<identity hash>)."""
    found = [
        p
        for p in (tmp / "outputs" / "instructfd" / "reference").glob("*")
        if p.is_dir() and p.name.startswith(tag[:40]) and re.fullmatch(r".*-[0-9a-f]{12}", p.name)
    ]
    assert len(found) == 1, found
    return found[0]


def snapshot(d: Path) -> dict[str, int]:
    return {
        str(p.relative_to(d)): p.stat().st_mtime_ns
        for p in d.rglob("*")
        if p.is_file()
        and ".hydra" not in p.parts
        and p.suffix != ".log"
        and not p.name.startswith(".lock")
    }


@pytest.fixture(scope="module")
def small_run(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("launch")
    proc = launch(tmp, CASES)
    return tmp, proc


def test_run_writes_every_stage(small_run):
    tmp, proc = small_run
    d = run_dir(tmp, CASES_TAG)
    assert d.is_dir(), sorted(p.name for p in (tmp / "outputs/instructfd/reference").iterdir())
    ids = ["fresh_pasta_stop__acknowledge", "fresh_pasta_stop__none", "job_offer_move__listen"]
    for cid in ids:
        audio, sr = sf.read(d / "sessions" / f"{cid}.wav")
        assert sr == 16000 and audio.ndim == 2 and audio.shape[1] == 2
        assert (
            np.abs(audio[:, 0]).max() > 0.05 and np.abs(audio[:, 1]).max() > 0.05
        )  # both channels speak
        with h5py.File(d / "sessions" / f"{cid}.h5") as f:
            assert f.attrs["case_id"] == cid and len(f["turns"]) >= 1
        assert json.loads((step_dir(d, "transcribe") / f"{cid}.json").read_text())["case_id"] == cid
    verdicts = sorted(p.name for p in step_dir(d, "judge").iterdir())
    assert "fresh_pasta_stop__none@acknowledge.json" in verdicts and len(verdicts) == 3
    table = (step_dir(d, "score") / "ias.csv").read_text()
    assert "acknowledge" in table and "prompt_hash" in table
    assert "session-seconds per wall-second (lockstep)" in proc.stdout


def test_relaunch_rewrites_nothing(small_run):
    tmp, _ = small_run
    d = run_dir(tmp, CASES_TAG)
    before = snapshot(d)
    proc = launch(tmp, CASES)
    assert snapshot(d) == before
    assert "already recorded" in proc.stderr + proc.stdout or "run:" not in proc.stdout


def test_barge_in_injection_error_within_one_frame(small_run):
    tmp, _ = small_run
    d = run_dir(tmp, CASES_TAG)
    with h5py.File(d / "sessions" / "fresh_pasta_stop__acknowledge.h5") as f:
        turns = f["turns"][()]
        frame_s = f.attrs["frame_s"]
    barge = turns[turns["turn_type"] == b"barge-in"]
    assert len(barge) == 1 and np.all(np.abs(barge["error_s"]) <= frame_s)


def test_multirun_gives_each_point_its_own_folder(tmp_path):
    one = "benchmark.cases=[fresh_pasta_stop__acknowledge]"
    launch(tmp_path, one, "orchestrator.barge_in_delay_s=0.5,2.0", "-m")
    delays = {}
    for tag_delay in ("0.5", "2.0"):
        matches = list(
            (tmp_path / "outputs/instructfd/reference").glob(f"*barge_in_delay_s={tag_delay}*")
        )
        assert len(matches) == 1, matches
        with h5py.File(matches[0] / "sessions" / "fresh_pasta_stop__acknowledge.h5") as f:
            t = f["turns"][()]
            b = t[t["turn_type"] == b"barge-in"][0]
            delays[tag_delay] = b["scheduled_s"] - b["onset_s"]
    assert delays["0.5"] == pytest.approx(0.5, abs=1e-4) and delays["2.0"] == pytest.approx(
        2.0, abs=1e-4
    )


def test_killed_run_resumes_without_rewriting(tmp_path):
    args = [
        sys.executable,
        "-m",
        "fdeval.launch",
        f"out_root={tmp_path / 'outputs'}",
        "progress=false",
        CASES,
    ]
    # generate first so the kill lands in the run stage
    launch(tmp_path, CASES, "stage=generate")
    proc = subprocess.Popen(
        args, cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    deadline = (
        time.time() + 600
    )  # returns at the first recorded case; a loaded machine may take a while
    while time.time() < deadline and not list(
        (tmp_path / "outputs/instructfd/reference").glob("*/sessions/[!.]*.h5")
    ):
        time.sleep(0.02)
    sessions = run_dir(tmp_path, CASES_TAG) / "sessions"
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    done = {p.name: p.stat().st_mtime_ns for p in sessions.glob("[!.]*.h5")}
    assert done, "the run was killed before it recorded any case"
    launch(tmp_path, CASES)
    after = {p.name: p.stat().st_mtime_ns for p in sessions.glob("[!.]*.h5")}
    assert len(after) == 3
    assert all(after[k] == v for k, v in done.items())  # finished cases were not rewritten
    assert not list(sessions.glob(".*.tmp*"))  # the killed writer's temp file was swept


def test_bad_case_file_is_one_line_error(tmp_path, small_run):
    src_tmp, _ = small_run
    data = next((src_tmp / "outputs/instructfd/_data").iterdir())
    mine = tmp_path / "mycases"
    import shutil

    shutil.copytree(data, mine)
    case_file = mine / "cases" / "fresh_pasta_stop__acknowledge.json"
    d = json.loads(case_file.read_text())
    d["turns"][1]["barge_in_after_s"] = -1
    case_file.write_text(json.dumps(d))
    proc = launch(tmp_path, f"benchmark.cases_dir={mine}", check=False)
    assert proc.returncode == 2
    err = proc.stderr.strip().splitlines()
    assert len(err) == 1 and "Traceback" not in proc.stderr
    assert "fresh_pasta_stop__acknowledge.json" in err[0] and "turns[1].barge_in_after_s" in err[0]


@pytest.mark.parametrize(
    "arg,needle",
    [
        ("orchestrator.nope=1", "valid keys under 'orchestrator'"),
        ("model=nope", "unknown option for group 'model'; valid:"),
        ("orchestrator.silence_s=abc", "orchestrator.silence_s: expected a number"),
        ("benchmark.cases=[no_such_case]", "unknown case id"),
    ],
)
def test_bad_command_line_is_one_line_error(tmp_path, arg, needle):
    proc = launch(tmp_path, arg, check=False)
    assert proc.returncode == 2 and needle in proc.stderr and "Traceback" not in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1
