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
  last queued turn, the same wait as a take-turn (or the fixed `tail_after_last_turn_s`) is the
  closing wait. It ends the session, or, for a manager built with `ask=True`, puts it in state
  `ask`: the session asks its user policy (fdeval/orchestrator/policy.py) for more turns and
  hands them over with `add_turns` (none: the session ends as it would have).
The silence pump is implicit: every frame the manager returns audio, zeros when the user is
silent. Times are kept in samples so injection is exact to the sample; the manager never reads a
clock itself, it is told the time by the frame it is asked for.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Callable, Sequence

import numpy as np

from fdeval.orchestrator.config import DEFAULT_BARGE_IN_AFTER_S, TurnConfig
from fdeval.types import Turn

LogFn = Callable[[float, str, int, str], None]


def model_speaking_at(
    segments: Sequence[tuple[float, float]], t_s: float, silence_s: float
) -> bool:
    """Whether the model's answer was under way at `t_s` by the turn manager's own rule: inside a
    speech segment of the played model channel, or less than `silence_s` after one ended (a pause
    the take-turn wait would not yet call the end of the answer). A barge-in injected when this
    is False lands after the answer: benchmarks that score interruptions say what they do with
    it (EchoChain: docs/echochain.md, "A barge-in after the answer")."""
    return any(a - 1e-9 <= t_s < b + silence_s - 1e-9 for a, b in segments)


def barge_in_delay_s(turn: Turn, cfg: TurnConfig) -> float:
    """The delay after the model's speech onset at which barge-in `turn` is injected."""
    if cfg.barge_in_delay_s is not None:
        return float(cfg.barge_in_delay_s)
    return float(
        turn.barge_in_after_s if turn.barge_in_after_s is not None else DEFAULT_BARGE_IN_AFTER_S
    )


def effective_turn_config(cfg: TurnConfig, model_turn_silence_s: float | None) -> TurnConfig:
    """`cfg` as a session with a model whose `turn_silence_s` is given runs it: the model's own
    end-of-turn silence (a model that pauses longer inside its answers) replaces `silence_s`."""
    if model_turn_silence_s is None:
        return cfg
    return replace(cfg, silence_s=float(model_turn_silence_s))


def closing_timeout_s(turns: Sequence[Turn]) -> float:
    """How long after the last user turn the closing wait gives up on a silent answer."""
    return float(turns[-1].timeout_s) if turns else 10.0


# The length of one model turn a session is expected to wait for (sizing and scheduling only;
# `launcher.plan.model_turn_s` sets it for stage=plan).
EXPECTED_MODEL_TURN_S = 8.0


def session_length_s(
    turns: Sequence[Turn], cfg: TurnConfig, model_turn_s: float = EXPECTED_MODEL_TURN_S
) -> tuple[float, float]:
    """(expected, worst) session length for these user turns under `cfg`: every turn's audio and
    trailing silence, plus the waits this turn manager makes: the initial silence, one expected
    model turn and the completion silence after each later take-turn, the barge-in delay before
    each barge-in, and the closing wait; the worst case waits every timeout out."""
    expected = worst = 0.0
    for i, turn in enumerate(turns):
        if turn.turn_type == "barge-in":
            delay = barge_in_delay_s(turn, cfg)
            expected += delay
            worst += turn.timeout_s + delay
        elif i == 0:
            expected += cfg.silence_s
            worst += cfg.silence_s
        else:
            expected += model_turn_s + cfg.silence_s
            worst += turn.timeout_s
        expected += turn.duration_s + cfg.trailing_silence_s
        worst += turn.duration_s + cfg.trailing_silence_s
    if (
        cfg.tail_after_last_turn_s is not None
    ):  # a fixed observation window ends the session (e.g. TACT)
        return expected + cfg.tail_after_last_turn_s, worst + cfg.tail_after_last_turn_s
    return expected + model_turn_s + cfg.silence_s, worst + closing_timeout_s(turns)


@dataclass
class TurnRecord:
    """What happened to one user turn (written to the session log)."""

    index: int
    label: str
    turn_type: str
    subtype: str
    scheduled_n: int = -1
    start_n: int = -1
    end_n: int = -1
    cut_short: bool = False
    onset_s: float = float("nan")  # barge-in: the model onset it was timed from
    wait_reason: str = ""  # silence | timeout | tail | onset | no_onset
    delay_s: float = float("nan")  # barge-in: its delay after the onset (barge_in_delay_s)


@dataclass
class _Onsets:
    times_s: list[float] = field(default_factory=list)

    def first_at_or_after(self, t_s: float) -> float | None:
        for t in self.times_s:
            if t >= t_s - 1e-9:
                return t
        return None


