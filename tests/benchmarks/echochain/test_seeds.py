"""EchoChain seeds: the shipped pool, the strict loader's one-line errors, rotation, the pool hash."""

from __future__ import annotations

import copy
import json
import re
from collections import Counter

import pytest

from fdeval.benchmarks.echochain import seeds as S
from fdeval.benchmarks.echochain.taxonomy import AXES, BARGE_IN_LABELS, DSR, FAILURE_TYPES, TAXONOMY
from fdeval.errors import ConfigError


@pytest.fixture(scope="module")
def pool() -> list[S.Seed]:
    return S.load_seeds()


# ------------------------------------------------------------------------------------------------
# Vocabulary


def test_taxonomy_names_are_the_interface_strings():
    assert list(BARGE_IN_LABELS) == [
        "Further Inquiry",
        "Affirmative Acknowledgment + Further Inquiry",
        "Denial and Discontent",
        "Real-time Thought Process",
        "Backchannel + Redirection",
        "Partial Agreement with Reservation",
        "Clarification Request",
    ]
    assert list(FAILURE_TYPES) == [
        "dsr_f1_ignores",
        "dsr_f2_stale_later",
        "dsr_f3_contradictory",
        "dsr_f4_double_count",
    ]
    assert list(TAXONOMY) == [
        "contextual_inertia",
        "interruption_amnesia",
        "objective_displacement",
        "other",
    ]
    assert AXES == {"DSR": DSR}
    assert [c for c, _ in DSR.pass_criteria] == ["DSR-P1", "DSR-P2", "DSR-P3"]
    assert [c for c, _ in DSR.fail_criteria] == ["DSR-F1", "DSR-F2", "DSR-F3", "DSR-F4"]
    texts = [
        DSR.definition,
        DSR.example,
        *(t for _, t in DSR.pass_criteria + DSR.fail_criteria),
        *BARGE_IN_LABELS.values(),
        *FAILURE_TYPES.values(),
        *TAXONOMY.values(),
    ]
    assert all(len(t.split()) >= 8 for t in texts)
    assert len(set(texts)) == len(texts)


# ------------------------------------------------------------------------------------------------
# The shipped pool


def test_shipped_pool_size_topics_and_labels(pool):
    assert len(pool) >= 40
    topics = Counter(s.topic for s in pool)
    assert len(topics) >= 8
    labels = Counter(e.barge_in_label for s in pool for e in s.exchanges[1:])
    assert set(labels) == set(BARGE_IN_LABELS)
    # fairly even: no label under half its fair share
    assert min(labels.values()) >= sum(labels.values()) / len(BARGE_IN_LABELS) / 2
    assert len({s.seed_id for s in pool}) == len(pool)


def test_shipped_pool_scripts_are_complete(pool):
    for s in pool:
        assert s.task_keywords and s.axis == "DSR" and len(s.exchanges) >= 3, s.seed_id
        assert s.exchanges[0].barge_in is None and not s.exchanges[0].evidence
        for e in s.exchanges[1:]:
            assert e.barge_in and e.evidence and e.stale, (s.seed_id, e.index)
            # each interrupted exchange checks uptake (require_any) and absence of the old assumption (forbid)
            assert any(c.require_any for c in e.criteria) and any(c.forbid for c in e.criteria), (
                s.seed_id,
                e.index,
            )
            assert S.sentence_count(e.barge_in) <= 2 and S.sentence_count(e.message) <= 3


def test_shipped_pool_roundtrips_and_hash_tracks_content(pool, tmp_path):
    assert [S.Seed.from_dict(s.to_dict(), "x") for s in pool] == pool
    jl = tmp_path / "pool.jsonl"
    jl.write_text("".join(json.dumps(s.to_dict()) + "\n\n" for s in pool))
    assert S.load_seeds(jl) == pool
    assert S.pool_hash(S.load_seeds(jl)) == S.pool_hash(pool)
    changed = copy.deepcopy([s.to_dict() for s in pool])
    changed[0]["persona"] += " Likes tea."
    assert S.pool_hash([S.Seed.from_dict(d, "x") for d in changed]) != S.pool_hash(pool)
    assert S.pool_hash(pool[::-1]) != S.pool_hash(
        pool
    )  # order is part of the identity (rotation uses it)


