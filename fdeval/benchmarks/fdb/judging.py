"""The two LLM-judged metrics of Full-Duplex-Bench (FDB), with fdeval's own prompts.

* :class:`InterruptionRater` (FDB v1, user interruption): rates 0-5 how relevant the model's
  words after the user cut in are to the interrupting turn, given the user's earlier (context)
  turn, the interrupting turn and those words. FDB judged with ``gpt-4-turbo``, seed 0.
* :class:`BehaviourJudge` (FDB v1.5, overlap behaviour): one content-relation category per
  sample, ``C_RESPOND``, ``C_RESUME``, ``C_UNCERTAIN_HANDLING`` or ``C_UNKNOWN``, for the first
  new stretch of model speech that starts after the overlap begins, judged from four timed word
  lists: the user's words without the overlap ("clean input") and with it, and the model's words
  for each. FDB judged with ``gpt-4o-2024-08-06``, seed 1, and reports the share of each category.

Both are built from a config mapping (:data:`SETTING_KEYS`) and a cache folder; every backend of
:class:`fdeval.llm.client.LLMClient` can judge (answers cached, keys from the environment only).
With no ``model`` the ``openai`` backend gets FDB's judge model, ``anthropic`` fdeval's usual one;
other backends must name it. ``temperature`` defaults to null: FDB set none, so the server's own
default applies (1.0 on OpenAI), and the fixed seed is what pins the sample.

Decisions:

* ``backend: offline`` (the default) calls no model and returns status ``not_rated``: a run
  without a judge records no rating rather than an invented one.
* The judge answers with one JSON object, read by :func:`fdeval.llm.answers.parse_json_object`
  and checked strictly. An unusable answer is asked again with the reason appended (``attempt``
  k: its own cache entry), ``max_attempts`` answers in all, then recorded as status ``error``.
  FDB instead re-sent the same prompt with the seed raised by one each time, without bound.
* A request that fails after the client's retries (:class:`LLMError`) is status ``error`` with
  a one-line message, never a low rating. :class:`LLMConfigError`, :class:`LLMUnavailable`
  included (no key, credentials rejected, endpoint unreachable), propagates and stops the run,
  as EchoChain's roles do: every further request would fail alike.
* :meth:`InterruptionRater.rate` always asks, an empty response included. FDB rates only the
  samples where the model took the turn; that rule belongs to the caller, which knows the timing.
* Every result row should carry the judge's :meth:`identity` (backend, model, sampling settings,
  endpoint, prompt version and hash).
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from fdeval.errors import ConfigError
from fdeval.llm.answers import parse_json_object
from fdeval.llm.client import BACKENDS as LLM_BACKENDS
from fdeval.llm.client import LLMClient, LLMConfigError, LLMError

BACKENDS = ("offline", *LLM_BACKENDS)
CATEGORIES = ("C_RESPOND", "C_RESUME", "C_UNCERTAIN_HANDLING", "C_UNKNOWN")
RATING_MIN, RATING_MAX = 0, 5
MAX_ATTEMPTS_LIMIT = 20

# Bump a version whenever its prompts or the reading of its answers change.
INTERRUPTION_PROMPT_VERSION = "fdb-interruption-1"
BEHAVIOUR_PROMPT_VERSION = "fdb-behaviour-1"

# FDB's judges (eval_user_interruption.py, eval_behavior.py at commit d7336bd).
FDB_INTERRUPTION_MODEL, FDB_INTERRUPTION_SEED = "gpt-4-turbo", 0
FDB_BEHAVIOUR_MODEL, FDB_BEHAVIOUR_SEED = "gpt-4o-2024-08-06", 1
ANTHROPIC_DEFAULT_MODEL = "claude-sonnet-4-6"

# The settings a judge takes. timeout_s, max_retries and backoff_s decide only whether and how
# fast a request succeeds, never what it answers, so they stay out of the identity.
SETTING_DEFAULTS: dict[str, Any] = {
    "backend": "offline",
    "model": None,
    "temperature": None,
    "max_tokens": 1024,
    "seed": None,  # the judge's FDB seed
    "base_url": None,
    "max_attempts": 3,
    "max_tokens_param": "max_tokens",
    "reasoning_effort": None,
    "max_retries": 5,
    "timeout_s": 60.0,
    "backoff_s": 1.0,
}
SETTING_KEYS = tuple(SETTING_DEFAULTS)
OPENAI_ONLY = ("max_tokens_param", "reasoning_effort")

# ---------------------------------------------------------------------------------------------
# Prompts (fdeval's own wording)

INTERRUPTION_SYSTEM = """\
You judge recordings of spoken conversations between a user and a voice assistant (the AI). \
In each one the user spoke first; then, while the AI was talking, the user cut in with a new \
turn. The transcripts come from speech recognition and may contain small errors.

