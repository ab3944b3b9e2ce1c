"""EchoChain's failure classifier (paper §4.3, A.4): one verdict per exchange, from text.

The input is the segmented exchange (:class:`Exchange`): the user's message, what the assistant
said before the barge-in, the barge-in, and the continuation from the barge-in on, plus the earlier
exchanges as context. The output is the A.4 answer format, ten named fields, read by a strict
parser (:func:`parse_output`); :func:`format_output` writes it. Every answer, offline or LLM, goes
through the parser, so both backends produce the same records.

Decisions (docs/echochain.md, "Failure classifier", has the reasons):

* The classifier is asked to grade strictly: ``FAILURE_DETECTED: YES`` whenever any fail criterion
  holds, with memory and integration graded on their own. Whether the exchange is *flagged* is then
  computed from the fields by :func:`decide` under a configured rule: ``paper`` (default, A.4's
  "Decision Rule": memory NO or integration NONE) or ``strict`` (A.4's "any violation": any fail
  code, memory NO or integration other than GOOD). The prompt does not depend on the rule, so the
  same cached answers serve both.
* ``votes`` (k) samples per exchange, each its own cached request (per-sample client seed); the
  flag is the majority of the parsed samples, a tie flags (A.4: better to flag than to miss).
* An answer the parser rejects is asked again, up to ``max_parse_retries`` times, with the parse
  error quoted; a sample that never parses, or whose request fails after the client's retries, is
  an entry in ``errors``. When no sample parses the verdict's status is ``error``: a classifier
  error, never a model failure. ``LLMConfigError`` / ``LLMUnavailable`` propagate (the run stops).
* The offline classifier (:class:`OfflineClassifier`) is a deterministic word check against the
  seed's script for the exchange; it writes an A.4 answer and parses it back. Its k samples are
  identical, so its votes are unanimous.
"""

from __future__ import annotations

import abc
import dataclasses
import re
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

from fdeval.benchmarks.echochain.roles import (MAX_ATTEMPTS_LIMIT, REASK_NOTE, ROLE_KEYS, ask_valid, check_role,
                                               prompt_hash, role_client, role_identity)
from fdeval.benchmarks.echochain.seeds import ExchangeScript, Seed, mentions
from fdeval.benchmarks.echochain.taxonomy import CONFIDENCE, DSR, FAILURE_TYPES, INTEGRATION
from fdeval.errors import ConfigError

# Bump when the prompt templates, the inputs given to them or the reading of answers change.
CLASSIFIER_VERSION = "1"
DECISION_RULES = ("paper", "strict")


# ------------------------------------------------------------------------------------------------
# Records
@dataclass(frozen=True)
class Exchange:
    """One exchange as the classifier and the graders see it (texts are transcripts)."""

    case_id: str
    index: int  # 1-based exchange number (= "turn" in the classifier's output)
    message: str  # the user's message
    answer_before: str  # assistant text from the message's start to the barge-in's start ("" if none)
    barge_in: str | None  # the barge-in text (None: the exchange was not interrupted)
    barge_in_label: str | None
    continuation: str  # assistant text from the barge-in on (uninterrupted: the whole answer)

    @property
    def interrupted(self) -> bool:
        return self.barge_in is not None


@dataclass(frozen=True)
class ClassifierOutput:
    """One parsed classifier answer (the ten A.4 fields)."""

    failure: bool  # FAILURE_DETECTED
    failure_turn: int | None  # exchange number; None when no failure
    failure_type: str | None  # a key of taxonomy.FAILURE_TYPES; None when no failure
    evidence_injection: str
    said_before: str
    said_after: str
    memory_demonstrated: bool
    integration: str  # GOOD | PARTIAL | NONE
    reason: str
    confidence: str  # HIGH | MEDIUM | LOW


class ClassifierParseError(ValueError):
    """An answer that is not in the A.4 format; the message names the field."""

    def __init__(self, field: str, why: str):
        self.field = field
        super().__init__(f"{field}: {why}")


# ------------------------------------------------------------------------------------------------
# The answer format
FIELDS = ("FAILURE_DETECTED", "FAILURE_TURN", "FAILURE_TYPE", "EVIDENCE_INJECTION", "WHAT_ASSISTANT_SAID_BEFORE",
          "ASSISTANT_RESPONSE_AFTER", "MEMORY_DEMONSTRATED", "INTEGRATION_QUALITY", "REASON", "CONFIDENCE")
