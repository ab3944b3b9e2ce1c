"""EchoChain's failure classifier: the strict A.4 parser, decision rules, votes, the offline
classifier on hand-made exchanges, and the LLM classifier against a local stand-in of the Messages
API (tests/helpers/fake_messages_server.py: a real HTTP server on 127.0.0.1 that the real anthropic
SDK talks to; nothing reaches the hosted API, the key is a dummy)."""

from __future__ import annotations

import dataclasses
import itertools
import json
import re
import socket

import pytest
from omegaconf import OmegaConf

from helpers.fake_messages_server import error, fake_api, text  # noqa: F401

from fdeval.benchmarks.echochain import classifier as C
from fdeval.benchmarks.echochain.classifier import (
    ClassifierOutput,
    ClassifierParseError,
    ClassifierVerdict,
    Exchange,
    LLMClassifier,
    OfflineClassifier,
    decide,
    format_output,
    make_classifier,
    parse_output,
    vote,
)
from fdeval.benchmarks.echochain.seeds import ExchangeScript, Seed, load_seeds
from fdeval.benchmarks.echochain.taxonomy import DSR, FAILURE_TYPES
from fdeval.errors import ConfigError
from fdeval.llm.client import LLMConfigError, LLMUnavailable
from fdeval.settings import CONF_DIR

# ------------------------------------------------------------------------------------------------
# A hand-made seed and its exchanges

SEED = Seed(
    seed_id="dinner_test",
    topic="event planning",
    subtopic="dinner party",
    topic_description="Planning a dinner party menu for friends at home.",
    persona="A busy nurse hosting six friends.",
    task_keywords=("dinner", "menu", "guests"),
    exchanges=(
        ExchangeScript(
            1, "Could you help me plan a dinner party menu for six friends this Saturday?"
        ),
        ExchangeScript(
            2,
            "What main course would you put on it?",
            "Real-time Thought Process",
            "Oh wait, one of them is vegan, so the main has to work for her too.",
            evidence=("vegan", "lentil", "plant-based"),
            stale=("beef", "lamb"),
        ),
        ExchangeScript(
            3,
            "And what should we drink with it?",
            "Denial and Discontent",
            "No, nobody wants alcohol, we are all driving home.",
            evidence=("sparkling water", "mocktail", "alcohol-free"),
            stale=("wine", "beer"),
        ),
    ),
)

EX1 = Exchange(
    "case1",
    1,
    SEED.exchanges[0].message,
    "",
    None,
    None,
    "Sure, for a dinner for six I'd start with a simple salad and then a main course.",
)


def ex2(
    continuation: str, before: str = "For the main I would go with a slow roasted beef"
) -> Exchange:
    s = SEED.exchanges[1]
    return Exchange("case1", 2, s.message, before, s.barge_in, s.barge_in_label, continuation)


def ex3(continuation: str) -> Exchange:
    s = SEED.exchanges[2]
    return Exchange("case1", 3, s.message, "A nice red", s.barge_in, s.barge_in_label, continuation)


def answer(**kw) -> str:
    """A well-formed A.4 answer, fields overridable (value None drops the field)."""
    fields = {
        "FAILURE_DETECTED": "YES",
        "FAILURE_TURN": "2",
        "FAILURE_TYPE": "dsr_f1_ignores",
        "EVIDENCE_INJECTION": '"one of them is vegan"',
        "WHAT_ASSISTANT_SAID_BEFORE": '"slow roasted beef"',
        "ASSISTANT_RESPONSE_AFTER": '"sure, and the beef goes in at six"',
        "MEMORY_DEMONSTRATED": "YES",
        "INTEGRATION_QUALITY": "NONE",
        "REASON": "Exchange 2 keeps the beef for everyone.",
        "CONFIDENCE": "HIGH",
    }
    fields.update(kw)
    return "\n".join(f"{k}: {v}" for k, v in fields.items() if v is not None)


PASS_ANSWER = answer(
    FAILURE_DETECTED="NO",
    FAILURE_TURN="N/A",
    FAILURE_TYPE="N/A",
    INTEGRATION_QUALITY="GOOD",
    ASSISTANT_RESPONSE_AFTER='"a lentil pie for everyone"',
    REASON="The vegan guest is served.",
)
FAIL_ANSWER = answer()


def out(failure=False, ftype=None, memory=True, integration="GOOD", turn=None) -> ClassifierOutput:
    return ClassifierOutput(
        failure,
        (turn or 2) if failure else None,
        ftype,
        "ev",
        "before",
        "after",
        memory,
        integration,
        "why",
        "MEDIUM",
    )


# ------------------------------------------------------------------------------------------------
# The parser


