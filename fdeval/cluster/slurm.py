"""Slurm job arrays through submitit: one array per (benchmark, model, stage, sweep point).

`launcher=slurm` runs `generate` in the submitting process (cheap, CPU), then submits
- the run array: one task per shard of cases (GPU resources from the launcher profile),
- the post array: transcribe + judge per shard, `afterok` on the run array,
- the score job: one CPU task, `afterok` on the post array.
A task is a shard: cases[i::n] of the stable case order, so a shard's cases never change between
launches. Tasks are requeue-safe: every stage skips finished cases, so a requeued, preempted or
relaunched task completes only what is missing (submitit's checkpoint hook resubmits the same
shard). Job ids are recorded in `<run_dir>/slurm/jobs.json` for `stage=status`.
"""

from __future__ import annotations

import json
import logging
import math
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf

from fdeval.errors import ConfigError, FdevalError
from fdeval.files import write_json_atomic

log = logging.getLogger("fdeval")

RUN_STEPS = ("run",)
POST_STEPS = ("transcribe", "judge")
SCORE_STEPS = ("score",)


@dataclass
class ShardTask:
    """What one array task runs: `steps` on shard `shard` of `n_shards` (picklable)."""

    cfg_yaml: str
    run_dir: str
    steps: tuple[str, ...]
    n_shards: int

    def __call__(self, shard: int) -> dict[str, Any]:
        from fdeval.stages import run_steps

        cfg = OmegaConf.create(self.cfg_yaml)
        ctx = run_steps(cfg, Path(self.run_dir), list(self.steps), shard=(shard, self.n_shards))
        return {"shard": shard, "steps": list(self.steps), "stats": ctx.stats}

    def checkpoint(self, shard: int):  # submitit calls this on timeout / preemption: requeue as is
        import submitit

        return submitit.helpers.DelayedSubmission(self, shard)


def _executor(folder: Path, lc: DictConfig, gpu: bool, name: str, dependency: str | None):
    import submitit

    ex = submitit.SlurmExecutor(folder=str(folder / "%j"))
    params: dict[str, Any] = {
        "job_name": name,
        "time": int(lc.timeout_min),
        "cpus_per_task": int(lc.cpus_per_task if gpu else lc.cpu_job.cpus_per_task),
        "mem": f"{int(lc.mem_gb if gpu else lc.cpu_job.mem_gb)}G",
        "array_parallelism": int(lc.array_parallelism),
        "signal_delay_s": int(lc.signal_delay_s),
        "setup": list(lc.setup or []),
        "additional_parameters": dict(OmegaConf.to_container(lc.sbatch_extra) or {}),
    }
    for key in ("partition", "account", "qos"):
        value = lc.get(key) if gpu else lc.cpu_job.get(key, lc.get(key))
        if value:
            params[key] = str(value)
    if gpu and int(lc.gpus_per_task) > 0:
        params["gres"] = f"gpu:{int(lc.gpus_per_task)}"
    if dependency:
        params["dependency"] = dependency
        # a failed upstream array cancels this one instead of leaving it pending forever
        params["additional_parameters"]["kill-on-invalid-dep"] = "yes"
    ex.update_parameters(**params)
    return ex


def _array_id(jobs: list) -> str:
    return str(jobs[0].job_id).split("_")[0]


def submit(cfg: DictConfig, run_dir: Path, steps: list[str], n_cases: int) -> list[dict[str, Any]]:
    """Submit the arrays for `steps` (generate already done), chained by afterok."""
    lc = cfg.launcher
    if n_cases == 0:
        raise FdevalError("launcher=slurm: no cases to run")
    per_task = int(lc.cases_per_task)
    if per_task < 1:
        raise ConfigError(f"launcher.cases_per_task: must be >= 1, got {per_task}")
    n_shards = max(1, math.ceil(n_cases / per_task))
    cfg_yaml = OmegaConf.to_yaml(cfg, resolve=True)
    folder = run_dir / "slurm"
    folder.mkdir(parents=True, exist_ok=True)
    plan = [
        ("run", [s for s in steps if s in RUN_STEPS], True, n_shards),
        ("post", [s for s in steps if s in POST_STEPS], False, n_shards),
        ("score", [s for s in steps if s in SCORE_STEPS], False, 1),
    ]
    jobs_file = folder / "jobs.json"
    records = json.loads(jobs_file.read_text()) if jobs_file.exists() else []
    dependency, submitted, handles = None, [], []
    tag = f"fdeval-{cfg.benchmark.name}-{cfg.model.name}"
    for phase, phase_steps, gpu, n in plan:
        if not phase_steps:
            continue
        ex = _executor(folder, lc, gpu, f"{tag}-{phase}", dependency)
        task = ShardTask(cfg_yaml, str(run_dir), tuple(phase_steps), n)
        jobs = ex.map_array(task, list(range(n)))
        array_id = _array_id(jobs)
        dependency = f"afterok:{array_id}"
        rec = {"phase": phase, "steps": phase_steps, "job_id": array_id, "n_tasks": n,
               "gpus_per_task": int(lc.gpus_per_task) if gpu else 0, "submitted_at": time.time()}
        submitted.append(rec)
        handles.append((rec, jobs))
        log.info("slurm: submitted %s array %s (%d task(s), steps %s)", phase, array_id, n, phase_steps)
        print(f"slurm: {phase} array {array_id}: {n} task(s) {phase_steps}", flush=True)
    write_json_atomic(jobs_file, records + submitted)
    if lc.wait:
        _wait(handles)
    return submitted


def _wait(handles: list) -> None:
    failed = []
    for rec, jobs in handles:
        for job in jobs:
            try:
                job.result()
            except Exception as e:  # a task's failure: report it, keep waiting for the others
                failed.append(f"{job.job_id}: {str(e).strip().splitlines()[-1] if str(e).strip() else type(e).__name__}")
        rec["state"] = "done"
    if failed:
        raise FdevalError(f"slurm: {len(failed)} task(s) failed, e.g. {failed[0]}; `stage=status` lists what is missing")
    print("slurm: all tasks finished", flush=True)
