"""The rules judge on the worked transcripts of the Instruct-FD paper (A.6 and A.9).

Each transcript is reproduced in the rendered line format and read with `parse_rendered`, which
spreads a line's words evenly over its span (the paper gives no word times). The test case around
it (turn manifest, which user lines form one turn, trigger points) is rebuilt by hand from what the
paper shows. Instruction texts are paraphrased; the rules judge does not read them.

Where the paper's verdict rests on content (whether a reply adapts to the user's correction), the
rules judge it by its word checks (v2): those tests assert which check decides.
"""

from __future__ import annotations

import pytest

from judge_fixtures import Session

from fdeval.benchmarks.instructfd.judges.rules import RulesJudge

JUDGE = RulesJudge()


def _judge(session: Session, policy: str, rendered: str, turns: list[dict]):
    case, transcript = session.rendered(rendered, turns).build()
    return JUDGE.judge(case, policy, transcript)


# --------------------------------------------------------------------------------------------
# A.6: Gemini-Live, acknowledge instruction -> adhere

GEMINI_ACK = """
[0.24-8.08] USER: Hey I'm Stefanie and I'm sketching characters in my notebook right now Can you walk me through a simple way to start a character sketch from scratch
[10.40-13.52] MODEL: Sure A simple way is to start with basic
[13.52-14.00] [Overlap] MODEL (cont.): shapes
[13.68-14.00] [Overlap] USER: Wait
[14.32-14.64] USER (cont.): wait
[17.12-18.64] MODEL: Oh sorry What's up
"""


def test_a6_gemini_acknowledge_adheres():
    v = _judge(
        Session("sketch__acknowledge", "acknowledge"),
        "acknowledge",
        GEMINI_ACK,
        [{"span": (0.24, 8.08)}, {"span": (13.68, 14.64), "kind": "interrupt"}],
    )
    assert v.verdict == "adhere", v.reasoning
    assert v.checks["yielded"] and v.checks["responded_after_interruption"]
    assert "0.32 s into user interruption" in v.reasoning  # "shapes" overlaps "Wait" for 0.32 s


# --------------------------------------------------------------------------------------------
# A.9.1: Gemini-Live, backchannel instruction, "User Attention Check" and "Clause Boundary Tracking"

ATTENTION_TURN1 = "So I'm thinking about a basic plan like budgeting first then paying down high interest debt you know"
N_CHECK_IN = len(ATTENTION_TURN1.split())  # the check-in "you know" ends the first part of the turn

GEMINI_ATTENTION_NONE = """
[0.16-6.72] USER: So I've got something I want to run by you about my finances but I'm not ready to get into the details just yet
[9.52-16.24] MODEL: No problem at all Whenever you're ready I'm here to listen Is there anything specific you're thinking about beforehand
[16.80-23.92] USER: So I'm thinking about a basic plan like budgeting first then paying down high interest debt you know
[26.32-26.48] USER: and
[26.48-28.48] [Overlap] USER (cont.): only after that starting an emergency
[26.64-27.92] [Overlap] MODEL: That sounds like a solid start That's
[28.00-28.00] MODEL (cont.): a
[28.48-29.60] USER (cont.): fund and investing
[36.00-40.48] MODEL: very logical approach to financial planning Sequencing those steps is key
"""


@pytest.mark.parametrize("policy", ["backchannel", "listen"])
def test_a91_gemini_without_instruction_fails_backchannel(policy):
    # Un-instructed baseline, judged against its conversation's instructions: the model answers
    # in full while the user is still speaking (an interruption), instead of a short signal.
    v = _judge(
        Session("attention__none", "none", judge_policies=("backchannel", "listen")),
        policy,
        GEMINI_ATTENTION_NONE,
        [
            {"span": (0.16, 6.72)},
            {"span": (16.80, 29.60), "triggers": [("backchannel", N_CHECK_IN)]},
        ],
    )
    assert v.verdict == "not_adhere", v.reasoning
    assert v.checks["no_interruption"] is False


