"""The reference agent: fdeval's embedded default model under test.

A small cascaded full-duplex agent that runs in-process on a CPU, in the spirit of the cascade
baselines of the papers: Silero VAD on what it hears, a turn-taking policy read from the system
instruction, espeak-ng for its voice, and its own words reported with their times. It has no
speech recognition, so it cannot understand content: it acts on what a VAD can tell (the user
speaks, pauses, stops, overlaps it) and says generic things. That makes it a real, weak baseline
whose score is whatever the judge finds, and a deterministic fixture for the engine.
Text rule `text_stream = "words"`: one text event per spoken word, timed by espeak-ng.

Policies (chosen by `parse_policy` from the instruction text):
- default (no instruction): takes the turn after a short silence, so it talks into mid-turn
  pauses; yields to any overlap and then resumes its old answer without acknowledging.
- listen: waits for a long silence before taking the turn; never cuts in.
- backchannel: a short "mm-hmm"-type token at mid-turn pauses, otherwise listens.
- interrupt: cuts in at the first clear pause after the user has talked for a while.
- continue: keeps talking through short overlaps; yields only to long ones.
- acknowledge: stops as soon as the user overlaps, acknowledges, then answers afresh.
- assistant (EchoChain's responder prompt, `ASSISTANT_MARKER`): answers each user request from
  templates filled with what it recognised in the user's words (see "The assistant policy" below);
  yields to an overlap like `acknowledge` and answers afresh with its updated constraints.
  When the instruction holds a text record of earlier exchanges (`HISTORY_HEADER`, EchoChain's
  replay and half-duplex control), it first takes up that record's user lines as if heard live.

The agent declares `oracle_user_text`: the orchestrator hands each session the words of the user
turns as they are played (`hear_user_words`), i.e. the user policy's own text, not speech
recognition. Only the assistant policy reads them; every other policy ignores them.
"""

from __future__ import annotations

import copy
import os
import random
import re
import time
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import asdict, dataclass, replace
from typing import Any

import numpy as np

from fdeval.audio.tts import EspeakTTS, Synthesis
from fdeval.audio.vad import SileroVAD
from fdeval.errors import ConfigError
from fdeval.models.base import DuplexModel, InProcessSession, ModelEvent

AGENT_VERSION = "1"


@dataclass(frozen=True)
class Policy:
    """Timing rules of the agent (seconds)."""

    kind: str = "default"
    take_turn_silence_s: float = 0.7  # user silence after which it answers
    backchannel: bool = False
    backchannel_pause_s: float = 0.35  # a pause this long mid-turn invites a backchannel
    backchannel_gap_s: float = 4.0  # at most one backchannel per this long
    interrupt: bool = False
    interrupt_pause_s: float = 0.25
    interrupt_after_speech_s: float = 2.5  # user speech in the turn before it will cut in
    overlap_yield_s: float = 0.3  # overlapping user speech this long makes it stop
    acknowledge: bool = False  # after yielding: acknowledge and answer afresh (else resume)
    min_user_speech_s: float = 0.3  # user speech that counts as a turn worth answering


POLICIES: dict[str, Policy] = {
    "default": Policy(),
    "listen": Policy("listen", take_turn_silence_s=1.6, overlap_yield_s=0.6, acknowledge=True),
    "backchannel": Policy(
        "backchannel",
        take_turn_silence_s=1.6,
        backchannel=True,
        overlap_yield_s=0.6,
        acknowledge=True,
    ),
    "interrupt": Policy(
        "interrupt", take_turn_silence_s=1.6, interrupt=True, overlap_yield_s=0.6, acknowledge=True
    ),
    "continue": Policy("continue", take_turn_silence_s=1.0, overlap_yield_s=1.2, acknowledge=True),
    "acknowledge": Policy(
        "acknowledge", take_turn_silence_s=1.0, overlap_yield_s=0.25, acknowledge=True
    ),
    # EchoChain: a 1 s silence ends a request of a few sentences; any barge-in past 0.3 s stops it
    "assistant": Policy(
        "assistant", take_turn_silence_s=1.0, overlap_yield_s=0.3, acknowledge=True
    ),
}

_RESPONSIVE = re.compile(
    r"while you(?:'re| are) (?:speaking|talking|answering|explaining)|mid-answer|(?:hold|keep|give) (?:up )?the floor"
    r"|user interrupts you|user backchannels"
)
_ACK = re.compile(r"acknowledg|give (?:up )?the floor|adapt|adjust|yield")
_NEGATED = re.compile(r"(?:\bno\b|\bnever\b|\bnot\b|\bdon't\b|\bdo not\b|\bwithout\b)[^.,;:]*")
_INT = re.compile(r"\binterrupt|\bcut in|\bjump in|\bbreak in")
_BC = re.compile(r"backchannel|listener signal|mm-?hmm|uh-huh")
_LISTEN = re.compile(r"listen|silent|quiet")


