"""Shared pieces of the fault-injection suite (issue 14).

Every test launches `python -m fdeval.launch` as a user would (tests/test_trust.py's `launch` and
`one_line_error`), breaks something, and checks three things: the error (one line, exit 2, when the
fault is the user's), that every output finished before the fault is byte-identical afterwards
(`digests`), and that a relaunch of the same command completes what is missing.

`stall_env` is the deterministic "mid-write" of the kill tests: a `sitecustomize` put on the launch's
PYTHONPATH wraps `fdeval.files.atomic_path` (every output file of fdeval is written through it),
so that the Nth write whose path matches a pattern leaves its temp file half written, notes it in a
marker file and waits (`Stalled`). The test kills the launch once the marker is there: the signal lands while
that temp file is on disk and its target is not, every time; or releases it, and the write ends
whole.
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from helpers import sibling_module
from helpers.case_data import valid_case_dict, write_turn_audio
from test_trust import ONE, TWO, launch, one_line_error, runs  # noqa: F401  (re-exported for the suite)

TESTS = Path(__file__).resolve().parents[1]
run_dirs = runs  # the run folders under an out_root that recorded something (test_trust's runs)
TWO_IDS = ("fresh_pasta_stop__acknowledge", "job_offer_move__listen")


def is_temp(p: Path) -> bool:
    """An atomic write's temp file (`.<name>.<host>-<pid>.<random>.tmp<suffix>`)."""
    return p.name.startswith(".") and ".tmp" in p.name


def digests(root: Path) -> dict[str, str]:
    """sha256 of every file under `root` except the launch record (run.json, .hydra/, logs, locks)."""
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file()
        and ".hydra" not in p.parts
        and p.suffix != ".log"
        and not p.name.startswith(".lock")
        and p.name != "run.json"
    }


def temps(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob(".*") if p.is_file() and is_temp(p))


def assert_kept(before: dict[str, str], after: dict[str, str]) -> None:
    """Every file finished before (temps aside) is still there with the same bytes."""
    changed = sorted(
        k for k, v in before.items() if not k.split("/")[-1].startswith(".") and after.get(k) != v
    )
    assert not changed, f"finished outputs changed or lost: {changed}"


# -- the deterministic mid-write ------------------------------------------------------------------
_SITECUSTOMIZE = '''\
"""fdeval fault-injection hook of tests/faults (only active with FDEVAL_TEST_STALL_WRITE set)."""
import os

if os.environ.get("FDEVAL_TEST_STALL_WRITE"):
    import contextlib
    import fnmatch
    import time

    import fdeval.files as _files

    _real, _seen = _files.atomic_path, [0]
    _pattern = os.environ["FDEVAL_TEST_STALL_WRITE"]
    _nth = int(os.environ.get("FDEVAL_TEST_STALL_NTH", "1"))
    _mark = os.environ["FDEVAL_TEST_STALL_MARK"]

    @contextlib.contextmanager
    def _stalling(path):
        with _real(path) as tmp:
            yield tmp
            if fnmatch.fnmatch(os.fspath(path), _pattern):
                _seen[0] += 1
                if _seen[0] == _nth:
                    with open(tmp, "rb") as f:
                        whole = f.read()
                    os.truncate(tmp, len(whole) // 2)  # half written, as a cut writer leaves it
                    with open(_mark + ".part", "w") as f:
                        f.write(f"{os.getpid()} {os.fspath(path)} {os.fspath(tmp)}")
                    os.replace(_mark + ".part", _mark)
                    deadline = time.monotonic() + 300
                    while not os.path.exists(_mark + ".go") and time.monotonic() < deadline:
                        time.sleep(0.02)
                    if not os.path.exists(_mark + ".go"):
                        raise SystemExit("fault hook: nobody came")
                    with open(tmp, "wb") as f:  # released: the write goes on to its end
                        f.write(whole)

    _files.atomic_path = _stalling
'''