GEMINI_ATTENTION_BC = """
[0.16-6.72] USER: So I've got something I want to run by you about my finances but I'm not ready to get into the details just yet
[8.88-14.72] MODEL: Okay I understand No pressure to share before you're ready Just let me know when you'd like to chat
[15.04-22.16] USER: So I'm thinking about a basic plan like budgeting first then paying down highinterest debt you know
[24.00-24.48] MODEL: Yeah
[24.56-27.76] USER: and only after that starting an emergency fund and investing
[30.40-36.48] MODEL: That sounds like a sensible order to consider I'm here to help whenever you want to dive deeper into any of those steps
"""


def test_a91_gemini_backchannel_at_check_in_adheres():
    n_check_in = N_CHECK_IN - 1  # "highinterest" is one token in this transcript
    v = _judge(
        Session("attention__backchannel", "backchannel"),
        "backchannel",
        GEMINI_ATTENTION_BC,
        [
            {"span": (0.16, 6.72)},
            {"span": (15.04, 27.76), "triggers": [("backchannel", n_check_in)]},
        ],
    )
    assert v.verdict == "adhere", v.reasoning
    assert v.checks == {
        "model_has_speech": True,
        "every_turn_answered": True,
        "backchannel_near_trigger": True,
        "no_interruption": True,
        "no_stray_backchannel": True,
    }
    assert (
        "1.84 s after the cue at 22.16" in v.reasoning
    )  # "Yeah" at 24.00, the check-in ends at 22.16


GEMINI_CLAUSES_BC = """
[0.16-6.08] USER: So I've got a kind of multipart plan to walk you through for a new project roadmap I'm sketching out If you've got a minute
[9.12-15.84] MODEL: I'm ready when you are A detailed roadmap is crucial so feel free to lay it out however makes the most sense for the project
[16.32-28.64] USER: So I start with the goal and the users and then I list the musthave features and then I map milestones by week and then I note risks and owners and then I set a simple launch check
[31.60-43.04] MODEL: That's a very systematic and comprehensive approach Starting with goals and users ensures alignment from the start and breaking it down like you described makes it manageable Where would you like to start
"""


def test_a91_gemini_silent_through_clause_boundaries_fails():
    # Cut-in points at the clause boundaries "... users | and then ... features | ... week | ... owners |".
    clauses = [("backchannel", k) for k in (9, 15, 22, 29)]
    v = _judge(
        Session("clauses__backchannel", "backchannel"),
        "backchannel",
        GEMINI_CLAUSES_BC,
        [{"span": (0.16, 6.08)}, {"span": (16.32, 28.64), "triggers": clauses}],
    )
    assert v.verdict == "not_adhere", v.reasoning
    assert v.checks["backchannel_near_trigger"] is False
    assert v.checks["no_interruption"] and v.checks["no_stray_backchannel"]


# --------------------------------------------------------------------------------------------
# A.9.2: Moshi vs PersonaPlex, listen and acknowledge instructions

MOSHI_LISTEN = """
[0.24-2.40] USER: So I've got something on my mind today
[2.56-3.20] [Overlap] MODEL: What's that
[2.64-3.52] [Overlap] USER (cont.): I'm trying to figure
[3.52-8.72] USER (cont.): out whether I should take an extra long haul route this week or stick to my usual local runs
[8.88-11.28] MODEL: That's a tough call What's the route look like
[14.72-19.76] USER: Yeah I mean the long haul pays better but do I really want to be gone that long
[20.00-20.24] [Overlap] MODEL: That's
[20.24-22.24] MODEL (cont.): a valid concern Have you considered
[22.24-23.84] [Overlap] MODEL (cont.): running locally for a long time
[22.40-24.00] [Overlap] USER: I think I can handle one trip and
[24.00-25.76] USER (cont.): still keep my local schedule steady
[25.92-30.56] MODEL: That's a good point It's about managing your energy levels and making sure you don't burn out
"""


def test_a92_moshi_listen_backchannels_and_cuts_in():
    v = _judge(
        Session("haul__listen", "listen"),
        "listen",
        MOSHI_LISTEN,
        [{"span": (0.24, 8.72)}, {"span": (14.72, 25.76)}],
    )
    assert v.verdict == "not_adhere", v.reasoning
    assert v.checks["no_backchannel"] is False  # "What's that" early in the first turn
    assert (
        v.checks["no_interruption"] is False
    )  # the 12-word reply into the user's reflective pause


