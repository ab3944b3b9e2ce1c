"""`launcher.llm_server` without Slurm: the spec's checks, and `serving` against a real server
process (the OpenAI-compatible stand-in run as its own process, as `vllm serve` would be), a
server that dies, one that never answers, and a port already taken. The Slurm path is in
tests/cluster/test_slurm.py."""

from __future__ import annotations

import json
import os
import socket
import sys
import urllib.request
from pathlib import Path

import pytest

from fdeval.errors import ConfigError
from fdeval.llm.server import LLMServerError, LLMServerSpec, serving
from fdeval.models.servers import free_port, port_taken

TESTS = str(Path(__file__).resolve().parents[1])


def standin(port: int, record: Path, *extra: str) -> list[str]:
    return [
        sys.executable,
        "-m",
        "helpers.fake_openai_server",
        "--port",
        str(port),
        "--answer",
        "hello",
        "--record",
        str(record),
        *extra,
    ]


@pytest.fixture
def environ():
    """The environment the server is started from: tests/ importable, one secret, one plain variable."""
    path = os.pathsep.join(filter(None, [TESTS, os.environ.get("PYTHONPATH")]))
    return {
        **os.environ,
        "PYTHONPATH": path,
        "LAB_API_KEY": "secret-value",
        "LC_FDEVAL_PLAIN": "plain",
    }


@pytest.mark.parametrize(
    "node, message",
    [
        (
            {"command": ["x"], "prot": 1},
            "launcher.llm_server.prot: unknown key; valid: ['command', 'port', ",
        ),
        ({"command": "vllm serve m"}, "launcher.llm_server.command: a list of arguments"),
        (
            {"command": ["x"], "arrays": ["gpu"]},
            "launcher.llm_server.arrays: a non-empty list of run, post, score",
        ),
        ({"command": ["x"], "port": 0}, "launcher.llm_server.port: a port number"),
        (
            {"command": ["x"], "ready_path": "v1/models"},
            "launcher.llm_server.ready_path: a path starting with '/'",
        ),
        (
            {"command": ["x"], "startup_timeout_s": 0},
            "launcher.llm_server.startup_timeout_s: a positive number",
        ),
        (
            {"command": ["x"], "pass_env": "HF_TOKEN"},
            "launcher.llm_server.pass_env: a list of environment variable",
        ),
        ("vllm", "launcher.llm_server: a mapping with at least `command`, or null"),
    ],
)
def test_a_bad_spec_is_one_line_naming_the_key(node, message):
    with pytest.raises(ConfigError) as e:
        LLMServerSpec.from_config(node)
    assert str(e.value).startswith(message) and "\n" not in str(e.value)


def test_spec_defaults():
    spec = LLMServerSpec.from_config({"command": ["vllm", "serve", "m", "--port", 8000]})
    assert spec.command == ("vllm", "serve", "m", "--port", "8000") and spec.arrays == (
        "run",
        "post",
    )
    assert (spec.port, spec.ready_path, spec.url) == (8000, "/v1/models", "http://127.0.0.1:8000")
    assert LLMServerSpec.from_config(None) is None


def test_serving_starts_waits_and_stops_a_real_server(tmp_path, environ):
    port, record, log = free_port(), tmp_path / "requests.jsonl", tmp_path / "server.log"
    # it listens only after 1 s: `serving` must wait for it, not take the first poll's refusal
    spec = LLMServerSpec(command=tuple(standin(port, record, "--startup-delay-s", "1")), port=port)
    with serving(spec, log, environ) as url:
        body = json.dumps({"model": "m", "messages": [{"role": "user", "content": "hi"}]}).encode()
        req = urllib.request.Request(
            f"{url}/v1/chat/completions", body, {"content-type": "application/json"}
        )
        with urllib.request.build_opener(urllib.request.ProxyHandler({})).open(
            req, timeout=10
        ) as r:
            assert json.loads(r.read())["choices"][0]["message"]["content"] == "hello"
    assert not port_taken("127.0.0.1", port)  # stopped
    text = log.read_text()
    assert "stand-in: ready" in text and "stopped on SIGTERM" in text  # a clean SIGTERM, not a kill
    paths = [json.loads(line)["path"] for line in record.read_text().splitlines()]
    assert paths[0] == "/v1/models" and paths[-1] == "/v1/chat/completions"


def test_the_server_gets_no_secret_unless_passed(tmp_path, environ):
    show = [
        sys.executable,
        "-c",
        "import os; print('ENV', os.environ.get('LAB_API_KEY'), os.environ.get('LC_FDEVAL_PLAIN'))",
    ]
    for pass_env, seen in (((), "ENV None plain"), (("LAB_API_KEY",), "ENV secret-value plain")):
        log = tmp_path / f"{len(pass_env)}.log"
        with pytest.raises(LLMServerError, match="exited with code 0 before it was ready"):
            with serving(
                LLMServerSpec(command=tuple(show), port=free_port(), pass_env=pass_env),
                log,
                environ,
            ):
                pass
        assert seen in log.read_text()


def test_a_server_that_dies_fails_with_its_log(tmp_path, environ):
    die = [sys.executable, "-c", "import sys; print('CUDA out of memory'); sys.exit(3)"]
    with pytest.raises(LLMServerError) as e:
        with serving(
            LLMServerSpec(command=tuple(die), port=free_port()), tmp_path / "s.log", environ
        ):
            raise AssertionError("never ready")
    assert "exited with code 3 before it was ready" in str(e.value) and "CUDA out of memory" in str(
        e.value
    )


def test_a_server_never_ready_is_stopped_after_the_timeout(tmp_path, environ):
    pidfile = tmp_path / "pid"
    hang = [
        sys.executable,
        "-c",
        f"import os, time; open({str(pidfile)!r}, 'w').write(str(os.getpid())); time.sleep(600)",
    ]
    spec = LLMServerSpec(
        command=tuple(hang), port=free_port(), startup_timeout_s=2, stop_timeout_s=5
    )
    with pytest.raises(LLMServerError, match="did not answer within startup_timeout_s=2"):
        with serving(spec, tmp_path / "s.log", environ):
            pass
    pid = int(pidfile.read_text())
    with pytest.raises(ProcessLookupError):  # stopped, and reaped
        os.kill(pid, 0)


def test_a_port_in_use_is_refused_before_anything_starts(tmp_path, environ):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        marker = tmp_path / "started"
        spec = LLMServerSpec(
            command=(sys.executable, "-c", f"open({str(marker)!r}, 'w')"), port=port
        )
        with pytest.raises(
            LLMServerError, match=rf"launcher.llm_server.port: 127.0.0.1:{port} is already in use"
        ):
            with serving(spec, tmp_path / "s.log", environ):
                pass
    assert not marker.exists()


def test_a_missing_command_is_one_line(tmp_path, environ):
    spec = LLMServerSpec(command=("no-such-server-binary", "serve"), port=free_port())
    with pytest.raises(
        LLMServerError, match="launcher.llm_server.command: cannot start 'no-such-server-binary'"
    ):
        with serving(spec, tmp_path / "s.log", environ):
            pass
