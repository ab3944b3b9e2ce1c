"""The frame loop end to end with the real reference agent, Silero VAD and espeak-ng audio."""

import asyncio
import math

import numpy as np
import pytest
from helpers import health

from fdeval.orchestrator.clock import LockstepClock, RealtimeClock
from fdeval.orchestrator.recorder import read_session_log, write_session
from fdeval.orchestrator.session import OrchestratorConfig, run_session
from fdeval.orchestrator.turns import TurnConfig


def run(case, audio, agent, vad, clock, cfg=OrchestratorConfig(), instruction=None):
    return asyncio.run(
        run_session(case, audio, agent, cfg, clock, vad, seed=1, instruction=instruction)
    )


def test_lockstep_session_records_both_channels_and_exact_injection(
    responsive_case, agent, vad, tmp_path
):
    case, audio = responsive_case
    res = run(case, audio, agent, vad, LockstepClock())
    assert res.log.attrs["end_reason"] == "silence"
    assert len(res.user) == len(res.model) == round(res.log.duration_s * 16000)
    barge = res.log.turns[1]
    assert barge["wait_reason"] == "onset"
    assert abs(barge["error_s"]) <= res.log.frame_s  # within one frame (it is exact in lockstep)
    assert barge["scheduled_s"] == pytest.approx(barge["onset_s"] + 1.5, abs=1 / 16000)
    # the user channel holds each turn's audio exactly where the log says it started
    for row, x in zip(res.log.turns, audio):
        n = round(row["start_s"] * 16000)
        assert np.allclose(res.user[n : n + len(x)], x)
    assert np.abs(res.model).max() > 0.05 and res.log.model_text
    wav, h5 = tmp_path / "s.wav", tmp_path / "s.h5"
    write_session(res.log, res.user, res.model, wav, h5)
    back = read_session_log(h5)
    assert back["attrs"]["case_id"] == case.case_id
    assert [t["label"] for t in back["turns"]] == ["turn0", "turn1", "turn2"]
    assert {e["kind"] for e in back["events"]} >= {
        "session_start",
        "turn_start",
        "vad_onset",
        "session_end",
    }


def test_lockstep_is_deterministic(responsive_case, agent, vad):
    case, audio = responsive_case
    a = run(case, audio, agent, vad, LockstepClock())
    b = run(case, audio, agent, vad, LockstepClock())
    assert np.array_equal(a.user, b.user) and np.array_equal(a.model, b.model)
    assert a.log.turns == b.log.turns and a.log.model_text == b.log.model_text


def test_barge_in_delay_override_moves_the_injection(responsive_case, agent, vad):
    case, audio = responsive_case
    cfg = OrchestratorConfig(turns=TurnConfig(barge_in_delay_s=0.5))
    row = run(case, audio, agent, vad, LockstepClock(), cfg).log.turns[1]
    assert row["scheduled_s"] == pytest.approx(row["onset_s"] + 0.5, abs=1 / 16000)


def test_acknowledge_instruction_changes_agent_behaviour(responsive_case, agent, vad):
    case, audio = responsive_case
    plain = run(case, audio, agent, vad, LockstepClock())
    ack = run(
        case,
        audio,
        agent,
        vad,
        LockstepClock(),
        instruction=(
            "While you are speaking, if the user interrupts with a correction, acknowledge it and "
            "adjust your answer."
        ),
    )
    text = lambda r: " ".join(t[3] for t in r.log.model_text if not t[4])
    assert "as I was saying" in text(plain) and "as I was saying" not in text(ack)


@pytest.mark.slow
def test_realtime_clock_pacing_and_injection_error(responsive_case, agent, vad):
    """Wall-clock paced in-process model: frame pacing and barge-in injection errors from the log.

    How late frames leave depends on the machine's load (the bench's `realtime` section measures
    it: barge-in |error| p99, max pacing lag); what this checks holds under any load: the barge-in
    lies sample-exact at its scheduled time in the audio, and the log's error and health figures are
    those of its own frames (the clock's scheduling itself: tests/orchestrator/test_clock.py)."""
    case, audio = responsive_case
    # bounds far above any lag of a loaded machine: a session past one ends there, before its barge-in
    cfg = OrchestratorConfig(
        turns=TurnConfig(silence_s=0.8, trailing_silence_s=0.3), health=health.LENIENT
    )
    res = run(case, audio, agent, vad, RealtimeClock(), cfg)
    late = health.lateness(res.log)
    barge = res.log.turns[1]
    err = barge["error_s"]
    print(
        f"realtime: {len(late)} frames, pacing p50 {np.median(late) * 1e3:.2f} ms "
        f"p99 {np.percentile(late, 99) * 1e3:.2f} ms; "
        f"barge-in error {err * 1e3:.2f} ms"
    )
    assert (
        barge["turn_type"] == "barge-in" and barge["wait_reason"] == "onset" and not math.isnan(err)
    )
    assert (
        barge["start_s"] == barge["scheduled_s"]
    )  # armed ahead of its time: it starts on its scheduled sample
    health.check_pacing(res.log)
    # so the error is its frame's lateness (0 when on time), within the recorded pacing lag
    assert health.check_turn_error(res.log, barge) == pytest.approx(err, abs=1e-9)
    assert (
        health.check_verdict(res.log.attrs, res.log.clock)
        and res.log.attrs["end_reason"] == "silence"
    )
