"""The offline text backend and the planning step: determinism, validity, variety, Table 2 counts."""

from __future__ import annotations

import re
from collections import Counter

import pytest

from fdeval.benchmarks.instructfd.builtin import validate_conversation
from fdeval.benchmarks.instructfd.instructions import SCENARIOS
from fdeval.benchmarks.instructfd.markers import parse_markers
from fdeval.benchmarks.instructfd.offline import BUILDERS, OFFLINE_VERSION, OfflineBackend
from fdeval.benchmarks.instructfd.offline.common import Ctx
from fdeval.benchmarks.instructfd.offline.grammar import (
    expand,
    number_words,
    second_person,
    spell_digits,
    tidy,
)
from fdeval.benchmarks.instructfd.personas import load_personas
from fdeval.benchmarks.instructfd.pipeline import (
    GenerationConfig,
    OfflineTextBackend,
    balanced_order,
    expected_counts,
    plan_dataset,
    variety,
)
from fdeval.benchmarks.instructfd.specs import (
    SPECS,
    check_against_spec,
    spoken_text_problem,
)
from fdeval.benchmarks.instructfd.records import POLICIES

TABLE_2 = {
    "scenarios": {"backchannel": 5, "listen": 4, "interrupt": 5, "continue": 5, "acknowledge": 10},
    "conversations": {
        "backchannel": 120,
        "listen": 96,
        "interrupt": 120,
        "continue": 120,
        "acknowledge": 240,
    },
    "instructed": {
        "backchannel": 120,
        "listen": 312,
        "interrupt": 120,
        "continue": 120,
        "acknowledge": 240,
    },
}


@pytest.fixture(scope="module")
def full_plans():
    personas = load_personas()
    return {
        seed: plan_dataset(
            GenerationConfig(per_scenario=24, seed=seed), OfflineTextBackend(), personas
        )
        for seed in (0, 1)
    }


