"""EchoChain human-review hand-off (paper §5): a blind export per conversation, and the import of
reviewers' screening decisions, rubric grades and taxonomy labels, which then override the
automatic ones in the metrics (:func:`apply_human`).

Blinding: each exported conversation's folder is named by a blind id, the sha256 of its case id
and a salt drawn afresh for every export. The salt and the blind id -> case id map are written only
to ``<run_dir>/review/key.json`` (one entry per export), never to the export; the export's text has
the model's identity strings replaced by ``[hidden]`` and identity keys removed, and the audio is
re-encoded so that no file metadata travels with it.

Export folder::

    <out_dir>/index.json               blind ids (sorted, so in no meaningful order) and their group
    <out_dir>/labels_template.json     one label skeleton per conversation, for the reviewers
    <out_dir>/<blind_id>/transcript.txt, exchanges.json, rubric.json, audio.wav (stereo)

Labels file (JSON list; one object per reviewed conversation)::

    {"blind_id": "...", "reviewer": "name", "time": "2025-01-31T14:05:00+00:00",
     "screening": {"coherent": true, "naturalistic": true, "audio_quality": true, "accepted": true, "note": ""},
     "rubric": [{"criterion_id": "h1", "text": "..."}],   # optional: the reviewer's own instance rubric
     "grades": {"h1": "pass"},                            # criterion id -> pass | fail
     "taxonomy": "contextual_inertia",                    # a TAXONOMY key, or null (keep the automatic one)
     "audit": {"auditor": "name", "time": "...", "verdict": "confirmed", "note": ""}}  # optional (§5's expert audit)

The audit is a second person's check of the whole label (screening, rubric, grades, taxonomy):
``confirmed`` it as the reviewer left it, or ``corrected`` it (the label then holds the corrected
values). The auditor must not be the reviewer. Audited labels are counted in the scores' notes.

Imported labels are stored per case under ``<run_dir>/review/labels/<case_id>.json``; a later import
of the same conversation replaces the earlier label.
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import json
import re
import secrets
import sys
from collections.abc import Mapping, Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import soundfile as sf

# the run's review folder and its labels folder: the review app saves its labels there too
from fdeval.engine.review import (
    LABELS_DIR,
    REVIEW_DIR,
    Field,
    LabelError,
    LabelForm,
    ReviewView,
    RunView,
    SessionView,
)
from fdeval.errors import ConfigError, FdevalError
from fdeval.files import atomic_path, write_json_atomic, write_text_atomic

from .rubrics import Grade
from .scoring import GradedConversation
from .seeds import Criterion
from .taxonomy import TAXONOMY

KEY_FILE = "key.json"
REVIEW_INPUT = (
    "conversations.json"  # <run_dir>/review/conversations.json: the CLI export's default input
)
HIDDEN = "[hidden]"
# keys dropped from exported dicts: they name the model or lead back to the case
HIDDEN_KEYS = frozenset(
    {"model", "model_id", "model_name", "responder", "case_id", "conversation_id", "run_id"}
)
INPUT_KEYS = frozenset(
    {"case_id", "transcript_text", "exchanges", "rubric", "wav_path", "model", "conversation_id"}
)
LABEL_KEYS = ("blind_id", "reviewer", "time", "screening", "rubric", "grades", "taxonomy", "audit")
AUDIT_KEYS = ("auditor", "time", "verdict", "note")
AUDIT_VERDICTS = ("confirmed", "corrected")
SCREENING_CHECKS = ("coherent", "naturalistic", "audio_quality")
SCREENING_KEYS = (*SCREENING_CHECKS, "accepted", "note")
GRADE_VALUES = ("pass", "fail")
# read PCM back as integers of its own width so the re-encoded file holds the same samples
_READ_DTYPE = {
    "PCM_16": "int16",
    "PCM_24": "int32",
    "PCM_32": "int32",
    "FLOAT": "float32",
    "DOUBLE": "float64",
}


def _review_dir(run_dir: str | Path) -> Path:
    return Path(run_dir) / REVIEW_DIR


def blind_id(case_id: str, salt: str) -> str:
    return hashlib.sha256(f"{case_id}\0{salt}".encode()).hexdigest()[:16]


def _read_json(path: Path, what: str) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except OSError as e:
        raise ConfigError(f"{path}: cannot read {what}: {e.strerror or e}") from None
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ConfigError(f"{path}: {what} is not valid JSON: {e}") from None


def load_key(run_dir: str | Path) -> dict[str, Any]:
    """The run's review key ({"exports": [...]}); empty when nothing was exported yet."""
    path = _review_dir(run_dir) / KEY_FILE
    if not path.is_file():
        return {"exports": []}
    key = _read_json(path, "review key")
    if not isinstance(key, dict) or not isinstance(key.get("exports"), list):
        raise ConfigError(f"{path}: not a review key (expected an object with an 'exports' list)")
    return key


