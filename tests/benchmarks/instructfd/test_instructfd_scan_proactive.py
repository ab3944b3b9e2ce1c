"""Scans over the whole generated full set (text only, no audio) of the proactive scenarios.

Each scan looks for a defect a listener or the judge would trip over (issue 12, items 2 and 3):
ungrammatical reflections in User Filler Pause replies, doubled words, Hesitation Prompt nudges
that point at words the user has not said yet or a trigger at the end of the stall, too little
user speech after an interrupt trigger, Clause Boundary Tracking turns with unmarked clause
boundaries, and template frames repeated across many conversations. They run over every drafted
conversation of the full set (24 per scenario) and its reserves, for two seeds.

The grammar test at the end does not sample: it expands every alternative of the small templates
with every bank item and checks each result.
"""

from __future__ import annotations

import math
import re
from collections import Counter

import pytest

from fdeval.benchmarks.instructfd.markers import Pause, parse_markers
from fdeval.benchmarks.instructfd.offline import proactive as P
from fdeval.benchmarks.instructfd.offline.common import Ctx
from fdeval.benchmarks.instructfd.offline.grammar import second_person
from fdeval.benchmarks.instructfd.personas import load_personas
from fdeval.benchmarks.instructfd.pipeline import GenerationConfig, OfflineTextBackend, plan_dataset
from fdeval.benchmarks.instructfd.specs import SPECS

SEEDS = (0, 1)
FULL = 24  # conversations per scenario in size=full
MIN_WORDS_AFTER_INTERRUPT = 10  # the judge needs > 3 reference words left after a ~2 s reaction
FILLERS = {"um", "uh", "hmm", "er", "erm"}
# words that may repeat: hesitation sounds, and digits read out one by one ("five five five")
REPEATABLE = FILLERS | set("zero one two three four five six seven eight nine oh".split())
_WORD = re.compile(r"[a-z]+(?:'[a-z]+)?")
_CLAUSE_END = tuple(",;.?!")


@pytest.fixture(scope="module")
def drafts():
    """scenario -> every drafted conversation (selection first, then reserves), over SEEDS."""
    personas = load_personas()
    out: dict[str, list] = {name: [] for name in P.BUILDERS}
    for seed in SEEDS:
        cfg = GenerationConfig(per_scenario=FULL, seed=seed, scenarios=tuple(P.BUILDERS))
        plan = plan_dataset(cfg, OfflineTextBackend(), personas)
        for name, sp in plan.scenarios.items():
            assert len(sp.order) >= FULL and not sp.discards, (name, dict(sp.discards))
            out[name].extend(sp.order)
    return out


def _words(text: str) -> list[str]:
    return _WORD.findall(text.lower())


def _all_texts(draft) -> list[str]:
    """Every spoken text of a conversation: each line without markers, and each cut-in's content."""
    out = []
    for _, text in draft.lines:
        parsed = parse_markers(text)
        out.append(parsed.text)
        out += [m.content for m in parsed.markers]
    return out


def _doubled(text: str) -> list[str]:
    """Word repeats with nothing between them ("so so", "that that's"; "from it, it could" is fine)."""
    tokens = text.lower().split()
    out = []
    for a, b in zip(tokens, tokens[1:]):
        wa, wb = _words(a), _words(b)
        if (
            wa
            and wb
            and wa[-1] == wb[0].split("'")[0]
            and a[-1].isalpha()
            and wa[-1] not in REPEATABLE
        ):
            out.append(f"{wa[-1]} {wb[0]}")
    return out


# ------------------------------------------------------------------------------------------------
# User Filler Pause: the reply reflects the user's two reasons as complete clauses


_FIRST_PERSON = {
    "i",
    "i'm",
    "i've",
    "i'd",
    "i'll",
    "me",
    "my",
    "mine",
    "myself",
    "we",
    "we're",
    "we've",
    "we'd",
    "we'll",
    "our",
    "ours",
    "us",
}


def _reflection_problems(reply: str, reason: str) -> list[str]:
    """A user's reason said back in a reply: present, a whole clause (introduced by a word that
    takes a clause and closed by a clause boundary), and in the second person."""
    said = second_person(reason)
    i = reply.find(said)
    if i < 0:
        return [f"reason {said!r} not reflected"]
    out = []
    before = _words(reply[:i])[-1:] or [""]
    after = reply[i + len(said) :]
    if before[0] not in ("that", "because", "since", "how", "and") and not reply[
        :i
    ].rstrip().endswith((":", ",")):
        out.append(f"{said!r} is not introduced as a clause (after {before[0]!r})")
    if not after.startswith(_CLAUSE_END) and after.strip():
        out.append(f"{said!r} is followed by {after.split('.')[0]!r}: a clause used as a noun")
    if set(_words(said)) & _FIRST_PERSON:
        out.append(f"{said!r} keeps the user's first person")
    return out


