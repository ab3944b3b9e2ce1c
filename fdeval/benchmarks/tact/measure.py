"""From a recorded session (or a human continuation) to what TACT scores: onset, duration, overlaps.

Rules (all times relative to the decision point t = 0, which is the end of the episode's last
streamed piece in the session, i.e. `turns[-1].end_s` of the session log):

1. The system's speech is the model channel's Silero VAD segments (`vad_segments` of the log).
   Segments less than `merge_gap_s` apart are joined into *runs* (so the pauses between the
   words and sentences of one reply do not split it).
2. Only runs that reach into the observation window W = [-T_a, T_h] = [-2, 5] s count: a run
   [a, b] counts when b > -2 and a <= 5.
3. The response is the first counted run. Its onset is y = max(a, -2): a run already going at
   -2 s is an anticipatory overlap observed from the window start and gets y = -2 exactly
   (`running_at_start`). No counted run: no response (y = NaN, the atom).
   Exception, user interruption (the last replay piece is a barge-in, played while the system
   holds the floor): runs that began before the barge-in started are the system's own floor
   holding, not a response to it; the response is the first counted run that starts at or after
   the barge-in's start. A system that talks straight through the cut-in has no response.
4. Its duration runs from y to the end of the run, followed past T_h: min(b, L) - y, where L
   is the end of what was observed (the session's end, at most `LENGTH_HORIZON_S` = 12 s after
   the decision point). Only the onset must fall inside W; a reply is as long as it is, so a
   12 s turn and a 5 s turn get different length scores (they used to both count as 5 s).
5. Overlaps: every counted run, clipped to W, intersected with the focal speaker's speech (the
   episode's `focal_speech`, placed where each replay piece actually played in the session).
   Each intersection is one overlap event with its onset and duration. It is a backchannel (exempt
   from the overlap penalty) when its run is one: if the model reported text for the run (the
   log's `model_text` pieces that played inside it, dropped ones left out), when every word is a
   listener token (`BACKCHANNEL_WORDS`); without text, when the whole run lasts at most
   `backchannel_max_s`. (A reply the system abandons after half a second is short, but its words
   show it was no backchannel.)
6. psi of an overlap: the completion probability of the focal speech at the overlap's onset, from
   `CompletionEstimator` on the focal voice-activity track as played (causal features), fitted on
   all episodes' annotator completion marks (`fit_completion`).

A human continuation (onset, duration) is measured the same way from the run [onset, onset +
duration] against the episode's own context.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from fdeval.errors import FdevalError
from fdeval.recording import Session

from .completion import CompletionEstimator, va_history_features
from .episodes import Episode
from .laws import T_A_S, T_H_S
from .profiles import merge_segments
from .scoring import OverlapEvent

FRAME_HZ = 100.0  # focal voice-activity track resolution for psi
# How long after the decision point a response's duration is followed (and sessions recorded): the
# paper prints no bound for durations; 12 s covers its median backchannel-episode turn of 8.4 s
# from any onset up to about 3.5 s. It is also the length support D of the duration laws.
LENGTH_HORIZON_S = 12.0
MARK_TOLERANCE_S = 0.2  # an annotator's completion mark counts for instants this close
FIT_STEP_S = 0.1  # instants sampled per episode to fit psi
BACKCHANNEL_WORDS = frozenset(
    {
        "mm",
        "mhm",
        "mm-hmm",
        "mmhmm",
        "hmm",
        "uh-huh",
        "uhhuh",
        "yeah",
        "yep",
        "yes",
        "right",
        "okay",
        "ok",
        "sure",
        "i",
        "see",
        "oh",
        "wow",
        "really",
        "exactly",
        "true",
        "nice",
        "cool",
        "got",
        "it",
        "ah",
        "aha",
        "uh",
        "huh",
    }
)


class MeasureError(FdevalError):
    """A session log that cannot be measured (e.g. the decision point was never reached)."""


@dataclass(frozen=True)
class Overlap:
    onset_s: float
    duration_s: float
    backchannel: bool


@dataclass(frozen=True)
class Response:
    onset_s: float  # NaN: no response within the window
    duration_s: float  # NaN without a response
    running_at_start: bool
    runs: tuple[tuple[float, float], ...]  # counted runs, unclipped
    overlaps: tuple[Overlap, ...]


def _intersect(
    a: Sequence[tuple[float, float]], b: Sequence[tuple[float, float]]
) -> list[tuple[float, float]]:
    out = []
    for x0, x1 in a:
        for y0, y1 in b:
            lo, hi = max(x0, y0), min(x1, y1)
            if hi > lo:
                out.append((lo, hi))
    return sorted(out)


def is_backchannel_text(words: Sequence[str]) -> bool:
    tokens = [t.strip(".,!?;:'\"").lower() for w in words for t in w.split()]
    tokens = [t for t in tokens if t]
    return bool(tokens) and all(t in BACKCHANNEL_WORDS for t in tokens)


def measure_response(
    segments: Sequence[tuple[float, float]],
    focal: Sequence[tuple[float, float]],
    merge_gap_s: float = 0.5,
    backchannel_max_s: float = 1.0,
    responses_from_s: float | None = None,
    text: Sequence[tuple[float, str]] = (),
    until_s: float = LENGTH_HORIZON_S,
) -> Response:
    """The response and overlaps of speech `segments` against `focal` speech (rules 1-5 above).

    `responses_from_s`: runs starting before it are not responses (the barge-in exception).
    `text`: (time, text) pieces of the speaker's own words, on the same clock (rule 5).
    `until_s`: the end of observation; the duration is followed up to it (rule 4).
    """
    runs = [r for r in merge_segments(segments, merge_gap_s) if r[1] > -T_A_S and r[0] <= T_H_S]
    candidates = [r for r in runs if responses_from_s is None or r[0] >= responses_from_s - 1e-9]
    onset = duration = math.nan
    running = False
    if candidates:
        a, b = candidates[0]
        onset = max(a, -T_A_S)
        duration = max(0.0, min(b, max(until_s, onset)) - onset)
        running = a < -T_A_S
    overlaps = []
    for r0, r1 in runs:
        said = [w for t, w in text if r0 - 0.1 <= t <= r1 + 0.1]
        backchannel = is_backchannel_text(said) if said else (r1 - r0) <= backchannel_max_s
        clipped = [(max(r0, -T_A_S), min(r1, T_H_S))]
        for lo, hi in _intersect(clipped, focal):
            overlaps.append(Overlap(lo, hi - lo, backchannel))
    return Response(onset, duration, running, tuple(runs), tuple(overlaps))


def played_focal_speech(
    episode: Episode, turn_starts_s: Sequence[float], decision_s: float
) -> list[tuple[float, float]]:
    """The episode's focal speech where each replay piece played, relative to the session's
    decision point. `turn_starts_s` are the pieces' session start times."""
    out = []
    for piece, start in zip(episode.replay, turn_starts_s):
        for a, b in _intersect([(piece.start_s, piece.end_s)], episode.focal_speech):
            out.append(
                (start + a - piece.start_s - decision_s, start + b - piece.start_s - decision_s)
            )
    return sorted(out)


