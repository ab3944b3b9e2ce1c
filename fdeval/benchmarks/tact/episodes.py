"""TACT episodes: the on-disk format, its strict validation, and the speaker profile renderings.

An episode is one decision point of one focal speaker: the dual-channel context audio that ends
at the decision point, the transcript history, the focal speaker's behavioural profile, the
category, the annotations (K intent labels, silence acceptability, acceptable onset windows,
completion marks), slice metadata and, where known, what the human interlocutor actually did.
A data set is a folder (the *data root*):

    <root>/episodes/<episode_id>.json
    <root>/audio/<episode_id>.wav            stereo context, ends at the decision point
    <root>/audio/<episode_id>.turn<k>.wav    mono focal-channel pieces streamed to the system

Times inside an episode are seconds relative to the decision point (t = 0): the context spans
[-context_s, 0]; onsets and windows live on the TACT offset domain [-2, 5]. `docs/tact.md`
documents every field. Reading is strict: unknown keys are rejected and every problem raises
`EpisodeError`, one line naming the file, the episode and the field as a dotted path.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

import soundfile as sf

from fdeval.cases import schema
from fdeval.errors import FdevalError
from fdeval.files import write_json_atomic

from .laws import DOMAIN_S, INTENTS, N_INTENTS
from .scoring import CATEGORIES

SCHEMA_VERSION = 1
TIME_EPS_S = 1e-3  # slack where independently rounded times are compared
SPEAKERS = ("focal", "other")
REPLAY_KINDS = ("take-turn", "barge-in")
SPLITS = ("test", "dev")
SLICE_KEYS = ("gender", "age_band", "l1_region", "snr", "rate_tercile")
FLOOR_DEVICES = ("filled_pause", "trailing_conjunction")
_ID_RE = schema._ID_RE  # letters, digits, '.', '_', '-'; no leading punctuation


class EpisodeError(FdevalError):
    """An episode file that fails validation: one line naming the file, the episode and the field."""

    def __init__(self, path: str, episode_id: str | None, field: str, message: str):
        self.path, self.episode_id, self.field, self.message = str(path), episode_id, field, message
        where = f"episode {episode_id!r}" if episode_id else "episode ?"
        super().__init__(f"{path}: {where}: field {field!r}: {message}")


# ---------------------------------------------------------------------------------------------
# Records


@dataclass(frozen=True)
class SpeakerProfile:
    """The focal speaker's behaviour, summarised from evidence disjoint from the episode.

    None marks a feature the evidence could not measure (e.g. no word transcript for the
    articulation rate); it is left out of the synopsis and is NaN among the features.
    """

    evidence_min: float
    fto_median_s: float | None  # floor-transfer offset when the speaker takes the floor
    fto_p10_s: float | None
    fto_p90_s: float | None
    pause_median_s: float | None  # pauses inside the speaker's own turns
    pause_p90_s: float | None
    abstention_tolerance_s: float | None  # silence the speaker sits out before resuming unanswered
    backchannel_solicitation_per_min: float | None  # listener tokens drawn per minute of own speech
    backchannel_production_per_min: (
        float | None
    )  # own listener tokens per minute of the other's speech
    articulation_rate_syl_s: float | None
    floor_holding_per_min: Mapping[str, float | None] = field(
        default_factory=dict, compare=False, hash=False
    )


@dataclass(frozen=True)
class Annotations:
    """K annotators' judgements, aligned by annotator index."""

    labels: tuple[str, ...]
    silence_acceptability: tuple[float, ...]  # in [0, 1]
    onset_windows: tuple[tuple[tuple[float, float], ...], ...]  # acceptable [lo, hi] on [-2, 5]
    completion_marks: tuple[tuple[float, ...], ...]  # completion points in [-context_s, 0]


@dataclass(frozen=True)
class ReplayTurn:
    """One piece of the focal channel as streamed to the system (mono WAV, [start_s, end_s])."""

    kind: str  # take-turn | barge-in
    audio_path: str
    start_s: float
    end_s: float
    barge_in_after_s: float | None = None  # barge-in: delay after the system's speech onset


@dataclass(frozen=True)
class HistoryLine:
    speaker: str  # focal | other
    text: str
    start_s: float
    end_s: float


@dataclass(frozen=True)
class HumanContinuation:
    """What the human interlocutor did after the decision point (onset None: withheld)."""

    onset_s: float | None
    duration_s: float | None