def test_filler_pause_reference_replies_are_grammatical(drafts) -> None:
    bad = []
    for d in drafts["User Filler Pause"]:
        item = next(x for x in P.DECISIONS if x.key == d.topic)
        reply = d.lines[3][1]
        for reason in (item.why_a, item.why_b):
            bad += [
                f"{d.conversation_id}: {p} in {reply!r}"
                for p in _reflection_problems(reply, reason)
            ]
    assert not bad, f"{len(bad)} ungrammatical reflections, e.g.\n" + "\n".join(bad[:6])


# ------------------------------------------------------------------------------------------------
# Doubled words anywhere (Factual Misinformation had "and so so my pasta")


def test_no_doubled_words_in_any_proactive_conversation(drafts) -> None:
    bad = Counter()
    examples = []
    for name, ds in drafts.items():
        for d in ds:
            found = [x for t in _all_texts(d) for x in _doubled(t)]
            if found:
                bad[name] += 1
                examples.append(f"{d.conversation_id}: {found}")
    assert not bad, f"conversations with doubled words: {dict(bad)}; e.g. {examples[:5]}"


# ------------------------------------------------------------------------------------------------
# Hesitation Prompt: the nudge refers only to what was said, and comes at the start of the stall


_NUDGE_FREE = set(
    """
a an the and or but so to of in on at for with from about up out over back then now just that this it its
what how which who where when why you your you're you've yourself were was are is be been being do did
go going get got keep carry pick start started starting try next bit part again say said saying tell telling
talking talk mention mentioned oh right okay yeah yes well um uh hmm sure go ahead there way so far
take time breath deep fine all good doing great what's comes else
""".split()
)
_FROM_YOU = {
    "you": "i",
    "your": "my",
    "you're": "i'm",
    "you've": "i've",
    "yourself": "myself",
    "you'd": "i'd",
}


def _stem(w: str) -> str:
    w = _FROM_YOU.get(w, w)
    for suffix in ("'s", "s"):
        if w.endswith(suffix) and len(w) > 3:
            return w[: -len(suffix)]
    return w


def nudge_problems(setup: str, trigger: str) -> list[str]:
    """Words of each nudge in `trigger` that the user has not said (in `setup` or before it)."""
    parsed = parse_markers(trigger)
    spoken = {_stem(w) for w in _words(parse_markers(setup).text)}  # the setup names the speech
    out = []
    for m in parsed.markers:
        spoken_now = spoken | {_stem(w) for w in _words(parsed.text_before(m))}
        unsaid = [
            w for w in _words(m.content) if w not in _NUDGE_FREE and _stem(w) not in spoken_now
        ]
        if unsaid:
            out.append(f"nudge {m.content!r} names {unsaid}, not said yet")
    return out


def stall_problems(trigger: str) -> list[str]:
    """The interrupt trigger must sit where the stall starts: after a filler, before its pauses."""
    parsed = parse_markers(trigger)
    (m,) = [m for m in parsed.markers if m.kind == "interrupt"]
    before, after = parsed.segments[: m.segment_index], parsed.segments[m.segment_index :]
    last_word = _words(parsed.text_before(m))[-1]
    out = []
    if any(isinstance(s, Pause) for s in before):
        out.append("a stall pause comes before the trigger")
    if last_word not in FILLERS:
        out.append(f"the trigger follows {last_word!r}, not a filler")
    if not after or not isinstance(after[0], Pause):
        out.append("no pause right after the trigger")
    return out


def test_hesitation_nudges_refer_only_to_words_already_spoken(drafts) -> None:
    bad = [
        f"{d.conversation_id}: {p}"
        for d in drafts["Hesitation Prompt"]
        for p in nudge_problems(d.lines[0][1], d.lines[2][1])
    ]
    assert not bad, f"{len(bad)} nudges point ahead, e.g.\n" + "\n".join(bad[:6])


def test_hesitation_trigger_sits_at_the_start_of_the_stall(drafts) -> None:
    bad = [
        f"{d.conversation_id}: {p}: {d.lines[2][1]!r}"
        for d in drafts["Hesitation Prompt"]
        for p in stall_problems(d.lines[2][1])
    ]
    assert not bad, f"{len(bad)} hesitation triggers off the stall's start, e.g.\n" + "\n".join(
        bad[:4]
    )


# ------------------------------------------------------------------------------------------------
# Every interrupt scenario: enough user speech after the trigger for the judge's rule


def words_after_problems(trigger: str) -> list[str]:
    parsed = parse_markers(trigger)
    return [
        f"{len(parsed.words) - m.word_index} words after the trigger: {parsed.text_after(m)!r}"
        for m in parsed.markers
        if m.kind == "interrupt" and len(parsed.words) - m.word_index < MIN_WORDS_AFTER_INTERRUPT
    ]