def test_parse_well_formed_answer_with_multi_line_fields_and_spacing():
    text_ = (
        "\n\n  FAILURE_DETECTED: YES  \n"
        "FAILURE_TURN:   3\n"
        "FAILURE_TYPE :dsr_f3_contradictory\n"
        'EVIDENCE_INJECTION: "we are all driving"\n'
        'WHAT_ASSISTANT_SAID_BEFORE: "A nice red"\n'
        'ASSISTANT_RESPONSE_AFTER: "sparkling water for the drivers\n'
        'and a bottle of wine for the table"\n'
        "MEMORY_DEMONSTRATED: YES\n"
        "INTEGRATION_QUALITY: PARTIAL\n"
        "REASON: In exchange 3 the assistant offers sparkling water,\n"
        "\n"
        "  then keeps the wine (both old and new).\n"
        "CONFIDENCE: MEDIUM\n\n"
    )
    o = parse_output(text_)
    assert (o.failure, o.failure_turn, o.failure_type) == (True, 3, "dsr_f3_contradictory")
    assert o.said_after == '"sparkling water for the drivers\nand a bottle of wine for the table"'
    assert o.reason == (
        "In exchange 3 the assistant offers sparkling water,\n\n"
        "  then keeps the wine (both old and new)."
    )
    assert (o.memory_demonstrated, o.integration, o.confidence) == (True, "PARTIAL", "MEDIUM")
    assert o.evidence_injection == '"we are all driving"' and o.said_before == '"A nice red"'


def test_parse_no_answer_takes_empty_or_na_turn_and_type_and_any_field_order():
    o = parse_output(PASS_ANSWER)
    assert (o.failure, o.failure_turn, o.failure_type, o.integration) == (False, None, None, "GOOD")
    lines = answer(FAILURE_DETECTED="NO", FAILURE_TURN="", FAILURE_TYPE="NONE").splitlines()
    shuffled = "\n".join([lines[0], *reversed(lines[1:])])  # the first line stays first
    o2 = parse_output(shuffled)
    assert (o2.failure, o2.failure_turn, o2.failure_type, o2.integration) == (
        False,
        None,
        None,
        "NONE",
    )


MALFORMED = [
    (
        "wrong first line",
        answer().replace("FAILURE_DETECTED: YES", "RESULT: YES"),
        "FAILURE_DETECTED",
    ),
    ("preamble before the first line", "Here is my analysis.\n" + answer(), "FAILURE_DETECTED"),
    ("lower-case yes", answer(FAILURE_DETECTED="yes"), "FAILURE_DETECTED"),
    ("first line not alone", answer(FAILURE_DETECTED="YES (clear case)"), "FAILURE_DETECTED"),
    (
        "markdown bold first line",
        answer().replace("FAILURE_DETECTED: YES", "**FAILURE_DETECTED: YES**"),
        "FAILURE_DETECTED",
    ),
    ("markdown bold field name", answer().replace("CONFIDENCE:", "**CONFIDENCE**:"), "CONFIDENCE"),
    ("lower-case field name", answer().replace("REASON:", "reason:"), "REASON"),
    ("missing field", answer(MEMORY_DEMONSTRATED=None), "MEMORY_DEMONSTRATED"),
    ("bad integration", answer(INTEGRATION_QUALITY="OK"), "INTEGRATION_QUALITY"),
    ("bad confidence", answer(CONFIDENCE="VERY HIGH"), "CONFIDENCE"),
    ("mixed-case memory", answer(MEMORY_DEMONSTRATED="Yes"), "MEMORY_DEMONSTRATED"),
    ("bracketed value", answer(MEMORY_DEMONSTRATED="[YES]"), "MEMORY_DEMONSTRATED"),
    ("YES without a type", answer(FAILURE_TYPE="N/A"), "FAILURE_TYPE"),
    ("YES with an unknown type", answer(FAILURE_TYPE="dsr_f5_other"), "FAILURE_TYPE"),
    ("YES without a turn", answer(FAILURE_TURN=""), "FAILURE_TURN"),
    ("YES with a worded turn", answer(FAILURE_TURN="two"), "FAILURE_TURN"),
    ("YES with turn zero", answer(FAILURE_TURN="0"), "FAILURE_TURN"),
    ("NO with a type", answer(FAILURE_DETECTED="NO", FAILURE_TURN="N/A"), "FAILURE_TYPE"),
    ("NO with a turn", answer(FAILURE_DETECTED="NO", FAILURE_TYPE="N/A"), "FAILURE_TURN"),
    ("duplicate field", answer() + "\nREASON: again", "REASON"),
    ("text after an enumerated field", answer() + "\nI hope this helps!", "CONFIDENCE"),
    ("empty reason", answer(REASON=""), "REASON"),
    ("empty text", "", "FAILURE_DETECTED"),
    ("blank text", " \n\t\n", "FAILURE_DETECTED"),
    ("garbage", "lorem ipsum dolor sit amet", "FAILURE_DETECTED"),
    ("JSON instead of the format", json.dumps({"FAILURE_DETECTED": "YES"}), "FAILURE_DETECTED"),
    ("first line only", "FAILURE_DETECTED: NO", "FAILURE_TURN"),
]


