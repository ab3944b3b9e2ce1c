"""One small real Instruct-FD run (reference model, rules judge), made once per test session with
`python -m fdeval.launch`: the source of the recordings the interop tests import and export."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from helpers import launching

# Two sessions with an interrupting barge-in, one with a backchannel barge-in only (no
# interruption for FDB's user_interruption task) and one with no barge-in.
CASES = (
    "benchmark.cases=[fresh_pasta_stop__acknowledge,fresh_pasta_stop__none,"
    "bathroom_cleaning_mix__interrupt,balcony_tomatoes__continue]"
)


def launch(cwd: Path, *args: str) -> subprocess.CompletedProcess:
    proc = launching.run_launch(list(args), cwd, timeout_s=900)
    assert proc.returncode == 0, (
        f"exit {proc.returncode}\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    )
    return proc


@pytest.fixture(scope="session")
def run_launch():
    """`launch(cwd, *overrides)`: the launch as a user runs it."""
    return launch


@pytest.fixture(scope="session")
def live_run(tmp_path_factory) -> tuple[Path, list[str]]:
    """(run folder, its launch overrides)."""
    tmp = tmp_path_factory.mktemp("interop")
    overrides = [f"out_root={tmp / 'out'}", "progress=false", CASES]
    launch(tmp, *overrides)
    (run,) = [p.parent for p in (tmp / "out").glob("*/reference/*/run.json")]
    return run, overrides
