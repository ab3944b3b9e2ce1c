"""EchoChain scenario seeds: the records, the strict loader, rotation for diversity, the pool hash.

A seed starts one conversation (paper section 4): topic, subtopic, topic description, persona and
the challenge axis, plus fdeval's offline script -- per exchange the user's message and, from the
second exchange on, a barge-in with its label, the words that show its new information was taken
up (``evidence``), the words that show the replaced assumption is still in use (``stale``) and a
hand-written rubric (``criteria``, keyword checks an offline grader can run). ``task_keywords``
name the conversation's task (the offline planner's note on whether a reply still serves it).

A scripted message or barge-in may lean on advice the assistant gave earlier ("I can't turn location
off"). Such a wording names what it presupposes (``message_presupposes`` / ``barge_in_presupposes``:
words, any one of which must occur in the assistant's text of the earlier exchanges) and comes with a
fallback that presupposes nothing (``message_fallback`` / ``barge_in_fallback``);
:meth:`ExchangeScript.wording` picks one from what the assistant actually said. The barge-in of an
exchange is still chosen before that exchange's reply exists (section 4.1), so only the earlier
exchanges count.

File format (``docs/echochain.md`` has the full reference): JSON -- ``{"version": 1, "seeds":
[...]}`` or a bare list of seed objects -- or JSONL, one seed object per line. Reading is strict:
unknown keys, bad ids, unknown labels, digits in user text (numbers are spelled out for speech),
too many sentences, a barge-in that repeats its message, evidence words the user already said
(they could not show uptake), stale or forbidden words the barge-in itself says (a correct reply
may echo them), a presupposition without its fallback (or the reverse), presupposed words the user
said first (an assistant echoing them shows no advice) and duplicate ids are all rejected with a
one-line :class:`SeedFileError` (a ``ConfigError``) ``<file>: seed <id>: field <path>: <why>``.
Field paths are JSON paths with list positions counted from zero (``exchanges[1]`` is exchange 2).
"""

from __future__ import annotations

import functools
import hashlib
import json
import random
import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn

from fdeval.errors import ConfigError

from .taxonomy import AXES, BARGE_IN_LABELS

SEEDS_FILE = Path(__file__).resolve().parent / "data" / "seeds.json"
SHIPPED = "shipped"  # names the shipped pool in a list of seed files (load_pool)
FORMAT_VERSION = 1
SCOPES = ("continuation", "answer")
MAX_MESSAGE_SENTENCES = 3  # A.2: at most three sentences per user message
MAX_BARGE_IN_SENTENCES = 2  # A.2: one or two sentences per barge-in
MIN_EXCHANGES = 3
MIN_CRITERIA = 2  # per interrupted exchange
MAX_WORD_CHARS = 60

_SEED_ID = re.compile(r"^[a-z0-9][a-z0-9_-]{0,79}$")
_CRITERION_ID = re.compile(r"^[a-z0-9][a-z0-9_.-]{0,39}$")
_DIGIT = re.compile(r"\d")
_NUMBER_SIGNS = re.compile(r"[$€£¥%#]")  # stand for numbers a voice would say in words
# A sentence ends at ! or ? or a single full stop before a space or the end; an ellipsis is a pause
# cue (A.2), never an end, and so are dashes.
_SENTENCE_END = re.compile(r"(\.\.+|…)|([.!?]+)(?=[\"'”’)\]]*(?:\s|$))")
_ABBREVIATIONS = frozenset(
    {
        "mr",
        "mrs",
        "ms",
        "dr",
        "st",
        "vs",
        "jr",
        "sr",
        "mt",
        "e.g",
        "i.e",
        "a.m",
        "p.m",
        "u.s",
        "approx",
    }
)
_SEED_KEYS = (
    "seed_id",
    "topic",
    "subtopic",
    "topic_description",
    "persona",
    "axis",
    "task_keywords",
    "exchanges",
)
_EXCHANGE_KEYS = (
    "index",
    "message",
    "message_presupposes",
    "message_fallback",
    "barge_in_label",
    "barge_in",
    "barge_in_presupposes",
    "barge_in_fallback",
    "evidence",
    "stale",
    "criteria",
)
_CRITERION_KEYS = ("criterion_id", "text", "require_any", "forbid", "scope")


