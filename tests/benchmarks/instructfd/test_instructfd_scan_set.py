"""Scans over the whole full set's text (all 29 scenarios, seed 0, 24 conversations each, plus the
reserves) for defects a listener hears: stock frames repeated across the set, too few distinct
barge-in phrases in the short-signal scenarios, Skip Basics turns that contradict the scenario's
premise, persona details that have nothing to do with the topic, doubled words, and template
alternatives that come out ungrammatical with some slot value.

Only text planning runs (no speech), so the whole set takes well under a second to write.
Checks that fail only because of text written by ``offline/proactive.py`` are marked xfail
with a reason naming that file (another owner's; the lead reconciles).
"""

from __future__ import annotations

import random
import re
from collections import Counter, defaultdict

import pytest

from fdeval.benchmarks.instructfd import offline
from fdeval.benchmarks.instructfd.instructions import SCENARIOS
from fdeval.benchmarks.instructfd.markers import parse_markers
from fdeval.benchmarks.instructfd.offline import BUILDERS, OfflineBackend, topic_tags
from fdeval.benchmarks.instructfd.offline.common import Ctx
from fdeval.benchmarks.instructfd.offline.grammar import (
    count_expansions,
    expansions,
    grammar_problems,
)
from fdeval.benchmarks.instructfd.offline.topics import TOPICS
from fdeval.benchmarks.instructfd.personas import (
    Persona,
    attribute_tags,
    fits,
    load_personas,
    situation_first_person,
    tags_of,
)
from fdeval.benchmarks.instructfd.pipeline import GenerationConfig, OfflineTextBackend, plan_dataset
from fdeval.benchmarks.instructfd.specs import SPECS

PER_SCENARIO = 24
FULL = PER_SCENARIO * len(SPECS)  # 696 conversations
FRAME_LIMIT = round(0.05 * FULL)  # a frame in at most ~5% of the set's conversations (35)
MIN_PHRASES = 12
SHORT_SIGNAL = (
    "User Acknowledgment",
    "User Alignment",
    "User Amusement",
    "User Understanding",
    "User Continuer",
    "Short Stop Repair",
    "Short Repeat Request",
    "Short Confusion Signal",
    "Hearing Check",
    "Summary Request",
)
PROACTIVE_FILE = "fdeval/benchmarks/instructfd/offline/proactive.py (H2's file)"


@pytest.fixture(scope="module")
def full_set():
    plan = plan_dataset(
        GenerationConfig(per_scenario=PER_SCENARIO, seed=0), OfflineTextBackend(), load_personas()
    )
    selected = {name: plan.selected(name) for name in SPECS}
    reserves = {name: plan.scenarios[name].order[PER_SCENARIO:] for name in SPECS}
    return selected, reserves


def _all(selected: dict) -> list:
    return [d for ds in selected.values() for d in ds]


def pieces(draft) -> list[tuple[str, str]]:
    """(speaker, spoken text) for every stretch of speech: each line's own words, and each cut-in
    marker's content under the speaker who says it (the other one)."""
    other = {"user": "model", "model": "user"}
    out = []
    for speaker, text in draft.lines:
        parsed = parse_markers(text)
        out.append((speaker, parsed.text))
        out += [(other[speaker], m.content) for m in parsed.markers if m.content]
    return out


def user_speech(draft) -> str:
    return " ".join(t for s, t in pieces(draft) if s == "user")


def _words(text: str) -> list[str]:
    return re.findall(r"[a-z']+", text.lower())


# ------------------------------------------------------------------------------------------------
# Stock frames

FRAMES = (
    "I work as",
    "by the way",
    "for context",
    "a bit of background",
    "I'm a big fan of",
    "I'm really into",
    "in my spare time",
    "I should say",
    "quick question",
    "I've got a question",
    "can I ask you something",
    "one more thing",
    "if that matters",
    "which is why I'm asking",
    "I should mention",
)


def frame_counts(drafts) -> Counter:
    c: Counter[str] = Counter()
    for d in drafts:
        text = " ".join(t for _, t in pieces(d)).lower()
        c.update(f for f in FRAMES if re.search(r"\b" + re.escape(f.lower()) + r"\b", text))
    return c


@pytest.mark.parametrize("frame", FRAMES)
def test_stock_frame_in_at_most_five_percent_of_the_set(full_set, frame) -> None:
    n = frame_counts(_all(full_set[0]))[frame]
    assert n <= FRAME_LIMIT, f"{frame!r} in {n} of {FULL} conversations (limit {FRAME_LIMIT})"