_FREE_TEXT = frozenset({"EVIDENCE_INJECTION", "WHAT_ASSISTANT_SAID_BEFORE", "ASSISTANT_RESPONSE_AFTER", "REASON"})
_NOT_APPLICABLE = frozenset({"", "N/A", "NONE"})  # FAILURE_TURN / FAILURE_TYPE when NO (compared upper-cased)
_FIELD_LINE = re.compile(r"^[ \t]*(" + "|".join(FIELDS) + r")[ \t]*:[ \t]*(.*?)[ \t]*$")
_FIRST_LINE = ("FAILURE_DETECTED: YES", "FAILURE_DETECTED: NO")
_TURN = re.compile(r"[0-9]+")


def _yes_no(field: str, value: str) -> bool:
    if value not in ("YES", "NO"):
        raise ClassifierParseError(field, f"must be YES or NO, got {_quote(value)}")
    return value == "YES"


def _choice(field: str, value: str, allowed: tuple[str, ...] | Mapping[str, str]) -> str:
    if value not in allowed:
        raise ClassifierParseError(field, f"must be one of {', '.join(allowed)}, got {_quote(value)}")
    return value


def _quote(value: str, limit: int = 60) -> str:
    value = re.sub(r"\s+", " ", value).strip()
    return repr(value if len(value) <= limit else value[: limit - 3] + "...")


def parse_output(text: str) -> ClassifierOutput:
    """Read one classifier answer; raise :class:`ClassifierParseError` naming the field.

    Strict: after leading blank lines the first line is exactly ``FAILURE_DETECTED: YES`` or
    ``FAILURE_DETECTED: NO`` (nothing before it); each of the ten field names (upper case, no
    markdown) starts a line and appears exactly once, in any order after the first; whitespace
    around names, colons and values is ignored. A line that starts no field continues the field
    before it (quotes and reasons may span lines); an enumerated field takes no continuation.
    Values are case-sensitive: YES/NO, GOOD/PARTIAL/NONE, HIGH/MEDIUM/LOW, a failure code of
    ``taxonomy.FAILURE_TYPES``. When YES, FAILURE_TURN (a positive integer) and FAILURE_TYPE are
    required; when NO both are empty, ``N/A`` or ``NONE``. REASON may not be empty.
    """
    if not isinstance(text, str) or not text.strip():
        raise ClassifierParseError("FAILURE_DETECTED", "the answer is empty")
    lines = text.strip().splitlines()
    if lines[0].strip() not in _FIRST_LINE:
        raise ClassifierParseError("FAILURE_DETECTED", "the first line must be exactly 'FAILURE_DETECTED: YES' or "
                                   f"'FAILURE_DETECTED: NO', got {_quote(lines[0])}")
    values: dict[str, list[str]] = {}
    current = ""
    for line in lines:
        m = _FIELD_LINE.match(line)
        if m:
            current = m.group(1)
            if current in values:
                raise ClassifierParseError(current, "appears more than once")
            values[current] = [m.group(2)]
        else:
            values[current].append(line.rstrip())
    missing = [f for f in FIELDS if f not in values]
    if missing:
        hint = (" (it is named, but not as 'NAME: value' at the start of a line in capitals without markdown)"
                if missing[0].lower() in text.lower() else "")
        also = f" (also missing: {', '.join(missing[1:])})" if len(missing) > 1 else ""
        raise ClassifierParseError(missing[0], "missing" + hint + also)
    value: dict[str, str] = {}
    for name, parts in values.items():
        extra = [p for p in parts[1:] if p.strip()]
        if name not in _FREE_TEXT and extra:
            raise ClassifierParseError(name, f"takes one value on its line; text follows it: {_quote(extra[0])}")
        value[name] = "\n".join(parts).strip()

    failure = _yes_no("FAILURE_DETECTED", value["FAILURE_DETECTED"])
    turn_text, type_text = value["FAILURE_TURN"], value["FAILURE_TYPE"]
    if failure:
        if not _TURN.fullmatch(turn_text) or int(turn_text) < 1:
            raise ClassifierParseError("FAILURE_TURN", f"must be an exchange number >= 1 when FAILURE_DETECTED is "
                                       f"YES, got {_quote(turn_text)}")
        failure_turn: int | None = int(turn_text)
        failure_type: str | None = _choice("FAILURE_TYPE", type_text, FAILURE_TYPES)
    else:
        for name, v in (("FAILURE_TURN", turn_text), ("FAILURE_TYPE", type_text)):
            if v.upper() not in _NOT_APPLICABLE:
                raise ClassifierParseError(name, f"must be empty or N/A when FAILURE_DETECTED is NO, got {_quote(v)}")
        failure_turn = failure_type = None
    if not value["REASON"]:
        raise ClassifierParseError("REASON", "is empty")
    return ClassifierOutput(
        failure=failure, failure_turn=failure_turn, failure_type=failure_type,
        evidence_injection=value["EVIDENCE_INJECTION"], said_before=value["WHAT_ASSISTANT_SAID_BEFORE"],
        said_after=value["ASSISTANT_RESPONSE_AFTER"],
        memory_demonstrated=_yes_no("MEMORY_DEMONSTRATED", value["MEMORY_DEMONSTRATED"]),
        integration=_choice("INTEGRATION_QUALITY", value["INTEGRATION_QUALITY"], INTEGRATION),
        reason=value["REASON"], confidence=_choice("CONFIDENCE", value["CONFIDENCE"], CONFIDENCE))


