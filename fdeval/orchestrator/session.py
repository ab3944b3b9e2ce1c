"""Run one test case against one model: the frame loop that ties clock, turns, model and playback.

Each tick of `frame_s`: the turn manager gives the user frame (its audio or silence, so the model
always hears something), the frame goes to the model at the model's rate, whatever the model
produced is placed on the played model channel (playback semantics), the newly played audio
goes through Silero VAD, and the turn manager sees the VAD state. Every send, chunk, text piece,
flush and injection is logged with its session time. The user turns come from a user policy
(policy.py): the case's scripted turns by default, or a policy that writes them from the
conversation so far; when the turn manager has none left and its closing wait ends, the policy
is asked for more (awaited before the next frame under the lockstep clock, run alongside the
silence frames under the realtime clock).

Under the realtime clock the session also checks its own timing: how far behind schedule the
user's frames left (pacing lag: a client or an in-process model too slow for wall time), and,
for a model that answers every input frame with a frame of audio (`DuplexModel.audio_per_frame`),
how much further its audio falls behind the session than the least delay it showed once it began
to answer (model lag: a server that cannot keep up; its constant delay is not counted). Past
`HealthBounds` the session is marked invalid in its log (never scored); so is a session cut at
`max_session_s`. A session is stopped as soon as it is past a bound (end reason
`behind_real_time`): the rest could not be scored either. The figures go into the log's attrs
(`health_*`, docs/recording.md).
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import time
from dataclasses import asdict, dataclass
from typing import Any, Sequence

import numpy as np

from fdeval.audio.resample import StreamResampler
from fdeval.audio.vad import SileroVAD
from fdeval.models.base import DuplexModel, DuplexSession, ModelEvent, PlayedFlush
from fdeval.orchestrator.clock import Clock
from fdeval.orchestrator.config import HealthBounds, OrchestratorConfig
from fdeval.orchestrator.playback import Playback
from fdeval.orchestrator.policy import (
    Conversation,
    ModelText,
    PlayedUserTurn,
    ScriptedPolicy,
    UserPolicy,
    UserTurn,
)
from fdeval.orchestrator.recorder import SessionLog
from fdeval.orchestrator.turns import TurnManager, TurnRecord, effective_turn_config
from fdeval.types import TestCase, Turn


@dataclass
class SessionResult:
    log: SessionLog
    user: np.ndarray
    model: np.ndarray
    wall_s: float


class _Rebuffer:
    """Cut a stream of variable-length arrays into exact frames of `n` samples."""

    def __init__(self, n: int):
        self.n, self._buf = n, np.zeros(0, dtype=np.float32)

    def push(self, x: np.ndarray) -> list[np.ndarray]:
        self._buf = np.concatenate([self._buf, x]) if len(self._buf) else x
        out = []
        while len(self._buf) >= self.n:
            out.append(self._buf[: self.n])
            self._buf = self._buf[self.n :]
        return out


async def run_session(
    case: TestCase,
    turn_audio: Sequence[np.ndarray] | None,
    model: DuplexModel,
    cfg: OrchestratorConfig,
    clock: Clock,
    vad: SileroVAD,
    seed: int = 0,
    instruction: str | None = None,
    attrs: dict[str, Any] | None = None,
    *,
    policy: UserPolicy | None = None,
) -> SessionResult:
    """Play `case` to `model` and record the session. The user side is `policy`, or by default
    the case's scripted turns with `turn_audio` (one array per turn at `cfg.sample_rate`)."""
    if policy is None:
        if turn_audio is None:
            raise ValueError("run_session: give the turns' audio or a user policy")
        policy = ScriptedPolicy(case.turns, turn_audio)
    elif turn_audio is not None:
        raise ValueError("run_session: give the turns' audio or a user policy, not both")
    sr = cfg.sample_rate
    frame_n = int(round(model.frame_s * sr))
    log = SessionLog(case.case_id, sr, frame_n / sr, clock.kind, attrs=dict(attrs or {}))
    turn_cfg = effective_turn_config(cfg.turns, model.turn_silence_s)
    text_stream = model.text_stream
    asks = _Asks(policy, case.case_id, text_stream, sr, turn_cfg.silence_s)
    first = await asks.ask(0.0)
    if not first:
        raise ValueError(
            f"case {case.case_id!r}: the user policy {policy.name!r} gave no first turn"
        )
    tm = TurnManager(
        [u.turn for u in first], [u.audio for u in first], sr, turn_cfg, log.event, ask=True
    )
    playback = Playback(sr)
    vstream = vad.stream(threshold=cfg.vad_threshold, min_silence_s=cfg.vad_min_silence_s)
    to_model = StreamResampler(sr, model.sample_rate)
    from_model = StreamResampler(model.sample_rate, sr)
    model_frames = _Rebuffer(int(round(model.frame_s * model.sample_rate)))
    user_track: list[np.ndarray] = []
    actual_start: dict[int, float] = {}
    log.attrs.update(
        {
            "turn_config": asdict(turn_cfg),
            "model_frame_s": model.frame_s,
            "model_sample_rate": model.sample_rate,
            "text_stream": text_stream,
            "health_bounds": asdict(cfg.health),
            "user_policy": policy.name,
        }
    )
    health = _Health(clock.kind == "realtime", bool(model.audio_per_frame), sr)
    oracle = bool(model.oracle_user_text)
    log.attrs["oracle_user_text"] = oracle

    def hand_over(asking: asyncio.Task, n: int) -> None:
        turns = asking.result()
        if turns:  # an empty answer (the user is done) shows as the session_end that follows
            log.event(
                n / sr,
                "user_policy",
                -1,
                f"n_turns={len(turns)} asked_s={asks.asked_s:.4f} think_s={asks.think_s:.4f}",
            )
        tm.add_turns([u.turn for u in turns], [u.audio for u in turns], n)

    asking: asyncio.Task | None = None
    reporter: DuplexSession | None = None
    wall0 = time.perf_counter()
    try:
        async with model.session(instruction, seed) as sess:
            reporter = sess
            clock.start()
            log.event(0.0, "session_start", -1, clock.kind)
            k = 0
            while not tm.done:
                n0 = k * frame_n
                t0 = n0 / sr
                await clock.wait_until(t0)
                if asking is not None and asking.done():  # realtime: the policy's answer is ready
                    hand_over(asking, n0)
                    asking = None
                    if tm.done:
                        break
                before = (tm.i, tm.state)
                frame, starts = tm.frame(n0, frame_n)
                sent_s = clock.now()
                lateness = sent_s - t0
                health.pacing(lateness)
                for idx, offset in starts:
                    # The first barge-in sample leaves with this frame: it is `lateness` behind schedule.
                    actual_start[idx] = (n0 + offset) / sr + lateness
                    log.event(actual_start[idx], "turn_start", idx, f"offset_n={offset}")
                streaming = before[0] if before[1] == "stream" or starts else -1
                log.user_frames.append((t0, sent_s, frame_n, streaming))
                user_track.append(frame)
                if oracle and streaming >= 0:
                    heard = _words_in(
                        tm.turns[streaming], tm.records[streaming].start_n, n0, frame_n, sr
                    )
                    if heard:
                        sess.hear_user_words(heard)
                for f in model_frames.push(to_model.push(frame)):
                    await sess.send(f)
                events = await sess.receive()
                n_audio, flushes = _place(
                    events, clock, t0 + frame_n / sr, playback, from_model, log
                )
                health.model_audio_n += n_audio
                health.item_stall(playback.item_stall_max_n)
                for f in flushes:  # the session hears what was played (a hosted API's truncate)
                    await sess.flushed(f)
                n_end = n0 + frame_n
                health.model(n_end)
                vad_events = await vstream.push_async(playback.render_to(n_end))
                onsets = [e.t_s for e in vad_events if e.kind == "onset"]
                for e in vad_events:
                    log.event(e.t_s, f"vad_{e.kind}", -1, "model channel")
                tm.observe(n_end, vstream.is_speaking, vstream.silence_s, onsets)
                k += 1
                if health.broken(cfg.health):
                    # the rest could not be scored either: stop now and free the model for the next case
                    log.event(n_end / sr, "session_end", -1, "behind_real_time")
                    tm.end_reason = "behind_real_time"
                    break
                if tm.state == "ask" and asking is None:
                    speech = (
                        *vstream.segments,
                        *([(vstream.last_onset_s, n_end / sr)] if vstream.is_speaking else []),
                    )
                    asking = asyncio.ensure_future(
                        asks.ask(n_end / sr, tm.turns, tm.records, log.model_text, speech)
                    )
                    if clock.kind == "lockstep":
                        await asyncio.wait(
                            [asking]
                        )  # the session clock stands still while the policy thinks
                    else:
                        await asyncio.sleep(
                            0
                        )  # one loop turn: an answer that needs no waiting is taken at once
                    if asking.done():
                        hand_over(asking, n_end)
                        asking = None
    finally:
        if asking is not None:  # the session ended (limit, health) while the policy was thinking
            asking.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await asking
    wall_s = time.perf_counter() - wall0
    report = reporter.report() if reporter is not None else {}
    if report:
        log.attrs["model_report"] = report
    for e in vstream.close():
        log.event(e.t_s, f"vad_{e.kind}", -1, "model channel (end of session)")
    n_total = k * frame_n
    log.duration_s = n_total / sr
    log.vad_segments = [(float(a), float(b)) for a, b in vstream.segments]
    log.flushes = [(f.t_s, f.n_dropped) for f in playback.flushes]
    for rec in tm.records:
        started = rec.start_n >= 0 and rec.index in actual_start
        scheduled_s = rec.scheduled_n / sr if rec.scheduled_n >= 0 else float("nan")
        actual_s = actual_start.get(rec.index, float("nan"))
        end_n = rec.end_n if rec.end_n >= 0 else (n_total if started else rec.start_n)
        log.turns.append(
            {
                "index": rec.index,
                "label": rec.label,
                "turn_type": rec.turn_type,
                "subtype": rec.subtype,
                "scheduled_s": scheduled_s,
                "start_s": rec.start_n / sr if started else float("nan"),
                "actual_s": actual_s,
                "error_s": actual_s - scheduled_s,
                "end_s": end_n / sr if started else float("nan"),
                "cut_short": rec.cut_short,
                "onset_s": rec.onset_s,
                "delay_s": rec.delay_s,
                "wait_reason": rec.wait_reason,
                "n_samples_played": max(0, end_n - rec.start_n) if started else 0,
            }
        )
    log.attrs["end_reason"] = tm.end_reason
    log.attrs["wall_s"] = wall_s
    log.attrs["user_policy_asks"] = asks.n
    log.policy_record = policy.record()
    log.attrs["user_policy_think_max_s"] = asks.think_max_s
    log.attrs.update(
        health.verdict(cfg.health, tm.end_reason, turn_cfg.max_session_s, log.duration_s, wall_s)
    )
    user = np.concatenate(user_track) if user_track else np.zeros(0, np.float32)
    return SessionResult(log, user, playback.track(n_total), wall_s)


