"""Offline grammars for the responsive scenarios (the model holds the floor, the user overlaps).

Layout: the user's question; the model's answer carrying the user's barge-in marker
(``<backchannel: ...>`` followed by the rest of the answer for continue scenarios,
``<interrupt: ...>`` at the end of what the model got to say for acknowledge scenarios); for
acknowledge scenarios the model's adapted reply; then, sometimes, a closing question and answer.
"""

from __future__ import annotations

from typing import Callable

from fdeval.benchmarks.instructfd.offline.common import Ctx, opener
from fdeval.benchmarks.instructfd.offline.grammar import lower_first
from fdeval.benchmarks.instructfd.offline.topics import TOPICS, Topic

Lines = list[tuple[str, str]]

CLOSING_CHANCE = 0.55


def _question(ctx: Ctx, t: Topic) -> str:
    ask = ctx.pick(t.asks)
    if ctx.chance(0.3):
        ask = ctx.x("[Quick question.|I've got a question.|Can I ask you something?|]") + " " + ask
    return ctx.x("{o} {a}", o=opener(ctx), a=ask)


def _closing(ctx: Ctx, t: Topic, required: bool = False) -> Lines:
    if not required and not ctx.chance(CLOSING_CHANCE):
        return []
    q, a = t.follow
    q = ctx.x("[Great, thanks.|Okay, that helps.|Got it.|Perfect.|Thanks.|] [And|Oh, and|One more thing,|] {q}",
              q=lower_first(q))
    return [("user", q), ("model", a)]


# ------------------------------------------------------------------------------------------------
# Continue scenarios: a user backchannel mid-answer, the model keeps going

_BC_PHRASES = {
    "User Acknowledgment": ("okay", "mm-hmm", "uh-huh", "alright", "okay, yeah", "mm-hmm, okay"),
    "User Alignment": ("yeah", "right", "yeah, right", "exactly", "true", "yeah, makes sense"),
    "User Amusement": ("ha, that's great", "haha", "ha ha, no way", "oh, that's funny", "ha, I love that",
                       "ha, classic"),
    "User Understanding": ("I see", "got it", "oh, that makes sense", "ah, okay", "gotcha", "oh, I get it"),
    "User Continuer": ("uh-huh", "go on", "keep going", "and then?", "mm-hmm, go on", "okay, and?"),
}


def _continue(scenario: str) -> Callable[[Ctx], Lines]:
    def build(ctx: Ctx) -> Lines:
        t: Topic = ctx.item
        bc = ctx.pick(_BC_PHRASES[scenario])
        if scenario == "User Amusement":
            answer = ctx.x("{l} {f} <backchannel: {b}> [Anyway,|But seriously,|So, anyway,] {m}",
                           l=t.lead, f=t.fun, b=bc, m=lower_first(t.more))
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
            return text[len(prefix):]
    return text


def _cut(t: Topic, content: str) -> str:
    return f"{t.lead} <interrupt: {content}>"


def stop_repair(ctx: Ctx) -> Lines:
    t: Topic = ctx.item
    content = ctx.xc("[wait, actually|hold on, sorry|wait, wait|actually, hang on|sorry, wait a second|oh, wait]")
    ack = ctx.pick(("Sure, what's up?", "Of course, go ahead.", "Yeah, what is it?", "No problem, what's on your mind?",
                    "Sure, I'm listening."))
    kind = ctx.rng.randrange(3)
    said, reply = (t.constraint, t.personal, t.redirect)[kind]
    said = ctx.x("[Sorry,|Sorry, I should have said,|Yeah, so|Right, so] {s}.", s=_bare(said))
    if said.endswith("?."):
        said = said[:-1]
    return [("user", _question(ctx, t)), ("model", _cut(t, content)), ("model", ack), ("user", said),
            ("model", reply)]


def _lead_again(t: Topic) -> str:
    """The answer's first sentence, said once more."""
    return lower_first(t.lead.removeprefix("Sure, ").removeprefix("Sure. ").removeprefix("Good question, "))


