"""The on-disk JSON form of a test case, and its strict validation.

One JSON object per file: the generic keys of every case (ids, benchmark, scenario, the system
instruction, seed, version and the ordered manifest of user turns with their text and word
timings), plus the keys of the benchmark's own record (`TestCase.data`), which the record's class
reads and writes (:class:`CaseRecord`; Instruct-FD's, with the instruction's name, the reference,
the judged instructions and the trigger points, is
:class:`fdeval.benchmarks.instructfd.records.InstructFDCase`). The format is documented field by
field in ``docs/cases.md``.

Reading is strict: every field is type- and range-checked, unknown keys are rejected, and every
failure raises :class:`fdeval.errors.CaseError` naming the file, the case and the field as a dotted
path (``turns[2].barge_in_after_s``). That includes what the JSON parser alone would turn into a
traceback (invalid UTF-8, numbers out of range, deep nesting) and, when the dataset root is given,
each turn's audio file (decoded once per load; see :func:`fdeval.audio.io.scan_audio`).
"""

from __future__ import annotations

import math
import re
from pathlib import Path, PurePosixPath
from typing import Any, ClassVar, Mapping, Protocol

from fdeval.audio.io import AudioFileError, AudioInfo, scan_audio
from fdeval.errors import CaseError
from fdeval.files import HugeInt, read_json_file, write_json_atomic
from fdeval.types import TestCase, Turn, WordTiming

SCHEMA_VERSION = 1

# Slack for float comparisons between times that were rounded independently (seconds).
TIME_EPS_S = 1e-3

TURN_TYPES = ("take-turn", "barge-in")
HANDLINGS = ("hold", "yield")
SUBTYPES = ("interrupt", "backchannel")
BARGE_IN_KEYS = ("barge_in_after_s", "barge_in_handling", "subtype")

# key -> required?  (order here is the order written to disk; a record's keys follow `scenario`)
HEAD_KEYS: dict[str, bool] = {
    "schema_version": True,
    "test_case_id": True,
    "conversation_id": True,
    "benchmark": True,
    "scenario": True,
}
BODY_KEYS: dict[str, bool] = {
    "system_instruction": True,  # required key; null for a case without an instruction
    "seed": False,
    "version": False,
    "turns": True,
}
TURN_KEYS: dict[str, bool] = {
    "speaker": True,
    "label": True,
    "turn_type": True,
    "audio_path": True,
    "timeout_s": True,
    "barge_in_after_s": False,  # required for barge-in, forbidden for take-turn
    "barge_in_handling": False,
    "subtype": False,
    "text": True,
    "duration_s": True,
    "words": True,
}
WORD_KEYS: dict[str, bool] = {"text": True, "start_s": True, "end_s": True}

# Ids name files: `.<case_id>@<policy>.json.<host>-<pid>.<random>.tmp.json` (an atomic write's
# temporary) adds ~110 characters with a 64-character host name, and a file name holds 255 bytes.
MAX_ID_LEN = 128
_ID_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")  # used with fullmatch: no trailing newline

# How far a turn's audio may be longer or shorter than its `duration_s`: above rounding durations
# to 0.01 s (5 ms), below one 80 ms model frame, so no event moves by a frame unnoticed.
AUDIO_DURATION_TOLERANCE_S = 0.02
AUDIO_CHANNELS = (1, 2)  # a stereo turn is mixed down to mono when streamed


class CaseRecord(Protocol):
    """A benchmark's own record (`TestCase.data`) as its case files hold it.

    `case_keys` / `turn_keys` are its keys (key -> required?) beside the generic ones of the case
    and of each turn; `read` builds the record from the validated generic part (`turns`) and the
    raw object `d`, failing through `ctx.fail(field, message)` like the generic checks;
    `case_fields` / `turn_fields` are what it writes. The run's case digest hashes the written
    form, so a record that changes it changes every digest."""

    case_keys: ClassVar[Mapping[str, bool]]
    turn_keys: ClassVar[Mapping[str, bool]]

    @classmethod
    def read(cls, ctx: "_Ctx", d: Mapping[str, Any], turns: tuple[Turn, ...]) -> "CaseRecord": ...

    def case_fields(self) -> dict[str, Any]: ...

    def turn_fields(self, index: int) -> dict[str, Any]: ...