def test_load_pool_extends_the_shipped_pool(pool, tmp_path):
    own = copy.deepcopy(pool[0].to_dict())
    own["seed_id"] = "my-own-seed"
    f = tmp_path / "mine.json"
    f.write_text(json.dumps([own]))
    both = S.load_pool([S.SHIPPED, f])
    assert [s.seed_id for s in both] == [s.seed_id for s in pool] + ["my-own-seed"]
    f.write_text(json.dumps([pool[3].to_dict()]))
    with pytest.raises(ConfigError) as e:
        S.load_pool([None, f])
    assert (
        str(e.value)
        == f"{f}: seed {pool[3].seed_id}: field seed_id: already defined in {S.SEEDS_FILE}"
    )


# ------------------------------------------------------------------------------------------------
# Text rules


@pytest.mark.parametrize(
    "text, n",
    [
        ("So, um... I was thinking, you know, maybe we could... yeah, let's try that.", 1),
        ("Wait -- I can only do two days. What still fits?", 2),
        ("Hi! So it's my birthday. What should I bake?", 3),
        ("Dr. Lee said the seven a.m. slot is fine", 1),
        ("Really?! No way. Huh", 3),
        ("Hmm, hang on...", 1),
    ],
)
def test_sentence_count(text, n):
    assert S.sentence_count(text) == n


def test_user_text_rules():
    assert S.user_text_problem("I have about forty minutes a day.", 3) is None
    assert "digit '4'" in S.user_text_problem("I have 40 minutes a day.", 3)
    assert "'$'" in S.user_text_problem("My budget is fifty $ now.", 3)
    assert S.user_text_problem("One. Two. Three.", 2) == "3 sentences; allowed 1 to 2"


def test_mentions_and_criterion_check():
    text = "Okay, since it's NUT-free now, let's skip the walnut\u2019s crunch and use seeds at  the  front."
    assert S.mentions(text, ["nut-free", "nut", "walnut's", "at the front", "seed"]) == (
        "nut-free",
        "nut",
        "walnut's",
        "at the front",
    )  # "seed" is no word of "seeds"
    c = S.Criterion(
        "ex2.c1",
        "nut-free and no walnuts",
        require_any=("nut-free", "no nuts"),
        forbid=("walnuts",),
    )
    assert c.holds("All of it is nut-free.")
    assert not c.holds("All of it is nut-free, with walnuts on top.")
    assert not c.holds("A chocolate tart.")


def test_a_presupposing_wording_is_spoken_only_after_the_advice_it_leans_on():
    step = S.ExchangeScript(
        2,
        "Okay, so which settings first?",
        "Denial and Discontent",
        "No, no, I can't turn location off.",
        ("four years",),
        message_presupposes=("dim the screen",),
        message_fallback="So which settings first?",
        barge_in_presupposes=("location", "gps"),
        barge_in_fallback="Wait, whatever I change, location has to stay on.",
    )
    assert step.wording("") == (
        "So which settings first?",
        "Wait, whatever I change, location has to stay on.",
    )
    assert step.wording("Turn off GPS and dim the  screen.") == (
        "Okay, so which settings first?",
        "No, no, I can't turn location off.",
    )
    assert step.wording("Relocation is costly.")[1] == step.barge_in_fallback  # whole words only
    assert (
        step.wording("Dim the screen.")
        == step.wording("dim the screen")
        == (step.message, step.barge_in_fallback)
    )
    assert step.variants() == (
        (step.message, step.message_fallback),
        (step.barge_in, step.barge_in_fallback),
    )
    plain = S.ExchangeScript(
        2, "And then?", "Further Inquiry", "Wait, what if it rains?", ("rain",)
    )
    assert (
        plain.wording("") == plain.wording("anything") == ("And then?", "Wait, what if it rains?")
    )
    assert plain.to_dict().keys() == {"index", "message", "barge_in_label", "barge_in", "evidence"}


