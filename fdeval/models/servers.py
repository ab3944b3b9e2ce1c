"""Model servers inside the job: start, health-check, restart and stop them.

A network adapter (Moshi, PersonaPlex, ...) describes its server with a `server:` block in its
model config and hands it to a `ServerPool`:

    server:
      python: /path/to/model-venv/bin/python     # the model's own interpreter
      command: ["{python}", "-m", "moshi.server", "--host", "{host}", "--port", "{port}"]
      env: {}                                    # extra environment for the server
      pass_env: []                               # variables to pass on that the filter below drops
      instances_per_gpu: 1
      startup_timeout_s: 600
      log_dir: null                              # default: <run folder>/servers

The pool starts `instances_per_gpu` servers per visible GPU (CUDA_VISIBLE_DEVICES parsed, one
device per instance via its own CUDA_VISIBLE_DEVICES; without GPUs, `instances_per_gpu` servers on
the CPU), each on 127.0.0.1 with a free port, in its own process group, with its output appended to
`<log_dir>/<name>-<i>.log` (`<name>-t<task>-<i>.log` in a Slurm array task). Each instance is
started once: sessions that ask for servers while a start is in progress wait for it. An instance is healthy
once the adapter's `probe(host, port)` (a real protocol handshake) succeeds; a start that fails or
times out is retried on a new port (bounded). A session takes a free instance (`acquire`); a server
found dead is restarted (bounded, the restart is written into its log), and a session that loses
its server raises `ServerDied` (a `ModelUnavailable`), whose message carries the tail of the server
log: the run retries such a case `model.case_retries` times and otherwise records it as an
infrastructure error. The session side (taking an instance, giving it back, turning a lost
connection into `ServerDied`) is `fdeval.models.network.NetworkSession`.

A server gets a minimal environment (:func:`server_environment`): the variables a model server
needs (paths, locale, temp folder, CUDA/NVIDIA, Hugging Face and Torch caches, thread counts,
proxies and certificates, Slurm), never API keys, tokens, secrets or cloud credentials unless the
model config names them in `server.pass_env` (or sets them in `server.env`).

Everything is stopped by `stop()` (the adapter's `close()`), at interpreter exit, on SIGTERM and
SIGUSR2 (what submitit sends on preemption; the previous handlers run afterwards), and, on Linux,
when this process dies (the servers get SIGKILL through PR_SET_PDEATHSIG).
"""

from __future__ import annotations

import asyncio
import atexit
import ctypes
import logging
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import weakref
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Awaitable, Callable, Mapping

from fdeval.secrets import is_secret_name
from fdeval.models.base import ModelUnavailable

log = logging.getLogger("fdeval")

Probe = Callable[[str, int], Awaitable[None]]


class ServerError(RuntimeError):
    """A model server failed; the message ends with the tail of its log (not retried: the pool
    already tried to start it `start_attempts` times, or restart it `max_restarts` times)."""


class ServerDied(ServerError, ModelUnavailable):
    """The server of a running session died or dropped it; the pool restarts it, the case is retried."""