def _words_in(turn: Turn, start_n: int, n0: int, frame_n: int, sr: int) -> list[tuple[str, float]]:
    """The words of `turn` (started at sample `start_n`) whose audio starts in [n0, n0 + frame_n)."""
    out = []
    for w in turn.words:
        at = start_n + int(round(w.start_s * sr))
        if n0 <= at < n0 + frame_n:
            out.append((w.text, at / sr))
    return out


class _Asks:
    """The session's questions to its user policy: the conversation it is shown, and think times."""

    def __init__(
        self, policy: UserPolicy, case_id: str, text_stream: str, sample_rate: int, silence_s: float
    ):
        self.policy, self.case_id, self.text_stream, self.sr = (
            policy,
            case_id,
            text_stream,
            sample_rate,
        )
        self.silence_s = silence_s
        self.n, self.asked_s, self.think_s, self.think_max_s = 0, 0.0, 0.0, 0.0

    async def ask(
        self,
        now_s: float,
        turns: Sequence[Turn] = (),
        records: Sequence[TurnRecord] = (),
        model_text: Sequence[list[Any]] = (),
        model_speech: Sequence[tuple[float, float]] = (),
    ) -> tuple[UserTurn, ...]:
        user = tuple(
            PlayedUserTurn(
                r.index,
                r.label,
                r.turn_type,
                t.text,
                r.start_n / self.sr,
                r.end_n / self.sr,
                r.cut_short,
            )
            for t, r in zip(turns, records)
            if r.end_n >= 0
        )
        # what the user has heard: pieces whose audio has started playing and was not dropped
        model = tuple(
            ModelText(row[3], row[1], row[2])
            for row in model_text
            if not row[4] and row[1] <= now_s + 1e-9
        )
        conv = Conversation(
            self.case_id,
            now_s,
            user,
            model,
            self.text_stream,
            tuple((float(a), float(b)) for a, b in model_speech),
            self.silence_s,
        )
        self.n += 1
        self.asked_s = now_s
        t0 = time.perf_counter()
        answer = tuple(await self.policy.next_turns(conv))
        self.think_s = time.perf_counter() - t0
        self.think_max_s = max(self.think_max_s, self.think_s)
        for u in answer:
            if not isinstance(u, UserTurn) or np.ndim(u.audio) != 1:
                raise TypeError(
                    f"case {self.case_id!r}: user policy {self.policy.name!r} must answer UserTurns with mono audio"
                )
        return tuple(UserTurn(u.turn, np.asarray(u.audio, dtype=np.float32)) for u in answer)


