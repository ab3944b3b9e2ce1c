"""Import TACT episodes from a stereo corpus (one channel per speaker) plus an annotation file.

The annotation file is JSON Lines: one object per episode (blank lines are skipped). Paths are
relative to the annotation file's folder (or absolute); times are seconds relative to the
decision point, except `decision_s` (the decision point's time in the audio file) and the word
file's times (file clock). Fields (`docs/tact.md` has the table):

    episode_id, audio, focal_channel, decision_s, category, speaker {id, gender, age_band,
    l1_region}, labels, silence_acceptability, onset_windows, completion_marks
    optional: context_s, words, interruption {prompt_end_s, cut_in_start_s}, judge_logits,
    split, context_bucket, slices {snr, rate_tercile}, profile, human_continuation

What the importer measures itself (Silero VAD on each channel, resampled to 16 kHz):

* the context: the stereo audio over [decision - context_s, decision] (clipped at the file
  start), written at 16 kHz; the focal channel's replay pieces; the focal speech segments;
* the history: the word file's words before the decision point (last `HISTORY_S` seconds) grouped
  into lines (a new line at a change of speaker or a gap over 1 s); empty without a word file;
* the speaker profile (unless given): `profiles.profile_from_pieces` over every file in which the
  speaker is focal, with the episode's own span [decision - context_s, decision + 5 s] removed;
  each file is a piece of its own and the episode's file is two (before and after the span), so
  no offset, pause or silence is ever measured across files or across the removed span;
* the human continuation (unless given): the other channel after the decision point measured with
  the same rules as a system (`measure.measure_response`); unknown when the file ends before the
  horizon;
* slices: gender, age band and first-language region from `speaker`; SNR band of the focal
  channel over the context; articulation-rate tercile against the imported speakers' rates.

User interruption: with `interruption`, the episode is replayed as a take-turn (the focal channel
up to `prompt_end_s`) and a barge-in (from `cut_in_start_s` to the decision point) injected as long
after the system's speech onset as the cut-in came after the onset of the other speaker's speech
it interrupted. Without it, the context is replayed as one take-turn.

Errors name the file, the line and the field: `corpus.jsonl:12: field 'labels[2]': ...`.
"""

from __future__ import annotations

import json
import logging
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import soundfile as sf
from tqdm import tqdm

from fdeval.audio.io import read_wav, write_wav
from fdeval.audio.resample import resample
from fdeval.audio.vad import SileroVAD
from fdeval.errors import FdevalError

from .episodes import (
    _ID_RE,
    SLICE_KEYS,
    SPLITS,
    Annotations,
    Episode,
    HistoryLine,
    HumanContinuation,
    ReplayTurn,
    _annotations,
    _Ctx,
    _profile,
    episode_files,
    write_episode,
)
from .laws import INTENTS, N_INTENTS, T_H_S
from .measure import measure_response
from .profiles import (
    profile_from_pieces,
    rate_tercile,
    rate_terciles,
    snr_band,
    snr_db,
    vad_segments,
)
from .scoring import CATEGORIES

log = logging.getLogger("fdeval")

IMPORTER_VERSION = (
    "2"  # 2: profile evidence is never paired across files or across the episode's span
)
SAMPLE_RATE = 16000
HISTORY_S = 180.0  # words this long before the decision point form the history
LINE_GAP_S = 1.0
ROW_KEYS = {
    "episode_id": True,
    "audio": True,
    "focal_channel": True,
    "decision_s": True,
    "category": True,
    "speaker": True,
    "labels": True,
    "silence_acceptability": True,
    "onset_windows": True,
    "completion_marks": True,
    "context_s": False,
    "words": False,
    "interruption": False,
    "judge_logits": False,
    "split": False,
    "context_bucket": False,
    "slices": False,
    "profile": False,
    "human_continuation": False,
}
SPEAKER_KEYS = ("id", "gender", "age_band", "l1_region")


class CorpusError(FdevalError):
    """A bad annotation row: one line naming the file, the line and the field."""

    def __init__(self, path: str | Path, line: int, field: str, message: str):
        self.path, self.line, self.field = str(path), line, field
        super().__init__(f"{path}:{line}: field {field!r}: {message}")


@dataclass
class Row:
    line: int
    d: dict[str, Any]
    audio: Path
    words: Path | None
    context_s: float


