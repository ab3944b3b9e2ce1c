"""Sizing arithmetic for stage=plan, on hand-made cases with known lengths."""

import json
import logging
import re
import subprocess
import sys
import types

import pytest
from omegaconf import OmegaConf

from fdeval.cluster.plan import estimate_case, make_plan, render, write_plan
from fdeval.errors import ConfigError
from fdeval.types import TestCase, Turn


def _case(cid, kinds=("take-turn", "barge-in", "take-turn"), dur=2.0, timeout=20.0, delay=3.0):
    turns = tuple(
        Turn(
            cid,
            i,
            f"t{i}",
            k,
            "a.wav",
            "",
            (),
            dur,
            timeout,
            barge_in_after_s=delay if k == "barge-in" else None,
            barge_in_handling="hold" if k == "barge-in" else None,
            subtype="backchannel" if k == "barge-in" else None,
        )
        for i, k in enumerate(kinds)
    )
    return TestCase(cid, cid, "instructfd", "s", None, turns)


def test_case_estimate_counts_audio_waits_and_timeouts():
    e = estimate_case(
        _case("c"), silence_s=1.5, trailing_s=1.0, model_turn_s=8.0, delay_override_s=None
    )
    # turn0: 1.5 wait; turn1 (barge-in): 3.0 delay; turn2: 8 + 1.5; each turn 2 s audio + 1 s trailing; final 8 + 1.5
    assert e.audio_s == 6.0
    assert e.expected_s == pytest.approx(1.5 + 3.0 + 9.5 + 3 * 3.0 + 9.5)
    assert e.worst_s == pytest.approx(1.5 + (20 + 3.0) + 20 + 3 * 3.0 + 20)
    e2 = estimate_case(_case("c"), 1.5, 1.0, 8.0, delay_override_s=0.5)
    assert e.expected_s - e2.expected_s == pytest.approx(2.5)


