"""The user side of an EchoChain conversation (paper section 4.1, A.1-A.3): the planner that writes
and updates a blueprint, the user simulator that writes each user message and barge-in, and the
responder prompt every model under test gets.

* The **planner** writes a :class:`Blueprint`, a strategy overview (never the user's messages) in
  the sections of :data:`BLUEPRINT_SECTIONS`, and writes it again after every completed exchange
  from the seed and the conversation so far, so the plan follows what the responder actually did.
* The **simulator** writes the next :class:`UserMessage` from the blueprint and the history: the
  message, and from exchange 2 on a barge-in that is written *before* the assistant's reply exists,
  so it has to be topic-bound, independent of the reply's wording, and carry a new constraint or
  new evidence. Its output is checked by :func:`validate_user_turn` (one task, at most three
  sentences, numbers spelled out, a known label, a barge-in of one or two sentences that differs
  from the message, none of the forbidden request kinds of :data:`FORBIDDEN_REQUESTS`).
* Each has an offline backend (scripted from ``Seed.exchanges``; the blueprint is assembled from
  the seed's fields and the history) and LLM backends (``roles.BACKENDS``; prompts below, in
  fdeval's own words with the structure of the paper's A.1 / A.2), chosen by
  ``benchmark.<role>.backend``.

An LLM answer that fails parsing or validation is re-asked (:func:`roles.ask_valid`) up to
``max_attempts`` times; then :class:`SimulatorError` (:class:`PlannerError` for the planner), an
infrastructure error of the conversation, never a model failure.
"""

from __future__ import annotations

import abc
import dataclasses
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping

from fdeval.benchmarks.echochain.classifier import Exchange, render_exchange
from fdeval.benchmarks.echochain.roles import LLMRole, OfflineRole, RoleError, ask_valid, make_role
from fdeval.benchmarks.echochain.seeds import (
    MAX_BARGE_IN_SENTENCES,
    MAX_MESSAGE_SENTENCES,
    Seed,
    mentions,
    user_text_problem,
)
from fdeval.benchmarks.echochain.taxonomy import AXES, BARGE_IN_LABELS

RESPONDER_MARKER = "You are the voice assistant in a live spoken conversation"


class SimulatorError(RoleError):
    """The user side (simulator, or planner: :class:`PlannerError`) produced no usable output within
    its attempts, or its request failed: an infrastructure error of the conversation, never a
    failure of the model under test; not an FdevalError."""


class PlannerError(SimulatorError):
    """The planner produced no usable blueprint (a :class:`SimulatorError`, so one handler covers both)."""


@dataclass(frozen=True)
class Blueprint:
    """The planner's strategy overview for one conversation; `version` counts the updates (1 first)."""

    case_id: str
    version: int
    text: str


@dataclass(frozen=True)
class UserMessage:
    """What the user says in exchange `exchange` (1-based): the message and, from exchange 2 on,
    the barge-in and its label (None in exchange 1)."""

    case_id: str
    exchange: int
    text: str
    barge_in_label: str | None
    barge_in: str | None


# ------------------------------------------------------------------------------------------------
# Text helpers shared by the roles


def history_text(history: tuple[Exchange, ...], labels: bool = True) -> str:
    """The earlier exchanges as text, in the classifier's layout (one block per exchange, the
    barge-in placed where it came). ``labels=False`` leaves the barge-in labels out: they are
    benchmark metadata, which a responder given the history should not see."""
    shown = (
        history if labels else tuple(dataclasses.replace(ex, barge_in_label=None) for ex in history)
    )
    return "\n\n".join(render_exchange(ex) for ex in shown) or "(nothing has been said yet)"


# ------------------------------------------------------------------------------------------------
# Validation of the user's words

