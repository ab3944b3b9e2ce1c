"""The figure: IAS by instruction, one bar per model, with the bootstrap interval as error bars.

Drawn with matplotlib's object API on the Agg canvas (no pyplot, no global backend switch), and
saved as a PNG without the ``Software`` text chunk, so the same numbers give the same bytes;
a file that already holds those bytes is not rewritten. The PNG carries a digest of what it was
drawn from (a ``fdeval-key`` text chunk); a figure whose file reads back whole (every chunk's CRC)
with the same key is not drawn again, so a relaunch's score step needs no matplotlib.
"""

from __future__ import annotations

import hashlib
import io
import json
import struct
import zlib
from importlib.metadata import version
from pathlib import Path
from typing import Any

from fdeval.files import atomic_path

# Okabe-Ito, readable for colour-blind viewers
COLOURS = ("#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#F0E442", "#000000")
RC = {
    "font.family": "DejaVu Sans",
    "font.size": 9,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "svg.hashsalt": "fdeval",
    "path.simplify": True,
}


def write_bytes_atomic(path: str | Path, data: bytes) -> bool:
    """Write `data` atomically unless the file already holds exactly it; True when written."""
    p = Path(path)
    if p.is_file() and p.stat().st_size == len(data) and p.read_bytes() == data:
        return False
    with atomic_path(p) as tmp:
        tmp.write_bytes(data)
    return True


FIGURE_VERSION = 1  # bump when the drawing changes: every figure is drawn again
KEY_CHUNK = "fdeval-key"
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def figure_key(series: list[tuple[str, list[dict[str, Any]]]], title: str) -> str:
    """A digest of everything the figure is drawn from: its data, title, this code and matplotlib."""
    what = {
        "version": FIGURE_VERSION,
        "matplotlib": version("matplotlib"),
        "title": title,
        "series": series,
    }
    return hashlib.sha256(json.dumps(what, sort_keys=True, default=str).encode()).hexdigest()[:24]


def png_key(path: Path) -> str | None:
    """The `fdeval-key` of the PNG at `path` when the file reads back whole (signature, every
    chunk's length and CRC, IEND last); None otherwise (missing, truncated, damaged, no key)."""
    try:
        data = path.read_bytes()
    except OSError:
        return None
    if not data.startswith(PNG_SIGNATURE):
        return None
    pos, key = len(PNG_SIGNATURE), None
    while pos + 12 <= len(data):
        (n,) = struct.unpack(">I", data[pos : pos + 4])
        kind, body = data[pos + 4 : pos + 8], data[pos + 8 : pos + 8 + n]
        if len(body) != n or pos + 12 + n > len(data):
            return None
        (crc,) = struct.unpack(">I", data[pos + 8 + n : pos + 12 + n])
        if zlib.crc32(kind + body) != crc:
            return None
        if kind == b"tEXt" and body.startswith(KEY_CHUNK.encode() + b"\0"):
            key = body[len(KEY_CHUNK) + 1 :].decode("latin-1")
        pos += 12 + n
        if kind == b"IEND":
            return key if pos == len(data) else None
    return None


def ias_figure_png(
    series: list[tuple[str, list[dict[str, Any]]]],
    title: str = "IAS by instruction",
    key: str | None = None,
) -> bytes:
    """PNG bytes of grouped bars: x = instruction (rows' order), one bar per (model, rows) in `series`.

    Each row needs ``instruction``, ``ias`` and, for error bars, ``ias_ci_low`` / ``ias_ci_high``
    (rates in [0, 1]; None = no bar or no error bar). `key` goes into the PNG's `fdeval-key` chunk.
    """
    # matplotlib (~0.5 CPU-s to import) only when a figure is drawn, not whenever the benchmark is loaded
    import matplotlib
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    instructions: list[str] = []
    for _, rows in series:
        instructions += [r["instruction"] for r in rows if r["instruction"] not in instructions]
    k = max(len(series), 1)
    width = 0.8 / k
    with matplotlib.rc_context(RC):
        fig = Figure(
            figsize=(max(5.0, 1.1 * len(instructions) + 0.25 * k * len(instructions)), 3.8),
            dpi=150,
            layout="constrained",
        )
        FigureCanvasAgg(fig)
        ax = fig.add_subplot()
        for j, (model, rows) in enumerate(series):
            by = {r["instruction"]: r for r in rows}
            xs, ys, lo, hi = [], [], [], []
            for i, name in enumerate(instructions):
                r = by.get(name)
                if r is None or r.get("ias") is None:
                    continue
                y = 100 * r["ias"]
                xs.append(i - 0.4 + width * (j + 0.5))
                ys.append(y)
                low, high = r.get("ias_ci_low"), r.get("ias_ci_high")
                lo.append(0.0 if low is None else max(0.0, y - 100 * low))
                hi.append(0.0 if high is None else max(0.0, 100 * high - y))
            ax.bar(
                xs,
                ys,
                width * 0.92,
                yerr=[lo, hi],
                capsize=2,
                color=COLOURS[j % len(COLOURS)],
                label=model,
                error_kw={"elinewidth": 0.8, "ecolor": "#333333"},
            )
            if (
                len(series) <= 3
            ):  # the value inside the bar's top (above a short bar), clear of the error bar
                for x, y in zip(xs, ys):
                    inside = y >= 12
                    ax.text(
                        x + width * 0.2,
                        y - 1.5 if inside else y + 1.5,
                        f"{y:.0f}",
                        ha="center",
                        va="top" if inside else "bottom",
                        fontsize=7,
                        color="white" if inside else "#333333",
                    )
        labels = [s.capitalize() for s in instructions]
        if len(series) == 1:  # one model: say how many cases each bar rests on
            by = {r["instruction"]: r for r in series[0][1]}
            labels = [
                f"{lab}\n(n={by[s].get('n_judged', by[s].get('n', '?'))})" if s in by else lab
                for lab, s in zip(labels, instructions)
            ]
        ax.set_xticks(range(len(instructions)), labels)
        ax.set_ylim(0, 105)
        ax.set_yticks(range(0, 101, 20))
        ax.set_ylabel("IAS (%)")
        ax.set_title(title)
        ax.grid(axis="y", linewidth=0.4, alpha=0.5)
        ax.set_axisbelow(True)
        if len(series) > 1:
            fig.legend(loc="outside lower center", frameon=False, fontsize=8, ncols=min(k, 4))
        buf = io.BytesIO()
        fig.savefig(
            buf, format="png", metadata={"Software": None, **({KEY_CHUNK: key} if key else {})}
        )
    return buf.getvalue()


def write_ias_figure(
    series: list[tuple[str, list[dict[str, Any]]]],
    path: str | Path,
    title: str = "IAS by instruction",
) -> bool:
    """Draw :func:`ias_figure_png` into `path` (untouched if identical); True when written. Not
    drawn at all when `path` reads back whole and was drawn from the same data (`png_key`)."""
    key = figure_key(series, title)
    if png_key(Path(path)) == key:
        return False
    return write_bytes_atomic(path, ias_figure_png(series, title, key))
