"""TACT scoring vs its naive reference: benchmarks/tact_speed.py as a subprocess (it pins itself to
one core and one BLAS thread at import, which must not happen to the bench process).

Full: the script's defaults (the paper's 9,728 episodes, 10^4 BCa resamples); `--quick`: 1,000
episodes and 1,000 resamples. The naive reference (numerical integration, one Python composite
per resample) is the baseline; the largest disagreement comes with the figures.
"""

from __future__ import annotations

import re
import subprocess
import sys
from typing import Any

from fdeval.bench.common import REPO, row, skipped

SCRIPT = REPO / "benchmarks" / "tact_speed.py"
QUICK_ARGS = ["--episodes", "1000", "--resamples", "1000"]


def parse(text: str) -> dict[str, Any]:
    num = r"([0-9.]+)"
    fast = re.search(rf"fast :\s+{num} s cold.*?, {num} s warm", text)
    naive = re.search(rf"naive:\s+{num} s", text)
    eps = re.search(r"(\d+) episodes, (\d+) BCa resamples", text)
    diffs = re.search(r"max \|fast - naive\|: (.*)", text)
    if not (fast and naive and eps):
        raise RuntimeError(f"tact_speed.py printed no timing lines:\n{text[-1500:]}")
    worst = max(float(v) for v in re.findall(r" ([0-9.]+e[-+][0-9]+)", diffs.group(1))) if diffs else None
    return {"episodes": int(eps.group(1)), "resamples": int(eps.group(2)), "fast_cold_s": float(fast.group(1)),
            "fast_warm_s": float(fast.group(2)), "naive_s": float(naive.group(1)), "max_abs_diff": worst,
            "agree": "agreement within 1e-06: yes" in text}


def run(ctx) -> dict[str, Any]:
    if not SCRIPT.is_file():
        return skipped(f"{SCRIPT} not found (the benchmarks/ folder of a source checkout)")
    proc = subprocess.run([sys.executable, str(SCRIPT), *(QUICK_ARGS if ctx.quick else [])],
                          capture_output=True, text=True, timeout=3600, cwd=REPO)
    out = parse(proc.stdout)
    note = f"{out['episodes']} episodes, {out['resamples']} resamples, 1 core; max |fast - naive| {out['max_abs_diff']:.1e}"
    out["rows"] = [row("TACT scorer, cold (law table included)", out["fast_cold_s"], "s", "naive reference",
                       out["naive_s"], note=note),
                   row("TACT scorer, warm", out["fast_warm_s"], "s", "naive reference", out["naive_s"], note=note)]
    return out
