"""The torch side of the batched Moshi family: B rows of Mimi and LM streaming state.

Imported only inside the moshi venv (by `fdeval.models.moshi_lockstep` and
`fdeval.models.personaplex_lockstep` when they load): it imports torch and kyutai's `moshi` at
the top. `MimiRows` holds what every Moshi-family model shares: the Mimi codec in streaming
mode for B rows, the input buffer, the per-row execution masks (set only when the set of rows
changes: walking every streaming module costs a fraction of a millisecond each time), and the
conversion of a step's tokens into events (text piece, then audio). `MoshiRows` steps kyutai's
own `LMGen` as `moshi.server` does for one session.

KV caches are static: moshi's ring buffers, allocated once per row when streaming starts. Their
capacity is the model's attention context (3000 steps for Moshi 7B) unless `kv_steps` is smaller:
every step attends over (and on a GPU reads) the whole buffer, so a buffer sized to the longest
session a run can have (`orchestrator.max_session_s`, where sessions are cut) is cheaper and
computes the same as long as no row outlives it, which the session cap guarantees.

On CUDA, moshi's own graphs (`CUDAGraphed`: the LM's main and depth transformers, Mimi's encoder,
decoder and transformers) replay every step; nothing here breaks them: shapes are fixed (B rows,
one frame) and masks and resets change tensors in place.
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np
import torch
from moshi.models import LMGen
from moshi.modules.transformer import set_attention_context

from fdeval.models.base import ModelEvent
from fdeval.models.lockstep import Rows

TEXT_NOT_A_PIECE = (0, 3)  # Moshi's text tokens that carry no piece (as its server skips them)


def size_kv_cache(transformer: torch.nn.Module, context: int, steps: int | None) -> int:
    """Give the attention layers of `transformer` ring buffers of min(context, steps) entries
    (before streaming starts); returns the capacity."""
    if steps is None or steps >= context:
        return context
    set_attention_context(transformer, int(steps))
    return int(steps)


class MimiRows(Rows):
    """Mimi for B rows, and what every Moshi-family step shares. Subclasses implement `step`
    and open the LM's streaming state in `__init__`."""

    def __init__(
        self, mimi: Any, tokenizer: Any, batch_size: int, device: str, log_tokens: bool = False
    ):
        self.mimi, self.tokenizer = mimi, tokenizer
        self.batch_size = B = int(batch_size)
        self.device = device
        self.frame_n = int(mimi.sample_rate / mimi.frame_rate)
        self._exit = [mimi.streaming(B)]
        self._x = np.zeros((B, 1, self.frame_n), dtype=np.float32)  # rows not stepped keep old data
        self._masks: dict[tuple[int, ...], torch.Tensor] = {}
        self._mimi_rows: tuple[int, ...] | None = None  # the rows Mimi's exec mask holds
        self.needs_reset = [False] * B
        self.logs: list[list | None] = [None] * B
        self.log_tokens = log_tokens

    # -- rows ---------------------------------------------------------------------------------
    def start_row(self, row: int, instruction: str | None, seed: int) -> int:
        self.needs_reset[row] = True
        self.logs[row] = [] if self.log_tokens else None
        return 0

    def mask(self, rows: Sequence[int]) -> torch.Tensor:
        """The (B,) bool tensor of `rows`, on the device (cached: a batch uses few distinct sets)."""
        key = tuple(rows)
        m = self._masks.get(key)
        if m is None:
            m = torch.zeros(self.batch_size, dtype=torch.bool)
            m[list(key)] = True
            m = self._masks[key] = m.to(self.device)
        return m

    def set_mimi_rows(self, rows: Sequence[int]) -> None:
        key = tuple(rows)
        if key != self._mimi_rows:
            self.mimi.set_exec_mask(self.mask(key))
            self._mimi_rows = key

    def reset_mimi(self, rows: Sequence[int]) -> None:
        self.mimi.reset_streaming(self.mask(rows))
        self._mimi_rows = None  # a reset sets the reset rows' exec masks: set them again

    def encode(self, frames: dict[int, np.ndarray], rows: Sequence[int]) -> torch.Tensor:
        """Mimi codes (B, K, 1) of this step's frames (rows not in `rows` stand still)."""
        for i in rows:
            self._x[i, 0] = frames[i]
        self.set_mimi_rows(rows)
        return self.mimi.encode(torch.from_numpy(self._x).to(self.device))

    def decode(self, audio_tokens: torch.Tensor, rows: Sequence[int]) -> np.ndarray:
        """PCM (B, 1, frame_n) of the rows in `rows` (others: whatever, unused)."""
        self.set_mimi_rows(rows)
        return self.mimi.decode(audio_tokens.clamp(min=0)).float().cpu().numpy()

    def events(
        self, rows: Sequence[int], tok: np.ndarray, valid: Sequence[int], pcm: np.ndarray | None
    ) -> dict[int, list[ModelEvent]]:
        """Each row's events: its text piece (if any), then its audio; a row whose output is not
        out yet (the first steps, by the model's delays) gets none."""
        ok = set(valid)
        out: dict[int, list[ModelEvent]] = {}
        for i in rows:
            log = self.logs[i]
            if i not in ok:
                out[i] = []
                if log is not None:
                    log.append(None)
                continue
            if log is not None:
                log.append([int(t) for t in tok[i]])
            text = int(tok[i, 0])
            ev = []
            if text not in TEXT_NOT_A_PIECE:
                ev.append(
                    ModelEvent("text", text=self.tokenizer.id_to_piece(text).replace("\u2581", " "))
                )
            ev.append(ModelEvent.audio_chunk(pcm[i, 0]))
            out[i] = ev
        return out

    def close(self) -> None:
        for stack in reversed(self._exit):
            stack.close()
        self._exit = []