@pytest.mark.parametrize("name,bad,field", MALFORMED, ids=[m[0] for m in MALFORMED])
def test_parse_rejects_malformed_answer_naming_the_field(name, bad, field):
    with pytest.raises(ClassifierParseError) as e:
        parse_output(bad)
    assert e.value.field == field
    assert str(e.value).startswith(f"{field}: ")


def test_parse_missing_field_hint_when_named_wrongly():
    with pytest.raises(ClassifierParseError, match="markdown"):
        parse_output(answer().replace("CONFIDENCE:", "**CONFIDENCE**:"))


def test_format_output_round_trips():
    outputs = [
        parse_output(FAIL_ANSWER),
        parse_output(PASS_ANSWER),
        ClassifierOutput(
            True,
            4,
            "dsr_f4_double_count",
            "",
            "",
            "two lines\nof quote",
            False,
            "PARTIAL",
            "first line\n\nthird line",
            "LOW",
        ),
    ]
    for o in outputs:
        t = format_output(o)
        assert t.splitlines()[0] in ("FAILURE_DETECTED: YES", "FAILURE_DETECTED: NO")
        assert parse_output(t) == o
        assert format_output(parse_output(t)) == t


@pytest.mark.parametrize(
    "bad",
    [
        ClassifierOutput(True, 2, None, "", "", "", True, "GOOD", "r", "LOW"),  # YES without a type
        ClassifierOutput(False, 2, None, "", "", "", True, "GOOD", "r", "LOW"),  # NO with a turn
        ClassifierOutput(
            False, None, None, "", "", "", True, "FINE", "r", "LOW"
        ),  # unknown integration
        ClassifierOutput(
            False, None, None, "", "", "", True, "GOOD", "r\nCONFIDENCE: LOW", "LOW"
        ),  # would start a field
        ClassifierOutput(
            False, None, None, " padded ", "", "", True, "GOOD", "r", "LOW"
        ),  # would not read back
    ],
)
def test_format_output_refuses_outputs_without_a_text(bad):
    with pytest.raises(ValueError, match="no A.4 text"):
        format_output(bad)


# ------------------------------------------------------------------------------------------------
# Decision rules and the vote


def test_decision_rules():
    assert decide(out(memory=False), "paper") and decide(
        out(integration="NONE", failure=True, ftype="dsr_f1_ignores"), "paper"
    )
    # the paper's rule reads the two fields, not the first line
    assert not decide(
        out(failure=True, ftype="dsr_f3_contradictory", integration="PARTIAL"), "paper"
    )
    assert decide(out(failure=True, ftype="dsr_f3_contradictory", integration="PARTIAL"), "strict")
    assert decide(out(failure=True, ftype="dsr_f2_stale_later", integration="GOOD"), "strict")
    assert (
        decide(out(integration="PARTIAL"), "strict")
        and not decide(out(), "strict")
        and not decide(out(), "paper")
    )
    for failure, memory, integration in itertools.product(
        (False, True), (False, True), ("GOOD", "PARTIAL", "NONE")
    ):
        o = out(
            failure=failure,
            ftype="dsr_f1_ignores" if failure else None,
            memory=memory,
            integration=integration,
        )
        assert decide(o, "strict") or not decide(o, "paper")  # strict flags all that paper flags
    with pytest.raises(ValueError, match="lenient"):
        decide(out(), "lenient")


def test_vote_majority_ties_and_failure_type():
    f1 = out(failure=True, ftype="dsr_f1_ignores", integration="NONE")
    f3 = out(failure=True, ftype="dsr_f3_contradictory", memory=False, integration="PARTIAL")
    ok = out()
    v = vote("c", 2, [f3, ok, f3, f1], rule="paper", k=4, errors=(), classifier={"backend": "x"})
    assert (v.status, v.flagged, v.votes, v.failure_type, v.tie) == (
        "ok",
        True,
        (True, False, True, True),
        "dsr_f3_contradictory",
        False,
    )
    tie = vote("c", 2, [ok, f1], rule="paper", k=2, errors=(), classifier={})
    assert tie.flagged is True and tie.tie and tie.failure_type == "dsr_f1_ignores"
    # equal counts of two codes: the first in FAILURE_TYPES order
    assert (
        vote("c", 2, [f3, f1], rule="paper", k=2, errors=(), classifier={}).failure_type
        == "dsr_f1_ignores"
    )
    minority = vote("c", 2, [ok, ok, f1], rule="paper", k=3, errors=(), classifier={})
    assert minority.flagged is False and minority.failure_type is None and not minority.tie
    none = vote("c", 2, [], rule="paper", k=3, errors=("sample 1: x",), classifier={})
    assert (none.status, none.flagged, none.votes, none.failure_type) == ("error", None, (), None)