@dataclass(frozen=True)
class Episode:
    episode_id: str
    source: str
    category: str
    audio_path: str
    focal_channel: int
    sample_rate: int
    context_s: float
    replay: tuple[ReplayTurn, ...]
    focal_speech: tuple[tuple[float, float], ...]
    history: tuple[HistoryLine, ...]
    speaker_id: str
    profile: SpeakerProfile
    annotations: Annotations
    slices: Mapping[str, str] = field(default_factory=dict, compare=False, hash=False)
    context_bucket: str = ""
    split: str = "test"
    judge_logits: tuple[float, ...] | None = None
    human: HumanContinuation | None = None
    meta: Mapping[str, Any] = field(default_factory=dict, compare=False, hash=False)


# ---------------------------------------------------------------------------------------------
# Profile renderings


PROFILE_FEATURES = (
    "evidence_min",
    "fto_median_s",
    "fto_p10_s",
    "fto_p90_s",
    "pause_median_s",
    "pause_p90_s",
    "abstention_tolerance_s",
    "backchannel_solicitation_per_min",
    "backchannel_production_per_min",
    "articulation_rate_syl_s",
    *(f"floor_holding_{d}_per_min" for d in FLOOR_DEVICES),
)


def profile_features(p: SpeakerProfile) -> dict[str, float]:
    """The profile as a flat feature vector (`PROFILE_FEATURES` order; NaN where unmeasured)."""
    out = {}
    for name in PROFILE_FEATURES:
        if name.startswith("floor_holding_"):
            v = p.floor_holding_per_min.get(name[len("floor_holding_") : -len("_per_min")])
        else:
            v = getattr(p, name)
        out[name] = math.nan if v is None else float(v)
    return out


def render_synopsis(p: SpeakerProfile) -> str:
    """The profile as a prompt synopsis: plain sentences about the person the system talks to.

    The wording avoids the keywords the reference agent reads as turn-taking instructions, so a
    profile never switches its policy (a test checks this); a real system reads it as context.
    """
    s = [
        f"About the person you are talking with (from {p.evidence_min:.1f} minutes of their other conversations):"
    ]
    if p.fto_median_s is not None:
        rng = ""
        if p.fto_p10_s is not None and p.fto_p90_s is not None:
            rng = f" (usually between {p.fto_p10_s:+.2f} and {p.fto_p90_s:+.2f} s)"
        s.append(
            f"when they take the floor, they start {p.fto_median_s:+.2f} s after the other person stops{rng}."
        )
    if p.pause_median_s is not None:
        tail = f", up to {p.pause_p90_s:.2f} s" if p.pause_p90_s is not None else ""
        s.append(f"They pause {p.pause_median_s:.2f} s inside their own turns on median{tail}.")
    if p.abstention_tolerance_s is not None:
        s.append(
            f"When nobody replies, they wait about {p.abstention_tolerance_s:.1f} s before going on themselves."
        )
    feedback = []
    if p.backchannel_solicitation_per_min is not None:
        feedback.append(
            f"draw short feedback such as 'yeah' or 'right' {p.backchannel_solicitation_per_min:.1f} "
            "times per minute of their speech"
        )
    if p.backchannel_production_per_min is not None:
        feedback.append(
            f"give such feedback {p.backchannel_production_per_min:.1f} times per minute of the other's speech"
        )
    if feedback:
        s.append("They " + " and ".join(feedback) + ".")
    if p.articulation_rate_syl_s is not None:
        s.append(f"They speak at {p.articulation_rate_syl_s:.1f} syllables per second.")
    devices = {k: v for k, v in p.floor_holding_per_min.items() if v is not None}
    if devices:
        names = {
            "filled_pause": "filled pauses (um, uh)",
            "trailing_conjunction": "trailing conjunctions (and, but, so)",
        }
        s.append(
            "Devices they use to go on talking: "
            + ", ".join(f"{names.get(k, k)} {v:.1f} times per minute" for k, v in devices.items())
            + "."
        )
    return " ".join(s)


# ---------------------------------------------------------------------------------------------
# Writing


def _r(x: float | None, nd: int = 4) -> float | None:
    return None if x is None else round(float(x), nd)


