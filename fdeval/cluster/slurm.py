"""Slurm job arrays through submitit: one array per (benchmark, model, stage, sweep point).

`launcher=slurm` (`SlurmLauncher`, the engine's `Launcher` for Slurm) runs `generate` in the
submitting process (cheap, CPU), then submits one array per phase of the benchmark's declared
steps (`fdeval.engine.launcher.phases`), each `afterok` on the one before:
- the run array: one task per shard of cases (GPU resources from the launcher profile),
- the post array: the benchmark's per-case steps (e.g. transcribe + judge) per shard,
- the score job: one CPU task for the whole-run steps.
A task is a shard: cases[i::n] of the stable case order, so a shard's cases never change between
launches. Tasks are requeue-safe: every stage skips finished cases, so a requeued, preempted or
relaunched task completes only what is missing (submitit's checkpoint hook resubmits the same
shard). Job ids are recorded in `<run_dir>/slurm/jobs.json` for `stage=status`.

Time limits: the run array uses `launcher.timeout_min` / `signal_delay_s`, the CPU jobs their own
`launcher.cpu_job.*` (a short GPU limit used to reach the CPU jobs too, which then got the warning
at once). Slurm checks limits every 30 s and sends the `--signal` warning up to 60 s early, so the
warning may come as early as `timeout_min*60 - signal_delay_s - 60` s into a task; `check` refuses
settings where that leaves under a minute (the warning could arrive before submitit listens for
it, and SIGUSR2's default action kills the task).

Environment: sbatch's default (`--export=ALL`) would hand every task every key of the submitting
shell. Each array gets `--export=<names>` instead (names only: the values never enter the
submission file, the command line or submitit's pickles): every variable that is not a secret by
`fdeval.secrets.is_secret_name`, plus the keys that array's steps read (`array_keys`) and the
names in `launcher.export_env`. With named variables sbatch also loads the user's login
environment on the node (it implies `--get-user-env`), so a task also drops, in Python, every
secret it was not meant to have before its steps start: its children never see one.
"""

from __future__ import annotations

import json
import logging
import math
import os
import re
import shutil
import signal
import subprocess
import threading
import time
from collections import Counter
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

from hydra.utils import get_class
from omegaconf import DictConfig, OmegaConf

from fdeval.errors import ConfigError, FdevalError
from fdeval.engine.driver import run_steps
from fdeval.engine.launcher import PHASE_NAMES, Launcher, Phase
from fdeval.files import write_json_atomic
from fdeval.llm.client import BACKENDS as LLM_BACKENDS, key_variables
from fdeval.llm.server import LLMServerSpec, serving
from fdeval.secrets import secrets_withheld, without_secrets

log = logging.getLogger("fdeval")

EARLY_WARNING_S = 60  # Slurm may send the --signal warning this much before signal_delay_s
MIN_WORK_S = 60  # least work a task must get before the earliest possible warning
# A name sbatch's comma-separated --export list can carry (env names never hold "=").
_EXPORTABLE = re.compile(r"[^,=\s]+")


@dataclass
class ShardTask:
    """What one array task runs: `steps` on shard `shard` of `n_shards` (picklable)."""

    cfg_yaml: str
    run_dir: str
    steps: tuple[str, ...]
    n_shards: int
    keys: tuple[
        str, ...
    ] = ()  # the secrets (names) its steps may read; others are dropped at start
    phase: str = (
        ""  # the array's phase name (run, post, score): whether launcher.llm_server starts here
    )

    def __call__(self, shard: int) -> dict[str, Any]:
        cfg = OmegaConf.create(self.cfg_yaml)
        spec = llm_server(cfg.get("launcher") or {}, self.phase)
        log_path = Path(self.run_dir) / "slurm" / "llm_server" / f"{self.phase}_{shard}.log"
        # a key the node's login environment brought in (sbatch loads it) reaches no step or child
        with secrets_withheld(keep=self.keys), serving(spec, log_path) if spec else nullcontext():
            ctx = run_steps(cfg, Path(self.run_dir), list(self.steps), shard=(shard, self.n_shards))
        _ignore_late_warning()
        return {"shard": shard, "steps": list(self.steps), "stats": ctx.stats}

    def checkpoint(self, shard: int):  # submitit calls this on timeout / preemption: requeue as is
        import submitit

        return submitit.helpers.DelayedSubmission(self, shard)


