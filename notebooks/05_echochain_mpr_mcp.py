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
# # EchoChain: MPR and MCP
#
# EchoChain asks whether a model updates its reasoning when the user barges in mid-answer
# (docs/echochain.md). Each scored conversation's evaluated exchange is graded against a rubric:
#
# - **MPR** (mean pass rate): the share of scored conversations in which every criterion passes;
# - **MCP** (mean criterion passed), *pooled*: criteria passed / criteria graded over all
#   conversations, and *per-conversation mean*: each conversation's own share, averaged;
# - the **half-duplex comparison**: the same content delivered after the complete answer, the same
#   criteria graded again; net reduction = (F_interrupted - F_control) / F_interrupted.
#
# The score step writes `scores/echochain_scores.csv`, `echochain_failures.csv`,
# `echochain_half_duplex.csv`, `echochain_results.csv` (one row per conversation) and
# `echochain.md`. Set `FDEVAL_RUN_ECHOCHAIN` to an EchoChain run folder; the default is the newest
# `outputs/echochain/reference/default-*`.

# %%
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from _runs import run_dir

from fdeval.engine.run import step_dir

RUN = run_dir("echochain", "FDEVAL_RUN_ECHOCHAIN")
SCORES = step_dir(RUN, "score")  # scores/<key>/ of the run's last launch
scores = pd.read_csv(SCORES / "echochain_scores.csv")
failures = pd.read_csv(SCORES / "echochain_failures.csv")
half = pd.read_csv(SCORES / "echochain_half_duplex.csv")
results = pd.read_csv(SCORES / "echochain_results.csv")
print(
    f"{RUN.name}: {len(results)} conversations, models {sorted(scores.model)}, "
    f"intervals {scores.ci_level[0]:.0%} BCa over {scores.boot_unit[0]}s, {scores.n_resamples[0]} resamples"
)

# %% [markdown]
# ## MPR and MCP per model

# %%
cols = [
    "model",
    "n_conversations",
    "n_scored",
    "mpr",
    "mpr_ci_low",
    "mpr_ci_high",
    "mcp_pooled",
    "mcp_pooled_ci_low",
    "mcp_pooled_ci_high",
    "mcp_mean",
    "mcp_mean_ci_low",
    "mcp_mean_ci_high",
    "n_failed",
    "share_failed_multi",
    "classifier_flag_rate",
    "n_screened_out",
    "n_ungraded",
]
scores[cols].set_index("model").round(3)

# %% [markdown]
# ## The same rates from the per-conversation rows
# A conversation is scored when it has rubric grades and screening kept it; the recomputed rates
# must match the table.

# %%
scored = results[(results.criteria > 0) & ~results.screened_out.astype(bool)]
recomputed = scored.groupby("model").apply(
    lambda g: pd.Series(
        {
            "mpr": (g.passed == g.criteria).mean(),
            "mcp_pooled": g.passed.sum() / g.criteria.sum(),
            "mcp_mean": (g.passed / g.criteria).mean(),
        }
    ),
    include_groups=False,
)
check = scores.set_index("model")[["mpr", "mcp_pooled", "mcp_mean"]].join(
    recomputed.add_suffix(" (recomputed)")
)
assert np.allclose(
    check[["mpr", "mcp_pooled", "mcp_mean"]].to_numpy(),
    check[[c + " (recomputed)" for c in ("mpr", "mcp_pooled", "mcp_mean")]].to_numpy(),
    atol=1e-5,
), check
check.round(4)

# %% [markdown]
# ## Rates with intervals, and failures interrupted against the half-duplex control

# %%
fig, axes = plt.subplots(1, 2, figsize=(11, 3.6))
metrics = ["mpr", "mcp_pooled", "mcp_mean"]
for k, (_, row) in enumerate(scores.iterrows()):
    x = np.arange(len(metrics)) + k * 0.8 / len(scores)
    est = np.array([row[m] for m in metrics])
    low = np.array([row[m + "_ci_low"] for m in metrics])
    high = np.array([row[m + "_ci_high"] for m in metrics])
    axes[0].bar(x, est, width=0.8 / len(scores), label=row.model)
    if not np.isnan(low).all():  # a model with < 2 scored conversations has no interval
        axes[0].errorbar(
            x, est, yerr=[est - low, high - est], fmt="none", ecolor="black", capsize=3, linewidth=1
        )
axes[0].set_xticks(range(len(metrics)), ["MPR", "MCP pooled", "MCP per-conversation"])
axes[0].set_ylim(0, 1.05)
axes[0].legend(fontsize=8)
axes[0].set_title("EchoChain rates (BCa interval)")
per_model = half[half.model != "all models"].set_index("model")
per_model[["failures_interrupted", "failures_control"]].plot.bar(
    ax=axes[1], rot=0, color=["tab:red", "0.6"]
)
axes[1].set_ylabel("failed criteria (paired)")
axes[1].set_title("interrupted vs half-duplex control")
fig.tight_layout()
plt.show()

# %%
half.set_index("model")[
    [
        "n_conversations",
        "n_criteria",
        "failures_interrupted",
        "failures_control",
        "fixed_by_control",
        "new_in_control",
        "net_reduction",
        "net_reduction_ci_low",
        "net_reduction_ci_high",
    ]
].round(3)

# %% [markdown]
# ## Failure types
# One taxonomy label per failed conversation (automatic or from a reviewer).

# %%
failures.set_index(["model", "taxonomy"])[
    ["n_failed", "share", "n_failures", "n_auto", "n_human"]
].round(3)
