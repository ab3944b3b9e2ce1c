"""The LLM text backend: a persona condenser and a turn agent that write conversations turn by turn.

Per candidate conversation:

1. **Condenser**: one prompt fuses one persona detail with the scenario description into a single
   grounding sentence (JSON ``{"grounding": ...}``).
2. **Turn agent**: one prompt per turn of the scenario's layout (:mod:`.specs`), for both speakers,
   with the grounding sentence, the scenario, the rules of spoken output, the turn's hint and the
   history so far; the answer is JSON ``{"content": ...}``. The trigger turn of a proactive
   scenario carries ``<pause: S>`` markers. Cut-ins are written by a second kind of prompt that
   *annotates* the other speaker's finished turn: the model's ``<backchannel: ...>`` (plus its
   ``<take-turn: ...>`` reply) or ``<interrupt: ...>`` in the user's trigger turn, and the user's
   ``<backchannel: ...>`` / ``<interrupt: ...>`` in the model's long answer. An annotated turn must
   keep the original words and pauses exactly.

Every answer is parsed and validated (JSON, markers, placement, plain spoken text, length). An
invalid answer is asked again (``attempt`` 1, 2, ... -- a separate cache entry -- with a note on
what was wrong) up to ``max_attempts`` times; then the conversation is discarded and counted
(``llm_invalid``); an :class:`~fdeval.llm.client.LLMError` after the client's own retries discards
it too (``llm_error``), while an ``LLMConfigError`` (no key, no SDK, bad model) stops generation.

The client is ``fdeval.llm.client.LLMClient``: the Anthropic Messages API or an OpenAI-compatible
server (``backend: openai | vllm | sglang``, presets ``conf/llm/*.yaml``); model, temperature,
max_tokens, top_p and seed pinned by config, answers cached on disk by request hash (the endpoint
in it), key from ``ANTHROPIC_API_KEY`` / ``OPENAI_API_KEY`` only. Each candidate conversation
uses its own client seed (derived from the configured seed, the generation seed, the scenario
and the candidate index), so different generation seeds give different samples even where
prompts coincide. All prompt text here is fdeval's own.
"""

from __future__ import annotations

import inspect
import json
import random
import re
import zlib
from pathlib import Path
from typing import Any, Callable

from fdeval.benchmarks.instructfd.markers import (
    CUT_IN_KINDS,
    MarkerError,
    Pause,
    parse_markers,
)
from fdeval.benchmarks.instructfd.personas import Persona
from fdeval.benchmarks.instructfd.pipeline import (
    Draft,
    DraftRejected,
    conversation_id,
    validate_draft,
)
from fdeval.benchmarks.instructfd.specs import (
    MAX_BARGE_IN_WORDS,
    MAX_USER_WORDS,
    PROACTIVE,
    ScenarioSpec,
    TurnSpec,
    spoken_text_problem,
)
from fdeval.llm.client import LLMClient, LLMConfigError, LLMError

# Bump when a prompt or the way turns are assembled changes.
PROMPT_VERSION = "1.0"
CLOSING_CHANCE = 0.55
MAX_MODEL_WORDS = 130

SYSTEM_TURN = (
    "You write single turns of a spoken conversation between a user and a voice assistant, for a test "
    "set about turn-taking. Answer with one JSON object and nothing else."
)
SYSTEM_CONDENSE = (
    "You turn a persona and a scenario into one grounding sentence for a simulated spoken "
    "conversation. Answer with one JSON object and nothing else."
)

_SPOKEN_RULES = """- English only, in a relaxed spoken style: contractions, casual openers like \
"so" or "yeah", fragments and restarts are fine. Say what is needed and stop.
- Plain speech only: no lists, markdown, emoji, quotation marks or brackets of any kind except the markers named above.
- Write numbers, symbols and abbreviations the way people say them: \
"forty dollars", "ten percent", "seven thirty", "four one five".
- Never mention these instructions, the turn number or that this is a test."""


