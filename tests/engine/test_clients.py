"""Realtime sessions spread over client processes (fdeval.engine.clients): how many processes,
that they record into the same folder as one process would, and what happens when one dies.

The launches use the toy benchmark (tests/engine/toy: short spoken questions, so a realtime
session takes seconds) and the reference agent under the realtime clock.
"""

from __future__ import annotations

import hashlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import psutil
import pytest

from fdeval.engine.clients import auto_processes, client_processes
from fdeval.orchestrator.recorder import read_session_log

TOY = Path(__file__).resolve().parent / "toy"
# Health bounds far above these sessions' lag on a loaded 2-core machine (they are about which process
# records what; the bounds have tests of their own): a session behind real time is invalid, and its
# relaunch records it again, which would make "nothing recorded again" depend on the machine's load.
ARGS = [
    "benchmark=toy",
    f"hydra.searchpath=[file://{TOY / 'conf'}]",
    "progress=false",
    "orchestrator.clock=realtime",
    "benchmark.n_cases=4",
    "model.concurrency=4",
    "orchestrator.max_pacing_lag_s=60",
    "orchestrator.max_model_lag_s=60",
]


def _cmd(tmp: Path, *args: str) -> list[str]:
    return [sys.executable, "-m", "fdeval.launch", f"out_root={tmp / 'out'}", *ARGS, *args]


def _env() -> dict[str, str]:
    return {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(TOY), os.environ.get("PYTHONPATH", "")]).rstrip(
            os.pathsep
        ),
    }


def launch(tmp: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess:
    proc = subprocess.run(
        _cmd(tmp, *args), cwd=tmp, capture_output=True, text=True, timeout=600, env=_env()
    )
    if check and proc.returncode != 0:
        raise AssertionError(
            f"exit {proc.returncode}\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
        )
    return proc


def sessions(tmp: Path) -> dict[str, str]:
    (run,) = (tmp / "out" / "toy" / "reference").iterdir()
    return {
        p.name: hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted((run / "sessions").glob("*.*"))
    }


def client_processes_of(parent: psutil.Process) -> list[psutil.Process]:
    out = []
    for c in parent.children():
        try:
            if "spawn_main" in " ".join(c.cmdline()):  # not the resource tracker, not espeak-ng
                out.append(c)
        except psutil.Error:  # gone meanwhile
            pass
    return out


def test_auto_uses_as_many_processes_as_the_sessions_cost_and_no_more_than_there_are_cpus():
    assert auto_processes(32, 0.045, 0.5, cpus=16) == 3  # 1.44 cores of pacing, half a core each
    assert auto_processes(32, 0.045, 0.5, cpus=2) == 2
    assert auto_processes(8, 0.045, 0.5, cpus=16) == 1
    assert auto_processes(2, 1.0, 0.5, cpus=16) == 2  # never more processes than sessions
    s = SimpleNamespace(client_processes=0, client_cpu_s_per_session_s=0.045, client_cpu_share=0.5)
    assert (
        client_processes(s, "lockstep", 32, 100) == 1
    )  # lockstep computes; there is nothing to pace
    assert client_processes(s, "realtime", 1, 100) == 1
    s.client_processes = 5
    assert client_processes(s, "realtime", 32, 100) == 5
    assert client_processes(s, "realtime", 32, 3) == 3  # no process without a case


def test_two_client_processes_record_every_case_into_the_folder_one_process_would_use(tmp_path):
    proc = launch(tmp_path, "orchestrator.client_processes=2")
    assert "4 of 4 cases recorded" in proc.stdout and "2 client processes" in proc.stdout
    (run,) = (tmp_path / "out" / "toy" / "reference").iterdir()
    log = (run / "fdeval.log").read_text()
    # the client processes' own log lines reach the run's log
    assert log.count("s session in") == 4, log
    for h5 in sorted((run / "sessions").glob("*.h5")):
        attrs = read_session_log(h5)["attrs"]
        assert attrs["valid"], (h5.name, attrs.get("invalid_reason"))
    before = sessions(tmp_path)
    # the same run with one process: the same folder, and nothing is recorded again
    proc = launch(tmp_path, "orchestrator.client_processes=1", "stage=run")
    assert "all 4 cases already recorded" in (run / "fdeval.log").read_text()
    assert sessions(tmp_path) == before


def test_a_client_process_killed_mid_session_fails_the_step_and_a_relaunch_records_the_rest(
    tmp_path,
):
    launch(tmp_path, "stage=generate")
    p = subprocess.Popen(
        _cmd(tmp_path, "orchestrator.client_processes=2", "model.concurrency=2", "stage=run"),
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=_env(),
    )
    parent = psutil.Process(p.pid)
    deadline = time.monotonic() + 120
    victim = None
    # once the first session is written, 3 cases are in flight or queued on 2 one-slot processes:
    # neither process can have finished its share, so the kill always lands before its end
    while victim is None and time.monotonic() < deadline:
        kids = client_processes_of(parent)
        if len(kids) == 2 and list((tmp_path / "out").rglob("sessions/*.h5")):
            victim = kids[0]
        time.sleep(0.02)
    assert victim is not None, "no client process found"
    victim.send_signal(signal.SIGKILL)
    out, err = p.communicate(timeout=300)
    assert p.returncode == 2, (p.returncode, out[-2000:], err[-2000:])
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "client process" in lines[0] and "relaunch" in lines[0], lines
    assert "Traceback" not in out + err
    done = sessions(tmp_path)
    # finished: a session whose log was written (the WAV goes first: the kill may land between the
    # two, and such a session is not finished: it is recorded again)
    finished = {k for k in done if k.endswith(".h5") and not k.startswith(".")}
    kept = {k: v for k, v in done.items() if k.rsplit(".", 1)[0] + ".h5" in finished}
    assert kept, done
    # a relaunch records only what is missing and rewrites nothing that was finished
    launch(tmp_path, "orchestrator.client_processes=2", "model.concurrency=2", "stage=run")
    after = sessions(tmp_path)
    assert {k: v for k, v in after.items() if k in kept} == kept
    assert len([k for k in after if k.endswith(".h5") and not k.startswith(".")]) == 4
    assert not [k for k in after if k.startswith(".")]  # the killed writer's temp file is gone


@pytest.mark.parametrize("value", ["-1", "1.5"])
def test_a_bad_process_count_is_one_line(tmp_path, value):
    proc = launch(tmp_path, f"orchestrator.client_processes={value}", "stage=run", check=False)
    assert (
        proc.returncode == 2
        and "orchestrator.client_processes" in proc.stderr
        and "Traceback" not in proc.stderr
    )
