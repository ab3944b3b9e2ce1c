"""A launch watched from outside, for test_secrets.py and test_exposure.py.

`Watch(pid)` samples, from a thread, every process below `pid` (the /proc parent links) while it
runs: its command line, the environment it was started with (/proc/<pid>/environ: what exec gave
it, which no later `del os.environ[...]` in the child changes) and the TCP sockets it listens on
(the LISTEN rows of /proc/<pid>/net/tcp and tcp6 whose inode is one of its open fds). Linux only.

`planted_keys()` is one random value per credential variable fdeval may meet; `leaks(root, keys)`
lists every place under `root` that holds one: any file's bytes, and in HDF5 files every
attribute and every dataset of strings (compressed ones included), decoded.

`watch_launch` runs one `python -m fdeval.launch` with the keys planted and the LLM judge on the
local Messages stand-in, watched; conftest.py's `watched_pool_launch` runs it once per session on
a Moshi server pool (the official moshi.server on the tiny random checkpoint, CPU, as
tests/models/test_moshi_server.py). `review_server` starts `python -m fdeval.review`.
"""

from __future__ import annotations

import contextlib
import os
import re
import secrets
import socket
import struct
import subprocess
import sys
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator

import h5py
import numpy as np

from helpers import health
from helpers.fake_messages_server import FakeMessagesServer, text

KEY_NAMES = ("ANTHROPIC_API_KEY", "OPENAI_API_KEY", "GEMINI_API_KEY", "XAI_API_KEY", "HF_TOKEN")
YES = '{"reasoning": "Step 5: fine.", "adherence": "yes"}'
LISTEN = "0A"


def planted_keys() -> dict[str, str]:
    """Unique random values, so that a hit can only be a leak of this run's variable."""
    return {name: f"plant-{name.lower()}-{secrets.token_hex(16)}" for name in KEY_NAMES}


# -- processes ---------------------------------------------------------------------------------
def _ppid(pid: int) -> int | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return int(stat.rsplit(")", 1)[1].split()[1])  # the command name may hold spaces and parens


def descendants(pid: int) -> list[int]:
    parents = {}
    for p in Path("/proc").iterdir():
        if p.name.isdigit() and (pp := _ppid(int(p.name))) is not None:
            parents[int(p.name)] = pp
    found, frontier = [], {pid}
    while frontier:
        frontier = {c for c, pp in parents.items() if pp in frontier}
        found += sorted(frontier)
    return found


def _addr(hexaddr: str) -> tuple[str, int]:
    host, port = hexaddr.split(":")
    raw = bytes.fromhex(host)
    if len(raw) == 4:
        ip = socket.inet_ntop(socket.AF_INET, raw[::-1])
    else:  # four little-endian 32-bit words
        ip = socket.inet_ntop(
            socket.AF_INET6, b"".join(struct.pack(">I", w) for w in struct.unpack("<4I", raw))
        )
    return ip, int(port, 16)


def listening(pid: int) -> set[tuple[str, int]]:
    """(address, port) of every TCP socket `pid` itself holds in LISTEN state."""
    inodes = set()
    try:
        for fd in Path(f"/proc/{pid}/fd").iterdir():
            try:
                target = os.readlink(fd)
            except OSError:
                continue
            if target.startswith("socket:["):
                inodes.add(target[8:-1])
    except OSError:
        return set()
    out = set()
    for table in ("tcp", "tcp6"):
        try:
            rows = Path(f"/proc/{pid}/net/{table}").read_text().splitlines()[1:]
        except OSError:
            continue
        for row in rows:
            f = row.split()
            if f[3] == LISTEN and f[9] in inodes:
                out.add(_addr(f[1]))
    return out


@dataclass
class Seen:
    pid: int
    cmdline: list[str]
    environ: dict[str, str]
    listen: set[tuple[str, int]] = field(default_factory=set)


class Watch:
    """Every process below `pid` while it runs, sampled every `every_s` (see the module docstring)."""

    def __init__(self, pid: int, every_s: float = 0.05):
        self.pid, self.every_s = pid, every_s
        self.seen: dict[int, Seen] = {}
        self._lock = threading.Lock()  # `children` may be called while the thread samples
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="watch", daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        while not self._stop.is_set():
            for pid in [self.pid, *descendants(self.pid)]:
                with self._lock:
                    self._sample(pid)
            self._stop.wait(self.every_s)

    def _sample(self, pid: int) -> None:
        # the command line is read every time: between fork and exec a child still shows its
        # parent's command line and environment, so both are taken again once it has exec'd
        try:
            cmd = [
                c.decode(errors="replace")
                for c in Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
                if c
            ]
            s = self.seen.get(pid)
            if not cmd:  # a zombie (or a kernel thread): nothing to read, keep what was seen
                return
            if s is None or s.cmdline != cmd:
                env = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
                s = self.seen[pid] = Seen(
                    pid,
                    cmd,
                    dict(e.decode(errors="replace").partition("=")[::2] for e in env if e),
                    s.listen if s else set(),
                )
        except OSError:  # gone already
            return
        s.listen |= listening(pid)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=10)

    def children(self) -> list[Seen]:
        """The processes below the watched one, less forks never seen to exec (they show the
        watched process's own command line and environment, see `_sample`)."""
        with self._lock:
            top = self.seen[self.pid].cmdline if self.pid in self.seen else None
            return [
                s for pid, s in sorted(self.seen.items()) if pid != self.pid and s.cmdline != top
            ]


