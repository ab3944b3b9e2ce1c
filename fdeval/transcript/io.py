"""Transcripts on disk (JSON), and reading transcripts given in the rendered text format.

JSON form (one object per file; see ``docs/judging.md``)::

    {
      "format": "fdeval.transcript", "format_version": 1,
      "case_id": "conv1__listen", "duration_s": 42.0,
      "user_turns": [
        {"index": 0, "label": "turn1", "turn_type": "take-turn", "subtype": null,
         "start_s": 0.24, "end_s": 8.72, "scheduled_s": 0.24, "cut_short": false,
         "n_words_total": 31, "n_words_played": 31,
         "triggers": [{"kind": "backchannel", "at_s": 4.1}]}
      ],
      "words": [
        {"speaker": "user", "text": "so", "start_s": 0.24, "end_s": 0.4, "source": "tts", "turn": 0},
        {"speaker": "model", "text": "sure", "start_s": 9.36, "end_s": 9.6, "source": "model_text", "turn": null}
      ]
    }

The case id is stored once, on the transcript; every word and played turn takes it on reading.
A played turn's `triggers` are the points its benchmark marked in it, on the session clock
(Instruct-FD: the reference's cut-in points, of kind backchannel or interrupt). Reading is
strict: unknown or missing keys, wrong types, negative or non-finite times, reversed spans and
dangling turn indices raise :class:`TranscriptError`, naming the file, the case and the field as
a dotted path (``words[12].end_s``).
"""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Any, Mapping

from fdeval.errors import FileFieldError
from fdeval.files import read_json_file, write_json_atomic
from fdeval.types import PlayedTurn, Transcript, Word

TRANSCRIPT_FORMAT = "fdeval.transcript"
TRANSCRIPT_FORMAT_VERSION = 1

SPEAKERS = ("user", "model")
SOURCES = ("tts", "model_text", "asr")
TURN_TYPES = ("take-turn", "barge-in")
SUBTYPES = ("interrupt", "backchannel")


class TranscriptError(FileFieldError):
    """A transcript (JSON or rendered text) that fails validation."""


# --------------------------------------------------------------------------------------------
# Writing


def _played_to_dict(p: PlayedTurn) -> dict[str, Any]:
    return {
        "index": p.index,
        "label": p.label,
        "turn_type": p.turn_type,
        "subtype": p.subtype,
        "start_s": float(p.start_s),
        "end_s": float(p.end_s),
        "scheduled_s": float(p.scheduled_s),
        "cut_short": bool(p.cut_short),
        "n_words_total": p.n_words_total,
        "n_words_played": p.n_words_played,
        "triggers": [{"kind": k, "at_s": float(t)} for k, t in p.triggers_s],
    }


def transcript_to_dict(t: Transcript) -> dict[str, Any]:
    """The JSON object for `t`. Raises :class:`TranscriptError` if a word or turn names another case."""
    for i, w in enumerate(t.words):
        if w.case_id != t.case_id:
            raise TranscriptError(
                "<transcript>",
                t.case_id,
                f"words[{i}].case_id",
                f"{w.case_id!r} differs from the transcript's case id",
            )
    for i, p in enumerate(t.user_turns):
        if p.case_id != t.case_id:
            raise TranscriptError(
                "<transcript>",
                t.case_id,
                f"user_turns[{i}].case_id",
                f"{p.case_id!r} differs from the transcript's case id",
            )
    return {
        "format": TRANSCRIPT_FORMAT,
        "format_version": TRANSCRIPT_FORMAT_VERSION,
        "case_id": t.case_id,
        "duration_s": float(t.duration_s),
        "user_turns": [_played_to_dict(p) for p in t.user_turns],
        "words": [
            {
                "speaker": w.speaker,
                "text": w.text,
                "start_s": float(w.start_s),
                "end_s": float(w.end_s),
                "source": w.source,
                "turn": w.turn,
            }
            for w in t.words
        ],
    }


def write_transcript(t: Transcript, path: str | Path) -> None:
    """Validate `t` and write it to `path` as JSON, atomically."""
    d = transcript_to_dict(t)
    transcript_from_dict(d, path)
    write_json_atomic(path, d)


# --------------------------------------------------------------------------------------------
# Reading


