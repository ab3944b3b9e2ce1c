"""Moshi in-process, batched: B sessions per forward pass of LMGen + Mimi, under the lockstep clock.

The server path (`fdeval.models.moshi`) runs one session per server at wall speed. This adapter
loads the same checkpoint in this process and steps up to `batch_size` sessions together: a
shared `_BatchStepper` holds `LMGen.streaming(B)` and `Mimi.streaming(B)`; each session owns a
row. A session's `send(frame)` hands its 80 ms frame to the stepper and awaits the batch barrier:
once every session that holds a row has handed in its frame, one batched step runs (Mimi encode,
`LMGen.step`, Mimi decode) and every session gets its events (text piece, then audio). A session
that ends frees its row (the barrier then no longer waits for it); a new session resets its row
(`reset_streaming(mask)`; `support_out_of_sync=True`, rows not stepped are masked with
`set_exec_mask`, so one row's start never stalls the others).

Each session keeps its own turn manager: `stage_run` runs `concurrency` (= `batch_size`) cases at
once, each through `run_session` with its own `LockstepClock`, in one event loop (a worker pool:
as a case ends, the next starts in the freed row). A step does what `moshi.server` does for a
frame: the first frame of a session is encoded and then the encoder state is reset (the server
discards it as "in the past"), text tokens 0 and 3 are not text, a piece's "▁" is a space. With
temperature 0 (greedy) a session's tokens equal the server's on the same input (tested); with
sampling they are draws from one shared torch generator, so they depend on the batch's makeup.
Text rule `text_stream = "pieces"`, as the server: the pieces are SentencePiece pieces.

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

import asyncio
import json
import time
from pathlib import Path
from typing import Any

import numpy as np

from fdeval.errors import ConfigError
from fdeval.models.base import DuplexModel, DuplexSession, ModelEvent, optional_import
from fdeval.models.moshi import ADAPTER_VERSION, check_local_files, checkpoint_identity

VENV_HINT = ("python -m fdeval.models.moshi_env --with-fdeval, then "
             ".cache/moshi-venv/bin/python -m fdeval.launch model=moshi_lockstep ...")
LOCAL_FILES = ("moshi_weight", "mimi_weight", "tokenizer")  # required when model.hf_repo is null


class ModelLoadError(RuntimeError):
    """The checkpoint could not be loaded: every session of the run fails with it (not a
    `ModelUnavailable`: no retry)."""


def _need(module: str, name: str, find_only: bool = False) -> Any:
    return optional_import(module, f"it runs inside the moshi venv: {VENV_HINT}", f"model={name}", ("moshi", "torch"),
                           find_only=find_only)


def _config_ref(config_path: str, key: str, value: str) -> Path:
    """A file that config.json names (`mimi_config_name`, `lora_name`), without the hub:
    file://PATH, an absolute path, or a path relative to the config's folder."""
    if value.startswith("hf://"):
        raise ConfigError(f"model.config_path: {config_path}: {key} {value!r} is on the model hub, "
                          "but model.hf_repo is null (local files only)")
    path = Path(value.removeprefix("file://"))
    path = path if path.is_absolute() else Path(config_path).parent / path
    if not path.is_file():
        raise ConfigError(f"model.config_path: {config_path}: {key} {value!r}: no such file: {path}")
    return path


def local_checkpoint_files(m: Any) -> dict[str, Path]:
    """What `model.hf_repo: null` loads, all local: the required files, and those the config names.
    Checked when the model is built; `moshi`'s own loader would ask the hub for anything missing."""
    for key in LOCAL_FILES:
        if not getattr(m, key):
            raise ConfigError(f"model.{key}: required when model.hf_repo is null (local files, no model hub)")
    check_local_files(m)
    files = {key: Path(getattr(m, key)) for key in LOCAL_FILES}
    if m.config_path:
        try:
            raw = json.loads(Path(m.config_path).read_text())
        except (OSError, UnicodeDecodeError, ValueError) as e:
            raise ConfigError(f"model.config_path: {m.config_path}: not a JSON config ({e})") from None
        if not isinstance(raw, dict):
            raise ConfigError(f"model.config_path: {m.config_path}: not a JSON object")
        for key, arg in (("mimi_config_name", "mimi_config_path"), ("lora_name", "lora_weights")):
            if raw.get(key):
                files[arg] = _config_ref(m.config_path, key, str(raw[key]))
    return files