def _ignore_late_warning() -> None:
    """The shard is done: a time-limit or preemption warning from now on must neither requeue it
    (submitit's handler stays installed until the process exits, and would resubmit a finished
    task) nor kill it (Python restores SIGUSR2's default action, termination, while it shuts down:
    the task exits 140, Slurm calls it FAILED and cancels the jobs that wait on it)."""
    from submitit import JobEnvironment

    if threading.current_thread() is threading.main_thread():
        signal.signal(JobEnvironment._usr_sig(), signal.SIG_IGN)


def _limits(lc: DictConfig, gpu: bool) -> tuple[str, int, int]:
    """(config prefix, time limit in minutes, signal delay in s) of the run array or the CPU jobs."""
    where, node = ("launcher", lc) if gpu else ("launcher.cpu_job", lc.cpu_job)
    values = []
    for key, least in (("timeout_min", 1), ("signal_delay_s", 0)):
        try:
            value = node[key]
            ok = float(value) == int(value) >= least
        except (KeyError, TypeError, ValueError):
            ok = False
        if not ok:
            raise ConfigError(
                f"{where}.{key}: must be an integer >= {least}, got {node.get(key)!r}"
            )
        values.append(int(value))
    return where, values[0], values[1]


# sbatch flags that would decide a task's environment behind `array_keys`' back
_ENV_FLAGS = ("export", "get-user-env", "get_user_env")


def check(lc: DictConfig) -> None:
    """Refuse time limits whose warning could come before a task has done a minute of work, and
    settings that would pass a task other variables than `array_keys` allows, and a bad
    `launcher.llm_server`."""
    export_env(lc)
    llm_server(lc)
    flags = sorted(set(_ENV_FLAGS) & set(lc.get("sbatch_extra") or {}))
    if flags:
        raise ConfigError(
            f"launcher.sbatch_extra.{flags[0]}: fdeval sets each array's environment (only the keys "
            f"its steps read); add variables with launcher.export_env=[NAME,...]"
        )
    for gpu in (True, False):
        where, minutes, delay = _limits(lc, gpu)
        if minutes * 60 - delay - EARLY_WARNING_S < MIN_WORK_S:
            raise ConfigError(
                f"{where}.signal_delay_s={delay} with {where}.timeout_min={minutes}: Slurm may send the warning "
                f"up to {EARLY_WARNING_S} s early, "
                f"i.e. {max(0, minutes * 60 - delay - EARLY_WARNING_S)} s into a task; "
                f"leave at least {MIN_WORK_S} s (timeout_min*60 >= signal_delay_s + {EARLY_WARNING_S + MIN_WORK_S})"
            )


def llm_server(lc: DictConfig | dict, phase: str | None = None) -> LLMServerSpec | None:
    """`launcher.llm_server` checked; with `phase`, None unless that phase's tasks start it."""
    node = lc.get("llm_server")
    spec = LLMServerSpec.from_config(
        OmegaConf.to_container(node, resolve=True) if isinstance(node, DictConfig) else node
    )
    return spec if spec and (phase is None or phase in spec.arrays) else None


def _llm_keys(node: Any) -> set[str]:
    """The variables the LLM clients configured anywhere under `node` read: each mapping whose
    `backend` is an `fdeval.llm.client` backend (a judge, an ensemble's members, a benchmark role)."""
    keys: set[str] = set()
    if isinstance(node, dict):
        backend = node.get("backend")
        if isinstance(backend, str) and backend in LLM_BACKENDS:
            keys |= set(key_variables(backend))
        for value in node.values():
            keys |= _llm_keys(value)
    elif isinstance(node, list):
        for value in node:
            keys |= _llm_keys(value)
    return keys


def _plain(cfg: DictConfig, key: str) -> Any:
    node = cfg.get(key)
    return OmegaConf.to_container(node, resolve=True) if isinstance(node, DictConfig) else None