@pytest.mark.parametrize(
    "text, first",
    [
        ("Okay, and then?", "okay"),
        ("Um, uh... so what now?", "so"),
        ("Mm-hmm, right.", "mm-hmm"),
        ("Hmm, hang on...", "hang"),
        ("Got it -- and the price?", "got"),
        ("\u201cThat\u2019s fair.\u201d", "that's"),
        ("...", ""),
    ],
)
def test_opener_is_the_first_word_after_fillers(text, first):
    assert S.opener(text) == first


def test_opener_shares():
    shares = S.opener_shares(["Okay.", "Um, okay then.", "So?", "Right."])
    assert shares == {"okay": 0.5, "right": 0.25, "so": 0.25}


# ------------------------------------------------------------------------------------------------
# Rotation


def test_rotate_covers_every_topic_without_repeats_and_is_deterministic(pool):
    topics = {s.topic for s in pool}
    n = 2 * len(pool) + 5  # cycles past the pool
    order = S.rotate(pool, n, seed=7)
    assert len(order) == n and order == S.rotate(pool, n, seed=7)
    assert S.rotate(pool, n, seed=8) != order
    for k in range(
        20
    ):  # cycle boundaries too: a new cycle never starts with the topic that ended the last
        other = S.rotate(pool, 3 * len(pool), seed=k)
        assert all(a.topic != b.topic for a, b in zip(other, other[1:])), k
    assert len({s.topic for s in order[: len(topics)]}) == len(
        topics
    )  # the first round visits every topic
    first_cycle = Counter(s.seed_id for s in order[: len(pool)])
    assert set(first_cycle) == {s.seed_id for s in pool} and set(first_cycle.values()) == {1}
    assert S.rotate(pool, 0, seed=1) == []
    with pytest.raises(ValueError):
        S.rotate(pool, -1, seed=1)


def test_rotate_spreads_an_uneven_pool(pool):
    # four seeds of one topic and one each of three others: only A x A x A x A avoids a repeat,
    # which a plain round-robin misses once the small topics are used up
    big = [s for s in pool if s.topic == pool[0].topic][:4]
    singles = list({s.topic: s for s in pool if s.topic != pool[0].topic}.values())[:3]
    for k in range(10):
        order = S.rotate(big + singles, 7, seed=k)
        assert [s.topic == pool[0].topic for s in order] == [True, False] * 3 + [True], k


# ------------------------------------------------------------------------------------------------
# Bad files: one line naming the file, the seed and the field


def _base(pool) -> dict:
    return copy.deepcopy(pool[0].to_dict())


