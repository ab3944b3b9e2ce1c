"""Timelines: CPU seconds per session of the score step's timeline PNG, today's drawing
(`fdeval.report.timeline.render`: numpy and Pillow) against the matplotlib drawing it replaced
(issue 28), both measured in this bench run.

Two runs are recorded with the reference agent (lockstep) and scored with the timelines turned
off (`report.writers=[]`): Instruct-FD's built-in set and a synthetic TACT set (`--quick`: 8
cases and 8 episodes, one round; full: the 26 built-in cases and 48 episodes, three rounds).
Then a child process (`python -m fdeval.bench.timeline_before`, where the old drawing is kept as
it was at commit 288620c; the child imports matplotlib, the bench does not) draws every session
with both drawings, one after the other, the order swapped from one session to the next, and
reports the CPU seconds (`time.process_time`) of each call: reading the log and the WAV,
drawing, encoding and writing the PNG. Opening the runs and a first draw of each are left out.
The baseline is the old drawing in the same process on the same sessions: the ratio is
today's / before.
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

from fdeval.bench.common import REPO, Context, row

QUICK = {"instructfd": 8, "tact": 8, "rounds": 1}
FULL = {"instructfd": None, "tact": 48, "rounds": 3}  # None: the whole built-in set


def _record(ctx: Context, size: dict[str, Any]) -> dict[str, Path]:
    """The run folders to draw: Instruct-FD's built-in cases and TACT's episodes, scored, no timelines."""
    out = ctx.fresh("timeline")
    ifd = out / "instructfd"
    gen, _ = ctx.launch(ifd, "stage=generate")
    ids = [c.case_id for c in gen.cases][: size["instructfd"]]
    run, _ = ctx.launch(ifd, f"benchmark.cases=[{','.join(ids)}]", "report.writers=[]")
    tact, _ = ctx.launch(
        out / "tact",
        "benchmark=tact",
        f"benchmark.n_episodes={size['tact']}",
        "benchmark.repeats=1",
        "benchmark.n_resamples=100",
        "report.writers=[]",
    )
    return {"instructfd": run.run_dir, "tact": tact.run_dir}


def _stats(xs: list[float]) -> dict[str, float]:
    return {
        "mean_s": statistics.fmean(xs),
        "median_s": statistics.median(xs),
        "max_s": max(xs),
        "n": len(xs),
    }


def run(ctx: Context) -> dict[str, Any]:
    size = QUICK if ctx.quick else FULL
    runs = _record(ctx, size)
    draw_dir = ctx.work / "timeline" / "drawn"
    cmd = [
        sys.executable,
        "-m",
        "fdeval.bench.timeline_before",
        *map(str, runs.values()),
        "--out",
        str(draw_dir),
        "--rounds",
        str(size["rounds"]),
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=3600, cwd=REPO)
    if proc.returncode != 0:
        raise RuntimeError(
            f"fdeval.bench.timeline_before exited {proc.returncode}: {proc.stderr.strip()[-1500:]}"
        )
    raw = json.loads(proc.stdout.strip().splitlines()[-1])
    names = list(runs)
    result: dict[str, Any] = {
        "runs": {k: str(v) for k, v in runs.items()},
        "rounds": raw["rounds"],
        "sessions": raw["sessions"],
        "draws": {},
    }
    rows = []
    groups = [
        (
            f"{names[i]} ({sum(1 for r in raw['run_of_draw'] if r == i) // raw['rounds']} sessions)",
            [k for k, r in enumerate(raw["run_of_draw"]) if r == i],
        )
        for i in range(len(names))
    ]
    groups.append((f"all ({raw['sessions']} sessions)", list(range(len(raw["run_of_draw"])))))
    for label, idx in groups:
        after = _stats([raw["cpu_s"]["after"][k] for k in idx])
        before = _stats([raw["cpu_s"]["before"][k] for k in idx])
        result["draws"][label] = {"after": after, "before": before}
        rows.append(
            row(
                f"timeline PNG, CPU-s per session, {label}",
                after["mean_s"],
                "CPU-s",
                "matplotlib drawing (before issue 28)",
                before["mean_s"],
                note=f"{raw['rounds']} round(s), medians {after['median_s'] * 1e3:.1f} / "
                f"{before['median_s'] * 1e3:.1f} ms, max {after['max_s'] * 1e3:.1f} ms",
            )
        )
    result["cpu_s_per_session"] = result["draws"][groups[-1][0]]["after"]["mean_s"]
    result["baseline_cpu_s_per_session"] = result["draws"][groups[-1][0]]["before"]["mean_s"]
    result["raw"] = raw
    result["rows"] = rows
    return result
