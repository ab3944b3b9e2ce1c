"""An LLM judge of instruction adherence, structured like the Instruct-FD judge (paper 2.4, A.11).

The model is reached through :class:`fdeval.llm.LLMClient`: the Anthropic Messages API
(``backend: anthropic``, the default) or any OpenAI-compatible chat-completions server
(``backend: openai | vllm | sglang``, e.g. a vLLM server the user runs on their own GPUs).

For each (case, instruction) pair the model reads three inputs: the instruction text, the session
transcript as time-stamped overlap-marked lines (:func:`fdeval.transcript.render.render`) and the
expected turn-taking reference under that instruction
(:func:`fdeval.benchmarks.instructfd.reference.render_reference`). The system prompt (:data:`SYSTEM_PROMPT`,
written for fdeval) explains the transcript conventions, defines the turn-taking events, gives the
classification criteria with the paper's thresholds, prescribes five steps (degenerate checks; the
instruction as rules; an event timeline; each rule checked; a verdict) and asks for one JSON object
``{"reasoning": ..., "adherence": "yes" | "no"}``, reasoning first.

Decisions:

* ``adherence`` ``yes`` -> ``adhere``, ``no`` -> ``not_adhere``.
* An answer that cannot be read (no JSON object, no ``adherence`` yes/no) is asked again, up to
  ``max_parse_retries`` times, each re-ask under its own cache entry and with a reminder of the
  format; if none can be read the verdict is ``error`` with the reason, never ``not_adhere``.
* A request that fails after the client's retries (rate limits, server errors, timeouts, a
  rejected request) gives an ``error`` verdict with the reason. Failures that concern every
  request alike (no key, no SDK, credentials rejected, unknown model: :class:`LLMConfigError`)
  are raised, so that a run stops instead of writing an error verdict for every case.
* An endpoint that cannot be reached raises :class:`JudgeUnavailable` (one line naming the
  endpoint, the last error and the pair it was judging): after ``max_unreachable`` (default 3)
  consecutive attempts with no HTTP answer (refused, reset, unknown host, timeout; a closed port
  is found in about 1.5-3 s with the default backoff) or ``max_failed_requests`` (default 3)
  consecutive requests that failed after their retries (429, 5xx, non-API bodies). The pair
  being judged gets no verdict; verdicts already written stay. Retries of one request end
  ``max_retry_s`` (default 60 s) after its first failure (:mod:`fdeval.llm.client`).
* Pairs that cannot be judged at all (a transcript of another case, a policy the case is not
  judged against, no instruction text) are ``error`` verdicts without a request.

``prompt_hash`` hashes the prompt templates, the model, the temperature, the endpoint and
:data:`LLM_JUDGE_VERSION` (and the protocol and ``top_p`` when not the Anthropic default / null,
so that existing Anthropic hashes stay as they were); every verdict carries it. The judge id is
``llm:<model>``, and ``llm:<model>@<endpoint>`` on the OpenAI protocol, where one model name is
served by many machines. :meth:`LLMJudge.identity` is everything that
can change a verdict (for the run identity). Answers are cached by :class:`fdeval.llm.LLMClient`
under a key that includes the endpoint, so a rerun costs nothing and gives the same verdicts, and
answers of one endpoint are never reused for another. The endpoint is ``base_url``, else
``$ANTHROPIC_BASE_URL``, else the SDK default (OpenAI protocol: else the backend's default URL,
:data:`fdeval.llm.client.OPENAI_DEFAULT_URLS`); a plain-http endpoint that is not loopback is
refused at construction (the key would travel in clear). Construction checks every setting and
does no I/O; :meth:`LLMJudge.check_ready` checks the key and SDK. ``docs/llm-judge.md`` has the
details.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from typing import Any

from fdeval.benchmarks.instructfd.judges.base import Judge
from fdeval.benchmarks.instructfd.records import Verdict
from fdeval.benchmarks.instructfd.reference import render_reference
from fdeval.llm.client import LLMClient, LLMConfigError, LLMError, LLMResponse, LLMUnavailable
from fdeval.transcript.render import render
from fdeval.types import TestCase, Transcript

# Bump when the prompt templates, the inputs given to them or the reading of answers change.
LLM_JUDGE_VERSION = "1"
DEFAULT_MODEL = "claude-sonnet-4-6"
DEFAULT_CACHE_DIR = "outputs/_cache/llm_judge"

SYSTEM_PROMPT = """\
You are the judge in an evaluation of full-duplex voice assistants: systems that can listen and \
speak at the same time. Decide whether the assistant, called MODEL, followed a turn-taking \
instruction during one spoken conversation with a USER.

