"""Human labels of the review app: one JSON file per judged unit, in the run folder.

``<run_dir>/review/labels/<case_id>@<key>.json`` (``key`` is the result key the label answers,
e.g. the Instruct-FD instruction; ``case`` when the benchmark's results have no key, as TACT's)::

    {"format": "fdeval.review.label", "format_version": 1, "case_id": "...", "key": "listen",
     "benchmark": "instructfd", "kind": "instructfd", "reviewer": "ana", "time": "2026-12-01T22:40:00+00:00",
     ...the kind's fields..., "history": [earlier saves of this file, oldest first]}

Kinds and their fields:

* ``instructfd``: ``label`` adhere | not_adhere, ``note``;
* ``echochain``: the EchoChain import record (fdeval/benchmarks/echochain/review.py): ``screening``
  {coherent, naturalistic, audio_quality, accepted, note}, ``grades`` {criterion id: pass | fail},
  ``taxonomy`` (a TAXONOMY key or null), ``rubric`` null, ``audit`` (null, or §5's expert audit:
  a save by another person than the label's reviewer keeps the reviewer and records
  {auditor, time, verdict confirmed | corrected, note}; the reviewer's own later save clears it).
  Its ``human_labels`` reads this folder, so
  a label saved here overrides the automatic grades at the next score like an imported one (this
  file sorts after ``<case_id>.json`` and so wins over an earlier import);
* ``tact``: ``onset`` (ONSET_JUDGMENTS), ``onset_s`` (the reviewer's own onset time, seconds, or
  null), ``note``;
* ``generic`` (any other benchmark): ``label`` agree | disagree (with the judge's result), ``note``.

A save replaces the file atomically; the record it replaces moves into ``history`` so no earlier
label is lost. A bad label is one :class:`LabelError` line naming the field.
"""

from __future__ import annotations

import json
import re
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Mapping

from fdeval.benchmarks.echochain.review import (GRADE_VALUES, LABELS_DIR, REVIEW_DIR, SCREENING_CHECKS)
from fdeval.benchmarks.echochain.taxonomy import TAXONOMY
from fdeval.benchmarks.instructfd.metrics.validation import HUMAN_LABELS, HumanLabel
from fdeval.errors import FdevalError
from fdeval.files import write_json_atomic

FORMAT = "fdeval.review.label"
FORMAT_VERSION = 1
NO_KEY = "case"  # the file key of a result without a key
ONSET_JUDGMENTS = ("timely", "too_early", "too_late", "missed", "should_not_respond")
GENERIC_LABELS = ("agree", "disagree")
KINDS = ("instructfd", "echochain", "tact", "generic")
_SAFE = re.compile(r"^[A-Za-z0-9._-]+$")


class LabelError(FdevalError):
    """A label the reviewer sent that cannot be saved (one line naming the field)."""


def kind_of(benchmark: str) -> str:
    return benchmark if benchmark in KINDS else "generic"


def labels_dir(run_dir: str | Path) -> Path:
    return Path(run_dir) / REVIEW_DIR / LABELS_DIR


def label_path(run_dir: str | Path, case_id: str, key: str) -> Path:
    key = key or NO_KEY
    for what, v in (("case_id", case_id), ("key", key)):
        if not _SAFE.match(v):
            raise LabelError(f"field {what}: {v!r} is not a safe file name part")
    return labels_dir(run_dir) / f"{case_id}@{key}.json"


def _note(fields: Mapping[str, Any]) -> str:
    note = fields.get("note", "")
    if not isinstance(note, str):
        raise LabelError("field note: expected a string")
    return note


def _choice(fields: Mapping[str, Any], name: str, valid: tuple[str, ...]) -> str:
    v = fields.get(name)
    if v not in valid:
        raise LabelError(f"field {name}: expected one of {', '.join(valid)}, got {v!r}")
    return v


