"""`python -m fdeval.launch benchmark=tact` end to end on a tiny synthetic set with the reference agent."""

from __future__ import annotations

import csv
import json

import h5py
import pytest
from test_launch import launch, snapshot  # the engine's launch-test helpers (tests/ is on sys.path)

from fdeval.engine.run import step_dir

ARGS = ("benchmark=tact", "benchmark.n_episodes=6", "benchmark.n_resamples=2000")


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("tact_launch")
    proc = launch(tmp, *ARGS)
    run_dirs = list((tmp / "outputs" / "tact" / "reference").iterdir())
    assert len(run_dirs) == 1
    return tmp, run_dirs[0], proc


def test_writes_the_composite_table_with_intervals(tiny_run):
    tmp, d, proc = tiny_run
    rows = list(csv.DictReader((step_dir(d, "score") / "tact_composite.csv").open()))
    ref = {r["score"]: r for r in rows if r["system"] == "reference"}
    assert set(ref) >= {
        "S",
        "pause_handling",
        "backchanneling",
        "smooth_turn_taking",
        "user_interruption",
        "S_T (population)",
        "S_L (population)",
    }
    for name in ("S", "pause_handling", "smooth_turn_taking"):
        r = ref[name]
        assert 0.0 <= float(r["ci_low"]) <= float(r["estimate"]) <= float(r["ci_high"]) <= 1.0
        assert (
            r["n_resamples"] == "2000"
            and r["model_id"].startswith("reference:")
            and r["seed"] == "0"
        )
    assert "# TACT composite" in proc.stdout and "| reference | S |" in proc.stdout
    assert "session-seconds per wall-second (lockstep)" in proc.stdout
    episodes = list(csv.DictReader((step_dir(d, "score") / "tact_episodes.csv").open()))
    assert len(episodes) == 6 and all(r["kept_repeat"] in ("0", "1", "2") for r in episodes)


def test_sessions_end_at_the_length_horizon_after_the_decision_point(tiny_run):
    """Recorded 12 s past the decision point (benchmark.length_horizon_s), so durations can run past T_h."""
    tmp, d, _ = tiny_run
    sessions = sorted((d / "sessions").glob("*.h5"))
    assert len(sessions) == 18 and {p.stem.rsplit("__r", 1)[1] for p in sessions} == {"0", "1", "2"}
    seeds = set()
    for p in sessions:
        with h5py.File(p) as f:
            turns = f["turns"][()]
            assert f.attrs["end_reason"] == "tail"
            assert f.attrs["duration_s"] - turns["end_s"][-1] == pytest.approx(12.0, abs=0.04)
            assert f.attrs["benchmark"] == "tact"
            seeds.add(int(f.attrs["case_seed"]))
        m = json.loads((step_dir(d, "measure") / f"{p.stem}.json").read_text())
        assert m["complete_window"] and m["decision_session_s"] == pytest.approx(turns["end_s"][-1])
        j = json.loads((step_dir(d, "posterior") / f"{p.stem}.json").read_text())
        assert j["onset_s"] == m["onset_s"] and sum(j["posterior"]) == pytest.approx(1.0)
    assert len(seeds) == 18  # every repeat runs with its own seed


def test_relaunch_rewrites_nothing(tiny_run):
    tmp, d, _ = tiny_run
    data = tmp / "outputs" / "tact" / "_data"
    before, data_before = snapshot(d), snapshot(data)
    proc = launch(tmp, *ARGS)
    assert snapshot(d) == before and snapshot(data) == data_before
    assert "already recorded" in proc.stderr + proc.stdout


def test_bad_value_is_one_line_exit_2(tmp_path):
    proc = launch(tmp_path, "benchmark=tact", "benchmark.posterior=oracle", check=False)
    assert proc.returncode == 2
    err = proc.stderr.strip()
    assert err.count("\n") == 0 and "benchmark.posterior: unknown posterior" in err, err