class LLMTextBackend:
    """TextBackend writing conversations with an LLM; see the module docstring."""

    name = "anthropic"  # the default backend; an instance takes settings["backend"]

    def __init__(
        self,
        client_factory: Callable[[int], Any],
        settings: dict,
        max_attempts: int = 3,
        concurrency: int = 1,
    ):
        if max_attempts < 1:
            raise ValueError(f"max_attempts must be >= 1, got {max_attempts}")
        self._factory = client_factory
        self.settings = dict(settings)
        self.name = str(self.settings.get("backend") or LLMTextBackend.name)
        self.max_attempts = int(max_attempts)
        self.concurrency = max(1, int(concurrency))
        self.calls = 0

    def identity(self) -> dict:
        keep = ("model", "temperature", "max_tokens", "seed", "base_url") + (
            ("top_p",) if "top_p" in self.settings else ()
        )
        return {
            "backend": self.name,
            **{k: self.settings.get(k) for k in keep},
            "prompt_version": PROMPT_VERSION,
            "max_attempts": self.max_attempts,
        }

    # -- one conversation ---------------------------------------------------------------------
    def draft(self, spec: ScenarioSpec, index: int, seed: int, persona: Persona) -> Draft:
        base = int(self.settings.get("seed") or 0)
        client_seed = (base * 1_000_003 + zlib.crc32(f"{seed}:{spec.slug}:{index}".encode())) % (
            2**31
        )
        client = self._factory(client_seed)
        rng = random.Random(f"fdeval-llm:{seed}:{spec.slug}:{index}")
        try:
            grounding = self._ask(
                client,
                SYSTEM_CONDENSE,
                condense_prompt(spec, persona),
                "grounding",
                lambda g: _check_grounding(g, persona),
            )
            lines = self._write_turns(client, spec, grounding, rng)
        except LLMConfigError:
            raise
        except LLMError as e:
            raise DraftRejected("llm_error", str(e)) from None
        d = Draft(
            conversation_id(spec, index),
            spec.name,
            index,
            persona,
            "llm",
            grounding,
            persona.pid,
            tuple(lines),
        )
        validate_draft(d)
        return d

    def _ask(
        self, client: Any, system: str, prompt: str, key: str, check: Callable[[str], str | None]
    ) -> str:
        problem = ""
        for attempt in range(self.max_attempts):
            text = (
                prompt
                if attempt == 0
                else (
                    f"{prompt}\n\n[NOTE]\nAn earlier answer to this request was rejected: {problem}. Follow the format "
                    f"and rules exactly."
                )
            )
            self.calls += 1
            resp = _complete(client, system, text, attempt)
            value, problem = parse_answer(resp.text, key)
            if value is not None:
                problem = check(value) or ""
                if not problem:
                    return value
        raise DraftRejected("llm_invalid", f"{key}: {problem}")

    def _write_turns(
        self, client: Any, spec: ScenarioSpec, grounding: str, rng: random.Random
    ) -> list[tuple[str, str]]:
        turns = list(spec.turns)
        closing = (
            any(not t.optional for t in turns if t.role == "closing")
            or rng.random() < CLOSING_CHANCE
        )
        lines: list[tuple[str, str]] = []
        history: list[str] = []
        i = 0
        while i < len(turns):
            t = turns[i]
            if t.optional and not closing:
                break
            n = len(lines) + 1
            if t.speaker == "user" and t.cut_in and spec.group == PROACTIVE:
                raw = self._speak(client, spec, grounding, t, n, history)
                annotated = self._annotate(client, spec, grounding, t, raw, history, by="model")
                parsed = parse_markers(annotated)
                take = [m for m in parsed.markers if m.kind == "take-turn"]
                user_line = (
                    annotated[: annotated.rfind("<take-turn:")].strip() if take else annotated
                )
                lines.append(("user", user_line))
                cut = next(m for m in parse_markers(user_line).markers if m.kind in CUT_IN_KINDS)
                if cut.kind == "interrupt":
                    up = parse_markers(user_line)
                    history += [
                        f"USER: {up.text_before(cut)}",
                        f"ASSISTANT (cutting in): {cut.content}",
                        f"USER (going on): {up.text_after(cut)}",
                    ]
                else:
                    history.append(_history_user(user_line))
                nxt = turns[i + 1] if i + 1 < len(turns) else None
                if take and nxt is not None and nxt.speaker == "model":
                    lines.append(("model", take[0].content))
                    history.append(f"ASSISTANT: {take[0].content}")
                    i += 2
                    continue
                i += 1
                continue
            if t.speaker == "model" and t.cut_in:
                raw = self._speak(client, spec, grounding, t, n, history)
                annotated = self._annotate(client, spec, grounding, t, raw, history, by="user")
                parsed = parse_markers(annotated)
                m = next(m for m in parsed.markers if m.kind in CUT_IN_KINDS)
                if m.kind == "interrupt":
                    annotated = annotated[
                        : annotated.index(">", annotated.index("<interrupt:")) + 1
                    ]
                    history.append(f"ASSISTANT (cut off): {parsed.text_before(m)}")
                    history.append(f"USER (cutting in): {m.content}")
                else:
                    history.append(f"ASSISTANT: {parsed.text_before(m)}")
                    history.append(f"USER (short listener signal): {m.content}")
                    history.append(f"ASSISTANT (going on): {parsed.text_after(m)}")
                lines.append(("model", annotated))
                i += 1
                continue
            text = self._speak(client, spec, grounding, t, n, history)
            lines.append((t.speaker, text))
            history.append(_history_user(text) if t.speaker == "user" else f"ASSISTANT: {text}")
            i += 1
        return lines

    def _speak(self, client, spec, grounding, t: TurnSpec, n: int, history: list[str]) -> str:
        prompt = speak_prompt(spec, grounding, t, n, history)
        return self._ask(client, SYSTEM_TURN, prompt, "content", lambda c: _check_speech(c, t))

    def _annotate(
        self, client, spec, grounding, t: TurnSpec, raw: str, history: list[str], by: str
    ) -> str:
        prompt = annotate_prompt(spec, grounding, t, raw, history, by)
        return self._ask(
            client, SYSTEM_TURN, prompt, "content", lambda c: _check_annotation(c, raw, t, by, spec)
        )


