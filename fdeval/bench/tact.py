"""TACT scoring vs its naive reference: benchmarks/tact_speed.py as a subprocess (it pins itself to
one core and one BLAS thread at import, which must not happen to the bench process).

Full: 10,000 episodes (the paper's 9,728 rounded up, its category shares) and 10^4 BCa
resamples; `--quick`: 1,000 episodes and 1,000 resamples. The naive reference (numerical
integration, one Python composite per resample) is the baseline, measured in the same run; the
largest disagreement comes with the figures. Rows: the scorer cold and warm against the naive
reference, the naive reference against the warm scorer (its ratio is the speed-up), the warm
score's BCa intervals against the warm score (its ratio is the share of the time spent on
intervals), and the population S_T's BCa interval (an extra the score step asks for).
"""

from __future__ import annotations

import re
import subprocess
import sys
from typing import Any

from fdeval.bench.common import REPO, row, skipped

SCRIPT = REPO / "benchmarks" / "tact_speed.py"
QUICK_ARGS = ["--episodes", "1000", "--resamples", "1000"]
FULL_ARGS = ["--episodes", "10000", "--resamples", "10000"]


def parse(text: str) -> dict[str, Any]:
    num = r"([0-9.]+)"
    fast = re.search(rf"fast :\s+{num} s cold.*?, {num} s warm", text)
    naive = re.search(rf"naive:\s+{num} s", text)
    eps = re.search(r"(\d+) episodes, (\d+) BCa resamples", text)
    diffs = re.search(r"max \|fast - naive\|: (.*)", text)
    parts = re.search(
        rf"warm parts: per-episode scores {num} s, BCa with \d+ resamples {num} s", text
    )
    st_ci = re.search(rf"population S_T BCa[^0-9]*{num} s", text)
    if not (fast and naive and eps):
        raise RuntimeError(f"tact_speed.py printed no timing lines:\n{text[-1500:]}")
    worst = (
        max(float(v) for v in re.findall(r" ([0-9.]+e[-+][0-9]+)", diffs.group(1)))
        if diffs
        else None
    )
    return {
        "episodes": int(eps.group(1)),
        "resamples": int(eps.group(2)),
        "fast_cold_s": float(fast.group(1)),
        "fast_warm_s": float(fast.group(2)),
        "naive_s": float(naive.group(1)),
        "max_abs_diff": worst,
        "episode_scores_s": float(parts.group(1)) if parts else None,
        "intervals_s": float(parts.group(2)) if parts else None,
        "timing_interval_s": float(st_ci.group(1)) if st_ci else None,
        "agree": "agreement within 1e-06: yes" in text,
    }


def run(ctx) -> dict[str, Any]:
    if not SCRIPT.is_file():
        return skipped(f"{SCRIPT} not found (the benchmarks/ folder of a source checkout)")
    proc = subprocess.run(
        [sys.executable, str(SCRIPT), *(QUICK_ARGS if ctx.quick else FULL_ARGS)],
        capture_output=True,
        text=True,
        timeout=3600,
        cwd=REPO,
    )
    out = parse(proc.stdout)
    note = (
        f"{out['episodes']} episodes, {out['resamples']} resamples, 1 core; "
        f"max |fast - naive| {out['max_abs_diff']:.1e}"
    )
    warm = out["fast_warm_s"]
    out["speedup_warm"] = out["naive_s"] / warm if warm else None
    out["intervals_share"] = (
        out["intervals_s"] / warm if warm and out["intervals_s"] is not None else None
    )
    out["rows"] = [
        row(
            "TACT scorer, cold (law table included)",
            out["fast_cold_s"],
            "s",
            "naive reference",
            out["naive_s"],
            note=note,
        ),
        row("TACT scorer, warm", warm, "s", "naive reference", out["naive_s"], note=note),
        row(
            "naive reference",
            out["naive_s"],
            "s",
            "TACT scorer, warm",
            warm,
            note="ratio: how many times faster the scorer is, in one run",
        ),
        row(
            "BCa intervals of S and the categories (warm)",
            out["intervals_s"],
            "s",
            "TACT scorer, warm",
            warm,
            note="ratio: share of the warm score's time spent on intervals",
        ),
        row(
            "BCa interval of the population S_T",
            out["timing_interval_s"],
            "s",
            "TACT scorer, warm",
            warm,
            note="asked for by the score step; not part of the warm score",
        ),
    ]
    return out
