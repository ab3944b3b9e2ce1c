"""Atomic file writes: a stage's output exists only once it is complete (temp name, then rename).

A case is "done" for a stage when its final file exists, so every writer goes through here.
"""

from __future__ import annotations

import json
import os
import re
import socket
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator


_HOST = re.sub(r"[^A-Za-z0-9_-]", "_", socket.gethostname())
_TEMP = re.compile(r"^\..+\.(?P<host>[A-Za-z0-9_-]+)-(?P<pid>\d+)\.[^.]+\.tmp")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def remove_stale_temps(folder: str | os.PathLike) -> int:
    """Delete temp files left in `folder` by writers on this host that no longer run (a kill).

    Files of live writers, and of writers on other hosts sharing the folder, are left alone.
    Returns how many were removed.
    """
    n = 0
    for p in Path(folder).glob(".*.tmp*"):
        m = _TEMP.match(p.name)
        if m and m["host"] == _HOST and not _alive(int(m["pid"])):
            p.unlink(missing_ok=True)
            n += 1
    return n


@contextmanager
def atomic_path(path: str | os.PathLike) -> Iterator[Path]:
    """Yield a temporary path beside `path`; rename it onto `path` only if the block succeeds."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    # host and pid in the name let a later run tell a crashed writer's leftovers from live ones
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.{_HOST}-{os.getpid()}.", suffix=".tmp" + path.suffix, dir=path.parent)
    os.close(fd)
    tmp_path = Path(tmp)
    try:
        yield tmp_path
        os.replace(tmp_path, path)
    finally:
        if tmp_path.exists():
            tmp_path.unlink()


def write_text_atomic(path: str | os.PathLike, text: str) -> None:
    """Write `text` atomically; a file that already holds exactly this text is left untouched."""
    p = Path(path)
    if p.is_file() and p.stat().st_size == len(text.encode("utf-8")) and p.read_text(encoding="utf-8") == text:
        return
    with atomic_path(path) as tmp:
        tmp.write_text(text, encoding="utf-8")


def write_json_atomic(path: str | os.PathLike, obj: Any) -> None:
    write_text_atomic(path, json.dumps(obj, indent=2, ensure_ascii=False, sort_keys=False) + "\n")
