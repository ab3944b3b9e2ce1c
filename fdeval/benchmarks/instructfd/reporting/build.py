"""Compute and write the report tables for one run (``stage=score``) or several (the report CLI).

One run's report (into ``<run_dir>/scores/``), each table as ``.csv`` (every column, provenance
included, one row per line: the machine-readable form), ``.md`` and ``.tex``:

- ``ias_ci``: IAS per instruction and overall with its bootstrap interval (Table 3 shape);
- ``delta_ias``: delta-IAS with interval, discordant counts, exact McNemar p, Holm p (Table 4);
- ``scenario_ias``: IAS per scenario and instruction (Tables 5-6);
- ``judge_validation``: with human labels, the judge's agreement overall, by instruction and by
  model (Tables 22-24);
- ``ias_by_instruction.png``: the figure.

Several runs' report (one model per run, models as columns in the ``.md`` / ``.tex`` tables;
the ``.csv`` files hold the same rows as the per-run ones, with a ``model`` column, for all runs)
uses the same file names, plus ``runs.csv`` (one row per run: where it came from and its
provenance).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

from fdeval.benchmarks.instructfd.metrics.ias import OVERALL
from fdeval.benchmarks.instructfd.metrics.tables import (
    MIN_N_CI,
    delta_rows,
    ias_ci_rows,
    scenario_order,
    scenario_rows,
)
from fdeval.benchmarks.instructfd.metrics.validation import (
    ModelVerdict,
    Validation,
    load_labels,
    validate_judge,
)
from fdeval.benchmarks.instructfd.records import NO_POLICY, POLICIES, Verdict
from fdeval.benchmarks.instructfd.reporting.figure import write_ias_figure
from fdeval.errors import ConfigError
from fdeval.files import write_text_atomic
from fdeval.metrics.csvio import write_csv
from fdeval.metrics.format import Column, Table, to_latex, to_markdown
from fdeval.metrics.stats import CI_METHODS
from fdeval.types import TestCase

FIGURE = "ias_by_instruction.png"
JUDGE_LIMITS = "judge_limits.txt"  # in scores/: the judge's own statement of what it cannot see


@dataclass(frozen=True)
class ReportSettings:
    """The ``report`` config group (``conf/report/default.yaml``)."""

    human_labels: str | None = None
    bootstrap_resamples: int = 10_000
    bootstrap_seed: int = 0
    ci_level: float = 0.95
    ci_method: str = "bca"
    alpha: float = 0.05
    figure: bool = True
    min_n_ci: int = MIN_N_CI

    @classmethod
    def from_config(cls, node: Mapping[str, Any] | None, group: str = "report") -> "ReportSettings":
        """Check and convert the config values; a bad one is a one-line :class:`ConfigError`."""
        d = dict(node or {})
        d.pop(
            "writers", None
        )  # the engine's views after the scores (fdeval.engine.shared.write_reports)
        unknown = sorted(set(d) - set(cls.__dataclass_fields__))
        if unknown:
            raise ConfigError(
                f"{group}: unknown key(s) {unknown}; valid: {sorted(cls.__dataclass_fields__)}"
            )
        s = cls(**d)

        def bad(key: str, why: str) -> ConfigError:
            return ConfigError(f"{group}.{key}: {why}, got {getattr(s, key)!r}")

        def integer(key: str, low: int) -> int:
            x = getattr(s, key)
            if isinstance(x, bool) or not isinstance(x, (int, float)) or x != int(x) or x < low:
                raise bad(key, f"expected an integer >= {low}")
            return int(x)

        def fraction(key: str) -> float:
            x = getattr(s, key)
            if isinstance(x, bool) or not isinstance(x, (int, float)) or not 0 < x < 1:
                raise bad(key, "expected a number in (0, 1)")
            return float(x)

        if s.ci_method not in CI_METHODS:
            raise bad("ci_method", f"expected one of {', '.join(CI_METHODS)}")
        if not isinstance(s.figure, bool):
            raise bad("figure", "expected true or false")
        labels = s.human_labels
        if labels is not None:
            if not isinstance(labels, str) or not labels:
                raise bad("human_labels", "expected a file path or null")
            if not Path(labels).expanduser().is_file():
                raise bad("human_labels", "no such file")
            labels = str(Path(labels).expanduser())
        return cls(
            labels,
            integer("bootstrap_resamples", 1),
            integer("bootstrap_seed", 0),
            fraction("ci_level"),
            s.ci_method,
            fraction("alpha"),
            s.figure,
            integer("min_n_ci", 1),
        )

    def boot(self) -> dict[str, Any]:
        return {
            "resamples": self.bootstrap_resamples,
            "seed": self.bootstrap_seed,
            "level": self.ci_level,
            "method": self.ci_method,
        }

    def describe(self) -> str:
        method = "BCa" if self.ci_method == "bca" else "percentile"
        return (
            f"intervals: {method} bootstrap, {100 * self.ci_level:g}%, {self.bootstrap_resamples} resamples, "
            f"seed {self.bootstrap_seed}; whole cases (overall IAS: within instruction), whole pairs for "
            f"delta-IAS; significance: exact McNemar, Holm over the instructions of a model, alpha {self.alpha:g}; "
            f"†: interval from fewer than {self.min_n_ci} cases (pairs), too few for it to say much "
            f"(over n equal outcomes a bootstrap gives the single point [x, x])"
        )


@dataclass
class RunData:
    """One model's scored verdicts: `name` heads its column; `model_ids` maps verdict -> model id."""

    name: str
    verdicts: list[Verdict]
    cases: dict[str, TestCase]
    provenance: dict[str, Any]
    model_ids: dict[tuple[str, str], str] = field(
        default_factory=dict
    )  # (case_id, policy) -> model id
    source: str = ""
    judge_limits: str = ""  # the judge's statement of what it cannot see (Judge.limits)

    @property
    def model_id(self) -> str:
        return str(self.provenance.get("model_id", self.name))

    def model_verdicts(self) -> list[ModelVerdict]:
        return [
            ModelVerdict(v, self.model_ids.get((v.case_id, v.policy), self.model_id), self.name)
            for v in self.verdicts
        ]


