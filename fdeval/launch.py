"""Entry point: `python -m fdeval.launch [group=option ...] [key=value ...] [-m]`.

A Hydra app. The command line is checked first, so an unknown key or group option fails at once
with a one-line message that lists the valid ones; then Hydra composes the config, makes the
run folder (deterministic: relaunching the same command resumes it) and the stages run there.
User errors print one line and exit 2, without a traceback.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

from omegaconf import DictConfig, OmegaConf

CONF_DIR = Path(__file__).resolve().parent / "conf"


# Overrides that do not change what a run computes: they never name its folder.
_UNTAGGED_KEYS = {"model", "benchmark", "stage", "launcher", "run_tag", "out_root", "progress",
                  "judge.base_url", "judge.cache_dir", "report"}
# launcher settings and report settings (tables, intervals, labels) never change the recordings
_UNTAGGED_PREFIXES = ("launcher.", "hydra.", "report.")


def _tag(override_dirname: str) -> str:
    """Run folder name from the command-line overrides: empty -> 'default'.

    Group choices of model/benchmark are already in the path, and launcher settings, stage and
    output options don't change results, so a run submitted to Slurm and the same run made
    locally (or relaunched with other launcher flags) share one folder and resume each other.
    """
    items = re.split(r",(?=[+~]?[\w.]+=)", override_dirname) if override_dirname else []
    kept = []
    for item in items:
        key = item.split("=", 1)[0].lstrip("+~")
        if key in _UNTAGGED_KEYS or key.startswith(_UNTAGGED_PREFIXES):
            continue
        kept.append(item)
    if not kept:
        return "default"
    return re.sub(r"[^A-Za-z0-9._=,+-]", "_", ",".join(kept))[:200]


if not OmegaConf.has_resolver("fdeval_tag"):
    OmegaConf.register_new_resolver("fdeval_tag", _tag)


def _die(msg: str) -> None:
    print(f"fdeval: error: {msg}", file=sys.stderr)
    sys.exit(2)


def _groups() -> dict[str, list[str]]:
    return {
        d.name: sorted(p.stem for p in d.glob("*.yaml"))
        for d in sorted(CONF_DIR.iterdir())
        if d.is_dir()
    }


def check_overrides(args: list[str]) -> None:
    """Compose once with the first value of every sweep; turn Hydra's failure into one line."""
    from hydra import compose, initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra
    from hydra.core.override_parser.overrides_parser import OverridesParser

    overrides = [a for a in args if not a.startswith("-") and "=" in a and not a.lstrip("+~").startswith("hydra")]
    if not overrides:
        return
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
    groups = _groups()
    for o in parsed:
        key = o.key_or_group
        if key in groups and not o.is_delete():
            values = [str(v) for v in (o.sweep_string_iterator() if o.is_sweep_override() else [o.value()])]
            for v in values:
                if v not in groups[key]:
                    _die(f"{key}={v}: unknown option for group '{key}'; valid: {', '.join(groups[key])}")
    GlobalHydra.instance().clear()
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base=None):
        try:
            compose("config", overrides=concrete)
        except Exception as e:
            text = f"{e}\n{e.__cause__ or ''}"
            m = re.search(r"Key '([^']+)' is not in struct.*?full_key: (\S+)", text, re.S)
            if m:
                full = m.group(2)
                parent = full.rsplit(".", 1)[0] if "." in full else ""
                base = compose("config", overrides=[c for c in concrete if not c.split("=")[0].lstrip("+~").startswith(full)])
                node = OmegaConf.select(base, parent) if parent else base
                valid = sorted(node.keys()) if isinstance(node, DictConfig) else []
                where = f"under '{parent}'" if parent else "at the top level"
                _die(f"unknown key '{full}'; valid keys {where}: {', '.join(map(str, valid))}")
            _die(text.strip().splitlines()[0])
        finally:
            GlobalHydra.instance().clear()


def _app(cfg: DictConfig) -> None:
    from hydra.core.hydra_config import HydraConfig

    from fdeval.errors import FdevalError
    from fdeval.stages import run_stages

    run_dir = Path(HydraConfig.get().runtime.output_dir)
    try:
        run_stages(cfg, run_dir)
    except FdevalError as e:
        _die(str(e))
    except KeyboardInterrupt:
        print("fdeval: interrupted; relaunch the same command to resume", file=sys.stderr)
        sys.exit(130)


def main() -> None:
    import hydra

    check_overrides(sys.argv[1:])
    hydra.main(version_base=None, config_path=str(CONF_DIR), config_name="config")(_app)()


if __name__ == "__main__":
    main()