class _BatchStepper:
    """B rows of Moshi streaming state; one batched step once every busy row handed in a frame."""

    def __init__(self, torch, lm_gen, mimi, tokenizer, batch_size: int, device: str):
        self.torch = torch
        self.lm_gen, self.mimi, self.tokenizer = lm_gen, mimi, tokenizer
        self.B, self.device = batch_size, device
        self.frame_n = int(mimi.sample_rate / mimi.frame_rate)
        self._exit = [lm_gen.streaming(batch_size), mimi.streaming(batch_size)]
        self.owner: list[Any] = [None] * batch_size
        self.first = [False] * batch_size
        self.needs_reset = [False] * batch_size
        self.frames: dict[int, np.ndarray] = {}
        self.waiters: dict[int, asyncio.Future] = {}
        self._scheduled = False
        self.steps = 0  # batched steps run
        self.row_steps = 0  # session frames computed

    # -- rows ---------------------------------------------------------------------------------
    async def acquire(self, session: Any) -> int:
        while True:
            for i in range(self.B):
                if self.owner[i] is None:
                    self.owner[i] = session
                    self.first[i] = self.needs_reset[i] = True
                    return i
            await asyncio.sleep(0)

    def release(self, row: int) -> None:
        self.owner[row] = None
        self.frames.pop(row, None)
        fut = self.waiters.pop(row, None)
        if fut is not None and not fut.done():
            fut.cancel()
        self._maybe_step()

    # -- the barrier --------------------------------------------------------------------------
    async def submit(self, row: int, frame: np.ndarray) -> list[ModelEvent]:
        if row in self.frames:
            raise RuntimeError(f"row {row} sent twice in one step")
        self.frames[row] = np.asarray(frame, dtype=np.float32)
        fut = asyncio.get_running_loop().create_future()
        self.waiters[row] = fut
        self._maybe_step()
        return await fut

    def _maybe_step(self) -> None:
        # Not at once: first let every task that is ready run up to its own send (a session that
        # is just starting, or one finishing its frame's bookkeeping), then check the barrier.
        if not self._scheduled and self.frames:
            self._scheduled = True
            asyncio.get_running_loop().call_soon(self._try_step)

    def _try_step(self) -> None:
        self._scheduled = False
        busy = [i for i in range(self.B) if self.owner[i] is not None]
        if not self.frames or any(i not in self.frames for i in busy):
            return
        frames, self.frames = self.frames, {}
        waiters, self.waiters = self.waiters, {}
        try:
            out = self.step(frames)
        except BaseException as e:
            for fut in waiters.values():
                if not fut.done():
                    fut.set_exception(e)
            return
        for row, fut in waiters.items():
            if not fut.done():
                fut.set_result(out.get(row, []))

    # -- one batched step ---------------------------------------------------------------------
    def step(self, frames: dict[int, np.ndarray]) -> dict[int, list[ModelEvent]]:
        torch = self.torch
        B = self.B
        rows = sorted(frames)
        with torch.no_grad():
            reset = [i for i in rows if self.needs_reset[i]]
            if reset:
                mask = torch.zeros(B, dtype=torch.bool)
                mask[reset] = True
                self.lm_gen.reset_streaming(mask.to(self.device))
                self.mimi.reset_streaming(mask.to(self.device))
                for i in reset:
                    self.needs_reset[i] = False
            active = torch.zeros(B, dtype=torch.bool)
            active[rows] = True
            active = active.to(self.device)
            x = np.zeros((B, 1, self.frame_n), dtype=np.float32)
            for i in rows:
                f = frames[i]
                if len(f) != self.frame_n:
                    raise ValueError(f"Moshi takes frames of {self.frame_n} samples, got {len(f)}")
                x[i, 0] = f
            self.mimi.set_exec_mask(active)
            codes = self.mimi.encode(torch.from_numpy(x).to(self.device))
            first = [i for i in rows if self.first[i]]
            if first:
                # as moshi.server: the first frame is encoded, then the encoder state is reset
                mask = torch.zeros(B, dtype=torch.bool)
                mask[first] = True
                self.mimi.reset_streaming(mask.to(self.device))
                for i in first:
                    self.first[i] = False
            self.lm_gen.set_exec_mask(active)
            tokens = self.lm_gen.step(codes[:, :, :1])
            assert tokens is not None  # support_out_of_sync: rows not ready hold -1
            valid = active & (tokens[:, 0, 0] >= 0)
            pcm = None
            if bool(valid.any()):
                self.mimi.set_exec_mask(valid)
                pcm = self.mimi.decode(tokens[:, 1:].clamp(min=0)).float().cpu().numpy()
            tok = tokens[:, :, 0].cpu().numpy()
            ok = valid.cpu().numpy()
        self.steps += 1
        self.row_steps += len(rows)
        out: dict[int, list[ModelEvent]] = {}
        for i in rows:
            events: list[ModelEvent] = []
            session = self.owner[i]
            if ok[i]:
                if session is not None and session.token_log is not None:
                    session.token_log.append([int(t) for t in tok[i]])
                text_token = int(tok[i, 0])
                if text_token not in (0, 3):
                    events.append(ModelEvent("text", text=self.tokenizer.id_to_piece(text_token).replace("\u2581", " ")))
                events.append(ModelEvent.audio_chunk(pcm[i, 0]))
            elif session is not None and session.token_log is not None:
                session.token_log.append(None)
            out[i] = events
        return out

    def close(self) -> None:
        for stack in reversed(self._exit):
            stack.close()
        self._exit = []