class SeedFileError(ConfigError):
    """A seed that fails validation: one line naming the file, the seed and the field."""

    def __init__(self, source: str, seed: str | None, field: str, why: str):
        self.source, self.seed, self.field, self.why = str(source), seed or "?", field, why
        super().__init__(f"{self.source}: seed {self.seed}: field {field}: {why}")


# ------------------------------------------------------------------------------------------------
# Records


@dataclass(frozen=True)
class Criterion:
    """One rubric criterion of one interrupted exchange, with its offline keyword check."""

    criterion_id: str
    text: str
    require_any: tuple[str, ...] = ()
    forbid: tuple[str, ...] = ()
    scope: str = "continuation"  # continuation | answer (the whole reply to the exchange)

    def holds(self, text: str) -> bool:
        """The offline check on `text`: some require_any word present (if any) and no forbid word."""
        return (not self.require_any or bool(mentions(text, self.require_any))) and not mentions(
            text, self.forbid
        )

    def to_dict(self) -> dict:
        return _compact(
            {
                "criterion_id": self.criterion_id,
                "text": self.text,
                "require_any": list(self.require_any),
                "forbid": list(self.forbid),
                "scope": self.scope,
            }
        )


@dataclass(frozen=True)
class ExchangeScript:
    """The offline simulator's script for one exchange."""

    index: int
    message: str
    barge_in_label: str | None = None
    barge_in: str | None = None
    evidence: tuple[str, ...] = ()
    stale: tuple[str, ...] = ()
    criteria: tuple[Criterion, ...] = ()
    # A wording that leans on earlier advice: spoken only when the earlier assistant text mentions one
    # of the words; otherwise the fallback, which presupposes nothing (both set or neither).
    message_presupposes: tuple[str, ...] = ()
    message_fallback: str | None = None
    barge_in_presupposes: tuple[str, ...] = ()
    barge_in_fallback: str | None = None

    def wording(self, assistant_text: str) -> tuple[str, str | None]:
        """(message, barge-in) for a conversation whose earlier exchanges had the assistant say
        `assistant_text`: a presupposing wording when one of its words was said, else its fallback.
        The same text always gives the same choice."""

        def holds(words: tuple[str, ...]) -> bool:
            return not words or bool(mentions(assistant_text, words))

        return (
            self.message
            if holds(self.message_presupposes)
            else self.message_fallback or self.message,
            self.barge_in
            if holds(self.barge_in_presupposes)
            else self.barge_in_fallback or self.barge_in,
        )

    def variants(self) -> tuple[tuple[str, ...], tuple[str, ...]]:
        """Every wording the exchange can have: (messages, barge-ins)."""
        return (
            tuple(t for t in (self.message, self.message_fallback) if t),
            tuple(t for t in (self.barge_in, self.barge_in_fallback) if t),
        )

    def to_dict(self) -> dict:
        return _compact(
            {
                "index": self.index,
                "message": self.message,
                "message_presupposes": list(self.message_presupposes),
                "message_fallback": self.message_fallback,
                "barge_in_label": self.barge_in_label,
                "barge_in": self.barge_in,
                "barge_in_presupposes": list(self.barge_in_presupposes),
                "barge_in_fallback": self.barge_in_fallback,
                "evidence": list(self.evidence),
                "stale": list(self.stale),
                "criteria": [c.to_dict() for c in self.criteria],
            }
        )


@dataclass(frozen=True)
class Seed:
    """One scenario seed: what the planner and simulator start from, and the offline script."""

    seed_id: str
    topic: str
    subtopic: str
    topic_description: str
    persona: str
    axis: str = "DSR"
    task_keywords: tuple[str, ...] = ()
    exchanges: tuple[ExchangeScript, ...] = ()

    def to_dict(self) -> dict:
        return {
            "seed_id": self.seed_id,
            "topic": self.topic,
            "subtopic": self.subtopic,
            "topic_description": self.topic_description,
            "persona": self.persona,
            "axis": self.axis,
            "task_keywords": list(self.task_keywords),
            "exchanges": [e.to_dict() for e in self.exchanges],
        }

    @classmethod
    def from_dict(cls, d: Any, where: str) -> Seed:
        """Validate and build a seed; `where` names its source (a file) in the error line."""
        return _parse_seed(d, where, "?")


