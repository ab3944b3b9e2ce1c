"""A case set that cannot be used fails in one line (exit 2) before the run folder exists: a
missing `benchmark.cases_dir`, an empty one, and an unknown id in `benchmark.cases` (checked
against the ids generate will write, so no data is generated for it either)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from helpers.launching import run_launch


def launch(tmp: Path, *args: str) -> subprocess.CompletedProcess:
    return run_launch([f"out_root={tmp / 'out'}", "progress=false", *args], tmp, timeout_s=900)


def one_line_error(proc: subprocess.CompletedProcess, starts: str) -> str:
    assert proc.returncode == 2, proc.stdout[-2000:] + proc.stderr[-2000:]
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"fdeval: error: {starts}"), proc.stderr[-2000:]
    assert "run folder" not in proc.stdout, proc.stdout[-2000:]
    return lines[0]


def test_a_missing_cases_dir_leaves_no_run_folder(tmp_path):
    line = one_line_error(
        launch(tmp_path, f"benchmark.cases_dir={tmp_path / 'nope'}"), "benchmark.cases_dir: "
    )
    assert str(tmp_path / "nope") in line
    assert not (tmp_path / "out" / "instructfd").exists()


def test_an_empty_cases_dir_leaves_no_run_folder(tmp_path):
    (tmp_path / "mine").mkdir()
    line = one_line_error(
        launch(tmp_path, f"benchmark.cases_dir={tmp_path / 'mine'}"), str(tmp_path / "mine")
    )
    assert "no case files (*.json) in this folder" in line
    assert not (tmp_path / "out" / "instructfd").exists()


@pytest.mark.parametrize(
    "benchmark, valid", [("instructfd", "fresh_pasta_stop__acknowledge"), ("echochain", "ec000-")]
)
def test_an_unknown_case_id_fails_before_generate_and_the_run_folder(tmp_path, benchmark, valid):
    line = one_line_error(
        launch(tmp_path, f"benchmark={benchmark}", "benchmark.cases=[no_such_case]"),
        "benchmark.cases: unknown case id(s) ['no_such_case']; valid: ",
    )
    assert valid in line  # the valid ids are listed
    assert not (tmp_path / "out" / benchmark).exists()  # neither its data nor a run folder
