"""A deterministic judge: the Instruct-FD judge criteria (paper A.11) as timing and word rules.

It follows the steps of the paper's LLM judge (degenerate check, the instruction as rules, a
timeline of events, a check of each rule, a verdict) and decides every step from word times, the
played user turns, the reference turns (with their punctuation) and the reference trigger points.
It needs no model and gives the same verdict for the same input, so it serves as the default
judge, a baseline for an LLM judge, and a test oracle. ``docs/judging.md`` lists each rule and
threshold with its A.11 basis.

Vocabulary used below:

* *utterance*: consecutive model words less than ``utterance_gap_s`` apart.
* *speech span* of a user turn: first word start to last played word end.
* *clause boundary*: the end of a reference user word that ends in ``, ; . ? !`` (punctuation read
  from the turn's words, or from its text where the words carry none), on the session clock.
* *words remaining* at time t: the reference words of that user turn (``n_words_total``) minus
  those whose start lies before t. Words the user never played (a turn cut short) count as
  remaining: the user stopping early is itself the sign of an interruption (A.11 step 4).
* A model utterance that starts inside a take-turn's speech span is classified as
  - an *early take-turn* when at most ``take_turn_max_remaining_words`` words remain, or when the
    turn was played to its end, at most ``end_overlap_max_words`` words remain and the utterance
    runs past the user's last word;
  - else a *backchannel* when it has at most ``backchannel_max_words`` words and ends before the
    user stops speaking (judged against *interrupt*, a short utterance that names something the
    trigger is about, "no it's canberra", is an interruption instead: see `_is_short_correction`);
  - else an *interruption*.

Content checks (no model; word lists below, all lower-case, compared after `_lemma`):

* *content words*: tokens that are not function words, fillers or acknowledgement words.
* interrupt: the interruption is relevant when it shares a content word with the trigger's
  reference phrase or the user's words of the claim's clause and the clause before it, or
  carries a correction cue ("wrong", "you said", "not right", ...).
* acknowledge: the response adapts when it is not the pre-interruption speech resumed (share of
  its word n-grams found in that speech) and shares a content word with the user's interruption.
* continue: the continuation ends its thought when it has more than one word and does not end on
  a word that leaves a sentence open ("the", "and", "to", ...).

Where content cannot be decided (no content words to compare), ``checks["content_decided"]`` is
False, the reasoning says so, and the verdict rests on timing; that check never fails a verdict.
"""

from __future__ import annotations

import difflib
import hashlib
import json
import math
import re
from bisect import bisect_left
from dataclasses import asdict, dataclass, field, fields
from typing import Callable

from fdeval.benchmarks.instructfd.judges.base import Judge
from fdeval.benchmarks.instructfd.records import POLICIES, Verdict
from fdeval.errors import ConfigError
from fdeval.types import PlayedTurn, TestCase, Transcript, Turn, Word

RULES_VERSION = "2"
EPS_S = 1e-6
ONE_WORD_S = 0.5  # about one spoken word: a backchannel "at" a clause boundary may start this early


@dataclass(frozen=True)
class Thresholds:
    """The rule parameters (seconds, word counts, a fraction). Every field is a `RulesJudge` keyword.

    fdeval/conf/judge/rules.yaml lists the same values (a test keeps the two equal).
    """

    # A.11 transcript format: "(cont.)" lines follow "with NO pause"; Continue allows pauses up
    # to "~1 second" inside one speech act.
    utterance_gap_s: float = 1.0
    # A.11 Backchannel: "strictly fewer than 4 words. More than that counts as an interruption."
    backchannel_max_words: int = 3
    # A.11 Interrupt timing step 4: "within the last 3 words of the full turn" is no interrupt.
    take_turn_max_remaining_words: int = 3
    # A.11 Listen edge case: overlap "only at the very end of the turn (at most 5 words)".
    end_overlap_max_words: int = 5
    # A.11 Backchannel timing: "close proximity" to the trigger, or "at a nearby clause
    # boundary"; 2 s is A.11's reaction time (Yield, Continue) and is used around both.
    backchannel_window_s: float = 2.0
    # A.11 gives no upper bound for an interruption: the interrupt instructions say
    # "immediately". A.11's reaction time (2 s, Yield/Continue) plus one spoken word (0.5 s).
    interrupt_max_delay_s: float = 2.5
    # A.11 Continue: "A silence gap of <2s after USER backchannel is acceptable".
    continue_max_gap_s: float = 2.0
    # A.11 Continue: "a single word ... after the backchannel does NOT count".
    continue_min_words: int = 2
    # A.11 Yield: "An overlap of <2s after USER barges in is acceptable reaction time."
    yield_max_overlap_s: float = 2.0
    # A.11 Adapt: "requires meaningful content after USER interruption"; one word is not.
    acknowledge_min_words: int = 2
    # A.11 Adapt: "Simply resuming the same pre-interruption plan is NOT adapting": the response
    # is that plan resumed when at least this share of its word n-grams was said before.
    resume_overlap: float = 0.5
    resume_ngram: int = 3  # n of those n-grams (3: a repeated phrase, not a repeated word)
    # Not from A.11: slack for placing user words that carry no turn index (parsed transcripts).
    word_turn_tolerance_s: float = 0.3


_INT_FIELDS = {f.name for f in fields(Thresholds) if f.type in (int, "int")}
_POSITIVE = ("utterance_gap_s", "resume_ngram")
_FRACTIONS = ("resume_overlap",)


class _Unjudgeable(Exception):
    """The pair cannot be judged; becomes an "error" verdict."""


# --------------------------------------------------------------------------------------------
# Words: the lists the content checks read (lemmas, see `_lemma`)

