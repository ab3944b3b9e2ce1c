"""TACT: intent-conditioned scoring of turn-taking timing in full-duplex dialogue (see docs/tact.md).

Public API for scoring onsets from any system:

* `score_onsets(onsets_s, posteriors)` -> per-episode timing scores s_T in [0, 1]
  (onsets relative to the decision point, NaN = no response; posteriors (n, 6) over `INTENTS`);
* `reference_cdf(intent, grid_s)` -> a reference law's CDF on a grid and its no-response mass.

Whole-system scoring (`score_episodes`), posteriors (`fuse_posterior`, `fit_temperature`) and the
analyses (`profile_swap_jsd`, `spearman_ci`, `slice_table`, `human_topline`) are re-exported too.
"""

from fdeval.metrics.bootstrap import Interval, bca_interval, bootstrap_indices, bootstrap_sums

from .analysis import (
    SliceRow,
    human_topline,
    jsd2,
    onset_histogram,
    profile_swap_jsd,
    slice_gaps,
    slice_table,
    spearman_ci,
)
from .completion import CompletionEstimator, va_history_features
from .composite import (
    CATEGORY_WEIGHTS,
    EpisodeScores,
    TactResult,
    episode_scores,
    median_runs,
    score_episodes,
)
from .laws import (
    INTENTS,
    NO_RESPONSE_MASS,
    PAPER_INTENT_PRIOR,
    T_A_S,
    T_H_S,
    ReferenceCDF,
    ReferenceLaw,
    law_table,
    reference_cdf,
    reference_law,
    reference_laws,
)
from .posterior import (
    empirical_posterior,
    fit_judge_weight,
    fit_temperature,
    fuse_posterior,
    held_out_log_likelihood,
    label_counts,
)
from .scoring import (
    CATEGORIES,
    DurationReference,
    EpisodeScoreInput,
    OverlapEvent,
    length_scores,
    overlap_penalty_s,
    overlap_score,
    population_length_score,
    population_timing_score,
    score_onsets,
    single_draw_ceiling,
    timing_score_of_laws,
    twcrps_on_grid,
)

__all__ = [
    "CATEGORIES",
    "CATEGORY_WEIGHTS",
    "INTENTS",
    "NO_RESPONSE_MASS",
    "PAPER_INTENT_PRIOR",
    "T_A_S",
    "T_H_S",
    "CompletionEstimator",
    "DurationReference",
    "EpisodeScoreInput",
    "EpisodeScores",
    "Interval",
    "OverlapEvent",
    "ReferenceCDF",
    "ReferenceLaw",
    "SliceRow",
    "TactResult",
    "bca_interval",
    "bootstrap_indices",
    "bootstrap_sums",
    "empirical_posterior",
    "episode_scores",
    "fit_judge_weight",
    "fit_temperature",
    "fuse_posterior",
    "held_out_log_likelihood",
    "human_topline",
    "jsd2",
    "label_counts",
    "law_table",
    "length_scores",
    "median_runs",
    "onset_histogram",
    "overlap_penalty_s",
    "overlap_score",
    "population_length_score",
    "population_timing_score",
    "profile_swap_jsd",
    "reference_cdf",
    "reference_law",
    "reference_laws",
    "score_episodes",
    "score_onsets",
    "single_draw_ceiling",
    "slice_gaps",
    "slice_table",
    "spearman_ci",
    "timing_score_of_laws",
    "twcrps_on_grid",
    "va_history_features",
]