def format_output(o: ClassifierOutput) -> str:
    """The A.4 text of `o`, which :func:`parse_output` reads back as `o`.

    Raises ValueError for an output that has no such text: invalid values, or a free-text value
    with surrounding whitespace or with a line that would start a field.
    """
    na = "N/A"
    text = "\n".join([
        f"FAILURE_DETECTED: {'YES' if o.failure else 'NO'}",
        f"FAILURE_TURN: {na if o.failure_turn is None else o.failure_turn}",
        f"FAILURE_TYPE: {o.failure_type or na}",
        f"EVIDENCE_INJECTION: {o.evidence_injection}",
        f"WHAT_ASSISTANT_SAID_BEFORE: {o.said_before}",
        f"ASSISTANT_RESPONSE_AFTER: {o.said_after}",
        f"MEMORY_DEMONSTRATED: {'YES' if o.memory_demonstrated else 'NO'}",
        f"INTEGRATION_QUALITY: {o.integration}",
        f"REASON: {o.reason}",
        f"CONFIDENCE: {o.confidence}",
    ])
    try:
        back = parse_output(text)
    except ClassifierParseError as e:
        raise ValueError(f"no A.4 text for this output: {e}") from None
    if back != o:
        diff = [f.name for f in dataclasses.fields(o) if getattr(o, f.name) != getattr(back, f.name)]
        raise ValueError(f"no A.4 text for this output: {', '.join(diff)} would not read back as given")
    return text


# ------------------------------------------------------------------------------------------------
# Decision and vote
def decide(o: ClassifierOutput, rule: str) -> bool:
    """Whether one answer flags the exchange under `rule` (see the module docstring).

    ``paper``: memory NO or integration NONE (the first line is not consulted: A.4's rule is
    stated on these two fields). ``strict``: any fail code (FAILURE_DETECTED YES), memory NO or
    integration other than GOOD. Everything ``paper`` flags, ``strict`` flags too.
    """
    if rule == "paper":
        return (not o.memory_demonstrated) or o.integration == "NONE"
    if rule == "strict":
        return o.failure or (not o.memory_demonstrated) or o.integration != "GOOD"
    raise ValueError(f"unknown decision rule {rule!r}; valid: {', '.join(DECISION_RULES)}")


@dataclass(frozen=True)
class ClassifierVerdict:
    """k samples of one exchange, voted."""

    case_id: str
    exchange: int
    status: str  # ok | error (error: no parsable answer: never a model failure)
    flagged: bool | None  # majority of decide() over the parsed samples, a tie flags; None on error
    votes: tuple[bool, ...]
    samples: tuple[ClassifierOutput, ...]
    failure_type: str | None  # the most common failure_type among flagging samples (None unless flagged)
    rule: str
    k: int  # samples asked for
    errors: tuple[str, ...]  # parse errors met (re-asks), failed requests, samples that never parsed
    classifier: dict  # the classifier's identity

    @property
    def tie(self) -> bool:
        """As many votes to flag as not (flagged by the tie rule)."""
        return bool(self.votes) and 2 * sum(self.votes) == len(self.votes)

    def to_dict(self) -> dict:
        return {"case_id": self.case_id, "exchange": self.exchange, "status": self.status, "flagged": self.flagged,
                "votes": list(self.votes), "samples": [dataclasses.asdict(s) for s in self.samples],
                "failure_type": self.failure_type, "rule": self.rule, "k": self.k, "errors": list(self.errors),
                "classifier": dict(self.classifier)}

    @classmethod
    def from_dict(cls, d: Mapping) -> "ClassifierVerdict":
        """Inverse of :meth:`to_dict`; raises ValueError naming the key for a malformed record."""
        keys = {f.name for f in dataclasses.fields(cls)}
        if not isinstance(d, Mapping) or set(d) != keys:
            got = set(d) if isinstance(d, Mapping) else set()
            raise ValueError(f"classifier verdict: expected keys {', '.join(sorted(keys))}; "
                             f"missing {sorted(keys - got)}, unknown {sorted(got - keys)}")
        sample_keys = {f.name for f in dataclasses.fields(ClassifierOutput)}
        samples = []
        for i, s in enumerate(d["samples"]):
            if not isinstance(s, Mapping) or set(s) != sample_keys:
                raise ValueError(f"classifier verdict: samples[{i}]: expected keys {', '.join(sorted(sample_keys))}")
            samples.append(ClassifierOutput(**s))
        if d["status"] not in ("ok", "error"):
            raise ValueError(f"classifier verdict: status: must be ok or error, got {d['status']!r}")
        if d["rule"] not in DECISION_RULES:
            raise ValueError(f"classifier verdict: rule: must be one of {', '.join(DECISION_RULES)}, got {d['rule']!r}")
        return cls(case_id=str(d["case_id"]), exchange=int(d["exchange"]), status=d["status"], flagged=d["flagged"],
                   votes=tuple(bool(v) for v in d["votes"]), samples=tuple(samples),
                   failure_type=d["failure_type"], rule=d["rule"], k=int(d["k"]),
                   errors=tuple(str(e) for e in d["errors"]), classifier=dict(d["classifier"]))


