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
    by_state: dict[str, dict[str, str]] = {}
    sessions = {}
    for c in cases:
        s = ctx.session_state(c)
        sessions[c.case_id] = s
        by_state.setdefault(s.state, {})[c.case_id] = s.why
    done = [cid for cid, s in sessions.items() if s.state == "done"]
    shared = ctx.benchmark.stage("judge") is None  # benchmarks with their own stages keep their own files
    by_id = {c.case_id: c for c in cases}
    n_verdicts = sum(len(by_id[cid].judge_policies) for cid in done) if shared else None
    verdicts = sum(ctx.derived_state(d / "verdicts" / f"{cid}@{p}.json", sessions[cid]) == "done"
                   for cid in done for p in by_id[cid].judge_policies) if shared else None
    transcripts = sum(ctx.derived_state(d / "transcripts" / f"{cid}.json", sessions[cid]) == "done"
                      for cid in done) if shared else None
    jobs_file = d / "slurm" / "jobs.json"
    arrays = []
    if jobs_file.exists():
        for rec in json.loads(jobs_file.read_text()):
            arrays.append({**rec, "states": _array_states(rec["job_id"])})
    return {
        "run_dir": str(d), "run_id": ctx.run_id, "cases": len(cases), "recorded": len(done),
        "failed": by_state.get("failed", {}), "invalid": by_state.get("invalid", {}),
        "unreadable": by_state.get("corrupt", {}), "foreign": by_state.get("foreign", {}),
        "missing": sorted(by_state.get("missing", {})),
        "transcripts": transcripts, "transcripts_expected": len(done) if shared else None,
        "verdicts": verdicts, "verdicts_expected": n_verdicts,
        "scored": (d / "scores").is_dir() and any((d / "scores").iterdir()), "arrays": arrays,
    }


def status(ctx) -> dict[str, Any]:
    s = collect(ctx)
    lines = [
        f"run folder: {s['run_dir']}",
        f"cases: {s['cases']}  recorded: {s['recorded']}  invalid: {len(s['invalid'])}  failed: {len(s['failed'])}  "
        f"unreadable: {len(s['unreadable'])}  foreign: {len(s['foreign'])}  missing: {len(s['missing'])}",
        (f"transcripts: {s['transcripts']}/{s['transcripts_expected']}  verdicts: {s['verdicts']}/{s['verdicts_expected']}  "
         f"scored: {s['scored']}"
         if s["verdicts"] is not None else f"judging and scoring: {ctx.benchmark.name}'s own stages  scored: {s['scored']}"),
    ]
    for key, label in (("invalid", "invalid (not scored)"), ("failed", "failed"), ("unreadable", "unreadable"),
                       ("foreign", "another run's")):
        for cid, why in sorted(s[key].items()):
            lines.append(f"  {label} {cid}: {why}")
    if s["missing"]:
        shown = ", ".join(s["missing"][:10]) + (" ..." if len(s["missing"]) > 10 else "")
        lines.append(f"  missing: {shown}")
    for a in s["arrays"]:
        states = ", ".join(f"{k} {v}" for k, v in sorted(a["states"].items()))
        lines.append(f"array {a['job_id']} ({a['phase']}, {a['n_tasks']} task(s)): {states}")
    print("\n".join(lines), flush=True)
    write_json_atomic(ctx.run_dir / "status.json", s)
    return s
