"""Throughput of the steps after the run: transcribe, judge, score (units per second).

The full generated set (`benchmark.size=full`), recorded with the reference agent (lockstep),
then each stage as its own launch, timed (cases per second; the files each step wrote are
counted beside it). `--quick`: the first `QUICK_CASES` cases of the sample set. The
baseline of each is the run step on the same cases (sessions per second), measured in the same
run. Default ASR (`exact`) and judge (`rules`): no model or network.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from fdeval.bench.common import Context, row

QUICK_CASES = 12
STAGES = ("transcribe", "judge", "score")


def _files(run_dir: Path) -> set[Path]:
    """What a step leaves: every result file (not the launch record, logs, locks or temps)."""
    return {
        p
        for p in run_dir.rglob("*")
        if p.is_file()
        and not any(x.startswith(".") for x in p.relative_to(run_dir).parts)
        and p.suffix != ".log"
        and p.name != "run.json"
    }


def run(ctx: Context) -> dict[str, Any]:
    size = "sample" if ctx.quick else "full"
    out = ctx.fresh("steps")
    gen, _ = ctx.launch(out, "stage=generate", f"benchmark.size={size}")
    ids = [c.case_id for c in gen.cases]
    over = [f"benchmark.size={size}"]
    if ctx.quick:
        ids = ids[:QUICK_CASES]
        over.append(f"benchmark.cases=[{','.join(ids)}]")
    ctx.launch(out, "stage=generate", *over)
    rec, run_wall = ctx.launch(out, "stage=run", *over)
    run_dir = rec.run_dir
    base = len(ids) / run_wall
    result: dict[str, Any] = {
        "size": size,
        "cases": len(ids),
        "run_wall_s": run_wall,
        "run_cases_per_s": base,
    }
    rows = []
    for stage in STAGES:
        before = _files(run_dir)
        _, wall = ctx.launch(out, f"stage={stage}", *over)
        new = _files(run_dir) - before
        folders = sorted({p.relative_to(run_dir).parts[0] for p in new})
        result[stage] = {
            "wall_s": wall,
            "files": len(new),
            "folders": folders,
            "cases_per_s": len(ids) / wall,
        }
        rows.append(
            row(
                f"{stage}: cases per second",
                len(ids) / wall,
                "cases/s",
                "run step, cases per second",
                base,
                note=f"{len(new)} files in {', '.join(folders) or '-'} in {wall:.2f} s",
            )
        )
    result["rows"] = rows
    return result