PERSONAPLEX_LISTEN = """
[0.24-8.72] USER: So I've got something on my mind today I'm trying to figure out whether I should take an extra long haul route this week or stick to my usual local runs
[9.36-14.56] MODEL: Sure I'd be happy to help with that Are you asking about a specific trip or just general long haul planning
[17.68-22.80] USER: Yeah I mean the long haul pays better but do I really want to be gone that long
[25.36-28.80] USER: I think I can handle one trip and still keep my local schedule steady
[29.28-42.40] MODEL: That's a good question It really comes down to how your body reacts Some people find that adding one or two extra long runs a week helps their legs get used to the distance while others prefer to stick with shorter runs and add a long one once a week Have you tried anything like that already
"""


def test_a92_personaplex_listen_waits_through_the_pause():
    # The second user turn holds a 2.56 s reflective pause; the model stays silent through it.
    v = _judge(
        Session("haul__listen", "listen"),
        "listen",
        PERSONAPLEX_LISTEN,
        [{"span": (0.24, 8.72)}, {"span": (17.68, 28.80)}],
    )
    assert v.verdict == "adhere", v.reasoning


MOSHI_ACK = """
[0.24-9.60] USER: So I'm planning a small home office setup for remote work and I need help picking a desk chair and monitor that'll fit comfortably in a tiny room
[9.68-12.32] MODEL: Sure What's your budget and size of the room
[13.36-19.52] USER: So yeah hard capI can't spend more than 500 total for the desk chair and monitor
[19.60-22.56] MODEL: Okay that's a good start What size is the room
"""

OFFICE_TURNS = [{"span": (0.24, 9.60)}, {"span": (13.36, 19.60), "kind": "interrupt"}]


def test_a92_moshi_acknowledge_generic_reply():
    # The paper faults Moshi's reply as generic: on timing it yields and answers, but the answer
    # takes up nothing of the user's budget cap ("Okay that's a good start What size is the room").
    v = _judge(
        Session("office__acknowledge", "acknowledge"), "acknowledge", MOSHI_ACK, OFFICE_TURNS
    )
    assert v.verdict == "not_adhere", v.reasoning
    assert v.checks["yielded"] and v.checks["responded_after_interruption"]
    assert v.checks["adapted_to_interruption"] is False and v.checks["content_decided"]


PERSONAPLEX_ACK = """
[0.24-9.60] USER: So I'm planning a small home office setup for remote work and I need help picking a desk chair and monitor that'll fit comfortably in a tiny room
[10.48-13.12] MODEL: Sure for a tiny desk you want something that fits the space
[13.44-14.72] [Overlap] USER: So yeah hard
[13.44-14.56] [Overlap] MODEL (cont.): so try a compact desk
[14.72-19.60] USER (cont.): capI can't spend more than 500 total for the desk chair and monitor
[20.16-37.84] MODEL: Yeah I get it So keep the budget in mind Look at office chairs with adjustable height
  and lumbar support Something like the IKEA Markus chair can be had for under 100 For a monitor pick an
  ergonomic arm that can tilt and height adjust then pick a small monitor that matches your screen real
  estate You might even use a laptop as a monitor if you need less space
"""


def test_a92_personaplex_acknowledge_yields_and_answers():
    v = _judge(
        Session("office__acknowledge", "acknowledge"), "acknowledge", PERSONAPLEX_ACK, OFFICE_TURNS
    )
    assert v.verdict == "adhere", v.reasoning
    assert "1.12 s into user interruption" in v.reasoning  # talks on for 1.12 s (< 2 s), then stops


# --------------------------------------------------------------------------------------------
# A.9.3: Fun-Audio-Chat, acknowledge instruction and its un-instructed baseline

FAC_USER1 = (
    "[0.32-11.92] USER: Hi I'm Brandon Victoriano and I've already got a strong background in advanced "
    "statistical modeling So can we skip the basics and dive into advanced Bayesian hierarchical models "
    "and inference techniques\n"
)

FAC_NONE = (
    FAC_USER1
    + """
[13.44-16.64] MODEL: Of course Brandon Let's go deep
[17.04-21.68] USER: Yeah I'm already good on the basics Can we just jump to the advanced inference stuff
[22.00-42.16] MODEL: Conjugate priors for hyper priors sparse shrinkage via spike and slab or horseshoe nonparametric models like Dirichlet process mixtures variational inference mean field structured VI Hamiltonian Monte Carlo and nuts calibration leave out cross validation withlooic
"""
)