def parse_policy(instruction: str | None) -> str:
    """Which of the agent's policies an instruction asks for (keyword reading, no model).

    Responsive instructions talk about the agent's own speech being overlapped; among them the
    ones that ask it to give up the floor and acknowledge are `acknowledge`, the rest `continue`.
    For proactive ones, negated clauses ("never cut in", "no listener signals") are removed first,
    then the most specific action still asked for wins: interrupt, backchannel, listen.
    """
    if not instruction or not instruction.strip():
        return "default"
    text = instruction.lower().replace("\u2019", "'")
    if (
        ASSISTANT_MARKER.lower() in text
    ):  # first: the responder prompt also talks about interruptions
        return "assistant"
    if _RESPONSIVE.search(text):
        return "acknowledge" if _ACK.search(text) else "continue"
    asked = _NEGATED.sub(" ", text)
    if _INT.search(asked):
        return "interrupt"
    if _BC.search(asked):
        return "backchannel"
    if _LISTEN.search(text):
        return "listen"
    return "default"


ANSWERS = (
    (
        "Sure, I can help with that. Let me walk you through it one step at a time, starting with "
        "the part that matters most, and then we can look at the details together."
    ),
    (
        "Okay, that makes sense. The simplest way to think about it is to break it into a few small "
        "pieces, handle the first one today, and leave the rest for later in the week."
    ),
    (
        "Good question. In most cases the answer depends on your situation, so I would start with "
        "what you already know, write it down, and then compare a couple of options side by side."
    ),
    (
        "Thanks for telling me. Here is how I would approach it: first get clear on the goal, then "
        "pick one small change you can try right away, and check how it feels after a few days."
    ),
)
BACKCHANNELS = ("mm-hmm", "yeah", "okay", "right", "I see")
INTERRUPTS = (
    "Sorry to cut in, but I think something there might not be right. Can we check that first?",
    "Hold on a second, I want to make sure we get that part right before you go on.",
)
ACKS = (
    "Oh, sorry, go ahead. Got it, let me adjust my answer to what you just said.",
    "Okay, thanks for stopping me. Let me change course and focus on that instead.",
)
RESUMES = ("Anyway, as I was saying, ",)


# -- The assistant policy (EchoChain) -------------------------------------------------------------
# It understands only what these patterns catch in the user's words (oracle text from the user
# policy). The first request's content words are the task it keeps serving; constraints of the kinds
# below are kept across the conversation, a new value of a kind replacing the old one. Anything else
# the user says (a new date, a person, a preference without a pattern) is not taken up, so its
# failures are real ones of a keyword assistant, never injected.
ASSISTANT_MARKER = "You are the voice assistant in a live spoken conversation"
# 3: fillers are not task words. Bump when the patterns, templates or history reading change
# (part of identity())
ASSISTANT_VERSION = "3"
# EchoChain's replay and control give the earlier exchanges as text in the instruction: this block
# (the layout of its responder prompt). The assistant reads its USER lines, never its ASSISTANT ones.
HISTORY_HEADER = "CONVERSATION SO FAR (a text record of the spoken exchanges):"
HISTORY_SILENT = "(nothing)"  # the record's text for a turn in which the user said nothing
_EXCHANGE = re.compile(r"--- Exchange (?P<n>\d+)")
_USER_LINE = re.compile(r"USER \((?P<kind>message|barge-in)(?:, [^)]*)?\):(?P<text>.*)")
_ASSISTANT_LINE = re.compile(r"ASSISTANT \((?P<kind>[^)]*)\):")

