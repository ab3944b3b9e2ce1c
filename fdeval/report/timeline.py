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

import hashlib
import html
import json
import logging
import math
import os
import re
import time
from dataclasses import replace
from pathlib import Path
from typing import Any
from urllib.parse import quote

import h5py
import numpy as np
import soundfile as sf

from fdeval.engine.run import Run
from fdeval.files import file_sha256
from fdeval.orchestrator.recorder import read_table
from fdeval.report.runview import RunView, SessionView, describe_results, view_of
from fdeval.transcript.io import TranscriptError, transcript_from_dict

log = logging.getLogger("fdeval")

FOLDER = "timelines"  # <run_dir>/timelines/<case_id>.png + index.html
MANIFEST = "manifest.json"  # in FOLDER: the drawing key of each PNG (write_run)
TIMELINE_VERSION = "1"  # bump when the drawing changes: every PNG is drawn again
SIZE_IN, DPI = (16.0, 7.0), 90  # every PNG is 1440 x 630 px
ENVELOPE_BINS = 1600
LEFT, RIGHT = 0.05, 0.99
PHRASE_GAP_S = 0.5  # a pause this long between words starts a new phrase
WORD_PT = 7.0  # the words' font size (a monospace font: phrases are placed by column)
USER_C, MODEL_C, BARGE_C, TRIG_C = "#1f77b4", "#d95f02", "#c0392b", "#7b3294"


# -- reading one session ---------------------------------------------------------------------
def envelope(wav: Path, bins: int = ENVELOPE_BINS) -> tuple[np.ndarray, np.ndarray, np.ndarray, float]:
    """(times, min, max) per bin for each channel (shape bins x 2) and the duration in seconds."""
    x, sr = sf.read(str(wav), dtype="float32", always_2d=True)
    n = len(x)
    if n == 0:
        return np.zeros(1), np.zeros((1, 2)), np.zeros((1, 2)), 0.0
    bins = max(1, min(bins, n))
    edges = np.linspace(0, n, bins + 1).astype(int)
    lo = np.minimum.reduceat(x, edges[:-1], axis=0)
    hi = np.maximum.reduceat(x, edges[:-1], axis=0)
    return edges[:-1] / sr, lo, hi, n / sr


def session_log(h5: Path) -> dict[str, Any]:
    """The log tables a timeline draws (not `user_frames`: one row per frame, never drawn)."""
    with h5py.File(h5, "r") as f:
        out = {name: read_table(f, name) for name in ("turns", "vad_segments", "flushes", "model_text") if name in f}
        out["duration_s"] = float(f.attrs.get("duration_s", 0.0))
    return out


def session_words(s: SessionView, log: dict[str, Any]) -> tuple[list[dict[str, Any]], str]:
    """Every word of a session on its clock, ``{speaker, text, start_s, end_s}`` in time order, and
    where they came from: the transcript JSON when it is fdeval's transcript format, else the
    case's scripted user words (:func:`scripted_words`) and the model's text pieces whose audio
    played (from the log). Any benchmark: the timeline and the review page read the same."""
    if s.transcript is not None:
        try:
            d = json.loads(s.transcript.read_text(encoding="utf-8"))
            tr = transcript_from_dict({k: v for k, v in d.items() if k != "provenance"}, s.transcript)
        except (OSError, ValueError, TranscriptError, AttributeError):
            tr = None
        if tr is not None:
            return [{"speaker": "user" if w.speaker == "user" else "model", "text": w.text, "start_s": w.start_s,
                     "end_s": w.end_s} for w in tr.words], "transcript"
    model = [{"speaker": "model", "text": str(p["text"]).strip(), "start_s": float(p["play_s"]),
              "end_s": float(p["play_s"]) + float(p.get("duration_s") or 0.0)}
             for p in log.get("model_text", []) if not p.get("dropped") and str(p["text"]).strip()]
    words = sorted(scripted_words(s, log.get("turns", [])) + model, key=lambda w: w["start_s"])
    return words, "model text stream; user words from the case turns"


def words_of(s: SessionView, log: dict[str, Any]) -> tuple[list[tuple[float, str]], list[tuple[float, str]], str]:
    """(user words, model words, where they came from) as (start_s, text): see :func:`session_words`."""
    words, source = session_words(s, log)
    return ([(w["start_s"], w["text"]) for w in words if w["speaker"] == "user"],
            [(w["start_s"], w["text"]) for w in words if w["speaker"] != "user"], source)


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
        out += [{"speaker": "user", "text": w.text, "start_s": start + w.start_s, "end_s": min(end, start + w.end_s)}
                for w in timed if start + w.start_s < end]
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
            value = "ERROR" if r.status == "error" else ("-" if r.value is None else _short(r.value))
            why = next((ln.strip() for ln in reversed(r.explanation.splitlines()) if ln.strip()), "")
            line = f"{step}{'/' + r.key if r.key else ''}: {value}" + (f"  ({why})" if why else "")
            lines.append(line if len(line) <= width else line[:width - 1] + "…")
    return lines