# --------------------------------------------------------------------------------------------
# Writing


def _word_to_dict(w: WordTiming) -> dict[str, Any]:
    return {"text": w.text, "start_s": float(w.start_s), "end_s": float(w.end_s)}


def _turn_to_dict(turn: Turn) -> dict[str, Any]:
    d: dict[str, Any] = {
        "speaker": "user",
        "label": turn.label,
        "turn_type": turn.turn_type,
        "audio_path": turn.audio_path,
        "timeout_s": float(turn.timeout_s),
    }
    if turn.turn_type == "barge-in":
        d["barge_in_after_s"] = (
            None if turn.barge_in_after_s is None else float(turn.barge_in_after_s)
        )
        d["barge_in_handling"] = turn.barge_in_handling
        d["subtype"] = turn.subtype
    d["text"] = turn.text
    d["duration_s"] = float(turn.duration_s)
    d["words"] = [_word_to_dict(w) for w in turn.words]
    return d


def case_to_dict(case: TestCase) -> dict[str, Any]:
    """The JSON object for `case`, its record's keys included (key order fixed; `Turn.index` and
    `Turn.case_id` are implied)."""
    data: CaseRecord | None = case.data
    turns = [_turn_to_dict(t) for t in case.turns]
    if data is not None:
        for t, d in zip(case.turns, turns):
            d.update(data.turn_fields(t.index))
    return {
        "schema_version": SCHEMA_VERSION,
        "test_case_id": case.case_id,
        "conversation_id": case.conversation_id,
        "benchmark": case.benchmark,
        "scenario": case.scenario,
        **(data.case_fields() if data is not None else {}),
        "system_instruction": case.system_instruction,
        "seed": case.seed,
        "version": case.version,
        "turns": turns,
    }


def write_case(case: TestCase, path: str | Path) -> None:
    """Validate `case` (all but the audio files' existence) and write it to `path` atomically."""
    d = case_to_dict(case)
    case_from_dict(d, path, root=None, record=None if case.data is None else type(case.data))
    write_json_atomic(path, d)


# --------------------------------------------------------------------------------------------
# Reading


class _Ctx:
    """Where we are, for error messages; `audio` caches scans shared by the cases of one load."""

    def __init__(
        self,
        path: str | Path,
        case_id: str | None,
        audio: dict[Path, AudioInfo | str] | None = None,
    ):
        self.path, self.case_id = str(path), case_id
        self.audio = {} if audio is None else audio

    def fail(self, field: str, message: str) -> CaseError:
        return CaseError(self.path, self.case_id, field or "<root>", message)


def _join(prefix: str, key: str) -> str:
    return f"{prefix}.{key}" if prefix else key


def _check_keys(ctx: _Ctx, obj: Any, spec: Mapping[str, bool], where: str) -> dict[str, Any]:
    if not isinstance(obj, dict):
        raise ctx.fail(where, f"expected an object, got {_kind(obj)}")
    for key in obj:
        if key not in spec:
            raise ctx.fail(
                _join(where, str(key)), f"unknown key {key!r}; valid keys: {', '.join(spec)}"
            )
    for key, required in spec.items():
        if required and key not in obj:
            raise ctx.fail(_join(where, key), "missing required field")
    return obj


def _str(ctx: _Ctx, value: Any, field: str, *, empty: bool = False) -> str:
    if not isinstance(value, str):
        raise ctx.fail(field, f"expected a string, got {_kind(value)}")
    if not empty and not value.strip():
        raise ctx.fail(field, "must not be empty")
    return value


def _enum(ctx: _Ctx, value: Any, field: str, allowed: tuple[str, ...]) -> str:
    if not isinstance(value, str) or value not in allowed:
        raise ctx.fail(
            field, f"invalid value {value!r}; expected one of {', '.join(map(repr, allowed))}"
        )
    return value


def _out_of_range(ctx: _Ctx, value: Any, field: str) -> None:
    if isinstance(value, HugeInt):
        raise ctx.fail(
            field, f"integer with {value.digits} digits is out of range (64-bit integers only)"
        )


