"""What a benchmark provides to the engine: its cases, its evaluation steps and its metrics.

A benchmark is one module plus one YAML in `conf/benchmark/` whose `_target_` names its class;
nothing else lists it. The engine asks it to generate its data into a folder (idempotently) and
to load the cases back (validated); it records one session per case with the benchmark's user
policy (the scripted turns unless the benchmark says otherwise), then runs the benchmark's own
`steps()` and, when it declares `metrics()`, the shared `score` step that computes them.
"""

from __future__ import annotations

import abc
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

import numpy as np

from fdeval.engine.review import ReportView, ReviewView
from fdeval.engine.steps import Metric, Step
from fdeval.errors import ConfigError
from fdeval.types import TestCase, Turn

if TYPE_CHECKING:
    from fdeval.engine.run import Run


@dataclass(frozen=True)
class PlannedRequests:
    """The language-model requests one of a benchmark's roles will make in a run (``stage=plan``):
    `at_most` before the cache (answers already cached are not sent), re-asks after an unusable
    answer not counted. `note`: how the role differs from the paper's set-up ('' when it does not)."""

    role: str
    backend: str
    model: str
    at_most: int
    note: str = ""


class Benchmark(abc.ABC):
    name: str
    version: str
    cases_dir: Path | None = None  # a user's own case folder (else the generated data folder)
    case_ids: list[str] | None = None  # the ids `benchmark.cases` names (None: every case)
    # True when `generate` speaks its cases with the run's `tts`: the data folder then carries the
    # synthesizer's settings too, so data spoken by another voice or backend is never reused.
    data_uses_tts: bool = False
    # True when its steps read a recording's model words only after the point where FDB's ASR
    # crops them (Full-Duplex-Bench): an import with only those words is then complete for it.
    cropped_words_ok: bool = False

    @abc.abstractmethod
    def data_id(self, seed: int) -> str:
        """Folder name for this benchmark's generated data (same inputs -> same name)."""

    @abc.abstractmethod
    def generate(self, data_dir: Path, tts: Any, seed: int, progress: bool) -> None:
        """Write cases and audio into `data_dir`; skip what already exists."""

    @abc.abstractmethod
    def load(self, data_dir: Path) -> list[TestCase]:
        """The validated cases of `data_dir`, in a stable order."""

    @abc.abstractmethod
    def steps(self) -> list[Step]:
        """The evaluation steps after the sessions are recorded, in order."""

    def planned_case_ids(self, seed: int) -> list[str] | None:
        """The case ids `generate` will write, when they are known without generating (None: not
        known): an unknown id in `case_ids` then fails before the run folder is made."""
        return None

    def metrics(self) -> list[Metric]:
        """The scores the shared `score` step computes from the steps' files."""
        return []

    def orchestrator_overrides(self) -> dict[str, Any]:
        """TurnConfig fields this benchmark fixes for its sessions (e.g. a fixed tail)."""
        return {}

    def user_policy(self, case: TestCase, audio: list[np.ndarray], run: "Run") -> Any:
        """Where a session's user audio comes from: None plays the case's scripted turns; a
        benchmark whose user answers the model returns its `fdeval.orchestrator.policy.UserPolicy`."""
        return None

    def planned_turns(self, case: TestCase) -> tuple[Turn, ...]:
        """The user turns `stage=plan` sizes a case's sessions by: the scripted ones, unless the
        benchmark's user writes more during the session (EchoChain), or records more sessions."""
        return case.turns

    def case_specs(
        self, data_dir: Path, seed: int, speech_s: Callable[[str], float] | None
    ) -> list[TestCase] | None:
        """The cases `load` will return once `generate` has written `data_dir`, made without any
        audio (nothing is written there), for `stage=plan`: the same ids (`benchmark.cases`
        applied), turns and timeouts, each turn's `duration_s` estimated; `speech_s(text)` is how
        long the run's TTS takes to say a text (None: that TTS cannot tell). None when the cases
        cannot be known before generating: the plan then generates them and measures."""
        return None

    def planned_requests(self, cases: list[TestCase]) -> list[PlannedRequests]:
        """The language-model requests the run of `cases` will make, per role (none by default)."""
        return []

    def review(self) -> ReviewView:
        """How the review app shows and labels this benchmark's sessions (`fdeval.engine.review`):
        the generic view labels agree / disagree per result key."""
        return ReviewView()

    def report(self) -> ReportView:
        """How `python -m fdeval.report` reports several runs: the generic view writes every
        metric's tables of every run side by side."""
        return ReportView()

    def select(self, cases: list[TestCase], ids: list[str] | None) -> list[TestCase]:
        """Keep the cases named in `ids` (an unknown id is an error listing valid ones)."""
        if not ids:
            return cases
        by_id = {c.case_id: c for c in cases}
        check_case_ids(ids, by_id)
        return [by_id[i] for i in ids]


def check_case_ids(ids: list[str], valid) -> None:
    """An id of `ids` not in `valid` is a one-line error listing the valid ones."""
    unknown = [i for i in ids if i not in valid]
    if unknown:
        raise ConfigError(f"benchmark.cases: unknown case id(s) {unknown}; valid: {sorted(valid)}")