_ONES = "one|two|three|four|five|six|seven|eight|nine"
_NUM_WORD = (
    rf"(?:(?:twenty|thirty|forty|fifty|sixty|seventy|eighty|ninety)(?:-(?:{_ONES}))?|{_ONES}|zero|ten|eleven"
    r"|twelve|thirteen|fourteen|fifteen|sixteen|seventeen|eighteen|nineteen|hundred|thousand|half|dozen|a|an)"
)
_NUM = rf"(?:\d+(?:[.,]\d+)?|{_NUM_WORD}(?:(?: and | |-){_NUM_WORD})*)"
_B, _E = r"(?<![\w'-])", r"(?![\w'-])"  # word edges that keep "sixty-five" and "can't" whole
_MONEY = re.compile(
    rf"{_B}(?P<n>{_NUM})\s+(?P<u>dollars?|bucks|euros?|pounds?){_E}"
    rf"(?P<post>\s+(?:budget|max|maximum|tops|limit|or less|at most){_E})?"
)
_BUDGET_CUE = re.compile(
    rf"{_B}(?:budget|spend|spending|afford|under|below|max|maximum|most|limit|cap|only|within"
    rf"|up to|less than|more than){_E}"
)
_PER = r"(?:\s+(?:a|per|each)\s+(?:day|night|week|session|evening|morning))?"
_DURATION = re.compile(
    rf"{_B}(?P<n>{_NUM})\s+(?P<u>minutes?|hours?|days?|weeks?)(?P<per>{_PER}){_E}"
    rf"(?P<post>\s+(?:max|maximum|tops|or less|at most){_E})?"
)
_TIME_CUE = re.compile(
    rf"{_B}(?:only|just|under|within|most|max|maximum|limit|up to|less than|more than){_E}"
)
_PEOPLE = (
    re.compile(rf"{_B}(?P<n>{_NUM})\s+(?:of us|people|persons|guests|adults){_E}"),
    re.compile(rf"{_B}(?:party|group|table|reservation|dinner) (?:for|of) (?P<n>{_NUM}){_E}"),
)
_DIETS = "vegetarian|vegan|pescatarian|keto|paleo|kosher|halal"
_DIET = re.compile(
    rf"(?:(?P<neg>\bnot|\bno longer|n't|\bnever)(?:\s+[\w']+){{0,2}}?\s+)?{_B}(?P<d>{_DIETS}){_E}"
)
_FREE = re.compile(rf"{_B}(?P<x>[a-z]+)[- ]free{_E}")
_AVOID_CUE = re.compile(
    rf"(?:{_B}(?:allergic to|allergy to|(?:can't|cannot|can not|couldn't) (?:have|eat|drink|use|take|stand|handle)"
    r"|(?:don't|do not|doesn't|does not|won't|will not) (?:want|like|eat|drink|need)|no|without|avoid|skip|exclude"
    rf"|leave out|cut out|nothing with|hate|hates|instead of|(?:but|and) not)|,\s*not){_E}"
)
_ALLERGY = re.compile(rf"{_B}(?P<x>[a-z]+) allerg(?:y|ies){_E}")
_FINE = re.compile(rf"{_B}(?P<x>[a-z]+) (?:is|are) (?:fine|okay|ok|alright) ")
_PRIORITY = (
    re.compile(r"\bcares? more about (?P<a>[^.,;!?]+?) than (?:about )?(?P<b>[^.,;!?]+)"),
    re.compile(r"\bprioriti[sz]e (?P<a>[^.,;!?]+?) over (?P<b>[^.,;!?]+)"),
    re.compile(r"\b(?:rather have|prefer) (?P<a>[^.,;!?]+?) (?:than|over) (?P<b>[^.,;!?]+)"),
    re.compile(
        r"(?P<a>[^.,;!?]+?) (?:matters|matter|is more important|are more important|counts)"
        r" (?:more )?than (?P<b>[^.,;!?]+)"
    ),
)
_CLAUSE = re.compile(r"[^.!?;]+")
_NUMBER = re.compile(_NUM)
_TOKEN = re.compile(r"[a-z][a-z'-]*|,")

STOPWORDS = frozenset(
    """
mm-hmm uh-huh hmm mm um uh er ah oh okay ok yeah yep like kinda sorta gonna wanna
a about above after again against all also am an and any anyway are aren't as at be because been before being
below between both but by can can't cannot could couldn't did didn't do does doesn't doing don't down during
each few for from further had hadn't has hasn't have haven't having he he'd he'll he's her here here's hers
herself him himself his how how's i i'd i'll i'm i've if in into is isn't it it's its itself let's me more most
mustn't my myself no nor not of off on once only or other ought our ours ourselves out over own same shan't she
she'd she'll she's should shouldn't so some such than that that's the their theirs them themselves then there
there's these they they'd they'll they're they've this those through to too under until up very was wasn't we
we'd we'll we're we've were weren't what what's when when's where where's which while who who's whom why why's
with won't would wouldn't you you'd you'll you're you've your yours yourself yourselves
actually really just maybe please okay ok yeah yes well so um uh oh hey hi hello thanks thank sure right like
want wants wanted need needs needed help helping make making get getting give tell know think thinking figure
find recommend suggest put come coming looking trying try going go gonna wanna got let lets much many lot lots
something anything thing things stuff way kind sort bit little good great nice best better also still even now
today tonight tomorrow week weekend day days time times can could would should will shall might must may
wait hold sorry hmm idea problem worries matter rush clue pressure longer anymore honestly instead fine rather
avoid skip exclude without hate hates never ever always done max
dollars dollar bucks euros pounds budget minutes minute hours hour weeks people persons guests adults us
allergic allergy allergies vegetarian vegan pescatarian keto paleo kosher halal free
one two three four five six seven eight nine ten eleven twelve twenty thirty forty fifty sixty seventy eighty
ninety hundred thousand half dozen
""".split()
)


