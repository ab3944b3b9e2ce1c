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
    """One conversation being written: its generator, persona, grounding attribute and bank item
    (and, from the backend, the scenario, the conversation's index and the seed)."""

    rng: random.Random
    persona: Persona
    attribute: str
    item: Any
    slots: dict[str, object] = field(default_factory=dict)
    scenario: str = ""
    index: int = 0
    seed: int = 0

    def x(self, template: str, **slots: object) -> str:
        return expand(template, self.rng, **{**self.slots, **slots})

    def xc(self, template: str, **slots: object) -> str:
        """Like :meth:`x` for a cut-in marker's content: no capital at the start."""
        return lower_first(self.x(template, **slots))

    def pick(self, options):
        return self.rng.choice(list(options))

    def deal(self, options, key: str = "") -> str:
        """One of `options`, dealt like the bank items: conversation i of a scenario gets entry i of
        a per-(seed, scenario, key) shuffle, so the scenario's conversations use different
        options until the list runs out (a random pick repeats some and leaves others out)."""
        options = list(options)
        order = list(range(len(options)))
        random.Random(f"fdeval-offline-deal:{self.seed}:{self.scenario}:{key}").shuffle(order)
        return self.x(options[order[self.index % len(options)]])

    def chance(self, p: float) -> bool:
        return self.rng.random() < p

    def pause(self, lo: float = 0.8, hi: float = 1.6) -> str:
        return pause(self.rng, lo, hi)


def greeting(ctx: Ctx, force_name: bool = False) -> str:
    """'Hi, I'm Rosa.' (or a bare greeting, or nothing, unless the name is the grounding attribute)."""
    if force_name or ctx.attribute == "name" or ctx.chance(0.5):
        return ctx.x(
            "[Hi|Hey|Hello|Hi there|Morning|Hey there|Good morning|Afternoon], [I'm|it's|this is|my "
            "name's] {n}.",
            n=ctx.persona.first_name,
        )
    return ctx.x("[Hi.|Hey.|Hey there.|Hello.|Morning.|Hi there.||||]")


# The grounding detail is said as context for the question (the backend only grounds a
# conversation in a detail that fits its topic): many frames, so none recurs across the set.
_INTRO = {
    "occupation": (
        "I'm {o}, so this comes up for me.",
        "I'm {o}, and it ties into this.",
        "My job's relevant here: I'm {o}.",
        "Being {o}, I run into this a lot.",
        "I'm {o}, which is part of why I ask.",
        "As {o}, I think about this a fair bit.",
        "I work as {o}, so it's on my mind.",
        "Some context: I'm {o}.",
        "I'm {o}, so it matters for me.",
        "Since I'm {o}, this keeps coming up.",
    ),
    "hobby": (
        "I'm really into {h}, so this is close to my heart.",
        "My big hobby is {h}, and this ties in.",
        "I spend a lot of my free time on {h}, so this matters to me.",
        "My hobby is {h}, so it's related.",
        "I've gotten into {h}, so it's on my mind.",
        "What I do for fun is {h}, and this connects to it.",
        "I'm big on {h}, so I'm curious.",
        "Outside work it's mostly {h} for me, hence the question.",
    ),
    "city": (
        "I'm in {c}, in case that changes anything.",
        "I live in {c}, if that makes a difference.",
        "I'm based in {c}, so local conditions matter.",
        "For what it's worth, I'm in {c}.",
        "I'm over in {c}, which might matter here.",
        "Where I live is {c}, if that's useful.",
        "I'm calling from {c}, and the local side of it matters.",
    ),
    "age_band": (
        "I'm in my {b}, in case it changes the answer.",
        "Worth saying, I'm in my {b}.",
        "I'm in my {b} now, so keep that in mind.",
        "I'm in my {b}, if that matters.",
        "Since it might matter, I'm in my {b}.",
        "I'm in my {b}, so I want to do this sensibly.",
    ),
    "situation": (
        "{s}, so this is on my mind.",
        "{s}, and that's why it matters right now.",
        "Some background: {s}.",
        "Worth knowing, {s}.",
        "{s}, so it's relevant.",
        "{s}, which is what got me thinking about it.",
        "Here's my situation: {s}.",
    ),
}


def self_intro(ctx: Ctx) -> str:
    """One sentence with the grounding attribute, said as context for the question (empty for name)."""
    p = ctx.persona
    a = ctx.attribute
    frames = _INTRO.get(a, ())
    if a == "occupation" and p.occupation.startswith("retired "):
        frames = tuple(f for f in frames if not f.startswith("I work as"))
    values = {
        "occupation": lambda: {"o": article(p.occupation)},
        "city": lambda: {"c": p.city},
        "age_band": lambda: {"b": p.age_band},
        "hobby": lambda: {"h": p.hobby},
        "situation": lambda: {"s": situation_first_person(p)},
    }
    if not frames or not all(values[a]().values()):
        return ""
    return ctx.x("[" + "|".join(frames) + "]", **values[a]())


def opener(ctx: Ctx) -> str:
    """Greeting plus the self-introduction, in a natural order."""
    g = greeting(ctx)
    i = self_intro(ctx)
    return " ".join(s for s in (g, i) if s)