def test_verdict_round_trips_through_json():
    samples = [parse_output(FAIL_ANSWER), parse_output(PASS_ANSWER), parse_output(FAIL_ANSWER)]
    for v in (
        vote(
            "case1",
            2,
            samples,
            rule="strict",
            k=3,
            errors=("sample 2 answer 1: REASON: is empty",),
            classifier={"backend": "anthropic", "votes": 3},
        ),
        vote(
            "case1", 3, [], rule="paper", k=1, errors=("sample 1: no valid answer",), classifier={}
        ),
    ):
        d = json.loads(json.dumps(v.to_dict()))
        assert ClassifierVerdict.from_dict(d) == v
    d = vote("case1", 2, samples, rule="paper", k=3, errors=(), classifier={}).to_dict()
    del d["votes"]
    with pytest.raises(ValueError, match="votes"):
        ClassifierVerdict.from_dict(d)


# ------------------------------------------------------------------------------------------------
# The offline classifier


def offline(continuation_exchange: Exchange, rule: str = "paper", history=(EX1,), votes: int = 1):
    v = OfflineClassifier(votes=votes, decision_rule=rule).classify(
        SEED, history, continuation_exchange, "case1"
    )
    assert v.status == "ok" and len(v.samples) == votes
    return v, v.samples[0]


def test_offline_good_continuation_passes():
    v, o = offline(
        ex2(
            "Okay, since one guest is vegan, let's make the main a lentil shepherd's pie for the "
            "whole dinner."
        )
    )
    assert (v.flagged, o.failure, o.memory_demonstrated, o.integration, o.confidence) == (
        False,
        False,
        True,
        "GOOD",
        "HIGH",
    )
    assert o.evidence_injection == SEED.exchanges[1].barge_in and o.said_before.endswith(
        "roasted beef"
    )
    assert "'lentil'" in o.reason and "'vegan'" in o.reason and "'main'" in o.reason
    v_strict, _ = offline(
        ex2("Okay, since one guest is VEGAN, a lentil pie as the MAIN."), rule="strict"
    )
    assert v_strict.flagged is False  # case-insensitive match


def test_offline_ignoring_the_evidence_is_f1_and_flagged():
    v, o = offline(ex2("Sure, got it. For the dinner I'd serve a roast chicken with potatoes."))
    assert (v.flagged, o.failure, o.failure_type, o.failure_turn, o.integration) == (
        True,
        True,
        "dsr_f1_ignores",
        2,
        "NONE",
    )
    assert "acknowledges" in o.reason  # contextual inertia: acknowledged, content unchanged
    assert v.failure_type == "dsr_f1_ignores"


def test_offline_stale_with_evidence_is_contradictory():
    # A.4 counts a contradictory conclusion (F3) as a failure and its decision rule flags only
    # integration NONE or no memory: keeping what the update ruled out is integration NONE.
    c = "For the vegan guest a lentil stew, and a beef roast as the dinner main for the others."
    v, o = offline(ex2(c))
    assert (o.failure_type, o.integration, o.memory_demonstrated) == (
        "dsr_f3_contradictory",
        "NONE",
        True,
    )
    assert v.flagged is True and offline(ex2(c), rule="strict")[0].flagged is True


def test_offline_no_memory_is_flagged():
    v, o = offline(ex2("Vegan food is great for your health and lots of people love it."))
    assert (o.memory_demonstrated, o.integration, o.failure_type) == (
        False,
        "GOOD",
        "dsr_f1_ignores",
    )
    assert v.flagged is True and v.failure_type == "dsr_f1_ignores"


def test_offline_earlier_stale_assumption_returning_is_f2():
    # the update of exchange 3 is applied, but exchange 2's constraint is dropped: memory NO
    v, o = offline(
        ex3("Then sparkling water for everyone to drink, and it goes well with the beef."),
        history=(EX1, ex2("a lentil pie as the main")),
    )
    assert (o.failure_type, o.integration, o.memory_demonstrated) == (
        "dsr_f2_stale_later",
        "GOOD",
        False,
    )
    assert v.flagged is True and "earlier barge-in's constraint is dropped ('beef'" in o.reason


def test_offline_matches_whole_words_only():
    # "lambda" is not "lamb", "beefy" is not "beef"; a phrase matches across line breaks
    v, o = offline(ex3("To drink, sparkling\nwater with a beefy lemon flavour."), history=(EX1,))
    assert (v.flagged, o.integration, o.failure) == (False, "GOOD", False)
    v, o = offline(ex2("The dinner main: a lambda of vegetables, fully vegan."))
    assert (o.integration, o.failure) == ("GOOD", False)


