"""Entry point: `python -m fdeval.launch [group=option ...] [key=value ...] [-m]`.

A Hydra app. The command line is checked first, so an unknown key or group option fails at once
with a one-line message that lists the valid ones; then Hydra composes the config, and
fdeval/app.py makes the run folder (deterministic: relaunching the same command resumes it) and
runs the stages there. This module imports only Hydra and the config schemas: a typo, `--cfg`
or `--help` costs no engine import (fdeval/app.py is imported when a config is to be run).
User errors print one line and exit 2, without a traceback; a launch whose steps all finished
but left sessions invalid or failed (not scored) says how many in its last line and exits 3.
"""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

import hydra
from hydra import compose, initialize_config_dir
from hydra.core.global_hydra import GlobalHydra
from hydra.core.hydra_config import HydraConfig
from hydra.core.override_parser.overrides_parser import OverridesParser
from omegaconf import DictConfig
from omegaconf.errors import OmegaConfBaseException

from fdeval.errors import EXIT_NOT_SCORED, FdevalError, SessionsNotScored
from fdeval.settings import (
    CONF_DIR,
    describe,
)  # importing settings registers the schemas the YAML names


# Override keys that look like credentials: keys come from the environment only.
_SECRET_KEY = re.compile(r"(^|[._])(api_?key|key|token|secret|password|passwd|credentials?)$", re.I)


# Set by a point of the launch (a sweep has several) that finished with sessions it could not score.
_not_scored: list[str] = []


def _die(msg: str) -> None:
    print(f"fdeval: error: {msg}", file=sys.stderr)
    sys.exit(2)


def _groups(extra: list[Path] = ()) -> dict[str, list[str]]:
    """Every group's options: fdeval's own and those in `hydra.searchpath` folders (a benchmark,
    model or judge that lives outside fdeval: one module plus one YAML there)."""
    out: dict[str, set[str]] = {}
    for root in (CONF_DIR, *extra):
        for d in sorted(Path(root).iterdir()) if Path(root).is_dir() else ():
            if d.is_dir():
                out.setdefault(d.name, set()).update(p.stem for p in d.glob("*.yaml"))
    return {k: sorted(v) for k, v in out.items()}


def _search_dirs(parsed: list) -> list[Path]:
    """The `file://` folders of a `hydra.searchpath=[...]` override (other schemes are Hydra's)."""
    dirs = []
    for o in parsed:
        if o.key_or_group == "hydra.searchpath":
            values = o.value() if isinstance(o.value(), list) else [o.value()]
            dirs += [Path(str(v)[len("file://") :]) for v in values if str(v).startswith("file://")]
    return dirs


def check_overrides(args: list[str]) -> None:
    """Compose once with the first value of every sweep; a failure is one line naming the key.

    The schemas (fdeval/settings.py) and Hydra's struct mode raise OmegaConf errors that carry the
    key and its parent node: an unknown key lists the valid ones there, a wrong type names the type."""
    overrides = [
        a
        for a in args
        if not a.startswith("-")
        and "=" in a
        and (not a.lstrip("+~").startswith("hydra") or a.startswith("hydra.searchpath="))
    ]
    for o in overrides:
        key = o.split("=", 1)[0].lstrip("+~")
        if _SECRET_KEY.search(key):
            _die(
                f"{key}: refusing a credential on the command line (it would land in the run folder and the shell "
                "history); set it in the environment instead, e.g. ANTHROPIC_API_KEY"
            )
    try:
        parsed = OverridesParser.create().parse_overrides(overrides)
    except Exception as e:  # hydra's own grammar error is already one readable sentence
        _die(str(e).splitlines()[0])
    concrete = []
    for o in parsed:
        if o.is_sweep_override():
            first = next(iter(o.sweep_string_iterator()))
            concrete.append(f"{o.get_key_element()}={first}")
        else:
            concrete.append(o.input_line)
    groups = _groups(_search_dirs(parsed))
    for o in parsed:
        key = o.key_or_group
        if key in groups and not o.is_delete():
            values = [
                str(v)
                for v in (o.sweep_string_iterator() if o.is_sweep_override() else [o.value()])
            ]
            for v in values:
                if v not in groups[key]:
                    _die(
                        f"{key}={v}: unknown option for group '{key}'; valid: {', '.join(groups[key])}"
                    )
    GlobalHydra.instance().clear()
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base=None):
        try:
            cfg = compose("config", overrides=concrete)
        except Exception as e:
            cause: BaseException | None = e
            while cause is not None and not isinstance(cause, OmegaConfBaseException):
                cause = cause.__cause__ or cause.__context__
            _die(describe(cause) if cause is not None else str(e).strip().splitlines()[0])
        finally:
            GlobalHydra.instance().clear()
    roles = [o for o in parsed if o.key_or_group == "echochain_roles" and not o.is_delete()]
    if roles and str(cfg.benchmark.get("name")) != "echochain":
        _die(
            f"{roles[0].input_line}: a preset of EchoChain's roles; it needs benchmark=echochain "
            f"(this launch runs benchmark {cfg.benchmark.get('name')})"
        )
    _check_writable(Path(str(cfg.out_root)).expanduser())


def _check_writable(out_root: Path) -> None:
    """Hydra creates folders under out_root before fdeval runs: a folder that cannot be written
    is one line here, not a traceback there."""
    try:
        out_root.mkdir(parents=True, exist_ok=True)
        probe = out_root / f".fdeval-write-test-{os.getpid()}"
        probe.write_bytes(b"")
        probe.unlink()
    except OSError as e:
        _die(f"out_root: cannot write to {out_root}: {e.strerror or e}")


def _app(cfg: DictConfig) -> None:
    """Hydra's task function: run this point of the launch (fdeval/app.py, imported only now)."""
    import fdeval.app as app  # the lazy boundary: the engine's imports only when a config is to be run

    try:
        app.run(cfg, list(HydraConfig.get().overrides.task))
    except (
        SessionsNotScored
    ) as e:  # its work is done: a sweep's later points still run, then exit 3
        print(f"fdeval: error: {e}", file=sys.stderr)
        _not_scored.append(str(e))
    except FdevalError as e:
        _die(str(e))
    except KeyboardInterrupt:
        print("fdeval: interrupted; relaunch the same command to resume", file=sys.stderr)
        sys.exit(130)


def flags_last(argv: list[str]) -> list[str]:
    """Hydra's parser takes no override after `-m`; a user may write `-m` anywhere (`... -m seed=1,2`)."""
    flags = [a for a in argv if a in ("-m", "--multirun")]
    return [a for a in argv if a not in flags] + flags


def main() -> None:
    sys.argv[1:] = flags_last(sys.argv[1:])
    check_overrides(sys.argv[1:])
    hydra.main(version_base=None, config_path=str(CONF_DIR), config_name="config")(_app)()
    if _not_scored:
        sys.exit(EXIT_NOT_SCORED)


if __name__ == "__main__":
    main()