def export_env(lc: DictConfig) -> tuple[str, ...]:
    """`launcher.export_env`: names a site adds to every array (a secret too, e.g. HF_TOKEN)."""
    names = lc.get("export_env") or []
    if isinstance(names, str) or not all(
        isinstance(n, str) and _EXPORTABLE.fullmatch(n) for n in names
    ):
        raise ConfigError(
            f"launcher.export_env: a list of environment variable names, got {names!r}"
        )
    return tuple(names)


def array_keys(cfg: DictConfig, placement: str) -> tuple[str, ...]:
    """The secrets (names) an array of `placement` may hold, whether set or not:
    - the run array (`gpu_array`, sessions): the model's `env_keys` and its `server.pass_env`;
    - the post array (`cpu_array`, transcribe, judge): the judge's and the ASR's LLM keys;
    - both: the benchmark's own LLM roles (EchoChain's simulator runs in the loop, its grader
      after it), less `benchmark.llm`, which writes cases, and generate runs where the command runs;
    - the score job: none.
    Plus `launcher.export_env` everywhere."""
    keys: set[str] = set()
    if placement in ("gpu_array", "cpu_array"):
        keys |= _llm_keys({k: v for k, v in (_plain(cfg, "benchmark") or {}).items() if k != "llm"})
    if placement == "gpu_array":
        target = cfg.model.get("_target_")
        try:  # the class, not an instance: the submitting machine may lack the model's client packages
            keys |= set(getattr(get_class(target), "env_keys", ())) if target else set()
        except (ImportError, ValueError) as e:
            raise ConfigError(
                f"model._target_: cannot import {target!r}: {' '.join(str(e).split())[:300]}"
            ) from None
        keys |= set(OmegaConf.select(cfg, "model.server.pass_env", default=None) or ())
    elif placement == "cpu_array":
        keys |= _llm_keys(_plain(cfg, "judge")) | _llm_keys(_plain(cfg, "asr"))
    spec = (
        llm_server(cfg.launcher, PHASE_NAMES.get(placement))
        if cfg.launcher.get("llm_server")
        else None
    )
    if spec:  # what its own server may need (a gated model's HF_TOKEN)
        keys |= set(spec.pass_env)
    return tuple(sorted(keys | set(export_env(cfg.launcher))))


def export_names(keys: tuple[str, ...], environ: dict[str, str] | None = None) -> list[str]:
    """The names for sbatch's --export: every variable of `environ` (default os.environ) but the
    secrets not in `keys`. SLURM_* go anyway; a name --export cannot carry is left out."""
    return sorted(
        k
        for k in without_secrets(environ, keep=keys)
        if _EXPORTABLE.fullmatch(k) and not k.startswith("SLURM_")
    )


@contextmanager
def _sbatch_env() -> Iterator[None]:
    """sbatch lets $SBATCH_EXPORT override the script's --export (it would pass everything again):
    withheld while submitting."""
    value = os.environ.pop("SBATCH_EXPORT", None)
    if value is not None:
        # (its value is not logged: it may set variables, e.g. ALL,TOKEN=...)
        log.warning(
            "slurm: $SBATCH_EXPORT ignored: each array gets its own --export (launcher.export_env adds "
            "variables)"
        )
    try:
        yield
    finally:
        if value is not None:
            os.environ["SBATCH_EXPORT"] = value