def _compact(d: dict) -> dict:
    """Optional fields left out when unset, so exchange one carries no empty barge-in keys."""
    return {k: v for k, v in d.items() if v is not None and v != []}


# ------------------------------------------------------------------------------------------------
# Text rules shared with whatever writes user text (the simulator checks its output the same way)


def sentence_count(text: str) -> int:
    """Sentences in a spoken turn: ellipses and dashes are pauses, common abbreviations are not ends."""
    count, start = 0, 0
    for m in _SENTENCE_END.finditer(text):
        if m.group(1):
            continue
        if m.group(2) == ".":
            word = re.search(r"([A-Za-z.]+)$", text[start : m.start()])
            if word and word.group(1).lower().strip(".") in _ABBREVIATIONS:
                continue
        if re.search(r"\w", text[start : m.start()]):
            count += 1
        start = m.end()
    if re.search(r"\w", text[start:]):
        count += 1
    return count


def user_text_problem(text: str, max_sentences: int, min_sentences: int = 1) -> str | None:
    """Why `text` cannot be spoken as a user turn (None if it can)."""
    if not text.strip():
        return "empty"
    if "\n" in text or "\r" in text:
        return "a spoken turn is one line"
    m = _DIGIT.search(text)
    if m:
        return f"contains the digit {m.group()!r}: spell numbers out"
    m = _NUMBER_SIGNS.search(text)
    if m:
        return f"contains {m.group()!r}: spell amounts out in words"
    n = sentence_count(text)
    if not min_sentences <= n <= max_sentences:
        return f"{n} sentences; allowed {min_sentences} to {max_sentences}"
    return None


def _normal(text: str) -> str:
    return text.replace("\u2019", "'").replace("\u2018", "'").casefold()


@functools.lru_cache(maxsize=8192)
def _word_pattern(word: str) -> re.Pattern[str]:
    parts = _normal(word).split()
    return re.compile(r"(?<!\w)" + r"\s+".join(map(re.escape, parts)) + r"(?!\w)")


def mentions(text: str, words: Iterable[str]) -> tuple[str, ...]:
    """The `words` that occur in `text`: case-insensitive, on word boundaries, any run of spaces."""
    t = _normal(text)
    return tuple(w for w in words if _word_pattern(w).search(t))


def _bare(text: str) -> str:
    return " ".join(re.findall(r"\w+", _normal(text)))


# Hesitation sounds say nothing about how a turn opens, so the opener is the first word after them.
OPENER_FILLERS = frozenset({"um", "uh", "uhm", "er", "erm", "hm", "hmm"})
MAX_OPENER_SHARE = (
    0.30  # no opener may begin more than this share of the pool's messages (or barge-ins)
)
_OPENER_WORD = re.compile(r"[^\W\d_]+(?:['-][^\W\d_]+)*")


def opener(text: str) -> str:
    """How a user turn opens: its first word, lower-cased, without punctuation (an inner apostrophe
    or hyphen stays: "mm-hmm", "that's"), skipping the fillers of :data:`OPENER_FILLERS` ("Um, so
    ..." opens with "so"); "" when there is no such word."""
    return next((w for w in _OPENER_WORD.findall(_normal(text)) if w not in OPENER_FILLERS), "")


def opener_shares(texts: Iterable[str]) -> dict[str, float]:
    """Each opener's share of `texts`, the most frequent first (ties by name)."""
    counts = Counter(opener(t) for t in texts)
    total = sum(counts.values())
    return {w: n / total for w, n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))}


# ------------------------------------------------------------------------------------------------
# Validation


