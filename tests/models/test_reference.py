"""The reference agent: instruction reading and the behaviour each policy produces."""

import asyncio

import numpy as np
import pytest

from fdeval.audio.tts import silence
from fdeval.benchmarks.instructfd.instructions import SCENARIOS, render_instruction
from fdeval.models.reference import parse_policy
from fdeval.orchestrator.clock import LockstepClock
from fdeval.orchestrator.session import OrchestratorConfig, run_session
from fdeval.types import TestCase, Turn, WordTiming


@pytest.mark.parametrize(
    "scenario,policy", [(n, p) for n, s in SCENARIOS.items() for p in s.policies]
)
def test_every_catalog_instruction_is_read_as_its_policy(scenario, policy):
    assert parse_policy(render_instruction(policy, scenario)) == policy


@pytest.mark.parametrize(
    "text,policy",
    [
        (None, "default"),
        ("", "default"),
        ("Please stay quiet until I am done; never cut in.", "listen"),
        ("Give a short backchannel whenever I pause, otherwise just listen.", "backchannel"),
        ("If I say something unsafe, interrupt me at once.", "interrupt"),
        ("Hold the floor if the user only backchannels.", "continue"),
        (
            "If the user interrupts you, give them the floor and acknowledge what they said.",
            "acknowledge",
        ),
    ],
)
def test_free_text_instructions(text, policy):
    assert parse_policy(text) == policy


@pytest.fixture(scope="module")
def paused_case(tts):
    """One user turn with a 1.2 s thinking pause in the middle, then a closing turn."""
    a = tts.synthesize("So I have been thinking about where to go this summer, and honestly")
    b = tts.synthesize("I think I would rather stay home and save the money.")
    gap = silence(1.2, 16000)
    audio = np.concatenate([a.samples, gap, b.samples])
    off = a.duration_s + 1.2
    words = a.words + tuple(WordTiming(w.text, w.start_s + off, w.end_s + off) for w in b.words)
    t = Turn(
        "paused",
        0,
        "turn0",
        "take-turn",
        "x.wav",
        f"{a.text} {b.text}",
        words,
        len(audio) / 16000,
        20.0,
    )
    case = TestCase("paused", "paused", "instructfd", "Cognitive Pause", None, (t,))
    return case, [audio], a.duration_s


def _model_speech(case, audio, agent, vad, instruction):
    res = asyncio.run(
        run_session(
            case, audio, agent, OrchestratorConfig(), LockstepClock(), vad, instruction=instruction
        )
    )
    return res.log


def test_listen_waits_through_the_pause_default_does_not(paused_case, agent, vad):
    case, audio, first_part_s = paused_case
    start = 1.5  # the first take-turn starts after 1.5 s of model silence
    pause = (start + first_part_s, start + first_part_s + 1.2)
    listen = _model_speech(case, audio, agent, vad, render_instruction("listen", "Cognitive Pause"))
    default = _model_speech(case, audio, agent, vad, None)

    def spoke_in_pause(log):
        return any(a < pause[1] and b > pause[0] for a, b in log.vad_segments)

    assert not spoke_in_pause(listen) and spoke_in_pause(default)
    assert listen.vad_segments, "the listening agent still answers after the turn"


def test_backchannel_policy_says_a_short_token_in_the_pause(paused_case, agent, vad):
    case, audio, first_part_s = paused_case
    log = _model_speech(
        case, audio, agent, vad, render_instruction("backchannel", "User Filler Pause")
    )
    start = 1.5 + first_part_s
    early = [row[3] for row in log.model_text if start <= row[1] < start + 1.2]
    assert 1 <= len(early) <= 2, early
