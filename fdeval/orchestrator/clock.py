"""Session clocks. The turn manager never reads the wall clock; a Clock tells it the time.

`LockstepClock` advances exactly as far as the orchestrator asks: an in-process model runs as
fast as it computes, and every time is the nominal one (deterministic). `RealtimeClock` paces
frames at wall time for network models (and for checking an in-process model at wall speed);
its `now()` is the measured time, so late frames show up as timing error in the log.
"""

from __future__ import annotations

import abc
import asyncio
import time


class Clock(abc.ABC):
    kind: str = "clock"

    @abc.abstractmethod
    def start(self) -> None:
        """Set session time 0 to now."""

    @abc.abstractmethod
    async def wait_until(self, t_s: float) -> None:
        """Return once session time `t_s` has come."""

    @abc.abstractmethod
    def now(self) -> float:
        """Current session time in seconds."""

    @abc.abstractmethod
    def arrival(self, nominal_s: float, arrival_mono: float | None) -> float:
        """Session time of a model event drained at nominal time `nominal_s`."""


class LockstepClock(Clock):
    kind = "lockstep"

    def __init__(self) -> None:
        self._t = 0.0

    def start(self) -> None:
        self._t = 0.0

    async def wait_until(self, t_s: float) -> None:
        self._t = max(self._t, t_s)

    def now(self) -> float:
        return self._t

    def arrival(self, nominal_s: float, arrival_mono: float | None) -> float:
        # Whatever the model produced for a frame is there when the frame ends.
        return nominal_s


class RealtimeClock(Clock):
    kind = "realtime"

    def __init__(self, spin_s: float = 0.002) -> None:
        # asyncio.sleep overshoots by ~1 ms; the last `spin_s` is spent yielding in a tight loop.
        self._t0 = time.monotonic()
        self._spin_s = spin_s

    def start(self) -> None:
        self._t0 = time.monotonic()

    async def wait_until(self, t_s: float) -> None:
        target = self._t0 + t_s
        delay = target - time.monotonic() - self._spin_s
        if delay > 0:
            await asyncio.sleep(delay)
        while time.monotonic() < target:
            await asyncio.sleep(0)

    def now(self) -> float:
        return time.monotonic() - self._t0

    def arrival(self, nominal_s: float, arrival_mono: float | None) -> float:
        if arrival_mono is not None:
            return arrival_mono - self._t0
        return self.now()


def make_clock(kind: str) -> Clock:
    if kind == "lockstep":
        return LockstepClock()
    if kind == "realtime":
        return RealtimeClock()
    raise ValueError(f"unknown clock {kind!r}; valid: lockstep, realtime")