def _short(v: Any) -> str:
    return f"{v:.3g}" if isinstance(v, float) else str(v)


def summary(s: SessionView, n: int = 3) -> str:
    """The results in a few words (the index's results column)."""
    vals = [f"{(r.key or step)}={'ERROR' if r.status == 'error' else _short(r.value)}"
            for step, rs in s.results.items() for r in rs]
    return ", ".join(vals[:n]) + (f" (+{len(vals) - n})" if len(vals) > n else "")


# -- drawing ---------------------------------------------------------------------------------
def render(s: SessionView, png: Path) -> Path:
    """Write the session's timeline PNG (a fixed 1440 x 630 px); the path."""
    # matplotlib (~0.5 CPU-s to import) only when a timeline is drawn: a relaunch that draws none,
    # and every launch that imports the score hook, does without it
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=SIZE_IN, dpi=DPI)
    FigureCanvasAgg(fig)
    gs = fig.add_gridspec(3, 1, height_ratios=[2, 2, 2], hspace=0.08, left=LEFT, right=RIGHT, top=0.92, bottom=0.17)
    a_user, a_model, a_words = (fig.add_subplot(gs[i]) for i in range(3))
    title = f"{s.case.case_id}   ·   {s.case.scenario or s.case.benchmark}   ·   session {s.state}"
    fig.suptitle(title + (f": {s.reason}" if s.reason else ""), fontsize=12, x=0.05, ha="left",
                 color="black" if s.state == "usable" else BARGE_C)
    log: dict[str, Any] = {"turns": [], "vad_segments": [], "flushes": [], "model_text": []}
    dur = 1.0
    if s.log is not None:
        try:
            log = session_log(s.log)
            dur = max(dur, log["duration_s"])
        except (OSError, KeyError, ValueError) as e:
            s = _with_note(s, f"log unreadable: {e}")
    if s.wav is not None:
        try:
            t, lo, hi, wdur = envelope(s.wav)
            dur = max(dur, wdur)
            for ax, ch, c in ((a_user, 0, USER_C), (a_model, 1, MODEL_C)):
                ax.fill_between(t, lo[:, ch], hi[:, ch], color=c, linewidth=0, step="post")
        except (OSError, RuntimeError, ValueError) as e:
            a_user.text(0.5, 0.5, f"WAV unreadable: {e}", transform=a_user.transAxes, ha="center")
    else:
        a_user.text(0.5, 0.5, "no recording", transform=a_user.transAxes, ha="center", color=BARGE_C)
    for ax, name in ((a_user, "user (ch0)"), (a_model, "model (ch1)")):
        ax.set_ylim(-1.05, 1.05)
        ax.set_yticks([])
        ax.set_ylabel(name, fontsize=9)
    _draw_turns(a_user, a_model, log["turns"])
    for seg in log["vad_segments"]:
        a_model.axvspan(float(seg["start_s"]), float(seg["end_s"]), ymin=0.9, ymax=1.0, color="#2ca02c", alpha=0.8, lw=0)
    for fl in log["flushes"]:
        a_model.axvline(float(fl["t_s"]), color="black", ls=":", lw=1.2)
    trigs = triggers_of(s, log["turns"])
    for t0, kind in trigs:
        for ax in (a_user, a_model, a_words):
            ax.axvline(t0, color=TRIG_C, lw=1.5, ls="-.")
        a_user.text(t0, 1.0, f" ▼ {kind}", color=TRIG_C, fontsize=8, va="bottom", clip_on=False)
    user_w, model_w, source = words_of(s, log)
    width_px = SIZE_IN[0] * DPI * (RIGHT - LEFT)
    _draw_words(a_words, user_w, 0.56, USER_C, dur, width_px)
    _draw_words(a_words, model_w, 0.06, MODEL_C, dur, width_px)
    a_words.set_ylim(-0.12, 1.0)
    a_words.set_yticks([0.6, 0.1], ["user", "model"], fontsize=8)
    a_words.text(1.0, 1.0, f"words: {source}", transform=a_words.transAxes, ha="right", va="bottom", fontsize=7, color="gray")
    for ax in (a_user, a_model, a_words):
        ax.set_xlim(0, dur)
    for ax in (a_user, a_model):
        ax.set_xticks([])  # the words lane below carries the time axis
    a_words.set_xlabel("session time (s)", fontsize=9)
    _key(fig)
    lines = results_lines(s) or [("no results" if s.state == "usable" else f"not scored: {s.reason}")]
    fig.text(LEFT, 0.1, "\n".join(lines[:6] + ([f"… {len(lines) - 6} more"] if len(lines) > 6 else [])),
             va="top", ha="left", fontsize=8.5, family="monospace",
             bbox={"boxstyle": "round", "fc": "#f6f6f6", "ec": "#999999"})
    png.parent.mkdir(parents=True, exist_ok=True)
    tmp = png.with_name(png.name + ".tmp")
    fig.savefig(tmp, format="png", pil_kwargs={"compress_level": 3})
    os.replace(tmp, png)
    return png