class _Check:
    """Error raising for one seed: knows the source and the seed's label."""

    def __init__(self, source: str, seed: str):
        self.source, self.seed = source, seed

    def fail(self, field: str, why: str) -> NoReturn:
        raise SeedFileError(self.source, self.seed, field, why)

    def keys(self, d: Any, allowed: Sequence[str], required: Sequence[str], path: str) -> Mapping:
        if not isinstance(d, Mapping):
            self.fail(path or "(seed)", f"expected an object, got {type(d).__name__}")
        prefix = f"{path}." if path else ""
        for k in d:
            if k not in allowed:
                self.fail(f"{prefix}{k}", f"unknown key; valid: {', '.join(allowed)}")
        for k in required:
            if d.get(k) is None:
                self.fail(f"{prefix}{k}", "missing")
        return d

    def text(self, v: Any, path: str) -> str:
        if not isinstance(v, str):
            self.fail(path, f"expected a string, got {type(v).__name__}")
        if not v.strip():
            self.fail(path, "empty")
        return v.strip()

    def words(self, v: Any, path: str) -> tuple[str, ...]:
        if v is None:
            return ()
        if not isinstance(v, list):
            self.fail(path, f"expected a list of words, got {type(v).__name__}")
        seen: set[str] = set()
        out = []
        for i, w in enumerate(v):
            w = self.text(w, f"{path}[{i}]")
            if not re.search(r"\w", w) or len(w) > MAX_WORD_CHARS:
                self.fail(f"{path}[{i}]", f"expected a word or short phrase, got {w!r}")
            if _normal(w) in seen:
                self.fail(f"{path}[{i}]", f"{w!r} listed twice")
            seen.add(_normal(w))
            out.append(w)
        return tuple(out)

    def spoken(self, v: Any, path: str, max_sentences: int) -> str:
        t = self.text(v, path)
        why = user_text_problem(t, max_sentences)
        if why:
            self.fail(path, why)
        return t

    def disjoint(self, a: tuple[str, ...], b: tuple[str, ...], path: str, names: str) -> None:
        both = {_normal(w) for w in a} & {_normal(w) for w in b}
        if both:
            self.fail(path, f"{sorted(both)[0]!r} is in both {names}")


def _parse_criterion(c: _Check, d: Any, path: str) -> Criterion:
    c.keys(d, _CRITERION_KEYS, ("criterion_id", "text"), path)
    cid = c.text(d["criterion_id"], f"{path}.criterion_id")
    if not _CRITERION_ID.match(cid):
        c.fail(
            f"{path}.criterion_id",
            f"{cid!r} is not an id (lower-case letters, digits, '.', '_', '-')",
        )
    require_any = c.words(d.get("require_any"), f"{path}.require_any")
    forbid = c.words(d.get("forbid"), f"{path}.forbid")
    if not require_any and not forbid:
        c.fail(path, "a criterion needs require_any or forbid words (its offline check)")
    c.disjoint(require_any, forbid, f"{path}.forbid", "require_any and forbid")
    scope = d.get("scope", "continuation")
    if scope not in SCOPES:
        c.fail(f"{path}.scope", f"unknown scope {scope!r}; valid: {', '.join(SCOPES)}")
    return Criterion(cid, c.text(d["text"], f"{path}.text"), require_any, forbid, scope)


def _presupposing(
    c: _Check, d: Mapping, key: str, path: str, max_sentences: int, text: str
) -> tuple[tuple[str, ...], str | None]:
    """The words `text` (field `key`) presupposes and its fallback wording: both or neither."""
    words = c.words(d.get(f"{key}_presupposes"), f"{path}.{key}_presupposes")
    if d.get(f"{key}_fallback") is None:
        if words:
            c.fail(
                f"{path}.{key}_fallback",
                f"missing (a {key} that presupposes earlier advice needs a wording that does not)",
            )
        return (), None
    if not words:
        c.fail(
            f"{path}.{key}_presupposes",
            f"missing (a fallback stands in for a {key} that presupposes "
            f"something: name the words it needs the assistant to have said)",
        )
    fallback = c.spoken(d[f"{key}_fallback"], f"{path}.{key}_fallback", max_sentences)
    if _bare(fallback) == _bare(text):
        c.fail(
            f"{path}.{key}_fallback",
            f"the same as the {key}; the fallback must drop the presupposition",
        )
    return words, fallback