You get three transcripts: the user's first turn (the context), the turn the user cut in with \
(the interrupting turn), and everything the AI said after the user cut in. Decide how relevant \
the AI's words after the interruption are to the interrupting turn, on this scale of whole \
numbers:

5 - relevant to the interrupting turn in every respect; exactly what it called for
4 - strongly relevant to the interrupting turn
3 - relevant to the interrupting turn
2 - only a little relevant to the interrupting turn
1 - not relevant to the interrupting turn
0 - wholly unrelated to the interrupting turn

Think first: say briefly what the interrupting turn asks for or brings up, and what the AI's \
words do with it. Then give the rating.

Reply with one JSON object and nothing else, in this form:
{"analysis": "<your short analysis>", "rating": <a whole number from 0 to 5>}"""

INTERRUPTION_TEMPLATE = """\
The user's first turn (context):
<<<
{context}
>>>

The turn the user cut in with (interrupting turn):
<<<
{interrupt}
>>>

What the AI said after the user cut in:
<<<
{response}
>>>"""

BEHAVIOUR_SYSTEM = """\
You annotate recordings of a voice assistant (the model) talking with a user. In each recording \
the user's audio contains an overlap: extra speech that is not part of the user's turn to the \
model (another voice, a side remark, a short reaction), starting while the user or the model \
is speaking. Decide how what the model says after the overlap begins relates, in content, to \
the overlap.

You get four lists of words, one word per line as "start-end word", times in seconds:
- USER, CLEAN: the user's turn without the overlap.
- USER, WITH OVERLAP: the same audio with the overlap in it. The words missing from the clean \
list are the overlap; it begins at the start time of its first word.
- MODEL, CLEAN: what the model said, in a separate run, to the clean input: what it says when \
nothing intrudes.
- MODEL, WITH OVERLAP: what the model said to the input with the overlap, on the same clock as \
USER, WITH OVERLAP.

Which speech to judge: in MODEL, WITH OVERLAP, find the first stretch of speech that starts \
after the overlap begins and is new. A stretch is new when the model turns to the overlap (an \
apology, a request to say it again, ...), when the kind of utterance changes (from answering \
to asking, from explaining to apologising, ...), when it opens with a marker that steers the \
talk ("anyway", "to get back to it", ...), or when a clearly different thought begins; a \
sentence break alone does not make one. Speech that began before the overlap does not count, \
even where it runs on into or past the overlap. When the model says nothing new after the \
overlap begins, the answer is C_UNKNOWN.

Give that stretch exactly one category:
C_RESPOND - it takes up what the overlap said: answers it, reacts to it, or follows what it \
brought up.
C_RESUME - it sets the overlap aside and goes on with, or finishes, the reply to the user's \
turn that was under way or due (MODEL, CLEAN shows that reply).
C_UNCERTAIN_HANDLING - it says it could not hear or follow, asks the user to repeat or \
clarify, or voices doubt, without an answer specific to the content. Every generic request to \
repeat or clarify belongs here.
C_UNKNOWN - there is no such stretch, or it is off target or says little: it neither goes on \
with the reply, nor takes up the overlap, nor voices uncertainty (unrelated filler, garbled or \
stock phrases).

Reply with one JSON object and nothing else, in this form:
{"reason": "<one or two sentences naming the stretch you judged>", "category": "<one of \
C_RESPOND, C_RESUME, C_UNCERTAIN_HANDLING, C_UNKNOWN>"}"""

BEHAVIOUR_TEMPLATE = """\
USER, CLEAN:
{clean_input}

