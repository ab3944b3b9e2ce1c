"""EchoChain's rubric drafter and grader, offline and LLM.

The LLM paths run the real anthropic SDK against a local stand-in of the Messages API
(tests/helpers/fake_messages_server.py, 127.0.0.1 only, dummy key): nothing reaches a hosted model.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from helpers.fake_messages_server import DUMMY_KEY, fake_api, text  # noqa: F401

from echochain_fixtures import SEED, exchange
from fdeval.benchmarks.echochain.rubrics import (
    DraftError,
    Grade,
    GradeError,
    LLMDrafter,
    LLMGrader,
    OfflineDrafter,
    OfflineGrader,
    Rubric,
    make_drafter,
    make_grader,
    parse_draft,
    parse_grades,
)
from fdeval.benchmarks.echochain.seeds import Criterion
from fdeval.errors import FdevalError

CASE = "case-1"
VEGAN_REPLY = "Then a lentil curry makes a main that works for the whole dinner."
STALE_REPLY = "Sure, I'll keep that in mind. A beef stew would be a lovely main."


def llm_settings(server, **kw) -> dict:
    return {
        "backend": "anthropic",
        "base_url": server.base_url,
        "max_attempts": 3,
        "timeout_s": 5.0,
        "max_retries": 0,
        **kw,
    }


def prompt_of(request) -> str:
    return request.body["messages"][0]["content"]


def seed_rubric(index: int = 2) -> Rubric:
    return OfflineDrafter().draft(SEED, (), exchange(index, ""), CASE)


# ------------------------------------------------------------------------------------------------
# Offline


def test_offline_drafter_returns_the_seed_criteria():
    drafter = make_drafter({"backend": "offline"}, Path("unused"))
    r = drafter.draft(SEED, (exchange(1, "A menu."),), exchange(2, "whatever"), CASE)
    assert (r.case_id, r.exchange, r.source) == (CASE, 2, "seed")
    assert r.criteria == SEED.exchanges[1].criteria and len(r.criteria) == 3
    with pytest.raises(DraftError, match="none numbered 4"):
        drafter.draft(SEED, (), exchange(3, "x").__class__(CASE, 4, "m", "", None, None, "x"), CASE)


def test_offline_grader_passes_a_continuation_that_took_the_update_up():
    grades = make_grader({"backend": "offline"}, Path("unused")).grade(
        seed_rubric(), (), exchange(2, VEGAN_REPLY)
    )
    assert [g.criterion_id for g in grades] == ["ex2.c1", "ex2.c2", "ex2.c3"]
    assert all(g.passed for g in grades) and {g.source for g in grades} == {"auto"}
    assert grades[0].reason == "the continuation says 'lentil'"


def test_offline_grader_fails_a_stale_continuation_with_reasons():
    c1, c2, c3 = OfflineGrader().grade(seed_rubric(), (), exchange(2, STALE_REPLY))
    assert not c1.passed and "says none of 'vegan', 'plant-based', 'lentil'" in c1.reason
    assert not c2.passed and c2.reason == "the continuation says 'beef' (forbidden)"
    assert not c3.passed  # neither menu nor dinner anywhere in the answer


def test_offline_grader_scope_word_boundaries_and_case():
    crit = (
        Criterion("c.cont", "t", require_any=("dinner",)),
        Criterion("c.ans", "t", require_any=("dinner",), scope="answer"),
        Criterion("c.phrase", "t", require_any=("one hour",)),
        Criterion("c.forbid", "t", forbid=("beef",)),
    )
    rubric = Rubric(CASE, 2, crit, "human")
    # "dinner" only before the barge-in: the answer scope sees it, the continuation scope does not
    g = OfflineGrader().grade(
        rubric, (), exchange(2, "Make the main in ONE   HOUR, no beefsteak.", before="For dinner,")
    )
    assert [x.passed for x in g] == [False, True, True, True]  # "beefsteak" is not the word "beef"
    g = OfflineGrader().grade(rubric, (), exchange(2, "The main: beefy dinners in one-hour slots."))
    # a final plural matches ("dinners"), a hyphenated word is another word ("one-hour"), "beefy" is not "beef"
    assert [x.passed for x in g] == [True, True, False, True]
    g = OfflineGrader().grade(rubric, (), exchange(2, "The main: BEEF stays."))
    assert [x.passed for x in g] == [
        False,
        False,
        False,
        False,
    ]  # c.cont: says no "dinner" and keeps the beef
    with pytest.raises(ValueError, match="rubric of exchange 2 applied to exchange 3"):
        OfflineGrader().grade(rubric, (), exchange(3, "x"))


def test_offline_grader_does_not_count_what_a_reply_names_as_replaced():
    # issue 26: a correct reply may name the item it replaces; a forbid word counts only in use
    crit = (Criterion("c.forbid", "t", forbid=("beef", "chicken")),)
    rubric = Rubric(CASE, 2, crit, "human")
    for reply in (
        "For the main, swap the beef for a lentil stew.",
        "For the main, a lentil stew instead of beef.",
        "Replace the chicken with tofu in the main.",
        "For the main, no more beef: lentils.",
        "Skip the chicken; the main is a bean chilli.",
        "A bean chilli as the main rather than beef.",
        "The main: the beef is out, a lentil stew is in.",
    ):
        (g,) = OfflineGrader().grade(rubric, (), exchange(2, reply))
        assert g.passed and "only as replaced or ruled out" in g.reason, reply
    for reply in (
        "For the main, beef with a lentil side.",
        "Don't forget the chicken for the main.",
        "Lentils for the vegans, but beef for the main.",
    ):
        (g,) = OfflineGrader().grade(rubric, (), exchange(2, reply))
        assert not g.passed, reply


def test_offline_grader_reads_numbers_spelled_out_or_in_digits():
    need = Rubric(CASE, 2, (Criterion("c.req", "t", require_any=("seven",)),), "human")
    ban = Rubric(CASE, 2, (Criterion("c.forbid", "t", forbid=("seventy thousand",)),), "human")
    for reply, req, forbid in (
        ("The main can feed all 7 of them.", True, True),
        ("The main can feed all Seven; it costs 70,000.", True, False),
        ("The main costs 70k, for six.", False, False),
        ("The main costs seventy   thousand.", False, False),
    ):
        assert [
            OfflineGrader().grade(r, (), exchange(2, reply))[0].passed for r in (need, ban)
        ] == [req, forbid], reply


def test_offline_grader_fails_an_uptake_check_when_the_task_is_dropped_or_contradicted():
    crit = (
        Criterion("c1", "Proposes a vegan main", require_any=("vegan", "lentil")),
        Criterion("c2", "Drops the meat main", forbid=("beef",)),
    )
    rubric = Rubric(CASE, 2, crit, "human")
    # objective displacement: only the barge-in answered, the main course never given
    c1, c2 = OfflineGrader().grade(
        rubric, (), exchange(2, "Vegan diets are healthy and lots of people love them.")
    )
    assert not c1.passed and "no longer serves the request" in c1.reason and c2.passed
    # contradictory (A.4 DSR-F3): the update named next to what it ruled out
    c1, c2 = OfflineGrader().grade(
        rubric, (), exchange(2, "A lentil main for the vegans and a beef main for the rest.")
    )
    assert not c1.passed and "which the rubric rules out" in c1.reason and not c2.passed


# ------------------------------------------------------------------------------------------------
# LLM drafter

DRAFT = {
    "criteria": [
        {
            "text": "Proposes a main course with no animal products",
            "require_any": ["vegan", "lentil", "tofu"],
            "scope": "continuation",
        },
        {"text": "Does not keep the roast chicken", "forbid": ["chicken"]},
    ]
}


def test_llm_drafter_parses_a_draft_and_never_sees_the_reply(fake_api, tmp_path):
    no_check = {"criteria": [DRAFT["criteria"][0], {"text": "no keyword check"}]}
    fake_api.push(text(json.dumps(no_check)), text("```json\n" + json.dumps(DRAFT) + "\n```"))
    drafter = make_drafter(llm_settings(fake_api), tmp_path)
    assert isinstance(drafter, LLMDrafter)
    ex2 = exchange(2, "SECRET-CONTINUATION words", before="SECRET-BEFORE words")
    r = drafter.draft(SEED, (exchange(1, "A roast chicken dinner menu."),), ex2, CASE)
    assert (r.source, r.exchange, [c.criterion_id for c in r.criteria]) == (
        "draft",
        2,
        ["ex2.d1", "ex2.d2"],
    )
    assert r.criteria[1] == Criterion(
        "ex2.d2", "Does not keep the roast chicken", (), ("chicken",), "continuation"
    )
    first, second = fake_api.message_requests
    p = prompt_of(first)
    assert SEED.topic in p and SEED.exchanges[1].barge_in in p and "roast chicken dinner" in p
    assert "SECRET" not in p  # the rubric is the same for every model that answers the exchange
    assert "REJECTED" in prompt_of(second) and "give require_any or forbid" in prompt_of(second)
    # a rerun reads the cache; no key in it
    again = make_drafter(llm_settings(fake_api), tmp_path).draft(
        SEED, (exchange(1, "A roast chicken dinner menu."),), ex2, CASE
    )
    assert again == r and len(fake_api.message_requests) == 2
    assert not any(DUMMY_KEY in f.read_text() for f in (tmp_path / "drafter").rglob("*.json"))


@pytest.mark.parametrize(
    "answer, reason",
    [
        ("Here you go: " + json.dumps(DRAFT), "one JSON object and nothing else"),
        (json.dumps({"criteria": DRAFT["criteria"][:1]}), "1 criteria; write between 2 and 6"),
        (json.dumps({"criteria": DRAFT["criteria"], "notes": "x"}), "no other key"),
        (
            json.dumps({"criteria": [{**DRAFT["criteria"][0], "weight": 2}, DRAFT["criteria"][1]]}),
            "criteria[0].weight: unknown key",
        ),
        (
            json.dumps(
                {"criteria": [{**DRAFT["criteria"][0], "scope": "reply"}, DRAFT["criteria"][1]]}
            ),
            "criteria[0].scope",
        ),
        (
            json.dumps({"criteria": [DRAFT["criteria"][0], {"text": "", "forbid": ["x"]}]}),
            "criteria[1].text",
        ),
        (
            json.dumps({"criteria": [DRAFT["criteria"][0], {"text": "t", "forbid": "chicken"}]}),
            "list of non-empty strings",
        ),
        ('{"criteria": [', "not valid JSON"),
    ],
)
def test_parse_draft_rejects(answer, reason):
    with pytest.raises(ValueError) as e:
        parse_draft(answer, 2)
    assert reason in str(e.value)


# ------------------------------------------------------------------------------------------------
# LLM grader


def grades_json(*items) -> str:
    return json.dumps(
        {"grades": [{"criterion_id": c, "passed": p, "reason": r} for c, p, r in items]}
    )


def test_llm_grader_reasks_then_grades_in_rubric_order(fake_api, tmp_path):
    good = grades_json(
        ("ex2.c3", True, "mentions the  dinner"),
        ("ex2.c1", True, "a lentil curry"),
        ("ex2.c2", False, "still\nbeef"),
    )
    fake_api.push(text(grades_json(("ex2.c1", True, "ok"))), text(good))
    grader = make_grader(llm_settings(fake_api), tmp_path)
    assert isinstance(grader, LLMGrader)
    grades = grader.grade(
        seed_rubric(), (exchange(1, "A menu."),), exchange(2, VEGAN_REPLY, before="For the main,")
    )
    assert grades == (
        Grade("ex2.c1", True, "a lentil curry", "auto"),
        Grade("ex2.c2", False, "still beef", "auto"),
        Grade("ex2.c3", True, "mentions the dinner", "auto"),
    )
    first, second = fake_api.message_requests
    p = prompt_of(first)
    assert (
        VEGAN_REPLY in p
        and "For the main," in p
        and "ex2.c3 (scope: answer)" in p
        and "A menu." in p
    )
    assert "no grade for ex2.c2, ex2.c3" in prompt_of(second)


def test_llm_grader_gives_up_with_a_grade_error(fake_api, tmp_path):
    fake_api.push(*(text("All criteria pass.") for _ in range(2)))
    grader = make_grader(llm_settings(fake_api, max_attempts=2), tmp_path)
    with pytest.raises(GradeError) as e:
        grader.grade(seed_rubric(), (), exchange(2, VEGAN_REPLY))
    assert not isinstance(e.value, FdevalError) and (e.value.case_id, e.value.exchange) == (CASE, 2)
    assert "no valid answer in 2 attempt(s)" in str(e.value) and len(fake_api.message_requests) == 2
    assert grader.grade(Rubric(CASE, 2, (), "draft"), (), exchange(2, "x")) == ()  # nothing to ask


@pytest.mark.parametrize(
    "answer, reason",
    [
        (
            grades_json(("ex2.c1", True, "a"), ("ex2.c2", True, "b"), ("ex2.c9", True, "c")),
            "'ex2.c9' is not in the rubric",
        ),
        (
            grades_json(("ex2.c1", True, "a"), ("ex2.c1", True, "b"), ("ex2.c2", True, "c")),
            "'ex2.c1' graded twice",
        ),
        (
            grades_json(("ex2.c1", "yes", "a"), ("ex2.c2", True, "b"), ("ex2.c3", True, "c")),
            "passed: must be true or false",
        ),
        (
            grades_json(("ex2.c1", True, " "), ("ex2.c2", True, "b"), ("ex2.c3", True, "c")),
            "reason: missing or empty",
        ),
        (
            json.dumps({"grades": [{"criterion_id": "ex2.c1", "passed": True}]}),
            "exactly criterion_id, passed and reason",
        ),
        ("[]", "one JSON object"),
    ],
)
def test_parse_grades_rejects(answer, reason):
    with pytest.raises(ValueError) as e:
        parse_grades(answer, seed_rubric())
    assert reason in str(e.value)