class _RowCtx(_Ctx):
    """Reuses the episode validators, but reports file:line."""

    def __init__(self, path: Path, line: int):
        super().__init__(path, None)
        self.line = line

    def fail(self, field: str, message: str) -> CorpusError:  # type: ignore[override]
        return CorpusError(self.path, self.line, field or "<row>", message)


def _num(c: _RowCtx, v: Any, field: str, lo: float | None = None) -> float:
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
        raise c.fail(field, f"expected a finite number, got {v!r}")
    if lo is not None and v < lo:
        raise c.fail(field, f"must be >= {lo:g}, got {v!r}")
    return float(v)


def _path(c: _RowCtx, v: Any, field: str, base: Path) -> Path:
    if not isinstance(v, str) or not v.strip():
        raise c.fail(field, f"expected a path, got {v!r}")
    p = Path(v).expanduser()
    p = p if p.is_absolute() else base / p
    if not p.is_file():
        raise c.fail(field, f"file not found: {p}")
    return p


def read_rows(path: str | Path, context_s: float) -> list[Row]:
    """Parse and check the annotation file (everything that needs no audio decoding)."""
    path = Path(path)
    base = path.parent
    rows, seen = [], {}
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as e:
        raise CorpusError(path, 0, "<file>", f"cannot read: {e.strerror or e}") from None
    for n, raw in enumerate(text.splitlines(), start=1):
        if not raw.strip():
            continue
        c = _RowCtx(path, n)
        try:
            d = json.loads(raw)
        except json.JSONDecodeError as e:
            raise CorpusError(
                path, n, "<json>", f"invalid JSON at column {e.colno}: {e.msg}"
            ) from None
        if not isinstance(d, dict):
            raise c.fail("<row>", f"expected an object, got {type(d).__name__}")
        for k in d:
            if k not in ROW_KEYS:
                raise c.fail(k, f"unknown key {k!r}; valid keys: {', '.join(ROW_KEYS)}")
        for k, req in ROW_KEYS.items():
            if req and k not in d:
                raise c.fail(k, "missing required field")
        eid = d["episode_id"]
        if not isinstance(eid, str) or not _ID_RE.match(eid):
            raise c.fail(
                "episode_id", f"{eid!r} is not a valid id (letters, digits, '.', '_', '-')"
            )
        if eid in seen:
            raise c.fail("episode_id", f"duplicate episode id {eid!r} (also line {seen[eid]})")
        seen[eid] = n
        audio = _path(c, d["audio"], "audio", base)
        try:
            info = sf.info(str(audio))
        except RuntimeError as e:
            raise c.fail("audio", f"cannot read {audio}: {e}") from None
        if info.channels != 2:
            raise c.fail(
                "audio",
                f"{audio} has {info.channels} channel(s); a stereo file (one channel per speaker) is needed",
            )
        if d["focal_channel"] not in (0, 1) or isinstance(d["focal_channel"], bool):
            raise c.fail("focal_channel", f"must be 0 or 1, got {d['focal_channel']!r}")
        dur = info.frames / info.samplerate
        dec = _num(c, d["decision_s"], "decision_s", lo=0.0)
        if dec > dur or dec <= 0:
            raise c.fail("decision_s", f"{dec:g} is outside the audio (0, {dur:.3f}] s")
        if d["category"] not in CATEGORIES:
            raise c.fail(
                "category",
                f"invalid value {d['category']!r}; expected one of {', '.join(CATEGORIES)}",
            )
        sp = d["speaker"]
        if not isinstance(sp, dict):
            raise c.fail("speaker", "expected an object with id, gender, age_band, l1_region")
        for k in sp:
            if k not in SPEAKER_KEYS:
                raise c.fail(f"speaker.{k}", f"unknown key; valid keys: {', '.join(SPEAKER_KEYS)}")
        for k in SPEAKER_KEYS:
            if not isinstance(sp.get(k), str) or not sp[k].strip():
                raise c.fail(f"speaker.{k}", "missing or empty (a string is required)")
        if not _ID_RE.match(sp["id"]):
            raise c.fail("speaker.id", f"{sp['id']!r} is not a valid id")
        ctx_s = min(_num(c, d.get("context_s", context_s), "context_s", lo=0.1), dec)
        _annotations(
            c,
            {
                k: d[k]
                for k in ("labels", "silence_acceptability", "onset_windows", "completion_marks")
            },
            ctx_s,
            prefix="",
        )
        words = _path(c, d["words"], "words", base) if d.get("words") is not None else None
        if d.get("interruption") is not None:
            it = d["interruption"]
            if not isinstance(it, dict) or set(it) != {"prompt_end_s", "cut_in_start_s"}:
                raise c.fail(
                    "interruption", 'expected {"prompt_end_s": ..., "cut_in_start_s": ...}'
                )
            pe = _num(c, it["prompt_end_s"], "interruption.prompt_end_s")
            cs = _num(c, it["cut_in_start_s"], "interruption.cut_in_start_s")
            if not -ctx_s < pe <= cs < 0:
                raise c.fail(
                    "interruption",
                    f"need -context_s < prompt_end_s <= cut_in_start_s < 0, got {pe:g}, {cs:g} "
                    f"(context_s {ctx_s:g})",
                )
        if d.get("judge_logits") is not None:
            jl = d["judge_logits"]
            if not isinstance(jl, list) or len(jl) != N_INTENTS:
                raise c.fail(
                    "judge_logits", f"needs {N_INTENTS} numbers in the order {', '.join(INTENTS)}"
                )
            for i, x in enumerate(jl):
                _num(c, x, f"judge_logits[{i}]")
        if d.get("split", "test") not in SPLITS:
            raise c.fail(
                "split", f"invalid value {d['split']!r}; expected one of {', '.join(SPLITS)}"
            )
        sl = d.get("slices", {})
        if not isinstance(sl, dict) or any(k not in ("snr", "rate_tercile") for k in sl):
            raise c.fail(
                "slices",
                "only 'snr' and 'rate_tercile' can be given (the others come from speaker)",
            )
        if d.get("profile") is not None:
            _profile(c, d["profile"])
        if d.get("human_continuation") is not None:
            hc = d["human_continuation"]
            if not isinstance(hc, dict) or set(hc) != {"onset_s", "duration_s"}:
                raise c.fail(
                    "human_continuation",
                    'expected {"onset_s": ..., "duration_s": ...} (both null: withheld)',
                )
        rows.append(Row(n, d, audio, words, ctx_s))
    if not rows:
        raise CorpusError(path, 0, "<file>", "no episode rows")
    return rows


