"""TACT's per-case records shared by its steps and its report: case ids, the scorer's input read
from a judged file, and the provenance columns of every table row."""

from __future__ import annotations

import math
from typing import Any

import fdeval

from .measure import overlap_events
from .scoring import EpisodeScoreInput

METRIC_VERSION = "tact-1"


def case_id(episode_id: str, repeat: int) -> str:
    return f"{episode_id}__r{repeat}"


def split_case_id(cid: str) -> tuple[str, int]:
    eid, _, r = cid.rpartition("__r")
    return eid, int(r)


def score_input_from_judged(d: dict) -> EpisodeScoreInput:
    """The scorer's `EpisodeScoreInput` from a judged file (episode id, not case id)."""
    nan = lambda x: math.nan if x is None else float(x)  # noqa: E731
    return EpisodeScoreInput(d["episode_id"], d["category"], tuple(d["posterior"]), nan(d["onset_s"]),
                             nan(d["duration_s"]), overlap_events(d["overlaps"], [o["psi"] for o in d["overlaps"]]),
                             d["context_bucket"], dict(d["slices"]))


def provenance(bench: Any, model_id: str, seed: int, info: dict[str, Any]) -> dict[str, Any]:
    return {"benchmark": bench.name, "benchmark_version": bench.version, "model_id": model_id,
            "seed": seed, "metric_version": METRIC_VERSION, "fdeval_version": fdeval.__version__,
            "data_id": bench.data_id(seed), **info}