def test_offline_uninterrupted_exchange_and_votes():
    v, o = offline(EX1, history=(), votes=3)
    assert (v.flagged, v.votes, v.k, o.integration, o.evidence_injection) == (
        False,
        (False, False, False),
        3,
        "GOOD",
        "N/A",
    )
    assert len(set(v.samples)) == 1
    off_task = Exchange("case1", 1, EX1.message, "", None, None, "The weather is lovely today.")
    v, o = offline(off_task, history=())
    assert v.flagged is True and o.memory_demonstrated is False


def test_offline_without_a_script_for_the_exchange_is_an_error_not_a_flag():
    e = Exchange("case1", 7, "Anything else?", "", "Wait.", "Further Inquiry", "No.")
    v = OfflineClassifier().classify(SEED, (), e, "case1")
    assert (v.status, v.flagged, v.votes) == ("error", None, ())
    assert "no script for exchange 7" in v.errors[0]


def test_offline_classifier_reads_every_shipped_seed_script():
    # For each barge-in of the shipped pool: a continuation that says the first evidence word and
    # takes up the message's request passes under both rules; one that keeps the first stale word
    # instead is flagged. (A topic word alone, e.g. the seed's first task keyword, is no longer
    # enough to show the request was served: an answer to the barge-in alone says it too.)
    clf = {rule: OfflineClassifier(decision_rule=rule) for rule in ("paper", "strict")}
    checked = 0
    for seed in load_seeds():
        history: list[Exchange] = []
        task = seed.task_keywords[0]
        for s in seed.exchanges:
            if s.barge_in is None:
                history.append(
                    Exchange(
                        "c",
                        s.index,
                        s.message,
                        "",
                        None,
                        None,
                        f"Here is a first plan for the {task}.",
                    )
                )
                continue
            request = s.message  # the message's words, less any stale phrase it says itself
            for phrase in s.stale:
                request = re.sub(re.escape(phrase), "", request, flags=re.IGNORECASE)
            good = Exchange(
                "c",
                s.index,
                s.message,
                "So first",
                s.barge_in,
                s.barge_in_label,
                f"Okay, with {s.evidence[0]} in mind, about your question, {request}",
            )
            for rule, c in clf.items():
                v = c.classify(seed, tuple(history), good, "c")
                assert v.flagged is False and v.samples[0].integration == "GOOD", (
                    seed.seed_id,
                    s.index,
                    rule,
                )
            stale = Exchange(
                "c",
                s.index,
                s.message,
                "So first",
                s.barge_in,
                s.barge_in_label,
                f"Okay, the {task} stays with {s.stale[0]}.",
            )
            assert clf["strict"].classify(seed, tuple(history), stale, "c").flagged is True, (
                seed.seed_id,
                s.index,
            )
            history.append(good)
            checked += 1
    assert checked >= 80  # >= 40 seeds, each with at least two barge-ins


# ------------------------------------------------------------------------------------------------
# The offline text analysis (shared with the offline grader)


@pytest.mark.parametrize(
    "text, want",
    [
        ("Seven kids", "7 kids"),
        ("70,000 or seventy thousand or 70k", "70000 or 70000 or 70000"),
        ("twenty-one, two hundred and twenty", "21, 220"),
        ("six and eight", "6 and 8"),
        ("a three-way split, ten-minute", "a 3-way split, 10-minute"),
        ("two thousand two hundred", "2200"),
        ("0%", "0 percent"),
        ("someone often", "someone often"),
    ],
)
def test_numbers_are_read_in_words_or_digits(text, want):
    assert C.normalise(text) == want


@pytest.mark.parametrize(
    "text, phrase, in_use",
    [
        ("Swap the plain flour for a gluten-free blend.", "plain flour", False),
        ("Swap the rice for plain flour.", "plain flour", True),  # the replacement is in use
        ("Replace the beef with lentils.", "beef", False),
        ("Replace the lentils with beef.", "beef", True),
        ("Lentils instead of beef.", "beef", False),
        ("Instead, roast the beef.", "beef", True),  # "instead" alone introduces the new thing
        ("No more beef for the main.", "beef", False),
        ("Skip the beef.", "beef", False),
        ("Don't forget the beef.", "beef", True),
        ("Beans rather than beef.", "beef", False),
        ("The beef is out.", "beef", False),
        ("No need to restart the router yourself.", "restart the router", False),
        ("No problem, restart the router.", "restart the router", True),
        (
            "no problem i would restart the router",
            "restart the router",
            True,
        ),  # unpunctuated speech
        (
            "No, I'd still restart the router.",
            "restart the router",
            True,
        ),  # the clause ends at the comma
        ("It can take all seven kids.", "7 kids", True),
        ("Crushed pistachios on top.", "pistachio", True),
        ("A beefy tomato.", "beef", False),
    ],
)
def test_what_a_reply_names_as_replaced_is_not_in_use(text, phrase, in_use):
    assert bool(C.still_used(text, [phrase])) is in_use
    if in_use:
        assert C.said(text, [phrase]) == [phrase]


