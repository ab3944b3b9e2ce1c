"""Instance rubrics of EchoChain (paper section 5): what a correct continuation of one interrupted
exchange does, and the pass / fail grade of a reply against it.

* A :class:`Rubric` is the criteria of one exchange of one conversation. Its `source` says where
  they come from: ``seed`` (fdeval's hand-written criteria of an offline seed), ``draft`` (written
  by an LLM and not yet checked by a person) or ``human`` (imported from review).
* The **drafter** writes the rubric. Offline it returns the seed's criteria; on an LLM backend
  an LLM drafts them from the conversation up to the exchange, the user's message and the
  barge-in, and never from the assistant's reply: the same rubric then grades every model that
  answers that exchange (replay), as the paper's annotators apply one rubric to all models.
  Each drafted criterion also carries keyword checks, so an offline grader can run it too.
* The **grader** gives one :class:`Grade` per criterion (source ``auto``; imported human grades
  are ``human``). Offline: the criterion's keyword checks (``require_any``: at least one present,
  ``forbid``: none present; whole words, case-insensitive) on the continuation (scope
  ``continuation``) or on the whole reply to the exchange (scope ``answer``). LLM: a JSON verdict
  per criterion with its reason, parsed strictly.

An LLM answer that does not parse is re-asked up to ``max_attempts`` times; then
:class:`GradeError` (:class:`DraftError` for the drafter), an infrastructure error recorded as
such, never a failure of the model under test.
"""

from __future__ import annotations

import abc
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

from fdeval.benchmarks.echochain.classifier import (
    Exchange,
    misapplied_numbers,
    render_exchange,
    said,
    serves_task,
    still_used,
)
from fdeval.benchmarks.echochain.dialogue import history_text
from fdeval.benchmarks.echochain.roles import LLMRole, OfflineRole, RoleError, ask_valid, make_role
from fdeval.benchmarks.echochain.seeds import MAX_WORD_CHARS, SCOPES, Criterion, Seed
from fdeval.llm.answers import parse_json_object

RUBRIC_SOURCES = ("seed", "draft", "human")
GRADE_SOURCES = ("auto", "human")
MIN_DRAFT_CRITERIA, MAX_DRAFT_CRITERIA = 2, 6


class GradeError(RoleError):
    """A rubric role produced no usable answer within its attempts, or its request failed: an
    infrastructure error, never a failure of the model under test; not an FdevalError."""


class DraftError(GradeError):
    """The drafter produced no usable rubric (a :class:`GradeError`, so one handler covers both)."""


@dataclass(frozen=True)
class Rubric:
    """The criteria one exchange of one conversation is graded against."""

    case_id: str
    exchange: int
    criteria: tuple[Criterion, ...]
    source: str  # seed | draft | human


@dataclass(frozen=True)
class Grade:
    """One criterion's verdict on one reply."""

    criterion_id: str
    passed: bool
    reason: str
    source: str  # auto | human


def answer_text(exchange: Exchange, scope: str) -> str:
    """The text a criterion of `scope` is checked on: the continuation, or the whole reply."""
    if scope == "continuation":
        return exchange.continuation
    if scope == "answer":
        return " ".join(
            t for t in (exchange.answer_before.strip(), exchange.continuation.strip()) if t
        )
    raise ValueError(f"unknown scope {scope!r}; valid: {list(SCOPES)}")


# ------------------------------------------------------------------------------------------------
# Drafter


class Drafter(abc.ABC):
    """Writes the rubric of one exchange."""

    @abc.abstractmethod
    def identity(self) -> dict: ...

    def check_ready(self) -> None:
        """Raise LLMConfigError if the role could not make its requests (offline: never)."""

    @abc.abstractmethod
    def draft(
        self, seed: Seed, history: tuple[Exchange, ...], exchange: Exchange, case_id: str
    ) -> Rubric: ...


