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
# # Reading a run folder
#
# A run folder is `<out_root>/<benchmark>/<model>/<run>/`: `run.json` (the command's config and
# the identity its hash is made from), `sessions/<case>.wav` (stereo: ch0 user, ch1 model) with
# `sessions/<case>.h5` (the session log, docs/recording.md), each step's files in the folder of
# its settings (`verdicts/<judge>-<key>/`, ...; run.json's `steps` names the last launch's) and
# `scores/<key>/`.
# `fdeval.report.runview.open_run` reads it through the engine's own objects, for any benchmark:
# every case with its session state and each case step's current results.
#
# Set `FDEVAL_RUN` to a run folder (any benchmark); the default is the newest
# `outputs/instructfd/reference/default-*`.

# %%
import json
import os
from collections import Counter

import h5py
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import soundfile as sf
from _runs import run_dir

from fdeval.report.runview import open_run

RUN = run_dir(os.environ.get("FDEVAL_RUN_BENCHMARK", "instructfd"), "FDEVAL_RUN")
view = open_run(RUN)
print(
    f"{view.benchmark} / {view.model} ({view.model_id}), run {view.run_id}: {len(view.sessions)} cases"
)
print("session states:", dict(Counter(s.state for s in view.sessions)))
print("steps with per-case results:", ", ".join(view.result_steps))
print("read from:", view.steps)  # each step's folder: which judge's, which ASR's results these are

# %% [markdown]
# ## One row per case
# Each step's results are `fdeval.engine.steps.Result`s: `value` is what the metrics aggregate
# (an Instruct-FD verdict, a TACT onset, an EchoChain rubric outcome), `status` is `error` when the
# judge or the infrastructure failed (never a model failure).

# %%
rows = []
for s in view.sessions:
    row = {"case": s.case_id, "scenario": s.case.scenario, "state": s.state, "reason": s.reason}
    for step, results in s.results.items():
        row[step] = "; ".join(
            f"{r.key + '=' if r.key else ''}{r.value}{' (error)' if r.status == 'error' else ''}"
            for r in results
        )
    rows.append(row)
cases = pd.DataFrame(rows)
cases

# %% [markdown]
# ## One session: the log and both channels
# The first usable session with a barge-in (else the first usable one). Its HDF5 log holds the
# session's attributes, the user turns (scheduled and actual barge-in times), the events and the
# speech segments Silero VAD found on the model channel.

# %%
usable = [s for s in view.sessions if s.state == "usable"]
session = next(
    (s for s in usable if any(t.turn_type == "barge-in" for t in s.case.turns)), usable[0]
)
with h5py.File(session.log, "r") as h5:
    attrs = {k: (v.decode() if isinstance(v, bytes) else v) for k, v in h5.attrs.items()}
    turns = pd.DataFrame({c: h5["turns"][c][()] for c in h5["turns"].dtype.names})
    vad = np.stack([h5["vad_segments"]["start_s"][()], h5["vad_segments"]["end_s"][()]], axis=1)
for c in turns.columns:
    if turns[c].dtype == object:
        turns[c] = turns[c].map(lambda b: b.decode() if isinstance(b, bytes) else b)
print(session.case_id, {k: attrs[k] for k in ("duration_s", "end_reason", "clock", "valid")})
print("turn settings:", json.loads(attrs["turn_config"]))
turns[
    [
        "index",
        "label",
        "turn_type",
        "scheduled_s",
        "actual_s",
        "error_s",
        "end_s",
        "delay_s",
        "wait_reason",
    ]
]

# %%
audio, rate = sf.read(session.wav, always_2d=True)
t = np.arange(len(audio)) / rate
fig, axes = plt.subplots(2, 1, figsize=(11, 4), sharex=True)
for ch, (ax, who) in enumerate(zip(axes, ("user (ch0)", "model (ch1)"))):
    ax.plot(t[::8], audio[::8, ch], linewidth=0.4, color="tab:blue" if ch == 0 else "tab:orange")
    ax.set_ylabel(who)
for start, end in vad:
    axes[1].axvspan(start, end, color="tab:orange", alpha=0.15)
for _, turn in turns.iterrows():
    axes[0].axvline(turn["actual_s"], color="black", linewidth=0.8)
    if turn["turn_type"] == "barge-in":
        axes[0].axvline(turn["scheduled_s"], color="red", linestyle="--", linewidth=0.8)
axes[1].set_xlabel("session time (s)")
axes[0].set_title(
    f"{session.case_id}: turn starts (black), scheduled barge-ins (red), model VAD (shaded)"
)
fig.tight_layout()
plt.show()

# %% [markdown]
# ## A step's explanation
# The first result of the session's last step with results says why it has that value.

# %%
step, results = list(session.results.items())[-1]
print(f"{step}: {results[0].value}\n")
print(results[0].explanation[:1500])