class _Audio:
    """Decoded stereo files at 16 kHz with their per-channel VAD segments, cached."""

    def __init__(self):
        self.vad, self.cache = SileroVAD(), {}

    def get(self, path: Path) -> tuple[np.ndarray, list[list[tuple[float, float]]]]:
        if path not in self.cache:
            x, sr = read_wav(path)
            if sr != SAMPLE_RATE:
                x = resample(x, sr, SAMPLE_RATE)
            self.cache[path] = (x, [vad_segments(x[:, ch], SAMPLE_RATE, self.vad) for ch in (0, 1)])
        return self.cache[path]


def _load_words(path: Path) -> list[tuple[int, str, float, float]]:
    """A word file: a JSON list of {channel, text, start_s, end_s} on the audio file's clock."""
    c = _RowCtx(path, 0)
    try:
        items = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as e:
        raise CorpusError(path, 0, "<file>", f"cannot read words: {e}") from None
    if not isinstance(items, list):
        raise c.fail("<file>", "expected a list of {channel, text, start_s, end_s}")
    out = []
    for i, w in enumerate(items):
        if (
            not isinstance(w, dict)
            or set(w) != {"channel", "text", "start_s", "end_s"}
            or w["channel"] not in (0, 1)
            or not isinstance(w["text"], str)
        ):
            raise c.fail(f"[{i}]", "expected {channel: 0|1, text, start_s, end_s}")
        out.append(
            (
                int(w["channel"]),
                w["text"],
                _num(c, w["start_s"], f"[{i}].start_s"),
                _num(c, w["end_s"], f"[{i}].end_s"),
            )
        )
    return sorted(out, key=lambda w: w[2])


