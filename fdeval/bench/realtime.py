"""The reference agent under the realtime clock: N sessions at once, one client process vs several.

Short cases: the built-in conversations that have a barge-in, cut after it (the first take-turn
and the barge-in), copied under new ids until there are N, so a run is one wave of N sessions
cut at `MAX_SESSION_S` (the cut marks a session invalid for scoring; the figures here are timing
ones, all taken before it). Per run: barge-in |error| p50 / p99 (ms), the largest pacing lag,
the orchestrator overhead = wall / scheduled session time (the sessions' durations dealt to N
slots in queue order), and the client CPU cost = the run step's CPU seconds (client processes
included) / session-seconds. Each N in one client process is the baseline of the same N spread
over client processes (`orchestrator.client_processes`); N = 1 is the baseline of N > 1.
"""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path
from typing import Any

from fdeval.bench.common import Context, compose_cfg, makespan, percentile_ms, row, sessions
from fdeval.engine.clients import client_processes, cpu_seconds, usable_cpus

CONCURRENCY = (1, 8, 32)
QUICK_CONCURRENCY = (1, 8)
QUICK_SINGLE_CASES = 1  # N = 1 runs its sessions one after the other
SINGLE_CASES = 4
MAX_SESSION_S = 18.0  # after the longest built-in first turn + barge-in (~15 s)


def short_cases(data_dir: Path, dst: Path, n: int) -> Path:
    """`n` cases cut after their first barge-in, as a case folder (audio copied: the case loader
    refuses a file that resolves outside the dataset root)."""
    shutil.rmtree(dst, ignore_errors=True)
    src = []
    for f in sorted((data_dir / "cases").glob("*.json")):
        d = json.loads(f.read_text())
        k = next((i for i, t in enumerate(d["turns"]) if t["turn_type"] == "barge-in"), None)
        if k is not None:
            d["turns"] = d["turns"][: k + 1]
            src.append(d)
    if not src:
        raise RuntimeError(f"{data_dir}: no case with a barge-in")
    (dst / "cases").mkdir(parents=True, exist_ok=True)
    for d in src:
        conv = Path(d["turns"][0]["audio_path"]).parent
        if not (dst / conv).exists():
            shutil.copytree(data_dir / conv, dst / conv)
    for i in range(n):
        d = dict(src[i % len(src)])
        rep = i // len(src)
        if rep:  # another copy of the same conversation under its own ids
            conv = f"{d['conversation_id']}_r{rep}"
            d = {**d, "conversation_id": conv, "test_case_id": f"{conv}__{d['policy_name']}"}
        (dst / "cases" / f"{d['test_case_id']}.json").write_text(json.dumps(d, indent=1))
    return dst


def measure(ctx: Context, cases_dir: Path, n: int, processes: int, *extra: str) -> dict[str, Any]:
    """One realtime run of every case in `cases_dir`, `n` at a time over `processes` client
    processes (0 = auto)."""
    name = f"realtime-n{n}-p{processes}"
    out = ctx.fresh(name)
    over = [
        f"benchmark.cases_dir={cases_dir}",
        "orchestrator.clock=realtime",
        f"model.concurrency={n}",
        f"orchestrator.max_session_s={MAX_SESSION_S}",
        f"orchestrator.client_processes={processes}",
        *extra,
    ]
    ctx.launch(out, "stage=generate", *over)
    c0 = cpu_seconds()
    run, wall = ctx.launch(out, "stage=run", *over)
    launch_cpu = (
        cpu_seconds() - c0
    )  # the whole launch, client processes included (they are waited for)
    st = run.stats["run"]
    cpu = st["cpu_s"]  # the step's recording alone (the launch's figure is kept beside it)
    logs = sessions(run.run_dir)
    errors = [
        t.error_s
        for s in logs
        for t in s.turns
        if t.turn_type == "barge-in" and not math.isnan(t.error_s)
    ]
    lags = [s.info.health.pacing_lag_max_s for s in logs]
    bound = float(run.cfg.orchestrator.max_pacing_lag_s)  # past it a session is invalid (and ends)
    durations = [s.duration_s for s in logs]
    scheduled = makespan(durations, n)
    return {
        "concurrency": n,
        "client_processes": st["client_processes"],
        "cases": len(logs),
        "invalid": st["invalid"],
        "session_s": sum(durations),
        "wall_s": st["wall_s"],
        "step_wall_s": wall,
        "scheduled_s": scheduled,
        "overhead": st["wall_s"] / scheduled,
        "barge_in_p50_ms": percentile_ms(errors, 50),
        "barge_in_p99_ms": percentile_ms(errors, 99),
        "barge_ins": len(errors),
        "pacing_lag_max_ms": max(lags) * 1e3 if lags else None,
        "past_pacing_bound": sum(lag > bound for lag in lags),
        "pacing_bound_ms": bound * 1e3,
        "client_cpu_s": cpu,
        "launch_cpu_s": launch_cpu,
        "run_dir": str(run.run_dir),
        "client_cpu_s_per_session_s": cpu / sum(durations) if durations else None,
    }