@dataclass
class RunTables:
    ias: list[dict[str, Any]]
    delta: list[dict[str, Any]]
    scenario: list[dict[str, Any]]


def compute(run: RunData, settings: ReportSettings) -> RunTables:
    """The long rows of one run, each led by a ``model`` column."""
    prov = run.provenance

    def led(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return [{"model": run.name, **r} for r in rows]

    return RunTables(
        led(ias_ci_rows(run.verdicts, run.cases, prov, min_n=settings.min_n_ci, **settings.boot())),
        led(
            delta_rows(
                run.verdicts,
                run.cases,
                prov,
                alpha=settings.alpha,
                min_n=settings.min_n_ci,
                **settings.boot(),
            )
        ),
        led(scenario_rows(run.verdicts, run.cases, prov)),
    )


# --------------------------------------------------------------------------------------------
# Tables


def _title(s: str) -> str:
    return s.capitalize() if s in POLICIES or s == OVERALL else s


def _provenance_note(p: Mapping[str, Any]) -> str:
    return (
        f"model {p.get('model_id', '?')}; judge {p.get('judge', '?')} v{p.get('judge_version', '?')} "
        f"(prompt {p.get('prompt_hash', '?')}); benchmark {p.get('benchmark', '?')} "
        f"{p.get('benchmark_version', '?')}; seed {p.get('seed', '?')}; metric v{p.get('metric_version', '?')}"
        + (f"; verdicts {p['verdicts_dir']}" if p.get("verdicts_dir") else "")
    )  # which judge's folder


def counts_note(run: RunData) -> str:
    """What the counts in the tables count, with this run's numbers."""
    scored = [c for c in run.cases.values() if c.case_id in {v.case_id for v in run.verdicts}]
    base = sum(c.data.policy_name == NO_POLICY for c in scored)
    errors = sum(v.verdict == "error" for v in run.verdicts)
    return (
        f"counts: {len(scored)} sessions scored ({len(scored) - base} instructed, {base} un-instructed baselines); "
        f"{len(run.verdicts)} verdicts ({errors} judge errors, left out of every rate): an instructed session is "
        "judged once, against its own instruction, a baseline once against each instruction of its conversation; "
        "n = instructed sessions of an instruction; pairs = an instructed session and its baseline, both judged "
        "without error (delta-IAS is computed on them)"
    )


def _notes(run: RunData, settings: ReportSettings) -> list[str]:
    notes = [_provenance_note(run.provenance), counts_note(run), settings.describe()]
    if run.judge_limits:
        notes.append(f"judge limits: {run.judge_limits}")
    return notes


def _ias_detail(rows: list[dict[str, Any]], level: float) -> Table:
    cols = [
        Column("instruction", "Instruction"),
        Column("n", "n", "int"),
        Column("n_error", "Judge errors", "int"),
        Column("n_pass", "Pass", "int"),
        Column("ias", "IAS", "pct"),
        Column("ci", f"{100 * level:g}% CI", "ci"),
    ]
    body = [
        {
            **r,
            "instruction": _title(r["instruction"]),
            "ci": (r["ias_ci_low"], r["ias_ci_high"], r["small_n"]),
        }
        for r in rows
    ]
    return Table("Instruction adherence (IAS) by instruction", cols, body, label="tab:ias")


def _delta_detail(rows: list[dict[str, Any]], level: float, with_model: bool = False) -> Table:
    cols = [Column("model", "Model")] if with_model else []
    cols += [
        Column("instruction", "Instruction"),
        Column("n_pairs", "Pairs", "int"),
        Column("ias_paired", "IAS", "pct"),
        Column("baseline_ias", "IAS (no instr.)", "pct", r"IAS ($\emptyset$)"),
        Column("delta_ias", "ΔIAS", "delta", r"$\Delta$IAS"),
        Column("ci", f"{100 * level:g}% CI", "ci"),
        Column("b", "b", "int"),
        Column("c", "c", "int"),
        Column("mcnemar_p", "McNemar p", "p"),
        Column("holm_p", "Holm p", "p"),
        Column("significant", "Significant", "flag"),
    ]
    body = [
        {
            **r,
            "instruction": _title(r["instruction"]),
            "ci": (r["delta_ias_ci_low"], r["delta_ias_ci_high"], r["small_n"]),
        }
        for r in rows
    ]
    if not with_model:
        for r in body:
            r.pop("model", None)
    bold = {(i, "delta_ias") for i, r in enumerate(rows) if r["significant"]}
    notes = [
        "b: pairs where only the instructed session passes; c: only the un-instructed one. "
        "Bold: significant (Holm-adjusted exact McNemar p < alpha; the overall row on its own p)."
    ]
    return Table(
        "Instruction sensitivity (ΔIAS): instructed vs un-instructed, same cases",
        cols,
        body,
        notes=notes,
        bold=bold,
        label="tab:delta-ias",
    )


def _scenario_pivot(rows: list[dict[str, Any]]) -> Table:
    policies = [p for p in POLICIES if any(r["instruction"] == p for r in rows)]
    policies += sorted({r["instruction"] for r in rows} - set(policies))
    body: dict[str, dict[str, Any]] = {}
    for r in rows:
        body.setdefault(r["scenario"], {"scenario": r["scenario"]})[r["instruction"]] = r["ias"]
    cols = [Column("scenario", "Scenario")] + [Column(p, _title(p), "pct") for p in policies]
    return Table(
        "Scenario-level IAS",
        cols,
        list(body.values()),
        notes=["-: the scenario has no case of that instruction."],
        label="tab:scenario-ias",
    )


def _labels_cm(r: Mapping[str, Any]) -> str:
    return f"{r['tp']}/{r['fn']}/{r['fp']}/{r['tn']}"


def _validation_tables(v: Validation, labels_path: str) -> list[Table]:
    overall = v.rows[0]
    note = (
        f"{labels_path}: {v.n_labels} labels, {overall['n_labels']} matched a verdict, {v.n_unmatched} unmatched; "
        f"{overall['n_judge_error']} judge error verdict(s) left out of the scores. Positive class: adhere."
    )
    main = Table(
        "Judge validation against human labels",
        [
            Column("accuracy", "Accuracy", "pct"),
            Column("macro_f1", "F1 (macro)", "pct"),
            Column("macro_precision", "Macro precision", "pct"),
            Column("macro_recall", "Macro recall", "pct"),
            Column("cm", "TP/FN/FP/TN"),
            Column("n_compared", "n", "int"),
            Column("n_judge_error", "Judge errors", "int"),
        ],
        [{**overall, "cm": _labels_cm(overall)}],
        notes=[note],
        label="tab:judge-validation",
    )
    cm = Table(
        "Confusion matrix (human = ground truth)",
        [
            Column("gt", "Human"),
            Column("pa", "Judge: adhere", "int"),
            Column("pn", "Judge: not adhere", "int"),
        ],
        [
            {"gt": "adhere", "pa": overall["tp"], "pn": overall["fn"]},
            {"gt": "not adhere", "pa": overall["fp"], "pn": overall["tn"]},
        ],
        label="tab:judge-confusion",
    )
    out = [main, cm]
    for group, title, head in (
        ("instruction", "by instruction", "Instruction"),
        ("model", "by model", "Model"),
    ):
        rows = [
            {
                **r,
                "key": _title(r["key"]) if group == "instruction" else r["key"],
                "cm": _labels_cm(r),
            }
            for r in v.rows
            if r["group"] == group
        ]
        out.append(
            Table(
                f"Judge validation {title}",
                [
                    Column("key", head),
                    Column("accuracy", "Accuracy", "pct"),
                    Column("macro_f1", "F1 (macro)", "pct"),
                    Column("cm", "TP/FN/FP/TN"),
                    Column("n_compared", "n", "int"),
                    Column("n_judge_error", "Judge errors", "int"),
                ],
                rows,
                label=f"tab:judge-validation-{group}",
            )
        )
    return out


def _wide(
    runs: list[RunData],
    per_run: list[list[dict[str, Any]]],
    keys: list[str],
    key_cols: list[Column],
    cell: Any,
    kind: str,
) -> tuple[list[Column], list[dict[str, Any]]]:
    """Rows keyed by `keys` of the long rows, one column per run, the cell made by `cell(row)`."""
    body: dict[tuple, dict[str, Any]] = {}
    for j, rows in enumerate(per_run):
        for r in rows:
            k = tuple(r[x] for x in keys)
            body.setdefault(k, {x: r[x] for x in keys})[f"m{j}"] = cell(r)
    cols = key_cols + [Column(f"m{j}", run.name, kind) for j, run in enumerate(runs)]
    return cols, list(body.values())


def _policy_rank(p: str) -> int:
    return POLICIES.index(p) if p in POLICIES else len(POLICIES) + (p == OVERALL)


# --------------------------------------------------------------------------------------------
# Writing


P_COLUMNS = ("mcnemar_p", "holm_p")


def _write(
    out: Path,
    stem: str,
    rows: list[dict[str, Any]],
    tables: list[Table],
    title: str,
    notes: list[str],
) -> list[Path]:
    paths = [out / f"{stem}.csv", out / f"{stem}.md", out / f"{stem}.tex"]
    write_csv(rows, paths[0], significant=P_COLUMNS)
    write_text_atomic(paths[1], to_markdown(tables, title, notes))
    write_text_atomic(paths[2], to_latex(tables, [title, *notes]))
    return paths


def _validate(runs: list[RunData], settings: ReportSettings, provenance: Mapping[str, Any] | None):
    labels = load_labels(settings.human_labels)  # type: ignore[arg-type]
    return validate_judge(labels, [mv for run in runs for mv in run.model_verdicts()], provenance)


def _ias_plain(rows: list[dict[str, Any]]) -> Table:
    cols = [
        Column("instruction", "Instruction"),
        Column("n", "n", "int"),
        Column("n_pass", "Pass", "int"),
        Column("n_error", "Judge errors", "int"),
        Column("ias", "IAS", "pct"),
        Column("n_pairs", "Pairs", "int"),
        Column("baseline_ias", "IAS (no instr.)", "pct", r"IAS ($\emptyset$)"),
        Column("delta_ias", "ΔIAS", "delta", r"$\Delta$IAS"),
    ]
    return Table(
        "Instruction adherence (IAS)",
        cols,
        [{**r, "instruction": _title(r["instruction"])} for r in rows],
        label="tab:ias",
    )


def write_run_report(
    run: RunData,
    out: str | Path,
    settings: ReportSettings,
    ias_rows: list[dict[str, Any]] | None = None,
) -> list[Path]:
    """One run's report files into `out` (see the module doc); returns their paths.

    With `ias_rows` (:func:`fdeval.benchmarks.instructfd.metrics.ias.ias_rows`, written as ``ias.csv`` / ``ias.md``
    by the caller) their LaTeX form ``ias.tex`` is written too.
    """
    out = Path(out)
    t = compute(run, settings)
    notes = _notes(run, settings)
    paths = []
    if ias_rows is not None:
        write_text_atomic(out / "ias.tex", to_latex([_ias_plain(ias_rows)], notes[:2]))
        paths.append(out / "ias.tex")
    paths += _write(
        out, "ias_ci", t.ias, [_ias_detail(t.ias, settings.ci_level)], "IAS with intervals", notes
    )
    paths += _write(
        out, "delta_ias", t.delta, [_delta_detail(t.delta, settings.ci_level)], "delta-IAS", notes
    )
    paths += _write(
        out, "scenario_ias", t.scenario, [_scenario_pivot(t.scenario)], "Scenario-level IAS", notes
    )
    if settings.human_labels:
        v = _validate([run], settings, run.provenance)
        paths += _write(
            out,
            "judge_validation",
            v.rows,
            _validation_tables(v, settings.human_labels),
            "Judge validation",
            notes[:1],
        )
    if settings.figure:
        write_ias_figure([(run.name, t.ias)], out / FIGURE, f"IAS by instruction: {run.name}")
        paths.append(out / FIGURE)
    return paths


def _run_notes(runs: list[RunData]) -> list[str]:
    notes = [
        f"{run.name}: {_provenance_note(run.provenance)}"
        + (f"; {run.source}" if run.source else "")
        for run in runs
    ]
    notes += [f"{run.name}: {counts_note(run)}" for run in runs]
    notes += sorted(
        {
            f"judge limits ({run.provenance.get('judge', '?')}): {run.judge_limits}"
            for run in runs
            if run.judge_limits
        }
    )
    for key in (
        "judge",
        "judge_version",
        "prompt_hash",
        "benchmark",
        "benchmark_version",
        "metric_version",
    ):
        values = sorted({str(run.provenance.get(key)) for run in runs})
        if len(values) > 1:
            notes.append(
                f"warning: the runs differ in {key} ({', '.join(values)}); their scores may not be comparable"
            )
    return notes


def write_cross_report(
    runs: list[RunData], out: str | Path, settings: ReportSettings
) -> list[Path]:
    """Several runs' report files into `out`, models as columns (see the module doc)."""
    out = Path(out)
    tables = [compute(run, settings) for run in runs]
    notes = _run_notes(runs) + [settings.describe()]
    level = f"{100 * settings.ci_level:g}%"

    ias = [t.ias for t in tables]
    cols, body = _wide(
        runs,
        ias,
        ["instruction"],
        [Column("instruction", "Instruction")],
        lambda r: (r["ias"], r["ias_ci_low"], r["ias_ci_high"], r["small_n"]),
        "pct_ci",
    )
    body.sort(key=lambda r: _policy_rank(r["instruction"]))
    for r in body:
        r["instruction"] = _title(r["instruction"])
    wide_ias = Table(
        f"IAS by instruction and model [{level} CI]", cols, body, label="tab:ias-models"
    )
    paths = _write(
        out,
        "ias_ci",
        [r for rows in ias for r in rows],
        [wide_ias],
        "IAS by instruction and model",
        notes,
    )

    delta = [t.delta for t in tables]
    cols, body = _wide(
        runs, delta, ["instruction"], [Column("instruction", "Instruction")], lambda r: r, "delta"
    )
    body.sort(key=lambda r: _policy_rank(r["instruction"]))
    keys = [c.key for c in cols[1:]]  # one per model
    bold = {(i, k) for i, r in enumerate(body) for k in keys if k in r and r[k]["significant"]}
    for r in body:
        r.update(
            {k: r[k]["delta_ias"] for k in keys if k in r}, instruction=_title(r["instruction"])
        )
    wide_delta = Table(
        "ΔIAS by instruction and model",
        cols,
        body,
        bold=bold,
        label="tab:delta-ias-models",
        notes=[
            "Bold: significant (exact McNemar on the pairs, Holm over the model's instructions)."
        ],
    )
    detail = _delta_detail([r for rows in delta for r in rows], settings.ci_level, with_model=True)
    paths += _write(
        out,
        "delta_ias",
        [r for rows in delta for r in rows],
        [wide_delta, detail],
        "delta-IAS by instruction and model",
        notes,
    )

    scen = [t.scenario for t in tables]
    order = scenario_order({k: c for run in runs for k, c in run.cases.items()})
    cols, body = _wide(
        runs,
        scen,
        ["scenario", "instruction"],
        [Column("scenario", "Scenario"), Column("instruction", "Instruction")],
        lambda r: r["ias"],
        "pct",
    )
    body.sort(
        key=lambda r: (
            order.index(r["scenario"]) if r["scenario"] in order else len(order),
            _policy_rank(r["instruction"]),
        )
    )
    for r in body:
        r["instruction"] = _title(r["instruction"])
    paths += _write(
        out,
        "scenario_ias",
        [r for rows in scen for r in rows],
        [Table("Scenario-level IAS by model", cols, body, label="tab:scenario-ias-models")],
        "Scenario-level IAS by model",
        notes,
    )

    if settings.human_labels:
        v = _validate(runs, settings, None)
        paths += _write(
            out,
            "judge_validation",
            v.rows,
            _validation_tables(v, settings.human_labels),
            "Judge validation",
            notes[: len(runs)],
        )
    runs_rows = [
        {"model": run.name, "source": run.source, "n_verdicts": len(run.verdicts), **run.provenance}
        for run in runs
    ]
    write_csv(runs_rows, out / "runs.csv")
    paths.append(out / "runs.csv")
    if settings.figure:
        write_ias_figure([(run.name, t.ias) for run, t in zip(runs, tables)], out / FIGURE)
        paths.append(out / FIGURE)
    return paths