# A.2's request kinds a voice assistant without tools cannot serve. Most are screened only where
# the user asks the assistant to do it ("can you send ...", "send ... for me"), so that asking for
# advice about the same thing ("should I send a thank-you note?") passes. A keyword screen: it
# catches the usual phrasings, not every paraphrase (human screening, section 5, catches the rest).
_ASK = r"(?:\b(?:can|could|would|will) you (?:please |just |also |maybe )?(?:help me )?|(?:^|[.!?,]\s*)(?:please |just )?)"
FORBIDDEN_REQUESTS: tuple[tuple[str, str], ...] = (
    (
        "text editing or formatting",
        _ASK
        + r"(?:edit|format|proofread|reformat|rewrite)\b.{0,30}\b(?:resume|cv|document|essay|cover letter)\b",
    ),
    (
        "visual formatting",
        r"\b(?:bullet points?|bold(?:ed)? text|in bold|markdown|in a table|as a table|indentation)\b",
    ),
    (
        "written documents",
        _ASK
        + r"(?:write|draft|compose)\b.{0,30}\b(?:blog post|article|report|manual|guide|faq|document|newsletter)s?\b",
    ),
    (
        "exact length or word counts",
        r"\b(?:word count|character limit|exactly \w+ (?:words|characters|sentences)|"
        r"(?:limit|keep) (?:it|that|this|your answer) to \w+ words)\b",
    ),
    (
        "calendar entries",
        r"\bcalendar (?:invite|link|event)s?\b|"
        + _ASK
        + r"(?:add|put|set|schedule|create|make)\b.{0,30}\b(?:calendar|reminder|alarm|appointment|invite)s?\b",
    ),
    (
        "sending messages",
        _ASK + r"(?:send|e-?mail|text|message|forward)\b|"
        r"\b(?:send|e-?mail|text|forward)\b.{0,25}\bfor me\b",
    ),
    (
        "outside websites or live lookups",
        r"\b(?:look (?:it|that|this) up online|search (?:the )?(?:web|internet)|"
        r"check (?:the|their) website|browse (?:the|to)|google (?:it|that))\b",
    ),
    (
        "exact calculations or counting",
        r"\b(?:calculate|compute|count)\b.{0,30}\b(?:exact(?:ly)?|to the (?:cent|decimal|penny))\b",
    ),
    (
        "creating files",
        _ASK
        + r"(?:create|make|generate|export|save)\b.{0,20}\b(?:file|pdf|spreadsheet|download(?:able)?)\b",
    ),
    (
        "purchases or bookings",
        _ASK + r"(?:buy|purchase|book|reserve|pay for)\b|"
        r"\b(?:buy|order|purchase|book|reserve)\b.{0,12}\bfor me\b|"
        r"\b(?:place an order|make (?:a|the) (?:booking|reservation|purchase) for)\b",
    ),
    (
        "controlling devices",
        _ASK + r"(?:turn|switch) (?:on|off)\b|"
        r"\b(?:control|set|adjust|dim) (?:my|the) (?:thermostat|lights|tv|speakers?|smart \w+)\b",
    ),
    (
        "real-time data",
        r"\b(?:current|today'?s|latest) (?:weather|forecast|stock prices?|prices? of|scores?|traffic|news|"
        r"exchange rates?)\b|\blive (?:scores?|prices?|data|updates?)\b|"
        r"\b(?:weather|forecast|traffic)(?: like)? (?:today|right now|tomorrow)\b",
    ),
    (
        "speech timing",
        r"\b(?:speak|talk) for (?:exactly |about )?\w+ (?:minutes?|seconds?)\b|\bbrief explanation\b|"
        r"\bdetailed discussion\b",
    ),
    (
        "driving",
        r"\b(?:i'?m|i am) (?:currently |right now )?(?:driving|in the car|behind the wheel)\b"
        r"(?! to\b| up\b| down\b| over\b| out\b| back\b| home\b)|\bwhile (?:i'?m )?driving\b",
    ),
    (
        "test language",
        r"\b(?:test(?:ing)? you|checking (?:if|whether) you remember|see (?:if|whether) you remember)\b",
    ),
)
_FORBIDDEN = tuple((kind, re.compile(rx, re.IGNORECASE)) for kind, rx in FORBIDDEN_REQUESTS)

_ROLE_LABEL = re.compile(
    r"^\s*(user( message)?|message|assistant|me|barge-?in|interruption)\s*:", re.IGNORECASE
)
_NOT_SPOKEN = re.compile(
    r"[*#`\[\]{}<>|_]|^\s*[-•]\s", re.MULTILINE
)  # markdown, placeholders, tables
_WORD = re.compile(r"[a-z']+")


def _norm(text: str) -> str:
    return " ".join(_WORD.findall(text.lower()))


def _content_words(text: str) -> set[str]:
    return {w.strip("'") for w in _WORD.findall(text.lower()) if len(w.strip("'")) >= 4}


def check_spoken(text: str, what: str, max_sentences: int) -> str:
    """`text` stripped (one pair of enclosing quotes removed) when it is a valid spoken user turn;
    else ValueError naming `what` and the problem."""
    t = text.strip()
    if len(t) >= 2 and t[0] == t[-1] == '"':
        t = t[1:-1].strip()
    if _ROLE_LABEL.match(t):
        raise ValueError(
            f"{what}: starts with a label ({t.split(':')[0]!r}); write only the spoken words"
        )
    why = user_text_problem(t, max_sentences)
    if why is not None:
        raise ValueError(f"{what}: {why}")
    m = _NOT_SPOKEN.search(t)
    if m:
        raise ValueError(
            f"{what}: contains {m.group(0).strip()!r}, which is not spoken text "
            f"(no markdown, lists, brackets or placeholders)"
        )
    for kind, rx in _FORBIDDEN:
        hit = rx.search(t)
        if hit:
            raise ValueError(
                f"{what}: asks for {kind} ({hit.group(0)!r}), which a voice assistant without "
                f"tools cannot do; choose another request"
            )
    return t