def _blind_map(run_dir: str | Path) -> dict[str, dict[str, Any]]:
    """blind id -> {"case_id", "criteria"} over every export of the run."""
    out: dict[str, dict[str, Any]] = {}
    for e in load_key(run_dir)["exports"]:
        out.update(e["cases"])
    return out


# ---------------------------------------------------------------------------------------------
# Export


def _scrub(obj: Any, pattern: re.Pattern | None) -> Any:
    """`obj` without identity keys, every identity string replaced (case-insensitive, anywhere)."""
    if isinstance(obj, Mapping):  # criterion ids stay as they are: the labels name them
        return {
            k: v if k == "criterion_id" else _scrub(v, pattern)
            for k, v in obj.items()
            if k not in HIDDEN_KEYS
        }
    if isinstance(obj, (list, tuple)):
        return [_scrub(v, pattern) for v in obj]
    if isinstance(obj, str) and pattern is not None:
        return pattern.sub(HIDDEN, obj)
    return obj


def _check_input(conversations: Sequence[Mapping[str, Any]], where: str) -> None:
    seen = set()
    for i, c in enumerate(conversations):
        if not isinstance(c, Mapping):
            raise ConfigError(
                f"{where}: conversation {i}: expected an object, got {type(c).__name__}"
            )
        cid = c.get("case_id")
        at = f"{where}: conversation {i} ({cid!r})"
        if not isinstance(cid, str) or not cid:
            raise ConfigError(f"{at}: field case_id: expected a non-empty string")
        if cid in seen:
            raise ConfigError(f"{at}: field case_id: appears twice")
        seen.add(cid)
        extra = sorted(set(c) - INPUT_KEYS)
        if extra:
            raise ConfigError(
                f"{at}: field {extra[0]}: unknown; valid: {', '.join(sorted(INPUT_KEYS))}"
            )
        for k, kind in (
            ("transcript_text", str),
            ("exchanges", list),
            ("rubric", list),
            ("wav_path", (str, Path)),
        ):
            if not isinstance(c.get(k), kind):
                raise ConfigError(f"{at}: field {k}: missing or of the wrong type")
        for j, crit in enumerate(c["rubric"]):
            if not isinstance(crit, Mapping) or not isinstance(crit.get("criterion_id"), str):
                raise ConfigError(
                    f"{at}: field rubric[{j}].criterion_id: expected a criterion object with an id"
                )


def _identity_strings(c: Mapping[str, Any]) -> list[str]:
    model = c.get("model")
    names = [model] if isinstance(model, str) else list(model or [])
    return [s for s in {*names, c["case_id"]} if isinstance(s, str) and s.strip()]


def _copy_wav(src: Path, dst: Path, where: str) -> None:
    """Re-encode `src` (same samples, rate and sample format) so no metadata chunk is copied."""
    try:
        info = sf.info(str(src))
    except (OSError, RuntimeError) as e:
        raise ConfigError(f"{where}: field wav_path: cannot read {src}: {e}") from None
    if info.channels != 2:
        raise ConfigError(
            f"{where}: field wav_path: {src} has {info.channels} channel(s); the session audio is stereo"
        )
    data, rate = sf.read(str(src), dtype=_READ_DTYPE.get(info.subtype, "float32"), always_2d=True)
    with atomic_path(dst) as tmp:
        sf.write(
            tmp,
            data,
            rate,
            subtype=info.subtype if info.subtype in _READ_DTYPE else "FLOAT",
            format="WAV",
        )


def save_review_input(run_dir: str | Path, conversations: Sequence[Mapping[str, Any]]) -> Path:
    """Validate `conversations` (the :func:`export` input) and store them as the run's review input,
    which the CLI's ``export`` reads; returns the file."""
    path = _review_dir(run_dir) / REVIEW_INPUT
    _check_input(conversations, str(path))
    write_json_atomic(path, [dict(c, wav_path=str(c["wav_path"])) for c in conversations])
    return path


