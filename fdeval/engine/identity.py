"""A run folder: its name, its identity, its lock, and whether a finished artifact may be reused.

A run's identity is everything that can change a recording: the effective config (after the
benchmark's and model's own settings are composed), minus the keys that only say where, how or
how verbosely it runs and minus the settings that only a later step reads (the `judge` and `asr`
groups, and what a benchmark's steps declare as theirs: `Step.owns`); the endpoints its
generators talk to (resolved from the environment where the config leaves them null); the case
set; and the code, benchmark and data versions. Its hash names the folder (`<tag>-<hash>`, the
tag a readable digest of the overrides), so two identities never share a folder, and is written
into every artifact. The settings a later step owns go into that step's own stamp instead, which
names the subfolder its files live in (`fdeval.engine.run.Run.step_dir`). On resume an artifact
is reused only when it opens, validates and carries the current identity; an unreadable one is
redone, a foreign one stops the run with one line that names the differing fields (or is redone
under `resume=redo`).

The lock (`<run>/.lock`, an flock held while a process works in the folder) makes a second
launch on the same folder fail at once; the kernel drops it when its holder dies, so a killed
run never leaves a stale lock behind.
"""

from __future__ import annotations

import contextlib
import copy
import errno
import fcntl
import hashlib
import json
import os
import re
import socket
import time
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping

from fdeval.errors import ConfigError, FdevalError

IDENTITY_VERSION = 1
RESUME_MODES = ("auto", "redo")

# Top-level config keys that never change a result: where it goes, which steps run, where they
# run, how it reports progress, and the tables (scores are always recomputed from verdicts).
NOT_RESULT_KEYS = (
    "hydra",
    "stage",
    "launcher",
    "progress",
    "out_root",
    "run_tag",
    "report",
    "resume",
)
# Dotted paths that only bound waits, retries or parallelism, or say where logs go.
NOT_RESULT_PATHS = (
    "benchmark.workers",
    "benchmark.llm.concurrency",
    "benchmark.llm.max_attempts",
    "model.resources",
    "model.case_retries",
    "model.handshake_timeout_s",
    "model.token_log",
    "model.server.log_dir",
    "model.server.startup_timeout_s",
    "model.server.start_attempts",
    "model.server.max_restarts",
    "model.server.instances_per_gpu",
    "model.server.probe_timeout_s",
    "judge.max_retries",
    "judge.timeout_s",
    "judge.max_retry_s",
    "judge.max_unreachable",
    "judge.max_failed_requests",
    "judge.backoff_s",
    "judge.max_backoff_s",
    "model.concurrency",
    "orchestrator.client_processes",
    "orchestrator.client_cpu_s_per_session_s",
    "orchestrator.client_cpu_share",
    "orchestrator.invalid_retries",
)
# Config groups that only a benchmark's own steps read (the shared generate and run steps never
# do), so they never change a recording: outside every run identity; a step that reads one owns it.
STEP_GROUPS = ("judge", "asr")
# Keys dropped wherever they appear (ensemble members, nested llm blocks).
NOT_RESULT_NAMES = ("cache_dir", "log_dir")
# Where a null base_url goes instead, per SDK (the environment variable the SDK itself reads).
ENDPOINT_ENV = {"anthropic": ("ANTHROPIC_BASE_URL", "https://api.anthropic.com")}
TAG_MAX_CHARS = 80
TAG_VALUE_CHARS = 24


def _drop(node: Any, path: tuple[str, ...]) -> None:
    for key in path[:-1]:
        if not isinstance(node, dict) or key not in node:
            return
        node = node[key]
    if isinstance(node, dict):
        node.pop(path[-1], None)


def pick(node: Any, path: str) -> Any:
    """The value at dotted `path` of a plain config (None where it is absent)."""
    for key in path.split("."):
        if not isinstance(node, dict) or key not in node:
            return None
        node = node[key]
    return node