_accepts_attempt: dict[type, bool] = {}


def _complete(client: Any, system: str, prompt: str, attempt: int):
    kind = type(client)
    if kind not in _accepts_attempt:
        try:
            _accepts_attempt[kind] = "attempt" in inspect.signature(client.complete).parameters
        except (TypeError, ValueError):
            _accepts_attempt[kind] = False
    if _accepts_attempt[kind]:
        return client.complete(system, prompt, attempt=attempt)
    return client.complete(system, prompt)


def _history_user(text: str) -> str:
    try:
        return f"USER: {parse_markers(text).text}"
    except MarkerError:
        return f"USER: {text}"


# ------------------------------------------------------------------------------------------------
# Parsing and checks


def parse_answer(text: str, key: str) -> tuple[str | None, str]:
    """(value of `key` in the JSON object in `text`, '') or (None, what was wrong)."""
    t = text.strip()
    t = re.sub(r"^```(?:json)?\s*|\s*```$", "", t)
    start, end = t.find("{"), t.rfind("}")
    if start < 0 or end <= start:
        return None, "no JSON object in the answer"
    try:
        obj = json.loads(t[start : end + 1])
    except json.JSONDecodeError as e:
        return None, f"invalid JSON ({e.msg})"
    if not isinstance(obj, dict) or not isinstance(obj.get(key), str) or not obj[key].strip():
        return None, f"the JSON object needs a non-empty string field {key!r}"
    return " ".join(obj[key].split()), ""


def _words_norm(words) -> list[str]:
    return [
        re.sub(r"[^a-z0-9']", "", w.lower()) for w in words if re.sub(r"[^a-z0-9']", "", w.lower())
    ]


def _check_grounding(g: str, persona: Persona) -> str | None:
    if "<" in g or ">" in g:
        return "no markup in the sentence"
    if len(re.findall(r"[.!?](\s|$)", g)) > 1:
        return "exactly one sentence"
    if len(g.split()) > 60:
        return "at most sixty words"
    if persona.first_name.lower() not in g.lower():
        return f"use the person's name ({persona.first_name})"
    return None


def _check_speech(content: str, t: TurnSpec) -> str | None:
    try:
        parsed = parse_markers(content)
    except MarkerError as e:
        return f"bad marker: {e}"
    if parsed.markers:
        return "no markers other than <pause: S> in this turn"
    if parsed.has_pauses and not t.pauses:
        return "no <pause:> markers in this turn"
    if t.pauses and not parsed.has_pauses:
        return "mark at least one silent pause as <pause: SECONDS>"
    problem = spoken_text_problem(parsed.text)
    if problem:
        return problem
    limit = MAX_USER_WORDS if t.speaker == "user" else MAX_MODEL_WORDS
    if len(parsed.words) > limit:
        return f"at most {limit} words"
    return None


