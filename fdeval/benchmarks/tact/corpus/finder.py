"""Decision points of a two-speaker conversation, placed by the TACT paper's rules.

The paper puts a decision point at the end of a focal speaker's turn; for pause handling at an
intra-turn silence of at least 600 ms, and for interruption where the other side holds the
floor. It observes the system's answer over [-T_a, T_h] = [-2 s, 5 s] around the point. Everything
else below is our reading of those rules, with each number's source.

**Speech.** Each channel's speech is a list of inter-pausal units (IPUs): word times, turns or
VAD segments joined across gaps shorter than `PAUSE_MIN_S` (0.2 s, the shortest pause the
importer's profile counts). A candidate point is the end `t` of a focal IPU `[a, t]`.

**Listener tokens.** An IPU of at most `TOKEN_MAX_S` (1 s) while the other speaker holds the floor
around it (spoke within 1 s before or during it, goes on within 1 s after) is a listener token,
by the same rule the importer's profile counts backchannels with (`profiles._holds_floor`). A
focal listener token is never a decision point: the floor was not the focal speaker's. The other
speaker's IPUs that are not listener tokens are their *turns*.

**Categories**, tried in this order (the first that fits wins; `nxt` is the focal speaker's next
IPU start):

1. user_interruption: the focal IPU starts inside a turn of the other speaker (the other holds
   the floor) and is not a listener token. The point is the end of the cut-in. The replay needs
   the focal speaker's previous IPU as the prompt the other was answering (`prompt_end_s`), and
   the row's context is widened to hold that prompt when it lies more than `context_s` back. A
   cut-in without an earlier focal IPU is no point at all (it is not re-read as another category).
2. pause_handling: the focal speaker is silent for at least `PAUSE_HANDLING_MIN_S` (0.6 s, the
   paper), the other says nothing in that silence, and the focal speaker goes on within the
   horizon (so the silence is known to be inside the turn).
3. backchanneling: the other produces a listener token that belongs to this IPU end (it starts
   in the focal IPU no more than T_a before `t`, or in the silence after it), takes no turn before
   the focal speaker goes on, and the focal speaker goes on within the horizon.
4. smooth_turn_taking: the other's first turn still going after `t` began after the focal IPU
   did, starts before the focal speaker goes on and within the horizon, and overlaps the focal
   speech by at most `SMOOTH_MAX_OVERLAP_S` (0.5 s; our choice: the paper's answer law,
   ex-Gaussian (0.16, 0.11, 0.24) s, puts under 1e-10 of its mass before -0.5 s, so an earlier
   onset is a competitive overlap rather than a transfer).

**Bounds** (every category): the context [t - context_s, t] and the horizon [t, t + T_h] lie inside
the recording (the pre-horizon T_a is inside the context, `context_s` >= T_a); and the other
speaker has taken a turn before the focal IPU began, so the point sits in an exchange rather than
an opening monologue. The paper gives no minimum history (its histories average 3.2 minutes);
we require the context the importer cuts (default 8 s, `benchmark.context_s`) to be whole, and
the importer keeps up to 180 s of words before the point as the history.

**Others.** In a multiparty recording mined as pairs (AMI), a point is dropped when anyone else
speaks between the start of the focal IPU and the horizon: the exchange it scores must be the
pair's alone.
"""

from __future__ import annotations

import bisect
import inspect
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from fdeval.errors import ConfigError

from ..importer import import_corpus
from ..laws import T_A_S, T_H_S
from ..profiles import PAUSE_MIN_S, TOKEN_MAX_S, _holds_floor, merge_segments
from ..scoring import CATEGORIES

PAUSE_HANDLING_MIN_S = 0.6  # paper: pause-handling points are intra-turn silences of >= 600 ms
SMOOTH_MAX_OVERLAP_S = 0.5  # choice (module docstring): the longest overlap of a smooth transfer
CONTEXT_S: float = (
    inspect.signature(import_corpus).parameters["context_s"].default
)  # the importer's default
PAUSE, BACKCHANNEL, SMOOTH, INTERRUPTION = CATEGORIES  # the scorer's four categories, in its order
Segments = list[tuple[float, float]]