def test_a_phrase_named_as_replaced_is_still_said():
    assert (
        C.said("Lentils instead of beef.", ["beef"]) == ["beef"]
        and C.still_used("Lentils instead of beef.", ["beef"]) == []
    )


def test_serves_task_reads_the_request_and_the_plan_not_the_topic():
    def task(text: str) -> C.TaskCheck:
        return C.serves_task(
            (EX1,), ex2(text, before="For the main I would go with a slow roasted beef")
        )

    assert task("A lentil pie as the main course.").served  # the request's words
    assert task("Keep it slow: a lentil pie.").served  # the plan's words
    # the standing topic (earlier messages: "dinner", "menu", "friends") and the barge-in's own words
    # ("vegan") say nothing about this request
    assert not task("Vegan dinners are great and your friends will love the menu.").served
    assert (
        "main" in task("x").anchors
        and "dinner" not in task("x").anchors
        and "vegan" not in task("x").anchors
    )


def test_offline_contextual_inertia_in_other_words_and_a_short_reply_that_serves_the_task():
    # the old plan goes on (a stale word in use) although no request word is said: memory YES
    v, o = offline(ex2("Sure, noted. Roast the beef low and slow for four hours."))
    assert (v.flagged, o.memory_demonstrated, o.integration, o.failure_type) == (
        True,
        True,
        "NONE",
        "dsr_f1_ignores",
    )
    v, o = offline(ex2("Then a lentil main."))
    assert (v.flagged, o.memory_demonstrated, o.integration) == (False, True, "GOOD")


WINDOW = "Does it change if we're only open from nine till one now?"
LOAN = "But I'm paying off a student loan of about two hundred a month."


@pytest.mark.parametrize(
    "barge_in, reply, wrong",
    [
        # a time outside the window the update set, read on a 12-hour clock from its start
        (WINDOW, "Then two shifts: nine to eleven, and eleven to three.", ["3 is outside"]),
        (WINDOW, "Then two shifts: nine to eleven, and eleven till one.", []),
        (WINDOW, "Then from 9 until 1 in one shift.", []),
        (
            "Can we start at eight and finish at noon?",
            "Then 8 to 11 and 11 to 2.",
            [],
        ),  # no window said: no check
        # an outgoing amount added to a figure said before the sum; taken away is right
        (
            LOAN,
            "With two thousand coming in and the loan on top you have two thousand two hundred.",
            ["2000 plus"],
        ),
        (LOAN, "With two thousand coming in, minus the loan, you have eighteen hundred.", []),
        (
            LOAN,
            "Out of 2,200 a month, the loan leaves 2,000 to plan with.",
            [],
        ),  # the sum came first: taken away
        (
            "I'm paid two hundred extra a month now.",
            "So 2000 plus 200 makes 2200.",
            [],
        ),  # money in, not out
    ],
)
def test_misapplied_numbers(barge_in, reply, wrong):
    got = C.misapplied_numbers(barge_in, reply)
    assert len(got) == len(wrong) and all(g.startswith(w) for g, w in zip(got, wrong)), got


def test_offline_misapplied_update_is_inertia_even_with_the_evidence_words():
    s2 = dataclasses.replace(SEED.exchanges[1], barge_in=WINDOW, evidence=("nine", "one"), stale=())
    seed = dataclasses.replace(SEED, exchanges=(SEED.exchanges[0], s2))
    e = Exchange(
        "case1",
        2,
        s2.message,
        "For the main",
        WINDOW,
        s2.barge_in_label,
        "Right, nine till one: the main course from nine to eleven, dessert eleven to three.",
    )
    v = OfflineClassifier(votes=1).classify(seed, (EX1,), e, "case1")
    o = v.samples[0]
    assert (v.flagged, o.memory_demonstrated, o.integration, o.failure_type, o.confidence) == (
        True,
        True,
        "NONE",
        "dsr_f1_ignores",
        "HIGH",
    )
    assert "applied wrongly (3 is outside the window 9 to 1" in o.reason


# ------------------------------------------------------------------------------------------------
# Construction


def test_make_classifier_settings(tmp_path):
    c = make_classifier({"backend": "offline", "votes": 3, "decision_rule": "strict"}, tmp_path)
    assert (
        isinstance(c, OfflineClassifier)
        and c.identity()["votes"] == 3
        and c.identity()["rule"] == "strict"
    )
    llm = make_classifier(
        {"backend": "anthropic", "base_url": "http://127.0.0.1:9", "votes": 5, "seed": 7}, tmp_path
    )
    assert isinstance(llm, LLMClassifier)
    assert [cl.seed for cl in llm.clients] == [7, 8, 9, 10, 11]
    assert all(cl.cache_dir == tmp_path / "classifier" for cl in llm.clients)
    ident = llm.identity()
    assert {
        k: ident[k]
        for k in ("backend", "model", "temperature", "votes", "rule", "seed", "endpoint")
    } == {
        "backend": "anthropic",
        "model": "claude-sonnet-4-6",
        "temperature": 1.0,
        "votes": 5,
        "rule": "paper",
        "seed": 7,
        "endpoint": "http://127.0.0.1:9",
    }
    assert ident["prompt_hash"] == C.llm_prompt_hash() and len(ident["prompt_hash"]) == 16


