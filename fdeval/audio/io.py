"""WAV files: atomic writes (a file exists only once complete), float32 reads, and a full check.

Samples in memory are float32 in [-1, 1], shaped (n,) for mono or (n, channels). Files are
written through `fdeval.files.atomic_path`, whose temporary name ends in ".tmp.wav"; the format
is still passed to soundfile explicitly so nothing depends on how it reads the name.
`scan_audio` decodes a whole file once to prove it is usable (opens, has frames, all finite).
"""

from __future__ import annotations

import contextlib
import os
import sys
import tempfile
from dataclasses import dataclass
from typing import Iterator

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


def write_wav(
    path: str | os.PathLike, data: np.ndarray, sample_rate: int, subtype: str = "PCM_16"
) -> None:
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


# Frames decoded per block by `scan_audio`: bounded memory whatever the file's length.
_SCAN_BLOCK = 1 << 16


class AudioFileError(ValueError):
    """An audio file that cannot be used; the message says why (callers add the file and field)."""


@dataclass(frozen=True)
class AudioInfo:
    """What `scan_audio` found: decoded frame count, sample rate, channels, libsndfile subtype."""

    frames: int
    sample_rate: int
    channels: int
    subtype: str

    @property
    def duration_s(self) -> float:
        return self.frames / self.sample_rate


def scan_audio(path: str | os.PathLike) -> AudioInfo:
    """Decode all of `path` and check it is usable audio; raises :class:`AudioFileError` if not.

    Checks: libsndfile opens it, its sample rate is > 0, it decodes to at least one frame, and
    every sample is finite (only float files can hold NaN/inf, but every file is decoded so that
    a corrupt stream fails here rather than mid-session). ``frames`` counts what was decoded.
    """
    with _decoder_stderr_held():
        return _scan(path)


@contextlib.contextmanager
def _decoder_stderr_held() -> Iterator[None]:
    """Hold what is written to fd 2 meanwhile: libsndfile's decoders print their own warnings on
    bad input (mpg123: "Cannot read next header..."), and a bad file must be one line, the one
    that names it. Dropped if the block raises (the error says it all), else written out. fd 2 is
    the whole process's: scans run as cases load, before any session's threads start."""
    try:
        sys.stderr.flush()
        saved = os.dup(2)
    except (OSError, ValueError, AttributeError):  # no usable stderr: nothing to hold
        yield
        return
    with tempfile.TemporaryFile() as buf:
        os.dup2(buf.fileno(), 2)
        failed = True
        try:
            yield
            failed = False
        finally:
            os.dup2(saved, 2)
            os.close(saved)
            buf.seek(0)
            if not failed and (text := buf.read()):
                os.write(2, text)  # a readable file's decoder warnings are kept


def _scan(path: str | os.PathLike) -> AudioInfo:
    try:
        with sf.SoundFile(os.fspath(path)) as f:
            sample_rate, channels, subtype = int(f.samplerate), int(f.channels), str(f.subtype)
            if sample_rate <= 0:
                raise AudioFileError(f"sample rate must be > 0, got {sample_rate}")
            frames = 0
            for block in f.blocks(blocksize=_SCAN_BLOCK, dtype="float32", always_2d=True):
                bad = ~np.isfinite(block)
                if bad.any():
                    frame = frames + int(np.argmax(bad.any(axis=1)))
                    raise AudioFileError(
                        f"non-finite sample (NaN or inf) at frame {frame} "
                        f"({frame / sample_rate:.3f} s)"
                    )
                frames += len(block)
    except (sf.SoundFileError, RuntimeError, OSError) as e:
        # libsndfile's message starts "Error opening '<path>': "; the caller names the file itself
        why = str(e).split("': ", 1)[-1] if "': " in str(e) else str(e)
        raise AudioFileError(f"not readable audio: {why}") from None
    if frames == 0:
        raise AudioFileError("has 0 frames (no audio)")
    return AudioInfo(frames, sample_rate, channels, subtype)