def export(
    run_dir: str | Path,
    out_dir: str | Path,
    conversations: Sequence[Mapping[str, Any]],
    where: str = "review export",
) -> list[str]:
    """Write a blind review export of `conversations` to `out_dir` (empty or new); returns the blind ids.

    Each conversation is a dict:

    * ``case_id`` (str): the case (mapped to a blind id; never exported);
    * ``transcript_text`` (str): the conversation's transcript as text;
    * ``exchanges`` (list of dicts): the exchange windows (e.g. message, barge-in, answer before and
      continuation, with their session times), exported as given minus identity keys;
    * ``rubric`` (list of criterion dicts, each with ``criterion_id``): the criteria the conversation
      is graded on (their ids are what the reviewers' ``grades`` may name);
    * ``wav_path`` (str): the session's stereo WAV, absolute or relative to `run_dir`;
    * optional ``model`` (str or list of str): the model's identity strings, replaced by ``[hidden]``
      wherever they occur in the exported text (case-insensitive, also inside longer words);
    * optional ``conversation_id`` (str): cases of one conversation answered by several models share
      it; exported only as a blind group id, so a reviewer grades them together.

    The key (salt, blind id -> case id and criterion ids) is appended to ``<run_dir>/review/key.json``
    before anything is exported. `where` names the input in error messages.
    """
    run_dir, out_dir = Path(run_dir), Path(out_dir)
    _check_input(conversations, where)
    key_path = _review_dir(run_dir) / KEY_FILE
    if key_path.resolve().is_relative_to(out_dir.resolve()):
        raise ConfigError(
            f"{out_dir}: the export folder would hold the review key {key_path}; export elsewhere"
        )
    if out_dir.exists() and (not out_dir.is_dir() or any(out_dir.iterdir())):
        raise ConfigError(f"{out_dir}: the export folder must be new or empty")
    for i, c in enumerate(conversations):
        wav = Path(c["wav_path"]) if Path(c["wav_path"]).is_absolute() else run_dir / c["wav_path"]
        if not wav.is_file():
            raise ConfigError(
                f"{where}: conversation {i} ({c['case_id']!r}): field wav_path: no file {wav}"
            )

    salt = secrets.token_hex(16)
    cases = {
        blind_id(c["case_id"], salt): {
            "case_id": c["case_id"],
            "criteria": [k["criterion_id"] for k in c["rubric"]],
        }
        for c in conversations
    }
    key = load_key(run_dir)
    key["exports"].append(
        {
            "salt": salt,
            "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            "out_dir": str(out_dir),
            "cases": cases,
        }
    )
    write_json_atomic(key_path, key)

    index, template = [], []
    for i, c in enumerate(conversations):
        bid = blind_id(c["case_id"], salt)
        hide = _identity_strings(c)
        pattern = re.compile(
            "|".join(re.escape(s) for s in sorted(hide, key=len, reverse=True)), re.IGNORECASE
        )
        group = (
            blind_id("group\0" + c["conversation_id"], salt) if c.get("conversation_id") else bid
        )
        folder = out_dir / bid
        write_text_atomic(folder / "transcript.txt", _scrub(c["transcript_text"], pattern))
        write_json_atomic(
            folder / "exchanges.json",
            {"blind_id": bid, "group": group, "exchanges": _scrub(c["exchanges"], pattern)},
        )
        write_json_atomic(
            folder / "rubric.json", {"blind_id": bid, "criteria": _scrub(c["rubric"], pattern)}
        )
        wav = Path(c["wav_path"]) if Path(c["wav_path"]).is_absolute() else run_dir / c["wav_path"]
        _copy_wav(wav, folder / "audio.wav", f"{where}: conversation {i} ({c['case_id']!r})")
        for f in (
            "transcript.txt",
            "exchanges.json",
            "rubric.json",
        ):  # e.g. a criterion id naming the model
            text = (folder / f).read_text(encoding="utf-8").lower()
            leak = next((h for h in hide if h.lower() in text), None)
            if leak is not None:
                raise ConfigError(
                    f"{where}: conversation {i} ({c['case_id']!r}): {folder / f} would show "
                    f"{leak!r}; rename what holds it (e.g. a criterion id)"
                )
        index.append({"blind_id": bid, "group": group})
        template.append(
            {
                "blind_id": bid,
                "reviewer": None,
                "time": None,
                "screening": {k: None for k in SCREENING_CHECKS} | {"accepted": None, "note": ""},
                "grades": {k["criterion_id"]: None for k in c["rubric"]},
                "taxonomy": None,
            }
        )
    order = sorted(range(len(index)), key=lambda j: index[j]["blind_id"])
    write_json_atomic(
        out_dir / "index.json",
        {"conversations": [index[j] for j in order], "taxonomy": sorted(TAXONOMY)},
    )
    write_json_atomic(out_dir / "labels_template.json", [template[j] for j in order])
    return [index[j]["blind_id"] for j in order]


