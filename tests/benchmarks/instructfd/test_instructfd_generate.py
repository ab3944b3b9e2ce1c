"""generate_builtin with real espeak-ng, run once per module into a shared folder."""

from __future__ import annotations

import json
import shutil
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from fdeval.audio.io import read_wav
from fdeval.benchmarks.instructfd.builtin import BUILTIN_CONVERSATIONS
from fdeval.benchmarks.instructfd.generate import BENCHMARK_VERSION, generate_builtin
from fdeval.benchmarks.instructfd.instructions import render_instruction
from fdeval.benchmarks.instructfd.reference import reference_for_policy
from fdeval.cases import load_cases
from fdeval.benchmarks.instructfd.records import POLICIES, InstructFDCase
from fdeval.types import TestCase

SEED = 5


@pytest.fixture(scope="module")
def generated(espeak, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[TestCase]]:
    out = tmp_path_factory.mktemp("instructfd_small")
    return out, generate_builtin(out, espeak, seed=SEED, timeout_s=15.0, barge_in_after_s=2.5)


def _mtimes(root: Path) -> dict[str, int]:
    return {
        str(p.relative_to(root)): p.stat().st_mtime_ns
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


def test_cases_cover_all_policies_and_baselines(generated) -> None:
    out, cases = generated
    instructed = [c for c in cases if c.data.policy_name != "none"]
    assert len(instructed) >= 10
    assert set(c.data.policy_name for c in instructed) == set(POLICIES)
    by_conv: dict[str, list[TestCase]] = {}
    for c in cases:
        by_conv.setdefault(c.conversation_id, []).append(c)
    assert set(by_conv) == {c.conversation_id for c in BUILTIN_CONVERSATIONS}
    for conv in BUILTIN_CONVERSATIONS:
        group = {c.data.policy_name: c for c in by_conv[conv.conversation_id]}
        assert set(group) == {*conv.policies, "none"}
        base = group["none"]
        assert base.case_id == f"{conv.conversation_id}__none" and base.system_instruction is None
        assert base.data.judge_policies == conv.policies
        for p in conv.policies:
            c = group[p]
            assert c.case_id == f"{conv.conversation_id}__{p}" and c.data.judge_policies == (p,)
            assert (
                c.system_instruction
                == render_instruction(p, conv.scenario)
                == base.data.judge_instructions[p]
            )
            # same conversation, different instruction: identical turns and reference
            assert [t.audio_path for t in c.turns] == [t.audio_path for t in base.turns]
            assert c.data.reference == base.data.reference
    for c in cases:
        assert c.seed == SEED and c.version == BENCHMARK_VERSION and c.benchmark == "instructfd"
    assert [c.case_id for c in cases] == sorted(c.case_id for c in cases)


def test_loads_back_identically(generated) -> None:
    out, cases = generated
    loaded = load_cases(out / "cases", out, InstructFDCase)
    assert loaded == cases
    assert [c.data.judge_instructions for c in loaded] == [c.data.judge_instructions for c in cases]


def test_turn_fields_and_audio(generated) -> None:
    out, cases = generated
    seen: set[str] = set()
    total = 0.0
    for case in cases:
        for turn in case.turns:
            assert turn.case_id == case.case_id and turn.timeout_s == 15.0
            assert turn.audio_path == f"audio/{case.conversation_id}/{turn.label}.wav"
            if turn.turn_type == "barge-in":
                assert turn.barge_in_after_s == 2.5
                assert (
                    turn.barge_in_handling
                    == {"backchannel": "hold", "interrupt": "yield"}[turn.subtype]
                )
                assert turn.label.endswith(turn.subtype)
            if turn.audio_path in seen:
                continue
            seen.add(turn.audio_path)
            samples, sr = read_wav(out / turn.audio_path)
            assert sr == 16000 and samples.ndim == 1
            assert abs(samples.shape[0] / sr - turn.duration_s) < 1e-3
            assert np.abs(samples).max() > 0.05
            total += turn.duration_s
    conv_s = {}
    for case in cases:
        if case.data.policy_name == "none":
            conv_s[case.conversation_id] = sum(t.duration_s for t in case.turns)
    assert all(8.0 <= s <= 25.0 for s in conv_s.values()), conv_s


def test_trigger_times_fall_between_neighbouring_words(generated) -> None:
    out, cases = generated
    n = Counter()
    for case in cases:
        for turn in case.turns:
            for trig in case.data.turn_triggers(turn.index):
                n[trig.kind] += 1
                before, after = turn.words[trig.word_index - 1], turn.words[trig.word_index]
                assert before.end_s <= trig.at_s <= after.start_s, (case.case_id, trig)
                # the marker sits in the reference between the user speech before and after it
                ref = [
                    r for r in case.data.reference if r.tag == trig.kind and r.speaker == "model"
                ]
                assert any(r.text == trig.phrase for r in ref)
    assert n["backchannel"] >= 3 and n["interrupt"] >= 2


def test_pause_is_audible_as_silence(generated) -> None:
    out, cases = generated
    case = next(c for c in cases if c.case_id == "job_offer_move__listen")
    turn = case.turns[1]
    gaps = [b.start_s - a.end_s for a, b in zip(turn.words, turn.words[1:])]
    assert max(gaps) >= 2.0  # the scripted two-second thinking pause
    samples, sr = read_wav(out / turn.audio_path)
    i = int(np.argmax(gaps))
    quiet = samples[
        int((turn.words[i].end_s + 0.1) * sr) : int((turn.words[i + 1].start_s - 0.1) * sr)
    ]
    assert quiet.size > sr and np.abs(quiet).max() < 0.01


def test_reference_for_listen_drops_model_cut_ins(generated) -> None:
    _, cases = generated
    case = next(c for c in cases if c.case_id == "weekend_trip_thinking__listen")
    ref = reference_for_policy(case.data.reference, "listen")
    assert not any(r.speaker == "model" and r.tag in ("backchannel", "interrupt") for r in ref)
    assert ref[2].speaker == "user" and ref[2].text == case.turns[1].text
    assert reference_for_policy(case.data.reference, "backchannel") == case.data.reference


def test_rerun_is_idempotent(generated, espeak) -> None:
    out, cases = generated
    before = _mtimes(out)
    again = generate_builtin(out, espeak, seed=SEED, timeout_s=15.0, barge_in_after_s=2.5)
    assert again == cases
    assert _mtimes(out) == before


def test_missing_or_stale_files_are_regenerated(generated, espeak, tmp_path: Path) -> None:
    src, cases = generated
    out = tmp_path / "copy"
    shutil.copytree(src, out)
    (out / "cases" / "fresh_pasta_stop__none.json").unlink()
    (out / "audio" / "venus_stargazing" / "turn2.wav").unlink()
    stale = out / "cases" / "job_offer_move__listen.json"
    d = json.loads(stale.read_text())
    d["version"] = "0.0"
    stale.write_text(json.dumps(d))
    untouched = out / "cases" / "bakery_phone_number__listen.json"
    t_untouched = untouched.stat().st_mtime_ns
    again = generate_builtin(out, espeak, seed=SEED, timeout_s=15.0, barge_in_after_s=2.5)
    assert again == cases
    assert (out / "cases" / "fresh_pasta_stop__none.json").is_file()
    assert (out / "audio" / "venus_stargazing" / "turn2.wav").is_file()
    assert json.loads(stale.read_text())["version"] == BENCHMARK_VERSION
    assert untouched.stat().st_mtime_ns == t_untouched
    assert load_cases(out / "cases", out, InstructFDCase) == cases
    # audio is deterministic: regenerated files are byte-identical
    assert (out / "audio" / "venus_stargazing" / "turn2.wav").read_bytes() == (
        src / "audio" / "venus_stargazing" / "turn2.wav"
    ).read_bytes()


def test_changed_parameters_rewrite_cases(generated, espeak, tmp_path: Path) -> None:
    src, _ = generated
    out = tmp_path / "copy"
    shutil.copytree(src, out)
    one = [c for c in BUILTIN_CONVERSATIONS if c.conversation_id == "balcony_tomatoes"]
    cases = generate_builtin(
        out, espeak, seed=SEED, timeout_s=9.0, barge_in_after_s=2.5, conversations=one
    )
    assert {t.timeout_s for c in cases for t in c.turns} == {9.0}
    assert {
        t.timeout_s
        for c in load_cases(out / "cases", out, InstructFDCase)
        if c.conversation_id == "balcony_tomatoes"
        for t in c.turns
    } == {9.0}


def test_seed_changes_wording(espeak, tmp_path: Path) -> None:
    one = [c for c in BUILTIN_CONVERSATIONS if c.conversation_id == "bakery_phone_number"]
    texts = set()
    for seed in (0, 1, 2, 3):
        cases = generate_builtin(tmp_path / f"s{seed}", espeak, seed=seed, conversations=one)
        texts.add(cases[0].turns[1].text)
        assert all(c.seed == seed for c in cases)
    assert len(texts) > 1
