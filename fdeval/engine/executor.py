"""The one executor of case steps, and what aggregates read.

For every unit of a case step (the run's usable sessions x the step's keys) the executor decides
whether its file is done (reads back whole, made from the current session by the current step
settings, and not an error record), makes the missing ones with bounded retries, writes each
atomically with its provenance into the folder of the step's current settings
(`Run.step_dir`: `<folder>/<key>/`, so files of other settings are neither read nor touched), and
records a unit that keeps failing as `<unit>.error.json` (the step then fails after the others
are made; a relaunch tries it again). A file no run names (`{}`, no provenance) is damaged and
made again, as a truncated one. A user error (`FdevalError`) stops the step at once.
"""

from __future__ import annotations

import logging
import time
import traceback
from typing import Any

from fdeval.engine.run import Run
from fdeval.engine.steps import CaseStep, Result, Unit
from fdeval.errors import FdevalError
from fdeval.files import remove_stale_temps, write_json_atomic

log = logging.getLogger("fdeval")


class StepFailures(FdevalError):
    """Some units of a step could not be made (infrastructure errors); the others were."""


def stamp(run: Run, step: CaseStep) -> dict[str, Any]:
    """What a step writes into each file's provenance: its name, version and settings' hash."""
    return run.stamp(step)


def units(run: Run, step: CaseStep) -> tuple[list[Unit], dict[str, list[str]]]:
    """The step's units over this process's usable sessions, and the skipped cases by state."""
    out = run.step_dir(step)
    ok, skipped = run.scorable(step.name)
    return [
        Unit(c, s, k, out / step.filename(c.case_id, k)) for c, s in ok for k in step.keys(c)
    ], skipped


def unit_mark(run: Run, step: CaseStep, unit: Unit, mark: dict[str, Any]) -> dict[str, Any]:
    """The step's stamp plus what this unit was made from beyond its session (`CaseStep.inputs`)."""
    extra = step.inputs(run, unit)
    return {**mark, "inputs": extra} if extra else mark


def unit_state(
    run: Run, step: CaseStep, unit: Unit, mark: dict[str, Any]
) -> tuple[str, dict[str, Any] | None]:
    """done | missing | stale | corrupt | foreign | error (an error record: made again). A file
    made from other inputs than the unit's current ones (`CaseStep.inputs`) is stale."""
    um = unit_mark(run, step, unit, mark)
    state, d = run.folder.read_derived(unit.path, unit.session, um)
    if (
        state == "foreign"
        and um is not mark
        and isinstance(d, dict)
        and run.folder.read_derived(unit.path, unit.session, None)[0] == "done"
    ):
        prov = d.get("provenance") or {}
        if (
            isinstance(prov.get("step"), dict)
            and {k: v for k, v in prov["step"].items() if k != "inputs"} == mark
        ):
            return "stale", d  # this step's settings, older inputs: made again without resume=redo
    if state != "done":
        return state, d
    try:
        step.check(d, unit.path)
    except ValueError as e:
        log.warning("%s: %s: %s; making it again", step.name, unit.path.name, e)
        return "corrupt", None
    res = step.result(d)
    return ("error" if res is not None and res.status == "error" else "done"), d


def execute_case_step(run: Run, step: CaseStep) -> None:
    t0 = time.perf_counter()
    out = run.step_dir(step)
    if out.is_dir() and (n := remove_stale_temps(out)):
        log.info("%s: removed %d temp file(s) left by an interrupted run", step.name, n)
    mark = stamp(run, step)
    todo, foreign, n_total = [], [], 0
    for u in units(run, step)[0]:
        n_total += 1
        state, _ = unit_state(run, step, u, mark)
        if state == "foreign":
            foreign.append(str(u.path.relative_to(run.run_dir)))
        elif state == "corrupt":
            log.warning(
                "%s: %s is unreadable; making it again", step.name, u.path.relative_to(run.run_dir)
            )
        if state != "done":
            todo.append(u)
    run.refuse_foreign(f"{step.name} file", foreign, "its run, session or step settings differ")
    _check_needs(run, step, todo)
    if todo:
        step.prepare(run, todo)
    failed: list[str] = []
    made: list[Unit] = []
    counts: dict[str, int] = {}
    for u in run.bar(todo, step.name):
        payload = _make(step, run, u, failed)
        if payload is None:
            continue
        write_json_atomic(
            u.path,
            {
                **payload,
                "provenance": run.folder.provenance(u.session, unit_mark(run, step, u, mark)),
            },
        )
        run.folder.error_path(u.path).unlink(missing_ok=True)
        made.append(u)
        res = step.result(payload)
        if res is not None:
            label = (
                res.status
                if res.status == "error"
                else str(res.value if isinstance(res.value, str) else "ok")
            )
            counts[label] = counts.get(label, 0) + 1
    step.finish(run, made)
    log.info(
        "%s: %d new of %d%s (%.1f s)",
        step.name,
        len(made),
        n_total,
        f" {counts}" if counts else "",
        time.perf_counter() - t0,
    )
    if failed:
        raise StepFailures(
            f"{step.name}: {len(failed)} unit(s) failed (e.g. {failed[0]}; reasons in "
            f"{out.relative_to(run.run_dir)}/*.error.json); relaunch the same command to retry them"
        )


