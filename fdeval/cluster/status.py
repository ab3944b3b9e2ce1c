"""`stage=status`: what a run folder holds (done, failed with reason, missing) and its arrays' states."""

from __future__ import annotations

import json
import logging
import shutil
import subprocess
from collections import Counter
from typing import Any

from fdeval.files import write_json_atomic

log = logging.getLogger("fdeval")


def _array_states(job_id: str) -> dict[str, int]:
    if shutil.which("sacct") is None:
        return {"unknown (no sacct)": 1}
    out = subprocess.run(["sacct", "-n", "-P", "-X", "-j", job_id, "-o", "JobID,State"], capture_output=True,
                         text=True, timeout=30)
    states = Counter(line.split("|")[1].split()[0] for line in out.stdout.splitlines() if "|" in line)
    return dict(states) or {"unknown": 1}


def collect(ctx) -> dict[str, Any]:
    cases = ctx.all_cases
    d = ctx.run_dir
    sessions, failed, missing = [], {}, []
    for c in cases:
        if (d / "sessions" / f"{c.case_id}.h5").exists():
            sessions.append(c.case_id)
        elif (err := d / "sessions" / f"{c.case_id}.error.json").exists():
            failed[c.case_id] = json.loads(err.read_text()).get("error", "?")
        else:
            missing.append(c.case_id)
    shared = ctx.benchmark.stage("judge") is None  # benchmarks with their own stages keep their own files
    n_verdicts = sum(len(c.judge_policies) for c in cases) if shared else None
    verdicts = sum((d / "verdicts" / f"{c.case_id}@{p}.json").exists() for c in cases for p in c.judge_policies) if shared else None
    transcripts = sum((d / "transcripts" / f"{c.case_id}.json").exists() for c in cases) if shared else None
    jobs_file = d / "slurm" / "jobs.json"
    arrays = []
    if jobs_file.exists():
        for rec in json.loads(jobs_file.read_text()):
            arrays.append({**rec, "states": _array_states(rec["job_id"])})
    return {
        "run_dir": str(d), "cases": len(cases), "recorded": len(sessions), "failed": failed, "missing": missing,
        "transcripts": transcripts, "verdicts": verdicts, "verdicts_expected": n_verdicts,
        "scored": (d / "scores").is_dir() and any((d / "scores").iterdir()), "arrays": arrays,
    }


def status(ctx) -> dict[str, Any]:
    s = collect(ctx)
    lines = [
        f"run folder: {s['run_dir']}",
        f"cases: {s['cases']}  recorded: {s['recorded']}  failed: {len(s['failed'])}  missing: {len(s['missing'])}",
        (f"transcripts: {s['transcripts']}/{s['cases']}  verdicts: {s['verdicts']}/{s['verdicts_expected']}  scored: {s['scored']}"
         if s["verdicts"] is not None else f"judging and scoring: {ctx.benchmark.name}'s own stages  scored: {s['scored']}"),
    ]
    for cid, why in sorted(s["failed"].items()):
        lines.append(f"  failed {cid}: {why}")
    if s["missing"]:
        shown = ", ".join(s["missing"][:10]) + (" ..." if len(s["missing"]) > 10 else "")
        lines.append(f"  missing: {shown}")
    for a in s["arrays"]:
        states = ", ".join(f"{k} {v}" for k, v in sorted(a["states"].items()))
        lines.append(f"array {a['job_id']} ({a['phase']}, {a['n_tasks']} task(s)): {states}")
    print("\n".join(lines), flush=True)
    write_json_atomic(ctx.run_dir / "status.json", s)
    return s