def _with_note(s: SessionView, note: str) -> SessionView:
    return replace(s, reason=(s.reason + "; " if s.reason else "") + note)


def _draw_turns(a_user, a_model, turns: list[dict[str, Any]]) -> None:
    for t in turns:
        start, end = float(t["start_s"]), float(t["end_s"])
        barge = t["turn_type"] == "barge-in"
        a_user.axvspan(start, end, color=BARGE_C if barge else USER_C, alpha=0.08, lw=0)
        a_user.axvline(start, color="#2c7d2c", lw=1.3)
        label = f" {t['label']}" + (f" ({t['subtype']})" if t.get("subtype") else "")
        a_user.text(start, -1.0, label, fontsize=7, va="bottom", color="#2c7d2c")
        if barge:
            sched, actual = float(t["scheduled_s"]), float(t["actual_s"])
            for ax in (a_user, a_model):
                if not math.isnan(sched):
                    ax.axvline(sched, color=BARGE_C, ls="--", lw=1.2)
                if not math.isnan(actual):
                    ax.axvline(actual, color=BARGE_C, lw=1.6)
            onset = float(t.get("onset_s", float("nan")))
            if not math.isnan(onset):
                a_model.plot([onset], [0.95], marker="v", color=BARGE_C, ms=6)


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


def _draw_words(ax, words: list[tuple[float, str]], y: float, color: str, dur: float, width_px: float) -> None:
    """A tick at every word's start and the phrases' text, each cut to the room before the
    next phrase on its row (two rows, so a short phrase does not hide its neighbour).

    Each row is one string in a monospace font, every phrase padded to the column of its start
    time: two text artists instead of one per phrase (drawing text is most of a PNG's cost)."""
    if not words:
        return
    ax.plot([t for t, _ in words], [y - 0.1] * len(words), ls="none", marker="|", color=color, ms=5)
    cols = max(1, int(width_px / _mono_char_px(ax.figure)))
    col_s = dur / cols
    ph = phrases(words)
    rows = [[" "] * (cols + 1), [" "] * (cols + 1)]
    end = [-1, -1]
    for i, (t, text) in enumerate(ph):
        r = i % 2
        c = max(int(round(t / col_s)), end[r] + 1)
        nxt = int(round(ph[i + 2][0] / col_s)) if i + 2 < len(ph) else cols  # the next phrase on this row
        room = min(nxt, cols) - c - 1
        if room < 1:
            continue
        shown = text if len(text) <= room else text[:max(1, room - 1)] + "…"
        rows[r][c:c + len(shown)] = shown
        end[r] = c + len(shown)
    for r, chars in enumerate(rows):
        # long runs of blanks are not drawn (each glyph costs, a blank too): one text per stretch
        for m in re.finditer(r"\S(?:.*?\S)?(?=\s{8,}|\s*$)", "".join(chars)):
            ax.text(m.start() * col_s, y + 0.17 * r, m.group(), fontsize=WORD_PT, family="monospace", color=color,
                    va="bottom", clip_on=True)


_CHAR_PX: list[float] = []


def _mono_char_px(fig) -> float:
    """The advance of one character of the words' monospace font at DPI (measured once)."""
    if not _CHAR_PX:
        t = fig.text(0, 0, "x" * 200, fontsize=WORD_PT, family="monospace")
        _CHAR_PX.append(t.get_window_extent(fig.canvas.get_renderer()).width / 200)
        t.remove()
    return _CHAR_PX[0]


KEY = (({"color": "#2c7d2c", "lw": 1.3}, "turn start"), ({"color": BARGE_C, "ls": "--"}, "barge-in scheduled"),
       ({"color": BARGE_C}, "barge-in actual"), ({"color": BARGE_C, "marker": "v", "ls": "none"}, "model onset"),
       ({"color": TRIG_C, "ls": "-."}, "trigger"), ({"color": "#2ca02c", "lw": 5}, "model VAD"),
       ({"color": "black", "ls": ":"}, "flush"))