@pytest.fixture(scope="session")
def stall_hook(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("stall-hook")
    (d / "sitecustomize.py").write_text(_SITECUSTOMIZE)
    return d


def stall_env(hook: Path, mark: Path, pattern: str, nth: int = 1) -> dict[str, str]:
    """The environment of a launch whose `nth` write matching `pattern` (fnmatch on the full path)
    stops half written until `<mark>.go` exists."""
    path = os.pathsep.join(x for x in (str(hook), os.environ.get("PYTHONPATH", "")) if x)
    return {
        "PYTHONPATH": path,
        "FDEVAL_TEST_STALL_WRITE": pattern,
        "FDEVAL_TEST_STALL_NTH": str(nth),
        "FDEVAL_TEST_STALL_MARK": str(mark),
    }


def parent_pid(pid: int) -> int | None:
    """The parent of a live (not zombie) process, else None."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return None
    fields = dict(line.split(":\t", 1) for line in status.splitlines() if ":\t" in line)
    return None if fields.get("State", "").startswith(("Z", "X")) else int(fields["PPid"])


def children(pid: int) -> list[int]:
    return [
        int(p.name)
        for p in Path("/proc").iterdir()
        if p.name.isdigit() and parent_pid(int(p.name)) == pid
    ]


class Stalled:
    """A launch held mid-write by the hook: `pid`, `target` (the file being written), `temp`."""

    def __init__(
        self,
        tmp: Path,
        hook: Path,
        pattern: str,
        nth: int,
        *args: str,
        out_root: Path | None = None,
        in_child: bool = False,
    ):
        self.mark = tmp / f"stall-{time.monotonic_ns()}"
        out = out_root or tmp / "outputs"
        cmd = [sys.executable, "-m", "fdeval.launch", f"out_root={out}", "progress=false", *args]
        self.proc = subprocess.Popen(
            cmd,
            cwd=tmp,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, **stall_env(hook, self.mark, pattern, nth)},
        )
        deadline = time.monotonic() + 300
        while not self.mark.exists():
            if self.proc.poll() is not None or time.monotonic() > deadline:
                out, err = (
                    self.proc.communicate(timeout=60) if self.proc.poll() is not None else ("", "")
                )
                self.proc.kill()
                raise AssertionError(
                    f"the launch never reached write {nth} of {pattern}: exit {self.proc.returncode}"
                    f"\n{out[-2000:]}\n{err[-2000:]}"
                )
            time.sleep(0.02)
        pid, target, temp = self.mark.read_text().split(" ")
        self.writer = int(pid)
        if in_child:  # a client process of the launch writes
            assert parent_pid(self.writer) == self.proc.pid, (
                "the write stalled outside the launch's children"
            )
        else:
            assert self.writer == self.proc.pid, (
                "the write stalled in another process than the launch"
            )
        self.target, self.temp = Path(target), Path(temp)

    def kill(self, sig: int) -> subprocess.CompletedProcess:
        os.kill(self.proc.pid, sig)
        out, err = self.proc.communicate(timeout=60)
        return subprocess.CompletedProcess(self.proc.args, self.proc.returncode, out, err)

    def release(self) -> subprocess.CompletedProcess:
        (self.mark.parent / (self.mark.name + ".go")).touch()
        out, err = self.proc.communicate(timeout=300)
        return subprocess.CompletedProcess(self.proc.args, self.proc.returncode, out, err)

    def cleanup(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(timeout=60)


@pytest.fixture
def short_cases(tmp_path):
    """Two ~10 s cases (the case-loading tests' case, 2 s turn timeouts) in a case folder: realtime
    sessions in seconds."""
    root = tmp_path / "data"
    write_turn_audio(root, valid_case_dict())
    (root / "cases").mkdir()
    for policy, instruction in (("backchannel", None), ("listen", "Just listen.")):
        d = valid_case_dict()
        d["test_case_id"] = f"conv1__{policy}"
        if instruction:
            d.update(
                policy_name=policy,
                judge_policies=[policy],
                system_instruction=instruction,
                judge_instructions={policy: instruction},
            )
        for t in d["turns"]:
            t["timeout_s"] = 2.0
        (root / "cases" / f"{d['test_case_id']}.json").write_text(json.dumps(d))
    return root


# -- test_secrets / test_exposure: one watched launch on a Moshi server pool (observe.py) ---------
from . import observe  # noqa: E402


@pytest.fixture(scope="session")
def watched_pool_launch(moshi_python, tiny_moshi, tmp_path_factory) -> observe.WatchedLaunch:
    model_args = sibling_module("models/test_moshi_server.py").model_args
    return observe.watch_launch(
        tmp_path_factory.mktemp("watched"), model_args(moshi_python, tiny_moshi)
    )