def vote(case_id: str, exchange: int, samples: tuple[ClassifierOutput, ...] | list[ClassifierOutput], *, rule: str,
         k: int, errors: tuple[str, ...] | list[str], classifier: dict) -> ClassifierVerdict:
    """The verdict of the parsed `samples` under `rule`: majority flag (a tie flags), the most
    common failure code among the flagging samples (ties: FAILURE_TYPES order); status ``error``
    when there is no sample."""
    samples = tuple(samples)
    if not samples:
        return ClassifierVerdict(case_id, exchange, "error", None, (), (), None, rule, k, tuple(errors),
                                 dict(classifier))
    votes = tuple(decide(s, rule) for s in samples)
    flagged = 2 * sum(votes) >= len(votes)
    failure_type = None
    if flagged:
        counts = Counter(s.failure_type for s, v in zip(samples, votes) if v and s.failure_type)
        if counts:
            top = max(counts.values())
            failure_type = next(t for t in FAILURE_TYPES if counts.get(t) == top)
    return ClassifierVerdict(case_id, exchange, "ok", flagged, votes, samples, failure_type, rule, k, tuple(errors),
                             dict(classifier))


# ------------------------------------------------------------------------------------------------
# Classifiers
class Classifier(abc.ABC):
    """Classifies one exchange of a conversation."""

    votes: int
    rule: str

    @abc.abstractmethod
    def identity(self) -> dict:
        """Everything that can change a verdict, JSON-ready (recorded in every results row)."""

    @abc.abstractmethod
    def classify(self, seed: Seed, history: tuple[Exchange, ...], exchange: Exchange,
                 case_id: str) -> ClassifierVerdict:
        """The verdict on `exchange` (the earlier exchanges in `history`, oldest first)."""

    def check_ready(self) -> None:
        """Raise ``LLMConfigError`` now if classifying would need what is missing (key, SDK)."""


def _check_votes_rule(votes: Any, rule: Any, where: str) -> None:
    if isinstance(votes, bool) or not isinstance(votes, int) or not 1 <= votes <= 99:
        raise ConfigError(f"{where}.votes: must be an integer in [1, 99] (odd recommended), got {votes!r}")
    if rule not in DECISION_RULES:
        raise ConfigError(f"{where}.decision_rule: must be one of {', '.join(DECISION_RULES)}, got {rule!r}")


# Words too common to show that a continuation serves the task (content words of the message).
_STOPWORDS = frozenset("""
about above after again against also always another anything around because been before being below
between both cannot could does doing down during each either else even ever every from further have
having here hers herself himself into itself just know like look make many maybe might more most much
must myself need needs never next only other ought ours ourselves over really right same should since
some something still such sure than that thats their theirs them themselves then there these they
thing things think this those though through under until upon very want wants what when where which
while will with would your yours yourself yourselves please thanks thank help tell give going okay
actually could wait well good great today tomorrow tonight little enough first second third
""".split())
_ACKNOWLEDGEMENTS = ("that changes", "in that case", "given that", "got it", "understood", "noted", "good point",
                     "i see", "thanks for", "thank you for", "okay", "ok", "sure", "of course", "let me adjust",
                     "let me change", "let me update", "no problem", "fair enough", "makes sense")