@dataclass(frozen=True)
class Constraint:
    """One constraint the assistant holds: `kind` (a new value of a kind replaces the old one;
    avoid:<item> keys one kind per item) and how it says it. phrase None: the kind is dropped."""

    kind: str
    phrase: str | None


def _plural(n: str, unit: str) -> str:
    """ "sixty dollar" -> "sixty dollars", "a sixty" -> "sixty", "half an hour" stays."""
    unit = {"bucks": "dollars"}.get(unit, unit)
    first, _, rest = n.partition(" ")
    if (
        first in ("a", "an")
        and rest
        and rest.split(" ")[0] not in ("hundred", "thousand", "dozen", "half")
    ):
        n = rest
    if n in ("one", "a", "an", "1") or n.endswith((" a", " an")) or unit.endswith("s"):
        return f"{n} {unit}"
    return f"{n} {unit}s"


def _items(rest: str) -> list[str]:
    """The things named right after an exclusion cue: up to three, each of one or two content
    words ("tree nuts, dairy and eggs"), stopping at the first word that is not one."""
    items, cur = [], []
    for tok in _TOKEN.findall(rest):
        if tok in (",", "and", "or"):
            if not (cur or items):
                break  # "no, I meant ..." names nothing
            if cur:
                items.append(" ".join(cur))
                cur = []
            continue
        if tok in ("the", "any", "some", "my", "a", "an", "anything") and not cur:
            continue
        if tok in STOPWORDS or tok.endswith("-free") or len(cur) == 2:  # "-free" is read on its own
            break
        cur.append(tok)
    if cur:
        items.append(" ".join(cur))
    return items[:3]


def _phrase(text: str, from_end: bool = False) -> str:
    """Up to four content-bearing words of `text`, leading/trailing stopwords removed."""
    toks = [t for t in _TOKEN.findall(text) if t != ","]
    toks = toks[-4:] if from_end else toks[:4]
    while toks and toks[0] in STOPWORDS:
        toks = toks[1:]
    while toks and toks[-1] in STOPWORDS:
        toks = toks[:-1]
    return " ".join(toks)


def normalise(words: list[str] | tuple[str, ...]) -> str:
    return " ".join(" ".join(words).lower().replace("\u2019", "'").split())


def recognise(text: str) -> list[Constraint]:
    """The constraints the assistant recognises in normalised user text, in the order said."""
    found: list[tuple[int, Constraint]] = []
    for clause in _CLAUSE.finditer(text):
        c, at = clause.group(), clause.start()
        # an amount is a limit when a cue comes before it in its clause ("budget dropped from a
        # hundred dollars to sixty dollars": both are, the later one wins) or right after it
        for rx, cue, kind, say in (
            (_MONEY, _BUDGET_CUE, "budget", "a budget of "),
            (_DURATION, _TIME_CUE, "time", "at most "),
        ):
            first_cue = cue.search(c)
            found += [
                (
                    at + m.start(),
                    Constraint(
                        kind, say + _plural(m["n"], m["u"]) + (m.groupdict().get("per") or "")
                    ),
                )
                for m in rx.finditer(c)
                if m["post"] or (first_cue and first_cue.start() < m.start())
            ]
        for rx in _PEOPLE:
            found += [
                (at + m.start("n"), Constraint("people", f"{m['n']} people"))
                for m in rx.finditer(c)
                if m["n"] not in ("a", "an", "half")
            ]
        for m in _DIET.finditer(c):
            found.append(
                (
                    at + m.start("d"),
                    Constraint("diet", None if m["neg"] else f"everything {m['d']}"),
                )
            )
        for m in _FREE.finditer(c):
            if m["x"] not in STOPWORDS:
                found.append((at + m.start(), Constraint(f"avoid:{m['x']}", f"no {m['x']}")))
        for m in _AVOID_CUE.finditer(c):
            found += [
                (at + m.end(), Constraint(f"avoid:{x}", f"no {x}")) for x in _items(c[m.end() :])
            ]
        for m in _ALLERGY.finditer(c):
            if m["x"] not in STOPWORDS:
                found.append((at + m.start(), Constraint(f"avoid:{m['x']}", f"no {m['x']}")))
        for m in _FINE.finditer(c + " "):
            found.append((at + m.start(), Constraint(f"avoid:{m['x']}", None)))
        for rx in _PRIORITY:
            for m in rx.finditer(c):
                a, b = _phrase(m["a"], from_end=rx is _PRIORITY[-1]), _phrase(m["b"])
                if a and b:
                    found.append((at + m.start("a"), Constraint("priority", f"{a} ahead of {b}")))
                    break
    found.sort(key=lambda f: f[0])  # stable: same position keeps pattern order
    return [c for _, c in found]


