"""The decision-point finder on synthetic conversations with planted points: it finds every
planted point and no other. Conversations are built from blocks, each planting (or, on purpose,
not planting) one structure, apart by more than the horizon so that no block sees another; the
edges of every rule (0.6 s pause, 0.5 s overlap, context and horizon bounds, tokens, third
parties) are checked one by one; and the espeak-ng conversation's word times give its plan."""

from __future__ import annotations

import random

import pytest
from helpers.tact_corpus import planned_conversation

from fdeval.benchmarks.tact.corpus.finder import (
    BACKCHANNEL,
    INTERRUPTION,
    PAUSE,
    SMOOTH,
    FinderSettings,
    find_decision_points,
    point_id,
)
from fdeval.errors import ConfigError

BLOCK_GAP_S = 6.5  # silence between blocks: more than the 5 s horizon
PREAMBLE = ([(2.8, 4.8)], [(0.5, 2.5)])  # both speakers talk once, too early for a point


def _block(kind: str, f: int, s: float, rng: random.Random):
    """(segments of channel 0, of channel 1, expected points, end) of one block starting at `s`
    with focal channel `f`; expected points are (channel, decision_s, category)."""
    segs: list[list[tuple[float, float]]] = [[], []]
    o = 1 - f
    u = lambda lo, hi: rng.uniform(lo, hi)  # noqa: E731
    L1 = u(1.5, 3.0)
    exp: list[tuple[int, float, str]] = []
    if kind in ("pause", "short_pause", "long_pause"):
        p = {"pause": u(0.65, 4.5), "short_pause": u(0.25, 0.55), "long_pause": u(5.2, 6.0)}[kind]
        segs[f] += [(s, s + L1), (s + L1 + p, s + L1 + p + u(1.0, 2.0))]
        exp += [(f, s + L1, PAUSE)] if kind == "pause" else []
    elif kind == "bck_overlap":  # the token starts before the focal speaker stops
        back, dur, resume = u(0.2, 0.5), u(0.2, 0.5), u(0.4, 0.55)
        segs[f] += [(s, s + L1), (s + L1 + resume, s + L1 + resume + u(1.0, 2.0))]
        segs[o] += [(s + L1 - back, s + L1 - back + dur)]
        exp += [(f, s + L1, BACKCHANNEL)]
    elif kind == "bck_gap":  # the token falls in the focal speaker's pause
        segs[f] += [(s, s + L1), (s + L1 + 1.0, s + L1 + 2.5)]
        segs[o] += [(s + L1 + 0.2, s + L1 + 0.5)]
        exp += [(f, s + L1, BACKCHANNEL)]
    elif kind == "smooth":
        g, L2 = u(-0.45, 2.0), u(1.2, 2.5)
        segs[f] += [(s, s + L1)]
        segs[o] += [(s + L1 + g, s + L1 + g + L2)]
        exp += [(f, s + L1, SMOOTH)]
        if g < 0:  # the other started inside the focal turn: a cut-in, from their side
            exp += [(o, s + L1 + g + L2, INTERRUPTION)]
    elif kind == "overlap_competitive":  # more than 0.5 s of overlap: no smooth transfer
        x, L2 = u(0.55, 1.2), u(1.3, 2.0)
        segs[f] += [(s, s + L1)]
        segs[o] += [(s + L1 - x, s + L1 - x + L2)]
        exp += [(o, s + L1 - x + L2, INTERRUPTION)]
    elif kind == "interrupt":
        L0 = u(2.5, 4.0)
        c = u(0.5, L0 - 0.6)
        L2 = u(1.2, 2.5)
        segs[o] += [(s, s + L0)]
        segs[f] += [(s + c, s + c + L2)]
        exp += [(f, s + c + L2, INTERRUPTION)]
    elif (
        kind == "focal_token"
    ):  # the focal speaker's "yeah" inside the other's turn: nobody's point
        segs[o] += [(s, s + 3.5)]
        segs[f] += [(s + 1.0, s + 1.4)]
    elif kind == "answer_short":  # a one-word answer is a turn, not a listener token
        segs[f] += [(s, s + L1)]
        segs[o] += [(s + L1 + 0.3, s + L1 + 0.9)]
        exp += [(f, s + L1, SMOOTH)]
    else:
        raise ValueError(kind)
    end = max(b for ch in segs for _, b in ch)
    return segs, exp, end


