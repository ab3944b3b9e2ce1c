"""benchmarks/moshi_lockstep_speed.py at its smallest: the tiny random Moshi on the CPU, B = 1 and 2,
two cases, run from fdeval's python (it hands over to the moshi venv, as a user would call it).
The moshi venv is built when missing (the moshi tests' fixture), skipped only where it cannot be."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "benchmarks" / "moshi_lockstep_speed.py"


def _run(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    # the tests' --timeout-s 800 (the script's own limit) sits below this one: a loaded machine may
    # need minutes for what an idle one does in seconds
    return subprocess.run(
        [
            sys.executable,
            str(SCRIPT),
            "--out",
            str(tmp_path / "out"),
            "--json",
            str(tmp_path / "speed.json"),
            *args,
        ],
        capture_output=True,
        text=True,
        timeout=900,
        cwd=REPO,
    )


def test_speed_script_prints_and_stores_the_figures(tmp_path, moshi_python):
    proc = _run(
        tmp_path,
        "--batch",
        "1,2",
        "--cases",
        "2",
        "--turn-timeout-s",
        "1",
        "--forward-steps",
        "5",
        "--warmup-steps",
        "1",
        "--probe-every-s",
        "0.1",
        "--timeout-s",
        "800",
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = proc.stdout.strip().splitlines()
    res = json.loads((tmp_path / "speed.json").read_text())
    assert res["env"]["torch_threads"] == 1 and res["env"]["torch"] and res["env"]["device"]
    assert [h["batch"] for h in res["harness"]] == [1, 2] == [f["batch"] for f in res["forward"]]
    for h in res["harness"]:
        assert h["cases"] == 2 and h["failed"] == 0 and h["invalid"] == 0 and h["session_s"] > 0
        # the interleaved forward's time is not the harness's
        assert 0 < h["probe_s"] < h["wall_s"] - h["load_s"]
        assert h["speed"] == pytest.approx(
            h["session_s"] / (h["wall_s"] - h["load_s"] - h["probe_s"])
        )
        # the pool's own counters: every model frame was one row of one batched step (a session's
        # last frame stays in the 16 -> 24 kHz resampler's delay line: one frame less each)
        assert (
            h["row_steps"] == round(h["session_s"] / 0.08) - h["cases"]
            and h["steps"] * h["batch"] >= h["row_steps"]
        )
        assert 0 < h["in_model_step"] < 1
    for f, h in zip(res["forward"], res["harness"]):
        # timed between the harness's steps (the ratio's figure): two steps every 0.1 s, one timed
        assert f["spent_s"] == h["probe_s"] and f["steps"] >= 2 and f["every_s"] == 0.1
        assert f["wall_s"] < f["spent_s"] and f["speed"] == pytest.approx(
            f["batch"] * f["steps"] * 0.08 / f["wall_s"]
        )
        for side in (f["before"], f["after"]):  # and alone just before and after it (printed only)
            assert side["steps"] == 5 and side["speed"] == pytest.approx(
                f["batch"] * 5 * 0.08 / side["wall_s"]
            )
    assert res["env"]["kv_cache_s"] == 120 and 0 < res["env"]["kv_cache_steps"] <= 120 / 0.08 + 8
    # no B=8 here: the largest B is the reference; the last line is the ratio of the stored speeds
    ratio = res["harness"][1]["speed"] / res["forward"][1]["speed"]
    assert res["harness_over_forward"] == {"batch": 2, "ratio": pytest.approx(ratio)}
    assert lines[-1] == f"harness/forward at B=2: {ratio:.2f}"
    assert "full_set" not in res  # the GPU-minutes projection is for CUDA only


def test_without_the_probe_the_forward_is_the_mean_of_before_and_after(tmp_path, moshi_python):
    proc = _run(
        tmp_path,
        "--batch",
        "1",
        "--cases",
        "1",
        "--turn-timeout-s",
        "1",
        "--forward-steps",
        "4",
        "--warmup-steps",
        "1",
        "--no-probe",
        "--timeout-s",
        "800",
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    res = json.loads((tmp_path / "speed.json").read_text())
    (h,), (f,) = res["harness"], res["forward"]
    assert h["probe_s"] == 0 and f["steps"] == 0 and f["skipped"] == "--no-probe"
    assert f["speed"] == pytest.approx((f["before"]["speed"] + f["after"]["speed"]) / 2)
    assert "not interleaved: --no-probe" in proc.stdout
    assert res["harness_over_forward"]["ratio"] == pytest.approx(h["speed"] / f["speed"])


def test_speed_script_stops_at_its_timeout_and_keeps_the_json(tmp_path, moshi_python):
    proc = _run(tmp_path, "--batch", "1", "--cases", "1", "--timeout-s", "3")
    assert proc.returncode == 124, proc.stderr[-2000:]
    assert "timed out after 3 s" in proc.stderr
    res = json.loads((tmp_path / "speed.json").read_text())
    assert res["timed_out"] is True and "harness_over_forward" not in res
