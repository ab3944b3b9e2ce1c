"""Shared fixtures: small real test cases synthesized with espeak-ng (no fakes), and the
session-scoped environments several test folders use (the moshi venv, tiny random checkpoints).

Those are registered here, once: a fixture imported into a test module becomes that module's own
copy, and pytest built a session-scoped one again for every module that imported it.
"""

from __future__ import annotations

import importlib.metadata
import os
import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
from helpers import launching
from helpers.moshi_fixtures import moshi_python, tiny_moshi  # noqa: F401  (fixtures)
from helpers.personaplex_fixtures import personaplex_python, tiny_personaplex, tiny_personaplex_pt  # noqa: F401

from fdeval.types import TestCase, Turn


@pytest.fixture(scope="session", autouse=True)
def _shared_data(tmp_path_factory):
    """Where helpers.launching keeps the built-in set it generates once (only when a test asks)."""
    launching.configure(tmp_path_factory.getbasetemp() / "shared-data")


@pytest.fixture(scope="session")
def two_case_run(tmp_path_factory) -> tuple[Path, Path]:
    """(folder, run folder) of one finished default launch of two built-in cases (test_trust's TWO),
    made once; modules that change a run take their own copy (`copy_run`)."""
    tmp = tmp_path_factory.mktemp("two-case-run")
    out = launching.seed_data(tmp / "outputs")
    proc = launching.run_launch([f"out_root={out}", "progress=false", launching.TWO_CASES], cwd=tmp)
    assert proc.returncode == 0, (
        f"exit {proc.returncode}\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    )
    (run,) = (p for p in (out / "instructfd" / "reference").iterdir() if (p / "sessions").is_dir())
    return tmp, run


@pytest.fixture(scope="session")
def local_slurm() -> None:
    """The local Slurm of slurm/start.sh, answering; else a skip that says how to start it."""
    if not os.environ.get("SLURM_CONF") or shutil.which("sinfo") is None:
        pytest.skip(
            "no local Slurm: run `bash slurm/install.sh && bash slurm/start.sh` and export SLURM_CONF"
        )
    out = subprocess.run(["sinfo", "-h", "-N", "-o", "%T"], capture_output=True, text=True)
    if out.returncode != 0 or not any(s in out.stdout for s in ("idle", "mix", "alloc")):
        pytest.skip(f"local Slurm not answering: {out.stderr.strip() or out.stdout.strip()}")


@pytest.fixture(scope="session")
def tts():
    from fdeval.audio.tts import EspeakTTS

    return EspeakTTS()


@pytest.fixture(scope="session")
def vad():
    from fdeval.audio.vad import SileroVAD

    return SileroVAD()


@pytest.fixture(scope="session")
def agent():
    from fdeval.models.reference import ReferenceAgent

    return ReferenceAgent()


def make_turn(case_id, index, syn, kind="take-turn", timeout_s=20.0, **kw) -> Turn:
    return Turn(
        case_id,
        index,
        f"turn{index}",
        kind,
        f"{case_id}/turn{index}.wav",
        syn.text,
        syn.words,
        syn.duration_s,
        timeout_s,
        **kw,
    )


@pytest.fixture(scope="session")
def responsive_case(tts) -> tuple[TestCase, list[np.ndarray]]:
    """Question, model answer, user interrupt barge-in 1.5 s into the answer, closing question."""
    q = tts.synthesize("Can you tell me how to start running when I have never done it before?")
    bi = tts.synthesize("wait, I only have twenty minutes a day")
    q2 = tts.synthesize("Okay, thanks.")
    cid = "engine_responsive"
    turns = (
        make_turn(cid, 0, q),
        make_turn(
            cid,
            1,
            bi,
            "barge-in",
            barge_in_after_s=1.5,
            barge_in_handling="yield",
            subtype="interrupt",
        ),
        make_turn(cid, 2, q2),
    )
    case = TestCase(cid, cid, "instructfd", "Add Constraint", None, turns)
    return case, [q.samples, bi.samples, q2.samples]


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    """For `pytest -n 3 --dist loadgroup` (scripts/test.sh): every module is one unit of work, so
    its module-scoped runs are made once, on one worker; the tests of the one local Slurm
    (`slurm` mark) are one unit, run one after another; and modules with slow tests are handed
    out first, so the workers finish close together. The order within a module is kept."""
    slow = {item.path for item in items if item.get_closest_marker("slow")}
    first_seen = {}
    for i, item in enumerate(items):
        first_seen.setdefault(item.path, i)
    items.sort(key=lambda item: (item.path not in slow, first_seen[item.path]))
    for item in items:
        group = (
            "slurm"
            if item.get_closest_marker("slurm")
            else item.path.relative_to(config.rootpath).as_posix()
        )
        item.add_marker(pytest.mark.xdist_group(group))


def pytest_configure(config):
    """Under --dist loadgroup, refuse a pytest that drops the groups above: xdist marks a grouped
    test by a suffix on its node id, which pytest 9.2 no longer lets it write
    (pytest-dev/pytest-xdist#1386, open in xdist 3.8.0). Nothing would fail: each worker would get
    tests of every module and make each module's shared runs again (it cost CI minutes before it
    was seen). pyproject.toml's test extra pins a pytest that keeps them."""
    if getattr(config.option, "dist", "no") != "loadgroup" or hasattr(config, "workerinput"):
        return
    pytest_version = tuple(int(x) for x in re.findall(r"\d+", pytest.__version__)[:2])
    xdist_version = tuple(
        int(x) for x in re.findall(r"\d+", importlib.metadata.version("pytest-xdist"))[:3]
    )
    if pytest_version >= (9, 2) and xdist_version <= (3, 8, 0):
        raise pytest.UsageError(
            f"pytest {pytest.__version__} with pytest-xdist {importlib.metadata.version('pytest-xdist')} "
            "drops --dist loadgroup's groups (every module's shared runs would be made once per "
            "worker); install the pytest the test extra pins: pip install -e '.[test]'"
        )


# Wall seconds per test file (setup, call and teardown summed), printed at the end of every run so
# CI's log always says where the suite's time goes. On the xdist controller the workers' reports
# arrive here too, each with its own duration.
_file_wall_s: dict[str, float] = {}
_file_tests: dict[str, int] = {}


def pytest_runtest_logreport(report):
    path = report.nodeid.split("::", 1)[0]
    _file_wall_s[path] = _file_wall_s.get(path, 0.0) + report.duration
    if report.when == "call":
        _file_tests[path] = _file_tests.get(path, 0) + 1


def pytest_terminal_summary(terminalreporter):
    if not _file_wall_s or hasattr(terminalreporter.config, "workerinput"):
        return
    top = sorted(_file_wall_s.items(), key=lambda kv: -kv[1])[:15]
    terminalreporter.write_sep(
        "-", f"slowest {len(top)} test files (wall s, setup+call+teardown summed)"
    )
    for path, s in top:
        terminalreporter.write_line(f"{s:8.1f}  {_file_tests.get(path, 0):4d} tests  {path}")
