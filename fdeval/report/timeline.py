"""Per-session timeline PNGs and a run's HTML index of them (docs/report.md).

A timeline shows one session on its clock: the user channel (ch0) and the model channel (ch1)
of the stereo WAV as envelopes, the user turns (turn starts; a barge-in's scheduled and actual
injection times), the model's VAD segments and flushes from the HDF5 log, the words with their
times (the transcript JSON when the benchmark's transcribe step writes one in fdeval's
transcript format, else the model's own text pieces from the log), the case's trigger points
when its data has any (Instruct-FD), and the session's results in a text box. Any benchmark:
everything comes from a `SessionView`.
"""

from __future__ import annotations

import functools
import hashlib
import html
import importlib.util
import json
import logging
import math
import os
import re
import struct
import time
import zlib
from dataclasses import replace
from pathlib import Path
from typing import Any
from urllib.parse import quote

import numpy as np
import soundfile as sf
from PIL import Image, ImageDraw, ImageFont

from fdeval.engine.run import Run
from fdeval.files import atomic_path, file_sha256, write_text_atomic
from fdeval.recording import read_session
from fdeval.report.runview import RunView, SessionView, describe_results, view_of
from fdeval.transcript.io import TranscriptError, transcript_from_dict

log = logging.getLogger("fdeval")

FOLDER = "timelines"  # <run_dir>/timelines/<case_id>.png + index.html
MANIFEST = "manifest.json"  # in FOLDER: the drawing key of each PNG (write_run)
TIMELINE_VERSION = "2"  # bump when the drawing changes: every PNG is drawn again
SIZE_IN, DPI = (16.0, 7.0), 90  # every PNG is 1440 x 630 px
LEFT, RIGHT = 0.05, 0.99
PHRASE_GAP_S = 0.5  # a pause this long between words starts a new phrase
WORD_PT = 7.0  # the words' font size (a monospace font: phrases are placed by column)
USER_C, MODEL_C, BARGE_C, TRIG_C = "#1f77b4", "#d95f02", "#c0392b", "#7b3294"


# -- reading one session ---------------------------------------------------------------------
def session_log(h5: Path) -> dict[str, Any]:
    """The log tables a timeline draws, as row dicts (not `user_frames`: one row per frame, never drawn)."""
    tables = ("turns", "vad_segments", "flushes", "model_text")
    log = read_session(h5, tables=tables)
    rows = log.as_dict(tables)
    return {**{name: rows[name] for name in tables}, "duration_s": log.duration_s}


def session_words(s: SessionView, log: dict[str, Any]) -> tuple[list[dict[str, Any]], str]:
    """Every word of a session on its clock, ``{speaker, text, start_s, end_s}`` in time order, and
    where they came from: the transcript JSON when it is fdeval's transcript format, else the
    case's scripted user words (:func:`scripted_words`) and the model's text pieces whose audio
    played (from the log). Any benchmark: the timeline and the review page read the same."""
    if s.transcript is not None:
        try:
            d = json.loads(s.transcript.read_text(encoding="utf-8"))
            tr = transcript_from_dict(
                {k: v for k, v in d.items() if k != "provenance"}, s.transcript
            )
        except (OSError, ValueError, TranscriptError, AttributeError):
            tr = None
        if tr is not None:
            return [
                {
                    "speaker": "user" if w.speaker == "user" else "model",
                    "text": w.text,
                    "start_s": w.start_s,
                    "end_s": w.end_s,
                }
                for w in tr.words
            ], "transcript"
    model = [
        {
            "speaker": "model",
            "text": str(p["text"]).strip(),
            "start_s": float(p["play_s"]),
            "end_s": float(p["play_s"]) + float(p.get("duration_s") or 0.0),
        }
        for p in log.get("model_text", [])
        if not p.get("dropped") and str(p["text"]).strip()
    ]
    words = sorted(scripted_words(s, log.get("turns", [])) + model, key=lambda w: w["start_s"])
    return words, "model text stream; user words from the case turns"


def words_of(
    s: SessionView, log: dict[str, Any]
) -> tuple[list[tuple[float, str]], list[tuple[float, str]], str]:
    """(user words, model words, where they came from) as (start_s, text): see :func:`session_words`."""
    words, source = session_words(s, log)
    return (
        [(w["start_s"], w["text"]) for w in words if w["speaker"] == "user"],
        [(w["start_s"], w["text"]) for w in words if w["speaker"] != "user"],
        source,
    )


