"""stage=score through `python -m fdeval.launch`: every report file, provenance, no rewrites on rerun."""

from __future__ import annotations

import csv
import shutil
import subprocess
from pathlib import Path

import pytest
from helpers.launching import run_launch, seed_data

from fdeval.engine.run import step_dir
from fdeval.report.__main__ import main

CASES = "benchmark.cases=[fresh_pasta_stop__acknowledge,fresh_pasta_stop__none]"
PROVENANCE = (
    "benchmark_version",
    "model_id",
    "judge",
    "judge_version",
    "prompt_hash",
    "metric_version",
    "seed",
)
TABLES = ("ias_ci", "delta_ias", "scenario_ias", "judge_validation")


def launch(tmp: Path, *args: str) -> subprocess.CompletedProcess:
    proc = run_launch(
        [CASES, f"out_root={seed_data(tmp / 'outputs')}", "progress=false", *args], cwd=tmp
    )
    assert proc.returncode == 0, f"exit {proc.returncode}\n{proc.stdout}\n{proc.stderr}"
    return proc


@pytest.fixture(scope="module")
def scored(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("score")
    labels = tmp / "labels.csv"
    labels.write_text(
        "case_id,policy,label,model\n"
        "fresh_pasta_stop__acknowledge,acknowledge,adhere,reference\n"
        "fresh_pasta_stop__none,acknowledge,not_adhere,\n"
    )
    extra = (f"report.human_labels={labels}", "report.bootstrap_resamples=2000")
    proc = launch(tmp, *extra)
    (run,) = [p.parent for p in (tmp / "outputs" / "instructfd" / "reference").glob("*/run.json")]
    return tmp, run, proc, extra


def rows(path: Path) -> list[dict[str, str]]:
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def test_score_writes_every_report_file(scored):
    _, run, proc, _ = scored
    s = step_dir(run, "score")
    expected = {
        "ias.csv",
        "ias.md",
        "ias.tex",
        "results.csv",
        "verdicts.csv",
        "ias_by_instruction.png",
    }
    expected |= {f"{t}.{ext}" for t in TABLES for ext in ("csv", "md", "tex")}
    assert expected <= {p.name for p in s.iterdir()}
    assert (
        "Instruction sensitivity" in proc.stdout
    )  # the delta table is printed after the IAS table
    for name in (
        "ias.csv",
        "results.csv",
        "verdicts.csv",
        "ias_ci.csv",
        "delta_ias.csv",
        "scenario_ias.csv",
        "judge_validation.csv",
    ):
        table = rows(s / name)
        assert table, name
        for col in PROVENANCE:
            assert all(r[col] != "" for r in table), (name, col)
    v = {(r["case_id"], r["policy"]): r for r in rows(s / "verdicts.csv")}
    r = v[("fresh_pasta_stop__none", "acknowledge")]
    assert (r["scenario"], r["policy_name"], r["conversation_id"]) == (
        "Short Stop Repair",
        "none",
        "fresh_pasta_stop",
    )
    assert r["model_id"].startswith("reference:")
    delta = {r["instruction"]: r for r in rows(s / "delta_ias.csv")}
    assert (
        delta["acknowledge"]["n_pairs"] == "1" and delta["acknowledge"]["boot_resamples"] == "2000"
    )
    val = {(r["group"], r["key"]): r for r in rows(s / "judge_validation.csv")}
    assert val[("overall", "all")]["n_labels"] == "2" and ("model", "reference") in val
    assert (s / "ias_by_instruction.png").read_bytes()[:4] == b"\x89PNG"
    # the tables say what they count, mark their small-n intervals and print the judge's limits
    md = (s / "ias.md").read_text() + (s / "ias_ci.md").read_text()
    assert "counts: 2 sessions scored (1 instructed, 1 un-instructed baselines); 2 verdicts" in md
    assert "judge limits: the rules judge reads content only as word overlap" in md
    assert {r["small_n"] for r in rows(s / "ias_ci.csv")} == {
        "True"
    }  # n = 1 (no interval at all: n/a)


def test_rescoring_rewrites_nothing(scored):
    tmp, run, _, extra = scored
    before = {p.name: p.stat().st_mtime_ns for p in step_dir(run, "score").iterdir()}
    launch(tmp, "stage=score", *extra)
    assert {p.name: p.stat().st_mtime_ns for p in step_dir(run, "score").iterdir()} == before


def test_report_cli_reads_the_run_with_or_without_its_verdict_table(scored, tmp_path):
    _, run, _, _ = scored
    bare = run.parent / "bare_copy"
    shutil.copytree(run, bare)
    (
        step_dir(bare, "score") / "verdicts.csv"
    ).unlink()  # scored before the table existed: cases via run.json
    assert main([str(run), "--out", str(tmp_path / "a"), "--resamples", "100"]) == 0
    assert main([str(bare), "--out", str(tmp_path / "b"), "--resamples", "100"]) == 0
    keep = (
        "model",
        "instruction",
        "n",
        "n_pass",
        "ias",
        "ias_ci_low",
        "ias_ci_high",
        "model_id",
        "prompt_hash",
    )
    a, b = rows(tmp_path / "a" / "ias_ci.csv"), rows(tmp_path / "b" / "ias_ci.csv")
    assert [{k: r[k] for k in keep} for r in a] == [{k: r[k] for k in keep} for r in b]
    assert a[0]["model"] == "reference"
