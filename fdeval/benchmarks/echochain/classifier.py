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
* The offline classifier (:class:`OfflineClassifier`) is a deterministic check of the continuation
  against the seed's script for the exchange and the earlier ones (evidence and stale words, read
  so that what a reply names as replaced does not count) and against the task set before the
  barge-in (:func:`serves_task`); it writes an A.4 answer and parses it back. Its k samples are
  identical, so its votes are unanimous.
"""

from __future__ import annotations

import abc
import dataclasses
import functools
import re
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

from fdeval.benchmarks.echochain.roles import (
    MAX_ATTEMPTS_LIMIT,
    REASK_NOTE,
    ROLE_KEYS,
    ask_valid,
    check_role,
    prompt_hash,
    role_client,
    role_identity,
)
from fdeval.benchmarks.echochain.seeds import ExchangeScript, Seed
from fdeval.benchmarks.echochain.taxonomy import CONFIDENCE, DSR, FAILURE_TYPES, INTEGRATION
from fdeval.errors import ConfigError

# Bump when the prompt templates, the inputs given to them or the reading of answers change.
CLASSIFIER_VERSION = "2"
# The offline rules' own version (OfflineClassifier's identity): bump when a rule changes. Apart
# from CLASSIFIER_VERSION, so that a rule change leaves the LLM classifier's cache valid.
OFFLINE_VERSION = "3"
DECISION_RULES = ("paper", "strict")


# ------------------------------------------------------------------------------------------------
# Records
@dataclass(frozen=True)
class Exchange:
    """One exchange as the classifier and the graders see it (texts are transcripts)."""

    case_id: str
    index: int  # 1-based exchange number (= "turn" in the classifier's output)
    message: str  # the user's message
    answer_before: (
        str  # assistant text from the message's start to the barge-in's start ("" if none)
    )
    barge_in: str | None  # the barge-in text (None: the exchange was not interrupted)
    barge_in_label: str | None
    continuation: str  # assistant text from the barge-in on (uninterrupted: the whole answer)
    # the barge-in came after the assistant's answer had ended (orchestrator.turns.model_speaking_at
    # was False at its first sample): said, but no interruption (docs/echochain.md)
    late: bool = False

    @property
    def interrupted(self) -> bool:
        return self.barge_in is not None and not self.late


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
FIELDS = (
    "FAILURE_DETECTED",
    "FAILURE_TURN",
    "FAILURE_TYPE",
    "EVIDENCE_INJECTION",
    "WHAT_ASSISTANT_SAID_BEFORE",
    "ASSISTANT_RESPONSE_AFTER",
    "MEMORY_DEMONSTRATED",
    "INTEGRATION_QUALITY",
    "REASON",
    "CONFIDENCE",
)
_FREE_TEXT = frozenset(
    {"EVIDENCE_INJECTION", "WHAT_ASSISTANT_SAID_BEFORE", "ASSISTANT_RESPONSE_AFTER", "REASON"}
)
_NOT_APPLICABLE = frozenset(
    {"", "N/A", "NONE"}
)  # FAILURE_TURN / FAILURE_TYPE when NO (compared upper-cased)
_FIELD_LINE = re.compile(r"^[ \t]*(" + "|".join(FIELDS) + r")[ \t]*:[ \t]*(.*?)[ \t]*$")
_FIRST_LINE = ("FAILURE_DETECTED: YES", "FAILURE_DETECTED: NO")
_TURN = re.compile(r"[0-9]+")


def _yes_no(field: str, value: str) -> bool:
    if value not in ("YES", "NO"):
        raise ClassifierParseError(field, f"must be YES or NO, got {_quote(value)}")
    return value == "YES"


def _choice(field: str, value: str, allowed: tuple[str, ...] | Mapping[str, str]) -> str:
    if value not in allowed:
        raise ClassifierParseError(
            field, f"must be one of {', '.join(allowed)}, got {_quote(value)}"
        )
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
        raise ClassifierParseError(
            "FAILURE_DETECTED",
            "the first line must be exactly 'FAILURE_DETECTED: YES' or "
            f"'FAILURE_DETECTED: NO', got {_quote(lines[0])}",
        )
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
        hint = (
            " (it is named, but not as 'NAME: value' at the start of a line in capitals without markdown)"
            if missing[0].lower() in text.lower()
            else ""
        )
        also = f" (also missing: {', '.join(missing[1:])})" if len(missing) > 1 else ""
        raise ClassifierParseError(missing[0], "missing" + hint + also)
    value: dict[str, str] = {}
    for name, parts in values.items():
        extra = [p for p in parts[1:] if p.strip()]
        if name not in _FREE_TEXT and extra:
            raise ClassifierParseError(
                name, f"takes one value on its line; text follows it: {_quote(extra[0])}"
            )
        value[name] = "\n".join(parts).strip()

    failure = _yes_no("FAILURE_DETECTED", value["FAILURE_DETECTED"])
    turn_text, type_text = value["FAILURE_TURN"], value["FAILURE_TYPE"]
    if failure:
        if not _TURN.fullmatch(turn_text) or int(turn_text) < 1:
            raise ClassifierParseError(
                "FAILURE_TURN",
                f"must be an exchange number >= 1 when FAILURE_DETECTED is "
                f"YES, got {_quote(turn_text)}",
            )
        failure_turn: int | None = int(turn_text)
        failure_type: str | None = _choice("FAILURE_TYPE", type_text, FAILURE_TYPES)
    else:
        for name, v in (("FAILURE_TURN", turn_text), ("FAILURE_TYPE", type_text)):
            if v.upper() not in _NOT_APPLICABLE:
                raise ClassifierParseError(
                    name, f"must be empty or N/A when FAILURE_DETECTED is NO, got {_quote(v)}"
                )
        failure_turn = failure_type = None
    if not value["REASON"]:
        raise ClassifierParseError("REASON", "is empty")
    return ClassifierOutput(
        failure=failure,
        failure_turn=failure_turn,
        failure_type=failure_type,
        evidence_injection=value["EVIDENCE_INJECTION"],
        said_before=value["WHAT_ASSISTANT_SAID_BEFORE"],
        said_after=value["ASSISTANT_RESPONSE_AFTER"],
        memory_demonstrated=_yes_no("MEMORY_DEMONSTRATED", value["MEMORY_DEMONSTRATED"]),
        integration=_choice("INTEGRATION_QUALITY", value["INTEGRATION_QUALITY"], INTEGRATION),
        reason=value["REASON"],
        confidence=_choice("CONFIDENCE", value["CONFIDENCE"], CONFIDENCE),
    )


def format_output(o: ClassifierOutput) -> str:
    """The A.4 text of `o`, which :func:`parse_output` reads back as `o`.

    Raises ValueError for an output that has no such text: invalid values, or a free-text value
    with surrounding whitespace or with a line that would start a field.
    """
    na = "N/A"
    text = "\n".join(
        [
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
        ]
    )
    try:
        back = parse_output(text)
    except ClassifierParseError as e:
        raise ValueError(f"no A.4 text for this output: {e}") from None
    if back != o:
        diff = [
            f.name for f in dataclasses.fields(o) if getattr(o, f.name) != getattr(back, f.name)
        ]
        raise ValueError(
            f"no A.4 text for this output: {', '.join(diff)} would not read back as given"
        )
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
    failure_type: (
        str | None
    )  # the most common failure_type among flagging samples (None unless flagged)
    rule: str
    k: int  # samples asked for
    errors: tuple[
        str, ...
    ]  # parse errors met (re-asks), failed requests, samples that never parsed
    classifier: dict  # the classifier's identity

    @property
    def tie(self) -> bool:
        """As many votes to flag as not (flagged by the tie rule)."""
        return bool(self.votes) and 2 * sum(self.votes) == len(self.votes)

    def to_dict(self) -> dict:
        return {
            "case_id": self.case_id,
            "exchange": self.exchange,
            "status": self.status,
            "flagged": self.flagged,
            "votes": list(self.votes),
            "samples": [dataclasses.asdict(s) for s in self.samples],
            "failure_type": self.failure_type,
            "rule": self.rule,
            "k": self.k,
            "errors": list(self.errors),
            "classifier": dict(self.classifier),
        }

    @classmethod
    def from_dict(cls, d: Mapping) -> "ClassifierVerdict":
        """Inverse of :meth:`to_dict`; raises ValueError naming the key for a malformed record."""
        keys = {f.name for f in dataclasses.fields(cls)}
        if not isinstance(d, Mapping) or set(d) != keys:
            got = set(d) if isinstance(d, Mapping) else set()
            raise ValueError(
                f"classifier verdict: expected keys {', '.join(sorted(keys))}; "
                f"missing {sorted(keys - got)}, unknown {sorted(got - keys)}"
            )
        sample_keys = {f.name for f in dataclasses.fields(ClassifierOutput)}
        samples = []
        for i, s in enumerate(d["samples"]):
            if not isinstance(s, Mapping) or set(s) != sample_keys:
                raise ValueError(
                    f"classifier verdict: samples[{i}]: expected keys {', '.join(sorted(sample_keys))}"
                )
            samples.append(ClassifierOutput(**s))
        if d["status"] not in ("ok", "error"):
            raise ValueError(
                f"classifier verdict: status: must be ok or error, got {d['status']!r}"
            )
        if d["rule"] not in DECISION_RULES:
            raise ValueError(
                f"classifier verdict: rule: must be one of {', '.join(DECISION_RULES)}, got {d['rule']!r}"
            )
        return cls(
            case_id=str(d["case_id"]),
            exchange=int(d["exchange"]),
            status=d["status"],
            flagged=d["flagged"],
            votes=tuple(bool(v) for v in d["votes"]),
            samples=tuple(samples),
            failure_type=d["failure_type"],
            rule=d["rule"],
            k=int(d["k"]),
            errors=tuple(str(e) for e in d["errors"]),
            classifier=dict(d["classifier"]),
        )


def vote(
    case_id: str,
    exchange: int,
    samples: tuple[ClassifierOutput, ...] | list[ClassifierOutput],
    *,
    rule: str,
    k: int,
    errors: tuple[str, ...] | list[str],
    classifier: dict,
) -> ClassifierVerdict:
    """The verdict of the parsed `samples` under `rule`: majority flag (a tie flags), the most
    common failure code among the flagging samples (ties: FAILURE_TYPES order); status ``error``
    when there is no sample."""
    samples = tuple(samples)
    if not samples:
        return ClassifierVerdict(
            case_id, exchange, "error", None, (), (), None, rule, k, tuple(errors), dict(classifier)
        )
    votes = tuple(decide(s, rule) for s in samples)
    flagged = 2 * sum(votes) >= len(votes)
    failure_type = None
    if flagged:
        counts = Counter(s.failure_type for s, v in zip(samples, votes) if v and s.failure_type)
        if counts:
            top = max(counts.values())
            failure_type = next(t for t in FAILURE_TYPES if counts.get(t) == top)
    return ClassifierVerdict(
        case_id,
        exchange,
        "ok",
        flagged,
        votes,
        samples,
        failure_type,
        rule,
        k,
        tuple(errors),
        dict(classifier),
    )


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
    def classify(
        self, seed: Seed, history: tuple[Exchange, ...], exchange: Exchange, case_id: str
    ) -> ClassifierVerdict:
        """The verdict on `exchange` (the earlier exchanges in `history`, oldest first)."""

    def check_ready(self) -> None:
        """Raise ``LLMConfigError`` now if classifying would need what is missing (key, SDK)."""


def _check_votes_rule(votes: Any, rule: Any, where: str) -> None:
    if isinstance(votes, bool) or not isinstance(votes, int) or not 1 <= votes <= 99:
        raise ConfigError(
            f"{where}.votes: must be an integer in [1, 99] (odd recommended), got {votes!r}"
        )
    if rule not in DECISION_RULES:
        raise ConfigError(
            f"{where}.decision_rule: must be one of {', '.join(DECISION_RULES)}, got {rule!r}"
        )


# ------------------------------------------------------------------------------------------------
# Offline text analysis (shared with the offline grader, rubrics.keyword_grade)
#
# Words are compared after normalising numbers (seven == 7, seventy thousand == 70,000 == 70k) and a
# final plural (pistachio == pistachios), inside clauses, so that a word named only as what is
# replaced or ruled out ("swap the plain flour for ...", "no need to restart the router") is not
# counted as still in use.

_UNITS = {
    w: i
    for i, w in enumerate(
        "zero one two three four five six seven eight nine ten eleven twelve thirteen "
        "fourteen fifteen sixteen seventeen eighteen nineteen".split()
    )
}
_TENS = {
    w: 10 * i
    for i, w in enumerate("_ _ twenty thirty forty fifty sixty seventy eighty ninety".split())
    if w != "_"
}
_SCALES = {"hundred": 100, "thousand": 1000, "million": 1000000}
_NUMBER_WORDS = frozenset(_UNITS) | frozenset(_TENS) | frozenset(_SCALES)
# A clause ends at punctuation, a dash or "but": a negation never reaches past it.
_CLAUSE_BREAK = re.compile(r"[,;:.!?()\"\u2014\u2013]+|\s-+\s|\bbut\b")
_TOKEN = re.compile(r"[a-z0-9]+(?:['\-][a-z0-9]+)*")
# Words before a phrase (same clause, at most _CUE_GAP words between) that rule it out, and words
# right after it that do. "n't" words negate too; "don't forget X" is no negation.
_CUES_BEFORE = frozenset(
    """no not never without nor skip skipping avoid avoiding drop dropping ditch ditching forget