class _Health:
    """The timing figures of one session (see the module doc)."""

    def __init__(self, realtime: bool, audio_per_frame: bool, sr: int):
        self.realtime, self.audio_per_frame, self.sr = realtime, audio_per_frame, sr
        self.pacing_lag_s = 0.0
        self.model_lag_s = float("nan")
        self.model_audio_n = 0
        self.n_frames = 0
        self.first_audio_s = self.min_lag_s = float("nan")

    def pacing(self, lateness_s: float) -> None:
        self.n_frames += 1
        self.pacing_lag_s = max(self.pacing_lag_s, lateness_s)

    def model(self, n_end: int) -> None:
        # The model's own delay (first frame, codec) is a constant offset: what counts is how far
        # its audio falls behind the least delay it has shown since it began to answer.
        if not self.audio_per_frame or self.model_audio_n == 0:
            return
        lag = (n_end - self.model_audio_n) / self.sr
        if math.isnan(self.first_audio_s):
            self.first_audio_s, self.min_lag_s, self.model_lag_s = n_end / self.sr, lag, 0.0
        self.min_lag_s = min(self.min_lag_s, lag)
        self.model_lag_s = max(self.model_lag_s, lag - self.min_lag_s)

    def item_stall(self, stall_n: int) -> None:
        # A model that sends its answers as items faster than real time (a hosted API) is behind
        # when an item's audio stalls: its lag is the longest gap inside an item.
        if stall_n > 0:
            stall = stall_n / self.sr
            self.model_lag_s = (
                stall if math.isnan(self.model_lag_s) else max(self.model_lag_s, stall)
            )

    def broken(self, bounds: HealthBounds) -> bool:
        return self.realtime and (
            self.pacing_lag_s > bounds.max_pacing_lag_s or self.model_lag_s > bounds.max_model_lag_s
        )

    def verdict(
        self,
        bounds: HealthBounds,
        end_reason: str,
        max_session_s: float,
        duration_s: float,
        wall_s: float,
    ) -> dict[str, Any]:
        why = []
        if end_reason == "max_session":
            why.append(f"cut at orchestrator.max_session_s={max_session_s:g}")
        if self.realtime and self.pacing_lag_s > bounds.max_pacing_lag_s:
            why.append(
                f"user audio sent up to {self.pacing_lag_s:.2f} s late (bound {bounds.max_pacing_lag_s:g} s: "
                "the client or the model could not keep real time)"
            )
        if self.realtime and self.model_lag_s > bounds.max_model_lag_s:
            why.append(
                f"model audio {self.model_lag_s:.2f} s behind the session (bound {bounds.max_model_lag_s:g} s: "
                "the model fell behind real time)"
            )
        return {
            "health_pacing_lag_max_s": float(self.pacing_lag_s),
            "health_model_lag_max_s": float(self.model_lag_s),
            "health_model_audio_s": self.model_audio_n / self.sr,
            "health_frames_sent": self.n_frames,
            "health_model_first_audio_s": float(self.first_audio_s),
            "health_realtime_factor": wall_s / duration_s if duration_s > 0 else float("nan"),
            "valid": not why,
            "invalid_reason": "; ".join(why),
        }