def test_expected_counts_are_table_2() -> None:
    c = expected_counts(24)
    for key, want in TABLE_2.items():
        assert c[key] == want
    assert (c["total_conversations"], c["total_instructed"], c["baselines"]) == (696, 912, 696)
    # proportions hold for any N
    c3 = expected_counts(3)
    assert c3["instructed"] == {p: v // 8 for p, v in TABLE_2["instructed"].items()}
    assert c3["total_instructed"] == 114 and c3["baselines"] == 87


def test_planned_cases_match_table_2_before_any_synthesis(full_plans) -> None:
    plan = full_plans[0]
    cases = plan.cases()
    assert set(cases) == set(SCENARIOS)
    by_policy = Counter(c.data.policy_name for cs in cases.values() for c in cs)
    assert {p: by_policy[p] for p in POLICIES} == TABLE_2["instructed"]
    assert by_policy["none"] == 696
    for name, cs in cases.items():
        assert len({c.conversation_id for c in cs}) == 24
        assert Counter(c.data.policy_name for c in cs) == Counter(
            {**{p: 24 for p in SCENARIOS[name].policies}, "none": 24}
        )
        by_conv: dict[str, list] = {}
        for c in cs:
            by_conv.setdefault(c.conversation_id, []).append(c)
        for (
            group
        ) in by_conv.values():  # same conversation, different instruction: same turns and reference
            assert len({(c.data.reference, tuple(t.text for t in c.turns)) for c in group}) == 1
    assert all(
        sp.discards == Counter() for sp in plan.scenarios.values()
    )  # the grammars never fail


def test_every_conversation_parses_and_validates(full_plans) -> None:
    n = 0
    for plan in full_plans.values():
        for sp in plan.scenarios.values():
            assert len(sp.order) == plan.config.pool_size == 30
            for d in sp.order:
                check_against_spec(d.lines, SPECS[d.scenario])
                validate_conversation(d.conversation())
                for speaker, text in d.lines:
                    parsed = parse_markers(text)
                    assert spoken_text_problem(parsed.text) is None, text
                    assert not re.search(r"\d", parsed.text), text
                    assert "  " not in text and not re.search(r"\s[,.?!]", parsed.text), text
                    assert all(m.content == m.content.strip() for m in parsed.markers), text
                n += 1
    assert n == 2 * 29 * 30


def test_determinism_per_seed_and_difference_across_seeds(full_plans) -> None:
    personas = load_personas()
    again = plan_dataset(GenerationConfig(per_scenario=24, seed=0), OfflineTextBackend(), personas)
    for name in SCENARIOS:
        assert again.selected(name) == full_plans[0].selected(name)
    b = OfflineBackend()
    for spec in SPECS.values():
        assert b.write(spec, 5, 3, personas[7]) == b.write(spec, 5, 3, personas[7])
    same = 0
    for name in SCENARIOS:
        t0 = {d.lines for d in full_plans[0].selected(name)}
        t1 = {d.lines for d in full_plans[1].selected(name)}
        same += len(t0 & t1)
        u0 = {t for d in full_plans[0].selected(name) for s, t in d.lines if s == "user"}
        u1 = {t for d in full_plans[1].selected(name) for s, t in d.lines if s == "user"}
        assert len(u0 & u1) <= 2, name  # user turns of another seed are (almost) all new
    assert same == 0


def test_variety_within_each_scenario(full_plans) -> None:
    for plan in full_plans.values():
        for name in SCENARIOS:
            sel = plan.selected(name)
            v = variety(sel)
            assert v["user_turns_distinct_fraction"] >= 0.95, (name, v)
            # topics spread: no topic repeats among the 24 unless the bank is smaller than 24
            topics = Counter(d.topic for d in sel)
            bank = len(BUILDERS[name][0])
            assert max(topics.values()) == (1 if bank >= 24 else -(-24 // bank)), (name, topics)
            assert len({d.persona.pid for d in sel}) == 24  # different people


def test_balanced_order_lists_each_topic_before_repeats(full_plans) -> None:
    sp = full_plans[0].scenarios["Sequential Info Capture"]  # 8 kinds of information
    pool = sorted(sp.order, key=lambda d: d.index)
    order = balanced_order(pool, 0, sp.spec)
    assert order == sp.order  # the plan uses this order
    assert [len(set(d.topic for d in order[k : k + 8])) for k in (0, 8, 16)] == [8, 8, 8]
    assert balanced_order(pool, 1, sp.spec) != order  # seeded


def test_grounding_sentence_names_the_persona_and_one_attribute(full_plans) -> None:
    for sp in full_plans[0].scenarios.values():
        for d in sp.order[:5]:
            assert d.grounding.startswith(d.persona.first_name)
            assert (
                d.grounding.endswith(".") and len(re.findall(r"[.!?](\s|$)", d.grounding)) == 1
            ), d.grounding
            value = (
                getattr(d.persona, d.attribute) if d.attribute != "name" else d.persona.first_name
            )
            assert value and value in d.grounding
            others = [
                a
                for a in ("occupation", "city", "hobby")
                if a != d.attribute and getattr(d.persona, a)
            ]
            assert not any(getattr(d.persona, a) in d.grounding for a in others)


def test_grammar_helpers() -> None:
    import random

    assert (
        number_words(0) == "zero"
        and number_words(42) == "forty two"
        and number_words(1250) == "one thousand two hundred fifty"
    )
    assert spell_digits("4150") == "four one five zero"
    rng = random.Random(1)
    outs = {
        expand("[so|okay], [um |]{x} <pause: 1.0> [yes|no].", rng, x="[a|b]") for _ in range(40)
    }
    assert len(outs) > 4 and all(o[0].isupper() and "<pause: 1.0>" in o for o in outs)
    assert tidy("hi , there .  ok ,, yes") == "Hi, there. Ok, yes"
    assert (
        second_person("I'm sure my sister and I was late")
        == "you're sure your sister and you were late"
    )


def test_offline_version_and_dealt_options() -> None:
    import random

    assert OFFLINE_VERSION == "2.0" and OfflineBackend().identity() == {
        "backend": "offline",
        "version": "2.0",
    }
    persona = load_personas()[0]
    options = [f"option {w}" for w in "abcdefghjk"]

    def dealt(seed: int, scenario: str = "s") -> list[str]:
        return [
            Ctx(
                random.Random(i), persona, "name", None, scenario=scenario, index=i, seed=seed
            ).deal(options)
            for i in range(len(options))
        ]

    # the first len(options) conversations of a scenario get every option once, in a seeded order
    assert sorted(dealt(0)) == sorted(o.capitalize() for o in options)
    assert dealt(0) == dealt(0) and dealt(0) != dealt(1) and dealt(0) != dealt(0, "t")