class MoshiRows(MimiRows):
    """kyutai's `LMGen` over B rows, each stepped as `moshi.server` steps its one session: the
    first frame of a session is encoded and then the encoder state is reset (the server discards
    it as "in the past"); rows out of step are masked (`support_out_of_sync`), so one row's
    start never stalls the others."""

    def __init__(
        self,
        lm: Any,
        mimi: Any,
        tokenizer: Any,
        batch_size: int,
        device: str,
        lm_gen_kwargs: dict[str, Any],
        kv_steps: int | None = None,
        log_tokens: bool = False,
    ):
        super().__init__(mimi, tokenizer, batch_size, device, log_tokens)
        self.kv_capacity = size_kv_cache(lm.transformer, int(lm.context), kv_steps)
        self.lm_gen = LMGen(lm, support_out_of_sync=True, **lm_gen_kwargs)
        self._exit.append(self.lm_gen.streaming(self.batch_size))
        self.first = [False] * self.batch_size
        self._lm_rows: tuple[int, ...] | None = None
        self.warm_up()

    def warm_up(self, steps: int = 3) -> None:
        """A few steps of silence on every row, then a reset (as `moshi.server` warms up): the
        first steps compile (torch.compile's graphs, CUDA graph capture) and belong to the load,
        not to the first sessions."""
        every = list(range(self.batch_size))
        silence = {i: np.zeros(self.frame_n, np.float32) for i in every}
        with torch.no_grad():
            for _ in range(steps):
                codes = self.encode(silence, every)
                tokens = self.lm_gen.step(codes[:, :, :1])
                self.decode(tokens[:, 1:], every)
            self.lm_gen.reset_streaming(self.mask(every))
            self.reset_mimi(every)
        if str(self.device).startswith("cuda"):
            torch.cuda.synchronize()

    def start_row(self, row: int, instruction: str | None, seed: int) -> int:
        self.first[row] = True
        return super().start_row(row, instruction, seed)

    def step(
        self, frames: dict[int, np.ndarray], prompting: Sequence[int]
    ) -> dict[int, list[ModelEvent]]:
        rows = sorted(frames)
        with torch.no_grad():
            reset = [i for i in rows if self.needs_reset[i]]
            if reset:
                self.lm_gen.reset_streaming(self.mask(reset))
                self.reset_mimi(reset)
                self._lm_rows = None
                for i in reset:
                    self.needs_reset[i] = False
            codes = self.encode(frames, rows)
            first = [i for i in rows if self.first[i]]
            if first:
                self.reset_mimi(first)
                for i in first:
                    self.first[i] = False
            if tuple(rows) != self._lm_rows:
                self.lm_gen.set_exec_mask(self.mask(rows))
                self._lm_rows = tuple(rows)
            tokens = self.lm_gen.step(codes[:, :, :1])
            assert tokens is not None  # support_out_of_sync: rows not out yet hold -1
            tok = tokens[:, :, 0].cpu().numpy()
            valid = [i for i in rows if tok[i, 0] >= 0]
            pcm = self.decode(tokens[:, 1:], valid) if valid else None
        return self.events(rows, tok, valid, pcm)
