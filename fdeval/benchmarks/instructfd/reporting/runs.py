"""A run's verdicts as one table (``scores/verdicts.csv``), and reading run folders back.

``stage=score`` writes ``<run_dir>/scores/<key>/verdicts.csv``: one row per verdict with what the
report needs from its case, so a report can be made from run folders alone:

    case_id, policy, verdict, scenario, policy_name, conversation_id, case_seed,
    model_id, judge, judge_version, prompt_hash   (the verdict file's own judge fields)
    + the run's provenance: benchmark, benchmark_version, metric_version, seed, fdeval_version

:func:`load_run` reads a run folder's judge and score folders of its last launch (run.json's
``steps``: ``verdicts/<judge>-<key>/``, ``scores/<judge>-<key>/``): ``verdicts.csv``, checked
against the verdict files when they are there (a table older than the verdicts is an error:
rerun ``stage=score``). A folder without the table (scored before it existed) is read from its
verdict files and its cases, found through ``run.json``'s config the way the run found them. The
provenance names the verdicts folder (``verdicts_dir``), so a report says which judge it shows.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Mapping

from hydra.errors import InstantiationException
from hydra.utils import instantiate

from fdeval.benchmarks.instructfd.judges.base import VERDICT_LABELS, VerdictError, verdict_from_dict
from fdeval.benchmarks.instructfd.metrics.ias import METRIC_VERSION
from fdeval.benchmarks.instructfd.records import InstructFDCase, Verdict
from fdeval.benchmarks.instructfd.reporting.build import JUDGE_LIMITS, RunData
from fdeval.engine.identity import data_dir
from fdeval.engine.run import step_dir
from fdeval.errors import FdevalError
from fdeval.files import read_json_file
from fdeval.metrics.csvio import CsvError, read_csv_rows
from fdeval.types import TestCase

VERDICT_TABLE = (
    "case_id",
    "policy",
    "verdict",
    "scenario",
    "policy_name",
    "conversation_id",
    "case_seed",
    "model_id",
    "judge",
    "judge_version",
    "prompt_hash",
)
RUN_COLUMNS = ("benchmark", "benchmark_version", "metric_version", "seed", "fdeval_version")


def verdict_table(
    verdicts: list[Verdict],
    cases: Mapping[str, TestCase],
    model_ids: Mapping[tuple[str, str], str],
    provenance: Mapping[str, Any],
) -> list[dict[str, Any]]:
    """The rows of ``scores/verdicts.csv`` (verdicts in the given order)."""
    run = {k: provenance[k] for k in RUN_COLUMNS if k in provenance}
    rows = []
    for v in verdicts:
        c = cases[v.case_id]
        rows.append(
            {
                "case_id": v.case_id,
                "policy": v.policy,
                "verdict": v.verdict,
                "scenario": c.scenario,
                "policy_name": c.data.policy_name,
                "conversation_id": c.conversation_id,
                "case_seed": c.seed,
                "model_id": model_ids.get((v.case_id, v.policy), provenance.get("model_id", "")),
                "judge": v.judge,
                "judge_version": v.judge_version,
                "prompt_hash": v.prompt_hash,
                **run,
            }
        )
    return rows


def read_verdict_table(
    path: str | Path,
) -> tuple[list[Verdict], dict[str, TestCase], dict[tuple[str, str], str], dict[str, Any]]:
    """(verdicts, cases rebuilt from the rows, model id per verdict, run provenance) of a verdicts.csv."""
    verdicts: list[Verdict] = []
    cases: dict[str, TestCase] = {}
    model_ids: dict[tuple[str, str], str] = {}
    values: dict[str, list[str]] = {}
    for line, r in read_csv_rows(path, VERDICT_TABLE, RUN_COLUMNS):
        for name in VERDICT_TABLE:
            if not r[name]:
                raise CsvError(path, line, name, "empty cell")
        if r["verdict"] not in VERDICT_LABELS:
            raise CsvError(
                path,
                line,
                "verdict",
                f"invalid value {r['verdict']!r}; expected one of {', '.join(VERDICT_LABELS)}",
            )
        try:
            seed = int(r["case_seed"])
        except ValueError:
            raise CsvError(
                path, line, "case_seed", f"expected an integer, got {r['case_seed']!r}"
            ) from None
        case = TestCase(
            r["case_id"],
            r["conversation_id"],
            r["benchmark"] or "?",
            r["scenario"],
            None,
            (),
            seed=seed,
            data=InstructFDCase(r["policy_name"], (), ()),
        )  # type: ignore[arg-type]
        old = cases.setdefault(case.case_id, case)
        if old != case:
            raise CsvError(
                path, line, "case_id", f"case {case.case_id!r} appears with other case fields above"
            )
        verdicts.append(
            Verdict(
                r["case_id"],
                r["policy"],
                r["verdict"],
                "",
                r["judge"],
                r["judge_version"],  # type: ignore[arg-type]
                r["prompt_hash"],
            )
        )
        model_ids[(r["case_id"], r["policy"])] = r["model_id"]
        for k in ("model_id", "judge", "judge_version", "prompt_hash", *RUN_COLUMNS):
            if r.get(k) and r[k] not in values.setdefault(k, []):
                values[k].append(r[k])
    prov: dict[str, Any] = {
        k: "+".join(v) for k, v in values.items() if k in ("benchmark", "benchmark_version")
    }
    prov.update(
        {
            k: "+".join(values[k])
            for k in ("model_id", "judge", "judge_version", "prompt_hash")
            if k in values
        }
    )
    prov["metric_version"] = METRIC_VERSION  # the tables are computed now, by this code
    if "seed" in values:
        prov["seed"] = (
            int(values["seed"][0])
            if len(values["seed"]) == 1 and values["seed"][0].isdigit()
            else "+".join(values["seed"])
        )
    return verdicts, cases, model_ids, prov


def _verdict_files(folder: Path) -> tuple[list[Verdict], dict[tuple[str, str], str]]:
    verdicts, model_ids = [], {}
    for f in sorted(folder.glob("*@*.json")):
        if f.name.endswith(".error.json"):
            continue
        d = read_json_file(f, VerdictError)
        v = verdict_from_dict(d, f)
        verdicts.append(v)
        if isinstance(d.get("model_id"), str):
            model_ids[(v.case_id, v.policy)] = d["model_id"]
    return verdicts, model_ids


def _run_config(run_dir: Path) -> dict[str, Any]:
    f = run_dir / "run.json"
    if not f.is_file():
        return {}
    try:
        cfg = json.loads(f.read_text(encoding="utf-8")).get("command_config", {})
    except (json.JSONDecodeError, AttributeError) as e:
        raise FdevalError(f"{f}: not a run.json ({e})") from None
    return cfg if isinstance(cfg, dict) else {}


def _cases_from_config(
    run_dir: Path, cfg: dict[str, Any]
) -> tuple[dict[str, TestCase], dict[str, Any]]:
    """The run's cases as the run found them (its benchmark config; out_root = the folder 3 levels up)."""
    if "benchmark" not in cfg:
        raise FdevalError(
            f"{run_dir}: no scores/verdicts.csv and no benchmark in run.json; rerun stage=score there"
        )
    try:
        bench, seed = instantiate(cfg["benchmark"]), int(cfg.get("seed", 0))
    except InstantiationException as e:
        raise FdevalError(f"{run_dir / 'run.json'}: benchmark: {str(e).splitlines()[0]}") from None
    cases = bench.load(data_dir(run_dir.resolve().parents[2], bench, seed, cfg.get("tts")))
    prov = {
        "benchmark": bench.name,
        "benchmark_version": bench.version,
        "seed": seed,
        "metric_version": METRIC_VERSION,
    }
    return {c.case_id: c for c in cases}, prov