def _cfg(**launcher):
    base = {
        "benchmark": {"name": "instructfd"},
        "model": {
            "name": "big",
            "resources": {"gpu_mem_gb": 17.0, "realtime": True, "startup_s": 60},
        },
        "orchestrator": {"silence_s": 1.5, "trailing_silence_s": 1.0, "barge_in_delay_s": None},
        "launcher": {
            "gpus_per_task": 8,
            "gpu_mem_gb": 80,
            "cases_per_task": 10,
            "plan": {"model_turn_s": 8.0, "gpu_mem_util": 0.9},
        },
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
    e = estimate_case(
        c, silence_s=1.5, trailing_s=1.0, model_turn_s=8.0, delay_override_s=None, tail_s=5.0
    )
    assert e.expected_s == pytest.approx(1.5 + 2.0 + 1.0 + 5.0) and e.worst_s == pytest.approx(
        e.expected_s
    )
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
    for text, field in [
        ("{", "realtime.client_cpu_s_per_session_s"),
        ('{"realtime": {}}', "realtime.client_cpu_s_per_session_s"),
        ('{"realtime": {"client_cpu_s_per_session_s": -1}}', "must be > 0"),
    ]:
        bench.write_text(text)
        with pytest.raises(ConfigError, match=f"launcher.plan.bench: {bench}.*{field}"):
            make_plan([_case("c")], cfg)
    bench.unlink()
    with pytest.raises(ConfigError, match="cannot read"):
        make_plan([_case("c")], cfg)


# -- batched lockstep models (model.batch_size rows per forward pass, one instance per GPU) ------------

# Test data, made up: 16 GB of weights; at B = 1, 8, 32 a speed of 10, 50, 120 session-s per wall-s
# and 1.0, 0.5, 0.4 GB of GPU memory per row.
SPEED_JSON = {
    "env": {
        "device": "Test GPU 80GB",
        "device_kind": "cuda",
        "torch": "test",
        "model": "made-up test data",
    },
    "weights_bytes": 16e9,
    "harness": [
        {"batch": b, "speed": s, "gpu_peak_bytes": 16e9 + b * m, "gpu_mem_per_row_bytes": m}
        for b, s, m in [(1, 10.0, 1.0e9), (8, 50.0, 0.5e9), (32, 120.0, 0.4e9)]
    ],
}


def _speed_json(tmp_path, data=SPEED_JSON):
    path = tmp_path / "speed.json"
    path.write_text(json.dumps(data))
    return path


def _lock_cfg(batch, bench=None, gpu_name=None, gpus_per_task=1, **launcher):
    cfg = _cfg(gpus_per_task=gpus_per_task, **launcher)
    cfg.model = {
        "name": "lock",
        "batch_size": batch,
        "resources": {
            "gpu_mem_gb": 30.0,
            "realtime": False,
            "lockstep_speed": 8.0,
            "startup_s": 60,
        },
    }
    cfg.launcher.plan.lockstep_bench = None if bench is None else str(bench)
    cfg.launcher.gpu_name = gpu_name
    return cfg


def test_a_batched_model_is_sized_from_the_speed_measured_at_its_batch_size(tmp_path):
    cases = [_case(f"c{i}") for i in range(25)]
    bench = _speed_json(tmp_path)
    p = make_plan(cases, _lock_cfg(8, bench, gpu_name="Test GPU 80GB"))
    b = p.batched
    assert (
        b.measured
        and b.source == str(bench)
        and b.gpu_name == "Test GPU 80GB"
        and b.gpu_name_checked
    )
    assert b.measured_batch_sizes == (1, 8, 32)
    assert p.session_speed == b.speed_per_gpu == 50.0  # exact at a measured B
    assert b.gpu_mem_per_row_bytes == 0.5e9 and b.gpu_mem_per_instance_bytes == 16e9 + 8 * 0.5e9
    assert p.model_gpu_mem_gb == pytest.approx(20.0)
    # one instance on the task's one GPU: its 8 rows are the task's parallelism; the wall time counts
    # the GPU's speed once
    assert p.instances_per_gpu == 1 and p.sessions_in_parallel_per_task == 8
    shard = sum(estimate_case(c, 1.5, 1.0, 8.0, None).expected_s for c in cases[0::3])
    assert p.wall_s_per_task_expected == pytest.approx(60 + shard / 50.0)
    assert p.gpu_hours_expected == pytest.approx(3 * 1 * p.wall_s_per_task_expected / 3600)
    text = render(p)
    assert re.search(r"per instance +\| 50 per GPU at B=8 \(measured\) \|", text)
    assert f"measured on Test GPU 80GB ({bench})" in text and "16.00 GB + 8 rows = 20.00 GB" in text


def test_speed_and_memory_are_interpolated_between_measured_batch_sizes(tmp_path):
    p = make_plan([_case("c")], _lock_cfg(4, _speed_json(tmp_path)))
    # B=4 lies 3/7 of the way from B=1 to B=8
    assert p.session_speed == pytest.approx(10 + 40 * 3 / 7)
    row = 1.0e9 - 0.5e9 * 3 / 7
    assert p.batched.gpu_mem_per_row_bytes == pytest.approx(row)
    assert p.batched.gpu_mem_per_instance_bytes == pytest.approx(16e9 + 4 * row)
    assert p.sessions_in_parallel_per_task == 4
    assert "launcher.gpu_name unset: not checked" in render(p)
    p20 = make_plan([_case("c")], _lock_cfg(20, _speed_json(tmp_path)))
    assert p20.session_speed == pytest.approx(50 + 70 * 12 / 24)


def test_a_batch_size_outside_the_measured_ones_is_an_error(tmp_path):
    bench = _speed_json(tmp_path)
    with pytest.raises(
        ConfigError,
        match=rf"launcher.plan.lockstep_bench: {bench}: model.batch_size=33 "
        r"is outside the measured batch sizes 1, 8, 32",
    ):
        make_plan([_case("c")], _lock_cfg(33, bench))
    measured_from_2 = {
        **SPEED_JSON,
        "harness": [{**row, "batch": row["batch"] + 1} for row in SPEED_JSON["harness"]],
    }
    with pytest.raises(
        ConfigError, match=r"model.batch_size=1 is outside the measured batch sizes 2, 9, 33"
    ):
        make_plan([_case("c")], _lock_cfg(1, _speed_json(tmp_path, measured_from_2)))
    for batch in (0, "eight"):
        with pytest.raises(
            ConfigError, match=rf"^model.batch_size: must be an integer >= 1, got {batch!r}$"
        ):
            make_plan([_case("c")], _lock_cfg(batch, bench))


def test_an_instance_must_fit_the_gpu_and_the_error_says_the_largest_batch_that_does(tmp_path):
    bench = _speed_json(tmp_path)
    # 30 GB x 0.9 = 27 GB usable; between B=8 and 32 a row takes 0.5 - 0.1 (B - 8) / 24 GB:
    # B=25: 16 + 25 x 0.4292 = 26.73 GB fits, B=26: 16 + 26 x 0.425 = 27.05 GB does not
    p = make_plan([_case("c")], _lock_cfg(8, bench, gpu_mem_gb=30))
    assert p.batched.largest_fitting_batch_size == 25
    assert re.search(r"largest B that fits this GPU +\| 25 \|", render(p))
    with pytest.raises(
        ConfigError,
        match=rf"{bench}: model.batch_size=26: .* = 27.1 GB does not fit in a 30 GB GPU "
        r"\(x0.9 usable\); the largest measured-range B that fits is 25$",
    ):
        make_plan([_case("c")], _lock_cfg(26, bench, gpu_mem_gb=30))
    with pytest.raises(ConfigError, match=r"no B in the measured range 1-32 fits"):
        make_plan([_case("c")], _lock_cfg(1, bench, gpu_mem_gb=16))
    # the whole range fits an 80 GB GPU: the largest is the largest measured
    assert "| 32 (the largest measured) |" in render(make_plan([_case("c")], _lock_cfg(8, bench)))


def test_a_batched_model_takes_one_gpu_per_task(tmp_path):
    # the run loads one instance on model.device: a task of 8 GPUs would leave 7 idle
    with pytest.raises(
        ConfigError,
        match=r"^launcher.gpus_per_task=8: model=lock runs one instance per task on "
        r"model.device .*set launcher.gpus_per_task=1",
    ):
        make_plan([_case("c")], _lock_cfg(8, _speed_json(tmp_path), gpus_per_task=8))


def test_figures_measured_with_a_shorter_kv_cache_than_the_run_uses_are_refused(tmp_path):
    data = json.loads(json.dumps(SPEED_JSON))
    data["env"]["kv_cache_s"] = 120
    bench = _speed_json(tmp_path, data)
    cfg = _lock_cfg(8, bench)
    cfg.model.kv_cache_s = 120  # the same sessions: taken
    assert make_plan([_case("c")], cfg).batched.measured
    cfg.model.kv_cache_s = 60  # shorter: the figures overstate memory and time, still taken
    assert make_plan([_case("c")], cfg).batched.measured
    cfg.model.kv_cache_s = 300  # longer rows than measured: more memory per row and slower steps
    with pytest.raises(
        ConfigError,
        match=rf"{bench}: field 'env.kv_cache_s': measured with rows holding 120 s of "
        r"session, but this run's hold 300 s .*--max-session-s",
    ):
        make_plan([_case("c")], cfg)
    cfg.model.kv_cache_s = None
    with pytest.raises(ConfigError, match=r"this run's hold the whole context"):
        make_plan([_case("c")], cfg)


def test_figures_from_another_gpu_are_refused(tmp_path):
    bench = _speed_json(tmp_path)
    with pytest.raises(
        ConfigError,
        match=rf"{bench}: field 'env.device': measured on 'Test GPU 80GB' but "
        r"launcher.gpu_name is 'NVIDIA H100 80GB HBM3'",
    ):
        make_plan([_case("c")], _lock_cfg(8, bench, gpu_name="NVIDIA H100 80GB HBM3"))


def test_a_cpu_run_or_a_file_without_gpu_figures_is_refused(tmp_path):
    cpu = json.loads(json.dumps(SPEED_JSON))
    cpu["env"]["device_kind"] = "cpu"
    for row in cpu["harness"]:
        del row["gpu_peak_bytes"], row["gpu_mem_per_row_bytes"]
    bench = _speed_json(tmp_path, cpu)
    with pytest.raises(
        ConfigError, match=rf"{bench}: field 'env.device_kind': not GPU figures .*, got 'cpu'$"
    ):
        make_plan([_case("c")], _lock_cfg(8, bench))
    cpu["env"]["device_kind"] = "cuda"  # e.g. a run that stopped before its memory figures
    _speed_json(tmp_path, cpu)
    with pytest.raises(
        ConfigError, match=r"field 'harness\[0\].gpu_mem_per_row_bytes': missing: not GPU figures"
    ):
        make_plan([_case("c")], _lock_cfg(8, bench))


def test_an_unreadable_or_malformed_speed_json_is_one_line(tmp_path):
    bench = tmp_path / "speed.json"
    cases = [
        ("{", "not JSON"),
        (
            json.dumps({**SPEED_JSON, "weights_bytes": -1}),
            r"field 'weights_bytes': must be > 0, got -1",
        ),
        (
            json.dumps({**SPEED_JSON, "harness": []}),
            r"field 'harness': the measured batch sizes, got \[\]",
        ),
        (
            json.dumps({**SPEED_JSON, "harness": SPEED_JSON["harness"] * 2}),
            r"field 'harness\[3\].batch': .*measured once",
        ),
    ]
    for text, why in cases:
        bench.write_text(text)
        with pytest.raises(
            ConfigError, match=rf"^launcher.plan.lockstep_bench: {bench}: {why}"
        ) as e:
            make_plan([_case("c")], _lock_cfg(8, bench))
        assert "\n" not in str(e.value)
    with pytest.raises(
        ConfigError, match=rf"^launcher.plan.lockstep_bench: {tmp_path / 'none.json'}: cannot read"
    ):
        make_plan([_case("c")], _lock_cfg(8, tmp_path / "none.json"))


def test_without_measured_figures_the_configured_guess_is_labelled_and_warned_once(
    tmp_path, caplog
):
    cases = [_case(f"c{i}") for i in range(25)]
    cfg = _lock_cfg(8)
    p = make_plan(cases, cfg)
    assert not p.batched.measured and p.session_speed == 8.0 and p.model_gpu_mem_gb == 30.0
    assert (
        p.instances_per_gpu == 1 and p.sessions_in_parallel_per_task == 8
    )  # 8 rows on the task's GPU
    shard = sum(estimate_case(c, 1.5, 1.0, 8.0, None).expected_s for c in cases[0::3])
    assert p.wall_s_per_task_expected == pytest.approx(60 + shard / 8.0)
    text = render(p)
    assert re.search(r"per instance +\| 8 \(a configured guess, not measured\) \|", text)
    assert (
        "python benchmarks/moshi_lockstep_speed.py --moshiko-shapes" in text
        and "launcher.plan.lockstep_bench=" in text
    )
    bench = types.SimpleNamespace(
        planned_turns=lambda c: c.turns, orchestrator_overrides=dict, planned_requests=lambda c: []
    )
    ctx = types.SimpleNamespace(cfg=cfg, benchmark=bench, run_dir=tmp_path)
    with caplog.at_level(logging.WARNING, logger="fdeval"):
        write_plan(ctx, cases)
    warned = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warned) == 1 and "not measured" in warned[0].getMessage()
    written = json.loads((tmp_path / "plan.json").read_text())["batched"]
    assert written["measured"] is False and "configured guesses, not measured" in written["source"]
    assert "moshi_lockstep_speed.py --moshiko-shapes" in written["measure_with"]


