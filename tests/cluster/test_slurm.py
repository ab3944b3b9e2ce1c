"""Real Slurm arrays on the local single-node Slurm (slurm/start.sh; .ci/run starts it).

Skipped, with the reason, where no local Slurm answers.
"""

from __future__ import annotations

import json
import math
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from helpers.launching import seed_data

from fdeval.engine.run import step_dir
from fdeval.models.servers import free_port, port_taken

pytestmark = pytest.mark.slurm

CASES = (
    "benchmark.cases=[fresh_pasta_stop__acknowledge,fresh_pasta_stop__none,"
    "job_offer_move__listen,job_offer_move__none]"
)
SMALL = [
    "launcher.cases_per_task=1",
    "launcher.gpus_per_task=1",
    "launcher.cpus_per_task=1",
    "launcher.mem_gb=1",
    "launcher.cpu_job.cpus_per_task=1",
    "launcher.cpu_job.mem_gb=1",
    "launcher.timeout_min=10",
    "launcher.signal_delay_s=30",
]
# Realtime sessions long enough to kill or signal a task mid-shard, short enough for CI: faster
# voices and shorter silences give 15-22 s sessions that end on their own (a session cut at
# max_session_s is invalid and recorded again, which would hide what a relaunch skipped). The
# health bounds are wide: these tests are about Slurm, and 2 loaded CI cores pace loosely.
REALTIME = [
    "orchestrator.clock=realtime",
    "tts.rate_wpm=400",
    "model.rate_wpm=450",
    "orchestrator.silence_s=0.5",
    "orchestrator.trailing_silence_s=0.3",
    "orchestrator.max_pacing_lag_s=10",
    "orchestrator.max_model_lag_s=10",
]


@pytest.fixture(scope="module", autouse=True)
def slurm(local_slurm):
    """Every test here runs on the local Slurm (tests/conftest.py skips where none answers)."""


def _cmd(tmp: Path, *args: str) -> list[str]:
    return [
        sys.executable,
        "-m",
        "fdeval.launch",
        f"out_root={seed_data(tmp / 'outputs')}",
        "progress=false",
        *args,
    ]


def launch(tmp: Path, *args: str, check=True) -> subprocess.CompletedProcess:
    proc = subprocess.run(_cmd(tmp, *args), cwd=tmp, capture_output=True, text=True, timeout=600)
    if check and proc.returncode != 0:
        raise AssertionError(
            f"exit {proc.returncode}\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
        )
    return proc


def verdicts(run: Path) -> dict[str, tuple[str, str]]:
    out = {}
    for f in sorted(step_dir(run, "judge").glob("*.json")):
        d = json.loads(f.read_text())
        out[f.name] = (d["verdict"], d["reasoning"])
    return out


def the_run(tmp: Path) -> Path:
    return next((tmp / "outputs/instructfd/reference").iterdir())


def job_ids(run: Path) -> list[str]:
    """Slurm job id of each phase's first task: submitit submits a one-task phase as a plain job."""
    jobs = json.loads((run / "slurm" / "jobs.json").read_text())
    return [j["job_id"] if j["n_tasks"] == 1 else f"{j['job_id']}_0" for j in jobs]


def sessions(run: Path) -> dict[str, int]:
    return {p.name: p.stat().st_mtime_ns for p in (run / "sessions").glob("[!.]*.h5")}


def counts(status: str) -> dict[str, str]:
    """`stage=status` figures by name: {'recorded': '3', 'missing': '0', 'verdicts': '3/3', ...}."""
    status = re.sub(
        r"\b(\w+)/[\w.+=-]+:", r"\1:", status
    )  # a step's folder `verdicts/<key>` counts as `verdicts`
    return dict(re.findall(r"(\w+): (\d+(?:/\d+)?)\b", status))