def validate_user_turn(
    message: str,
    exchange: int,
    label: str | None,
    barge_in: str | None,
    earlier: tuple[str, ...] = (),
) -> UserMessage:
    """The checked user turn of exchange `exchange` (case id left empty), or ValueError.
    `earlier` holds the user's earlier messages, which the new one must not repeat."""
    text = check_spoken(message, "message", MAX_MESSAGE_SENTENCES)
    for old in earlier:
        if _norm(text) == _norm(old):
            raise ValueError("message: repeats an earlier user message; move the conversation on")
    if exchange == 1:
        if label is not None or barge_in is not None:
            raise ValueError("exchange 1 has no barge-in")
        return UserMessage("", 1, text, None, None)
    if label not in BARGE_IN_LABELS:
        raise ValueError(f"chosen_label: {label!r} is not one of {list(BARGE_IN_LABELS)}")
    if not isinstance(barge_in, str):
        raise ValueError("interruption_text: missing")
    cut = check_spoken(barge_in, "interruption_text", MAX_BARGE_IN_SENTENCES)
    if _norm(cut) == _norm(text) or _norm(cut) in _norm(text):
        raise ValueError(
            "interruption_text: repeats the message; it must bring a new constraint or new evidence"
        )
    if not _content_words(cut) - _content_words(text):
        raise ValueError(
            "interruption_text: adds no word the message did not already say; "
            "it must bring a new constraint or new evidence"
        )
    return UserMessage("", exchange, text, label, cut)


_FENCED = re.compile(r"```([A-Za-z]*)[ \t]*\n?(.*?)```", re.DOTALL)


def parse_simulator_output(text: str, exchange: int, earlier: tuple[str, ...] = ()) -> UserMessage:
    """The simulator's answer, strictly: exchange 1 the spoken message only; later exchanges the
    message, then one ```json block ``{"chosen_label": ..., "interruption_text": ...}`` and
    nothing after it. Validated by :func:`validate_user_turn`; ValueError says what is wrong."""
    blocks = list(_FENCED.finditer(text))
    if exchange == 1:
        if blocks or "chosen_label" in text or "interruption_text" in text:
            raise ValueError(
                "exchange 1 has no barge-in: write the spoken message only, without a JSON block"
            )
        return validate_user_turn(text, 1, None, None, earlier)
    if not blocks:
        raise ValueError(
            "missing the ```json block with chosen_label and interruption_text after the message"
        )
    if len(blocks) > 1:
        raise ValueError(f"{len(blocks)} fenced blocks; write exactly one ```json block")
    block = blocks[0]
    if block.group(1).lower() != "json":
        raise ValueError("the metadata block must be fenced as ```json")
    if text[block.end() :].strip():
        raise ValueError("nothing may follow the ```json block")
    try:
        meta = json.loads(block.group(2))
    except ValueError as e:
        raise ValueError(f"the ```json block is not valid JSON ({e})") from None
    if not isinstance(meta, dict) or set(meta) != {"chosen_label", "interruption_text"}:
        keys = sorted(meta) if isinstance(meta, dict) else type(meta).__name__
        raise ValueError(
            f"the ```json block must hold exactly chosen_label and interruption_text, got {keys}"
        )
    if not isinstance(meta["interruption_text"], str) or not isinstance(meta["chosen_label"], str):
        raise ValueError("chosen_label and interruption_text must be strings")
    return validate_user_turn(
        text[: block.start()], exchange, meta["chosen_label"], meta["interruption_text"], earlier
    )


def _check_exchange(history: tuple[Exchange, ...], exchange: int) -> None:
    if exchange != len(history) + 1:
        raise ValueError(f"exchange {exchange} after {len(history)} earlier exchange(s)")


# ------------------------------------------------------------------------------------------------
# Planner

BLUEPRINT_SECTIONS = (
    "CONTEXT ANALYSIS",
    "OPENING APPROACH",
    "MIDDLE PHASE",
    "CLOSING APPROACH",
    "ADAPTIVE STRATEGY",
    "AUTHENTICITY PRINCIPLES",
    "DO NOT REPEAT",
)


