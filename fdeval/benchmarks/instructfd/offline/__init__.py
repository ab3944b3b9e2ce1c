"""The offline text backend: conversations from per-scenario grammars and the persona pool.

No network, no model: every scenario has a bank of content items (plans, decisions, stories,
myths, hazards, contradictions, words, rehearsals, explanation topics...) and a grammar that turns
one item, one persona and a seeded generator into the scenario's turn layout
(:mod:`fdeval.benchmarks.instructfd.specs`) with inline markers. The output is deterministic
given (seed, scenario, conversation index): items are dealt from a per-(seed, scenario) shuffle
of the bank, so the conversations of one scenario use different items until the bank runs out;
phrasing, fillers, pause lengths and cut-in phrases come from the conversation's own generator.
"""

from __future__ import annotations

import random
import re

from fdeval.benchmarks.instructfd.offline.common import Ctx
from fdeval.benchmarks.instructfd.offline.proactive import BUILDERS as _PROACTIVE
from fdeval.benchmarks.instructfd.offline.responsive import BUILDERS as _RESPONSIVE
from fdeval.benchmarks.instructfd.personas import (
    Persona,
    choose_attribute,
    condense,
    situation_first_person,
    tags_of,
)
from fdeval.benchmarks.instructfd.specs import ScenarioSpec

# Bump when the grammars or banks change what is written for a given seed.
OFFLINE_VERSION = "2.0"

BUILDERS = {**_PROACTIVE, **_RESPONSIVE}

# Scenarios whose user already knows the topic: no persona detail that says they are new to it.
EXPERT_PREMISE = frozenset({"Skip Basics"})
NOVICE_CLAIM = re.compile(
    r"\b(never|first|beginner|new to|start(ing)?|learn(ing)?|begin(ning)?)\b", re.I
)


def _item_key(item: object) -> str:
    return item if isinstance(item, str) else item.key  # type: ignore[attr-defined]


def item_tags(item: object, topic: str) -> frozenset[str]:
    """The domain tags of a bank item: its own (`tags`, where the bank gives them) and those of
    its topic phrase (:func:`~fdeval.benchmarks.instructfd.personas.tags_of`)."""
    return frozenset(getattr(item, "tags", ())) | tags_of(topic)


def topic_tags(scenario: str, key: str) -> frozenset[str]:
    """The tags of the item `key` of `scenario`'s bank (what persona details must fit)."""
    bank, topic_of, _ = BUILDERS[scenario]
    item = next(it for it in bank if _item_key(it) == key)
    return item_tags(item, topic_of(item))


class OfflineBackend:
    """Writes one conversation per call; see the module docstring."""

    name = "offline"

    def identity(self) -> dict:
        return {"backend": "offline", "version": OFFLINE_VERSION}

    def bank_size(self, scenario: str) -> int:
        return len(BUILDERS[scenario][0])

    def item_for(self, spec: ScenarioSpec, index: int, seed: int):
        bank = list(BUILDERS[spec.name][0])
        random.Random(f"fdeval-offline-items:{seed}:{spec.slug}").shuffle(bank)
        return bank[index % len(bank)]

    def write(self, spec: ScenarioSpec, index: int, seed: int, persona: Persona):
        """(lines, grounding sentence, attribute, topic key) for conversation `index` of `spec`."""
        bank, topic_of, build = BUILDERS[spec.name]
        item = self.item_for(spec, index, seed)
        rng = random.Random(f"fdeval-offline:{seed}:{spec.slug}:{index}")
        # only a detail that fits the topic; none that would contradict the scenario's premise
        exclude = (
            ("situation",)
            if spec.name in EXPERT_PREMISE
            and NOVICE_CLAIM.search(situation_first_person(persona) or "")
            else ()
        )
        attribute = choose_attribute(
            persona, spec.persona_attributes, rng, item_tags(item, topic_of(item)), exclude
        )
        grounding = condense(persona, attribute, spec.gist.replace("{topic}", topic_of(item)))
        ctx = Ctx(
            rng=rng,
            persona=persona,
            attribute=attribute,
            item=item,
            scenario=spec.slug,
            index=index,
            seed=seed,
        )
        lines = build(ctx)
        return tuple(lines), grounding, attribute, _item_key(item)


__all__ = ["OFFLINE_VERSION", "OfflineBackend", "BUILDERS", "item_tags", "topic_tags"]