def test_two_point_multirun_on_slurm_matches_local_run(tmp_path):
    proc = launch(
        tmp_path,
        "launcher=slurm",
        "launcher.wait=true",
        *SMALL,
        CASES,
        "orchestrator.barge_in_delay_s=2.0,3.0",
        "-m",
    )
    assert (
        proc.stdout.count("slurm: run array") == 2 and proc.stdout.count("4 task(s) ['run']") == 2
    )
    runs = sorted((tmp_path / "outputs/instructfd/reference").iterdir())
    assert len(runs) == 2
    for r in runs:
        jobs = json.loads((r / "slurm" / "jobs.json").read_text())
        assert [j["phase"] for j in jobs] == ["run", "post", "score"] and jobs[0]["n_tasks"] == 4
        assert (step_dir(r, "score") / "ias.csv").exists()
    local = tmp_path / "local"
    local.mkdir()
    launch(local, CASES, "orchestrator.barge_in_delay_s=3.0")
    local_run = the_run(local)
    # launcher flags are not part of a run's name: the local twin names the Slurm run of point 3.0
    slurm_run = next(r for r in runs if r.name == local_run.name)
    assert verdicts(slurm_run) == verdicts(local_run) and len(verdicts(local_run)) == 4


def _sacct(job: str, *fields: str, all_attempts=False) -> list[list[str]]:
    cmd = ["sacct", "-n", "-P", "-X", "-j", job, "-o", ",".join(("JobID", *fields))] + (
        ["-D"] if all_attempts else []
    )
    out = subprocess.run(cmd, capture_output=True, text=True)
    return [line.split("|") for line in out.stdout.splitlines() if "|" in line]


def _squeue(job: str, fmt: str = "%T") -> str:
    # squeue reads the controller's live state (sacct lags behind by seconds)
    out = subprocess.run(["squeue", "-h", "-j", job, "-o", fmt], capture_output=True, text=True)
    return out.stdout.strip()


def _wait_until(what: str, pred, timeout_s: float, every_s: float = 0.1):
    deadline = time.time() + timeout_s
    while time.time() < deadline:
        if value := pred():
            return value
        time.sleep(every_s)
    raise AssertionError(f"timed out after {timeout_s:.0f} s waiting for {what}")


def _all_finished(jobs: list[dict]) -> bool:
    states = [row[1] for j in jobs for row in _sacct(j["job_id"], "State")]
    return bool(states) and not any(s in ("PENDING", "RUNNING", "REQUEUED") for s in states)


def _sigkill_step(job: str) -> None:
    """SIGKILL the processes of the job's task (the local node is this machine), as the OOM killer
    would. `scancel --signal=KILL` is a cancel instead: SIGTERM, which submitit ignores, and SIGKILL
    only after KillWait (30 s), which a short task outlives, finishing its case."""
    raw = _squeue(job, "%A")
    rows = subprocess.run(
        ["scontrol", "listpids", raw], capture_output=True, text=True, check=True
    ).stdout
    pids = [
        int(r.split()[0]) for r in rows.splitlines()[1:] if r.split()[2:3] == ["0"]
    ]  # step 0: srun's task
    assert pids, rows
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def test_sigkilled_task_is_reported_and_relaunch_completes(tmp_path):
    cases = "benchmark.cases=[fresh_pasta_stop__none,job_offer_move__listen,job_offer_move__none]"
    args = ["launcher=slurm", *SMALL, cases, *REALTIME]
    launch(tmp_path, *args)
    run = the_run(tmp_path)
    jobs = json.loads((run / "slurm" / "jobs.json").read_text())
    run_array = jobs[0]["job_id"]
    # once the task's Python runs (squeue says RUNNING before srun started it); its session takes
    # >= 15 s, so the kill lands before the case is recorded
    log = run / "slurm" / f"{run_array}_0" / f"{run_array}_0_0_log.out"
    _wait_until(
        "run task 0's Python", lambda: log.exists() and "Starting with" in log.read_text(), 120
    )
    _sigkill_step(f"{run_array}_0")
    _wait_until("every job to finish", lambda: _all_finished(jobs), 180, every_s=0.5)
    status = launch(tmp_path, *args, "stage=status").stdout
    c = counts(status)
    assert (c["recorded"], c["missing"]) == ("2", "1"), status
    assert re.search(rf"array {run_array} \(run, 3 task\(s\)\): .*FAILED 1", status), status
    before = sessions(run)
    assert len(before) == 2
    launch(tmp_path, *args, "launcher.wait=true")
    after = sessions(run)
    assert len(after) == 3 and all(after[k] == v for k, v in before.items())
    final = launch(tmp_path, *args, "stage=status").stdout
    c = counts(final)
    assert (c["recorded"], c["failed"], c["missing"], c["verdicts"]) == ("3", "0", "0", "3/3"), (
        final
    )


