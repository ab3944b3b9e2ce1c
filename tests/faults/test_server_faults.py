"""The model server killed in the middle of a case, with no retry left: the case is an error record
(the server's fault, never the model's result), the launch stops with one line, and the relaunch
of the same command records the case; nothing the first launch finished changes.

Real moshi.server on the tiny random checkpoint (CPU), as in tests/models/test_moshi_server.py,
whose helpers this reuses; that file has the kill with a restart left (the case completes in the
same launch). The case is a short one (conftest's `short_cases`), the relaunch records it in ~10 s.
Skipped, with the reason, where the moshi venv cannot be built.
"""

from __future__ import annotations

import json

import h5py
import pytest

from fdeval.engine.run import step_dir

from .conftest import digests, sibling_module

pytestmark = [pytest.mark.server, pytest.mark.slow]

server_tests = sibling_module("models/test_moshi_server.py")
CASE = "conv1__backchannel"  # of conftest's short cases: ~10 s of session


def test_a_server_killed_mid_case_without_retries_is_an_error_record_and_the_relaunch_records_it(
    moshi_python, tiny_moshi, short_cases, tmp_path
):
    args = [
        *server_tests.model_args(moshi_python, tiny_moshi),
        "model.case_retries=0",
        f"benchmark.cases_dir={short_cases}",
    ]
    killed = {}
    first = server_tests.launch(
        tmp_path, args, cases=[CASE], on_start=server_tests.kill_when_streaming(tmp_path, killed)
    )
    assert killed.get("pid"), "the server was killed"
    assert first.returncode == 2 and "Traceback" not in first.stdout, first.stdout[-4000:]
    last = first.stdout.strip().splitlines()[
        -1
    ]  # stdout and stderr together: the error is the last line
    assert last == (
        f"fdeval: error: run: 1 case(s) failed (e.g. {CASE}; reasons in sessions/*.error.json); "
        "relaunch the same command to retry them"
    )
    assert first.stdout.count("fdeval: error:") == 1
    (d,) = {p.parent.parent for p in (tmp_path / "outputs").rglob("sessions/*.error.json")}
    record = json.loads((d / "sessions" / f"{CASE}.error.json").read_text())
    # the server's death, recorded as such: an infrastructure error, not a result of the model
    assert record["case_id"] == CASE and record["stage"] == "run", record
    assert record["error"].startswith(
        "ServerDied: moshi server moshi-0 exited with code -9; session lost"
    ), record
    assert not (d / "sessions" / f"{CASE}.h5").exists() and not list(
        step_dir(d, "judge").glob("*.json")
    )
    before = digests(tmp_path / "outputs")

    again = server_tests.launch(tmp_path, args, cases=[CASE])
    assert again.returncode == 0, again.stdout[-4000:]
    after = digests(tmp_path / "outputs")
    gone = f"{d.relative_to(tmp_path / 'outputs')}/sessions/{CASE}.error.json"
    assert {k: after.get(k) for k in before if k != gone} == {
        k: v for k, v in before.items() if k != gone
    }
    assert gone not in after
    with h5py.File(d / "sessions" / f"{CASE}.h5") as f:
        assert f.attrs["case_id"] == CASE
    assert (
        len(list(step_dir(d, "judge").glob(f"{CASE}@*.json"))) == 1
        and (step_dir(d, "score") / "ias.csv").is_file()
    )
