"""The built-in SMALL set of Instruct-FD conversations, hand-written for fdeval.

Each conversation belongs to one catalog scenario (and so runs under that scenario's
instructions), has a one-line persona, and an ordered script of user and model lines with inline
markers (see :mod:`fdeval.benchmarks.instructfd.markers`).

Shapes:

* proactive — a short context exchange (user asks, model answers), then the trigger user turn
  (with ``<pause: ...>`` and, for backchannel / interrupt scenarios, a ``<backchannel: ...>`` /
  ``<interrupt: ...>`` marker saying what the model would say at its cut-in point), then the
  model's take-turn line;
* responsive — the user's question, the model's answer carrying the USER's barge-in marker at the
  cut-in point (``<backchannel: ...>`` for continue, ``<interrupt: ...>`` for acknowledge; the
  model's lines are reference only, never synthesized), the model's continuation or
  acknowledgement, and optionally a closing user turn with the model's reply.

``{slot}`` placeholders are filled from one of the conversation's ``variants``, picked by the
generation seed. Every user line is natural spoken English with numbers as words. All text here
is original to fdeval.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass, field
from typing import Literal, Mapping

from fdeval.benchmarks.instructfd.instructions import PROACTIVE, RESPONSIVE, SCENARIOS
from fdeval.benchmarks.instructfd.markers import CUT_IN_KINDS, parse_markers

_SLOT_RE = re.compile(r"\{([a-z_]+)\}")


@dataclass(frozen=True)
class Line:
    speaker: Literal["user", "model"]
    text: str


def U(text: str) -> Line:  # noqa: N802 - short script helpers
    return Line("user", text)


def M(text: str) -> Line:  # noqa: N802
    return Line("model", text)


@dataclass(frozen=True)
class Conversation:
    conversation_id: str
    scenario: str
    persona: str
    lines: tuple[Line, ...]
    variants: tuple[Mapping[str, str], ...] = field(default=({},))

    @property
    def policies(self) -> tuple[str, ...]:
        return SCENARIOS[self.scenario].policies

    def pick_variant(self, seed: int) -> Mapping[str, str]:
        """The slot values for `seed` (deterministic, independent of the other conversations)."""
        return random.Random(f"{seed}:{self.conversation_id}").choice(self.variants)

    def render(self, seed: int) -> tuple[str, tuple[Line, ...]]:
        """(persona, lines) with every ``{slot}`` filled from the variant picked by `seed`."""
        values = self.pick_variant(seed)

        def fill(text: str) -> str:
            return _SLOT_RE.sub(lambda m: values[m.group(1)], text)

        return fill(self.persona), tuple(Line(line.speaker, fill(line.text)) for line in self.lines)


def validate_conversation(conv: Conversation) -> None:
    """Check a script's structure against its scenario; raises ValueError naming the problem."""
    cid = conv.conversation_id

    def bad(msg: str) -> ValueError:
        return ValueError(f"conversation {cid!r}: {msg}")

    if conv.scenario not in SCENARIOS:
        raise bad(f"unknown scenario {conv.scenario!r}")
    if not re.fullmatch(r"[a-z0-9_]+", cid):
        raise bad("conversation_id must be lower-case letters, digits and '_'")
    texts = [conv.persona, *(line.text for line in conv.lines)]
    for variant in conv.variants:
        missing = {s for t in texts for s in _SLOT_RE.findall(t)} - set(variant)
        if missing:
            raise bad(f"variant {dict(variant)} lacks slots {sorted(missing)}")
    if not conv.lines or conv.lines[0].speaker != "user":
        raise bad("the script must start with a user line")
    group = SCENARIOS[conv.scenario].group
    policies = conv.policies
    user_cut_ins: set[str] = set()
    barge_ins: list[str] = []
    for i, line in enumerate(conv.render(0)[1]):
        parsed = parse_markers(line.text)
        if not parsed.words:
            raise bad(f"line {i} has no spoken words")
        if line.speaker == "user":
            if any(ch.isdigit() for ch in parsed.text):
                raise bad(f"line {i}: say numbers as words in user speech")
            user_cut_ins |= {m.kind for m in parsed.markers if m.kind in CUT_IN_KINDS}
            continue
        if parsed.has_pauses or any(m.kind == "take-turn" for m in parsed.markers):
            raise bad(f"line {i}: model lines carry only user barge-in markers")
        if len(parsed.markers) > 1:
            raise bad(f"line {i}: at most one user barge-in per model line")
        for m in parsed.markers:
            if m.word_index == 0:
                raise bad(f"line {i}: the user barge-in needs model speech before it")
            if m.kind == "interrupt" and parsed.text_after(m):
                raise bad(f"line {i}: put the model's reply to a user interrupt on its own line")
            barge_ins.append(m.kind)
    if group == PROACTIVE:
        if barge_ins:
            raise bad("proactive scenarios have no user barge-ins")
        for kind in CUT_IN_KINDS:
            if (kind in user_cut_ins) != (kind in policies):
                raise bad(
                    f"a <{kind}:> marker in user speech is needed exactly when {kind!r} is an instruction"
                )
        if not any(
            parse_markers(line.text).has_pauses for line in conv.lines if line.speaker == "user"
        ):
            raise bad("the trigger user turn needs a <pause:>")
    else:
        assert group == RESPONSIVE
        if user_cut_ins:
            raise bad("responsive scenarios have no model cut-ins in user speech")
        want = "backchannel" if "continue" in policies else "interrupt"
        if barge_ins != [want]:
            raise bad(
                f"expected exactly one user <{want}:> barge-in in a model line, got {barge_ins}"
            )