def _check_annotation(
    content: str, raw: str, t: TurnSpec, by: str, spec: ScenarioSpec
) -> str | None:
    try:
        parsed = parse_markers(content)
        original = parse_markers(raw)
    except MarkerError as e:
        return f"bad marker: {e}"
    kind = t.cut_in
    cut = [m for m in parsed.markers if m.kind in CUT_IN_KINDS]
    take = [m for m in parsed.markers if m.kind == "take-turn"]
    if not cut or any(m.kind != kind for m in cut):
        return f"insert <{kind}: ...> (and no other cut-in marker)"
    if len(cut) > (3 if (by == "model" and kind == "backchannel") else 1):
        return f"too many <{kind}:> markers"
    if take and not (by == "model" and kind == "backchannel"):
        return "no <take-turn:> marker here"
    if by == "model" and kind == "backchannel" and not take:
        return "end with <take-turn: YOUR REPLY>"
    if _words_norm(parsed.words) != _words_norm(original.words):
        return "copy the original words exactly, only inserting markers"
    pauses = [(s.word_index, s.seconds) for s in parsed.segments if isinstance(s, Pause)]
    if pauses != [(s.word_index, s.seconds) for s in original.segments if isinstance(s, Pause)]:
        return "keep every <pause:> marker exactly where it was"
    for m in cut:
        inner = parse_markers(m.content)
        if inner.markers or inner.has_pauses:
            return "no markers inside a marker"
        problem = spoken_text_problem(inner.text)
        if problem:
            return f"marker content: {problem}"
        limit = 3 if kind == "backchannel" else (MAX_BARGE_IN_WORDS if by == "user" else 20)
        if len(inner.words) > limit:
            return f"the {kind} content must be at most {limit} words"
        if m.word_index == 0 or m.word_index >= len(parsed.words):
            return f"the <{kind}:> marker must come in the middle, with speech before and after it"
        if by == "user" and kind == "interrupt" and m.word_index < 5:
            return "let the assistant say at least one full sentence before cutting in"
    for m in take:
        problem = spoken_text_problem(parse_markers(m.content).text)
        if problem:
            return f"take-turn reply: {problem}"
    return None


# ------------------------------------------------------------------------------------------------
# Prompts


def _scenario_section(spec: ScenarioSpec, grounding: str) -> str:
    return (
        f"{grounding}\n{spec.description}\nOnly what appears in [HISTORY] has happened so far. Do not act on, "
        f"mention or hint at anything the scenario says may happen later."
    )


def _history(history: list[str]) -> str:
    return "\n".join(history) if history else "(nothing yet: this is the first turn)"


def condense_prompt(spec: ScenarioSpec, persona: Persona) -> str:
    return f"""[TASK]
Write ONE sentence that sets up the scenario below for the person described, using their first \
name and exactly one other concrete detail of theirs (job, town, hobby, age or situation) that \
suits the scenario.

[RULES]
- One broad sentence that leaves the details of the conversation open.
- Do not list several traits, do not invent anything that is not given, and give no instructions about behaviour.
- No digits: write numbers as words.

[EXAMPLE]
Scenario: the user wants help planning a weekly budget.
Persona: Dana Ortiz, in her forties, drives a city bus in Tulsa, collects vinyl records.
Answer: {{"grounding": "Dana, a city bus driver, wants help putting together a weekly budget."}}

[SCENARIO]
{spec.description}

[PERSONA]
{persona.describe()}

[OUTPUT]
{{"grounding": "<one sentence>"}}"""


def speak_prompt(
    spec: ScenarioSpec, grounding: str, t: TurnSpec, n: int, history: list[str]
) -> str:
    role = "USER" if t.speaker == "user" else "ASSISTANT"
    pause_rule = (
        "- Mark each silent pause inside the turn as <pause: SECONDS>, SECONDS between 0.5 and 3 "
        '(for example: "so the code is four one <pause: 1.2> seven nine"). Use at least one, where the '
        "[TURN] section asks for it."
        if t.pauses
        else "- Do not write pauses or any markup in angle brackets."
    )
    first = (
        "\n- This is the first turn: the listener knows nothing yet, so name what you are talking about "
        'instead of saying "it" or "this".'
        if n == 1
        else ""
    )
    return f"""[TASK]
You are the {role} in a spoken conversation. Write what the {role.lower()} says in turn {n}.

[SCENARIO]
{_scenario_section(spec, grounding)}

[RULES]
{_SPOKEN_RULES}
- Length: {t.sentences}. Finish every sentence; never trail off.
{pause_rule}{first}

[TURN {n}]
{t.hint}

[HISTORY]
{_history(history)}

[OUTPUT]
{{"content": "<what the {role.lower()} says>"}}"""