def _parse_exchange(c: _Check, d: Any, path: str, position: int) -> ExchangeScript:
    c.keys(d, _EXCHANGE_KEYS, ("index", "message"), path)
    index = d["index"]
    if not isinstance(index, int) or isinstance(index, bool) or index != position:
        c.fail(
            f"{path}.index",
            f"expected {position} (exchanges are numbered from one, in order), got {index!r}",
        )
    message = c.spoken(d["message"], f"{path}.message", MAX_MESSAGE_SENTENCES)
    evidence = c.words(d.get("evidence"), f"{path}.evidence")
    stale = c.words(d.get("stale"), f"{path}.stale")
    raw_criteria = d.get("criteria", [])
    if not isinstance(raw_criteria, list):
        c.fail(f"{path}.criteria", f"expected a list, got {type(raw_criteria).__name__}")
    criteria = tuple(
        _parse_criterion(c, x, f"{path}.criteria[{i}]") for i, x in enumerate(raw_criteria)
    )
    label, barge_in = d.get("barge_in_label"), d.get("barge_in")
    if position == 1:
        for key in (
            "barge_in_label",
            "barge_in",
            "barge_in_presupposes",
            "barge_in_fallback",
            "evidence",
            "stale",
        ):
            if d.get(key):
                c.fail(f"{path}.{key}", "exchange one sets the context and has no barge-in")
        for key in ("message_presupposes", "message_fallback"):
            if d.get(key) is not None:
                c.fail(f"{path}.{key}", "exchange one has no earlier assistant text to presuppose")
        return ExchangeScript(index, message, criteria=criteria)
    m_words, m_fallback = _presupposing(c, d, "message", path, MAX_MESSAGE_SENTENCES, message)
    if label is None:
        c.fail(f"{path}.barge_in_label", "missing (every exchange after the first has a barge-in)")
    if label not in BARGE_IN_LABELS:
        c.fail(
            f"{path}.barge_in_label",
            f"unknown label {label!r}; valid: {', '.join(BARGE_IN_LABELS)}",
        )
    if barge_in is None:
        c.fail(f"{path}.barge_in", "missing (every exchange after the first has a barge-in)")
    barge_in = c.spoken(barge_in, f"{path}.barge_in", MAX_BARGE_IN_SENTENCES)
    b_words, b_fallback = _presupposing(c, d, "barge_in", path, MAX_BARGE_IN_SENTENCES, barge_in)
    # Any barge-in wording may follow any message wording, so every pair is checked.
    cuts = [("barge_in", barge_in, "the barge-in itself")]
    if b_fallback is not None:
        cuts.append(("barge_in_fallback", b_fallback, "the barge-in's fallback"))
    for field, cut, _ in cuts:
        if any(_bare(cut) in _bare(m) for m in (message, m_fallback) if m is not None):
            c.fail(f"{path}.{field}", "repeats the message; a barge-in must bring new information")
    if not evidence:
        c.fail(f"{path}.evidence", "missing (the words that show the new information was taken up)")
    c.disjoint(evidence, stale, f"{path}.stale", "evidence and stale")
    # A correct continuation may echo the barge-in's own words, so those cannot mark a stale reply.
    for key, words in [("stale", stale)] + [
        (f"criteria[{j}].forbid", k.forbid) for j, k in enumerate(criteria)
    ]:
        for _, cut, where in cuts:
            echoed = mentions(cut, words)
            if echoed:
                c.fail(f"{path}.{key}", f"{echoed[0]!r} is said in {where}")
    if len(criteria) < MIN_CRITERIA:
        c.fail(
            f"{path}.criteria",
            f"{len(criteria)} criteria; an interrupted exchange needs at least {MIN_CRITERIA}",
        )
    return ExchangeScript(
        index,
        message,
        label,
        barge_in,
        evidence,
        stale,
        criteria,
        m_words,
        m_fallback,
        b_words,
        b_fallback,
    )


