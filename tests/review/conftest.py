"""A default Instruct-FD run made once per test session in a tmp folder (the real pipeline: the
reference model, espeak voices, the rules judge; ~25 s), shared by the review tests."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers.launching import run_launch


@pytest.fixture(scope="session")
def instructfd_run(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("review_runs")
    proc = run_launch([f"out_root={root}", "progress=false"], root, timeout_s=900)
    assert proc.returncode == 0, proc.stderr[-2000:]
    runs = sorted((root / "instructfd").glob("*/*/run.json"))
    assert len(runs) == 1, runs
    return runs[0].parent