def measure_session(
    log: Session,
    episode: Episode,
    merge_gap_s: float = 0.5,
    backchannel_max_s: float = 1.0,
    length_horizon_s: float = LENGTH_HORIZON_S,
) -> dict:
    """Measure one recorded session of `episode` (`log` from `fdeval.recording.read_session`: its
    turns, VAD segments and model text) as a JSON-able dict.

    A duration is followed to the end of the recording or `length_horizon_s`, whichever comes first."""
    turns = sorted(log.turns, key=lambda t: t.index)
    if len(turns) != len(episode.replay):
        raise MeasureError(
            f"session {log.case_id}: {len(turns)} user turns logged, "
            f"episode {episode.episode_id} has {len(episode.replay)} replay pieces"
        )
    starts = [t.start_s for t in turns]
    decision = turns[-1].end_s
    if any(math.isnan(s) for s in starts) or math.isnan(decision):
        raise MeasureError(
            f"session {log.case_id}: not every replay piece was played "
            f"(end reason {log.info.end_reason!r}); no decision point to measure from"
        )
    segs = [(r.start_s - decision, r.end_s - decision) for r in log.vad_segments]
    focal = played_focal_speech(episode, starts, decision)
    responses_from = starts[-1] - decision if episode.replay[-1].kind == "barge-in" else None
    text = [(r.play_s - decision, r.text) for r in log.model_text if not r.dropped]
    observed = log.duration_s - decision
    resp = measure_response(
        segs,
        focal,
        merge_gap_s,
        backchannel_max_s,
        responses_from,
        text,
        until_s=min(observed, length_horizon_s),
    )
    return {
        "decision_session_s": round(decision, 6),
        "onset_s": None if math.isnan(resp.onset_s) else round(resp.onset_s, 6),
        "duration_s": None if math.isnan(resp.duration_s) else round(resp.duration_s, 6),
        "running_at_start": resp.running_at_start,
        "responses_from_s": None if responses_from is None else round(responses_from, 6),
        "runs": [[round(a, 6), round(b, 6)] for a, b in resp.runs],
        "overlaps": [
            {
                "onset_s": round(o.onset_s, 6),
                "duration_s": round(o.duration_s, 6),
                "backchannel": o.backchannel,
            }
            for o in resp.overlaps
        ],
        "focal_speech": [[round(a, 6), round(b, 6)] for a, b in focal],
        "observed_until_s": round(observed, 6),
        "complete_window": observed >= T_H_S - 0.05,
        "end_reason": log.info.attrs.get("end_reason"),
    }


