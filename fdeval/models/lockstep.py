"""Batched in-process models under the lockstep clock: B sessions share one forward pass.

A batched model (`BatchedModel`) holds B rows of streaming state in one `Rows` object (its
weights and per-row caches, loaded on the first session). Each session owns a row for its
lifetime; the rows form a slot pool (`SlotPool`): when a session ends its row is freed and the
next case starts in it, so sessions of different lengths keep the batch full. A session's
`send(frame)` hands its frame to the pool and waits at the batch barrier: once every row in
conversation has handed in its frame, one batched step runs and every session gets its events.

A row may first run a prompt of its own (PersonaPlex conditions every session on a voice and a
text prompt before it listens): `Rows.start_row` says how many steps, the pool runs them in the
row alongside the other rows' conversation steps (the batch stays full), and the session's entry
returns once its prompt is done. A step in which no row is in conversation runs at once.

The barrier does not step the moment the last frame arrives: it lets every task that is ready run
first (`call_soon`), so sessions that are just starting or finishing a frame's bookkeeping join
the same step. Nothing here imports torch: the `Rows` implementations do
(`fdeval.models.moshi_lockstep`, `fdeval.models.personaplex_lockstep`).
"""

from __future__ import annotations

import abc
import asyncio
import collections
import time
from typing import Any, Callable, ClassVar, Sequence

import numpy as np

from fdeval.models.base import DuplexModel, DuplexSession, ModelEvent


class ModelLoadError(RuntimeError):
    """The checkpoint could not be loaded: every session of the run fails with it (not a
    `ModelUnavailable`: no retry)."""


class Rows(abc.ABC):
    """The batched model behind a slot pool: B rows of streaming state, stepped together."""

    batch_size: int
    frame_n: int  # samples per input frame at the model's rate

    @abc.abstractmethod
    def start_row(self, row: int, instruction: str | None, seed: int) -> int:
        """A new session takes `row`: its state is reset at the row's next step. Returns the
        number of prompt steps the row runs before it takes the session's first frame."""

    @abc.abstractmethod
    def step(
        self, frames: dict[int, np.ndarray], prompting: Sequence[int]
    ) -> dict[int, list[ModelEvent]]:
        """One batched step: `frames` for the rows in conversation, one prompt step for each row
        in `prompting`; every other row stands still. Returns the events of each frame's row."""

    def end_row(self, row: int) -> None:
        """The session in `row` ended (its state is reset when the row is next taken)."""

    @abc.abstractmethod
    def close(self) -> None:
        """Leave streaming mode and drop the per-row state."""


class SlotPool:
    """The rows of one `Rows`, lent to sessions, and the barrier that steps them together."""

    # Called after every batched step when set: benchmarks/moshi_lockstep_speed.py times the bare
    # forward between the harness's steps with it, so both see the machine in the same minutes.
    # None in runs.
    probe: ClassVar[Callable[[], None] | None] = None

    def __init__(self, rows: Rows):
        self.rows = rows
        self.B = rows.batch_size
        self.owner: list[Any] = [None] * self.B
        self.prompt_left = [0] * self.B  # prompt steps a row runs before it takes frames
        self._prompt_done: dict[int, asyncio.Future] = {}
        self._free_waiters: collections.deque[asyncio.Future] = collections.deque()
        self.frames: dict[int, np.ndarray] = {}
        self.waiters: dict[int, asyncio.Future] = {}
        self._scheduled = False
        self._freed = False  # a row was freed since the last step
        self.steps = 0  # batched steps run
        self.row_steps = 0  # session frames computed
        self.prompt_steps = 0  # prompt steps computed (row-steps)
        self.step_s = 0.0  # wall time inside Rows.step

    # -- rows ---------------------------------------------------------------------------------
    async def acquire(self, session: Any, instruction: str | None, seed: int) -> int:
        """A free row for `session`, once the row's prompt (if any) has run."""
        loop = asyncio.get_running_loop()
        while None not in self.owner:
            fut = loop.create_future()
            self._free_waiters.append(fut)
            await fut
        row = self.owner.index(None)
        self.owner[row] = session
        try:
            n = int(self.rows.start_row(row, instruction, seed))
        except BaseException:
            self.owner[row] = None
            self._wake_free()
            raise
        if n > 0:
            self.prompt_left[row] = n
            done = self._prompt_done[row] = loop.create_future()
            self._maybe_step()
            try:
                await done
            except BaseException:
                self.release(row)
                raise
        return row

    def release(self, row: int) -> None:
        if self.owner[row] is None:
            return
        self.owner[row] = None
        self.prompt_left[row] = 0
        self.frames.pop(row, None)
        for futs in (self.waiters, self._prompt_done):
            fut = futs.pop(row, None)
            if fut is not None and not fut.done():
                fut.cancel()
        self.rows.end_row(row)
        self._freed = True
        self._wake_free()
        self._maybe_step()

    def _wake_free(self) -> None:
        while self._free_waiters:
            fut = self._free_waiters.popleft()
            if not fut.done():
                fut.set_result(None)
                return

    # -- the barrier --------------------------------------------------------------------------
    async def submit(self, row: int, frame: np.ndarray) -> list[ModelEvent]:
        if row in self.frames:
            raise RuntimeError(f"row {row} sent twice in one step")
        if self.prompt_left[row]:
            raise RuntimeError(f"row {row} sent a frame before its prompt ended")
        self.frames[row] = frame
        fut = asyncio.get_running_loop().create_future()
        self.waiters[row] = fut
        self._maybe_step()
        return await fut

    def _maybe_step(self) -> None:
        if not self._scheduled and (self.frames or any(self.prompt_left)):
            self._scheduled = True
            asyncio.get_running_loop().call_soon(self._try_step)

    def _try_step(self) -> None:
        self._scheduled = False
        if self._freed and None in self.owner:
            # a row was just freed: one more loop turn lets the worker that freed it start its
            # next case there (it does so without waiting), so that the next step has it
            self._freed = False
            self._maybe_step()
            return
        self._freed = False
        talking = [
            i for i in range(self.B) if self.owner[i] is not None and not self.prompt_left[i]
        ]
        prompting = [i for i in range(self.B) if self.prompt_left[i]]
        if any(i not in self.frames for i in talking) or not (self.frames or prompting):
            return
        frames, self.frames = self.frames, {}
        waiters, self.waiters = self.waiters, {}
        t0 = time.perf_counter()
        try:
            out = self.rows.step(frames, prompting)
        except BaseException as e:
            for fut in [
                *waiters.values(),
                *(self._prompt_done.pop(i) for i in prompting if i in self._prompt_done),
            ]:
                if not fut.done():
                    fut.set_exception(e)
            return
        finally:
            self.step_s += time.perf_counter() - t0
        self.steps += 1
        self.row_steps += len(frames)
        self.prompt_steps += len(prompting)
        for row, fut in waiters.items():
            if not fut.done():
                fut.set_result(out.get(row, []))
        for row in prompting:
            self.prompt_left[row] -= 1
            if not self.prompt_left[row]:
                fut = self._prompt_done.pop(row, None)
                if fut is not None and not fut.done():
                    fut.set_result(None)
        if SlotPool.probe is not None:
            SlotPool.probe()
        if any(self.prompt_left):  # prompts go on even while no session hands in a frame
            self._maybe_step()

    def close(self) -> None:
        self.rows.close()


