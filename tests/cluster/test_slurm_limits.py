"""Slurm launcher settings and the array task's signal handling, without a Slurm (these run anywhere)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import pytest
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf

from fdeval.cluster.slurm import ShardTask, _executor, check
from fdeval.errors import ConfigError
from fdeval.launch import CONF_DIR


def _cfg(tmp_path, *overrides: str):
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base=None):
        return compose(
            "config", overrides=["launcher=slurm", f"out_root={tmp_path / 'outputs'}", *overrides]
        )


def test_cpu_jobs_get_their_own_time_limit_and_warning(tmp_path):
    lc = _cfg(
        tmp_path,
        "launcher.timeout_min=30",
        "launcher.signal_delay_s=300",
        "launcher.cpu_job.timeout_min=7",
        "launcher.cpu_job.signal_delay_s=20",
    ).launcher
    run = _executor(tmp_path, lc, True, "run", None).parameters
    post = _executor(tmp_path, lc, False, "post", "afterok:1").parameters
    assert (run["time"], run["signal_delay_s"]) == (30, 300)
    assert (post["time"], post["signal_delay_s"]) == (7, 20)
    assert run["gres"] == "gpu:1" and "gres" not in post  # CPU jobs hold no GPU unless asked


def test_cpu_jobs_hold_gpus_when_asked(tmp_path):
    # a judge's own LLM server (launcher.llm_server in the post array) needs them
    lc = _cfg(tmp_path, "launcher.cpu_job.gpus_per_task=4", "launcher.gpus_per_task=2").launcher
    assert _executor(tmp_path, lc, False, "post", None).parameters["gres"] == "gpu:4"
    assert _executor(tmp_path, lc, True, "run", None).parameters["gres"] == "gpu:2"


@pytest.mark.parametrize("where", ["launcher", "launcher.cpu_job"])
def test_a_warning_that_can_come_at_once_is_refused(tmp_path, where):
    # the CI flake's settings: 1 min limit, warning 45 s before; Slurm may send it 60 s early
    lc = _cfg(tmp_path, f"{where}.timeout_min=1", f"{where}.signal_delay_s=45").launcher
    with pytest.raises(ConfigError) as e:
        check(lc)
    assert str(e.value).startswith(
        f"{where}.signal_delay_s=45 with {where}.timeout_min=1: "
    ) and "\n" not in str(e.value)
    check(_cfg(tmp_path).launcher)  # the shipped defaults pass
    check(_cfg(tmp_path, "launcher=h100x8").launcher)
    with pytest.raises(
        ConfigError, match=r"^launcher.cpu_job.timeout_min: must be an integer >= 1, got 'x'$"
    ):
        check(_cfg(tmp_path, "launcher.cpu_job.timeout_min=x").launcher)


def test_bad_limits_stop_the_launch_before_any_job(tmp_path):
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "fdeval.launch",
            f"out_root={tmp_path / 'outputs'}",
            "progress=false",
            "launcher=slurm",
            "launcher.timeout_min=1",
            "launcher.signal_delay_s=45",
            "benchmark.cases=[fresh_pasta_stop__none]",
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    errors = [line for line in (proc.stdout + proc.stderr).splitlines() if "error" in line.lower()]
    assert (
        proc.returncode == 2 and len(errors) == 1 and "launcher.signal_delay_s=45" in errors[0]
    ), proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr and not list(tmp_path.rglob("jobs.json"))


def test_a_finished_task_ignores_a_late_warning(tmp_path):
    """submitit's SIGUSR2 handler stays installed after the task's function returned: a late
    time-limit warning would requeue the finished task, or (once Python restores the default
    action at exit) kill it with exit 140, so Slurm cancels the jobs waiting on it."""
    cfg = _cfg(tmp_path)
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    caught = []
    old = signal.signal(
        signal.SIGUSR2, lambda *_: caught.append("requeue")
    )  # stands in for submitit's handler
    try:
        os.kill(os.getpid(), signal.SIGUSR2)
        assert caught == ["requeue"]  # the stand-in handler is live while the task runs
        out = ShardTask(OmegaConf.to_yaml(cfg, resolve=True), str(run_dir), (), 1)(0)
        os.kill(os.getpid(), signal.SIGUSR2)  # the warning, after the shard finished
        assert caught == ["requeue"] and signal.getsignal(signal.SIGUSR2) is signal.SIG_IGN
        assert out == {"shard": 0, "steps": [], "stats": {}}
    finally:
        signal.signal(signal.SIGUSR2, old)