def test_the_benchmark_config_node_builds_both_backends(tmp_path):
    node = OmegaConf.load(CONF_DIR / "benchmark" / "echochain.yaml").classifier
    assert isinstance(make_classifier(node, tmp_path), OfflineClassifier)
    llm_node = OmegaConf.merge(node, {"backend": "anthropic"})
    ident = make_classifier(llm_node, tmp_path).identity()
    # model null: the backend's default
    assert (ident["votes"], ident["rule"], ident["model"]) == (
        node.votes,
        node.decision_rule,
        "claude-sonnet-4-6",
    )


@pytest.mark.parametrize(
    "settings,field",
    [
        ({"backend": "offline", "vote": 3}, "benchmark.classifier.vote: unknown key"),
        ({"backend": "gpt"}, "benchmark.classifier.backend"),
        ({"votes": 0}, "benchmark.classifier.votes"),
        ({"votes": True}, "benchmark.classifier.votes"),
        ({"votes": "3"}, "benchmark.classifier.votes"),
        ({"decision_rule": "any"}, "benchmark.classifier.decision_rule"),
        ({"max_parse_retries": -1}, "benchmark.classifier.max_parse_retries"),
        ({"max_attempts": 3}, "benchmark.classifier.max_attempts"),
        ({"backend": "anthropic", "model": "two words"}, "benchmark.classifier.model"),
        (
            {"backend": "anthropic", "base_url": "http://example.com"},
            "benchmark.classifier.base_url",
        ),
    ],
)
def test_make_classifier_rejects_bad_settings(tmp_path, settings, field):
    with pytest.raises(ConfigError) as e:
        make_classifier(settings, tmp_path)
    assert str(e.value).startswith(field) and "\n" not in str(e.value)
    if "unknown key" in field:
        assert "votes" in str(e.value) and "decision_rule" in str(
            e.value
        )  # the valid keys are listed


def test_prompt_hash_covers_the_templates(monkeypatch):
    h = C.llm_prompt_hash()
    monkeypatch.setattr(C, "USER_TEMPLATE", C.USER_TEMPLATE + " ")
    assert C.llm_prompt_hash() != h


# ------------------------------------------------------------------------------------------------
# The LLM classifier against the local Messages-API stand-in


def llm(server, tmp_path, **kw) -> LLMClassifier:
    c = make_classifier(
        {"backend": "anthropic", "base_url": server.base_url, "votes": 1, "timeout_s": 5.0, **kw},
        tmp_path,
    )
    for client in c.clients:  # fast retries for the test; the defaults wait seconds
        client.backoff_s, client.max_backoff_s = 0.001, 0.01
    return c


GOOD_EX2 = ex2("Oh okay, then the main becomes a lentil pie for the whole dinner.")


def test_llm_k_samples_voted_and_the_request_holds_the_segmented_transcript(fake_api, tmp_path):
    fake_api.push(text(PASS_ANSWER), text(FAIL_ANSWER), text(FAIL_ANSWER))
    clf = llm(fake_api, tmp_path, votes=3)
    v = clf.classify(SEED, (EX1,), GOOD_EX2, "case1")
    assert (v.status, v.flagged, v.votes, v.failure_type, v.k, v.errors) == (
        "ok",
        True,
        (False, True, True),
        "dsr_f1_ignores",
        3,
        (),
    )
    assert v.classifier == clf.identity()
    reqs = fake_api.message_requests
    assert (
        len(reqs) == 3 and len(list((tmp_path / "classifier").rglob("*.json"))) == 3
    )  # one entry per sample
    body = reqs[0].body
    assert all(r.body["system"] == body["system"] == C.system_prompt() for r in reqs)
    system, prompt = body["system"], body["messages"][0]["content"]
    assert DSR.definition in system and all(code in system for code, _ in DSR.fail_criteria)
    assert all(t in system for t in FAILURE_TYPES) and all(f"\n{f}: " in system for f in C.FIELDS)
    s2 = SEED.exchanges[1]
    assert (
        f"--- Exchange 1 ---\nUSER (message): {EX1.message}\nASSISTANT (whole answer, not interrupted): "
        f"{EX1.continuation}" in prompt
    )
    assert (
        f"--- Exchange 2 (the exchange to evaluate) ---\nUSER (message): {s2.message}\n"
        f"ASSISTANT (before the barge-in): {GOOD_EX2.answer_before}\n"
        f"USER (barge-in, {s2.barge_in_label}): {s2.barge_in}\n"
        f"ASSISTANT (continuation, from the barge-in on): {GOOD_EX2.continuation}"
    ) in prompt
    assert "Evaluate exchange 2" in prompt and SEED.topic_description in prompt


