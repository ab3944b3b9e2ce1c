"""Sizing arithmetic for stage=plan, on hand-made cases with known lengths."""

import json
import re

import pytest
from omegaconf import OmegaConf

from fdeval.cluster.plan import estimate_case, make_plan, render
from fdeval.errors import ConfigError
from fdeval.types import TestCase, Turn


def _case(cid, kinds=("take-turn", "barge-in", "take-turn"), dur=2.0, timeout=20.0, delay=3.0):
    turns = tuple(
        Turn(cid, i, f"t{i}", k, "a.wav", "", (), dur, timeout,
             barge_in_after_s=delay if k == "barge-in" else None,
             barge_in_handling="hold" if k == "barge-in" else None,
             subtype="backchannel" if k == "barge-in" else None)
        for i, k in enumerate(kinds)
    )
    return TestCase(cid, cid, "instructfd", "s", None, turns)


def test_case_estimate_counts_audio_waits_and_timeouts():
    e = estimate_case(_case("c"), silence_s=1.5, trailing_s=1.0, model_turn_s=8.0, delay_override_s=None)
    # turn0: 1.5 wait; turn1 (barge-in): 3.0 delay; turn2: 8 + 1.5; each turn 2 s audio + 1 s trailing; final 8 + 1.5
    assert e.audio_s == 6.0
    assert e.expected_s == pytest.approx(1.5 + 3.0 + 9.5 + 3 * 3.0 + 9.5)
    assert e.worst_s == pytest.approx(1.5 + (20 + 3.0) + 20 + 3 * 3.0 + 20)
    e2 = estimate_case(_case("c"), 1.5, 1.0, 8.0, delay_override_s=0.5)
    assert e.expected_s - e2.expected_s == pytest.approx(2.5)


def _cfg(**launcher):
    base = {
        "benchmark": {"name": "instructfd"},
        "model": {"name": "big", "resources": {"gpu_mem_gb": 17.0, "realtime": True, "startup_s": 60}},
        "orchestrator": {"silence_s": 1.5, "trailing_silence_s": 1.0, "barge_in_delay_s": None},
        "launcher": {"gpus_per_task": 8, "gpu_mem_gb": 80, "cases_per_task": 10, "plan": {"model_turn_s": 8.0, "gpu_mem_util": 0.9}},
    }
    base["launcher"].update(launcher)
    return OmegaConf.create(base)


def test_plan_fits_instances_and_counts_tasks_and_gpu_hours():
    cases = [_case(f"c{i}") for i in range(25)]
    p = make_plan(cases, _cfg())
    per_case = estimate_case(cases[0], 1.5, 1.0, 8.0, None).expected_s
    assert p.instances_per_gpu == 4  # floor(80 * 0.9 / 17)
    assert p.sessions_in_parallel_per_task == 32
    assert p.tasks == 3  # ceil(25 / 10)
    # the largest shard (cases[0::3]) has 9 cases; realtime: 1 session-second per wall-second
    assert p.wall_s_per_task_expected == pytest.approx(60 + 9 * per_case / 32)
    assert p.gpu_hours_expected == pytest.approx(3 * 8 * p.wall_s_per_task_expected / 3600)
    assert p.session_s_expected == pytest.approx(25 * per_case)


def test_configured_instances_per_gpu_wins_and_too_big_model_is_an_error():
    cases = [_case("c")]
    assert make_plan(cases, _cfg(instances_per_gpu=2)).instances_per_gpu == 2
    with pytest.raises(ConfigError, match="cannot hold"):
        make_plan(cases, _cfg(gpu_mem_gb=16))


def test_fixed_tail_replaces_the_final_wait():
    c = _case("c", kinds=("take-turn",))
    e = estimate_case(c, silence_s=1.5, trailing_s=1.0, model_turn_s=8.0, delay_override_s=None, tail_s=5.0)
    assert e.expected_s == pytest.approx(1.5 + 2.0 + 1.0 + 5.0) and e.worst_s == pytest.approx(e.expected_s)
    p = make_plan([c], _cfg(), fixed={"tail_after_last_turn_s": 5.0})
    assert p.session_s_expected == pytest.approx(e.expected_s)


def test_a_served_model_is_planned_with_the_instances_its_server_pool_starts():
    cases = [_case("c")]
    cfg = _cfg(instances_per_gpu=4)  # the launcher's value is for models without a server block
    cfg.model.server = {"instances_per_gpu": 2}
    assert make_plan(cases, cfg).instances_per_gpu == 2
    cfg.model.server.instances_per_gpu = 5  # 5 x 17 GB > 72 GB usable
    with pytest.raises(ConfigError, match=r"model.server.instances_per_gpu=5: .* at most 4"):
        make_plan(cases, cfg)


def test_a_realtime_plan_sizes_the_client_processes_from_the_configured_cost():
    cases = [_case(f"c{i}") for i in range(40)]
    p = make_plan(cases, _cfg(cases_per_task=40, cpus_per_task=16))
    # 32 sessions in flight x 0.05 CPU-s per session-second = 1.6 cores; half a core per process
    assert p.client_cpu_s_per_session_s == pytest.approx(0.05)
    assert p.client_cpu_cores_per_task == pytest.approx(32 * 0.05)
    assert p.client_processes_per_task == 4
    assert re.search(r"client processes per task +\| 4 \|", render(p))
    # a lockstep model paces nothing
    lock = _cfg()
    lock.model.resources = {"gpu_mem_gb": 17.0, "realtime": False, "lockstep_speed": 20}
    assert make_plan(cases, lock).client_cpu_s_per_session_s is None
    assert "client" not in render(make_plan(cases, lock))


def test_the_plan_takes_the_cost_a_bench_run_measured(tmp_path):
    bench = tmp_path / "bench.json"
    bench.write_text(json.dumps({"realtime": {"client_cpu_s_per_session_s": 0.1}}))
    cfg = _cfg(cases_per_task=40, cpus_per_task=16)
    cfg.launcher.plan.bench = str(bench)
    p = make_plan([_case(f"c{i}") for i in range(40)], cfg)
    assert p.client_cpu_s_per_session_s == 0.1 and p.client_cost_source == str(bench)
    assert p.client_processes_per_task == 7  # ceil(32 x 0.1 / 0.5)
    for text, field in [("{", "realtime.client_cpu_s_per_session_s"), ('{"realtime": {}}', "realtime.client_cpu_s_per_session_s"),
                        ('{"realtime": {"client_cpu_s_per_session_s": -1}}', "must be > 0")]:
        bench.write_text(text)
        with pytest.raises(ConfigError, match=f"launcher.plan.bench: {bench}.*{field}"):
            make_plan([_case("c")], cfg)
    bench.unlink()
    with pytest.raises(ConfigError, match="cannot read"):
        make_plan([_case("c")], cfg)
