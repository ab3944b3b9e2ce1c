"""Text to speech with exact word timings: espeak-ng (from the `espeakng-loader` wheel) via ctypes.

Used to render the scripted user turns of a test case and the reference agent's replies. Word
start times come from espeak-ng's own WORD events (the sample at which the word's first phoneme
begins), so they are exact rather than estimated by alignment.

Contract of `EspeakTTS.synthesize(text)`:

- Audio: float32 mono in [-1, 1] at `sample_rate`, resampled from espeak-ng's native 22050 Hz
  with `fdeval.audio.resample.resample` (polyphase FIR). Nothing is trimmed: the audio starts
  with espeak-ng's own lead-in (up to ~15 ms of near-silence before the first phoneme's energy,
  none for some words; the first word's start is 0.0) and ends a few ms after the last word (no sentence-final
  pause is requested), so `duration_s` is the length of that audio.
- Words: one `SpokenWord` per whitespace-separated token of `text` (`str.split()`), in order,
  with the token exactly as written, punctuation included ("Hello," stays "Hello,"). A token's
  start is the earliest WORD event whose text position lies inside it (espeak-ng may emit
  several events for one token, e.g. "1999", or none for part of it, e.g. "test-case"). Its end
  is one past the last sample above `SILENCE_THRESHOLD` before the next spoken token's start
  (or the end of the audio), so pauses between words lie outside the words. A token espeak-ng
  does not speak (a lone "—" or "...") gets a zero-length timing at the end of the word before
  it (or at the first word's start when it leads). Stop consonants begin with a silent closure,
  so a word that starts with one ("cat") shows energy up to ~60 ms after its start.
- Voices: `voices` lists the voices a generator may assign (the default one first); the default
  list, `DEFAULT_VOICES`, mixes female and male espeak-ng variants over US and British English so
  that neighbouring speakers sound apart (pitch range and formant settings differ per variant).
  `voice_sex` reads the variant's `gender` line (None for a voice without a variant).
- Deterministic: the same text, voice, rate, pitch and sample rate give bit-identical samples.
  For that each synthesis runs espeak-ng in a fresh child process (`_espeak_worker.py`; the
  library keeps state between syntheses that no API call resets). This also makes concurrent
  calls from several threads safe: no two syntheses share library state.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from dataclasses import dataclass
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

import espeakng_loader
import numpy as np

from fdeval.audio.resample import resample
from fdeval.errors import ConfigError, FdevalError
from fdeval.secrets import without_secrets

NATIVE_RATE = 22050  # espeak-ng's output rate
INSTALL_HINT = "pip install espeakng-loader"
# |sample| above this (-54 dBFS) counts as sound when finding word ends. espeak-ng's pauses are
# exact zeros; this level is above the resampling filter's ringing a few ms after a word.
SILENCE_THRESHOLD = 0.002
_WORKER = Path(__file__).with_name("_espeak_worker.py")
_EXIT_LIBRARY, _EXIT_VOICE = 2, 3  # the worker's exit statuses (see _espeak_worker.py)
_RATE_RANGE = (80, 450)  # words per minute espeak-ng accepts
# Four female and four male variants (median F0 and spectra measured apart, see docs/tts.md).
# British English is the language file "en" (espeak_SetVoiceByName refuses "en-gb").
DEFAULT_VOICES = (
    "en-us+m3",
    "en-us+f2",
    "en+m1",
    "en+f4",
    "en-us+m7",
    "en-us+f5",
    "en-gb-x-rp+m8",
    "en-gb-x-rp+f1",
)
# `stage=plan` sizes sessions before any audio exists: a text takes about this many seconds per
# letter or digit, over the rate in words per minute, pauses at punctuation included. Measured
# over the 160 distinct Instruct-FD turn texts of the small and sample sets: 13.1 at 165 wpm
# (voice en-us+m3), 12.9-13.7 over four voices and 140-195 wpm; one turn's estimate is off by
# up to ~30 %, a set's total by a few.
LETTER_S_TIMES_WPM = 13.1


class EspeakUnavailableError(FdevalError):
    """espeak-ng (the `espeakng-loader` wheel) is missing or cannot be loaded."""


class UnknownVoiceError(ConfigError, ValueError):
    """A voice the TTS does not have (a ValueError too, as before voices were checked up front)."""


@dataclass(frozen=True)
class SpokenWord:
    """One whitespace token of a synthesis, in seconds from the synthesis' first sample.

    Its own record, not ``fdeval.types.WordTiming`` (a word of a case's turn): audio imports no
    records. Callers that place it in a turn build their WordTiming from it.
    """

    text: str
    start_s: float
    end_s: float


@dataclass(frozen=True, eq=False)  # eq=False: field-wise == on an ndarray has no single truth value
class Synthesis:
    """Synthesized speech: float32 mono samples and one timing per whitespace token of `text`."""

    text: str
    samples: np.ndarray
    sample_rate: int
    words: tuple[SpokenWord, ...]

    @property
    def duration_s(self) -> float:
        return self.samples.shape[0] / self.sample_rate


def spoken_letters(text: str) -> int:
    """The letters and digits of `text`: what a speaking-rate estimate counts."""
    return sum(ch.isalnum() for ch in text)


def silence(duration_s: float, sample_rate: int) -> np.ndarray:
    """float32 zeros lasting `duration_s` (rounded to the nearest sample)."""
    if duration_s < 0:
        raise ValueError(f"duration_s must be >= 0, got {duration_s}")
    return np.zeros(int(round(duration_s * sample_rate)), dtype=np.float32)


_lock = threading.Lock()  # guards the lazy lookup below
_paths: tuple[str, str] | None = None


def _espeak_paths() -> tuple[str, str]:
    """(shared library, data dir) of the espeakng-loader wheel, looked up once per process."""
    global _paths
    with _lock:
        if _paths is None:
            try:
                library, data = espeakng_loader.get_library_path(), espeakng_loader.get_data_path()
            except RuntimeError as e:
                raise EspeakUnavailableError(
                    f"espeak-ng is not available ({e}); install it with: {INSTALL_HINT}"
                ) from e
            if not Path(library).is_file():
                raise EspeakUnavailableError(
                    f"espeak-ng library missing at {library}; install it with: {INSTALL_HINT}"
                )
            _paths = (library, data)
        return _paths


def _loader_version() -> str | None:
    try:
        return version("espeakng-loader")
    except PackageNotFoundError:
        return None


def _run_worker(request: dict) -> tuple[int, list[tuple[int, int]], np.ndarray]:
    """Run one synthesis in a fresh process: (native rate, [(text_position, sample)], int16)."""
    proc = subprocess.run(
        [sys.executable, "-I", "-S", str(_WORKER)],
        input=json.dumps(request).encode("utf-8"),
        capture_output=True,
        timeout=120,
        check=False,
        env=without_secrets(),
    )  # it needs no key
    why = proc.stderr.decode("utf-8", "replace").strip()
    if proc.returncode == _EXIT_LIBRARY:
        raise EspeakUnavailableError(
            f"espeak-ng could not be loaded ({why}); reinstall it with: {INSTALL_HINT}"
        )
    if proc.returncode == _EXIT_VOICE:
        raise ValueError(why)
    if proc.returncode != 0:
        raise RuntimeError(f"espeak-ng synthesis failed (exit {proc.returncode}): {why}")
    header, _, audio = proc.stdout.partition(b"\n")
    meta = json.loads(header)
    return (
        meta["sample_rate"],
        [tuple(w) for w in meta["words"]],
        np.frombuffer(audio, dtype=np.int16),
    )


def _token_spans(text: str) -> list[tuple[int, int]]:
    """[start, end) character spans of the tokens `text.split()` returns, in order."""
    spans, start = [], None
    for i, ch in enumerate(text):
        if ch.isspace():
            if start is not None:
                spans.append((start, i))
                start = None
        elif start is None:
            start = i
    if start is not None:
        spans.append((start, len(text)))
    return spans


def _token_starts(spans: list[tuple[int, int]], events: list[tuple[int, int]]) -> list[int | None]:
    """Earliest event sample per token (None: not spoken); an event between tokens goes to the next."""
    starts: list[int | None] = [None] * len(spans)
    j = 0
    for position, sample in sorted(events):
        char = position - 1  # espeak-ng counts characters from 1
        while j < len(spans) and spans[j][1] <= char:
            j += 1
        if j == len(spans):
            break
        if starts[j] is None or sample < starts[j]:
            starts[j] = sample
    return starts


def _word_timings(
    text: str,
    starts_native: list[int | None],
    samples: np.ndarray,
    sample_rate: int,
    native_rate: int,
) -> tuple[SpokenWord, ...]:
    tokens = text.split()
    n = samples.shape[0]
    # Event samples converted to the output rate (rounded), kept non-decreasing.
    starts: list[int | None] = []
    floor = 0
    for s in starts_native:
        if s is None:
            starts.append(None)
            continue
        floor = max(floor, min(n, (s * sample_rate + native_rate // 2) // native_rate))
        starts.append(floor)
    loud = np.flatnonzero(np.abs(samples) > SILENCE_THRESHOLD)
    spoken = [i for i, s in enumerate(starts) if s is not None]
    bounds: dict[int, tuple[int, int]] = {}
    for k, i in enumerate(spoken):
        start = starts[i]
        limit = starts[spoken[k + 1]] if k + 1 < len(spoken) else n
        last = np.searchsorted(loud, limit) - 1  # last loud sample before the next word
        end = int(loud[last]) + 1 if last >= 0 and loud[last] >= start else start
        bounds[i] = (start, end)
    words = []
    prev_end = starts[spoken[0]] if spoken else 0
    for i, token in enumerate(tokens):
        start, end = bounds.get(i, (prev_end, prev_end))
        words.append(SpokenWord(token, start / sample_rate, end / sample_rate))
        prev_end = end
    return tuple(words)


_catalogue_lock = threading.Lock()
_catalogue: tuple[frozenset[str], dict[str, str | None]] | None = None


def _voice_catalogue() -> tuple[frozenset[str], dict[str, str | None]]:
    """(voice names espeak-ng accepts, {variant: "female" | "male" | None}) from the wheel's data.

    espeak_SetVoiceByName matches the file names under lang/ (case-insensitively), not the
    files' `language` lines.
    """
    global _catalogue
    with _catalogue_lock:
        if _catalogue is None:
            data = Path(_espeak_paths()[1])
            languages = set()
            for f in (data / "lang").rglob("*"):
                if f.is_file():
                    languages.add(f.name.lower())
            variants: dict[str, str | None] = {}
            for f in (data / "voices" / "!v").iterdir():
                gender = next(
                    (
                        line.split()[1:2]
                        for line in f.read_text("utf-8", "replace").splitlines()
                        if line.startswith("gender ")
                    ),
                    [],
                )
                variants[f.name] = gender[0] if gender and gender[0] in ("female", "male") else None
            _catalogue = (frozenset(languages), variants)
        return _catalogue


def _check_voice(voice: str, where: str) -> None:
    languages, variants = _voice_catalogue()
    language, _, variant = voice.partition("+")
    if language.lower() not in languages or (variant and variant not in variants):
        raise UnknownVoiceError(
            f"{where}: unknown espeak-ng voice {voice!r} (language[+variant], e.g. en-us+f2); "
            f"default voices: {', '.join(DEFAULT_VOICES)}"
        )


class EspeakTTS:
    """espeak-ng voice. `pitch` 0-100 overrides the voice's base pitch (None: voice default, 50).

    `voices`: the voices a generator may assign; `voice` is put first (default `DEFAULT_VOICES`).
    """

    backend = "espeak"

    def __init__(
        self,
        voice: str = "en-us+m3",
        rate_wpm: int = 165,
        pitch: int | None = None,
        sample_rate: int = 16000,
        voices: tuple[str, ...] | list[str] | None = None,
    ):
        if not _RATE_RANGE[0] <= rate_wpm <= _RATE_RANGE[1]:
            raise ValueError(f"rate_wpm must be in {_RATE_RANGE}, got {rate_wpm}")
        if pitch is not None and not 0 <= pitch <= 100:
            raise ValueError(f"pitch must be in 0..100 or None, got {pitch}")
        if sample_rate <= 0:
            raise ValueError(f"sample_rate must be positive, got {sample_rate}")
        self.voice, self.rate_wpm, self.pitch, self.sample_rate = (
            voice,
            int(rate_wpm),
            pitch,
            int(sample_rate),
        )
        listed = tuple(DEFAULT_VOICES if voices is None else voices)
        for v in (voice, *listed):
            _check_voice(v, "tts.voices" if v != voice else "tts.voice")
        self.voices: tuple[str, ...] = (voice, *dict.fromkeys(v for v in listed if v != voice))

    def with_voice(self, voice: str) -> EspeakTTS:
        """Same rate, pitch, sample rate and voice list; `voice` speaks."""
        if voice not in self.voices:
            raise UnknownVoiceError(
                f"tts voice {voice!r} is not one of this TTS's voices: {', '.join(self.voices)}"
            )
        return EspeakTTS(
            voice=voice,
            rate_wpm=self.rate_wpm,
            pitch=self.pitch,
            sample_rate=self.sample_rate,
            voices=self.voices,
        )

    def voice_sex(self, voice: str) -> str | None:
        """ "female" | "male" from the voice variant's gender line; None without a variant."""
        _check_voice(voice, "tts voice")
        return _voice_catalogue()[1].get(voice.partition("+")[2]) if "+" in voice else None

    def identity(self) -> dict:
        """Everything that changes the samples (the library version included), JSON-able."""
        return {
            "backend": self.backend,
            "voice": self.voice,
            "rate_wpm": self.rate_wpm,
            "pitch": self.pitch,
            "sample_rate": self.sample_rate,
            "espeakng_loader": _loader_version(),
        }

    def estimate_s(self, text: str) -> float:
        """About how long `text` takes to say at this voice's rate, without synthesizing it."""
        return spoken_letters(text) * LETTER_S_TIMES_WPM / self.rate_wpm

    def __repr__(self) -> str:
        return (
            f"EspeakTTS(voice={self.voice!r}, rate_wpm={self.rate_wpm}, pitch={self.pitch}, "
            f"sample_rate={self.sample_rate})"
        )

    def synthesize(self, text: str) -> Synthesis:
        """Speak `text`; see the module docstring for the audio and word-timing contract."""
        if not text.split():
            raise ValueError("nothing to synthesize: text is empty or whitespace")
        library, data = _espeak_paths()
        native_rate, events, pcm = _run_worker(
            {
                "library": library,
                "data": data,
                "voice": self.voice,
                "rate_wpm": self.rate_wpm,
                "pitch": self.pitch,
                "text": text,
            }
        )
        samples = pcm.astype(np.float32) / 32768.0
        if self.sample_rate != native_rate:
            samples = np.clip(resample(samples, native_rate, self.sample_rate), -1.0, 1.0)
        starts = _token_starts(_token_spans(text), events)
        words = _word_timings(text, starts, samples, self.sample_rate, native_rate)
        return Synthesis(text=text, samples=samples, sample_rate=self.sample_rate, words=words)