def test_at_least_ten_user_words_after_every_interrupt_trigger(drafts) -> None:
    short: Counter[str] = Counter()
    examples = []
    for name, ds in drafts.items():
        if SPECS[name].cut_in != "interrupt":
            continue
        for d in ds:
            found = words_after_problems(d.lines[2][1])
            short[name] += bool(found)
            examples += [f"{d.conversation_id}: {p}" for p in found]
    short = +short
    assert not short, (
        f"interrupt triggers with < {MIN_WORDS_AFTER_INTERRUPT} words left: {dict(short)}; "
        f"e.g. {examples[:4]}"
    )


# ------------------------------------------------------------------------------------------------
# Clause Boundary Tracking: a backchannel at every clause boundary of the multi-part turn


def _clause_boundaries(parsed) -> set[int]:
    """Word counts after which a clause ends (a word ending in , ; . ? !), the turn's end excluded."""
    n = len(parsed.words)
    return {i + 1 for i, w in enumerate(parsed.words) if w.endswith(_CLAUSE_END) and i + 1 < n}


def boundary_problems(trigger: str) -> list[str]:
    parsed = parse_markers(trigger)
    marks = {m.word_index for m in parsed.markers if m.kind == "backchannel"}
    bounds = _clause_boundaries(parsed)
    if marks != bounds or len(marks) < 3:
        return [f"clause boundaries after words {sorted(bounds)}, backchannels at {sorted(marks)}"]
    return []


def test_clause_boundary_tracking_marks_every_boundary(drafts) -> None:
    bad = [
        f"{d.conversation_id}: {p}: {d.lines[2][1]!r}"
        for d in drafts["Clause Boundary Tracking"]
        for p in boundary_problems(d.lines[2][1])
    ]
    assert not bad, f"{len(bad)} turns with unmarked boundaries, e.g.\n" + "\n".join(bad[:4])


# ------------------------------------------------------------------------------------------------
# Stock frames: no template phrase in more than ~5% of the full set's conversations


FULL_SET_CONVERSATIONS = 24 * len(SPECS)
FRAME_LIMIT = round(0.05 * FULL_SET_CONVERSATIONS)  # 35 of 696
FRAME_N = 4


def test_no_template_frame_in_more_than_five_percent_of_the_set(monkeypatch) -> None:
    """Over the proactive selection (seed 0), count the conversations holding each 4-word run of
    what this module writes. The persona opener (the shared grammar's, scanned with the whole set)
    is left out so that only these templates are counted."""
    monkeypatch.setattr(P, "opener", lambda ctx: "")
    cfg = GenerationConfig(per_scenario=FULL, seed=0, scenarios=tuple(P.BUILDERS))
    plan = plan_dataset(cfg, OfflineTextBackend(), load_personas())
    per_conv: Counter[tuple[str, ...]] = Counter()
    for sp in plan.scenarios.values():
        for d in sp.order[:FULL]:
            grams = set()
            for t in _all_texts(d):
                w = _words(t)
                grams |= {tuple(w[k : k + FRAME_N]) for k in range(len(w) - FRAME_N + 1)}
            per_conv.update(grams)
    frequent = [(" ".join(g), n) for g, n in per_conv.most_common(20) if n > FRAME_LIMIT]
    assert not frequent, f"frames in more than {FRAME_LIMIT} conversations: {frequent}"


# ------------------------------------------------------------------------------------------------
# Grammar: every alternative of every line template with every bank item (no sampling)


class EveryChoice:
    """A stand-in for the conversation's generator that walks every sequence of choices.

    Each call that picks among alternatives (``choice``, ``randrange``, ``random`` as a coin)
    takes the next index of the current path; :meth:`advance` moves to the next path like an
    odometer over the arities seen, so repeated runs enumerate every combination once. With
    ``diagonal=r`` it instead takes option ``r mod arity`` everywhere (r = 0, 1, ... covers every
    alternative of every choice point at least once, for lines too large to walk whole). Numbers
    with no bearing on the wording (``uniform`` for pause lengths, ``randint``/``sample`` for
    digits and names) take one fixed value."""

    def __init__(self, diagonal: int | None = None):
        self.path: list[int] = []
        self.arity: list[int] = []
        self.k = 0
        self.diagonal = diagonal
        self.widest = 1

    def _next(self, n: int) -> int:
        self.widest = max(self.widest, n)
        if self.diagonal is not None:
            return self.diagonal % n
        if self.k == len(self.path):
            self.path.append(0)
            self.arity.append(n)
        assert self.arity[self.k] == n, "a choice point changed its arity between runs"
        self.k += 1
        return self.path[self.k - 1]

    def choice(self, seq):
        seq = list(seq)
        return seq[self._next(len(seq))]

    def randrange(self, n: int) -> int:
        return self._next(n)

    def random(self) -> float:
        return (0.0, 0.999)[self._next(2)]

    def uniform(self, lo: float, hi: float) -> float:
        return lo

    def randint(self, lo: int, hi: int) -> int:
        return lo + 1 if lo + 1 <= hi else lo

    def sample(self, population, k: int):
        return list(population)[:k]

    def advance(self) -> bool:
        """Move to the next path; False when every path has been walked."""
        del self.path[self.k :], self.arity[self.k :]
        self.k = 0
        while self.path:
            self.path[-1] += 1
            if self.path[-1] < self.arity[-1]:
                return True
            self.path.pop()
            self.arity.pop()
        return False


