"""Onset, duration and overlap measurement on hand-made session logs (speaks before / after / never)."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest

from fdeval.benchmarks.tact.completion import CompletionEstimator
from fdeval.benchmarks.tact.episodes import Annotations, Episode, ReplayTurn, SpeakerProfile
from fdeval.benchmarks.tact.measure import (
    MeasureError,
    completion_rows,
    fit_completion,
    measure_response,
    measure_session,
    played_focal_speech,
    psi_at,
)
from fdeval.recording import ModelText, Session, SessionInfo, Turn, VadSegment

PROFILE = SpeakerProfile(10.0, 0.2, -0.1, 0.6, 0.4, 0.8, 1.2, 3.0, 4.0, 4.5, {})


def episode(
    replay=None, focal=((-3.0, -1.2), (-1.0, 0.0)), context_s=4.0, marks=((-1.2, 0.0), (0.0,))
):
    replay = replay or (ReplayTurn("take-turn", "a.wav", -context_s, 0.0),)
    ann = Annotations(("ans",) * len(marks), (0.0,) * len(marks), ((),) * len(marks), marks)
    return Episode(
        "e",
        "test",
        "smooth_turn_taking",
        "x.wav",
        0,
        16000,
        context_s,
        replay,
        focal,
        (),
        "s",
        PROFILE,
        ann,
        {},
    )


IDS = ("e__r0", "s1")


def log(vad, turns=((1.5, 5.5),), duration=10.5, end_reason="tail"):
    """A session log (the typed records fdeval.recording reads): its turns, model speech and length."""
    nan = math.nan
    info = SessionInfo(
        "e__r0",
        16000,
        0.032,
        "lockstep",
        duration,
        round(duration * 16000),
        {"end_reason": end_reason, "session_id": IDS[1]},
    )
    return Session(
        info,
        turns=tuple(
            Turn(
                *IDS, i, f"turn{i}", "take-turn", "", a, a, a, 0.0, b, False, nan, nan, "silence", 0
            )
            for i, (a, b) in enumerate(turns)
        ),
        vad_segments=tuple(VadSegment(*IDS, a, b) for a, b in vad),
    )


def with_text(lg, pieces):
    """`lg` with the model's text pieces (play_s, text, dropped)."""
    return replace(
        lg,
        model_text=tuple(
            ModelText(*IDS, at, at, math.nan, text, dropped) for at, text, dropped in pieces
        ),
    )


def test_speaks_after_the_decision_point():
    # decision at 5.5 s of the session; the model answers at 6.3 s with two close segments
    m = measure_session(log([(6.3, 7.0), (7.2, 9.0)]), episode())
    assert m["decision_session_s"] == 5.5
    assert m["onset_s"] == pytest.approx(0.8) and m["duration_s"] == pytest.approx(2.7)
    assert not m["running_at_start"] and m["overlaps"] == [] and m["complete_window"]


def test_speaks_before_the_decision_point_inside_the_window():
    # starts 0.5 s before the focal turn ends: anticipatory, overlapping the last 0.5 s of focal speech
    m = measure_session(log([(5.0, 5.6)]), episode())
    assert m["onset_s"] == pytest.approx(-0.5) and m["duration_s"] == pytest.approx(0.6)
    assert m["overlaps"] == [
        {"onset_s": pytest.approx(-0.5), "duration_s": pytest.approx(0.5), "backchannel": True}
    ]


def test_speech_already_running_at_the_window_start_is_an_onset_at_minus_two():
    m = measure_session(log([(2.0, 4.0), (6.0, 7.0)]), episode(), merge_gap_s=0.5)
    assert m["onset_s"] == -2.0 and m["running_at_start"]
    assert m["duration_s"] == pytest.approx(0.5)  # [-2, -1.5] inside the window
    # the run overlaps focal speech [-3, -1.2] from the window start on; it lasted 2 s: competitive
    assert m["overlaps"][0] == {
        "onset_s": -2.0,
        "duration_s": pytest.approx(0.5),
        "backchannel": False,
    }
    assert len(m["overlaps"]) == 1


def test_speech_ending_before_the_window_is_not_a_response():
    m = measure_session(log([(1.0, 3.0)]), episode())
    assert m["onset_s"] is None and m["duration_s"] is None and m["overlaps"] == []


def test_never_speaks_and_speaks_too_late():
    assert measure_session(log([]), episode())["onset_s"] is None
    late = measure_session(log([(10.6, 11.0)], duration=12.0), episode())
    assert late["onset_s"] is None  # 5.1 s after the decision point: past T_h
    at_horizon = measure_session(log([(10.5, 11.0)], duration=12.0), episode())
    # an onset at T_h counts, and its duration runs on past it
    assert at_horizon["onset_s"] == pytest.approx(5.0) and at_horizon[
        "duration_s"
    ] == pytest.approx(0.5)


def test_duration_is_followed_past_the_horizon_and_runs_merge_below_the_gap():
    # the run is 0.5 to 6.5 s after the decision point: all 6 s count, not the 4.5 s up to T_h
    m = measure_session(log([(6.0, 7.0), (7.4, 12.0)], duration=13.0), episode(), merge_gap_s=0.5)
    assert m["onset_s"] == pytest.approx(0.5) and m["duration_s"] == pytest.approx(6.0)
    # ... up to the end of the recording (7.5 s here) or the length horizon, whichever is first
    long = log([(6.0, 20.0)], duration=30.0)
    assert measure_session(long, episode())["duration_s"] == pytest.approx(11.5)  # horizon 12 s
    assert measure_session(long, episode(), length_horizon_s=8.0)["duration_s"] == pytest.approx(
        7.5
    )
    cut = measure_session(log([(6.0, 20.0)], duration=13.0), episode())
    assert cut["duration_s"] == pytest.approx(
        7.0
    )  # the recording ended 7.5 s after the decision point
    split = measure_session(
        log([(6.0, 7.0), (7.6, 12.0)], duration=13.0), episode(), merge_gap_s=0.5
    )
    assert split["duration_s"] == pytest.approx(1.0)


