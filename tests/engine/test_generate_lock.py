"""One generate per data folder (issue 24): a launch whose data folder another process is
generating waits for it (saying so), then uses what it wrote instead of writing it again.

Deterministic: the test process holds the data folder's lock itself (as a generate in progress
would) while the second launch starts, checks that launch is blocked, then lets go.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from fdeval.engine.shared import data_lock

TIMEOUT_S = 900  # a hang, not a speed bound
WAITING = "waiting for it, then using what it wrote"


def _cmd(tmp: Path, *args: str) -> list[str]:
    return [
        sys.executable,
        "-m",
        "fdeval.launch",
        f"out_root={tmp / 'outputs'}",
        "progress=false",
        *args,
    ]


def snapshot(d: Path) -> dict[str, tuple[int, int]]:
    """Every data file's inode and write time (an atomic rewrite changes both); not the lock's."""
    return {
        str(p.relative_to(d)): (p.stat().st_ino, p.stat().st_mtime_ns)
        for p in d.rglob("*")
        if p.is_file() and p.name != ".lock"
    }


def test_a_second_generate_waits_for_the_one_in_progress_and_reuses_its_files(tmp_path):
    first = subprocess.run(
        _cmd(tmp_path, "stage=generate"),
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
    )
    assert first.returncode == 0, first.stderr[-3000:]
    (data,) = [p for p in (tmp_path / "outputs/instructfd/_data").iterdir() if p.is_dir()]
    before = snapshot(data)
    assert any(k.startswith("audio/") for k in before) and any(
        k.startswith("cases/") for k in before
    )

    log = tmp_path / "second.log"
    lock = data_lock(
        data
    ).acquire()  # a generate of this folder in progress, as far as the launch can tell
    try:
        with open(log, "w") as out:
            second = subprocess.Popen(
                _cmd(tmp_path, "stage=generate"),
                cwd=tmp_path,
                stdout=out,
                stderr=subprocess.STDOUT,
                text=True,
            )
        deadline = time.monotonic() + TIMEOUT_S
        while WAITING not in log.read_text():
            assert second.poll() is None, (
                f"the second generate ended (exit {second.returncode}) without waiting:\n"
                f"{log.read_text()[-3000:]}"
            )
            assert time.monotonic() < deadline, (
                f"no '{WAITING}' line in {TIMEOUT_S} s:\n{log.read_text()[-3000:]}"
            )
            time.sleep(0.2)
        assert f"another fdeval process is generating {data} (pid {os.getpid()} " in log.read_text()
        time.sleep(0.5)
        assert second.poll() is None, "the second generate went on while the lock was held"
        assert snapshot(data) == before
    finally:
        lock.release()
    try:
        assert second.wait(timeout=TIMEOUT_S) == 0, log.read_text()[-3000:]
    finally:
        if second.poll() is None:
            second.kill()
    assert snapshot(data) == before  # nothing written again: the data was complete
    assert "Traceback" not in log.read_text()
