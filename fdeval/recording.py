"""The session recording, read and written here only: a stereo WAV and an HDF5 log per case.

This module owns the format of `<run_dir>/<folder>/<case_id>.wav|.h5` (docs/recording.md): it
writes a session (`write_session`; the orchestrator's recorder turns what a session observed into
a :class:`Session` and calls it), reads one back as typed records (`read_session`, or
`read_info` for the root attributes alone) and tells whether a pair on disk reads back whole
(`check_session`). It is the one fdeval module that imports h5py (.importlinter); it sits low in
the layers and imports only fdeval.errors and fdeval.files.

Every record is frozen; times are seconds on the session clock (the unit is in each name), and
every table row names its case and session (`case_id`, `session_id`), so rows of many sessions
can be pooled. The on-disk names are kept: `Turn.start_s` is the `turns` table's `start_s`
column, `SessionInfo.sample_rate_hz` the `sample_rate` attribute. NaN marks what did not happen
(a turn that never played has `start_s` NaN); dataclass equality compares NaN as unequal, so
compare two reads with `math.isnan` where NaN can occur.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from operator import attrgetter
from pathlib import Path
from typing import Any, Collection, Mapping

import h5py
import numpy as np
import soundfile as sf

from fdeval.errors import FdevalError
from fdeval.files import atomic_path

# 3: per-turn `delay_s` column; `turn_config` holds the effective turn settings (the one copy)
LOG_SCHEMA_VERSION = "3"
# The h5py a log is written with (the sessions' `versions` attribute names it).
H5PY_VERSION: str = h5py.__version__

_STR = h5py.string_dtype("utf-8")


class SessionFormatError(FdevalError, ValueError):
    """A session log that does not hold what this fdeval reads (the message names the file)."""


class CorruptSession(Exception):
    """A recorded session that does not read back whole (the message says what is wrong)."""


# -- the tables' rows ------------------------------------------------------------------------------
@dataclass(frozen=True)
class Event:
    """One `events` row: session_start, turn_scheduled, turn_start, turn_end, user_yield,
    vad_onset / vad_offset, playback_flush, user_policy, session_end, session_limit, vendor:<name>."""

    case_id: str
    session_id: str
    t_s: float
    kind: str
    turn: int  # the user turn it concerns, -1 for none
    detail: str

    def played_ms(self) -> dict[str, float]:
        """item -> ms of it played, from a `playback_flush` event (see :func:`flush_played_ms`)."""
        return flush_played_ms(self.detail) if self.kind == "playback_flush" else {}


@dataclass(frozen=True)
class UserFrame:
    """One `user_frames` row: a frame sent to the model."""

    case_id: str
    session_id: str
    t_nominal_s: float
    t_sent_s: float
    n_samples: int
    turn: int  # the user turn streaming in it, -1 for the silence pump

    @property
    def pacing_error_s(self) -> float:
        return self.t_sent_s - self.t_nominal_s


@dataclass(frozen=True)
class ModelChunk:
    """One `model_chunks` row: a chunk of model audio (at the run's rate)."""

    case_id: str
    session_id: str
    arrival_s: float
    play_start_s: float
    n_samples: int


@dataclass(frozen=True)
class ModelText:
    """One `model_text` row: a piece of the model's own text stream; `play_s` is when its audio
    plays, `dropped` when a flush removed that audio."""

    case_id: str
    session_id: str
    arrival_s: float
    play_s: float
    duration_s: float  # NaN: the model gave none
    text: str
    dropped: bool


@dataclass(frozen=True)
class VadSegment:
    """One `vad_segments` row: speech found by Silero VAD on the played model channel."""

    case_id: str
    session_id: str
    start_s: float
    end_s: float


@dataclass(frozen=True)
class Flush:
    """One `flushes` row: an interruption signal; queued model audio dropped from `t_s` on."""

    case_id: str
    session_id: str
    t_s: float
    n_dropped: int


@dataclass(frozen=True)
class Turn:
    """One `turns` row: a user turn and its injection (docs/recording.md, "the turns table")."""

    case_id: str
    session_id: str
    index: int
    label: str
    turn_type: str  # take-turn | barge-in
    subtype: str
    scheduled_s: float  # when it was due
    start_s: float  # where its first sample sits in the recording (NaN: never played)
    actual_s: float  # when that sample was handed to the model
    error_s: float  # actual_s - scheduled_s: the injection timing error
    end_s: float
    cut_short: bool
    onset_s: float  # a barge-in's model onset (NaN for a take-turn)
    delay_s: float  # a barge-in's delay after that onset (NaN for a take-turn)
    wait_reason: str  # silence | timeout | onset | no_onset | tail | ...
    n_samples_played: int

    @property
    def played(self) -> bool:
        return not math.isnan(self.start_s)


# table name -> (row record, its columns on disk in order, with their HDF5 types), in the order a
# log is written (the order is part of the byte layout: keep it)
_TABLES: dict[str, tuple[type, tuple[tuple[str, Any], ...]]] = {
    "events": (Event, (("t_s", "f8"), ("kind", _STR), ("turn", "i4"), ("detail", _STR))),
    "user_frames": (
        UserFrame,
        (("t_nominal_s", "f8"), ("t_sent_s", "f8"), ("n_samples", "i4"), ("turn", "i4")),
    ),
    "model_chunks": (
        ModelChunk,
        (("arrival_s", "f8"), ("play_start_s", "f8"), ("n_samples", "i4")),
    ),
    "model_text": (
        ModelText,
        (
            ("arrival_s", "f8"),
            ("play_s", "f8"),
            ("duration_s", "f8"),
            ("text", _STR),
            ("dropped", "?"),
        ),
    ),
    "vad_segments": (VadSegment, (("start_s", "f8"), ("end_s", "f8"))),
    "flushes": (Flush, (("t_s", "f8"), ("n_dropped", "i4"))),
    "turns": (
        Turn,
        (
            ("index", "i4"),
            ("label", _STR),
            ("turn_type", _STR),
            ("subtype", _STR),
            ("scheduled_s", "f8"),
            ("start_s", "f8"),
            ("actual_s", "f8"),
            ("error_s", "f8"),
            ("end_s", "f8"),
            ("cut_short", "?"),
            ("onset_s", "f8"),
            ("delay_s", "f8"),
            ("wait_reason", _STR),
            ("n_samples_played", "i4"),
        ),
    ),
}
TABLES = tuple(_TABLES)
POLICY_RECORD = (
    "user_policy_record"  # a dataset holding one JSON string (attributes are capped at 64 KiB)
)


def columns(table: str) -> tuple[str, ...]:
    """The columns of `table` on disk, in order (a row record's fields after its two ids)."""
    return tuple(c for c, _ in _TABLES[table][1])


# -- the root attributes ---------------------------------------------------------------------------
@dataclass(frozen=True)
class Health:
    """A session's timing health (docs/architecture.md, "Realtime health"): NaN where not measured."""

    valid: bool = True
    invalid_reason: str = ""
    pacing_lag_max_s: float = math.nan
    model_lag_max_s: float = math.nan
    model_first_audio_s: float = math.nan
    model_audio_s: float = math.nan
    frames_sent: int = 0
    realtime_factor: float = math.nan

    @classmethod
    def from_attrs(cls, attrs: Mapping[str, Any]) -> Health:
        nan = math.nan
        return cls(
            bool(attrs.get("valid", True)),
            str(attrs.get("invalid_reason", "")),
            float(attrs.get("health_pacing_lag_max_s", nan)),
            float(attrs.get("health_model_lag_max_s", nan)),
            float(attrs.get("health_model_first_audio_s", nan)),
            float(attrs.get("health_model_audio_s", nan)),
            int(attrs.get("health_frames_sent", 0)),
            float(attrs.get("health_realtime_factor", nan)),
        )

    def to_attrs(self) -> dict[str, Any]:
        """The attributes as a log holds them (`valid`, `invalid_reason`, `health_*`)."""
        return {
            "valid": self.valid,
            "invalid_reason": self.invalid_reason,
            "health_pacing_lag_max_s": self.pacing_lag_max_s,
            "health_model_lag_max_s": self.model_lag_max_s,
            "health_model_first_audio_s": self.model_first_audio_s,
            "health_model_audio_s": self.model_audio_s,
            "health_frames_sent": self.frames_sent,
            "health_realtime_factor": self.realtime_factor,
        }


# the attributes every log has, held by SessionInfo's fields: field -> name on disk, in write order
_CORE = {
    "schema_version": "schema_version",
    "case_id": "case_id",
    "sample_rate_hz": "sample_rate",
    "frame_s": "frame_s",
    "clock": "clock",
    "duration_s": "duration_s",
    "n_samples": "n_samples",
}
_CORE_NAMES = frozenset(_CORE.values())


@dataclass(frozen=True)
class SessionInfo:
    """A log's root attributes: those every log has as fields, the rest (`attrs`) by their names
    on disk (docs/recording.md), JSON ones as the strings stored (:meth:`json` parses them)."""

    case_id: str
    sample_rate_hz: int
    frame_s: float  # the orchestrator's tick
    clock: str  # lockstep | realtime | imported
    duration_s: float
    n_samples: int  # frames of the WAV (each channel)
    attrs: Mapping[str, Any] = field(
        default_factory=dict
    )  # every other attribute (run, model, health, ...)
    schema_version: str = LOG_SCHEMA_VERSION

    def get(self, name: str, default: Any = None) -> Any:
        """An attribute by its name on disk (the fields' too: `sample_rate`, `case_id`)."""
        return self.all_attrs().get(name, default)

    def json(self, name: str, default: Any = None) -> Any:
        """A JSON attribute parsed (`turn_config`, `model`, `versions`, `run_identity`, `health_bounds`,
        `model_report`); `default` when absent."""
        v = self.attrs.get(name)
        if v is None:
            return default
        return json.loads(v) if isinstance(v, str) else v

    def all_attrs(self) -> dict[str, Any]:
        """Every attribute by its name on disk, as h5py alone reads them (decoded)."""
        return {**{disk: getattr(self, f) for f, disk in _CORE.items()}, **self.attrs}

    @property
    def session_id(self) -> str:
        return str(self.attrs.get("session_id", ""))

    @property
    def run_id(self) -> str:
        return str(self.attrs.get("run_id", ""))

    @property
    def model_id(self) -> str:
        return str(self.attrs.get("model_id", ""))

    @property
    def case_digest(self) -> str:
        return str(self.attrs.get("case_digest", ""))

    @property
    def end_reason(self) -> str:
        return str(self.attrs.get("end_reason", ""))

    @property
    def text_stream(self) -> str:
        """How the model's text pieces become words (`words` | `pieces`; `words` in older logs)."""
        return str(self.attrs.get("text_stream", "words"))

    @property
    def recording_attempt(self) -> int:
        """Which recording of its case this is (logs written before the count was kept: 1)."""
        try:
            return max(1, int(self.attrs.get("recording_attempt", 1)))
        except (TypeError, ValueError):
            return 1

    @property
    def valid(self) -> bool:
        return bool(self.attrs.get("valid", True))

    @property
    def invalid_reason(self) -> str:
        return str(self.attrs.get("invalid_reason", ""))

    @property
    def health(self) -> Health:
        return Health.from_attrs(self.attrs)


@dataclass(frozen=True)
class Session:
    """One session log: its attributes, every table as typed rows, and the user policy's record."""

    info: SessionInfo
    events: tuple[Event, ...] = ()
    user_frames: tuple[UserFrame, ...] = ()
    model_chunks: tuple[ModelChunk, ...] = ()
    model_text: tuple[ModelText, ...] = ()
    vad_segments: tuple[VadSegment, ...] = ()
    flushes: tuple[Flush, ...] = ()
    turns: tuple[Turn, ...] = ()
    policy_record: Mapping[str, Any] | None = (
        None  # the user policy's record (JSON), when it keeps one
    )

    @property
    def case_id(self) -> str:
        return self.info.case_id

    @property
    def session_id(self) -> str:
        return self.info.session_id

    @property
    def duration_s(self) -> float:
        return self.info.duration_s

    def as_dict(self, tables: Collection[str] = TABLES) -> dict[str, Any]:
        """The log as plain Python, as h5py alone reads it: {"attrs": ..., <table>: [row dicts by
        column], "user_policy_record": ...} (for code that keeps rows as dicts)."""
        out: dict[str, Any] = {"attrs": self.info.all_attrs()}
        for name in tables:
            get = attrgetter(*columns(name))
            out[name] = [dict(zip(columns(name), get(r))) for r in getattr(self, name)]
        if self.policy_record is not None:
            out[POLICY_RECORD] = self.policy_record
        return out


# -- writing ------------------------------------------------------------------------------------------
def _write_table(h5: h5py.File, name: str, rows: tuple) -> None:
    cls, cols = _TABLES[name]
    arr = np.empty(len(rows), dtype=np.dtype(list(cols)))
    get = attrgetter(*(c for c, _ in cols))
    for i, row in enumerate(rows):
        if type(row) is not cls:
            raise TypeError(f"{name}: a row of {type(row).__name__}, expected {cls.__name__}")
        arr[i] = get(row)
    h5.create_dataset(name, data=arr)


def write_audio(
    wav_path: str | Path, user: np.ndarray, model: np.ndarray, sample_rate_hz: int
) -> None:
    """The session's WAV, atomically: stereo 16-bit PCM, ch0 `user`, ch1 `model` (float samples in
    [-1, 1], of one length; PCM saturates instead of wrapping around, as fdeval.audio.io.write_wav)."""
    stereo = np.stack([user, model], axis=1)
    if stereo.dtype.kind != "f":
        raise TypeError(
            f"{Path(wav_path).name}: samples must be floats in [-1, 1], got {stereo.dtype}"
        )
    stereo = np.clip(stereo.astype(np.float32, copy=False), -1.0, 1.0)
    with atomic_path(wav_path) as tmp:
        sf.write(tmp, stereo, int(sample_rate_hz), subtype="PCM_16", format="WAV")


def write_session(
    session: Session, user: np.ndarray, model: np.ndarray, wav_path: str | Path, h5_path: str | Path
) -> None:
    """Write `session` with its two channels (float samples in [-1, 1], ch0 the user, ch1 the model
    as played): the WAV, then the log (each atomically; the log last marks the case as recorded).
    `session.info.n_samples` must be the shorter channel's length (the longer is cut to it)."""
    info = session.info
    n = min(len(user), len(model))
    if int(info.n_samples) != n:
        raise ValueError(
            f"{info.case_id}: n_samples {info.n_samples}, the channels hold {n} samples"
        )
    if str(info.schema_version) != LOG_SCHEMA_VERSION:
        raise ValueError(
            f"{info.case_id}: schema version {info.schema_version}, this fdeval writes {LOG_SCHEMA_VERSION}"
        )
    if clash := sorted(_CORE_NAMES & set(info.attrs)):
        raise ValueError(
            f"{info.case_id}: attribute {clash[0]!r} is a SessionInfo field, not one of its attrs"
        )
    write_audio(wav_path, user[:n], model[:n], info.sample_rate_hz)
    with atomic_path(h5_path) as tmp:
        with h5py.File(tmp, "w") as h5:
            for f, disk in _CORE.items():
                h5.attrs[disk] = n if f == "n_samples" else getattr(info, f)
            for k, v in info.attrs.items():
                h5.attrs[k] = (
                    v
                    if isinstance(v, (str, int, float))
                    else json.dumps(v, sort_keys=True, default=str)
                )
            for name in TABLES:
                _write_table(h5, name, getattr(session, name))
            if session.policy_record is not None:
                h5.create_dataset(
                    POLICY_RECORD,
                    data=json.dumps(session.policy_record, sort_keys=True),
                    dtype=_STR,
                )


# -- reading ------------------------------------------------------------------------------------------
def _decode(v: Any) -> Any:
    return v.decode("utf-8") if isinstance(v, bytes) else v


def _raw_attrs(h5: h5py.File) -> dict[str, Any]:
    return {k: _decode(v.item() if hasattr(v, "item") else v) for k, v in h5.attrs.items()}


def _info(where: str, raw: Mapping[str, Any]) -> SessionInfo:
    missing = [disk for disk in _CORE.values() if disk not in raw]
    if missing:
        raise SessionFormatError(
            f"{where}: no attribute {missing[0]!r}; not a session log this fdeval reads"
        )
    return SessionInfo(
        case_id=str(raw["case_id"]),
        sample_rate_hz=int(raw["sample_rate"]),
        frame_s=float(raw["frame_s"]),
        clock=str(raw["clock"]),
        duration_s=float(raw["duration_s"]),
        n_samples=int(raw["n_samples"]),
        attrs={k: v for k, v in raw.items() if k not in _CORE_NAMES},
        schema_version=str(raw["schema_version"]),
    )


def _read_rows(h5: h5py.File, where: str, name: str, info: SessionInfo) -> tuple:
    cls, cols = _TABLES[name]
    if name not in h5:
        raise SessionFormatError(f"{where}: no table {name!r}")
    data = h5[name][()]
    have = data.dtype.names or ()
    for c, _ in cols:
        if c not in have:
            raise SessionFormatError(
                f"{where}: table {name!r} has no column {c!r} (schema version "
                f"{info.schema_version}; this fdeval reads {LOG_SCHEMA_VERSION})"
            )
    values = []
    for c, t in cols:
        col = data[c].tolist()
        values.append([_decode(v) for v in col] if t is _STR else col)
    cid, sid = info.case_id, info.session_id
    return tuple(cls(cid, sid, *row) for row in zip(*values))


def read_info(h5_path: str | Path) -> SessionInfo:
    """The log's root attributes (no table is read)."""
    with h5py.File(h5_path, "r") as h5:
        return _info(str(h5_path), _raw_attrs(h5))


def read_session(h5_path: str | Path, tables: Collection[str] = TABLES) -> Session:
    """The whole log as typed records. `tables`: those to read (the others are left empty, e.g.
    `user_frames`, one row per frame, where a reader never looks at them)."""
    unknown = sorted(set(tables) - set(TABLES))
    if unknown:
        raise ValueError(f"no session table {unknown[0]!r} (tables: {', '.join(TABLES)})")
    where = str(h5_path)
    with h5py.File(h5_path, "r") as h5:
        info = _info(where, _raw_attrs(h5))
        rows = {name: _read_rows(h5, where, name, info) for name in TABLES if name in tables}
        record = json.loads(_decode(h5[POLICY_RECORD][()])) if POLICY_RECORD in h5 else None
    return Session(info, **rows, policy_record=record)


def check_session(h5_path: Path, wav_path: Path) -> SessionInfo:
    """The log's attributes if the log and its WAV read back whole and agree; else CorruptSession."""
    h5_path, wav_path = Path(h5_path), Path(wav_path)
    try:
        with h5py.File(h5_path, "r") as h5:
            attrs = _raw_attrs(h5)
            missing = [t for t in TABLES if t not in h5]
            if missing:
                raise CorruptSession(f"{h5_path.name}: no table {missing[0]!r}")
            for name in TABLES:
                h5[name][()]
    except CorruptSession:
        raise
    except Exception as e:  # h5py raises OSError, KeyError or ValueError for damaged files
        raise CorruptSession(
            f"{h5_path.name}: unreadable ({type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''})"
        ) from None
    for key in (
        "schema_version",
        "case_id",
        "sample_rate",
        "n_samples",
        "duration_s",
        "frame_s",
        "clock",
    ):
        if key not in attrs:
            raise CorruptSession(f"{h5_path.name}: no attribute {key!r}")
    if str(attrs["schema_version"]) != LOG_SCHEMA_VERSION:
        raise CorruptSession(
            f"{h5_path.name}: schema version {attrs['schema_version']}, this fdeval writes {LOG_SCHEMA_VERSION}"
        )
    try:
        info = sf.info(str(wav_path))
    except Exception as e:
        raise CorruptSession(
            f"{wav_path.name}: unreadable ({str(e).splitlines()[0] if str(e) else type(e).__name__})"
        ) from None
    if (
        info.channels != 2
        or info.samplerate != int(attrs["sample_rate"])
        or info.frames != int(attrs["n_samples"])
    ):
        raise CorruptSession(
            f"{wav_path.name}: {info.frames} frames x {info.channels} channels at {info.samplerate} Hz, "
            f"the log says {attrs['n_samples']} x 2 at {attrs['sample_rate']} Hz"
        )
    try:
        return _info(h5_path.name, attrs)
    except (SessionFormatError, TypeError, ValueError) as e:
        raise CorruptSession(str(e)) from None


def flush_played_ms(detail: str) -> dict[str, float]:
    """item -> ms of it played, from a `playback_flush` event's detail (`played_ms=<item>:<ms> ...`;
    empty for a model whose audio has no items)."""
    part = detail.partition("played_ms=")[2]
    return {item: float(ms) for item, ms in (x.rsplit(":", 1) for x in part.split())}