# Your inputs
1. The instruction the MODEL had to follow. (A session recorded without any instruction is \
measured against this instruction all the same.)
2. The session transcript: what both speakers said, placed on one clock, with start and end \
times in seconds.
3. An expected turn-taking reference: the scripted conversation, showing where the MODEL was \
meant to speak and where it was meant to stay quiet.

# Reading the transcript
- Every line reads `[start-end] SPEAKER: words`, times in seconds, lines in time order.
- Expect little or no punctuation: the words come from speech timings or speech recognition. \
Work out where sentences end from the words themselves. A tag such as "right", "you know" or \
"okay" at the end of a clause usually asks the listener for a reaction.
- `[Overlap]` marks words spoken while the other speaker was speaking too; each speaker's \
overlapping words sit on their own line with their own times. Overlap of more than four words \
counts as an interruption; the exception is overlap with the close of the USER's speech, which \
can be an early take-turn depending on the context.
- `(cont.)` marks a line that continues the line before it by that speaker without a real pause; \
it was split off only because the other speaker said something or an overlap began or ended. \
Read a line together with the (cont.) lines that follow it as a single speech act.

# Reading the reference
- One line per scripted contribution, in order, `USER: ...` or `MODEL: ...`.
- A bracketed tag tells how a line relates to the other speaker. `[take-turn]`: the MODEL takes \
the floor after the USER. On a MODEL line, `[backchannel]` or `[interrupt]` marks a point inside \
the USER's speech where the MODEL is expected to cut in with a short listener signal or with an \
interruption. On a USER line, `[backchannel]` or `[interrupt]` means the USER cuts into the \
MODEL's speech with a listener signal or with a real interruption.
- USER lines give each USER turn complete, as it sounds when nobody cuts it short. The MODEL \
lines show the expected pattern, not a script: the MODEL's words need not match them.

# Terms
- Interruption: one speaker takes the word while the other is still in the middle of a \
thought. The two need not speak at the same moment: a speaker who breaks off mid-sentence \
because the other began has been interrupted, with or without overlapping words. When the first \
speaker was clearly wrapping up, the second one starting is just a change of turn.
- Backchannel: a short listener signal of fewer than four words, such as "mm-hmm", "yeah", \
"right", "I see" or "oh wow", given while the other person is still speaking, without taking the \
floor. It belongs inside the other's speech; said afterwards, it is no backchannel. Once the \
signal grows into a full reply, it counts as an early take-turn instead.
- Listen: the MODEL says nothing at all during the USER's speech; a backchannel breaks it just as \
an interruption does.
- Yield: the USER cuts into the MODEL's speech and the MODEL falls silent, handing the floor over.
- Continue: the USER cuts in (for instance with a listener signal) and the MODEL carries on \
speaking, pausing no more than about one second.
- Adapt: what the MODEL says after a USER interruption shows that it took the interruption in, \
for example by acknowledging it, answering from a new angle, using simpler words or going a \
different way. Returning to what it had planned to say anyway does not count.

# Criteria for classifying events
- Yield: allow the MODEL up to 2 seconds to react. If it is still speaking over the USER more \
than 2 seconds after the USER cut in, it did not yield.
- Continue: after a USER backchannel the MODEL may fall silent for under 2 seconds. A gap over 2 \
seconds means it gave up the floor, and that stays true if it later picks up the same content \
again. Do not relax this 2-second bound. Keeping the sound going is not enough either: the MODEL \
has to bring to an end the point it was making when the signal came. Speech after the signal \
that breaks off, trails away or ends mid-sentence fails. Take the transcript as complete: a lone \
word or a fragment after the signal is no continuation.
- Adapt: the MODEL may pause after the USER interrupts; what matters is that its next reply takes \
up what the USER said. That requires substance: if the MODEL goes quiet, or stops short after \
the cut-in, it has not adapted.
- Interruption, judged on two aspects.
  - Timing. Each time you decide whether a MODEL utterance is an interruption (under every \
instruction, not only the interrupt instruction), proceed like this:
    1. Find the USER turn concerned in the transcript.
    2. Look that turn up in the reference, where it appears complete.
    3. Compare the two: how much of the complete USER turn had been said when the MODEL began?
    4. If meaningful words of the reference turn were still unsaid, the MODEL interrupted. No \
overlap in the times does not change this: when the USER falls silent before the end of the \
reference turn, that silence is the trace of the MODEL having cut in. When at most the final 3 \
words of the reference turn were left unsaid (or none), the MODEL did not interrupt: count it as \
a regular change of turn or an early take-turn.
    Overlap times on their own never settle the question; the comparison with the reference does.
  - Content. An interruption has to carry a point that the instruction calls for; cutting in \
