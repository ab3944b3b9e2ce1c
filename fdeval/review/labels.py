"""Human labels of the review app: one JSON file per judged unit, in the run folder.

``<run_dir>/review/labels/<case_id>@<key>.json`` (``key`` is the label key the benchmark's review
view gives the session, e.g. the Instruct-FD instruction; ``case`` when its results have no key,
as TACT's; ``review`` for an EchoChain conversation)::

    {"format": "fdeval.review.label", "format_version": 1, "case_id": "...", "key": "listen",
     "benchmark": "instructfd", "kind": "instructfd", "reviewer": "ana", "time": "2026-12-01T22:40:00+00:00",
     ...the form's fields..., "history": [earlier saves of this file, oldest first]}

The fields are the benchmark's: its review view (``Benchmark.review()``, fdeval/engine/review.py)
gives the label form (``kind`` and fields), checks a label against it, and says what a save
writes over an earlier label. The kinds of the benchmarks in fdeval:

* ``instructfd``: ``label`` adhere | not_adhere, ``note`` (fdeval/benchmarks/instructfd/review.py);
* ``echochain``: the EchoChain import record (fdeval/benchmarks/echochain/review.py): ``screening``
  {coherent, naturalistic, audio_quality, accepted, note}, ``grades`` {criterion id: pass | fail},
  ``taxonomy`` (a TAXONOMY key or null), ``rubric`` null, ``audit`` (null, or §5's expert audit:
  a save by another person than the label's reviewer keeps the reviewer and records
  {auditor, time, verdict confirmed | corrected, note}; the reviewer's own later save clears it).
  Its ``human_labels`` reads this folder, so
  a label saved here overrides the automatic grades at the next score like an imported one (this
  file sorts after ``<case_id>.json`` and so wins over an earlier import);
* ``tact``: ``onset`` (timely, too_early, too_late, missed, should_not_respond), ``onset_s`` (the
  reviewer's own onset time, seconds, or null), ``note`` (fdeval/benchmarks/tact/review.py);
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

from fdeval.engine.review import NO_KEY, LabelError, LabelForm, ReviewView, SavedLabel, labels_dir
from fdeval.files import write_json_atomic

FORMAT = "fdeval.review.label"
FORMAT_VERSION = 1
_SAFE = re.compile(r"^[A-Za-z0-9._-]+$")

__all__ = [
    "FORMAT",
    "FORMAT_VERSION",
    "NO_KEY",
    "LabelError",
    "label_path",
    "labels_dir",
    "read_label",
    "run_labels",
    "save_label",
    "saved_labels",
]


def label_path(run_dir: str | Path, case_id: str, key: str) -> Path:
    key = key or NO_KEY
    for what, v in (("case_id", case_id), ("key", key)):
        if not _SAFE.match(v):
            raise LabelError(f"field {what}: {v!r} is not a safe file name part")
    return labels_dir(run_dir) / f"{case_id}@{key}.json"


def read_label(path: Path) -> dict[str, Any] | None:
    """A saved label, or None when the file is absent or is not one of ours (an EchoChain import)."""
    try:
        rec = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as e:
        raise LabelError(f"{path}: not a readable label ({e})") from None
    return rec if isinstance(rec, dict) and rec.get("format") == FORMAT else None


def save_label(
    run_dir: str | Path,
    benchmark: str,
    case_id: str,
    key: str,
    reviewer: str,
    fields: Mapping[str, Any],
    view: ReviewView,
    form: LabelForm,
    now: datetime | None = None,
) -> dict[str, Any]:
    """Check `fields` against the session's label `form` (the benchmark's `view` checks) and write
    one label (who: `reviewer`, when: now in UTC, unless the view says otherwise); returns the record."""
    if not reviewer.strip():
        raise LabelError("field reviewer: expected a non-empty name (--reviewer NAME)")
    checked = view.check_label(form, fields)
    path = label_path(run_dir, case_id, key)
    old = read_label(path)
    history = []
    if old is not None:
        history = list(old.pop("history", []) or []) + [old]
    when = (
        (now or datetime.now(timezone.utc)).astimezone(timezone.utc).isoformat(timespec="seconds")
    )
    checked, who, at = view.saving(checked, old, reviewer.strip(), when)
    rec = {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "case_id": case_id,
        "key": key or NO_KEY,
        "benchmark": benchmark,
        "kind": form.kind,
        "reviewer": who,
        "time": at,
        **checked,
        "history": history,
    }
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


def saved_labels(run_dir: str | Path) -> tuple[SavedLabel, ...]:
    """The run's labels saved by this app, as the review views read them (judge validation)."""
    return tuple(
        SavedLabel(
            case_id,
            key,
            str(rec.get("kind", "")),
            str(rec.get("reviewer", "")),
            rec,
            label_path(run_dir, case_id, key),
        )
        for (case_id, key), rec in run_labels(run_dir).items()
    )