def drop_paths(d: dict[str, Any], paths: Iterable[str]) -> dict[str, Any]:
    """`d` without the dotted `paths` (in place; returned for convenience)."""
    for path in paths:
        _drop(d, tuple(path.split(".")))
    return d


def _walk(node: Any) -> Iterable[dict]:
    if isinstance(node, dict):
        yield node
        for v in node.values():
            yield from _walk(v)
    elif isinstance(node, list):
        for v in node:
            yield from _walk(v)


def resolve_endpoint(node: Mapping[str, Any], environ: Mapping[str, str] | None = None) -> str:
    """The URL a judge / generator node with a `base_url` key will talk to."""
    env = os.environ if environ is None else environ
    if node.get("base_url"):
        return str(node["base_url"])
    backend = str(node.get("backend") or "anthropic")
    var, default = ENDPOINT_ENV.get(backend, ("", ""))
    return env.get(var) or default if var else "sdk-default"


def _numbers(node: Any) -> Any:
    """2 and 2.0 are one setting (a sweep writes `2`, a YAML `2.0`): whole floats become ints."""
    if isinstance(node, dict):
        return {k: _numbers(v) for k, v in node.items()}
    if isinstance(node, list):
        return [_numbers(v) for v in node]
    if isinstance(node, float) and node.is_integer():
        return int(node)
    return node


def result_config(
    cfg: Mapping[str, Any], environ: Mapping[str, str] | None = None
) -> dict[str, Any]:
    """The part of a resolved config that can change a result, endpoints made explicit."""
    d = _numbers(copy.deepcopy(dict(cfg)))
    for key in NOT_RESULT_KEYS:
        d.pop(key, None)
    for path in NOT_RESULT_PATHS:
        _drop(d, tuple(path.split(".")))
    for node in list(_walk(d)):
        for name in NOT_RESULT_NAMES:
            node.pop(name, None)
        if "base_url" in node:
            node["base_url"] = resolve_endpoint(node, environ)
    return d


def identity_hash(identity: Mapping[str, Any]) -> str:
    return hashlib.sha256(json.dumps(identity, sort_keys=True, default=str).encode()).hexdigest()[
        :12
    ]


def diff_fields(a: Any, b: Any, prefix: str = "") -> list[str]:
    """Dotted paths where two JSON-like values differ (recorded vs current)."""
    if isinstance(a, dict) and isinstance(b, dict):
        out: list[str] = []
        for k in sorted(set(a) | set(b), key=str):
            p = f"{prefix}.{k}" if prefix else str(k)
            if k not in a or k not in b:
                out.append(p)
            else:
                out.extend(diff_fields(a[k], b[k], p))
        return out
    return [] if a == b else [prefix or "<value>"]


def describe_diff(recorded: Any, current: Any, limit: int = 4) -> str:
    """`key: old -> new` for the first few differing fields."""
    parts = []
    paths = diff_fields(recorded, current)
    for p in paths[:limit]:
        old, new = _get(recorded, p), _get(current, p)
        parts.append(f"{p}: {_short(old)} -> {_short(new)}")
    more = f" (+{len(paths) - limit} more)" if len(paths) > limit else ""
    return "; ".join(parts) + more if parts else "identity differs"


def _get(obj: Any, path: str) -> Any:
    for k in path.split("."):
        if not isinstance(obj, dict) or k not in obj:
            return "<absent>"
        obj = obj[k]
    return obj


def _short(v: Any) -> str:
    s = json.dumps(v, default=str) if not isinstance(v, str) else v
    return s if len(s) <= 40 else s[:37] + "..."


