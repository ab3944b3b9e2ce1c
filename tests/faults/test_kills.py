"""A launch SIGTERM'd or SIGKILL'd in the middle of a write, in each step; and two launches on one folder.

The kill lands while a file is half written (the stall hook of conftest.py holds the write), in
generate, run, transcribe, judge and score in turn: each relaunch of the same command finishes the
step that was cut (and is cut itself in the next one), the last completes the run. After each kill,
every file finished before it is byte-identical after the relaunch, and no temp file is left.
Under the realtime clock the sessions are written by client processes: a launch SIGKILL'd while
they write takes them with it.
"""

from __future__ import annotations

import signal
import time

import h5py
import pytest

from fdeval.engine.run import step_dir

from .conftest import (
    TWO,
    TWO_IDS,
    Stalled,
    assert_kept,
    children,
    digests,
    launch,
    one_line_error,
    parent_pid,
    runs,
    temps,
)

# the second file each step writes: the first is finished when the kill lands
STEPS = [
    ("generate", "*/_data/*/cases/*.json"),
    ("run", "*/sessions/*.h5"),
    ("transcribe", "*/transcripts/*.json"),
    ("judge", "*/verdicts/*.json"),
    ("score", "*/scores/*"),
]


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL], ids=["SIGTERM", "SIGKILL"])
def test_a_launch_killed_mid_write_in_each_step_is_completed_by_the_relaunch(
    tmp_path, stall_hook, sig
):
    out = tmp_path / "outputs"
    kept: dict[str, str] = {}
    for step, pattern in STEPS:
        stalled = Stalled(tmp_path, stall_hook, pattern, 2, TWO)
        try:
            assert stalled.temp.exists() and not stalled.target.exists()
            # this launch finished what the last kill cut, and kept what was finished before it
            assert_kept(kept, digests(out))
            proc = stalled.kill(sig)
        finally:
            stalled.cleanup()
        # SIGTERM: no handler in a reference-agent launch, so the default action; a handler that ends
        # the launch cleanly would do too (nonzero, the write not finished)
        assert proc.returncode == -sig or (sig == signal.SIGTERM and proc.returncode > 0), (
            step,
            proc.returncode,
            proc.stderr[-2000:],
        )
        assert not stalled.target.exists(), f"{step}: the cut write reached its target"
        kept = digests(out)
    final = launch(tmp_path, TWO)
    after = digests(out)
    assert_kept(kept, after)
    assert temps(out) == [], "temp files of the killed writers are left"
    (d,) = runs(out)
    for cid in TWO_IDS:
        with h5py.File(d / "sessions" / f"{cid}.h5") as f:
            assert f.attrs["case_id"] == cid
        assert (step_dir(d, "transcribe") / f"{cid}.json").is_file()
    assert (
        len(list(step_dir(d, "judge").glob("*.json"))) == 2
        and (step_dir(d, "score") / "ias.csv").is_file()
    )
    assert (
        "session(s) invalid" not in final.stdout
    )  # lockstep sessions (the reference agent): load cannot make them invalid
    # and a launch on the finished folder rewrites nothing
    launch(tmp_path, TWO)
    assert digests(out) == after


def test_two_launches_on_one_folder_the_second_stops_at_once_and_the_first_finishes(
    tmp_path, stall_hook
):
    first = Stalled(
        tmp_path, stall_hook, "*/sessions/*.h5", 2, TWO
    )  # the first launch, mid-way through run
    try:
        d = first.target.parent.parent
        before = digests(tmp_path / "outputs")
        err = one_line_error(launch(tmp_path, TWO, check=False))
        assert (
            f"{d}: another fdeval process is using this run folder (pid {first.proc.pid} on " in err
        )
        assert_kept(before, digests(tmp_path / "outputs"))
        done = first.release()
    finally:
        first.cleanup()
    assert done.returncode == 0, done.stderr[-3000:]
    after = digests(tmp_path / "outputs")
    assert_kept(before, after)
    launch(tmp_path, TWO)  # the second launch again, once the folder is free: nothing left to do
    assert digests(tmp_path / "outputs") == after


def test_a_launch_killed_while_its_client_processes_write_takes_them_along(
    tmp_path, stall_hook, short_cases
):
    # health bounds far above any lag of a loaded machine: this is about the processes, and a session
    # behind real time would be invalid (the relaunch's exit status and its files then depend on load)
    args = (
        f"benchmark.cases_dir={short_cases}",
        "orchestrator.clock=realtime",
        "model.concurrency=2",
        "orchestrator.client_processes=2",
        "stage=run",
        "orchestrator.max_pacing_lag_s=60",
        "orchestrator.max_model_lag_s=60",
    )
    out = tmp_path / "outputs"
    stalled = Stalled(tmp_path, stall_hook, "*/sessions/*.h5", 1, *args, in_child=True)
    try:
        clients = children(stalled.proc.pid)
        assert stalled.writer in clients and len([c for c in clients if c != stalled.writer]) >= 1
        before = digests(out)
        proc = stalled.kill(signal.SIGKILL)
    finally:
        stalled.cleanup()
    assert proc.returncode == -signal.SIGKILL
    # PR_SET_PDEATHSIG ends them at once; the wait is for a loaded machine to get round to it
    deadline = time.monotonic() + 300
    while [c for c in clients if parent_pid(c) is not None] and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not [c for c in clients if parent_pid(c) is not None], (
        "client processes outlived the launch by 300 s"
    )
    assert not stalled.target.exists()
    assert_kept(before, digests(out))  # and nothing was written once the launch was gone
    launch(tmp_path, *args)
    (d,) = runs(out)
    assert temps(out) == [] and sorted(p.name for p in (d / "sessions").glob("*.h5")) == [
        "conv1__backchannel.h5",
        "conv1__listen.h5",
    ]
    # the other client process may have been between a session's WAV and its log when the kill
    # came (the WAV is written first; how often depends on load): such a session was not finished,
    # and the relaunch records it again; every finished one keeps its bytes
    finished = {
        k: v
        for k, v in before.items()
        if not (
            k.endswith(".wav") and "/sessions/" in k and k[: -len(".wav")] + ".h5" not in before
        )
    }
    assert_kept(finished, digests(out))
