"""Scenario specifications for generated Instruct-FD conversations.

A :class:`ScenarioSpec` says, for one catalog scenario (:data:`~.instructions.SCENARIOS`), how a
conversation is laid out turn by turn: who speaks, what each turn should be about (a content
hint), which turn carries pauses, and where the other speaker's scripted cut-in goes.

Two shapes, following who holds the floor when the behaviour matters:

* **proactive** (the user speaks; the model decides whether to cut in)::

      user   setup      says what they want to talk about
      model  reply      a short invitation to go on
      user   trigger    the long turn with <pause: S> markers and, for backchannel / interrupt
                        scenarios, the model's cut-in marker (<backchannel: ...> / <interrupt: ...>)
      model  response   the model's reply once the user is done

* **responsive** (the model speaks; the user overlaps)::

      user   question     asks for an explanation
      model  answer       a long explanation carrying the USER's barge-in marker:
                          <backchannel: ...> followed by the rest of the answer (continue scenarios)
                          or <interrupt: ...> at the end of what the model got to say (acknowledge)
      model  acknowledge  acknowledge scenarios only: the model's adapted reply
      user   closing      optional follow-up question (required for Short Stop Repair, where it
                          carries what the user stopped the model for)
      model  closing_reply

The hints are written for fdeval and are used verbatim in the LLM turn agent's prompts
(:mod:`.llm_backend`); the offline grammars (:mod:`.offline`) follow the same layout.
:func:`check_against_spec` checks a written conversation against its spec.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal, Sequence

from fdeval.benchmarks.instructfd.instructions import PROACTIVE, RESPONSIVE, SCENARIOS
from fdeval.benchmarks.instructfd.markers import CUT_IN_KINDS, parse_markers


@dataclass(frozen=True)
class TurnSpec:
    speaker: Literal["user", "model"]
    role: str
    hint: str
    pauses: bool = False  # the turn carries <pause: S> markers
    cut_in: str | None = (
        None  # a cut-in marker of this kind goes into this turn (by the other speaker)
    )
    sentences: str = "one or two sentences"
    optional: bool = False


@dataclass(frozen=True)
class ScenarioSpec:
    name: str
    slug: str
    group: str
    policies: tuple[str, ...]
    description: str
    persona_attributes: tuple[
        str, ...
    ]  # persona details worth grounding this scenario in, best first
    gist: str  # what the user does, a clause with a {topic} slot (offline persona condenser)
    cut_in_hint: str  # what the other speaker says at the cut-in (empty for listen-only scenarios)
    turns: tuple[TurnSpec, ...]

    @property
    def cut_in(self) -> str | None:
        """The scripted cut-in kind: the model's (proactive) or the user's barge-in (responsive)."""
        for t in self.turns:
            if t.cut_in:
                return t.cut_in
        return None

    @property
    def primary_policy(self) -> str:
        return self.policies[0]


def slugify(name: str) -> str:
    return re.sub(r"[^a-z0-9]+", "_", name.lower()).strip("_")


# Per scenario: persona attributes, the condenser gist, and turn hints. Proactive entries give
# (setup, trigger, cut_in, response); responsive entries give (question, answer, barge_in, reply).
_P = "proactive"
_R = "responsive"

_HINTS: dict[str, dict[str, object]] = {
    # ---- proactive, backchannel -----------------------------------------------------------
    "User Attention Check": dict(
        attrs=("occupation", "city", "age_band"),
        gist="walks the assistant through {topic} and checks partway that it is still following",
        setup="Ask whether you can run a plan or routine of yours past the assistant; name it.",
        trigger="Explain the plan in one flowing turn; halfway through, check that the assistant is with "
        "you using a tag like 'you know?' or 'right?', pause briefly, then finish the explanation.",
        cut_in="a one- or two-word listener signal right after the check-in tag, such as 'yeah' or 'mm-hmm'",
        response="React briefly to the plan as a whole and ask one follow-up question.",
    ),
    "Clause Boundary Tracking": dict(
        attrs=("occupation", "hobby", "city"),
        gist="lays out {topic} step by step in one long turn",
        setup="Say you have a process or routine with several steps and ask to walk the assistant through it.",
        trigger="Describe three or four steps in one flowing turn joined by 'first', 'then', 'after that'; "
        "take a short breath after one of the steps.",
        cut_in="a short listener signal at the end of one step, such as 'mm-hmm' or 'okay'",
        response="Sum up the routine in a few words and add one practical suggestion.",
    ),
    "User Filler Pause": dict(
        attrs=("occupation", "age_band", "city"),
        gist="thinks out loud about {topic}, stalling on fillers while deciding",
        setup="Say you are trying to decide something and would like to think it through out loud.",
        trigger="Think aloud between two options with fillers such as 'um', 'uh' and 'hmm'; stop on a filler "
        "and pause to plan, then go on and give a reason.",
        cut_in="a soft listener signal on the filler, such as 'mm-hmm' or 'mm'",
        response="Reflect back what seems to matter most to the user and ask a gentle question.",
    ),
    "Emotional Disclosure": dict(
        attrs=("situation", "occupation", "age_band"),
        gist="opens up about {topic}, stopping at the hardest part of the story",
        setup="Say there is something personal that happened and ask if you can talk about it.",
        trigger="Tell the story; stop at its most emotional moment for a long pause, then carry on and finish it.",
        cut_in="a short empathetic signal at the heavy moment, such as 'oh no' or 'oh wow'",
        response="Respond warmly to the whole story, in two sentences at most, and ask how they are doing.",
    ),
    "Floor Hold Signal": dict(
        attrs=("occupation", "situation", "city"),
        gist="describes {topic} and asks the assistant to hold on for a moment before finishing",
        setup="Describe a practical problem you are having in a sentence.",
        trigger="Give a detail of the problem, then say a hold phrase such as 'hang on a second', go quiet "
        "for a moment (thinking or dealing with something nearby), come back and finish the detail.",
        cut_in="a brief 'sure' or 'no problem' when the user asks to hold on",
        response="Suggest a likely cause and a first thing to try.",
    ),
    # ---- proactive, listen only -------------------------------------------------------------
    "Sequential Info Capture": dict(
        attrs=("city", "name", "occupation"),
        gist="reads out {topic} to the assistant a piece at a time",
        setup="Ask the assistant to note down a number, code or address for you.",
        trigger="Read it out in three or so chunks with a pause between the chunks; spell every digit and "
        "letter as a word.",
        cut_in="",
        response="Read the whole thing back once to confirm it.",
    ),
    "Cognitive Pause": dict(
        attrs=("occupation", "age_band", "situation"),
        gist="weighs {topic} and goes quiet mid-sentence to think",
        setup="Say you have a decision on your mind and ask if you can talk it over.",
        trigger="Start explaining what makes it hard; stop in the middle of a sentence for a silent pause "
        "of about two seconds (no filler word), then finish the sentence.",
        cut_in="",
        response="Acknowledge the difficulty and ask what would help them decide.",
    ),
    "User Projection Pause": dict(
        attrs=("occupation", "city", "age_band"),
        gist="announces a decision about {topic}, pauses, then qualifies it",
        setup="Say you have been going back and forth on a decision and ask to talk it through.",
        trigger="State your decision as a complete sentence, pause briefly, then add a follow-on that "
        "qualifies it (a condition or an exception).",
        cut_in="",
        response="Reply to the decision including its condition.",
    ),
    "Self Directed Question": dict(
        attrs=("occupation", "age_band", "situation"),
        gist="talks about {topic}, asks {self} out loud what the holdup is, then answers",
        setup="Say you keep putting off a decision and want to talk it through.",
        trigger="Ask yourself a question out loud, pause briefly, answer it yourself and carry on.",
        cut_in="",
        response="Build on the answer the user gave themself and suggest a small next step.",
    ),
    # ---- proactive, interrupt ----------------------------------------------------------------
    "Factual Misinformation": dict(
        attrs=("occupation", "hobby", "situation"),
        gist="talks about {topic} and confidently builds on a fact that is wrong",
        setup="Say what you are working on or preparing.",
        trigger="State a false fact with confidence and start reasoning or planning from it; include a "
        "short hesitation pause later in the turn.",
        cut_in="a short, direct correction of the false fact",
        response="Explain the correct fact in a sentence or two and say how it changes the plan.",
    ),
    "Hesitation Prompt": dict(
        attrs=("occupation", "situation", "age_band"),
        gist="rehearses {topic} and keeps stalling",
        setup="Ask if you can practise a speech or an answer out loud on the assistant.",
        trigger="Start the speech, then stall with fillers and long pauses, plainly stuck.",
        cut_in="a short nudge that helps the user get going again, pointing at what to say next",
        response="Encourage the user and suggest how to open the next part.",
    ),
    "Safety Correction": dict(
        attrs=("situation", "occupation", "city"),
        gist="talks about {topic} and mentions a dangerous plan in passing",
        setup="Say what household or practical task you are about to do.",
        trigger="Mention the dangerous idea in passing as part of your plan and keep going; include a short "
        "pause later in the turn.",
        cut_in="an urgent, short warning with the safe alternative",
        response="Explain why it is dangerous and what to do instead.",
    ),
    "Self Contradiction": dict(
        attrs=("occupation", "situation", "city"),
        gist="talks about {topic} and contradicts something said a minute earlier",
        setup="Mention a plain fact about yourself (a diet, a date, a budget, an allergy) while asking for help.",
        trigger="Carry on with the plan and say something that clashes with that earlier fact, without "
        "noticing; include a short pause.",
        cut_in="a short question pointing out the clash with what the user said earlier",
        response="Ask which of the two is right and offer to plan around it.",
    ),
    "Word Retrieval Assist": dict(
        attrs=("occupation", "hobby", "situation"),
        gist="cannot recall the word for {topic} and describes it instead",
        setup="Say what you are doing that involves an object or idea you are about to need.",
        trigger="Reach for a word, fail ('the, um, what's it called'), pause, then describe the thing; keep talking.",
        cut_in="the missing word, offered as a quick guess",
        response="Confirm the word and add one useful tip.",
    ),
    # ---- responsive, continue ----------------------------------------------------------------
    "User Acknowledgment": dict(
        attrs=("occupation", "age_band", "city"),
        gist="asks about {topic} and signals with a short word that {they} {is} listening while the assistant explains",
        question="Ask how to do something practical, in one short question.",
        answer="Explain in three or four sentences; this is one continuous answer.",
        barge_in="a short listening signal such as 'okay' or 'mm-hmm', after the first sentence",
        reply="",
    ),
    "User Alignment": dict(
        attrs=("occupation", "city", "hobby"),
        gist="asks about {topic} and briefly agrees while the assistant explains",
        question="Ask how to do something practical, in one short question.",
        answer="Explain in three or four sentences; this is one continuous answer.",
        barge_in="a short agreement word such as 'yeah' or 'right', after a point the user agrees with",
        reply="",
    ),
    "User Amusement": dict(
        attrs=("hobby", "occupation", "city"),
        gist="asks about {topic} and laughs at a funny detail in the answer",
        question="Ask how to do something practical, in one short question.",
        answer="Explain in three or four sentences and include one light, funny detail early on.",
        barge_in="a short laugh or amused reaction, such as 'ha, that's great', right after the funny detail",
        reply="",
    ),
    "User Understanding": dict(
        attrs=("occupation", "age_band", "city"),
        gist="asks about {topic} and signals understanding while the assistant explains",
        question="Ask how to do something practical, in one short question.",
        answer="Explain in three or four sentences; this is one continuous answer.",
        barge_in="a short sign of understanding such as 'I see' or 'got it'",
        reply="",
    ),
    "User Continuer": dict(
        attrs=("occupation", "hobby", "age_band"),
        gist="asks about {topic} and urges the assistant on while it explains",
        question="Ask how to do something practical, in one short question.",
        answer="Explain in three or four sentences; this is one continuous answer.",
        barge_in="a short prompt to keep going such as 'uh-huh' or 'go on'",
        reply="",
    ),
    # ---- responsive, acknowledge -------------------------------------------------------------
    "Short Stop Repair": dict(
        attrs=("occupation", "situation", "city"),
        gist="asks about {topic} and stops the assistant with a quick 'wait' to correct course",
        question="Ask how to do something practical, in one short question.",
        answer="Start a three or four sentence explanation.",
        barge_in="a short stop or repair word such as 'wait, actually' or 'hold on'",
        reply="Stop and invite the user to say what they wanted, in a few words.",
    ),
    "Short Repeat Request": dict(
        attrs=("age_band", "occupation", "city"),
        gist="asks about {topic} and asks the assistant to repeat itself",
        question="Ask how to do something practical, in one short question.",
        answer="Start a three or four sentence explanation.",
        barge_in="a brief request to hear it again such as 'sorry?' or 'say that again?'",
        reply="Repeat what you just said, more slowly and plainly.",
    ),
    "Short Confusion Signal": dict(
        attrs=("age_band", "occupation", "hobby"),
        gist="asks about {topic} and cuts in when the explanation loses {them}",
        question="Ask how to do something practical, in one short question.",
        answer="Start a three or four sentence explanation.",
        barge_in="a brief sign of confusion such as 'you lost me' or 'wait, what?'",
        reply="Apologise briefly and explain the same point more simply.",
    ),
    "Hearing Check": dict(
        attrs=("city", "occupation", "age_band"),
        gist="asks about {topic} and cuts in to check that the assistant can still hear {them}",
        question="Ask how to do something practical, in one short question.",
        answer="Start a three or four sentence explanation.",
        barge_in="a brief channel check such as 'hello?' or 'can you hear me?'",
        reply="Confirm you can hear them and pick up where you left off.",
    ),
    "Add Constraint": dict(
        attrs=("occupation", "situation", "city"),
        gist="asks about {topic} and cuts in with a limit the answer has to respect",
        question="Ask how to do something practical, in one short question.",
        answer="Start a three or four sentence explanation.",
        barge_in="a new constraint: a budget, a time limit, missing equipment or a platform",
        reply="Acknowledge the constraint and adapt the advice to it.",
    ),
    "Topic Redirect": dict(
        attrs=("hobby", "occupation", "city"),
        gist="asks about {topic} and steers the assistant to a related question",
        question="Ask how to do something practical, in one short question.",
        answer="Start a three or four sentence explanation.",
        barge_in="a redirect to a different but related topic",
        reply="Acknowledge the switch and answer the new question.",
    ),
    "Scope Narrowing": dict(
        attrs=("occupation", "hobby", "age_band"),
        gist="asks about {topic} and cuts in to name the one part that matters to {them}",
        question="Ask a broad question about a practical topic.",
        answer="Start a broad, wide-ranging three or four sentence answer.",
        barge_in="the specific part of the topic the user actually cares about",
        reply="Acknowledge and answer only that part.",
    ),
    "Skip Basics": dict(
        attrs=("occupation", "hobby", "age_band"),
        gist="asks about {topic} and cuts in to skip basics that are old news to {them}",
        question="Ask a question about a practical topic you already know something about.",
        answer="Start from the very basics, three or four sentences.",
        barge_in="that the user already knows the basics and wants the advanced part",
        reply="Acknowledge their experience and go straight to an advanced point.",
    ),
    "Summary Request": dict(
        attrs=("occupation", "situation", "age_band"),
        gist="asks about {topic} and cuts in to ask for just the main points",
        question="Ask how to do something practical, in one short question.",
        answer="Start a detailed three or four sentence explanation.",
        barge_in="a request for just the key takeaways",
        reply="Give the short version in one or two sentences.",
    ),
    "Personal Context": dict(
        attrs=("situation", "occupation", "age_band"),
        gist="asks about {topic} and cuts in with a personal detail that changes the advice",
        question="Ask how to do something practical, in one short question.",
        answer="Start a general three or four sentence explanation.",
        barge_in="a personal detail (health, family, home, schedule) that should change the answer",
        reply="Acknowledge the detail and reframe the advice for it.",
    ),
}


def _proactive_turns(name: str, h: dict[str, object]) -> tuple[TurnSpec, ...]:
    policies = SCENARIOS[name].policies
    cut = next((k for k in CUT_IN_KINDS if k in policies), None)
    return (
        TurnSpec("user", "setup", str(h["setup"])),
        TurnSpec(
            "model",
            "reply",
            "Invite the user to go on, in one short sentence.",
            sentences="one short sentence",
        ),
        TurnSpec(
            "user",
            "trigger",
            str(h["trigger"]),
            pauses=True,
            cut_in=cut,
            sentences="two to four sentences",
        ),
        TurnSpec("model", "response", str(h["response"])),
    )


def _responsive_turns(name: str, h: dict[str, object]) -> tuple[TurnSpec, ...]:
    policies = SCENARIOS[name].policies
    kind = "backchannel" if "continue" in policies else "interrupt"
    turns = [
        TurnSpec("user", "question", str(h["question"]), sentences="one sentence"),
        TurnSpec(
            "model", "answer", str(h["answer"]), cut_in=kind, sentences="three or four sentences"
        ),
    ]
    if kind == "interrupt":
        turns.append(
            TurnSpec("model", "acknowledge", str(h["reply"]), sentences="one to three sentences")
        )
    required_closing = name == "Short Stop Repair"
    turns.append(
        TurnSpec(
            "user",
            "closing",
            "Say what you stopped the assistant for (a correction, a constraint or a question)."
            if required_closing
            else "Ask one short follow-up question.",
            sentences="one sentence",
            optional=not required_closing,
        )
    )
    turns.append(
        TurnSpec(
            "model", "closing_reply", "Answer the follow-up briefly.", optional=not required_closing
        )
    )
    return tuple(turns)


def _build() -> dict[str, ScenarioSpec]:
    out = {}
    for name, entry in SCENARIOS.items():
        h = _HINTS[name]
        proactive = entry.group == PROACTIVE
        turns = _proactive_turns(name, h) if proactive else _responsive_turns(name, h)
        cut_hint = str(h["cut_in"] if proactive else h["barge_in"])
        out[name] = ScenarioSpec(
            name,
            slugify(name),
            entry.group,
            entry.policies,
            entry.description,
            tuple(h["attrs"]),
            str(h["gist"]),
            cut_hint,
            turns,
        )  # type: ignore[arg-type]
    return out


SPECS: dict[str, ScenarioSpec] = _build()
SCENARIO_ORDER: tuple[str, ...] = tuple(SCENARIOS)


# ------------------------------------------------------------------------------------------------
# Checking a written conversation


_BAD_CHARS = re.compile(r"[0-9*#_\[\]{}|~^$%&@\\/+=\u2013\u2014\u2026\"]")
MAX_USER_WORDS = 90
MAX_BARGE_IN_WORDS = 30


def spoken_text_problem(text: str) -> str | None:
    """Why `text` (markers already removed) is not plain spoken English, or None."""
    if not text.strip():
        return "empty"
    m = _BAD_CHARS.search(text)
    if m:
        return f"character {m.group(0)!r} (say numbers and symbols as words, no markdown)"
    if any(ord(ch) > 127 for ch in text):
        return "non-ASCII character"
    if re.search(r"\b[A-Za-z]+'?[A-Za-z]*\b", text) is None:
        return "no words"
    return None


def check_against_spec(lines: Sequence[tuple[str, str]], spec: ScenarioSpec) -> None:
    """Raise ValueError if (speaker, text) `lines` do not follow `spec`'s layout and marker rules.

    Complements :func:`.builtin.validate_conversation` (which checks scenario-level marker rules):
    speakers and turn order, where the cut-in goes, speech on both sides of a user-line cut-in,
    pauses in the trigger turn, plain spoken text, and length limits.
    """
    turns = spec.turns
    n_required = sum(not t.optional for t in turns)
    if not n_required <= len(lines) <= len(turns):
        raise ValueError(f"{len(lines)} lines, expected {n_required}..{len(turns)}")
    if len(lines) not in (n_required, len(turns)):
        raise ValueError("optional closing turns must come as a pair")
    for i, ((speaker, text), t) in enumerate(zip(lines, turns)):
        where = f"line {i} ({t.role})"
        if speaker != t.speaker:
            raise ValueError(f"{where}: speaker {speaker!r}, expected {t.speaker!r}")
        parsed = parse_markers(text)
        problem = spoken_text_problem(parsed.text)
        if problem:
            raise ValueError(f"{where}: {problem}")
        kinds = [m.kind for m in parsed.markers]
        if "take-turn" in kinds:
            raise ValueError(f"{where}: <take-turn:> belongs in its own model line")
        cut = [m for m in parsed.markers if m.kind in CUT_IN_KINDS]
        if t.cut_in is None and cut:
            raise ValueError(f"{where}: unexpected <{cut[0].kind}:> marker")
        if t.cut_in is not None:
            if not cut or any(m.kind != t.cut_in for m in cut):
                raise ValueError(f"{where}: needs a <{t.cut_in}:> marker and no other cut-in")
            if speaker == "user" and len(cut) > 3:
                raise ValueError(f"{where}: at most three cut-ins")
            if speaker == "model" and len(cut) != 1:
                raise ValueError(f"{where}: exactly one user barge-in")
            for m in cut:
                content = parse_markers(m.content)
                if content.markers or content.has_pauses:
                    raise ValueError(f"{where}: markers inside a <{m.kind}:> marker")
                problem = spoken_text_problem(content.text)
                if problem:
                    raise ValueError(f"{where}: cut-in content: {problem}")
                if len(content.words) > MAX_BARGE_IN_WORDS:
                    raise ValueError(
                        f"{where}: cut-in content longer than {MAX_BARGE_IN_WORDS} words"
                    )
                if m.word_index == 0:
                    raise ValueError(f"{where}: the cut-in needs speech before it")
                if speaker == "user" and m.word_index >= len(parsed.words):
                    raise ValueError(
                        f"{where}: the cut-in must come mid-turn, with user speech after it"
                    )
            if (
                speaker == "model"
                and t.cut_in == "backchannel"
                and cut[0].word_index >= len(parsed.words)
            ):
                raise ValueError(f"{where}: the model must go on speaking after a user backchannel")
        if parsed.has_pauses and not (speaker == "user" and t.pauses):
            raise ValueError(f"{where}: <pause:> only belongs in the trigger turn")
        if t.pauses and not parsed.has_pauses:
            raise ValueError(f"{where}: the trigger turn needs a <pause:>")
        if speaker == "user" and len(parsed.words) > MAX_USER_WORDS:
            raise ValueError(f"{where}: longer than {MAX_USER_WORDS} words")


__all__ = [
    "SPECS",
    "SCENARIO_ORDER",
    "ScenarioSpec",
    "TurnSpec",
    "check_against_spec",
    "slugify",
    "spoken_text_problem",
    "PROACTIVE",
    "RESPONSIVE",
]
