"""Real Slurm arrays on the local single-node Slurm (slurm/start.sh; .ci/run starts it).

Skipped, with the reason, where no local Slurm answers.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.slurm

CASES = "benchmark.cases=[fresh_pasta_stop__acknowledge,fresh_pasta_stop__none,job_offer_move__listen,job_offer_move__none]"
SMALL = ["launcher.cases_per_task=1", "launcher.gpus_per_task=1", "launcher.cpus_per_task=1", "launcher.mem_gb=1",
         "launcher.cpu_job.cpus_per_task=1", "launcher.cpu_job.mem_gb=1", "launcher.timeout_min=10", "launcher.signal_delay_s=30"]


@pytest.fixture(scope="module", autouse=True)
def slurm():
    if not os.environ.get("SLURM_CONF") or shutil.which("sinfo") is None:
        pytest.skip("no local Slurm: run `bash slurm/install.sh && bash slurm/start.sh` and export SLURM_CONF")
    out = subprocess.run(["sinfo", "-h", "-N", "-o", "%T"], capture_output=True, text=True)
    if out.returncode != 0 or not any(s in out.stdout for s in ("idle", "mix", "alloc")):
        pytest.skip(f"local Slurm not answering: {out.stderr.strip() or out.stdout.strip()}")


def launch(tmp: Path, *args: str, check=True) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "fdeval.launch", f"out_root={tmp / 'outputs'}", "progress=false", *args]
    proc = subprocess.run(cmd, cwd=tmp, capture_output=True, text=True, timeout=600)
    if check and proc.returncode != 0:
        raise AssertionError(f"exit {proc.returncode}\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    return proc


def verdicts(run: Path) -> dict[str, tuple[str, str]]:
    out = {}
    for f in sorted((run / "verdicts").glob("*.json")):
        d = json.loads(f.read_text())
        out[f.name] = (d["verdict"], d["reasoning"])
    return out


def test_two_point_multirun_on_slurm_matches_local_run(tmp_path):
    proc = launch(tmp_path, "launcher=slurm", "launcher.wait=true", *SMALL, CASES,
                  "orchestrator.barge_in_delay_s=2.0,3.0", "-m")
    assert proc.stdout.count("slurm: run array") == 2 and proc.stdout.count("4 task(s) ['run']") == 2
    runs = sorted((tmp_path / "outputs/instructfd/reference").iterdir())
    assert len([r for r in runs if "barge_in_delay_s" in r.name]) == 2
    for r in runs:
        jobs = json.loads((r / "slurm" / "jobs.json").read_text())
        assert [j["phase"] for j in jobs] == ["run", "post", "score"] and jobs[0]["n_tasks"] == 4
        assert (r / "scores" / "ias.csv").exists()
    local = tmp_path / "local"
    local.mkdir()
    launch(local, CASES, "orchestrator.barge_in_delay_s=3.0")
    slurm_run = next(r for r in runs if r.name.endswith("barge_in_delay_s=3.0"))
    local_run = local / "outputs/instructfd/reference" / slurm_run.name
    assert verdicts(slurm_run) == verdicts(local_run) and len(verdicts(local_run)) == 4


def _sacct_states(job: str) -> list[str]:
    out = subprocess.run(["sacct", "-n", "-P", "-X", "-j", job, "-o", "JobID,State"], capture_output=True, text=True)
    return [line.split("|")[1] for line in out.stdout.splitlines() if "|" in line]


def _squeue_state(job: str) -> str:
    # squeue reads the controller's live state (sacct lags behind by seconds)
    out = subprocess.run(["squeue", "-h", "-j", job, "-o", "%T"], capture_output=True, text=True)
    return out.stdout.strip()


def test_sigkilled_task_is_reported_and_relaunch_completes(tmp_path):
    # realtime clock + a session cap: each case takes ~12 s of wall time, long enough to kill one
    args = ["launcher=slurm", *SMALL, CASES, "orchestrator.clock=realtime", "orchestrator.max_session_s=12"]
    launch(tmp_path, *args)
    run = next((tmp_path / "outputs/instructfd/reference").iterdir())
    jobs = json.loads((run / "slurm" / "jobs.json").read_text())
    run_array = jobs[0]["job_id"]
    deadline = time.time() + 120
    while time.time() < deadline and _squeue_state(f"{run_array}_0") != "RUNNING":
        time.sleep(0.1)
    subprocess.run(["scancel", "--signal=KILL", f"{run_array}_0"], check=True)
    deadline = time.time() + 180
    while time.time() < deadline:
        states = [s for j in jobs for s in _sacct_states(j["job_id"])]
        if states and not any(s in ("PENDING", "RUNNING", "REQUEUED") for s in states):
            break
        time.sleep(0.5)
    status = launch(tmp_path, *args, "stage=status")
    assert "missing: 1" in status.stdout or "failed: 1" in status.stdout, status.stdout
    assert any(s in status.stdout for s in ("FAILED", "CANCELLED")), status.stdout
    before = {p.name: p.stat().st_mtime_ns for p in (run / "sessions").glob("[!.]*.h5")}
    assert len(before) == 3
    launch(tmp_path, *args, "launcher.wait=true")
    after = {p.name: p.stat().st_mtime_ns for p in (run / "sessions").glob("[!.]*.h5")}
    assert len(after) == 4 and all(after[k] == v for k, v in before.items())
    final = launch(tmp_path, *args, "stage=status")
    assert "recorded: 4  failed: 0  missing: 0" in final.stdout and "verdicts: 4/4" in final.stdout


@pytest.mark.slow
def test_timed_out_task_is_checkpointed_requeued_and_completes(tmp_path):
    """SIGUSR2 before the time limit: submitit calls ShardTask.checkpoint, Slurm requeues the
    same shard, and the requeued task skips what the first attempt finished."""
    args = ["launcher=slurm", "launcher.wait=true", *SMALL, "launcher.cases_per_task=2", "launcher.timeout_min=1",
            "launcher.signal_delay_s=45", "benchmark.cases=[fresh_pasta_stop__acknowledge,job_offer_move__listen]",
            "orchestrator.clock=realtime", "orchestrator.max_session_s=12"]
    launch(tmp_path, *args)
    run = next((tmp_path / "outputs/instructfd/reference").iterdir())
    out = "\n".join(p.read_text() for p in (run / "slurm").rglob("*_log.out"))
    assert "Calling checkpoint method" in out and "Requeued job" in out
    assert len(list((run / "sessions").glob("[!.]*.h5"))) == 2 and not list((run / "sessions").glob(".*.tmp*"))
    assert (run / "scores" / "ias.csv").exists()