def test_realtime_and_unbatched_models_ignore_the_lockstep_figures(tmp_path):
    cases = [_case(f"c{i}") for i in range(25)]
    for model in (
        {
            "name": "big",
            "batch_size": 8,
            "resources": {"gpu_mem_gb": 17.0, "realtime": True, "startup_s": 60},
        },
        {"name": "ref", "resources": {"gpu_mem_gb": 0, "realtime": False, "lockstep_speed": 100}},
    ):
        before = _cfg()
        before.model = model
        after = _cfg(gpu_name="another GPU")
        after.model = model
        after.launcher.plan.lockstep_bench = str(tmp_path / "absent.json")  # never read
        p = make_plan(cases, after)
        assert p == make_plan(cases, before) and p.batched is None
        assert render(p) == render(make_plan(cases, before))
    ctx = types.SimpleNamespace(
        cfg=after,
        run_dir=tmp_path,
        benchmark=types.SimpleNamespace(
            planned_turns=lambda c: c.turns,
            orchestrator_overrides=dict,
            planned_requests=lambda c: [],
        ),
    )
    write_plan(ctx, cases)
    assert "batched" not in json.loads((tmp_path / "plan.json").read_text())  # plan.json as before


def _launch_plan(tmp, *args, launcher="slurm"):
    cmd = [
        sys.executable,
        "-m",
        "fdeval.launch",
        f"out_root={tmp / 'outputs'}",
        "progress=false",
        "stage=plan",
        "model=moshi_lockstep",
        f"launcher={launcher}",
        "benchmark.cases=[fresh_pasta_stop__acknowledge,job_offer_move__listen]",
        *args,
    ]
    return subprocess.run(cmd, cwd=tmp, capture_output=True, text=True, timeout=300)


