"""An LLM server that a Slurm task starts beside its steps (``launcher.llm_server``).

A lab that runs the judge or EchoChain's roles on its own open model (``backend: vllm`` or
``sglang``) can have each task of the arrays it names start that server on its node, on
127.0.0.1, before the task's steps, and stop it after them: the roles then reach it at the
loopback ``base_url`` they already use, and the server lives exactly as long as the allocation
that needs it. The port is fixed (the roles' ``base_url`` is part of their cache key and step
identity, so it must not change from task to task); a port already taken on the node is refused
in one line, never shared.

The server gets the environment a model server gets (``models.servers.server_environment``):
no secret unless named in ``pass_env`` (a gated model's HF_TOKEN) or set in ``env``. Its output
goes to a log file; a server that exits, or is not ready within ``startup_timeout_s``, fails the
task with the log's last lines.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from fdeval.errors import ConfigError, FdevalError
from fdeval.models.servers import ENV_NAME, die_with_parent, port_taken, server_environment, tail

WHERE = "launcher.llm_server"
# The arrays a server can be started in (fdeval.engine.launcher.PHASE_NAMES' values).
ARRAYS = ("run", "post", "score")
POLL_S = 0.5


class LLMServerError(FdevalError):
    """The task's LLM server could not be started (its log's last lines in the message)."""


@dataclass(frozen=True)
class LLMServerSpec:
    """``launcher.llm_server`` (conf/launcher/slurm.yaml documents every key)."""

    command: tuple[str, ...]
    port: int = 8000
    arrays: tuple[str, ...] = ("run", "post")
    ready_path: str = "/v1/models"
    startup_timeout_s: float = 1800.0
    stop_timeout_s: float = 30.0
    env: Mapping[str, str] = field(default_factory=dict)
    pass_env: tuple[str, ...] = ()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @staticmethod
    def from_config(node: Mapping[str, Any] | None) -> "LLMServerSpec | None":
        """The spec of a config node (None: no server); a bad key or value is a ConfigError."""
        if node is None:
            return None
        if not isinstance(node, Mapping):
            raise ConfigError(f"{WHERE}: a mapping with at least `command`, or null; got {node!r}")
        valid = [f.name for f in fields(LLMServerSpec)]
        bad = sorted(set(node) - set(valid))
        if bad:
            raise ConfigError(f"{WHERE}.{bad[0]}: unknown key; valid: {valid}")
        d = dict(node)
        cmd = d.get("command")
        if (
            isinstance(cmd, str)
            or not cmd
            or not all(isinstance(c, (str, int, float)) for c in cmd)
        ):
            raise ConfigError(
                f"{WHERE}.command: a list of arguments, e.g. [vllm, serve, <model>, --port, '8000']"
            )
        d["command"] = tuple(str(c) for c in cmd)
        port = d.get("port", 8000)
        if not isinstance(port, int) or isinstance(port, bool) or not 1 <= port <= 65535:
            raise ConfigError(f"{WHERE}.port: a port number, got {port!r}")
        arrays = d.get("arrays", ("run", "post"))
        if isinstance(arrays, str) or not arrays or any(a not in ARRAYS for a in arrays):
            raise ConfigError(
                f"{WHERE}.arrays: a non-empty list of {', '.join(ARRAYS)}; got {arrays!r}"
            )
        d["arrays"] = tuple(arrays)
        path = d.get("ready_path", "/v1/models")
        if not isinstance(path, str) or not path.startswith("/"):
            raise ConfigError(f"{WHERE}.ready_path: a path starting with '/', got {path!r}")
        for key in ("startup_timeout_s", "stop_timeout_s"):
            value = d.get(key, 1.0)
            if not isinstance(value, (int, float)) or isinstance(value, bool) or value <= 0:
                raise ConfigError(f"{WHERE}.{key}: a positive number of seconds, got {value!r}")
        d["env"] = {str(k): str(v) for k, v in (d.get("env") or {}).items()}
        names = d.get("pass_env") or ()
        if isinstance(names, str) or not all(
            isinstance(n, str) and ENV_NAME.fullmatch(n) for n in names
        ):
            raise ConfigError(
                f"{WHERE}.pass_env: a list of environment variable names, got {names!r}"
            )
        d["pass_env"] = tuple(names)
        return LLMServerSpec(**d)


def _ready(url: str) -> bool:
    # no proxy: the server is on this node's loopback
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    try:
        with opener.open(url, timeout=5) as r:
            return 200 <= r.status < 300
    except (urllib.error.URLError, OSError, ValueError):
        return False


def _stop(proc: subprocess.Popen, timeout_s: float) -> None:
    """SIGTERM to the server's process group (vLLM forks workers), SIGKILL after `timeout_s`."""
    for sig, wait_s in ((signal.SIGTERM, timeout_s), (signal.SIGKILL, 10.0)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            pass
        try:
            proc.wait(timeout=wait_s)
            break
        except subprocess.TimeoutExpired:
            continue
    try:  # workers left in the group after the leader exited
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


@contextmanager
def serving(
    spec: LLMServerSpec, log_path: Path, environ: Mapping[str, str] | None = None
) -> Iterator[str]:
    """Start the server, wait until ``ready_path`` answers, yield its URL; stop it on exit."""
    if port_taken("127.0.0.1", spec.port):
        raise LLMServerError(
            f"{WHERE}.port: 127.0.0.1:{spec.port} is already in use on this node (another task's "
            f"server?); give each such task a node of its own (launcher.sbatch_extra: "
            f"{{exclusive: true}}) or another port"
        )
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with open(log_path, "ab") as log_file:
        log_file.write(
            f"--- {time.strftime('%Y-%m-%d %H:%M:%S')} {' '.join(spec.command)}\n".encode()
        )
        log_file.flush()
        linux_main = (
            sys.platform.startswith("linux")
            and threading.current_thread() is threading.main_thread()
        )
        try:
            proc = subprocess.Popen(
                list(spec.command),
                stdin=subprocess.DEVNULL,
                stdout=log_file,
                stderr=subprocess.STDOUT,
                env=server_environment(spec, environ),
                start_new_session=True,
                preexec_fn=die_with_parent if linux_main else None,
            )
        except OSError as e:
            raise LLMServerError(
                f"{WHERE}.command: cannot start {spec.command[0]!r}: {e.strerror or e}"
            ) from None
    try:
        deadline = time.monotonic() + spec.startup_timeout_s
        while not _ready(spec.url + spec.ready_path):
            code = proc.poll()
            if code is not None:
                raise LLMServerError(
                    f"{WHERE}: the server exited with code {code} before it was ready; "
                    f"{log_path}: {' '.join(tail(log_path, 600).split())}"
                )
            if time.monotonic() > deadline:
                raise LLMServerError(
                    f"{WHERE}: {spec.url}{spec.ready_path} did not answer within "
                    f"startup_timeout_s={spec.startup_timeout_s:g}; {log_path}: "
                    f"{' '.join(tail(log_path, 600).split())}"
                )
            time.sleep(POLL_S)
        yield spec.url
    finally:
        _stop(proc, spec.stop_timeout_s)