def load_run(run_dir: str | Path):
    """A run folder's :class:`fdeval.benchmarks.instructfd.reporting.build.RunData` (its name: the
    model's config name)."""
    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        raise FdevalError(f"{run_dir}: not a folder")
    cfg = _run_config(run_dir)
    if not (run_dir / "run.json").is_file():
        raise FdevalError(f"{run_dir}: no run.json; is this a run folder?")
    judged, scores = step_dir(run_dir, "judge"), step_dir(run_dir, "score")
    table = scores / "verdicts.csv"
    has_files = judged.is_dir()
    if table.is_file():
        verdicts, cases, model_ids, prov = read_verdict_table(table)
        if has_files:
            on_disk, _ = _verdict_files(judged)
            mine = {(v.case_id, v.policy): v.verdict for v in verdicts}
            theirs = {(v.case_id, v.policy): v.verdict for v in on_disk}
            if mine != theirs:
                diff = sorted(set(mine.items()) ^ set(theirs.items()))
                raise FdevalError(
                    f"{table}: does not match {judged} ({len(diff)} difference(s), e.g. "
                    f"{diff[0][0][0]}@{diff[0][0][1]}); rerun stage=score in that run"
                )
    elif has_files:
        verdicts, model_ids = _verdict_files(judged)
        cases, prov = _cases_from_config(run_dir, cfg)
        ids = sorted(set(model_ids.values()))
        if ids:
            prov["model_id"] = "+".join(ids)
        for key in ("judge", "judge_version", "prompt_hash"):
            prov[key] = "+".join(sorted({getattr(v, key) for v in verdicts}))
        missing = sorted({v.case_id for v in verdicts} - set(cases))
        if missing:
            raise FdevalError(
                f"{run_dir}: verdicts for case(s) not in the run's cases, e.g. {missing[0]}"
            )
    else:
        raise FdevalError(
            f"{run_dir}: no {table.relative_to(run_dir)} and no {judged.relative_to(run_dir)}/ folder; "
            "run stage=judge and stage=score there"
        )
    if not verdicts:
        raise FdevalError(f"{run_dir}: no verdicts")
    prov["verdicts_dir"] = str(judged.relative_to(run_dir))  # which judge's verdicts these are
    model = cfg.get("model", {}).get("name") if isinstance(cfg.get("model"), dict) else None
    name = str(model or str(prov.get("model_id", run_dir.name)).split(":", 1)[0])
    limits = scores / JUDGE_LIMITS
    return RunData(
        name,
        verdicts,
        cases,
        prov,
        model_ids,
        str(run_dir),
        limits.read_text(encoding="utf-8").strip() if limits.is_file() else "",
    )