def content_words(text: str, limit: int, known: frozenset[str] = frozenset()) -> list[str]:
    """The first `limit` distinct content words of `text` (no stopwords, numbers, units or
    `known` words), adjacent ones joined ("dinner party") so they read as said."""
    phrases: list[list[str]] = []
    seen, joined = set(known), False
    for tok in _TOKEN.findall(text):
        tok = tok.strip("'-")
        if (
            len(tok) < 3
            or tok in STOPWORDS
            or tok.endswith("n't")
            or _NUMBER.fullmatch(tok)
            or tok in seen
        ):
            joined = False
            continue
        if len(seen) - len(known) == limit:
            break
        seen.add(tok)
        if joined:
            phrases[-1].append(tok)
        else:
            phrases.append([tok])
        joined = True
    return [" ".join(p) for p in phrases]


def history_user_turns(instruction: str | None) -> list[tuple[str, bool]]:
    """The user's turns in the instruction's `HISTORY_HEADER` block, in order: (text, is a
    barge-in). Read by the layout of one exchange (message; if interrupted, the answer before the
    barge-in, then the barge-in; then the rest of the answer) and the exchanges' numbering, so that
    a line of the assistant's own text that looks like a USER line or an exchange header is not
    taken for one; a user text may run on over lines."""
    lines = (instruction or "").splitlines()
    start = next((i + 1 for i, line in enumerate(lines) if line.strip() == HISTORY_HEADER), None)
    if start is None:
        return []
    turns: list[tuple[str, bool]] = []
    state = "out"  # out (assistant text, other sections), head, message, before, barge
    number = None  # of the last exchange
    for i in range(start, len(lines)):
        line = lines[i].strip()
        head = _EXCHANGE.match(line)
        # an exchange starts the record, or follows a blank line with the next number
        if head and (
            i == start
            if number is None
            else not lines[i - 1].strip() and int(head["n"]) == number + 1
        ):
            state, number = "head", int(head["n"])
            continue
        user, assistant = _USER_LINE.match(line), _ASSISTANT_LINE.match(line)
        if state == "head":
            state = "message" if user and user["kind"] == "message" else "out"
        elif state == "before":
            state = "barge" if user and user["kind"] == "barge-in" else "before"
        elif state in ("message", "barge") and assistant:
            state = (
                "before"
                if state == "message" and assistant["kind"] == "before the barge-in"
                else "out"
            )
            continue
        if state in ("message", "barge") and user:
            turns.append((user["text"].strip(), state == "barge"))
        elif state in ("message", "barge") and line:
            turns[-1] = (f"{turns[-1][0]} {line}", turns[-1][1])
    return [(text, barge_in) for text, barge_in in turns if text and text != HISTORY_SILENT]


def _spoken_list(xs: list[str]) -> str:
    return xs[0] if len(xs) == 1 else ", ".join(xs[:-1]) + " and " + xs[-1]


OPENINGS = (  # with constraints / without
    (
        "Okay, for {task}, keeping to {cons}, here is what I would do.",
        "Okay, for {task}, here is what I would do.",
    ),
    (
        "Right, so for {task}, with {cons}, this is my suggestion.",
        "Right, so for {task}, this is my suggestion.",
    ),
    (
        "Sure. For {task}, and keeping {cons} in mind, here is the plan.",
        "Sure. For {task}, here is the plan.",
    ),
)
BODIES = (
    (
        "First I would pick a few options that fit all of that, then narrow them down to the best "
        "two, and check the details with you before we commit to anything."
    ),
    (
        "I would start with the simplest option that meets those limits, sketch the steps one at a "
        "time, and we can adjust anything that does not feel right."
    ),
    (
        "Let me lay out the first step now, then the next one, and at the end we can look at what "
        "is left and change whatever you like."
    ),
)
ASSISTANT_ACKS = ("Got it, {new}.", "Understood, {new}.")
ASSISTANT_ACKS_BARE = ("Okay, thanks.", "Okay, thanks for that.")