def _mutations(pool):
    sid = pool[0].seed_id

    def m(fn):
        d = _base(pool)
        fn(d)
        return [d]

    dup = _base(pool)
    return [
        ("unknown key", m(lambda d: d.update(colour="blue")), sid, "colour", "unknown key"),
        (
            "nested unknown key",
            m(lambda d: d["exchanges"][1]["criteria"][0].update(weight=2)),
            sid,
            "exchanges[1].criteria[0].weight",
            "unknown key",
        ),
        (
            "digit in a message",
            m(lambda d: d["exchanges"][1].update(message="Okay, and what about the 3 of us?")),
            sid,
            "exchanges[1].message",
            "digit '3'",
        ),
        (
            "four sentences",
            m(lambda d: d["exchanges"][0].update(message="Hi. So. Um, okay. What now?")),
            sid,
            "exchanges[0].message",
            "4 sentences",
        ),
        (
            "three-sentence barge-in",
            m(lambda d: d["exchanges"][2].update(barge_in="Wait. No. Stop it.")),
            sid,
            "exchanges[2].barge_in",
            "3 sentences",
        ),
        (
            "bad label",
            m(lambda d: d["exchanges"][1].update(barge_in_label="Polite Interruption")),
            sid,
            "exchanges[1].barge_in_label",
            "unknown label",
        ),
        (
            "exchange one with a barge-in",
            m(
                lambda d: d["exchanges"][0].update(
                    barge_in_label="Further Inquiry", barge_in="Oh, and one more thing."
                )
            ),
            sid,
            "exchanges[0].barge_in_label",
            "has no barge-in",
        ),
        (
            "later exchange without one",
            m(lambda d: [d["exchanges"][2].pop(k) for k in ("barge_in_label", "barge_in")]),
            sid,
            "exchanges[2].barge_in_label",
            "missing",
        ),
        (
            "barge-in inside the message",
            m(
                lambda d: d["exchanges"][1].update(
                    barge_in=d["exchanges"][1]["message"].split(".")[0] + "."
                )
            ),
            sid,
            "exchanges[1].barge_in",
            "repeats the message",
        ),
        (
            "one criterion",
            m(lambda d: d["exchanges"][1].update(criteria=d["exchanges"][1]["criteria"][:1])),
            sid,
            "exchanges[1].criteria",
            "at least 2",
        ),
        (
            "duplicate criterion id",
            m(lambda d: d["exchanges"][2]["criteria"][1].update(criterion_id="ex2.c1")),
            sid,
            "exchanges[2].criteria[1].criterion_id",
            "duplicate id",
        ),
        (
            "evidence already said",
            m(
                lambda d: d["exchanges"][1]["evidence"].append(
                    re.findall(r"[a-z]{5,}", d["exchanges"][0]["message"].lower())[0]
                )
            ),
            sid,
            "exchanges[1].evidence[",
            "already in the user's earlier words",
        ),
        (
            "stale word echoed by the barge-in",
            m(
                lambda d: d["exchanges"][1]["stale"].append(
                    d["exchanges"][1]["barge_in"].split()[-1].strip(".?!")
                )
            ),
            sid,
            "exchanges[1].stale",
            "barge-in itself",
        ),
        ("bad seed id", m(lambda d: d.update(seed_id="Bad Id")), "#1", "seed_id", "not an id"),
        (
            "duplicate seed ids",
            [dup, copy.deepcopy(dup)],
            sid,
            "seed_id",
            "duplicate id (also seed #1)",
        ),
        # presupposing wordings (the base seed's exchange 3 barge-in presupposes a cable was mentioned)
        (
            "presupposition without a fallback",
            m(lambda d: d["exchanges"][2].pop("barge_in_fallback")),
            sid,
            "exchanges[2].barge_in_fallback",
            "missing (a barge_in that presupposes",
        ),
        (
            "fallback without a presupposition",
            m(lambda d: d["exchanges"][1].update(message_fallback="Right. So where do I start?")),
            sid,
            "exchanges[1].message_presupposes",
            "missing",
        ),
        (
            "presupposition in exchange one",
            m(
                lambda d: d["exchanges"][0].update(
                    message_presupposes=["router"], message_fallback="Hi, my wifi keeps dropping."
                )
            ),
            sid,
            "exchanges[0].message_presupposes",
            "no earlier assistant text",
        ),
        (
            "fallback equal to the wording",
            m(
                lambda d: d["exchanges"][2].update(
                    barge_in_fallback=d["exchanges"][2]["barge_in"].upper()
                )
            ),
            sid,
            "exchanges[2].barge_in_fallback",
            "the same as the barge_in",
        ),
        (
            "fallback inside the message",
            m(
                lambda d: d["exchanges"][2].update(
                    barge_in_fallback="Is there anything I can do so my video calls stop freezing?"
                )
            ),
            sid,
            "exchanges[2].barge_in_fallback",
            "repeats the message",
        ),
        (
            "stale word in the fallback",
            m(
                lambda d: d["exchanges"][2].update(
                    barge_in_fallback="Sure, but no network cable for me, the landlord says no."
                )
            ),
            sid,
            "exchanges[2].stale",
            "'network cable' is said in the barge-in's fallback",
        ),
        (
            "presupposed word the user said first",
            m(lambda d: d["exchanges"][2]["barge_in_presupposes"].append("wifi")),
            sid,
            "exchanges[2].barge_in_presupposes[3]",
            "'wifi' is in the user's earlier words",
        ),
        (
            "evidence in a fallback message",
            m(
                lambda d: d["exchanges"][1].update(
                    message_presupposes=["modem"],
                    message_fallback="Right. Should I talk to the landlord first?",
                )
            ),
            sid,
            "exchanges[1].evidence[0]",
            "'landlord' is already in the user's earlier words",
        ),
    ]


