"""Atomic, durable file writes, and the strict JSON reader of the files fdeval reads back.

Writes: a stage's output exists only once it is complete and on disk.

Every writer goes through `atomic_path`: a temp name beside the target, fsync, rename, fsync of
the folder, so a crash or a power loss leaves either the old file or the whole new one. Files get
the permissions the umask gives (mkstemp alone would make them 0600). The first write of a process
in a folder removes the temp files that killed writers on this host left there. A write that fails for an
environmental reason (read-only folder, full disk) is a one-line `WriteError` naming the file.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import json
import os
import re
import shutil
import socket
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable, Iterator

from fdeval.errors import FdevalError


_HOST = re.sub(r"[^A-Za-z0-9_-]", "_", socket.gethostname())
# Read once (single-threaded at import): os.umask can only be read by setting it.
_UMASK = os.umask(0o022)
os.umask(_UMASK)
_FILE_MODE = 0o666 & ~_UMASK
_HASHES: dict[tuple[str, int, int], str] = {}
_SWEPT: set[str] = set()  # folders this process has cleared of dead writers' temp files


class WriteError(FdevalError):
    """A file could not be written (permissions, a full disk, a read-only file system)."""


def _write_error(path: Path, e: BaseException) -> WriteError:
    if isinstance(e, OSError):
        why = e.strerror or str(e)
    else:  # e.g. libsndfile's "System error." hides the errno: say what the disk says
        why = str(e).strip() or type(e).__name__
        with contextlib.suppress(OSError):  # no free-space figure: keep the library's words
            if shutil.disk_usage(path.parent).free < 1 << 20:
                why = f"{os.strerror(errno.ENOSPC)} ({why})"
    return WriteError(f"{path}: cannot write: {why}")


def file_sha256(path: str | os.PathLike) -> str:
    """sha256 of a file's bytes (cached per process by path, size and mtime)."""
    p = Path(path)
    st = p.stat()
    key = (str(p.resolve()), st.st_size, st.st_mtime_ns)
    if key not in _HASHES:
        h = hashlib.sha256()
        with open(p, "rb") as f:
            for block in iter(lambda: f.read(1 << 22), b""):
                h.update(block)
        _HASHES[key] = h.hexdigest()
    return _HASHES[key]


def _fsync(path: Path, directory: bool = False) -> None:
    fd = os.open(path, os.O_RDONLY | (os.O_DIRECTORY if directory else 0))
    try:
        os.fsync(fd)
    except OSError as e:  # some file systems cannot fsync a folder; the file itself was synced
        if not directory or e.errno not in (errno.EINVAL, errno.ENOTSUP, errno.EBADF):
            raise
    finally:
        os.close(fd)


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


def _sweep_once(folder: Path) -> None:
    """Clear `folder` of temps left by killed writers the first time this process writes there, so
    that no folder keeps them (a step that sweeps its own folders does it earlier; this covers all)."""
    key = os.fspath(folder)
    if key not in _SWEPT:
        _SWEPT.add(key)
        with contextlib.suppress(OSError):  # a folder that cannot be listed fails the write itself
            remove_stale_temps(folder)


@contextmanager
def atomic_path(path: str | os.PathLike) -> Iterator[Path]:
    """Yield a temporary path beside `path`; rename it onto `path` only if the block succeeds."""
    path = Path(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        _sweep_once(path.parent)
        # host and pid in the name let a later run tell a crashed writer's leftovers from live ones
        fd, tmp = tempfile.mkstemp(
            prefix=f".{path.name}.{_HOST}-{os.getpid()}.",
            suffix=".tmp" + path.suffix,
            dir=path.parent,
        )
        os.close(fd)
    except OSError as e:
        raise _write_error(path, e) from None
    tmp_path = Path(tmp)
    try:
        try:
            yield tmp_path
        except (OSError, RuntimeError) as e:
            # soundfile and h5py report a failed write as a RuntimeError; any other is a bug: re-raise
            if isinstance(e, RuntimeError) and type(e).__module__.split(".")[0] not in (
                "soundfile",
                "h5py",
            ):
                raise
            raise _write_error(path, e) from e
        try:
            os.chmod(tmp_path, _FILE_MODE)
            _fsync(tmp_path)
            os.replace(tmp_path, path)
            _fsync(path.parent, directory=True)
        except OSError as e:
            raise _write_error(path, e) from None
    finally:
        if tmp_path.exists():
            tmp_path.unlink()


def write_text_atomic(path: str | os.PathLike, text: str) -> None:
    """Write `text` atomically; a file that already holds exactly this text is left untouched."""
    p = Path(path)
    if p.parent.is_dir():
        _sweep_once(p.parent)
    if (
        p.is_file()
        and p.stat().st_size == len(text.encode("utf-8"))
        and p.read_text(encoding="utf-8") == text
    ):
        return
    with atomic_path(path) as tmp:
        tmp.write_text(text, encoding="utf-8")


def write_json_atomic(path: str | os.PathLike, obj: Any) -> None:
    write_text_atomic(path, json.dumps(obj, indent=2, ensure_ascii=False, sort_keys=False) + "\n")


# ---------------------------------------------------------------------------------------------
# Reading JSON back: the strict reader shared by every JSON file fdeval reads (cases,
# transcripts, verdicts, a benchmark's own), one line naming the file when it cannot be read.


class HugeInt:
    """A JSON integer beyond 64 bits, kept as a marker so the field check can name its field.

    Python's int() refuses more than 4300 digits (a ValueError out of the parser) and float()
    overflows past ~1e308, so such a number would otherwise fail far from its field.
    """

    def __init__(self, digits: int):
        self.digits = digits

    def __repr__(self) -> str:
        return f"<integer with {self.digits} digits>"


_INT64 = 2**63


def _parse_int(s: str) -> int | HugeInt:
    n = len(s.lstrip("-"))
    if n > 19:  # checked before int(): int() of 5000 digits raises
        return HugeInt(n)
    v = int(s)
    return v if -_INT64 <= v < _INT64 else HugeInt(n)


def read_json_file(path: str | Path, error: Callable[[str, None, str, str], FdevalError]) -> Any:
    """The JSON value in `path`, integers beyond 64 bits as :class:`HugeInt`.

    Whatever stops the file being read raises `error(path, None, field, why)`, one line: field
    ``<file>`` when it is missing, unreadable or not UTF-8, ``<json>`` when it is not JSON or is
    nested too deeply for the parser.
    """
    try:
        data = Path(path).read_bytes()
    except FileNotFoundError:
        raise error(str(path), None, "<file>", "file not found") from None
    except OSError as e:
        raise error(str(path), None, "<file>", f"cannot read: {e.strerror or e}") from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        line = data.count(b"\n", 0, e.start) + 1
        raise error(
            str(path),
            None,
            "<file>",
            f"not valid UTF-8: byte {e.start} (line {line}) is {data[e.start : e.start + 1]!r}",
        ) from None
    try:
        return json.loads(text, parse_int=_parse_int)
    except json.JSONDecodeError as e:
        raise error(
            str(path), None, "<json>", f"invalid JSON at line {e.lineno} column {e.colno}: {e.msg}"
        ) from None
    except RecursionError:
        raise error(str(path), None, "<json>", "nested too deeply to parse") from None