def _parse_seed(d: Any, source: str, fallback: str) -> Seed:
    sid = d.get("seed_id") if isinstance(d, Mapping) else None
    c = _Check(source, sid if isinstance(sid, str) and _SEED_ID.match(sid) else fallback)
    c.keys(
        d,
        _SEED_KEYS,
        ("seed_id", "topic", "subtopic", "topic_description", "persona", "exchanges"),
        "",
    )
    sid = c.text(d["seed_id"], "seed_id")
    if not _SEED_ID.match(sid):
        c.fail(
            "seed_id", f"{sid!r} is not an id (lower-case letters, digits, '_', '-'; at most 80)"
        )
    axis = d.get("axis", "DSR")
    if axis not in AXES:
        c.fail("axis", f"unknown axis {axis!r}; valid: {', '.join(AXES)}")
    raw = d["exchanges"]
    if not isinstance(raw, list):
        c.fail("exchanges", f"expected a list, got {type(raw).__name__}")
    if len(raw) < MIN_EXCHANGES:
        c.fail("exchanges", f"{len(raw)} exchanges; a seed needs at least {MIN_EXCHANGES}")
    exchanges = tuple(_parse_exchange(c, x, f"exchanges[{i}]", i + 1) for i, x in enumerate(raw))
    # The user's words (every wording) up to each exchange: an assistant that echoes them shows no
    # advice, so a presupposition cannot rest on them; and evidence must be new, or it proves nothing.
    heard = ""
    for i, ex in enumerate(exchanges):
        for key, words in (
            ("message_presupposes", ex.message_presupposes),
            ("barge_in_presupposes", ex.barge_in_presupposes),
        ):
            for j, w in enumerate(words):
                if mentions(heard, (w,)):
                    c.fail(
                        f"exchanges[{i}].{key}[{j}]",
                        f"{w!r} is in the user's earlier words; an assistant "
                        f"repeating it shows no advice",
                    )
        messages, cuts = ex.variants()
        heard += " " + " ".join(messages)
        for j, w in enumerate(ex.evidence):
            if mentions(heard, (w,)):
                c.fail(
                    f"exchanges[{i}].evidence[{j}]", f"{w!r} is already in the user's earlier words"
                )
        heard += " " + " ".join(cuts)
    seen: dict[str, str] = {}
    for i, ex in enumerate(exchanges):
        for j, crit in enumerate(ex.criteria):
            path = f"exchanges[{i}].criteria[{j}].criterion_id"
            if crit.criterion_id in seen:
                c.fail(path, f"duplicate id {crit.criterion_id!r} (also {seen[crit.criterion_id]})")
            seen[crit.criterion_id] = path
    return Seed(
        sid,
        c.text(d["topic"], "topic"),
        c.text(d["subtopic"], "subtopic"),
        c.text(d["topic_description"], "topic_description"),
        c.text(d["persona"], "persona"),
        axis,
        c.words(d.get("task_keywords"), "task_keywords"),
        exchanges,
    )


# ------------------------------------------------------------------------------------------------
# Files


def _json_error(source: str, e: json.JSONDecodeError, line: int | None = None) -> SeedFileError:
    return SeedFileError(
        source, None, "(json)", f"invalid JSON at line {line or e.lineno} column {e.colno}: {e.msg}"
    )


def _raw_items(path: Path) -> list[tuple[str, str, Any]]:
    """(source, fallback seed label, object) per seed in the file."""
    source = str(path)
    suffix = path.suffix.lower()
    if suffix not in (".json", ".jsonl"):
        raise SeedFileError(source, None, "(file)", "expected a .json or .jsonl seed file")
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as e:
        raise SeedFileError(source, None, "(file)", f"cannot read: {e.strerror or e}") from None
    except UnicodeDecodeError:
        raise SeedFileError(source, None, "(file)", "not UTF-8 text") from None
    if suffix == ".jsonl":
        items = []
        for n, line in enumerate(text.splitlines(), 1):
            if line.strip():
                try:
                    items.append((f"{source}:{n}", f"on line {n}", json.loads(line)))
                except json.JSONDecodeError as e:
                    raise _json_error(source, e, n) from None
        return items
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as e:
        raise _json_error(source, e) from None
    if isinstance(doc, Mapping):
        for k in doc:
            if k not in ("version", "seeds"):
                raise SeedFileError(source, None, k, "unknown key; valid: version, seeds")
        if doc.get("version", FORMAT_VERSION) != FORMAT_VERSION:
            raise SeedFileError(
                source,
                None,
                "version",
                f"unsupported version {doc['version']!r}; this fdeval reads {FORMAT_VERSION}",
            )
        doc = doc.get("seeds")
        if not isinstance(doc, list):
            raise SeedFileError(source, None, "seeds", "expected a list of seeds")
    elif not isinstance(doc, list):
        raise SeedFileError(
            source, None, "(file)", "expected a list of seeds or an object with 'seeds'"
        )
    return [(source, f"#{i + 1}", x) for i, x in enumerate(doc)]


