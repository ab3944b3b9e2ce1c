"""SileroVAD / VADStream with the real Silero model on real espeak-ng speech."""

from __future__ import annotations

import numpy as np
import pytest

from fdeval.audio.tts import SILENCE_THRESHOLD, silence
from fdeval.audio.vad import CHUNK, SileroVAD, VADEvent

SR = 16000


@pytest.fixture(scope="module")
def vad() -> SileroVAD:
    return SileroVAD()


@pytest.fixture(scope="module")
def embedded(sentence):
    """The sentence starting at 1.0 s, then 1.5 s of silence: (audio, speech onset s, speech end s)."""
    x = np.concatenate([silence(1.0, SR), sentence.samples, silence(1.5, SR)])
    first_sound = np.flatnonzero(np.abs(sentence.samples) > SILENCE_THRESHOLD)[0] / SR
    return x, 1.0 + first_sound, 1.0 + sentence.words[-1].end_s


def _run(vad: SileroVAD, pieces: list[np.ndarray]):
    stream = vad.stream()
    events = [e for p in pieces for e in stream.push(p)]
    return stream, events + stream.close()


def test_onset_and_offset_of_embedded_speech(vad, embedded):
    x, onset_s, end_s = embedded
    frames = [
        x[i : i + 320] for i in range(0, x.size, 320)
    ]  # 20 ms frames, as a session pushes them
    stream, events = _run(vad, frames)
    assert events[0].kind == "onset"
    assert abs(events[0].t_s - onset_s) <= 0.1, (events[0], onset_s)
    assert events[-1].kind == "offset"
    assert end_s - 0.1 <= events[-1].t_s <= end_s + 0.3, (events[-1], end_s)
    assert [e.kind for e in events] == ["onset", "offset"] * (len(events) // 2)
    assert stream.segments == [(a.t_s, b.t_s) for a, b in zip(events[::2], events[1::2])]
    assert not stream.is_speaking
    assert stream.last_onset_s == events[-2].t_s
    assert stream.silence_s == pytest.approx(stream.t_s - events[-1].t_s)
    assert stream.silence_s > 1.0


def test_silence_gives_no_events(vad):
    stream, events = _run(vad, [silence(3.0, SR)])
    assert events == [] and stream.segments == []
    assert stream.last_onset_s is None and not stream.is_speaking
    assert stream.t_s == pytest.approx(3.0 // (CHUNK / SR) * CHUNK / SR)
    assert stream.silence_s == stream.t_s


def test_results_do_not_depend_on_chunking(vad, embedded):
    x = embedded[0]
    cuts = np.sort(np.random.default_rng(7).choice(np.arange(1, x.size), 36, replace=False))
    pieces = np.split(x, cuts)
    assert len(pieces) == 37
    one, events_one = _run(vad, [x])
    many, events_many = _run(vad, pieces)
    assert events_one == events_many and len(events_one) >= 2
    assert one.segments == many.segments and one.t_s == many.t_s


def test_stream_state_while_speaking_and_close(vad, sentence):
    # Audio that ends mid-speech ("Hello the|re"): close() must end the open segment.
    hello, there = sentence.words[:2]
    assert there.start_s - hello.end_s < 0.05  # no pause in between
    x = np.concatenate([silence(0.5, SR), sentence.samples[: round((there.end_s - 0.05) * SR)]])
    stream = vad.stream()
    events = stream.push(x)
    assert [e.kind for e in events] == ["onset"]
    assert stream.is_speaking and stream.silence_s == 0.0
    assert stream.last_onset_s == events[0].t_s
    closing = stream.close()
    assert closing == [VADEvent("offset", stream.t_s)]
    assert stream.segments == [(events[0].t_s, stream.t_s)]
    assert not stream.is_speaking and stream.close() == []
    with pytest.raises(RuntimeError):
        stream.push(x)


def test_probs_offline(vad, embedded):
    x, onset_s, end_s = embedded
    p = vad.probs(x)
    assert p.shape == (-(-x.size // CHUNK),) and p.dtype == np.float32
    assert ((0 <= p) & (p <= 1)).all()
    t = np.arange(p.size) * CHUNK / SR
    assert p[t < onset_s - 0.1].max() < 0.2
    assert np.median(p[(t > onset_s + 0.2) & (t < end_s - 0.2)]) > 0.5


def test_bad_arguments(vad):
    with pytest.raises(ValueError):
        SileroVAD(sample_rate=8000)
    with pytest.raises(ValueError):
        vad.stream(threshold=0.5, neg_threshold=0.7)
    with pytest.raises(TypeError):
        vad.stream().push(np.zeros(512, dtype=np.int16))


def test_min_durations_drop_short_runs_and_bridge_pauses(vad, embedded):
    x, onset_s, end_s = embedded
    default = vad.stream()
    default.push(x)
    default.close()
    assert len(default.segments) >= 2  # the sentence has pauses longer than 0.1 s
    bridged = vad.stream(min_silence_s=1.0)
    bridged.push(x)
    bridged.close()
    assert len(bridged.segments) == 1
    assert bridged.segments[0] == (default.segments[0][0], default.segments[-1][1])
    for t in (t for seg in default.segments for t in seg):
        assert (t * SR / CHUNK) == pytest.approx(round(t * SR / CHUNK))  # chunk boundaries
    never = vad.stream(min_speech_s=10.0)
    assert never.push(x) == [] and never.close() == [] and never.segments == []


def _streams_alone_and_batched(sentence, n_streams: int, seed: int):
    """n streams of speech at different offsets, pushed in pieces of random lengths: each stream
    alone (`push`), and all of them through one BatchedVAD (`push_async`, one push per stream per
    loop turn, as sessions do)."""
    import asyncio

    from fdeval.audio.vad import BatchedVAD

    rng = np.random.default_rng(seed)
    audio = []
    for i in range(n_streams):
        lead = np.zeros(int(rng.integers(0, 16000)), np.float32)
        audio.append(
            np.concatenate(
                [
                    lead,
                    sentence.samples * np.float32(rng.uniform(0.2, 1.0)),
                    np.zeros(8000, np.float32),
                ]
            )
        )
    cuts = [np.cumsum(rng.integers(100, 3000, size=len(a) // 100))[:-1] for a in audio]
    pieces = [[p for p in np.split(a, c[c < len(a)]) if len(p)] for a, c in zip(audio, cuts)]

    def alone(i):
        s = SileroVAD().stream()
        events = [s.push(p) for p in pieces[i]]
        return events + [s.close()], s.segments

    batched = BatchedVAD()

    async def one(i):
        s = batched.stream()
        events = []
        for p in pieces[i]:
            events.append(await s.push_async(p))
        return events + [s.close()], s.segments

    async def all_():
        return await asyncio.gather(*(one(i) for i in range(n_streams)))

    return [alone(i) for i in range(n_streams)], asyncio.run(all_()), batched


@pytest.mark.parametrize("n_streams", [1, 3, 8, 33])
def test_batched_streams_give_what_each_stream_gives_alone(sentence, n_streams):
    alone, together, batched = _streams_alone_and_batched(sentence, n_streams, seed=n_streams)
    assert together == alone  # every push's events and every segment, exactly
    assert sum(1 for ev, _ in alone for push in ev for e in push if e.kind == "onset") >= n_streams
    if n_streams > 1:  # chunks of several streams shared a call
        assert batched.calls < batched.chunks


def test_batched_probabilities_are_bit_identical_to_single_calls():
    """The batched model call gives each row exactly what a call of its own gives, for batch sizes
    a lockstep run uses (the recording must not depend on which sessions ran beside it)."""
    from fdeval.audio.vad import _Recurrence, _session, step_together

    rng = np.random.default_rng(0)
    for n in (2, 5, 8, 16, 31, 64):
        single = [_Recurrence(_session(1)) for _ in range(n)]
        group = [_Recurrence(_session(1)) for _ in range(n)]
        for k in range(6):
            chunks = [
                (rng.standard_normal(CHUNK) * rng.uniform(0.01, 0.5)).astype(np.float32)
                for _ in range(n)
            ]
            want = [m.step(c) for m, c in zip(single, chunks)]
            assert step_together(group, chunks) == want, (n, k)


def test_a_failing_batch_reaches_every_waiting_push(sentence):
    import asyncio

    from fdeval.audio.vad import BatchedVAD

    batched = BatchedVAD()

    async def go():
        a, b = batched.stream(), batched.stream()
        b.close()
        return await asyncio.gather(
            a.push_async(sentence.samples[:4000]),
            b.push_async(sentence.samples[:4000]),
            return_exceptions=True,
        )

    ra, rb = asyncio.run(go())
    # b's push after close fails, and so does the batch it was in: nobody waits forever
    assert (
        isinstance(ra, RuntimeError) and isinstance(rb, RuntimeError) and "after close" in str(rb)
    )