def _make(step: CaseStep, run: Run, u: Unit, failed: list[str]) -> dict[str, Any] | None:
    """One unit, tried 1 + step.retries times; the last failure is recorded next to its file."""
    for attempt in range(step.retries + 1):
        try:
            return step.make(run, u)
        except FdevalError:
            raise
        except Exception as e:  # an infrastructure failure of this unit: recorded, never a result
            first = (str(e).strip().splitlines() or [""])[0]
            if attempt < step.retries:
                log.warning(
                    "%s: %s: %s: %s; trying again (%d/%d)",
                    step.name,
                    u.path.name,
                    type(e).__name__,
                    first,
                    attempt + 1,
                    step.retries,
                )
                continue
            failed.append(u.path.name)
            write_json_atomic(
                run.folder.error_path(u.path),
                {
                    "case_id": u.case_id,
                    "key": u.key,
                    "step": step.name,
                    "error": f"{type(e).__name__}: {e}",
                    "traceback": "".join(traceback.format_exception(e))[-4000:],
                    "provenance": run.folder.provenance(u.session),
                },
            )
            log.error("%s: %s failed: %s: %s", step.name, u.path.name, type(e).__name__, first)
    return None


def _check_needs(run: Run, step: CaseStep, todo: list[Unit]) -> None:
    """Every upstream case step's files for the cases to do must be done."""
    if not todo:
        return
    for up in run.steps_named(step.needs):
        if not isinstance(up, CaseStep):
            continue
        mark = stamp(run, up)
        for u in todo:
            for k in up.keys(u.case):
                p = run.step_dir(up) / up.filename(u.case_id, k)
                if unit_state(run, up, Unit(u.case, u.session, k, p), mark)[0] != "done":
                    raise FdevalError(
                        f"{step.name}: no current {up.name} file for case {u.case_id} "
                        f"({p.relative_to(run.run_dir)}); run stage={up.stage} first"
                    )


def read_outputs(
    run: Run, step_name: str
) -> tuple[list[tuple[Unit, dict[str, Any]]], dict[str, list[str]]]:
    """The done files of a case step over the usable sessions (an aggregate's input), and the
    skipped cases by state. A missing, stale or foreign file is an error naming the step to run."""
    (step,) = run.steps_named((step_name,))
    mark = stamp(run, step)
    us, skipped = units(run, step)
    got, missing = [], []
    for u in us:
        state, d = unit_state(run, step, u, mark)
        if state in ("done", "error"):
            got.append((u, d))
        else:
            missing.append(u.path.name)
    if missing:
        raise FdevalError(
            f"{step_name}: {len(missing)} file(s) missing or not current, e.g. {missing[0]}; "
            f"run stage={step.stage} first"
        )
    return got, skipped


def results(run: Run, step_name: str) -> list[Result]:
    """The result records of a case step's done files (errors included, marked as such)."""
    (step,) = run.steps_named((step_name,))
    return [r for _, d in read_outputs(run, step_name)[0] if (r := step.result(d)) is not None]


def count_units(run: Run, step: CaseStep, sessions: dict[str, Any]) -> dict[str, int]:
    """{done, error, failed, todo} over the cases with a usable session (for stage=status)."""
    mark = stamp(run, step)
    c = {"done": 0, "error": 0, "failed": 0, "todo": 0}
    out = run.step_dir(step)
    for case in run.cases:
        s = sessions.get(case.case_id)
        if s is None or s.state != "done":
            continue
        for k in step.keys(case):
            p = out / step.filename(case.case_id, k)
            state = unit_state(run, step, Unit(case, s, k, p), mark)[0]
            if state in ("done", "error"):
                c[state] += 1
            elif run.folder.error_path(p).exists():
                c["failed"] += 1
            else:
                c["todo"] += 1
    return c