class OfflineDrafter(OfflineRole, Drafter):
    """The seed's hand-written criteria for the exchange (source ``seed``)."""

    role = "drafter"
    TEMPLATES = ("offline-drafter-1",)

    def draft(
        self, seed: Seed, history: tuple[Exchange, ...], exchange: Exchange, case_id: str
    ) -> Rubric:
        if not 1 <= exchange.index <= len(seed.exchanges):
            raise DraftError(
                f"drafter: case {case_id}: seed {seed.seed_id} scripts {len(seed.exchanges)} "
                f"exchange(s), none numbered {exchange.index}",
                case_id,
                exchange.index,
            )
        return Rubric(case_id, exchange.index, seed.exchanges[exchange.index - 1].criteria, "seed")


DRAFTER_SYSTEM = (
    "You write grading rubrics for a benchmark of voice assistants that can be interrupted while "
    "they speak. A rubric states what a correct reply does; it is the same for every assistant."
)

DRAFTER_TEMPLATE = """[TASK]
Write the rubric for exchange {index} of the conversation below: the criteria a correct reply to \
it meets. In this exchange the user sent a message and, while the assistant was answering, cut in \
with the barge-in shown. You do not see any assistant's reply to this exchange; the rubric must \
hold for whichever assistant answers.

[CONVERSATION]
Topic: {topic} ({subtopic}). {topic_description}
The user: {persona}

Earlier exchanges:
{history}

Exchange {index}:
User (message): {message}
User (barge-in, {label}): {barge_in}

[WHAT THE CRITERIA CHECK]
- That the reply takes up the barge-in's new information in what it actually recommends or \
concludes, not only in words of acknowledgement.
- That the reply keeps serving the task of the message and the constraints set earlier in the conversation.
- That nothing the new information ruled out is still recommended, and that the new information is not applied twice.
Each criterion is one checkable statement about the reply, judged pass or fail on its own. Write \
between {min_criteria} and {max_criteria} criteria, specific to this conversation (name the actual \
constraint, item or number, in words).

[KEYWORD CHECKS]
Give every criterion a keyword check for a grader that cannot read for meaning: "require_any" \
lists words or short phrases of which a passing reply says at least one; "forbid" lists words or \
short phrases a passing reply does not say. Give at least one of the two; each entry at most \
{max_word_chars} characters.
"scope" is "continuation" when the criterion concerns what the assistant says from the barge-in \
on, or "answer" when it concerns the whole reply to the exchange.

[OUTPUT]
One JSON object and nothing else:
{{"criteria": [{{"text": "<what a correct reply does>", "require_any": ["..."], "forbid": ["..."], \
"scope": "continuation"}}]}}"""

_DRAFT_KEYS = {"text", "require_any", "forbid", "scope"}


def _word_list(v: Any, where: str) -> tuple[str, ...]:
    if v is None:
        return ()
    if not isinstance(v, list) or not all(isinstance(w, str) and w.strip() for w in v):
        raise ValueError(f"{where}: must be a list of non-empty strings")
    out = tuple(w.strip() for w in v)
    long = [w for w in out if len(w) > MAX_WORD_CHARS]
    if long:
        raise ValueError(f"{where}: {long[0][:40]!r}... is longer than {MAX_WORD_CHARS} characters")
    return out