def scripted_words(s: SessionView, turns: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The user's words placed where each logged turn started, for the turns that are the case's
    own (same index and label); a turn cut short keeps the words that began before its end. A
    turn without word timings shows its case record's `shown_words` for it where it has them
    (timed text that is displayed, never streamed to a model: TACT's focal lines)."""
    own = {(t.index, t.label): t for t in s.case.turns}
    shown = getattr(s.case.data, "shown_words", None) or ()
    out = []
    for row in turns:
        turn = own.get((int(row["index"]), str(row["label"])))
        if turn is None:
            continue
        start, end = float(row["start_s"]), float(row["end_s"])
        timed = turn.words or (shown[turn.index] if turn.index < len(shown) else ())
        out += [
            {
                "speaker": "user",
                "text": w.text,
                "start_s": start + w.start_s,
                "end_s": min(end, start + w.end_s),
            }
            for w in timed
            if start + w.start_s < end
        ]
    return out


def triggers_of(s: SessionView, turns: list[dict[str, Any]]) -> list[tuple[float, str]]:
    """Trigger points on the session clock: a case's `data.triggers` (per turn, times from the
    turn's audio start) placed at the turn's start in this recording."""
    per_turn = getattr(s.case.data, "triggers", None) or ()
    starts = {int(t["index"]): float(t["start_s"]) for t in turns}
    out = []
    for i, trig in enumerate(per_turn):
        if i in starts:
            out += [(starts[i] + float(t.at_s), str(t.kind)) for t in trig]
    return out


def results_lines(s: SessionView, width: int = 110) -> list[str]:
    """One line per result: step, key, value (errors marked), the explanation's last line."""
    lines = []
    for step, rs in s.results.items():
        for r in rs:
            value = (
                "ERROR" if r.status == "error" else ("-" if r.value is None else _short(r.value))
            )
            why = next(
                (ln.strip() for ln in reversed(r.explanation.splitlines()) if ln.strip()), ""
            )
            line = f"{step}{'/' + r.key if r.key else ''}: {value}" + (f"  ({why})" if why else "")
            lines.append(line if len(line) <= width else line[: width - 1] + "…")
    return lines


def _short(v: Any) -> str:
    return f"{v:.3g}" if isinstance(v, float) else str(v)


def summary(s: SessionView, n: int = 3) -> str:
    """The results in a few words (the index's results column)."""
    vals = [
        f"{(r.key or step)}={'ERROR' if r.status == 'error' else _short(r.value)}"
        for step, rs in s.results.items()
        for r in rs
    ]
    return ", ".join(vals[:n]) + (f" (+{len(vals) - n})" if len(vals) > n else "")


# -- drawing ---------------------------------------------------------------------------------
# Drawn straight into pixels (numpy for the envelopes, spans and lines, Pillow for the text and
# the PNG): about a tenth of the CPU of the matplotlib figure it replaces (issue 28; the bench's
# `timeline` section measures both). The layout is that figure's: the same canvas, lanes, fonts
# (matplotlib's DejaVu files) and, exactly, the same time axis, from LEFT to RIGHT of the width,
# which the review app's playhead reads (TIMELINE_LEFT / TIMELINE_RIGHT).
W, H = round(SIZE_IN[0] * DPI), round(SIZE_IN[1] * DPI)
PT = DPI / 72  # pixels per point
X0, X1 = W * LEFT, W * RIGHT  # the time axis, in pixels (fractional: the playhead's own arithmetic)
_TOP, _BOTTOM, _HSPACE = (
    0.92,
    0.17,
    0.08,
)  # the lanes' block and the gap between lanes (of a lane's height)
_LANE_H = H * (_TOP - _BOTTOM) / (3 + 2 * _HSPACE)
LANES = tuple(
    (
        H * (1 - _TOP) + i * _LANE_H * (1 + _HSPACE),
        H * (1 - _TOP) + i * _LANE_H * (1 + _HSPACE) + _LANE_H,
    )
    for i in range(3)
)  # user, model, words: (top, bottom) in pixels
SIGNAL_YLIM, WORDS_YLIM = (-1.05, 1.05), (-0.12, 1.0)
TURN_C, VAD_C, FRAME_C, GRAY_C = "#2c7d2c", "#2ca02c", "#000000", "#808080"
PNG_LEVEL = 3  # zlib level of the PNGs (png_bytes): 50 KB each, about 5 ms
AXES_KEY = "fdeval:timeline_axes"  # the PNG's text chunk: {"left", "right", "x0_s", "x1_s"} (tests, readers)
_DASHES = {
    "-": None,
    "--": (5, 2),
    ":": (2, 2),
    "-.": (7, 2, 2, 2),
}  # on/off pixel runs along the line


def _rgb(color: str) -> np.ndarray:
    return np.array([int(color[i : i + 2], 16) for i in (1, 3, 5)], dtype=np.float32)


@functools.lru_cache(maxsize=None)
def _font(size_pt: float, mono: bool = False):
    """matplotlib's DejaVu (found without importing matplotlib), else Pillow's own font."""
    name = "DejaVuSansMono.ttf" if mono else "DejaVuSans.ttf"
    spec = importlib.util.find_spec("matplotlib")
    path = (
        Path(spec.origin).parent / "mpl-data" / "fonts" / "ttf" / name
        if spec and spec.origin
        else None
    )
    if path is not None and path.is_file():
        return ImageFont.truetype(str(path), size_pt * PT, layout_engine=ImageFont.Layout.BASIC)
    return ImageFont.load_default(size_pt * PT)


def _char_px(size_pt: float = WORD_PT) -> float:
    """The advance of one character of the monospace font (phrases are placed by column)."""
    return _font(size_pt, True).getlength("x" * 100) / 100


def x_px(t: float | np.ndarray, span_s: float) -> Any:
    """Where session time `t` lies on the PNG's width, in pixels (0 = the left edge)."""
    return X0 + (X1 - X0) * np.asarray(t, dtype=float) / span_s


def _y_px(v: float, lane: int) -> float:
    lo, hi = WORDS_YLIM if lane == 2 else SIGNAL_YLIM
    top, bottom = LANES[lane]
    return top + (hi - v) / (hi - lo) * (bottom - top)


class _Pixels:
    """An RGB canvas as a numpy array: filled spans, lines (solid, dashed, dotted, dash-dot) and
    the envelopes, cut to the lanes."""

    def __init__(self, a: np.ndarray):
        self.a = a

    def span(
        self, x0: float, x1: float, y0: float, y1: float, color: str, alpha: float = 1.0
    ) -> None:
        c0, c1 = max(int(round(x0)), int(round(X0))), min(int(round(x1)), int(round(X1)))
        r0, r1 = int(round(y0)), int(round(y1))
        if c1 <= c0 or r1 <= r0:
            return
        block = self.a[r0:r1, c0:c1]
        if alpha >= 1.0:
            block[:] = _rgb(color).astype(np.uint8)
        else:
            block[:] = (block * (1 - alpha) + _rgb(color) * alpha + 0.5).astype(np.uint8)

    def vline(
        self, x: float, y0: float, y1: float, color: str, width: int = 1, style: str = "-"
    ) -> None:
        if not X0 - 1 <= x <= X1 + 1:
            return
        c0 = int(round(x - width / 2))
        rows = np.arange(int(round(y0)), int(round(y1)))
        self.a[self._dash(rows, style), c0 : c0 + width] = _rgb(color).astype(np.uint8)

    def hline(
        self, x0: float, x1: float, y: float, color: str, width: int = 1, style: str = "-"
    ) -> None:
        cols = np.arange(int(round(x0)), int(round(x1)))
        r0 = int(round(y - width / 2))
        self.a[r0 : r0 + width, self._dash(cols, style)] = _rgb(color).astype(np.uint8)

    @staticmethod
    def _dash(idx: np.ndarray, style: str) -> np.ndarray:
        runs = _DASHES[style]
        if runs is None:
            return idx
        on = np.zeros(sum(runs), dtype=bool)
        pos = 0
        for i, n in enumerate(runs):
            on[pos : pos + n] = i % 2 == 0
            pos += n
        return idx[on[idx % len(on)]]

    def envelope(self, lo: np.ndarray, hi: np.ndarray, c0: int, lane: int, color: str) -> None:
        """Min/max per pixel column from column `c0` (values in -1..1): one filled bar each."""
        top, bottom = LANES[lane]
        r0, r1 = int(round(top)) + 1, int(round(bottom))
        scale = (bottom - top) / (SIGNAL_YLIM[1] - SIGNAL_YLIM[0])
        y_hi = np.rint(top + (SIGNAL_YLIM[1] - hi) * scale).astype(int) - r0
        y_lo = np.rint(top + (SIGNAL_YLIM[1] - lo) * scale).astype(int) - r0
        rows = np.arange(r1 - r0)[:, None]
        mask = (
            (rows >= y_hi[None, :]) & (rows <= y_lo[None, :]) & (hi > lo)[None, :]
        )  # digital silence: nothing
        self.a[r0:r1, c0 : c0 + len(lo)][mask] = _rgb(color).astype(np.uint8)


def wav_columns(wav: Path, span_s: float) -> tuple[np.ndarray, np.ndarray, int, float]:
    """The stereo WAV's (min, max) per pixel column of a time axis of `span_s` seconds (columns x
    channels, -1..1) from its first column (the index returned) to the recording's end, and the
    WAV's duration in seconds."""
    x, sr = sf.read(str(wav), dtype="int16", always_2d=True)
    n = len(x)
    first, last = (
        int(math.ceil(X0 - 0.5)),
        int(math.floor(X1 - 0.5)),
    )  # the columns whose centre is on the axis
    edges = np.rint((np.arange(first, last + 2) - X0) / (X1 - X0) * span_s * sr).astype(np.int64)
    edges = np.clip(edges, 0, n)  # column j holds samples edges[j]:edges[j + 1]
    ncols = int(np.count_nonzero(edges[:-1] < n))  # the columns that start inside the recording
    if ncols == 0:
        return np.zeros((0, 2)), np.zeros((0, 2)), first, n / sr
    x = x[: edges[ncols]]
    lo = np.minimum.reduceat(x, edges[:ncols], axis=0) / 32768.0
    hi = np.maximum.reduceat(x, edges[:ncols], axis=0) / 32768.0
    return lo, hi, first, n / sr


def session_span(s: SessionView) -> float:
    """The seconds a session's timeline spans when drawn alone: the longer of its log's and its
    WAV's duration, at least 1 s (the review app's playhead reads the same)."""
    dur = 1.0
    if s.log is not None:
        try:
            dur = max(dur, session_log(s.log)["duration_s"])
        except (OSError, KeyError, ValueError):
            pass
    if s.wav is not None:
        try:
            dur = max(dur, sf.info(str(s.wav)).duration)
        except (OSError, RuntimeError, ValueError):
            pass
    return dur


def render(s: SessionView, png: Path, span_s: float | None = None) -> Path:
    """Write the session's timeline PNG (a fixed 1440 x 630 px); the path. Its time axis runs
    from 0 to the session's duration (the longer of the log's and the WAV's, at least 1 s), or
    to `span_s` when that is longer (a bundle's timelines of one case share one axis)."""
    log: dict[str, Any] = {"turns": [], "vad_segments": [], "flushes": [], "model_text": []}
    dur, notes = 1.0, []
    if s.log is not None:
        try:
            log = session_log(s.log)
            dur = max(dur, log["duration_s"])
        except (OSError, KeyError, ValueError) as e:
            s = _with_note(s, f"log unreadable: {_error(e, s.log)}")
    wav_error, wav_cols = None, None
    if s.wav is not None:
        try:
            dur = max(dur, sf.info(str(s.wav)).duration)
        except (OSError, RuntimeError, ValueError) as e:
            wav_error = f"WAV unreadable: {_error(e, s.wav)}"
    span = max(dur, span_s or 0.0)
    if s.wav is not None and wav_error is None:
        try:
            wav_cols = wav_columns(s.wav, span)
        except (OSError, RuntimeError, ValueError) as e:
            wav_error = f"WAV unreadable: {_error(e, s.wav)}"
    px = _Pixels(_background().copy())
    texts: list[tuple] = []  # (x, y, text, size_pt, color, anchor, mono), drawn after the pixels
    if wav_cols is not None:
        lo, hi, c0, _ = wav_cols
        for lane, c in ((0, USER_C), (1, MODEL_C)):
            if (
                len(lo) and lane < lo.shape[1]
            ):  # a session WAV is stereo; a mono one shows its one channel
                px.envelope(lo[:, lane], hi[:, lane], c0, lane, c)
    elif wav_error is not None:
        notes.append((wav_error, "#000000"))
    else:
        notes.append(("no recording", BARGE_C))
    u_top, u_bot = LANES[0]
    m_top, m_bot = LANES[1]
    # turns: shaded, a line at each start and the label at its foot; a barge-in's scheduled and actual times
    markers = []
    for t in log["turns"]:
        start, end = float(t["start_s"]), float(t["end_s"])
        barge = t["turn_type"] == "barge-in"
        px.span(
            x_px(start, span), x_px(end, span), u_top, u_bot, BARGE_C if barge else USER_C, 0.08
        )
    for seg in log["vad_segments"]:
        px.span(
            x_px(float(seg["start_s"]), span),
            x_px(float(seg["end_s"]), span),
            m_top,
            m_top + 0.1 * _LANE_H,
            VAD_C,
            0.8,
        )
    for t in log["turns"]:
        start = float(t["start_s"])
        px.vline(x_px(start, span), u_top, u_bot, TURN_C, 2)
        label = f" {t['label']}" + (f" ({t['subtype']})" if t.get("subtype") else "")
        texts.append((x_px(start, span), _y_px(-1.0, 0), label, 7, TURN_C, "ld", False))
        if t["turn_type"] == "barge-in":
            sched, actual = float(t["scheduled_s"]), float(t["actual_s"])
            for top, bottom in (LANES[0], LANES[1]):
                if not math.isnan(sched):
                    px.vline(x_px(sched, span), top, bottom, BARGE_C, 2, "--")
                if not math.isnan(actual):
                    px.vline(x_px(actual, span), top, bottom, BARGE_C, 2)
            onset = float(t.get("onset_s", float("nan")))
            if not math.isnan(onset):
                markers.append((x_px(onset, span), _y_px(0.95, 1), 6))
    for fl in log["flushes"]:
        px.vline(x_px(float(fl["t_s"]), span), m_top, m_bot, "#000000", 2, ":")
    for t0, kind in triggers_of(s, log["turns"]):
        for top, bottom in LANES:
            px.vline(x_px(t0, span), top, bottom, TRIG_C, 2, "-.")
        texts.append((x_px(t0, span), u_top, f" ▼ {kind}", 8, TRIG_C, "ld", False))
    user_w, model_w, source = words_of(s, log)
    texts += _words(px, user_w, 0.56, USER_C, span)
    texts += _words(px, model_w, 0.06, MODEL_C, span)
    texts.append((X1, LANES[2][0], f"words: {source}", 7, GRAY_C, "rd", False))
    texts += _frames(px, span)
    title = f"{s.case.case_id}   ·   {s.case.scenario or s.case.benchmark}   ·   session {s.state}"
    texts.append(
        (
            X0,
            H * 0.02,
            title + (f": {s.reason}" if s.reason else ""),
            12,
            "#000000" if s.state == "usable" else BARGE_C,
            "la",
            False,
        )
    )
    for note, color in notes:
        texts.append(((X0 + X1) / 2, (u_top + u_bot) / 2, note, 10, color, "mm", False))

    im = Image.fromarray(px.a)
    draw = ImageDraw.Draw(im)
    for x, y, ms in markers:
        h = ms * PT / 2
        draw.polygon([(x - h, y - h), (x + h, y - h), (x, y + h)], fill=BARGE_C)
    for x, y, text, size, color, anchor, mono in texts:
        draw.text((x, y), text, font=_font(size, mono), fill=color, anchor=anchor)
    _results(draw, s)
    axes = json.dumps({"left": LEFT, "right": RIGHT, "x0_s": 0.0, "x1_s": span})
    data = png_bytes(np.asarray(im), {AXES_KEY: axes})
    with atomic_path(png) as tmp:
        tmp.write_bytes(data)
    return png


def png_bytes(rgb: np.ndarray, text: dict[str, str] | None = None) -> bytes:
    """An RGB image (height x width x 3, uint8) as PNG bytes, each row with the "Up" filter
    (its difference from the row above: a timeline is mostly flat colour, so mostly zeros) and
    zlib level 3. A fifth of the CPU of Pillow's encoder, which tries every filter on every row."""
    h, w, _ = rgb.shape
    flat = rgb.reshape(h, w * 3)
    raw = np.empty((h, w * 3 + 1), dtype=np.uint8)
    raw[:, 0] = 2  # filter type Up
    raw[0, 1:] = flat[0]
    np.subtract(flat[1:], flat[:-1], out=raw[1:, 1:])  # modulo 256, as the filter is defined

    def chunk(tag: bytes, body: bytes) -> bytes:
        return struct.pack(">I", len(body)) + tag + body + struct.pack(">I", zlib.crc32(tag + body))

    parts = [b"\x89PNG\r\n\x1a\n", chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0))]
    parts += [
        chunk(b"tEXt", k.encode("latin-1") + b"\0" + v.encode("latin-1"))
        for k, v in (text or {}).items()
    ]
    parts += [chunk(b"IDAT", zlib.compress(raw.tobytes(), PNG_LEVEL)), chunk(b"IEND", b"")]
    return b"".join(parts)


