"""Moshi in-process, batched: B sessions per forward pass of LMGen + Mimi, under the lockstep clock.

The server path (`fdeval.models.moshi`) runs one session per server at wall speed. This adapter
loads the same checkpoint in this process and steps up to `batch_size` sessions together
(`fdeval.models.lockstep`: a slot pool of B rows, a batch barrier; `fdeval.models.moshi_rows`:
the torch side). A step does what `moshi.server` does for a frame: the first frame of a session
is encoded and then the encoder state is reset (the server discards it as "in the past"), text
tokens 0 and 3 are not text, a piece's "\u2581" is a space. With temperature 0 (greedy) a
session's tokens equal the server's on the same input, alone, in a batch and in a row an earlier
session used (tested); with sampling they are draws from one shared torch generator, so they
depend on the batch's makeup. Text rule `text_stream = "pieces"`, as the server.

KV caches: `kv_cache_s` (the config passes `orchestrator.max_session_s`, where sessions are cut)
sizes each row's ring buffers to that many seconds of steps when it is under the model's context
(240 s for Moshi 7B): the same tokens, less memory per row and less to read per step.

Checkpoint: `hf_repo` through moshi's loader, or with `hf_repo: null` local files only, checked
when the model is built: `moshi_weight`, `mimi_weight` and `tokenizer` are required, `config_path`
optional (without it, Moshi 7B's architecture, as moshi's loader assumes), and files the config
names (`mimi_config_name`, `lora_name`) are found relative to it; the hub is never asked. A load
that fails is remembered: every later session fails at once with the same `ModelLoadError`.

`moshi` pins versions of its own, so this adapter runs inside the moshi venv with fdeval installed
there `--no-deps` (`python -m fdeval.models.moshi_env --with-fdeval` builds it):

    .cache/moshi-venv/bin/python -m fdeval.launch model=moshi_lockstep stage=run model.batch_size=8 ...
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from fdeval.errors import ConfigError
from fdeval.models.base import optional_import
from fdeval.models.lockstep import BatchedModel, Rows
from fdeval.models.moshi import ADAPTER_VERSION, check_local_files, checkpoint_identity

VENV_HINT = (
    "python -m fdeval.models.moshi_env --with-fdeval, then "
    ".cache/moshi-venv/bin/python -m fdeval.launch model=moshi_lockstep ..."
)
LOCAL_FILES = ("moshi_weight", "mimi_weight", "tokenizer")  # required when model.hf_repo is null


def need(module: str, name: str, find_only: bool = False) -> Any:
    """`optional_import` of what the Moshi family's in-process models need, naming the moshi venv."""
    return optional_import(
        module,
        f"it runs inside the moshi venv: {VENV_HINT}",
        f"model={name}",
        ("moshi", "torch"),
        find_only=find_only,
    )


def _config_ref(config_path: str, key: str, value: str) -> Path:
    """A file that config.json names (`mimi_config_name`, `lora_name`), without the hub:
    file://PATH, an absolute path, or a path relative to the config's folder."""
    if value.startswith("hf://"):
        raise ConfigError(
            f"model.config_path: {config_path}: {key} {value!r} is on the model hub, "
            "but model.hf_repo is null (local files only)"
        )
    path = Path(value.removeprefix("file://"))
    path = path if path.is_absolute() else Path(config_path).parent / path
    if not path.is_file():
        raise ConfigError(
            f"model.config_path: {config_path}: {key} {value!r}: no such file: {path}"
        )
    return path


def local_checkpoint_files(m: Any) -> dict[str, Path]:
    """What `model.hf_repo: null` loads, all local: the required files, and those the config names.
    Checked when the model is built; `moshi`'s own loader would ask the hub for anything missing."""
    for key in LOCAL_FILES:
        if not getattr(m, key):
            raise ConfigError(
                f"model.{key}: required when model.hf_repo is null (local files, no model hub)"
            )
    check_local_files(m)
    files = {key: Path(getattr(m, key)) for key in LOCAL_FILES}
    if m.config_path:
        try:
            raw = json.loads(Path(m.config_path).read_text())
        except (OSError, UnicodeDecodeError, ValueError) as e:
            raise ConfigError(
                f"model.config_path: {m.config_path}: not a JSON config ({e})"
            ) from None
        if not isinstance(raw, dict):
            raise ConfigError(f"model.config_path: {m.config_path}: not a JSON object")
        for key, arg in (("mimi_config_name", "mimi_config_path"), ("lora_name", "lora_weights")):
            if raw.get(key):
                files[arg] = _config_ref(m.config_path, key, str(raw[key]))
    return files


def kv_steps(kv_cache_s: float | None, frame_s: float, extra_steps: int = 0) -> int | None:
    """Ring-buffer entries a row needs for sessions of up to `kv_cache_s` seconds (None: no bound)."""
    if kv_cache_s is None:
        return None
    if not (math.isfinite(float(kv_cache_s)) and float(kv_cache_s) > 0):
        raise ConfigError(
            f"model.kv_cache_s: must be > 0 (seconds of session a row's KV cache holds), got {kv_cache_s}"
        )
    # + the first frame (discarded), the model's delays and a margin: the turn manager cuts a
    # session at the first frame past the cap
    return int(math.ceil(float(kv_cache_s) / frame_s)) + 8 + int(extra_steps)


