"""Generation throughput: Instruct-FD cases per minute with espeak-ng (the baseline) and Piper.

The generate step as a launch runs it, on a fresh out_root each (no data folder to reuse):
the sample set (`benchmark.size=sample`), `--quick`: espeak-ng only, on the built-in set (same
pipeline, 26 cases).
"""

from __future__ import annotations

from typing import Any

from fdeval.bench.common import Context, row, skipped
from fdeval.errors import FdevalError


def measure(ctx: Context, tts: str) -> dict[str, Any]:
    size = "small" if ctx.quick else "sample"
    run, wall = ctx.launch(
        ctx.fresh(f"generation-{tts}"), "stage=generate", f"benchmark.size={size}", f"tts={tts}"
    )
    n = len(run.cases)
    return {"tts": tts, "size": size, "cases": n, "wall_s": wall, "cases_per_min": n / wall * 60}


def run(ctx: Context) -> dict[str, Any]:
    espeak = measure(ctx, "espeak")
    if ctx.quick:  # Piper is ~20x slower than espeak-ng: its minute does not fit a CI-sized bench
        piper = skipped("piper: not in --quick (run python -m fdeval.bench --only generation)")
    else:
        try:
            piper = measure(ctx, "piper")
        except (
            FdevalError,
            ImportError,
        ) as e:  # Piper or its voice not installed: the reason, no figure
            piper = skipped(f"piper: {str(e).splitlines()[0]}")
    rows = [
        row(
            f"piper, {espeak['size']} set",
            piper.get("cases_per_min"),
            "cases per minute",
            f"espeak, {espeak['size']} set",
            espeak["cases_per_min"],
            note=piper.get("skipped") or f"{espeak['cases']} cases; wall: the whole generate step",
        )
    ]
    return {"espeak": espeak, "piper": piper, "rows": rows}