def load_seeds(path: str | Path | None = None) -> list[Seed]:
    """Read and validate a seed file (None: the shipped pool)."""
    p = Path(path) if path is not None else SEEDS_FILE
    seeds: list[Seed] = []
    where: dict[str, str] = {}
    for source, fallback, raw in _raw_items(p):
        s = _parse_seed(raw, source, fallback)
        if s.seed_id in where:
            raise SeedFileError(
                source, s.seed_id, "seed_id", f"duplicate id (also seed {where[s.seed_id]})"
            )
        where[s.seed_id] = fallback
        seeds.append(s)
    if not seeds:
        raise SeedFileError(str(p), None, "seeds", "the file holds no seeds")
    return seeds


def load_pool(files: Sequence[str | Path | None]) -> list[Seed]:
    """Several seed files as one pool, in order; "shipped" (or None) names the shipped pool."""
    seeds: list[Seed] = []
    origin: dict[str, str] = {}
    for f in files:
        path = SEEDS_FILE if f is None or str(f) == SHIPPED else Path(f)
        for s in load_seeds(path):
            if s.seed_id in origin:
                raise SeedFileError(
                    str(path), s.seed_id, "seed_id", f"already defined in {origin[s.seed_id]}"
                )
            origin[s.seed_id] = str(path)
            seeds.append(s)
    if not seeds:
        raise ConfigError("no seed files given")
    return seeds


# ------------------------------------------------------------------------------------------------
# Rotation and identity


def _feasible(counts: Mapping[str, int], prev: str | None) -> bool:
    """Whether the remaining seeds can still be ordered with no topic twice in a row after `prev`."""
    total = sum(counts.values())
    return all(m <= (total // 2 if t == prev else (total + 1) // 2) for t, m in counts.items())


def rotate(seeds: list[Seed], n: int, seed: int) -> list[Seed]:
    """`n` seeds for `n` conversations: round-robin over the topics in an order shuffled by `seed`,
    so consecutive conversations differ in topic and the first ones cover as many topics as they can.
    Every seed is used once per cycle; when `n` exceeds the pool the cycles repeat, each reshuffled."""
    if n < 0:
        raise ValueError(f"rotate: n must be >= 0, got {n}")
    if n and not seeds:
        raise ValueError("rotate: no seeds")
    rng = random.Random(seed)
    by_topic: dict[str, list[Seed]] = {}
    for s in seeds:
        by_topic.setdefault(s.topic, []).append(s)
    topics = sorted(by_topic)
    out: list[Seed] = []
    prev: str | None = None
    while len(out) < n:
        rank = {t: i for i, t in enumerate(rng.sample(topics, len(topics)))}
        queues = {t: rng.sample(by_topic[t], len(by_topic[t])) for t in topics}
        used = dict.fromkeys(topics, 0)
        while len(out) < n and any(queues.values()):
            counts = {t: len(q) for t, q in queues.items() if q}
            order = sorted(counts, key=lambda t: (used[t], rank[t]))
            t = next(
                (t for t in order if t != prev and _feasible({**counts, t: counts[t] - 1}, t)), None
            )
            if t is None:  # no order avoids a repeat (one topic dominates): spread the largest
                t = max(order, key=lambda t: (t != prev, counts[t], -rank[t]))
            out.append(queues[t].pop())
            used[t] += 1
            prev = t
    return out


def pool_hash(seeds: Iterable[Seed]) -> str:
    """Short sha256 of the pool's canonical JSON (order included: rotation depends on it)."""
    canon = json.dumps(
        [s.to_dict() for s in seeds], sort_keys=True, separators=(",", ":"), ensure_ascii=False
    )
    return hashlib.sha256(canon.encode("utf-8")).hexdigest()[:12]