class _Reader:
    """Typed field access that fails with the file, case and dotted field name."""

    def __init__(self, path: str | Path, case_id: str | None):
        self.path, self.case_id = str(path), case_id

    def fail(self, field: str, message: str) -> TranscriptError:
        return TranscriptError(self.path, self.case_id, field or "<root>", message)

    def obj(
        self, value: Any, where: str, keys: tuple[str, ...], optional: tuple[str, ...] = ()
    ) -> Mapping[str, Any]:
        if not isinstance(value, dict):
            raise self.fail(where, f"expected an object, got {_kind(value)}")
        prefix = f"{where}." if where else ""
        for key in value:
            if key not in keys and key not in optional:
                raise self.fail(
                    f"{prefix}{key}", f"unknown key; valid keys: {', '.join(keys + optional)}"
                )
        for key in keys:
            if key not in value:
                raise self.fail(f"{prefix}{key}", "missing required field")
        return value

    def get(
        self,
        d: Mapping[str, Any],
        key: str,
        where: str,
        kind: str,
        *,
        choices: tuple[Any, ...] = (),
        nullable: bool = False,
    ) -> Any:
        field = f"{where}.{key}" if where else key
        v = d.get(key)
        if v is None and nullable:
            return None
        ok = {
            "str": isinstance(v, str) and bool(v.strip()),
            "bool": isinstance(v, bool),
            "int": isinstance(v, int) and not isinstance(v, bool) and v >= 0,
            "time": isinstance(v, (int, float))
            and not isinstance(v, bool)
            and math.isfinite(v)
            and v >= 0,
            "list": isinstance(v, list),
        }[kind]
        if not ok:
            want = {
                "str": "a non-empty string",
                "bool": "true or false",
                "int": "an integer >= 0",
                "time": "a finite number of seconds >= 0",
                "list": "a list",
            }[kind]
            raise self.fail(field, f"expected {want}, got {v!r}")
        if choices and v not in choices:
            raise self.fail(
                field, f"invalid value {v!r}; expected one of {', '.join(map(repr, choices))}"
            )
        return float(v) if kind == "time" else v

    def span(self, d: Mapping[str, Any], where: str) -> tuple[float, float]:
        start = self.get(d, "start_s", where, "time")
        end = self.get(d, "end_s", where, "time")
        if end < start:
            raise self.fail(f"{where}.end_s", f"end {end:g} is before start {start:g}")
        return start, end


def _kind(value: Any) -> str:
    return "null" if value is None else type(value).__name__


def _played_from_dict(r: _Reader, item: Any, where: str, case_id: str) -> PlayedTurn:
    keys = (
        "index",
        "label",
        "turn_type",
        "subtype",
        "start_s",
        "end_s",
        "scheduled_s",
        "cut_short",
        "n_words_total",
        "n_words_played",
        "triggers",
    )
    d = r.obj(item, where, keys)
    start, end = r.span(d, where)
    turn_type = r.get(d, "turn_type", where, "str", choices=TURN_TYPES)
    subtype = r.get(d, "subtype", where, "str", choices=SUBTYPES, nullable=True)
    if turn_type == "barge-in" and subtype is None:
        raise r.fail(f"{where}.subtype", "required for a barge-in turn")
    if turn_type == "take-turn" and subtype is not None:
        raise r.fail(f"{where}.subtype", "only allowed on a barge-in turn")
    n_total = r.get(d, "n_words_total", where, "int")
    n_played = r.get(d, "n_words_played", where, "int")
    if n_played > n_total:
        raise r.fail(
            f"{where}.n_words_played", f"{n_played} is more than n_words_total ({n_total})"
        )
    triggers = []
    for j, tr in enumerate(r.get(d, "triggers", where, "list")):
        tw = f"{where}.triggers[{j}]"
        td = r.obj(tr, tw, ("kind", "at_s"))
        triggers.append((r.get(td, "kind", tw, "str"), r.get(td, "at_s", tw, "time")))
    return PlayedTurn(
        case_id=case_id,
        index=r.get(d, "index", where, "int"),
        label=r.get(d, "label", where, "str"),
        turn_type=turn_type,
        subtype=subtype,
        start_s=start,
        end_s=end,
        scheduled_s=r.get(d, "scheduled_s", where, "time"),
        cut_short=r.get(d, "cut_short", where, "bool"),
        n_words_total=n_total,
        n_words_played=n_played,
        triggers_s=tuple(triggers),
    )


