"""TACT's per-case records shared by its steps and its report: case ids, the scorer's input read
from a judged file, and the provenance columns of every table row."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

import fdeval
from fdeval.types import Turn, WordTiming

from .laws import paper_laws
from .measure import overlap_events
from .scoring import EpisodeScoreInput

METRIC_VERSION = "tact-1"


@dataclass(frozen=True)
class Mark:
    """A moment inside a user turn that a timeline marks; `at_s` from the start of the turn's audio."""

    kind: str
    at_s: float


@dataclass(frozen=True)
class TactCaseData:
    """A TACT case's own record (`TestCase.data`): where the decision point falls, as seconds from
    the start of the last replay piece (the context ends there; a pause episode's last piece ends
    before it). Readers that draw a case's marks (`triggers`, one tuple per turn) show it, and the
    focal lines where a turn has no word timings (`shown_words`)."""

    decision_after_last_turn_s: float
    n_turns: int
    # per turn, the focal lines timed from the turn's audio start: what readers show as the user's
    # words (never streamed to a model; display only, so not in the case file or its digest)
    shown_words: tuple[tuple[WordTiming, ...], ...] = ()

    case_keys: ClassVar[Mapping[str, bool]] = {"decision_after_last_turn_s": True}
    turn_keys: ClassVar[Mapping[str, bool]] = {}

    @classmethod
    def read(cls, ctx: Any, d: Mapping[str, Any], turns: tuple[Turn, ...]) -> "TactCaseData":
        value = d.get("decision_after_last_turn_s")
        if (
            isinstance(value, bool)
            or not isinstance(value, (int, float))
            or not math.isfinite(value)
            or value < 0
        ):
            ctx.fail("decision_after_last_turn_s", f"expected seconds >= 0, got {value!r}")
        return cls(float(value), len(turns))

    def case_fields(self) -> dict[str, Any]:
        return {"decision_after_last_turn_s": self.decision_after_last_turn_s}

    def turn_fields(self, index: int) -> dict[str, Any]:
        return {}

    @property
    def triggers(self) -> tuple[tuple[Mark, ...], ...]:
        return tuple(
            (Mark("decision point", self.decision_after_last_turn_s),)
            if i == self.n_turns - 1
            else ()
            for i in range(self.n_turns)
        )


def case_id(episode_id: str, repeat: int) -> str:
    return f"{episode_id}__r{repeat}"


def split_case_id(cid: str) -> tuple[str, int]:
    eid, _, r = cid.rpartition("__r")
    return eid, int(r)


def score_input_from_judged(d: dict) -> EpisodeScoreInput:
    """The scorer's `EpisodeScoreInput` from a judged file (episode id, not case id)."""
    nan = lambda x: math.nan if x is None else float(x)  # noqa: E731
    return EpisodeScoreInput(
        d["episode_id"],
        d["category"],
        tuple(d["posterior"]),
        nan(d["onset_s"]),
        nan(d["duration_s"]),
        overlap_events(d["overlaps"], [o["psi"] for o in d["overlaps"]]),
        d["context_bucket"],
        dict(d["slices"]),
    )


def provenance(bench: Any, model_id: str, seed: int, info: dict[str, Any]) -> dict[str, Any]:
    return {
        "benchmark": bench.name,
        "benchmark_version": bench.version,
        "model_id": model_id,
        "seed": seed,
        "metric_version": METRIC_VERSION,
        "fdeval_version": fdeval.__version__,
        "data_id": bench.data_id(seed),
        **laws_provenance(bench),
        **info,
    }


def laws_provenance(bench: Any) -> dict[str, Any]:
    """Which reference laws scored the row: "paper" or "<law file>@<hash>", and the full SHA-256."""
    law_set = getattr(bench, "law_set", None) or paper_laws()
    return {"laws": law_set.label, "laws_sha256": law_set.sha256}