with filler or with something unrelated fails.
- Backchannel, judged on two aspects.
  - Timing. The reference's [backchannel] points are examples of good moments, not the only \
ones: a backchannel anywhere in the USER's turn that fits the instruction is fine. If the \
instruction ties backchannels to a specific cue, the backchannel has to land near that cue; \
landing just beside it (say, one clause boundary away) still counts as correct.
  - Content. Three words at most; four or more make it an interruption. Check the MODEL's \
neighbouring speech too: a short signal that is really the tail of an earlier MODEL utterance or \
the opening of the next is one speech act with it, which can stop it from being a backchannel.
- Listen: any MODEL speech inside the USER's utterance, overlapping or cutting in, breaks the \
instruction, with one allowance: starting to answer over no more than the USER's last 5 words is \
an early take-turn, which is neither a backchannel nor an interruption, and is allowed.

# Procedure: take these steps in this order
Step 1. Degenerate cases. A failed check ends the evaluation with "no".
  1a. There must be MODEL speech in the transcript; a transcript without a single MODEL word \
gets "no".
  1b. Each USER turn except a USER backchannel must get an answer from the MODEL; one unanswered \
turn means "no". There is no exception to this. Do not excuse a missing answer as the MODEL \
"listening" or "waiting": being told to listen means keeping quiet while the USER talks, and the \
answer is still due once the USER has finished.
Step 2. Turn the instruction into rules. Write a numbered list of the rules the instruction sets \
and label each one PRESCRIPTIVE (the MODEL must do something), PROHIBITIVE (the MODEL must not do \
something) or CONDITIONAL (when a given trigger happens, the MODEL must respond with a given \
action). For each conditional rule name the trigger and the required action.
Step 3. Build the event timeline. Go through the transcript in time order and label each USER and \
MODEL utterance with the criteria above as a new turn, a continuation (cont.), an interruption, a \
backchannel or an early take-turn, always taking the neighbouring utterances into account.
Step 4. Check every rule from Step 2 against the timeline. For a conditional rule: did the trigger \
happen, and if so, did the MODEL then act as the rule demands? Proactive actions (those due while \
the USER is still speaking) are judged on timing first: something said only after the USER's turn \
is over cannot be a backchannel or an interruption, however fitting its words.
Step 5. Verdict. State whether the MODEL adhered to the instruction, in agreement with what Steps 3 \
and 4 found.

# Answer format
Answer with a single JSON object and nothing else, "reasoning" first and "adherence" second:
{"reasoning": "<your analysis, Step 1 to Step 5>", "adherence": "yes"}
"adherence" is "yes" when the MODEL followed the instruction and "no" when it did not.
"""

USER_TEMPLATE = """\
=== Instruction the MODEL had to follow ===
{instruction}

=== Session transcript ===
{transcript}

=== Expected turn-taking reference ===
{reference}

Did the MODEL follow the instruction above? Answer with the JSON object only."""

RETRY_REMINDER = """

Note: an earlier answer to this request could not be read. Reply with exactly one JSON object of \
the form {"reasoning": "...", "adherence": "yes"} or {"reasoning": "...", "adherence": "no"}, \
with no text before or after it."""

EMPTY_TRANSCRIPT = "(the transcript holds no words: neither speaker said anything)"
EMPTY_REFERENCE = "(no reference is available for this case)"


class JudgeUnavailable(LLMUnavailable):
    """The judge's endpoint cannot be reached: the run stops with this one line (exit 2)."""


class UnreadableAnswer(ValueError):
    """The model's answer holds no usable {"reasoning", "adherence"} object."""


_FENCE = re.compile(r"```(?:json|JSON)?\s*(.*?)```", re.S)
_ADHERENCE = re.compile(r'"adherence"\s*:\s*"\s*(yes|no)\s*"', re.I)
_REASONING = re.compile(r'"reasoning"\s*:\s*"(.*)"\s*,\s*"adherence"', re.S)


def _label(value: Any) -> str:
    if isinstance(value, str) and value.strip().lower() in ("yes", "no"):
        return value.strip().lower()
    raise UnreadableAnswer(f'"adherence" must be "yes" or "no", got {json.dumps(value)[:40]}')