def transcript_from_dict(d: Any, path: str | Path = "<transcript>") -> Transcript:
    """Validate the JSON object `d` (read from `path`) and build its :class:`Transcript`."""
    case_id = (
        d.get("case_id") if isinstance(d, dict) and isinstance(d.get("case_id"), str) else None
    )
    r = _Reader(path, case_id)
    top = r.obj(d, "", ("format", "format_version", "case_id", "duration_s", "user_turns", "words"))
    if top["format"] != TRANSCRIPT_FORMAT:
        raise r.fail("format", f"expected {TRANSCRIPT_FORMAT!r}, got {top['format']!r}")
    if top["format_version"] != TRANSCRIPT_FORMAT_VERSION:
        raise r.fail(
            "format_version",
            f"unsupported version {top['format_version']!r}; this fdeval reads {TRANSCRIPT_FORMAT_VERSION}",
        )
    case_id = r.get(top, "case_id", "", "str")
    duration_s = r.get(top, "duration_s", "", "time")
    turns = [
        _played_from_dict(r, item, f"user_turns[{i}]", case_id)
        for i, item in enumerate(r.get(top, "user_turns", "", "list"))
    ]
    indices = [p.index for p in turns]
    for i, idx in enumerate(indices):
        if idx in indices[:i]:
            raise r.fail(f"user_turns[{i}].index", f"turn index {idx} appears twice")
    words = []
    for i, item in enumerate(r.get(top, "words", "", "list")):
        where = f"words[{i}]"
        wd = r.obj(item, where, ("speaker", "text", "start_s", "end_s", "source"), ("turn",))
        start, end = r.span(wd, where)
        speaker = r.get(wd, "speaker", where, "str", choices=SPEAKERS)
        turn = r.get(wd, "turn", where, "int", nullable=True)
        if turn is not None and speaker == "user" and turn not in indices:
            raise r.fail(f"{where}.turn", f"no user turn with index {turn} in user_turns")
        words.append(
            Word(
                case_id,
                speaker,
                r.get(wd, "text", where, "str"),
                start,
                end,
                r.get(wd, "source", where, "str", choices=SOURCES),
                turn,
            )
        )
    return Transcript(case_id, tuple(words), tuple(turns), duration_s)


def load_transcript(path: str | Path) -> Transcript:
    """Read and validate a transcript JSON file."""
    return transcript_from_dict(read_json_file(path, TranscriptError), path)


# --------------------------------------------------------------------------------------------
# The rendered text format, read back

_LINE_HEAD = re.compile(
    r"\[\s*(?P<start>\d+(?:\.\d+)?)\s*-\s*(?P<end>\d+(?:\.\d+)?)\s*\]\s*"
    r"(?P<overlap>\[Overlap\]\s*)?(?P<speaker>USER|MODEL)\s*(?P<cont>\(cont\.\))?\s*:"
)


def parse_rendered(text: str, case_id: str, *, source: str = "asr") -> list[Word]:
    """The words of a transcript in the rendered line format (see :mod:`fdeval.transcript.render`).

    Lines may be separated by newlines or simply follow each other (``[0.24-8.08] USER: ...
    [10.40-13.52] MODEL: ...``). The ``[Overlap]`` and ``(cont.)`` marks are accepted and ignored:
    they follow from the times. Each line's words are spread evenly over its span (the first
    starts at the line's start, the last ends at its end), since the format keeps no word times.
    Words get `source` and no turn index. Raises :class:`TranscriptError` naming the line.
    """
    if source not in SOURCES:
        raise ValueError(f"source must be one of {SOURCES}, got {source!r}")
    heads = list(_LINE_HEAD.finditer(text))
    lead = text[: heads[0].start()] if heads else text
    if lead.strip():
        raise TranscriptError(
            "<rendered>",
            case_id,
            "line 1",
            f"expected '[start-end] USER|MODEL: words', got {lead.strip()[:40]!r}",
        )
    words: list[Word] = []
    for k, m in enumerate(heads):
        field = f"line {k + 1}"
        body_end = heads[k + 1].start() if k + 1 < len(heads) else len(text)
        tokens = text[m.end() : body_end].split()
        start, end = float(m["start"]), float(m["end"])
        if end < start:
            raise TranscriptError(
                "<rendered>", case_id, field, f"end {end:g} is before start {start:g}"
            )
        if not tokens:
            raise TranscriptError("<rendered>", case_id, field, "line has no words")
        speaker = "user" if m["speaker"] == "USER" else "model"
        step = (end - start) / len(tokens)
        for i, tok in enumerate(tokens):
            w_end = end if i == len(tokens) - 1 else start + (i + 1) * step
            words.append(Word(case_id, speaker, tok, start + i * step, w_end, source))  # type: ignore[arg-type]
    return words
