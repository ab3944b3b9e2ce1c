"""The realtime clock's scheduling on a simulated time source: frames are due at absolute times
from the session's start, so lateness never accumulates, a stall is caught up, and no frame
leaves early. (How late frames leave on a real machine is load, measured by the bench's
`realtime` section, not bounded in a test.)"""

import asyncio
from types import SimpleNamespace

import pytest

from fdeval.orchestrator import clock as clock_mod
from fdeval.orchestrator.clock import RealtimeClock

FRAME_S = 0.032


class FakeTime:
    """Time that moves only when slept on (by the request plus an overshoot, as asyncio.sleep
    does), when yielded on, or when a frame's work or a stall spends it."""

    def __init__(self, overshoot_s: float):
        self.t, self.overshoot_s = 1000.0, overshoot_s

    def monotonic(self) -> float:
        return self.t

    async def sleep(self, delay_s: float) -> None:
        self.t += delay_s + self.overshoot_s if delay_s > 0 else 1e-5


@pytest.fixture
def fake(monkeypatch):
    t = FakeTime(overshoot_s=0.0015)
    # only the clock module's view of time: the event loop keeps the real one
    monkeypatch.setattr(clock_mod, "time", SimpleNamespace(monotonic=t.monotonic))
    monkeypatch.setattr(clock_mod, "asyncio", SimpleNamespace(sleep=t.sleep))
    return t


def run_frames(
    fake: FakeTime, n: int, work_s: float, stall_at: int = -1, stall_s: float = 0.0
) -> list[float]:
    """Each frame's lateness: wait for its time, then spend `work_s` (and `stall_s` once)."""
    clock = RealtimeClock()
    clock.start()
    late = []

    async def go():
        for k in range(n):
            await clock.wait_until(k * FRAME_S)
            late.append(clock.now() - k * FRAME_S)
            fake.t += work_s + (stall_s if k == stall_at else 0.0)

    asyncio.run(go())
    return late


def test_frames_never_leave_early_and_lateness_does_not_accumulate(fake):
    late = run_frames(fake, 1000, work_s=0.004)
    # sleeping to the frame's absolute time (less the spin), then spinning, lands on it within a
    # yield, frame after frame: a clock that slept a frame's length each time would be 5.5 s late here
    assert min(late) >= 0 and max(late) < 1e-4


def test_a_stall_is_caught_up_without_moving_the_schedule(fake):
    late = run_frames(fake, 400, work_s=0.004, stall_at=100, stall_s=0.5)
    assert max(late[:101]) < 1e-4 and late[101] >= 0.5 - FRAME_S
    # behind schedule the clock does not sleep: each frame gains FRAME_S - work_s until on time again
    back = next(k for k in range(101, 400) if late[k] < 1e-4)
    assert back <= 101 + 0.5 / (FRAME_S - 0.004) + 2
    assert all(
        a > b for a, b in zip(late[101:back], late[102 : back + 1])
    )  # steadily, never re-based
    assert max(late[back:]) < 1e-4 and min(late) >= 0