# ---------------------------------------------------------------------------------------------
# Import


def _validate_label(
    item: Any, i: int, file: Path, known: Mapping[str, dict[str, Any]]
) -> dict[str, Any]:
    if not isinstance(item, dict):
        raise ConfigError(f"{file}: item {i}: expected an object, got {type(item).__name__}")
    bid = item.get("blind_id")
    at = f"{file}: item {i} (blind id {bid!r})"

    def bad(field: str, why: str) -> ConfigError:
        return ConfigError(f"{at}: field {field}: {why}")

    for k in item:
        if k not in LABEL_KEYS:
            raise bad(k, f"unknown; valid: {', '.join(LABEL_KEYS)}")
    for k in ("blind_id", "reviewer", "time", "screening"):
        if k not in item:
            raise bad(k, "missing")
    if not isinstance(bid, str) or bid not in known:
        raise bad("blind_id", "not a conversation of any export of this run")
    if not isinstance(item["reviewer"], str) or not item["reviewer"].strip():
        raise bad("reviewer", "expected a non-empty name")
    try:
        datetime.fromisoformat(item["time"])
    except (TypeError, ValueError):
        raise bad(
            "time",
            f"expected an ISO 8601 time (e.g. 2025-01-31T14:05:00+00:00), got {item['time']!r}",
        ) from None

    s = item["screening"]
    if not isinstance(s, dict):
        raise bad("screening", "expected an object")
    for k in s:
        if k not in SCREENING_KEYS:
            raise bad(f"screening.{k}", f"unknown; valid: {', '.join(SCREENING_KEYS)}")
    for k in (*SCREENING_CHECKS, "accepted"):
        if not isinstance(s.get(k), bool):
            raise bad(f"screening.{k}", f"expected true or false, got {s.get(k)!r}")
    if not isinstance(s.get("note", ""), str):
        raise bad("screening.note", "expected a string")
    if s["accepted"] and not all(s[k] for k in SCREENING_CHECKS):
        failed = [k for k in SCREENING_CHECKS if not s[k]]
        raise bad(
            "screening.accepted",
            f"true although {', '.join(failed)} is false (a failed check rejects)",
        )

    rubric = item.get("rubric")
    if rubric is not None:
        if not isinstance(rubric, list) or not rubric:
            raise bad("rubric", "expected a non-empty list of criteria (or leave it out)")
        names = {f.name for f in dataclasses.fields(Criterion)}
        for j, crit in enumerate(rubric):
            if not isinstance(crit, dict):
                raise bad(f"rubric[{j}]", "expected a criterion object")
            for k in crit:
                if k not in names:
                    raise bad(f"rubric[{j}].{k}", f"unknown; valid: {', '.join(sorted(names))}")
            for k in ("criterion_id", "text"):
                if not isinstance(crit.get(k), str) or not crit[k].strip():
                    raise bad(f"rubric[{j}].{k}", "expected a non-empty string")
        ids = [c["criterion_id"] for c in rubric]
        dup = next((x for x in ids if ids.count(x) > 1), None)
        if dup is not None:
            raise bad("rubric", f"criterion id {dup!r} appears twice")
    else:
        ids = known[bid]["criteria"]

    grades = item.get("grades", {})
    if not isinstance(grades, dict):
        raise bad("grades", "expected an object criterion id -> pass | fail")
    for cid, v in grades.items():
        if cid not in ids:
            raise bad(
                f"grades.{cid}",
                f"not a criterion of the {'label' if rubric else 'exported'} rubric "
                f"({', '.join(ids) or 'none'})",
            )
        if v not in GRADE_VALUES:
            raise bad(f"grades.{cid}", f"expected pass or fail, got {v!r}")
    if rubric is not None and s["accepted"]:
        missing = [c for c in ids if c not in grades]
        if missing:
            raise bad("grades", f"the label's rubric has ungraded criteria: {', '.join(missing)}")
    tax = item.get("taxonomy")
    if tax is not None and tax not in TAXONOMY:
        raise bad("taxonomy", f"expected one of {', '.join(TAXONOMY)} or null, got {tax!r}")
    audit = item.get("audit")
    if audit is not None:
        if not isinstance(audit, dict):
            raise bad("audit", "expected an object (or leave it out)")
        for k in audit:
            if k not in AUDIT_KEYS:
                raise bad(f"audit.{k}", f"unknown; valid: {', '.join(AUDIT_KEYS)}")
        if not isinstance(audit.get("auditor"), str) or not audit["auditor"].strip():
            raise bad("audit.auditor", "expected a non-empty name")
        if audit["auditor"].strip() == item["reviewer"].strip():
            raise bad("audit.auditor", "the reviewer cannot audit their own label")
        try:
            datetime.fromisoformat(audit.get("time"))
        except (TypeError, ValueError):
            raise bad(
                "audit.time", f"expected an ISO 8601 time, got {audit.get('time')!r}"
            ) from None
        if audit.get("verdict") not in AUDIT_VERDICTS:
            raise bad(
                "audit.verdict",
                f"expected one of {', '.join(AUDIT_VERDICTS)}, got {audit.get('verdict')!r}",
            )
        if not isinstance(audit.get("note", ""), str):
            raise bad("audit.note", "expected a string")
        audit = {**audit, "auditor": audit["auditor"].strip(), "note": audit.get("note", "")}
    return {
        "blind_id": bid,
        "case_id": known[bid]["case_id"],
        "reviewer": item["reviewer"].strip(),
        "time": item["time"],
        "screening": {**s, "note": s.get("note", "")},
        "rubric": rubric,
        "grades": dict(grades),
        "taxonomy": tax,
        "audit": audit,
        "imported_from": str(file),
    }