# Function words and fillers: never evidence of content.
_FUNCTION = frozenset(
    """
a an the this that these those there here it its it's i i'm i've i'd i'll me my mine we we're we've us our
you you're you've you'd you'll your yours he he's him his she she's her they they're them their theirs
is are was were be been being am do does did doing done have has had having can can't could couldn't will
won't would wouldn't shall should shouldn't may might must isn't aren't wasn't weren't don't doesn't didn't
haven't hasn't hadn't let's that's what's who's where's how's here's there's
and but or nor so because if then than as of to in on at for with from by about into onto over under up
down out off through between after before again also just only even very really quite too more most less
some any all each every no not yes yeah yep okay ok oh ah uh um hm hmm mm mhm huh well like kind sort
what which who whom whose when where why how now then thing things stuff get got go going gonna wanna
say said tell know think want need see look make let one
wait hold hang hey listen sec actually excuse pardon anyway guess maybe meant else
something anything everything nothing someone anyone everyone somebody anybody last next first other same
hello hi
""".split()
)
# Acknowledgement words (A.11 Backchannel examples and their kin): a short utterance made only of
# these and function words is a backchannel, never a short correction.
_ACK = frozenset(
    """
mm-hmm uh-huh mhm sure right gotcha alright great good nice cool wow totally exactly true absolutely
definitely sound sounds sense makes ahead course interesting glad sorry understand see
""".split()
)
# Words that leave a sentence open when it stops on them (A.11 Continue: "cut off, incomplete, or
# trails off mid-sentence"). Words that often end a spoken sentence ("then", "so", "up") are not here.
_DANGLING = frozenset(
    """
a an the my your his her our their its of to for with from by into onto and but or nor because if than
as um uh er is are was were
""".split()
)
# Words a model opens with when it carries a cut-off sentence on ("... given your [user] and ...").
_CONTINUING = _DANGLING | frozenset("then so which that who where when".split())
_FILLERS = frozenset("um uh er hm hmm mm ah oh".split())
# Correction cues: an interruption that flags an error or a contradiction (the interrupt
# instructions' purpose) is relevant even when it names nothing the user said.
_CUE_WORDS = frozenset(
    """
wrong incorrect mistake mistaken untrue contradict contradicts contradicting contradiction opposite
inconsistent earlier said mentioned careful dangerous unsafe risky hazard
""".split()
)
_CUE_BIGRAMS = frozenset(
    {
        ("not", "right"),
        ("not", "true"),
        ("not", "correct"),
        ("not", "safe"),
        ("isn't", "right"),
        ("isn't", "true"),
        ("thought", "you"),
    }
)
# Repair requests: an interruption whose content words are all of these asks the model to repeat
# or to re-explain its own speech, not to take up something new (the responsive short-signal
# scenarios). After a repeat request or a hearing check, saying the old plan again is the right answer.
_REPEAT_ASK = frozenset(
    "again repeat missed catch hear heard cut breaking working mic testing lose".split()
)
_STOP_ASK = frozenset(
    "wait hold hang stop".split()
)  # a content-free "wait, wait" asks the model to stop, not to repeat
_CONFUSED_ASK = frozenset(
    """
lost follow following confused confusing understand plain simple simpler simply easier mean means explain
clarify words put slow slower slowly head went complicated technical
""".split()
)
# Phrases that give the floor back: after a user backchannel they are yielding, not continuing.
_FLOOR_GIVING = (
    ("go", "ahead"),
    ("you", "go"),
    ("what's", "up"),
    ("you", "were", "saying"),
    ("sorry", "what"),
    ("what", "was", "that"),
    ("did", "you", "say"),
    ("oh", "sorry"),
)
_CLAUSE_END = ",;.?!"
_TOKEN_RE = re.compile(r"[^\w'’-]+")


def _norm(token: str) -> str:
    """Lower-case, typographic apostrophe made plain, surrounding punctuation removed."""
    return _TOKEN_RE.sub("", token.lower().replace("’", "'")).strip("'-")


def _lemma(token: str) -> str:
    """A crude, deterministic stem: plural and -ing/-ed endings off ("chairs" and "chair" match)."""
    w = _norm(token)
    if w.endswith("'s"):
        w = w[:-2]
    for suffix, repl, min_len in (
        ("ies", "y", 5),
        ("sses", "ss", 5),
        ("ing", "", 6),
        ("ed", "", 5),
        ("s", "", 4),
    ):
        if (
            len(w) >= min_len
            and w.endswith(suffix)
            and not (suffix == "s" and w.endswith(("ss", "us", "is")))
        ):
            stem = w[: len(w) - len(suffix)] + repl
            if (
                suffix in ("ing", "ed")
                and len(stem) > 2
                and stem[-1] == stem[-2]
                and stem[-1] not in "aeiouls"
            ):
                stem = stem[:-1]  # "running" -> "run", "planned" -> "plan"
            return stem
    return w


def _content(tokens) -> set[str]:
    """The content lemmas of `tokens` (function, filler and acknowledgement words left out)."""
    out = set()
    for t in tokens:
        n = _norm(t)
        if n and n not in _FUNCTION and n not in _ACK and _lemma(n) not in _ACK:
            out.add(_lemma(n))
    return out


_REPEAT_LEMMAS = frozenset(_lemma(w) for w in _REPEAT_ASK)
_CONFUSED_LEMMAS = frozenset(_lemma(w) for w in _CONFUSED_ASK)
_REPAIR_ASK = _REPEAT_LEMMAS | _CONFUSED_LEMMAS


def _cues(tokens) -> list[str]:
    """Correction cues in `tokens`, as said."""
    ns = [_norm(t) for t in tokens]
    found = [n for n in ns if n in _CUE_WORDS]
    found += [f"{a} {b}" for a, b in zip(ns, ns[1:]) if (a, b) in _CUE_BIGRAMS]
    return found


def _phrase_in(tokens, phrases) -> str:
    """The first of `phrases` (tuples of words) that occurs in `tokens`, as said ("" if none)."""
    ns = [_norm(t) for t in tokens]
    for i in range(len(ns)):
        for p in phrases:
            if tuple(ns[i : i + len(p)]) == p:
                return " ".join(tokens[i : i + len(p)])
    return ""


def _dangling_end(tokens) -> bool:
    """The last word leaves the sentence open (or is cut: "-", "—", "," at its end)."""
    if not tokens:
        return False
    last = tokens[-1].strip()
    if last.endswith((".", "?", "!")):
        return False
    if last.endswith((",", "-", "—", "…")):
        return True
    return _norm(last) in _DANGLING


def _ngrams(tokens, n: int) -> list[tuple[str, ...]]:
    ns = [_norm(t) for t in tokens if _norm(t)]
    return [tuple(ns[i : i + n]) for i in range(len(ns) - n + 1)]


def _quote(tokens, k: int = 8) -> str:
    tokens = list(tokens)
    return '"' + " ".join(tokens[:k]) + (" ..." if len(tokens) > k else "") + '"'


def _listing(words: set[str] | list[str], k: int = 6, said=()) -> str:
    """Quoted, sorted `words`; lemmas are shown as first said in `said` where they occur there."""
    surface = {}
    for t in said:
        surface.setdefault(_lemma(t), _norm(t))
    items = sorted(surface.get(w, w) for w in words) if isinstance(words, set) else list(words)
    return ", ".join(f'"{w}"' for w in items[:k]) + (
        f" and {len(items) - k} more" if len(items) > k else ""
    )


def _clause_ends(turn: Turn) -> list[bool]:
    """For each word of `turn`, whether it ends a clause (its own punctuation, else the text's)."""
    words = [w.text for w in turn.words]
    if any(w.rstrip()[-1:] in _CLAUSE_END for w in words if w.strip()):
        return [w.rstrip()[-1:] in _CLAUSE_END for w in words]
    tokens = turn.text.split()
    ends = [False] * len(words)
    sm = difflib.SequenceMatcher(
        None, [_norm(t) for t in tokens], [_norm(w) for w in words], autojunk=False
    )
    for op, i1, i2, j1, j2 in sm.get_opcodes():
        if op == "equal":
            for i, j in zip(range(i1, i2), range(j1, j2)):
                ends[j] = tokens[i][-1:] in _CLAUSE_END
        elif (
            op == "replace" and j2 > j1
        ):  # e.g. "highinterest" for "high-interest": the block's end
            ends[j2 - 1] = tokens[i2 - 1][-1:] in _CLAUSE_END
    return ends


