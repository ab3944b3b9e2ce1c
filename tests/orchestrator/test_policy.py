"""User policies: the turn manager's `ask` state, the scripted default, and an interactive echo user
that answers the real reference agent with its own words (espeak-ng) under both clocks."""

import asyncio
import math

import numpy as np
import pytest
from helpers import health

from fdeval.audio.tts import EspeakTTS
from fdeval.models.reference import ReferenceAgent
from fdeval.orchestrator.clock import LockstepClock, RealtimeClock
from fdeval.orchestrator.policy import Conversation, ScriptedPolicy, UserPolicy, UserTurn
from fdeval.orchestrator.session import OrchestratorConfig, run_session
from fdeval.orchestrator.turns import TurnConfig, TurnManager
from fdeval.types import TestCase, Turn

SR = 1000
FRAME = 10


def turn(i, kind="take-turn", n=200, text="", words=(), **kw):
    return Turn(
        case_id="c",
        index=i,
        label=f"t{i}",
        turn_type=kind,
        audio_path="",
        text=text,
        words=words,
        duration_s=n / SR,
        timeout_s=kw.pop("timeout_s", 5.0),
        **kw,
    )


def step(tm, k, speaking, onsets=()):
    """One frame k of a scripted model channel; the silence length is read off `speaking`."""
    frame, _ = tm.frame(k * FRAME, FRAME)
    tm.observe((k + 1) * FRAME, speaking, 0.0 if speaking else 10.0, list(onsets))
    return frame


def test_closing_wait_asks_and_a_batch_continues_the_session():
    tm = TurnManager(
        [turn(0)],
        [np.ones(100, np.float32)],
        SR,
        TurnConfig(silence_s=1.5, trailing_silence_s=0.0),
        lambda *a: None,
        ask=True,
    )
    k = 0
    while (
        tm.state != "ask"
    ):  # model silent throughout: turn0 at 0.01 s, then the closing wait times out
        step(tm, k, False)
        k += 1
    assert tm.ask_reason == "timeout" and tm.ask_n == tm.records[0].end_n + 5000 and not tm.done
    asked = tm.ask_n
    # the policy answers 0.5 s later (realtime): a take-turn and the barge-in that follows it
    with pytest.raises(ValueError, match="index 5"):
        tm.add_turns([turn(5)], [np.ones(10, np.float32)], asked + 500)
    tm.add_turns(
        [
            turn(1, n=100),
            turn(
                2,
                "barge-in",
                n=50,
                barge_in_after_s=0.7,
                barge_in_handling="hold",
                subtype="interrupt",
            ),
        ],
        [np.full(100, 2.0, np.float32), np.full(50, 3.0, np.float32)],
        asked + 500,
    )
    r1, r2 = tm.records[1:]
    assert (r1.scheduled_n, r1.start_n, r1.wait_reason) == (asked, asked + 500, "timeout")
    user = []
    k = (asked + 500) // FRAME
    onset_k = k + 30  # the model talks 1.5 s from 0.2 s after turn1 ended
    while tm.state != "ask":
        user.append(
            (k, step(tm, k, onset_k <= k < onset_k + 150, [k * FRAME / SR] if k == onset_k else []))
        )
        k += 1
    assert r1.end_n == asked + 600
    assert r2.scheduled_n == onset_k * FRAME + 700 == r2.start_n and r2.delay_s == 0.7
    played = np.concatenate([f for _, f in user])
    first_k = user[0][0]
    assert (
        played[r2.start_n - first_k * FRAME :][:50].sum() == 150.0
    )  # turn2's audio where it was scheduled
    tm.add_turns([], [], k * FRAME)  # the user is done: the closing wait's reason ends the session
    assert tm.done and tm.end_reason == "silence"


def test_a_barge_in_first_in_a_batch_waits_for_the_next_onset():
    tm = TurnManager(
        [turn(0)],
        [np.ones(100, np.float32)],
        SR,
        TurnConfig(silence_s=0.5, trailing_silence_s=0.0),
        lambda *a: None,
        ask=True,
    )
    k = 0
    while tm.state != "ask":  # the model answers 0.2..1.0 s, then is silent
        step(tm, k, 20 <= k < 100, [0.2] if k == 20 else [])
        k += 1
    tm.add_turns(
        [
            turn(
                1,
                "barge-in",
                n=50,
                barge_in_after_s=0.3,
                barge_in_handling="hold",
                subtype="backchannel",
            )
        ],
        [np.ones(50, np.float32)],
        k * FRAME,
    )
    onset_k = k + 40
    while tm.records[1].start_n < 0:
        step(tm, k, k >= onset_k, [k * FRAME / SR] if k == onset_k else [])
        k += 1
    assert tm.records[1].onset_s == onset_k * FRAME / SR  # not the 0.2 s onset of the first answer
    assert tm.records[1].scheduled_n == onset_k * FRAME + 300


