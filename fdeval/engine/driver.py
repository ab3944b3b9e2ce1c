"""A run from its config: which steps, in which folder, under which launcher.

The pipeline of a benchmark is `generate`, `run`, the benchmark's own steps and, when it declares
metrics, `score`. `stage.steps` selects from it by stage (`transcribe`, `judge`, ...: every step
of that stage) or by step name, plus the tools that only look at a run (`status`, and the ones
the entry point adds, e.g. `plan`). `prepare` checks everything that can be checked before any
work and names the folder; `run_stages` holds the folder's lock, writes run.json, runs the local
steps and hands the rest to the launcher; `run_steps` is what one process (a local run, or one
array task on its shard) executes.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from omegaconf import DictConfig, OmegaConf

from fdeval.engine.benchmark import check_case_ids
from fdeval.engine.executor import execute_case_step
from fdeval.engine.identity import STEP_GROUPS, RunLock, identity_hash
from fdeval.engine.launcher import Launcher, LocalLauncher, phases
from fdeval.engine.run import Run, RunFolder, owned_paths
from fdeval.engine.shared import Generate, RecordSessions, Score, versions
from fdeval.engine.status import Status
from fdeval.engine.steps import STAGES, CaseStep, Step, check_stage
from fdeval.errors import ConfigError, FdevalError, SessionsNotScored
from fdeval.files import remove_stale_temps
from fdeval.settings import check_run_options, model_resources

log = logging.getLogger("fdeval")


@dataclass(frozen=True)
class Tool(Step):
    """A step that only looks at a run (status, plan): no lock, no launcher, all cases."""

    name: str
    func: Callable[[Run], Any]
    stage: str = ""
    placement: str = "local"
    read_only: bool = True

    def execute(self, run: Run) -> None:
        self.func(run)


def pipeline(benchmark: Any) -> list[Step]:
    steps = [Generate(), RecordSessions(), *benchmark.steps()]
    if metrics := benchmark.metrics():
        steps.append(Score(metrics))
    names = [s.name for s in steps]
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        raise ConfigError(f"benchmark {benchmark.name}: step name(s) {dup} declared twice")
    for s in steps:  # a step-only group a step reads but does not own would not key its files
        check_stage(s.stage, s.name)
        if bad := [g for g in s.uses if g in STEP_GROUPS and g not in s.owns]:
            raise ConfigError(
                f"benchmark {benchmark.name}: step {s.name} uses {bad} without owning it (Step.owns)"
            )
    return steps


def keyed(steps: list[Step]) -> list[Step]:
    """The steps whose files live in a folder keyed by their settings (case steps, aggregates)."""
    return [s for s in steps if s.keyed and getattr(s, "folder", None)]


def describe_steps(run: Run) -> dict[str, dict[str, Any]]:
    """run.json's record of where this launch's steps keep their files (a step whose settings
    cannot be built here is left out: it fails with its own line when it runs)."""
    out = {}
    for s in keyed(run.pipeline):
        try:
            out[s.name] = run.describe_step(s)
        except Exception as e:  # noqa: BLE001 - a record, not a check: the step itself says what is wrong
            log.debug("run.json: step %s not described (%s)", s.name, e)
    return out


def check_recorded_steps(run: Run, chosen: list[Step]) -> None:
    """An array task must write where a launch said its steps write (run.json's step folders):
    a task that sees other settings (e.g. another judge endpoint in its environment) stops with
    one line instead of filling a folder no launch named."""
    recorded, made = RunFolder.recorded_steps(run.run_dir)
    for s in keyed(chosen):
        mine = f"{s.folder}/{run.step_key(s)}"
        if s.name in recorded and mine not in made:
            raise FdevalError(
                f"{s.name}: this task's settings make {mine}, the launch recorded {recorded[s.name]} "
                "(run.json); does the task see another environment?"
            )


def default_tools() -> list[Step]:
    return [Status()]


def select(names: list[str], steps: list[Step], extra: list[Step]) -> list[Step]:
    """The steps `stage.steps` names (by stage or by name), in pipeline order."""
    valid = list(dict.fromkeys([*STAGES, *(s.name for s in steps), *(t.name for t in extra)]))
    bad = [n for n in names if n not in valid]
    if bad:
        raise ConfigError(f"stage.steps: unknown step(s) {bad}; valid: {valid}")
    chosen = [s for s in steps if s.name in names or s.stage in names]
    return chosen + [t for t in extra if t.name in names]


def run_steps(
    cfg: DictConfig,
    run_dir: Path,
    names: list[str],
    shard: tuple[int, int] | None = None,
    identity: dict[str, Any] | None = None,
    tool_steps: list[Step] | None = None,
) -> Run:
    """Run the steps `names` select in this process (locally, or as one array task on `shard`).

    The identity is the one the launch recorded in run.json (array tasks may see another
    environment), else computed from `cfg`. An array task locks its own shard."""
    if identity is None:
        identity = RunFolder.read_identity(run_dir)
    run = Run(
        cfg, run_dir, Path(cfg.out_root).expanduser().resolve(), shard=shard, identity=identity
    )
    run.pipeline = pipeline(run.benchmark)
    chosen = select(names, run.pipeline, tool_steps or default_tools())
    if shard is not None:
        check_recorded_steps(run, chosen)
    lock = (
        RunLock(run_dir, f".lock-shard-{shard[0]}-of-{shard[1]}").acquire()
        if shard is not None
        else None
    )
    if (run_dir / "sessions").is_dir() and (n := remove_stale_temps(run_dir / "sessions")):
        log.info("removed %d temp file(s) left in sessions by an interrupted run", n)
    try:
        for step in chosen:
            t0 = time.perf_counter()
            if isinstance(step, CaseStep):
                execute_case_step(run, step)
            else:
                step.execute(run)
            log.info("step %s done in %.1f s", step.name, time.perf_counter() - t0)
    finally:
        run.close()
        if lock is not None:
            lock.release()
    return run


def groups_used(steps: list[Step]) -> set[str]:
    """The config groups the steps build components from (`Step.uses`)."""
    return {g for s in steps for g in s.uses}


def prepare(
    cfg: DictConfig,
    tag: str | Callable[[tuple[str, ...]], str],
    launcher: Launcher | None = None,
    tool_steps: list[Step] | None = None,
) -> tuple[Path, dict[str, Any]]:
    """Check everything that can be checked before any work; the run folder and its identity.

    The folder is `<out_root>/<benchmark>/<model>/<tag>-<identity hash>` (`run_tag` replaces
    the tag made from the command line). A callable `tag` is given the config paths later steps
    own (`owned_paths`), which name no folder since they change no recording."""
    check_run_options(cfg)  # run options, launcher and orchestrator values (fdeval.settings)
    model_resources(cfg.model)  # what stage=plan reads of the model (no constructor sees it)
    out_root = Path(cfg.out_root).expanduser().resolve()
    run = Run(cfg, Path("."), out_root)
    bench = run.benchmark
    run.pipeline = pipeline(bench)
    chosen = select(list(cfg.stage.steps), run.pipeline, tool_steps or default_tools())
    names = {s.name for s in chosen}
    if "run" in names and (launcher is None or launcher.name == "local"):
        run.model  # a missing client package or weight file is one line now, before generate
    for step in chosen:
        step.preflight(run, names)
    check_cases(run)
    identity = run.folder.identity
    if callable(tag):
        tag = tag(owned_paths(bench))
    name = str(cfg.get("run_tag") or tag)
    if not name or "/" in name or name.startswith("."):
        raise ConfigError(f"run_tag: {name!r} cannot name a folder")
    return out_root / bench.name / str(
        cfg.model.name
    ) / f"{name}-{identity_hash(identity)}", identity


def check_cases(run: Run) -> None:
    """What can be checked of the case set before the run folder exists: a user's case folder is
    loaded now (validated, `benchmark.cases` selected); otherwise the ids `benchmark.cases` names
    are checked against those `generate` will write, where the benchmark knows them in advance
    (`Benchmark.planned_case_ids`), else when the cases are loaded after generate."""
    bench = run.benchmark
    if bench.cases_dir is not None:
        run.all_cases
    elif bench.case_ids and (planned := bench.planned_case_ids(run.seed)) is not None:
        check_case_ids(bench.case_ids, set(planned))


def run_stages(
    cfg: DictConfig,
    run_dir: Path,
    identity: dict[str, Any] | None = None,
    launcher: Launcher | None = None,
    tool_steps: list[Step] | None = None,
    strict: bool = False,
) -> Run | None:
    """Run the configured steps: local ones here, the rest through `launcher`, holding the
    folder's lock (a second launch on the same folder fails at once). `strict` (the command
    line's): once all of them ran here, invalid or failed sessions raise `SessionsNotScored`."""
    launcher = launcher or LocalLauncher(cfg)
    names = list(cfg.stage.steps)
    probe = Run(cfg, run_dir, Path(cfg.out_root).expanduser().resolve(), identity=identity)
    probe.pipeline = pipeline(probe.benchmark)
    chosen = select(names, probe.pipeline, tool_steps or default_tools())
    if all(s.read_only for s in chosen):  # looking at a run (e.g. one in progress) needs no lock
        return run_steps(cfg, run_dir, names, identity=probe.folder.identity, tool_steps=tool_steps)
    with RunLock(run_dir):
        for shard_lock in sorted(run_dir.glob(".lock-shard-*")):  # an array task still working here
            RunLock(run_dir, shard_lock.name).acquire().release()
        probe.folder.write_run_json(
            OmegaConf.to_container(cfg, resolve=True), versions(), describe_steps(probe)
        )
        ident = probe.folder.identity
        here = [
            s.name for s in chosen if s.placement == "local" or isinstance(launcher, LocalLauncher)
        ]
        last = (
            run_steps(cfg, run_dir, here, identity=ident, tool_steps=tool_steps) if here else None
        )
        rest = [s for s in chosen if s.name not in here]
        if rest:
            n_cases = len((last or run_steps(cfg, run_dir, [], identity=ident)).cases)
            launcher.launch(
                run_dir,
                phases(rest, launcher.n_shards(n_cases)),
                lambda step_names: run_steps(cfg, run_dir, step_names, identity=ident),
            )
    if (
        strict
        and last is not None
        and not rest
        and any(not isinstance(s, Generate) for s in chosen)
    ):
        check_scored(
            last
        )  # (array tasks' sessions are counted by stage=status: the launch did not wait here)
    return last


def check_scored(run: Run) -> None:
    """A launch whose steps all ran here ends with one line, and exit status 3, when sessions of
    its cases are invalid or failed: none of them is in the scores."""
    bad: dict[str, list[tuple[str, str]]] = {"invalid": [], "failed": []}
    for c in run.cases:
        s = run.session_state(c)
        if s.state in bad:
            bad[s.state].append((c.case_id, s.why))
    n = len(bad["invalid"]) + len(bad["failed"])
    if n:
        cid, why = (bad["invalid"] or bad["failed"])[0]
        raise SessionsNotScored(
            f"{n} of {len(run.cases)} session(s) not scored: {len(bad['invalid'])} invalid, "
            f"{len(bad['failed'])} failed (e.g. {cid}: {why}); stage=status lists them"
        )