@dataclass(frozen=True)
class ServerSpec:
    """The `server:` block of a model config."""

    command: tuple[str, ...]
    python: str = sys.executable
    env: Mapping[str, str] = field(default_factory=dict)
    pass_env: tuple[
        str, ...
    ] = ()  # names from the environment to pass although the filter drops them
    instances_per_gpu: int = 1
    startup_timeout_s: float = 600.0
    log_dir: str | None = None
    host: str = "127.0.0.1"
    start_attempts: int = 3  # per start or restart of one instance
    max_restarts: int = 3  # per instance over the pool's life
    probe_timeout_s: float = 30.0

    @staticmethod
    def from_config(node: Mapping[str, Any] | None) -> "ServerSpec | None":
        if node is None:
            return None
        d = dict(node)
        if not d.get("command"):
            raise ValueError("server.command: a list of arguments is required")
        d["command"] = tuple(str(x) for x in d["command"])
        d["env"] = {str(k): str(v) for k, v in (d.get("env") or {}).items()}
        names = d.get("pass_env") or ()
        if isinstance(names, str) or not all(
            isinstance(n, str) and ENV_NAME.fullmatch(n) for n in names
        ):
            raise ValueError(
                f"server.pass_env: a list of environment variable names, got {names!r}"
            )
        d["pass_env"] = tuple(names)
        if d.get("python") in (None, ""):
            d["python"] = sys.executable
        known = set(ServerSpec.__dataclass_fields__)
        bad = sorted(set(d) - known)
        if bad:
            raise ValueError(f"server: unknown key(s) {bad}; valid: {sorted(known)}")
        spec = ServerSpec(**d)
        if spec.instances_per_gpu < 1:
            raise ValueError(
                f"server.instances_per_gpu: must be >= 1, got {spec.instances_per_gpu}"
            )
        return spec


ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# What a model server may need from the job's environment (names, then prefixes).
SERVERENV_NAMES = frozenset(
    {
        "PATH",
        "HOME",
        "USER",
        "LOGNAME",
        "SHELL",
        "LANG",
        "LANGUAGE",
        "TZ",
        "TMPDIR",
        "TMP",
        "TEMP",
        "LD_LIBRARY_PATH",
        "XDG_CACHE_HOME",
        "XDG_RUNTIME_DIR",
        "TOKENIZERS_PARALLELISM",
        "http_proxy",
        "https_proxy",
        "no_proxy",
        "HTTP_PROXY",
        "HTTPS_PROXY",
        "NO_PROXY",
        "SSL_CERT_FILE",
        "SSL_CERT_DIR",
        "REQUESTS_CA_BUNDLE",
        "CURL_CA_BUNDLE",
    }
)
SERVER_ENV_PREFIXES = (
    "LC_",
    "CUDA_",
    "NVIDIA_",
    "HF_",
    "HUGGINGFACE_",
    "TRANSFORMERS_",
    "TORCH_",
    "PYTORCH_",
    "TRITON_",
    "PYTHON",
    "OMP_",
    "MKL_",
    "OPENBLAS_",
    "NUMEXPR_",
    "NCCL_",
    "SLURM_",
)
# A secret (fdeval.secrets.is_secret_name) is never passed unless named in pass_env / set in env,
# even under an allowed prefix (HF_TOKEN).


