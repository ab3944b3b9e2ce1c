"""What every offline scenario grammar shares: the per-conversation context and persona phrases."""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any

from fdeval.benchmarks.instructfd.offline.grammar import (
    article,
    expand,
    lower_first,
    pause,
)
from fdeval.benchmarks.instructfd.personas import Persona, situation_first_person


@dataclass
class Ctx:
    """One conversation being written: its generator, persona, grounding attribute and bank item."""

    rng: random.Random
    persona: Persona
    attribute: str
    item: Any
    slots: dict[str, object] = field(default_factory=dict)

    def x(self, template: str, **slots: object) -> str:
        return expand(template, self.rng, **{**self.slots, **slots})

    def xc(self, template: str, **slots: object) -> str:
        """Like :meth:`x` for a cut-in marker's content: no capital at the start."""
        return lower_first(self.x(template, **slots))

    def pick(self, options):
        return self.rng.choice(list(options))

    def chance(self, p: float) -> bool:
        return self.rng.random() < p

    def pause(self, lo: float = 0.8, hi: float = 1.6) -> str:
        return pause(self.rng, lo, hi)


def greeting(ctx: Ctx, force_name: bool = False) -> str:
    """'Hi, I'm Rosa.' (or nothing, sometimes, unless the name is the grounding attribute)."""
    if force_name or ctx.attribute == "name" or ctx.chance(0.35):
        return ctx.x("[Hi|Hey|Hello|Hi there|Morning], [I'm|it's|this is] {n}.", n=ctx.persona.first_name)
    return ctx.x("[Hi.|Hey.|Hey there.|Hello.|||]")


def self_intro(ctx: Ctx) -> str:
    """One sentence with the grounding attribute, said by the user (empty for name)."""
    p = ctx.persona
    a = ctx.attribute
    if a == "occupation":
        if p.occupation.startswith("retired "):
            return ctx.x("[I'm|For context, I'm] {o}.", o=article(p.occupation))
        return ctx.x("[I'm|I work as] {o}[, for context|, by the way|].", o=article(p.occupation))
    if a == "city":
        return ctx.x("[I live in|I'm over in|I'm calling from|I'm based in] {c}[, by the way|].", c=p.city)
    if a == "age_band":
        return ctx.x("[I'm in my|For context, I'm in my|I should say I'm in my] {b}.", b=p.age_band)
    if a == "hobby":
        return ctx.x("[I'm really into|In my spare time I'm into|I'm a big fan of] {h}.", h=p.hobby)
    if a == "situation":
        said = situation_first_person(p)
        if said:
            return ctx.x("[A bit of background, |For context, |]{s}.", s=said)
    return ""


def opener(ctx: Ctx) -> str:
    """Greeting plus the self-introduction, in a natural order."""
    g = greeting(ctx)
    i = self_intro(ctx)
    return " ".join(s for s in (g, i) if s)