def _history(
    words: list[tuple[int, str, float, float]], focal: int, decision: float
) -> list[HistoryLine]:
    lines: list[HistoryLine] = []
    cur: list[tuple[int, str, float, float]] = []

    def flush():
        if cur:
            lines.append(
                HistoryLine(
                    "focal" if cur[0][0] == focal else "other",
                    " ".join(w[1] for w in cur),
                    round(cur[0][2] - decision, 4),
                    round(min(cur[-1][3], decision) - decision, 4),
                )
            )

    for w in words:
        if not decision - HISTORY_S <= w[2] < decision:
            continue
        if cur and (w[0] != cur[-1][0] or w[2] - cur[-1][3] > LINE_GAP_S):
            flush()
            cur = []
        cur.append(w)
    flush()
    return sorted(lines, key=lambda h: h.start_s)


def import_corpus(
    annotations: str | Path, root: str | Path, context_s: float = 8.0, progress: bool = False
) -> int:
    """Write the episodes of an annotation file under `root`; existing episodes are kept.

    Returns how many were written now.
    """
    root = Path(root)
    rows = read_rows(annotations, context_s)
    done = {p.stem for p in episode_files(root)} if (root / "episodes").is_dir() else set()
    audio = _Audio()
    word_files: dict[Path, Path] = {}  # audio file -> the word file some row names for it
    for r in rows:
        if r.words is not None:
            word_files.setdefault(r.audio, r.words)
    words_cache: dict[Path, list] = {}

    def words_of(path: Path):
        wf = word_files.get(path)
        if wf is None:
            return None
        if wf not in words_cache:
            words_cache[wf] = _load_words(wf)
        return words_cache[wf]

    # The files (and channel) in which each speaker is focal: their profile evidence.
    evidence: dict[str, list[tuple[Path, int]]] = {}
    for r in rows:
        key = (r.audio, int(r.d["focal_channel"]))
        if key not in evidence.setdefault(r.d["speaker"]["id"], []):
            evidence[r.d["speaker"]["id"]].append(key)

    def profile_for(row: Row):
        if row.d.get("profile") is not None:
            return _profile(_RowCtx(Path(annotations), row.line), row.d["profile"])
        dec = float(row.d["decision_s"])
        lo, hi = dec - row.context_s, dec + T_H_S
        # One piece per recording, two for the episode's own (before and after its span): the
        # profile rules never pair events of different pieces (profiles.profile_from_pieces).
        pieces = []
        files = evidence[row.d["speaker"]["id"]]
        has_words = any(path in word_files for path, _ in files)
        for path, ch in files:
            x, segs = audio.get(path)
            dur = x.shape[0] / SAMPLE_RATE
            words = [(t, a, b) for wc, t, a, b in words_of(path) or () if wc == ch]
            own = path == row.audio and ch == int(row.d["focal_channel"])
            # (length, keep): what lies wholly before the span, what lies wholly after it
            parts = (
                [(max(lo, 0.0), lambda a, b: b < lo), (dur - min(hi, dur), lambda a, b: a > hi)]
                if own
                else [(dur, lambda a, b: True)]
            )
            for length_s, keep in parts:
                if length_s <= 0:
                    continue
                pieces.append(
                    (
                        [(a, b) for a, b in segs[ch] if keep(a, b)],
                        [(a, b) for a, b in segs[1 - ch] if keep(a, b)],
                        length_s,
                        [w for w in words if keep(w[1], w[2])] if has_words else None,
                    )
                )
        return profile_from_pieces(pieces)

    todo = [r for r in rows if r.d["episode_id"] not in done]
    if not todo:
        return 0
    profiles = {r.d["episode_id"]: profile_for(r) for r in rows}
    cuts = rate_terciles(p.articulation_rate_syl_s for p in profiles.values())
    n = 0
    for r in tqdm(todo, desc="import", disable=not progress or len(todo) < 2, leave=False):
        write_episode(
            _episode(
                r, root, audio, words_of(r.audio), profiles[r.d["episode_id"]], cuts, write_wav
            ),
            root,
        )
        n += 1
    return n