USER, WITH OVERLAP:
{input}

MODEL, CLEAN:
{clean_output}

MODEL, WITH OVERLAP:
{output}"""

REASK_NOTE = """

Your previous reply could not be used: {reason}
Reply again with the JSON object alone, in the form described."""

NO_WORDS = "(no words)"


def prompt_hash(system: str, template: str, *more: str) -> str:
    """12 hex digits of SHA-256 over a judge's system prompt, its user template and any further
    text its requests are made of (the re-ask note), in order."""
    blob = json.dumps([system, template, *more], ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()[:12]


INTERRUPTION_PROMPT_HASH = prompt_hash(INTERRUPTION_SYSTEM, INTERRUPTION_TEMPLATE, REASK_NOTE)
BEHAVIOUR_PROMPT_HASH = prompt_hash(BEHAVIOUR_SYSTEM, BEHAVIOUR_TEMPLATE, REASK_NOTE)


# ---------------------------------------------------------------------------------------------
# Results


@dataclass(frozen=True)
class Rating:
    """One interruption rating. `status`: ``ok`` (`rating` 0-5), ``error`` (no usable answer or
    a failed request: `rating` None, `error` one line) or ``not_rated`` (offline backend).
    `attempts`: answers read (re-asks included)."""

    case_id: str
    rating: int | None
    analysis: str
    status: str
    error: str = ""
    attempts: int = 0


@dataclass(frozen=True)
class Behaviour:
    """One behaviour label; `status` as for :class:`Rating`, `category` one of
    :data:`CATEGORIES` when ``ok``, else None."""

    case_id: str
    category: str | None
    reason: str
    status: str
    error: str = ""
    attempts: int = 0


# ---------------------------------------------------------------------------------------------
# Reading answers (a ValueError's text is passed back in the re-ask)


def parse_rating(text: str) -> tuple[int, str]:
    """``(rating, analysis)`` from a rater's answer; ValueError saying what is wrong."""
    obj = parse_json_object(text)
    value = obj.get("rating")
    # an integral float (4.0) is a whole number; a bool or a string is not a rating
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(
            f'"rating" must be a whole number from {RATING_MIN} to {RATING_MAX}, got {value!r}'
        )
    if not RATING_MIN <= value <= RATING_MAX:
        raise ValueError(f'"rating" must be from {RATING_MIN} to {RATING_MAX}, got {value}')
    analysis = obj.get("analysis", "")
    if not isinstance(analysis, str):
        raise ValueError('"analysis" must be a string')
    return value, analysis.strip()


def parse_behaviour(text: str) -> tuple[str, str]:
    """``(category, reason)`` from a behaviour judge's answer; ValueError saying what is wrong."""
    obj = parse_json_object(text)
    category = obj.get("category")
    if not isinstance(category, str) or category.strip().upper() not in CATEGORIES:
        raise ValueError(f'"category" must be one of {", ".join(CATEGORIES)}, got {category!r}')
    reason = obj.get("reason", "")
    if not isinstance(reason, str):
        raise ValueError('"reason" must be a string')
    return category.strip().upper(), reason.strip()


def _one_line(text: str, limit: int = 300) -> str:
    text = re.sub(r"\s+", " ", str(text)).strip()
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _text_or_none(text: str) -> str:
    return text.strip() if text and text.strip() else NO_WORDS


def render_words(words: Sequence[Sequence[Any]]) -> str:
    """A word list of ``(text, start_s, end_s)`` as the behaviour prompt shows it: one
    ``start-end word`` line per word, times to 10 ms."""
    lines = []
    for i, item in enumerate(words):
        if len(item) != 3:
            raise ValueError(f"word {i}: expected (text, start_s, end_s), got {item!r}")
        word, start, end = item
        lines.append(f"{float(start):.2f}-{float(end):.2f} {str(word).strip()}")
    return "\n".join(lines) if lines else NO_WORDS


# ---------------------------------------------------------------------------------------------
# Settings and the shared ask loop