def _num(
    ctx: _Ctx, value: Any, field: str, *, min_: float | None = None, positive: bool = False
) -> float:
    _out_of_range(ctx, value, field)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ctx.fail(field, f"expected a number, got {_kind(value)}")
    if not math.isfinite(value):
        raise ctx.fail(field, f"must be finite, got {value!r}")
    if positive and value <= 0:
        raise ctx.fail(field, f"must be > 0, got {value!r}")
    if min_ is not None and value < min_:
        raise ctx.fail(field, f"must be >= {min_:g}, got {value!r}")
    return float(value)


def _int(ctx: _Ctx, value: Any, field: str, *, min_: int | None = None) -> int:
    _out_of_range(ctx, value, field)
    if isinstance(value, bool) or not isinstance(value, int):
        raise ctx.fail(field, f"expected an integer, got {_kind(value)}")
    if min_ is not None and value < min_:
        raise ctx.fail(field, f"must be >= {min_}, got {value!r}")
    return value


def _list(ctx: _Ctx, value: Any, field: str, *, nonempty: bool = False) -> list[Any]:
    if not isinstance(value, list):
        raise ctx.fail(field, f"expected a list, got {_kind(value)}")
    if nonempty and not value:
        raise ctx.fail(field, "must not be empty")
    return value


def _kind(value: Any) -> str:
    if isinstance(value, HugeInt):
        return f"an integer with {value.digits} digits"
    return "null" if value is None else type(value).__name__


def _ident(ctx: _Ctx, value: Any, field: str) -> str:
    s = _str(ctx, value, field)
    if len(s) > MAX_ID_LEN:
        raise ctx.fail(
            field,
            f"is {len(s)} characters long; at most {MAX_ID_LEN} "
            "(ids name files, whose names hold 255 bytes)",
        )
    if not _ID_RE.fullmatch(s):
        raise ctx.fail(
            field,
            f"{s!r} is not a valid id (letters, digits, '.', '_', '-'; no leading punctuation)",
        )
    return s


def _audio_path(ctx: _Ctx, s: str, field: str, root: Path | None) -> Path | None:
    """Check the path's shape; with a `root`, return the existing file it names (else None)."""
    bad = next((i for i, c in enumerate(s) if ord(c) < 32 or ord(c) == 127), None)
    if bad is not None:
        raise ctx.fail(field, f"{s!r} contains a control character ({s[bad]!r} at position {bad})")
    if "\\" in s:
        raise ctx.fail(field, f"{s!r}: use '/' as the separator")
    p = PurePosixPath(s)
    if p.is_absolute() or re.match(r"^[A-Za-z]:", s):
        raise ctx.fail(field, f"{s!r} is absolute; audio paths are relative to the dataset root")
    if ".." in p.parts:
        raise ctx.fail(field, f"{s!r} contains '..'; audio paths must stay inside the dataset root")
    if root is not None:
        root_r = Path(root).resolve()
        full = (root_r / p).resolve()
        if full != root_r and root_r not in full.parents:
            raise ctx.fail(field, f"{s!r} resolves outside the dataset root {root_r}")
        if not full.is_file():
            raise ctx.fail(field, f"audio file not found: {full}")
        return full
    return None


def _check_audio(ctx: _Ctx, full: Path, where: str, duration_s: float) -> None:
    """The turn's audio decodes, has frames, is finite, mono or stereo, and lasts `duration_s`."""
    if full not in ctx.audio:
        try:
            ctx.audio[full] = scan_audio(full)
        except AudioFileError as e:
            ctx.audio[full] = str(e)
    info = ctx.audio[full]
    if isinstance(info, str):
        raise ctx.fail(f"{where}.audio_path", f"{full}: {info}")
    if info.channels not in AUDIO_CHANNELS:
        raise ctx.fail(
            f"{where}.audio_path",
            f"{full}: has {info.channels} channels; turn audio is mono or stereo",
        )
    if abs(info.duration_s - duration_s) > AUDIO_DURATION_TOLERANCE_S:
        raise ctx.fail(
            f"{where}.duration_s",
            f"{duration_s:g} s but {full} lasts {info.duration_s:.4f} s "
            f"({info.frames} frames at {info.sample_rate} Hz; "
            f"tolerance {AUDIO_DURATION_TOLERANCE_S:g} s)",
        )


