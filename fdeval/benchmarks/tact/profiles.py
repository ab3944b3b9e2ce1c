"""Measuring speakers from stereo recordings: voice activity, speaker profiles, SNR, slices.

Used by the corpus importer; the rules are also what `docs/tact.md` documents. Segments are
(start_s, end_s) pairs of one channel's speech (Silero VAD, or given), on the recording's clock.

Profile features of a focal speaker F against the other speaker O, from evidence that excludes
the test episode's span. The evidence comes in pieces (`profile_from_pieces`): each recording is
one piece, and the episode's own recording is two, the parts before and after its span. A rule
that relates two events only relates events of one piece, so nothing is ever measured across the
join of two recordings or across the hole the span leaves; the pieces' values are then pooled.

* FTO (floor-transfer offset): for every F turn start that follows an O turn (the last speech
  before it, of at least `TURN_MIN_S`), F's onset minus O's offset; negative in overlap. F's
  segment must itself be a turn (>= `TURN_MIN_S`), not a listener token.
* intra-turn pauses: gaps between consecutive F segments, `PAUSE_MIN_S` or longer and shorter
  than `PAUSE_MAX_S`, during which O is silent.
* abstention tolerance: the 90th percentile of the F-to-F silences with O silent (any length up
  to `ABSTAIN_MAX_S`): how long F sits out a silence before resuming unanswered.
* backchannel solicitation: O segments no longer than `TOKEN_MAX_S` while F holds the floor (F
  spoke within 1 s before the token's start or is speaking at it, and F goes on within 1 s after
  its end), per minute of F speech.
* backchannel production: the same with the roles swapped (O spoke within 0.5 s before the F
  token, O goes on within 1 s after it), per minute of O speech.
* articulation rate (needs F's words): syllables (vowel groups, `count_syllables`) per second of
  F speech time covered by those words.
* floor-holding devices (needs F's words): filled pauses (um, uh, er, erm) and trailing
  conjunctions (and, but, so, or, because ending an F segment that F continues after a pause),
  per minute of F speech.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Sequence

import numpy as np

from fdeval.audio.resample import resample
from fdeval.audio.vad import SAMPLE_RATE, SileroVAD

from .episodes import SpeakerProfile

TURN_MIN_S = 1.0
TOKEN_MAX_S = 1.0
PAUSE_MIN_S = 0.2
PAUSE_MAX_S = 3.0
ABSTAIN_MAX_S = 10.0
FILLED_PAUSES = {"um", "uh", "er", "erm", "uhm", "hmm"}
CONJUNCTIONS = {"and", "but", "so", "or", "because"}
Segments = list[tuple[float, float]]


def vad_segments(
    samples: np.ndarray,
    sample_rate: int,
    vad=None,
    threshold: float = 0.5,
    min_silence_s: float = 0.1,
) -> Segments:
    """Silero VAD speech segments of a mono signal (resampled to 16 kHz when needed)."""
    x = np.asarray(samples, dtype=np.float32)
    if sample_rate != SAMPLE_RATE:
        x = resample(x, sample_rate, SAMPLE_RATE)
    stream = (vad or SileroVAD()).stream(threshold=threshold, min_silence_s=min_silence_s)
    stream.push(x)
    stream.close()
    return [(float(a), float(b)) for a, b in stream.segments]


def merge_segments(segs: Iterable[tuple[float, float]], gap_s: float) -> Segments:
    """Join segments separated by less than `gap_s` (input in any order)."""
    out: Segments = []
    for a, b in sorted(segs):
        if out and a - out[-1][1] < gap_s:
            out[-1] = (out[-1][0], max(out[-1][1], b))
        else:
            out.append((a, b))
    return out


def exclude_span(segs: Sequence[tuple[float, float]], lo: float, hi: float) -> Segments:
    """Drop every segment that touches [lo, hi] (the test episode's own span)."""
    return [(a, b) for a, b in segs if b < lo or a > hi]


def _holds_floor(
    segs: Sequence[tuple[float, float]],
    a: float,
    b: float,
    before_s: float = 1.0,
    after_s: float = 1.0,
) -> bool:
    """The speaker of `segs` holds the floor around a token [a, b]: they spoke within `before_s`
    before its start (or are speaking at it) and go on within `after_s` after its end."""
    spoke = any(sb >= a - before_s and sa <= a for sa, sb in segs)
    goes_on = any(sa <= b + after_s and sb > b for sa, sb in segs)
    return spoke and goes_on


def count_syllables(word: str) -> int:
    """Vowel groups of an English word (a common approximation; at least 1 for a word with letters)."""
    w = re.sub(r"[^a-z]", "", word.lower())
    if not w:
        return 0
    n = len(re.findall(r"[aeiouy]+", w))
    if w.endswith("e") and not w.endswith(("le", "ee")) and n > 1:
        n -= 1
    return max(1, n)


Piece = tuple[
    Sequence[tuple[float, float]],
    Sequence[tuple[float, float]],
    float,
    "Sequence[tuple[str, float, float]] | None",
]


def profile_from_tracks(
    focal: Sequence[tuple[float, float]],
    other: Sequence[tuple[float, float]],
    evidence_s: float,
    focal_words: Sequence[tuple[str, float, float]] | None = None,
) -> SpeakerProfile:
    """A `SpeakerProfile` of the focal speaker from one continuous stretch of recording (rules in
    the module docstring).

    `evidence_s` is the length of recording the tracks cover; `focal_words` (text, start_s,
    end_s) enable the articulation rate and the floor-holding devices (None otherwise). Evidence
    from several recordings, or from both sides of a cut-out span, goes to `profile_from_pieces`.
    """
    return profile_from_pieces([(focal, other, evidence_s, focal_words)])


def profile_from_pieces(pieces: Sequence[Piece]) -> SpeakerProfile:
    """A `SpeakerProfile` pooled over separate stretches of recording.

    Each piece is `(focal, other, evidence_s, focal_words)` on its own clock: one recording, or
    the part of a recording before or after the episode's excluded span. Every rule that relates
    two events (an offset from the other's turn end to the focal speaker's turn start, a pause or
    silence between two focal segments, a listener token and the talk around it, a conjunction and
    the speech after it) only ever pairs events of the same piece; the gap between pieces is not
    a silence anybody sat out. The offsets, pauses and silences of all pieces are pooled before the
    quantiles are taken, and counts are divided by the pooled speech time. The words feature is
    None unless some piece has words (`focal_words` not None).
    """
    ftos: list[float] = []
    pauses: list[float] = []
    silences: list[float] = []
    f_speech = o_speech = evidence_s = 0.0
    solicited = produced = 0
    has_words = False
    syl = filled = trailing = 0
    word_time = 0.0
    for focal, other, piece_s, focal_words in pieces:
        F, O = sorted(focal), sorted(other)
        evidence_s += piece_s
        f_speech += sum(b - a for a, b in F)
        o_speech += sum(b - a for a, b in O)
        _pair_events(F, O, ftos, pauses, silences)
        solicited += sum(1 for a, b in O if b - a <= TOKEN_MAX_S and _holds_floor(F, a, b))
        produced += sum(
            1 for a, b in F if b - a <= TOKEN_MAX_S and _holds_floor(O, a, b, before_s=0.5)
        )
        if focal_words is not None:
            has_words = True
            n_syl, n_filled, n_trailing, t_words = _word_counts(F, focal_words)
            syl, filled, trailing, word_time = (
                syl + n_syl,
                filled + n_filled,
                trailing + n_trailing,
                word_time + t_words,
            )
    q = lambda xs, p: float(np.quantile(xs, p)) if xs else None  # noqa: E731
    rate = None
    devices: dict[str, float | None] = {d: None for d in ("filled_pause", "trailing_conjunction")}
    if has_words and f_speech > 0:
        rate = syl / word_time if word_time > 0 else None
        minutes = f_speech / 60.0
        devices = {"filled_pause": filled / minutes, "trailing_conjunction": trailing / minutes}
    return SpeakerProfile(
        evidence_min=evidence_s / 60.0,
        fto_median_s=q(ftos, 0.5),
        fto_p10_s=q(ftos, 0.1),
        fto_p90_s=q(ftos, 0.9),
        pause_median_s=q(pauses, 0.5),
        pause_p90_s=q(pauses, 0.9),
        abstention_tolerance_s=q(silences, 0.9),
        backchannel_solicitation_per_min=solicited / (f_speech / 60.0) if f_speech > 0 else None,
        backchannel_production_per_min=produced / (o_speech / 60.0) if o_speech > 0 else None,
        articulation_rate_syl_s=rate,
        floor_holding_per_min=devices,
    )


def _pair_events(
    F: Segments, O: Segments, ftos: list[float], pauses: list[float], silences: list[float]
) -> None:
    """Append one piece's offsets, intra-turn pauses and sat-out silences (sorted segments)."""
    for i, (a, b) in enumerate(F):
        if b - a >= TURN_MIN_S:
            prev_f_end = F[i - 1][1] if i else -math.inf
            before = [
                (oa, ob) for oa, ob in O if oa < a and ob - oa >= TURN_MIN_S and oa > prev_f_end
            ]
            if before:
                ftos.append(a - before[-1][1])
        if i:
            gap_a, gap_b = F[i - 1][1], a
            if gap_b > gap_a and not any(oa < gap_b and ob > gap_a for oa, ob in O):
                g = gap_b - gap_a
                if PAUSE_MIN_S <= g < PAUSE_MAX_S:
                    pauses.append(g)
                if g <= ABSTAIN_MAX_S:
                    silences.append(g)


def _word_counts(
    F: Segments, focal_words: Sequence[tuple[str, float, float]]
) -> tuple[int, int, int, float]:
    """One piece's (syllables, filled pauses, trailing conjunctions, seconds of word time)."""
    norm = lambda t: re.sub(r"[^a-z]", "", t.lower())  # noqa: E731
    spoken = [w for w in sorted(focal_words, key=lambda w: w[1]) if norm(w[0])]
    word_time = sum(max(0.0, e - s) for _, s, e in spoken)
    syl = sum(count_syllables(t) for t, _, _ in spoken if norm(t) not in FILLED_PAUSES)
    filled = sum(1 for t, _, _ in spoken if norm(t) in FILLED_PAUSES)
    trailing = 0
    for i, (a, b) in enumerate(F[:-1]):
        last = [w for w in spoken if a - 0.05 <= w[1] and w[2] <= b + 0.05]
        if last and norm(last[-1][0]) in CONJUNCTIONS and F[i + 1][0] - b < PAUSE_MAX_S:
            trailing += 1
    return syl, filled, trailing, word_time


def snr_db(samples: np.ndarray, sample_rate: int, speech: Sequence[tuple[float, float]]) -> float:
    """Signal-to-noise ratio of a channel: speech-frame power over non-speech power, in dB.

    Speech power is corrected for the noise under it (P_speech - P_noise). Infinite when the
    non-speech frames are digitally silent; NaN without both kinds of frames.
    """
    x = np.asarray(samples, dtype=np.float64)
    mask = np.zeros(x.size, dtype=bool)
    for a, b in speech:
        mask[int(a * sample_rate) : int(math.ceil(b * sample_rate))] = True
    if not mask.any() or mask.all():
        return math.nan
    p_s, p_n = float(np.mean(x[mask] ** 2)), float(np.mean(x[~mask] ** 2))
    if p_n <= 1e-12:
        return math.inf
    return 10.0 * math.log10(max(p_s - p_n, 1e-12) / p_n)


def snr_band(db: float) -> str:
    """high (>= 20 dB), mid (10-20 dB), low (< 10 dB); unknown for NaN."""
    if math.isnan(db):
        return "unknown"
    return "high" if db >= 20.0 else "mid" if db >= 10.0 else "low"


def rate_terciles(rates: Iterable[float | None]) -> tuple[float, float] | None:
    """The 1/3 and 2/3 quantiles of the known articulation rates (None without any)."""
    r = [x for x in rates if x is not None and math.isfinite(x)]
    if not r:
        return None
    return float(np.quantile(r, 1 / 3)), float(np.quantile(r, 2 / 3))


def rate_tercile(rate: float | None, cuts: tuple[float, float] | None) -> str:
    if rate is None or cuts is None or not math.isfinite(rate):
        return "unknown"
    return "slow" if rate < cuts[0] else "mid" if rate < cuts[1] else "fast"