def test_no_four_word_run_in_more_than_five_percent_of_the_set(full_set) -> None:
    """Any 4-word run (either speaker, markers included): the frames nobody thought to list."""
    convs: dict[tuple[str, ...], set[str]] = defaultdict(set)
    for d in _all(full_set[0]):
        for _, text in pieces(d):
            w = _words(text)
            for i in range(len(w) - 3):
                convs[tuple(w[i : i + 4])].add(d.scenario)
    counts: Counter = Counter()
    for d in _all(full_set[0]):
        grams = set()
        for _, text in pieces(d):
            w = _words(text)
            grams |= {tuple(w[i : i + 4]) for i in range(len(w) - 3)}
        counts.update(grams)
    over = {g: n for g, n in counts.items() if n > FRAME_LIMIT}
    proactive_only = {
        g: n for g, n in over.items() if all(SPECS[s].group == "proactive" for s in convs[g])
    }
    mine = {" ".join(g): n for g, n in over.items() if g not in proactive_only}
    assert not mine, f"4-word runs in more than {FRAME_LIMIT} of {FULL} conversations: {mine}"
    if proactive_only:
        pytest.xfail(
            f"only in proactive scenarios, written by {PROACTIVE_FILE}: "
            f"{ {' '.join(g): n for g, n in proactive_only.items()} }"
        )


# ------------------------------------------------------------------------------------------------
# Short-signal scenarios: many distinct barge-in phrases


def barge_in_phrases(drafts) -> Counter:
    c: Counter[str] = Counter()
    for d in drafts:
        for _, text in d.lines:
            for m in parse_markers(text).markers:
                if m.kind in ("backchannel", "interrupt"):
                    c[" ".join(_words(m.content))] += 1
    return c


@pytest.mark.parametrize("scenario", SHORT_SIGNAL)
def test_short_signal_scenario_uses_at_least_twelve_distinct_phrases(full_set, scenario) -> None:
    phrases = barge_in_phrases(full_set[0][scenario])
    assert sum(phrases.values()) == PER_SCENARIO
    assert len(phrases) >= MIN_PHRASES, (scenario, len(phrases), phrases)


def test_short_signal_scenarios_are_the_ten_named() -> None:
    assert len(SHORT_SIGNAL) == 10 and all(SPECS[s].group == "responsive" for s in SHORT_SIGNAL)
    assert all(SCENARIOS[s].policies[0] == "continue" for s in SHORT_SIGNAL[:5])


# ------------------------------------------------------------------------------------------------
# Skip Basics: the user knows the basics; nothing they say claims otherwise

# Claims of being new to the topic (against the premise "already knows the basics").
NOVICE = re.compile(
    r"\b(never|first|beginner|from scratch|new to|just starting|start(?:ing|ed)?|begin(?:ning)?|"
    r"get(?:ting)? (?:into|started|going)|learn(?:ing)?(?: to)?|no idea|don't know how|"
    r"haven't (?:ever|tried))\b",
    re.I,
)
# Claims of experience (what the premise needs the user to say).
EXPERIENCED = re.compile(
    r"\b(already|for years|before|plenty|used to|all the time|a lot|every week|basics?|"
    r"know this part|off and on|for a long time|a few lengths|most of)\b",
    re.I,
)


def premise_problems(draft) -> list[str]:
    out = []
    for speaker, text in pieces(draft):
        if speaker == "user":
            for m in NOVICE.finditer(text):
                out.append(f"{m.group(0)!r} in {text!r}")
    cut = [
        m.content for _, t in draft.lines for m in parse_markers(t).markers if m.kind == "interrupt"
    ]
    if not cut or not EXPERIENCED.search(cut[0]):
        out.append(f"no claim of experience in the cut-in {cut!r}")
    return out


def test_skip_basics_never_contradicts_its_premise(full_set) -> None:
    selected, reserves = full_set
    bad = {
        d.conversation_id: p
        for d in selected["Skip Basics"] + reserves["Skip Basics"]
        for p in [premise_problems(d)]
        if p
    }
    assert not bad, f"{len(bad)} Skip Basics conversations contradict the premise: {bad}"


def test_premise_scan_catches_a_contradiction() -> None:
    class D:
        lines = (
            ("user", "How should I train for my first five k?"),
            (
                "model",
                "Sure, build up slowly. <interrupt: wait, I know the basics, I used to run in college>",
            ),
        )

    assert any("first" in p for p in premise_problems(D()))


# ------------------------------------------------------------------------------------------------
# Persona details fit the topic


