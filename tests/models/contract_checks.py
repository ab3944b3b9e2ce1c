"""The model contract as checks that every adapter passes against its stand-in.

Plain async functions without pytest, so that the moshi venv can run them too (the in-process
batched Moshi lives there). Each takes a `Target` (the model, the user audio, and what its
stand-in can tell about itself), raises AssertionError saying what broke, and returns what it
measured. `tests/models/test_contract.py` runs them for every adapter in fdeval/conf/model/.

- chunking: the same user audio sent in 1 piece and in 37 pieces of uneven length gives the
  same events (text pieces, model audio sample for sample, flushes) and the stand-in hears the
  same audio.
- text before audio: a text piece is placed (the model audio before it in the event stream,
  plus its `offset_s`) no later than where its words start in the model's audio, as the stand-in
  knows it; for an in-process model, a step's text comes before that step's audio.
- close twice: leaving a session again is a no-op, and never hands back a server that another
  session holds by then.
- cancellation: a session task cancelled mid-stream leaves no task behind, hands its server (or
  batch row) back, and the next session works.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from fdeval.models.base import DuplexModel, ModelEvent

PIECES = 37
SEED = 7


@dataclass
class Target:
    model: DuplexModel
    audio: np.ndarray  # the user's audio at the model's rate: a question, then silence
    has_text: bool  # the stand-in sends text pieces
    # where each text piece's words start in the model's audio (s), given all pieces in order;
    # None: the model is in-process and a step's text must come before the step's audio
    due: Callable[[list[str]], list[float]] | None = None
    heard: Callable[[], list[Any]] | None = (
        None  # the stand-in's records of what it heard, per session
    )
    held: Callable[[], int] | None = None  # servers / rows the model holds now
    # the model is done once nothing came for this long: well above a stand-in's pause on a loaded
    # machine (a drain cut short by one makes the 1-piece and 37-piece sessions differ)
    quiet_s: float = 1.5
    max_wait_s: float = 20.0
    text_check: str = ""  # why the text check cannot apply (then it is skipped with this reason)
    runs: dict[str, Any] | None = None  # sessions_in_1_and_37, once run


def pieces(audio: np.ndarray, n: int = PIECES, seed: int = PIECES) -> list[np.ndarray]:
    """`audio` cut at n - 1 random places (not on frame boundaries)."""
    cuts = np.sort(
        np.random.default_rng(seed).choice(np.arange(1, len(audio)), n - 1, replace=False)
    )
    return np.split(audio, cuts)


async def drain(session, quiet_s: float, max_wait_s: float) -> list[list[ModelEvent]]:
    out, t_last = [], time.monotonic()
    t_end = t_last + max_wait_s
    while time.monotonic() < t_end and time.monotonic() - t_last < quiet_s:
        await asyncio.sleep(0.02)
        batch = await session.receive()
        if batch:
            out.append(batch)
            t_last = time.monotonic()
    return out


async def play(t: Target, parts: list[np.ndarray]) -> list[list[ModelEvent]]:
    """One session: every part sent (receiving after each), then what comes until it is quiet."""
    batches = []
    async with t.model.session(None, SEED) as s:
        for part in parts:
            await s.send(part)
            batches.append(await s.receive())
        batches += await drain(s, t.quiet_s, t.max_wait_s)
    return batches


def flat(batches: list[list[ModelEvent]]) -> list[ModelEvent]:
    return [e for b in batches for e in b]


def model_audio(events: list[ModelEvent]) -> np.ndarray:
    chunks = [e.audio for e in events if e.kind == "audio"]
    return np.concatenate(chunks) if chunks else np.zeros(0, np.float32)


async def new_record(
    t: Target, n_before: int, timeout_s: float = 120.0
) -> Any:  # returns once it is there
    """The stand-in's record of the session that just ended (it writes it once it sees the close)."""
    assert t.heard is not None
    deadline = time.monotonic() + timeout_s
    while True:
        rows = t.heard()
        if len(rows) > n_before:
            return rows[n_before]
        assert time.monotonic() < deadline, f"the stand-in recorded no session in {timeout_s:g} s"
        await asyncio.sleep(0.05)


async def sessions_in_1_and_37(t: Target) -> dict[str, Any]:
    """Events and the stand-in's record of the same audio sent in 1 and in 37 pieces."""
    out: dict[str, Any] = {}
    for n in (1, PIECES):
        n_before = len(t.heard()) if t.heard else 0
        out[f"batches_{n}"] = await play(t, pieces(t.audio, n) if n > 1 else [t.audio])
        out[f"heard_{n}"] = await new_record(t, n_before) if t.heard else None
    return out


