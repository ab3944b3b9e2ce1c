"""Generated Instruct-FD sets end to end with real espeak-ng: one conversation per scenario."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from fdeval.audio.io import read_wav
from fdeval.benchmarks.instructfd.benchmark import InstructFD
from fdeval.engine.identity import data_dir
from fdeval.benchmarks.instructfd.instructions import SCENARIOS
from fdeval.benchmarks.instructfd.personas import load_personas
from fdeval.benchmarks.instructfd.pipeline import (
    DATA_VERSION,
    REPORT_NAME,
    GenerationConfig,
    OfflineTextBackend,
    generate_dataset,
    plan_dataset,
)
from fdeval.benchmarks.instructfd.reference import reference_for_policy
from fdeval.cases import load_cases
from fdeval.errors import ConfigError, FdevalError
from fdeval.benchmarks.instructfd.records import POLICIES, InstructFDCase

SEED = 3


@pytest.fixture(scope="module")
def generated(espeak, tmp_path_factory):
    bench = InstructFD(size="sample", conversations_per_scenario=1)
    root = tmp_path_factory.mktemp("ifd_gen")
    data_dir = root / "_data" / bench.data_id(SEED)
    bench.generate(data_dir, espeak, SEED, progress=False)
    return bench, data_dir, bench.load(data_dir)


def _mtimes(root: Path) -> dict[str, int]:
    return {
        str(p.relative_to(root)): p.stat().st_mtime_ns
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


def test_one_conversation_per_scenario_loads_back(generated) -> None:
    bench, data_dir, cases = generated
    assert cases == load_cases(data_dir / "cases", data_dir, InstructFDCase)
    by_policy = Counter(c.data.policy_name for c in cases)
    assert {p: by_policy[p] for p in POLICIES} == {
        "backchannel": 5,
        "listen": 13,
        "interrupt": 5,
        "continue": 5,
        "acknowledge": 10,
    }
    assert by_policy["none"] == 29 and len({c.conversation_id for c in cases}) == 29
    assert {c.scenario for c in cases} == set(SCENARIOS)
    for c in cases:
        assert c.version == DATA_VERSION == bench.version and c.seed == SEED
        base = next(
            b
            for b in cases
            if b.conversation_id == c.conversation_id and b.data.policy_name == "none"
        )
        assert c.data.reference == base.data.reference and [t.audio_path for t in c.turns] == [
            t.audio_path for t in base.turns
        ]
        if c.data.policy_name != "none":
            assert c.data.judge_policies == (c.data.policy_name,)
    plan = plan_dataset(bench.generation_config(SEED), OfflineTextBackend(), load_personas())
    planned = sorted(c.case_id for cs in plan.cases().values() for c in cs)
    assert planned == [
        c.case_id for c in cases
    ]  # the planning step predicts the written set exactly


def test_markers_become_exact_triggers_and_barge_ins(generated) -> None:
    _, data_dir, cases = generated
    kinds: Counter[str] = Counter()
    for case in (c for c in cases if c.data.policy_name == "none"):
        spec_cut = SCENARIOS[case.scenario].policies
        for turn in case.turns:
            samples, sr = read_wav(data_dir / turn.audio_path)
            assert (
                abs(samples.shape[0] / sr - turn.duration_s) < 1e-3 and np.abs(samples).max() > 0.05
            )
            for trig in case.data.turn_triggers(turn.index):
                kinds[f"trigger:{trig.kind}"] += 1
                assert trig.kind in spec_cut
                before, after = turn.words[trig.word_index - 1], turn.words[trig.word_index]
                assert before.end_s <= trig.at_s <= after.start_s
            if turn.turn_type == "barge-in":
                kinds[f"barge-in:{turn.subtype}"] += 1
                assert (
                    turn.barge_in_handling
                    == {"backchannel": "hold", "interrupt": "yield"}[turn.subtype]
                )
                assert turn.barge_in_after_s == 3.0
        if "listen" in spec_cut:  # under listen, the reference keeps no model cut-in
            ref = reference_for_policy(case.data.reference, "listen")
            assert not any(
                r.speaker == "model" and r.tag in ("backchannel", "interrupt") for r in ref
            )
    # one conversation per scenario: 5 interrupt triggers, a backchannel trigger in each of the 5
    # backchannel scenarios, Clause Boundary Tracking one at each of its >= 3 boundaries
    assert kinds.pop("trigger:backchannel") >= 5 + 2
    assert kinds == {"trigger:interrupt": 5, "barge-in:backchannel": 5, "barge-in:interrupt": 10}


def test_a_voice_per_persona_recorded_in_every_case(generated) -> None:
    _, data_dir, cases = generated
    by_conv: dict[str, set[str]] = {}
    for case in cases:
        v = case.data.voice
        assert v is not None and v["backend"] == "espeak" and v["rate_wpm"] == 165
        by_conv.setdefault(case.conversation_id, set()).add(json.dumps(v, sort_keys=True))
    assert all(
        len(vs) == 1 for vs in by_conv.values()
    )  # the cases of a conversation share its audio
    used = {json.loads(next(iter(vs)))["voice"] for vs in by_conv.values()}
    assert len(used) >= 4
    r = json.loads((data_dir / REPORT_NAME).read_text())
    assert (
        r["audio"]["distinct_voices"] == len(used)
        and sum(r["audio"]["conversations_by_voice"].values()) == 29
    )


def test_report_and_scripts(generated) -> None:
    _, data_dir, cases = generated
    r = json.loads((data_dir / REPORT_NAME).read_text())
    assert r["counts"]["conversations"] == 29 and r["counts"]["instructed_cases"] == 38
    assert r["counts"]["instructed_by_policy"] == r["counts"]["expected"]["instructed"]
    assert r["discards"] == {"total": 0, "by_reason": {}}
    assert (
        r["backend"]["backend"] == "offline" and r["seed"] == SEED and r["version"] == DATA_VERSION
    )
    assert r["audio"]["user_audio_seconds"] > 29 * 5 and r["run"]["wall_s"] > 0
    assert r["variety"]["user_turns_distinct_fraction"] == 1.0
    scripts = sorted(p.stem for p in (data_dir / "scripts").glob("*.json"))
    assert scripts == sorted({c.conversation_id for c in cases})
    s = json.loads((data_dir / "scripts" / f"{scripts[0]}.json").read_text())
    assert (
        s["grounding"].startswith(s["persona"]["name"].split()[0])
        and s["lines"][0]["speaker"] == "user"
    )


def test_rerun_rewrites_nothing_and_resumes_what_is_missing(generated, espeak) -> None:
    bench, data_dir, cases = generated
    before = _mtimes(data_dir)
    bench.generate(data_dir, espeak, SEED, progress=False)
    assert _mtimes(data_dir) == before
    # a crash left one conversation without a case file and another without audio; a stray
    # conversation from another selection is removed
    a, b = sorted({c.conversation_id for c in cases})[:2]
    (data_dir / "cases" / f"{a}__none.json").unlink()
    for p in (data_dir / "audio" / b).iterdir():
        p.unlink()
    stray = data_dir / "cases" / "hearing_check_999__none.json"
    stray.write_text("{}")
    bench.generate(data_dir, espeak, SEED, progress=False)
    assert not stray.exists()
    after = _mtimes(data_dir)
    changed = {k for k in after if after[k] != before.get(k)}
    assert changed and all(
        f"/{a}" in k
        or f"/{b}" in k
        or k.startswith(f"cases/{a}")
        or k.startswith(f"cases/{b}")
        or k == REPORT_NAME
        for k in changed
    ), changed
    assert bench.load(data_dir) == cases
    assert json.loads((data_dir / REPORT_NAME).read_text())["run"]["conversations_written"] == 2


class FailingTTS:
    """Real espeak-ng, except that it raises for texts containing `bad` (to exercise discards)."""

    def __init__(self, tts, bad: str | None):
        self.tts, self.bad = tts, bad

    def __getattr__(self, name: str):  # voices, identity, sample_rate: the real synthesizer's
        return getattr(self.tts, name)

    def with_voice(self, voice: str) -> "FailingTTS":
        return FailingTTS(self.tts.with_voice(voice), self.bad)

    def synthesize(self, text: str):
        if self.bad is None or self.bad in text:
            raise RuntimeError("synthesis failed (test)")
        return self.tts.synthesize(text)


def test_a_failed_synthesis_is_replaced_from_the_reserves(espeak, tmp_path: Path) -> None:
    cfg = GenerationConfig(per_scenario=1, seed=0, scenarios=("Hearing Check",), pool_factor=2.0)
    personas = load_personas()
    plan = plan_dataset(cfg, OfflineTextBackend(), personas)
    first, second = plan.scenarios["Hearing Check"].order[:2]
    bad = first.lines[0][1].split(".")[0]  # a piece of the first selected conversation's question
    assert bad not in second.lines[0][1]
    res = generate_dataset(tmp_path, FailingTTS(espeak, bad), cfg, OfflineTextBackend(), personas)
    assert {c.conversation_id for c in res.cases} == {second.conversation_id}
    assert res.report["discards"] == {"total": 1, "by_reason": {"tts": 1}}
    assert res.report["scenarios"]["Hearing Check"]["discards"] == {"tts": 1}
    with pytest.raises(FdevalError, match="too few usable conversations.*pool_factor"):
        generate_dataset(
            tmp_path / "b", FailingTTS(espeak, None), cfg, OfflineTextBackend(), personas
        )


def test_config_checks_and_data_ids() -> None:
    small = InstructFD()
    assert (
        small.data_id(0) == "small-v2.0-seed0-t60-b3"
    )  # version, A.7's 60 s timeout, 3 s barge-in delay
    full = InstructFD(size="full")
    assert full.per_scenario == 24 and full.version == DATA_VERSION
    assert full.data_id(0).startswith("full-g") and "-offline-seed0-" in full.data_id(0)
    assert full.data_id(0) != full.data_id(1)
    n3 = InstructFD(size="full", conversations_per_scenario=3)
    assert "-n3-" in n3.data_id(0) and n3.data_id(0) != full.data_id(0)
    assert InstructFD(size="sample").per_scenario == 2
    llm = InstructFD(
        size="full", text_backend="anthropic", llm={"backend": "anthropic", "model": "m", "seed": 0}
    )
    assert "-anthropic-" in llm.data_id(0)
    own = InstructFD(
        size="full", text_backend="llm", llm={"backend": "vllm", "model": "m", "seed": 0}
    )
    assert "-llm-" in own.data_id(0) and own._backend_identity()["backend"] == "vllm"
    for kwargs, key in [
        ({"size": "huge"}, "benchmark.size"),
        ({"conversations_per_scenario": 3}, "benchmark.conversations_per_scenario"),
        ({"size": "full", "conversations_per_scenario": 0}, "benchmark.conversations_per_scenario"),
        ({"size": "full", "text_backend": "gpt"}, "benchmark.text_backend"),
        ({"size": "full", "pool_factor": 0.5}, "benchmark.pool_factor"),
        ({"size": "full", "workers": 0}, "benchmark.workers"),
        ({"size": "full", "llm": {"modle": "x"}}, "benchmark.llm"),
        (
            {"size": "full", "text_backend": "anthropic", "llm": {"backend": "none"}},
            "benchmark.text_backend",
        ),
        (
            {"size": "full", "text_backend": "llm", "llm": {"backend": "gpt", "model": "m"}},
            "benchmark.llm.backend",
        ),
        (
            {"size": "full", "text_backend": "llm", "llm": {"backend": "vllm"}},
            "benchmark.llm.model",
        ),
    ]:
        with pytest.raises(ConfigError, match=f"^{key}"):
            InstructFD(**kwargs)


def test_data_spoken_by_another_voice_or_backend_lives_in_another_folder(tmp_path: Path) -> None:
    espeak = {
        "_target_": "fdeval.audio.tts.EspeakTTS",
        "voice": "en-us+m3",
        "rate_wpm": 165,
        "sample_rate": 16000,
    }
    bench = InstructFD()
    a = data_dir(tmp_path, bench, 0, espeak)
    assert a == data_dir(
        tmp_path, bench, 0, {**espeak, "rate_wpm": 165.0}
    )  # 165 and 165.0 are one setting
    assert a != data_dir(tmp_path, bench, 0, {**espeak, "voices": ["en-us+f2"]})
    assert a != data_dir(
        tmp_path, bench, 0, {"_target_": "fdeval.audio.piper.PiperTTS", "sample_rate": 16000}
    )
    assert a.name.startswith(bench.data_id(0) + "-tts")