def parse_answer(text: str) -> tuple[str, str]:
    """``(reasoning, "yes" | "no")`` from a model answer; raises :class:`UnreadableAnswer`.

    Tolerated: code fences, text around the object, raw line breaks inside strings, a missing
    reasoning (becomes ""). As a last resort, a malformed object (e.g. unescaped quotes in the
    reasoning) is read by pattern. An answer that names both "yes" and "no" as adherence is
    unreadable.
    """
    if not isinstance(text, str) or not text.strip():
        raise UnreadableAnswer("the answer is empty")
    found = {m.group(1).lower() for m in _ADHERENCE.finditer(text)}
    if len(found) > 1:
        raise UnreadableAnswer('the answer gives both "yes" and "no" as adherence')
    candidates = [m.group(1) for m in _FENCE.finditer(text)] + [text]
    decoder = json.JSONDecoder(strict=False)
    last_problem = "no JSON object in the answer"
    for chunk in candidates:
        for m in re.finditer(r"\{", chunk):
            try:
                obj, _ = decoder.raw_decode(chunk, m.start())
            except json.JSONDecodeError:
                continue
            if not isinstance(obj, dict) or "adherence" not in obj:
                continue
            try:
                label = _label(obj["adherence"])
            except UnreadableAnswer as e:
                last_problem = str(e)
                continue
            reasoning = obj.get("reasoning", "")
            return (
                reasoning
                if isinstance(reasoning, str)
                else json.dumps(reasoning, ensure_ascii=False)
            ), label
    if len(found) == 1:
        r = _REASONING.search(text)
        return (r.group(1).strip() if r else ""), found.pop()
    raise UnreadableAnswer(last_problem)


def prompt_hash_of(
    model: str,
    temperature: float | None,
    endpoint: str,
    protocol: str = "anthropic",
    top_p: float | None = None,
) -> str:
    """The hash of the judge's prompt templates, model, temperature, endpoint and version (plus the
    protocol and top_p where they are not the Anthropic default / null)."""
    fields: dict[str, Any] = {
        "version": LLM_JUDGE_VERSION,
        "model": model,
        "endpoint": endpoint,
        "temperature": None if temperature is None else float(temperature),
        "system": SYSTEM_PROMPT,
        "user": USER_TEMPLATE,
        "retry": RETRY_REMINDER,
    }
    if protocol != "anthropic":
        fields["protocol"] = protocol
    if top_p is not None:
        fields["top_p"] = float(top_p)
    blob = json.dumps(fields, sort_keys=True)
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()[:16]


def instruction_text(case: TestCase, policy: str) -> str | None:
    """The instruction `case` is judged against under `policy`: its own system instruction, or
    (an un-instructed baseline) the sibling instruction in ``case.judge_instructions``."""
    text = case.data.judge_instructions.get(policy)
    if not text and policy == case.data.policy_name:
        text = case.system_instruction
    return text.strip() if isinstance(text, str) and text.strip() else None


def build_prompt(instruction: str, transcript_text: str, reference_text: str) -> str:
    """The user message: the three inputs in the template."""
    return USER_TEMPLATE.format(
        instruction=instruction,
        transcript=transcript_text.strip() or EMPTY_TRANSCRIPT,
        reference=reference_text.strip() or EMPTY_REFERENCE,
    )


