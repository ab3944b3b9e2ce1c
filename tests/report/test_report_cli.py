"""`python -m fdeval.report` on two run folders made here (verdict JSONs + scores/verdicts.csv)."""

from __future__ import annotations

import csv
import json
import subprocess
import sys
from pathlib import Path

import pytest

from fdeval.benchmarks.instructfd.judges.base import verdict_to_dict
from fdeval.metrics.csvio import write_csv
from fdeval.report.__main__ import main
from fdeval.benchmarks.instructfd.reporting.runs import load_run, verdict_table
from fdeval.benchmarks.instructfd.records import InstructFDCase, Verdict
from fdeval.types import TestCase

VERDICTS, SCORES = (
    "verdicts/rules-0123456789ab",
    "scores/rules-ba9876543210",
)  # as run.json's `steps` names them
PROV = {
    "benchmark": "instructfd",
    "benchmark_version": "1.0",
    "metric_version": "1",
    "seed": 0,
    "fdeval_version": "0",
}


def case(conv: str, policy: str, scenario: str, judge_policies=None) -> TestCase:
    return TestCase(
        case_id=f"{conv}__{policy}",
        conversation_id=conv,
        benchmark="instructfd",
        scenario=scenario,
        system_instruction=None if policy == "none" else "x",
        turns=(),
        data=InstructFDCase(policy, (), judge_policies or (policy,)),
    )


def make_run(
    root: Path, model: str, passes: dict[str, int], base_passes: dict[str, int], n: int = 8
) -> Path:
    """A run folder: n conversations per instruction (listen: scenarios A/B, acknowledge: C), with baselines."""
    run = root / "outputs" / "instructfd" / model / "default"
    cases, verdicts = {}, []
    for policy, scenarios in (("listen", "AB"), ("acknowledge", "C")):
        for i in range(n):
            conv, s = f"{policy[:3]}{i}", scenarios[i % len(scenarios)]
            for c in (case(conv, policy, s), case(conv, "none", s, (policy,))):
                cases[c.case_id] = c
            verdicts.append(
                Verdict(
                    f"{conv}__{policy}",
                    policy,
                    "adhere" if i < passes[policy] else "not_adhere",
                    "",
                    "rules",
                    "1",
                    "h1",
                )
            )
            verdicts.append(
                Verdict(
                    f"{conv}__none",
                    policy,
                    "adhere" if i < base_passes[policy] else "not_adhere",
                    "",
                    "rules",
                    "1",
                    "h1",
                )
            )
    model_id = f"{model}:0123456789ab"
    for v in verdicts:
        f = run / VERDICTS / f"{v.case_id}@{v.policy}.json"
        f.parent.mkdir(parents=True, exist_ok=True)
        f.write_text(json.dumps({**verdict_to_dict(v), "model_id": model_id}))
    ids = {(v.case_id, v.policy): model_id for v in verdicts}
    write_csv(
        verdict_table(verdicts, cases, ids, {**PROV, "model_id": model_id}),
        run / SCORES / "verdicts.csv",
    )
    (run / "run.json").write_text(
        json.dumps(
            {
                "command_config": {
                    "model": {"name": model},
                    "benchmark": {"_target_": "fdeval.benchmarks.instructfd.benchmark.InstructFD"},
                },
                "steps": {"judge": VERDICTS, "score": SCORES},
            }
        )
    )
    return run


@pytest.fixture()
def runs(tmp_path):
    a = make_run(
        tmp_path, "alpha", {"listen": 8, "acknowledge": 4}, {"listen": 0, "acknowledge": 4}
    )
    b = make_run(tmp_path, "beta", {"listen": 3, "acknowledge": 7}, {"listen": 3, "acknowledge": 6})
    labels = tmp_path / "labels.csv"
    labels.write_text(
        "case_id,policy,label,model\n"
        "lis0__listen,listen,adhere,alpha\nlis0__listen,listen,not_adhere,beta\n"
        "ack7__acknowledge,acknowledge,not_adhere,alpha\nack7__acknowledge,acknowledge,adhere,beta\n"
        "lis5__none,listen,adhere,beta\n"
    )
    return a, b, labels


