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
# # TACT composites
#
# TACT scores when a system starts speaking and whether it should, per decision point, against
# human reference laws conditioned on the intent posterior (docs/tact.md). Per episode there are
# three component scores: timing `s_T`, length `s_L`, overlap `s_O`. A category score weights the
# category's mean components (`CATEGORY_WEIGHTS`; a component undefined for the whole category
# drops out and the rest are renormalised); the composite S is the unweighted mean of the four
# category scores. The score step writes `scores/tact_composite.csv` (S, categories, population
# S_T and S_L, for the system and the human topline), `scores/tact_episodes.csv` and
# `scores/tact_slices.csv`.
#
# Set `FDEVAL_RUN_TACT` to a TACT run folder; the default is the newest
# `outputs/tact/reference/default-*`.

# %%
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from _runs import run_dir

from fdeval.benchmarks.tact import CATEGORIES, CATEGORY_WEIGHTS, INTENTS
from fdeval.engine.run import step_dir

RUN = run_dir("tact", "FDEVAL_RUN_TACT")
SCORES = step_dir(RUN, "score")  # scores/<key>/ of the run's last launch
comp = pd.read_csv(SCORES / "tact_composite.csv")
episodes = pd.read_csv(SCORES / "tact_episodes.csv")
slices = pd.read_csv(SCORES / "tact_slices.csv")
first = comp.iloc[0]
print(
    f"{RUN.name}: data {first.data_id}, model {first.model_id}, posterior {first.posterior_source}, "
    f"{first.repeats} repeat(s) per episode (median kept), {len(episodes)} episodes, "
    f"{first.episodes_left_out} left out"
)

# %% [markdown]
# ## The composite table

# %%
comp[
    [
        "system",
        "score",
        "estimate",
        "ci_low",
        "ci_high",
        "n_episodes",
        "timing",
        "length",
        "overlap",
    ]
].round(3)

# %% [markdown]
# ## The composite, recomputed from its parts
# Each category's score from its mean components and `CATEGORY_WEIGHTS`, and S as the mean of the
# four: both must match the table.


# %%
def category_score(row: pd.Series) -> float:
    parts = np.array([row.timing, row.length, row.overlap], dtype=float)
    w = np.array(CATEGORY_WEIGHTS[row.score], dtype=float)
    keep = ~np.isnan(parts) & (w > 0)
    return float((w[keep] * parts[keep]).sum() / w[keep].sum())


check = []
for system, rows in comp.groupby("system", sort=False):
    cats = rows[rows.score.isin(CATEGORIES)]
    for _, row in cats.iterrows():
        check.append(
            {
                "system": system,
                "score": row.score,
                "table": row.estimate,
                "recomputed": category_score(row),
            }
        )
    check.append(
        {
            "system": system,
            "score": "S",
            "table": rows[rows.score == "S"].estimate.item(),
            "recomputed": cats.estimate.mean(),
        }
    )
check = pd.DataFrame(check)
assert (check.table - check.recomputed).abs().max() < 1e-5, check
check.round(4)

# %% [markdown]
# ## Category scores, system against the human topline

# %%
fig, axes = plt.subplots(1, 2, figsize=(12, 3.8))
cat = comp[comp.score.isin(["S", *CATEGORIES])]
systems = list(dict.fromkeys(cat.system))
labels = ["S", *CATEGORIES]
for k, system in enumerate(systems):
    rows = cat[cat.system == system].set_index("score").reindex(labels)
    x = np.arange(len(labels)) + (k - (len(systems) - 1) / 2) * 0.38
    axes[0].bar(x, rows.estimate, width=0.38, label=system)
    axes[0].errorbar(
        x,
        rows.estimate,
        yerr=[rows.estimate - rows.ci_low, rows.ci_high - rows.estimate],
        fmt="none",
        ecolor="black",
        capsize=3,
        linewidth=1,
    )
axes[0].set_xticks(range(len(labels)), [lab.replace("_", "\n") for lab in labels], fontsize=8)
axes[0].set_ylim(0, 1.2)
axes[0].set_ylabel("score (BCa interval)")
axes[0].legend(fontsize=8, ncol=2, loc="upper left")
axes[0].set_title("composite S and category scores")
for category in CATEGORIES:
    e = episodes[episodes.category == category]
    axes[1].scatter(e.onset_s, e.composite, s=18, label=category)
axes[1].axvline(0, color="0.5", linewidth=0.8)
axes[1].set_xlabel("response onset after the decision point (s; NaN = no response, not shown)")
axes[1].set_ylabel("episode composite")
axes[1].legend(fontsize=7)
axes[1].set_title("per episode (kept repeat)")
fig.tight_layout()
plt.show()

# %% [markdown]
# ## Onsets by posterior mode
# How the system's onsets spread for each intent the annotators' posterior favours; a response
# later than T_h = 5 s counts as none.

# %%
episodes["responded"] = episodes.onset_s.notna()
(
    episodes.groupby("posterior_mode")
    .agg(
        episodes=("episode_id", "size"),
        responded=("responded", "mean"),
        onset_median_s=("onset_s", "median"),
        s_T=("s_T", "mean"),
        composite=("composite", "mean"),
    )
    .reindex([z for z in INTENTS if z in set(episodes.posterior_mode)])
    .round(3)
)

# %% [markdown]
# ## Slices
# S per slice value with its BCa interval (speaker gender, age band, L1 region, SNR, rate).

# %%
slices.set_index(["slice", "value"])[["n_episodes", "estimate", "ci_low", "ci_high"]].round(3)
