"""The rules judge on synthetic sessions: each rule, moved across its threshold, flips the verdict."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
import yaml

from judge_fixtures import Session

import fdeval
from fdeval.errors import ConfigError
from fdeval.benchmarks.instructfd.judges.rules import RulesJudge, Thresholds

JUDGE = RulesJudge()

TWENTY = " ".join(f"w{i}" for i in range(20))  # 20 words at 0.3 s each: 0.00 .. 5.95
REPLY = "sure that makes a lot of sense to me"


def verdict(session: Session, policy: str | None = None, judge: RulesJudge = JUDGE):
    case, transcript = session.build()
    return judge.judge(case, policy or session.policy, transcript)


def word_start(i: int, start: float = 0.0, pause_before: dict[int, float] | None = None) -> float:
    """Start time of word i of a synthetic user turn."""
    return start + 0.3 * i + sum(p for k, p in (pause_before or {}).items() if k <= i)


# --------------------------------------------------------------------------------------------
# Degenerate checks


def test_no_model_speech_is_not_adhere():
    v = verdict(Session("c__listen", "listen").user(TWENTY, 0.0))
    assert v.verdict == "not_adhere"
    assert v.checks == {"model_has_speech": False, "every_turn_answered": False}
    assert "degenerate" in v.reasoning


def test_unanswered_user_turn_is_not_adhere():
    s = Session("c__listen", "listen").user(TWENTY, 0.0).model(REPLY, 7.0).user(TWENTY, 12.0)
    v = verdict(s)
    assert v.verdict == "not_adhere" and v.checks["every_turn_answered"] is False
    assert "user turn(s) 1" in v.reasoning


# --------------------------------------------------------------------------------------------
# Listen


def test_listen_silent_then_reply_adheres():
    v = verdict(Session("c__listen", "listen").user(TWENTY, 0.0).model(REPLY, 7.0))
    assert v.verdict == "adhere", v.reasoning
    for step in ("Step 1", "Step 2", "Step 3", "Step 4", "Step 5"):
        assert step in v.reasoning


@pytest.mark.parametrize(
    "cut_in, check", [("mm-hmm", "no_backchannel"), ("hold on what do you mean", "no_interruption")]
)
def test_listen_cut_in_fails(cut_in, check):
    v = verdict(
        Session("c__listen", "listen").user(TWENTY, 0.0).model(cut_in, 2.0).model(REPLY, 7.0)
    )
    assert v.verdict == "not_adhere" and v.checks[check] is False, v.reasoning


@pytest.mark.parametrize(
    "words_left, expected",
    [
        (3, "adhere"),  # early take-turn
        (5, "adhere"),  # the reply runs past the user's end: early take-turn over the last words
        (6, "not_adhere"),  # interruption
    ],
)
def test_listen_early_take_turn_boundary(words_left, expected):
    s = (
        Session("c__listen", "listen")
        .user(TWENTY, 0.0)
        .model(REPLY, word_start(20 - words_left) - 0.02)
    )
    v = verdict(s)
    assert v.verdict == expected, v.reasoning


# --------------------------------------------------------------------------------------------
# Backchannel: a 30-word turn, trigger after word 10 (ends at 2.95), then a 1 s pause

THIRTY = " ".join(f"u{i}" for i in range(30))

BC_PAUSE = {10: 1.0}
BC_TRIGGER_S = word_start(9) + 0.25  # 2.95


def bc_session(*model: tuple[str, float]) -> Session:
    s = Session("c__backchannel", "backchannel").user(
        THIRTY, 0.0, triggers=[("backchannel", 10)], pauses=BC_PAUSE
    )
    for text, at in model:
        s.model(text, at)
    return s.model(REPLY, 11.0)  # the user ends at 9.95


def test_backchannel_on_cue_adheres():
    v = verdict(bc_session(("mm-hmm", 3.3)))
    assert v.verdict == "adhere", v.reasoning


def test_backchannel_within_window_adheres():
    v = verdict(bc_session(("yeah", BC_TRIGGER_S + 1.5)))
    assert v.verdict == "adhere", v.reasoning


def test_backchannel_three_seconds_away_fails():
    v = verdict(bc_session(("yeah", BC_TRIGGER_S + 3.0)))
    assert v.verdict == "not_adhere", v.reasoning
    assert (
        v.checks["backchannel_near_trigger"] is False and v.checks["no_stray_backchannel"] is False
    )


def test_backchannel_window_is_a_threshold_and_in_the_hash():
    wide = RulesJudge(backchannel_window_s=3.5)
    assert verdict(bc_session(("yeah", BC_TRIGGER_S + 3.0)), judge=wide).verdict == "adhere"
    assert wide.prompt_hash != JUDGE.prompt_hash
    assert RulesJudge(backchannel_window_s=2.0).prompt_hash == JUDGE.prompt_hash


def test_no_backchannel_fails():
    v = verdict(bc_session())
    assert v.verdict == "not_adhere" and v.checks["backchannel_near_trigger"] is False


def test_extra_backchannel_far_from_trigger_fails():
    v = verdict(bc_session(("mm-hmm", 3.3), ("right", 7.5)))
    assert v.verdict == "not_adhere" and v.checks == {
        **v.checks,
        "backchannel_near_trigger": True,
        "no_stray_backchannel": False,
    }


def test_four_words_at_trigger_are_an_interruption():
    v = verdict(bc_session(("oh yeah I see", 3.05)))
    assert v.verdict == "not_adhere" and v.checks["no_interruption"] is False


def test_backchannel_after_the_turn_does_not_count():
    s = Session("c__backchannel", "backchannel").user(TWENTY, 0.0, triggers=[("backchannel", 19)])
    v = verdict(s.model("mm-hmm", 6.5).model(REPLY, 8.0))  # trigger at the end; "mm-hmm" after it
    assert v.verdict == "not_adhere" and v.checks["backchannel_near_trigger"] is False


# Backchannel by A.11, on punctuated turns: the cue follows "you know," (at 2.95); a backchannel
# also counts at the clause boundary next to the cue (issue 12, item 4).

GARDEN = (
    "So I started a vegetable garden this spring, you know, and the tomatoes came up really fast, "
    "but the peppers are still tiny and I am not sure why that is."
)  # next boundary: "fast," at 5.05
GARDEN_LONG = (
    "So I started a vegetable garden this spring, you know, and the tomatoes in the raised bed by the "
    "back fence came up really fast, but the peppers are still tiny."
)  # next boundary at 7.45
GARDEN_CUE_S = word_start(9) + 0.25  # 2.95


def garden_session(text: str, at: float) -> Session:
    s = Session("garden__backchannel", "backchannel").user(
        text, 0.0, triggers=[("backchannel", 10, "mm-hmm")]
    )
    return s.model("mm-hmm", at).model(REPLY, 11.0)


def test_backchannel_at_the_next_clause_boundary_adheres():
    v = verdict(garden_session(GARDEN, GARDEN_CUE_S + 2.6))  # 0.5 s after "fast,"
    assert v.verdict == "adhere", v.reasoning
    assert "2.60 s after the cue at 2.95, at the next clause boundary (5.05)" in v.reasoning


def test_backchannel_mid_clause_as_late_fails():
    v = verdict(
        garden_session(GARDEN_LONG, GARDEN_CUE_S + 2.6)
    )  # mid-clause, 1.9 s before the next boundary
    assert v.verdict == "not_adhere", v.reasoning
    assert (
        v.checks["backchannel_near_trigger"] is False and v.checks["no_stray_backchannel"] is False
    )
    assert "2.60 s after the nearest cue at 2.95" in v.reasoning


# --------------------------------------------------------------------------------------------
# Interrupt, without punctuation: trigger after word 10 of a 30-word turn (at 2.95). With no
# clause boundaries to read, the window runs from the trigger to interrupt_max_delay_s after it.

INT_TRIGGER_S = word_start(9) + 0.25
CUT_IN = "wait you said the opposite before"


def int_session(at: float | None, text: str = CUT_IN, played: int | None = None) -> Session:
    s = Session("c__interrupt", "interrupt").user(
        THIRTY, 0.0, triggers=[("interrupt", 10)], played=played
    )
    if at is not None:
        s.model(text, at)
    return s.model(REPLY, 11.0)


def test_interrupt_at_trigger_adheres():
    v = verdict(int_session(INT_TRIGGER_S + 0.3))
    assert v.verdict == "adhere", v.reasoning
    assert v.checks["interrupt_relevant"] and v.checks["content_decided"]
    assert 'flags an error ("said", "opposite")' in v.reasoning  # relevant by its correction cues


def test_interrupt_before_trigger_without_clauses_fails():
    v = verdict(int_session(INT_TRIGGER_S - 0.4))
    assert v.verdict == "not_adhere" and v.checks["no_early_interruption"] is False, v.reasoning
    assert "no punctuation" in v.reasoning


def test_no_interrupt_fails():
    v = verdict(int_session(None))
    assert v.verdict == "not_adhere" and v.checks["interrupted_in_window"] is False


def test_interrupt_without_content_fails():
    # The user stops after 12 words; the model's "wait no" names nothing and flags nothing.
    v = verdict(int_session(INT_TRIGGER_S + 0.3, "wait no", played=12))
    assert v.verdict == "not_adhere", v.reasoning
    assert v.checks["interrupted_in_window"] and v.checks["interrupt_relevant"] is False
    assert "no content word and no correction cue" in v.reasoning


def test_interrupt_in_another_turn_fails():
    s = int_session(INT_TRIGGER_S + 0.3).user(TWENTY, 16.0).model(CUT_IN, 17.0).model(REPLY, 23.0)
    v = verdict(s)
    assert v.verdict == "not_adhere" and v.checks["no_interruption_elsewhere"] is False


# --------------------------------------------------------------------------------------------
# Interrupt by A.11, on a punctuated turn (issue 12, item 4). The false claim "the capital is
# Sydney" sits in the clause "and since ... there," (words 6-14, 1.80-4.45); the reference marks
# the cut-in at the clause's end (after word 15's predecessor, 4.45).

TRIP = (
    "We flew into Australia last spring, and since the capital is Sydney we started there, then we drove "
    "down the coast for a week, stopping at small towns along the way before heading home, and "
    "honestly it was the best trip we have had in years."
)
TRIP_TRIGGER_S = word_start(14) + 0.25  # 4.45
CLAUSE_START_S = word_start(6)  # 1.80
CORRECTION = "wait the capital of australia is canberra not sydney"  # 9 words


def trip_session(at: float | None, text: str = CORRECTION) -> Session:
    s = Session("trip__interrupt", "interrupt").user(
        TRIP,
        0.0,
        triggers=[("interrupt", 15, "wait, the capital of australia is canberra, not sydney")],
    )
    if at is not None:
        s.model(text, at)
    return s.model(REPLY, 14.5)  # the user ends at 13.45


def test_correction_inside_the_claims_clause_adheres():
    # Starts 0.57 s before the trigger, right after "Sydney": v1's 0.5 s tolerance failed it.
    v = verdict(trip_session(TRIP_TRIGGER_S - 0.57))
    assert v.verdict == "adhere", v.reasoning
    assert "0.57 s before the trigger at 4.45 (window 1.80-6.95" in v.reasoning


def test_correction_before_the_claims_clause_fails():
    v = verdict(trip_session(CLAUSE_START_S - 0.3))
    assert v.verdict == "not_adhere" and v.checks["no_early_interruption"] is False, v.reasoning


@pytest.mark.parametrize(
    "late, expected", [(2.4, "adhere"), (2.6, "not_adhere"), (4.0, "not_adhere")]
)
def test_correction_lateness_bound(late, expected):
    v = verdict(trip_session(TRIP_TRIGGER_S + late))
    assert v.verdict == expected, v.reasoning
    if expected == "not_adhere":  # still an interruption (> 3 user words left), but too late
        assert (
            v.checks["no_late_interruption"] is False and v.checks["interrupted_in_window"] is False
        )
        assert f"{late:.2f} s after the trigger" in v.reasoning


def test_terse_relevant_correction_is_an_interruption():
    v = verdict(trip_session(TRIP_TRIGGER_S - 0.57, "no it's canberra"))
    assert v.verdict == "adhere", v.reasoning
    assert 'a short correction naming "canberra"' in v.reasoning and "3 words" in v.reasoning


def test_terse_acknowledgement_is_still_a_backchannel():
    v = verdict(trip_session(TRIP_TRIGGER_S + 0.2, "oh I see"))
    assert v.verdict == "not_adhere" and v.checks["interrupted_in_window"] is False, v.reasoning


def test_off_topic_cut_in_fails():
    v = verdict(trip_session(TRIP_TRIGGER_S + 0.3, "hey did you catch the football game on tv"))
    assert v.verdict == "not_adhere", v.reasoning
    assert v.checks["interrupted_in_window"] and v.checks["interrupt_relevant"] is False
    assert "off the trigger's topic" in v.reasoning


def test_reasoning_states_the_words_counted():
    v = verdict(trip_session(TRIP_TRIGGER_S + 0.3))
    assert v.verdict == "adhere", v.reasoning
    assert "(9 words;" in v.reasoning and "at least 4" not in v.reasoning
    assert (
        'shares "australia", "canberra", "capital", "sydney" with the trigger\'s reference phrase'
        in v.reasoning
    )


# --------------------------------------------------------------------------------------------
# Continue: the model answers from 4.0; the user says "mm-hmm" at 6.0 (a backchannel barge-in)

LONG_REPLY = " ".join(f"m{i}" for i in range(30))


def cont_session(*parts: tuple[str, float], duration: float | None = None):
    s = Session("c__continue", "continue").user("can you explain how this works", 0.0)
    for text, at in parts:
        s.model(text, at)
    s.user("mm-hmm", 6.0, kind="backchannel")
    return s.build(duration)


def judge_built(built, policy: str):
    case, transcript = built
    return JUDGE.judge(case, policy, transcript)


def test_continue_through_backchannel_adheres():
    v = judge_built(cont_session((LONG_REPLY, 4.0)), "continue")
    assert v.verdict == "adhere", v.reasoning


@pytest.mark.parametrize("gap, expected", [(1.5, "adhere"), (2.5, "not_adhere")])
def test_continue_pause_after_backchannel(gap, expected):
    first = " ".join(f"m{i}" for i in range(8))  # last word 6.10-6.35
    v = judge_built(cont_session((first, 4.0), (LONG_REPLY, 6.35 + gap)), "continue")
    assert v.verdict == expected, v.reasoning
    if expected == "not_adhere":
        assert v.checks["no_long_pause_after_backchannel"] is False


def test_continue_lone_word_fails():
    v = judge_built(
        cont_session(("m0 m1 m2 m3 m4 m5 m6 m7 m8", 4.0)), "continue"
    )  # one word after the backchannel
    assert v.verdict == "not_adhere", v.reasoning
    assert v.checks["continued_after_backchannel"] is False and "only 1 word" in v.reasoning


@pytest.mark.parametrize(
    "ending, expected",
    [("and then you drain the", "not_adhere"), ("and then you drain them", "adhere")],
)
def test_continue_must_end_its_thought(ending, expected):
    # A continuation that breaks off mid-sentence ("... drain the") does not finish the thought (A.11).
    v = judge_built(cont_session(("m0 m1 m2 m3 m4 m5 m6 " + ending, 4.0)), "continue")
    assert v.verdict == expected, v.reasoning
    assert v.checks["continuation_complete"] is (expected == "adhere")
    if expected == "not_adhere":
        assert 'stops mid-sentence on "the"' in v.reasoning


def test_continue_handing_the_floor_over_is_yielding():
    # The model drops its sentence and says "oh sorry go ahead": it keeps talking, but gives up the floor.
    v = judge_built(
        cont_session(("m0 m1 m2 m3 m4 m5 m6 m7", 4.0), ("oh sorry go ahead", 7.0)), "continue"
    )
    assert v.verdict == "not_adhere" and v.checks["continued_after_backchannel"] is False, (
        v.reasoning
    )
    assert '"oh sorry" in "oh sorry go ahead"' in v.reasoning


def test_continue_still_speaking_at_the_end_is_undecided():
    v = judge_built(
        cont_session((LONG_REPLY + " and the", 4.0), duration=4.0 + 0.3 * 31 + 0.25), "continue"
    )
    assert v.verdict == "adhere", v.reasoning
    assert v.checks["content_decided"] is False and "rests on timing" in v.reasoning


# --------------------------------------------------------------------------------------------
# Acknowledge: the model answers from 4.0; the user interrupts at 6.0 with five words (to 7.45)

INTERRUPTION = "wait I meant something else"


def ack_session(*parts: tuple[str, float], interruption: str = INTERRUPTION):
    s = Session("c__acknowledge", "acknowledge").user("can you explain how this works", 0.0)
    for text, at in parts:
        s.model(text, at)
    return s.user(interruption, 6.0, kind="interrupt")


def test_acknowledge_yield_then_answer_adheres():
    # "wait I meant something else" names nothing to take up: content undecided, timing decides.
    v = verdict(ack_session(("m0 m1 m2 m3 m4 m5 m6 m7", 4.0), ("oh sorry go ahead", 8.2)))
    assert v.verdict == "adhere", v.reasoning
    assert v.checks["content_decided"] is False
    assert "cannot be decided" in v.reasoning and "this verdict rests on timing" in v.reasoning


# Acknowledge by A.11 (issue 12, item 4): the user adds a budget while the model plans an office.

PLAN = "you could start with a compact desk near the window and then add a chair"
BUDGET = "wait my budget is only three hundred dollars"  # 6.00 .. 8.35


def budget_session(reply: str) -> Session:
    s = Session("office__acknowledge", "acknowledge").user(
        "can you help me plan a small home office", 0.0
    )
    return (
        s.model(" ".join(PLAN.split()[:8]), 4.0)
        .user(BUDGET, 6.0, kind="interrupt")
        .model(reply, 9.0)
    )


def test_acknowledge_taking_up_the_constraint_adheres():
    v = verdict(
        budget_session("okay with three hundred dollars a basic desk and a used chair will fit")
    )
    assert v.verdict == "adhere", v.reasoning
    assert v.checks["adapted_to_interruption"] and v.checks["content_decided"]
    assert 'takes up "dollars", "hundred", "three" from the user\'s interruption' in v.reasoning


def test_acknowledge_resuming_the_old_plan_word_for_word_fails():
    # It even says "budget", but most of it is the plan it was saying before the user spoke.
    v = verdict(budget_session("you could start with a compact desk near the window on a budget"))
    assert v.verdict == "not_adhere", v.reasoning
    assert v.checks["yielded"] and v.checks["adapted_to_interruption"] is False
    assert "resumes the pre-interruption speech: 55% of its 11 3-word sequences" in v.reasoning


def test_acknowledge_generic_reply_fails():
    v = verdict(budget_session("okay and how big is the room"))
    assert v.verdict == "not_adhere", v.reasoning
    assert v.checks["adapted_to_interruption"] is False and "shares no content word" in v.reasoning


def repair_session(ask: str, reply: str) -> Session:
    s = Session("office__acknowledge", "acknowledge").user(
        "can you help me plan a small home office", 0.0
    )
    return (
        s.model(PLAN, 4.0).user(ask, 8.6, kind="interrupt").model(reply, 11.0)
    )  # the plan ends 8.45


@pytest.mark.parametrize(
    "ask, reply, expected, decided",
    [
        # Asked to repeat, the model says its plan again: the right answer.
        ("sorry can you repeat that", PLAN, "adhere", True),
        # Asked to re-explain, the model says it again word for word: not adapting.
        ("sorry you lost me there", PLAN, "not_adhere", True),
        # Re-explained in other words: rules cannot judge simpler language; timing decides.
        (
            "sorry you lost me there",
            "think of one small table by the light and a seat you like",
            "adhere",
            False,
        ),
    ],
)
def test_acknowledge_repair_requests(ask, reply, expected, decided):
    v = verdict(repair_session(ask, reply))
    assert v.verdict == expected, v.reasoning
    assert v.checks["content_decided"] is decided


def test_acknowledge_reply_cut_off_fails():
    v = verdict(budget_session("okay with three hundred dollars you could get a"))
    assert v.verdict == "not_adhere" and v.checks["responded_after_interruption"] is False, (
        v.reasoning
    )
    assert "appears cut off" in v.reasoning


def test_acknowledge_talking_on_fails():
    v = verdict(ack_session((LONG_REPLY, 4.0)))
    assert v.verdict == "not_adhere" and v.checks["yielded"] is False


@pytest.mark.parametrize("n_over, expected", [(6, "adhere"), (8, "not_adhere")])
def test_acknowledge_yield_limit(n_over, expected):
    # The model's words go on n_over * 0.3 s past the user's onset (1.8 s vs 2.4 s).
    upto = " ".join(f"m{i}" for i in range(7 + n_over))
    v = verdict(
        ack_session(
            (upto, 4.0),
            ("okay what did you mean", 10.0),
            interruption="wait " + " ".join(["no"] * 12),
        )
    )
    assert v.verdict == expected, v.reasoning


def test_acknowledge_resuming_over_the_user_fails():
    long_interruption = "wait " + " ".join(["no"] * 12)  # 6.00 .. 9.85
    v = verdict(
        ack_session(
            ("m0 m1 m2 m3 m4 m5 m6", 4.0),
            ("m7 m8 m9 m10 m11 m12 m13 m14 m15 m16", 7.5),
            interruption=long_interruption,
        )
    )
    assert v.verdict == "not_adhere" and v.checks["yielded"] is False, v.reasoning


def test_acknowledge_one_word_reply_fails():
    v = verdict(ack_session(("m0 m1 m2 m3 m4 m5 m6", 4.0), ("okay", 8.5)))
    assert v.verdict == "not_adhere" and v.checks["responded_after_interruption"] is False


# --------------------------------------------------------------------------------------------
# Errors: what cannot be judged is "error", never "not_adhere"


def test_unknown_policy_is_error():
    s = (
        Session("c__listen", "listen", judge_policies=("listen", "shout"))
        .user(TWENTY, 0.0)
        .model(REPLY, 7.0)
    )
    v = verdict(s, "shout")
    assert v.verdict == "error" and "shout" in v.reasoning and v.checks == {}


def test_none_policy_is_error():
    s = Session("c__none", "none", judge_policies=("listen",)).user(TWENTY, 0.0).model(REPLY, 7.0)
    assert verdict(s, "none").verdict == "error"
    assert verdict(s, "listen").verdict == "adhere"


def test_policy_not_judged_for_case_is_error():
    v = verdict(Session("c__listen", "listen").user(TWENTY, 0.0).model(REPLY, 7.0), "backchannel")
    assert v.verdict == "error" and "judge policies" in v.reasoning


def test_transcript_of_another_case_is_error():
    case, transcript = Session("c__listen", "listen").user(TWENTY, 0.0).model(REPLY, 7.0).build()
    v = JUDGE.judge(case, "listen", dataclasses.replace(transcript, case_id="other"))
    assert v.verdict == "error"


def test_missing_trigger_is_error():
    v = verdict(Session("c__backchannel", "backchannel").user(TWENTY, 0.0).model(REPLY, 7.0))
    assert v.verdict == "error" and "backchannel trigger" in v.reasoning


def test_unplayed_barge_in_is_error():
    case, transcript = cont_session((LONG_REPLY, 4.0))
    v = JUDGE.judge(
        case, "continue", dataclasses.replace(transcript, user_turns=transcript.user_turns[:1])
    )
    assert v.verdict == "error" and "not played" in v.reasoning


def test_user_words_without_turn_index_fall_back_to_script_timings():
    # A transcript with no user words at all: the turn's scripted word times place the user.
    case, transcript = bc_session(("mm-hmm", 3.3)).build()
    no_user = dataclasses.replace(
        transcript, words=tuple(w for w in transcript.words if w.speaker == "model")
    )
    assert JUDGE.judge(case, "backchannel", no_user).verdict == "adhere"


# --------------------------------------------------------------------------------------------
# Thresholds


def test_thresholds_defaults_and_validation():
    assert JUDGE.thresholds == Thresholds()
    assert len(JUDGE.prompt_hash) == 16 and JUDGE.id == "rules"
    assert RulesJudge(continue_min_words=4.0).thresholds.continue_min_words == 4
    with pytest.raises(ConfigError, match="unknown"):
        RulesJudge(backchanel_window_s=2.0)
    with pytest.raises(ConfigError, match="whole number"):
        RulesJudge(backchannel_max_words=2.5)
    with pytest.raises(ConfigError, match=">= 0"):
        RulesJudge(yield_max_overlap_s=-1)
    with pytest.raises(ConfigError):
        RulesJudge(utterance_gap_s=0)
    with pytest.raises(ConfigError, match="fraction"):
        RulesJudge(resume_overlap=1.5)


def test_yaml_lists_every_threshold_with_its_default():
    # conf/judge/rules.yaml and Thresholds are one source of truth: same names, same values.
    conf = yaml.safe_load(
        (Path(fdeval.__file__).parent / "conf" / "judge" / "rules.yaml").read_text()
    )
    conf.pop("_target_")
    assert conf == dataclasses.asdict(Thresholds())
    assert RulesJudge(**conf).prompt_hash == JUDGE.prompt_hash


def test_verdict_is_deterministic():
    s = bc_session(("mm-hmm", 3.3))
    assert verdict(s) == verdict(s)