def import_labels(run_dir: str | Path, file: str | Path) -> list[str]:
    """Validate every label of `file` (see the module doc), then store each under the run's
    ``review/labels/<case_id>.json``; returns the case ids. Nothing is written if any label is bad."""
    file = Path(file)
    items = _read_json(file, "labels file")
    if not isinstance(items, list):
        raise ConfigError(f"{file}: expected a JSON list of labels, got {type(items).__name__}")
    known = _blind_map(run_dir)
    if not known:
        raise ConfigError(
            f"{file}: the run {run_dir} has no review export (no {REVIEW_DIR}/{KEY_FILE}); export first"
        )
    records = []
    seen: dict[str, int] = {}
    for i, item in enumerate(items):
        rec = _validate_label(item, i, file, known)
        if rec["blind_id"] in seen:
            raise ConfigError(
                f"{file}: item {i} (blind id {rec['blind_id']!r}): field blind_id: "
                f"also labelled by item {seen[rec['blind_id']]}"
            )
        seen[rec["blind_id"]] = i
        records.append(rec)
    out = _review_dir(run_dir) / LABELS_DIR
    for rec in records:
        write_json_atomic(out / f"{rec['case_id']}.json", rec)
    return [r["case_id"] for r in records]


def human_labels(run_dir: str | Path) -> dict[str, dict[str, Any]]:
    """case id -> the imported label record, for every conversation a reviewer labelled."""
    folder = _review_dir(run_dir) / LABELS_DIR
    out = {}
    for path in sorted(folder.glob("*.json")) if folder.is_dir() else []:
        rec = _read_json(path, "review label")
        if not isinstance(rec, dict) or not isinstance(rec.get("case_id"), str):
            raise ConfigError(f"{path}: not a review label (no case_id)")
        out[rec["case_id"]] = rec
    return out