def read(path: Path) -> list[dict[str, str]]:
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def test_cross_model_report(runs, tmp_path, capsys):
    a, b, labels = runs
    out = tmp_path / "report"
    assert (
        main([str(a), str(b), "--out", str(out), "--labels", str(labels), "--resamples", "400"])
        == 0
    )
    names = sorted(p.name for p in out.iterdir())
    for stem in ("ias_ci", "delta_ias", "scenario_ias", "judge_validation"):
        assert {f"{stem}.csv", f"{stem}.md", f"{stem}.tex"} <= set(names)
    assert "ias_by_instruction.png" in names and "runs.csv" in names

    ias = {(r["model"], r["instruction"]): r for r in read(out / "ias_ci.csv")}
    assert (
        float(ias[("alpha", "listen")]["ias"]) == 1.0
        and float(ias[("beta", "acknowledge")]["ias"]) == 0.875
    )
    assert ias[("alpha", "overall")]["model_id"] == "alpha:0123456789ab"
    md = (out / "ias_ci.md").read_text()
    assert "| Instruction | alpha | beta |" in md  # models as columns
    assert "| Listen | 100.0% [100.0, 100.0] † | 37.5% [" in md  # n = 8 < min_n_ci: marked

    delta = {(r["model"], r["instruction"]): r for r in read(out / "delta_ias.csv")}
    d = delta[("alpha", "listen")]
    assert (d["b"], d["c"], d["n_pairs"]) == ("8", "0", "8")
    assert float(d["mcnemar_p"]) == pytest.approx(2 / 2**8) and d["significant"] == "True"
    assert float(d["holm_p"]) == pytest.approx(2 * 2 / 2**8)  # two tests in alpha's family
    dmd = (out / "delta_ias.md").read_text()
    assert "| Listen | **+100.0%** | +0.0% |" in dmd
    assert r"\textbf{+100.0\%}" in (out / "delta_ias.tex").read_text()

    scen = (out / "scenario_ias.md").read_text()
    assert (
        "| Scenario | Instruction | alpha | beta |" in scen
        and "| C | Acknowledge | 50.0% | 87.5% |" in scen
    )

    val = {(r["group"], r["key"]): r for r in read(out / "judge_validation.csv")}
    o = val[("overall", "all")]
    # alpha: lis0 TP, ack7 TN; beta: lis0 FP, ack7 FN, lis5__none FN (its baseline failed listen)
    assert (o["tp"], o["fn"], o["fp"], o["tn"]) == ("1", "2", "1", "1")
    assert set(val) >= {("model", "alpha"), ("model", "beta"), ("instruction", "listen")}
    assert "Confusion matrix" in (out / "judge_validation.md").read_text()

    png = (out / "ias_by_instruction.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and b"Software" not in png
    printed = capsys.readouterr().out.split()
    assert str(out / "ias_by_instruction.png") in printed

    # a second report over the same runs rewrites nothing (same text, same PNG bytes)
    before = {p.name: p.stat().st_mtime_ns for p in out.iterdir()}
    assert (
        main([str(a), str(b), "--out", str(out), "--labels", str(labels), "--resamples", "400"])
        == 0
    )
    assert {p.name: p.stat().st_mtime_ns for p in out.iterdir()} == before


def test_png_is_the_same_from_another_process(runs, tmp_path):
    a, b, _ = runs
    args = [str(a), str(b), "--resamples", "50"]
    assert main([*args, "--out", str(tmp_path / "here")]) == 0
    cmd = [sys.executable, "-m", "fdeval.report", *args, "--out", str(tmp_path / "there")]
    subprocess.run(cmd, check=True, capture_output=True, timeout=600)
    for name in ("ias_by_instruction.png", "delta_ias.tex", "ias_ci.csv"):
        assert (tmp_path / "here" / name).read_bytes() == (tmp_path / "there" / name).read_bytes()


def test_same_model_twice_gets_two_columns(runs, tmp_path):
    a, _, _ = runs
    other = tmp_path / "outputs" / "instructfd" / "alpha" / "delay=1"
    import shutil

    shutil.copytree(a, other)
    out = tmp_path / "report"
    assert main([str(a), str(other), "--out", str(out), "--resamples", "50", "--no-figure"]) == 0
    assert "| Instruction | alpha/default | alpha/delay=1 |" in (out / "ias_ci.md").read_text()
    assert not (out / "ias_by_instruction.png").exists()


def test_stale_verdict_table_is_an_error(runs, tmp_path, capsys):
    a, _, _ = runs
    f = a / VERDICTS / "lis0__listen@listen.json"
    d = json.loads(f.read_text())
    f.write_text(json.dumps({**d, "verdict": "not_adhere"}))
    assert main([str(a), "--out", str(tmp_path / "r")]) == 2
    err = capsys.readouterr().err.strip()
    assert "does not match" in err and "lis0__listen@listen" in err and "\n" not in err


@pytest.mark.parametrize(
    "args, needle",
    [
        (["--resamples", "0"], "report.bootstrap_resamples"),
        (["--alpha", "1.5"], "report.alpha"),
        (["--method", "exact"], "report.ci_method"),
        (["--labels", "/nonexistent.csv"], "report.human_labels: no such file"),
    ],
)
def test_bad_options(runs, tmp_path, capsys, args, needle):
    a, _, _ = runs
    assert main([str(a), "--out", str(tmp_path / "r"), *args]) == 2
    assert needle in capsys.readouterr().err


def test_not_a_run_folder(tmp_path, capsys):
    assert main([str(tmp_path), "--out", str(tmp_path / "r")]) == 2
    assert "is this a run folder" in capsys.readouterr().err


def test_bad_verdict_table_row(runs, tmp_path):
    a, _, _ = runs
    f = a / SCORES / "verdicts.csv"
    lines = f.read_text().splitlines()
    lines[3] = (
        lines[3].replace(",adhere,", ",maybe,", 1)
        if ",adhere," in lines[3]
        else lines[3].replace(",not_adhere,", ",maybe,", 1)
    )
    f.write_text("\n".join(lines) + "\n")
    with pytest.raises(
        Exception, match=r"verdicts.csv: line 4: field 'verdict': invalid value 'maybe'"
    ):
        load_run(a)