def _key(fig) -> None:
    """The legend, right-aligned above the plots: one monospace label string and a short line
    per item (a matplotlib legend costs a quarter of the PNG's drawing time)."""
    from matplotlib.lines import Line2D  # drawn from render(), which imported matplotlib (see there)

    char = _mono_char_px(fig) / (SIZE_IN[0] * DPI)  # one column, in figure width
    text = "".join(f"    {label}  " for _, label in KEY)
    x0 = RIGHT - len(text) * char
    fig.text(x0, 0.945, text, fontsize=WORD_PT, family="monospace", va="center")
    col = 0
    for style, label in KEY:
        x = x0 + (col + 0.5) * char
        if style.get("marker"):
            fig.add_artist(Line2D([x + 1.5 * char], [0.945], transform=fig.transFigure, ms=5, **style))
        else:
            fig.add_artist(Line2D([x, x + 3 * char], [0.945, 0.945], transform=fig.transFigure, **style))
        col += len(f"    {label}  ")


# -- the score step's writer ---------------------------------------------------------------
class TimelineWriter:
    """A `report.writers` entry (conf/report/default.yaml): after the scores, every session's
    timeline and the run's index, for any benchmark."""

    def __call__(self, run: Run) -> Path:
        t0 = time.perf_counter()
        view = view_of(run)
        index = write_run(view)
        log.info("score: %d timelines and %s in %.1f s", len(view.sessions), index, time.perf_counter() - t0)
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
        rows.append((s, quote(f"{s.case_id}.png"), f"{quote(rel)}/{quote(s.case_id)}.wav" if s.wav else None))
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
    transcript = file_sha256(s.transcript) if s.transcript is not None and s.transcript.is_file() else None
    what = {"version": TIMELINE_VERSION, "state": s.state, "reason": s.reason, "wav": stamp(s.wav),
            "log": stamp(s.log), "transcript": transcript,
            "results": {k: [r.to_dict() for r in rs] for k, rs in sorted(s.results.items())}}
    return hashlib.sha256(json.dumps(what, sort_keys=True, default=str).encode()).hexdigest()[:16]


def write_if_changed(path: Path, text: str) -> None:
    """Write `text` to `path` atomically unless the file already holds exactly that."""
    try:
        if path.read_text(encoding="utf-8") == text:
            return
    except OSError:
        pass
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


CSS = ("body{font:14px system-ui,sans-serif;margin:1.5em}table{border-collapse:collapse}"
       "td,th{border:1px solid #ccc;padding:3px 8px;text-align:left;vertical-align:top}"
       ".bad{background:#fdecea}th{background:#eee}img{max-width:100%}.muted{color:#888}")


def run_table(path: Path, title: str, view: RunView, rows: list[tuple[SessionView, str, str | None]]) -> None:
    """One run's sessions as a table (case, scenario, state and reason, results, PNG, WAV links)."""
    e = html.escape
    parts = [f"<p class=muted>{e(run_line(view))}</p>",
             "<table><tr><th>case</th><th>scenario</th><th>state</th><th>results</th><th>timeline</th><th>audio</th></tr>"]
    for s, png, wav in rows:
        state = s.state + (f": {s.reason}" if s.reason else "")
        parts.append(f"<tr class={'ok' if s.state == 'usable' else 'bad'}><td>{e(s.case_id)}</td>"
                     f"<td>{e(s.case.scenario or '')}</td><td>{e(state)}</td><td>{e(summary(s, 6))}</td>"
                     f"<td>{link(png, 'PNG')}</td><td>{link(wav, 'WAV')}</td></tr>")
    parts.append("</table>")
    write_page(path, title, parts)


def run_line(view: RunView) -> str:
    """The run a page shows. Its folder as `<benchmark>/<model>/<run>` (its place under out_root),
    never the absolute path: a run folder holds no path of its own, so a copied or moved run is
    the same finished run and relaunching it there rewrites no page."""
    shown = describe_results(view)  # which judge's (ASR's, ...) results the page shows
    where = "/".join(view.run_dir.parts[-3:])
    return (f"{view.benchmark} · model {view.model} ({view.model_id}) · run {view.run_id} · {where}"
            + (f" · results: {shown}" if shown else ""))


def write_page(path: Path, title: str, parts: list[str]) -> None:
    """A self-contained HTML page (inline style, relative links), written atomically."""
    text = "\n".join([f"<!doctype html><meta charset=utf-8><title>{html.escape(title)}</title><style>{CSS}</style>",
                      f"<h1>{html.escape(title)}</h1>", *parts, "<p class=muted>written by fdeval</p>"]) + "\n"
    write_if_changed(path, text)


def link(href: str | None, text: str) -> str:
    """An anchor (`href` already URL-quoted), or a grey dash when there is nothing to link."""
    return f'<a href="{html.escape(href)}">{text}</a>' if href else "<span class=muted>-</span>"