# --------------------------------------------------------------------------------------------
# The session, as the rules see it


@dataclass
class _Utterance:
    first: int  # index of its first word in the sorted model words
    words: list[Word]

    @property
    def start_s(self) -> float:
        return self.words[0].start_s

    @property
    def end_s(self) -> float:
        return max(w.end_s for w in self.words)

    @property
    def n(self) -> int:
        return len(self.words)

    @property
    def tokens(self) -> list[str]:
        return [w.text for w in self.words]

    def preview(self, k: int = 8) -> str:
        return _quote(self.tokens, k)

    def span(self) -> str:
        return f"[{self.start_s:.2f}-{self.end_s:.2f}]"


@dataclass
class _Cue:
    """A reference trigger of a user turn on the session clock, with what the reference says there."""

    kind: str
    t: float
    word_index: int | None = None  # user words spoken before it (None: not known)
    phrase: str = ""


@dataclass
class _UserTurn:
    played: PlayedTurn
    spans: list[tuple[float, float, str]]  # played words (start, end, text), session clock, sorted
    n_total: int
    cues: list[_Cue]
    script: list[tuple[float, float, str]] = field(
        default_factory=list
    )  # reference words, session clock
    clause_end: list[bool] = field(default_factory=list)  # per reference word
    starts: list[float] = field(init=False)

    def __post_init__(self) -> None:
        self.spans.sort()
        self.starts = [s for s, _, _ in self.spans]

    @property
    def index(self) -> int:
        return self.played.index

    @property
    def speech_start(self) -> float:
        return self.spans[0][0] if self.spans else self.played.start_s

    @property
    def speech_end(self) -> float:
        return max(e for _, e, _ in self.spans) if self.spans else self.played.end_s

    @property
    def tokens(self) -> list[str]:
        return [w for _, _, w in self.spans]

    @property
    def is_take_turn(self) -> bool:
        return self.played.turn_type == "take-turn"

    def is_barge_in(self, subtype: str) -> bool:
        return self.played.turn_type == "barge-in" and self.played.subtype == subtype

    @property
    def played_fully(self) -> bool:
        return not self.played.cut_short and self.played.n_words_played >= self.n_total

    def remaining(self, t: float) -> int:
        """Reference words of this turn not yet begun at session time `t`."""
        if self.spans:
            delivered = bisect_left(self.starts, t - EPS_S)
        else:  # no word times at all: assume an even pace over the played span
            dur = max(self.played.end_s - self.played.start_s, EPS_S)
            frac = min(max((t - self.played.start_s) / dur, 0.0), 1.0)
            delivered = int(self.played.n_words_played * frac)
        return max(self.n_total - delivered, 0)

    # -- clauses (from the reference words' punctuation) ----------------------------------------
    def boundaries(self) -> list[float]:
        """Ends of the played clause-final words, session clock."""
        n = min(self.played.n_words_played, len(self.script))
        return [self.script[i][1] for i in range(n) if self.clause_end[i]]

    def clause_range(self, last: int) -> tuple[int, int]:
        """(first, last) reference word index of the clause that holds word `last`."""
        first = last
        while first > 0 and not self.clause_end[first - 1]:
            first -= 1
        end = last
        while end < len(self.script) - 1 and not self.clause_end[end]:
            end += 1
        return first, end

    def describe(self) -> str:
        p = self.played
        kind = p.turn_type if p.turn_type == "take-turn" else f"{p.subtype} barge-in"
        cut = ", cut short" if p.cut_short else ""
        trig = "".join(f", {c.kind} trigger at {c.t:.2f}" for c in self.cues)
        nb = len(self.boundaries())
        clauses = f", {nb} clause boundar{'y' if nb == 1 else 'ies'}" if self.script else ""
        return (
            f"[{self.speech_start:.2f}-{self.speech_end:.2f}] USER turn {p.index} ({p.label}, {kind}): "
            f"{p.n_words_played} of {self.n_total} words played{cut}{trig}{clauses}"
        )


@dataclass
class _Event:
    """A model utterance that starts inside a user take-turn, and what it counts as."""

    utt: _Utterance
    turn: _UserTurn
    kind: str  # "backchannel" | "early take-turn" | "interruption"
    remaining: int
    why: str = ""  # why a short utterance counts as an interruption

    def describe(self) -> str:
        why = f", {self.why}" if self.why else ""
        return (
            f"{self.kind} {self.utt.preview(6)} in user turn {self.turn.index} at {self.utt.start_s:.2f} "
            f"({_n_words(self.utt.n)}{why}; {self.remaining} of {self.turn.n_total} user words still to come)"
        )


def _n_words(n: int) -> str:
    return f"{n} word" if n == 1 else f"{n} words"


def _offset(dt: float, what: str) -> str:
    return f"{abs(dt):.2f} s {'after' if dt >= 0 else 'before'} {what}"


def _case_turn(case: TestCase, index: int) -> Turn | None:
    return next((t for t in case.turns if t.index == index), None)


def _user_turns(case: TestCase, transcript: Transcript, tol: float) -> list[_UserTurn]:
    played = sorted(transcript.user_turns, key=lambda p: (p.start_s, p.index))
    spans: dict[int, list[tuple[float, float, str]]] = {p.index: [] for p in played}
    for w in transcript.words:
        if w.speaker != "user":
            continue
        if w.turn is not None and w.turn in spans:
            spans[w.turn].append((w.start_s, w.end_s, w.text))
            continue
        mid = (w.start_s + w.end_s) / 2  # no turn index (ASR, a parsed transcript): place by time
        home = [p for p in played if p.start_s - tol <= mid <= p.end_s + tol]
        if home:
            best = min(home, key=lambda p: abs((p.start_s + p.end_s) / 2 - mid))
            spans[best.index].append((w.start_s, w.end_s, w.text))
    out = []
    for p in played:
        scripted = _case_turn(case, p.index)
        script = (
            [(p.start_s + wt.start_s, p.start_s + wt.end_s, wt.text) for wt in scripted.words]
            if scripted is not None
            else []
        )
        s = (
            spans[p.index] or script[: p.n_words_played]
        )  # no user words in the transcript: the script's
        n_total = p.n_words_total or (len(scripted.words) if scripted else 0) or len(s)
        refs = list(case.data.turn_triggers(scripted.index)) if scripted is not None else []
        cues = []
        if p.triggers_s:
            for (
                kind,
                t,
            ) in p.triggers_s:  # match each played trigger to the case's (phrase, word index)
                same = [tr for tr in refs if tr.kind == kind]
                ref = min(same, key=lambda tr: abs(p.start_s + tr.at_s - t)) if same else None
                cues.append(
                    _Cue(kind, t, ref.word_index if ref else None, ref.phrase if ref else "")
                )
        else:
            cues = [
                _Cue(tr.kind, p.start_s + tr.at_s, tr.word_index, tr.phrase)
                for tr in refs
                if p.start_s + tr.at_s < p.end_s
            ]
        ends = _clause_ends(scripted) if scripted is not None else []
        out.append(_UserTurn(p, list(s), n_total, sorted(cues, key=lambda c: c.t), script, ends))
    return out