def _elapsed_s(job: str) -> int:
    parts = [int(p) for p in _squeue(job, "%M").replace("-", ":").split(":")]  # [[d-]h:]m:ss
    return sum(p * m for p, m in zip(reversed(parts), (1, 60, 3600, 86400)))


@pytest.mark.slow
def test_timed_out_task_is_checkpointed_requeued_and_completes(tmp_path):
    """Slurm's own time-limit warning reaches a run task mid-shard: submitit calls
    ShardTask.checkpoint, Slurm requeues the same shard, the requeued task skips what the first
    attempt recorded, and the chain (transcribe+judge, score) completes untouched.

    When the warning comes is set by design, not left to chance: Slurm checks limits every 30 s
    and sends `--signal=USR2@S` at the first check within S+30 s of the end, so with a limit fixed at
    submission it lands anywhere in a 30 s window (before any case is recorded, before submitit
    listens, or after the shard is done), and again in each requeued attempt. The task starts
    with a 10 min limit; once it has recorded its first case the test lowers the limit to end
    40-100 s later (S=90: the next check, within 31 s, warns; the kill, at the end, comes later)
    while >= 40 s of the shard remain. Slurm holds a requeued job for cred_expire+1 = 16 s
    (slurm/start.sh); the test restores the 10 min limit in that time, so the second attempt is
    never warned. The CPU jobs keep their own limits (cpu_job.*)."""
    cases = "benchmark.cases=[fresh_pasta_stop__none,job_offer_move__listen,job_offer_move__none]"
    args = [
        "launcher=slurm",
        "launcher.wait=true",
        *SMALL,
        "launcher.cases_per_task=3",
        "launcher.signal_delay_s=90",
        cases,
        *REALTIME,
    ]
    # the launcher waits for the whole chain (through the requeue) while the test drives Slurm
    launcher_log = tmp_path / "launcher.log"
    with launcher_log.open("w") as sink:
        launcher = subprocess.Popen(
            _cmd(tmp_path, *args), cwd=tmp_path, stdout=sink, stderr=subprocess.STDOUT
        )
    try:
        runs = tmp_path / "outputs/instructfd/reference"
        jobs_file = _wait_until(
            "jobs.json", lambda: next(runs.glob("*/slurm/jobs.json"), None), 120
        )
        run = jobs_file.parent.parent
        task = _wait_until("the run job", lambda: job_ids(run)[0], 30)
        first = _wait_until("the first recorded case", lambda: sessions(run), 120)
        assert len(first) == 1, first
        limit = math.ceil((_elapsed_s(task) + 40) / 60)
        subprocess.run(["scontrol", "update", f"JobId={task}", f"TimeLimit={limit}"], check=True)
        _wait_until("the requeue", lambda: _squeue(task) == "PENDING", 45, every_s=0.05)
        subprocess.run(["scontrol", "update", f"JobId={task}", "TimeLimit=10"], check=True)
        assert (
            "TimeLimit=00:10:00"
            in subprocess.run(
                ["scontrol", "show", "job", task], capture_output=True, text=True
            ).stdout
        )
        launcher.wait(timeout=300)
    finally:
        if launcher.poll() is None:
            launcher.kill()
    assert launcher.returncode == 0, launcher_log.read_text()[-3000:]
    log = (run / "slurm" / task / f"{task}_0_log.out").read_text()
    assert log.count("Caught signal SIGUSR2") == 1 and "this job is timed-out" in log
    assert "Calling checkpoint method" in log and "Requeued job" in log
    assert [row[1] for row in _sacct(task, "State", all_attempts=True)] == ["REQUEUED", "COMPLETED"]
    after = sessions(run)
    assert len(after) == 3 and all(
        after[k] == v for k, v in first.items()
    )  # the requeued task skipped it
    assert not list((run / "sessions").glob(".*.tmp*"))
    for job in job_ids(run)[1:]:  # transcribe+judge and score: never warned, done once
        assert [row[1] for row in _sacct(job, "State", all_attempts=True)] == ["COMPLETED"]
        assert "Caught signal" not in "".join(
            p.read_text() for p in (run / "slurm" / job).glob("*_log.*")
        )
    assert (step_dir(run, "score") / "ias.csv").exists()