def check_fields(kind: str, fields: Mapping[str, Any], criteria: tuple[str, ...] = ()) -> dict[str, Any]:
    """The kind's fields of a label, checked (LabelError names the bad field)."""
    if kind == "instructfd":
        return {"label": _choice(fields, "label", HUMAN_LABELS), "note": _note(fields)}
    if kind == "generic":
        return {"label": _choice(fields, "label", GENERIC_LABELS), "note": _note(fields)}
    if kind == "tact":
        onset_s = fields.get("onset_s")
        if onset_s is not None and (isinstance(onset_s, bool) or not isinstance(onset_s, (int, float)) or onset_s < 0):
            raise LabelError(f"field onset_s: expected seconds >= 0 or null, got {onset_s!r}")
        return {"onset": _choice(fields, "onset", ONSET_JUDGMENTS), "onset_s": onset_s, "note": _note(fields)}
    if kind == "echochain":
        s = fields.get("screening")
        if not isinstance(s, Mapping):
            raise LabelError("field screening: expected an object")
        screening: dict[str, Any] = {}
        for k in (*SCREENING_CHECKS, "accepted"):
            if not isinstance(s.get(k), bool):
                raise LabelError(f"field screening.{k}: expected true or false, got {s.get(k)!r}")
            screening[k] = s[k]
        if screening["accepted"] and not all(screening[k] for k in SCREENING_CHECKS):
            raise LabelError("field screening.accepted: true although a check failed (a failed check rejects)")
        screening["note"] = _note(s)
        grades = fields.get("grades") or {}
        if not isinstance(grades, Mapping):
            raise LabelError("field grades: expected an object criterion id -> pass | fail")
        for cid, v in grades.items():
            if criteria and cid not in criteria:
                raise LabelError(f"field grades.{cid}: not a criterion of this conversation ({', '.join(criteria)})")
            if v not in GRADE_VALUES:
                raise LabelError(f"field grades.{cid}: expected pass or fail, got {v!r}")
        tax = fields.get("taxonomy")
        if tax is not None and tax not in TAXONOMY:
            raise LabelError(f"field taxonomy: expected one of {', '.join(TAXONOMY)} or null, got {tax!r}")
        return {"screening": screening, "grades": dict(grades), "taxonomy": tax, "rubric": None}
    raise LabelError(f"field kind: unknown label kind {kind!r}")


def read_label(path: Path) -> dict[str, Any] | None:
    """A saved label, or None when the file is absent or is not one of ours (an EchoChain import)."""
    try:
        rec = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as e:
        raise LabelError(f"{path}: not a readable label ({e})") from None
    return rec if isinstance(rec, dict) and rec.get("format") == FORMAT else None


def save_label(run_dir: str | Path, benchmark: str, case_id: str, key: str, reviewer: str,
               fields: Mapping[str, Any], criteria: tuple[str, ...] = (),
               now: datetime | None = None) -> dict[str, Any]:
    """Check and write one label (who: `reviewer`, when: now in UTC); returns the record."""
    if not reviewer.strip():
        raise LabelError("field reviewer: expected a non-empty name (--reviewer NAME)")
    kind = kind_of(benchmark)
    checked = check_fields(kind, fields, criteria)
    path = label_path(run_dir, case_id, key)
    old = read_label(path)
    history = []
    if old is not None:
        history = list(old.pop("history", []) or []) + [old]
    when = (now or datetime.now(timezone.utc)).astimezone(timezone.utc).isoformat(timespec="seconds")
    who, at = reviewer.strip(), when
    if kind == "echochain":
        checked["audit"] = None
        if old is not None and old.get("reviewer") != who:
            # another person's save of a reviewed label is its audit (§5): the label stays the reviewer's
            same = {k: old.get(k) for k in checked if k != "audit"} == {k: v for k, v in checked.items() if k != "audit"}
            checked["audit"] = {"auditor": who, "time": when, "verdict": "confirmed" if same else "corrected",
                                "note": ""}
            who, at = str(old["reviewer"]), str(old["time"])
    rec = {"format": FORMAT, "format_version": FORMAT_VERSION, "case_id": case_id, "key": key or NO_KEY,
           "benchmark": benchmark, "kind": kind, "reviewer": who, "time": at, **checked,
           "history": history}
    write_json_atomic(path, rec)
    return rec


def run_labels(run_dir: str | Path) -> dict[tuple[str, str], dict[str, Any]]:
    """(case id, key) -> the saved label, for every label of the run saved by this app."""
    folder = labels_dir(run_dir)
    out = {}
    for path in sorted(folder.glob("*@*.json")) if folder.is_dir() else []:
        rec = read_label(path)
        if rec is not None:
            out[(rec["case_id"], rec["key"])] = rec
    return out


def to_human_labels(run_dir: str | Path, model_id: str) -> list[HumanLabel]:
    """The run's Instruct-FD labels as validation.py's HumanLabel records (annotator = reviewer)."""
    out = []
    for (case_id, key), rec in run_labels(run_dir).items():
        if rec.get("kind") == "instructfd":
            out.append(HumanLabel(case_id, key, rec["label"], model_id or None, rec["reviewer"],
                                  str(label_path(run_dir, case_id, key)), 1))
    return out
