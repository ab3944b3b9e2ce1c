"""Checks of a session's timing figures that hold on any machine, loaded or idle.

Under the realtime clock how late a frame leaves depends on the machine's load, so no test bounds
it (`python -m fdeval.bench` measures it: barge-in error and pacing lag, section `realtime`).
What does not depend on load is that the log's figures agree with each other and with its
frames: the recorded pacing lag is the latest frame's lateness, a turn's error is the lateness of
the frame its first sample left in, and a session is valid exactly when its figures are within
its bounds (and it was not cut). Each check takes a log as `run_session` returns it (`res.log`)
or as `read_session_log` reads it back.
"""

from __future__ import annotations

import json
import math
from typing import Any

import numpy as np

from fdeval.orchestrator.session import HealthBounds

# Bounds far above any lag of a loaded machine, for realtime sessions whose test is about something
# else than health (a session past a bound is stopped there, invalid): in-process and as launch
# overrides. The bounds themselves: tests/test_trust.py and tests/models/test_moshi_adapter.py.
LENIENT = HealthBounds(max_pacing_lag_s=60.0, max_model_lag_s=60.0)
LENIENT_ARGS = ("orchestrator.max_pacing_lag_s=60", "orchestrator.max_model_lag_s=60")


def _parts(log: Any) -> tuple[Any, list, int]:
    """(attrs, user frames, sample rate) of a log in either form."""
    if isinstance(log, dict):
        return log["attrs"], log["user_frames"], int(log["attrs"]["sample_rate"])
    return log.attrs, log.user_frames, int(log.sample_rate)


def frames(log: Any) -> np.ndarray:
    """(nominal time, sent time, n samples) of every user frame, one row each."""
    rows = _parts(log)[1]
    if rows and isinstance(rows[0], dict):
        rows = [(r["t_nominal_s"], r["t_sent_s"], r["n_samples"]) for r in rows]
    return np.array([tuple(r[:3]) for r in rows], dtype=float).reshape(-1, 3)


def lateness(log: Any) -> np.ndarray:
    f = frames(log)
    return f[:, 1] - f[:, 0]


def bounds(attrs: dict) -> dict:
    b = attrs["health_bounds"]
    return json.loads(b) if isinstance(b, str) else dict(b)


def check_pacing(log: Any) -> float:
    """No frame left before its time, and the recorded pacing lag is the latest frame's; returns it."""
    attrs = _parts(log)[0]
    late = lateness(log)
    assert len(late) == int(attrs["health_frames_sent"]) > 0, (
        len(late),
        attrs["health_frames_sent"],
    )
    assert late.min() >= 0, (
        f"a frame left {-late.min() * 1e3:.3f} ms before its time (the clock did not wait)"
    )
    # equal, not close: the figure is the max of these very differences (a figure computed from
    # anything else, or not updated per frame, differs)
    assert attrs["health_pacing_lag_max_s"] == float(late.max()), (
        attrs["health_pacing_lag_max_s"],
        float(late.max()),
    )
    return float(late.max())


def check_turn_error(log: Any, turn: dict) -> float:
    """A started turn's error is its start's offset from schedule plus the lateness of the frame
    its first sample left in (so it is within the recorded pacing lag of its sample-exact start);
    returns the frame's lateness."""
    attrs, _, sr = _parts(log)
    f = frames(log)
    (k,) = np.flatnonzero(
        (f[:, 0] <= turn["start_s"] + 1e-9) & (turn["start_s"] + 1e-9 < f[:, 0] + f[:, 2] / sr)
    )
    late = float(f[k, 1] - f[k, 0])
    assert math.isclose(
        turn["error_s"], turn["start_s"] - turn["scheduled_s"] + late, abs_tol=1e-9
    ), (
        f"turn {turn['label']}: error {turn['error_s']:.6f} s, its start {turn['start_s'] - turn['scheduled_s']:.6f} s "
        f"after schedule in a frame that left {late:.6f} s late"
    )
    assert late <= attrs["health_pacing_lag_max_s"]
    return late


def check_verdict(attrs: Any, clock: str | None = None) -> bool:
    """`valid` says exactly whether the health figures are within the session's bounds and it was
    not cut at max_session_s; a session past a bound ended there; returns `valid`. `attrs`: a
    log's attrs (dict or h5py); `clock`: the session's clock where they do not hold it (`log.clock`)."""
    b = bounds(attrs)
    pacing, model = float(attrs["health_pacing_lag_max_s"]), float(attrs["health_model_lag_max_s"])
    realtime = (clock or attrs["clock"]) == "realtime"
    slow = realtime and pacing > b["max_pacing_lag_s"]
    behind = (
        realtime and model > b["max_model_lag_s"]
    )  # NaN (no frame-per-frame audio) is never behind
    cut = attrs["end_reason"] == "max_session"
    valid, why = bool(attrs["valid"]), str(attrs["invalid_reason"])
    assert valid == (not (slow or behind or cut)), (
        valid,
        why,
        pacing,
        model,
        b,
        attrs["end_reason"],
    )
    assert bool(why) == (not valid), why
    assert ("late" in why) == slow and ("behind the session" in why) == behind, why
    assert (attrs["end_reason"] == "behind_real_time") == (slow or behind), attrs["end_reason"]
    return valid
