"""Instruct-FD turn-management instructions and the scenario catalog.

Five instructions, grouped by who holds the floor when the behaviour matters:

* proactive (the user is speaking): ``backchannel``, ``interrupt``, ``listen``;
* responsive (the model is speaking and the user overlaps): ``continue``, ``acknowledge``.

Each instruction is a template with one slot, ``{trigger}``: a scenario-specific clause about the
user ("the user ...") naming the moment the instruction is about. Backchannel and interrupt say
what to do at that moment and to listen otherwise; listen says to stay silent even then; continue
and acknowledge say how to react to that kind of user overlap, and also how to treat the other kind
(short listener signals are not interruptions, real interruptions are not listener signals), so a
reader can tell the two responsive policies apart.

The catalog holds the 29 scenarios of the benchmark. Assignment (which instructions a scenario's
conversations are run under) follows the paper's scenario tables: 5 backchannel scenarios, 4
listen-only scenarios, 5 interrupt scenarios, 5 continue scenarios and 10 acknowledge scenarios;
listen additionally runs on every backchannel scenario except User Attention Check and on every
interrupt scenario. All wording here is our own.
"""

from __future__ import annotations

from typing import NamedTuple

PROACTIVE = "proactive"
RESPONSIVE = "responsive"

PROACTIVE_POLICIES = ("backchannel", "interrupt", "listen")
RESPONSIVE_POLICIES = ("continue", "acknowledge")

INSTRUCTION_TEMPLATES: dict[str, str] = {
    "backchannel": (
        "While the user is talking, you give short listener signals. Whenever {trigger}, "
        "respond with a quick one- or two-word signal such as 'mm-hmm', 'yeah' or 'I see', "
        "then go quiet again so the user keeps the floor. Apart from those moments, stay "
        "silent: do not cut in or take over, and give your full reply only once the user "
        "has finished speaking."
    ),
    "interrupt": (
        "You are willing to cut in on the user. If {trigger}, interrupt right away, while "
        "they are still talking, and say briefly and directly what needs to be said. Apart "
        "from that, stay silent while the user talks: no listener signals, no other "
        "interruptions, and give your reply only once the user has finished speaking."
    ),
    "listen": (
        "Stay completely silent while the user is talking: no listener signals such as "
        "'mm-hmm' or 'yeah', and never cut in. This holds even when {trigger}: hold back "
        "until the user is done. Take your turn only after the user has clearly finished speaking."
    ),
    "continue": (
        "While you are talking, keep the floor through short listener signals. If {trigger}, "
        "treat it as encouragement rather than a request to stop: keep talking without a "
        "pause and finish the point you were making. Only if the user actually cuts in with "
        "a question, correction or request should you stop and let them speak."
    ),
    "acknowledge": (
        "While you are talking, give the floor to the user when they genuinely cut in. If "
        "{trigger}, stop talking, acknowledge what they said straight away, and adapt the "
        "rest of your answer to it. A mere listener signal such as 'mm-hmm' or 'yeah' is not "
        "a cut-in: keep talking through those."
    ),
}


class Scenario(NamedTuple):
    """One catalog entry: its group, the instructions it runs under, a description, a trigger."""

    group: str  # PROACTIVE or RESPONSIVE
    policies: tuple[str, ...]
    description: str
    trigger: str  # fills {trigger}; a lower-case clause about the user


_BC_LISTEN = ("backchannel", "listen")
_INT_LISTEN = ("interrupt", "listen")