def server_environment(
    spec: "ServerSpec",
    environ: Mapping[str, str] | None = None,
    extra: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """The environment of a model server: the allowed variables of `environ` (default
    ``os.environ``) that are not secrets, then the ``pass_env`` names that are set, then
    ``spec.env``, then the adapter's `extra` (e.g. its decoding settings)."""
    src = os.environ if environ is None else environ
    env = {
        k: v
        for k, v in src.items()
        if (k in SERVERENV_NAMES or k.startswith(SERVER_ENV_PREFIXES)) and not is_secret_name(k)
    }
    env.update({k: src[k] for k in spec.pass_env if k in src})
    env.update(spec.env)
    env.update(extra or {})
    return env


def visible_gpus(environ: Mapping[str, str] | None = None) -> list[str | None]:
    """The GPUs this job may use, as CUDA_VISIBLE_DEVICES entries; [None] when there are none.

    CUDA_VISIBLE_DEVICES wins when set (indices or UUIDs, comma separated; empty or -1 = no GPU);
    otherwise `nvidia-smi -L` is asked; no nvidia-smi means a CPU-only machine.
    """
    env = os.environ if environ is None else environ
    cvd = env.get("CUDA_VISIBLE_DEVICES")
    if cvd is not None:
        ids = [x.strip() for x in cvd.split(",") if x.strip()]
        ids = ids[: ids.index("-1")] if "-1" in ids else ids
        return list(ids) or [None]
    smi = shutil.which("nvidia-smi")
    if smi:
        try:
            out = subprocess.run([smi, "-L"], capture_output=True, text=True, timeout=20).stdout
            n = sum(1 for line in out.splitlines() if line.startswith("GPU "))
            if n:
                return [str(i) for i in range(n)]
        except (OSError, subprocess.SubprocessError):
            pass
    return [None]


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def port_taken(host: str, port: int) -> bool:
    """Whether something already listens on host:port (a connection is accepted)."""
    try:
        with socket.create_connection((host, port), timeout=1.0):
            return True
    except OSError:
        return False


def die_with_parent() -> None:  # runs in the child between fork and exec
    try:
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except Exception:
        pass


def tail(path: Path, n_bytes: int = 4000) -> str:
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            size = f.tell()
            f.seek(max(0, size - n_bytes))
            return f.read().decode("utf-8", "replace")
    except OSError:
        return ""


class ServerInstance:
    """One server process: its device, port, log and restart count."""

    def __init__(self, pool: "ServerPool", index: int, device: str | None):
        self.pool, self.index, self.device = pool, index, device
        self.host = pool.spec.host
        self.port = 0
        self.proc: subprocess.Popen | None = None
        self.restarts = 0
        self.busy = False
        self.retired = False  # could not be restarted any more
        self._start_task: asyncio.Future | None = (
            None  # the start in progress, awaited by every caller
        )

    @property
    def name(self) -> str:
        # array tasks of one run share its folder: a task's servers carry its task id
        task = os.environ.get("SLURM_ARRAY_TASK_ID")
        return (
            f"{self.pool.name}-t{task}-{self.index}" if task else f"{self.pool.name}-{self.index}"
        )

    @property
    def log_path(self) -> Path:
        return self.pool.log_dir / f"{self.name}.log"

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def log_tail(self, n_bytes: int = 4000) -> str:
        return tail(self.log_path, n_bytes)

    def _note(self, msg: str) -> None:
        self.pool.log_dir.mkdir(parents=True, exist_ok=True)
        with open(self.log_path, "a") as f:
            f.write(f"\n=== fdeval {time.strftime('%Y-%m-%d %H:%M:%S')}: {msg} ===\n")

    def _popen(self) -> None:
        spec = self.pool.spec
        if (
            self.proc is not None
        ):  # never lose track of a process: it would keep its port (and GPU memory)
            self.stop()
        self.port = free_port(self.host)
        fmt = {
            "python": spec.python,
            "host": self.host,
            "port": str(self.port),
            **self.pool.placeholders,
        }
        try:
            cmd = [a.format(**fmt) for a in spec.command]
        except KeyError as e:
            raise ServerError(
                f"{self.name}: unknown placeholder {e} in server.command; valid: {sorted(fmt)}"
            ) from None
        env = server_environment(spec, extra=self.pool.extra_env)
        if self.device is not None:
            env["CUDA_VISIBLE_DEVICES"] = self.device
        self._note(f"start on {self.host}:{self.port} device={self.device} cmd={cmd}")
        logf = open(self.log_path, "ab")
        try:
            self.proc = subprocess.Popen(
                cmd,
                stdin=subprocess.DEVNULL,
                stdout=logf,
                stderr=subprocess.STDOUT,
                env=env,
                start_new_session=True,
                preexec_fn=die_with_parent
                if (
                    sys.platform.startswith("linux")
                    and threading.current_thread() is threading.main_thread()
                )
                else None,
            )
        except OSError as e:
            raise ServerError(f"{self.name}: cannot start {cmd[0]!r}: {e}") from None
        finally:
            logf.close()
        self._note(f"pid {self.proc.pid}")
        _register(self.pool)

    async def _wait_healthy(self) -> bool:
        spec = self.pool.spec
        deadline = time.monotonic() + spec.startup_timeout_s
        last: BaseException | None = None
        while time.monotonic() < deadline:
            if not self.alive():
                return False
            try:
                await asyncio.wait_for(
                    self.pool.probe(self.host, self.port), timeout=spec.probe_timeout_s
                )
                return True
            except (OSError, asyncio.TimeoutError, ConnectionError) as e:
                last = e
            except Exception as e:  # aiohttp's errors and a protocol mismatch
                last = e
            await asyncio.sleep(0.25)
        self._note(f"not healthy after {spec.startup_timeout_s:g} s (last probe error: {last!r})")
        return False

    async def start(self) -> None:
        """Start (or restart) this instance and wait until it answers the handshake (bounded tries).

        One start at a time: a caller that comes while a start is in progress waits for that one."""
        await asyncio.shield(
            self._begin_start()
        )  # a cancelled waiter leaves it running for the others

    def _begin_start(self) -> asyncio.Future:
        self._start_task = _in_flight(self._start_task, self._start)
        return self._start_task

    async def _start(self) -> None:
        spec = self.pool.spec
        epoch = self.pool.epoch
        for attempt in range(1, spec.start_attempts + 1):
            if self.pool.epoch != epoch:  # the pool was stopped meanwhile: start nothing more
                self.stop()
                raise ServerError(f"server {self.name}: the pool was stopped while it started")
            self._popen()
            t0 = time.monotonic()
            if await self._wait_healthy() and self.pool.epoch == epoch:
                log.info(
                    "server %s ready on %s:%d in %.1f s",
                    self.name,
                    self.host,
                    self.port,
                    time.monotonic() - t0,
                )
                self._note(f"healthy after {time.monotonic() - t0:.1f} s")
                return
            code = self.proc.poll() if self.proc else None
            self.stop()
            log.warning(
                "server %s failed to start (attempt %d/%d, exit %s)",
                self.name,
                attempt,
                spec.start_attempts,
                code,
            )
        raise ServerError(
            f"server {self.name} did not become healthy after {spec.start_attempts} attempt(s); "
            f"log {self.log_path}, last lines:\n{self.log_tail()}"
        )

    async def restart(self, why: str) -> None:
        if self.restarts >= self.pool.spec.max_restarts:
            raise ServerError(
                f"server {self.name} {why}; not restarted: it was restarted {self.restarts} time(s) already "
                f"(server.max_restarts); log {self.log_path}, last lines:\n{self.log_tail()}"
            )
        self.restarts += 1
        log.warning(
            "server %s %s; restarting (%d/%d)",
            self.name,
            why,
            self.restarts,
            self.pool.spec.max_restarts,
        )
        self._note(f"{why}; restart {self.restarts}/{self.pool.spec.max_restarts}")
        self.stop()
        await self.start()

    def exit_code(self, wait_s: float = 0.0) -> int | None:
        """The exit code if the process has ended (waiting up to `wait_s` for it)."""
        if self.proc is None:
            return None
        try:
            return self.proc.wait(timeout=wait_s) if wait_s > 0 else self.proc.poll()
        except subprocess.TimeoutExpired:
            return None

    def stop(self, grace_s: float = 5.0) -> None:
        p, self.proc = self.proc, None
        if p is None or p.poll() is not None:
            return
        for sig, wait in ((signal.SIGTERM, grace_s), (signal.SIGKILL, 5.0)):
            try:
                os.killpg(p.pid, sig)
            except (ProcessLookupError, PermissionError):
                try:
                    p.send_signal(sig)
                except ProcessLookupError:
                    return
            try:
                p.wait(timeout=wait)
                return
            except subprocess.TimeoutExpired:
                continue


class ServerPool:
    """`instances_per_gpu` servers per visible GPU, started on first use, one session per instance."""

    def __init__(
        self,
        name: str,
        spec: ServerSpec,
        probe: Probe,
        placeholders: Mapping[str, str] | None = None,
        extra_env: Mapping[str, str] | None = None,
        gpus: list[str | None] | None = None,
    ):
        self.name, self.spec, self.probe = name, spec, probe
        self.placeholders = dict(placeholders or {})
        self.extra_env = dict(extra_env or {})
        self._gpus = gpus
        self._log_dir = Path(spec.log_dir) if spec.log_dir else None
        self.instances: list[ServerInstance] = []
        self._started = False
        self._start_task: asyncio.Future | None = None  # the pool start in progress
        self.epoch = 0  # counts stop() calls: a start begun before one starts no more processes
        self._failed: ServerError | None = None
        self._last_error: ServerError | None = None
        self._share = (
            0,
            1,
        )  # (index, count): this client process runs instances index, index+count, ...

    def share(self, index: int, count: int) -> None:
        """Run only this client process's share of the instances (every `count`-th one from
        `index`), when the run spreads its sessions over `count` processes (before the start)."""
        if self._started or not 0 <= index < count:
            raise ValueError(
                f"pool {self.name}: cannot share as {index} of {count} (started: {self._started})"
            )
        self._share = (index, count)

    # -- configuration ------------------------------------------------------------------------
    @property
    def log_dir(self) -> Path:
        return self._log_dir if self._log_dir is not None else Path("servers").resolve()

    def set_run_dir(self, run_dir: Path) -> None:
        """Server logs go to <run_dir>/servers unless server.log_dir says otherwise."""
        if not self.spec.log_dir:
            self._log_dir = Path(run_dir) / "servers"

    @property
    def gpus(self) -> list[str | None]:
        if self._gpus is None:
            self._gpus = visible_gpus()
        return self._gpus

    @property
    def size(self) -> int:
        """How many servers the pool runs (= sessions it can hold at once)."""
        index, count = self._share
        return len(range(index, len(self.gpus) * self.spec.instances_per_gpu, count))

    # -- life cycle ---------------------------------------------------------------------------
    async def start(self) -> None:
        """Start every instance (concurrently) and wait until all are healthy. Callers that come
        while the start is in progress wait for it (before, a second caller found the instances
        without a process and started each one again)."""
        if self._started:
            return
        self._start_task = _in_flight(self._start_task, self._start_all)
        await asyncio.shield(self._start_task)

    async def _start_all(self) -> None:
        gpus = self.gpus
        self.log_dir.mkdir(parents=True, exist_ok=True)
        index, count = self._share  # instance numbers (ports, logs, devices) are the whole pool's
        self.instances = [
            ServerInstance(self, n, g)
            for n, g in enumerate(g for g in gpus for _ in range(self.spec.instances_per_gpu))
            if n % count == index
        ]
        tasks = [inst._begin_start() for inst in self.instances]
        try:
            await asyncio.gather(*tasks)
        except BaseException:
            for t in tasks:  # the others stop trying before their processes are killed
                t.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            self.stop()
            raise
        self._started = True

    async def acquire(self) -> ServerInstance:
        """A free, live instance for one session (restarting a dead one first).

        An instance that cannot be restarted any more is retired; the pool fails only when every
        instance is retired, or when it could not start at all (then at once, for every later
        session too: each case is recorded with the error instead of waiting for more attempts).
        """
        if self._failed is not None:
            raise self._failed
        try:
            await self.start()
        except ServerError as e:
            self._failed = e
            raise
        while True:
            live = [inst for inst in self.instances if not inst.retired]
            if not live:
                raise self._last_error or ServerError(f"{self.name}: no server left")
            for inst in live:
                if inst.busy:
                    continue
                inst.busy = True
                try:
                    if not inst.alive():
                        await inst.restart(f"was found dead (exit code {inst.exit_code()})")
                except ServerError as e:
                    inst.busy, inst.retired, self._last_error = False, True, e
                    log.error("server %s retired: %s", inst.name, str(e).splitlines()[0])
                    break
                except BaseException:
                    inst.busy = False
                    raise
                return inst
            else:
                await asyncio.sleep(0.02)

    def release(self, inst: ServerInstance) -> None:
        inst.busy = False

    def stop(self) -> None:
        self.epoch += 1
        for inst in self.instances:
            inst.stop()
        self._started = False
        _live.discard(self)


def _in_flight(
    task: "asyncio.Future | None", start: Callable[[], Awaitable[None]]
) -> asyncio.Future:
    """`task` if it is still running in this loop, else a new task of `start()`. The caller stores
    it before awaiting, so that whoever comes next waits for the same one."""
    if task is None or task.done() or task.get_loop() is not asyncio.get_running_loop():
        task = asyncio.ensure_future(start())
    return task


async def lost(name: str, inst: ServerInstance, what: str) -> ServerDied:
    """The error for a session that lost its pooled server: ServerDied with the server's log tail."""
    code = None
    for _ in range(60):  # give a dying server up to 3 s to be reaped, without blocking the loop
        code = inst.exit_code()
        if code is not None:
            break
        await asyncio.sleep(0.05)
    state = f"exited with code {code}" if code is not None else "is still running"
    return ServerDied(
        f"{name} server {inst.name} {state}; session lost ({what}); server log tail:\n{inst.log_tail()}"
    )


# -- stop everything on exit and on the signals of preemption ------------------------------------
_live: "weakref.WeakSet[ServerPool]" = weakref.WeakSet()
_installed = False


def stop_all() -> None:
    for pool in list(_live):
        try:
            pool.stop()
        except Exception:  # pragma: no cover - best effort at exit
            pass


def _chain(sig: int, previous: Any) -> Callable[[int, Any], None]:
    def handler(signum: int, frame: Any) -> None:
        stop_all()
        if callable(previous):
            previous(signum, frame)
        elif previous == signal.SIG_IGN:
            return
        else:  # default action: die of the signal, as if no handler had been installed
            signal.signal(sig, signal.SIG_DFL)
            os.kill(os.getpid(), sig)

    return handler


def _register(pool: ServerPool) -> None:
    global _installed
    _live.add(pool)
    if _installed or threading.current_thread() is not threading.main_thread():
        return
    _installed = True
    atexit.register(stop_all)
    for sig in (signal.SIGTERM, getattr(signal, "SIGUSR2", None)):
        if sig is not None:
            signal.signal(sig, _chain(sig, signal.getsignal(sig)))