class Planner(abc.ABC):
    """Writes the conversation's blueprint, and writes it again after every completed exchange."""

    @abc.abstractmethod
    def identity(self) -> dict: ...

    def check_ready(self) -> None:
        """Raise LLMConfigError if the role could not make its requests (offline: never)."""

    @abc.abstractmethod
    def plan(
        self, seed: Seed, history: tuple[Exchange, ...], current: Blueprint | None, case_id: str
    ) -> Blueprint: ...


def _took_up(seed: Seed, ex: Exchange) -> list[str] | None:
    """The scripted evidence words of `ex` its continuation says (None: no script to check)."""
    if (
        not ex.interrupted
        or ex.index > len(seed.exchanges)
        or not seed.exchanges[ex.index - 1].evidence
    ):
        return None
    return list(mentions(ex.continuation, seed.exchanges[ex.index - 1].evidence))


class OfflinePlanner(OfflineRole, Planner):
    """A blueprint assembled from the seed's fields, its script and the history (no model)."""

    role = "planner"
    TEMPLATES = ("offline-planner-1", *BLUEPRINT_SECTIONS)

    def plan(
        self, seed: Seed, history: tuple[Exchange, ...], current: Blueprint | None, case_id: str
    ) -> Blueprint:
        total, nxt = len(seed.exchanges), len(history) + 1
        kinds = [s.barge_in_label for s in seed.exchanges[1:] if s.barge_in_label]
        keywords = ", ".join(seed.task_keywords) or seed.subtopic
        if not history:
            context = (
                f"Nothing has been said yet. The user, {seed.persona}, comes to the assistant about "
                f"{seed.topic} ({seed.subtopic}): {seed.topic_description}"
            )
        else:
            lines = [f"{len(history)} of {total} exchanges are done."]
            for ex in history:
                line = f'- Exchange {ex.index}: the user asked: "{ex.message}"'
                if ex.interrupted:
                    line += f'; they cut in ({ex.barge_in_label}): "{ex.barge_in}"'
                    took = _took_up(seed, ex)
                    if took is not None:
                        line += (
                            f"; the continuation took the new information up ({', '.join(took)})"
                            if took
                            else "; the continuation did not take the new information up"
                        )
                kept = mentions(ex.continuation, seed.task_keywords)
                line += f"; the original task is {'still served' if kept or not seed.task_keywords else 'no longer visible'}."
                lines.append(line)
            context = "\n".join(lines)
        last = next((ex for ex in reversed(history) if ex.interrupted), None)
        took = _took_up(seed, last) if last is not None else None
        if last is None:
            adaptive = (
                "Let the first answer run in full and note how the assistant structures its reasoning; "
                "barge-ins land best while it is partway through a list or a comparison."
            )
        elif took:
            adaptive = (
                f"The assistant folded in the barge-in of exchange {last.index}. Keep the same thread and "
                f"let the next barge-in overturn a larger part of the plan, so that keeping the earlier "
                f"steps and revising the conclusion both matter."
            )
        else:
            adaptive = (
                f"The assistant did not show the update of exchange {last.index} in its content. Stay close "
                f"to that part of the task so its effect on the answer remains checkable, without "
                f"restating the update word for word."
            )
        if nxt <= total:
            step = seed.exchanges[nxt - 1]
            adaptive += f" Next: exchange {nxt} of {total}, " + (
                "uninterrupted, to establish the context."
                if nxt == 1
                else f"a follow-up on the same task with a barge-in of the kind {step.barge_in_label}."
            )
        else:
            adaptive += " The scripted exchanges are used up: wrap the conversation up."
        asked = "\n".join(f"- {ex.message}" for ex in history) or "- nothing has been asked yet"
        sections = {
            "CONTEXT ANALYSIS": context,
            "OPENING APPROACH": (
                f"Exchange one runs without a barge-in. The user states the task in their own "
                f"voice as {seed.persona}, with the facts later reasoning depends on ({keywords})."
            ),
            "MIDDLE PHASE": (
                "From exchange two on, each user turn extends the same task by one follow-up, and a "
                "barge-in written before the reply is heard brings one new constraint or piece of "
                "evidence that changes the right answer. Planned barge-in kinds: "
                + (", ".join(kinds) or "none")
                + "."
            ),
            "CLOSING APPROACH": (
                f"The last exchange ({total}) has the assistant pull the plan together, so a "
                f"conclusion that still rests on a replaced assumption shows."
            ),
            "ADAPTIVE STRATEGY": adaptive,
            "AUTHENTICITY PRINCIPLES": (
                "Casual spoken words, one task per turn, at most three sentences, numbers "
                "spelled out, reactions and fillers as people use them, no test-like "
                "phrasing, nothing a voice assistant without tools could not do."
            ),
            "DO NOT REPEAT": "Requests already made, not to be asked again:\n" + asked,
        }
        text = "\n\n".join(f"{k}:\n{v}" for k, v in sections.items())
        return Blueprint(case_id, 1 if current is None else current.version + 1, text)