def profile_to_dict(p: SpeakerProfile) -> dict[str, Any]:
    return {
        "evidence_min": _r(p.evidence_min, 2),
        "fto_s": {"median": _r(p.fto_median_s), "p10": _r(p.fto_p10_s), "p90": _r(p.fto_p90_s)},
        "intra_turn_pause_s": {"median": _r(p.pause_median_s), "p90": _r(p.pause_p90_s)},
        "abstention_tolerance_s": _r(p.abstention_tolerance_s),
        "backchannel_solicitation_per_min": _r(p.backchannel_solicitation_per_min, 3),
        "backchannel_production_per_min": _r(p.backchannel_production_per_min, 3),
        "articulation_rate_syl_s": _r(p.articulation_rate_syl_s, 3),
        "floor_holding_per_min": {k: _r(v, 3) for k, v in p.floor_holding_per_min.items()},
    }


def episode_to_dict(e: Episode) -> dict[str, Any]:
    """The JSON object of an episode (key order fixed)."""
    a = e.annotations
    return {
        "schema_version": SCHEMA_VERSION,
        "episode_id": e.episode_id,
        "source": e.source,
        "category": e.category,
        "split": e.split,
        "context_bucket": e.context_bucket,
        "audio": {
            "path": e.audio_path,
            "focal_channel": e.focal_channel,
            "sample_rate": e.sample_rate,
            "context_s": _r(e.context_s, 6),
        },
        "replay": [
            {
                "kind": t.kind,
                "audio_path": t.audio_path,
                "start_s": _r(t.start_s, 6),
                "end_s": _r(t.end_s, 6),
                **({"barge_in_after_s": _r(t.barge_in_after_s)} if t.kind == "barge-in" else {}),
            }
            for t in e.replay
        ],
        "focal_speech": [[_r(a0), _r(b0)] for a0, b0 in e.focal_speech],
        "history": [
            {"speaker": h.speaker, "text": h.text, "start_s": _r(h.start_s), "end_s": _r(h.end_s)}
            for h in e.history
        ],
        "speaker_id": e.speaker_id,
        "profile": profile_to_dict(e.profile),
        "annotations": {
            "labels": list(a.labels),
            "silence_acceptability": [_r(x, 3) for x in a.silence_acceptability],
            "onset_windows": [[[_r(lo), _r(hi)] for lo, hi in w] for w in a.onset_windows],
            "completion_marks": [[_r(t) for t in m] for m in a.completion_marks],
        },
        "judge_logits": None if e.judge_logits is None else [float(x) for x in e.judge_logits],
        "slices": dict(e.slices),
        "human_continuation": None
        if e.human is None
        else {"onset_s": _r(e.human.onset_s), "duration_s": _r(e.human.duration_s)},
        "meta": dict(e.meta),
    }


def write_episode(e: Episode, root: str | Path) -> Path:
    """Validate `e` (audio files included) and write `<root>/episodes/<id>.json` atomically."""
    path = Path(root) / "episodes" / f"{e.episode_id}.json"
    d = episode_to_dict(e)
    episode_from_dict(json.loads(json.dumps(d)), path, root)
    write_json_atomic(path, d)
    return path


# ---------------------------------------------------------------------------------------------
# Reading

EPISODE_KEYS: dict[str, bool] = {  # key -> required
    "schema_version": True,
    "episode_id": True,
    "source": True,
    "category": True,
    "split": False,
    "context_bucket": False,
    "audio": True,
    "replay": True,
    "focal_speech": True,
    "history": True,
    "speaker_id": True,
    "profile": True,
    "annotations": True,
    "judge_logits": False,
    "slices": True,
    "human_continuation": False,
    "meta": False,
}
AUDIO_KEYS = {"path": True, "focal_channel": True, "sample_rate": True, "context_s": True}
REPLAY_KEYS = {
    "kind": True,
    "audio_path": True,
    "start_s": True,
    "end_s": True,
    "barge_in_after_s": False,
}
HISTORY_KEYS = {"speaker": True, "text": True, "start_s": True, "end_s": True}
PROFILE_KEYS = {
    "evidence_min": True,
    "fto_s": True,
    "intra_turn_pause_s": True,
    "abstention_tolerance_s": True,
    "backchannel_solicitation_per_min": True,
    "backchannel_production_per_min": True,
    "articulation_rate_syl_s": True,
    "floor_holding_per_min": True,
}
ANNOTATION_KEYS = {
    "labels": True,
    "silence_acceptability": True,
    "onset_windows": True,
    "completion_marks": True,
}
HUMAN_KEYS = {"onset_s": True, "duration_s": True}