forgetting swap swapping replace replacing scrap lose cannot""".split()
)
_CUE_PAIRS_BEFORE = frozenset(
    {
        ("instead", "of"),
        ("rather", "than"),
        ("cut", "out"),
        ("leave", "out"),
        ("place", "of"),
        ("no", "more"),
        ("move", "away"),
    }
)
_UNDOING = frozenset({"forget", "forgetting", "skip", "skipping", "drop", "dropping", "lose"})
# "swap X for Y" / "replace X with Y": only X is ruled out, Y is what the reply now uses.
_SWAPS, _SWAP_TO = (
    frozenset({"swap", "swapping", "replace", "replacing"}),
    frozenset({"for", "with", "by"}),
)
# Set phrases in which a negation word negates nothing that follows ("no problem, ...", "not only X").
_IDLE_AFTER = {
    "no": frozenset({"problem", "problems", "worries", "worry", "doubt", "rush", "question"}),
    "not": frozenset({"only", "just", "sure"}),
}
_CUES_AFTER = frozenset({"swapped", "replaced", "dropped", "removed", "scrapped"})
_STATE_AFTER = frozenset({"out", "off", "gone"})
_CUE_GAP = 4
# Words too common to show that a reply serves one particular request.
_STOPWORDS = frozenset(
    """