PLANNER_SYSTEM = (
    "You design conversation strategies for a benchmark of spoken, full-duplex voice assistants. "
    "You plan what a simulated user will do; you never write the user's actual words."
)

PLANNER_TEMPLATE = """[ROLE]
You plan a multi-exchange spoken conversation between a simulated user and a voice assistant, for testing voice assistants.

[INPUTS]
- Challenge axis: {axis_name} ({axis_code}): {axis_definition}
- What a passing assistant does:
{pass_criteria}
- What counts as a failure:
{fail_criteria}
- A failure, for illustration: {example}
- Topic: {topic} | Subtopic: {subtopic}
- What the topic covers: {topic_description}
- The user (persona): {persona}
- The conversation so far:
{history}
- Your current blueprint:
{blueprint}

[GOAL]
Plan a natural spoken conversation in which the challenge axis comes up on its own. The conversation should give the assistant real chances to fall short, without steering it into a failure or setting traps.

[WHO READS YOUR PLAN]
A user-simulation system that turns your strategy into the user's spoken turns.

[WHAT TO PLAN]
1. Natural relevance: build the conversation around a task that needs several steps of reasoning, where a piece of information arriving in the middle of an answer changes what the right answer is.
2. The persona drives the conversation: let who the user is shape what they ask and how, instead of merely mentioning traits.
3. Real voice use: follow-ups spoken aloud, building on what the assistant said, asking for spoken clarification.
4. Coherence: every exchange serves the conversation's purpose while giving the axis a natural test.
For dual-stream reasoning the assistant must (a) keep hold of what it was explaining when it was cut off, (b) combine the new information with its unfinished reasoning, and (c) revise its conclusion without losing what came before.

[OUTPUT]
A strategy overview, not the user's messages. An exchange is one user turn and the assistant's answer; from exchange two on the user also cuts in while the assistant is speaking. Plan the user's side and adapt it to what the assistant has actually said. Write these sections, each heading on its own line followed by a colon:
CONTEXT ANALYSIS: what the conversation has established so far and where it stands.
OPENING APPROACH: how the first exchange sets up the persona and the task through natural context.
MIDDLE PHASE: how later exchanges build complexity through ordinary dialogue.
CLOSING APPROACH: how the final exchanges give a natural test as the conversation moves on.
ADAPTIVE STRATEGY: how to adjust to the assistant's behaviour and the patterns seen so far, including what the next exchange should aim for.
AUTHENTICITY PRINCIPLES: what keeps the conversation sounding real.
DO NOT REPEAT: the requests already made, which later turns must not repeat or closely resemble.

For illustration of the exchange structure only (a different topic): the user asks for a weekend hiking route; the assistant suggests one; the user asks how long the ascent takes; while the assistant is answering the user cuts in to say their knee is sore and they want to avoid steep descents; the assistant revises the route."""


def _criteria_lines(criteria: tuple[tuple[str, str], ...]) -> str:
    return "\n".join(f"  - {code}: {text}" for code, text in criteria)


def planner_prompt(seed: Seed, history: tuple[Exchange, ...], current: Blueprint | None) -> str:
    axis = AXES[seed.axis]
    return PLANNER_TEMPLATE.format(
        axis_name=axis.name,
        axis_code=axis.code,
        axis_definition=axis.definition,
        pass_criteria=_criteria_lines(axis.pass_criteria),
        fail_criteria=_criteria_lines(axis.fail_criteria),
        example=axis.example,
        topic=seed.topic,
        subtopic=seed.subtopic,
        topic_description=seed.topic_description,
        persona=seed.persona,
        history=history_text(history),
        blueprint=current.text if current is not None else "(none yet: write the first one)",
    )


def parse_blueprint(text: str) -> str:
    """The blueprint text when every section of :data:`BLUEPRINT_SECTIONS` is there (heading at a
    line start, then a colon) and not empty, in order; ValueError otherwise."""
    body = text.strip()
    if "```" in body:
        raise ValueError("the blueprint is plain text: no fenced blocks")
    starts = []
    for name in BLUEPRINT_SECTIONS:
        m = re.search(
            r"^[ \t#*]*" + re.escape(name) + r"[ \t*]*:", body, re.IGNORECASE | re.MULTILINE
        )
        if m is None:
            raise ValueError(
                f"missing the section {name}: (heading at the start of a line, then a colon)"
            )
        starts.append((m.start(), m.end(), name))
    if [s for s, _, _ in starts] != sorted(s for s, _, _ in starts):
        raise ValueError(f"the sections must come in this order: {', '.join(BLUEPRINT_SECTIONS)}")
    for i, (_, end, name) in enumerate(starts):
        stop = starts[i + 1][0] if i + 1 < len(starts) else len(body)
        if not re.search(r"\w", body[end:stop]):
            raise ValueError(f"the section {name} is empty")
    return body