class TurnManager:
    """`ask=False`: the closing wait ends the session. `ask=True`: it enters state `ask` (the
    caller gets more turns from its user policy and calls `add_turns`)."""

    def __init__(
        self,
        turns: Sequence[Turn],
        audio: Sequence[np.ndarray],
        sample_rate: int,
        cfg: TurnConfig,
        log: LogFn,
        ask: bool = False,
    ):
        self.sr, self.cfg, self._log, self.ask = sample_rate, cfg, log, ask
        self.turns: list[Turn] = []
        self.audio: list[np.ndarray] = []
        self.records: list[TurnRecord] = []
        self._queue(turns, audio)
        self.i = 0  # current turn
        self.state = "wait"  # wait | armed | stream | final | ask | done
        self.ask_n = -1  # ask: the sample at which the closing wait ended
        self.ask_reason = ""  # ask: what ended it (silence | timeout | tail)
        self.onsets_after_n = 0  # a barge-in is timed from a model onset at or after this sample
        self.ready_n = 0  # earliest sample the current wait may end (after trailing silence)
        self.prev_start_n: int | None = None
        self.prev_end_n: int | None = None
        self.onsets = _Onsets()
        self.spoke_since_prev_end = False  # the model spoke after the last user turn ended
        self.end_reason = ""

    # -- helpers -------------------------------------------------------------------------
    def _s(self, n: int) -> float:
        return n / self.sr

    def _queue(self, turns: Sequence[Turn], audio: Sequence[np.ndarray]) -> None:
        if len(turns) != len(audio):
            raise ValueError("one audio array per turn")
        for t, x in zip(turns, audio):
            if t.index != len(self.turns):
                raise ValueError(
                    f"turn {t.label!r} has index {t.index}; the next user turn is {len(self.turns)}"
                )
            rec = TurnRecord(t.index, t.label, t.turn_type, t.subtype or "")
            if t.turn_type == "barge-in":
                rec.delay_s = barge_in_delay_s(t, self.cfg)
            self.turns.append(t)
            self.audio.append(x)
            self.records.append(rec)

    @property
    def done(self) -> bool:
        return self.state == "done"

    def add_turns(self, turns: Sequence[Turn], audio: Sequence[np.ndarray], n: int) -> None:
        """In state `ask`: queue the user policy's next turns (known at sample `n`, at or after
        `ask_n`), or end the session with the closing wait's reason when there are none. A
        take-turn first in the batch is due where the closing wait ended and starts at `n`; a
        barge-in first in it is timed from the next model onset at or after `n`."""
        if self.state != "ask":
            raise RuntimeError(f"add_turns in state {self.state!r}")
        if not turns:
            self.state, self.end_reason = "done", self.ask_reason
            self._log(self._s(n), "session_end", -1, self.end_reason)
            return
        self._queue(turns, audio)
        self.onsets_after_n = n
        turn, rec = self.turns[self.i], self.records[self.i]
        if turn.turn_type == "take-turn":
            rec.scheduled_n, rec.start_n, rec.wait_reason = self.ask_n, n, self.ask_reason
            self.state = "armed"
            self._log(self._s(n), "turn_scheduled", self.i, rec.wait_reason)
        else:
            self.state = "wait"

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
                if (
                    self.prev_end_n is not None
                    and self._s(n_end - self.prev_end_n) >= self.cfg.tail_after_last_turn_s - 1e-9
                ):
                    self._close(n_end, "tail")
                return
            if self._answered_and_silent(n_end, is_speaking, silence_s):
                self._close(n_end, "silence")
            elif self._timed_out(n_end, closing_timeout_s(self.turns)):
                self._close(n_end, "timeout")

    # -- state transitions ---------------------------------------------------------------
    def _close(self, n_end: int, reason: str) -> None:
        """The closing wait ended: the session ends, or the user policy is asked for more."""
        if self.ask:
            self.state, self.ask_n, self.ask_reason = "ask", n_end, reason
            return
        self.state, self.end_reason = "done", reason
        self._log(self._s(n_end), "session_end", -1, reason)

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
        after_s = self._s(max(self.prev_end_n or 0, self.onsets_after_n))
        onset = self.onsets.first_at_or_after(after_s)
        if onset is None and is_speaking and self.onsets.times_s:
            onset = self.onsets.times_s[-1]  # the model was already talking when the user stopped
        if onset is not None:
            rec.onset_s = onset
            rec.scheduled_n = int(round((onset + rec.delay_s) * self.sr))
            rec.start_n = max(rec.scheduled_n, n_end)  # never in the past
            rec.wait_reason = "onset"
        elif self._timed_out(n_end, turn.timeout_s):
            rec.scheduled_n = rec.start_n = n_end
            rec.wait_reason = "no_onset"
        else:
            return
        self.state = "armed"
        self._log(
            t_end,
            "turn_scheduled",
            self.i,
            f"{rec.wait_reason} scheduled_s={self._s(rec.scheduled_n):.4f}",
        )

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
