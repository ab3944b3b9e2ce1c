"""Small real run folders (reference model, offline judges) shared by the run reader and timeline
tests: made once per test session with `python -m fdeval.launch`, each only when a test asks."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers.launching import run_launch, seed_data

IFD = (
    "benchmark.cases=[fresh_pasta_stop__acknowledge,fresh_pasta_stop__none,bathroom_cleaning_mix__interrupt,"
    "house_savings_plan__backchannel]",
)
ECHO = ("benchmark=echochain", "benchmark.n_conversations=2", "benchmark.n_resamples=100")
SWEEP_CASES = "benchmark.cases=[fresh_pasta_stop__acknowledge,bathroom_cleaning_mix__interrupt]"
TACT = (
    "benchmark=tact",
    "benchmark.n_episodes=4",
    "benchmark.repeats=1",
    "benchmark.n_resamples=100",
)


def launch(tmp: Path, *args: str) -> Path:
    """Run the command; the one run folder it made."""
    proc = run_launch([f"out_root={seed_data(tmp / 'out')}", "progress=false", *args], cwd=tmp)
    assert proc.returncode == 0, (
        f"exit {proc.returncode}\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    )
    (run,) = [p.parent for p in (tmp / "out").glob("*/reference/*/run.json")]
    return run


@pytest.fixture(scope="session")
def ifd_run(tmp_path_factory) -> Path:
    return launch(tmp_path_factory.mktemp("ifd"), *IFD)


@pytest.fixture(scope="session")
def delay_sweep(tmp_path_factory) -> list[Path]:
    """The two points of a barge-in delay sweep (`orchestrator.barge_in_delay_s=1,3 -m`, two cases
    with a barge-in): the run folders, delay 1 s first."""
    tmp = tmp_path_factory.mktemp("sweep")
    proc = run_launch(
        [
            f"out_root={seed_data(tmp / 'out')}",
            "progress=false",
            SWEEP_CASES,
            "orchestrator.barge_in_delay_s=1,3",
            "-m",
        ],
        cwd=tmp,
    )
    assert proc.returncode == 0, (
        f"exit {proc.returncode}\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    )
    runs = sorted(p.parent for p in (tmp / "out").glob("*/reference/*/run.json"))
    assert len(runs) == 2 and "barge_in_delay_s=1" in runs[0].name, runs
    return runs


@pytest.fixture(scope="session")
def echo_run(tmp_path_factory) -> Path:
    return launch(tmp_path_factory.mktemp("echo"), *ECHO)


@pytest.fixture(scope="session")
def tact_run(tmp_path_factory) -> Path:
    return launch(tmp_path_factory.mktemp("tact"), *TACT)