class BatchedModel(DuplexModel):
    """A model computed in this process, `batch_size` sessions per forward pass (lockstep clock).

    Subclasses build their `Rows` in `_load` (called once, at the first session) and say who they
    are in `identity`. A load that fails is remembered: every later session of the run fails at
    once with the same `ModelLoadError`."""

    clock = "lockstep"

    def __init__(self, name: str, batch_size: int):
        self.name, self.batch_size = name, int(batch_size)
        self._pool: SlotPool | None = None
        self._load_error: str | None = None
        self.load_s = 0.0
        self.counted: dict[str, float] = {}  # the last pool's counters, kept when it closes

    @property
    def concurrency(self) -> int:
        return self.batch_size

    @abc.abstractmethod
    def _load(self) -> Rows:
        """Load the weights and open `batch_size` rows of streaming state."""

    @property
    def pool(self) -> SlotPool:
        if self._load_error is not None:
            raise ModelLoadError(self._load_error)
        if self._pool is None:
            t0 = time.perf_counter()
            try:
                self._pool = SlotPool(self._load())
            except Exception as e:
                first = (str(e).strip().splitlines() or [""])[0]
                self._load_error = (
                    f"{self.name}: the model could not be loaded ({type(e).__name__}: {first}); "
                    "not retried in this run"
                )
                raise ModelLoadError(self._load_error) from e
            self.load_s = time.perf_counter() - t0
        return self._pool

    def session(self, instruction: str | None, seed: int) -> "RowSession":
        return RowSession(self, instruction, seed)

    def counters(self) -> dict[str, float]:
        """Batched steps, session frames and prompt steps computed, and the wall time in steps."""
        p = self._pool
        if p is None:
            return dict(self.counted)
        return {
            "steps": p.steps,
            "row_steps": p.row_steps,
            "prompt_steps": p.prompt_steps,
            "step_s": p.step_s,
        }

    def close(self) -> None:
        if self._pool is not None:
            self.counted = self.counters()
            self._pool.close()
            self._pool = None


class RowSession(DuplexSession):
    """One session: one row of the batch for its lifetime."""

    def __init__(self, model: BatchedModel, instruction: str | None, seed: int):
        self.model, self.instruction, self.seed = model, instruction, seed
        self.frame_n = int(round(model.frame_s * model.sample_rate))
        self._pending: list[ModelEvent] = []
        self.row: int | None = None
        self._pool: SlotPool | None = None
        self.token_log: list | None = None  # the row's tokens per step, where the model logs them

    async def __aenter__(self) -> "RowSession":
        self._pool = self.model.pool
        self.row = await self._pool.acquire(self, self.instruction, self.seed)
        logs = getattr(self._pool.rows, "logs", None)
        self.token_log = logs[self.row] if logs is not None else None
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self.row is not None and self._pool is not None:
            self._pool.release(self.row)
        self.row = None

    async def send_frame(self, frame: np.ndarray) -> None:
        assert self.row is not None and self._pool is not None, "send outside the session"
        if len(frame) != self.frame_n:
            raise ValueError(
                f"{self.model.name} takes frames of {self.frame_n} samples, got {len(frame)}"
            )
        self._pending.extend(await self._pool.submit(self.row, frame))

    async def receive(self) -> list[ModelEvent]:
        out, self._pending = self._pending, []
        return out
