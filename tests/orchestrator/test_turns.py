"""Turn manager logic, driven frame by frame with a scripted model-channel VAD state."""

import numpy as np
import pytest

from fdeval.orchestrator.turns import TurnConfig, TurnManager, model_speaking_at
from fdeval.types import Turn

SR = 1000
FRAME = 10


def turn(i, kind="take-turn", n=200, **kw):
    return Turn(
        case_id="c",
        index=i,
        label=f"t{i}",
        turn_type=kind,
        audio_path="x.wav",
        text="",
        words=(),
        duration_s=n / SR,
        timeout_s=kw.pop("timeout_s", 5.0),
        **kw,
    )


def drive(tm, model_speaking, limit_s=30.0, onset_at=None):
    """model_speaking(t_end) -> bool; returns the user channel. `onset_at` reports a VAD onset
    at that exact time (as Silero would, one frame after it happened) instead of the frame end."""
    out, k, speaking, silent_since = [], 0, False, 0.0
    while not tm.done and k * FRAME < limit_s * SR:
        n0 = k * FRAME
        frame, _ = tm.frame(n0, FRAME)
        out.append(frame)
        n_end = n0 + FRAME
        t = n_end / SR
        now = model_speaking(t)
        onsets = [onset_at if onset_at is not None else t] if now and not speaking else []
        if speaking and not now:
            silent_since = t
        speaking = now
        tm.observe(n_end, speaking, 0.0 if speaking else t - silent_since, onsets)
        k += 1
    return np.concatenate(out)


def test_take_turns_wait_for_answer_then_silence():
    turns = [turn(0), turn(1)]
    audio = [np.ones(200, np.float32), np.full(200, 2.0, np.float32)]
    tm = TurnManager(
        turns, audio, SR, TurnConfig(silence_s=1.5, trailing_silence_s=0.5), lambda *a: None
    )
    # model answers 3.0..5.0 s
    user = drive(tm, lambda t: 3.0 < t < 5.0)
    r0, r1 = tm.records
    assert r0.start_n == 1500 and r0.wait_reason == "silence"  # 1.5 s of initial silence
    assert r0.end_n == 1700
    assert r1.start_n == 6500 and r1.wait_reason == "silence"  # 5.0 + 1.5
    assert user[1500:1700].sum() == 200 and user[6500:6700].sum() == 400
    assert tm.end_reason == "timeout"  # no answer to the last turn: the final wait times out


def test_take_turn_times_out_without_answer():
    tm = TurnManager(
        [turn(0), turn(1, timeout_s=2.0)],
        [np.ones(100, np.float32)] * 2,
        SR,
        TurnConfig(silence_s=1.5, trailing_silence_s=0.5),
        lambda *a: None,
    )
    drive(tm, lambda t: False)
    assert tm.records[1].wait_reason == "timeout"
    assert tm.records[1].start_n == tm.records[0].end_n + 2000


@pytest.mark.parametrize("onset_s,delay_s", [(2.345, 3.0), (2.0, 0.0), (4.567, 1.234)])
def test_barge_in_is_sample_exact_after_model_onset(onset_s, delay_s):
    turns = [
        turn(0),
        turn(
            1,
            "barge-in",
            n=50,
            barge_in_after_s=delay_s,
            barge_in_handling="hold",
            subtype="backchannel",
        ),
    ]
    tm = TurnManager(
        turns,
        [np.ones(100, np.float32), np.ones(50, np.float32)],
        SR,
        TurnConfig(trailing_silence_s=0.0),
        lambda *a: None,
    )
    user = drive(tm, lambda t: onset_s <= t < onset_s + 8, onset_at=onset_s)
    rec = tm.records[1]
    expected = round((onset_s + delay_s) * SR)
    assert rec.scheduled_n == expected
    if delay_s >= FRAME / SR:
        assert rec.start_n == expected  # injected exactly on schedule
    else:
        assert rec.start_n - expected <= FRAME  # onset known one frame late: within a frame
    assert user[rec.start_n : rec.start_n + 50].sum() == 50 and user[rec.start_n - 1] == 0


def test_yield_barge_in_stops_when_model_keeps_talking():
    turns = [
        turn(0),
        turn(
            1,
            "barge-in",
            n=5000,
            barge_in_after_s=1.0,
            barge_in_handling="yield",
            subtype="interrupt",
        ),
    ]
    tm = TurnManager(
        turns,
        [np.ones(100, np.float32), np.ones(5000, np.float32)],
        SR,
        TurnConfig(trailing_silence_s=0.0, yield_after_s=2.0),
        lambda *a: None,
    )
    drive(tm, lambda t: 2.0 < t < 20.0)
    rec = tm.records[1]
    assert rec.cut_short and rec.end_n - rec.start_n == pytest.approx(2000, abs=FRAME)


def test_hold_barge_in_streams_everything():
    turns = [
        turn(0),
        turn(
            1,
            "barge-in",
            n=5000,
            barge_in_after_s=1.0,
            barge_in_handling="hold",
            subtype="interrupt",
        ),
    ]
    tm = TurnManager(
        turns,
        [np.ones(100, np.float32), np.ones(5000, np.float32)],
        SR,
        TurnConfig(trailing_silence_s=0.0),
        lambda *a: None,
    )
    drive(tm, lambda t: 2.0 < t < 20.0)
    rec = tm.records[1]
    assert not rec.cut_short and rec.end_n - rec.start_n == 5000


def test_session_limit_ends_a_stuck_session():
    tm = TurnManager(
        [turn(0)], [np.ones(10, np.float32)], SR, TurnConfig(max_session_s=3.0), lambda *a: None
    )
    drive(tm, lambda t: t > 1.0)  # the model never stops talking
    assert tm.end_reason == "max_session"


def test_fixed_tail_ends_the_session_regardless_of_the_model():
    tm = TurnManager(
        [turn(0)],
        [np.ones(100, np.float32)],
        SR,
        TurnConfig(tail_after_last_turn_s=5.0),
        lambda *a: None,
    )
    user = drive(tm, lambda t: t > 1.7)  # the model talks on and on
    assert tm.end_reason == "tail"
    assert tm.records[0].end_n == 1600 and len(user) == 1600 + 5000


@pytest.mark.parametrize(
    "t_s, speaking",
    [
        (0.9, False),
        (1.0, True),
        (2.5, True),  # before, at and inside the first stretch of speech
        (3.0 + 1.5 - 0.01, True),  # a pause shorter than silence_s: the answer is still under way
        (3.0 + 1.5, False),  # silence_s after it ended: the answer is over (the take-turn rule)
        (6.0, True),
        (20.0, False),
    ],
)
def test_model_speaking_at_uses_the_take_turn_silence(t_s, speaking):
    assert model_speaking_at([(1.0, 3.0), (5.0, 7.0)], t_s, 1.5) is speaking
    assert model_speaking_at([], t_s, 1.5) is False  # a model that never spoke
