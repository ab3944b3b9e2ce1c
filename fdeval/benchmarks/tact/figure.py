"""Fig. 2 as a figure: per system a grid of categories (rows) by posterior-mode intent (columns),
each cell coloured by its score, with the score and the number of episodes written in it.

Drawn like Instruct-FD's figure (`fdeval.benchmarks.instructfd.reporting.figure`): matplotlib's
object API on the Agg canvas, a PNG without the Software chunk so the same numbers give the same
bytes, a digest of the data in an `fdeval-key` chunk so a relaunch that would draw the same figure
draws nothing, and an atomic write that leaves an identical file alone.
"""

from __future__ import annotations

import hashlib
import io
import json
import math
from importlib.metadata import version
from pathlib import Path
from typing import Any

from fdeval.benchmarks.instructfd.reporting.figure import KEY_CHUNK, RC, png_key, write_bytes_atomic

from .laws import INTENTS
from .scoring import CATEGORIES

FIGURE_VERSION = 1  # bump when the drawing changes
ROWS = ("all", *CATEGORIES)
ROW_LABELS = {
    "all": "all",
    "pause_handling": "pause",
    "backchanneling": "backchannel",
    "smooth_turn_taking": "turn-taking",
    "user_interruption": "interruption",
}

Series = list[tuple[str, list[dict[str, Any]]]]


def _key(series: Series) -> str:
    what = {"version": FIGURE_VERSION, "matplotlib": version("matplotlib"), "series": series}
    return hashlib.sha256(json.dumps(what, sort_keys=True, default=str).encode()).hexdigest()[:24]


def intent_figure_png(series: Series, key: str | None = None) -> bytes:
    """PNG bytes: one heat map per (system, cells) of `series`; cells are `analysis.intent_cells` rows."""
    import matplotlib  # ~0.5 CPU-s: only when a figure is drawn
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    k = max(1, len(series))
    with matplotlib.rc_context(RC):
        fig = Figure(figsize=(3.6 * k + 0.8, 3.2), dpi=150, layout="constrained")
        FigureCanvasAgg(fig)
        axes = fig.subplots(1, k, squeeze=False)[0]
        image = None
        for ax, (system, cells) in zip(axes, series):
            by = {(c["category"], c["intent"]): c for c in cells}
            grid = [
                [(by[(r, z)]["score"] if (r, z) in by else math.nan) for z in INTENTS] for r in ROWS
            ]
            image = ax.imshow(grid, vmin=0.0, vmax=1.0, cmap="viridis", aspect="auto")
            for i, r in enumerate(ROWS):
                for j, z in enumerate(INTENTS):
                    c = by.get((r, z))
                    if c is None or not math.isfinite(c["score"]):
                        continue
                    ax.text(
                        j,
                        i,
                        f"{c['score']:.2f}\n({c['n_episodes']})",
                        ha="center",
                        va="center",
                        fontsize=6.5,
                        color="white" if c["score"] < 0.6 else "black",
                    )
            ax.set_xticks(range(len(INTENTS)), INTENTS)
            ax.set_yticks(range(len(ROWS)), [ROW_LABELS[r] for r in ROWS])
            ax.set_title(system, fontsize=9)
            ax.tick_params(length=0)
            for side in ("left", "bottom"):
                ax.spines[side].set_visible(False)
        if image is not None:
            fig.colorbar(image, ax=list(axes), shrink=0.8, label="score (n episodes)")
        buf = io.BytesIO()
        fig.savefig(
            buf, format="png", metadata={"Software": None, **({KEY_CHUNK: key} if key else {})}
        )
    return buf.getvalue()


def write_intent_figure(series: Series, path: str | Path) -> bool:
    """Draw `intent_figure_png` into `path` unless it already holds that figure; True when written."""
    key = _key(series)
    if png_key(Path(path)) == key:
        return False
    return write_bytes_atomic(path, intent_figure_png(series, key))
