"""The slot pool and batch barrier of batched lockstep models (fdeval.models.lockstep), on a
scripted `Rows` (numpy only; the torch side is tested in test_moshi_lockstep.py and
test_personaplex_lockstep.py): rows are lent and reused, every step waits for every row in
conversation, prompts run in their row beside the other rows' frames, failures and cancellations
reach every waiting session and free the rows."""

from __future__ import annotations

import asyncio

import numpy as np
import pytest

from fdeval.models.base import ModelEvent
from fdeval.models.lockstep import BatchedModel, ModelLoadError, Rows

N = 4  # samples per frame of the scripted model


class ScriptedRows(Rows):
    """Echoes each frame's first sample back as audio; a session whose instruction is "prompt:K"
    first runs K prompt steps. Records every step: (rows with frames, rows prompting)."""

    def __init__(self, batch_size: int, fail_at_step: int | None = None):
        self.batch_size, self.frame_n = batch_size, N
        self.log: list[tuple[tuple[int, ...], tuple[int, ...]]] = []
        self.started: list[tuple[int, str | None, int]] = []
        self.ended: list[int] = []
        self.fail_at_step = fail_at_step
        self.closed = False

    def start_row(self, row, instruction, seed):
        self.started.append((row, instruction, seed))
        return (
            int(instruction.split(":")[1])
            if instruction and instruction.startswith("prompt:")
            else 0
        )

    def step(self, frames, prompting):
        if self.fail_at_step is not None and len(self.log) == self.fail_at_step:
            raise RuntimeError("the batch failed")
        self.log.append((tuple(sorted(frames)), tuple(prompting)))
        return {
            i: [ModelEvent.audio_chunk(np.full(N, f[0], np.float32))] for i, f in frames.items()
        }

    def end_row(self, row):
        self.ended.append(row)

    def close(self):
        self.closed = True


class Scripted(BatchedModel):
    sample_rate = 1000
    frame_s = N / 1000

    def __init__(self, batch_size: int, **kw):
        super().__init__("scripted", batch_size)
        self.kw = kw
        self.rows: ScriptedRows | None = None

    def _load(self):
        self.rows = ScriptedRows(self.batch_size, **self.kw)
        return self.rows


async def talk(model, instruction, values):
    """A session that sends one frame per value and returns what came back, in order."""
    async with model.session(instruction, len(values)) as s:
        got = []
        for v in values:
            await s.send(np.full(N, v, np.float32))
            got += [float(e.audio[0]) for e in await s.receive()]
            await asyncio.sleep(0)  # some bookkeeping between frames, as the orchestrator does
        return s.row, got


def test_rows_are_lent_stepped_together_and_reused():
    m = Scripted(2)

    async def go():
        return await asyncio.gather(
            talk(m, None, [1, 2, 3, 4, 5, 6]),
            talk(m, "a", [10, 20]),
            _later(talk(m, "b", [7, 8, 9])),
        )

    async def _later(coro):
        await asyncio.sleep(0)  # the third session asks once both rows are taken
        return await coro

    (r1, g1), (r2, g2), (r3, g3) = asyncio.run(go())
    assert (g1, g2, g3) == (
        [1, 2, 3, 4, 5, 6],
        [10, 20],
        [7, 8, 9],
    )  # each session hears only its own row
    assert r1 != r2 and r3 == r2  # the third session waited for the second's row and took it
    rows = m.rows
    assert [s[0] for s in rows.started] == [r1, r2, r2] and rows.ended.count(r2) == 2
    # the batch stayed full while there was work for both rows (the reused row's new session
    # joined the very next step); the 6-frame session ends alone
    assert (r1, r2) == (0, 1) and rows.log == [((0, 1), ())] * 5 + [((0,), ())]
    assert m.pool.steps == 6 and m.pool.row_steps == 11
    m.close()
    assert rows.closed and m._pool is None


def test_a_prompt_runs_in_its_row_beside_the_other_rows_frames():
    m = Scripted(2)

    async def go():
        return await asyncio.gather(talk(m, None, list(range(1, 9))), talk(m, "prompt:3", [50, 60]))

    (r1, g1), (r2, g2) = asyncio.run(go())
    assert g1 == list(range(1, 9)) and g2 == [50, 60]
    log = m.rows.log
    # three steps carry row r1's frames and row r2's prompt together; then both rows talk
    assert log[:3] == [((r1,), (r2,))] * 3
    assert log[3:5] == [((r1, r2), ())] * 2 and all(f == (r1,) for f, _ in log[5:])
    assert m.pool.prompt_steps == 3


def test_prompts_run_on_their_own_when_no_row_is_talking():
    m = Scripted(3)

    async def go():
        return await asyncio.gather(talk(m, "prompt:4", [1]), talk(m, "prompt:2", [2]))

    (r1, g1), (r2, g2) = asyncio.run(go())
    assert (g1, g2) == ([1], [2])
    # both prompts together; the short one's session talks beside the long prompt; that one ends alone
    assert m.rows.log == [((), (r1, r2)), ((), (r1, r2)), ((r2,), (r1,)), ((), (r1,)), ((r1,), ())]


def test_a_failed_step_reaches_every_waiting_session_and_frees_the_rows():
    m = Scripted(2, fail_at_step=2)

    async def go():
        return await asyncio.gather(
            talk(m, None, [1, 2, 3, 4]), talk(m, "prompt:5", [9]), return_exceptions=True
        )

    a, b = asyncio.run(go())
    assert (
        isinstance(a, RuntimeError)
        and isinstance(b, RuntimeError)
        and str(a) == str(b) == "the batch failed"
    )
    assert m.pool.owner == [None, None] and not any(m.pool.prompt_left)
    m.rows.fail_at_step = None
    assert asyncio.run(talk(m, None, [5]))[1] == [5]  # the pool still works


def test_a_session_cancelled_in_its_prompt_frees_its_row():
    m = Scripted(1)

    async def go():
        task = asyncio.ensure_future(talk(m, "prompt:1000000", [1]))
        while not m.pool.prompt_steps:
            await asyncio.sleep(0)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        return await talk(m, None, [7])

    assert asyncio.run(go())[1] == [7]
    assert m.pool.owner == [None] and m.rows.ended == [0, 0]


def test_a_failed_load_is_remembered():
    class Broken(Scripted):
        loads = 0

        def _load(self):
            Broken.loads += 1
            raise OSError("no such checkpoint")

    m = Broken(2)
    for _ in range(2):
        with pytest.raises(
            ModelLoadError, match="could not be loaded .*no such checkpoint.*not retried"
        ):
            asyncio.run(talk(m, None, [1]))
    assert Broken.loads == 1


def test_a_frame_of_the_wrong_size_is_refused():
    m = Scripted(1)

    async def go():
        async with m.session(None, 0) as s:
            await s.send_frame(np.zeros(N + 1, np.float32))

    with pytest.raises(ValueError, match="takes frames of 4 samples, got 5"):
        asyncio.run(go())
