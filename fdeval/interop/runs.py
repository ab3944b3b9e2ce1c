"""The run folder an import writes into: the one `python -m fdeval.launch OVERRIDES` uses.

An import composes the launch's config from the same overrides (plus `run_tag`, default
`imported`, so it never lands in a live run's folder), generates the benchmark's data if needed
(the cases the recordings belong to), and records `model.json` as an imported model: the later
steps (`stage=transcribe,judge,score` with the same overrides) read the sessions like any run's,
and a `stage=run` on that folder refuses to overwrite them (its model id differs) unless
`resume=redo`.
"""

from __future__ import annotations

import json
import logging
import sys
from pathlib import Path
from typing import Callable

from hydra import compose, initialize_config_dir
from hydra.core.global_hydra import GlobalHydra
from omegaconf import OmegaConf

from fdeval.engine.driver import describe_steps, pipeline
from fdeval.engine.run import Run, short_hash
from fdeval.engine.shared import Generate, versions
from fdeval.errors import FdevalError
from fdeval.files import write_json_atomic
from fdeval.app import run_folder
from fdeval.launch import check_overrides
from fdeval.launch import main as launch_main
from fdeval.settings import CONF_DIR

log = logging.getLogger("fdeval")


def open_import_run(overrides: list[str], source: Path) -> Run:
    """The Run an import writes (folder created, run.json and model.json written)."""
    if not any(o.startswith("run_tag=") for o in overrides):
        overrides = [*overrides, "run_tag=imported"]
    check_overrides(overrides)  # a bad key or option: one line, exit 2, as the launch does
    GlobalHydra.instance().clear()
    try:
        with initialize_config_dir(config_dir=str(CONF_DIR), version_base=None):
            cfg = compose("config", overrides=[*overrides, "stage=status"])
    finally:
        GlobalHydra.instance().clear()
    run_dir = run_folder(overrides)  # the launch's own choice of folder (its checks included)
    run_dir.mkdir(parents=True, exist_ok=True)
    run = Run(
        cfg, run_dir, Path(cfg.out_root).expanduser().resolve()
    )  # identity: from cfg, as the launch computes it
    run.pipeline = pipeline(run.benchmark)
    Generate().execute(
        run
    )  # idempotent: the cases (and their turn audio) the recordings are matched to
    ident = {"imported": True, "model": str(cfg.model.name), "source": str(source.resolve())}
    model_id = f"imported:{short_hash(ident)}"
    recorded = run.folder.recorded_model()
    if recorded is not None and recorded["model_id"] != model_id:
        raise FdevalError(
            f"{run_dir / 'model.json'}: this folder holds model {recorded['model_id']}, not the import "
            f"{model_id} from {source}; pass another run_tag="
        )
    write_json_atomic(run_dir / "model.json", {"model_id": model_id, "identity": ident})
    run.folder.write_run_json(
        OmegaConf.to_container(cfg, resolve=True), versions(), describe_steps(run)
    )
    return run


def launch_args(overrides: list[str], stages: str = "transcribe,judge,score") -> list[str]:
    """The launch's arguments for `stages` on the import's folder."""
    tag = [] if any(o.startswith("run_tag=") for o in overrides) else ["run_tag=imported"]
    return [*overrides, *tag, f"stage.steps=[{stages}]"]


def then(run_dir: Path, overrides: list[str], stages: str | None) -> None:
    """After an import: run `stages` there with the launch itself, or print the command that does."""
    print(
        f"fdeval: imported {len(list((run_dir / 'sessions').glob('*.h5')))} session(s) into {run_dir}",
        flush=True,
    )
    if stages:
        sys.argv = [
            "fdeval.launch",
            *launch_args(overrides, stages),
        ]  # Hydra reads its overrides there
        launch_main()
    else:
        print(
            f"fdeval: next: python -m fdeval.launch {' '.join(launch_args(overrides))}", flush=True
        )


def cli(main: Callable[[], None]) -> None:
    """Run `main`; a user error is one line on stderr and exit code 2 (no traceback)."""
    try:
        main()
    except FdevalError as e:
        print(
            f"fdeval: error: {str(e).splitlines()[0] if str(e) else type(e).__name__}",
            file=sys.stderr,
        )
        sys.exit(2)


def read_json(path: Path) -> object:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as e:
        raise FdevalError(f"{path}: unreadable JSON ({type(e).__name__})") from None