def test_llm_malformed_answer_is_asked_again_and_counted(fake_api, tmp_path):
    fake_api.push(text("**FAILURE_DETECTED: NO**\nAll good."), text(PASS_ANSWER))
    v = llm(fake_api, tmp_path, decision_rule="strict").classify(SEED, (EX1,), GOOD_EX2, "case1")
    assert (v.status, v.flagged, len(v.samples)) == ("ok", False, 1)
    assert len(v.errors) == 1 and v.errors[0].startswith("sample 1 answer 1: FAILURE_DETECTED: ")
    first, second = [r.body["messages"][0]["content"] for r in fake_api.message_requests]
    assert (
        second.startswith(first)
        and "FAILURE_DETECTED: the first line must be exactly" in second[len(first) :]
    )


def test_llm_all_answers_malformed_is_a_classifier_error(fake_api, tmp_path):
    fake_api.push(
        text("I think it failed."),
        text(answer(CONFIDENCE="SURE")),
        text(answer(FAILURE_TYPE="N/A")),
    )
    v = llm(fake_api, tmp_path, max_parse_retries=2).classify(SEED, (EX1,), GOOD_EX2, "case1")
    assert (v.status, v.flagged, v.votes, v.samples) == ("error", None, (), ())
    assert len(fake_api.message_requests) == 3
    assert "no valid answer in 3 attempt(s)" in v.errors[0] and "FAILURE_TYPE" in v.errors[0]


def test_llm_one_sample_failing_leaves_the_others(fake_api, tmp_path):
    fake_api.push(text(FAIL_ANSWER), text("nonsense"), text("nonsense"))
    v = llm(fake_api, tmp_path, votes=2, max_parse_retries=1).classify(
        SEED, (EX1,), GOOD_EX2, "case1"
    )
    assert (v.status, v.flagged, v.votes, v.k) == ("ok", True, (True,), 2)
    assert v.errors[-1].startswith("sample 2: no valid answer in 2 attempt(s)")


def test_llm_server_errors_and_rate_limits_are_retried_by_the_client(fake_api, tmp_path):
    fake_api.push(
        error(500),
        error(429, "rate_limit_error", "slow down", {"retry-after": "0"}),
        text(FAIL_ANSWER),
    )
    v = llm(fake_api, tmp_path).classify(SEED, (EX1,), GOOD_EX2, "case1")
    assert (v.status, v.flagged, v.errors) == ("ok", True, ())
    assert len(fake_api.message_requests) == 3


def test_llm_request_rejected_is_a_classifier_error_never_a_flag(fake_api, tmp_path):
    fake_api.push(error(400, "invalid_request_error", "prompt too long"))
    v = llm(fake_api, tmp_path).classify(SEED, (EX1,), GOOD_EX2, "case1")
    assert (v.status, v.flagged) == ("error", None)
    assert "request failed" in v.errors[0] and "prompt too long" in v.errors[0]


def test_llm_cached_rerun_sends_nothing(fake_api, tmp_path):
    fake_api.push(text("garbage"), text(FAIL_ANSWER), text(PASS_ANSWER), text(PASS_ANSWER))
    first = llm(fake_api, tmp_path, votes=3).classify(SEED, (EX1,), GOOD_EX2, "case1")
    n = len(fake_api.message_requests)
    assert n == 4
    fake_api.responder = lambda body: pytest.fail("a cached rerun sent a request")
    again = llm(fake_api, tmp_path, votes=3).classify(SEED, (EX1,), GOOD_EX2, "case1")
    assert again == first and len(fake_api.message_requests) == n


def test_llm_config_errors_and_unavailable_endpoint_propagate(fake_api, tmp_path, monkeypatch):
    clf = llm(fake_api, tmp_path)
    monkeypatch.delenv("ANTHROPIC_API_KEY")
    with pytest.raises(LLMConfigError, match="ANTHROPIC_API_KEY"):
        clf.check_ready()
    with pytest.raises(LLMConfigError, match="ANTHROPIC_API_KEY"):
        clf.classify(SEED, (EX1,), GOOD_EX2, "case1")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test-dummy")
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    closed = make_classifier(
        {"backend": "anthropic", "base_url": f"http://127.0.0.1:{port}", "votes": 1}, tmp_path
    )
    for client in closed.clients:
        client.backoff_s, client.max_backoff_s = 0.001, 0.01
    with pytest.raises(LLMUnavailable):
        closed.classify(SEED, (EX1,), GOOD_EX2, "case1")
    assert fake_api.message_requests == []