def _utterances(model_words: list[Word], gap_s: float) -> list[_Utterance]:
    utts: list[_Utterance] = []
    for i, w in enumerate(model_words):
        if utts and w.start_s - utts[-1].end_s < gap_s:
            utts[-1].words.append(w)
        else:
            utts.append(_Utterance(i, [w]))
    return utts


def _distance(u: _Utterance, t: float) -> float:
    if u.start_s <= t <= u.end_s:
        return 0.0
    return min(abs(u.start_s - t), abs(u.end_s - t))


# --------------------------------------------------------------------------------------------
# The judge

_RULE_TEXT: dict[str, Callable[[Thresholds], str]] = {
    "listen": lambda th: (
        "PROHIBITIVE: while the user holds the floor the model neither backchannels nor interrupts. "
        f"Starting the reply when at most {th.take_turn_max_remaining_words} words of the user turn are left "
        f"(or over at most {th.end_overlap_max_words} final words of a complete turn) "
        "is an early take-turn and allowed."
    ),
    "backchannel": lambda th: (
        "CONDITIONAL: at a backchannel trigger the model gives a short acknowledgement of at most "
        f"{th.backchannel_max_words} words without taking the floor, within {th.backchannel_window_s:g} s of the cue "
        "or of the clause boundary next to it. PROHIBITIVE: no interruption, and no backchannel away from every cue."
    ),
    "interrupt": lambda th: (
        "CONDITIONAL: at the interrupt trigger the model cuts in while the user still has more than "
        f"{th.take_turn_max_remaining_words} words to say, no earlier than the start of the clause that holds the "
        f"trigger's claim and no later than {th.interrupt_max_delay_s:g} s after the trigger, with meaningful content "
        "relevant to the trigger. PROHIBITIVE: no interruption outside that window or in other user turns, no "
        "backchannel away from the trigger."
    ),
    "continue": lambda th: (
        "CONDITIONAL: when the user backchannels while the model speaks, the model keeps the floor: it is never "
        f"silent for more than {th.continue_max_gap_s:g} s from the backchannel's onset, says at least "
        f"{th.continue_min_words} more words after it, and finishes the thought (does not stop mid-sentence)."
    ),
    "acknowledge": lambda th: (
        "CONDITIONAL: when the user interrupts the model, the model stops talking within "
        f"{th.yield_max_overlap_s:g} s of overlap (and does not talk over the user for longer in total), then answers "
        f"with at least {th.acknowledge_min_words} words that adapt to the interruption: they take up what the user "
        "said and are not the pre-interruption speech resumed."
    ),
}

_UNCHECKED: dict[str, str] = {
    "listen": "",
    "backchannel": (
        "Whether a short utterance is an acknowledgement or a short question is not told apart; "
        "both count as backchannels."
    ),
    "interrupt": (
        "Relevance is word overlap with the trigger's phrase and the user's nearby words, or a correction "
        "cue; a relevant interruption in other words (a synonym) is not seen."
    ),
    "continue": (
        "Whether the continuation finishes the thought is read from its last word only (the transcript has "
        "no punctuation); a sentence that stops on a content word is taken as finished."
    ),
    "acknowledge": (
        "Adaptation is word overlap with the user's interruption; a reply that takes it up in other words "
        "(a synonym, a paraphrase) is not seen as adapting."
    ),
}


