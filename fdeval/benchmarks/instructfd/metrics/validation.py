"""Judge validation against human labels (Instruct-FD A.5, Tables 22-24 shapes).

The human-labels file is a CSV with a header row:

| column | required | meaning |
|---|---|---|
| ``case_id`` | yes | the case that was judged (instructed case or un-instructed baseline) |
| ``policy`` | yes | the instruction it was judged against (backchannel, listen, interrupt, continue, acknowledge) |
| ``label`` | yes | the human decision: ``adhere`` or ``not_adhere`` |
| ``model`` | no | which model's session: its model id (``reference:e5be08e6f82f``), the name before
  the colon (``reference``) or the report's column name; empty = any |
| ``annotator`` | no | who labelled it; several annotators may label one pair, one row each |
| ``notes`` | no | free text, ignored |

Any other column, a missing required cell or an invalid label is one :class:`FdevalError` line
naming the file, the line and the field; so is a row repeating an earlier one's case, policy,
model and annotator.

Labels join the verdicts on (case_id, policy) and, where given, the model. A label that matches
no verdict is *unmatched* (counted, not an error: a labels file may cover other runs); one that
matches verdicts of several models is an error (name the model). Each matched label row is one
comparison. A judge ``error`` verdict is not a prediction: it is counted in ``n_judge_error`` and
left out of the confusion matrix and the scores.

The positive class is ``adhere``: TP = human adhere and judge adhere, FN = human adhere and judge
not_adhere, FP = human not_adhere and judge adhere, TN = both not_adhere. Accuracy is
(TP + TN) / n. Macro precision, recall and F1 average the per-class values of the two classes
over the classes that occur (as truth or as prediction) in the group; a per-class value whose
denominator is zero counts as 0 (scikit-learn's ``average="macro"`` with ``zero_division=0``).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

from fdeval.benchmarks.instructfd.metrics.ias import with_provenance
from fdeval.benchmarks.instructfd.records import POLICIES, Verdict
from fdeval.metrics.csvio import CsvError, read_csv_rows

LABEL_COLUMNS = ("case_id", "policy", "label")
LABEL_OPTIONAL = ("model", "annotator", "notes")
HUMAN_LABELS = ("adhere", "not_adhere")
VALIDATION_COLUMNS = (
    "group",
    "key",
    "n_labels",
    "n_judge_error",
    "n_compared",
    "accuracy",
    "macro_f1",
    "macro_precision",
    "macro_recall",
    "tp",
    "fn",
    "fp",
    "tn",
)


@dataclass(frozen=True)
class HumanLabel:
    case_id: str
    policy: str
    label: str
    model: str | None
    annotator: str | None
    path: str
    line: int


@dataclass(frozen=True)
class ModelVerdict:
    """A verdict with the model whose session it judged: `model` is the name shown in tables."""

    verdict: Verdict
    model_id: str
    model: str

    def answers_to(self, name: str) -> bool:
        return name in (self.model_id, self.model, self.model_id.split(":", 1)[0])


def load_labels(path: str | Path) -> list[HumanLabel]:
    """Read and check a human-labels CSV (format in the module doc)."""
    out: list[HumanLabel] = []
    first: dict[tuple, int] = {}
    for line, row in read_csv_rows(path, LABEL_COLUMNS, LABEL_OPTIONAL):
        for name in LABEL_COLUMNS:
            if not row[name]:
                raise CsvError(path, line, name, "empty cell")
        label = row["label"].lower()
        if label not in HUMAN_LABELS:
            raise CsvError(
                path,
                line,
                "label",
                f"invalid value {row['label']!r}; expected adhere or not_adhere",
            )
        if row["policy"] not in POLICIES:
            raise CsvError(
                path,
                line,
                "policy",
                f"unknown instruction {row['policy']!r}; valid: {', '.join(POLICIES)}",
            )
        h = HumanLabel(
            row["case_id"],
            row["policy"],
            label,
            row["model"] or None,
            row["annotator"] or None,
            str(path),
            line,
        )
        key = (h.case_id, h.policy, h.model, h.annotator)
        if key in first:
            raise CsvError(
                path,
                line,
                "case_id",
                f"repeats line {first[key]} (same case, policy, model and annotator)",
            )
        first[key] = line
        out.append(h)
    return out


def binary_scores(tp: int, fn: int, fp: int, tn: int) -> dict[str, float | None]:
    """Accuracy and macro precision / recall / F1 of a 2x2 table (adhere positive); None when empty."""
    n = tp + fn + fp + tn
    if n == 0:
        return {"accuracy": None, "macro_f1": None, "macro_precision": None, "macro_recall": None}

    def ratio(a: int, b: int) -> float:
        return a / b if b else 0.0

    # per class: (true positives of the class, its false positives, its false negatives)
    classes = [(tp, fp, fn), (tn, fn, fp)]
    present = [c for c in classes if sum(c) > 0]
    prec = [ratio(t, t + p) for t, p, _ in present]
    rec = [ratio(t, t + m) for t, _, m in present]
    f1 = [ratio(2 * t, 2 * t + p + m) for t, p, m in present]
    k = len(present)
    return {
        "accuracy": (tp + tn) / n,
        "macro_f1": sum(f1) / k,
        "macro_precision": sum(prec) / k,
        "macro_recall": sum(rec) / k,
    }


@dataclass(frozen=True)
class Validation:
    rows: list[dict[str, Any]]
    n_labels: int  # rows in the labels file
    n_unmatched: int  # labels with no verdict


def validate_judge(
    labels: list[HumanLabel],
    verdicts: list[ModelVerdict],
    provenance: Mapping[str, Any] | None = None,
) -> Validation:
    """Rows ``overall`` / per instruction (taxonomy order) / per model (first-seen order)."""
    prov = with_provenance(provenance, VALIDATION_COLUMNS)
    index: dict[tuple[str, str], list[ModelVerdict]] = {}
    for mv in verdicts:
        index.setdefault((mv.verdict.case_id, mv.verdict.policy), []).append(mv)
    matched: list[tuple[HumanLabel, ModelVerdict]] = []
    unmatched = 0
    for h in labels:
        hits = [
            mv
            for mv in index.get((h.case_id, h.policy), [])
            if h.model is None or mv.answers_to(h.model)
        ]
        if len({mv.model_id for mv in hits}) > 1 or len(hits) > 1:
            names = ", ".join(sorted({mv.model for mv in hits}))
            raise CsvError(
                h.path,
                h.line,
                "model",
                f"({h.case_id}, {h.policy}) matches verdicts of several runs "
                f"({names}); give the model",
            )
        if hits:
            matched.append((h, hits[0]))
        else:
            unmatched += 1
    groups: list[tuple[str, str, list[tuple[HumanLabel, ModelVerdict]]]] = [
        ("overall", "all", matched)
    ]
    for p in POLICIES:
        mine = [m for m in matched if m[0].policy == p]
        if mine:
            groups.append(("instruction", p, mine))
    for name in dict.fromkeys(mv.model for _, mv in matched):
        groups.append(("model", name, [m for m in matched if m[1].model == name]))
    rows = []
    for group, key, items in groups:
        judged = [(h.label, mv.verdict.verdict) for h, mv in items if mv.verdict.verdict != "error"]
        cells = {
            "tp": judged.count(("adhere", "adhere")),
            "fn": judged.count(("adhere", "not_adhere")),
            "fp": judged.count(("not_adhere", "adhere")),
            "tn": judged.count(("not_adhere", "not_adhere")),
        }
        rows.append(
            {
                "group": group,
                "key": key,
                "n_labels": len(items),
                "n_judge_error": len(items) - len(judged),
                "n_compared": len(judged),
                **binary_scores(**cells),
                **cells,
                **prov,
            }
        )
    return Validation(rows, len(labels), unmatched)
