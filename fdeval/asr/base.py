"""The ASR interface: speech in, `Word`s with times out (source "asr").

A backend implements two things, `identity()` and `recognize(segments)`: recognition of a batch
of 16 kHz mono segments, each at most `max_input_s` long, returning per segment the words with
times relative to that segment (raw: times may be missing, out of range or out of order). The
base class does the rest the same way for every backend:

- `transcribe(samples, sample_rate, case_id, speaker)`: one clip; resampled to 16 kHz; a clip
  longer than `max_input_s` is cut into speech segments first (as below). Times are relative to
  the start of the clip.
- `transcribe_channel(wav_path, channel, case_id, speaker)`: one channel of a session recording
  (ch0 user, ch1 model). Silero VAD finds the speech; regions are padded, merged across short
  pauses and cut so each segment is at most `Segmentation.max_segment_s` (30 s); only those
  segments are recognised, in batches, and their words are moved onto the session clock.
- `transcribe_session(wav_path, case_id)`: both channels, words sorted by time.

Every word that comes back is cleaned by one rule set (`clean_words`): empty texts dropped, a
missing start takes the previous word's start, a missing end the next word's start (or the
segment's end), all times clamped into the segment, starts made non-decreasing and each end at
least its start. So a word's times always lie inside the segment it was recognised in.
"""

from __future__ import annotations

import math
import os
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, fields
from typing import Any, NamedTuple

import numpy as np
import soundfile as sf

from fdeval.audio.io import to_float32
from fdeval.audio.resample import resample
from fdeval.audio.vad import CHUNK, SileroVAD
from fdeval.errors import ConfigError, FdevalError
from fdeval.types import Word

SAMPLE_RATE = 16000  # every backend is fed 16 kHz mono float32
CHANNELS = {"user": 0, "model": 1}  # the session WAV's channel of each speaker
INSTALL_HINT = 'pip install -e ".[asr]"  (installs torch==2.13.0 and transformers; pin torch, never a bare "torch")'


class ASRUnavailableError(FdevalError):
    """An ASR backend cannot run here: its packages are missing or its weights cannot be loaded."""


class TimedWord(NamedTuple):
    """A backend's raw word: times in seconds from the start of its segment, None where unknown."""

    text: str
    start_s: float | None
    end_s: float | None


@dataclass(frozen=True)
class Segmentation:
    """How a long channel is cut into the speech segments that are recognised.

    Silero VAD (`vad_threshold`, `min_speech_s`, `min_silence_s`: see `fdeval.audio.vad.VADStream`)
    gives speech regions; a region longer than `max_segment_s - 2 * pad_s` is cut at its least
    speech-like 32 ms chunk (searched in the second half of each piece); regions are widened by
    `pad_s` on both sides (within the audio), neighbours closer than `merge_gap_s` are joined
    while the result stays within `max_segment_s`, and two widened neighbours that still overlap
    meet halfway, so no audio is recognised twice.
    """

    vad_threshold: float = 0.5
    min_speech_s: float = 0.064
    min_silence_s: float = 0.3
    pad_s: float = 0.2
    merge_gap_s: float = 1.0
    max_segment_s: float = 30.0

    def __post_init__(self) -> None:
        checks = [
            ("vad_threshold", 0.0 < self.vad_threshold < 1.0, "must be in (0, 1)"),
            ("min_speech_s", self.min_speech_s >= 0.0, "must be >= 0"),
            ("min_silence_s", self.min_silence_s >= 0.0, "must be >= 0"),
            ("pad_s", self.pad_s >= 0.0, "must be >= 0"),
            ("merge_gap_s", self.merge_gap_s >= 0.0, "must be >= 0"),
            (
                "max_segment_s",
                self.max_segment_s - 2 * self.pad_s >= 1.0,
                "must be at least 2 * pad_s + 1 s",
            ),
        ]
        for name, ok, why in checks:
            if not ok:
                raise ConfigError(f"asr.segmentation.{name}: {why}, got {getattr(self, name)!r}")

    @classmethod
    def of(cls, value: Segmentation | Mapping[str, Any] | None) -> Segmentation:
        """A Segmentation from itself, a mapping of its fields (a Hydra node too) or None (defaults)."""
        if value is None:
            return cls()
        if isinstance(value, Segmentation):
            return value
        if isinstance(value, Mapping):
            valid = [f.name for f in fields(cls)]
            unknown = sorted(set(value) - set(valid))
            if unknown:
                raise ConfigError(f"asr.segmentation: unknown key(s) {unknown}; valid: {valid}")
            return cls(**{k: float(v) for k, v in value.items()})
        raise ConfigError(f"asr.segmentation: expected a mapping, got {type(value).__name__}")