CASES = (
    "unknown key",
    "nested unknown key",
    "digit in a message",
    "four sentences",
    "three-sentence barge-in",
    "bad label",
    "exchange one with a barge-in",
    "later exchange without one",
    "barge-in inside the message",
    "one criterion",
    "duplicate criterion id",
    "evidence already said",
    "stale word echoed by the barge-in",
    "bad seed id",
    "duplicate seed ids",
    "presupposition without a fallback",
    "fallback without a presupposition",
    "presupposition in exchange one",
    "fallback equal to the wording",
    "fallback inside the message",
    "stale word in the fallback",
    "presupposed word the user said first",
    "evidence in a fallback message",
)


def test_every_mutation_is_run(pool):
    assert tuple(c[0] for c in _mutations(pool)) == CASES


@pytest.mark.parametrize("case", CASES)
def test_bad_seed_gives_one_line_error(pool, tmp_path, case):
    _, doc, seed, field, why = next(c for c in _mutations(pool) if c[0] == case)
    f = tmp_path / "bad.json"
    f.write_text(json.dumps({"version": 1, "seeds": doc}))
    with pytest.raises(ConfigError) as e:
        S.load_seeds(f)
    msg = str(e.value)
    assert "\n" not in msg
    assert msg.startswith(f"{f}: seed {seed}: field {field}"), msg
    assert why in msg, msg


def test_bad_json_and_jsonl_lines(pool, tmp_path):
    f = tmp_path / "broken.json"
    f.write_text('{"version": 1, "seeds": [ {"seed_id": "a",, } ]}')
    with pytest.raises(ConfigError) as e:
        S.load_seeds(f)
    assert str(e.value).startswith(f"{f}: seed ?: field (json): invalid JSON at line 1 column ")
    jl = tmp_path / "mine.jsonl"
    good = json.dumps(pool[0].to_dict())
    jl.write_text(good + "\n" + "{not json\n")
    with pytest.raises(ConfigError) as e:
        S.load_seeds(jl)
    assert str(e.value).startswith(f"{jl}: seed ?: field (json): invalid JSON at line 2 column 2")
    bad = _base(pool)
    bad["exchanges"][1]["barge_in_label"] = "Nope"
    jl.write_text("\n" + json.dumps(bad) + "\n")
    with pytest.raises(ConfigError) as e:
        S.load_seeds(jl)
    assert str(e.value).startswith(
        f"{jl}:2: seed {pool[0].seed_id}: field exchanges[1].barge_in_label: unknown label"
    )


@pytest.mark.parametrize(
    "name, body, field, why",
    [
        ("seeds.txt", "[]", "(file)", "expected a .json or .jsonl seed file"),
        ("empty.json", "[]", "seeds", "the file holds no seeds"),
        ("v2.json", '{"version": 2, "seeds": []}', "version", "unsupported version 2"),
        ("top.json", '{"version": 1, "seeds": [], "extra": 1}', "extra", "unknown key"),
        ("scalar.json", "3", "(file)", "expected a list of seeds"),
    ],
)
def test_bad_file_shapes(tmp_path, name, body, field, why):
    f = tmp_path / name
    f.write_text(body)
    with pytest.raises(ConfigError) as e:
        S.load_seeds(f)
    assert str(e.value).startswith(f"{f}: seed ?: field {field}: {why}")


def test_missing_file(tmp_path):
    with pytest.raises(ConfigError) as e:
        S.load_seeds(tmp_path / "nowhere.json")
    assert (
        str(e.value)
        == f"{tmp_path / 'nowhere.json'}: seed ?: field (file): cannot read: No such file or directory"
    )
