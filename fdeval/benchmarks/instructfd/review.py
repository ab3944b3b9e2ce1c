"""Instruct-FD's read side (fdeval.engine.review): its review page and label, the judge-validation
table recomputed from the saved labels, its human study and its cross-model report.

* label: per instruction the case is judged against, ``label`` adhere | not_adhere and a ``note``
  (kind ``instructfd``); the page shows the text of each instruction judged;
* judge validation: :func:`.metrics.validation.validate_judge` on the labels of the loaded runs
  against the `judge` step's verdicts (rows overall, per instruction, per run), the same code as
  the report's ``--labels``;
* human study: :mod:`.metrics.human` (docs/human-study.md);
* cross-model report: :func:`.reporting.build.write_cross_report` under :class:`ReportSettings`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping, Sequence

from fdeval.engine.review import (
    NOTE,
    Field,
    LabelForm,
    LabelledRun,
    ReportView,
    ReviewView,
    RunView,
    Section,
    SessionView,
    ValidationTable,
)
from fdeval.types import TestCase

from .metrics import human
from .metrics.validation import (
    HUMAN_LABELS,
    VALIDATION_COLUMNS,
    HumanLabel,
    ModelVerdict,
    validate_judge,
)
from .records import Verdict
from .reporting.build import ReportSettings, write_cross_report
from .reporting.runs import load_run

KIND = "instructfd"
JUDGE_STEP = "judge"


def run_tag(view: RunView) -> str:
    """One run's verdicts answer only its own labels: the model and the run id."""
    return f"{view.model_id or view.model}@{view.run_id}"


class InstructFDReview(ReviewView):
    def instruction(self, case: TestCase) -> str:
        return (case.data.policy_name or "none") if case.data is not None else ""

    def label_keys(self, run: RunView, session: SessionView) -> list[str]:
        """One label per instruction the case is judged against."""
        data = session.case.data
        return (
            list(data.judge_policies)
            if data is not None and data.judge_policies
            else session.result_keys
        )

    def label_form(self, run: RunView, session: SessionView) -> LabelForm:
        return LabelForm(KIND, (Field(("label",), "choice", choices=HUMAN_LABELS), NOTE))

    def disagrees(
        self, run: RunView, session: SessionView, key: str, label: Mapping[str, Any]
    ) -> bool:
        """The reviewer's adhere / not_adhere is not the judge's verdict on that instruction (a
        judge error is no verdict to disagree with)."""
        return any(
            r.key == key and r.status == "ok" and label.get("label") != r.value
            for r in session.results.get(JUDGE_STEP, [])
        )

    def sections(self, run: RunView, session: SessionView) -> list[Section]:
        data = session.case.data
        if data is None or not data.judge_policies:
            return []
        return [
            Section(
                "Instructions judged",
                rows=tuple(
                    {"instruction": p, "text": data.judge_instructions.get(p, "")}
                    for p in data.judge_policies
                ),
            )
        ]

    def human_labels(self, run: LabelledRun) -> list[HumanLabel]:
        """The run's Instruct-FD labels as validation.py's records (annotator: the reviewer)."""
        tag = run_tag(run.view)
        return [
            HumanLabel(
                lab.case_id,
                lab.key,
                str(lab.record.get("label")),
                tag,
                lab.reviewer,
                str(lab.path),
                1,
            )
            for lab in run.labels
            if lab.kind == KIND
        ]

    def validation(self, runs: Sequence[LabelledRun]) -> ValidationTable:
        labels: list[HumanLabel] = []
        verdicts: list[ModelVerdict] = []
        names = []
        for lr in runs:
            v = lr.view
            name, tag = f"{v.model} ({v.run_id})", run_tag(v)
            labels += self.human_labels(lr)
            for s in v.sessions:
                for r in s.results.get(JUDGE_STEP, []):
                    value = "error" if r.status == "error" else r.value
                    judge = str((r.metadata or {}).get("judge") or "")
                    verdicts.append(
                        ModelVerdict(
                            Verdict(s.case_id, r.key, value, r.explanation, judge, "", ""),
                            tag,
                            name,
                        )
                    )
            names.append(name)
        result = validate_judge(labels, verdicts)
        return ValidationTable(
            "Judge validation (Instruct-FD)",
            VALIDATION_COLUMNS,
            tuple(result.rows),
            result.n_labels,
            result.n_unmatched,
            tuple(names),
        )

    def human_study(self) -> Any:
        return human


class InstructFDReport(ReportView):
    def settings(self, values: Mapping[str, Any]) -> ReportSettings:
        return ReportSettings.from_config(values, group="report")

    def cross_report(self, runs: list[Path], out: Path, settings: Any) -> list[Path]:
        """IAS, delta-IAS and scenario tables with models as columns, figure, judge validation."""
        data = [load_run(r) for r in runs]
        dup = {r.name for r in data if sum(q.name == r.name for q in data) > 1}
        for run in data:  # column names must differ: add the run folder's name, then a number
            if run.name in dup:
                run.name = f"{run.name}/{Path(run.source).name}"
        seen: dict[str, int] = {}
        for run in data:
            seen[run.name] = seen.get(run.name, 0) + 1
            if seen[run.name] > 1:
                run.name = f"{run.name} ({seen[run.name]})"
        return write_cross_report(data, out, settings)