def parse_draft(text: str, exchange: int) -> tuple[Criterion, ...]:
    """The drafter's answer, strictly: ``{"criteria": [...]}`` with the keys of each criterion
    known, a text, keyword checks and a known scope. Ids are fdeval's: ``ex<n>.d<i>``."""
    d = parse_json_object(text)
    if set(d) != {"criteria"} or not isinstance(d["criteria"], list):
        raise ValueError('the answer must be {"criteria": [...]} with no other key')
    items = d["criteria"]
    if not MIN_DRAFT_CRITERIA <= len(items) <= MAX_DRAFT_CRITERIA:
        raise ValueError(
            f"{len(items)} criteria; write between {MIN_DRAFT_CRITERIA} and {MAX_DRAFT_CRITERIA}"
        )
    out = []
    for i, c in enumerate(items, 1):
        where = f"criteria[{i - 1}]"
        if not isinstance(c, dict):
            raise ValueError(f"{where}: must be an object")
        unknown = sorted(set(c) - _DRAFT_KEYS)
        if unknown:
            raise ValueError(f"{where}.{unknown[0]}: unknown key; valid: {sorted(_DRAFT_KEYS)}")
        if not isinstance(c.get("text"), str) or not c["text"].strip():
            raise ValueError(f"{where}.text: missing or empty")
        require_any, forbid = (
            _word_list(c.get("require_any"), f"{where}.require_any"),
            _word_list(c.get("forbid"), f"{where}.forbid"),
        )
        if not require_any and not forbid:
            raise ValueError(f"{where}: give require_any or forbid words (its keyword check)")
        scope = c.get("scope", "continuation")
        if scope not in SCOPES:
            raise ValueError(f"{where}.scope: {scope!r}; valid: {list(SCOPES)}")
        out.append(Criterion(f"ex{exchange}.d{i}", c["text"].strip(), require_any, forbid, scope))
    return tuple(out)


class LLMDrafter(LLMRole, Drafter):
    """Criteria drafted by an LLM (source ``draft``) from the conversation up to the barge-in."""

    role = "drafter"
    TEMPLATES = (DRAFTER_SYSTEM, DRAFTER_TEMPLATE)

    def prompt(self, seed: Seed, history: tuple[Exchange, ...], exchange: Exchange) -> str:
        return DRAFTER_TEMPLATE.format(
            index=exchange.index,
            topic=seed.topic,
            subtopic=seed.subtopic,
            topic_description=seed.topic_description,
            persona=seed.persona,
            history=history_text(history),
            message=exchange.message,
            label=exchange.barge_in_label or "no label",
            barge_in=exchange.barge_in or "(none: not interrupted)",
            min_criteria=MIN_DRAFT_CRITERIA,
            max_criteria=MAX_DRAFT_CRITERIA,
            max_word_chars=MAX_WORD_CHARS,
        )

    def draft(
        self, seed: Seed, history: tuple[Exchange, ...], exchange: Exchange, case_id: str
    ) -> Rubric:
        def fail(msg: str) -> DraftError:
            return DraftError(
                f"drafter: case {case_id}: exchange {exchange.index}: {msg}",
                case_id,
                exchange.index,
            )

        criteria, _ = ask_valid(
            self.client(),
            DRAFTER_SYSTEM,
            self.prompt(seed, history, exchange),
            lambda t: parse_draft(t, exchange.index),
            max_attempts=self.settings["max_attempts"],
            fail=fail,
        )
        return Rubric(case_id, exchange.index, criteria, "draft")


# ------------------------------------------------------------------------------------------------
# Grader


class Grader(abc.ABC):
    """Grades one reply against its rubric: one :class:`Grade` per criterion, in rubric order."""

    @abc.abstractmethod
    def identity(self) -> dict: ...

    def check_ready(self) -> None:
        """Raise LLMConfigError if the role could not make its requests (offline: never)."""

    @abc.abstractmethod
    def grade(
        self, rubric: Rubric, history: tuple[Exchange, ...], exchange: Exchange
    ) -> tuple[Grade, ...]: ...


def _check_pair(rubric: Rubric, exchange: Exchange) -> None:
    # The rubric of one exchange may grade several models' replies (replay: other case ids),
    # never another exchange.
    if rubric.exchange != exchange.index:
        raise ValueError(
            f"rubric of exchange {rubric.exchange} applied to exchange {exchange.index}"
        )