def test_every_choice_walks_each_combination_once() -> None:
    rng, seen = EveryChoice(), []
    while True:
        a = rng.choice("xy")
        seen.append(
            a + (rng.choice("123") if a == "y" else "") + ("!" if rng.random() < 0.5 else "")
        )
        if not rng.advance():
            break
    assert sorted(seen) == sorted(["x!", "x", "y1!", "y1", "y2!", "y2", "y3!", "y3"])


def _generic_problems(text: str) -> list[str]:
    spoken = parse_markers(text)
    texts = [spoken.text, *(m.content for m in spoken.markers)]
    out = [f"doubled {x!r}" for t in texts for x in _doubled(t)]
    for t in texts:
        low = t.lower()
        if re.search(r"\b(a|an|the) (a|an|the)\b", low):
            out.append("two articles in a row")
        if re.search(r"\ba [aeiou]", t) and not re.search(
            r"\ba (one|u[nst]|eu)", t
        ):  # "A as in apple" is fine
            out.append("'a' before a vowel")
        if re.search(r"[,;]\s*[,;.?!]|\s[,.?!;]|^[,.;]", t):
            out.append("stray punctuation")
    return out


def _filler_reply_problems(item, text: str) -> list[str]:
    return [p for r in (item.why_a, item.why_b) for p in _reflection_problems(text, r)]


# (scenario, role) -> checks of one written line given its bank item, beyond the generic ones
LINE_CHECKS = {
    ("User Filler Pause", "response"): _filler_reply_problems,
    ("Clause Boundary Tracking", "trigger"): lambda item, text: boundary_problems(text),
    ("Hesitation Prompt", "trigger"): lambda item, text: (
        nudge_problems(item.mine, text) + stall_problems(text)
    ),
}
for _name, _spec in SPECS.items():
    if _name in P.BUILDERS and _spec.cut_in == "interrupt":
        _prev = LINE_CHECKS.get((_name, "trigger"), lambda item, text: [])
        LINE_CHECKS[(_name, "trigger")] = (
            lambda prev: lambda item, text: prev(item, text) + words_after_problems(text)
        )(_prev)


LINE_LIMIT = 250  # paths per (line, item) walked whole; larger lines get the diagonal cover
# (today the triggers of the attention check, filler pause, floor hold, hesitation, word retrieval
# and the address draws of Sequential Info Capture)


def _walk(write, item, persona, rng) -> str:
    ctx = Ctx(rng=rng, persona=persona, attribute="name", item=item)  # type: ignore[arg-type]
    return write(ctx)


@pytest.mark.parametrize("scenario", sorted(P.BUILDERS))
def test_every_line_template_with_every_item_is_grammatical(scenario: str, monkeypatch) -> None:
    """Each of the scenario's four line writers, for every bank item, every path of choices (the
    diagonal cover for lines with more than LINE_LIMIT); the persona opener (the shared grammar's, tested with it)
    is held fixed."""
    monkeypatch.setattr(P, "opener", lambda ctx: "Hi.")
    bank, _, _ = P.BUILDERS[scenario]
    writers = P.LINE_WRITERS[scenario]
    persona = load_personas()[0]
    bad, n = [], 0
    for item in bank:
        for role, write in zip(("setup", "reply", "trigger", "response"), writers):
            rng = EveryChoice()
            texts = [_walk(write, item, persona, rng)]
            paths_at_least = math.prod(
                rng.arity
            )  # exact when every path has the same choice points
            while paths_at_least <= LINE_LIMIT and len(texts) <= LINE_LIMIT and rng.advance():
                texts.append(_walk(write, item, persona, rng))
            if paths_at_least > LINE_LIMIT or len(texts) > LINE_LIMIT:
                texts = [
                    _walk(write, item, persona, EveryChoice(diagonal=r)) for r in range(rng.widest)
                ]
            check = LINE_CHECKS.get((scenario, role), lambda i, t: [])
            for text in texts:
                probs = _generic_problems(text) + check(item, text)
                if probs:
                    bad.append(f"{P.item_key(item)} {role}: {probs}: {text!r}")
            n += len(texts)
    assert not bad, f"{len(bad)} of {n} texts are wrong, e.g.\n" + "\n".join(bad[:8])