class LLMPlanner(LLMRole, Planner):
    """The blueprint from an LLM (prompt :data:`PLANNER_TEMPLATE`, fdeval's wording of A.1)."""

    role = "planner"
    per_case = True
    TEMPLATES = (
        PLANNER_SYSTEM,
        PLANNER_TEMPLATE,
        *BLUEPRINT_SECTIONS,
        json.dumps({k: dataclasses.asdict(a) for k, a in AXES.items()}, sort_keys=True),
    )

    def plan(
        self, seed: Seed, history: tuple[Exchange, ...], current: Blueprint | None, case_id: str
    ) -> Blueprint:
        n = len(history) + 1

        def fail(msg: str) -> PlannerError:
            return PlannerError(
                f"planner: case {case_id}: blueprint before exchange {n}: {msg}", case_id, n
            )

        text, _ = ask_valid(
            self.client(case_id),
            PLANNER_SYSTEM,
            planner_prompt(seed, history, current),
            parse_blueprint,
            max_attempts=self.settings["max_attempts"],
            fail=fail,
        )
        return Blueprint(case_id, 1 if current is None else current.version + 1, text)


# ------------------------------------------------------------------------------------------------
# Simulator


class Simulator(abc.ABC):
    """Writes the user's next message and, from exchange 2 on, its barge-in."""

    @abc.abstractmethod
    def identity(self) -> dict: ...

    def check_ready(self) -> None:
        """Raise LLMConfigError if the role could not make its requests (offline: never)."""

    @abc.abstractmethod
    def next_message(
        self,
        seed: Seed,
        blueprint: Blueprint,
        history: tuple[Exchange, ...],
        exchange: int,
        case_id: str,
    ) -> UserMessage: ...


def _with_case(m: UserMessage, case_id: str) -> UserMessage:
    return UserMessage(case_id, m.exchange, m.text, m.barge_in_label, m.barge_in)


def assistant_said(history: tuple[Exchange, ...]) -> str:
    """Everything the assistant said in `history` (each exchange's answer before and after its
    barge-in): what a scripted wording may presuppose."""
    return "\n".join(f"{ex.answer_before} {ex.continuation}" for ex in history)


class OfflineSimulator(OfflineRole, Simulator):
    """The seed's script (``Seed.exchanges[exchange - 1]``), put through the same checks as an LLM's
    output, so a user seed file cannot slip in what the LLM simulator would be refused.

    A scripted wording that presupposes earlier advice is spoken only when the assistant's text of
    the earlier exchanges mentions one of its words, else its fallback
    (:meth:`~fdeval.benchmarks.echochain.seeds.ExchangeScript.wording`). The current exchange's
    reply plays no part: its barge-in is fixed before the reply exists (section 4.1)."""

    role = "simulator"
    TEMPLATES = ("offline-simulator-2", json.dumps(FORBIDDEN_REQUESTS))

    def next_message(
        self,
        seed: Seed,
        blueprint: Blueprint,
        history: tuple[Exchange, ...],
        exchange: int,
        case_id: str,
    ) -> UserMessage:
        _check_exchange(history, exchange)
        if exchange > len(seed.exchanges):
            raise SimulatorError(
                f"simulator: case {case_id}: seed {seed.seed_id} scripts {len(seed.exchanges)} "
                f"exchange(s), not {exchange}",
                case_id,
                exchange,
            )
        step = seed.exchanges[exchange - 1]
        message, barge_in = step.wording(assistant_said(history))
        try:
            m = validate_user_turn(
                message,
                exchange,
                step.barge_in_label,
                barge_in,
                tuple(ex.message for ex in history),
            )
        except ValueError as e:
            raise SimulatorError(
                f"simulator: case {case_id}: seed {seed.seed_id} exchange {exchange}: {e}",
                case_id,
                exchange,
            ) from None
        return _with_case(m, case_id)


SIMULATOR_SYSTEM = (
    "You play the USER in a spoken conversation with a voice assistant. You are a real person who "
    "wants help; you always speak as that user and never as the assistant."
)

