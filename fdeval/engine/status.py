"""`stage=status`: what a run folder holds, step by step, for any benchmark.

Sessions by state (recorded, invalid with reason, failed with reason, unreadable, another run's,
missing); a benchmark's own session step's sessions by state; for every declared case step its
files done / expected, error records (judged again on relaunch) and failed units, in the folder
of this command's settings (`verdicts/<key>`); for the score step which of its tables exist;
then whatever the launcher knows of the run's jobs. Also written to `<run>/status.json`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from fdeval.engine.executor import count_units
from fdeval.engine.run import Run
from fdeval.engine.shared import RecordSessions, Score
from fdeval.engine.steps import CaseStep, Step
from fdeval.files import write_json_atomic


def collect(run: Run) -> dict[str, Any]:
    cases = run.all_cases
    by_state: dict[str, dict[str, str]] = {}
    sessions = {}
    for c in cases:
        s = run.session_state(c)
        sessions[c.case_id] = s
        by_state.setdefault(s.state, {})[c.case_id] = s.why
    steps = []
    for step in run.pipeline:
        if isinstance(step, CaseStep):
            n = count_units(run, step, sessions)
            steps.append(
                {
                    "step": step.name,
                    "stage": step.stage,
                    "folder": _rel(run, step),
                    **n,
                    "expected": sum(n.values()),
                }
            )
        elif isinstance(step, RecordSessions) and step.folder != "sessions":
            # a benchmark's own session step (EchoChain's control, FDB's clean inputs)
            got: dict[str, int] = {}
            for c in step.session_cases(run):
                state = step.state(run, c).state
                got[state] = got.get(state, 0) + 1
            steps.append(
                {"step": step.name, "stage": step.stage, "folder": step.folder, "sessions": got}
            )
        elif isinstance(step, Score):
            tables = [t for m in step.metrics for t in m.tables]
            steps.append(
                {
                    "step": step.name,
                    "stage": step.stage,
                    "folder": _rel(run, step),
                    "tables": tables,
                    "written": [t for t in tables if (run.step_dir(step) / f"{t}.csv").is_file()],
                }
            )
    return {
        "run_dir": str(run.run_dir),
        "run_id": run.run_id,
        "benchmark": run.benchmark.name,
        "cases": len(cases),
        "recorded": len(by_state.get("done", {})),
        "failed": by_state.get("failed", {}),
        "invalid": by_state.get("invalid", {}),
        "invalid_recordings": {
            cid: s.attempt for cid, s in sessions.items() if s.state == "invalid"
        },
        "unreadable": by_state.get("corrupt", {}),
        "foreign": by_state.get("foreign", {}),
        "missing": sorted(by_state.get("missing", {})),
        "steps": steps,
    }


def _rel(run: Run, step: Step) -> str:
    """The step's folder for this command's settings (`verdicts/<key>`), as status prints it."""
    return str(run.step_dir(step).relative_to(run.run_dir))


@dataclass(frozen=True)
class Status(Step):
    """The `status` tool; `launcher_lines` adds what a launcher knows (e.g. Slurm array states)."""

    launcher_lines: tuple[Callable[[Path], list[str]], ...] = field(default=())
    name: str = "status"
    stage: str = ""
    placement: str = "local"
    read_only: bool = True

    def execute(self, run: Run) -> None:
        s = collect(run)
        lines = [
            f"run folder: {s['run_dir']}",
            f"cases: {s['cases']}  recorded: {s['recorded']}  invalid: {len(s['invalid'])}  "
            f"failed: {len(s['failed'])}  "
            f"unreadable: {len(s['unreadable'])}  foreign: {len(s['foreign'])}  missing: {len(s['missing'])}",
        ]
        for st in s["steps"]:
            if "sessions" in st:
                n = st["sessions"]
                others = "".join(f"  {k}: {v}" for k, v in sorted(n.items()) if k != "done")
                lines.append(
                    f"step {st['step']} ({st['stage']}) {st['folder']}: "
                    f"{n.get('done', 0)}/{sum(n.values())} recorded{others}"
                )
            elif "expected" in st:
                extra = "".join(f"  {k}: {st[k]}" for k in ("error", "failed") if st[k])
                lines.append(
                    f"step {st['step']} ({st['stage']}) {st['folder']}: {st['done']}/{st['expected']}{extra}"
                )
            else:
                lines.append(
                    f"step {st['step']} {st['folder']}: {len(st['written'])}/{len(st['tables'])} tables"
                    f"  scored: {bool(st['written'])}"
                )
        for key, label in (
            ("invalid", "invalid (not scored)"),
            ("failed", "failed"),
            ("unreadable", "unreadable"),
            ("foreign", "another run's"),
        ):
            for cid, why in sorted(s[key].items()):
                times = (
                    f" (recorded {s['invalid_recordings'][cid]} time(s))"
                    if key == "invalid"
                    else ""
                )
                lines.append(f"  {label} {cid}: {why}{times}")
        if s["missing"]:
            shown = ", ".join(s["missing"][:10]) + (" ..." if len(s["missing"]) > 10 else "")
            lines.append(f"  missing: {shown}")
        for provider in self.launcher_lines:
            lines += provider(run.run_dir)
        print("\n".join(lines), flush=True)
        write_json_atomic(run.run_dir / "status.json", s)