def test_stage_plan_sizes_moshi_lockstep_from_a_speed_json_through_the_cli(tmp_path):
    """model=moshi_lockstep is planned without moshi (the model is not built at plan time)."""
    bench = _speed_json(tmp_path)
    proc = _launch_plan(
        tmp_path,
        f"launcher.plan.lockstep_bench={bench}",
        "launcher.gpu_name='Test GPU 80GB'",
        "model.batch_size=4",
    )
    assert proc.returncode == 0, proc.stderr
    (written,) = (tmp_path / "outputs").glob("instructfd/moshi_lockstep/*/plan.json")
    p = json.loads(written.read_text())
    assert p["sessions_in_parallel_per_task"] == 4 and p["instances_per_gpu"] == 1
    assert p["session_speed"] == pytest.approx(10 + 40 * 3 / 7)
    assert p["batched"]["source"] == str(bench) and p["batched"]["gpu_name"] == "Test GPU 80GB"
    assert p["batched"]["largest_fitting_batch_size"] == 32
    assert (
        "measured on Test GPU 80GB" in proc.stdout
        and "not measured" not in proc.stdout + proc.stderr
    )
    # the same figures against another GPU: one line, exit code 2, no traceback
    proc = _launch_plan(
        tmp_path,
        f"launcher.plan.lockstep_bench={bench}",
        "launcher.gpus_per_task=1",
        launcher="h100x8",
    )
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr
    (line,) = [x for x in proc.stderr.splitlines() if "lockstep_bench" in x]
    assert (
        f"{bench}: field 'env.device': measured on 'Test GPU 80GB' but launcher.gpu_name is 'NVIDIA H100 80GB HBM3'"
        in line
    )


