import os
import subprocess
import sys

import pytest

from fdeval.errors import FileFieldError
from fdeval.files import (
    _HOST,
    HugeInt,
    atomic_path,
    read_json_file,
    remove_stale_temps,
    write_text_atomic,
)


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


def _dead_writer_temp(folder):
    """What a writer that dies inside atomic_path leaves (SIGKILL-like: os._exit skips cleanup)."""
    code = (
        "import os,sys; from fdeval.files import atomic_path\n"
        f"cm = atomic_path({str(folder / 'dead.h5')!r}); p = cm.__enter__(); p.write_text('x'); os._exit(0)"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
    (left,) = folder.glob(".dead.h5.*.tmp*")
    return left


def test_stale_temps_of_dead_writers_are_swept_live_ones_kept(tmp_path):
    dead = _dead_writer_temp(tmp_path)
    live = (
        tmp_path / f".live.h5.{_HOST}-{os.getpid()}.abc123.tmp.h5"
    )  # a writer of this process, mid-write
    live.write_text("y")
    assert remove_stale_temps(tmp_path) == 1
    assert live.exists() and not dead.exists()


def test_the_first_write_in_a_folder_sweeps_the_temps_of_dead_writers(tmp_path):
    dead = _dead_writer_temp(tmp_path)
    with atomic_path(tmp_path / "live.h5") as tmp:
        tmp.write_text("y")
        assert not dead.exists() and list(tmp_path.glob(".*.tmp*")) == [tmp]
    assert (tmp_path / "live.h5").read_text() == "y"
    assert not list(tmp_path.glob(".*.tmp*"))


def test_read_json_file_reads_strictly_and_names_the_file(tmp_path):
    """The one JSON reader of files fdeval reads back (cases, transcripts, verdicts): integers past
    64 bits come back as HugeInt (the field check names them); a missing, non-UTF-8 or non-JSON
    file is one line naming the file and what is wrong."""
    f = tmp_path / "x.json"
    f.write_text('{"a": 1, "big": ' + "9" * 30 + "}", encoding="utf-8")
    d = read_json_file(f, FileFieldError)
    assert d["a"] == 1 and isinstance(d["big"], HugeInt) and d["big"].digits == 30
    for content, field, why in (
        (None, "<file>", "file not found"),
        (b"{\xff}", "<file>", "not valid UTF-8"),
        (b"{,}", "<json>", "invalid JSON at line 1 column 2"),
    ):
        g = tmp_path / "bad.json"
        g.unlink(missing_ok=True)
        if content is not None:
            g.write_bytes(content)
        with pytest.raises(FileFieldError, match=f"{g}: case \\?: field '{field}': {why}"):
            read_json_file(g, FileFieldError)