SCENARIOS: dict[str, Scenario] = {
    # --- proactive: backchannel scenarios -------------------------------------------------
    "User Attention Check": Scenario(
        PROACTIVE,
        ("backchannel",),
        "Partway through explaining something, the user checks that the assistant is still following.",
        "the user checks in mid-explanation with a tag such as 'you know?' or 'right?' to make sure you are with them",
    ),
    "Clause Boundary Tracking": Scenario(
        PROACTIVE,
        _BC_LISTEN,
        "The user lays out a chain of steps or reasons in one long, flowing turn.",
        "the user wraps up one step of a multi-part explanation and moves on to the next",
    ),
    "User Filler Pause": Scenario(
        PROACTIVE,
        _BC_LISTEN,
        "The user thinks out loud, stalling with fillers like 'um' and pausing to plan what to say.",
        "the user stalls on a filler such as 'um' or 'hmm' and pauses to work out what comes next",
    ),
    "Emotional Disclosure": Scenario(
        PROACTIVE,
        _BC_LISTEN,
        "The user tells a personal story that matters to them and stops for a heavy moment in the middle.",
        "the user pauses at an emotionally heavy moment of a personal story",
    ),
    "Floor Hold Signal": Scenario(
        PROACTIVE,
        _BC_LISTEN,
        "The user keeps the floor with a phrase like 'hang on' or 'one sec', goes quiet to think or to deal "
        "with something nearby, then picks the thought back up and finishes it.",
        "the user asks you to hang on for a moment and goes quiet before finishing their thought",
    ),
    # --- proactive: listen-only scenarios -------------------------------------------------
    "Sequential Info Capture": Scenario(
        PROACTIVE,
        ("listen",),
        "The user reads out structured details such as a phone number or a street address a piece at a "
        "time, with gaps between the pieces.",
        "the user pauses between the pieces of a number, code or address they are reading out",
    ),
    "Cognitive Pause": Scenario(
        PROACTIVE,
        ("listen",),
        "The user stops mid-sentence to think and lets the silence run without any filler word.",
        "the user goes quiet in the middle of a sentence to think, without saying anything to fill the gap",
    ),
    "User Projection Pause": Scenario(
        PROACTIVE,
        ("listen",),
        "The user finishes a sentence, pauses briefly, then adds a follow-on that extends or qualifies "
        "the same point.",
        "the user completes a sentence and pauses briefly before adding more to the same point",
    ),
    "Self Directed Question": Scenario(
        PROACTIVE,
        ("listen",),
        "In the middle of a turn the user asks themselves a question, pauses, then answers it and carries on.",
        "the user pauses after asking themselves a question that they mean to answer on their own",
    ),
    # --- proactive: interrupt scenarios ---------------------------------------------------
    "Factual Misinformation": Scenario(
        PROACTIVE,
        _INT_LISTEN,
        "The user confidently states something false and starts building a plan or argument on it.",
        "the user confidently states something that is factually wrong and starts reasoning from it",
    ),
    "Hesitation Prompt": Scenario(
        PROACTIVE,
        _INT_LISTEN,
        "The user rehearses a talk or an interview answer and gets stuck in long hesitations and fillers.",
        "the user gets stuck in a long hesitation while rehearsing and plainly needs a nudge to get going again",
    ),
    "Safety Correction": Scenario(
        PROACTIVE,
        _INT_LISTEN,
        "The user mentions, in passing, a dangerous misconception and starts planning around it.",
        "the user casually says something dangerously wrong and is about to act on it",
    ),
    "Self Contradiction": Scenario(
        PROACTIVE,
        _INT_LISTEN,
        "The user says something that clashes with what they told the assistant earlier in the conversation.",
        "the user says something that directly conflicts with what they told you earlier in the conversation",
    ),
    "Word Retrieval Assist": Scenario(
        PROACTIVE,
        _INT_LISTEN,
        "Mid-explanation, the user cannot recall a particular word and describes the idea instead.",
        "the user cannot come up with a particular word and starts describing it instead",
    ),
    # --- responsive: continue scenarios ---------------------------------------------------
    "User Acknowledgment": Scenario(
        RESPONSIVE,
        ("continue",),
        "While the assistant explains something, the user overlaps with a short sign that they are listening.",
        "the user briefly signals that they are listening, with something like 'okay' or 'mm-hmm'",
    ),
    "User Alignment": Scenario(
        RESPONSIVE,
        ("continue",),
        "While the assistant explains something, the user overlaps with a quick agreement word such as "
        "'yeah' or 'right'.",
        "the user briefly agrees with a word like 'yeah' or 'right'",
    ),
    "User Amusement": Scenario(
        RESPONSIVE,
        ("continue",),
        "The assistant mentions something funny while talking and the user laughs or reacts with amusement.",
        "the user laughs or reacts with amusement at something you said",
    ),
    "User Understanding": Scenario(
        RESPONSIVE,
        ("continue",),
        "While the assistant explains something, the user overlaps with a short sign that they have understood.",
        "the user briefly signals that they understand, with something like 'I see' or 'got it'",
    ),
    "User Continuer": Scenario(
        RESPONSIVE,
        ("continue",),
        "While the assistant explains something, the user overlaps with a short prompt urging it to keep going.",
        "the user briefly urges you on, with something like 'uh-huh' or 'go on'",
    ),
    # --- responsive: acknowledge scenarios ------------------------------------------------
    "Short Stop Repair": Scenario(
        RESPONSIVE,
        ("acknowledge",),
        "Mid-explanation, the user cuts in with a short stop or repair word such as 'wait' or 'actually'.",
        "the user cuts in with a short stop or repair word such as 'wait' or 'actually'",
    ),
    "Short Repeat Request": Scenario(
        RESPONSIVE,
        ("acknowledge",),
        "Mid-explanation, the user cuts in with a brief request to hear something again, like 'sorry?'.",
        "the user cuts in asking you to repeat yourself, with something like 'sorry?' or 'say that again?'",
    ),
    "Short Confusion Signal": Scenario(
        RESPONSIVE,
        ("acknowledge",),
        "Mid-explanation, the user cuts in with a brief sign of confusion, like 'you lost me'.",
        "the user cuts in to say they are confused, with something like 'you lost me' or 'wait, what?'",
    ),
    "Hearing Check": Scenario(
        RESPONSIVE,
        ("acknowledge",),
        "Mid-explanation, the user cuts in to check the connection, like 'hello?' or 'can you hear me?'.",
        "the user cuts in to check that you are still there, with something like 'hello?' or 'can you hear me?'",
    ),
    "Add Constraint": Scenario(
        RESPONSIVE,
        ("acknowledge",),
        "Mid-explanation, the user cuts in to add a new limit such as a budget, a deadline or a platform.",
        "the user cuts in to add a new constraint, such as a budget limit, a deadline or a platform restriction",
    ),
    "Topic Redirect": Scenario(
        RESPONSIVE,
        ("acknowledge",),
        "While the assistant explains one topic, the user cuts in to steer towards a different, related one.",
        "the user cuts in to steer the conversation towards a different but related topic",
    ),
    "Scope Narrowing": Scenario(
        RESPONSIVE,
        ("acknowledge",),
        "While the assistant gives a broad answer, the user cuts in to name the one part they care about.",
        "the user cuts in to name the specific part of the topic they actually care about",
    ),
    "Skip Basics": Scenario(
        RESPONSIVE,
        ("acknowledge",),
        "The assistant starts from the fundamentals and the user cuts in to say they know those and want "
        "the advanced material.",
        "the user cuts in to say they already know the basics and want to get to the advanced material",
    ),
    "Summary Request": Scenario(
        RESPONSIVE,
        ("acknowledge",),
        "During a detailed explanation, the user cuts in to ask for only the main takeaways.",
        "the user cuts in to ask for just the main takeaways instead of the details",
    ),
    "Personal Context": Scenario(
        RESPONSIVE,
        ("acknowledge",),
        "During a general explanation, the user cuts in with personal details that should change how the "
        "answer is framed.",
        "the user cuts in with personal details that should change how you frame your answer",
    ),
}


def primary_policy(scenario: str) -> str:
    """The instruction a scenario is counted under (its first): e.g. backchannel for a BC scenario."""
    return SCENARIOS[scenario].policies[0]


def render_instruction(policy: str, scenario: str) -> str:
    """The system instruction for `policy` in `scenario` (the scenario must carry the policy)."""
    entry = SCENARIOS.get(scenario)
    if entry is None:
        raise KeyError(f"unknown Instruct-FD scenario {scenario!r}")
    if policy not in entry.policies:
        raise ValueError(
            f"scenario {scenario!r} is not run under {policy!r} (it carries {entry.policies})"
        )
    return INSTRUCTION_TEMPLATES[policy].format(trigger=entry.trigger)
