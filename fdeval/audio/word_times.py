"""How far a synthesis's word times sit from its audio's own pauses (`pause_boundary_errors`):
the accuracy of a TTS voice's word timings, which the orchestrator streams and the timelines draw.
`python -m fdeval.bench.audio` reports it for espeak-ng and Piper; tests check it."""

from __future__ import annotations

import numpy as np
from scipy.ndimage import uniform_filter1d

from fdeval.audio.tts import Synthesis

ENVELOPE_S = 0.002  # RMS window of the loudness envelope
LOUD = 0.02  # envelope level (-34 dBFS) above which a pause is over; Piper's pause floor is ~0.01
MIN_PAUSE_S = 0.05


def pause_boundary_errors(syn: Synthesis) -> tuple[list[float], list[float]]:
    """(word-end errors, word-start errors) in seconds at every pause the audio has.

    Where a token ends in , ; : . ? ! the voice pauses: the longest stretch of the loudness
    envelope under `LOUD` between that word's start and the next word's end is the pause, and
    its edges are where the sound truly stops and restarts. The errors are the word times minus
    those edges (positive: the word time is later), so they measure how far the synthesizer's
    duration boundaries sit from the acoustic ones. A word-final stop's weak release can fall
    under the level and a word-initial stop's closure is silent, so part of what is measured is
    the acoustic edge's own uncertainty.
    """
    x, sr = syn.samples.astype(np.float64), syn.sample_rate
    quiet = np.sqrt(uniform_filter1d(x * x, max(1, int(ENVELOPE_S * sr)))) < LOUD
    ends, starts = [], []
    for w, nxt in zip(syn.words, syn.words[1:]):
        if not w.text or w.text[-1] not in ",;:.?!":
            continue
        lo, hi = int(w.start_s * sr), int(nxt.end_s * sr)
        q = np.concatenate([[False], quiet[lo:hi], [False]]).astype(np.int8)
        edges = np.flatnonzero(np.diff(q))  # run starts at even, ends at odd positions
        if edges.size < 2:
            continue
        runs = edges.reshape(-1, 2)
        a, b = runs[np.argmax(runs[:, 1] - runs[:, 0])]
        if (b - a) / sr < MIN_PAUSE_S:
            continue
        ends.append(w.end_s - (lo + a) / sr)
        starts.append(nxt.start_s - (lo + b) / sr)
    return ends, starts
