"""The model contract (tests/models/contract_checks.py), for every adapter in fdeval/conf/model/.

Each adapter runs against its stand-in, `tests/models/standins/<name>.py` for
`fdeval/conf/model/<name>.yaml` (found by that name, listed nowhere: local servers that speak its
API with a scripted model, not the real models; the reference agent itself; the real
`moshi.server` and the in-process batched Moshi on a tiny random checkpoint where the moshi venv
can be built, else skipped with the reason). A config without a stand-in fails here, with what
to add. Checked: the same audio sent in 1 and in 37 pieces gives the same events and the
stand-in hears the same; a text piece comes before its audio; closing a session twice is safe
(and never hands back a server another session holds); a session cancelled mid-stream leaves no
task behind and hands its server back, and the next one works; `model.close()` twice is safe and
stops the servers.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
from pathlib import Path

import numpy as np
import pytest
from contract_checks import (
    check_cancel,
    check_chunking,
    check_close_twice,
    check_text_before_audio,
    sessions_in_1_and_37,
)
from standins import ADAPTERS, discover, missing_message
from standins._common import MODELS, user_audio

from fdeval.models.base import DuplexModel

STAND_INS, MISSING = discover(ADAPTERS)  # name: its stand-in module
IN_PROCESS = {
    n: m.CHECKPOINT for n, m in STAND_INS.items() if hasattr(m, "CHECKPOINT")
}  # name: its checkpoint
EXTRA = {k: v for m in STAND_INS.values() for k, v in getattr(m, "EXTRA", {}).items()}
PARAMS = [
    pytest.param(n, marks=[pytest.mark.slow, pytest.mark.server]) if n in IN_PROCESS else n
    for n in ADAPTERS
] + [pytest.param(n, marks=[pytest.mark.slow, pytest.mark.server]) for n in EXTRA]


@pytest.fixture(scope="module")
def monkeypatch_module():
    with pytest.MonkeyPatch.context() as mp:
        yield mp


class Lockstep:
    """The checks' results from the moshi venv (contract_runner.py), run once."""

    def __init__(self, request, name: str, tts, tmp: Path):
        py, tiny = (
            request.getfixturevalue("moshi_python"),
            request.getfixturevalue(IN_PROCESS[name]),
        )
        np.save(tmp / "audio.npy", user_audio(tts, 24000))
        out = tmp / "lockstep.json"
        proc = subprocess.run(
            [
                str(py),
                str(MODELS / "contract_runner.py"),
                name,
                json.dumps(tiny),
                str(tmp / "audio.npy"),
                str(out),
            ],
            cwd=MODELS,
            capture_output=True,
            text=True,
            timeout=900,
        )
        assert proc.returncode == 0, proc.stderr[-4000:]
        self.results = json.loads(out.read_text())

    def result(self, check: str) -> dict:
        r = self.results[check]
        assert r["ok"], r["error"]
        return r["measured"]


@pytest.fixture(scope="module", params=PARAMS)
def standin(request, tts, tmp_path_factory):
    name = request.param
    tmp = tmp_path_factory.mktemp(name.replace(":", "-"))
    if name not in STAND_INS and name not in EXTRA:
        pytest.fail(missing_message(name))
    if name in IN_PROCESS:
        yield name, Lockstep(request, name, tts, tmp)
        return
    with (STAND_INS[name].standin if name in STAND_INS else EXTRA[name])(
        tts, tmp, request
    ) as target:
        try:
            yield name, target
        finally:
            closed_twice(target.model)


def closed_twice(model: DuplexModel) -> None:
    procs = (
        [inst.proc for inst in model.pool.instances]
        if getattr(model, "pool", None) is not None
        else []
    )
    model.close()
    model.close()
    assert all(p is None or p.wait(timeout=10) is not None for p in procs), (
        "close() left a server running"
    )


def runs(target) -> dict:
    """The 1- and 37-piece sessions, run once for two checks."""
    if target.runs is None:
        target.runs = asyncio.run(sessions_in_1_and_37(target))
    return target.runs


def test_every_config_has_a_stand_in():
    assert not MISSING, "; ".join(missing_message(n) for n in MISSING)
    bad = [n for n, m in STAND_INS.items() if not hasattr(m, "standin") and not hasattr(m, "build")]
    assert not bad, (
        f"tests/models/standins/{bad[0]}.py defines neither standin(tts, tmp, request) nor CHECKPOINT and build"
    )


def test_a_config_without_a_stand_in_module_is_named_with_what_to_add():
    found, missing = discover([*ADAPTERS, "no_such_model"])
    assert sorted(found) == ADAPTERS and missing == ["no_such_model"]
    assert (
        "add tests/models/standins/no_such_model.py defining standin(tts, tmp, request)"
        in missing_message("no_such_model")
    )


def test_same_events_for_1_and_37_pieces(standin):
    name, t = standin
    measured = t.result("chunking") if isinstance(t, Lockstep) else check_chunking(t, runs(t))
    print(f"{name}: {measured}")


def test_text_comes_before_its_audio(standin):
    name, t = standin
    if isinstance(t, Lockstep):
        measured = t.result("text_before_audio")
    else:
        if t.text_check:
            pytest.skip(t.text_check)
        measured = check_text_before_audio(t, runs(t))
    print(f"{name}: {measured}")


def test_closing_twice_is_safe(standin):
    name, t = standin
    if isinstance(t, Lockstep):
        measured = t.result("close_twice")
        assert t.result("model_close_twice") is True
    else:
        measured = asyncio.run(check_close_twice(t))
    print(f"{name}: {measured}")


def test_cancelling_mid_stream_is_clean(standin):
    name, t = standin
    measured = t.result("cancel") if isinstance(t, Lockstep) else asyncio.run(check_cancel(t))
    print(f"{name}: {measured}")