_QUOTE_CHARS = 300


def content_words(text: str) -> list[str]:
    """Words of `text` that carry its topic: letters only, five or more, not common words; unique, in order."""
    seen: dict[str, None] = {}
    for w in re.findall(r"[a-z]+(?:'[a-z]+)?", text.lower()):
        if len(w) >= 5 and w not in _STOPWORDS and "'" not in w:
            seen.setdefault(w, None)
    return list(seen)


def _one_line_quote(text: str | None) -> str:
    text = re.sub(r"\s+", " ", text or "").strip()
    return text if len(text) <= _QUOTE_CHARS else text[: _QUOTE_CHARS - 3] + "..."


def _listed(words: list[str]) -> str:
    return ", ".join(f"'{w}'" for w in words)


class OfflineClassifier(Classifier):
    """A deterministic classifier for offline (scripted) conversations: word checks on the
    continuation against the seed's :class:`ExchangeScript` for the exchange.

    * memory: a task keyword of the seed, or a content word of the exchange's message, occurs;
    * evidence: a word of the script's ``evidence`` occurs (required only for an interrupted
      exchange whose script lists evidence words);
    * stale: a word of the script's ``stale``, or of an earlier exchange's ``stale`` that is not
      evidence now, occurs;
    * integration: NONE when required evidence is missing (an acknowledgement alone is NONE:
      contextual inertia), else PARTIAL when a stale word occurs, else GOOD;
    * fail code: evidence missing -> dsr_f1_ignores; evidence with this exchange's stale words ->
      dsr_f3_contradictory; an earlier exchange's stale words (or this one's where the script lists
      no evidence) -> dsr_f2_stale_later; memory NO alone -> dsr_f1_ignores (the task dropped).
      dsr_f4_double_count needs meaning, not words: never given offline.

    The answer is written as A.4 text and parsed back; the k samples are that one answer k times.
    A script that lacks the exchange makes an ``error`` verdict (the conversation was not scripted
    by this seed), never a flag.
    """

    backend = "offline"

    def __init__(self, votes: int = 1, decision_rule: str = "paper"):
        _check_votes_rule(votes, decision_rule, "benchmark.classifier")
        self.votes, self.rule = votes, decision_rule

    def identity(self) -> dict:
        return {"role": ROLE, "backend": self.backend, "version": CLASSIFIER_VERSION, "votes": self.votes,
                "rule": self.rule}

    def classify(self, seed: Seed, history: tuple[Exchange, ...], exchange: Exchange,
                 case_id: str) -> ClassifierVerdict:
        scripts = {s.index: s for s in seed.exchanges}
        script = scripts.get(exchange.index)
        if script is None:
            return vote(case_id, exchange.index, (), rule=self.rule, k=self.votes, classifier=self.identity(),
                        errors=(f"offline classifier: seed {seed.seed_id!r} has no script for exchange "
                                f"{exchange.index}",))
        earlier = [s for i, s in sorted(scripts.items()) if i < exchange.index]
        text = format_output(self.answer(seed, script, earlier, exchange))
        sample = parse_output(text)  # the parser is on the path of every answer
        return vote(case_id, exchange.index, (sample,) * self.votes, rule=self.rule, k=self.votes, errors=(),
                    classifier=self.identity())

    @staticmethod
    def answer(seed: Seed, script: ExchangeScript, earlier: list[ExchangeScript],
               exchange: Exchange) -> ClassifierOutput:
        """The offline judgement of one exchange (see the class docstring)."""
        text = exchange.continuation
        memory_words = list(mentions(text, list(seed.task_keywords) + content_words(exchange.message)))
        memory = bool(memory_words)
        need_evidence = exchange.interrupted and bool(script.evidence)
        evidence = list(mentions(text, script.evidence)) if exchange.interrupted else []
        stale_now = list(mentions(text, script.stale)) if exchange.interrupted else []
        current_evidence = {w.lower() for w in script.evidence}
        old = [w for s in earlier for w in s.stale if w.lower() not in current_evidence]
        stale_old = [w for w in dict.fromkeys(mentions(text, old)) if w not in stale_now]
        acknowledged = list(mentions(text, _ACKNOWLEDGEMENTS)) if exchange.interrupted else []

        notes = [f"memory {'YES' if memory else 'NO'}" + (f" (task words {_listed(memory_words[:5])})"
                                                          if memory else " (no task word in the continuation)")]
        if need_evidence and not evidence:
            integration, ftype = "NONE", "dsr_f1_ignores"
            notes.append("none of the barge-in's evidence words (" + _listed(list(script.evidence)[:5]) + ")"
                         + (f"; it acknowledges ({_listed(acknowledged[:2])}) but the content does not change"
                            if acknowledged else ""))
        else:
            integration = "PARTIAL" if stale_now or stale_old else "GOOD"
            if evidence and stale_now:
                ftype = "dsr_f3_contradictory"
            elif stale_now or stale_old:
                ftype = "dsr_f2_stale_later"
            else:
                ftype = None if memory else "dsr_f1_ignores"
            if evidence:
                notes.append(f"evidence taken up ({_listed(evidence[:5])})")
            elif not exchange.interrupted:
                notes.append("not interrupted: no new evidence to take up")
            else:
                notes.append("the script lists no evidence words for this barge-in")
        if stale_now:
            notes.append(f"old assumption still stated ({_listed(stale_now[:5])})")
        if stale_old:
            notes.append(f"an earlier exchange's invalid assumption returns ({_listed(stale_old[:5])})")
        # HIGH when words were found that decide the case, MEDIUM when it rests on words being absent
        # (a paraphrase would escape the check)
        confidence = "HIGH" if (integration == "GOOD" and memory) or stale_now or stale_old else "MEDIUM"
        return ClassifierOutput(
            failure=ftype is not None, failure_turn=exchange.index if ftype else None, failure_type=ftype,
            evidence_injection=_one_line_quote(exchange.barge_in) or "N/A",
            said_before=_one_line_quote(exchange.answer_before), said_after=_one_line_quote(text),
            memory_demonstrated=memory, integration=integration,
            reason=f"Exchange {exchange.index}, offline word check: " + "; ".join(notes) + ".",
            confidence=confidence)