def mentioned(persona: Persona, text: str) -> list[str]:
    """The persona's details that `text` says (name excepted)."""
    low = text.lower()
    said = []
    for a in ("occupation", "hobby", "city"):
        v = getattr(persona, a)
        if v and re.search(r"\b" + re.escape(v.lower()) + r"\b", low):
            said.append(a)
    if persona.age_band and f"my {persona.age_band.lower()}" in low:
        said.append("age_band")
    s = situation_first_person(persona)
    if s and s.lower() in low:
        said.append("situation")
    return said


def _item_text(scenario: str, key: str) -> str:
    bank = BUILDERS[scenario][0]
    return str(next(it for it in bank if (it if isinstance(it, str) else it.key) == key))


def fit_problems(draft) -> list[str]:
    tags = topic_tags(draft.scenario, draft.topic)
    out = []
    if not fits(draft.persona, draft.attribute, tags):
        out.append(f"grounded in {draft.attribute} {getattr(draft.persona, draft.attribute)!r}")
    content = mentioned(
        draft.persona, _item_text(draft.scenario, draft.topic)
    )  # "soccer" in a decision about soccer
    for a in mentioned(draft.persona, user_speech(draft)):
        if a in content:
            continue
        if not fits(draft.persona, a, tags):
            out.append(
                f"says {a} {getattr(draft.persona, a)!r} ({sorted(attribute_tags(draft.persona, a))}) "
                f"about {draft.topic!r} ({sorted(tags)})"
            )
    return out


@pytest.mark.parametrize("scenario", list(SPECS))
def test_persona_details_said_only_where_they_fit_the_topic(full_set, scenario) -> None:
    selected, reserves = full_set
    bad = {
        d.conversation_id: p
        for d in selected[scenario] + reserves[scenario]
        for p in [fit_problems(d)]
        if p
    }
    assert not bad, f"{len(bad)} conversations: {bad}"


def test_topic_fit_is_decided_by_shared_tags() -> None:
    fan = Persona(
        "x",
        "Rosa Delgado",
        "she",
        "forties",
        "bakery owner",
        "Tucson",
        "opera",
        "is saving up for a house",
    )
    cookies = topic_tags("User Alignment", "cookies")
    assert "food" in cookies
    assert (
        not fits(fan, "hobby", cookies)
        and fits(fan, "occupation", cookies)
        and fits(fan, "name", cookies)
    )
    assert not fits(fan, "city", cookies) and not fits(fan, "age_band", cookies)
    assert fits(fan, "situation", topic_tags("User Alignment", "budget"))
    assert tags_of("caring for his mother") & {"car"} == set()  # "car" is not a prefix match
    assert mentioned(fan, "Hi, I'm Rosa. I'm a big fan of opera. How do I make cookies?") == [
        "hobby"
    ]


# ------------------------------------------------------------------------------------------------
# Doubled words and grammar


def _report(scenario: str, bad: list[str], what: str) -> None:
    """Fail on `bad`; for a proactive scenario, whose turns another grammar writes, xfail naming it."""
    if bad and SPECS[scenario].group == "proactive":
        pytest.xfail(f"{len(bad)} {what} in text written by {PROACTIVE_FILE}: {bad[:3]}")
    assert not bad, f"{len(bad)} {what}: {bad[:6]}"


@pytest.mark.parametrize("scenario", list(SPECS))
def test_no_doubled_words(full_set, scenario) -> None:
    selected, reserves = full_set
    bad = [
        f"{d.conversation_id}: {p}"
        for d in selected[scenario] + reserves[scenario]
        for _, text in d.lines
        for p in grammar_problems(text)
        if p.startswith("doubled word")
    ]
    _report(scenario, bad, "doubled words")


@pytest.mark.parametrize("scenario", list(SPECS))
def test_every_written_turn_is_grammatical(full_set, scenario) -> None:
    """Every line and the grounding sentence (which the LLM backend's prompts carry)."""
    selected, reserves = full_set
    bad = [
        f"{d.conversation_id}: {p}"
        for d in selected[scenario] + reserves[scenario]
        for text in (d.grounding, *(t for _, t in d.lines))
        for p in grammar_problems(text)
    ]
    _report(scenario, bad, "grammar problems")


def test_every_topic_text_is_grammatical() -> None:
    """The responsive bank's texts, some of which the grammars join without a template."""
    bad = [
        f"{t.key}.{field}: {p}"
        for t in TOPICS
        for field, value in t._asdict().items()
        if field != "key"
        for text in ([value] if isinstance(value, str) else value)
        for p in grammar_problems(text)
    ]
    bad += [f"{t.key}.expert_ask: {p}" for t in TOPICS for p in grammar_problems(t.expert_ask)]
    assert not bad, bad