def apply_human(conv: GradedConversation, label: Mapping[str, Any]) -> GradedConversation:
    """`conv` with a reviewer's label applied: a rejected screening screens it out; the human grades
    replace the automatic ones criterion by criterion (or, with the label's own rubric, all of them);
    a human taxonomy label replaces the automatic one. A conversation that passes has no type."""
    if label.get("case_id") != conv.case_id:
        raise ValueError(
            f"label of {label.get('case_id')!r} applied to conversation {conv.case_id!r}"
        )
    reason = f"human review ({label['reviewer']}, {label['time']})"
    human = {
        cid: Grade(cid, v == "pass", reason, "human") for cid, v in label.get("grades", {}).items()
    }
    if label.get("rubric"):
        grades = tuple(
            human[c["criterion_id"]] for c in label["rubric"] if c["criterion_id"] in human
        )
    else:
        have = {g.criterion_id for g in conv.grades}
        grades = tuple(human.get(g.criterion_id, g) for g in conv.grades) + tuple(
            g for cid, g in human.items() if cid not in have
        )
    taxonomy, source = conv.taxonomy, conv.taxonomy_source
    if label.get("taxonomy") is not None:
        taxonomy, source = label["taxonomy"], "human"
    if grades and all(g.passed for g in grades):
        taxonomy = None
    return dataclasses.replace(
        conv,
        grades=grades,
        taxonomy=taxonomy,
        taxonomy_source=source,
        screened_out=not label["screening"]["accepted"],
        auto_grades=conv.graded_like_control,
        reviewed=True,
        audited=label.get("audit") is not None,
    )


# ---------------------------------------------------------------------------------------------
# The review app's page and label (fdeval.engine.review): a label has the import record's fields,
# so the scoring applies a label saved in the app (review/labels/<case>@review.json) as it applies
# an imported one

REVIEW_KEY = "review"  # one label per conversation
GRADE_STEP = "grade"  # its file holds the automatic grades and taxonomy a label may disagree with