# ------------------------------------------------------------------------------------------------
# The LLM classifier: prompts in fdeval's own words, following A.4's structure
SYSTEM_TEMPLATE = """\
You review a conversation between a user and a voice assistant that can listen while it is \
speaking. The user sometimes breaks in while the assistant is still answering, to add a fact or \
change a requirement. Decide whether the assistant failed the test described below. Be a \
demanding reviewer: a clear failure must not slip through.

# The test: {axis_name} ({axis_code})
{definition}

## A passing continuation does all of these
{pass_criteria}

## Any one of these is a failure (with its FAILURE_TYPE code)
{fail_criteria}

## An example of a failure
{example}

# How the conversation is shown
The conversation is divided into numbered exchanges. Each exchange opens with the user's message. \
When the user broke in, the assistant's reply is split at that point: first what the assistant \
said before the barge-in, then the barge-in, then what the assistant said from the barge-in on \
(its continuation). An exchange without a barge-in shows the assistant's whole answer. The texts \
are transcribed speech: punctuation may be missing and words may be repeated. The last exchange \
is the one to evaluate; the earlier ones are context, including the constraints set there.

# How to judge
- Judge the continuation of the exchange under evaluation. Two questions matter most. Memory: \
does it still serve the task the user set, with the constraints given earlier? Integration: is \
the new information of the barge-in applied in what it actually recommends or concludes?
- Saying that the new information will be taken into account is not applying it: check the \
content itself.
- Report every clear violation of a failure criterion, small ones included, and do not give the \
assistant the benefit of the doubt when the text shows the failure.
- Do not let a later correction excuse a failure, and do not penalise wording, style or length.
- MEMORY_DEMONSTRATED is YES when the continuation still addresses the user's task and NO when it \
drops it (for example by answering only the barge-in).
- INTEGRATION_QUALITY is GOOD when the new information is applied correctly and completely, \
PARTIAL when it is applied only in part or side by side with the assumption it replaced, and NONE \
when the content does not change with it (an acknowledgement alone is NONE).
- FAILURE_DETECTED is YES whenever a failure criterion holds; then FAILURE_TURN is the number of \
the exchange where it occurs and FAILURE_TYPE its code. Grade MEMORY_DEMONSTRATED and \
INTEGRATION_QUALITY on their own terms: they are read separately from the YES or NO.

# Answer format
Answer with these ten fields and nothing else. Each field starts its own line, with its name in \
capitals exactly as shown, then a colon and the value. No markdown, no brackets around values, \
and no text before the first line, which must read exactly "FAILURE_DETECTED: YES" or \
"FAILURE_DETECTED: NO". A quote or the reason may continue over several lines up to the next field.
FAILURE_DETECTED: YES or NO
FAILURE_TURN: the exchange number of the failure (N/A when NO)
FAILURE_TYPE: one of {failure_codes} (N/A when NO)
EVIDENCE_INJECTION: a quote of the new information in the barge-in
WHAT_ASSISTANT_SAID_BEFORE: a quote of the assistant before the barge-in
ASSISTANT_RESPONSE_AFTER: a quote of the assistant after the barge-in
MEMORY_DEMONSTRATED: YES or NO
INTEGRATION_QUALITY: GOOD, PARTIAL or NONE
REASON: your explanation, quoting the transcript and naming exchange numbers
CONFIDENCE: HIGH, MEDIUM or LOW
"""

