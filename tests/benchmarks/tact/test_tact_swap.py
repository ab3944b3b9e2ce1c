"""The profile-swap ablation (Sec. VI, issue 27 item 9): partners of opposite behavioural type,
swapped instructions in the cases, and the command on the offline reference agent."""

from __future__ import annotations

import csv

import pytest

from fdeval.benchmarks.tact import swap
from fdeval.benchmarks.tact.benchmark import Tact
from fdeval.benchmarks.tact.episodes import SpeakerProfile, render_synopsis
from fdeval.benchmarks.tact.synthetic import generate_synthetic
from fdeval.errors import ConfigError

TINY = [
    "benchmark.n_episodes=4",
    "benchmark.repeats=1",
    "benchmark.n_resamples=200",
    "progress=false",
    "report.writers=[]",
]  # no timelines: nothing here reads them


def profile(fto: float, abstention: float, rate: float = 4.0) -> SpeakerProfile:
    return SpeakerProfile(10.0, fto, fto - 0.3, fto + 0.5, 0.5, 1.0, abstention, 3.0, 4.0, rate, {})


def test_partners_are_of_the_other_type_and_farthest_in_behaviour():
    profiles = {
        "a": profile(0.05, 0.8),
        "b": profile(0.1, 1.0),
        "c": profile(0.45, 2.4),
        "d": profile(0.4, 2.0),
        "e": profile(0.42, 2.2, rate=6.0),
    }
    types = swap.behaviour_types(profiles)
    assert types == {"a": "quick", "b": "quick", "c": "patient", "d": "patient", "e": "patient"}
    partners = swap.swap_partners(profiles)
    assert all(types[s] != types[p] for s, p in partners.items()) and set(partners) == set(profiles)
    # the patient speakers all get the quickest one; the quick ones get e, farthest once its
    # faster articulation counts too
    assert partners == {"a": "e", "b": "e", "c": "a", "d": "a", "e": "a"}
    assert swap.swap_partners({"solo": profile(0.2, 1.0)}) == {}  # nobody to swap with


def test_swapped_cases_carry_the_partners_synopsis(tmp_path):
    generate_synthetic(tmp_path, 4, seed=0)
    own, swapped = Tact(n_episodes=4, repeats=1), Tact(n_episodes=4, repeats=1, profiles="swapped")
    eps = {e.episode_id: e for e in own.episodes(tmp_path)}
    partners = swap.swap_partners({e.speaker_id: e.profile for e in eps.values()})
    by_speaker = {e.speaker_id: e.profile for e in eps.values()}
    a, b = own.load(tmp_path), swapped.load(tmp_path)
    assert [c.case_id for c in a] == [
        c.case_id for c in b
    ]  # same ids, hence the same per-case seeds
    assert [c.turns for c in a] == [c.turns for c in b]  # only the instruction differs
    changed = 0
    for ca, cb in zip(a, b):
        e = eps[ca.conversation_id]
        assert ca.system_instruction == render_synopsis(e.profile)
        assert cb.system_instruction == render_synopsis(by_speaker[partners[e.speaker_id]])
        changed += ca.system_instruction != cb.system_instruction
    assert changed == len(a)
    # the plan's cases (no audio) swap the same way
    specs = swapped.case_specs(tmp_path, 0, None)
    assert [c.system_instruction for c in specs] == [c.system_instruction for c in b]
    with pytest.raises(ConfigError, match="benchmark.profiles: unknown option"):
        Tact(profiles="theirs")


def test_swap_command_on_the_reference_agent(tmp_path, capsys):
    """Two tiny launches (the second with benchmark.profiles=swapped) and the table: the reference
    agent never reads the profile, so its onsets do not move."""
    out = tmp_path / "table"
    assert swap.main([*TINY, f"out_root={tmp_path / 'out'}", "--out", str(out)]) == 0
    rows = list(csv.DictReader((out / "profile_swap.csv").open()))
    assert [r["system"] for r in rows] == ["reference", "human (continuations)"]
    ref = rows[0]
    assert (
        float(ref["jsd2"]) <= 0.02 and abs(float(ref["delta_S"])) <= 0.01 and ref["onsets"] == "4"
    )
    assert 0.0 <= float(rows[1]["jsd2"]) <= 1.0
    md = (out / "profile_swap.md").read_text()
    assert (
        md.startswith("# TACT profile swap")
        and "| reference |" in md
        and md in capsys.readouterr().out
    )
    runs = sorted((tmp_path / "out" / "tact" / "reference").iterdir())
    own = next(r for r in runs if "profiles=swapped" not in r.name)
    swapped = next(r for r in runs if "profiles=swapped" in r.name)
    # comparing the finished runs again needs no launch; the wrong order is one line, exit 2
    assert swap.main(["--runs", str(own), str(swapped), "--out", str(tmp_path / "again")]) == 0
    assert (tmp_path / "again" / "profile_swap.csv").read_text() == (
        out / "profile_swap.csv"
    ).read_text()
    assert swap.main(["--runs", str(swapped), str(own)]) == 2
    assert "benchmark.profiles=own" in capsys.readouterr().err