class MoshiLockstep(DuplexModel):
    """Moshi's LMGen + Mimi in this process, `batch_size` sessions per forward pass."""

    audio_per_frame = True
    sample_rate = 24000
    frame_s = 0.08
    clock = "lockstep"
    text_stream = "pieces"

    def __init__(self, name: str = "moshi-lockstep", batch_size: int = 8, turn_silence_s: float | None = 2.5,
                 hf_repo: str | None = "kyutai/moshiko-pytorch-bf16", config_path: str | None = None,
                 moshi_weight: str | None = None, mimi_weight: str | None = None, tokenizer: str | None = None,
                 device: str = "cuda", dtype: str = "bfloat16", temp: float = 0.8, temp_text: float = 0.7,
                 top_k: int = 250, top_k_text: int = 25, seed: int = 42424242, torch_threads: int | None = None,
                 log_tokens: bool = False):
        if int(batch_size) < 1:
            raise ConfigError(f"model.batch_size: must be >= 1, got {batch_size}")
        self.name, self.batch_size = name, int(batch_size)
        self.turn_silence_s = turn_silence_s
        self.hf_repo, self.config_path = hf_repo, config_path
        self.moshi_weight, self.mimi_weight, self.tokenizer = moshi_weight, mimi_weight, tokenizer
        self.device, self.dtype = device, dtype
        self.decoding = {"temp": float(temp), "temp_text": float(temp_text), "top_k": int(top_k),
                         "top_k_text": int(top_k_text)}
        self.seed, self.torch_threads, self.log_tokens = int(seed), torch_threads, bool(log_tokens)
        for module in ("moshi", "torch"):  # found, not imported: torch takes seconds to import
            _need(module, name, find_only=True)
        if hf_repo:
            check_local_files(self)
            self._local: dict[str, Path] | None = None
        else:
            self._local = local_checkpoint_files(self)
        self._stepper: _BatchStepper | None = None
        self._load_error: str | None = None
        self.load_s = 0.0

    @property
    def concurrency(self) -> int:
        return self.batch_size

    def identity(self) -> dict[str, Any]:
        return {
            "name": self.name, "kind": "moshi-lockstep", "adapter_version": ADAPTER_VERSION,
            **checkpoint_identity(self), "dtype": self.dtype, "device": self.device, "decoding": self.decoding,
            "batch_size": self.batch_size, "seed": self.seed, "turn_silence_s": self.turn_silence_s,
        }

    @property
    def stepper(self) -> _BatchStepper:
        # a load that failed is not tried again for every case: each later session gets its error
        if self._load_error is not None:
            raise ModelLoadError(self._load_error)
        if self._stepper is None:
            try:
                self._stepper = self._load()
            except Exception as e:
                first = (str(e).strip().splitlines() or [""])[0]
                self._load_error = f"{self.name}: the model could not be loaded ({type(e).__name__}: {first}); not retried in this run"
                raise ModelLoadError(self._load_error) from e
        return self._stepper

    def _checkpoint(self, loaders):
        if self._local is None:
            return loaders.CheckpointInfo.from_hf_repo(self.hf_repo, self.moshi_weight, self.mimi_weight,
                                                       self.tokenizer, config_path=self.config_path)
        f = self._local
        if not self.config_path:  # no config: the architecture of Moshi 7B, as moshi's loader assumes
            return loaders.CheckpointInfo(f["moshi_weight"], f["mimi_weight"], f["tokenizer"])
        # every path given: moshi's loader then reads only these files (hf_repo None: no hub)
        return loaders.CheckpointInfo.from_hf_repo(
            None, f["moshi_weight"], f["mimi_weight"], f["tokenizer"], config_path=self.config_path,
            mimi_config_path=f.get("mimi_config_path"), lora_weights=f.get("lora_weights"))

    def _load(self) -> _BatchStepper:
        torch = _need("torch", self.name)
        LMGen = _need("moshi.models", self.name).LMGen
        loaders = _need("moshi.models.loaders", self.name)
        t0 = time.perf_counter()
        if self.torch_threads:
            torch.set_num_threads(int(self.torch_threads))
        torch.manual_seed(self.seed)
        info = self._checkpoint(loaders)
        mimi = info.get_mimi(device=self.device)
        lm = info.get_moshi(device=self.device, dtype=getattr(torch, self.dtype))
        kwargs = {**info.lm_gen_config, **self.decoding}
        lm_gen = LMGen(lm, support_out_of_sync=True, **kwargs)
        stepper = _BatchStepper(torch, lm_gen, mimi, info.get_text_tokenizer(), self.batch_size, self.device)
        self.load_s = time.perf_counter() - t0
        return stepper

    def session(self, instruction: str | None, seed: int) -> "MoshiLockstepSession":
        return MoshiLockstepSession(self, instruction, seed)

    def close(self) -> None:
        if self._stepper is not None:
            self._stepper.close()
            self._stepper = None


class MoshiLockstepSession(DuplexSession):
    """One row of the batch. Moshi reads no instruction (as with its server)."""

    def __init__(self, model: MoshiLockstep, instruction: str | None, seed: int):
        self.model, self.instruction, self.seed = model, instruction, seed
        self.frame_n = int(round(model.frame_s * model.sample_rate))
        self._pending: list[ModelEvent] = []
        self.row: int | None = None
        self.token_log: list[list[int] | None] | None = [] if model.log_tokens else None

    async def __aenter__(self) -> "MoshiLockstepSession":
        self.row = await self.model.stepper.acquire(self)
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self.row is not None:
            self.model.stepper.release(self.row)
            self.row = None

    async def send_frame(self, frame: np.ndarray) -> None:
        assert self.row is not None, "send outside the session"
        self._pending.extend(await self.model.stepper.submit(self.row, frame))

    async def receive(self) -> list[ModelEvent]:
        out, self._pending = self._pending, []
        return out
