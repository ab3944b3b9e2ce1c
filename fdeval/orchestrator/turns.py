"""The turn manager: one state machine per case that decides what the user says, frame by frame.

It follows Instruct-FD's user orchestrator (section 2.3):
- take-turn: wait until the model has answered the previous user turn and then been silent for
  `silence_s` (VAD on the played model channel), or until the turn's `timeout_s` has passed
  since the previous user turn ended; then stream the turn's audio.
- barge-in: wait for the model's speech onset after the previous user turn ended, and inject
  `barge_in_after_s` later (sample-exact). `hold` streams the whole barge-in regardless;
  `yield` stops streaming (the user cedes the floor) when the model is still speaking
  `yield_after_s` into the barge-in.
- after every user turn, `trailing_silence_s` of silence before the next wait starts; after the
  last turn, the same wait as a take-turn closes the session.
The silence pump is implicit: every frame the manager returns audio, zeros when the user is
silent. Times are kept in samples so injection is exact to the sample; the manager never reads a
clock itself, it is told the time by the frame it is asked for.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from fdeval.types import Turn

LogFn = Callable[[float, str, int, str], None]


@dataclass(frozen=True)
class TurnConfig:
    silence_s: float = 1.5
    trailing_silence_s: float = 1.0
    yield_after_s: float = 2.0
    barge_in_delay_s: float | None = None  # overrides every turn's barge_in_after_s when set
    max_session_s: float = 600.0
    # When set, the session ends this long after the last user turn ends, whatever the model
    # does (a fixed observation window, e.g. TACT's [-2, 5] s around the decision point).
    tail_after_last_turn_s: float | None = None


@dataclass
class TurnRecord:
    """What happened to one scripted user turn (written to the session log)."""

    index: int
    label: str
    turn_type: str
    subtype: str
    scheduled_n: int = -1
    start_n: int = -1
    end_n: int = -1
    cut_short: bool = False
    onset_s: float = float("nan")  # barge-in: the model onset it was timed from
    wait_reason: str = ""  # silence | timeout | onset | no_onset


@dataclass
class _Onsets:
    times_s: list[float] = field(default_factory=list)

    def first_at_or_after(self, t_s: float) -> float | None:
        for t in self.times_s:
            if t >= t_s - 1e-9:
                return t
        return None


class TurnManager:
    def __init__(self, turns: list[Turn], audio: list[np.ndarray], sample_rate: int, cfg: TurnConfig, log: LogFn):
        if len(turns) != len(audio):
            raise ValueError("one audio array per turn")
        self.turns, self.audio, self.sr, self.cfg, self._log = turns, audio, sample_rate, cfg, log
        self.records = [
            TurnRecord(t.index, t.label, t.turn_type, t.subtype or "") for t in turns
        ]
        self.i = 0  # current turn
        self.state = "wait"  # wait | armed | stream | final | done
        self.ready_n = 0  # earliest sample the current wait may end (after trailing silence)
        self.prev_start_n: int | None = None
        self.prev_end_n: int | None = None
        self.onsets = _Onsets()
        self.spoke_since_prev_end = False  # the model spoke after the last user turn ended
        self.end_reason = ""

    # -- helpers -------------------------------------------------------------------------
    def _s(self, n: int) -> float:
        return n / self.sr

    def _delay_s(self, turn: Turn) -> float:
        if self.cfg.barge_in_delay_s is not None:
            return float(self.cfg.barge_in_delay_s)
        return float(turn.barge_in_after_s if turn.barge_in_after_s is not None else 3.0)

    @property
    def done(self) -> bool:
        return self.state == "done"

    # -- per frame -----------------------------------------------------------------------
    def frame(self, n0: int, n: int) -> tuple[np.ndarray, list[tuple[int, int]]]:
        """User audio for samples [n0, n0 + n) and the turns that start inside it (index, offset)."""
        out = np.zeros(n, dtype=np.float32)
        starts: list[tuple[int, int]] = []
        if self.state == "armed":
            rec = self.records[self.i]
            if rec.start_n < n0 + n:
                self.state = "stream"
                starts.append((self.i, rec.start_n - n0))
        if self.state == "stream":
            rec, audio = self.records[self.i], self.audio[self.i]
            a = max(n0, rec.start_n)
            end = rec.start_n + len(audio)
            b = min(n0 + n, end)
            if b > a:
                out[a - n0 : b - n0] = audio[a - rec.start_n : b - rec.start_n]
            if b >= end:
                self._finish_turn(end, cut_short=False)
        return out, starts

    def observe(self, n_end: int, is_speaking: bool, silence_s: float, onsets: list[float]) -> None:
        """Update after the frame ending at sample `n_end`, given the model-channel VAD state."""
        self.onsets.times_s.extend(onsets)
        if is_speaking and self.prev_end_n is not None and n_end > self.prev_end_n:
            self.spoke_since_prev_end = True
        t_end = self._s(n_end)
        if self.state != "done" and t_end >= self.cfg.max_session_s:
            self._log(t_end, "session_limit", self.i, f"max_session_s={self.cfg.max_session_s}")
            self.state, self.end_reason = "done", "max_session"
            return
        if self.state == "stream":
            self._maybe_yield(n_end, is_speaking)
        elif self.state == "wait":
            self._wait(n_end, is_speaking, silence_s)
        elif self.state == "final":
            if self.cfg.tail_after_last_turn_s is not None:
                if self.prev_end_n is not None and self._s(n_end - self.prev_end_n) >= self.cfg.tail_after_last_turn_s - 1e-9:
                    self.state, self.end_reason = "done", "tail"
                    self._log(t_end, "session_end", -1, self.end_reason)
                return
            if self._answered_and_silent(n_end, is_speaking, silence_s) or self._timed_out(n_end, self._last_timeout()):
                self.state = "done"
                self.end_reason = "silence" if self._answered_and_silent(n_end, is_speaking, silence_s) else "timeout"
                self._log(t_end, "session_end", -1, self.end_reason)

    # -- state transitions ---------------------------------------------------------------
    def _last_timeout(self) -> float:
        return float(self.turns[-1].timeout_s) if self.turns else 10.0

    def _answered_and_silent(self, n_end: int, is_speaking: bool, silence_s: float) -> bool:
        if n_end < self.ready_n or is_speaking or silence_s < self.cfg.silence_s:
            return False
        # First turn: the model only has to be quiet. Later: it must have answered (spoken after
        # the user's last turn ended, continuing speech included) before going quiet.
        return self.prev_end_n is None or self.spoke_since_prev_end

    def _timed_out(self, n_end: int, timeout_s: float) -> bool:
        ref = self.prev_end_n if self.prev_end_n is not None else 0
        return n_end >= self.ready_n and self._s(n_end - ref) >= timeout_s

    def _wait(self, n_end: int, is_speaking: bool, silence_s: float) -> None:
        turn, rec = self.turns[self.i], self.records[self.i]
        t_end = self._s(n_end)
        if n_end < self.ready_n:
            return
        if turn.turn_type == "take-turn":
            if self._answered_and_silent(n_end, is_speaking, silence_s):
                rec.wait_reason = "silence"
            elif self._timed_out(n_end, turn.timeout_s):
                rec.wait_reason = "timeout"
            else:
                return
            rec.scheduled_n = rec.start_n = n_end
            self.state = "armed"
            self._log(t_end, "turn_scheduled", self.i, rec.wait_reason)
            return
        # barge-in: time it from the model's speech onset after the previous user turn ended
        after_s = self._s(self.prev_end_n or 0)
        onset = self.onsets.first_at_or_after(after_s)
        if onset is None and is_speaking and self.onsets.times_s:
            onset = self.onsets.times_s[-1]  # the model was already talking when the user stopped
        if onset is not None:
            rec.onset_s = onset
            rec.scheduled_n = int(round((onset + self._delay_s(turn)) * self.sr))
            rec.start_n = max(rec.scheduled_n, n_end)  # never in the past
            rec.wait_reason = "onset"
        elif self._timed_out(n_end, turn.timeout_s):
            rec.scheduled_n = rec.start_n = n_end
            rec.wait_reason = "no_onset"
        else:
            return
        self.state = "armed"
        self._log(t_end, "turn_scheduled", self.i, f"{rec.wait_reason} scheduled_s={self._s(rec.scheduled_n):.4f}")

    def _maybe_yield(self, n_end: int, is_speaking: bool) -> None:
        turn, rec = self.turns[self.i], self.records[self.i]
        if turn.turn_type != "barge-in" or turn.barge_in_handling != "yield":
            return
        if is_speaking and self._s(n_end - rec.start_n) >= self.cfg.yield_after_s:
            self._log(self._s(n_end), "user_yield", self.i, "model kept the floor; user stops")
            self._finish_turn(n_end, cut_short=True)

    def _finish_turn(self, end_n: int, cut_short: bool) -> None:
        rec = self.records[self.i]
        rec.end_n, rec.cut_short = end_n, cut_short
        self._log(self._s(end_n), "turn_end", self.i, "cut_short" if cut_short else "complete")
        self.prev_start_n, self.prev_end_n = rec.start_n, end_n
        self.spoke_since_prev_end = False
        self.ready_n = end_n + int(round(self.cfg.trailing_silence_s * self.sr))
        self.i += 1
        self.state = "wait" if self.i < len(self.turns) else "final"
