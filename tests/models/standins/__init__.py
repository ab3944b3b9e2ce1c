"""The stand-ins of the model contract (tests/models/test_contract.py), one module per model
config, named as the config: `fdeval/conf/model/<name>.yaml` is checked against
`tests/models/standins/<name>.py`. Nothing lists them; a config without its module fails the suite
with a message that says what to add.

A stand-in module defines one of:

- `standin(tts, tmp, request)`: a context manager that builds the model from its YAML
  (`fake_servers_common.model_from_yaml`), points it at something on this machine that speaks
  its API (a local server written from the upstream protocol with a scripted model, or the model
  itself where it runs here) and yields a `contract_checks.Target`. The suite closes the model
  (twice) afterwards. `tts` is the espeak-ng fixture, `tmp` a folder of its own, `request` the
  pytest request (for other fixtures);
- `CHECKPOINT` (the fixture that builds its tiny checkpoint) and `build(tiny)`, the model on it:
  an in-process model that needs the moshi venv; the suite runs the checks there
  (contract_runner.py imports this module in that venv).

It may add `EXTRA = {"<name>:<variant>": standin}`: more stand-ins of the same adapter.
This package's `__init__` imports only the standard library, so the moshi venv can import it.
"""

from __future__ import annotations

import importlib
from pathlib import Path
from types import ModuleType

FOLDER = Path(__file__).resolve().parent
CONF = FOLDER.parents[2] / "fdeval" / "conf" / "model"
ADAPTERS = sorted(p.stem for p in CONF.glob("*.yaml"))


def missing_message(name: str) -> str:
    return (
        f"model={name} (fdeval/conf/model/{name}.yaml) has no stand-in: add tests/models/standins/{name}.py "
        "defining standin(tts, tmp, request), a context manager that yields a contract_checks.Target "
        "(tests/models/standins/__init__.py says what it holds; docs/adding-a-model.md, step 3)"
    )


def discover(names: list[str] = ADAPTERS) -> tuple[dict[str, ModuleType], list[str]]:
    """The stand-in module of each model in `names` that has one, and the names without one."""
    found = {
        n: importlib.import_module(f"{__name__}.{n}")
        for n in names
        if not n.startswith("_") and (FOLDER / f"{n}.py").is_file()
    }
    return found, [n for n in names if n not in found]
