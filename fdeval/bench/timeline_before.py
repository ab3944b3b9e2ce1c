"""The timeline drawing of fdeval before issue 28 (matplotlib, about 0.2 s of CPU per session),
kept only as the bench's baseline, and the bench's worker that measures it beside today's drawing.

`render_before` is `fdeval.report.timeline.render` as it was at commit 288620c (its envelope, turns,
words, key and save (a fixed `.tmp` name and a rename, as then), verbatim: only the reading
helpers, which both drawings share, come from today's module). Nothing outside the bench draws
with it.

    python -m fdeval.bench.timeline_before RUN_DIR [RUN_DIR ...] --out DIR --rounds N

draws every session of the runs with both drawings, session after session, the order of the two
swapped from one session to the next, and prints one JSON object: the CPU seconds
(`time.process_time`, this process only) of each drawing per session. A first draw of each
(fonts, caches) is left out, and so is the garbage the other drawing left (collected before each
draw, untimed). matplotlib is imported here at the top: the bench starts this as a
child process, so the bench itself never loads it.
"""

from __future__ import annotations

import argparse
import gc
import json
import math
import os
import re
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import soundfile as sf
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.lines import Line2D

from fdeval.report.runview import SessionView, open_run
from fdeval.report.timeline import (
    BARGE_C,
    DPI,
    LEFT,
    MODEL_C,
    RIGHT,
    SIZE_IN,
    TRIG_C,
    USER_C,
    WORD_PT,
    phrases,
    render,
    results_lines,
    session_log,
    triggers_of,
    words_of,
)

ENVELOPE_BINS = 1600


def envelope(
    wav: Path, bins: int = ENVELOPE_BINS
) -> tuple[np.ndarray, np.ndarray, np.ndarray, float]:
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


def render_before(s: SessionView, png: Path) -> Path:
    """Write the session's timeline PNG (a fixed 1440 x 630 px); the path."""
    fig = Figure(figsize=SIZE_IN, dpi=DPI)
    FigureCanvasAgg(fig)
    gs = fig.add_gridspec(
        3, 1, height_ratios=[2, 2, 2], hspace=0.08, left=LEFT, right=RIGHT, top=0.92, bottom=0.17
    )
    a_user, a_model, a_words = (fig.add_subplot(gs[i]) for i in range(3))
    title = f"{s.case.case_id}   ·   {s.case.scenario or s.case.benchmark}   ·   session {s.state}"
    fig.suptitle(
        title + (f": {s.reason}" if s.reason else ""),
        fontsize=12,
        x=0.05,
        ha="left",
        color="black" if s.state == "usable" else BARGE_C,
    )
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
        a_user.text(
            0.5, 0.5, "no recording", transform=a_user.transAxes, ha="center", color=BARGE_C
        )
    for ax, name in ((a_user, "user (ch0)"), (a_model, "model (ch1)")):
        ax.set_ylim(-1.05, 1.05)
        ax.set_yticks([])
        ax.set_ylabel(name, fontsize=9)
    _draw_turns(a_user, a_model, log["turns"])
    for seg in log["vad_segments"]:
        a_model.axvspan(
            float(seg["start_s"]),
            float(seg["end_s"]),
            ymin=0.9,
            ymax=1.0,
            color="#2ca02c",
            alpha=0.8,
            lw=0,
        )
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
    a_words.text(
        1.0,
        1.0,
        f"words: {source}",
        transform=a_words.transAxes,
        ha="right",
        va="bottom",
        fontsize=7,
        color="gray",
    )
    for ax in (a_user, a_model, a_words):
        ax.set_xlim(0, dur)
    for ax in (a_user, a_model):
        ax.set_xticks([])  # the words lane below carries the time axis
    a_words.set_xlabel("session time (s)", fontsize=9)
    _key(fig)
    lines = results_lines(s) or [
        ("no results" if s.state == "usable" else f"not scored: {s.reason}")
    ]
    fig.text(
        LEFT,
        0.1,
        "\n".join(lines[:6] + ([f"… {len(lines) - 6} more"] if len(lines) > 6 else [])),
        va="top",
        ha="left",
        fontsize=8.5,
        family="monospace",
        bbox={"boxstyle": "round", "fc": "#f6f6f6", "ec": "#999999"},
    )
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


def _draw_words(
    ax, words: list[tuple[float, str]], y: float, color: str, dur: float, width_px: float
) -> None:
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
        nxt = (
            int(round(ph[i + 2][0] / col_s)) if i + 2 < len(ph) else cols
        )  # the next phrase on this row
        room = min(nxt, cols) - c - 1
        if room < 1:
            continue
        shown = text if len(text) <= room else text[: max(1, room - 1)] + "…"
        rows[r][c : c + len(shown)] = shown
        end[r] = c + len(shown)
    for r, chars in enumerate(rows):
        # long runs of blanks are not drawn (each glyph costs, a blank too): one text per stretch
        for m in re.finditer(r"\S(?:.*?\S)?(?=\s{8,}|\s*$)", "".join(chars)):
            ax.text(
                m.start() * col_s,
                y + 0.17 * r,
                m.group(),
                fontsize=WORD_PT,
                family="monospace",
                color=color,
                va="bottom",
                clip_on=True,
            )


