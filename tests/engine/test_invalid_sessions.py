"""Invalid and failed sessions at the end of a launch (issue 24): the launch exits 3 with one line
counting them; a relaunch records an invalid session again at most `orchestrator.invalid_retries`
times (the session log's `recording_attempt` counts its recordings), then keeps it with its reason
and says so; the setting does not change the run folder.

The sessions are made invalid without depending on the machine's speed: under the reference
agent's lockstep clock a fresh_pasta_stop session is cut at `orchestrator.max_session_s=20`
(its turns fit in 20 s, the waits between them do not), on any machine.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import h5py

ONE = "benchmark.cases=[fresh_pasta_stop__acknowledge]"
TWO = "benchmark.cases=[fresh_pasta_stop__acknowledge,fresh_pasta_stop__none]"
CUT = "orchestrator.max_session_s=20"
TIMEOUT_S = 900  # a hang, not a speed bound: lockstep sessions of 20 s take seconds


def launch(tmp: Path, *args: str) -> subprocess.CompletedProcess:
    cmd = [
        sys.executable,
        "-m",
        "fdeval.launch",
        f"out_root={tmp / 'outputs'}",
        "progress=false",
        *args,
    ]
    try:
        return subprocess.run(
            cmd, cwd=tmp, capture_output=True, text=True, timeout=TIMEOUT_S, env=dict(os.environ)
        )
    except subprocess.TimeoutExpired:
        raise AssertionError(
            f"launch {args} did not finish in {TIMEOUT_S} s (a hang, or a very loaded machine)"
        ) from None


def errors(proc: subprocess.CompletedProcess) -> list[str]:
    assert "Traceback" not in proc.stdout + proc.stderr, proc.stderr[-3000:]
    return [line for line in proc.stderr.splitlines() if line.startswith("fdeval: error:")]


def folders(tmp: Path) -> list[Path]:
    return sorted(
        p for p in (tmp / "outputs/instructfd/reference").iterdir() if (p / "sessions").is_dir()
    )


def attrs(run: Path, case: str) -> dict:
    with h5py.File(run / "sessions" / f"{case}.h5") as f:
        return {
            k: f.attrs[k] for k in ("valid", "invalid_reason", "session_id", "recording_attempt")
        }


def test_an_invalid_session_is_recorded_again_at_most_invalid_retries_times_then_kept(tmp_path):
    case = "fresh_pasta_stop__acknowledge"
    args = (ONE, CUT, "orchestrator.invalid_retries=1")
    first = launch(tmp_path, *args)
    assert first.returncode == 3, (first.returncode, first.stdout[-2000:], first.stderr[-2000:])
    assert errors(first) == [
        f"fdeval: error: 1 of 1 session(s) not scored: 1 invalid, 0 failed (e.g. {case}: cut at "
        "orchestrator.max_session_s=20); stage=status lists them"
    ]
    assert (
        first.stderr.strip()
        .splitlines()[-1]
        .startswith("fdeval: error: 1 of 1 session(s) not scored")
    )
    assert "a relaunch records 1 of them again" in first.stdout
    (run,) = folders(tmp_path)
    a1 = attrs(run, case)
    assert not a1["valid"] and a1["recording_attempt"] == 1

    second = launch(tmp_path, *args)  # the one retry invalid_retries=1 allows
    assert second.returncode == 3 and len(errors(second)) == 1
    assert "1 stay invalid: recorded 2 time(s), orchestrator.invalid_retries=1" in second.stdout
    a2 = attrs(run, case)
    assert a2["recording_attempt"] == 2 and a2["session_id"] != a1["session_id"]

    files = {p.name: (p.stat().st_ino, p.stat().st_mtime_ns) for p in (run / "sessions").iterdir()}
    third = launch(tmp_path, *args)  # no retry left: kept as it is, with its reason, and said so
    assert third.returncode == 3 and len(errors(third)) == 1
    assert (
        "run: 1 session(s) stay invalid, not recorded again: each was recorded 2 time(s) or more "
        f"(orchestrator.invalid_retries=1; e.g. {case}: cut at orchestrator.max_session_s=20)"
    ) in third.stdout
    assert {
        p.name: (p.stat().st_ino, p.stat().st_mtime_ns) for p in (run / "sessions").iterdir()
    } == files
    assert attrs(run, case)["session_id"] == a2["session_id"]

    status = launch(tmp_path, *args, "stage=status")
    assert status.returncode == 0, status.stderr[-2000:]
    assert (
        f"invalid (not scored) {case}: cut at orchestrator.max_session_s=20 (recorded 2 time(s))"
        in status.stdout
    )
    assert json.loads((run / "status.json").read_text())["invalid_recordings"] == {case: 2}

    # the setting is how a relaunch behaves, not what a session records: the same folder, one more try
    fourth = launch(tmp_path, ONE, CUT, "orchestrator.invalid_retries=2")
    assert fourth.returncode == 3
    assert folders(tmp_path) == [run]
    assert attrs(run, case)["recording_attempt"] == 3


def test_a_sweep_point_with_invalid_sessions_exits_3_after_the_others_and_failed_sessions_count_too(
    tmp_path,
):
    sweep = launch(tmp_path, TWO, "orchestrator.max_session_s=20,300", "-m")
    assert sweep.returncode == 3, (sweep.returncode, sweep.stdout[-2000:], sweep.stderr[-2000:])
    assert errors(sweep) == [
        "fdeval: error: 2 of 2 session(s) not scored: 2 invalid, 0 failed (e.g. "
        "fresh_pasta_stop__acknowledge: cut at orchestrator.max_session_s=20); stage=status lists them"
    ]
    cut, good = folders(
        tmp_path
    )  # named by their overrides: ...max_session_s=20-<hash>, ...=300-<hash>
    assert "max_session_s=20-" in cut.name and "max_session_s=300-" in good.name
    assert not any(
        attrs(cut, c)["valid"] for c in ("fresh_pasta_stop__acknowledge", "fresh_pasta_stop__none")
    )
    # the point after the invalid one still ran, and was scored
    assert all(
        attrs(good, c)["valid"] for c in ("fresh_pasta_stop__acknowledge", "fresh_pasta_stop__none")
    )
    assert list(good.rglob("ias.csv"))

    # a session that failed in an earlier launch is not scored either: a later step's launch says so
    for suffix in (".h5", ".wav"):
        (good / "sessions" / f"fresh_pasta_stop__none{suffix}").unlink()
    (good / "sessions" / "fresh_pasta_stop__none.error.json").write_text(
        json.dumps(
            {
                "case_id": "fresh_pasta_stop__none",
                "stage": "run",
                "error": "ServerDied: planted by the test",
            }
        )
    )
    score = launch(tmp_path, TWO, "orchestrator.max_session_s=300", "stage=score")
    assert score.returncode == 3, (score.returncode, score.stdout[-2000:], score.stderr[-2000:])
    assert errors(score) == [
        "fdeval: error: 1 of 2 session(s) not scored: 0 invalid, 1 failed (e.g. "
        "fresh_pasta_stop__none: ServerDied: planted by the test); stage=status lists them"
    ]