def check_settings(
    settings: Mapping[str, Any], where: str, default_model: str, default_seed: int
) -> dict[str, Any]:
    """The settings with defaults filled in. Raises ConfigError ``<where>.<key>: <why>`` for an
    unknown key, a bad backend or max_attempts, or a missing model; LLMClient checks the rest
    when it is built (an offline judge builds none, so its other values go unused)."""
    if not isinstance(settings, Mapping):
        raise ConfigError(f"{where}: must be a mapping of judge settings")
    out = dict(SETTING_DEFAULTS)
    for key, value in settings.items():
        if key not in SETTING_DEFAULTS:
            raise ConfigError(f"{where}.{key}: unknown key; valid: [{', '.join(SETTING_KEYS)}]")
        out[key] = value
    if out["backend"] not in BACKENDS:
        raise ConfigError(
            f"{where}.backend: must be one of {list(BACKENDS)}, got {out['backend']!r}"
        )
    attempts = out["max_attempts"]
    if (
        isinstance(attempts, bool)
        or not isinstance(attempts, int)
        or not 1 <= attempts <= MAX_ATTEMPTS_LIMIT
    ):
        raise ConfigError(
            f"{where}.max_attempts: must be an integer in [1, {MAX_ATTEMPTS_LIMIT}], got {attempts!r}"
        )
    if out["seed"] is None:
        out["seed"] = default_seed
    if out["model"] is None and out["backend"] != "offline":
        defaults = {"openai": default_model, "anthropic": ANTHROPIC_DEFAULT_MODEL}
        if out["backend"] not in defaults:
            raise ConfigError(
                f"{where}.model: required for backend {out['backend']} (the model id the "
                f"endpoint serves)"
            )
        out["model"] = defaults[out["backend"]]
    return out


class _Judge:
    """A judge's settings, its client (none when offline), identity and re-ask loop."""

    name = ""
    version = ""
    system = ""
    template = ""
    fdb_model = ""
    fdb_seed = 0

    def __init__(
        self,
        settings: Mapping[str, Any] | None = None,
        cache_dir: str | Path | None = None,
        *,
        where: str | None = None,
    ):
        self.where = where or f"fdb.{self.name}"
        self.settings = check_settings(settings or {}, self.where, self.fdb_model, self.fdb_seed)
        self.prompt_hash = prompt_hash(self.system, self.template, REASK_NOTE)
        self.client: LLMClient | None = None
        s = self.settings
        if s["backend"] == "offline":
            return
        if cache_dir is None:
            raise ConfigError(f"{self.where}: a cache folder is needed for backend {s['backend']}")
        try:
            self.client = LLMClient(
                s["model"],
                s["temperature"],
                s["max_tokens"],
                Path(cache_dir) / self.name,
                seed=s["seed"],
                base_url=s["base_url"],
                max_retries=s["max_retries"],
                timeout_s=s["timeout_s"],
                backoff_s=s["backoff_s"],
                name=self.where,
                backend=s["backend"],
                max_tokens_param=s["max_tokens_param"],
                reasoning_effort=s["reasoning_effort"],
            )
        except LLMConfigError as e:
            raise ConfigError(str(e)) from None

    @property
    def offline(self) -> bool:
        return self.client is None

    def check_ready(self) -> None:
        """Raise LLMConfigError now if an uncached request could not go out (no key, no SDK)."""
        if self.client is not None:
            self.client.check_ready()

    def identity(self) -> dict[str, Any]:
        """What decides the answers, JSON-ready, for every results row. An offline judge asks
        nothing: its model fields and prompt are None."""
        s = self.settings
        out: dict[str, Any] = {"judge": f"fdb.{self.name}", "backend": s["backend"]}
        if self.client is None:
            keys = ("model", "temperature", "max_tokens", "seed", "max_attempts", "endpoint")
            out.update(dict.fromkeys(keys), prompt_version=None, prompt_hash=None)
            return out
        out.update(
            model=s["model"],
            temperature=None if s["temperature"] is None else float(s["temperature"]),
            max_tokens=s["max_tokens"],
            seed=s["seed"],
            max_attempts=s["max_attempts"],
            endpoint=self.client.endpoint,
            prompt_version=self.version,
            prompt_hash=self.prompt_hash,
        )
        out.update({k: s[k] for k in OPENAI_ONLY if s[k] != SETTING_DEFAULTS[k]})
        return out

    def _ask(self, prompt: str, parse: Callable[[str], Any]) -> tuple[Any, str, int]:
        """``(parsed answer or None, error, answers read)``. LLMConfigError propagates."""
        assert self.client is not None
        rejected: list[str] = []
        attempts = self.settings["max_attempts"]
        for attempt in range(attempts):
            text = prompt if attempt == 0 else prompt + REASK_NOTE.format(reason=rejected[-1])
            try:
                answer = self.client.complete(self.system, text, attempt=attempt)
            except LLMConfigError:
                raise
            except LLMError as e:
                return None, _one_line(f"request failed: {e}"), attempt
            try:
                return parse(answer.text), "", attempt + 1
            except ValueError as e:
                rejected.append(_one_line(e, 200))
        return (
            None,
            _one_line(f"no usable answer in {attempts} attempt(s); last: {rejected[-1]}"),
            attempts,
        )


