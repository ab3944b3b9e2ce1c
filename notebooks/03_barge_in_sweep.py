# ---
# jupyter:
#   jupytext:
#     formats: py:percent
#     text_representation:
#       extension: .py
#       format_name: percent
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # The barge-in sweep: IAS vs barge-in delay
#
# One Instruct-FD run per barge-in delay (`orchestrator.barge_in_delay_s`, seconds after the
# model's speech onset at which a barge-in is injected), made for instance by
#
#     python launchers/barge_in_sweep.py --delays 0.5,1,2,3 out_root=outputs
#
# (a Hydra multirun, one run folder per delay). This notebook collects the run folders, reads the
# delay each ran with from its run.json, checks that the points differ in nothing else, and plots
# with the launcher's own `ias_table` and `plot`.
#
# Set `FDEVAL_SWEEP_RUNS` to the run folders, or folders holding them, separated by `:`; the
# default is every run in `outputs/instructfd/reference` that sets a barge-in delay.

# %%
import copy
import importlib.util
import json
import tempfile
from pathlib import Path

import pandas as pd
from _runs import REPO, identity, out_root, run_folders
from IPython.display import Image, display

spec = importlib.util.spec_from_file_location(
    "barge_in_sweep", REPO / "launchers" / "barge_in_sweep.py"
)
sweep = importlib.util.module_from_spec(spec)
spec.loader.exec_module(sweep)


def delay_of(run: Path) -> float | None:
    d = identity(run)["config"]["orchestrator"].get("barge_in_delay_s")
    return None if d is None else float(d)


def without_delay(run: Path) -> str:
    """The run's identity with the delay taken out: equal for the points of one sweep."""
    ident = copy.deepcopy(identity(run))
    ident["config"]["orchestrator"].pop("barge_in_delay_s", None)
    return json.dumps(ident, sort_keys=True)


runs = [
    r
    for r in run_folders("FDEVAL_SWEEP_RUNS", out_root() / "instructfd" / "reference")
    if delay_of(r) is not None and sweep.ias_csv(r) is not None
]
groups: dict[str, list[Path]] = {}
for r in runs:
    groups.setdefault(without_delay(r), []).append(r)
if not groups:
    raise FileNotFoundError(
        "no scored run with orchestrator.barge_in_delay_s set: run launchers/barge_in_sweep.py "
        "first, or set FDEVAL_SWEEP_RUNS"
    )
# Runs that differ in more than the delay are separate sweeps: plot the one with most points.
points = max(groups.values(), key=len)
for other in groups.values():
    if other is not points:
        print(
            f"left out (another sweep: differs in more than the delay): {[r.name for r in other]}"
        )
points.sort(key=delay_of)
print(f"{len(points)} points:", ", ".join(f"{delay_of(r)} s -> {r.name}" for r in points))

# %% [markdown]
# ## IAS per instruction at each delay

# %%
rows = [{"delay_s": delay_of(r), **sweep.ias_table(r)} for r in points]
if len({row["delay_s"] for row in rows}) != len(rows):
    raise ValueError(f"two runs of the same delay in one sweep: {[r.name for r in points]}")
table = pd.DataFrame(rows).set_index("delay_s").mul(100).round(1)
table

# %%
png = Path(tempfile.mkdtemp()) / "ias_vs_delay.png"
bench = identity(points[0])["config"]
sweep.plot(
    rows, png, f"IAS vs barge-in delay ({bench['model']['name']}, {bench['benchmark']['name']})"
)
display(Image(filename=str(png)))