def _executor(
    folder: Path,
    lc: DictConfig,
    gpu: bool,
    name: str,
    dependency: str | None,
    keys: tuple[str, ...] = (),
):
    import submitit

    _, minutes, delay = _limits(lc, gpu)
    extra = dict(OmegaConf.to_container(lc.sbatch_extra) or {})
    extra["export"] = ",".join(export_names(keys)) or "NONE"
    ex = submitit.SlurmExecutor(folder=str(folder / "%j"))
    params: dict[str, Any] = {
        "job_name": name,
        "time": minutes,
        "cpus_per_task": int(lc.cpus_per_task if gpu else lc.cpu_job.cpus_per_task),
        "mem": f"{int(lc.mem_gb if gpu else lc.cpu_job.mem_gb)}G",
        "array_parallelism": int(lc.array_parallelism),
        "signal_delay_s": delay,
        # srun would pass on only the --export names (sbatch sets SLURM_EXPORT_ENV to them): ALL
        # keeps what `setup` adds (module load, conda activate) for the task
        "setup": ["export SLURM_EXPORT_ENV=ALL", *list(lc.setup or [])],
        "additional_parameters": extra,
    }
    for key in ("partition", "account", "qos"):
        value = lc.get(key) if gpu else lc.cpu_job.get(key, lc.get(key))
        if value:
            params[key] = str(value)
    # the CPU jobs take GPUs only when asked (cpu_job.gpus_per_task: a judge's own LLM server there)
    n_gpus = int(lc.gpus_per_task if gpu else lc.cpu_job.get("gpus_per_task", 0) or 0)
    if n_gpus > 0:
        params["gres"] = f"gpu:{n_gpus}"
    if dependency:
        params["dependency"] = dependency
        # a failed upstream array cancels this one instead of leaving it pending forever
        params["additional_parameters"]["kill-on-invalid-dep"] = "yes"
    ex.update_parameters(**params)
    return ex


def _array_id(jobs: list) -> str:
    return str(jobs[0].job_id).split("_")[0]


def _array_states(job_id: str) -> dict[str, int]:
    if shutil.which("sacct") is None:
        return {"unknown (no sacct)": 1}
    out = subprocess.run(
        ["sacct", "-n", "-P", "-X", "-j", job_id, "-o", "JobID,State"],
        capture_output=True,
        text=True,
        timeout=30,
    )
    states = Counter(
        line.split("|")[1].split()[0] for line in out.stdout.splitlines() if "|" in line
    )
    return dict(states) or {"unknown": 1}


def status_lines(run_dir: Path) -> list[str]:
    """The states of the arrays recorded in `<run>/slurm/jobs.json` (for stage=status)."""
    jobs_file = Path(run_dir) / "slurm" / "jobs.json"
    if not jobs_file.exists():
        return []
    lines = []
    for rec in json.loads(jobs_file.read_text()):
        states = ", ".join(f"{k} {v}" for k, v in sorted(_array_states(rec["job_id"]).items()))
        lines.append(f"array {rec['job_id']} ({rec['phase']}, {rec['n_tasks']} task(s)): {states}")
    return lines


class SlurmLauncher(Launcher):
    """Submits each phase as a submitit array chained by afterok (see the module doc)."""

    name = "slurm"

    def check(self) -> None:
        check(self.cfg.launcher)

    def n_shards(self, n_cases: int) -> int:
        if n_cases == 0:
            raise FdevalError("launcher=slurm: no cases to run")
        per_task = int(self.cfg.launcher.cases_per_task)
        if per_task < 1:
            raise ConfigError(f"launcher.cases_per_task: must be >= 1, got {per_task}")
        return max(1, math.ceil(n_cases / per_task))

    def status_lines(self, run_dir: Path) -> list[str]:
        return status_lines(run_dir)

    def launch(self, run_dir: Path, phases: list[Phase], run_here) -> None:
        submit(self.cfg, run_dir, phases)


def submit(cfg: DictConfig, run_dir: Path, phases: list[Phase]) -> list[dict[str, Any]]:
    """Submit one array per phase (generate already done), chained by afterok."""
    lc = cfg.launcher
    check(lc)
    cfg_yaml = OmegaConf.to_yaml(cfg, resolve=True)
    folder = run_dir / "slurm"
    folder.mkdir(parents=True, exist_ok=True)
    jobs_file = folder / "jobs.json"
    records = json.loads(jobs_file.read_text()) if jobs_file.exists() else []
    dependency, submitted, handles = None, [], []
    tag = f"fdeval-{cfg.benchmark.name}-{cfg.model.name}"
    phase_keys = [
        array_keys(cfg, ph.placement) for ph in phases
    ]  # a bad model target fails before any submission
    for ph, keys in zip(phases, phase_keys):
        ex = _executor(folder, lc, ph.gpu, f"{tag}-{ph.name}", dependency, keys)
        task = ShardTask(cfg_yaml, str(run_dir), tuple(ph.steps), ph.n_tasks, keys, ph.name)
        with _sbatch_env():
            jobs = ex.map_array(task, list(range(ph.n_tasks)))
        array_id = _array_id(jobs)
        dependency = f"afterok:{array_id}"
        rec = {
            "phase": ph.name,
            "steps": list(ph.steps),
            "job_id": array_id,
            "n_tasks": ph.n_tasks,
            "gpus_per_task": int(lc.gpus_per_task) if ph.gpu else 0,
            "submitted_at": time.time(),
        }
        submitted.append(rec)
        handles.append((rec, jobs))
        log.info(
            "slurm: submitted %s array %s (%d task(s), steps %s)",
            ph.name,
            array_id,
            ph.n_tasks,
            list(ph.steps),
        )
        print(
            f"slurm: {ph.name} array {array_id}: {ph.n_tasks} task(s) {list(ph.steps)}", flush=True
        )
    write_json_atomic(jobs_file, records + submitted)
    if lc.wait:
        _wait(handles)
    return submitted


