"""WAV files: atomic writes (a file exists only once complete) and float32 reads.

Samples in memory are float32 in [-1, 1], shaped (n,) for mono or (n, channels). Files are
written through `fdeval.files.atomic_path`, whose temporary name ends in ".tmp.wav"; the format
is still passed to soundfile explicitly so nothing depends on how it reads the name.
"""

from __future__ import annotations

import os

import numpy as np
import soundfile as sf

from fdeval.files import atomic_path

_FLOAT_SUBTYPES = {"FLOAT", "DOUBLE"}


def to_float32(x: np.ndarray) -> np.ndarray:
    """Float samples as float32; integer PCM (int8/16/32, uint8) scaled to [-1, 1)."""
    x = np.asarray(x)
    if x.dtype.kind == "f":
        return x.astype(np.float32, copy=False)
    if x.dtype == np.uint8:  # 8-bit WAV is unsigned, centred on 128
        return ((x.astype(np.float32) - 128.0) / 128.0).astype(np.float32)
    if x.dtype.kind == "i":
        return (x.astype(np.float64) / float(2 ** (8 * x.dtype.itemsize - 1))).astype(np.float32)
    raise TypeError(f"cannot read {x.dtype} as audio samples")


def write_wav(path: str | os.PathLike, data: np.ndarray, sample_rate: int, subtype: str = "PCM_16") -> None:
    """Write `data` ((n,) or (n, channels)) as a WAV file, atomically."""
    data = to_float32(data)
    if data.ndim not in (1, 2):
        raise ValueError(f"expected (n,) or (n, channels) samples, got shape {data.shape}")
    if subtype.upper() not in _FLOAT_SUBTYPES:
        data = np.clip(data, -1.0, 1.0)  # integer PCM would wrap around instead of saturating
    with atomic_path(path) as tmp:
        sf.write(tmp, data, int(sample_rate), subtype=subtype, format="WAV")


def read_wav(path: str | os.PathLike, mono: bool = False) -> tuple[np.ndarray, int]:
    """(samples, sample_rate): float32, (n,) for a mono file or (n, channels); `mono` averages channels."""
    data, sample_rate = sf.read(path, dtype="float32", always_2d=False)
    if mono and data.ndim == 2:
        data = data.mean(axis=1, dtype=np.float32)
    return data, int(sample_rate)