class MoshiFamilyBatched(BatchedModel):
    """What the batched Moshi-family models share: 24 kHz, 80 ms frames, a frame of audio per frame,
    SentencePiece pieces; the checkpoint files, device and dtype, decoding, seed, threads and KV
    cache settings, checked when the model is built."""

    audio_per_frame = True
    sample_rate = 24000
    frame_s = 0.08
    text_stream = "pieces"

    def __init__(
        self,
        name: str,
        batch_size: int,
        turn_silence_s: float | None,
        hf_repo: str | None,
        config_path: str | None,
        moshi_weight: str | None,
        mimi_weight: str | None,
        tokenizer: str | None,
        device: str,
        dtype: str,
        decoding: dict[str, Any],
        seed: int,
        torch_threads: int | None,
        kv_cache_s: float | None,
        log_tokens: bool,
    ):
        if int(batch_size) < 1:
            raise ConfigError(f"model.batch_size: must be >= 1, got {batch_size}")
        super().__init__(name, batch_size)
        self.turn_silence_s = turn_silence_s
        self.hf_repo, self.config_path = hf_repo, config_path
        self.moshi_weight, self.mimi_weight, self.tokenizer = moshi_weight, mimi_weight, tokenizer
        self.device, self.dtype = device, dtype
        self.decoding = {
            "temp": float(decoding["temp"]),
            "temp_text": float(decoding["temp_text"]),
            "top_k": int(decoding["top_k"]),
            "top_k_text": int(decoding["top_k_text"]),
        }
        self.seed, self.torch_threads, self.log_tokens = int(seed), torch_threads, bool(log_tokens)
        self.kv_steps = kv_steps(kv_cache_s, self.frame_s)
        for module in ("moshi", "torch"):  # found, not imported: torch takes seconds to import
            need(module, name, find_only=True)
        check_local_files(self)

    def torch_setup(self) -> Any:
        """torch, with this model's threads and seed set (at load)."""
        torch = need("torch", self.name)
        if self.torch_threads:
            torch.set_num_threads(int(self.torch_threads))
        torch.manual_seed(self.seed)
        return torch


class MoshiLockstep(MoshiFamilyBatched):
    """Moshi's LMGen + Mimi in this process, `batch_size` sessions per forward pass."""

    def __init__(
        self,
        name: str = "moshi-lockstep",
        batch_size: int = 8,
        turn_silence_s: float | None = 2.5,
        hf_repo: str | None = "kyutai/moshiko-pytorch-bf16",
        config_path: str | None = None,
        moshi_weight: str | None = None,
        mimi_weight: str | None = None,
        tokenizer: str | None = None,
        device: str = "cuda",
        dtype: str = "bfloat16",
        temp: float = 0.8,
        temp_text: float = 0.7,
        top_k: int = 250,
        top_k_text: int = 25,
        seed: int = 42424242,
        torch_threads: int | None = None,
        kv_cache_s: float | None = None,
        log_tokens: bool = False,
    ):
        super().__init__(
            name,
            batch_size,
            turn_silence_s,
            hf_repo,
            config_path,
            moshi_weight,
            mimi_weight,
            tokenizer,
            device,
            dtype,
            {"temp": temp, "temp_text": temp_text, "top_k": top_k, "top_k_text": top_k_text},
            seed,
            torch_threads,
            kv_cache_s,
            log_tokens,
        )
        self._local: dict[str, Path] | None = None if hf_repo else local_checkpoint_files(self)

    def identity(self) -> dict[str, Any]:
        # kv_cache_s is not in it: a cache that holds every session computes what the full one does
        return {
            "name": self.name,
            "kind": "moshi-lockstep",
            "adapter_version": ADAPTER_VERSION,
            **checkpoint_identity(self),
            "dtype": self.dtype,
            "device": self.device,
            "decoding": self.decoding,
            "batch_size": self.batch_size,
            "seed": self.seed,
            "turn_silence_s": self.turn_silence_s,
        }

    def _checkpoint(self, loaders):
        if self._local is None:
            return loaders.CheckpointInfo.from_hf_repo(
                self.hf_repo,
                self.moshi_weight,
                self.mimi_weight,
                self.tokenizer,
                config_path=self.config_path,
            )
        f = self._local
        if (
            not self.config_path
        ):  # no config: the architecture of Moshi 7B, as moshi's loader assumes
            return loaders.CheckpointInfo(f["moshi_weight"], f["mimi_weight"], f["tokenizer"])
        # every path given: moshi's loader then reads only these files (hf_repo None: no hub)
        return loaders.CheckpointInfo.from_hf_repo(
            None,
            f["moshi_weight"],
            f["mimi_weight"],
            f["tokenizer"],
            config_path=self.config_path,
            mimi_config_path=f.get("mimi_config_path"),
            lora_weights=f.get("lora_weights"),
        )

    def _load(self) -> Rows:
        torch = self.torch_setup()
        loaders = need("moshi.models.loaders", self.name)
        rows = need("fdeval.models.moshi_rows", self.name)
        info = self._checkpoint(loaders)
        mimi = info.get_mimi(device=self.device)
        lm = info.get_moshi(device=self.device, dtype=getattr(torch, self.dtype))
        return rows.MoshiRows(
            lm,
            mimi,
            info.get_text_tokenizer(),
            self.batch_size,
            self.device,
            {**info.lm_gen_config, **self.decoding},
            self.kv_steps,
            self.log_tokens,
        )