_CHAR_PX: list[float] = []


def _mono_char_px(fig) -> float:
    """The advance of one character of the words' monospace font at DPI (measured once)."""
    if not _CHAR_PX:
        t = fig.text(0, 0, "x" * 200, fontsize=WORD_PT, family="monospace")
        _CHAR_PX.append(t.get_window_extent(fig.canvas.get_renderer()).width / 200)
        t.remove()
    return _CHAR_PX[0]


KEY = (
    ({"color": "#2c7d2c", "lw": 1.3}, "turn start"),
    ({"color": BARGE_C, "ls": "--"}, "barge-in scheduled"),
    ({"color": BARGE_C}, "barge-in actual"),
    ({"color": BARGE_C, "marker": "v", "ls": "none"}, "model onset"),
    ({"color": TRIG_C, "ls": "-."}, "trigger"),
    ({"color": "#2ca02c", "lw": 5}, "model VAD"),
    ({"color": "black", "ls": ":"}, "flush"),
)


def _key(fig) -> None:
    """The legend, right-aligned above the plots: one monospace label string and a short line
    per item (a matplotlib legend costs a quarter of the PNG's drawing time)."""
    char = _mono_char_px(fig) / (SIZE_IN[0] * DPI)  # one column, in figure width
    text = "".join(f"    {label}  " for _, label in KEY)
    x0 = RIGHT - len(text) * char
    fig.text(x0, 0.945, text, fontsize=WORD_PT, family="monospace", va="center")
    col = 0
    for style, label in KEY:
        x = x0 + (col + 0.5) * char
        if style.get("marker"):
            fig.add_artist(
                Line2D([x + 1.5 * char], [0.945], transform=fig.transFigure, ms=5, **style)
            )
        else:
            fig.add_artist(
                Line2D([x, x + 3 * char], [0.945, 0.945], transform=fig.transFigure, **style)
            )
        col += len(f"    {label}  ")


# -- the bench's worker ----------------------------------------------------------------------
def measure(run_dirs: list[Path], out: Path, rounds: int = 1) -> dict[str, Any]:
    """CPU seconds of each drawing per session, side by side: every session of the runs drawn by
    both, `rounds` times, the order of the two swapped from one draw to the next (a machine that
    speeds up or slows down moves both alike). A draw is the whole call: reading the log and the
    WAV, drawing, encoding and writing the PNG, with the garbage collections it sets off; the
    garbage left before it is collected first, untimed (the two drawings share one process, and
    a collection of the matplotlib figure's cycles took 0.17 s of an "after" draw it happened to
    land in). Opening the runs, the imports and a first draw of each (fonts, caches) are left out."""
    views = [open_run(d) for d in run_dirs]
    sessions = [(i, s) for i, v in enumerate(views) for s in v.sessions]
    if not sessions:
        raise SystemExit("fdeval.bench.timeline_before: the runs have no sessions")
    sides = {"before": render_before, "after": render}
    for name, draw in sides.items():
        draw(sessions[0][1], out / "warm" / f"{name}.png")
    cpu: dict[str, list[float]] = {name: [] for name in sides}
    wall: dict[str, list[float]] = {name: [] for name in sides}
    runs: list[int] = []
    for r in range(rounds):
        for k, (i, s) in enumerate(sessions):
            order = list(sides) if (k + r) % 2 == 0 else list(sides)[::-1]
            for name in order:
                png = out / name / f"run{i}" / f"{s.case_id}.png"
                gc.collect()  # the other drawing's cycles (a matplotlib figure's) are not charged to this one
                c0, w0 = time.process_time(), time.perf_counter()
                sides[name](s, png)
                cpu[name].append(time.process_time() - c0)
                wall[name].append(time.perf_counter() - w0)
            runs.append(i)
    return {
        "sessions": len(sessions),
        "rounds": rounds,
        "runs": [str(d) for d in run_dirs],
        "run_of_draw": runs,
        "cpu_s": cpu,
        "wall_s": wall,
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m fdeval.bench.timeline_before",
        description="CPU per session of the timeline drawing before issue 28 and today's",
    )
    ap.add_argument("runs", nargs="+", type=Path, metavar="RUN_DIR")
    ap.add_argument("--out", type=Path, required=True, help="where the PNGs of both drawings go")
    ap.add_argument("--rounds", type=int, default=1)
    a = ap.parse_args(argv)
    print(json.dumps(measure(a.runs, a.out, a.rounds)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