def _words(
    ctx: _Ctx, value: Any, where: str, text: str, duration_s: float
) -> tuple[WordTiming, ...]:
    items = _list(ctx, value, where)
    tokens = text.split()
    if items and len(items) != len(tokens):
        raise ctx.fail(
            where, f"has {len(items)} words but text has {len(tokens)} whitespace tokens"
        )
    out: list[WordTiming] = []
    prev_end = 0.0
    for i, item in enumerate(items):
        f = f"{where}[{i}]"
        _check_keys(ctx, item, WORD_KEYS, f)
        w_text = _str(ctx, item["text"], f"{f}.text")
        if w_text != tokens[i]:
            raise ctx.fail(
                f"{f}.text", f"{w_text!r} does not match token {i} of text ({tokens[i]!r})"
            )
        start = _num(ctx, item["start_s"], f"{f}.start_s", min_=0.0)
        end = _num(ctx, item["end_s"], f"{f}.end_s", min_=0.0)
        if end < start:
            raise ctx.fail(f"{f}.end_s", f"end {end:g} is before start {start:g}")
        if start < prev_end - TIME_EPS_S:
            raise ctx.fail(
                f"{f}.start_s",
                f"start {start:g} is before the previous word's end {prev_end:g} (words must be monotonic)",
            )
        if end > duration_s + TIME_EPS_S:
            raise ctx.fail(f"{f}.end_s", f"end {end:g} is past the turn duration {duration_s:g}")
        prev_end = end
        out.append(WordTiming(w_text, start, end))
    return tuple(out)


def _turn(
    ctx: _Ctx, item: Any, index: int, case_id: str, root: Path | None, keys: Mapping[str, bool]
) -> Turn:
    where = f"turns[{index}]"
    d = _check_keys(ctx, item, keys, where)
    _enum(ctx, d["speaker"], f"{where}.speaker", ("user",))
    label = _ident(ctx, d["label"], f"{where}.label")
    turn_type = _enum(ctx, d["turn_type"], f"{where}.turn_type", TURN_TYPES)
    audio_path = _str(ctx, d["audio_path"], f"{where}.audio_path")
    audio_file = _audio_path(ctx, audio_path, f"{where}.audio_path", root)
    timeout_s = _num(ctx, d["timeout_s"], f"{where}.timeout_s", positive=True)
    after = handling = subtype = None
    if turn_type == "barge-in":
        for key in BARGE_IN_KEYS:
            if d.get(key) is None:
                raise ctx.fail(f"{where}.{key}", "required for a barge-in turn")
        after = _num(ctx, d["barge_in_after_s"], f"{where}.barge_in_after_s", min_=0.0)
        handling = _enum(ctx, d["barge_in_handling"], f"{where}.barge_in_handling", HANDLINGS)
        subtype = _enum(ctx, d["subtype"], f"{where}.subtype", SUBTYPES)
    else:
        for key in BARGE_IN_KEYS:
            if d.get(key) is not None:
                raise ctx.fail(f"{where}.{key}", "only allowed on a barge-in turn")
    text = _str(ctx, d["text"], f"{where}.text")
    duration_s = _num(ctx, d["duration_s"], f"{where}.duration_s", positive=True)
    if audio_file is not None:
        _check_audio(ctx, audio_file, where, duration_s)
    words = _words(ctx, d["words"], f"{where}.words", text, duration_s)
    return Turn(
        case_id=case_id,
        index=index,
        label=label,
        turn_type=turn_type,  # type: ignore[arg-type]
        audio_path=audio_path,
        text=text,
        words=words,
        duration_s=duration_s,
        timeout_s=timeout_s,
        barge_in_after_s=after,
        barge_in_handling=handling,  # type: ignore[arg-type]
        subtype=subtype,  # type: ignore[arg-type]
    )