# scenario -> (the user's cut-in, the model's adapted reply, the slots both take from the topic)
_ACKNOWLEDGE: dict[str, tuple[str, str, Callable[[Topic], dict[str, str]]]] = {
    "Short Repeat Request": (
        "[sorry?|say that again?|come again?|sorry, what was that?|wait, can you repeat that?|sorry, I missed that]",
        "[Sure.|Of course.|No problem.] [Let me say that again.|I said,|Again,] {l}",
        lambda t: {"l": _lead_again(t)}),
    "Short Confusion Signal": (
        "[you lost me|wait, what?|I'm not following|sorry, I'm lost|huh, I don't get it|wait, I'm confused]",
        "[Sorry about that.|My bad, let me back up.|Fair enough, I went too fast.] {s}",
        lambda t: {"s": t.simple}),
    "Hearing Check": (
        "[hello?|can you hear me?|are you still there?|hello, you there?|hey, is this thing on?|hello, did I lose you?]",
        "[Yes, I'm here, I can hear you.|Yep, still here.|Yes, I can hear you fine.] [I was saying,|As I was "
        "saying,|Picking up where I was,] {l}",
        lambda t: {"l": _lead_again(t)}),
    "Add Constraint": (
        "[oh wait,|hold on,|sorry to jump in,|oh, but|wait, but|] {s}",
        "[Got it.|Ah, okay.|Good to know.|Okay, that changes things.] {r}",
        lambda t: {"s": _bare(t.constraint[0]), "r": t.constraint[1]}),
    "Topic Redirect": (
        "[sorry,|oh, wait,|hang on,|] {s}",
        "[Sure, let's switch to that.|Good question.|Sure.|Okay, switching gears.] {r}",
        lambda t: {"s": t.redirect[0], "r": t.redirect[1]}),
    "Scope Narrowing": (
        "[sorry, I really just want to know about|wait, I mostly care about|actually, can we just focus on|sorry, "
        "the part I need is] {a}",
        "[Sure, let's focus on that.|Got it, just that part then.|Of course.] {r}",
        lambda t: {"a": t.aspect[0], "r": t.aspect[1]}),
    "Skip Basics": (
        "[sorry, I know the basics,|wait, I know this part,|hold on, I've got the basics down,] {e}, [can we skip "
        "ahead?|can you get to the more advanced stuff?|what's the next level?]",
        "[Got it, let's skip ahead.|Ah, then you're past the basics.|Okay, advanced it is.] {r}",
        lambda t: {"e": t.advanced[0], "r": t.advanced[1]}),
    "Summary Request": (
        "[sorry, can you just give me the main points?|wait, what's the short version?|can you just give me the "
        "bottom line?|sorry, just the key takeaways?|hold on, can you boil that down for me?]",
        "[Sure, the short version:|Of course. In a nutshell:|Sure. The key points:] {s}",
        lambda t: {"s": lower_first(t.summary)}),
    "Personal Context": (
        "[oh, sorry,|wait,|sorry to cut in,|] {d}",
        "[Thanks for telling me.|Ah, that's important.|Good to know, that changes things.] {r}",
        lambda t: {"d": t.personal[0], "r": t.personal[1]}),
}


def _acknowledge(scenario: str) -> Callable[[Ctx], Lines]:
    cut_in, reply, slots_of = _ACKNOWLEDGE[scenario]

    def build(ctx: Ctx) -> Lines:
        t: Topic = ctx.item
        slots = slots_of(t)
        content = ctx.xc(cut_in, **slots)
        ack = ctx.x(reply, **slots)
        return [("user", _question(ctx, t)), ("model", _cut(t, content)), ("model", ack), *_closing(ctx, t)]

    return build


BUILDERS: dict[str, tuple[tuple, Callable[[object], str], Callable[[Ctx], Lines]]] = {
    **{name: (TOPICS, lambda t: t.topic, _continue(name)) for name in _BC_PHRASES},
    "Short Stop Repair": (TOPICS, lambda t: t.topic, stop_repair),
    **{name: (TOPICS, lambda t: t.topic, _acknowledge(name)) for name in _ACKNOWLEDGE},
}