def timeline_axes(png: Path) -> dict[str, float] | None:
    """The time axis a timeline PNG was drawn with (its text chunk): left and right as fractions
    of the width, and the seconds at each end; None for a PNG without one."""
    try:
        with Image.open(png) as im:
            d = json.loads(im.text.get(AXES_KEY, "null"))
    except (OSError, ValueError):
        return None
    return d if isinstance(d, dict) else None


def _error(e: BaseException, path: Path) -> str:
    """An error's text with its file named by its name only: a timeline holds no path of this
    machine (a bundle shares it)."""
    return str(e).replace(str(path), path.name)


def _with_note(s: SessionView, note: str) -> SessionView:
    return replace(s, reason=(s.reason + "; " if s.reason else "") + note)


def _frames(px: _Pixels, span: float) -> list[tuple]:
    """The lanes' frames and the time axis under the words lane (ticks at a round step); the
    tick labels, as texts."""
    for top, bottom in LANES:
        t, b = int(round(top)), int(round(bottom))
        px.a[t, int(round(X0)) : int(round(X1)) + 1] = 0
        px.a[b, int(round(X0)) : int(round(X1)) + 1] = 0
        px.a[t : b + 1, int(round(X0))] = 0
        px.a[t : b + 1, int(round(X1))] = 0
    step = next(
        m * 10.0**e for e in range(-2, 7) for m in (1, 2, 2.5, 5) if span / (m * 10.0**e) <= 9
    )
    decimals = len(
        f"{step:g}".partition(".")[2]
    )  # 2.5 s apart: 0.0, 2.5, 5.0 (as matplotlib writes them)
    bottom = LANES[2][1]
    texts = []
    for i in range(int(span / step + 1e-9) + 1):
        t = i * step
        x = x_px(t, span)
        px.vline(x, bottom, bottom + 3.5 * PT + 1, FRAME_C, 1)
        texts.append((x, bottom + 7 * PT, f"{t:.{decimals}f}", 10, "#000000", "ma", False))
    return texts