def keyword_grade(
    criterion: Criterion,
    exchange: Exchange,
    history: tuple[Exchange, ...] = (),
    conflicts: tuple[str, ...] = (),
) -> Grade:
    """The offline verdict of one criterion: its keyword checks on the text its scope names.

    Words compare as the offline classifier compares them (:func:`classifier.occurrences`: numbers
    normalised, a final plural, whole words). A ``forbid`` word counts only where it is still in
    use, not where it is named as what is replaced or ruled out ("swap the plain flour for ...").
    A ``require_any`` check on the continuation also needs the continuation to still serve the
    exchange's task (:func:`classifier.serves_task`): a reply that answers only the barge-in
    recommends nothing for the request, whatever words of the update it says. And a
    ``require_any`` check fails when the same text still uses one of `conflicts` (what the rubric
    forbids in the same scope): naming the update next to what it ruled out is a contradictory
    conclusion (A.4 DSR-F3), not the update applied. A ``require_any`` check on the continuation
    fails, too, when the continuation gets a number of the update wrong
    (:func:`classifier.misapplied_numbers`: A.4 DSR-F1 "misapplies").
    """
    text = answer_text(exchange, criterion.scope)
    where = "the continuation" if criterion.scope == "continuation" else "the answer"
    said_words = said(text, criterion.require_any)
    banned = still_used(text, criterion.forbid)
    if banned:
        return Grade(
            criterion.criterion_id,
            False,
            f"{where} says {', '.join(map(repr, banned))} (forbidden)",
            "auto",
        )
    if criterion.require_any and not said_words:
        return Grade(
            criterion.criterion_id,
            False,
            f"{where} says none of {', '.join(map(repr, criterion.require_any))}",
            "auto",
        )
    clash = still_used(text, conflicts) if criterion.require_any else []
    if clash:
        return Grade(
            criterion.criterion_id,
            False,
            f"{where} says {', '.join(map(repr, said_words))} but also keeps "
            f"{', '.join(map(repr, clash))}, which the rubric rules out",
            "auto",
        )
    if criterion.require_any and criterion.scope == "continuation":
        task = serves_task(history, exchange)
        if not task.served:
            return Grade(
                criterion.criterion_id,
                False,
                f"{where} says {', '.join(map(repr, said_words))} but no longer serves the request "
                f"(none of {', '.join(map(repr, task.anchors[:6]))})",
                "auto",
            )
        wrong = misapplied_numbers(exchange.barge_in, text)
        if wrong:
            return Grade(
                criterion.criterion_id,
                False,
                f"{where} says {', '.join(map(repr, said_words))} but applies the update wrongly "
                f"({'; '.join(wrong[:2])})",
                "auto",
            )
    ruled_out = [w for w in said(text, criterion.forbid)]
    why = (
        f"{where} says {', '.join(map(repr, said_words))}"
        if said_words
        else f"{where} says none of the forbidden words"
    )
    if ruled_out:
        why += f" (names {', '.join(map(repr, ruled_out))} only as replaced or ruled out)"
    return Grade(criterion.criterion_id, True, why, "auto")


class OfflineGrader(OfflineRole, Grader):
    """Each criterion's keyword checks (see :func:`keyword_grade`)."""

    role = "grader"
    TEMPLATES = ("offline-grader-3",)

    def grade(
        self, rubric: Rubric, history: tuple[Exchange, ...], exchange: Exchange
    ) -> tuple[Grade, ...]:
        _check_pair(rubric, exchange)
        ruled_out = {
            scope: tuple(
                dict.fromkeys(w for c in rubric.criteria if c.scope == scope for w in c.forbid)
            )
            for scope in SCOPES
        }
        return tuple(
            keyword_grade(c, exchange, tuple(history), ruled_out[c.scope]) for c in rubric.criteria
        )


GRADER_SYSTEM = (
    "You grade replies of voice assistants against a rubric, one criterion at a time. You judge what "
    "the reply says, not its wording, style or length. Transcripts of speech may lack punctuation."
)