# -- files -------------------------------------------------------------------------------------
def _strings(value) -> list[str]:
    a = np.asarray(value)
    if a.dtype.names:
        return [x for n in a.dtype.names for x in _strings(a[n])]
    if a.dtype.kind in "SOU":
        return [v.decode(errors="replace") if isinstance(v, bytes) else str(v) for v in a.ravel()]
    return []


def h5_strings(path: Path) -> list[tuple[str, str]]:
    """(where, text) for every attribute and every string dataset (or string field) in an HDF5 file."""
    out: list[tuple[str, str]] = []

    def visit(name: str, obj) -> None:
        for k, v in obj.attrs.items():
            out.extend((f"{name}@{k}", s) for s in _strings(v))
        if isinstance(obj, h5py.Dataset):
            out.extend((name, s) for s in _strings(obj[()]))

    with h5py.File(path, "r") as f:
        visit("/", f)
        f.visititems(visit)
    return out


def leaks(root: Path, keys: dict[str, str]) -> list[str]:
    """'<file>: <variable>' (with the HDF5 place) for every planted value found under `root`."""
    found = []
    for p in sorted(root.rglob("*")):
        if not p.is_file():
            continue
        data = p.read_bytes()
        found += [f"{p}: {name}" for name, v in keys.items() if v.encode() in data]
        if data[:8] == b"\x89HDF\r\n\x1a\n":
            found += [
                f"{p}:{where}: {name}"
                for where, s in h5_strings(p)
                for name, v in keys.items()
                if v in s
            ]
    return found


def pool_servers(run_dir: Path) -> dict[int, str]:
    """pid -> server log name of every server the run's pool started (its log names each start)."""
    return {
        int(m.group(1)): p.name
        for p in sorted((run_dir / "servers").glob("*.log"))
        for m in re.finditer(
            r"^=== fdeval [^=]*: pid (\d+) ===$", p.read_text(errors="replace"), re.M
        )
    }


# -- the watched launch and the review server -----------------------------------------------------
@dataclass
class WatchedLaunch:
    tmp: Path
    keys: dict[str, str]
    proc: subprocess.CompletedProcess
    watch: Watch
    judge: FakeMessagesServer
    run_dir: Path


def keyed_environ(keys: dict[str, str]) -> dict[str, str]:
    """This environment with the planted keys and without SDK settings that would redirect a client."""
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("ANTHROPIC_BASE_URL", "ANTHROPIC_AUTH_TOKEN")
    }
    return {**env, **keys}


def watch_launch(tmp: Path, model_args: list[str]) -> WatchedLaunch:
    """One case through every stage with the planted keys, the LLM judge on the Messages stand-in,
    the model from `model_args`; every process below the launch watched while it runs."""
    keys = planted_keys()
    with FakeMessagesServer() as judge:
        judge.responder = lambda body: text(YES)
        cmd = [
            sys.executable,
            "-m",
            "fdeval.launch",
            f"out_root={tmp / 'outputs'}",
            "progress=false",
            "benchmark.timeout_s=2",
            "benchmark.cases=[fresh_pasta_stop__acknowledge]",
            "judge=llm",
            f"judge.base_url={judge.base_url}",
            *model_args,
            *health.LENIENT_ARGS,
        ]  # a realtime Moshi on a loaded CPU can fall behind: this is about keys
        p = subprocess.Popen(
            cmd,
            cwd=tmp,
            env=keyed_environ(keys),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        watch = Watch(p.pid)
        try:
            try:
                out, err = p.communicate(timeout=900)
            except subprocess.TimeoutExpired:
                raise AssertionError(
                    f"the watched launch (the real Moshi server on CPU) was still running after "
                    f"900 s: `{' '.join(cmd[3:])}`"
                ) from None
        finally:
            watch.stop()
            if p.poll() is None:
                p.kill()
                p.wait()
    proc = subprocess.CompletedProcess(cmd, p.returncode, out, err)
    assert proc.returncode == 0, (out[-4000:], err[-4000:])
    (run_dir,) = {h.parent.parent for h in (tmp / "outputs").rglob("sessions/*.h5")}
    return WatchedLaunch(tmp, keys, proc, watch, judge, run_dir)


@contextlib.contextmanager
def review_server(
    run_dirs: list[Path], keys: dict[str, str]
) -> Iterator[tuple[subprocess.Popen, str]]:
    """`python -m fdeval.review RUN_DIR...` started as a user would, with the planted keys; yields
    the process and its URL (read from the line it prints)."""
    cmd = [sys.executable, "-m", "fdeval.review", *map(str, run_dirs), "--reviewer", "tester"]
    p = subprocess.Popen(
        cmd,
        env={**keyed_environ(keys), "FDEVAL_REVIEW_LOG": "1"},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        line = p.stdout.readline()
        assert line.startswith("fdeval review: http://127.0.0.1:"), (line, p.poll())
        yield p, line.split(": ", 1)[1].strip().rstrip("/")
    finally:
        p.terminate()
        p.wait(timeout=30)
