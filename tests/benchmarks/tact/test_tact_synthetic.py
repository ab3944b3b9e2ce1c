"""The synthetic TACT episode generator: deterministic per seed, valid episodes, controlled probes."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from fdeval.audio.io import read_wav
from fdeval.benchmarks.tact.episodes import load_episodes
from fdeval.benchmarks.tact.laws import INTENTS
from fdeval.benchmarks.tact.scoring import CATEGORIES
from fdeval.benchmarks.tact.synthetic import (
    CATEGORY_INTENTS,
    LABEL_CONFUSION,
    generate_synthetic,
    plan_episode,
    synthetic_speakers,
)

N = 6


@pytest.fixture(scope="module")
def two_runs(tmp_path_factory):
    a, b = tmp_path_factory.mktemp("syn_a"), tmp_path_factory.mktemp("syn_b")
    assert generate_synthetic(a, N, seed=3, workers=2) == N
    assert generate_synthetic(b, N, seed=3, workers=1) == N
    return a, b


def files(root: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()
    }


def test_same_seed_same_bytes(two_runs):
    a, b = two_runs
    fa, fb = files(a), files(b)
    assert fa.keys() == fb.keys() and len([k for k in fa if k.endswith(".json")]) == N
    assert fa == fb


def test_rerun_writes_nothing_and_sizes_are_prefixes(two_runs, tmp_path):
    a, _ = two_runs
    before = {p: p.stat().st_mtime_ns for p in a.rglob("*") if p.is_file()}
    assert generate_synthetic(a, N, seed=3) == 0
    assert {p: p.stat().st_mtime_ns for p in a.rglob("*") if p.is_file()} == before
    speakers = synthetic_speakers(3)
    small = [plan_episode(3, i, speakers) for i in range(2)]
    assert [p.episode_id for p in small] == sorted(e.episode_id for e in load_episodes(a))[:2]
    other = [plan_episode(4, i, synthetic_speakers(4)) for i in range(N)]
    assert [(p.intent, p.probe) for p in other] != [
        (p.intent, p.probe) for p in (plan_episode(3, i, speakers) for i in range(N))
    ]


def test_episodes_are_valid_and_controlled(two_runs):
    root, _ = two_runs
    eps = load_episodes(root)
    assert Counter(e.category for e in eps) == Counter(CATEGORIES[i % 4] for i in range(N))
    for e in eps:
        truth = e.meta["true_intent"]
        assert truth in CATEGORY_INTENTS[e.category]
        assert 3 <= len(e.annotations.labels) <= 5
        assert set(e.annotations.labels) <= set(LABEL_CONFUSION[truth])
        # the context ends at the decision point: the focal speaker's probe is the last thing said
        assert e.history[-1].speaker == "focal" and e.history[-1].text == e.meta["probe"]
        assert e.history[-1].end_s == pytest.approx(0.0, abs=0.05)
        assert e.focal_speech[-1][1] == pytest.approx(0.0, abs=0.1)
        # the replay pieces are the focal channel of the stereo context, nothing else
        stereo, sr = read_wav(root / e.audio_path)
        assert stereo.shape[1] == 2 and stereo.shape[0] / sr == pytest.approx(e.context_s, abs=1e-3)
        for piece in e.replay:
            mono, _ = read_wav(root / piece.audio_path)
            i0 = round((piece.start_s + e.context_s) * sr)
            np.testing.assert_array_equal(mono, stereo[i0 : i0 + mono.size, e.focal_channel])
        # the other channel carries the other speaker
        assert np.abs(stereo[:, 1 - e.focal_channel]).max() > 0.05
        if e.category == "user_interruption":
            assert [p.kind for p in e.replay] == ["take-turn", "barge-in"]
            assert 1.2 <= e.replay[1].barge_in_after_s <= 2.2
        else:
            assert [p.kind for p in e.replay] == ["take-turn"]
        assert e.human is not None and set(e.slices) == {
            "gender",
            "age_band",
            "l1_region",
            "snr",
            "rate_tercile",
        }
        assert e.profile.articulation_rate_syl_s > 0 and e.meta["voice"].startswith(
            ("en-us", "en+", "en-029")
        )


def test_label_distributions_are_documented_distributions():
    for z, row in LABEL_CONFUSION.items():
        assert z in INTENTS and set(row) <= set(INTENTS) and sum(row.values()) == pytest.approx(1.0)
        assert max(row, key=row.get) == z  # the majority label is the probe's intent
    for cat, mix in CATEGORY_INTENTS.items():
        assert cat in CATEGORIES and sum(mix.values()) == pytest.approx(1.0)


def _same_partition(a: list[str], b: list[str]) -> bool:
    """Whether two labellings of the same items split them the same way (a relabelling)."""
    return len(set(a)) == len(set(b)) == len(set(zip(a, b)))


def test_slices_vary_independently():
    """Version 1 tied the rate tercile to gender (mid/slow were exactly the m/f episodes): every pair
    of slice keys is now crossed over the speaker pool, and no key relabels another in a data set."""
    keys = ("gender", "age_band", "l1_region", "rate_tercile")
    pool = synthetic_speakers(0)
    attrs = {
        "gender": [s.gender for s in pool],
        "age_band": [s.age_band for s in pool],
        "l1_region": [s.l1_region for s in pool],
        "rate_tercile": [s.rate for s in pool],
    }
    for i, a in enumerate(keys):
        for b in keys[i + 1 :]:
            pairs = set(zip(attrs[a], attrs[b]))
            assert len(pairs) == len(set(attrs[a])) * len(set(attrs[b])), (a, b)  # fully crossed
            assert not _same_partition(attrs[a], attrs[b]), (a, b)
    # within a gender, (age, region) runs over all 9 pairs; across genders the rate of a pair differs
    assert len(set(zip(attrs["gender"], attrs["age_band"], attrs["l1_region"]))) == len(pool) == 18
    rates = {}
    for s in pool:
        rates.setdefault((s.age_band, s.l1_region), set()).add(s.rate)
    assert any(len(r) > 1 for r in rates.values())  # the rate is no function of age and region
    assert {s.profile.articulation_rate_syl_s for s in pool if s.rate == "fast"} == {195 * 1.4 / 60}
    plans = [plan_episode(0, i, pool) for i in range(48)]  # the default data set, without audio
    ep = {
        "gender": [p.speaker.gender for p in plans],
        "age_band": [p.speaker.age_band for p in plans],
        "l1_region": [p.speaker.l1_region for p in plans],
        "rate_tercile": [p.speaker.rate for p in plans],
        "snr": [p.snr for p in plans],
    }
    names = list(ep)
    for i, a in enumerate(names):
        for b in names[i + 1 :]:
            assert not _same_partition(ep[a], ep[b]), (a, b)
    assert len(set(zip(ep["gender"], ep["rate_tercile"]))) == 6  # every gender at every rate