@dataclass
class AssistantState:
    """What the assistant holds across one conversation: the task, the latest request's own
    words, and its constraints by kind (insertion order = the order it first heard them)."""

    task: list[str]
    focus: list[str]
    constraints: dict[str, str]

    def take(self, words: list[str], barge_in: bool) -> list[str]:
        """Update from one utterance; returns the phrases of the constraints it brought."""
        text = normalise(words)
        if not barge_in:
            if not self.task:
                self.task = content_words(text, 5)
            else:  # a later request: its own words, those of the task aside
                self.focus = content_words(text, 4, frozenset(" ".join(self.task).split()))
        new = []
        for c in recognise(text):
            if c.phrase is None:  # "nuts are fine" also lifts "tree nuts"
                for kind in [
                    k
                    for k in self.constraints
                    if k == c.kind or k.endswith(" " + c.kind.partition(":")[2])
                ]:
                    del self.constraints[kind]
            else:
                self.constraints[c.kind] = c.phrase
                new.append(c.phrase)
        return list(dict.fromkeys(new))

    def answer(self, rng: random.Random) -> str:
        task = _spoken_list(self.task) if self.task else "what you asked"
        if self.focus:
            task += f", and your question about {_spoken_list(self.focus)}"
        with_cons, bare = rng.choice(OPENINGS)
        cons = list(self.constraints.values())
        opening = (
            with_cons.format(task=task, cons=_spoken_list(cons)) if cons else bare.format(task=task)
        )
        return f"{opening} {rng.choice(BODIES)}"


class ReferenceAgent(DuplexModel):
    """In-process cascaded full-duplex agent (VAD + policy + espeak-ng), 16 kHz, 32 ms frames."""

    clock = "lockstep"
    text_stream = "words"
    oracle_user_text = True  # read by the assistant policy only

    def __init__(
        self,
        name: str = "reference",
        voice: str = "en-us+f3",
        rate_wpm: int = 175,
        sample_rate: int = 16000,
        frame_s: float = 0.032,
        vad_threshold: float = 0.5,
        policy_overrides: dict[str, dict[str, Any]] | None = None,
        compute_s_per_frame: float = 0.0,
        concurrency: int = 1,
    ):
        self.name = name
        if not (isinstance(concurrency, int) and concurrency >= 1):
            raise ConfigError(f"model.concurrency: must be an integer >= 1, got {concurrency!r}")
        # sessions held at once: each has its own state, so any number can share the agent
        self.concurrency = concurrency
        if not compute_s_per_frame >= 0:
            raise ConfigError(
                f"model.compute_s_per_frame: must be >= 0, got {compute_s_per_frame!r}"
            )
        # extra time each frame takes (a model slower than real time, to see the realtime health check)
        self.compute_s_per_frame = float(compute_s_per_frame)
        self.voice, self.rate_wpm = voice, rate_wpm
        self.sample_rate, self.frame_s = sample_rate, frame_s
        self.vad_threshold = vad_threshold
        self.policies = {
            k: replace(p, **(policy_overrides or {}).get(k, {})) for k, p in POLICIES.items()
        }
        self._tts = EspeakTTS(voice=voice, rate_wpm=rate_wpm, sample_rate=sample_rate)
        self._vad = SileroVAD(sample_rate=sample_rate)
        self._cache: dict[str, Synthesis] = {}
        self._pool: ThreadPoolExecutor | None = None  # the assistant's answers, synthesized ahead

    def identity(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "kind": "reference-agent",
            "version": AGENT_VERSION,
            "voice": self.voice,
            "rate_wpm": self.rate_wpm,
            "frame_s": self.frame_s,
            "vad_threshold": self.vad_threshold,
            "policies": {k: asdict(p) for k, p in self.policies.items()},
            "assistant_version": ASSISTANT_VERSION,
            **(
                {"compute_s_per_frame": self.compute_s_per_frame}
                if self.compute_s_per_frame
                else {}
            ),
        }

    def share(self, index: int, count: int) -> None:
        self.concurrency = len(range(index, self.concurrency, count))

    def synth(self, text: str, cache: bool = True) -> Synthesis:
        """`cache=False` for texts that rarely repeat (the assistant's answers), so a long run
        does not keep every answer's audio."""
        if not cache:
            return self._tts.synthesize(text)
        if text not in self._cache:
            self._cache[text] = self._tts.synthesize(text)
        return self._cache[text]

    def synth_ahead(self, text: str) -> Future:
        """Start synthesizing `text` in a worker thread (espeak-ng runs in its own process, so the
        frame loop keeps running meanwhile)."""
        if self._pool is None:
            # one espeak-ng process per session at most (several sessions of a realtime run may ask
            # at the same moment; one worker made the last wait for all the others' synthesis),
            # and no more than the cores that run them
            workers = max(1, min(self.concurrency, os.cpu_count() or 1))
            self._pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="reference-tts")
        return self._pool.submit(self._tts.synthesize, text)

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True)
            self._pool = None

    def warm(self) -> None:
        """Synthesize the fixed texts of the keyword policies (answers, acknowledgements with each
        answer, backchannels, cut-ins) into the cache, outside any session: under the realtime
        clock a frame must not wait for espeak-ng (one fresh process per synthesis, 45 ms to
        0.3 s here)."""
        texts = [*ANSWERS, *BACKCHANNELS, *INTERRUPTS, *(f"{a} {b}" for a in ACKS for b in ANSWERS)]
        todo = [t for t in texts if t not in self._cache]
        if todo:
            with ThreadPoolExecutor(max_workers=2) as pool:
                for t, syn in zip(todo, pool.map(self._tts.synthesize, todo)):
                    self._cache[t] = syn

    def session(self, instruction: str | None, seed: int) -> "ReferenceSession":
        policy = self.policies[parse_policy(instruction)]
        if policy.kind != "assistant":
            self.warm()
        sess = ReferenceSession(self, policy, seed)
        if (
            sess.assistant is not None
        ):  # a real assistant reads its system prompt: the earlier exchanges
            for text, barge_in in history_user_turns(instruction):
                sess.assistant.take(text.split(), barge_in)
        return sess