def test_barge_in_episode_ignores_the_systems_own_floor_holding():
    ep = episode(
        replay=(
            ReplayTurn("take-turn", "a.wav", -4.0, -3.0),
            ReplayTurn("barge-in", "b.wav", -1.0, 0.0, barge_in_after_s=1.5),
        ),
        focal=((-3.9, -3.1), (-0.9, 0.0)),
    )
    # session: question 1.5-2.5, system answers 3.3-7.0 (holding the floor), cut-in played 4.8-5.8,
    # system yields at 5.3 and resumes at 6.6
    lg = log([(3.3, 5.3), (6.6, 8.0)], turns=((1.5, 2.5), (4.8, 5.8)), duration=10.8)
    m = measure_session(lg, ep)
    assert m["responses_from_s"] == pytest.approx(-1.0)
    assert m["onset_s"] == pytest.approx(0.8) and not m["running_at_start"]
    assert m["overlaps"] == [
        {"onset_s": pytest.approx(-0.9), "duration_s": pytest.approx(0.4), "backchannel": False}
    ]
    # talking straight through the cut-in is no response at all
    through = measure_session(log([(3.3, 9.0)], turns=((1.5, 2.5), (4.8, 5.8)), duration=10.8), ep)
    assert through["onset_s"] is None and through["overlaps"][0]["duration_s"] == pytest.approx(0.9)


def test_focal_speech_is_placed_where_each_piece_played():
    ep = episode(
        replay=(
            ReplayTurn("take-turn", "a.wav", -4.0, -3.0),
            ReplayTurn("barge-in", "b.wav", -1.0, 0.0, barge_in_after_s=1.5),
        ),
        focal=((-3.9, -3.1), (-0.9, 0.0)),
    )
    # piece 0 at session 1.5, piece 1 at 4.8; decision at 5.8
    assert played_focal_speech(ep, [1.5, 4.8], 5.8) == [
        pytest.approx((-4.2, -3.4)),
        pytest.approx((-0.9, 0.0)),
    ]


def test_unplayed_piece_is_an_error():
    lg = log([], turns=((1.5, math.nan),), end_reason="max_session")
    with pytest.raises(MeasureError, match="not every replay piece was played"):
        measure_session(lg, episode())
    with pytest.raises(MeasureError, match="2 user turns logged"):
        measure_session(log([], turns=((1.0, 2.0), (3.0, 4.0))), episode())


def test_truncated_session_is_flagged():
    m = measure_session(log([], duration=7.0), episode())
    assert not m["complete_window"] and m["observed_until_s"] == pytest.approx(1.5)


def test_measure_response_function_directly():
    r = measure_response([(0.2, 0.6)], [(-2.0, 0.0)], backchannel_max_s=1.0)
    assert (r.onset_s, r.duration_s, r.overlaps) == (pytest.approx(0.2), pytest.approx(0.4), ())
    none = measure_response([], [(-2.0, 0.0)])
    assert math.isnan(none.onset_s) and math.isnan(none.duration_s)


def test_psi_fitted_on_marks_is_high_at_turn_ends_and_low_mid_speech():
    eps = [
        episode(focal=((-3.0, -1.2), (-1.0, 0.0)), marks=((-1.2, 0.0), (-1.2, 0.0), (0.0,)))
        for _ in range(3)
    ]
    x, y = completion_rows(eps[0])
    assert x.shape == (y.size, 6) and y.max() == 1.0 and y.min() == 0.0
    est = fit_completion(eps)
    assert isinstance(est, CompletionEstimator)
    focal = [(-3.0, -1.2), (-1.0, 0.0)]
    at_end, mid = psi_at(est, focal, [0.0, -2.0])
    assert at_end > 0.5 > mid
    assert fit_completion([episode(marks=((), ()))]) is None
    assert np.all(psi_at(None, focal, [0.0, -1.0]) == 0.0)


def test_backchannel_by_words_when_the_model_reports_text():
    ep = episode()
    lg = log([(4.6, 5.2)])
    # no text: a 0.6 s run counts as a backchannel by its length
    assert measure_session(lg, ep)["overlaps"][0]["backchannel"]
    # the words of an abandoned reply show it was not one
    lg = with_text(
        lg, [(4.6, "Sure,", False), (4.9, "I", False), (5.1, "can", False), (5.3, "help", True)]
    )
    assert not measure_session(lg, ep)["overlaps"][0]["backchannel"]
    lg = with_text(lg, [(4.6, "mm-hmm", False)])
    assert measure_session(lg, ep)["overlaps"][0]["backchannel"]
    long = log([(3.0, 5.4)])  # 2.4 s, longer than backchannel_max_s, but only listener tokens
    long = with_text(long, [(3.0, "yeah,", False), (4.0, "right.", False)])
    assert all(o["backchannel"] for o in measure_session(long, ep)["overlaps"])
