from __future__ import annotations

from collections import Counter

import pytest

from fdeval.benchmarks.instructfd.instructions import (
    INSTRUCTION_TEMPLATES,
    PROACTIVE,
    RESPONSIVE,
    SCENARIOS,
    primary_policy,
    render_instruction,
)
from fdeval.benchmarks.instructfd.records import POLICIES


def test_five_instructions_with_one_trigger_slot() -> None:
    assert set(INSTRUCTION_TEMPLATES) == set(POLICIES)
    for text in INSTRUCTION_TEMPLATES.values():
        assert text.count("{trigger}") == 1


def test_scenario_counts_per_instruction() -> None:
    assert len(SCENARIOS) == 29
    counts = Counter(primary_policy(name) for name in SCENARIOS)
    assert counts == {
        "backchannel": 5,
        "listen": 4,
        "interrupt": 5,
        "continue": 5,
        "acknowledge": 10,
    }
    groups = Counter(s.group for s in SCENARIOS.values())
    assert groups == {PROACTIVE: 14, RESPONSIVE: 15}


def test_listen_assignment_rule() -> None:
    for name, s in SCENARIOS.items():
        first = s.policies[0]
        if first == "backchannel":
            expected = (
                ("backchannel",) if name == "User Attention Check" else ("backchannel", "listen")
            )
        elif first == "interrupt":
            expected = ("interrupt", "listen")
        else:
            expected = (first,)
        assert s.policies == expected, name
    # Table 2: 96 listen-only + 4*24 backchannel + 5*24 interrupt conversations = 312 listen cases
    with_listen = sum("listen" in s.policies for s in SCENARIOS.values())
    assert with_listen == 4 + 4 + 5


@pytest.mark.parametrize(
    "name,group,policies",
    [
        ("Sequential Info Capture", PROACTIVE, ("listen",)),
        ("Floor Hold Signal", PROACTIVE, ("backchannel", "listen")),
        ("Self Directed Question", PROACTIVE, ("listen",)),
        ("Word Retrieval Assist", PROACTIVE, ("interrupt", "listen")),
        ("User Amusement", RESPONSIVE, ("continue",)),
        ("Personal Context", RESPONSIVE, ("acknowledge",)),
    ],
)
def test_known_assignments(name: str, group: str, policies: tuple[str, ...]) -> None:
    assert SCENARIOS[name].group == group and SCENARIOS[name].policies == policies


def test_group_matches_policies() -> None:
    for s in SCENARIOS.values():
        proactive = set(s.policies) <= {"backchannel", "interrupt", "listen"}
        assert (s.group == PROACTIVE) == proactive
        assert s.description.strip() and s.trigger.startswith("the user ")


def test_render_instruction_fills_trigger_and_tells_policies_apart() -> None:
    for name, s in SCENARIOS.items():
        for policy in s.policies:
            text = render_instruction(policy, name)
            assert s.trigger in text and "{" not in text
    bc = render_instruction("backchannel", "User Filler Pause")
    ls = render_instruction("listen", "User Filler Pause")
    assert "listener signal" in bc and "silent" in bc
    assert "no listener signals" in ls and "never cut in" in ls
    assert "interrupt right away" in render_instruction("interrupt", "Safety Correction")
    cont = render_instruction("continue", "User Continuer")
    ack = render_instruction("acknowledge", "Short Stop Repair")
    assert "keep talking" in cont and "stop and let them speak" in cont
    assert "acknowledge" in ack and "keep talking through those" in ack


def test_render_instruction_rejects_unassigned() -> None:
    with pytest.raises(ValueError, match="not run under"):
        render_instruction("listen", "User Attention Check")
    with pytest.raises(KeyError):
        render_instruction("listen", "No Such Scenario")