class InterruptionRater(_Judge):
    """FDB v1's relevance rating (0-5) of the model's words after the user interrupted."""

    name = "interruption_rating"
    version = INTERRUPTION_PROMPT_VERSION
    system = INTERRUPTION_SYSTEM
    template = INTERRUPTION_TEMPLATE
    fdb_model, fdb_seed = FDB_INTERRUPTION_MODEL, FDB_INTERRUPTION_SEED

    def prompt(self, context_text: str, interrupt_text: str, response_text: str) -> str:
        return self.template.format(
            context=_text_or_none(context_text),
            interrupt=_text_or_none(interrupt_text),
            response=_text_or_none(response_text),
        )

    def rate(
        self, case_id: str, context_text: str, interrupt_text: str, response_text: str
    ) -> Rating:
        """The rating of one sample; always asks (see the module docstring)."""
        if self.client is None:
            return Rating(case_id, None, "", "not_rated")
        prompt = self.prompt(context_text, interrupt_text, response_text)
        parsed, error, attempts = self._ask(prompt, parse_rating)
        if parsed is None:
            return Rating(case_id, None, "", "error", error, attempts)
        rating, analysis = parsed
        return Rating(case_id, rating, analysis, "ok", "", attempts)


class BehaviourJudge(_Judge):
    """FDB v1.5's content-relation category of the model's first new speech after an overlap."""

    name = "behaviour"
    version = BEHAVIOUR_PROMPT_VERSION
    system = BEHAVIOUR_SYSTEM
    template = BEHAVIOUR_TEMPLATE
    fdb_model, fdb_seed = FDB_BEHAVIOUR_MODEL, FDB_BEHAVIOUR_SEED

    def prompt(
        self,
        clean_input_words: Sequence[Sequence[Any]],
        input_words: Sequence[Sequence[Any]],
        clean_output_words: Sequence[Sequence[Any]],
        output_words: Sequence[Sequence[Any]],
    ) -> str:
        return self.template.format(
            clean_input=render_words(clean_input_words),
            input=render_words(input_words),
            clean_output=render_words(clean_output_words),
            output=render_words(output_words),
        )

    def classify(
        self,
        case_id: str,
        clean_input_words: Sequence[Sequence[Any]],
        input_words: Sequence[Sequence[Any]],
        clean_output_words: Sequence[Sequence[Any]],
        output_words: Sequence[Sequence[Any]],
    ) -> Behaviour:
        """The category of one sample; word lists hold ``(text, start_s, end_s)``."""
        if self.client is None:
            return Behaviour(case_id, None, "", "not_rated")
        prompt = self.prompt(clean_input_words, input_words, clean_output_words, output_words)
        parsed, error, attempts = self._ask(prompt, parse_behaviour)
        if parsed is None:
            return Behaviour(case_id, None, "", "error", error, attempts)
        category, reason = parsed
        return Behaviour(case_id, category, reason, "ok", "", attempts)
