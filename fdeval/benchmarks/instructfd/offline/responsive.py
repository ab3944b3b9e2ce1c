"""Offline grammars for the responsive scenarios (the model holds the floor, the user overlaps).

Layout: the user's question; the model's answer carrying the user's barge-in marker
(``<backchannel: ...>`` followed by the rest of the answer for continue scenarios,
``<interrupt: ...>`` at the end of what the model got to say for acknowledge scenarios); for
acknowledge scenarios the model's adapted reply; then, sometimes, a closing question and answer.
"""

from __future__ import annotations

import re
from typing import Callable

from fdeval.benchmarks.instructfd.offline.common import Ctx, opener
from fdeval.benchmarks.instructfd.offline.grammar import lower_first
from fdeval.benchmarks.instructfd.offline.topics import TOPICS, Topic

Lines = list[tuple[str, str]]

CLOSING_CHANCE = 0.55


def _question(ctx: Ctx, t: Topic, ask: str | None = None) -> str:
    ask = ask or ctx.pick(t.asks)
    if ctx.chance(0.3):
        ask = (
            ctx.x(
                "[Quick question.|I've got a question.|Can I ask you something?|So, a question.|Question for "
                "you.|I was wondering something.|Something I've been meaning to ask.|Okay, so.|]"
            )
            + " "
            + ask
        )
    return ctx.x("{o} {a}", o=opener(ctx), a=ask)


def _closing(ctx: Ctx, t: Topic, required: bool = False) -> Lines:
    if not required and not ctx.chance(CLOSING_CHANCE):
        return []
    q, a = t.follow
    q = ctx.x(
        "[Great, thanks.|Okay, that helps.|Got it.|Perfect.|Thanks.|Nice.|That's useful.|] [And|Oh, and|One "
        "more thing,|Also,|Oh, also,|Quick follow up,|Last question,|So|] {q}",
        q=lower_first(q),
    )
    return [("user", q), ("model", a)]


# ------------------------------------------------------------------------------------------------
# Continue scenarios: a user backchannel mid-answer, the model keeps going

# Each scenario's barge-in phrases are dealt to its conversations (Ctx.deal), so the 24 of a full
# set use at least 14 different ones of the 20 (the pool holds 30 candidates).
_BC_PHRASES = {
    "User Acknowledgment": (
        "okay",
        "mm-hmm",
        "uh-huh",
        "alright",
        "okay, yeah",
        "mm-hmm, okay",
        "sure",
        "okay, sure",
        "right, okay",
        "yep",
        "mm-hmm, sure",
        "yeah, okay",
        "okay then",
        "uh-huh, yeah",
        "mm, okay",
        "cool",
        "okay, cool",
        "alright, yeah",
        "yep, okay",
        "sure, okay",
    ),
    "User Alignment": (
        "yeah",
        "right",
        "exactly",
        "true",
        "yeah, makes sense",
        "totally",
        "absolutely",
        "for sure",
        "yeah, true",
        "definitely",
        "that's true",
        "oh, totally",
        "yes",
        "yep, exactly",
        "fair enough",
        "makes sense",
        "agreed",
        "yeah, definitely",
        "so true",
        "right, exactly",
    ),
    "User Amusement": (
        "ha, that's great",
        "haha",
        "haha, no way",
        "oh, that's funny",
        "ha, I love that",
        "ha, classic",
        "oh, that's hilarious",
        "ha, nice",
        "that's so funny",
        "haha, amazing",
        "oh, ha",
        "ha, that's good",
        "ha, perfect",
        "oh my gosh",
        "haha, brilliant",
        "ha, too funny",
        "that's hilarious",
        "ha, love it",
        "haha, yes",
        "ha, so true",
    ),
    "User Understanding": (
        "I see",
        "got it",
        "oh, that makes sense",
        "ah, okay",
        "gotcha",
        "oh, I get it",
        "ah, I see",
        "that makes sense",
        "oh, okay",
        "understood",
        "right, got it",
        "ah, got it",
        "okay, I see",
        "oh, I see",
        "makes sense now",
        "ah, right",
        "oh, gotcha",
        "okay, clear",
        "I follow",
        "ah, that helps",
    ),
    "User Continuer": (
        "uh-huh",
        "go on",
        "keep going",
        "and then?",
        "mm-hmm, go on",
        "okay, and?",
        "go ahead",
        "and?",
        "yeah, go on",
        "then what?",
        "okay, keep going",
        "uh-huh, and?",
        "mm-hmm, and then?",
        "what else?",
        "carry on",
        "yeah, and?",
        "okay, then?",
        "sure, go on",
        "and after that?",
        "I'm listening",
    ),
}