@dataclass(frozen=True)
class FinderSettings:
    """The finder's numbers (module docstring); the defaults are the paper's and the importer's."""

    context_s: float = CONTEXT_S
    pre_horizon_s: float = T_A_S
    horizon_s: float = T_H_S
    pause_min_s: float = PAUSE_HANDLING_MIN_S
    join_gap_s: float = PAUSE_MIN_S
    token_max_s: float = TOKEN_MAX_S
    smooth_max_overlap_s: float = SMOOTH_MAX_OVERLAP_S

    def __post_init__(self):
        for name in ("context_s", "pre_horizon_s", "horizon_s", "pause_min_s", "token_max_s"):
            v = getattr(self, name)
            if (
                isinstance(v, bool)
                or not isinstance(v, (int, float))
                or not math.isfinite(v)
                or v <= 0
            ):
                raise ConfigError(f"finder setting {name} must be a number > 0, got {v!r}")
        for name in ("join_gap_s", "smooth_max_overlap_s"):
            v = getattr(self, name)
            if (
                isinstance(v, bool)
                or not isinstance(v, (int, float))
                or not math.isfinite(v)
                or v < 0
            ):
                raise ConfigError(f"finder setting {name} must be a number >= 0, got {v!r}")
        if self.context_s < self.pre_horizon_s:
            raise ConfigError(
                f"context_s ({self.context_s:g}) must be at least the pre-horizon "
                f"({self.pre_horizon_s:g} s): anticipatory onsets are observed inside the context"
            )


@dataclass(frozen=True)
class DecisionPoint:
    """A decision point: where, whose, which category, and why (`rule`).

    Times are on the conversation's clock except `prompt_end_s` and `cut_in_start_s`, which are
    relative to the point (as the importer's `interruption` wants them). `context_s` is the
    history the episode keeps before the point.
    """

    point_id: str
    conversation_id: str
    focal_channel: int
    decision_s: float
    category: str
    turn_start_s: float
    context_s: float
    rule: str
    prompt_end_s: float | None = None
    cut_in_start_s: float | None = None


def speech_units(
    segments: Iterable[tuple[float, float]], join_gap_s: float = PAUSE_MIN_S
) -> Segments:
    """Inter-pausal units: segments of positive length, sorted, joined across gaps < `join_gap_s`."""
    return merge_segments([(float(a), float(b)) for a, b in segments if b > a], join_gap_s)


def point_id(conversation_id: str, focal_channel: int, decision_s: float) -> str:
    """A readable id that survives re-running the finder: conversation, channel, milliseconds."""
    return f"{conversation_id}.c{focal_channel}.{int(round(decision_s * 1000)):08d}"


def _is_token(
    seg: tuple[float, float], floor: Sequence[tuple[float, float]], token_max_s: float
) -> bool:
    a, b = seg
    return b - a <= token_max_s and _holds_floor(floor, a, b)


def _token_owner(
    start: float, F: Segments, starts: list[float], pre_horizon_s: float
) -> int | None:
    """The focal IPU end a listener token starting at `start` belongs to: the IPU it starts in
    (if that IPU ends within the pre-horizon), or the one whose following silence it starts in."""
    j = bisect.bisect_right(starts, start) - 1
    if j < 0:
        return None
    if start < F[j][1]:
        return j if F[j][1] - start <= pre_horizon_s else None
    return j


