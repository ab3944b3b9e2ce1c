"""The session-log writer and reader as fdeval.orchestrator.recorder had them before
fdeval.recording owned the format (commit 288620c), kept verbatim to prove the format did not
change: tests/test_recording.py writes a session with both and compares the bytes, and reads
logs with both and compares the values. Do not edit: it is the reference."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import h5py
import numpy as np

from fdeval.audio.io import write_wav
from fdeval.files import atomic_path

_STR = h5py.string_dtype("utf-8")


def _table(h5: h5py.File, name: str, columns: list[tuple[str, Any]], rows: list) -> None:
    dtype = np.dtype([(c, t) for c, t in columns])
    arr = np.empty(len(rows), dtype=dtype)
    for i, row in enumerate(rows):
        arr[i] = tuple(row)
    h5.create_dataset(name, data=arr)


def write_session(log, user: np.ndarray, model: np.ndarray, wav_path: Path, h5_path: Path) -> None:
    n = min(len(user), len(model))
    write_wav(wav_path, np.stack([user[:n], model[:n]], axis=1), log.sample_rate)
    with atomic_path(h5_path) as tmp:
        with h5py.File(tmp, "w") as h5:
            h5.attrs["schema_version"] = "3"
            h5.attrs["case_id"] = log.case_id
            h5.attrs["sample_rate"] = log.sample_rate
            h5.attrs["frame_s"] = log.frame_s
            h5.attrs["clock"] = log.clock
            h5.attrs["duration_s"] = log.duration_s
            h5.attrs["n_samples"] = n
            for k, v in log.attrs.items():
                h5.attrs[k] = (
                    v
                    if isinstance(v, (str, int, float))
                    else json.dumps(v, sort_keys=True, default=str)
                )
            _table(
                h5,
                "events",
                [("t_s", "f8"), ("kind", _STR), ("turn", "i4"), ("detail", _STR)],
                log.events,
            )
            _table(
                h5,
                "user_frames",
                [("t_nominal_s", "f8"), ("t_sent_s", "f8"), ("n_samples", "i4"), ("turn", "i4")],
                log.user_frames,
            )
            _table(
                h5,
                "model_chunks",
                [("arrival_s", "f8"), ("play_start_s", "f8"), ("n_samples", "i4")],
                log.model_chunks,
            )
            _table(
                h5,
                "model_text",
                [
                    ("arrival_s", "f8"),
                    ("play_s", "f8"),
                    ("duration_s", "f8"),
                    ("text", _STR),
                    ("dropped", "?"),
                ],
                log.model_text,
            )
            _table(h5, "vad_segments", [("start_s", "f8"), ("end_s", "f8")], log.vad_segments)
            _table(h5, "flushes", [("t_s", "f8"), ("n_dropped", "i4")], log.flushes)
            turn_cols = [
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
            ]
            _table(h5, "turns", turn_cols, [tuple(t[c] for c, _ in turn_cols) for t in log.turns])
            if (
                log.policy_record is not None
            ):  # a dataset, not an attribute: attributes are capped at 64 KiB
                h5.create_dataset(
                    "user_policy_record",
                    data=json.dumps(log.policy_record, sort_keys=True),
                    dtype=_STR,
                )


def _decode(v: Any) -> Any:
    return v.decode("utf-8") if isinstance(v, bytes) else v


def read_table(h5: h5py.File, name: str) -> list[dict[str, Any]]:
    """Rows of one log table as dicts (strings decoded)."""
    data = h5[name][()]
    return [
        {k: _decode(row[k].item() if hasattr(row[k], "item") else row[k]) for k in data.dtype.names}
        for row in data
    ]


def read_session_log(h5_path: Path) -> dict[str, Any]:
    """The whole log as plain Python: attrs plus every table."""
    with h5py.File(h5_path, "r") as h5:
        out: dict[str, Any] = {
            "attrs": {
                k: _decode(v.item() if hasattr(v, "item") else v) for k, v in h5.attrs.items()
            }
        }
        for name in h5.keys():
            if name == "user_policy_record":
                out[name] = json.loads(_decode(h5[name][()]))
            else:
                out[name] = read_table(h5, name)
    return out
