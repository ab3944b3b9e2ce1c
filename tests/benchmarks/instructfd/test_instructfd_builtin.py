from __future__ import annotations

import pytest

from fdeval.benchmarks.instructfd.builtin import (
    BUILTIN_CONVERSATIONS,
    Conversation,
    M,
    U,
    validate_conversation,
)
from fdeval.benchmarks.instructfd.generate import build_reference, plan_conversation
from fdeval.benchmarks.instructfd.instructions import SCENARIOS
from fdeval.benchmarks.instructfd.records import POLICIES, ReferenceLine


def test_builtin_set_size_and_coverage() -> None:
    convs = BUILTIN_CONVERSATIONS
    assert len(convs) >= 8
    assert len({c.conversation_id for c in convs}) == len(convs)
    instructed = [p for c in convs for p in c.policies]
    assert len(instructed) >= 10
    assert set(instructed) == set(POLICIES)
    for c in convs:
        validate_conversation(c)
        assert c.scenario in SCENARIOS


def test_variants_are_seeded_and_deterministic() -> None:
    conv = next(c for c in BUILTIN_CONVERSATIONS if c.conversation_id == "bakery_phone_number")
    assert conv.render(7) == conv.render(7)
    rendered = {conv.render(seed)[1][2].text for seed in range(20)}
    assert len(rendered) > 1  # the seed changes the wording
    for seed in range(5):
        persona, lines = conv.render(seed)
        assert "{" not in persona and all("{" not in line.text for line in lines)


def test_reference_tags_proactive() -> None:
    lines = (
        U("can you help me"),
        M("sure"),
        U("so first this, <backchannel: mm-hmm> <pause: 1> then that <take-turn: got it>"),
    )
    assert build_reference(lines) == (
        ReferenceLine("user", "can you help me", ""),
        ReferenceLine("model", "sure", "take-turn"),
        ReferenceLine("user", "so first this,", ""),
        ReferenceLine("model", "mm-hmm", "backchannel"),
        ReferenceLine("user", "then that", ""),
        ReferenceLine("model", "got it", "take-turn"),
    )


def test_reference_tags_responsive() -> None:
    lines = (
        U("how do I do it"),
        M("start here, <backchannel: uh-huh> then go on"),
        M("and finish."),
        U("and then"),
        M("well, first <interrupt: wait>"),
        M("yes?"),
    )
    assert build_reference(lines) == (
        ReferenceLine("user", "how do I do it", ""),
        ReferenceLine("model", "start here,", "take-turn"),
        ReferenceLine("user", "uh-huh", "backchannel"),
        ReferenceLine("model", "then go on", ""),
        ReferenceLine("model", "and finish.", ""),
        ReferenceLine("user", "and then", ""),
        ReferenceLine("model", "well, first", "take-turn"),
        ReferenceLine("user", "wait", "interrupt"),
        ReferenceLine("model", "yes?", "take-turn"),
    )


def test_turn_plan_labels_and_barge_ins() -> None:
    conv = next(c for c in BUILTIN_CONVERSATIONS if c.scenario == "Short Stop Repair")
    plan = plan_conversation(conv, 0)
    assert [(t.label, t.turn_type, t.subtype) for t in plan.turns] == [
        ("turn1", "take-turn", None),
        ("turn2_interrupt", "barge-in", "interrupt"),
        ("turn3", "take-turn", None),
    ]


@pytest.mark.parametrize(
    "conv,fragment",
    [
        (Conversation("x", "Nope", "p", (U("hi"),)), "unknown scenario"),
        (Conversation("x", "Cognitive Pause", "p", (M("hi"),)), "start with a user line"),
        (
            Conversation("x", "Cognitive Pause", "p {name}", (U("hi <pause: 1> there"),)),
            "lacks slots",
        ),
        (
            Conversation("x", "Cognitive Pause", "p", (U("I have 3 cats <pause: 1> yes"),)),
            "numbers as words",
        ),
        (Conversation("x", "Cognitive Pause", "p", (U("hi there"),)), "needs a <pause:>"),
        (
            Conversation(
                "x", "Cognitive Pause", "p", (U("hi <backchannel: yeah> <pause: 1> there"),)
            ),
            "exactly when",
        ),
        (
            Conversation("x", "User Filler Pause", "p", (U("hi um <pause: 1> there"),)),
            "exactly when",
        ),
        (
            Conversation("x", "User Continuer", "p", (U("hi"), M("well <interrupt: stop>"))),
            "expected exactly one",
        ),
        (
            Conversation(
                "x", "Add Constraint", "p", (U("hi"), M("well <interrupt: stop> and more"))
            ),
            "own line",
        ),
        (
            Conversation("x", "Add Constraint", "p", (U("hi"), M("<interrupt: stop> well"))),
            "model speech before",
        ),
        (
            Conversation("x", "Add Constraint", "p", (U("hi"), M("well <pause: 1> so"))),
            "only user barge-in",
        ),
    ],
)
def test_validate_conversation_rejects(conv: Conversation, fragment: str) -> None:
    with pytest.raises(ValueError, match="conversation 'x'") as info:
        validate_conversation(conv)
    assert fragment in str(info.value)