def phrases(words: list[tuple[float, str]], gap_s: float = PHRASE_GAP_S) -> list[tuple[float, str]]:
    """Words run together into phrases (a pause longer than `gap_s` starts a new one)."""
    out: list[tuple[float, list[str]]] = []
    last = -math.inf
    for t, w in words:
        if t - last > gap_s or not out:
            out.append((t, [w]))
        else:
            out[-1][1].append(w)
        last = t
    return [(t, " ".join(ws)) for t, ws in out]


def _words(
    px: _Pixels, words: list[tuple[float, str]], y: float, color: str, span: float
) -> list[tuple]:
    """A tick at every word's start and the phrases' text, each cut to the room before the
    next phrase on its row (two rows, so a short phrase does not hide its neighbour); each row
    is placed by column of the monospace font, one text per stretch of phrases."""
    if not words:
        return []
    tick_y = _y_px(y - 0.1, 2)
    half = 5 * PT / 2
    for t, _ in words:
        px.vline(x_px(t, span), tick_y - half, tick_y + half, color, 1)
    char = _char_px()
    cols = max(1, int((X1 - X0) / char))
    col_s = span / cols
    ph = phrases(words)
    rows = [[" "] * (cols + 1), [" "] * (cols + 1)]
    end = [-1, -1]
    for i, (t, text) in enumerate(ph):
        r = i % 2
        c = max(int(round(t / col_s)), end[r] + 1)
        nxt = (
            int(round(ph[i + 2][0] / col_s)) if i + 2 < len(ph) else cols
        )  # the next phrase on this row
        room = min(nxt, cols) - c - 1
        if room < 1:
            continue
        shown = text if len(text) <= room else text[: max(1, room - 1)] + "…"
        rows[r][c : c + len(shown)] = shown
        end[r] = c + len(shown)
    out = []
    for r, chars in enumerate(rows):
        for m in re.finditer(r"\S(?:.*?\S)?(?=\s{8,}|\s*$)", "".join(chars)):
            out.append(
                (
                    X0 + m.start() * char,
                    _y_px(y + 0.17 * r, 2),
                    m.group(),
                    WORD_PT,
                    color,
                    "ld",
                    True,
                )
            )
    return out


