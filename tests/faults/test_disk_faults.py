"""Faults of the disk under a run: a finished artifact truncated (session WAV and HDF5, transcript,
verdict, score table, a generated case's audio or file), a read-only run folder and a full disk.

Each asserts the error line where the fault stops the launch, that every finished output is
byte-identical afterwards, and that a relaunch of the same command completes what is missing.
tests/test_trust.py has the first launch on a read-only or full file system and the damaged
recordings' redo; here the same faults hit a run that has finished work to keep.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import h5py
import pytest

from helpers.launching import copy_run

from fdeval.engine.run import step_dir

from .conftest import TWO, TWO_IDS, digests, launch, one_line_error, runs, temps

CASE, OTHER = TWO_IDS


@pytest.fixture(scope="module")
def finished(two_case_run, tmp_path_factory):
    """The suite's finished run of the two cases (tests/conftest.py), this module's own copy."""
    return copy_run(two_case_run, tmp_path_factory.mktemp("disk-faults"))


@pytest.fixture(scope="module")
def cases_dir(finished) -> str:
    """The built-in cases the module's run generated, for the runs made elsewhere."""
    tmp, _ = finished
    (data,) = (tmp / "outputs" / "instructfd" / "_data").iterdir()
    return f"benchmark.cases_dir={data}"


def _data(d: Path) -> Path:
    (data,) = (d.parents[1] / "_data").iterdir()
    return data


# the damaged file (from the run folder), and whether its repair records the case again (a new session)
ARTIFACTS = {
    "session_wav": (lambda d: d / "sessions" / f"{CASE}.wav", True),
    "session_h5": (lambda d: d / "sessions" / f"{CASE}.h5", True),
    "transcript": (lambda d: step_dir(d, "transcribe") / f"{CASE}.json", False),
    "verdict": (lambda d: next(step_dir(d, "judge").glob(f"{CASE}@*.json")), False),
    "score_table": (lambda d: step_dir(d, "score") / "ias.csv", False),
    "generated_case_audio": (
        lambda d: _data(d) / "audio" / CASE.split("__")[0] / "turn1.wav",
        False,
    ),
    "generated_case_file": (lambda d: _data(d) / "cases" / f"{CASE}.json", False),
}


@pytest.mark.parametrize("artifact", list(ARTIFACTS))
def test_a_truncated_artifact_is_made_again_and_nothing_else_changes(finished, artifact):
    tmp, d = finished
    out = tmp / "outputs"
    path, new_session = ARTIFACTS[artifact][0](d), ARTIFACTS[artifact][1]
    rel, run = str(path.relative_to(out)), str(d.relative_to(out))
    before = digests(out)
    with open(path, "r+b") as f:
        f.truncate(path.stat().st_size // 2)
    damaged = digests(out)[rel]
    proc = launch(tmp, TWO)
    after = digests(out)
    if (
        path.parents[2] == d and path.parents[1].name != "scores"
    ):  # the case steps say what they make again
        assert path.name in proc.stdout + proc.stderr, "the relaunch says which file it makes again"
    assert temps(out) == [] and after[rel] != damaged
    if new_session:
        # the case is recorded again (a new session id), so its derived files follow; the other
        # case, the run's own records and the cases keep their bytes
        changed = {k for k in before if after.get(k) != before[k]}
        assert (
            f"{run}/sessions/{CASE}.h5" in changed and {k for k in changed if OTHER in k} == set()
        )
        assert all(k.startswith(f"{run}/") and "/" in k[len(run) + 1 :] for k in changed), changed
        with h5py.File(d / "sessions" / f"{CASE}.h5") as f:
            assert f.attrs["case_id"] == CASE
    else:
        # made again, from the same inputs by the same settings: the same bytes; nothing else changed
        assert after == before


def _read_only(path: Path) -> str | None:
    """Make `path` read-only for this process (a read-only bind mount as root, else chmod);
    the reason it cannot, or None."""
    if os.geteuid() != 0:
        for p in [path, *path.rglob("*")]:
            p.chmod(p.stat().st_mode & ~0o222)
        return None
    for cmd in (
        ["mount", "--bind", str(path), str(path)],
        ["mount", "-o", "remount,bind,ro", str(path)],
    ):
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode != 0:
            subprocess.run(["umount", str(path)], capture_output=True)
            return f"cannot make a read-only bind mount here ({r.stderr.strip()[:200]}; needs CAP_SYS_ADMIN)"
    return None


def _writable(path: Path) -> None:
    if os.geteuid() != 0:
        for p in [path, *path.rglob("*")]:
            p.chmod(p.stat().st_mode | 0o200)
    else:
        subprocess.run(["umount", str(path)], check=True, capture_output=True)


def test_a_read_only_run_folder_is_one_line_and_the_relaunch_completes(tmp_path, cases_dir):
    launch(tmp_path, TWO, cases_dir, "stage=run")
    (d,) = runs(tmp_path / "outputs")
    before = digests(d)
    why = _read_only(d)
    if why:
        pytest.skip(why)
    try:
        err = one_line_error(launch(tmp_path, TWO, cases_dir, check=False))
        assert str(d) in err and ("Read-only file system" in err or "Permission denied" in err), err
        assert digests(d) == before
    finally:
        _writable(d)
    launch(tmp_path, TWO, cases_dir)
    after = digests(d)
    assert {k: after[k] for k in before} == before
    assert (
        len(list(step_dir(d, "judge").glob("*.json"))) == 2
        and (step_dir(d, "score") / "ias.csv").is_file()
    )


@pytest.fixture
def tmpfs(tmp_path):
    mp = tmp_path / "mnt"
    mp.mkdir()
    r = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=64m", "tmpfs", str(mp)], capture_output=True, text=True
    )
    if r.returncode != 0:
        pytest.skip(
            f"cannot mount a tmpfs here ({r.stderr.strip()[:200]}; needs root and CAP_SYS_ADMIN)"
        )
    yield mp
    subprocess.run(["umount", str(mp)], capture_output=True)


def _fill(mp: Path, leave: int) -> Path:
    """A filler file that leaves `leave` bytes free on the tmpfs."""
    filler = mp / "filler"
    st = os.statvfs(mp)
    with open(filler, "wb") as f:
        os.posix_fallocate(f.fileno(), 0, max(1, st.f_bavail * st.f_frsize - leave))
    return filler


def test_a_full_disk_mid_run_is_one_line_keeps_what_was_finished_and_the_relaunch_completes(
    tmp_path, tmpfs, cases_dir
):
    out = tmpfs / "outputs"
    launch(tmp_path, TWO, cases_dir, "stage=run", out_root=out)
    (d,) = runs(out)
    filler = _fill(tmpfs, 16 << 10)  # room for a log line, not for the steps' files
    before = digests(d)
    err = one_line_error(launch(tmp_path, TWO, cases_dir, out_root=out, check=False))
    assert "No space left on device" in err and "cannot write" in err and str(d) in err, err
    assert temps(d) == []
    assert {k: v for k, v in digests(d).items() if k in before} == before
    filler.unlink()
    launch(tmp_path, TWO, cases_dir, out_root=out)
    after = digests(d)
    assert {k: after[k] for k in before} == before
    assert (
        len(list(step_dir(d, "judge").glob("*.json"))) == 2
        and (step_dir(d, "score") / "ias.csv").is_file()
    )