SIMULATOR_TEMPLATE = """[ROLE]
You are a simulated user talking out loud to a voice assistant. You want real help, and you speak from the user's side only.

[INPUTS]
- Topic: {topic} | Subtopic: {subtopic}
- Who you are (persona): {persona}
- The conversation strategy (the planner's blueprint, including its reading of the conversation so far):
{blueprint}
- The conversation so far:
{history}
- Current exchange: {exchange}

[GOAL]
Speak as this persona in a natural voice chat: requests should sound like what people actually say to an everyday voice assistant, casual and genuine. Stick to a single request in each message, at most three sentences long.

[STYLE AND TONE]
- Let the persona show through how you talk, while sounding like an ordinary person; fit the test into the conversation naturally.
- Informal and relaxed, with partial thoughts and reactions such as "mm-hmm", "wait, but--", "oh, okay".
- Numbers: write every number as words ("twelve", "three hundred dollars", "half past six"); no digits anywhere.
- Punctuation is read as pauses: a comma is a short breath; an ellipsis (...) is trailing off or thinking; a period ends a thought; a question mark asks; an exclamation mark is for the odd moment of emphasis; a double dash (--) breaks off a thought.
  For example: "Okay, so... I was kinda hoping, um, we could keep it simple -- does that work?"

[DO NOT ASK FOR]
Anything a voice assistant without tools cannot do, in particular:
- editing or formatting text (resumes, documents, word counts), or visual formatting (bold, bullet points, tables, markdown);
- written pieces such as articles, reports, guides, blog posts, FAQs or manuals, or files to download;
- exact lengths or timings ("exactly fifty words", "talk for two minutes", "a brief explanation", "a detailed discussion");
- calendar entries, reminders or appointments that actually get created;
- sending emails, texts or any other message;
- visiting websites, databases or looking up live information such as weather, prices or scores;
- calculations or counts that must be exact to the unit;
- purchases, bookings or any real transaction; controlling devices or other systems.
Never mention being behind the wheel or riding along in a car. Avoid test language ("let me test you", "I'm checking whether you remember").

[SPEAK LIKE A PERSON]
- A single task per message; short messages; everyday words ("okay", "yeah", "sure thing", "got it", "kinda", "pretty much").
- Openers and fillers as people use them ("So...", "Well...", "Actually...", "um", "let me think").
- Break off and correct yourself now and then ("I need to sort out the-- hmm, no, I mean...").
- Listening sounds before a follow-up ("mm-hmm", "gotcha", "oh wow", "hmm").
- Refer back to what was said earlier when it matters, ask for spoken changes when they would help, and bring in new related facts as real users do.
- Never repeat or closely resemble a request you already made.

[BARGE-INS, FROM EXCHANGE TWO ON]
From exchange two on, every turn also carries a barge-in: words you will say while the assistant is still answering your message. You write the barge-in NOW, before you hear that answer, so it must be:
- topic-bound: about what the assistant should be saying in answer to your message;
- wording-agnostic: it must make sense whatever words the assistant happens to use;
- new: different from your message, bringing a new constraint or new evidence that changes the right answer (a barge-in that only repeats what the message said tests nothing).
The message itself is an ordinary follow-up of the task; the barge-in is where the new constraint comes in. Keep the barge-in to one or two sentences, self-contained and in the style of its label.
Labels (use the exact name as chosen_label):
{labels}
Shapes that work (fill in the specifics of this conversation, spelled out in words):
- "Oh, hang on -- my budget just got cut by about a third. Does that change what you'd pick?"
- "Wait, I forgot to say I can't manage stairs. Is that still doable?"
- "Hmm, actually the thing I care about most is the quiet, not the price. Can you reorder that?"
- "Oh, and two of us don't eat dairy. Do your ideas still fit?"

[THIS EXCHANGE]
{this_exchange}

[OUTPUT FORMAT]
{output_format}"""

_FORMAT_FIRST = (
    "Only the words you say, as plain text: no quotation marks around them, no label such as "
    '"User:", no JSON, nothing else.'
)
_FORMAT_LATER = """The words of your message as plain text (no label, no quotation marks), then exactly one JSON block and nothing after it:
```json
{"chosen_label": "<one of the labels above>", "interruption_text": "<the barge-in, one or two sentences>"}
```"""


def simulator_prompt(
    seed: Seed, blueprint: Blueprint, history: tuple[Exchange, ...], exchange: int
) -> str:
    labels = "\n".join(f'- "{name}": {definition}' for name, definition in BARGE_IN_LABELS.items())
    if exchange == 1:
        this = "Exchange one: open the conversation with your task. No barge-in in this exchange."
    else:
        this = (
            f"Exchange {exchange}: a follow-up message, plus a barge-in that brings new information, "
            f"written before you hear the assistant's answer."
        )
    return SIMULATOR_TEMPLATE.format(
        topic=seed.topic,
        subtopic=seed.subtopic,
        persona=seed.persona,
        blueprint=blueprint.text,
        history=history_text(history),
        exchange=exchange,
        labels=labels,
        this_exchange=this,
        output_format=_FORMAT_FIRST if exchange == 1 else _FORMAT_LATER,
    )