def find_decision_points(
    conversation_id: str,
    speech: Sequence[Iterable[tuple[float, float]]],
    duration_s: float,
    settings: FinderSettings = FinderSettings(),
    others_s: Iterable[tuple[float, float]] = (),
) -> list[DecisionPoint]:
    """Every decision point of a two-channel conversation (rules in the module docstring).

    `speech[ch]` is channel ch's speech (any segments; joined into IPUs here), `duration_s` the
    recording's length, `others_s` the speech of anyone else present. Sorted by time, then channel.
    """
    s = settings
    units = [speech_units(seg, s.join_gap_s) for seg in speech]
    if len(units) != 2:
        raise ValueError(f"a dyadic conversation has 2 channels of speech, got {len(units)}")
    others = speech_units(others_s, 0.0)
    points: list[DecisionPoint] = []
    for ch in (0, 1):
        F, O = units[ch], units[1 - ch]
        starts = [a for a, _ in F]
        tokens = [o for o in O if _is_token(o, F, s.token_max_s)]
        turns = [o for o in O if not _is_token(o, F, s.token_max_s)]
        owned: dict[int, list[tuple[float, float]]] = {}
        for o in tokens:
            j = _token_owner(o[0], F, starts, s.pre_horizon_s)
            if j is not None:
                owned.setdefault(j, []).append(o)
        for i, (a, t) in enumerate(F):
            if _is_token((a, t), O, s.token_max_s):
                continue  # a listener token: the floor was the other's
            if t - s.context_s < 0 or t + s.horizon_s > duration_s:
                continue  # the context or the horizon would run off the recording
            if not any(oa < a for oa, _ in turns):
                continue  # no exchange yet: the other has not taken a turn
            nxt = F[i + 1][0] if i + 1 < len(F) else math.inf
            p = _classify(conversation_id, ch, i, F, O, turns, owned.get(i, []), nxt, s)
            if p is None:
                continue
            if any(oa < t + s.horizon_s and ob > a for oa, ob in others):
                continue  # a third person speaks in this exchange
            points.append(p)
    return sorted(points, key=lambda p: (p.decision_s, p.focal_channel))


def _classify(
    conv: str,
    ch: int,
    i: int,
    F: Segments,
    O: Segments,
    turns: Segments,
    tokens: Segments,
    nxt: float,
    s: FinderSettings,
) -> DecisionPoint | None:
    a, t = F[i]

    def point(
        category: str, rule: str, context_s: float = s.context_s, **interruption: float
    ) -> DecisionPoint:
        return DecisionPoint(
            point_id(conv, ch, t), conv, ch, t, category, a, context_s, rule, **interruption
        )

    held = [o for o in turns if o[0] < a < o[1]]
    if held:
        if i == 0:
            return None  # no earlier focal speech to replay as the prompt
        prompt_a, prompt_b = F[i - 1]
        ctx = max(s.context_s, t - prompt_a)
        if t - ctx < 0:
            return None
        return point(
            INTERRUPTION,
            f"cuts in {a - held[0][0]:.2f} s into the other's turn",
            context_s=ctx,
            prompt_end_s=prompt_b - t,
            cut_in_start_s=a - t,
        )
    gap = nxt - t
    other_in_gap = any(oa < nxt and ob > t for oa, ob in O)
    if gap >= s.pause_min_s and nxt <= t + s.horizon_s and not other_in_gap:
        return point(PAUSE, f"silence of {gap:.2f} s, then the focal speaker goes on")
    if tokens and nxt <= t + s.horizon_s and not any(oa < nxt and ob > t for oa, ob in turns):
        return point(
            BACKCHANNEL,
            f"listener token at {tokens[0][0] - t:+.2f} s; the focal speaker goes on "
            f"{gap:.2f} s after the point",
        )
    later = [o for o in turns if o[1] > t and o[0] >= a]
    if later:
        o = min(later)
        if t - s.smooth_max_overlap_s <= o[0] < nxt and o[0] <= t + s.horizon_s:
            return point(SMOOTH, f"the other takes the floor at {o[0] - t:+.2f} s")
    return None


__all__ = [
    "BACKCHANNEL",
    "CONTEXT_S",
    "DecisionPoint",
    "FinderSettings",
    "INTERRUPTION",
    "PAUSE",
    "PAUSE_HANDLING_MIN_S",
    "SMOOTH",
    "SMOOTH_MAX_OVERLAP_S",
    "find_decision_points",
    "point_id",
    "speech_units",
]
