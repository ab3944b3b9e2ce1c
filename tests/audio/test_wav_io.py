"""WAV round trips, channel handling and atomic writes."""

from __future__ import annotations

import numpy as np
import pytest
import soundfile as sf

from fdeval.audio.io import read_wav, to_float32, write_wav


def test_mono_pcm16_round_trip(tmp_path, sentence):
    path = tmp_path / "sub" / "turn.wav"
    write_wav(path, sentence.samples, sentence.sample_rate)
    data, sr = read_wav(path)
    assert (
        sr == sentence.sample_rate
        and data.dtype == np.float32
        and data.shape == sentence.samples.shape
    )
    np.testing.assert_allclose(data, sentence.samples, atol=1 / 32768)
    assert sf.info(str(path)).subtype == "PCM_16" and sf.info(str(path)).format == "WAV"
    assert [p.name for p in path.parent.iterdir()] == ["turn.wav"]  # no temporary left behind


def test_stereo_float_round_trip_and_mono_downmix(tmp_path):
    x = np.random.default_rng(0).uniform(-1, 1, (1000, 2)).astype(np.float32)
    path = tmp_path / "two.wav"
    write_wav(path, x, 24000, subtype="FLOAT")
    data, sr = read_wav(path)
    assert sr == 24000 and np.array_equal(data, x)
    mono, _ = read_wav(path, mono=True)
    assert mono.shape == (1000,) and np.allclose(mono, x.mean(axis=1))


def test_clipping_and_failed_write_leaves_nothing(tmp_path):
    path = tmp_path / "loud.wav"
    write_wav(path, np.array([2.0, -2.0, 0.5], dtype=np.float32), 16000)
    data, _ = read_wav(path)
    np.testing.assert_allclose(data, [1.0, -1.0, 0.5], atol=1 / 32768)
    with pytest.raises(ValueError):
        write_wav(tmp_path / "bad.wav", np.zeros((2, 2, 2), dtype=np.float32), 16000)
    with pytest.raises(Exception):
        write_wav(
            tmp_path / "bad.wav", np.zeros(10, dtype=np.float32), 16000, subtype="NOT_A_SUBTYPE"
        )
    assert sorted(p.name for p in tmp_path.iterdir()) == ["loud.wav"]


def test_to_float32():
    assert to_float32(np.array([-32768, 0, 16384], dtype=np.int16)).tolist() == [-1.0, 0.0, 0.5]
    assert to_float32(np.array([0, 128, 192], dtype=np.uint8)).tolist() == [-1.0, 0.0, 0.5]
    assert to_float32(np.array([0.25], dtype=np.float64)).dtype == np.float32
    with pytest.raises(TypeError):
        to_float32(np.array(["a"]))