def test_a_hosted_model_is_planned_with_its_concurrency_and_its_price_table():
    cases = [_case(f"c{i}") for i in range(4)]
    cfg = _cfg(gpus_per_task=0, cases_per_task=4)
    cfg.model = {
        "name": "grok_voice",
        "concurrency": 2,
        "resources": {"gpu_mem_gb": 0, "realtime": True},
        "prices": {
            "date": "2026-05-25",
            "source": "the vendor's page",
            "usd_per_audio_minute": 0.05,
        },
    }
    p = make_plan(cases, cfg)
    e = estimate_case(cases[0], 1.5, 1.0, 8.0, None)
    assert p.sessions_in_parallel_per_task == 2 and p.instances_source == "model.concurrency"
    # billed: the whole session sent, the session less the user's speech received
    assert p.cost.usd_expected == pytest.approx(4 * (2 * e.expected_s - e.audio_s) / 60 * 0.05)
    assert "service cost" in render(p) and "2026-05-25" in render(p)
    cfg.model.prices = {
        "date": "d",
        "source": "s",
        "usd_per_1m_tokens": {"audio_in": 32.0, "audio_out": 64.0},
        "estimate_tokens_per_s": {"audio_in": 10, "audio_out": 20},
    }
    tokens = make_plan(cases, cfg).cost
    assert tokens.usd_expected == pytest.approx(
        4 * (e.expected_s * 10 * 32 + (e.expected_s - e.audio_s) * 20 * 64) / 1e6
    )
    del cfg.model["prices"]
    assert make_plan(cases, cfg).cost is None