def readable_tag(
    overrides: list[str],
    untagged_keys: Iterable[str],
    untagged_prefixes: tuple[str, ...],
    owned: Iterable[str] = STEP_GROUPS,
) -> str:
    """A short readable name from the recording-changing command-line overrides ('default' if none).

    Only a reminder for people: the identity hash beside it is what keeps folders apart, so
    list values are shown by their length and long values are cut. `owned`: the config paths
    later steps own (outside the run identity), so `judge=llm` names the same folder."""
    untagged = set(untagged_keys)
    owned_prefixes = tuple(f"{p}." for p in owned)
    untagged |= set(owned)
    kept = []
    for item in overrides:
        key, _, value = item.partition("=")
        bare = key.lstrip("+~")
        if (
            bare in untagged
            or bare.startswith(untagged_prefixes)
            or bare.startswith(owned_prefixes)
        ):
            continue
        if value.startswith("[") and value.endswith("]"):
            n = len([v for v in value[1:-1].split(",") if v.strip()])
            value = f"{n}items"
        kept.append(f"{key}={value[:TAG_VALUE_CHARS]}")
    if not kept:
        return "default"
    tag = re.sub(r"[^A-Za-z0-9._=,+-]+", "_", ",".join(kept)).strip("._")
    return tag[:TAG_MAX_CHARS].rstrip("._,=") or "run"


def data_dir(out_root: Path, benchmark: Any, seed: int, tts: Any = None) -> Path:
    """Where a benchmark's generated data lives: shared by every run under `out_root`.

    `tts` is the run's resolved `tts` config (a plain mapping); it names the folder too for a
    benchmark whose data it speaks (`Benchmark.data_uses_tts`)."""
    name = benchmark.data_id(seed)
    if getattr(benchmark, "data_uses_tts", False) and benchmark.cases_dir is None:
        name = f"{name}-tts{identity_hash(_numbers(dict(tts or {})))[:8]}"
    return Path(out_root) / benchmark.name / "_data" / name


def check_resume(value: Any) -> str:
    if value not in RESUME_MODES:
        raise ConfigError(f"resume: unknown mode {value!r}; valid: {', '.join(RESUME_MODES)}")
    return str(value)


class ForeignArtifact(FdevalError):
    """A finished artifact in the run folder that another identity produced."""


class RunLock:
    """An exclusive flock on `<folder>/<name>`, held until `release()` or process exit."""

    def __init__(self, folder: Path, name: str = ".lock"):
        self.path = Path(folder) / name
        self._fd: int | None = None

    def acquire(self, wait: Callable[[str], None] | None = None) -> "RunLock":
        """Take the lock. Held by another process: one line, or with `wait`, call `wait(holder)`
        (the holder's note: pid, host, since when) and block until the holder lets go."""
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as e:
            raise FdevalError(
                f"{self.path.parent}: cannot use the run folder: {e.strerror or e}"
            ) from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as e:
            holder = ""
            with contextlib.suppress(OSError):  # who holds it is a courtesy in the message
                holder = os.pread(fd, 200, 0).decode("utf-8", "replace").strip()
            if e.errno not in (errno.EAGAIN, errno.EACCES):
                os.close(fd)
                raise FdevalError(
                    f"{self.path}: cannot lock the run folder: {e.strerror or e}"
                ) from None
            if wait is None:
                os.close(fd)
                raise FdevalError(
                    f"{self.path.parent}: another fdeval process is using this run folder"
                    f"{' (' + holder + ')' if holder else ''}; wait for it to finish or stop it"
                ) from None
            wait(holder)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX)
            except BaseException:  # interrupted while waiting
                os.close(fd)
                raise
        info = f"pid {os.getpid()} on {socket.gethostname()} since {time.strftime('%Y-%m-%d %H:%M:%S')}"
        with contextlib.suppress(OSError):  # the lock holds without its note
            os.ftruncate(fd, 0)
            os.pwrite(fd, info.encode(), 0)
        self._fd = fd
        return self

    def release(self) -> None:
        fd, self._fd = self._fd, None
        if fd is not None:
            try:
                fcntl.flock(fd, fcntl.LOCK_UN)
            finally:
                os.close(fd)

    def __enter__(self) -> "RunLock":
        return self.acquire()

    def __exit__(self, *exc: object) -> None:
        self.release()