def to_mono_16k(samples: np.ndarray, sample_rate: int) -> np.ndarray:
    """Float32 mono samples at 16 kHz (channels averaged, resampled if needed; never longer)."""
    x = to_float32(np.asarray(samples))
    if x.ndim == 2:
        x = x.mean(axis=1, dtype=np.float32)
    if x.ndim != 1:
        raise ValueError(f"expected (n,) or (n, channels) samples, got shape {x.shape}")
    if int(sample_rate) != SAMPLE_RATE:  # cut to floor(n * 16k / sr) so the clip never gets longer
        x = resample(x, int(sample_rate), SAMPLE_RATE)[
            : x.shape[0] * SAMPLE_RATE // int(sample_rate)
        ]
    return np.ascontiguousarray(x, dtype=np.float32)


def read_channel(wav_path: str | os.PathLike, channel: int) -> np.ndarray:
    """One channel of a WAV file as float32 at 16 kHz."""
    data, sr = sf.read(os.fspath(wav_path), dtype="float32", always_2d=True)
    if not 0 <= channel < data.shape[1]:
        raise ValueError(f"{wav_path}: no channel {channel} (the file has {data.shape[1]})")
    return to_mono_16k(data[:, channel], sr)


def _split_long(
    start: int, end: int, max_len: int, probs: np.ndarray, chunk: int
) -> list[tuple[int, int]]:
    """Cut [start, end) (samples) into pieces <= max_len at the chunk of least speech probability.

    `probs[i]` is the probability of chunk i of the region (chunk i covers start + i*chunk ...).
    Each cut is searched between half and all of `max_len` after the current piece's start.
    """
    pieces = []
    a = start
    while end - a > max_len:
        lo = (a - start + max_len // 2) // chunk
        hi = (a - start + max_len) // chunk  # the cut is at the start of a chunk in [lo, hi)
        window = probs[lo:hi]
        cut = start + (lo + int(np.argmin(window))) * chunk if window.size else a + max_len
        cut = min(max(cut, a + 1), a + max_len)
        pieces.append((a, cut))
        a = cut
    pieces.append((a, end))
    return pieces


def speech_segments(
    samples: np.ndarray, seg: Segmentation | None = None, vad=None
) -> list[tuple[float, float]]:
    """Speech segments (start_s, end_s) of 16 kHz mono `samples`, ready to recognise (see `Segmentation`).

    Sorted, non-overlapping, each within the audio and at most `seg.max_segment_s` long; empty
    for audio without speech.
    """
    seg = seg or Segmentation()
    x = np.asarray(samples, dtype=np.float32)
    n = x.shape[0]
    vad = vad or SileroVAD(SAMPLE_RATE)
    stream = vad.stream(
        threshold=seg.vad_threshold, min_speech_s=seg.min_speech_s, min_silence_s=seg.min_silence_s
    )
    stream.push(x)
    stream.close()
    pad = round(seg.pad_s * SAMPLE_RATE)
    max_n = math.floor(seg.max_segment_s * SAMPLE_RATE)
    gap = round(seg.merge_gap_s * SAMPLE_RATE)
    regions: list[tuple[int, int]] = []
    for s, e in stream.segments:
        a, b = round(s * SAMPLE_RATE), min(round(e * SAMPLE_RATE), n)
        if b <= a:
            continue
        if b - a > max_n - 2 * pad:
            regions.extend(_split_long(a, b, max_n - 2 * pad, vad.probs(x[a:b]), CHUNK))
        else:
            regions.append((a, b))
    out: list[list[int]] = []
    for a, b in regions:
        a, b = max(0, a - pad), min(n, b + pad)
        if out and a - out[-1][1] <= gap and b - out[-1][0] <= max_n:
            out[-1][1] = max(out[-1][1], b)
        elif out and a < out[-1][1]:  # padded neighbours that may not merge: meet halfway
            mid = (a + out[-1][1]) // 2
            out[-1][1] = mid
            out.append([mid, b])
        else:
            out.append([a, b])
    return [(a / SAMPLE_RATE, b / SAMPLE_RATE) for a, b in out if b > a]


def _finite(t: float | None) -> bool:
    return t is not None and math.isfinite(float(t))


def clean_words(raw: Sequence[TimedWord], duration_s: float) -> list[TimedWord]:
    """A backend's raw words made valid for a segment of `duration_s` (rules in the module doc).

    A text holding whitespace is split into words that share its span evenly.
    """
    items: list[tuple[str, float | None, float | None]] = []
    for w in raw:
        tokens = str(w.text).split()
        if not tokens:
            continue
        s = float(w.start_s) if _finite(w.start_s) else None
        e = float(w.end_s) if _finite(w.end_s) else None
        if len(tokens) > 1 and s is not None and e is not None and e > s:
            step = (e - s) / len(tokens)
            items.extend((t, s + i * step, s + (i + 1) * step) for i, t in enumerate(tokens))
        else:
            items.extend((t, s, e) for t in tokens)
    out: list[TimedWord] = []
    prev_start = 0.0
    for i, (text, s, e) in enumerate(items):
        if s is None:
            s = prev_start
        if e is None:
            nxt = next((t for _, t, _ in items[i + 1 :] if t is not None), None)
            e = nxt if nxt is not None else duration_s
        s = min(max(s, prev_start, 0.0), duration_s)
        e = min(max(e, s), duration_s)
        out.append(TimedWord(text, s, e))
        prev_start = s
    return out


class ASRBackend(ABC):
    """Speech recognition with word times. Subclasses set `id`, `max_input_s` and implement
    `identity` and `recognize`; see the module doc for what the base class does around them."""

    id: str
    max_input_s: float = 30.0  # longest segment `recognize` accepts

    def __init__(self, segmentation: Segmentation | Mapping[str, Any] | None = None):
        self.segmentation = Segmentation.of(segmentation)
        if self.segmentation.max_segment_s > self.max_input_s:
            raise ConfigError(
                f"asr.segmentation.max_segment_s: at most {self.max_input_s:g} s for "
                f"{type(self).__name__}, got {self.segmentation.max_segment_s:g}"
            )

    @abstractmethod
    def identity(self) -> dict:
        """Model name, revision and every setting that can change the words (JSON-serialisable)."""

    @abstractmethod
    def recognize(self, segments: list[np.ndarray]) -> list[list[TimedWord]]:
        """Words of each 16 kHz float32 mono segment (<= max_input_s), times relative to it."""

    # -- the shared part --------------------------------------------------------------------
    def transcribe(
        self, samples: np.ndarray, sample_rate: int, case_id: str, speaker: str
    ) -> list[Word]:
        """Words of one clip, times from its start (a clip over `max_input_s` goes by VAD segments)."""
        _check_speaker(speaker)
        x = to_mono_16k(samples, sample_rate)
        if x.shape[0] == 0:
            return []
        if x.shape[0] <= self.max_input_s * SAMPLE_RATE:
            return self.transcribe_segments(x, [(0.0, x.shape[0] / SAMPLE_RATE)], case_id, speaker)
        return self.transcribe_segments(x, speech_segments(x, self.segmentation), case_id, speaker)

    def transcribe_segments(
        self,
        samples: np.ndarray,
        segments: Sequence[tuple[float, float]],
        case_id: str,
        speaker: str,
    ) -> list[Word]:
        """Recognise the given (start_s, end_s) segments of 16 kHz mono `samples` (each at most
        `max_input_s`); words on the samples' clock, each inside its segment."""
        _check_speaker(speaker)
        bounds = [(round(a * SAMPLE_RATE), round(b * SAMPLE_RATE)) for a, b in segments]
        bounds = [(a, min(b, samples.shape[0])) for a, b in bounds if min(b, samples.shape[0]) > a]
        for a, b in bounds:
            if b - a > self.max_input_s * SAMPLE_RATE + 1:
                raise ValueError(
                    f"segment {a / SAMPLE_RATE:.2f}-{b / SAMPLE_RATE:.2f} s is longer than "
                    f"{self.max_input_s:g} s"
                )
        if not bounds:
            return []
        raw = self.recognize([np.ascontiguousarray(samples[a:b]) for a, b in bounds])
        if len(raw) != len(bounds):
            raise RuntimeError(
                f"{type(self).__name__}.recognize returned {len(raw)} results for {len(bounds)} segments"
            )
        words: list[Word] = []
        for (a, b), seg_words in zip(bounds, raw):
            t0, t1 = a / SAMPLE_RATE, b / SAMPLE_RATE
            for w in clean_words(seg_words, t1 - t0):
                start = min(max(t0 + w.start_s, t0), t1)
                end = min(max(t0 + w.end_s, start), t1)
                words.append(Word(case_id, speaker, w.text, start, end, "asr"))
        return words

    def transcribe_channel(
        self, wav_path: str | os.PathLike, channel: int, case_id: str, speaker: str, vad=None
    ) -> list[Word]:
        """Words of one channel of a session WAV, on the session clock; only speech that Silero
        VAD finds is recognised (segments from `speech_segments` with `self.segmentation`)."""
        _check_speaker(speaker)
        x = read_channel(wav_path, channel)
        return self.transcribe_segments(
            x, speech_segments(x, self.segmentation, vad), case_id, speaker
        )

    def transcribe_session(
        self,
        wav_path: str | os.PathLike,
        case_id: str,
        speakers: Sequence[str] = ("user", "model"),
        vad=None,
    ) -> list[Word]:
        """Both channels of a session WAV (ch0 user, ch1 model), words sorted by (start, speaker)."""
        words: list[Word] = []
        for speaker in speakers:
            _check_speaker(speaker)
            words += self.transcribe_channel(wav_path, CHANNELS[speaker], case_id, speaker, vad)
        return sorted(words, key=lambda w: (w.start_s, w.speaker))

    def settings(self) -> dict:
        """The segmentation settings, for `identity()`."""
        return {"segmentation": asdict(self.segmentation), "max_input_s": self.max_input_s}


def _check_speaker(speaker: str) -> None:
    if speaker not in CHANNELS:
        raise ValueError(f"speaker must be one of {sorted(CHANNELS)}, got {speaker!r}")