GRADER_TEMPLATE = """[TASK]
Grade the assistant's reply in exchange {index} against each criterion of the rubric: passed \
(true) or failed (false), with a one-sentence reason that points to what the reply says.

[CONVERSATION]
{history}

{exchange}

[WHAT EACH SCOPE MEANS]
- "continuation": judge only what the assistant said from the barge-in on.
- "answer": judge the assistant's whole reply in exchange {index}.

[RUBRIC]
{criteria}

[OUTPUT]
One JSON object and nothing else, one entry per criterion id above:
{{"grades": [{{"criterion_id": "<id>", "passed": true, "reason": "<why>"}}]}}"""


def parse_grades(text: str, rubric: Rubric) -> tuple[Grade, ...]:
    """The grader's answer, strictly: ``{"grades": [...]}`` with exactly one entry per criterion
    of `rubric` (no unknown or repeated ids), a boolean `passed` and a reason. In rubric order."""
    d = parse_json_object(text)
    if set(d) != {"grades"} or not isinstance(d["grades"], list):
        raise ValueError('the answer must be {"grades": [...]} with no other key')
    wanted = [c.criterion_id for c in rubric.criteria]
    got: dict[str, Grade] = {}
    for i, g in enumerate(d["grades"]):
        where = f"grades[{i}]"
        if not isinstance(g, dict) or set(g) != {"criterion_id", "passed", "reason"}:
            raise ValueError(
                f"{where}: must be an object with exactly criterion_id, passed and reason"
            )
        cid = g["criterion_id"]
        if cid not in wanted:
            raise ValueError(
                f"{where}.criterion_id: {cid!r} is not in the rubric ({', '.join(wanted)})"
            )
        if cid in got:
            raise ValueError(f"{where}.criterion_id: {cid!r} graded twice")
        if not isinstance(g["passed"], bool):
            raise ValueError(f"{where}.passed: must be true or false, got {g['passed']!r}")
        if not isinstance(g["reason"], str) or not g["reason"].strip():
            raise ValueError(f"{where}.reason: missing or empty")
        got[cid] = Grade(cid, g["passed"], " ".join(g["reason"].split()), "auto")
    missing = [c for c in wanted if c not in got]
    if missing:
        raise ValueError(f"no grade for {', '.join(missing)}")
    return tuple(got[c] for c in wanted)


class LLMGrader(LLMRole, Grader):
    """Grades from an LLM: one JSON pass / fail with a reason per criterion."""

    role = "grader"
    TEMPLATES = (GRADER_SYSTEM, GRADER_TEMPLATE)

    def prompt(self, rubric: Rubric, history: tuple[Exchange, ...], exchange: Exchange) -> str:
        criteria = "\n".join(
            f"- {c.criterion_id} (scope: {c.scope}): {c.text}" for c in rubric.criteria
        )
        return GRADER_TEMPLATE.format(
            index=exchange.index,
            history=history_text(history),
            exchange=render_exchange(exchange, evaluated=True),
            criteria=criteria,
        )

    def grade(
        self, rubric: Rubric, history: tuple[Exchange, ...], exchange: Exchange
    ) -> tuple[Grade, ...]:
        _check_pair(rubric, exchange)
        if not rubric.criteria:
            return ()

        def fail(msg: str) -> GradeError:
            return GradeError(
                f"grader: case {exchange.case_id}: exchange {exchange.index}: {msg}",
                exchange.case_id,
                exchange.index,
            )

        grades, _ = ask_valid(
            self.client(),
            GRADER_SYSTEM,
            self.prompt(rubric, history, exchange),
            lambda t: parse_grades(t, rubric),
            max_attempts=self.settings["max_attempts"],
            fail=fail,
        )
        return grades


def make_drafter(settings: Mapping, cache_dir: Path) -> Drafter:
    """The drafter of ``benchmark.drafter`` (validated by :func:`roles.check_role`)."""
    return make_role("drafter", settings, cache_dir, OfflineDrafter, LLMDrafter)


def make_grader(settings: Mapping, cache_dir: Path) -> Grader:
    """The grader of ``benchmark.grader`` (validated by :func:`roles.check_role`)."""
    return make_role("grader", settings, cache_dir, OfflineGrader, LLMGrader)