USER_TEMPLATE = """\
Topic of the conversation: {topic} ({subtopic}). {topic_description}

=== Conversation ===
{conversation}
=== End of the conversation ===

Evaluate exchange {index} and answer in the format given, starting with the FAILURE_DETECTED line."""

SILENT = "(nothing)"


def render_exchange(e: Exchange, evaluated: bool = False) -> str:
    """One exchange as text, the barge-in and the two assistant segments marked."""
    head = f"--- Exchange {e.index}{' (the exchange to evaluate)' if evaluated else ''} ---"
    lines = [head, f"USER (message): {e.message.strip() or SILENT}"]
    if e.interrupted:
        label = f", {e.barge_in_label}" if e.barge_in_label else ""
        lines += [f"ASSISTANT (before the barge-in): {e.answer_before.strip() or SILENT}",
                  f"USER (barge-in{label}): {(e.barge_in or '').strip() or SILENT}",
                  f"ASSISTANT (continuation, from the barge-in on): {e.continuation.strip() or SILENT}"]
    else:
        lines.append(f"ASSISTANT (whole answer, not interrupted): {e.continuation.strip() or SILENT}")
    return "\n".join(lines)


def render_conversation(history: tuple[Exchange, ...], exchange: Exchange) -> str:
    return "\n\n".join([*(render_exchange(h) for h in history), render_exchange(exchange, evaluated=True)])


def _failure_code(criterion: str) -> str:
    """The FAILURE_TYPE value of a fail criterion code (DSR-F1 -> dsr_f1_ignores)."""
    prefix = criterion.lower().replace("-", "_") + "_"
    return next(t for t in FAILURE_TYPES if t.startswith(prefix))


def system_prompt() -> str:
    """The classifier's system prompt: the template filled with the DSR axis of the taxonomy."""
    return SYSTEM_TEMPLATE.format(
        axis_name=DSR.name, axis_code=DSR.code, definition=DSR.definition.strip(),
        pass_criteria="\n".join(f"- {code}: {text}" for code, text in DSR.pass_criteria),
        fail_criteria="\n".join(f"- {code} (FAILURE_TYPE {_failure_code(code)}): {text}"
                                for code, text in DSR.fail_criteria),
        failure_codes=", ".join(FAILURE_TYPES), example=DSR.example.strip())


def llm_prompt_hash() -> str:
    """The hash of what the LLM classifier sends besides the conversation: the filled system
    prompt, the user template, the re-ask note and the version."""
    return prompt_hash(CLASSIFIER_VERSION, system_prompt(), USER_TEMPLATE, REASK_NOTE)


class _SampleFailed(Exception):
    """One sample got no parsable answer (raised through roles.ask_valid)."""


