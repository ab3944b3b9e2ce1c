"""Short names for runs shown side by side, made of what differs between them.

`run_names(runs)` reads each run folder's identity (run.json: the settings that can change a
recording) and names every run by the settings in which the runs differ, nothing else: the two
points of the sweep `orchestrator.barge_in_delay_s=1,3 -m` are `delay 1 s` and `delay 3 s`, two
models on one benchmark are their model names, two benchmarks their benchmark names, and a
sweep of two keys `delay 1 s, seed 2`. A setting that follows from another is not named again:
a model's own settings when the model differs, a benchmark's when the benchmark does, the data
set's id (it follows from the benchmark's settings and the seed), and the code's versions unless
nothing else differs. Runs that differ in nothing are named by their run folder (and `#2`, `#3`
when those are alike too). For the bundle's columns (`fdeval.report.bundle`) and any page that
lists runs (the review app's run column).

    run_names(["out/instructfd/reference/orchestrator.barge_in_delay_s=1-93be74def11a",
               "out/instructfd/reference/orchestrator.barge_in_delay_s=3-4a089291c8b5"])
    # ['delay 1 s', 'delay 3 s']
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Any, Iterable, Mapping

from fdeval.engine.run import RunFolder

# Settings better known by a shorter name than their key, and what their null means.
ALIASES: dict[str, tuple[str, str]] = {
    "orchestrator.barge_in_delay_s": (
        "delay",
        "per case",
    ),  # null: each barge-in keeps its case's own delay
    "benchmark.barge_in_after_s": ("barge-in after", "default"),
    "orchestrator.max_session_s": ("max session", "none"),
    "model.policy_overrides": ("policy", "default"),
}
# A key's unit suffix and how a value is written with it.
UNITS = (("_ms", "ms"), ("_s", "s"), ("_hz", "Hz"), ("_wpm", "wpm"), ("_db", "dB"))
# Identity fields that follow from others: named only when nothing else differs.
DERIVED = ("identity.",)  # the data set's id and version, the code's versions
VALUE_CHARS = 24


def _flat(node: Any, prefix: str = "") -> dict[str, Any]:
    """Leaves of a JSON-like identity by dotted path (a list is one leaf)."""
    if isinstance(node, Mapping):
        out: dict[str, Any] = {}
        for k, v in node.items():
            out.update(_flat(v, f"{prefix}.{k}" if prefix else str(k)))
        return out
    return {prefix: node}


def _identity(run: Any) -> dict[str, Any]:
    """A run's identity by setting: the leaves of run.json's `identity.config` by their config
    path (`orchestrator.barge_in_delay_s`), the rest (data set, code versions) under `identity.`."""
    run_dir = Path(getattr(run, "run_dir", run))
    ident = RunFolder.read_identity(run_dir) or {}
    flat = _flat(ident.get("config") or {})
    flat.update(_flat({k: v for k, v in ident.items() if k != "config"}, "identity"))
    return flat


def _number(v: Any) -> str:
    if isinstance(v, bool):
        return "on" if v else "off"
    if isinstance(v, float) and math.isfinite(v) and v == int(v):
        return str(int(v))
    if isinstance(v, float):
        return f"{v:g}"
    return str(v)


def describe(path: str, value: Any, missing: bool = False) -> str:
    """`name value unit` of one setting: `delay 1 s`, `seed 2`, `half duplex on`."""
    name, none = ALIASES.get(path, (None, "none"))
    key = path.rsplit(".", 1)[-1]
    unit = ""
    for suffix, u in UNITS:
        if key.endswith(suffix):
            key, unit = key[: -len(suffix)], u
            break
    name = name or key.replace("_", " ")
    if missing:
        return f"{name} unset"
    if value is None:
        return f"{name} {none}"
    if isinstance(value, (list, tuple)):
        text = ",".join(_number(v) for v in value) if len(value) <= 3 else f"{len(value)} items"
    elif isinstance(value, Mapping):
        text = json.dumps(value, sort_keys=True, default=str)
    else:
        text = _number(value)
    text = text if len(text) <= VALUE_CHARS else text[: VALUE_CHARS - 1] + "…"
    return f"{name} {text}" + (
        f" {unit}"
        if unit and isinstance(value, (int, float)) and not isinstance(value, bool)
        else ""
    )


def _differing(idents: list[dict[str, Any]]) -> list[str]:
    """The settings whose value (or presence) is not the same in every run."""
    keys = list(dict.fromkeys(k for d in idents for k in d))
    return [
        k
        for k in keys
        if len(
            {
                json.dumps(d[k], sort_keys=True, default=str) if k in d else "<absent>"
                for d in idents
            }
        )
        > 1
    ]


def _owned(diff: list[str]) -> list[str]:
    """The differing settings worth naming: a model's or benchmark's own settings are left out
    when the model or benchmark itself differs (its name says it), and derived fields unless
    nothing else differs."""
    drop: list[str] = []
    if "model.name" in diff:
        drop.append("model.")
    if "benchmark.name" in diff:
        drop += ["benchmark.", "identity."]
    kept = [
        k for k in diff if k in ("model.name", "benchmark.name") or not k.startswith(tuple(drop))
    ]
    primary = [k for k in kept if not k.startswith(DERIVED)]
    return primary or kept


def run_names(runs: Iterable[Any]) -> list[str]:
    """One short name per run (a run folder, or anything with a `run_dir`), in order, made of the
    settings the runs differ in (see the module doc); unique."""
    runs = list(runs)
    idents = [_identity(r) for r in runs]
    names: list[str] = []
    if len(runs) > 1:
        keys = _owned(_differing(idents))
        order = sorted(
            keys, key=lambda k: (k != "benchmark.name", k != "model.name")
        )  # benchmark, model, the rest
        for d in idents:
            parts = []
            for k in order:
                if k in ("benchmark.name", "model.name"):
                    parts.append(str(d.get(k, "?")))
                else:
                    parts.append(describe(k, d.get(k), missing=k not in d))
            names.append(", ".join(parts))
    if not names or not any(names):
        names = [Path(getattr(r, "run_dir", r)).name for r in runs]
    seen: dict[str, int] = {}
    out = []
    for n in names:
        seen[n] = seen.get(n, 0) + 1
        out.append(n if seen[n] == 1 else f"{n} #{seen[n]}")
    return out


def slug(name: str) -> str:
    """A file name for a run's name: `delay 1 s` -> `delay_1_s`."""
    return re.sub(r"[^A-Za-z0-9.+-]+", "_", name).strip("._") or "run"
