"""A read-only view of one run folder, for any benchmark: its sessions and each step's results.

The view is built from the engine's own objects, not from folder names: run.json's
`command_config` becomes a `Run` (out_root is the run folder's third parent, so a moved
`<out_root>/<benchmark>/<model>/<run>` tree still opens), `pipeline(run.benchmark)` lists the
steps, the run folder's session check says which recordings are usable, and each case step's
files are read back with the executor's own checks (`unit_state`: made from the current session
by the step's settings) from the folder of the settings run.json's config names (the last
launch's judge, ASR, ...: `RunView.steps` says which folder each step's results come from).
Nothing is written and no model is loaded.

    view = open_run("out/instructfd/reference/default-0b9d0996f28b")
    for s in view.sessions:
        print(s.case.case_id, s.state, s.reason, {k: [r.value for r in v] for k, v in s.results.items()})
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

from omegaconf import OmegaConf

from fdeval.engine.driver import pipeline
from fdeval.engine.executor import stamp, unit_state
from fdeval.engine.review import RunView, SessionView
from fdeval.engine.run import Run, RunFolder, step_description
from fdeval.engine.steps import CaseStep, Result, Unit
from fdeval.errors import FdevalError
from fdeval.types import TestCase

__all__ = [
    "RunView",
    "SessionView",
    "describe_results",
    "open_run",
    "reopen",
    "step_folder",
    "view_of",
]

log = logging.getLogger("fdeval")

# The engine's session states, as a reader sees them: a recording that cannot be read back or
# belongs to another run is as unusable as one with broken timing (the reason says which).
_STATES = {
    "done": "usable",
    "invalid": "invalid",
    "failed": "failed",
    "missing": "missing",
    "corrupt": "invalid",
    "foreign": "invalid",
}
_REASON_PREFIX = {"corrupt": "unreadable recording: ", "foreign": "another run's recording: "}


def reopen(run_dir: str | Path) -> Run:
    """The engine's `Run` of a run folder, from its run.json (FdevalError when it is not one)."""
    run_dir = Path(run_dir).expanduser().resolve()
    f = run_dir / "run.json"
    if not run_dir.is_dir():
        raise FdevalError(f"{run_dir}: not a folder")
    try:
        d = json.loads(f.read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise FdevalError(f"{f}: not a readable run.json ({e}); is this a run folder?") from None
    cfg = d.get("command_config") if isinstance(d, dict) else None
    if not isinstance(cfg, dict) or not isinstance(cfg.get("benchmark"), dict):
        raise FdevalError(f"{f}: no benchmark in its command_config; is this a run folder?")
    if len(run_dir.parents) < 3:
        raise FdevalError(f"{run_dir}: a run folder sits at <out_root>/<benchmark>/<model>/<run>")
    out_root = run_dir.parents[2]
    cfg["out_root"] = str(out_root)  # the tree may have moved since the run
    run = Run(OmegaConf.create(cfg), run_dir, out_root, identity=RunFolder.read_identity(run_dir))
    run.pipeline = pipeline(run.benchmark)
    return run


def step_folder(run: Run, step: CaseStep) -> tuple[Path | None, dict | None]:
    """Where the view reads `step`'s files, and the stamp they must carry: the folder of the
    config's settings; when those cannot be rebuilt here (e.g. a judge's client missing), the
    folder run.json recorded, read by session only (None: no folder known)."""
    try:
        return run.step_dir(step), stamp(run, step)
    except Exception as e:  # noqa: BLE001 - any failure to rebuild the settings falls back to the record
        log.debug(
            "runview: %s: settings not rebuilt (%s); reading run.json's folder by session only",
            step.name,
            e,
        )
    folders, _ = RunFolder.recorded_steps(run.run_dir)
    return (
        run.run_dir / folders[step.name] if isinstance(folders.get(step.name), str) else None
    ), None


def _step_results(
    run: Run, step: CaseStep, case: TestCase, session, where: tuple[Path | None, dict | None]
) -> tuple[list[Result], Path | None]:
    """The step's results for one usable session, and its first current file."""
    folder, mark = where
    out: list[Result] = []
    first: Path | None = None
    if folder is None:
        return out, first
    for key in step.keys(case):
        path = folder / step.filename(case.case_id, key)
        unit = Unit(case, session, key, path)
        if mark is not None:
            state, d = unit_state(run, step, unit, mark)
        else:
            state, d = run.folder.read_derived(path, session, None)
        if state not in ("done", "error") or d is None:
            continue
        first = first or path
        try:
            res = step.result(d)
        except ValueError:
            continue
        if res is not None:
            out.append(res)
    return out, first


def open_run(run_dir: str | Path) -> RunView:
    """Every case of the run with its session's state and each case step's current results."""
    return view_of(reopen(run_dir))


def view_of(run: Run) -> RunView:
    """The view of a `Run` already open (e.g. the score step's own)."""
    try:
        cases = run.all_cases
    except FdevalError as e:
        raise FdevalError(f"{run.run_dir}: its cases cannot be loaded ({e})") from None
    case_steps = [s for s in run.pipeline if isinstance(s, CaseStep)]
    where = {s.name: step_folder(run, s) for s in case_steps}
    sessions = []
    for case in cases:
        st = run.session_state(case)
        h5, wav = run.folder.session_paths(case.case_id)
        results: dict[str, list[Result]] = {}
        transcript = None
        if st.state == "done":
            for step in case_steps:
                res, path = _step_results(run, step, case, st, where[step.name])
                if res:
                    results[step.name] = res
                if transcript is None and step.stage == "transcribe" and path is not None:
                    transcript = path
        reason = (
            "" if st.state == "done" else (_REASON_PREFIX.get(st.state, "") + (st.why or st.state))
        )
        sessions.append(
            SessionView(
                case,
                wav if wav.exists() else None,
                h5 if h5.exists() else None,
                _STATES.get(st.state, "invalid"),
                reason,
                transcript,
                results,
            )
        )
    recorded = run.folder.recorded_model() or {}
    shown = {
        name: str(d.relative_to(run.run_dir)) for name, (d, _) in where.items() if d is not None
    }
    return RunView(
        run.run_dir,
        str(run.benchmark.name),
        str(run.cfg.model.name),
        str(recorded.get("model_id", "")),
        run.folder.run_id,
        tuple(sessions),
        shown,
        run.benchmark,
    )


def describe_results(view: RunView) -> str:
    """Which settings' results a view shows, for a report's header: `judge verdicts/rules-<key>
    (rules 2 c1427a5f...)` per step (the judge's id, version and prompt hash), from run.json's
    description of each folder."""
    parts = []
    for name, folder in view.steps.items():
        ident = step_description(view.run_dir, folder).get("identity") or {}
        who = " ".join(str(v) for v in ident.values() if isinstance(v, (str, int, float)))[:80]
        parts.append(f"{name} {folder}" + (f" ({who})" if who else ""))
    return "; ".join(parts)