def _results(draw, s: SessionView) -> None:
    """The results box under the lanes: one line per result (at most 6, then how many more)."""
    lines = results_lines(s) or [
        ("no results" if s.state == "usable" else f"not scored: {s.reason}")
    ]
    lines = lines[:6] + ([f"… {len(lines) - 6} more"] if len(lines) > 6 else [])
    font, size = _font(8.5, True), 8.5 * PT
    pad, step = 0.3 * size, 1.2 * size
    x, y = X0, H * 0.9
    width = max(font.getlength(ln) for ln in lines)
    draw.rounded_rectangle(
        (x - pad, y - pad, x + width + pad, y + len(lines) * step + pad),
        radius=pad,
        fill="#f6f6f6",
        outline="#999999",
    )
    for i, ln in enumerate(lines):
        draw.text((x, y + i * step), ln, font=font, fill="#000000", anchor="la")


KEY = (
    ({"color": TURN_C, "width": 2}, "turn start"),
    ({"color": BARGE_C, "width": 2, "style": "--"}, "barge-in scheduled"),
    ({"color": BARGE_C, "width": 2}, "barge-in actual"),
    ({"color": BARGE_C, "marker": True}, "model onset"),
    ({"color": TRIG_C, "width": 2, "style": "-."}, "trigger"),
    ({"color": VAD_C, "width": 6}, "model VAD"),
    ({"color": "#000000", "width": 2, "style": ":"}, "flush"),
)