def _continue(scenario: str) -> Callable[[Ctx], Lines]:
    def build(ctx: Ctx) -> Lines:
        t: Topic = ctx.item
        bc = lower_first(ctx.deal(_BC_PHRASES[scenario]))
        if scenario == "User Amusement":
            answer = ctx.x(
                "{l} {f} <backchannel: {b}> [Anyway,|But seriously,|So, anyway,] {m}",
                l=t.lead,
                f=t.fun,
                b=bc,
                m=lower_first(t.more),
            )
        else:
            answer = f"{t.lead} <backchannel: {bc}> {t.more}"
        return [("user", _question(ctx, t)), ("model", answer), *_closing(ctx, t)]

    return build


# ------------------------------------------------------------------------------------------------
# Acknowledge scenarios: a user interrupt mid-answer, the model yields and adapts


def _bare(text: str) -> str:
    """A user remark without its leading connector ("oh, but X" -> "X")."""
    for prefix in ("oh, and ", "oh, but ", "oh, ", "but ", "and ", "actually, "):
        if text.startswith(prefix):
            return text[len(prefix) :]
    return text


def _cut(t: Topic, content: str) -> str:
    return f"{t.lead} <interrupt: {content}>"


_STOP_PHRASES = (
    "wait, actually",
    "hold on, sorry",
    "wait a sec",
    "actually, hang on",
    "sorry, wait a second",
    "oh, wait",
    "hang on a second",
    "hold on",
    "wait, sorry",
    "one second",
    "actually, wait",
    "hold up",
    "sorry, hold on",
    "wait a minute",
    "hang on, sorry",
    "hmm, wait",
    "oh, hold on",
    "hold on a sec",
    "sorry, one sec",
    "wait, hang on",
)


def stop_repair(ctx: Ctx) -> Lines:
    t: Topic = ctx.item
    content = lower_first(ctx.deal(_STOP_PHRASES))
    ack = ctx.pick(
        (
            "Sure, what's up?",
            "Of course, go ahead.",
            "Yeah, what is it?",
            "No problem, what's on your mind?",
            "Sure, I'm listening.",
        )
    )
    kind = ctx.rng.randrange(3)
    said, reply = (t.constraint, t.personal, t.redirect)[kind]
    said = ctx.x(
        "[Sorry,|Sorry, I should have said,|Yeah, so|Right, so|So, the thing is,|Sorry, I meant to say,|"
        "Okay, so|Just so you know,|Oh, right, so] {s}.",
        s=_bare(said),
    )
    if said.endswith("?."):
        said = said[:-1]
    return [
        ("user", _question(ctx, t)),
        ("model", _cut(t, content)),
        ("model", ack),
        ("user", said),
        ("model", reply),
    ]


def _lead_again(t: Topic) -> str:
    """The answer's first sentence, said once more."""
    return lower_first(
        t.lead.removeprefix("Sure, ").removeprefix("Sure. ").removeprefix("Good question, ")
    )