# ------------------------------------------------------------------------------------------------
# The scripts. Proactive first, then responsive.

BUILTIN_CONVERSATIONS: tuple[Conversation, ...] = (
    Conversation(
        "bakery_phone_number",
        "Sequential Info Capture",
        "{name}, who has just opened a small bakery, reads out the shop's new phone number.",
        (
            U(
                "Hi, I'm {name}. Could you hang on to a phone number for my bakery so I don't lose it?"
            ),
            M("Of course, {name}. Read it out whenever you're ready."),
            U(
                "Okay, so it starts with {a}, <pause: 1.2> then {b}, <pause: 1.2> and the last part is {c}."
            ),
            M("Got it: {a}, {b}, {c}. I've saved that as the bakery's number."),
        ),
        (
            {
                "name": "Rosa",
                "a": "four one five",
                "b": "eight two six",
                "c": "three nine zero four",
            },
            {
                "name": "Dana",
                "a": "six one seven",
                "b": "five five two",
                "c": "eight zero one three",
            },
            {"name": "Mei", "a": "three one two", "b": "seven four four", "c": "nine six two zero"},
        ),
    ),
    Conversation(
        "house_savings_plan",
        "User Attention Check",
        "{name}, saving up for a first home, talks the assistant through a monthly savings routine.",
        (
            U("Hey, I'd like to talk through how I'm saving up for a house, if that's alright."),
            M("Sure, I'd be glad to. How are you going about it?"),
            U(
                "So every month I set aside a fixed amount before I spend anything else, you know? "
                "<backchannel: yeah> <pause: 0.8> and whatever is left at the end of the month goes "
                "into a separate pot for {extra}."
            ),
            M(
                "That's a strong habit. Paying yourself first keeps the house fund growing no matter "
                "what. Do you have a target date in mind?"
            ),
        ),
        (
            {"name": "Jordan", "extra": "furniture"},
            {"name": "Priya", "extra": "moving costs"},
        ),
    ),
    Conversation(
        "weekend_trip_thinking",
        "User Filler Pause",
        "{name}, a high school teacher, thinks aloud about where to spend a long weekend.",
        (
            U("I'm trying to plan a weekend away and I could really use a sounding board."),
            M("Happy to help. What are you thinking so far?"),
            U(
                "Well, I was sort of leaning towards the coast, um <backchannel: mm-hmm> <pause: 1.5> "
                "or, hmm, maybe somewhere up in the mountains instead, since it would be a lot cooler "
                "up there."
            ),
            M(
                "Both sound lovely. If getting away from the heat matters most, the mountains make a "
                "lot of sense. Want to compare a couple of spots?"
            ),
        ),
        ({"name": "Marcus"}, {"name": "Elena"}),
    ),
    Conversation(
        "laptop_shutdown_hold",
        "Floor Hold Signal",
        "{name}, working from home, describes a laptop problem and briefly steps away to help a child.",
        (
            U("My laptop keeps switching itself off and I'm getting pretty fed up with it."),
            M("That sounds frustrating. When does it usually happen?"),
            U(
                "It mostly happens when I'm on a video call, and, hang on one second, "
                "<backchannel: sure> <pause: 2.0> sorry about that, my {kid} needed something. Anyway, "
                "it gets really hot right before it shuts down."
            ),
            M(
                "No problem. Getting hot just before it shuts down points to overheating, so let's "
                "check the vents and the fan first."
            ),
        ),
        ({"name": "Chris", "kid": "son"}, {"name": "Ana", "kid": "daughter"}),
    ),
    Conversation(
        "venus_stargazing",
        "Factual Misinformation",
        "{name}, an amateur astronomer with a new telescope, plans a night of looking at planets.",
        (
            U("I'm going to stay up tonight and look at the planets with my new telescope."),
            M("That sounds like a great night. Which ones are you hoping to catch?"),
            U(
                "Well, since Venus is the planet farthest from the sun, "
                "<interrupt: actually, Venus is the second planet from the sun, one of the closest> "
                "I figured it would be the faintest, so I'm saving it for last, um, <pause: 0.8> once my "
                "eyes have adjusted to the dark."
            ),
            M(
                "Quick correction: Venus is the second planet out from the sun, and it's one of the "
                "brightest things in the night sky, so look for it early, just after sunset."
            ),
        ),
        ({"name": "Tomas"}, {"name": "Aisha"}),
    ),
    Conversation(
        "bathroom_cleaning_mix",
        "Safety Correction",
        "{name}, who just moved into an old apartment, plans to deep clean the bathroom.",
        (
            U("I'm finally getting around to deep cleaning my bathroom this weekend."),
            M("Nice. Do you have a plan for the tough spots?"),
            U(
                "Yeah, I'm going to mix bleach and ammonia in a bucket so it's twice as strong, "
                "<interrupt: please don't, bleach and ammonia together make a toxic gas> and then, uh, "
                "<pause: 0.8> scrub the {surface} with it while the door is shut."
            ),
            M(
                "Please don't combine those two. Together they release a toxic gas, and even more so "
                "in a closed room. Use one cleaner at a time and keep a window open."
            ),
        ),
        ({"name": "Ben", "surface": "tiles"}, {"name": "Yuki", "surface": "shower walls"}),
    ),
    Conversation(
        "job_offer_move",
        "Cognitive Pause",
        "{name}, a software developer, weighs a job offer that would mean moving to another city.",
        (
            U("I got a job offer in another city and I honestly can't decide whether to take it."),
            M("That's a big decision. What's pulling you each way?"),
            U(
                "The pay is better and the work sounds interesting, but moving away from <pause: 2.0> "
                "all my friends and my {family} is the part that really worries me."
            ),
            M(
                "That makes sense. Money and work matter, but so do the people around you. Could you "
                "see yourself visiting home often?"
            ),
        ),
        ({"name": "Ravi", "family": "family"}, {"name": "Claire", "family": "parents"}),
    ),
    Conversation(
        "balcony_tomatoes",
        "User Continuer",
        "{name}, a beginner gardener, wants to grow tomatoes on a small balcony.",
        (
            U(
                "I just moved into a flat with a little balcony, and I'd love to grow some tomatoes "
                "out there. Can you walk me through how to get started?"
            ),
            M("Sure. Start by finding the sunniest corner of your balcony, <backchannel: uh-huh>"),
            M(
                "because tomatoes need six or more hours of direct sun a day. Then pick a deep pot "
                "with drainage holes, fill it with potting mix, and water whenever the top of the "
                "soil feels dry."
            ),
            U("Great, and how often should I feed them?"),
            M("Every week or two once they start flowering, with a fertilizer made for tomatoes."),
        ),
        ({"name": "Sam"}, {"name": "Noor"}),
    ),
    Conversation(
        "first_race_training",
        "User Alignment",
        "{name}, new to running, wants to train for a first five kilometre race.",
        (
            U(
                "I signed up for my first five k race in {weeks} weeks, and I've barely run before. "
                "How should I train for it?"
            ),
            M(
                "That's plenty of time. The key is to build up gradually, <backchannel: yeah, right>"
            ),
            M(
                "so start with three short sessions a week where you switch between running and "
                "walking, and make the running stretches a little longer each week."
            ),
            U("That sounds doable. Should I run on the days in between as well?"),
            M("No, keep those for rest or an easy walk so your legs can recover."),
        ),
        ({"name": "Kofi", "weeks": "eight"}, {"name": "Lena", "weeks": "ten"}),
    ),
    Conversation(
        "fresh_pasta_stop",
        "Short Stop Repair",
        "{name} is making fresh pasta at home for the first time.",
        (
            U(
                "I've never made fresh pasta before, but I'd like to try it at home this weekend. "
                "How do I make the dough?"
            ),
            M(
                "Sure. You'll need flour and eggs. Pile the flour on the counter and press a well "
                "into the middle, <interrupt: wait, actually>"
            ),
            M("Sure, what's on your mind?"),
            U("I don't have any eggs in the house. Can I still make it?"),
            M("You can. Use semolina flour and warm water instead, and knead it a bit longer."),
        ),
        ({"name": "Leo"}, {"name": "Hana"}),
    ),
    Conversation(
        "packed_lunch_constraint",
        "Add Constraint",
        "{name}, a nurse on night shifts, wants ideas for a week of packed lunches.",
        (
            U("Could you give me a few ideas for packed lunches I can take to work this week?"),
            M(
                "Of course. A good place to start is roasting a big tray of vegetables and chicken on "
                "Sunday, <interrupt: oh, and there's no microwave at work, so it has to be something "
                "I can eat cold>"
            ),
            M(
                "Got it, no microwave, so let's stick to food that tastes good cold: a pasta salad, "
                "wraps with hummus and crunchy vegetables, or a bean and grain bowl with a lemon "
                "dressing."
            ),
            U("The wraps sound perfect. What should I pick up at the shop for them?"),
            M(
                "Tortillas, a tub of hummus, carrots, cucumber, peppers and some spinach should cover it."
            ),
        ),
        ({"name": "Grace"}, {"name": "Omar"}),
    ),
)