class RecordingCtx(Ctx):
    """A Ctx that notes every template it expands (with its slot values) and every list it deals
    from, under the scenario it writes for."""

    log: list = []

    def x(self, template: str, **slots: object) -> str:
        RecordingCtx.log.append(
            (self.scenario, template, tuple(sorted({**self.slots, **slots}.items())))
        )
        return super().x(template, **slots)

    def deal(self, options, key: str = "") -> str:
        RecordingCtx.log += [
            (self.scenario, str(o), tuple(sorted(self.slots.items()))) for o in options
        ]
        return super().deal(options, key)

    def pick(self, options):
        options = list(
            options
        )  # spoken options picked whole (a template among them is logged when expanded)
        RecordingCtx.log += [
            (self.scenario, o, ()) for o in options if isinstance(o, str) and "{" not in o
        ]
        return super().pick(options)


_PAUSE = re.compile(r"<pause: [0-9.]+>")
MAX_EXPANSIONS = (
    50000  # per (template, slot values); above it the template is sampled (none is, today)
)


def collect_templates(seeds=range(1)) -> dict[tuple[str, tuple], set[str]]:
    """Every (template, slot values) the offline grammars use for every bank item, with the
    scenarios that use it: each scenario's builder run on every item of its bank (seed 0), a
    different persona each time."""
    RecordingCtx.log = []
    mp = pytest.MonkeyPatch()
    mp.setattr(offline, "Ctx", RecordingCtx)
    try:
        backend = OfflineBackend()
        personas = load_personas()
        for spec in SPECS.values():
            for seed in seeds:
                for i in range(len(BUILDERS[spec.name][0])):
                    backend.write(spec, i, seed, personas[(i * 7 + seed * 13) % len(personas)])
    finally:
        mp.undo()
    out: dict[tuple[str, tuple], set[str]] = defaultdict(set)
    for slug, template, slots in RecordingCtx.log:
        # pause lengths change no words: one length stands for all
        slots = tuple((k, _PAUSE.sub("<pause: 1.0>", str(v))) for k, v in slots)
        out[(template, slots)].add(slug)
    return out


@pytest.fixture(scope="module")
def templates():
    return collect_templates()


def template_problems(template: str, slots: tuple, cache: dict) -> list[str]:
    kw = dict(slots)
    if count_expansions(template, **kw) > MAX_EXPANSIONS:
        rng = random.Random(0)
        texts = {offline.grammar.expand(template, rng, **kw) for _ in range(2000)}
    else:
        texts = set(expansions(template, **kw))
    out = []
    for text in texts:
        if text not in cache:
            cache[text] = grammar_problems(text)
        out += cache[text]
    return out


def test_every_template_alternative_with_every_slot_value_is_grammatical(templates) -> None:
    proactive = {s.slug for s in SPECS.values() if s.group == "proactive"}
    bad: dict[str, list[str]] = defaultdict(list)
    bad_proactive: dict[str, list[str]] = defaultdict(list)
    cache: dict[str, list[str]] = {}
    for (template, slots), slugs in templates.items():
        for p in template_problems(template, slots, cache):
            (bad_proactive if slugs <= proactive else bad)[template].append(p)
    assert len(cache) > 10000  # texts checked

    def show(b):
        return "; ".join(f"{t!r}: {ps[0]} (+{len(ps) - 1})" for t, ps in list(b.items())[:8])

    assert not bad, f"{len(bad)} templates with problems: {show(bad)}"
    if bad_proactive:
        pytest.xfail(
            f"templates of proactive scenarios only, written by {PROACTIVE_FILE}: {show(bad_proactive)}"
        )


def test_grammar_scan_catches_the_known_faults() -> None:
    for text in (
        "And so so my pasta is ready.",
        "I'm hearing that the the pay matters.",
        "I need a umbrella.",
        "Hi , there.",
        "okay. so then",
        "They is late.",
        "I need {slot}.",
        "Pick [a|b].",
    ):
        assert grammar_problems(text), text
    assert not grammar_problems(
        "Five five five, two one. <interrupt: wait, wait, hold on> Okay, and? An hour. "
        "A as in apple, a user, the job you apply to."
    )
    assert sorted(expansions("[a|b [c|d]|] x {s}.", s="[y|z]")) == sorted(
        ["A x y.", "A x z.", "B c x y.", "B c x z.", "B d x y.", "B d x z.", "X y.", "X z."]
    )