# scenario -> (the user's cut-in, the model's adapted reply, the slots both take from the topic)
# (a tuple of cut-ins is dealt to the conversations, a template string expanded)
_ACKNOWLEDGE: dict[str, tuple[str | tuple[str, ...], str, Callable[[Topic], dict[str, str]]]] = {
    "Short Repeat Request": (
        (
            "sorry?",
            "say that again?",
            "come again?",
            "sorry, what was that?",
            "wait, can you repeat that?",
            "sorry, I missed that",
            "what was that?",
            "pardon?",
            "could you repeat that?",
            "sorry, say again?",
            "one more time?",
            "sorry, I didn't catch that",
            "can you say that again?",
            "huh, what?",
            "sorry, you cut out",
            "repeat that?",
            "what did you say?",
            "sorry, what?",
            "can you run that by me again?",
            "sorry, come again?",
        ),
        "[Sure.|Of course.|No problem.] [Let me say that again.|I said,|Again,] {l}",
        lambda t: {"l": _lead_again(t)},
    ),
    "Short Confusion Signal": (
        (
            "you lost me",
            "wait, what?",
            "I'm not following",
            "sorry, I'm lost",
            "huh, I don't get it",
            "wait, I'm confused",
            "I don't follow",
            "that went over my head",
            "sorry, what does that mean?",
            "hmm, I'm lost",
            "you've lost me there",
            "wait, how does that work?",
            "I'm confused",
            "sorry, that's confusing",
            "I don't get it",
            "I'm not sure I follow",
            "huh?",
            "that lost me",
            "wait, back up",
            "I'm a bit lost",
        ),
        "[Sorry about that.|My bad, let me back up.|Fair enough, I went too fast.] {s}",
        lambda t: {"s": t.simple},
    ),
    "Hearing Check": (
        (
            "hello?",
            "can you hear me?",
            "are you still there?",
            "hello, you there?",
            "hey, is this thing on?",
            "hello, did I lose you?",
            "you there?",
            "can you hear me okay?",
            "is this working?",
            "hello, can you hear me?",
            "did you hear me?",
            "am I breaking up?",
            "are you there?",
            "hello, anyone there?",
            "can you still hear me?",
            "is my mic working?",
            "testing, hello?",
            "hello, is this on?",
            "did I cut out?",
            "are you getting this?",
        ),
        "[Yes, I'm here, I can hear you.|Yep, still here.|Yes, I can hear you fine.] [I was saying,|As I was "
        "saying,|Picking up where I was,] {l}",
        lambda t: {"l": _lead_again(t)},
    ),
    "Add Constraint": (
        "[oh wait,|hold on,|sorry to jump in,|oh, but|wait, but|] {s}",
        "[Got it.|Ah, okay.|Good to know.|Okay, that changes things.] {r}",
        lambda t: {"s": _bare(t.constraint[0]), "r": t.constraint[1]},
    ),
    "Topic Redirect": (
        "[sorry,|oh, wait,|hang on,|] {s}",
        "[Sure, let's switch to that.|Good question.|Sure.|Okay, switching gears.] {r}",
        lambda t: {"s": t.redirect[0], "r": t.redirect[1]},
    ),
    "Scope Narrowing": (
        "[sorry, I really just want to know about|wait, I mostly care about|actually, can we just focus on|sorry, "
        "the part I need is] {a}",
        "[Sure, let's focus on that.|Got it, just that part then.|Of course.] {r}",
        lambda t: {"a": t.aspect[0], "r": t.aspect[1]},
    ),
    "Skip Basics": (
        "[sorry, I know the basics,|wait, I know this part,|hold on, I've got the basics down,] {e}, [can we skip "
        "ahead?|can you get to the more advanced stuff?|what's the next level?]",
        "[Got it, let's skip ahead.|Ah, then you're past the basics.|Okay, advanced it is.] {r}",
        lambda t: {"e": t.advanced[0], "r": t.advanced[1]},
    ),
    "Summary Request": (
        (
            "sorry, can you just give me the main points?",
            "wait, what's the short version?",
            "can you just give me the bottom line?",
            "sorry, just the key takeaways?",
            "hold on, can you boil that down for me?",
            "can I get the short version?",
            "just the highlights, please",
            "sorry, what's the gist?",
            "can you sum that up?",
            "in a nutshell?",
            "what are the main points?",
            "the quick version, please?",
            "can you keep it short?",
            "what's the takeaway?",
            "sorry, the short answer?",
            "could you summarize that?",
            "give me the headline",
            "the cliff notes version?",
            "just the gist, please",
            "can you cut to the chase?",
        ),
        "[Sure, the short version:|Of course. In a nutshell:|Sure. The key points:] {s}",
        lambda t: {"s": lower_first(t.summary)},
    ),
    "Personal Context": (
        "[oh, sorry,|wait,|sorry to cut in,|] {d}",
        "[Thanks for telling me.|Ah, that's important.|Good to know, that changes things.] {r}",
        lambda t: {"d": t.personal[0], "r": t.personal[1]},
    ),
}


_KNOWS_BASICS = ("Skip Basics",)
_NEW_TO_IT = re.compile(r"\b(start|learn|first|never|begin)", re.I)


def _acknowledge(scenario: str) -> Callable[[Ctx], Lines]:
    cut_in, reply, slots_of = _ACKNOWLEDGE[scenario]

    def build(ctx: Ctx) -> Lines:
        t: Topic = ctx.item
        slots = slots_of(t)
        content = (
            lower_first(ctx.deal(cut_in)) if isinstance(cut_in, tuple) else ctx.xc(cut_in, **slots)
        )
        ack = ctx.x(reply, **slots)
        if scenario in _KNOWS_BASICS:
            # the user already knows the topic: a question and follow-up that say nothing otherwise
            closing = [] if _NEW_TO_IT.search(t.follow[0]) else _closing(ctx, t)
            return [
                ("user", _question(ctx, t, t.expert_ask)),
                ("model", _cut(t, content)),
                ("model", ack),
                *closing,
            ]
        return [
            ("user", _question(ctx, t)),
            ("model", _cut(t, content)),
            ("model", ack),
            *_closing(ctx, t),
        ]

    return build


BUILDERS: dict[str, tuple[tuple, Callable[[object], str], Callable[[Ctx], Lines]]] = {
    **{name: (TOPICS, lambda t: t.topic, _continue(name)) for name in _BC_PHRASES},
    "Short Stop Repair": (TOPICS, lambda t: t.topic, stop_repair),
    **{name: (TOPICS, lambda t: t.topic, _acknowledge(name)) for name in _ACKNOWLEDGE},
}
