"""Helpers for the ASR tests: placing speech clips on a silent session timeline."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

SR = 16000


@dataclass
class Session:
    path: str
    duration_s: float
    placed: dict[str, list[tuple[float, float]]]  # speaker -> where speech was put (start_s, end_s)


def place(
    total_s: float, clips: list[tuple[float, np.ndarray]]
) -> tuple[np.ndarray, list[tuple[float, float]]]:
    x = np.zeros(int(total_s * SR), dtype=np.float32)
    spans = []
    for at_s, clip in clips:
        a = int(at_s * SR)
        x[a : a + len(clip)] = clip
        spans.append((a / SR, (a + len(clip)) / SR))
    return x, spans