class RulesJudge(Judge):
    """The Instruct-FD judge criteria (A.11) as deterministic rules (see the module docstring).

    Keyword arguments override fields of :class:`Thresholds`; they are part of `prompt_hash`.
    """

    id = "rules"
    version = RULES_VERSION
    limits = (
        "the rules judge reads content only as word overlap (with the trigger's reference phrase, the user's "
        "words and the model's own earlier speech) and a continuation's last word: it misses synonyms and "
        "paraphrases and cannot tell an acknowledgement from a short question; a verdict it could not decide "
        "on content rests on timing and says so (checks.content_decided = false)"
    )

    def __init__(self, **thresholds: float):
        valid = {f.name for f in fields(Thresholds)}
        unknown = sorted(set(thresholds) - valid)
        if unknown:
            raise ConfigError(
                f"judge: unknown rules threshold(s) {unknown}; valid: {sorted(valid)}"
            )
        clean: dict[str, float] = {}
        for name, value in thresholds.items():
            if (
                isinstance(value, bool)
                or not isinstance(value, (int, float))
                or not math.isfinite(value)
                or value < 0
            ):
                raise ConfigError(f"judge.{name}: expected a finite number >= 0, got {value!r}")
            if name in _INT_FIELDS and value != int(value):
                raise ConfigError(f"judge.{name}: expected a whole number of words, got {value!r}")
            if name in _POSITIVE and value <= 0:
                raise ConfigError(f"judge.{name}: must be > 0, got {value!r}")
            if name in _FRACTIONS and value > 1:
                raise ConfigError(
                    f"judge.{name}: a fraction, expected a number in [0, 1], got {value!r}"
                )
            clean[name] = int(value) if name in _INT_FIELDS else float(value)
        self.thresholds = Thresholds(**clean)  # type: ignore[arg-type]

    @property
    def prompt_hash(self) -> str:
        blob = json.dumps(
            {"judge": self.id, "version": self.version, "thresholds": asdict(self.thresholds)},
            sort_keys=True,
        )
        return hashlib.sha256(blob.encode()).hexdigest()[:16]

    # ----------------------------------------------------------------------------------------
    def judge(self, case: TestCase, policy: str, transcript: Transcript) -> Verdict:
        try:
            return self._judge(case, policy, transcript)
        except _Unjudgeable as e:
            return self.verdict(case.case_id, policy, "error", f"Not judged: {e}")

    def _judge(self, case: TestCase, policy: str, transcript: Transcript) -> Verdict:
        th = self.thresholds
        if policy not in POLICIES:
            raise _Unjudgeable(
                f"{policy!r} is not one of the instructions the rules know ({', '.join(POLICIES)})"
            )
        if transcript.case_id != case.case_id:
            raise _Unjudgeable(
                f"the transcript belongs to case {transcript.case_id!r}, not {case.case_id!r}"
            )
        if policy not in case.data.judge_policies:
            raise _Unjudgeable(
                f"case {case.case_id!r} is not judged against {policy!r} "
                f"(its judge policies: {', '.join(case.data.judge_policies) or 'none'})"
            )
        if not transcript.user_turns:
            raise _Unjudgeable("the transcript has no played user turns")

        model_words = sorted(
            (w for w in transcript.words if w.speaker == "model"),
            key=lambda w: (w.start_s, w.end_s),
        )
        turns = _user_turns(case, transcript, th.word_turn_tolerance_s)
        utts = _utterances(model_words, th.utterance_gap_s)
        events = self._classify(utts, turns, policy)
        checks: dict[str, bool] = {}
        out = [f"Judged by rules ({self.id} v{self.version}) against the '{policy}' instruction."]

        # Step 1: degenerate checks
        checks["model_has_speech"] = bool(model_words)
        unanswered = self._unanswered(turns, model_words)
        checks["every_turn_answered"] = not unanswered
        out.append(
            f"Step 1 - degenerate checks: model speech: {'yes' if model_words else 'no'} "
            f"({_n_words(len(model_words))}); every user turn answered (user backchannels aside): "
            + (
                "yes."
                if not unanswered
                else "no, no model reply after user turn(s) "
                + ", ".join(str(ut.index) for ut in unanswered)
                + "."
            )
        )
        if not all(checks.values()):
            out.append("Step 5 - verdict: not_adhere (degenerate session; no further checks).")
            return self.verdict(case.case_id, policy, "not_adhere", "\n".join(out), checks)

        self._require_stimulus(case, policy, turns)

        out.append(f"Step 2 - rules: {_RULE_TEXT[policy](th)}")
        out.append("Step 3 - timeline:")
        out.extend("  " + line for line in self._timeline(turns, utts, events))
        policy_checks, notes = getattr(self, f"_check_{policy}")(
            turns, utts, events, model_words, transcript
        )
        checks.update(policy_checks)
        out.append("Step 4 - rule checks:")
        for name, ok in policy_checks.items():
            if name == "content_decided":
                continue
            out.append(
                f"  {name}: {'yes' if ok else 'no'}"
                + (f" - {notes[name]}" if notes.get(name) else "")
            )
        if "content_decided" in policy_checks:
            out.append(
                "  Content: "
                + (
                    "decided from the words above."
                    if policy_checks["content_decided"]
                    else f"not decided ({notes['content_decided']}); this verdict rests on timing."
                )
            )
        if _UNCHECKED[policy]:
            out.append(f"  Not seen by rules: {_UNCHECKED[policy]}")
        failed = [k for k, ok in checks.items() if not ok and k != "content_decided"]
        label = "not_adhere" if failed else "adhere"
        out.append(
            f"Step 5 - verdict: {label}"
            + (f" (failed: {', '.join(failed)})." if failed else " (all rule checks hold).")
        )
        return self.verdict(case.case_id, policy, label, "\n".join(out), checks)

    # ----------------------------------------------------------------------------------------
    # Shared steps

    def _classify(
        self, utts: list[_Utterance], turns: list[_UserTurn], policy: str
    ) -> list[_Event]:
        th = self.thresholds
        events = []
        for u in utts:
            for ut in turns:
                if not ut.is_take_turn or not (
                    ut.speech_start - EPS_S <= u.start_s < ut.speech_end
                ):
                    continue
                rem = ut.remaining(u.start_s)
                why = ""
                if rem <= th.take_turn_max_remaining_words or (
                    rem <= th.end_overlap_max_words
                    and ut.played_fully
                    and u.end_s > ut.speech_end + EPS_S
                ):
                    kind = "early take-turn"
                elif u.n <= th.backchannel_max_words and u.end_s <= ut.speech_end + EPS_S:
                    kind = "backchannel"
                    named = self._short_correction(u, ut) if policy == "interrupt" else set()
                    if named:
                        kind, why = (
                            "interruption",
                            f"a short correction naming {_listing(named, said=u.tokens)}, not an acknowledgement",
                        )
                else:
                    kind = "interruption"
                events.append(_Event(u, ut, kind, rem, why))
                break
        return events

    def _short_correction(self, u: _Utterance, ut: _UserTurn) -> set[str]:
        """Content words a short utterance shares with the interrupt trigger it answers (empty: none)."""
        cue = next((c for c in ut.cues if c.kind == "interrupt"), None)
        if cue is None:
            return set()
        phrase, around = self._trigger_context(ut, cue)
        return _content(u.tokens) & (phrase | around)

    @staticmethod
    def _next_start(turns: list[_UserTurn], ut: _UserTurn, default: float) -> float:
        later = [o.speech_start for o in turns if o is not ut and o.speech_start > ut.speech_start]
        return min(later, default=default)

    def _unanswered(self, turns: list[_UserTurn], model_words: list[Word]) -> list[_UserTurn]:
        missing = []
        for ut in turns:
            if ut.is_barge_in("backchannel"):
                continue
            limit = self._next_start(turns, ut, math.inf)
            if not any(w.end_s > ut.speech_end + EPS_S and w.start_s < limit for w in model_words):
                missing.append(ut)
        return missing

    def _require_stimulus(self, case: TestCase, policy: str, turns: list[_UserTurn]) -> None:
        """The instruction's trigger must have been scripted and played, else the pair is unjudgeable."""
        if policy == "listen":
            return
        if policy in ("backchannel", "interrupt"):
            what = f"{policy} trigger"
            scripted = [
                t
                for t in case.turns
                if any(tr.kind == policy for tr in case.data.turn_triggers(t.index))
            ]
            present = [ut for ut in turns if any(c.kind == policy for c in ut.cues)]
        else:
            subtype = "backchannel" if policy == "continue" else "interrupt"
            what = f"user {subtype} barge-in"
            scripted = [t for t in case.turns if t.turn_type == "barge-in" and t.subtype == subtype]
            present = [ut for ut in turns if ut.is_barge_in(subtype)]
        played = {ut.index for ut in turns}
        missing = [t for t in scripted if t.index not in played]
        if missing:
            raise _Unjudgeable(
                f"scripted turn {missing[0].index} ({missing[0].label}, with the {what}) was not played"
            )
        if not present:
            raise _Unjudgeable(
                f"the session has no {what}, so the '{policy}' instruction was never put to the test"
            )

    def _timeline(
        self, turns: list[_UserTurn], utts: list[_Utterance], events: list[_Event]
    ) -> list[str]:
        by_utt = {id(e.utt): e for e in events}
        rows: list[tuple[float, int, str]] = [(ut.speech_start, 0, ut.describe()) for ut in turns]
        for u in utts:
            e = by_utt.get(id(u))
            if e is not None:
                what = e.describe()
            else:
                over = [
                    ut
                    for ut in turns
                    if not ut.is_take_turn
                    and u.start_s < ut.speech_end
                    and ut.speech_start < u.end_s
                ]
                before = [ut for ut in turns if ut.speech_end <= u.start_s + EPS_S]
                if over:
                    what = f"speaking while user barge-in {over[0].index} ({over[0].played.subtype}) happens"
                elif before:
                    what = f"turn after user turn {before[-1].index}"
                else:
                    what = "speaks first"
            rows.append((u.start_s, 1, f"{u.span()} MODEL {u.preview()} ({_n_words(u.n)}): {what}"))
        return [r[2] for r in sorted(rows, key=lambda r: (r[0], r[1]))]

    # ----------------------------------------------------------------------------------------
    # Cue windows

    def _cue_points(self, ut: _UserTurn, cue: _Cue) -> list[tuple[str, float]]:
        """Where a backchannel answers `cue`: the cue itself, the next clause boundary, and the
        boundary before it when the cue is not at a boundary itself (A.11: "a nearby clause boundary")."""
        bounds = ut.boundaries()
        near = 0.05  # a cue this close to a boundary sits on it (cut-in points are word ends)
        points = [("at the cue", cue.t)]
        nxt = next((b for b in bounds if b > cue.t + near), None)
        if nxt is not None:
            points.append(("at the next clause boundary", nxt))
        if not any(abs(b - cue.t) <= near for b in bounds):
            prev = next((b for b in reversed(bounds) if b < cue.t - near), None)
            if prev is not None:
                points.append(("at the clause boundary before the cue", prev))
        return points

    def _on_cue(self, e: _Event, kind: str) -> tuple[_Cue, str, float] | None:
        """The cue `e` answers: within the window of the cue (either side), or starting from one
        word before a clause boundary next to it to the window after that boundary."""
        win = self.thresholds.backchannel_window_s
        for cue in (c for c in e.turn.cues if c.kind == kind):
            for label, t in self._cue_points(e.turn, cue):
                if (
                    _distance(e.utt, t) <= win
                    if label == "at the cue"
                    else t - ONE_WORD_S <= e.utt.start_s <= t + win
                ):
                    return cue, label, t
        return None

    def _cue_note(self, e: _Event, kind: str) -> str:
        hit = self._on_cue(e, kind)
        if hit is not None:
            cue, label, t = hit
            where = "" if label == "at the cue" else f", {label} ({t:.2f})"
            return (
                f"{e.describe()}, {_offset(e.utt.start_s - cue.t, 'the cue')} at {cue.t:.2f}{where}"
            )
        cues = [c for c in e.turn.cues if c.kind == kind]
        if not cues:
            return f"{e.describe()}, in a turn without a {kind} trigger"
        cue = min(cues, key=lambda c: _distance(e.utt, c.t))
        pts = ", ".join(f"{t:.2f}" for _, t in self._cue_points(e.turn, cue))
        return (
            f"{e.describe()}, {_offset(e.utt.start_s - cue.t, 'the nearest cue')} at {cue.t:.2f}: more than "
            f"{self.thresholds.backchannel_window_s:g} s from the cue and its clause boundaries ({pts})"
        )

    def _interrupt_window(self, ut: _UserTurn, cue: _Cue) -> tuple[float, float, str]:
        """(earliest, latest, how the earliest was found) start of an interruption answering `cue`."""
        latest = cue.t + self.thresholds.interrupt_max_delay_s
        if cue.word_index and ut.script and cue.word_index <= len(ut.script) and any(ut.clause_end):
            first, _ = ut.clause_range(cue.word_index - 1)
            return (
                ut.script[first][0],
                latest,
                f"the start of the claim's clause ({_quote([w for _, _, w in ut.script[first : cue.word_index]], 6)})",
            )
        return (
            cue.t,
            latest,
            "the trigger (the reference turn has no punctuation, so its clauses are not known)",
        )

    def _trigger_context(self, ut: _UserTurn, cue: _Cue) -> tuple[set[str], set[str]]:
        """Content words of the trigger's reference phrase, and of the user's clause that holds the
        claim and the clause before it (the words "around the trigger")."""
        phrase = _content(cue.phrase.split())
        if cue.word_index and ut.script and cue.word_index <= len(ut.script):
            first, last = ut.clause_range(cue.word_index - 1)
            if first > 0:
                first, _ = ut.clause_range(first - 1)
            around = [w for _, _, w in ut.script[first : last + 1]]
        else:  # no reference words: the played words up to the trigger
            around = [w for s, _, w in ut.spans if s < cue.t]
        return phrase, _content(around)

    # ----------------------------------------------------------------------------------------
    # Policy checks: each returns ({check: ok}, {check: note})

    def _check_listen(self, turns, utts, events, model_words, transcript):
        bcs = [e for e in events if e.kind == "backchannel"]
        ints = [e for e in events if e.kind == "interruption"]
        checks = {"no_backchannel": not bcs, "no_interruption": not ints}
        notes = {
            "no_backchannel": "; ".join(e.describe() for e in bcs),
            "no_interruption": "; ".join(e.describe() for e in ints),
        }
        return checks, notes

    def _check_backchannel(self, turns, utts, events, model_words, transcript):
        th = self.thresholds
        bcs = [e for e in events if e.kind == "backchannel"]
        ints = [e for e in events if e.kind == "interruption"]
        on_cue = [e for e in bcs if self._on_cue(e, "backchannel")]
        stray = [e for e in bcs if not self._on_cue(e, "backchannel")]
        checks = {
            "backchannel_near_trigger": bool(on_cue),
            "no_interruption": not ints,
            "no_stray_backchannel": not stray,
        }
        cues = ", ".join(f"{c.t:.2f}" for ut in turns for c in ut.cues if c.kind == "backchannel")
        notes = {
            "backchannel_near_trigger": (
                self._cue_note(on_cue[0], "backchannel")
                if on_cue
                else f"no backchannel of at most {_n_words(th.backchannel_max_words)} within "
                f"{th.backchannel_window_s:g} s of a cue ({cues}) or of its clause boundaries"
            ),
            "no_interruption": "; ".join(e.describe() for e in ints),
            "no_stray_backchannel": "; ".join(self._cue_note(e, "backchannel") for e in stray),
        }
        return checks, notes

    def _check_interrupt(self, turns, utts, events, model_words, transcript):
        th = self.thresholds
        trig = {
            id(ut): (ut, next(c for c in ut.cues if c.kind == "interrupt"))
            for ut in turns
            if any(c.kind == "interrupt" for c in ut.cues)
        }
        windows = {k: self._interrupt_window(ut, cue) for k, (ut, cue) in trig.items()}
        ints = [e for e in events if e.kind == "interruption"]
        mine = [e for e in ints if id(e.turn) in trig]
        in_window = [
            e
            for e in mine
            if windows[id(e.turn)][0] - EPS_S <= e.utt.start_s <= windows[id(e.turn)][1] + EPS_S
        ]
        early = [e for e in mine if e.utt.start_s < windows[id(e.turn)][0] - EPS_S]
        late = [e for e in mine if e.utt.start_s > windows[id(e.turn)][1] + EPS_S]
        elsewhere = [e for e in ints if id(e.turn) not in trig]
        stray = [e for e in events if e.kind == "backchannel" and not self._on_cue(e, "interrupt")]

        def timing(e: _Event) -> str:
            lo, hi, how = windows[id(e.turn)]
            cue = trig[id(e.turn)][1]
            return (
                f"{e.describe()}, {_offset(e.utt.start_s - cue.t, 'the trigger')} at {cue.t:.2f} "
                f"(window {lo:.2f}-{hi:.2f}: from {how} to {th.interrupt_max_delay_s:g} s after the trigger)"
            )

        hits = {}
        for e in in_window:
            hits.setdefault(id(e.turn), e)
        relevant, decided, rel_notes, undecided = True, True, [], []
        for k, (ut, cue) in trig.items():
            e = hits.get(k)
            if e is None:  # nothing to judge: interrupted_in_window fails it
                rel_notes.append(f"user turn {ut.index}: no interruption in the window to judge")
                continue
            ok, known, note = self._relevance(e, ut, cue)
            relevant, decided = relevant and ok, decided and known
            rel_notes.append(note)
            if not known:
                undecided.append(note)
        windows_txt = "; ".join(
            f"user turn {ut.index}: {windows[k][0]:.2f}-{windows[k][1]:.2f}"
            for k, (ut, _) in trig.items()
        )
        checks = {
            "interrupted_in_window": set(hits) == set(trig),
            "interrupt_relevant": relevant,
            "no_early_interruption": not early,
            "no_late_interruption": not late,
            "no_interruption_elsewhere": not elsewhere,
            "no_stray_backchannel": not stray,
            "content_decided": decided,
        }
        notes = {
            "interrupted_in_window": ("; ".join(timing(e) for e in hits.values()) if hits else "")
            + (
                ""
                if checks["interrupted_in_window"]
                else ("; " if hits else "")
                + f"no interruption with more than {th.take_turn_max_remaining_words} user "
                f"words left inside the window ({windows_txt})"
            ),
            "interrupt_relevant": "; ".join(rel_notes),
            "no_early_interruption": "; ".join(timing(e) for e in early),
            "no_late_interruption": "; ".join(timing(e) for e in late),
            "no_interruption_elsewhere": "; ".join(e.describe() for e in elsewhere),
            "no_stray_backchannel": "; ".join(self._cue_note(e, "interrupt") for e in stray),
            "content_decided": "; ".join(undecided),
        }
        return checks, notes

    def _relevance(self, e: _Event, ut: _UserTurn, cue: _Cue) -> tuple[bool, bool, str]:
        """(relevant, decided, note) for the interruption `e` answering `cue` (A.11: "meaningful and
        relevant"; off-topic or meaningless interruptions fail)."""
        phrase, around = self._trigger_context(ut, cue)
        said = _content(e.utt.tokens)
        cues = _cues(e.utt.tokens)
        shared_p, shared_a = said & phrase, (said & around) - phrase
        what = f"the interruption {e.utt.preview(10)} ({_n_words(e.utt.n)})"
        if shared_p or shared_a or cues:
            parts = (
                (
                    [
                        f"shares {_listing(shared_p, said=e.utt.tokens)} with the "
                        f'trigger\'s reference phrase "{cue.phrase}"'
                    ]
                    if shared_p
                    else []
                )
                + (
                    [
                        f"shares {_listing(shared_a, said=e.utt.tokens)} with the user's words around the trigger"
                    ]
                    if shared_a
                    else []
                )
                + ([f"flags an error ({_listing(cues)})"] if cues else [])
            )
            return True, True, f"{what} is relevant: it " + " and ".join(parts)
        if not said:
            return False, True, f"{what} has no content word and no correction cue: not meaningful"
        if not (phrase or around):
            return (
                True,
                False,
                (
                    f"{what}: the trigger has no reference phrase and the user's words around it no "
                    "content word to compare with"
                ),
            )
        return (
            False,
            True,
            (
                f"{what} is off the trigger's topic: its content words "
                f"({_listing(said, said=e.utt.tokens)}) share none with "
                f"the reference phrase ({_listing(phrase) or 'none'}) or the user's words around the "
                f"trigger ({_listing(around)}), and it carries no correction cue"
            ),
        )

    @staticmethod
    def _per_turn(
        turns: list[_UserTurn],
        subtype: str,
        check: Callable[[_UserTurn], dict[str, tuple[bool, str]]],
    ):
        """Run `check` on every user barge-in of `subtype`; a check holds when it holds for all."""
        checks: dict[str, bool] = {}
        notes: dict[str, list[str]] = {}
        for ut in (t for t in turns if t.is_barge_in(subtype)):
            for name, (ok, note) in check(ut).items():
                checks[name] = checks.get(name, True) and ok
                notes.setdefault(name, []).extend([note] if note else [])
        return checks, {name: "; ".join(ns) for name, ns in notes.items()}

    def _check_continue(self, turns, utts, events, model_words, transcript):
        th = self.thresholds

        def check(ut: _UserTurn) -> dict[str, tuple[bool, str]]:
            b0, b1 = ut.speech_start, ut.speech_end
            next_turn = self._next_start(turns, ut, math.inf)
            limit = next_turn if next_turn < math.inf else max(transcript.duration_s, b1)
            cursor, n_after, pause, said = b0, 0, None, []
            for w in (w for w in model_words if w.end_s > b0 + EPS_S and w.start_s < limit):
                if w.start_s - cursor > th.continue_max_gap_s:
                    if n_after < th.continue_min_words:
                        pause = (cursor, w.start_s)
                    break
                n_after += w.start_s >= b1 - EPS_S
                said.append(w)
                cursor = max(cursor, w.end_s)
            if (
                pause is None
                and n_after < th.continue_min_words
                and limit - cursor > th.continue_max_gap_s
            ):
                pause = (cursor, limit)
            where = f"user backchannel {ut.index} [{b0:.2f}-{b1:.2f}]"
            pause_note = ""
            if pause is not None:
                end = f"{pause[1]:.2f}"
                if pause[1] == limit:
                    end = "the next user turn" if next_turn < math.inf else "the end of the session"
                pause_note = (
                    f"after {where} the model is silent from {pause[0]:.2f} to {end} "
                    f"({pause[1] - pause[0]:.2f} s)"
                )
            after = [w.text for w in said if w.start_s >= b1 - EPS_S]
            handover = _phrase_in(after[:6], _FLOOR_GIVING)
            enough = n_after >= th.continue_min_words and not handover
            if handover:
                cont_note = (
                    f'after {where} the model hands the floor to the user ("{handover}" in '
                    f"{_quote(after)}): that is yielding, not continuing"
                )
            elif enough:
                cont_note = f"after {where} the model says {_n_words(n_after)}: {_quote(after)}"
            else:
                cont_note = (
                    f"only {_n_words(n_after)} from the model after {where} (a single word or nothing does not "
                    f"continue; at least {th.continue_min_words} needed)"
                )
            tokens = [w.text for w in said]
            cut_at_end = bool(said) and said[-1].end_s >= transcript.duration_s - 0.05
            if not after:
                done, done_note = False, f"nothing said after {where}"
            elif cut_at_end:
                done, done_note = (
                    True,
                    f"the model is still speaking when the recording ends after {where}",
                )
            elif _dangling_end(tokens):
                done, done_note = (
                    False,
                    (
                        f'the continuation after {where} stops mid-sentence on "{tokens[-1]}" '
                        f"(... {' '.join(tokens[-4:])}), at {said[-1].end_s:.2f}"
                    ),
                )
            else:
                done, done_note = (
                    True,
                    f'the continuation ends on "{tokens[-1]}" at {said[-1].end_s:.2f}',
                )
            return {
                "no_long_pause_after_backchannel": (pause is None, pause_note),
                "continued_after_backchannel": (enough, cont_note),
                "continuation_complete": (done, done_note),
                "content_decided": (not cut_at_end, done_note if cut_at_end else ""),
            }

        return self._per_turn(turns, "backchannel", check)

    def _check_acknowledge(self, turns, utts, events, model_words, transcript):
        th = self.thresholds

        def check(ut: _UserTurn) -> dict[str, tuple[bool, str]]:
            i0, i1 = ut.speech_start, ut.speech_end
            held = next((u for u in utts if u.start_s <= i0 + EPS_S and u.end_s > i0 + EPS_S), None)
            held_s = held.end_s - i0 if held else 0.0
            overlap_s = sum(max(0.0, min(w.end_s, i1) - max(w.start_s, i0)) for w in model_words)
            where = f"user interruption {ut.index} [{i0:.2f}-{i1:.2f}]"
            lead = (
                f"the model was not speaking when {where} began"
                if held is None
                else f"the model went on {held_s:.2f} s into {where}"
            )
            yielded = held_s <= th.yield_max_overlap_s and overlap_s <= th.yield_max_overlap_s
            held_idx = set(range(held.first, held.first + held.n)) if held else set()
            limit = self._next_start(turns, ut, math.inf)
            prev_end = max(
                (o.speech_end for o in turns if o is not ut and o.speech_end <= i0 + EPS_S),
                default=-math.inf,
            )
            before = [
                w
                for i, w in enumerate(model_words)
                if w.start_s >= prev_end - EPS_S and (w.start_s < i0 - EPS_S or i in held_idx)
            ]
            resp = [
                w
                for i, w in enumerate(model_words)
                if i not in held_idx
                and w.start_s >= i0 - EPS_S
                and w.end_s > i1 + EPS_S
                and w.start_s < limit
            ]
            tokens = [w.text for w in resp]
            cut = _dangling_end(tokens)
            answered = len(resp) >= th.acknowledge_min_words and not cut
            if answered:
                resp_note = f"the model answers from {resp[0].start_s:.2f} with {_n_words(len(resp))}: {_quote(tokens)}"
            elif resp and cut:
                resp_note = (
                    f'the model\'s {_n_words(len(resp))} after {where} stop mid-sentence on "{tokens[-1]}" '
                    f"({_quote(tokens)}): it appears cut off"
                )
            else:
                resp_note = (
                    f"only {_n_words(len(resp))} from the model after {where} (a single word is not "
                    f"meaningful content; at least {th.acknowledge_min_words} needed)"
                )
            ok, known, adapt_note = self._adapts(ut, before, resp)
            return {
                "yielded": (yielded, f"{lead}; {overlap_s:.2f} s of overlap in all"),
                "responded_after_interruption": (answered, resp_note),
                "adapted_to_interruption": (ok, adapt_note),
                "content_decided": (known, "" if known else adapt_note),
            }

        return self._per_turn(turns, "interrupt", check)

    def _adapts(
        self, ut: _UserTurn, before: list[Word], resp: list[Word]
    ) -> tuple[bool, bool, str]:
        """(adapts, decided, note): the response after a user interruption takes up what the user
        said and is not the pre-interruption speech resumed (A.11 Adapt)."""
        th = self.thresholds
        if not resp:
            return False, True, "no response to adapt"
        n = th.resume_ngram
        grams, seen = _ngrams([w.text for w in resp], n), set(_ngrams([w.text for w in before], n))
        share = sum(g in seen for g in grams) / len(grams) if grams else 0.0
        said_before = f"{_n_words(len(before))} before the interruption"
        resumed = bool(grams and seen and share >= th.resume_overlap)
        resumed_note = (
            f"{share:.0%} of its {len(grams)} {n}-word sequences were said in the model's {said_before}"
            if grams and seen
            else "no earlier model speech to compare with"
        )
        asked = _content(ut.tokens)
        repeat = (
            bool(asked)
            and asked <= _REPAIR_ASK
            and bool(asked & _REPEAT_LEMMAS)
            and not asked & _CONFUSED_LEMMAS
        )
        confused = bool(asked) and asked <= _REPAIR_ASK and not repeat
        if repeat and resumed:
            return (
                True,
                True,
                (
                    f"the user asks to hear it again ({_quote(ut.tokens)}) and the model says it again "
                    f"({resumed_note})"
                ),
            )
        if resumed and not asked and not any(_norm(t) in _STOP_ASK for t in ut.tokens):
            return (
                True,
                False,
                (
                    f"the user's interruption {_quote(ut.tokens)} has no content word and may ask to "
                    f"hear it again, so resuming cannot be judged ({resumed_note})"
                ),
            )
        if resumed:
            return (
                False,
                True,
                (
                    f"the response resumes the pre-interruption speech: {resumed_note} "
                    f"(at least {th.resume_overlap:.0%} is resuming)"
                ),
            )
        evidence = resp
        utts = _utterances(resp, th.utterance_gap_s)
        first = [w.text for w in utts[0].words]
        lead = next((t for t in first if _norm(t) not in _FILLERS), "")
        finished = ""
        if (
            before
            and _dangling_end([w.text for w in before])
            and _norm(lead) in _CONTINUING
            and len(utts) > 1
        ):
            # The model carries on the sentence the user cut ("given your ... and in ..."): that is
            # the old plan resumed (A.11), so adaptation must show in what follows it.
            evidence = [w for u in utts[1:] for w in u.words]
            finished = (
                f"its first utterance {_quote(first)} carries on the sentence cut at "
                f'"{before[-1].text}", so only what follows it counts; '
            )
        if not asked:
            return (
                True,
                False,
                (
                    f"the user's interruption {_quote(ut.tokens)} has no content word to take up, so "
                    f"whether the reply adapts cannot be decided; it is not resumed ({resumed_note})"
                ),
            )
        shared = _content([w.text for w in evidence]) & asked
        if shared:
            return (
                True,
                True,
                (
                    f"{finished}the response takes up {_listing(shared, said=ut.tokens)} from the user's interruption "
                    f"and is not resumed ({resumed_note})"
                ),
            )
        if repeat or confused:
            what = "to hear it again" if repeat else "for a re-explanation"
            return (
                True,
                False,
                (
                    f"the user's interruption {_quote(ut.tokens)} asks {what}, which word overlap cannot "
                    f"judge; the reply is not resumed ({resumed_note})"
                ),
            )
        return (
            False,
            True,
            (
                f"{finished}the response shares no content word with the user's interruption "
                f"({_listing(asked, said=ut.tokens)}): it does not name or reflect what the user said ({resumed_note})"
            ),
        )