def test_the_default_is_the_scripted_policy(responsive_case, agent, vad):
    case, audio = responsive_case

    def run(audio=None, policy=None):
        return asyncio.run(
            run_session(
                case,
                audio,
                agent,
                OrchestratorConfig(),
                LockstepClock(),
                vad,
                seed=1,
                policy=policy,
            )
        )

    a, b = run(audio=audio), run(policy=ScriptedPolicy(case.turns, audio))
    assert np.array_equal(a.user, b.user) and np.array_equal(a.model, b.model)
    assert a.log.events == b.log.events
    assert a.log.attrs["user_policy"] == "scripted" and a.log.attrs["user_policy_asks"] == 2
    with pytest.raises(ValueError, match="not both"):
        run(audio=audio, policy=ScriptedPolicy(case.turns, audio))


class EchoUser(UserPolicy):
    """Opens with a scripted question, then says back what the model said since the user's
    previous turn (espeak-ng, synthesized off the event loop), `n_echoes` times."""

    name = "echo"

    def __init__(
        self,
        tts: EspeakTTS,
        question: str,
        n_echoes: int = 1,
        timeout_s: float = 0.5,
        clock=None,
        min_think_s: float = 0.0,
    ):
        self.tts, self.question, self.n_echoes, self.timeout_s, self.clock = (
            tts,
            question,
            n_echoes,
            timeout_s,
            clock,
        )
        self.min_think_s = min_think_s
        self.said: list[tuple[Conversation, UserTurn]] = []
        self.thought: list[
            tuple[float, float]
        ] = []  # (start, end) of each synthesis in session time

    async def next_turns(self, conversation):
        if conversation.user and len(self.said) > self.n_echoes:
            return ()
        text = (
            self.question
            if not conversation.user
            else conversation.model_text_since(conversation.user[-1].end_s)
        )
        if not text:
            return ()
        t0 = self.clock.now() if self.clock else float("nan")
        t_wall = asyncio.get_running_loop().time()
        syn = await asyncio.to_thread(self.tts.synthesize, text)
        # A floor on the think time: a fast machine's synthesis can finish inside one frame, and a
        # test that frames flow while the policy thinks needs it to span several whatever the speed.
        await asyncio.sleep(
            max(0.0, self.min_think_s - (asyncio.get_running_loop().time() - t_wall))
        )
        self.thought.append((t0, self.clock.now() if self.clock else float("nan")))
        t = Turn(
            conversation.case_id,
            conversation.next_index,
            f"echo{conversation.next_index}",
            "take-turn",
            "",
            syn.text,
            syn.words,
            syn.duration_s,
            timeout_s=self.timeout_s if conversation.user else 20.0,
        )
        self.said.append((conversation, UserTurn(t, syn.samples)))
        return (self.said[-1][1],)


