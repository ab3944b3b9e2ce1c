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
# # Instruct-FD: IAS and delta-IAS
#
# The score step writes `scores/ias.csv` (IAS per instruction: the share of instructed sessions
# the judge found adhering), `scores/ias_ci.csv` (with BCa intervals over cases),
# `scores/delta_ias.csv` (IAS minus the same conversations' IAS without the instruction, paired,
# with BCa intervals over pairs and McNemar tests with Holm's correction) and
# `scores/scenario_ias.csv` (per scenario). docs/metrics.md defines them.
#
# Set `FDEVAL_RUN_INSTRUCTFD` to an Instruct-FD run folder; the default is the newest
# `outputs/instructfd/reference/default-*`.

# %%
import matplotlib.pyplot as plt
import pandas as pd
from _runs import run_dir

from fdeval.engine.run import step_dir
from fdeval.report.runview import open_run

RUN = run_dir("instructfd", "FDEVAL_RUN_INSTRUCTFD")
scores = step_dir(RUN, "score")  # scores/<judge>-<key>/: the tables of the last launch's judge
ias = pd.read_csv(scores / "ias.csv")
ci = pd.read_csv(scores / "ias_ci.csv")
delta = pd.read_csv(scores / "delta_ias.csv")
print(
    f"{RUN.name}: judge {ias.judge[0]} v{ias.judge_version[0]}, model {ias.model_id[0]}, "
    f"{ias.sessions_scored[0]} sessions scored, {ias.sessions_invalid[0]} invalid, {ias.sessions_failed[0]} failed"
)

# %% [markdown]
# ## IAS with its interval and delta-IAS
# Percentages; `small_n` marks instructions with too few cases or pairs for the interval to mean
# much (the Markdown tables mark them with a dagger).

# %%
table = (
    ci[["instruction", "n", "n_error", "ias", "ias_ci_low", "ias_ci_high", "small_n"]]
    .merge(
        delta[
            [
                "instruction",
                "n_pairs",
                "baseline_ias",
                "delta_ias",
                "delta_ias_ci_low",
                "delta_ias_ci_high",
                "mcnemar_p",
                "holm_p",
                "significant",
            ]
        ],
        on="instruction",
        how="left",
    )
    .set_index("instruction")
)
pct = [
    "ias",
    "ias_ci_low",
    "ias_ci_high",
    "baseline_ias",
    "delta_ias",
    "delta_ias_ci_low",
    "delta_ias_ci_high",
]
table[pct] = (100 * table[pct]).round(1)
table

# %% [markdown]
# ## The same IAS from the per-session verdicts
# Recomputed from the judge step's results as the run reader returns them: instructed sessions
# only (`policy_name` is the instruction; `none` is the paired session without it), errors left
# out. It must match `ias.csv`; a difference means the scores are stale against the verdicts.

# %%
view = open_run(RUN)
verdicts = pd.DataFrame(
    [
        {
            "case": s.case_id,
            "instruction": r.key,
            "policy_name": s.case.data.policy_name,
            "verdict": r.value,
            "status": r.status,
        }
        for s in view.sessions
        for r in s.results.get("judge", [])
    ]
)
judged = verdicts[(verdicts.policy_name != "none") & (verdicts.status == "ok")]
recomputed = judged.groupby("instruction").verdict.apply(lambda v: (v == "adhere").mean())
recomputed["overall"] = (judged.verdict == "adhere").mean()
check = pd.DataFrame({"ias.csv": ias.set_index("instruction").ias, "from verdicts": recomputed})
check

# %%
assert ((check["ias.csv"] - check["from verdicts"]).abs() < 1e-6).all(), check

# %% [markdown]
# ## IAS with and without the instruction

# %%
per = table.drop(index="overall", errors="ignore")
fig, ax = plt.subplots(figsize=(7, 3.5))
x = range(len(per))
ax.bar([i - 0.2 for i in x], per.baseline_ias, width=0.4, label="without instruction", color="0.7")
ax.bar([i + 0.2 for i in x], per.ias, width=0.4, label="with instruction", color="tab:blue")
ax.errorbar(
    [i + 0.2 for i in x],
    per.ias,
    yerr=[per.ias - per.ias_ci_low, per.ias_ci_high - per.ias],
    fmt="none",
    ecolor="black",
    capsize=3,
    linewidth=1,
)
ax.set_xticks(list(x), per.index)
ax.set_ylabel("IAS (%)")
ax.set_ylim(0, 105)
ax.legend(fontsize=8)
ax.set_title(f"Instruct-FD IAS ({ias.model_id[0]}, judge {ias.judge[0]})")
fig.tight_layout()
plt.show()

# %% [markdown]
# ## Per scenario

# %%
scen = pd.read_csv(scores / "scenario_ias.csv")
scen.pivot_table(index="scenario", columns="instruction", values="ias").mul(100).round(1)