class LLMClassifier(Classifier):
    """The A.4 classifier on a hosted model through :class:`fdeval.llm.client.LLMClient`.

    `settings` is the ``benchmark.classifier`` node (:func:`make_classifier` fills the defaults).
    Sample i (0-based) is asked through a client with seed ``seed + i``: its own cache entry, so
    k samples are k requests and a rerun reads all k from the cache. Each sample is asked again on
    a parse error up to ``max_parse_retries`` times (:func:`roles.ask_valid`: ``attempt`` 1, 2,
    ..., the parser's reason appended).
    """

    backend = "anthropic"

    def __init__(self, settings: Mapping, cache_dir: str | Path):
        s = _classifier_settings(settings)
        self.settings = s
        self.votes, self.rule, self.max_parse_retries = s["votes"], s["decision_rule"], s["max_parse_retries"]
        common = _common(s)
        self.clients = [role_client(ROLE, {**common, "seed": s["seed"] + i}, Path(cache_dir))
                        for i in range(self.votes)]
        self.system = system_prompt()
        ident = role_identity(ROLE, common, llm_prompt_hash())
        ident.pop("max_attempts", None)  # the classifier's bound is max_parse_retries
        self._identity = {**ident, "version": CLASSIFIER_VERSION, "votes": self.votes, "rule": self.rule,
                          "max_parse_retries": self.max_parse_retries}

    def identity(self) -> dict:
        return dict(self._identity)

    def check_ready(self) -> None:
        self.clients[0].check_ready()

    def prompt(self, seed: Seed, history: tuple[Exchange, ...], exchange: Exchange) -> str:
        return USER_TEMPLATE.format(topic=seed.topic, subtopic=seed.subtopic,
                                    topic_description=seed.topic_description.strip(),
                                    conversation=render_conversation(history, exchange), index=exchange.index)

    def classify(self, seed: Seed, history: tuple[Exchange, ...], exchange: Exchange,
                 case_id: str) -> ClassifierVerdict:
        prompt = self.prompt(seed, history, exchange)
        samples: list[ClassifierOutput] = []
        errors: list[str] = []
        for i, client in enumerate(self.clients, start=1):
            try:  # LLMConfigError (LLMUnavailable included) propagates: the run stops, no verdict
                sample, rejected = ask_valid(client, self.system, prompt, parse_output,
                                             max_attempts=self.max_parse_retries + 1, fail=_SampleFailed)
            except _SampleFailed as e:
                errors.append(f"sample {i}: {e}")
                continue
            errors += [f"sample {i} answer {n}: {why}" for n, why in enumerate(rejected, start=1)]
            samples.append(sample)
        return vote(case_id, exchange.index, samples, rule=self.rule, k=self.votes, errors=errors,
                    classifier=self.identity())


# ------------------------------------------------------------------------------------------------
# Construction from the benchmark config (benchmark.classifier)
ROLE = "classifier"
# The classifier's own keys and defaults, on top of the common role keys of roles.ROLE_DEFAULTS
# (less max_attempts: the classifier's re-ask bound is max_parse_retries). The default temperature
# is 1.0, not the roles' 0.0: k votes only differ from one answer when the samples can differ.
CLASSIFIER_DEFAULTS: dict[str, Any] = {"votes": 3, "decision_rule": "paper", "max_parse_retries": 2}
CLASSIFIER_TEMPERATURE = 1.0
CLASSIFIER_KEYS = tuple(sorted((ROLE_KEYS - {"max_attempts"}) | set(CLASSIFIER_DEFAULTS)))


def _classifier_settings(settings: Mapping) -> dict:
    """``benchmark.classifier`` validated, defaults filled: the common role keys by
    :func:`roles.check_role`, the classifier's own here."""
    where = f"benchmark.{ROLE}"
    if not isinstance(settings, Mapping):
        raise ConfigError(f"{where}: must be a mapping of classifier settings, got {type(settings).__name__}")
    for key in settings:
        if key == "max_attempts":
            raise ConfigError(f"{where}.max_attempts: not a classifier key; its re-ask bound is max_parse_retries "
                              f"(answers per sample = max_parse_retries + 1)")
        if key not in CLASSIFIER_KEYS:
            raise ConfigError(f"{where}.{key}: unknown key; valid: [{', '.join(CLASSIFIER_KEYS)}]")
    own = {k: settings.get(k, v) for k, v in CLASSIFIER_DEFAULTS.items()}
    common = {"temperature": CLASSIFIER_TEMPERATURE, **{k: v for k, v in settings.items() if k not in own}}
    s = {**{k: v for k, v in check_role(ROLE, common).items() if k in CLASSIFIER_KEYS}, **own}
    _check_votes_rule(s["votes"], s["decision_rule"], where)
    n = s["max_parse_retries"]
    if isinstance(n, bool) or not isinstance(n, int) or not 0 <= n < MAX_ATTEMPTS_LIMIT:
        raise ConfigError(f"{where}.max_parse_retries: must be an integer in [0, {MAX_ATTEMPTS_LIMIT - 1}], got {n!r}")
    return s


def _common(s: Mapping) -> dict:
    """The role keys of validated classifier settings (what roles.role_client / role_identity take)."""
    return {k: v for k, v in s.items() if k in ROLE_KEYS}


def make_classifier(settings: Mapping, cache_dir: Path) -> Classifier:
    """The classifier configured by `settings` (the ``benchmark.classifier`` node). Raises
    ConfigError ``benchmark.classifier.<key>: ...`` for an unknown key (listing the valid ones) or
    a bad value; no I/O. The LLM backend caches under ``cache_dir/classifier``."""
    s = _classifier_settings(settings)
    if s["backend"] == "offline":
        return OfflineClassifier(votes=s["votes"], decision_rule=s["decision_rule"])
    return LLMClassifier(s, cache_dir)