@pytest.mark.parametrize("clock", ["lockstep", pytest.param("realtime", marks=pytest.mark.slow)])
def test_an_echo_user_answers_the_model_with_its_own_words(clock, vad):
    # Fast speech on both sides keeps the realtime session near 12 s.
    tts, agent = EspeakTTS(rate_wpm=330), ReferenceAgent(rate_wpm=330)
    session_clock = LockstepClock() if clock == "lockstep" else RealtimeClock()
    # realtime: the policy thinks at least ~6 frames (0.2 s), so frames must flow meanwhile however
    # fast espeak-ng is here (stop 34's CI: a 33 ms synthesis fitted inside one 32 ms frame)
    user = EchoUser(
        tts,
        "Can you help me plan my week?",
        clock=session_clock,
        min_think_s=0.0 if clock == "lockstep" else 0.2,
    )
    case = TestCase("echo", "echo", "test", "echo", None, ())
    # health bounds far above any lag of a loaded machine: this is about the policy's turns (a
    # session past a bound ends there, maybe before the echo)
    cfg = OrchestratorConfig(
        turns=TurnConfig(silence_s=0.8, trailing_silence_s=0.3), health=health.LENIENT
    )
    res = asyncio.run(run_session(case, None, agent, cfg, session_clock, vad, seed=3, policy=user))
    log = res.log
    assert [t["label"] for t in log.turns] == ["echo0", "echo1"] and log.attrs[
        "user_policy_asks"
    ] == 3
    first, echo = log.turns
    # what the model said between the two user turns, read back from the log's own text table
    heard = [
        row[3]
        for row in log.model_text
        if not row[4] and first["end_s"] <= row[1] < echo["start_s"]
    ]
    said = user.said[1][1].turn
    assert len(heard) >= 10 and said.text == " ".join(heard)
    assert echo["wait_reason"] == "silence" and echo["scheduled_s"] >= max(
        row[1] + row[2] for row in log.model_text if row[1] < echo["start_s"]
    )
    # the echo's audio is in the recording exactly where the log says it started
    n = round(echo["start_s"] * 16000)
    assert (
        np.array_equal(res.user[n : n + len(user.said[1][1].audio)], user.said[1][1].audio)
        and not res.user[n - 1]
    )
    ev = [e for e in log.events if e[1] == "user_policy"]
    assert len(ev) == 1 and f"asked_s={echo['scheduled_s']:.4f}" in ev[0][3]
    think_s = float(ev[0][3].split("think_s=")[1])
    assert think_s > 0.005  # a real synthesis in a child process
    if clock == "lockstep":  # the clock stood still while the policy thought
        assert echo["start_s"] == echo["scheduled_s"] == echo["actual_s"]
    else:  # silence frames flowed meanwhile; the echo starts on the first frame after it was ready
        late = echo["start_s"] - echo["scheduled_s"]
        waiting = [
            sent - nominal
            for nominal, sent, _, _ in log.user_frames
            if echo["scheduled_s"] <= nominal < echo["start_s"]
        ]
        lag = {round(nominal * 16000): sent - nominal for nominal, sent, _, _ in log.user_frames}
        lag_first, lag_start = (
            lag[round(echo["scheduled_s"] * 16000)],
            lag[round(echo["start_s"] * 16000)],
        )
        print(
            f"realtime echo: policy think {think_s * 1e3:.1f} ms, start {late * 1e3:.1f} ms after it was due, "
            f"{len(waiting)} frames meanwhile, pacing lag max {max(waiting, default=0) * 1e3:.2f} ms"
        )
        # The policy was asked before the first frame after the closing wait left, and its answer
        # is taken by the first frame that leaves once it is ready: in session time `late` is its
        # think time to within a frame, widened by how late those two frames left (load; 0 on
        # an idle machine, where this is think +- a frame). Awaiting the policy (the lockstep
        # way) gives late == 0 with frames held back meanwhile: `waiting` is empty.
        assert (
            think_s - log.frame_s - lag_start - 0.01
            <= late
            <= think_s + log.frame_s + lag_first + 0.01
        )
        # frames left while it thought, by the session clock the policy itself read: it ran beside the
        # frame loop (how late they left is the machine's load, in the health figures below)
        t_ask, t_answer = user.thought[1]
        assert waiting and [s for _, s, _, _ in log.user_frames if t_ask < s < t_answer]
        assert max(waiting) <= health.check_pacing(log)
        # the echo's error is the lateness of the frame it started in (its start is on the frame grid)
        assert (
            health.check_turn_error(log, echo)
            == pytest.approx(echo["error_s"] - late, abs=1e-9)
            == lag_start
        )
        assert health.check_verdict(log.attrs, log.clock)


class SilentUser(UserPolicy):
    """Asks one short question and then never answers again (its task must be cancelled)."""

    def __init__(self, first: UserTurn):
        self.first, self.cancelled = first, False

    async def next_turns(self, conversation):
        if not conversation.user:
            return (self.first,)
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            self.cancelled = True
            raise


def test_a_session_cut_while_the_policy_thinks_cancels_it(tts, agent, vad):
    syn = tts.synthesize("Hi.")
    user = SilentUser(
        UserTurn(
            Turn("q", 0, "q0", "take-turn", "", syn.text, syn.words, syn.duration_s, timeout_s=0.2),
            syn.samples,
        )
    )
    case = TestCase("q", "q", "test", "q", None, ())
    # lenient health bounds: on a loaded machine a session behind real time would end before its cut
    cfg = OrchestratorConfig(
        turns=TurnConfig(silence_s=0.3, trailing_silence_s=0.0, max_session_s=1.6),
        health=health.LENIENT,
    )
    res = asyncio.run(run_session(case, None, agent, cfg, RealtimeClock(), vad, policy=user))
    assert res.log.attrs["end_reason"] == "max_session" and user.cancelled
    assert math.isclose(res.log.duration_s, 1.6, abs_tol=res.log.frame_s)


def test_realtime_scripted_session_ends_on_the_frame_its_closing_wait_ends(tts, agent, vad):
    """The scripted policy's empty answer is taken at once: no extra frame under the realtime clock."""
    syn = tts.synthesize("Hi.")
    t = Turn("s", 0, "s0", "take-turn", "", syn.text, syn.words, syn.duration_s, timeout_s=0.3)
    case = TestCase("s", "s", "test", "s", None, (t,))
    cfg = OrchestratorConfig(
        turns=TurnConfig(silence_s=0.3, trailing_silence_s=0.0), health=health.LENIENT
    )  # as above
    log = asyncio.run(run_session(case, [syn.samples], agent, cfg, RealtimeClock(), vad)).log
    end = [e for e in log.events if e[1] == "session_end"]
    assert log.attrs["end_reason"] == "timeout" and len(end) == 1 and end[0][0] == log.duration_s
    assert end[0][0] == pytest.approx(log.turns[0]["end_s"] + 0.3, abs=log.frame_s)