def annotate_prompt(
    spec: ScenarioSpec, grounding: str, t: TurnSpec, raw: str, history: list[str], by: str
) -> str:
    kind = t.cut_in
    if by == "model" and kind == "backchannel":
        task = (
            "You are the ASSISTANT. While the user was speaking (the turn below), you gave a short listener "
            "signal, and once they had finished you replied. Mark both in the user's turn."
        )
        markers = (
            "<backchannel: PHRASE>  your signal, one to three words, where you gave it, in the middle of "
            "the user's speech\n<take-turn: REPLY>     your reply once the user had finished, at the very end"
        )
        place = (
            "- If the turn has <pause: ...> markers, put the backchannel right before the pause it belongs to "
            "and keep the pause.\n- Otherwise put it at a natural boundary in the middle, never at the end.\n"
            f"- The signal: {spec.cut_in_hint}.\n- The reply: {spec.turns[3].hint} One or two sentences."
        )
        example = (
            'Turn: "I was going to repaint the kitchen, um <pause: 1.5> but the landlord said no."\n'
            'Answer: {"content": "I was going to repaint the kitchen, um <backchannel: mm-hmm> <pause: 1.5> '
            "but the landlord said no. <take-turn: Oh, that's a shame. Did they say why?>\"}"
        )
        who = "user"
    elif by == "model":
        task = (
            "You are the ASSISTANT. While the user was speaking (the turn below), you cut in before they had "
            "finished. Mark where, and what you said."
        )
        markers = "<interrupt: WHAT YOU SAY>"
        place = (
            "- Cut in right after the words that give you the reason to, never before them, while the user "
            "still has more to say: there must be user speech after the marker.\n"
            f"- What you say: {spec.cut_in_hint}; at most twenty words, direct, no apology for cutting in."
        )
        example = (
            "Turn: \"So I'll leave the cooked rice out on the counter overnight and take it to work "
            'tomorrow <pause: 0.8> for lunch."\n'
            'Answer: {"content": "So I\'ll leave the cooked rice out on the counter overnight <interrupt: '
            "wait, put it in the fridge, rice left out can make you sick> and take it to work tomorrow "
            '<pause: 0.8> for lunch."}'
        )
        who = "user"
    elif kind == "backchannel":
        task = (
            "You are the USER. While the assistant was answering (the turn below), you made a short sound or "
            "remark without trying to take over. Mark where, and what you said."
        )
        markers = "<backchannel: PHRASE>  one to three words"
        place = (
            "- Put it after the assistant's first sentence or at another point where it fits; the "
            "assistant's words after it go on as written.\n"
            f"- What you say: {spec.cut_in_hint}."
        )
        example = (
            'Turn: "The quickest fix is to restart the router. If that doesn\'t help, call your provider."\n'
            'Answer: {"content": "The quickest fix is to restart the router. <backchannel: okay> If that '
            "doesn't help, call your provider.\"}"
        )
        who = "assistant"
    else:
        task = (
            "You are the USER. While the assistant was answering (the turn below), you cut in. Mark where, and "
            "what you said."
        )
        markers = "<interrupt: WHAT YOU SAY>"
        place = (
            "- Cut in after at least one full sentence of the answer, in the middle: there must be "
            "assistant speech after the marker.\n"
            f"- What you say: {spec.cut_in_hint}; at most twenty words, in your own casual voice."
        )
        example = (
            "Turn: \"You could take the train, which is about two hours. Or there's a bus that's cheaper "
            'but slower."\n'
            'Answer: {"content": "You could take the train, which is about two hours. <interrupt: oh, I '
            "should say I get carsick on buses> Or there's a bus that's cheaper but slower.\"}"
        )
        who = "assistant"
    return f"""[TASK]
{task}

[SCENARIO]
{_scenario_section(spec, grounding)}

[MARKERS]
{markers}

[PLACEMENT]
{place}
- Copy the {who}'s words and any <pause: ...> markers exactly; only insert markers.

[EXAMPLE]
{example}

[RULES]
{_SPOKEN_RULES}

[HISTORY]
{_history(history)}

[TURN TO ANNOTATE]
{raw}

[OUTPUT]
{{"content": "<the {who}'s turn with the marker(s) inserted>"}}"""


# ------------------------------------------------------------------------------------------------
# Building the backend from config


def make_llm_backend(settings: dict, cache_dir: Path) -> LLMTextBackend:
    """An LLMTextBackend over fdeval.llm.client.LLMClient with the pinned `settings`
    (backend, model, temperature, top_p, max_tokens, seed, base_url, max_attempts, concurrency)."""

    def factory(seed: int):
        return LLMClient(
            model=settings["model"],
            temperature=settings.get("temperature"),
            max_tokens=int(settings.get("max_tokens", 1024)),
            cache_dir=cache_dir,
            seed=seed,
            base_url=settings.get("base_url"),
            backend=settings.get("backend") or "anthropic",
            top_p=settings.get("top_p"),
        )

    return LLMTextBackend(
        factory,
        settings,
        max_attempts=int(settings.get("max_attempts", 3)),
        concurrency=int(settings.get("concurrency", 1)),
    )
