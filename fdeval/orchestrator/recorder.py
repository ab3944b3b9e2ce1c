"""Per-case recording: what a session observed (`SessionLog`), written as a stereo WAV (ch0 user,
ch1 model) and an HDF5 session log through `fdeval.recording`, the one owner of that format
(docs/recording.md: its layout, and the typed records it reads back).

`read_session_log`, `check_session` (both in their old plain-dict shapes), `CorruptSession`,
`LOG_SCHEMA_VERSION`, `TABLES` and `flush_played_ms` stay here for code written before
fdeval.recording (tests, scripts): fdeval's own modules read sessions with fdeval.recording.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from fdeval import recording
from fdeval.recording import LOG_SCHEMA_VERSION, TABLES, CorruptSession, flush_played_ms

__all__ = [
    "LOG_SCHEMA_VERSION",
    "TABLES",
    "CorruptSession",
    "SessionLog",
    "check_session",
    "flush_played_ms",
    "read_session_log",
    "write_session",
]


@dataclass
class SessionLog:
    """Everything observed in one session, on the session clock (seconds)."""

    case_id: str
    sample_rate: int
    frame_s: float
    clock: str
    events: list[tuple[float, str, int, str]] = field(default_factory=list)
    user_frames: list[tuple[float, float, int, int]] = field(
        default_factory=list
    )  # nominal, sent, n, turn
    model_chunks: list[tuple[float, float, int]] = field(
        default_factory=list
    )  # arrival, play start, n
    model_text: list[list[Any]] = field(
        default_factory=list
    )  # arrival, play, duration, text, dropped
    vad_segments: list[tuple[float, float]] = field(default_factory=list)
    flushes: list[tuple[float, int]] = field(default_factory=list)  # t, n_dropped
    turns: list[dict[str, Any]] = field(default_factory=list)
    attrs: dict[str, Any] = field(default_factory=dict)
    duration_s: float = 0.0
    policy_record: dict[str, Any] | None = (
        None  # the user policy's record (UserPolicy.record), JSON
    )

    def event(self, t_s: float, kind: str, turn: int = -1, detail: str = "") -> None:
        self.events.append((float(t_s), kind, int(turn), detail))

    def to_session(self, n_samples: int) -> recording.Session:
        """This log as the typed record `fdeval.recording` writes; `n_samples`: the WAV's frames."""
        cid, sid = self.case_id, str(self.attrs.get("session_id", ""))
        info = recording.SessionInfo(
            case_id=self.case_id,
            sample_rate_hz=self.sample_rate,
            frame_s=self.frame_s,
            clock=self.clock,
            duration_s=self.duration_s,
            n_samples=n_samples,
            attrs=dict(self.attrs),
        )
        turn_cols = recording.columns("turns")
        return recording.Session(
            info,
            events=tuple(recording.Event(cid, sid, *r) for r in self.events),
            user_frames=tuple(recording.UserFrame(cid, sid, *r) for r in self.user_frames),
            model_chunks=tuple(recording.ModelChunk(cid, sid, *r) for r in self.model_chunks),
            model_text=tuple(recording.ModelText(cid, sid, *r) for r in self.model_text),
            vad_segments=tuple(recording.VadSegment(cid, sid, *r) for r in self.vad_segments),
            flushes=tuple(recording.Flush(cid, sid, *r) for r in self.flushes),
            turns=tuple(
                recording.Turn(cid, sid, **{c: t[c] for c in turn_cols}) for t in self.turns
            ),
            policy_record=self.policy_record,
        )


def write_session(
    log: SessionLog, user: np.ndarray, model: np.ndarray, wav_path: Path, h5_path: Path
) -> None:
    """Write the session's WAV and log (`fdeval.recording.write_session`)."""
    recording.write_session(
        log.to_session(min(len(user), len(model))), user, model, wav_path, h5_path
    )


def read_session_log(h5_path: Path) -> dict[str, Any]:
    """The whole log as plain Python (attrs plus every table as row dicts): `fdeval.recording.
    read_session(h5_path).as_dict()`; new code reads the typed records."""
    return recording.read_session(h5_path).as_dict()


def check_session(h5_path: Path, wav_path: Path) -> dict[str, Any]:
    """The log's attrs (a dict) if the log and its WAV read back whole and agree; else
    CorruptSession (`fdeval.recording.check_session`, which returns them typed)."""
    return recording.check_session(h5_path, wav_path).all_attrs()