def _episode(row: Row, root: Path, audio: _Audio, words, profile, cuts, write_wav) -> Episode:
    d = row.d
    eid, ch = d["episode_id"], int(d["focal_channel"])
    x, segs = audio.get(row.audio)
    dec_n = int(round(float(d["decision_s"]) * SAMPLE_RATE))
    start_n = max(0, dec_n - int(round(row.context_s * SAMPLE_RATE)))
    dec = dec_n / SAMPLE_RATE
    ctx_s = (dec_n - start_n) / SAMPLE_RATE
    ctx = x[start_n:dec_n]
    write_wav(root / "audio" / f"{eid}.wav", ctx, SAMPLE_RATE)
    rel = lambda t: round(t - dec, 4)  # noqa: E731
    focal = tuple(
        (rel(max(a, start_n / SAMPLE_RATE)), rel(min(b, dec)))
        for a, b in segs[ch]
        if b > start_n / SAMPLE_RATE and a < dec
    )
    focal = tuple((a, b) for a, b in focal if b > a)
    pieces = [("take-turn", -ctx_s, 0.0, None)]
    responses_from = None
    if d.get("interruption") is not None:
        pe, cs = (
            float(d["interruption"]["prompt_end_s"]),
            float(d["interruption"]["cut_in_start_s"]),
        )
        other_on = [a - dec for a, b in segs[1 - ch] if a - dec <= cs and b - dec > pe]
        if not other_on:
            raise CorpusError(
                row.audio,
                row.line,
                "interruption.cut_in_start_s",
                "no speech of the other speaker between prompt_end_s and the cut-in to time it from",
            )
        after = cs - max(other_on[0], pe)
        pieces = [("take-turn", -ctx_s, pe, None), ("barge-in", cs, 0.0, round(after, 4))]
        responses_from = cs  # the other's floor holding before the cut-in is not a response
    replay = []
    for k, (kind, a, b, after) in enumerate(pieces):
        i0, i1 = dec_n + int(round(a * SAMPLE_RATE)), dec_n + int(round(b * SAMPLE_RATE))
        p = f"audio/{eid}.turn{k}.wav"
        write_wav(root / p, x[i0:i1, ch], SAMPLE_RATE)
        replay.append(
            ReplayTurn(
                kind,
                p,
                round((i0 - dec_n) / SAMPLE_RATE, 6),
                round((i1 - dec_n) / SAMPLE_RATE, 6),
                after,
            )
        )
    c = _RowCtx(row.audio, row.line)
    ann: Annotations = _annotations(
        c,
        {k: d[k] for k in ("labels", "silence_acceptability", "onset_windows", "completion_marks")},
        ctx_s,
        prefix="",
    )
    human = None
    if d.get("human_continuation") is not None:
        hc = d["human_continuation"]
        human = HumanContinuation(hc["onset_s"], hc["duration_s"])
    elif x.shape[0] / SAMPLE_RATE >= dec + T_H_S:
        other_rel = [(a - dec, b - dec) for a, b in segs[1 - ch]]
        resp = measure_response(other_rel, list(focal), responses_from_s=responses_from)
        human = (
            HumanContinuation(None, None)
            if math.isnan(resp.onset_s)
            else HumanContinuation(round(resp.onset_s, 4), round(resp.duration_s, 4))
        )
    sp = d["speaker"]
    given = d.get("slices", {})
    slices = {
        "gender": sp["gender"],
        "age_band": sp["age_band"],
        "l1_region": sp["l1_region"],
        "snr": given.get("snr")
        or snr_band(snr_db(ctx[:, ch], SAMPLE_RATE, [(a + ctx_s, b + ctx_s) for a, b in focal])),
        "rate_tercile": given.get("rate_tercile")
        or rate_tercile(profile.articulation_rate_syl_s, cuts),
    }
    assert set(slices) == set(SLICE_KEYS)
    return Episode(
        eid,
        f"import:{Path(row.audio).name}",
        d["category"],
        f"audio/{eid}.wav",
        ch,
        SAMPLE_RATE,
        round(ctx_s, 6),
        tuple(replay),
        focal,
        tuple(_history(words, ch, dec)) if words is not None else (),
        sp["id"],
        profile,
        ann,
        slices,
        d.get("context_bucket") or d["category"],
        d.get("split", "test"),
        None if d.get("judge_logits") is None else tuple(float(v) for v in d["judge_logits"]),
        human,
        {
            "importer": f"tact-import-{IMPORTER_VERSION}",
            "audio": str(row.audio),
            "decision_s": d["decision_s"],
            "line": row.line,
        },
    )


__all__ = ["CorpusError", "IMPORTER_VERSION", "import_corpus", "read_rows"]