@functools.lru_cache(maxsize=1)
def _background() -> np.ndarray:
    """What every timeline shares, drawn once per process: the key (right-aligned above the
    lanes), the lanes' names and the time axis' name."""
    im = Image.new("RGB", (W, H), "white")
    draw = ImageDraw.Draw(im)
    px_marks: list[tuple] = []
    char = _char_px()
    text = "".join(f"    {label}  " for _, label in KEY)
    x0, y = X1 - len(text) * char, H * (1 - 0.945)
    draw.text((x0, y), text, font=_font(WORD_PT, True), fill="#000000", anchor="lm")
    col = 0
    for style, label in KEY:
        x = x0 + (col + 0.5) * char
        if style.get("marker"):
            h = 5 * PT / 2
            cx = x + 1.5 * char
            draw.polygon([(cx - h, y - h), (cx + h, y - h), (cx, y + h)], fill=style["color"])
        else:
            px_marks.append((x, x + 3 * char, y, style))
        col += len(f"    {label}  ")
    for name, lane in (("user (ch0)", 0), ("model (ch1)", 1)):
        font = _font(9)
        box = draw.textbbox((0, 0), name, font=font, anchor="lt")
        label = Image.new("L", (box[2] + 2, box[3] + 2), 0)
        ImageDraw.Draw(label).text((1, 1), name, font=font, fill=255, anchor="lt")
        label = label.rotate(90, expand=True)
        top, bottom = LANES[lane]
        im.paste(
            (0, 0, 0),
            (int(round(X0 - 8 - label.width)), int(round((top + bottom - label.height) / 2))),
            label,
        )
    for name, v in (("user", 0.6), ("model", 0.1)):
        yy = _y_px(v, 2)
        draw.line([(X0 - 3.5 * PT, yy), (X0, yy)], fill="#000000", width=1)
        draw.text((X0 - 7 * PT, yy), name, font=_font(8), fill="#000000", anchor="rm")
    draw.text(
        ((X0 + X1) / 2, LANES[2][1] + 7 * PT + 10 * PT * 1.25),
        "session time (s)",
        font=_font(9),
        fill="#000000",
        anchor="ma",
    )
    a = np.array(im)
    px = _Pixels(a)
    for x_a, x_b, yy, style in px_marks:
        px.hline(x_a, x_b, yy, style["color"], style.get("width", 1), style.get("style", "-"))
    a.setflags(write=False)
    return a


