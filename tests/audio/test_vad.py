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
    frames = [x[i : i + 320] for i in range(0, x.size, 320)]  # 20 ms frames, as a session pushes them
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