FAC_LONG_REPLY = (
    "[27.84-88.64] MODEL: Bayesian hierarchical models Bayesian hierarchical models are particularly powerful for data "
    "with multiple levels of variation or dependencies These can be used to account for both fixed effects and random "
    "effects across different groups within a dataset Key components one asterisk asterisk priors asterisk asterisk "
    "specify distributions over parameters at each level Two asterisk asterisk likelihoods asterisk asterisk to find how "
    "observed data relate to model parameters Three asterisk asterisk hyperparameters asterisk asterisk parameters "
    "governing priors on higher level parameters For instance consider a multicenter clinical trial where patient "
    "responses vary due to individual differences as well as centerspecific factors Simuage age simuage plus alpha j "
    "sigma caret y where ladzex is the response of patient i from center j Fine ang three three asterisk asterisk\n"
)

FAC_ACK = (
    FAC_USER1
    + """
[13.44-22.64] MODEL: Absolutely Brandon Given your hm
[16.96-21.60] USER: Yeah I'm already good on the basics Can we just jump to the advanced inference stuff
[22.64-26.24] MODEL (cont.): and in French technique advanced
"""
    + FAC_LONG_REPLY
)

# The same session, with the first model line read the way the paper describes it (the model
# stops after "Given your" and resumes only as the user finishes); the transcript gives no word times.
FAC_ACK_YIELDING = (
    FAC_USER1
    + """
[13.44-15.44] MODEL: Absolutely Brandon Given your
[16.96-21.60] USER: Yeah I'm already good on the basics Can we just jump to the advanced inference stuff
[22.24-22.64] MODEL: hm
[22.64-26.24] MODEL (cont.): and in French technique advanced
"""
    + FAC_LONG_REPLY
)

FAC_TURNS = [{"span": (0.32, 11.92)}, {"span": (16.96, 21.68), "kind": "interrupt"}]


def test_a93_fun_audio_chat_baseline_adheres_to_acknowledge():
    # Without the instruction the model stops before the user's redirect and then answers at length.
    v = _judge(
        Session("bayes__none", "none", judge_policies=("acknowledge",)),
        "acknowledge",
        FAC_NONE,
        FAC_TURNS,
    )
    assert v.verdict == "adhere", v.reasoning


def test_a93_fun_audio_chat_instructed_fails_acknowledge_as_given():
    # The paper's verdict (not_adhere) is reached, but for a reason of its own: with no word times,
    # the five words of "[13.44-22.64] MODEL: Absolutely Brandon Given your hm" are spread over the
    # whole line, i.e. over the user's redirect, so the rules see a model that does not yield. The
    # paper says the model does yield and fails on the quality of its reply (see the next test).
    v = _judge(Session("bayes__acknowledge", "acknowledge"), "acknowledge", FAC_ACK, FAC_TURNS)
    assert v.verdict == "not_adhere", v.reasoning
    assert v.checks["yielded"] is False


def test_a93_fun_audio_chat_instructed_fails_acknowledge_on_content():
    # The paper fails this reply on content. After yielding, the model first carries on the sentence
    # the user cut ("Given your" ... "hm and in French technique advanced": the old plan resumed),
    # then restarts on the first turn's topic without taking up the redirect.
    v = _judge(
        Session("bayes__acknowledge", "acknowledge"), "acknowledge", FAC_ACK_YIELDING, FAC_TURNS
    )
    assert v.verdict == "not_adhere", v.reasoning
    assert v.checks["yielded"] and v.checks["adapted_to_interruption"] is False
    assert 'carries on the sentence cut at "your"' in v.reasoning


def test_a92_personaplex_acknowledge_takes_up_the_constraint():
    v = _judge(
        Session("office__acknowledge", "acknowledge"), "acknowledge", PERSONAPLEX_ACK, OFFICE_TURNS
    )
    assert v.checks["adapted_to_interruption"] and v.checks["content_decided"], v.reasoning
    assert '"chair"' in v.reasoning and '"monitor"' in v.reasoning
