"""resample / StreamResampler: chunking never changes the output, and streaming equals offline."""

from __future__ import annotations

import numpy as np
import pytest

from fdeval.audio.resample import StreamResampler, resample


def _uneven_pieces(x: np.ndarray, n_pieces: int, seed: int) -> list[np.ndarray]:
    cuts = np.sort(
        np.random.default_rng(seed).choice(np.arange(1, x.size), n_pieces - 1, replace=False)
    )
    return np.split(x, cuts)


def _stream(sr_in: int, sr_out: int, pieces: list[np.ndarray]) -> np.ndarray:
    r = StreamResampler(sr_in, sr_out)
    return np.concatenate([r.push(p) for p in pieces] + [r.flush()])


@pytest.mark.parametrize(
    ("sr_in", "sr_out"), [(16000, 24000), (24000, 16000), (22050, 16000), (16000, 44100)]
)
def test_chunking_invariant_and_equal_to_offline(sr_in, sr_out):
    x = (np.random.default_rng(1).standard_normal(sr_in) * 0.3).astype(np.float32)  # 1 s
    whole = _stream(sr_in, sr_out, [x])
    pieces = _uneven_pieces(x, 37, seed=2)
    assert len(pieces) == 37 and len({p.size for p in pieces}) > 10
    chunked = _stream(sr_in, sr_out, pieces)
    offline = resample(x, sr_in, sr_out)
    assert whole.dtype == chunked.dtype == offline.dtype == np.float32
    assert whole.shape == chunked.shape == offline.shape == (-(-x.size * sr_out // sr_in),)
    # The stream pads with zeros exactly like resample_poly and runs its kernel over windows of
    # the input: the samples are identical, edges included.
    assert np.array_equal(chunked, whole)
    assert np.array_equal(chunked, offline)


def test_tone_keeps_its_frequency_and_latency_is_small():
    t = np.arange(16000) / 16000
    x = (0.5 * np.sin(2 * np.pi * 1000 * t)).astype(np.float32)
    r = StreamResampler(16000, 24000)
    first = r.push(x[:320])  # one 20 ms frame
    assert first.size >= 480 - 20  # only a few samples held back
    y = np.concatenate([first, r.push(x[320:]), r.flush()])
    t_out = np.arange(y.size) / 24000
    np.testing.assert_allclose(
        y[200:-200], 0.5 * np.sin(2 * np.pi * 1000 * t_out[200:-200]), atol=2e-3
    )


def test_identity_and_reuse_after_flush():
    x = np.linspace(-1, 1, 1000, dtype=np.float32)
    same = StreamResampler(16000, 16000)
    assert np.array_equal(same.push(x), x) and same.flush().size == 0
    assert np.array_equal(resample(x, 16000, 16000), x)
    r = StreamResampler(24000, 16000)
    a = np.concatenate([r.push(x), r.flush()])
    b = np.concatenate([r.push(x[:10]), r.push(x[10:]), r.flush()])
    assert np.array_equal(a, b)


def test_multichannel_offline_and_bad_input():
    x = np.random.default_rng(3).standard_normal((2400, 2)).astype(np.float32)
    y = resample(x, 24000, 16000)
    assert y.shape == (1600, 2)
    np.testing.assert_allclose(y[:, 1], resample(x[:, 1], 24000, 16000))
    with pytest.raises(ValueError):
        StreamResampler(16000, 24000).push(x)
    with pytest.raises(ValueError):
        StreamResampler(0, 16000)