KINDS = (
    "pause",
    "short_pause",
    "long_pause",
    "bck_overlap",
    "bck_gap",
    "smooth",
    "overlap_competitive",
    "interrupt",
    "focal_token",
    "answer_short",
)


def _conversation(seed: int, n_blocks: int = 24):
    rng = random.Random(seed)
    segs = [list(PREAMBLE[0]), list(PREAMBLE[1])]
    expected: list[tuple[int, float, str]] = []
    s = 14.0
    for k in range(n_blocks):
        kind = KINDS[k % len(KINDS)] if k < len(KINDS) else rng.choice(KINDS)
        b, exp, end = _block(kind, rng.randrange(2), s, rng)
        segs[0] += b[0]
        segs[1] += b[1]
        expected += exp
        s = end + BLOCK_GAP_S
    duration = s  # the last block's end plus more than the horizon
    return segs, sorted(expected, key=lambda p: (p[1], p[0])), duration


def _found(points) -> list[tuple[int, float, str]]:
    return [(p.focal_channel, p.decision_s, p.category) for p in points]


@pytest.mark.parametrize("seed", range(6))
def test_blocks_every_planted_point_and_no_other(seed):
    segs, expected, duration = _conversation(seed)
    found = _found(find_decision_points("conv", segs, duration))
    assert [(c, round(t, 9), k) for c, t, k in found] == [
        (c, round(t, 9), k) for c, t, k in expected
    ]
    assert {k for _, _, k in expected} == {PAUSE, BACKCHANNEL, SMOOTH, INTERRUPTION}


def test_points_carry_ids_context_and_interruption_timing():
    segs, _, duration = _conversation(0)
    points = find_decision_points("conv", segs, duration)
    assert len({p.point_id for p in points}) == len(points)
    for p in points:
        assert (
            p.point_id == point_id("conv", p.focal_channel, p.decision_s)
            and p.conversation_id == "conv"
        )
        assert (
            p.decision_s - p.context_s >= 0 and p.context_s >= 8.0 and p.turn_start_s < p.decision_s
        )
        if p.category == INTERRUPTION:
            # the replay's take-turn ends with the focal speaker's prompt, inside the context, before the cut-in
            assert -p.context_s < p.prompt_end_s <= p.cut_in_start_s < 0
            assert p.cut_in_start_s == pytest.approx(p.turn_start_s - p.decision_s)
        else:
            assert p.prompt_end_s is None and p.context_s == 8.0


def _one(F, O, duration=40.0, **kw):
    return _found(find_decision_points("c", [F, O], duration, **kw))


HIST = [(0.5, 2.5)]  # the other's earlier turn (history); focal turns start from 14 s on


@pytest.mark.parametrize(
    "pause, found", [(0.6, True), (0.5999, False), (5.0, True), (5.0001, False)]
)
def test_pause_edges(pause, found):
    pts = _one([(14.0, 16.0), (16.0 + pause, 18.0 + pause)], HIST)
    assert pts == ([(0, 16.0, PAUSE)] if found else [])


@pytest.mark.parametrize(
    "onset, found", [(-0.5, True), (-0.5001, False), (5.0, True), (5.0001, False)]
)
def test_smooth_overlap_and_horizon_edges(onset, found):
    pts = [p for p in _one([(14.0, 16.0)], HIST + [(16.0 + onset, 18.5 + onset)]) if p[0] == 0]
    assert pts == ([(0, 16.0, SMOOTH)] if found else [])


