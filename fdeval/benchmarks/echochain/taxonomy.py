"""EchoChain's vocabulary: the challenge axis, the barge-in labels, the failure codes and categories.

Everything here is fdeval's own wording. The paper (EchoChain, sections 2, 4 and appendices A.1,
A.2, A.4) fixes the *names* -- the axis code, the criterion codes DSR-P1..P3 / DSR-F1..F4, the
seven barge-in label strings, the classifier's FAILURE_TYPE values and the three taxonomy
categories -- and those strings are an interface (prompts, parsers and records use them as they
are). It gives the barge-in labels as names only and names the fourth failure code
(``dsr_f4_double_count``) without defining it: the definitions of both are fdeval's.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ChallengeAxis:
    """One challenge axis: what the planner steers towards and the classifier checks."""

    code: str
    name: str
    definition: str
    pass_criteria: tuple[tuple[str, str], ...]  # (code, text); every one must hold
    fail_criteria: tuple[tuple[str, str], ...]  # (code, text); any one is a failure
    example: str  # a short failure example


DSR = ChallengeAxis(
    code="DSR",
    name="Dual-Stream Reasoning",
    definition=(
        "The assistant is partway through a spoken answer when the user cuts in with information that "
        "changes what the right answer is. It has to keep hold of what it was working on, fold the new "
        "information into that unfinished reasoning, and arrive at a conclusion that respects both the "
        "earlier context and the update, without sliding back to the replaced assumption later on."
    ),
    pass_criteria=(
        (
            "DSR-P1",
            "Takes notice of the update: the reply shows it registered the new information "
            "(for instance 'okay, with that in mind' or 'since that's the case now').",
        ),
        (
            "DSR-P2",
            "Right conclusion: the final answer satisfies the earlier requirements and the new "
            "information together.",
        ),
        (
            "DSR-P3",
            "No stale carry-over: neither the rest of this reply nor later replies fall back on "
            "the assumption the update replaced.",
        ),
    ),
    fail_criteria=(
        (
            "DSR-F1",
            "Ignores or misapplies the update: carries on as if it had not been said, or uses it "
            "wrongly; saying 'got it' does not count as using it.",
        ),
        (
            "DSR-F2",
            "Stale assumption later: takes the update at first, then reverts to the old value or "
            "plan further on (the earlier budget, the dropped item, the old time limit).",
        ),
        (
            "DSR-F3",
            "Contradictory conclusions: recommends things that only fit the old situation next to "
            "things that fit the new one, so the answer conflicts with itself.",
        ),
        (
            "DSR-F4",
            "Double counting: applies the update on top of what it replaced as if both held, such "
            "as taking a budget cut off twice or adding a replacement item while keeping the item "
            "it replaced.",
        ),
    ),
    example=(
        "A user planning a dinner for six cuts in: 'oh, one of them is vegan, actually.' The assistant "
        "answers 'sure, I'll keep that in mind' and goes on to suggest a slow-cooked beef stew as the "
        "main course for everyone, with no vegan dish anywhere (DSR-F1)."
    ),
)

AXES: dict[str, ChallengeAxis] = {DSR.code: DSR}

# The classifier's FAILURE_TYPE values (A.4's output format) and what each means in fdeval.
FAILURE_TYPES: dict[str, str] = {
    "dsr_f1_ignores": (
        "The continuation goes on as if the new information had not arrived, or uses it incorrectly; "
        "an acknowledgement with no matching change in content is still this failure."
    ),
    "dsr_f2_stale_later": (
        "The update is taken up at first but a later part of the reply, or a later exchange, falls back "
        "on the value or plan it replaced."
    ),
    "dsr_f3_contradictory": (
        "The reply keeps recommendations that only fit the old situation alongside ones that fit the "
        "new one, leaving the user with conflicting advice."
    ),
    "dsr_f4_double_count": (
        "Defined by fdeval (the paper names the code only): the update is applied on top of the thing it "
        "replaced as if both were true, e.g. a budget cut subtracted twice, a shortened session shortened "
        "again, or a replacement item added while the item it replaced stays in."
    ),
}

# The seven barge-in labels of A.2 (exact strings) with fdeval's definitions: the paper names them only.
BARGE_IN_LABELS: dict[str, str] = {
    "Further Inquiry": (
        "The user breaks in with a new question that pushes the task further, and the question rests on a "
        "fact the assistant did not have ('wait, what if it's just the two of us now?')."
    ),
    "Affirmative Acknowledgment + Further Inquiry": (
        "The user first signals agreement with what is being said ('yeah, okay, that works') and then asks "
        "a follow-up that brings in a new condition."
    ),
    "Denial and Discontent": (
        "The user rejects what they are hearing and sounds unhappy about it, giving the new fact that makes "
        "the current direction unworkable ('no, no, that won't do, I can't ...')."
    ),
    "Real-time Thought Process": (
        "The user thinks out loud while listening and arrives mid-stream at a realisation that changes the "
        "requirements ('hmm, hang on, I'm just remembering that ...')."
    ),
    "Backchannel + Redirection": (
        "A listening sound or short token ('mm-hmm', 'right') followed straight away by a steer that "
        "shifts the emphasis or priorities of the task."
    ),
    "Partial Agreement with Reservation": (
        "The user accepts part of the answer but objects to one piece of it, because of a constraint the "
        "assistant did not know about."
    ),
    "Clarification Request": (
        "The user asks the assistant to clarify or confirm something, and the way they ask supplies new "
        "information that the answer has to account for ('sorry, does that still hold if ...?')."
    ),
}

# Human-review categories of a flagged conversation (section 2 of the paper, plus a catch-all).
TAXONOMY: dict[str, str] = {
    "contextual_inertia": (
        "The assistant receives the interruption, often even says it will use it, but the content it goes "
        "on to give is unchanged or changed the wrong way: the update shows on the surface only."
    ),
    "interruption_amnesia": (
        "A constraint the assistant had been honouring correctly is lost after a barge-in: the "
        "interruption knocks an earlier requirement out of its working state."
    ),
    "objective_displacement": (
        "The assistant answers only the barge-in and drops the request it had not finished, even though "
        "the barge-in added to that request (context, or 'also ...') rather than replacing it."
    ),
    "other": (
        "A failure that fits none of the three categories above, such as an invented fact, a reply to the "
        "wrong request, or an error with no link to the interruption."
    ),
}

INTEGRATION = ("GOOD", "PARTIAL", "NONE")
CONFIDENCE = ("HIGH", "MEDIUM", "LOW")


def category(memory_demonstrated: bool, integration: str, failure_type: str | None) -> str:
    """The TAXONOMY category of one flagging classifier answer, from its A.4 fields.

    The one statement of the mapping (docs/echochain.md, "Taxonomy of failed conversations"):

    * ``dsr_f2_stale_later`` -> interruption_amnesia: something taken up earlier (an earlier
      barge-in's constraint, or the update itself) is overwritten later (section 2);
    * memory NO with the update taken up (integration GOOD or PARTIAL) -> objective_displacement:
      the reply answered the barge-in and dropped the task it added to;
    * memory NO with integration NONE -> other: the reply serves neither the task nor the
      update (a reply to the wrong request, an error unrelated to the interruption);
    * memory YES otherwise (F1, F3, F4, or integration NONE / PARTIAL) -> contextual_inertia: the
      task goes on but the update is ignored, misapplied, or kept side by side with the old.
    """
    if integration not in INTEGRATION:
        raise ValueError(f"integration {integration!r}; valid: {', '.join(INTEGRATION)}")
    if failure_type is not None and failure_type not in FAILURE_TYPES:
        raise ValueError(f"failure type {failure_type!r}; valid: {', '.join(FAILURE_TYPES)}")
    if failure_type == "dsr_f2_stale_later":
        return "interruption_amnesia"
    if not memory_demonstrated:
        return "objective_displacement" if integration != "NONE" else "other"
    return "contextual_inertia"