# ---------------------------------------------------------------------------------------------
# psi: completion probability of the focal speech


def focal_track(focal: Sequence[tuple[float, float]], lo_s: float, hi_s: float) -> np.ndarray:
    """Boolean voice-activity frames at `FRAME_HZ` over [lo_s, hi_s)."""
    n = max(1, int(math.ceil((hi_s - lo_s) * FRAME_HZ)))
    va = np.zeros(n, dtype=bool)
    for a, b in focal:
        i0 = max(0, int(math.floor((a - lo_s) * FRAME_HZ)))
        i1 = min(n, int(math.ceil((b - lo_s) * FRAME_HZ)))
        va[i0:i1] = True
    return va


def psi_at(
    estimator: CompletionEstimator | None,
    focal: Sequence[tuple[float, float]],
    at_s: Sequence[float],
) -> np.ndarray:
    """psi at the instants `at_s` (same clock as `focal`); 0 without an estimator (no marks)."""
    t = np.asarray(at_s, dtype=float)
    if t.size == 0:
        return np.zeros(0)
    if estimator is None:
        return np.zeros(t.size)
    lo = min([a for a, _ in focal] + [float(t.min())]) - 2.5
    hi = float(t.max()) + 0.1
    x = va_history_features(focal_track(focal, lo, hi), FRAME_HZ, t - lo)
    return np.clip(estimator.psi(x), 0.0, 1.0)


def completion_rows(episode: Episode) -> tuple[np.ndarray, np.ndarray]:
    """(features, targets) of one episode for fitting psi: instants every `FIT_STEP_S` over its
    context; the target is the share of annotators with a completion mark within
    `MARK_TOLERANCE_S` of the instant."""
    c = episode.context_s
    t = np.arange(-c + FIT_STEP_S, 1e-9, FIT_STEP_S)
    x = va_history_features(
        focal_track(episode.focal_speech, -c, 0.0 + 1.0 / FRAME_HZ), FRAME_HZ, t + c
    )
    marks = episode.annotations.completion_marks
    y = np.zeros(t.size)
    for m in marks:
        mm = np.asarray(m, dtype=float)
        if mm.size:
            y += (np.abs(t[:, None] - mm[None, :]) <= MARK_TOLERANCE_S).any(axis=1)
    return x, y / max(1, len(marks))


def fit_completion(episodes: Sequence[Episode]) -> CompletionEstimator | None:
    """psi fitted on every episode's completion marks; None when no annotator marked anything."""
    rows = [completion_rows(e) for e in episodes]
    if not rows:
        return None
    x = np.concatenate([r[0] for r in rows])
    y = np.concatenate([r[1] for r in rows])
    if y.sum() <= 0:
        return None
    return CompletionEstimator.fit(x, y)


def overlap_events(
    overlaps: Sequence[dict | Overlap], psi: Sequence[float]
) -> tuple[OverlapEvent, ...]:
    out = []
    for o, p in zip(overlaps, psi):
        d = (
            o
            if isinstance(o, dict)
            else {"onset_s": o.onset_s, "duration_s": o.duration_s, "backchannel": o.backchannel}
        )
        out.append(
            OverlapEvent(
                float(d["onset_s"]), float(d["duration_s"]), float(p), bool(d["backchannel"])
            )
        )
    return tuple(out)