@pytest.mark.parametrize("end, found", [(8.0, True), (7.999, False)])
def test_context_must_lie_inside_the_recording(end, found):
    assert _one([(end - 1.5, end)], [(0.2, end - 1.7), (end + 0.3, end + 2.0)]) == (
        [(0, end, SMOOTH)] if found else []
    )


@pytest.mark.parametrize("duration, found", [(21.0, True), (20.999, False)])
def test_horizon_must_lie_inside_the_recording(duration, found):
    assert _one([(14.0, 16.0)], HIST + [(16.3, 18.0)], duration=duration) == (
        [(0, 16.0, SMOOTH)] if found else []
    )


def test_no_point_before_the_other_has_taken_a_turn():
    # the other only said "mm" inside the focal speaker's talk: no exchange yet, so no point
    assert _one([(9.0, 12.0), (13.0, 14.0)], [(11.0, 11.3)]) == []
    assert _one([(9.0, 12.0), (12.5, 14.0)], HIST + [(11.0, 11.3)]) == [(0, 12.0, BACKCHANNEL)]


def test_a_silence_the_other_leaves_alone_is_a_pause_even_after_a_token():
    # rule order: a listener token before a >= 0.6 s silence the other leaves alone -> pause handling
    assert _one([(14.0, 16.0), (16.8, 18.0)], HIST + [(15.0, 15.3)]) == [(0, 16.0, PAUSE)]


def test_an_interruption_needs_a_prompt_to_replay():
    # the focal speaker's only speech is the cut-in: it is no point of any category
    assert _one([(15.0, 17.0)], [(12.0, 18.0)]) == []
    # with an earlier focal turn the context widens to hold it
    pts = find_decision_points("c", [[(1.0, 2.0), (15.0, 17.0)], [(3.0, 18.0)]], 40.0)
    (p,) = [p for p in pts if p.focal_channel == 0]
    assert (
        p.category == INTERRUPTION
        and p.context_s == pytest.approx(16.0)
        and p.prompt_end_s == pytest.approx(-15.0)
    )


def test_third_party_speech_drops_the_points_it_touches():
    F, O = [(14.0, 16.0)], HIST + [(16.3, 18.0)]
    assert _one(F, O, others_s=[(21.5, 22.0)]) == [(0, 16.0, SMOOTH)]  # after the horizon (16 + 5)
    assert _one(F, O, others_s=[(20.5, 21.5)]) == []  # inside it
    assert _one(F, O, others_s=[(13.0, 14.5)]) == []  # during the focal turn
    assert _one(F, O, others_s=[(10.0, 13.9)]) == [(0, 16.0, SMOOTH)]  # before it


def test_words_join_into_units_across_short_gaps():
    # word gaps under 0.2 s are inside a unit: the pause is measured from the last word
    F = [(14.0, 14.5), (14.6, 15.0), (15.15, 16.0), (16.8, 17.5)]
    assert _one(F, HIST) == [(0, 16.0, PAUSE)]
    assert _one(F, HIST, settings=FinderSettings(join_gap_s=0.1)) == [(0, 16.0, PAUSE)]


@pytest.mark.parametrize(
    "kw, message",
    [
        ({"context_s": 1.0}, "must be at least the pre-horizon"),
        ({"horizon_s": 0}, "horizon_s must be a number > 0"),
        ({"pause_min_s": float("nan")}, "pause_min_s must be a number > 0"),
        ({"smooth_max_overlap_s": -1}, "smooth_max_overlap_s must be a number >= 0"),
    ],
)
def test_bad_settings_are_one_line(kw, message):
    with pytest.raises(ConfigError, match=message):
        FinderSettings(**kw)


def test_espeak_conversation_word_times_give_exactly_the_plan():
    p = planned_conversation()
    speech = [[(a, b) for _, a, b in p.words(ch)] for ch in (0, 1)]
    found = _found(find_decision_points("call", speech, p.duration_s))
    assert [(c, round(t, 4), k) for c, t, k in found] == [
        (c, round(t, 4), k) for c, t, k in p.points()
    ]