def test_broken_chain_names_the_failed_run_task_and_its_log(tmp_path):
    # an unknown voice fails every session of the run task (no retry): it exits non-zero, Slurm
    # cancels the transcribe+judge and score jobs that wait on it
    proc = launch(
        tmp_path,
        "launcher=slurm",
        "launcher.wait=true",
        *SMALL,
        "benchmark.cases=[fresh_pasta_stop__none]",
        "model.voice=no-such-voice",
        check=False,
    )
    out = proc.stdout + proc.stderr
    assert proc.returncode == 2, out[-3000:]
    run = the_run(tmp_path)
    run_job, post_job, score_job = job_ids(run)
    lines = [line for line in out.splitlines() if line.startswith("fdeval: error:")]
    assert len(lines) == 1, out[-3000:]
    line = lines[0]
    err_log = (
        run / "slurm" / run_job / f"{run_job}_0_log.err"
    )  # submitit: <job>/<job>_<rank>_log.err
    assert f"run task {run_job} failed (FAILED, exit code 1:0)" in line, line
    assert f"log: {err_log}" in line and "unknown espeak-ng voice" in err_log.read_text(), line
    reason = line.split("): ", 1)[1].split("; log: ")[
        0
    ]  # the task's own exception, without its module
    assert reason.split(": ", 1)[1] in err_log.read_text(), line
    assert f"; not run: post {post_job} (CANCELLED), score {score_job} (CANCELLED); " in line, line


def test_post_tasks_start_their_own_llm_server_for_the_judge(tmp_path):
    """launcher.llm_server: each post task starts the judge's OpenAI-compatible server on its node
    (the stand-in as its own process, as `vllm serve` would be), judges through it and stops it;
    the run task, not named in `arrays`, starts none."""
    port, record = free_port(), tmp_path / "requests.jsonl"
    yes = json.dumps(
        {"reasoning": "Step 5: the model followed the instruction.", "adherence": "yes"}
    )
    tests_dir = str(Path(__file__).resolve().parents[1])
    server = (
        f"launcher.llm_server={{command:[{sys.executable},-m,helpers.fake_openai_server,--port,'{port}',"
        f"--answer,'{yes}',--record,'{record}'],port:{port},arrays:[post],env:{{PYTHONPATH:'{tests_dir}'}}}}"
    )
    launch(
        tmp_path,
        "launcher=slurm",
        "launcher.wait=true",
        *SMALL,
        "benchmark.cases=[fresh_pasta_stop__acknowledge]",
        "judge=llm",
        "judge.backend=vllm",
        "judge.model=stand-in",
        f"judge.base_url=http://127.0.0.1:{port}/v1",
        server,
    )
    run = the_run(tmp_path)
    assert [v for v, _ in verdicts(run).values()] == ["adhere"]  # the stand-in's "yes"
    requests = [json.loads(line) for line in record.read_text().splitlines()]
    assert requests[0]["path"] == "/v1/models"  # the readiness probe came first
    assert [r["model"] for r in requests if r["method"] == "POST"] == ["stand-in"]
    logs = sorted(p.name for p in (run / "slurm" / "llm_server").iterdir())
    assert logs == ["post_0.log"]  # one post task; the run array started none
    text = (run / "slurm" / "llm_server" / "post_0.log").read_text()
    assert "stand-in: ready" in text and "stopped on SIGTERM" in text
    assert not port_taken("127.0.0.1", port)
