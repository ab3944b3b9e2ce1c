"""Per-case recording: a stereo WAV (ch0 user, ch1 model) and an HDF5 session log.

The HDF5 layout is documented in docs/recording.md and readable with h5py alone. Both files are
written atomically; the log is written last, so its presence marks the case as run, and
`check_session` tells whether a pair on disk reads back whole (a resumed run redoes one that
does not).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import h5py
import numpy as np
import soundfile as sf

from fdeval.audio.io import write_wav
from fdeval.files import atomic_path

# 3: per-turn `delay_s` column; `turn_config` holds the effective turn settings (the one copy)
LOG_SCHEMA_VERSION = "3"
TABLES = ("events", "user_frames", "model_chunks", "model_text", "vad_segments", "flushes", "turns")


@dataclass
class SessionLog:
    """Everything observed in one session, on the session clock (seconds)."""

    case_id: str
    sample_rate: int
    frame_s: float
    clock: str
    events: list[tuple[float, str, int, str]] = field(default_factory=list)
    user_frames: list[tuple[float, float, int, int]] = field(default_factory=list)  # nominal, sent, n, turn
    model_chunks: list[tuple[float, float, int]] = field(default_factory=list)  # arrival, play start, n
    model_text: list[list[Any]] = field(default_factory=list)  # arrival, play, duration, text, dropped
    vad_segments: list[tuple[float, float]] = field(default_factory=list)
    flushes: list[tuple[float, int]] = field(default_factory=list)  # t, n_dropped
    turns: list[dict[str, Any]] = field(default_factory=list)
    attrs: dict[str, Any] = field(default_factory=dict)
    duration_s: float = 0.0
    policy_record: dict[str, Any] | None = None  # the user policy's record (UserPolicy.record), JSON


    def event(self, t_s: float, kind: str, turn: int = -1, detail: str = "") -> None:
        self.events.append((float(t_s), kind, int(turn), detail))


_STR = h5py.string_dtype("utf-8")


def _table(h5: h5py.File, name: str, columns: list[tuple[str, Any]], rows: list) -> None:
    dtype = np.dtype([(c, t) for c, t in columns])
    arr = np.empty(len(rows), dtype=dtype)
    for i, row in enumerate(rows):
        arr[i] = tuple(row)
    h5.create_dataset(name, data=arr)


def write_session(log: SessionLog, user: np.ndarray, model: np.ndarray, wav_path: Path, h5_path: Path) -> None:
    n = min(len(user), len(model))
    write_wav(wav_path, np.stack([user[:n], model[:n]], axis=1), log.sample_rate)
    with atomic_path(h5_path) as tmp:
        with h5py.File(tmp, "w") as h5:
            h5.attrs["schema_version"] = LOG_SCHEMA_VERSION
            h5.attrs["case_id"] = log.case_id
            h5.attrs["sample_rate"] = log.sample_rate
            h5.attrs["frame_s"] = log.frame_s
            h5.attrs["clock"] = log.clock
            h5.attrs["duration_s"] = log.duration_s
            h5.attrs["n_samples"] = n
            for k, v in log.attrs.items():
                h5.attrs[k] = v if isinstance(v, (str, int, float)) else json.dumps(v, sort_keys=True, default=str)
            _table(h5, "events", [("t_s", "f8"), ("kind", _STR), ("turn", "i4"), ("detail", _STR)], log.events)
            _table(h5, "user_frames", [("t_nominal_s", "f8"), ("t_sent_s", "f8"), ("n_samples", "i4"), ("turn", "i4")], log.user_frames)
            _table(h5, "model_chunks", [("arrival_s", "f8"), ("play_start_s", "f8"), ("n_samples", "i4")], log.model_chunks)
            _table(
                h5,
                "model_text",
                [("arrival_s", "f8"), ("play_s", "f8"), ("duration_s", "f8"), ("text", _STR), ("dropped", "?")],
                log.model_text,
            )
            _table(h5, "vad_segments", [("start_s", "f8"), ("end_s", "f8")], log.vad_segments)
            _table(h5, "flushes", [("t_s", "f8"), ("n_dropped", "i4")], log.flushes)
            turn_cols = [
                ("index", "i4"), ("label", _STR), ("turn_type", _STR), ("subtype", _STR),
                ("scheduled_s", "f8"), ("start_s", "f8"), ("actual_s", "f8"), ("error_s", "f8"), ("end_s", "f8"),
                ("cut_short", "?"), ("onset_s", "f8"), ("delay_s", "f8"), ("wait_reason", _STR), ("n_samples_played", "i4"),
            ]
            _table(h5, "turns", turn_cols, [tuple(t[c] for c, _ in turn_cols) for t in log.turns])
            if log.policy_record is not None:  # a dataset, not an attribute: attributes are capped at 64 KiB
                h5.create_dataset("user_policy_record", data=json.dumps(log.policy_record, sort_keys=True), dtype=_STR)


def flush_played_ms(detail: str) -> dict[str, float]:
    """item -> ms of it played, from a `playback_flush` event's detail (`played_ms=<item>:<ms> ...`;
    empty for a model whose audio has no items)."""
    part = detail.partition("played_ms=")[2]
    return {item: float(ms) for item, ms in (x.rsplit(":", 1) for x in part.split())}


def _decode(v: Any) -> Any:
    return v.decode("utf-8") if isinstance(v, bytes) else v


def read_table(h5: h5py.File, name: str) -> list[dict[str, Any]]:
    """Rows of one log table as dicts (strings decoded)."""
    data = h5[name][()]
    return [{k: _decode(row[k].item() if hasattr(row[k], "item") else row[k]) for k in data.dtype.names} for row in data]


def read_session_log(h5_path: Path) -> dict[str, Any]:
    """The whole log as plain Python: attrs plus every table."""
    with h5py.File(h5_path, "r") as h5:
        out: dict[str, Any] = {"attrs": {k: _decode(v.item() if hasattr(v, "item") else v) for k, v in h5.attrs.items()}}
        for name in h5.keys():
            if name == "user_policy_record":
                out[name] = json.loads(_decode(h5[name][()]))
            else:
                out[name] = read_table(h5, name)
    return out


class CorruptSession(Exception):
    """A recorded session that does not read back whole (the message says what is wrong)."""


def check_session(h5_path: Path, wav_path: Path) -> dict[str, Any]:
    """The log's attrs if the log and its WAV read back whole and agree; else CorruptSession."""
    try:
        with h5py.File(h5_path, "r") as h5:
            attrs = {k: _decode(v.item() if hasattr(v, "item") else v) for k, v in h5.attrs.items()}
            missing = [t for t in TABLES if t not in h5]
            if missing:
                raise CorruptSession(f"{h5_path.name}: no table {missing[0]!r}")
            for name in TABLES:
                h5[name][()]
    except CorruptSession:
        raise
    except Exception as e:  # h5py raises OSError, KeyError or ValueError for damaged files
        raise CorruptSession(f"{h5_path.name}: unreadable ({type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''})") from None
    for key in ("schema_version", "case_id", "sample_rate", "n_samples", "duration_s"):
        if key not in attrs:
            raise CorruptSession(f"{h5_path.name}: no attribute {key!r}")
    if str(attrs["schema_version"]) != LOG_SCHEMA_VERSION:
        raise CorruptSession(f"{h5_path.name}: schema version {attrs['schema_version']}, this fdeval writes {LOG_SCHEMA_VERSION}")
    try:
        info = sf.info(str(wav_path))
    except Exception as e:
        raise CorruptSession(f"{wav_path.name}: unreadable ({str(e).splitlines()[0] if str(e) else type(e).__name__})") from None
    if info.channels != 2 or info.samplerate != int(attrs["sample_rate"]) or info.frames != int(attrs["n_samples"]):
        raise CorruptSession(f"{wav_path.name}: {info.frames} frames x {info.channels} channels at {info.samplerate} Hz, "
                             f"the log says {attrs['n_samples']} x 2 at {attrs['sample_rate']} Hz")
    return attrs
