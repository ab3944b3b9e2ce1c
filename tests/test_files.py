import subprocess
import sys

import pytest

from fdeval.files import atomic_path, remove_stale_temps, write_text_atomic


def test_atomic_write_leaves_nothing_on_failure(tmp_path):
    target = tmp_path / "x.json"
    with pytest.raises(RuntimeError):
        with atomic_path(target) as tmp:
            tmp.write_text("half")
            raise RuntimeError("boom")
    assert not target.exists() and list(tmp_path.iterdir()) == []


def test_identical_rewrite_is_a_no_op(tmp_path):
    p = tmp_path / "a.txt"
    write_text_atomic(p, "hello")
    before = p.stat().st_mtime_ns
    write_text_atomic(p, "hello")
    assert p.stat().st_mtime_ns == before
    write_text_atomic(p, "world")
    assert p.read_text() == "world"


def test_stale_temps_of_dead_writers_are_swept_live_ones_kept(tmp_path):
    # a writer that dies inside atomic_path (SIGKILL-like: os._exit skips cleanup)
    code = ("import os,sys; from fdeval.files import atomic_path\n"
            f"cm = atomic_path({str(tmp_path / 'dead.h5')!r}); p = cm.__enter__(); p.write_text('x'); os._exit(0)")
    subprocess.run([sys.executable, "-c", code], check=True)
    with atomic_path(tmp_path / "live.h5") as live:
        live.write_text("y")
        assert len(list(tmp_path.glob(".*.tmp*"))) == 2
        assert remove_stale_temps(tmp_path) == 1
        assert live.exists()
    assert (tmp_path / "live.h5").read_text() == "y"
    assert not list(tmp_path.glob(".*.tmp*"))
