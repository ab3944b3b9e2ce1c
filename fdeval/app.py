"""What a launch does once its command line is checked and Hydra has composed the config.

`python -m fdeval.launch` (fdeval/launch.py) is the light front: it checks the overrides, composes,
prints `--cfg`/`--help` and turns errors into exit statuses with Hydra, its config schemas and
nothing else. This module is the heavy part behind it (the engine, the launchers, the plan, the
model and benchmark code they load), imported by the front only when a config is to be run: the
one import inside a function that the import walls allow for an fdeval module
(tests/test_import_walls.py, LAZY_BOUNDARY). So a typo costs the interpreter and Hydra, not the
engine's imports.
"""

from __future__ import annotations

import logging
from pathlib import Path

from hydra import compose, initialize_config_dir
from hydra.core.global_hydra import GlobalHydra
from omegaconf import DictConfig, OmegaConf

from fdeval.cluster.plan import plan
from fdeval.cluster.slurm import SlurmLauncher
from fdeval.cluster.slurm import status_lines as slurm_status_lines
from fdeval.engine.driver import Tool, groups_used, pipeline, prepare, run_stages
from fdeval.engine.identity import NOT_RESULT_PATHS, readable_tag
from fdeval.engine.launcher import Launcher, LocalLauncher
from fdeval.engine.run import Run
from fdeval.engine.status import Status
from fdeval.errors import ConfigError
from fdeval.files import WriteError, write_text_atomic
from fdeval.settings import CONF_DIR


# Overrides that never appear in the readable part of a folder name: group choices already in the
# path, and settings that do not change a result (the identity hash decides the rest).
# What does not name a run: the groups (the folder path names them), where and how it runs, and
# every setting outside the identity (fdeval.engine.identity.NOT_RESULT_PATHS: waits, parallelism).
_UNTAGGED_KEYS = {
    "model",
    "benchmark",
    "stage",
    "launcher",
    "run_tag",
    "out_root",
    "progress",
    "resume",
    "judge.cache_dir",
    "report",
    *NOT_RESULT_PATHS,
}
_UNTAGGED_PREFIXES = ("launcher.", "hydra.", "report.", "stage.")


def run(cfg: DictConfig, overrides: list[str]) -> None:
    """One point of a launch (a sweep has several): check the launcher and the groups, make the run
    folder, log into it and run the stages. Raises what the launch turns into its exit status:
    FdevalError (a user error, one line), SessionsNotScored (the work done, sessions left unscored)."""
    handler = None
    try:
        launcher = _launcher(cfg)
        launcher.check()  # e.g. Slurm time limits whose warning could come at once: before generate
        _check_groups(cfg, overrides)
        tools = _tools()
        run_dir, identity = prepare(cfg, _tag(overrides), launcher, tools)
        handler = _start_folder(run_dir, cfg, overrides)
        print(f"fdeval: run folder {run_dir}", flush=True)
        run_stages(cfg, run_dir, identity, launcher, tools, strict=True)
    finally:
        if handler is not None:
            logging.getLogger().removeHandler(handler)
            handler.close()


def run_folder(overrides: list[str]) -> Path:
    """The run folder `python -m fdeval.launch OVERRIDES` uses (for scripts that collect runs).

    Only the identity hash at the end of the name is relied on: find the folder by it."""
    GlobalHydra.instance().clear()
    try:
        with initialize_config_dir(config_dir=str(CONF_DIR), version_base=None):
            cfg = compose(
                "config", overrides=[*overrides, "stage=status"]
            )  # status: builds no model or judge
    finally:
        GlobalHydra.instance().clear()
    return prepare(cfg, _tag(overrides), tool_steps=_tools())[0]


def _tag(overrides: list[str]):
    """The folder's readable tag, made once the config paths later steps own are known (they
    change no recording, so `judge.<key>=...` names the same folder)."""
    return lambda owned: readable_tag(overrides, _UNTAGGED_KEYS, _UNTAGGED_PREFIXES, owned)


# The launchers a run may use: `launcher.name` picks one (each behind fdeval.engine.launcher.Launcher).
LAUNCHERS = {"local": LocalLauncher, "slurm": SlurmLauncher}


def _tools() -> list:
    """The steps that only look at a run: status (with the Slurm arrays' states) and plan."""
    return [Status(launcher_lines=(slurm_status_lines,)), Tool("plan", plan)]


def _launcher(cfg: DictConfig) -> Launcher:
    name = cfg.launcher.name
    if name not in LAUNCHERS:
        raise ConfigError(
            f"launcher.name: unknown launcher {name!r}; valid: {', '.join(LAUNCHERS)}"
        )
    return LAUNCHERS[name](cfg)


def _check_groups(cfg: DictConfig, overrides: list[str]) -> None:
    """A group option chosen on the command line that no step of this benchmark uses would be
    silently ignored (e.g. `judge=llm` with `benchmark=tact`): refuse it."""
    steps = pipeline(Run(cfg, Path("."), Path(".")).benchmark)
    used = groups_used(steps)
    for o in overrides:
        key = o.split("=", 1)[0].lstrip("+~")
        group = key.split(".", 1)[0]
        if group in CHECKED_GROUPS and group not in used:
            raise ConfigError(
                f"{key}: benchmark {cfg.benchmark.name} has no step that uses a {group}; "
                f"steps: {', '.join(s.name for s in steps)}"
            )


# Groups that only some benchmarks' steps use (the others are every run's).
CHECKED_GROUPS = ("judge", "asr")


def _start_folder(run_dir: Path, cfg: DictConfig, overrides: list[str]) -> logging.Handler:
    """Create the run folder, save the composed config (.hydra/) and log into fdeval.log there."""
    try:
        run_dir.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise WriteError(f"{run_dir}: cannot create the run folder: {e.strerror or e}") from None
    write_text_atomic(run_dir / ".hydra" / "config.yaml", OmegaConf.to_yaml(cfg))
    write_text_atomic(run_dir / ".hydra" / "overrides.yaml", OmegaConf.to_yaml(overrides))
    try:
        handler = logging.FileHandler(run_dir / "fdeval.log")
    except OSError as e:
        raise WriteError(f"{run_dir / 'fdeval.log'}: cannot write: {e.strerror or e}") from None
    handler.setFormatter(logging.Formatter("[%(asctime)s][%(name)s][%(levelname)s] - %(message)s"))
    logging.getLogger().addHandler(handler)
    return handler