def _place(
    events: list[ModelEvent],
    clock: Clock,
    nominal_s: float,
    playback: Playback,
    from_model: StreamResampler,
    log: SessionLog,
) -> tuple[int, list[PlayedFlush]]:
    """Put drained model events on the played timeline (chunks, text pieces, flushes); returns
    the number of model samples (at the session rate) that arrived, and the flushes the session
    is to be told of."""
    n = 0
    flushes: list[PlayedFlush] = []
    sr = playback.sample_rate
    for ev in events:
        arrival = clock.arrival(nominal_s, ev.arrival_mono)
        if ev.kind == "vendor":
            log.event(arrival, f"vendor:{ev.text}", -1, ev.detail)
        elif ev.kind == "audio" and ev.audio is not None:
            samples = from_model.push(np.asarray(ev.audio, dtype=np.float32))
            n += len(samples)
            if len(samples):
                chunk = playback.add(samples, arrival, ev.item)
                log.model_chunks.append((chunk.arrival_s, chunk.play_start_s, chunk.n_samples))
        elif ev.kind == "text":
            play_s = playback.next_start_s(arrival) + ev.offset_s
            dur = float("nan") if ev.duration_s is None else float(ev.duration_s)
            log.model_text.append([arrival, play_s, dur, ev.text, False])
        elif ev.kind == "interrupted":
            flush = playback.flush(arrival)
            for row in log.model_text:
                if row[1] >= flush.t_s:
                    row[4] = True  # its audio will never be played
            played = " ".join(f"{item}:{1000 * k / sr:.3f}" for item, k in flush.played_n)
            log.event(
                flush.t_s,
                "playback_flush",
                -1,
                f"n_dropped={flush.n_dropped}" + (f" played_ms={played}" if played else ""),
            )
            flushes.append(
                PlayedFlush(
                    flush.t_s, {item: k / sr for item, k in flush.played_n}, flush.n_dropped
                )
            )
    return n, flushes
