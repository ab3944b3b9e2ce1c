"""What a benchmark provides to the engine: where its cases come from and how to make them.

A benchmark is one module plus one YAML in `conf/benchmark/` whose `_target_` names its class.
The engine asks it to generate its data into a folder (idempotently) and to load the cases back
(validated); everything after that (run, transcribe, judge, score) is shared.
"""

from __future__ import annotations

import abc
from pathlib import Path
from typing import Any

from fdeval.types import TestCase


class Benchmark(abc.ABC):
    name: str
    version: str

    @abc.abstractmethod
    def data_id(self, seed: int) -> str:
        """Folder name for this benchmark's generated data (same inputs -> same name)."""

    @abc.abstractmethod
    def generate(self, data_dir: Path, tts: Any, seed: int, progress: bool) -> None:
        """Write cases and audio into `data_dir`; skip what already exists."""

    @abc.abstractmethod
    def load(self, data_dir: Path) -> list[TestCase]:
        """The validated cases of `data_dir`, in a stable order."""

    def orchestrator_overrides(self) -> dict[str, Any]:
        """TurnConfig fields this benchmark fixes for its sessions (e.g. a fixed tail)."""
        return {}

    def stage(self, name: str):
        """A benchmark-specific implementation of stage `name` (a function of the RunContext), or
        None to use the shared one. Benchmarks whose judging and scoring differ from Instruct-FD's
        (TACT scores timing, not instruction adherence) override their stages here."""
        return None

    def select(self, cases: list[TestCase], ids: list[str] | None) -> list[TestCase]:
        """Keep the cases named in `ids` (an unknown id is an error listing valid ones)."""
        if not ids:
            return cases
        by_id = {c.case_id: c for c in cases}
        unknown = [i for i in ids if i not in by_id]
        if unknown:
            from fdeval.errors import ConfigError

            raise ConfigError(f"benchmark.cases: unknown case id(s) {unknown}; valid: {sorted(by_id)}")
        return [by_id[i] for i in ids]
