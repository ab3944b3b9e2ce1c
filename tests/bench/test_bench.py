"""python -m fdeval.bench: the CLI writes bench.json / bench.md with the environment and every figure
beside its baseline; the sections' own bookkeeping (part timers, schedules, short cases) is
right. No timing thresholds: the figures depend on the machine, their structure does not."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from fdeval.bench import common, lockstep, realtime, startup
from fdeval.bench.common import Context, PartTimer, launch, makespan
from fdeval.bench.sections import SECTIONS
from fdeval.benchmarks.instructfd.records import InstructFDCase
from fdeval.cases import load_cases

CHEAP = "vad,tact,generation,batched"
ENV_KEYS = {
    "cpu_model",
    "logical_cpus",
    "affinity",
    "torch_threads",
    "onnxruntime_vad_threads",
    "python",
    "packages",
    "git",
    "hostname_sha256",
}


def bench(tmp: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "fdeval.bench", *args],
        cwd=tmp,
        capture_output=True,
        text=True,
        timeout=900,
    )


def check_rows(section: dict) -> None:
    """Every figure has its baseline (a part that could not run names why in its note)."""
    assert section["rows"], section
    for r in section["rows"]:
        assert r["what"] and r["unit"] and r["baseline"], r
        if r["value"] is None:
            assert "not in --quick" in r["note"] or "skipped" in r["note"], r
            continue
        assert r["baseline_value"] is not None and r["baseline_value"] > 0, r
        assert r["ratio"] == pytest.approx(r["value"] / r["baseline_value"]), r


def test_cli_quick_cheap_sections_write_json_and_markdown(tmp_path):
    proc = bench(tmp_path, "--quick", "--only", CHEAP, "--out", "out")
    assert proc.returncode == 0, proc.stderr[-3000:]
    data = json.loads((tmp_path / "out" / "bench.json").read_text())
    assert data["quick"] is True and data["sections"] == CHEAP.split(",")
    env = data["environment"]
    assert ENV_KEYS <= set(env), set(env)
    assert (
        env["packages"]["fdeval"] and env["packages"]["numpy"] and len(env["hostname_sha256"]) == 16
    )
    assert socket.gethostname() not in json.dumps(data)  # the host name only as a hash
    secs = {name: data[name] for name in data["sections"]}
    assert (
        set(secs["batched"]) == {"skipped", "section_wall_s"}
        and "--only batched" in secs["batched"]["skipped"]
    )
    for name in ("vad", "tact", "generation"):
        check_rows(secs[name])
    assert secs["vad"]["chunks"] > 0 and (
        "torch" in secs["vad"] or secs["vad"]["max_prob_diff"] < 1e-3
    )
    assert secs["tact"]["agree"] is True and secs["tact"]["episodes"] == 1000
    assert secs["generation"]["espeak"]["cases"] == 26 and "skipped" in secs["generation"]["piper"]
    md = (tmp_path / "out" / "bench.md").read_text()
    assert md in proc.stdout
    for name, sec in secs.items():
        assert f"## {name}" in md
        for r in sec.get("rows", []):
            line = next(x for x in md.splitlines() if x.startswith(f"| {r['what']} |"))
            assert (
                line.count(" | ") == 6 and r["baseline"] in line
            )  # 7 cells: a pipe in a note is escaped
    assert "skipped: not in --quick" in md


def test_unknown_section_is_one_line_and_exit_2(tmp_path):
    proc = bench(tmp_path, "--only", "vad,nope", "--out", "out")
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    (line,) = proc.stderr.strip().splitlines()
    assert "--only: unknown section(s) nope" in line and ",".join(SECTIONS) in line
    assert not (tmp_path / "out").exists()


def test_makespan_deals_durations_in_queue_order():
    assert makespan([10, 10, 10, 10], 4) == 10
    assert makespan([10, 10, 10, 10], 1) == 40
    assert (
        makespan([5, 1, 1, 1, 4], 2) == 7
    )  # slots 5 | 1+1+1, then the 4 on the slot free first (at 3)
    assert makespan([3, 3, 3], 8) == 3


def test_part_timer_takes_nested_time_out_of_the_outer_part(monkeypatch):
    ticks = iter(range(100))
    monkeypatch.setattr(common.time, "perf_counter", lambda: float(next(ticks)))
    timer = PartTimer()

    def inner():
        return "x"

    inner_t = timer.wrap(inner, "vad", inside={"policy": "vad (agent)"})

    def outer():
        return inner_t() + inner_t()

    outer_t = timer.wrap(outer, "policy")
    assert outer_t() == "xx" and inner_t() == "x"
    # clock: outer 0..5 (inner 1..2, 3..4), then inner 6..7
    assert timer.totals == {"policy": 3.0, "vad (agent)": 2.0, "vad": 1.0}
    assert timer.calls == {"policy": 1, "vad (agent)": 2, "vad": 1}


def test_lockstep_parts_add_up_to_the_timed_wall(tmp_path):
    res = lockstep.run(Context(quick=True, out=tmp_path))
    assert res["cases"] == lockstep.QUICK_CASES and res["session_s"] > 0
    parts = res["parts_s"]
    for name in ("vad (orchestrator)", "vad (agent)", "policy", "tts", "wav", "hdf5"):
        assert parts[name] > 0, (name, parts)
    main = sum(v for k, v in parts.items() if "background" not in k)
    assert res["rest_s"] >= 0 and main + res["rest_s"] == pytest.approx(res["timed_wall_s"])
    check_rows(res)
    by = {r["what"]: r for r in res["rows"]}
    assert (
        by["part wav"]["note"] == f"{res['cases']} calls"
        and by["part hdf5"]["note"] == f"{res['cases']} calls"
    )
    # the wrappers are gone again
    from fdeval.audio.vad import VADStream

    assert not hasattr(VADStream.push, "__wrapped__")


def test_short_cases_load_and_each_ends_with_its_barge_in(tmp_path):
    gen, _ = launch(tmp_path / "g", "stage=generate")
    d = realtime.short_cases(gen.data_dir, tmp_path / "short", 11)
    cases = load_cases(d / "cases", d, InstructFDCase)
    assert len(cases) == 11 and len({c.case_id for c in cases}) == 11
    assert all(
        c.turns[-1].turn_type == "barge-in" and all(t.turn_type != "barge-in" for t in c.turns[:-1])
        for c in cases
    )
    assert sum(t.duration_s for c in cases for t in c.turns) / 11 < realtime.MAX_SESSION_S


@pytest.mark.slow
def test_realtime_two_sessions_one_process_vs_two(tmp_path, monkeypatch):
    monkeypatch.setattr(realtime, "QUICK_CONCURRENCY", (1, 2))
    res = realtime.run(Context(quick=True, out=tmp_path))
    runs = res["runs"]
    assert [(r["concurrency"], r["client_processes"]) for r in runs] == [(1, 1), (2, 1), (2, 2)]
    for r in runs:
        # a session past the pacing bound (a loaded machine) ends there, maybe before its barge-in:
        # the bench counts those, and every other session has its barge-in
        assert r["cases"] == max(1, r["concurrency"]) and r["scheduled_s"] > 0
        assert r["cases"] - r["past_pacing_bound"] <= r["barge_ins"] <= r["cases"], r
        assert r["client_cpu_s_per_session_s"] > 0 and r["overhead"] > 0
    assert res["client_cpu_s_per_session_s"] == runs[1]["client_cpu_s_per_session_s"]
    check_rows(res)
    assert {r["baseline"] for r in res["rows"]} == {"1 session, 1 process", "2 sessions, 1 process"}


@pytest.mark.slow
def test_launch_section_measures_each_launch_beside_python_pass(tmp_path, monkeypatch):
    monkeypatch.setattr(startup, "QUICK_ROUNDS", 1)
    res = startup.run(Context(quick=True, out=tmp_path))
    figs = res["figures"]
    assert res["rounds"] == 1 and set(figs) == {*startup.KINDS, "first_session"}
    for name, f in figs.items():
        assert (
            len(f["cpu_s"]) == len(f["wall_s"]) == 1
            and f["cpu_s_median"] > 0
            and f["wall_s_median"] > 0
        ), name
    # the first session starts inside the launch that records it: a part of that launch, CPU and wall
    assert figs["first_session"]["cpu_s_median"] < figs["session"]["cpu_s_median"]
    assert figs["first_session"]["wall_s_median"] < figs["session"]["wall_s_median"]
    assert res["config_check_cpu_s"] == figs["cfg"]["cpu_s_median"] and res["session_s"] > 0
    check_rows(res)
    assert len(res["rows"]) == 8 and {r["baseline"] for r in res["rows"]} == {startup.BASELINE}
    assert sorted(r["unit"] for r in res["rows"]) == ["CPU-s"] * 4 + ["wall-s"] * 4
    assert all(
        r["baseline_value"] == figs["pass"][f"{'cpu' if r['unit'] == 'CPU-s' else 'wall'}_s_median"]
        for r in res["rows"]
    )
    # the children's output is kept: the config printed, the error one line
    d = tmp_path / "work" / "launch"
    assert "out_root:" in (d / "cfg-0.out").read_text()
    assert len((d / "error-0.err").read_text().strip().splitlines()) == 1


def test_a_launch_that_fails_is_an_error_not_a_figure(tmp_path):
    d = tmp_path / "launch"
    d.mkdir()
    with pytest.raises(RuntimeError, match="the one-case run exited 2") as e:
        startup.measure("session", 0, Context(quick=True, out=tmp_path), d, "no_such_case")
    assert str(d / "session-0.err") in str(e.value)


def test_a_failing_section_is_recorded_and_the_others_are_kept(tmp_path, monkeypatch):
    from fdeval.bench import __main__ as cli

    def broken(ctx):
        raise RuntimeError("no such device\nsecond line")

    def fine(ctx):
        return {"rows": [common.row("x", 2.0, "s", "y", 4.0)]}

    monkeypatch.setattr(cli, "SECTIONS", {"fine": fine, "broken": broken, "later": fine})
    assert cli.main(["--out", str(tmp_path), "--only", "fine,broken,later"]) == 1
    data = json.loads((tmp_path / "bench.json").read_text())
    assert data["sections"] == ["fine", "broken", "later"]
    assert (
        data["broken"]["error"] == "RuntimeError: no such device"
        and "Traceback" in data["broken"]["traceback"]
    )
    assert data["later"]["rows"][0]["ratio"] == 0.5
    md = (tmp_path / "bench.md").read_text()
    assert "error: RuntimeError: no such device" in md and "| x | 2 | s | y | 4 | 0.5 |" in md