def _sacct(job_ids: list[str]) -> dict[str, tuple[str, str]]:
    """JobID -> (State, ExitCode) from accounting; empty where sacct cannot answer."""
    try:
        out = subprocess.run(
            ["sacct", "-n", "-P", "-X", "-j", ",".join(job_ids), "-o", "JobID,State,ExitCode"],
            capture_output=True,
            text=True,
            timeout=30,
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return {}
    rows = (line.split("|") for line in out.splitlines())
    return {r[0]: (r[1], r[2]) for r in rows if len(r) == 3}


def _reason(e: Exception) -> str:
    """The failing task's own last line: the exception its trace ends with (submitit puts the
    trace between dashed lines), else what submitit says."""
    text = str(e).strip()
    parts = [p for p in text.split("----------------------") if p.strip()]
    if "failed during processing with trace" in text and len(parts) >= 2:
        name, sep, message = parts[1].strip().splitlines()[-1].strip().partition(": ")
        return name.rsplit(".", 1)[-1] + sep + message  # the exception without its module path
    if "has not produced any output" in text:
        return "it ended without writing a result (killed, cancelled or out of memory)"
    return (text.splitlines() or [type(e).__name__])[0]


def _failure_line(failed: list[tuple[dict[str, Any], Any, Exception | None]]) -> str:
    """One line naming the job that failed first in the chain (run -> post -> score), its state and
    exit code from sacct and its log; jobs after it were cancelled by the broken dependency."""
    rec, job, e = failed[0]
    acct = _sacct([str(j.job_id) for _, j, _ in failed])
    state, code = acct.get(str(job.job_id), (job.state, "?"))
    same = [j for r, j, _ in failed if r is rec]
    later = [
        f"{r['phase']} {j.job_id} ({acct.get(str(j.job_id), (j.state,))[0]})"
        for r, j, _ in failed
        if r is not rec
    ]
    reason = _reason(e)
    if len(reason) > 300:
        reason = reason[:297] + "..."
    line = (
        f"slurm: {rec['phase']} task {job.job_id} failed ({state}, exit code {code}): {reason}; "
        f"log: {job.paths.stderr}"
    )
    if len(same) > 1:
        line += f"; {len(same) - 1} more {rec['phase']} task(s) failed"
    if later:
        line += f"; not run: {', '.join(later[:3])}{', ...' if len(later) > 3 else ''}"
    return line + "; `stage=status` lists what is missing"


def _wait(handles: list) -> None:
    failed: list[tuple[dict[str, Any], Any, Exception | None]] = []
    for rec, jobs in handles:
        upstream_failed = any(r is not rec for r, _, _ in failed)
        for job in jobs:
            if upstream_failed:
                # Slurm cancels it (kill-on-invalid-dep): it will write no result, and submitit would
                # wait 15 s per task for one; the state alone says it ended
                while not job.done(force_check=True):
                    time.sleep(2)
                if job.state != "COMPLETED":
                    failed.append((rec, job, None))
                continue
            try:
                job.result()
            except Exception as e:  # a task's failure: report it, keep waiting for the others
                failed.append((rec, job, e))
        rec["state"] = "done"
    if failed:
        raise FdevalError(_failure_line(failed))
    print("slurm: all tasks finished", flush=True)