class LLMJudge(Judge):
    """Instruction adherence decided by a hosted LLM (see the module docstring)."""

    version = LLM_JUDGE_VERSION

    def __init__(
        self,
        model: str = DEFAULT_MODEL,
        temperature: float | None = 0.0,
        max_tokens: int = 4096,
        cache_dir: str | os.PathLike = DEFAULT_CACHE_DIR,
        base_url: str | None = None,
        max_parse_retries: int = 2,
        max_retries: int = 5,
        timeout_s: float = 120.0,
        seed: int | None = None,
        backoff_s: float = 1.0,
        max_backoff_s: float = 30.0,
        max_retry_s: float = 60.0,
        max_unreachable: int = 3,
        max_failed_requests: int = 3,
        backend: str = "anthropic",
        top_p: float | None = None,
    ):
        # Checks every setting (as judge.<field>) and does no I/O, so a run can build the judge first.
        n = max_parse_retries
        if isinstance(n, bool) or not isinstance(n, int) or not 0 <= n <= 20:
            raise LLMConfigError(
                f"judge.max_parse_retries: must be an integer in [0, 20], got {max_parse_retries!r}"
            )
        self.client = LLMClient(
            model,
            temperature,
            max_tokens,
            cache_dir,
            seed=seed,
            base_url=base_url,
            max_retries=max_retries,
            timeout_s=timeout_s,
            backoff_s=backoff_s,
            max_backoff_s=max_backoff_s,
            max_retry_s=max_retry_s,
            max_unreachable=max_unreachable,
            max_failed_requests=max_failed_requests,
            name="judge",
            backend=backend,
            top_p=top_p,
        )
        self.model = model
        self.temperature = self.client.temperature
        self.max_parse_retries = max_parse_retries
        c = self.client
        self.id = f"llm:{model}" if c.protocol == "anthropic" else f"llm:{model}@{c.endpoint}"
        self._prompt_hash = prompt_hash_of(model, self.temperature, c.endpoint, c.protocol, c.top_p)

    @property
    def prompt_hash(self) -> str:
        return self._prompt_hash

    @property
    def endpoint(self) -> str:
        """The resolved API URL (``base_url``, else ``$ANTHROPIC_BASE_URL`` / the backend's default)."""
        return self.client.endpoint

    def identity(self) -> dict[str, Any]:
        """Everything that can change a verdict, JSON-ready, for the run identity. Leaves out what
        only changes whether a request succeeds (timeouts, retries, cache folder)."""
        c = self.client
        return {
            "judge": self.id,
            "judge_version": self.version,
            "prompt_hash": self.prompt_hash,
            "backend": c.protocol,
            "model": c.model,
            "temperature": c.temperature,
            "top_p": c.top_p,
            "max_tokens": c.max_tokens,
            "seed": c.seed,
            "endpoint": c.endpoint,
            "max_parse_retries": self.max_parse_retries,
        }

    def check_ready(self) -> None:
        """Raise :class:`LLMConfigError` if an uncached request could not go out (no key in the
        environment -- none needed for an OpenAI-protocol loopback server --, no SDK). No network
        I/O; call it before work that ends in judging."""
        self.client.check_ready()

    def prompt_for(self, case: TestCase, policy: str, transcript: Transcript) -> tuple[str, str]:
        """``(system, user)`` messages for one pair; raises ValueError when there is no instruction."""
        instruction = instruction_text(case, policy)
        if instruction is None:
            raise ValueError(f"case {case.case_id!r} has no instruction text for {policy!r}")
        return SYSTEM_PROMPT, build_prompt(
            instruction, render(transcript), render_reference(case, policy)
        )

    def judge(self, case: TestCase, policy: str, transcript: Transcript) -> Verdict:
        cid = case.case_id
        if transcript.case_id != cid:
            return self.verdict(
                cid,
                policy,
                "error",
                f"Not judged: the transcript belongs to case {transcript.case_id!r}, not {cid!r}",
            )
        if policy not in case.data.judge_policies:
            return self.verdict(
                cid,
                policy,
                "error",
                f"Not judged: case {cid!r} is not judged against {policy!r} "
                f"(its judge policies: {', '.join(case.data.judge_policies) or 'none'})",
            )
        try:
            system, prompt = self.prompt_for(case, policy, transcript)
        except ValueError as e:
            return self.verdict(cid, policy, "error", f"Not judged: {e}")
        head = f"LLM judge {self.id} (v{self.version}, prompt {self.prompt_hash})"
        problems: list[str] = []
        answers: list[str] = []  # the cache keys of the unreadable answers
        resp: LLMResponse | None = None
        for attempt in range(self.max_parse_retries + 1):
            ask = prompt if attempt == 0 else prompt + RETRY_REMINDER
            try:
                resp = self.client.complete(system, ask, attempt=attempt)
            except LLMUnavailable as e:
                raise JudgeUnavailable(
                    f"judge {self.id}", e.endpoint, e.reason, f"judging {cid}@{policy}"
                ) from None
            except LLMConfigError:
                raise
            except LLMError as e:
                return self.verdict(
                    cid, policy, "error", f"Not judged: {head}: the request failed: {e}"
                )
            try:
                reasoning, label = parse_answer(resp.text)
            except UnreadableAnswer as e:
                cut = " (the answer hit max_tokens)" if resp.stop_reason == "max_tokens" else ""
                problems.append(f"answer {attempt + 1}: {e}{cut}")
                answers.append(resp.prompt_hash[:16])
                continue
            verdict = "adhere" if label == "yes" else "not_adhere"
            return self.verdict(
                cid,
                policy,
                verdict,
                f"{head}, answer {resp.prompt_hash[:16]}: adherence {label}.\n{reasoning.strip()}",
            )
        start = (resp.text if resp else "").strip().replace("\n", " ")[:160]
        return self.verdict(
            cid,
            policy,
            "error",
            f"Not judged: {head}: no readable answer after {self.max_parse_retries + 1} attempt(s): "
            f"{'; '.join(problems)}. Last answer began: {start!r}. The answers are cached "
            f"({', '.join(answers)}): a relaunch reads them again; delete those files under "
            f"judge.cache_dir to ask anew",
        )
