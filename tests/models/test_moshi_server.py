"""Moshi for real: the official moshi.server (tiny random checkpoint, CPU) driven by fdeval.

The moshi venv is built once (cached at .cache/moshi-venv or FDEVAL_MOSHI_VENV) and a tiny random
Moshi is built in it; the tests are skipped, with the reason, where that cannot be done. They run
`python -m fdeval.launch model=moshi ...` as a user would: two cases in realtime against a server
started in the job, the injection timing read back from the HDF5 logs, and a server SIGKILLed in
the middle of a case restarted with the case completed.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import h5py
import numpy as np
import pytest
import soundfile as sf
from helpers import health

from fdeval.orchestrator.recorder import read_session_log

pytestmark = [pytest.mark.server, pytest.mark.slow]

CASES = ["balcony_tomatoes__continue", "balcony_tomatoes__none"]


def model_args(py: Path, tiny: dict) -> list[str]:
    return [
        "model=moshi",
        f"model.server.python={py}",
        "model.hf_repo=null",
        f"model.config_path={tiny['config']}",
        f"model.moshi_weight={tiny['moshi_weight']}",
        f"model.mimi_weight={tiny['mimi_weight']}",
        f"model.tokenizer={tiny['tokenizer']}",
        "model.device=cpu",
        # one torch thread: two cores shared by the server, the client and the frame loop
        "+model.server.env.OMP_NUM_THREADS=1",
        "model.server.startup_timeout_s=240",
    ]


def launch(
    tmp: Path, args: list[str], cases=CASES, timeout: float = 900, on_start=None
) -> subprocess.CompletedProcess:
    # timeout_s=4: the random model's noise is never speech to the VAD, so every wait runs to its
    # turn timeout (20 s in the default data); 4 s keeps a case at ~25 s of session
    cmd = [
        sys.executable,
        "-m",
        "fdeval.launch",
        f"out_root={tmp / 'outputs'}",
        "progress=false",
        "benchmark.timeout_s=4",
        *args,
        f"benchmark.cases=[{','.join(cases)}]",
    ]
    proc = subprocess.Popen(
        cmd, cwd=tmp, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    if on_start is not None:
        threading.Thread(target=on_start, args=(proc,), daemon=True).start()
    try:
        out, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, _ = proc.communicate()
        raise AssertionError(
            f"`{' '.join(cmd[3:])}` (the real Moshi server on CPU) was still running after {timeout:.0f} s "
            f"(a loaded machine, or the launch hangs); its last output:\n{out[-3000:]}"
        ) from None
    return subprocess.CompletedProcess(cmd, proc.returncode, out, "")


def the_run_dir(tmp: Path) -> Path:
    found = [
        p.parent.parent for p in (tmp / "outputs" / "instructfd" / "moshi").rglob("sessions/*.h5")
    ]
    assert found, sorted(str(p) for p in (tmp / "outputs").rglob("*"))[:50]
    return found[0]


@pytest.fixture(scope="module")
def two_case_run(moshi_python, tiny_moshi, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("moshi-run")
    t0 = time.monotonic()
    # Health bounds far above any lag of a loaded machine (a CPU Moshi on one thread can fall a
    # second behind there): these tests are about the real server driven by fdeval and what the
    # logs record; a session past a bound would end early, invalid.
    proc = launch(
        tmp,
        [
            *model_args(moshi_python, tiny_moshi),
            "orchestrator.max_pacing_lag_s=60",
            "orchestrator.max_model_lag_s=60",
        ],
    )
    assert proc.returncode == 0, proc.stdout[-6000:]
    return tmp, proc, time.monotonic() - t0


def test_two_cases_against_the_real_server(two_case_run, tiny_moshi):
    tmp, proc, wall = two_case_run
    d = the_run_dir(tmp)
    for cid in CASES:
        audio, sr = sf.read(d / "sessions" / f"{cid}.wav")
        assert sr == 16000 and audio.shape[1] == 2
        assert np.abs(audio[:, 1]).max() > 0.01, "no model audio on ch1"
        with h5py.File(d / "sessions" / f"{cid}.h5") as f:
            assert f.attrs["clock"] == "realtime"
            text = [t.decode() for t in f["model_text"]["text"]]
            chunks = f["model_chunks"][()]
            ident = json.loads(f.attrs["model"])
        assert len(chunks) > 20 and text, "the server's audio and text reached the log"
        assert ident["kind"] == "moshi-server" and ident["files"]["moshi_weight"]["sha256"]
        assert ident["decoding"] == {"temp": 0.8, "temp_text": 0.7, "top_k": 250, "top_k_text": 25}
        # the text pieces are Moshi's own pieces (of the tiny tokenizer), placed on the played timeline
        assert all(isinstance(t, str) for t in text)
    # the server ran in the job, with its log in the run folder, and got the decoding settings
    logs = sorted((d / "servers").glob("moshi-*.log"))
    assert logs, "server log in the run folder"
    body = logs[0].read_text()
    assert "lm_gen_config = {'temp': 0.8, 'temp_text': 0.7, 'top_k': 250, 'top_k_text': 25}" in body
    assert "accepted connection" in body
    # the run records the model identity
    assert json.loads((d / "model.json").read_text())["model_id"].startswith("moshi:")
    print(f"two cases in {wall:.1f} s wall (server start included)")


def test_realtime_injection_timing(two_case_run):
    tmp, _, _ = two_case_run
    d = the_run_dir(tmp)
    pacing, barge = [], []
    for cid in CASES:
        log = read_session_log(d / "sessions" / f"{cid}.h5")
        # the model's frame: 80 ms at 24 kHz
        assert abs(log["attrs"]["frame_s"] - 0.08) < 1e-9
        # How late frames leave is the machine's load (the bench's `realtime` section measures it);
        # what holds under any load: the recorded figures are those of the log's own frames, each
        # barge-in's error is the lateness of the frame its first sample left in, and the verdict
        # follows the figures and bounds.
        pacing.extend(health.lateness(log))
        health.check_pacing(log)
        assert health.check_verdict(log["attrs"])
        for t in log["turns"]:
            if t["turn_type"] == "barge-in" and np.isfinite(t["error_s"]):
                assert (
                    t["start_s"] == t["scheduled_s"]
                )  # sample-exact: its delay after the onset, to the sample
                assert health.check_turn_error(log, t) == pytest.approx(t["error_s"], abs=1e-9)
                barge.append(float(t["error_s"]))
    pacing = np.asarray(pacing)
    print(
        f"pacing over {len(pacing)} frames: median {np.median(pacing) * 1e3:.2f} ms, "
        f"p99 {np.percentile(pacing, 99) * 1e3:.2f} ms, max {pacing.max() * 1e3:.2f} ms; "
        f"barge-in error_s {[round(b * 1e3, 2) for b in barge]} ms"
    )
    assert barge, "the barge-in turns were injected"


def kill_when_streaming(tmp: Path, killed: dict):
    """A launch's `on_start`: once its first session is well under way (60 frames handled), SIGKILL
    the server the run started (its pid is in its log) and note the pid in `killed`."""

    def watch(proc):
        deadline = time.monotonic() + 900  # the launch's own timeout ends it first
        while time.monotonic() < deadline and proc.poll() is None:
            logs = list((tmp / "outputs").rglob("servers/moshi-0.log"))
            body = logs[0].read_text(errors="replace") if logs else ""
            if body.count("frame handled") > 60:
                pid = int(re.findall(r": pid (\d+) ===", body)[-1])
                os.kill(pid, signal.SIGKILL)
                killed["pid"] = pid
                return
            time.sleep(0.2)

    return watch


def test_server_killed_mid_case_is_restarted(moshi_python, tiny_moshi, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("moshi-kill")
    killed = {}
    # lenient health bounds, as for two_case_run: the retried case must not end invalid for load
    proc = launch(
        tmp,
        [
            *model_args(moshi_python, tiny_moshi),
            "orchestrator.max_pacing_lag_s=60",
            "orchestrator.max_model_lag_s=60",
        ],
        cases=CASES[:1],
        on_start=kill_when_streaming(tmp, killed),
    )
    assert killed.get("pid"), "the server was killed"
    assert proc.returncode == 0, proc.stdout[-6000:]
    d = the_run_dir(tmp)
    for cid in CASES[:1]:
        assert (d / "sessions" / f"{cid}.h5").exists() and not (
            d / "sessions" / f"{cid}.error.json"
        ).exists()
    log = (d / "servers" / "moshi-0.log").read_text()
    assert "restart 1/3" in log and "exit code -9" in log
    assert "retrying the case" in proc.stdout
    print(
        "kill/restart:",
        [line for line in proc.stdout.splitlines() if "restart" in line or "retrying" in line][:4],
    )