class _Ctx:
    def __init__(self, path: str | Path, episode_id: str | None):
        self.path, self.episode_id = str(path), episode_id

    def fail(self, field: str, message: str) -> EpisodeError:
        return EpisodeError(self.path, self.episode_id, field or "<root>", message)


# Field validators shared with the test-case schema: they only call `c.fail(field, message)`.
_kind, _join, _obj = schema._kind, schema._join, schema._check_keys


def _str(c: _Ctx, v: Any, where: str, empty: bool = False) -> str:
    return schema._str(c, v, where, empty=empty)


def _ident(c: _Ctx, v: Any, where: str) -> str:
    return schema._ident(c, v, where)


def _enum(c: _Ctx, v: Any, where: str, allowed: Sequence[str]) -> str:
    return schema._enum(c, v, where, tuple(allowed))


def _num(
    c: _Ctx,
    v: Any,
    where: str,
    lo: float | None = None,
    hi: float | None = None,
    nullable: bool = False,
    positive: bool = False,
) -> float | None:
    """A finite number (None allowed when `nullable`) within [lo, hi]."""
    if v is None and nullable:
        return None
    x = schema._num(c, v, where, min_=lo, positive=positive)
    if hi is not None and x > hi:
        raise c.fail(where, f"must be <= {hi:g}, got {v!r}")
    return x


def _time(
    c: _Ctx, v: Any, where: str, lo: float, hi: float, nullable: bool = False
) -> float | None:
    """A time in [lo, hi] with the rounding slack."""
    x = _num(c, v, where, nullable=nullable)
    if x is None:
        return None
    if x < lo - TIME_EPS_S or x > hi + TIME_EPS_S:
        raise c.fail(where, f"{x:g} is outside [{lo:g}, {hi:g}]")
    return min(max(x, lo), hi)


def _int(c: _Ctx, v: Any, where: str, lo: int | None = None) -> int:
    return schema._int(c, v, where, min_=lo)


def _list(c: _Ctx, v: Any, where: str, nonempty: bool = False) -> list[Any]:
    return schema._list(c, v, where, nonempty=nonempty)


def _rel_path(c: _Ctx, v: Any, where: str, root: Path | None) -> str:
    s = _str(c, v, where)
    p = PurePosixPath(s)
    if "\\" in s or p.is_absolute() or ".." in p.parts:
        raise c.fail(
            where, f"{s!r} must be a relative '/'-separated path inside the data root (no '..')"
        )
    if root is not None:
        full = (Path(root) / p).resolve()
        if not full.is_file():
            raise c.fail(where, f"audio file not found: {full}")
    return s


def _intervals(
    c: _Ctx, v: Any, where: str, lo: float, hi: float
) -> tuple[tuple[float, float], ...]:
    out: list[tuple[float, float]] = []
    prev = -math.inf
    for i, item in enumerate(_list(c, v, where)):
        f = f"{where}[{i}]"
        pair = _list(c, item, f)
        if len(pair) != 2:
            raise c.fail(f, f"expected [start, end], got {len(pair)} values")
        a = _time(c, pair[0], f"{f}[0]", lo, hi)
        b = _time(c, pair[1], f"{f}[1]", lo, hi)
        if b <= a:
            raise c.fail(f, f"end {b:g} is not after start {a:g}")
        if a < prev - TIME_EPS_S:
            raise c.fail(
                f,
                f"starts at {a:g}, before the previous interval ends ({prev:g}); keep them ordered",
            )
        prev = b
        out.append((a, b))
    return tuple(out)