# -- the score step's writer ---------------------------------------------------------------
class TimelineWriter:
    """A `report.writers` entry (conf/report/default.yaml): after the scores, every session's
    timeline and the run's index, for any benchmark."""

    def __call__(self, run: Run) -> Path:
        t0 = time.perf_counter()
        view = view_of(run)
        index = write_run(view)
        log.info(
            "score: %d timelines and %s in %.1f s",
            len(view.sessions),
            index,
            time.perf_counter() - t0,
        )
        return index


# -- the run's index -------------------------------------------------------------------------
def write_run(view: RunView, out: Path | None = None) -> Path:
    """Every session's PNG under `<run_dir>/timelines/` and its index.html; the index's path.

    Incremental, like every step: a PNG is drawn again only when what it shows changed (its
    session files, transcript, results or state; `manifest.json` keeps each one's key), and a
    page is written only when its text changed, so a relaunch rewrites nothing."""
    out = out or view.run_dir / FOLDER
    out.mkdir(parents=True, exist_ok=True)
    rel = os.path.relpath(view.run_dir / "sessions", out)
    manifest_path = out / MANIFEST
    try:
        old = json.loads(manifest_path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        old = {}
    keys, rows = {}, []
    for s in view.sessions:
        png = out / f"{s.case_id}.png"
        keys[s.case_id] = drawing_key(s)
        if keys[s.case_id] != old.get(s.case_id) or not png.is_file():
            render(s, png)
        rows.append(
            (
                s,
                quote(f"{s.case_id}.png"),
                f"{quote(rel)}/{quote(s.case_id)}.wav" if s.wav else None,
            )
        )
    index = out / "index.html"
    run_table(index, f"{view.benchmark} · {view.model} · {view.run_dir.name}", view, rows)
    if keys != old:
        write_if_changed(manifest_path, json.dumps(keys, indent=1, sort_keys=True) + "\n")
    return index


def drawing_key(s: SessionView) -> str:
    """A digest of everything a session's timeline is drawn from."""

    def stamp(p: Path | None) -> list | None:
        if p is None or not p.is_file():
            return None
        st = p.stat()
        return [st.st_size, st.st_mtime_ns]

    # the recording's files change only when it is recorded again (size and time tell); a transcript
    # may be made again with the same bytes, so its content is what counts
    transcript = (
        file_sha256(s.transcript) if s.transcript is not None and s.transcript.is_file() else None
    )
    what = {
        "version": TIMELINE_VERSION,
        "state": s.state,
        "reason": s.reason,
        "wav": stamp(s.wav),
        "log": stamp(s.log),
        "transcript": transcript,
        "results": {k: [r.to_dict() for r in rs] for k, rs in sorted(s.results.items())},
    }
    return hashlib.sha256(json.dumps(what, sort_keys=True, default=str).encode()).hexdigest()[:16]


def write_if_changed(path: Path, text: str) -> None:
    """Write `text` to `path` atomically unless the file already holds exactly that."""
    write_text_atomic(path, text)


CSS = (
    "body{font:14px system-ui,sans-serif;margin:1.5em}table{border-collapse:collapse}"
    "td,th{border:1px solid #ccc;padding:3px 8px;text-align:left;vertical-align:top}"
    ".bad{background:#fdecea}th{background:#eee}img{max-width:100%}.muted{color:#888}"
)


def run_table(
    path: Path, title: str, view: RunView, rows: list[tuple[SessionView, str, str | None]]
) -> None:
    """One run's sessions as a table (case, scenario, state and reason, results, PNG, WAV links)."""
    e = html.escape
    parts = [
        f"<p class=muted>{e(run_line(view))}</p>",
        "<table><tr><th>case</th><th>scenario</th><th>state</th><th>results</th><th>timeline</th><th>audio</th></tr>",
    ]
    for s, png, wav in rows:
        state = s.state + (f": {s.reason}" if s.reason else "")
        parts.append(
            f"<tr class={'ok' if s.state == 'usable' else 'bad'}><td>{e(s.case_id)}</td>"
            f"<td>{e(s.case.scenario or '')}</td><td>{e(state)}</td><td>{e(summary(s, 6))}</td>"
            f"<td>{link(png, 'PNG')}</td><td>{link(wav, 'WAV')}</td></tr>"
        )
    parts.append("</table>")
    write_page(path, title, parts)


def run_line(view: RunView) -> str:
    """The run a page shows. Its folder as `<benchmark>/<model>/<run>` (its place under out_root),
    never the absolute path: a run folder holds no path of its own, so a copied or moved run is
    the same finished run and relaunching it there rewrites no page."""
    shown = describe_results(view)  # which judge's (ASR's, ...) results the page shows
    where = "/".join(view.run_dir.parts[-3:])
    return (
        f"{view.benchmark} · model {view.model} ({view.model_id}) · run {view.run_id} · {where}"
        + (f" · results: {shown}" if shown else "")
    )


def write_page(path: Path, title: str, parts: list[str]) -> None:
    """A self-contained HTML page (inline style, relative links), written atomically."""
    text = (
        "\n".join(
            [
                f"<!doctype html><meta charset=utf-8><title>{html.escape(title)}</title><style>{CSS}</style>",
                f"<h1>{html.escape(title)}</h1>",
                *parts,
                "<p class=muted>written by fdeval</p>",
            ]
        )
        + "\n"
    )
    write_if_changed(path, text)


def link(href: str | None, text: str) -> str:
    """An anchor (`href` already URL-quoted), or a grey dash when there is nothing to link."""
    return f'<a href="{html.escape(href)}">{text}</a>' if href else "<span class=muted>-</span>"