FIGURES = (
    ("barge_in_p50_ms", "barge-in |error| p50", "ms"),
    ("barge_in_p99_ms", "barge-in |error| p99", "ms"),
    ("pacing_lag_max_ms", "max pacing lag", "ms"),
    ("overhead", "orchestrator overhead", "wall / scheduled"),
    ("client_cpu_s_per_session_s", "client CPU", "CPU-s per session-s"),
)


def _rows(
    m: dict[str, Any], base: dict[str, Any], label: str, base_label: str
) -> list[dict[str, Any]]:
    # a session past the pacing bound ends there, maybe before its barge-in: say how many
    notes = {
        "barge": f"{m['barge_ins']} barge-ins in {m['cases']} sessions",
        "pacin": f"{m['past_pacing_bound']} of {m['cases']} sessions past the {m['pacing_bound_ms']:.0f} ms bound",
    }
    return [
        row(f"{label}: {what}", m[k], unit, base_label, base[k], note=notes.get(k[:5], ""))
        for k, what, unit in FIGURES
    ]


def spread_processes(n: int, cost: float) -> tuple[int, str]:
    """Client processes for the spread run: auto from the measured cost, or, where auto keeps
    everything in one process on this machine, one per usable CPU (capped at n)."""
    o = compose_cfg([f"orchestrator.client_cpu_s_per_session_s={cost}"]).orchestrator
    auto = client_processes(o, "realtime", n, n)
    if auto > 1:
        return 0, f"auto = {auto}"
    return min(n, usable_cpus()), "explicit (auto = 1 here)"


def run(ctx: Context) -> dict[str, Any]:
    levels = QUICK_CONCURRENCY if ctx.quick else CONCURRENCY
    gen, _ = ctx.launch(
        ctx.fresh("realtime-data"), "stage=generate"
    )  # the built-in set (its audio)
    runs, rows = [], []
    for n in levels:
        cases = short_cases(
            gen.data_dir,
            ctx.work / f"realtime-cases-{n}",
            n if n > 1 else QUICK_SINGLE_CASES if ctx.quick else SINGLE_CASES,
        )
        one = measure(ctx, cases, n, 1)
        runs.append(one)
        ctx.log(
            f"bench realtime: {n} session(s), 1 process: p99 {one['barge_in_p99_ms']} ms, "
            f"overhead {one['overhead']:.3f}"
        )
        if n > 1:
            rows += _rows(one, runs[0], f"{n} sessions, 1 process", "1 session, 1 process")
            k, how = spread_processes(n, one["client_cpu_s_per_session_s"])
            cost = (
                f"orchestrator.client_cpu_s_per_session_s={one['client_cpu_s_per_session_s']:.4f}"
            )
            many = measure(ctx, cases, n, k, cost)
            many["how"] = how
            runs.append(many)
            rows += _rows(
                many,
                one,
                f"{n} sessions, {many['client_processes']} processes ({how})",
                f"{n} sessions, 1 process",
            )
    # what stage=plan reads (launcher.plan.bench=bench.json): one process at the most sessions measured
    single = [r for r in runs if r["client_processes"] == 1]
    cost = max(single, key=lambda r: r["concurrency"])["client_cpu_s_per_session_s"]
    return {"runs": runs, "rows": rows, "client_cpu_s_per_session_s": cost}
