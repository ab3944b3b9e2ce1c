"""A default Instruct-FD run made once per test session in a tmp folder (the real pipeline: the
reference model, espeak voices, the rules judge; ~25 s), shared by the review tests; small TACT and
EchoChain runs made the same way when a test asks; one Chromium per browser test module."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from helpers.launching import run_launch


ECHOCHAIN = ("benchmark=echochain", "benchmark.n_conversations=2", "benchmark.n_resamples=100")
TACT = (
    "benchmark=tact",
    "benchmark.n_episodes=4",
    "benchmark.repeats=1",
    "benchmark.n_resamples=100",
)
CHROMIUM = os.environ.get("FDEVAL_CHROMIUM", "/usr/bin/chromium")


def _launch(root: Path, *args: str) -> Path:
    """Run `python -m fdeval.launch` into `root`; the one run folder it made."""
    proc = run_launch([f"out_root={root / 'out'}", "progress=false", *args], root, timeout_s=900)
    assert proc.returncode == 0, proc.stderr[-2000:]
    (run,) = [p.parent for p in (root / "out").glob("*/*/*/run.json")]
    return run


@pytest.fixture(scope="session")
def tact_run(tmp_path_factory) -> Path:
    """A small TACT run (4 synthetic episodes, the reference agent; a few seconds)."""
    return _launch(tmp_path_factory.mktemp("review_tact"), *TACT)


@pytest.fixture(scope="session")
def echochain_run(tmp_path_factory) -> Path:
    """A small EchoChain run (2 conversations, the offline classifier and grader; a few seconds)."""
    return _launch(tmp_path_factory.mktemp("review_echochain"), *ECHOCHAIN)


@pytest.fixture(scope="module")
def chromium():
    """One headless Chromium (Debian's, driven by Playwright) for every browser test of a module:
    each test opens its own context (fresh storage). Skipped, saying why, without either."""
    sync_api = pytest.importorskip(
        "playwright.sync_api", reason="playwright is not installed (pip install playwright)"
    )
    if not Path(CHROMIUM).is_file():
        pytest.skip(f"no Chromium at {CHROMIUM} (apt-get install -y chromium)")
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(
            executable_path=CHROMIUM,
            headless=True,
            args=["--autoplay-policy=no-user-gesture-required", "--no-sandbox"],
        )
        yield browser
        browser.close()


@pytest.fixture(scope="session")
def instructfd_run(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("review_runs")
    proc = run_launch([f"out_root={root}", "progress=false"], root, timeout_s=900)
    assert proc.returncode == 0, proc.stderr[-2000:]
    runs = sorted((root / "instructfd").glob("*/*/run.json"))
    assert len(runs) == 1, runs
    return runs[0].parent