def check_chunking(t: Target, runs: dict[str, Any]) -> dict[str, Any]:
    a, b = flat(runs["batches_1"]), flat(runs[f"batches_{PIECES}"])
    audio_a, audio_b = model_audio(a), model_audio(b)
    texts_a, texts_b = (
        [e.text for e in a if e.kind == "text"],
        [e.text for e in b if e.kind == "text"],
    )
    flush_a, flush_b = (
        sum(e.kind == "interrupted" for e in a),
        sum(e.kind == "interrupted" for e in b),
    )
    sr = t.model.sample_rate
    assert float(np.abs(audio_a).max(initial=0.0)) > 0.01, (
        "the stand-in sent no model audio: the check proves nothing"
    )
    if t.has_text:
        assert texts_a, "the stand-in sent no text: the check proves nothing"
    assert texts_a == texts_b, (
        f"text pieces differ: 1 piece {texts_a[:8]} vs {PIECES} pieces {texts_b[:8]}"
    )
    assert flush_a == flush_b, f"flushes differ: {flush_a} vs {flush_b}"
    assert len(audio_a) == len(audio_b) and np.array_equal(audio_a, audio_b), (
        f"model audio differs: {len(audio_a) / sr:.3f} s vs {len(audio_b) / sr:.3f} s"
        + (
            f", max difference {np.abs(audio_a - audio_b).max():.2e}"
            if len(audio_a) == len(audio_b)
            else ""
        )
    )
    if t.heard is not None:
        assert runs["heard_1"] == runs[f"heard_{PIECES}"], (
            f"the stand-in heard different audio: {runs['heard_1']} vs {runs[f'heard_{PIECES}']}"
        )
    return {
        "model_audio_s": round(len(audio_a) / sr, 3),
        "text_pieces": len(texts_a),
        "flushes": flush_a,
        "heard": runs["heard_1"],
    }


def check_text_before_audio(t: Target, runs: dict[str, Any]) -> dict[str, Any]:
    sr = t.model.sample_rate
    worst = -np.inf
    n_text = 0
    for key in ("batches_1", f"batches_{PIECES}"):
        batches = runs[key]
        events = flat(batches)
        texts = [e for e in events if e.kind == "text"]
        n_text += len(texts)
        if not t.has_text:
            assert not texts, f"{len(texts)} text pieces from a stand-in that sends none"
            continue
        assert texts, "no text pieces: the check proves nothing"
        if (
            t.due is None
        ):  # in-process: each step's text before that step's audio, in the same batch
            for batch in batches:
                kinds = [e.kind for e in batch]
                for i, k in enumerate(kinds):
                    assert k != "text" or "audio" in kinds[i + 1 :], (
                        f"a text piece after its step's audio: {kinds}"
                    )
            continue
        due = t.due([e.text for e in texts])
        pos, k = 0, 0
        for e in events:
            if e.kind == "audio":
                pos += len(e.audio)
            elif e.kind == "text":
                late = pos / sr + e.offset_s - due[k]
                worst = max(worst, late)
                assert late <= 0.02, (
                    f"text {e.text!r} placed at {pos / sr + e.offset_s:.3f} s, its audio starts at "
                    f"{due[k]:.3f} s ({key})"
                )
                k += 1
    return {"text_pieces": n_text, "latest_s": None if worst == -np.inf else round(float(worst), 4)}


async def check_close_twice(t: Target) -> dict[str, Any]:
    frame_n = int(round(t.model.frame_s * t.model.sample_rate))
    s = t.model.session(None, SEED)
    await s.__aenter__()
    await s.send(t.audio[: 3 * frame_n])
    await s.receive()
    await s.__aexit__(None, None, None)
    await s.__aexit__(None, None, None)
    out: dict[str, Any] = {"closed_twice": True}
    if t.held is not None:
        assert t.held() == 0, "the server was not handed back"
        other = t.model.session(None, SEED)
        await other.__aenter__()
        held = t.held()
        await s.__aexit__(None, None, None)  # again, while another session holds the server
        assert t.held() == held, (
            "closing an ended session again handed back the server another session holds"
        )
        await other.__aexit__(None, None, None)
        assert t.held() == 0
        out["held_by_other"] = held
    return out


async def check_cancel(t: Target) -> dict[str, Any]:
    m = t.model
    frame_n = int(round(m.frame_s * m.sample_rate))
    frames = [t.audio[i : i + frame_n] for i in range(0, len(t.audio) - frame_n + 1, frame_n)]
    pace = m.frame_s if m.clock == "realtime" else 0.0
    before = asyncio.all_tasks()
    got = asyncio.Event()

    async def stream() -> None:
        async with m.session(None, SEED) as s:
            k = 0
            while True:
                await s.send(frames[k % len(frames)])
                if await s.receive():
                    got.set()
                k += 1
                await asyncio.sleep(pace)

    task = asyncio.create_task(stream())
    waiter = asyncio.ensure_future(got.wait())
    done, _ = await asyncio.wait(
        {task, waiter}, timeout=t.max_wait_s, return_when=asyncio.FIRST_COMPLETED
    )
    waiter.cancel()
    if task in done:
        task.result()  # the session failed: its error
    assert got.is_set(), f"no events within {t.max_wait_s:g} s"
    t_cancel = time.monotonic()
    task.cancel()
    try:
        await task
    except asyncio.CancelledError:
        pass
    else:
        raise AssertionError("the cancelled session did not end with CancelledError")
    cancel_s = time.monotonic() - t_cancel
    me = asyncio.current_task()
    deadline = (
        time.monotonic() + 30.0
    )  # they end within a loop turn or two; a loaded machine may take a while
    while True:
        left = [x for x in asyncio.all_tasks() - before if x is not me and not x.done()]
        if not left or time.monotonic() > deadline:
            break
        await asyncio.sleep(0.02)
    assert not left, (
        f"tasks left behind by the cancelled session: {[x.get_name() + ' ' + repr(x.get_coro()) for x in left]}"
    )
    if t.held is not None:
        assert t.held() == 0, "the cancelled session did not hand its server back"
    again = model_audio(flat(await play(t, [t.audio])))
    assert float(np.abs(again).max(initial=0.0)) > 0.01, (
        "no model audio from the session after the cancelled one"
    )
    return {
        "cancel_s": round(cancel_s, 3),
        "next_session_audio_s": round(len(again) / m.sample_rate, 3),
    }