def _profile(c: _Ctx, v: Any) -> SpeakerProfile:
    w = "profile"
    d = _obj(c, v, PROFILE_KEYS, w)
    fto = _obj(c, d["fto_s"], {"median": True, "p10": True, "p90": True}, f"{w}.fto_s")
    pause = _obj(
        c, d["intra_turn_pause_s"], {"median": True, "p90": True}, f"{w}.intra_turn_pause_s"
    )
    nn = lambda x, f, lo=None: _num(c, x, f, lo=lo, nullable=True)  # noqa: E731
    fh_raw = d["floor_holding_per_min"]
    if not isinstance(fh_raw, dict):
        raise c.fail(f"{w}.floor_holding_per_min", f"expected an object, got {_kind(fh_raw)}")
    fh = {}
    for k, x in fh_raw.items():
        if k not in FLOOR_DEVICES:
            raise c.fail(
                f"{w}.floor_holding_per_min.{k}",
                f"unknown device {k!r}; valid: {', '.join(FLOOR_DEVICES)}",
            )
        fh[k] = nn(x, f"{w}.floor_holding_per_min.{k}", 0.0)
    p = SpeakerProfile(
        evidence_min=_num(c, d["evidence_min"], f"{w}.evidence_min", lo=0.0),
        fto_median_s=nn(fto["median"], f"{w}.fto_s.median"),
        fto_p10_s=nn(fto["p10"], f"{w}.fto_s.p10"),
        fto_p90_s=nn(fto["p90"], f"{w}.fto_s.p90"),
        pause_median_s=nn(pause["median"], f"{w}.intra_turn_pause_s.median", 0.0),
        pause_p90_s=nn(pause["p90"], f"{w}.intra_turn_pause_s.p90", 0.0),
        abstention_tolerance_s=nn(d["abstention_tolerance_s"], f"{w}.abstention_tolerance_s", 0.0),
        backchannel_solicitation_per_min=nn(
            d["backchannel_solicitation_per_min"], f"{w}.backchannel_solicitation_per_min", 0.0
        ),
        backchannel_production_per_min=nn(
            d["backchannel_production_per_min"], f"{w}.backchannel_production_per_min", 0.0
        ),
        articulation_rate_syl_s=nn(
            d["articulation_rate_syl_s"], f"{w}.articulation_rate_syl_s", 0.0
        ),
        floor_holding_per_min=fh,
    )
    if p.fto_p10_s is not None and p.fto_p90_s is not None and p.fto_p10_s > p.fto_p90_s:
        raise c.fail(f"{w}.fto_s.p10", f"{p.fto_p10_s:g} is above p90 {p.fto_p90_s:g}")
    return p


def _annotations(c: _Ctx, v: Any, context_s: float, prefix: str = "annotations") -> Annotations:
    d = _obj(c, v, ANNOTATION_KEYS, prefix)
    w = prefix
    at = lambda key: f"{w}.{key}" if w else key  # noqa: E731
    labels = tuple(
        _enum(c, z, f"{at('labels')}[{i}]", INTENTS)
        for i, z in enumerate(_list(c, d["labels"], at("labels"), nonempty=True))
    )
    k = len(labels)

    def per_annotator(key: str) -> list[Any]:
        items = _list(c, d[key], at(key))
        if len(items) != k:
            raise c.fail(
                at(key), f"has {len(items)} entries but there are {k} labels (one per annotator)"
            )
        return items

    silence = tuple(
        _num(c, x, f"{at('silence_acceptability')}[{i}]", lo=0.0, hi=1.0)
        for i, x in enumerate(per_annotator("silence_acceptability"))
    )
    windows = tuple(
        _intervals(c, x, f"{at('onset_windows')}[{i}]", *DOMAIN_S)
        for i, x in enumerate(per_annotator("onset_windows"))
    )
    marks = []
    for i, m in enumerate(per_annotator("completion_marks")):
        ts = tuple(
            _time(c, t, f"{at('completion_marks')}[{i}][{j}]", -context_s, 0.0)
            for j, t in enumerate(_list(c, m, f"{at('completion_marks')}[{i}]"))
        )
        if list(ts) != sorted(ts):
            raise c.fail(f"{at('completion_marks')}[{i}]", "marks must be in increasing time order")
        marks.append(ts)
    return Annotations(labels, silence, windows, tuple(marks))