def case_from_dict(
    d: Any,
    path: str | Path,
    root: str | Path | None,
    record: type[CaseRecord] | None = None,
    _audio: dict[Path, AudioInfo | str] | None = None,
) -> TestCase:
    """Validate the JSON object `d` (read from `path`) and build its :class:`TestCase`.

    `record` is the class of the benchmark's own record whose keys the file holds beside the
    generic ones (None: only the generic keys). `root` is the dataset root the turns'
    ``audio_path`` values are relative to; each must resolve inside it to an existing file, which
    is decoded and checked against the turn (readable, frames > 0, finite, mono or stereo, lasting
    ``duration_s`` within ``AUDIO_DURATION_TOLERANCE_S``). With ``root=None`` the paths are still
    checked for shape (relative, no ``..``, no control characters) but not looked up. Raises
    :class:`CaseError` on the first problem.
    """
    case_id = None
    if isinstance(d, dict) and isinstance(d.get("test_case_id"), str):
        case_id = d["test_case_id"]
        if len(case_id) > MAX_ID_LEN:  # shown shortened so the message stays readable
            case_id = f"{case_id[:40]}...({len(case_id)} characters)"
    ctx = _Ctx(path, case_id, _audio)
    _check_keys(ctx, d, {**HEAD_KEYS, **(record.case_keys if record else {}), **BODY_KEYS}, "")
    sv = _int(ctx, d["schema_version"], "schema_version")
    if sv != SCHEMA_VERSION:
        raise ctx.fail(
            "schema_version", f"unsupported schema version {sv}; this fdeval reads {SCHEMA_VERSION}"
        )
    case_id = _ident(ctx, d["test_case_id"], "test_case_id")
    conversation_id = _ident(ctx, d["conversation_id"], "conversation_id")
    benchmark = _str(ctx, d["benchmark"], "benchmark")
    scenario = _str(ctx, d["scenario"], "scenario")
    instruction = d["system_instruction"]
    if instruction is not None:
        _str(ctx, instruction, "system_instruction")
    seed = _int(ctx, d.get("seed", 0), "seed")
    version = _str(ctx, d.get("version", "1"), "version")

    turns_raw = _list(ctx, d["turns"], "turns", nonempty=True)
    root_p = None if root is None else Path(root)
    turn_keys = {**TURN_KEYS, **(record.turn_keys if record else {})}
    turns = tuple(
        _turn(ctx, item, i, case_id, root_p, turn_keys) for i, item in enumerate(turns_raw)
    )
    seen: dict[str, int] = {}
    for t in turns:
        if t.label in seen:
            raise ctx.fail(
                f"turns[{t.index}].label",
                f"duplicate label {t.label!r} (also turns[{seen[t.label]}])",
            )
        seen[t.label] = t.index

    return TestCase(
        case_id=case_id,
        conversation_id=conversation_id,
        benchmark=benchmark,
        scenario=scenario,
        system_instruction=instruction,
        turns=turns,
        seed=seed,
        version=version,
        data=None if record is None else record.read(ctx, d, turns),
    )


def load_case(
    path: str | Path,
    root: str | Path | None,
    record: type[CaseRecord] | None = None,
    _audio: dict[Path, AudioInfo | str] | None = None,
) -> TestCase:
    """Read and validate one case file. `root`, `record`: see :func:`case_from_dict`."""
    path = Path(path)
    return case_from_dict(read_json_file(path, CaseError), path, root, record, _audio)


def case_files(cases_dir: str | Path) -> list[Path]:
    """The case files of a directory: ``*.json``, not hidden (atomic-write temporaries), sorted."""
    return sorted(
        p for p in Path(cases_dir).glob("*.json") if not p.name.startswith(".") and p.is_file()
    )


def load_cases(
    cases_dir: str | Path, root: str | Path | None, record: type[CaseRecord] | None = None
) -> list[TestCase]:
    """Load every case file in `cases_dir` (not recursive), sorted by case id (`root`, `record`:
    see :func:`case_from_dict`).

    A case id that appears in two files is an error naming both; a folder without case files is
    an error (an empty run would report an empty table). Audio shared by several cases (one
    conversation's turns) is decoded once.
    """
    cases_dir = Path(cases_dir)
    if not cases_dir.is_dir():
        raise CaseError(str(cases_dir), None, "<dir>", "cases directory not found")
    files = case_files(cases_dir)
    if not files:
        raise CaseError(str(cases_dir), None, "<dir>", "no case files (*.json) in this folder")
    by_id: dict[str, tuple[TestCase, Path]] = {}
    audio: dict[Path, AudioInfo | str] = {}
    for path in files:
        case = load_case(path, root, record, audio)
        if case.case_id in by_id:
            other = by_id[case.case_id][1]
            raise CaseError(
                str(path), case.case_id, "test_case_id", f"duplicate case id, also in {other}"
            )
        by_id[case.case_id] = (case, path)
    return [by_id[k][0] for k in sorted(by_id)]