class ReferenceSession(InProcessSession):
    """All streaming state of one conversation with the reference agent."""

    def __init__(self, agent: ReferenceAgent, policy: Policy, seed: int):
        super().__init__()
        self.agent, self.policy = agent, policy
        self.rng = random.Random(seed)
        self.vad = agent._vad.stream(threshold=agent.vad_threshold, min_silence_s=0.1)
        self.frame_n = int(round(agent.frame_s * agent.sample_rate))
        self.t_s = 0.0
        # what it hears
        self.user_speaking = False
        self.user_onset_s = 0.0
        self.user_turn_speech_s = 0.0  # user speech since the agent last took the floor
        # what it says
        self.utt: Synthesis | None = None
        self.utt_kind = ""
        self.cursor = 0
        self.last_backchannel_s = -1e9
        self.cut_in_this_turn = False
        self.yielded_answer: str | None = None  # the answer it stopped, to resume or replace
        self.answers = list(ANSWERS)
        self.rng.shuffle(self.answers)
        # assistant policy: the words heard since it last took the floor, and what it holds
        self.heard: list[str] = []
        self.assistant = AssistantState([], [], {}) if policy.kind == "assistant" else None
        self.ahead: tuple[str, Future] | None = (
            None  # the answer it expects to give, being synthesized
        )
        self._heard_at_ahead = -1

    def hear_user_words(self, words: list[tuple[str, float]]) -> None:
        if self.assistant is not None:  # every other policy acts on the VAD alone
            self.heard.extend(text for text, _ in words)

    # -- hearing ------------------------------------------------------------------------------
    def _hear(self, frame: np.ndarray) -> None:
        for e in self.vad.push(frame):
            if e.kind == "onset":
                self.user_speaking, self.user_onset_s = True, e.t_s
            else:
                self.user_speaking = False
        self.t_s += len(frame) / self.agent.sample_rate
        if self.user_speaking:
            self.user_turn_speech_s += len(frame) / self.agent.sample_rate

    # -- speaking -----------------------------------------------------------------------------
    def _say(self, text: str, kind: str, cache: bool = True) -> None:
        """Speak `text`: the audio synthesized ahead when that was this very text (so the result
        never depends on how fast the synthesis ran), else from the cache or synthesized now."""
        ahead, self.ahead = self.ahead, None
        utt = (
            ahead[1].result()
            if ahead is not None and ahead[0] == text
            else self.agent.synth(text, cache)
        )
        self._speak(utt, kind)

    def _speak(self, utt: Synthesis, kind: str) -> None:
        self.utt, self.utt_kind, self.cursor = utt, kind, 0
        if kind in ("answer", "ack", "resume"):
            self.user_turn_speech_s = 0.0
            self.cut_in_this_turn = False

    def _emit(self) -> list[ModelEvent]:
        assert self.utt is not None
        sr = self.agent.sample_rate
        a, b = self.cursor, min(self.cursor + self.frame_n, len(self.utt.samples))
        events = [
            ModelEvent(
                "text",
                text=w.text,
                offset_s=max(0.0, w.start_s - a / sr),
                duration_s=w.end_s - w.start_s,
            )
            for w in self.utt.words
            if a <= int(round(w.start_s * sr)) < b
        ]
        events.append(ModelEvent.audio_chunk(self.utt.samples[a:b]))
        self.cursor = b
        if b >= len(self.utt.samples):
            if self.utt_kind in ("answer", "ack", "resume"):
                self.yielded_answer = None
            self.utt = None
        return events

    def _compose(
        self, state: AssistantState, rng: random.Random, heard: list[str], barge_in: bool
    ) -> str:
        """The assistant's answer to `heard`: after a yield the words are a barge-in (constraints
        only, acknowledged), else a request. Updates `state` and draws from `rng`."""
        new = state.take(heard, barge_in)
        answer = state.answer(rng)
        if not barge_in:
            return answer
        if new:
            return rng.choice(ASSISTANT_ACKS).format(new=_spoken_list(new)) + " " + answer
        return rng.choice(ASSISTANT_ACKS_BARE) + " " + answer

    def _assistant_turn(self) -> str:
        """The answer to what it heard since it last took the floor."""
        assert self.assistant is not None
        barge_in = self.yielded_answer is not None
        self.yielded_answer = None
        text = self._compose(self.assistant, self.rng, self.heard, barge_in)
        self.heard = []
        return text

    def _think_ahead(self) -> None:
        """In a pause after user speech: the answer it would give if the pause lasts, on copies of
        its state, sent to synthesis so that under the realtime clock no frame waits for it."""
        assert self.assistant is not None
        rng = random.Random()
        rng.setstate(self.rng.getstate())
        text = self._compose(
            copy.deepcopy(self.assistant), rng, list(self.heard), self.yielded_answer is not None
        )
        if self.ahead is None or self.ahead[0] != text:
            self.ahead = (text, self.agent.synth_ahead(text))

    def _next_answer(self) -> str:
        text = self.answers[0]
        self.answers = self.answers[1:] + self.answers[:1]
        return text

    def step(self, frame: np.ndarray) -> list[ModelEvent]:
        if self.agent.compute_s_per_frame:
            time.sleep(self.agent.compute_s_per_frame)  # blocks the loop, as real compute would
        self._hear(frame)
        p = self.policy
        if self.utt is not None:
            overlap_s = self.t_s - self.user_onset_s if self.user_speaking else 0.0
            long_turn = self.utt_kind in ("answer", "ack", "resume", "interrupt")
            if long_turn and self.user_speaking and overlap_s >= p.overlap_yield_s:
                if self.utt_kind in ("answer", "resume") or self.assistant is not None:
                    self.yielded_answer = (
                        self.utt.text
                    )  # the assistant: any yield makes what follows a barge-in
                    if self.assistant is None and not p.acknowledge:  # it will resume this answer
                        rest = RESUMES[0] + self.yielded_answer[0].lower() + self.yielded_answer[1:]
                        self.ahead = (rest, self.agent.synth_ahead(rest))
                self.utt = None  # stop at once: nothing of ours is queued anywhere
                self.user_turn_speech_s = overlap_s
                return []
            return self._emit()
        silence_s = 0.0 if self.user_speaking else self.vad.silence_s
        if (
            not self.user_speaking
            and self.user_turn_speech_s >= p.min_user_speech_s
            and silence_s >= p.take_turn_silence_s
        ):
            if self.assistant is not None:
                kind = "ack" if self.yielded_answer is not None else "answer"
                self._say(self._assistant_turn(), kind, cache=False)
            elif self.yielded_answer is not None and p.acknowledge:
                self.yielded_answer = None
                self._say(self.rng.choice(ACKS) + " " + self._next_answer(), "ack")
            elif self.yielded_answer is not None:
                rest = self.yielded_answer
                self.yielded_answer = None
                self._say(RESUMES[0] + rest[0].lower() + rest[1:], "resume")
            else:
                self._say(self._next_answer(), "answer")
            return self._emit()
        in_pause = not self.user_speaking and self.user_turn_speech_s > 0
        if (
            self.assistant is not None
            and in_pause
            and self.user_turn_speech_s >= p.min_user_speech_s
            and (self.ahead is None or self._heard_at_ahead != len(self.heard))
        ):
            self._heard_at_ahead = len(self.heard)
            self._think_ahead()
        if (
            p.backchannel
            and in_pause
            and silence_s >= p.backchannel_pause_s
            and self.user_turn_speech_s >= 1.5
            and self.t_s - self.last_backchannel_s >= p.backchannel_gap_s
        ):
            self.last_backchannel_s = self.t_s
            self._say(self.rng.choice(BACKCHANNELS), "backchannel")
            return self._emit()
        if (
            p.interrupt
            and in_pause
            and not self.cut_in_this_turn
            and silence_s >= p.interrupt_pause_s
            and self.user_turn_speech_s >= p.interrupt_after_speech_s
        ):
            self.cut_in_this_turn = True
            self._say(self.rng.choice(INTERRUPTS), "interrupt")
            return self._emit()
        return []