def episode_from_dict(d: Any, path: str | Path, root: str | Path | None) -> Episode:
    """Validate the JSON object `d` read from `path` and build its `Episode`.

    `root` is the data root audio paths are relative to (checked to exist); None skips the
    lookups. Raises `EpisodeError` on the first problem.
    """
    eid = (
        d.get("episode_id")
        if isinstance(d, dict) and isinstance(d.get("episode_id"), str)
        else None
    )
    c = _Ctx(path, eid)
    _obj(c, d, EPISODE_KEYS, "")
    sv = _int(c, d["schema_version"], "schema_version")
    if sv != SCHEMA_VERSION:
        raise c.fail(
            "schema_version", f"unsupported schema version {sv}; this fdeval reads {SCHEMA_VERSION}"
        )
    eid = _ident(c, d["episode_id"], "episode_id")
    if path is not None and Path(path).suffix == ".json" and Path(path).stem != eid:
        raise c.fail("episode_id", f"{eid!r} does not match the file name {Path(path).name!r}")
    source = _str(c, d["source"], "source")
    category = _enum(c, d["category"], "category", CATEGORIES)
    split = _enum(c, d.get("split", "test"), "split", SPLITS)
    bucket = _str(c, d.get("context_bucket", ""), "context_bucket", empty=True) or category
    root_p = None if root is None else Path(root)

    au = _obj(c, d["audio"], AUDIO_KEYS, "audio")
    audio_path = _rel_path(c, au["path"], "audio.path", root_p)
    focal_channel = _int(c, au["focal_channel"], "audio.focal_channel", lo=0)
    if focal_channel > 1:
        raise c.fail("audio.focal_channel", f"must be 0 or 1 (stereo context), got {focal_channel}")
    sample_rate = _int(c, au["sample_rate"], "audio.sample_rate", lo=1)
    context_s = _num(c, au["context_s"], "audio.context_s", positive=True)
    if root_p is not None:
        info = sf.info(str(root_p / audio_path))
        if info.channels != 2:
            raise c.fail(
                "audio.path",
                f"context audio must be stereo (one channel per speaker), has {info.channels}",
            )
        if info.samplerate != sample_rate:
            raise c.fail(
                "audio.sample_rate", f"{sample_rate} but the file is at {info.samplerate} Hz"
            )
        if abs(info.frames / info.samplerate - context_s) > 0.002:
            raise c.fail(
                "audio.context_s",
                f"{context_s:g} but the file lasts {info.frames / info.samplerate:.4f} s "
                "(the context ends at the decision point)",
            )

    replay = []
    prev_end = -context_s
    items = _list(c, d["replay"], "replay", nonempty=True)
    for i, item in enumerate(items):
        f = f"replay[{i}]"
        t = _obj(c, item, REPLAY_KEYS, f)
        kind = _enum(c, t["kind"], f"{f}.kind", REPLAY_KINDS)
        if i == 0 and kind != "take-turn":
            raise c.fail(f"{f}.kind", "the first piece must be a take-turn")
        ap = _rel_path(c, t["audio_path"], f"{f}.audio_path", root_p)
        a = _time(c, t["start_s"], f"{f}.start_s", -context_s, 0.0)
        b = _time(c, t["end_s"], f"{f}.end_s", -context_s, 0.0)
        if b <= a:
            raise c.fail(f"{f}.end_s", f"{b:g} is not after start_s {a:g}")
        if a < prev_end - TIME_EPS_S:
            raise c.fail(f"{f}.start_s", f"{a:g} is before the previous piece ends ({prev_end:g})")
        after = None
        if kind == "barge-in":
            if t.get("barge_in_after_s") is None:
                raise c.fail(f"{f}.barge_in_after_s", "required for a barge-in piece")
            after = _num(c, t["barge_in_after_s"], f"{f}.barge_in_after_s", lo=0.0)
        elif t.get("barge_in_after_s") is not None:
            raise c.fail(f"{f}.barge_in_after_s", "only allowed on a barge-in piece")
        if root_p is not None:
            info = sf.info(str(root_p / ap))
            if info.channels != 1:
                raise c.fail(
                    f"{f}.audio_path",
                    f"replay pieces are mono focal-channel audio, file has {info.channels} channels",
                )
            if abs(info.frames / info.samplerate - (b - a)) > 0.002:
                raise c.fail(
                    f"{f}.audio_path",
                    f"lasts {info.frames / info.samplerate:.4f} s but the piece spans {b - a:.4f} s",
                )
        prev_end = b
        replay.append(ReplayTurn(kind, ap, a, b, after))
    if abs(replay[-1].end_s) > TIME_EPS_S:
        raise c.fail(
            f"replay[{len(replay) - 1}].end_s",
            f"the last piece must end at the decision point 0, got {replay[-1].end_s:g}",
        )

    focal_speech = _intervals(c, d["focal_speech"], "focal_speech", -context_s, 0.0)
    history = []
    for i, item in enumerate(_list(c, d["history"], "history")):
        f = f"history[{i}]"
        h = _obj(c, item, HISTORY_KEYS, f)
        sp = _enum(c, h["speaker"], f"{f}.speaker", SPEAKERS)
        text = _str(c, h["text"], f"{f}.text")
        a = _num(c, h["start_s"], f"{f}.start_s")
        b = _num(c, h["end_s"], f"{f}.end_s")
        if b < a:
            raise c.fail(f"{f}.end_s", f"{b:g} is before start_s {a:g}")
        if a > TIME_EPS_S:
            raise c.fail(
                f"{f}.start_s",
                f"{a:g} is after the decision point (history is what came before it)",
            )
        if history and a < history[-1].start_s - TIME_EPS_S:
            raise c.fail(f"{f}.start_s", "history lines must be in order of their start times")
        history.append(HistoryLine(sp, text, a, b))

    speaker_id = _ident(c, d["speaker_id"], "speaker_id")
    profile = _profile(c, d["profile"])
    annotations = _annotations(c, d["annotations"], context_s)

    jl = d.get("judge_logits")
    judge_logits = None
    if jl is not None:
        vals = _list(c, jl, "judge_logits")
        if len(vals) != N_INTENTS:
            raise c.fail(
                "judge_logits",
                f"needs {N_INTENTS} values in the order {', '.join(INTENTS)}, got {len(vals)}",
            )
        judge_logits = tuple(_num(c, x, f"judge_logits[{i}]") for i, x in enumerate(vals))

    sl = d["slices"]
    if not isinstance(sl, dict):
        raise c.fail("slices", f"expected an object, got {_kind(sl)}")
    slices = {}
    for k in SLICE_KEYS:
        if k not in sl:
            raise c.fail(
                f"slices.{k}", f"missing required slice (required: {', '.join(SLICE_KEYS)})"
            )
    for k, v in sl.items():
        if k not in SLICE_KEYS:
            raise c.fail(f"slices.{k}", f"unknown slice key {k!r}; valid: {', '.join(SLICE_KEYS)}")
        slices[k] = _str(c, v, f"slices.{k}")

    human = None
    if d.get("human_continuation") is not None:
        hc = _obj(c, d["human_continuation"], HUMAN_KEYS, "human_continuation")
        onset = _time(c, hc["onset_s"], "human_continuation.onset_s", *DOMAIN_S, nullable=True)
        dur = _num(c, hc["duration_s"], "human_continuation.duration_s", lo=0.0, nullable=True)
        if (onset is None) != (dur is None):
            raise c.fail(
                "human_continuation.duration_s",
                "onset_s and duration_s are both null (withheld) or both set",
            )
        human = HumanContinuation(onset, dur)

    meta = d.get("meta", {})
    if not isinstance(meta, dict):
        raise c.fail("meta", f"expected an object, got {_kind(meta)}")
    return Episode(
        eid,
        source,
        category,
        audio_path,
        focal_channel,
        sample_rate,
        context_s,
        tuple(replay),
        focal_speech,
        tuple(history),
        speaker_id,
        profile,
        annotations,
        slices,
        bucket,
        split,
        judge_logits,
        human,
        meta,
    )


def load_episode(path: str | Path, root: str | Path | None) -> Episode:
    path = Path(path)
    try:
        raw = path.read_text(encoding="utf-8")
    except OSError as e:
        raise EpisodeError(str(path), None, "<file>", f"cannot read: {e.strerror or e}") from None
    try:
        d = json.loads(raw)
    except json.JSONDecodeError as e:
        raise EpisodeError(
            str(path), None, "<json>", f"invalid JSON at line {e.lineno} column {e.colno}: {e.msg}"
        ) from None
    return episode_from_dict(d, path, root)


def episode_files(root: str | Path) -> list[Path]:
    folder = Path(root) / "episodes"
    return sorted(p for p in folder.glob("*.json") if not p.name.startswith(".") and p.is_file())


def load_episodes(root: str | Path, check_audio: bool = True) -> list[Episode]:
    """Every episode of a data root, sorted by id (validated; audio looked up unless told not to)."""
    folder = Path(root) / "episodes"
    if not folder.is_dir():
        raise EpisodeError(str(folder), None, "<dir>", "episodes folder not found")
    return [load_episode(p, root if check_audio else None) for p in episode_files(root)]
