"""Random scoring inputs for tests and speed benchmarks of the TACT scorer.

Not the TACT episode generator: this only fabricates what scoring consumes (posteriors, onsets,
durations, overlaps), with the paper's category sizes and intent shares, so that the scorer can
be exercised at full size without data.
"""

from __future__ import annotations

import numpy as np

from .laws import INTENTS, N_INTENTS, PAPER_INTENT_PRIOR, reference_laws
from .scoring import CATEGORIES, DurationReference, EpisodeScoreInput, OverlapEvent

# Data section: episodes per category (2,720 + 2,432 + 2,592 + 1,984 = 9,728).
PAPER_CATEGORY_SIZES = {
    "pause_handling": 2720,
    "backchanneling": 2432,
    "smooth_turn_taking": 2592,
    "user_interruption": 1984,
}
BUCKETS = ("short_context", "long_context")


def random_posteriors(rng: np.random.Generator, n: int, concentration: float = 6.0) -> np.ndarray:
    """(n, 6) Dirichlet posteriors peaked on a mode drawn from the paper's intent shares."""
    prior = np.array([PAPER_INTENT_PRIOR[z] for z in INTENTS])
    alpha = np.full((n, N_INTENTS), 0.3)
    alpha[np.arange(n), rng.choice(N_INTENTS, size=n, p=prior)] += concentration
    g = rng.gamma(alpha)
    return g / g.sum(axis=1, keepdims=True)


def human_durations(
    rng: np.random.Generator, n_per_cell: int = 200
) -> dict[tuple[str, str], np.ndarray]:
    """Log-normal human response durations per (intent, bucket): short for bck, longer elsewhere."""
    med = {"ans": 2.5, "ref": 4.0, "rhe": 2.0, "hold": 1.5, "bck": 1.1, "abn": 3.0}
    return {
        (z, b): rng.lognormal(
            np.log(med[z] * (1.3 if b == "long_context" else 1.0)), 0.6, n_per_cell
        )
        for z in INTENTS
        for b in BUCKETS
    }


def random_episodes(
    rng: np.random.Generator, sizes: dict[str, int] | None = None, system: str = "reference"
) -> list[EpisodeScoreInput]:
    """Episodes whose onsets are drawn from the posterior-mixed reference law ("reference"), or
    from a fast, always-answering policy ("eager"); a few competitive overlaps with random psi.
    """
    sizes = sizes or PAPER_CATEGORY_SIZES
    laws = reference_laws()
    out = []
    for cat in CATEGORIES:
        n = sizes.get(cat, 0)
        q = random_posteriors(rng, n)
        if system == "eager":
            onsets = rng.normal(0.25, 0.1, n)
        else:  # intent drawn from the posterior, then an onset from that intent's law
            z = (rng.random(n)[:, None] > np.cumsum(q, axis=1)).sum(axis=1).clip(0, N_INTENTS - 1)
            onsets = np.empty(n)
            for k in range(N_INTENTS):
                onsets[z == k] = laws[k].sample(rng, int(np.sum(z == k)))
        durations = np.where(np.isfinite(onsets), rng.lognormal(np.log(2.0), 0.7, n), np.nan)
        psi = rng.random(n)
        for i in range(n):
            onset, duration = float(onsets[i]), float(durations[i])
            overlaps = ()
            if onset < 0:
                overlaps = (
                    OverlapEvent(
                        onset,
                        min(-onset, duration),
                        float(psi[i]),
                        backchannel=cat == "backchanneling",
                    ),
                )
            out.append(
                EpisodeScoreInput(
                    f"{cat}-{i:05d}",
                    cat,
                    tuple(q[i]),
                    onset,
                    duration,
                    overlaps,
                    BUCKETS[i % 2],
                    {"gender": ("f", "m")[i % 2], "snr": ("high", "mid", "low")[i % 3]},
                )
            )
    return out


def duration_reference(rng: np.random.Generator) -> DurationReference:
    return DurationReference.from_samples(human_durations(rng))
