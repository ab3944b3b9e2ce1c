"""`python -m fdeval.launch` from the tests, as a user runs it, with the built-in data made once.

Most launch tests run a few cases of the built-in Instruct-FD set, and each used to generate the
whole set again in its own out_root (about 2 CPU-s a launch). `seed_data(out_root)` copies the set
that one `stage=generate` launch of this test process wrote (on first use) into `out_root`, where
the launch finds it complete and generates nothing. The copy is a real copy, never a link: fault
tests truncate and rewrite generated files, and no test may see another's damage.

A test about generating itself, or one that counts what `_data/` holds, does not seed.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import threading
from pathlib import Path

# Two built-in cases that most launch tests run (tests/conftest.py's `two_case_run` made them once).
TWO_CASES = "benchmark.cases=[fresh_pasta_stop__acknowledge,job_offer_move__listen]"

# The shared folder (set by tests/conftest.py to a folder of this pytest process's basetemp).
_home: Path | None = None
_lock = threading.Lock()


def configure(home: Path) -> None:
    global _home
    _home = Path(home)


def run_launch(
    args: list[str],
    cwd: Path,
    timeout_s: float = 600,
    env: dict | None = None,
    python: str = sys.executable,
) -> subprocess.CompletedProcess:
    """The launch's finished process; past `timeout_s` an AssertionError that names the command
    (a subprocess timeout says only how long it waited)."""
    cmd = [python, "-m", "fdeval.launch", *args]
    try:
        return subprocess.run(
            cmd,
            cwd=cwd,
            capture_output=True,
            text=True,
            timeout=timeout_s,
            env=os.environ if env is None else env,
        )
    except subprocess.TimeoutExpired as e:
        tail = (
            (e.stdout or b"")[-2000:] if isinstance(e.stdout, bytes) else (e.stdout or "")[-2000:]
        )
        raise AssertionError(
            f"`{' '.join(args)}` was still running after {timeout_s:.0f} s (a loaded machine, "
            f"or the launch hangs); its last output:\n{tail}"
        ) from None


def builtin_data() -> Path:
    """The out_root of one `stage=generate` launch of the built-in Instruct-FD set (made on first use)."""
    assert _home is not None, "tests/conftest.py configures the shared data folder"
    with _lock:
        done = _home / ".done"
        if not done.is_file():
            _home.mkdir(parents=True, exist_ok=True)
            proc = run_launch(
                [f"out_root={_home / 'out'}", "progress=false", "stage=generate"], cwd=_home
            )
            assert proc.returncode == 0, (
                f"generating the built-in set failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
            )
            done.write_text("ok")
    return _home / "out"


def seed_data(out_root: Path) -> Path:
    """Copy the generated built-in set into `out_root`'s `instructfd/_data/` (nothing already there
    is overwritten); returns `out_root`."""
    src = builtin_data() / "instructfd" / "_data"
    dst = Path(out_root) / "instructfd" / "_data"
    for data in src.iterdir():
        if (
            data.is_dir() and not (dst / data.name).exists()
        ):  # (not the generate's lock file beside it)
            shutil.copytree(data, dst / data.name)
    return Path(out_root)


def copy_run(made: tuple[Path, Path], dst: Path) -> tuple[Path, Path]:
    """A copy of a launch's folder (its out_root `outputs/` inside): (dst, the copied run folder). A
    run folder holds no absolute path of its own, so the copy is a finished run where it lies."""
    src, run = made
    shutil.copytree(src / "outputs", dst / "outputs", symlinks=True)
    return dst, dst / run.relative_to(src)