class LLMSimulator(LLMRole, Simulator):
    """The user's turn from an LLM (prompt :data:`SIMULATOR_TEMPLATE`, fdeval's wording of A.2),
    parsed by :func:`parse_simulator_output` and re-asked up to ``max_attempts`` times."""

    role = "simulator"
    per_case = True
    TEMPLATES = (
        SIMULATOR_SYSTEM,
        SIMULATOR_TEMPLATE,
        _FORMAT_FIRST,
        _FORMAT_LATER,
        json.dumps(BARGE_IN_LABELS, sort_keys=True),
        json.dumps(FORBIDDEN_REQUESTS),
    )

    def next_message(
        self,
        seed: Seed,
        blueprint: Blueprint,
        history: tuple[Exchange, ...],
        exchange: int,
        case_id: str,
    ) -> UserMessage:
        _check_exchange(history, exchange)
        earlier = tuple(ex.message for ex in history)

        def fail(msg: str) -> SimulatorError:
            return SimulatorError(
                f"simulator: case {case_id}: exchange {exchange}: {msg}", case_id, exchange
            )

        m, _ = ask_valid(
            self.client(case_id),
            SIMULATOR_SYSTEM,
            simulator_prompt(seed, blueprint, history, exchange),
            lambda t: parse_simulator_output(t, exchange, earlier),
            max_attempts=self.settings["max_attempts"],
            fail=fail,
        )
        return _with_case(m, case_id)


# ------------------------------------------------------------------------------------------------
# The responder prompt (A.3): the system instruction of every live session, the same for all models

RESPONDER_PROMPT = (
    RESPONDER_MARKER
    + """ with a person who needs help. You are helpful, well informed and honest.

GOAL: Answer what the person asks or requests by voice, clearly, coherently and correctly. Stay useful in every exchange, stay grounded in what has been said aloud, and keep to what the person asked for earlier in the conversation.

MANNER: Sound like a capable assistant working under real spoken conditions. Draw on everything said so far and refer back to it where it helps. Keep your facts, your earlier statements and the person's spoken constraints consistent.

TONE: Useful and knowledgeable; open about what you do not know, never making things up unless asked to invent; calm and even.

LISTENER: A real person speaking with you, who expects genuine, helpful spoken answers.

HOW TO ANSWER:
1. Use the whole conversation: weigh everything said before you reply, and stay in line with the person's earlier requests and your own earlier answers where they matter.
2. Stay consistent: keep facts, tone and earlier statements steady from one exchange to the next, and keep honouring constraints such as allergies, preferences or a requested way of speaking for the rest of the conversation, even when they came up only once.
3. Follow spoken instructions: do what the person asked out loud in every answer, and keep doing it until they clearly change it.
4. No contradictions, no flattery: do not simply agree with something that conflicts with what you said before or with the facts; if the person pushes back, keep a reasoned position and explain it calmly.
5. No invention: do not make up facts, sources or stories unless the person asks for something creative; when unsure, say so and state your assumptions.
6. Read the situation: infer the person's goals, preferences and constraints from what they said earlier, and help proactively, as a thoughtful human assistant would.
7. Length: give somewhat fuller answers than you usually would; do not cut them down to a word or two."""
)


def responder_prompt(
    history_text: str | None = None,
    current_message: str | None = None,
    turn_number: int | None = None,
) -> str:
    """:data:`RESPONDER_PROMPT`, plus the context sections that are given. All None: the live form
    (the history is the audio itself). Replay and the half-duplex control pass the earlier
    exchanges as text (and the exchange number); the current message, when it comes as audio, stays None."""
    parts = [RESPONDER_PROMPT]
    if history_text is not None:
        parts.append(
            "CONVERSATION SO FAR (a text record of the spoken exchanges):\n"
            + (history_text.strip() or "(nothing yet)")
        )
    if current_message is not None:
        parts.append("THE PERSON'S CURRENT MESSAGE:\n" + current_message.strip())
    if turn_number is not None:
        parts.append(f"CURRENT EXCHANGE: {int(turn_number)} of the conversation")
    return "\n\n".join(parts)


def make_planner(settings: Mapping, cache_dir: Path) -> Planner:
    """The planner of ``benchmark.planner`` (validated by :func:`roles.check_role`)."""
    return make_role("planner", settings, cache_dir, OfflinePlanner, LLMPlanner)


def make_simulator(settings: Mapping, cache_dir: Path) -> Simulator:
    """The simulator of ``benchmark.simulator`` (validated by :func:`roles.check_role`)."""
    return make_role("simulator", settings, cache_dir, OfflineSimulator, LLMSimulator)
