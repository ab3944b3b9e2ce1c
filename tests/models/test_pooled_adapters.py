"""The open-model adapters start their servers through a ServerPool (`port: null` + `server:`).

The server here is the local MiniCPM-o stand-in (tests/models/fake_servers_minicpmo.py, not the
real model), run as a real process by tests/models/standin_server.py.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

pytest.importorskip("aiohttp")

from helpers import health
from fake_servers_common import model_from_yaml, question_and_barge_in

from fdeval.errors import ConfigError
from fdeval.models.minicpmo import MiniCPMO
from fdeval.orchestrator.clock import RealtimeClock
from fdeval.orchestrator.session import OrchestratorConfig, run_session
from fdeval.orchestrator.turns import TurnConfig

STANDIN = str(Path(__file__).with_name("standin_server.py"))


def test_minicpmo_starts_its_worker_through_the_pool(tts, vad, tmp_path):
    server = {
        "command": ["{python}", STANDIN, "minicpmo", "--host", "{host}", "--port", "{port}"],
        "instances_per_gpu": 1,
        "startup_timeout_s": 60,
    }
    model = MiniCPMO(
        host="127.0.0.1", port=None, server=server, base_prompt="You are a helpful assistant."
    )
    assert model.pool is not None and model.concurrency == model.pool.size
    model.pool._gpus = [None]  # one CPU instance, whatever GPUs this machine has
    model.set_run_dir(tmp_path)
    case, audio = question_and_barge_in(tts, "pooled_minicpmo")
    # health bounds no loaded machine reaches: a session behind real time is stopped early
    cfg = OrchestratorConfig(
        turns=TurnConfig(silence_s=0.8, trailing_silence_s=0.3, max_session_s=10.0),
        health=health.LENIENT,
    )
    try:
        res = asyncio.run(
            run_session(case, audio, model, cfg, RealtimeClock(), vad, instruction=None)
        )
        [inst] = model.pool.instances
        proc = inst.proc
        assert proc is not None and proc.poll() is None  # the pool started it, still running
        assert not inst.busy  # released at the end of the session
        assert (tmp_path / "servers" / f"{inst.name}.log").exists()
        assert float(abs(res.model).max()) > 0.01, (
            "no model audio"
        )  # the session got the worker's speech
    finally:
        model.close()
    assert proc.wait(timeout=10) is not None  # close() stopped the server process


def test_freezeomni_and_funaudiochat_pool_when_port_is_null(tmp_path):
    for name in ("freezeomni", "funaudiochat"):
        m = model_from_yaml(name)  # conf/model: port null + server:
        assert m.pool is not None and m.pool.probe == m.probe and m.case_retries == 2
        m.set_run_dir(tmp_path)
        assert m.pool.log_dir == tmp_path / "servers"
        m.close()
        fixed = model_from_yaml(name, port=1234)  # a running server: no pool
        assert fixed.pool is None and fixed.concurrency == 1
    with pytest.raises(ConfigError, match="model.server"):
        MiniCPMO(port=None)