def review_input(run_dir: str | Path, case_id: str) -> tuple[list[dict[str, Any]], str]:
    """The conversation's rubric criteria and transcript text, from the run's review input (which
    the scoring writes for the blind export); ([], "") when there is none."""
    try:
        items = json.loads((_review_dir(run_dir) / REVIEW_INPUT).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return [], ""
    for c in items if isinstance(items, list) else []:
        if isinstance(c, dict) and c.get("case_id") == case_id:
            return (
                [k for k in c.get("rubric") or [] if isinstance(k, dict) and "criterion_id" in k],
                str(c.get("transcript_text") or ""),
            )
    return [], ""


def automatic_taxonomy(session: SessionView) -> str:
    """The automatic taxonomy label of the session's results, in words (only a flagged
    conversation has one), shown beside the reviewer's choice."""
    meta = next(
        (
            r.metadata
            for rs in session.results.values()
            for r in rs
            if r.metadata and "taxonomy" in r.metadata
        ),
        None,
    )
    if meta is None:
        return "no automatic result"
    if meta.get("taxonomy"):
        return f"automatic: {meta['taxonomy']}"
    return "automatic: none" if meta.get("flagged") else "automatic: none (not flagged)"


class EchoChainReview(ReviewView):
    """Blind (the model's identity is hidden); one label per conversation: screening, a grade per
    rubric criterion, a taxonomy label (or the automatic one), a note; another person's save of a
    reviewed label is its audit (§5)."""

    blind = True

    def label_keys(self, run: RunView, session: SessionView) -> list[str]:
        return [REVIEW_KEY]

    def form(self, criteria: Sequence[Mapping[str, Any]] = (), automatic: str = "") -> LabelForm:
        """The label form of a conversation graded on `criteria` (criterion dicts with ids and texts)."""
        fields = [
            Field(("screening", k), "check", k, group="screening")
            for k in (*SCREENING_CHECKS, "accepted")
        ]
        fields += [
            Field(
                ("grades", str(c["criterion_id"])),
                "choice",
                str(c["criterion_id"]),
                GRADE_VALUES,
                optional=True,
                detail=str(c.get("text", "")),
            )
            for c in criteria
        ]
        fields += [
            Field(
                ("taxonomy",),
                "select",
                "taxonomy",
                tuple(sorted(TAXONOMY)),
                empty="(keep automatic)",
                hint=automatic,
            ),
            Field(("screening", "note"), "text", "note"),
        ]
        return LabelForm("echochain", tuple(fields), audit=True)

    def label_form(self, run: RunView, session: SessionView) -> LabelForm:
        return self.form(review_input(run.run_dir, session.case_id)[0], automatic_taxonomy(session))

    def check_label(self, form: LabelForm, values: Mapping[str, Any]) -> dict[str, Any]:
        checked = form.check(values)
        s = checked["screening"]
        if s["accepted"] and not all(s[k] for k in SCREENING_CHECKS):
            raise LabelError(
                "field screening.accepted: true although a check failed (a failed check rejects)"
            )
        return {
            "screening": s,
            "grades": checked.get("grades", {}),
            "taxonomy": checked.get("taxonomy"),
            "rubric": None,
        }

    def saving(
        self, checked: dict[str, Any], old: Mapping[str, Any] | None, reviewer: str, time: str
    ) -> tuple[dict[str, Any], str, str]:
        """Another person's save of a reviewed label is its audit: the label stays the reviewer's,
        with {auditor, time, verdict confirmed | corrected}; the reviewer's own save clears it."""
        checked = {**checked, "audit": None}
        if old is not None and old.get("reviewer") != reviewer:
            same = {k: old.get(k) for k in checked if k != "audit"} == {
                k: v for k, v in checked.items() if k != "audit"
            }
            checked["audit"] = {
                "auditor": reviewer,
                "time": time,
                "verdict": "confirmed" if same else "corrected",
                "note": "",
            }
            return checked, str(old["reviewer"]), str(old["time"])
        return checked, reviewer, time

    def disagrees(
        self, run: RunView, session: SessionView, key: str, label: Mapping[str, Any]
    ) -> bool:
        """A human grade that is not the automatic grade of its criterion, or a taxonomy label
        that is not the automatic one (the grade step's file; screening is no judge's call)."""
        if GRADE_STEP not in session.results:
            return False
        try:
            graded = json.loads(
                (Path(run.run_dir) / run.steps[GRADE_STEP] / f"{session.case_id}.json").read_text(
                    encoding="utf-8"
                )
            )
        except (OSError, ValueError, KeyError):
            return False
        auto = {
            str(g.get("criterion_id")): "pass" if g.get("passed") else "fail"
            for g in graded.get("grades") or []
            if isinstance(g, dict)
        }
        grades = label.get("grades") or {}
        if any(cid in auto and auto[cid] != v for cid, v in grades.items()):
            return True
        return label.get("taxonomy") is not None and label.get("taxonomy") != graded.get("taxonomy")

    def transcript_text(self, run: RunView, session: SessionView) -> str:
        return review_input(run.run_dir, session.case_id)[1]


# ---------------------------------------------------------------------------------------------
# CLI

PROG = "python -m fdeval.benchmarks.echochain.review"


def _export_cli(run_dir: Path, out_dir: Path, input_file: Path | None) -> str:
    path = input_file or _review_dir(run_dir) / REVIEW_INPUT
    if not path.is_file():
        raise ConfigError(
            f"{path}: no review input; run the echochain benchmark on {run_dir} first "
            "(or pass --input FILE)"
        )
    conversations = _read_json(path, "review input")
    if not isinstance(conversations, list):
        raise ConfigError(f"{path}: expected a JSON list of conversations")
    ids = export(run_dir, out_dir, conversations, where=str(path))
    return (
        f"exported {len(ids)} conversation(s) to {out_dir} (key: {_review_dir(run_dir) / KEY_FILE})"
    )


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog=PROG, description="EchoChain human review: blind export, label import."
    )
    sub = ap.add_subparsers(dest="command", required=True)
    ex = sub.add_parser("export", help="write a blind review export of a run's conversations")
    ex.add_argument("run_dir", type=Path)
    ex.add_argument(
        "out_dir", type=Path, help="new or empty folder (outside the run's review/ folder)"
    )
    ex.add_argument(
        "--input",
        type=Path,
        help=f"conversations to export (default: RUN_DIR/{REVIEW_DIR}/{REVIEW_INPUT})",
    )
    im = sub.add_parser("import", help="import reviewers' labels (JSON list) into a run")
    im.add_argument("run_dir", type=Path)
    im.add_argument("labels", type=Path)
    args = ap.parse_args(argv)
    try:
        if args.command == "export":
            print(_export_cli(args.run_dir, args.out_dir, args.input))
        else:
            ids = import_labels(args.run_dir, args.labels)
            print(f"imported {len(ids)} label(s) into {_review_dir(args.run_dir) / LABELS_DIR}")
    except FdevalError as e:
        print(f"{PROG}: error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
