"""Two-channel conversation audio: one stereo file, or two mono files paired by name.

Corpora ship a conversation either as one file with a speaker per channel (otoSpeech's 48 kHz
FLAC, CANDOR's MP3) or as one file per speaker (Seamless Interaction's `..._P<participant>.wav`,
AMI's `Headset-<k>.wav`). `stereo_channels` and `pair_mono` turn either into the two
`ChannelSource`s of a `Conversation`; `load_two_channel` decodes them (anything libsndfile reads:
WAV, FLAC, MP3, ...), resamples each channel to the 16 kHz the importer and the models work at
with `fdeval.audio.resample` (its streaming form, block by block), and keeps every source's own
rate so what is written can say what the audio was. Two mono files of slightly different lengths
are padded with silence to the longer one.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import soundfile as sf

from fdeval.audio.resample import StreamResampler

from ..importer import SAMPLE_RATE
from .records import ChannelSource, CorpusFileError

TARGET_RATE_HZ = SAMPLE_RATE  # the importer's working rate: conversations are written at it
AUDIO_SUFFIXES = (".wav", ".flac", ".mp3")
_BLOCK = 1 << 16  # frames decoded (and resampled) at a time


@dataclass(frozen=True)
class AudioInfo:
    """A file's header: its own sample rate, channels and length."""

    path: str
    sample_rate_hz: int
    channels: int
    duration_s: float


@dataclass(frozen=True, eq=False)  # eq=False: an ndarray field has no single truth value for ==
class TwoChannelAudio:
    """A conversation's audio at `sample_rate_hz`, shaped (n, 2), with each source's own rate."""

    conversation_id: str
    samples: np.ndarray
    sample_rate_hz: int
    sources: tuple[ChannelSource, ChannelSource]

    @property
    def duration_s(self) -> float:
        return self.samples.shape[0] / self.sample_rate_hz

    @property
    def original_rates_hz(self) -> tuple[int, int]:
        return self.sources[0].sample_rate_hz, self.sources[1].sample_rate_hz


def audio_info(path: str | Path) -> AudioInfo:
    """The header of an audio file; a `CorpusFileError` when libsndfile cannot open it."""
    try:
        info = sf.info(str(path))
    except (sf.SoundFileError, RuntimeError, OSError) as e:
        why = str(e).split("': ", 1)[-1] if "': " in str(e) else str(e)
        raise CorpusFileError(path, None, f"not readable audio: {why}") from None
    if info.samplerate <= 0 or info.frames <= 0:
        raise CorpusFileError(path, None, "has no audio (0 frames)")
    return AudioInfo(
        str(path), int(info.samplerate), int(info.channels), info.frames / info.samplerate
    )


def stereo_channels(conversation_id: str, path: str | Path) -> tuple[ChannelSource, ChannelSource]:
    """Channel 0 and 1 of one file that holds a speaker per channel."""
    info = audio_info(path)
    if info.channels != 2:
        raise CorpusFileError(
            path,
            None,
            f"has {info.channels} channel(s); a conversation file needs 2 "
            "(one speaker per channel)",
        )
    return (
        ChannelSource(conversation_id, str(path), 0, info.sample_rate_hz),
        ChannelSource(conversation_id, str(path), 1, info.sample_rate_hz),
    )


def mono_channel(conversation_id: str, path: str | Path) -> ChannelSource:
    """One speaker's own mono file as a conversation channel."""
    info = audio_info(path)
    if info.channels != 1:
        raise CorpusFileError(
            path, None, f"has {info.channels} channels; a speaker's own file must be mono"
        )
    return ChannelSource(conversation_id, str(path), 0, info.sample_rate_hz)


def pair_mono(
    paths: Iterable[Path], key: Callable[[Path], tuple[str, str] | None]
) -> dict[str, tuple[tuple[str, Path], ...]]:
    """Group one-speaker files into conversations by name.

    `key(path)` gives (conversation id, side) or None for a file that is not a side of one; each
    conversation's (side, path) pairs come sorted by side. Checking that a conversation has
    exactly two sides is the caller's: a recipe may report an incomplete one and go on.
    """
    groups: dict[str, list[tuple[str, Path]]] = defaultdict(list)
    for p in sorted(paths):
        k = key(p)
        if k is not None:
            groups[k[0]].append((k[1], p))
    return {conv: tuple(sorted(sides)) for conv, sides in sorted(groups.items())}


def suffix_key(
    pattern: str = r"(?P<conv>.+)[_-](?P<side>[AB])",
) -> Callable[[Path], tuple[str, str] | None]:
    """A `pair_mono` key from a regular expression on the file's stem with groups `conv` and
    `side` (the default pairs `<conv>_A.wav` with `<conv>_B.wav`)."""
    rx = re.compile(pattern)

    def key(p: Path) -> tuple[str, str] | None:
        m = rx.fullmatch(p.stem)
        return (m.group("conv"), m.group("side")) if m else None

    return key


def _decode(path: str, channels: set[int]) -> dict[int, np.ndarray]:
    """The wanted channels of a file at `TARGET_RATE_HZ`, decoded and resampled block by block
    (`StreamResampler` gives the same samples as `resample` on the whole signal), so only the
    16 kHz result is ever held, never the file's own frames."""
    try:
        with sf.SoundFile(path) as f:
            if max(channels) >= f.channels:
                raise CorpusFileError(
                    path, None, f"has no channel {max(channels)} ({f.channels} channel(s))"
                )
            rs = {c: StreamResampler(int(f.samplerate), TARGET_RATE_HZ) for c in channels}
            parts: dict[int, list[np.ndarray]] = {c: [] for c in channels}
            for block in f.blocks(blocksize=_BLOCK, dtype="float32", always_2d=True):
                for c in channels:
                    parts[c].append(rs[c].push(np.ascontiguousarray(block[:, c])))
            for c in channels:
                parts[c].append(rs[c].flush())
    except (sf.SoundFileError, RuntimeError, OSError) as e:
        raise CorpusFileError(path, None, f"cannot decode: {e}") from None
    return {c: np.concatenate(v).astype(np.float32, copy=False) for c, v in parts.items()}


def load_two_channel(
    conversation_id: str, sources: tuple[ChannelSource, ChannelSource]
) -> TwoChannelAudio:
    """Both channels at `TARGET_RATE_HZ`, shaped (n, 2) (the shorter padded with silence); a file
    is decoded once for all its wanted channels."""
    wanted: dict[str, set[int]] = {}
    for src in sources:
        wanted.setdefault(src.path, set()).add(src.channel)
    decoded = {path: _decode(path, chans) for path, chans in wanted.items()}
    chans = [decoded[src.path][src.channel] for src in sources]
    n = max(c.shape[0] for c in chans)
    out = np.zeros((n, 2), np.float32)
    for k, c in enumerate(chans):
        out[: c.shape[0], k] = c
    return TwoChannelAudio(conversation_id, out, TARGET_RATE_HZ, sources)


def duration_s(sources: tuple[ChannelSource, ChannelSource]) -> float:
    """The conversation's length from the headers alone (the longer channel)."""
    return max(audio_info(s.path).duration_s for s in sources)


__all__ = [
    "AUDIO_SUFFIXES",
    "AudioInfo",
    "TARGET_RATE_HZ",
    "TwoChannelAudio",
    "audio_info",
    "duration_s",
    "load_two_channel",
    "mono_channel",
    "pair_mono",
    "stereo_channels",
    "suffix_key",
]