a about above after again against all also always am an and another any anything anyway are around as at away back
be because been before being below best better between big bit both but by can cannot could couldn't did didn't do
does doesn't doing don't done down during each either else enough even ever every everything few first for from
get gets getting give go goes going gonna good got great had has have having he her here hers him his how i i'd i'll
i'm i've if in into is isn't it it's its just keep kind kinda know let let's like little look looking lot lots make
makes making many maybe me mean might more most much must my need needs never new next nice no not now of off oh ok
okay on once one only or other our out over perfect please pretty put quite rather really right said same say says
see she should so some something sort sorta sound sounds still stuff such sure take than thank thanks that that's
the their them then there these they thing things think this those though through to too try um uh under until up
upon us use very wait want wanna was way we well were what when where which while who why will with won't would
wouldn't yeah yes yet you you'd you'll you're you've your yours
actually alright basically definitely honestly just literally probably simply totally hmm mm hmm mm-hmm ooh
tell told help start work works working
""".split()
)
_ACKNOWLEDGEMENTS = (
    "that changes",
    "in that case",
    "given that",
    "got it",
    "understood",
    "noted",
    "good point",
    "i see",
    "thanks for",
    "thank you for",
    "okay",
    "ok",
    "sure",
    "of course",
    "let me adjust",
    "let me change",
    "let me update",
    "no problem",
    "fair enough",
    "makes sense",
    "good to know",
    "good catch",
    "i hear you",
)
_ACK_MAX_WORDS = (
    2  # content words besides the acknowledgement: more, and the sentence carries content
)
_QUOTE_CHARS = 300


def _joins(prev: str, w: str) -> bool:
    """Whether number word `w` continues the number that `prev` is part of (twenty-one, two hundred,
    seventy thousand); otherwise it starts a new number (six eight, two twenty-five)."""
    if w in _UNITS:
        return prev in _SCALES or (prev in _TENS and _UNITS[w] < 10)
    if w in _TENS:
        return prev in _SCALES
    return prev in _UNITS or prev in _TENS or (prev in _SCALES and _SCALES[w] > _SCALES[prev])


def _number_value(words: list[str]) -> int:
    """The value of one number said in words ("seventy thousand", "two hundred twenty")."""
    total, current = 0, 0
    for w in words:
        if w in _SCALES and _SCALES[w] == 100:
            current = max(current, 1) * 100
        elif w in _SCALES:
            total, current = total + max(current, 1) * _SCALES[w], 0
        else:
            current += _UNITS.get(w, 0) + _TENS.get(w, 0)
    return total + current


def _spell_numbers(text: str) -> str:
    """Numbers said in words as digits ("twenty-one" -> 21, "two hundred and twenty" -> 220, "six
    and eight" -> 6 and 8); "and" joins only after hundred or thousand."""
    word = "(?:" + "|".join(sorted(_NUMBER_WORDS, key=len, reverse=True)) + ")"

    def run(m: re.Match) -> str:
        parts = re.split(
            r"(\s+and\s+|[\s\-]+)", m.group(0)
        )  # words at even positions, separators between
        out, group = [], []
        for i in range(0, len(parts), 2):
            w, sep = parts[i], parts[i - 1] if i else ""
            if group and _joins(group[-1], w) and ("and" not in sep or group[-1] in _SCALES):
                group.append(w)
                continue
            if group:
                out += [str(_number_value(group)), sep]
            group = [w]
        return "".join(out + [str(_number_value(group))])

    return re.sub(rf"\b{word}(?:(?:\s+and\s+|[\s\-]+){word})*\b", run, text)


def normalise(text: str) -> str:
    """Case, quotes and numbers made comparable: every number as plain digits."""
    t = text.replace("\u2019", "'").replace("\u2018", "'").casefold()
    t = re.sub(r"(?<=\d),(?=\d{3}\b)", "", t)  # 70,000
    t = re.sub(r"\b(\d+)k\b", lambda m: str(int(m.group(1)) * 1000), t)  # 70k
    t = t.replace("%", " percent")
    return _spell_numbers(t)


def _clauses(text: str) -> list[list[str]]:
    return [toks for part in _CLAUSE_BREAK.split(normalise(text)) if (toks := _TOKEN.findall(part))]


def _singular(token: str) -> str:
    """A token with a final plural ending removed (buses -> bus, pistachios -> pistachio)."""
    if len(token) > 4 and re.search(r"(?:ss|sh|ch|x|s)es$", token):
        return token[:-2]
    if len(token) > 3 and token.endswith("s") and not token.endswith(("ss", "us", "is")):
        return token[:-1]
    return token


def stem(word: str) -> str:
    """A rough stem for comparing content words (games / game, evenings / evening, calmly / calm)."""
    w = _singular(word.split("'")[0])
    for suffix in ("ing", "ed", "ly"):
        if len(w) > len(suffix) + 3 and w.endswith(suffix):
            w = w[: -len(suffix)]
            break
    return w[:-1] if len(w) > 3 and w.endswith("e") else w


@functools.lru_cache(maxsize=8192)
def _phrase_tokens(phrase: str) -> tuple[str, ...]:
    return tuple(_TOKEN.findall(normalise(phrase)))


@dataclass(frozen=True)
class Occurrence:
    """One place a phrase is said, and whether it is only named as ruled out there."""

    phrase: str
    clause: int
    start: int
    end: int
    ruled_out: bool


def _negator(w: str) -> bool:
    return w.endswith("n't") or w in ("not", "never")


def _ruled_out(tokens: list[str], start: int, end: int) -> bool:
    lo = max(0, start - _CUE_GAP - 2)
    for i in range(lo, start):
        w, nxt = tokens[i], tokens[i + 1] if i + 1 < len(tokens) else ""
        gap = start - i - 1  # words between the cue and the phrase
        # "don't forget the X" / "never skip the X" keep X: neither word rules it out
        if _negator(w) and nxt in _UNDOING or w in _UNDOING and i and _negator(tokens[i - 1]):
            continue
        if nxt in _IDLE_AFTER.get(w, ()) or w in _SWAPS and _SWAP_TO & set(tokens[i + 1 : start]):
            continue
        if (w, nxt) in _CUE_PAIRS_BEFORE and gap - 1 <= _CUE_GAP:
            return True
        if (w in _CUES_BEFORE or _negator(w)) and gap <= _CUE_GAP:
            return True
    after = tokens[end : end + 3]
    if after and after[0] in _CUES_AFTER:
        return True
    if (
        len(after) >= 2
        and (after[0] in ("is", "are", "was", "goes") or after[0].endswith("'s"))
        and after[1] in _STATE_AFTER
    ):
        return True
    return len(after) >= 3 and after[:2] == ["off", "the"] and after[2] in ("list", "table", "menu")


def occurrences(text: str, phrases: Iterable[str]) -> list[Occurrence]:
    """Where each phrase occurs in `text`: whole words, numbers normalised, a plural on its last word."""
    clauses = _clauses(text)
    found = []
    for p in phrases:
        want = _phrase_tokens(p)
        if not want:
            continue
        n = len(want)
        for ci, toks in enumerate(clauses):
            for i in range(len(toks) - n + 1):
                got = toks[i : i + n]
                if got[:-1] == list(want[:-1]) and _singular(got[-1]) == _singular(want[-1]):
                    found.append(Occurrence(p, ci, i, i + n, _ruled_out(toks, i, i + n)))
    return found


def said(text: str, phrases: Iterable[str]) -> list[str]:
    """The phrases that occur in `text` at all (see :func:`occurrences`), in the given order."""
    hits = {o.phrase for o in occurrences(text, phrases)}
    return [p for p in dict.fromkeys(phrases) if p in hits]


def still_used(text: str, phrases: Iterable[str]) -> list[str]:
    """The phrases that occur in `text` other than as something ruled out or replaced."""
    hits = {o.phrase for o in occurrences(text, phrases) if not o.ruled_out}
    return [p for p in dict.fromkeys(phrases) if p in hits]


def _content_stems(text: str) -> dict[str, str]:
    """stem -> first word, for the words of `text` that can carry a request (no digits, no stopwords)."""
    out: dict[str, str] = {}
    for toks in _clauses(text):
        for w in toks:
            if len(w) >= 3 and not w[0].isdigit() and w not in _STOPWORDS:
                out.setdefault(stem(w), w)
    return out


def _request(message: str) -> str:
    """The request of a user message: its questions, or the whole message when they say too little."""
    questions = " ".join(s for s in re.findall(r"[^.!?]*\?", message))
    return questions if len(_content_stems(questions)) >= 2 else message


def _ack_free(text: str) -> str:
    """`text` without its acknowledgements: the sentences that acknowledge ("okay, got it, thanks
    for telling me") and carry at most _ACK_MAX_WORDS content words besides (no change in content)."""
    sentences = re.split(r"(?<=[.!?])\s+", text)
    return " ".join(
        s
        for s in sentences
        if not said(s, _ACKNOWLEDGEMENTS) or len(_content_stems(s)) > _ACK_MAX_WORDS
    )


# Numbers an update sets, checked in the reply (A.4 DSR-F1 "misapplies"; section 2 files an incorrect
# change under contextual inertia). Two patterns that words alone cannot see: a time outside a window
# the barge-in gives ("open nine till one" -> "eleven to three"), and an amount the barge-in names as
# going out ("paying off a loan of 200") added to a figure instead of taken from it.
_RANGE = re.compile(
    r"\b(?:from|between)?\s*(\d{1,2})(?:\s*(?:am|pm|o'clock))?\s+(?:till|until|to|and|through)\s+"
    r"(\d{1,2})\b"
)
_HOUR_CONTEXT = re.compile(
    r"\b(?:open|opens|opening|close|closes|closing|shift|shifts|hours|from|between|"
    r"am|pm|o'clock|morning|afternoon|evening)\b"
)
_OUTGOING = frozenset(
    """loan loans repay repaying repayment repayments paying pay pays debt debts owe bill bills fee fees
cost costs spend spending rent mortgage instalment instalments installment installments subscription""".split()
)


def _clock(h: int, start: int) -> int:
    """A 12-hour clock figure read forwards from `start` (a window "nine till one" ends at 13)."""
    return h + 12 if h < start and h + 12 <= 24 else h


def _time_window(text: str) -> tuple[int, int] | None:
    """The one hour window an update sets ("only open from nine till one now"), as clock hours."""
    t = normalise(text)
    found = [
        (int(a), int(b)) for a, b in _RANGE.findall(t) if 1 <= int(a) <= 24 and 1 <= int(b) <= 24
    ]
    if len(found) != 1 or not _HOUR_CONTEXT.search(t):
        return None
    a, b = found[0]
    return a, _clock(b, a)


def _outgoing_amount(text: str) -> int | None:
    """The amount an update names as money going out ("paying off a loan of about 200 a month")."""
    for toks in _clauses(text):
        if _OUTGOING & set(toks):
            amounts = [int(w) for w in toks if w.isdigit() and int(w) >= 10]
            if len(amounts) == 1:
                return amounts[0]
    return None


def misapplied_numbers(barge_in: str | None, continuation: str) -> tuple[str, ...]:
    """How a reply gets a number of the update wrong: hours outside the window it set, or an
    outgoing amount added to a figure the reply named before the sum."""
    if not barge_in:
        return ()
    out = []
    window = _time_window(barge_in)
    if window:
        lo, hi = window
        for a, b in _RANGE.findall(normalise(continuation)):
            for h in (int(a), int(b)):
                if 1 <= h <= 24 and not lo <= _clock(h, lo) <= hi:
                    out.append(
                        f"{h} is outside the window {lo} to {hi if hi <= 12 else hi - 12} the update set"
                    )
    cost = _outgoing_amount(barge_in)
    if cost:
        # first mention of each figure: a base said before base + cost was worked out from it (base
        # + cost said first and base after is the cost correctly taken away)
        first: dict[int, int] = {}
        for w in (w for toks in _clauses(continuation) for w in toks if w.isdigit()):
            first.setdefault(int(w), len(first))
        added = sorted(
            f for f in first if f - cost > cost and first.get(f - cost, len(first)) < first[f]
        )
        out += [
            f"{f - cost} plus the outgoing {cost} makes {f}: the cost is added, not taken away"
            for f in added
        ]
    return tuple(dict.fromkeys(out))


@dataclass(frozen=True)
class TaskCheck:
    """Whether a continuation still serves the request of its exchange (see :func:`serves_task`)."""

    served: bool
    anchors: tuple[str, ...]  # the words that stand for the request
    found: tuple[str, ...]  # those the continuation says


def serves_task(history: Sequence[Exchange], exchange: Exchange) -> TaskCheck:
    """Does the continuation still serve the task the user set before the barge-in?

    The task is what the message asks (the content words of its questions) and the plan the
    assistant had started on (the content words of its answer before the barge-in). From the plan,
    words that cannot tell serving the task from answering the barge-in alone are left out: the
    barge-in's words, and the standing topic of the conversation (words of the user's earlier
    messages), which any on-topic reply repeats. The request's own words stay, even when the
    barge-in repeats them: then the barge-in is about the request itself. The task is served when
    the continuation says one of these words (compared by stem).
    """
    barge = set(_content_stems(exchange.barge_in or ""))
    topic: set[str] = set()
    for h in history:
        topic |= set(_content_stems(h.message))
    request = _content_stems(_request(exchange.message))
    plan = {
        s: w
        for s, w in _content_stems(exchange.answer_before).items()
        if s not in barge and s not in topic and s not in request
    }
    anchors = {**request, **plan}
    said_stems = _content_stems(exchange.continuation)
    found = tuple(w for s, w in anchors.items() if s in said_stems)
    return TaskCheck(bool(found), tuple(anchors.values()), found)


def echoes_barge_in(history: Sequence[Exchange], exchange: Exchange) -> tuple[str, ...]:
    """Content words of the barge-in that the continuation uses outside its acknowledgements, other
    than words the user had already said (the message, earlier messages): the barge-in taken up
    in the content, in its own words rather than the script's."""
    known = set(_content_stems(exchange.message))
    for h in history:
        known |= set(_content_stems(h.message)) | set(_content_stems(h.barge_in or ""))
    new = {s: w for s, w in _content_stems(exchange.barge_in or "").items() if s not in known}
    used = _content_stems(_ack_free(exchange.continuation))
    return tuple(w for s, w in new.items() if s in used)


def _one_line_quote(text: str | None) -> str:
    text = re.sub(r"\s+", " ", text or "").strip()
    return text if len(text) <= _QUOTE_CHARS else text[: _QUOTE_CHARS - 3] + "..."


def _listed(words: Iterable[str]) -> str:
    return ", ".join(f"'{w}'" for w in words)


class OfflineClassifier(Classifier):
    """A deterministic classifier for offline (scripted) conversations: the continuation checked
    against the seed's :class:`ExchangeScript` for the exchange and the earlier ones.

    * memory (the plan before the barge-in survives): the task is served (:func:`serves_task`, or
      a replaced assumption is still in use: the old plan goes on) and no constraint set by an
      earlier barge-in is dropped (an earlier script's ``stale`` word, not evidence now, in use);
    * evidence: a word of the script's ``evidence`` is said;
    * stale: a word of the script's ``stale`` is still in use (:func:`still_used`: not named only
      as what is replaced or ruled out);
    * integration: NONE when a number of the update is applied wrongly (:func:`misapplied_numbers`:
      A.4 counts a misapplied update with one ignored), or when the content keeps something the
      update ruled out (a stale word, with or without evidence: A.4 counts a contradictory
      conclusion as a failure and its decision rule flags only NONE or no memory) or when it shows
      no uptake at all (an acknowledgement alone is NONE); GOOD when evidence is said and nothing
      stale; PARTIAL when the barge-in is taken up in its own words (:func:`echoes_barge_in`) but
      none of the script's evidence words;
    * fail code: an earlier constraint dropped -> dsr_f2_stale_later; a stale word with evidence
      -> dsr_f3_contradictory; integration NONE otherwise -> dsr_f1_ignores; the task dropped
      alone -> dsr_f1_ignores. dsr_f4_double_count needs meaning, not words: never given offline.

    The answer is written as A.4 text and parsed back; the k samples are that one answer k times.
    A script that lacks the exchange makes an ``error`` verdict (the conversation was not scripted
    by this seed), never a flag.
    """

    backend = "offline"

    def __init__(self, votes: int = 1, decision_rule: str = "paper"):
        _check_votes_rule(votes, decision_rule, "benchmark.classifier")
        self.votes, self.rule = votes, decision_rule

    def identity(self) -> dict:
        return {
            "role": ROLE,
            "backend": self.backend,
            "version": OFFLINE_VERSION,
            "votes": self.votes,
            "rule": self.rule,
        }

    def classify(
        self, seed: Seed, history: tuple[Exchange, ...], exchange: Exchange, case_id: str
    ) -> ClassifierVerdict:
        scripts = {s.index: s for s in seed.exchanges}
        script = scripts.get(exchange.index)
        if script is None:
            return vote(
                case_id,
                exchange.index,
                (),
                rule=self.rule,
                k=self.votes,
                classifier=self.identity(),
                errors=(
                    f"offline classifier: seed {seed.seed_id!r} has no script for exchange "
                    f"{exchange.index}",
                ),
            )
        earlier = [s for i, s in sorted(scripts.items()) if i < exchange.index]
        text = format_output(self.answer(script, earlier, history, exchange))
        sample = parse_output(text)  # the parser is on the path of every answer
        return vote(
            case_id,
            exchange.index,
            (sample,) * self.votes,
            rule=self.rule,
            k=self.votes,
            errors=(),
            classifier=self.identity(),
        )

    @staticmethod
    def answer(
        script: ExchangeScript,
        earlier: Sequence[ExchangeScript],
        history: Sequence[Exchange],
        exchange: Exchange,
    ) -> ClassifierOutput:
        """The offline judgement of one exchange (see the class docstring)."""
        text = exchange.continuation
        task = serves_task(history, exchange)
        # the update is to be taken up whether it cut in or came just after the answer ended (late)
        cut = exchange.barge_in is not None
        evidence = said(text, script.evidence) if cut else []
        stale_now = still_used(text, script.stale) if cut else []
        current_evidence = {normalise(w) for w in script.evidence}
        old = [w for s in earlier for w in s.stale if normalise(w) not in current_evidence]
        dropped = [w for w in still_used(text, old) if w not in stale_now]
        acknowledged = said(text, _ACKNOWLEDGEMENTS) if cut else []
        echoed = echoes_barge_in(history, exchange) if cut and not evidence else ()
        wrong = misapplied_numbers(exchange.barge_in, text) if cut else ()
        # A replaced assumption still in use is the plan from before the barge-in going on: the task
        # is remembered (contextual inertia), whatever words the plan is put in.
        task_served = task.served or bool(stale_now)
        memory = task_served and not dropped

        notes = [
            f"task {'served' if task_served else 'dropped'} ("
            + (
                f"says {_listed(task.found[:4])}"
                if task.served
                else f"the old plan goes on: {_listed(stale_now[:3])}"
                if task_served
                else f"none of {_listed(task.anchors[:6])}"
                if task.anchors
                else "no word stands for the request"
            )
            + ")"
        ]
        if dropped:
            notes.append(
                f"an earlier barge-in's constraint is dropped ({_listed(dropped[:4])} back in use)"
            )
        if not cut:
            integration = "GOOD"
            notes.append("no barge-in: no new evidence to take up")
        elif wrong:
            integration = "NONE"
            notes.append("the update is applied wrongly (" + "; ".join(wrong[:2]) + ")")
        elif stale_now:
            integration = "NONE"
            notes.append(
                f"the content keeps what the update ruled out ({_listed(stale_now[:4])})"
                + (f" next to the update ({_listed(evidence[:3])})" if evidence else "")
            )
        elif evidence:
            integration = "GOOD"
            notes.append(f"evidence taken up ({_listed(evidence[:4])})")
        elif echoed:
            integration = "PARTIAL"
            notes.append(
                f"the barge-in taken up in its own words ({_listed(echoed[:4])}), none of the "
                f"script's evidence words"
            )
        else:
            integration = "NONE"
            notes.append(
                "none of the barge-in's evidence words ("
                + _listed(list(script.evidence)[:5])
                + ")"
                + (
                    f"; it acknowledges ({_listed(acknowledged[:2])}) but the content does not change"
                    if acknowledged
                    else ""
                )
            )
        if dropped:
            ftype: str | None = "dsr_f2_stale_later"
        elif stale_now and evidence:
            ftype = "dsr_f3_contradictory"
        elif integration == "NONE" or not memory:
            ftype = "dsr_f1_ignores"
        else:
            ftype = None
        # HIGH when words that were found decide the case, MEDIUM when it rests on words being absent
        # (a paraphrase would escape the check)
        confidence = (
            "HIGH"
            if (integration == "GOOD" and memory) or stale_now or dropped or wrong
            else "MEDIUM"
        )
        return ClassifierOutput(
            failure=ftype is not None,
            failure_turn=exchange.index if ftype else None,
            failure_type=ftype,
            evidence_injection=_one_line_quote(exchange.barge_in) or "N/A",
            said_before=_one_line_quote(exchange.answer_before),
            said_after=_one_line_quote(text),
            memory_demonstrated=memory,
            integration=integration,
            reason=f"Exchange {exchange.index}, offline check: " + "; ".join(notes) + ".",
            confidence=confidence,
        )


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
PARTIAL when it is applied only in part, and NONE when the content does not change with it (an \
acknowledgement alone is NONE) or keeps recommending what the new information ruled out next to \
the update (a contradictory conclusion is NONE).
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
        lines += [
            f"ASSISTANT (before the barge-in): {e.answer_before.strip() or SILENT}",
            f"USER (barge-in{label}): {(e.barge_in or '').strip() or SILENT}",
            f"ASSISTANT (continuation, from the barge-in on): {e.continuation.strip() or SILENT}",
        ]
    elif e.barge_in is not None:  # late: the answer had ended, the barge-in is a follow-up
        label = f", {e.barge_in_label}" if e.barge_in_label else ""
        lines += [
            f"ASSISTANT (whole answer, not interrupted): {e.answer_before.strip() or SILENT}",
            f"USER (follow-up after the answer ended{label}): {e.barge_in.strip() or SILENT}",
            f"ASSISTANT (reply to the follow-up): {e.continuation.strip() or SILENT}",
        ]
    else:
        lines.append(
            f"ASSISTANT (whole answer, not interrupted): {e.continuation.strip() or SILENT}"
        )
    return "\n".join(lines)


def render_conversation(history: tuple[Exchange, ...], exchange: Exchange) -> str:
    return "\n\n".join(
        [*(render_exchange(h) for h in history), render_exchange(exchange, evaluated=True)]
    )


def _failure_code(criterion: str) -> str:
    """The FAILURE_TYPE value of a fail criterion code (DSR-F1 -> dsr_f1_ignores)."""
    prefix = criterion.lower().replace("-", "_") + "_"
    return next(t for t in FAILURE_TYPES if t.startswith(prefix))


def system_prompt() -> str:
    """The classifier's system prompt: the template filled with the DSR axis of the taxonomy."""
    return SYSTEM_TEMPLATE.format(
        axis_name=DSR.name,
        axis_code=DSR.code,
        definition=DSR.definition.strip(),
        pass_criteria="\n".join(f"- {code}: {text}" for code, text in DSR.pass_criteria),
        fail_criteria="\n".join(
            f"- {code} (FAILURE_TYPE {_failure_code(code)}): {text}"
            for code, text in DSR.fail_criteria
        ),
        failure_codes=", ".join(FAILURE_TYPES),
        example=DSR.example.strip(),
    )


def llm_prompt_hash() -> str:
    """The hash of what the LLM classifier sends besides the conversation: the filled system
    prompt, the user template, the re-ask note and the version."""
    return prompt_hash(CLASSIFIER_VERSION, system_prompt(), USER_TEMPLATE, REASK_NOTE)


class _SampleFailed(Exception):
    """One sample got no parsable answer (raised through roles.ask_valid)."""


class LLMClassifier(Classifier):
    """The A.4 classifier on a language model through :class:`fdeval.llm.client.LLMClient`.

    `settings` is the ``benchmark.classifier`` node (:func:`make_classifier` fills the defaults).
    Sample i (0-based) is asked through a client with seed ``seed + i``: its own cache entry, so
    k samples are k requests and a rerun reads all k from the cache. Each sample is asked again on
    a parse error up to ``max_parse_retries`` times (:func:`roles.ask_valid`: ``attempt`` 1, 2,
    ..., the parser's reason appended).
    """

    def __init__(self, settings: Mapping, cache_dir: str | Path):
        s = _classifier_settings(settings)
        self.backend = s["backend"]  # any LLM backend of roles.BACKENDS
        self.settings = s
        self.votes, self.rule, self.max_parse_retries = (
            s["votes"],
            s["decision_rule"],
            s["max_parse_retries"],
        )
        common = _common(s)
        self.clients = [
            role_client(ROLE, {**common, "seed": s["seed"] + i}, Path(cache_dir))
            for i in range(self.votes)
        ]
        self.system = system_prompt()
        ident = role_identity(ROLE, common, llm_prompt_hash())
        ident.pop("max_attempts", None)  # the classifier's bound is max_parse_retries
        self._identity = {
            **ident,
            "version": CLASSIFIER_VERSION,
            "votes": self.votes,
            "rule": self.rule,
            "max_parse_retries": self.max_parse_retries,
        }

    def identity(self) -> dict:
        return dict(self._identity)

    def check_ready(self) -> None:
        self.clients[0].check_ready()

    def prompt(self, seed: Seed, history: tuple[Exchange, ...], exchange: Exchange) -> str:
        return USER_TEMPLATE.format(
            topic=seed.topic,
            subtopic=seed.subtopic,
            topic_description=seed.topic_description.strip(),
            conversation=render_conversation(history, exchange),
            index=exchange.index,
        )

    def classify(
        self, seed: Seed, history: tuple[Exchange, ...], exchange: Exchange, case_id: str
    ) -> ClassifierVerdict:
        prompt = self.prompt(seed, history, exchange)
        samples: list[ClassifierOutput] = []
        errors: list[str] = []
        for i, client in enumerate(self.clients, start=1):
            try:  # LLMConfigError (LLMUnavailable included) propagates: the run stops, no verdict
                sample, rejected = ask_valid(
                    client,
                    self.system,
                    prompt,
                    parse_output,
                    max_attempts=self.max_parse_retries + 1,
                    fail=_SampleFailed,
                )
            except _SampleFailed as e:
                errors.append(f"sample {i}: {e}")
                continue
            errors += [f"sample {i} answer {n}: {why}" for n, why in enumerate(rejected, start=1)]
            samples.append(sample)
        return vote(
            case_id,
            exchange.index,
            samples,
            rule=self.rule,
            k=self.votes,
            errors=errors,
            classifier=self.identity(),
        )


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
        raise ConfigError(
            f"{where}: must be a mapping of classifier settings, got {type(settings).__name__}"
        )
    for key in settings:
        if key == "max_attempts":
            raise ConfigError(
                f"{where}.max_attempts: not a classifier key; its re-ask bound is max_parse_retries "
                f"(answers per sample = max_parse_retries + 1)"
            )
        if key not in CLASSIFIER_KEYS:
            raise ConfigError(f"{where}.{key}: unknown key; valid: [{', '.join(CLASSIFIER_KEYS)}]")
    own = {k: settings.get(k, v) for k, v in CLASSIFIER_DEFAULTS.items()}
    common = {
        "temperature": CLASSIFIER_TEMPERATURE,
        **{k: v for k, v in settings.items() if k not in own},
    }
    s = {**{k: v for k, v in check_role(ROLE, common).items() if k in CLASSIFIER_KEYS}, **own}
    _check_votes_rule(s["votes"], s["decision_rule"], where)
    n = s["max_parse_retries"]
    if isinstance(n, bool) or not isinstance(n, int) or not 0 <= n < MAX_ATTEMPTS_LIMIT:
        raise ConfigError(
            f"{where}.max_parse_retries: must be an integer in [0, {MAX_ATTEMPTS_LIMIT - 1}], got {n!r}"
        )
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
