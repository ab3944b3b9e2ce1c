"""What a benchmark declares to the engine: its steps, their units of work, results and metrics.

A run is a list of steps. Two are shared by every benchmark (`generate`: make the cases;
`run`: record one session per case); after them come the benchmark's own evaluation steps and,
when it declares metrics, the shared `score` step that computes them. A step says

* its `name` (what `stage.steps=[...]` may name) and the `stage` it belongs to (`transcribe`,
  `judge` or `score`: `stage=judge` runs every step of that stage, whatever the benchmark);
* its `version` and `identity` (settings that make its output, e.g. a judge's id and prompt
  hash) and the config paths it `owns` (e.g. the `judge` group): these make the step's stamp,
  written into every file it makes, so a file made by other settings is never reused. Owned
  paths are left out of the run folder's identity (changing the judge records no session
  again), and a step's files live in a subfolder named by its stamp and those of the steps it
  reads (`verdicts/<label>-<hash>/`), so the results of two judges sit side by side;
* what it `needs` (earlier steps whose files for the same case must be done);
* where it runs under a cluster launcher (`placement`: `gpu_array`, `cpu_array`, `cpu_job`,
  `local`).

A `CaseStep` makes one JSON file per unit (a case, or a case and a key such as the instruction a
verdict is about) from the case's session; the executor (`fdeval.engine.executor`) gives it
skip-if-done-and-identical, atomic writes, error records, progress, sharding and bounded
retries: the step only says how to make one unit. An `Aggregate` makes whole-run tables; a
`Metric` is the aggregate a benchmark declares for its scores.
"""

from __future__ import annotations

import abc
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Mapping

from fdeval.errors import ConfigError
from fdeval.types import TestCase

if TYPE_CHECKING:  # the run context is only a type here (engine.run imports this module)
    from fdeval.engine.run import Run, SessionState

Placement = Literal["gpu_array", "cpu_array", "cpu_job", "local"]
ResultStatus = Literal["ok", "error"]
STAGES = ("generate", "run", "transcribe", "judge", "score")


def check_stage(stage: Any, step: str) -> None:
    """A step's stage must be one of STAGES (one ConfigError line listing them)."""
    if stage not in STAGES:
        raise ConfigError(
            f"step {step}: stage {stage!r} is not a stage; valid: {', '.join(STAGES)}"
        )


@dataclass(frozen=True)
class Result:
    """One result of one unit: an Instruct-FD verdict, a TACT onset, an EchoChain rubric score.

    `value` is what a metric aggregates (a number, a label, or None when there is nothing to
    measure); `explanation` says why in words; `status` is `error` when the judge or the
    infrastructure failed: an error is never a model failure, and is made again on relaunch."""

    case_id: str
    key: str
    value: float | str | None
    explanation: str = ""
    metadata: Mapping[str, Any] = field(default_factory=dict, compare=False, hash=False)
    status: ResultStatus = "ok"

    def to_dict(self) -> dict[str, Any]:
        return {
            "case_id": self.case_id,
            "key": self.key,
            "value": self.value,
            "explanation": self.explanation,
            "metadata": dict(self.metadata),
            "status": self.status,
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "Result":
        status = d.get("status", "ok")
        if status not in ("ok", "error"):
            raise ValueError(f"status: expected ok or error, got {status!r}")
        return cls(
            str(d["case_id"]),
            str(d.get("key", "")),
            d.get("value"),
            str(d.get("explanation", "")),
            dict(d.get("metadata") or {}),
            status,
        )


@dataclass(frozen=True)
class Unit:
    """One unit of work of a case step: a case (with its usable session) and a key."""

    case: TestCase
    session: "SessionState"
    key: str
    path: Path

    @property
    def case_id(self) -> str:
        return self.case.case_id


class Step(abc.ABC):
    """A step of a run (see the module doc)."""

    name: str
    stage: str
    version: str = "1"
    needs: tuple[str, ...] = ()
    placement: Placement = "cpu_array"
    # A step that only reads the run folder (status, plan) runs without the folder's lock.
    read_only: bool = False
    # Its files live in `<folder>/<key>/`, keyed by its settings (case steps and aggregates).
    keyed: bool = False
    # Config paths (a group, "judge", or a key, "benchmark.merge_gap_s") that only this step's
    # output depends on: outside the run identity, inside this step's stamp. A path that a
    # recording reads must never be owned (sessions would be reused across its values).
    owns: tuple[str, ...] = ()
    # Config groups it builds components from (`run.component("judge")`): a group chosen on the
    # command line that no selected step uses is refused; a step-only group (judge, asr) it uses
    # it must also own, so that the group's settings key its files.
    uses: tuple[str, ...] = ()

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        stage = cls.__dict__.get("stage")
        if isinstance(stage, str) and stage:  # "" is a tool's (status, plan): selected by name only
            check_stage(stage, cls.__dict__.get("name") or cls.__name__)

    def identity(self, run: "Run") -> dict[str, Any]:
        """The settings that make this step's output (beyond the run's identity)."""
        return {}

    def preflight(self, run: "Run", steps: set[str]) -> None:
        """Check, before any work, what the step will need when the steps named `steps` run (e.g.
        the judge's settings, endpoint and key when new sessions will need verdicts); a problem is
        one ConfigError line. Nothing by default."""

    def label(self, run: "Run") -> str:
        """A readable name for the subfolder of these settings (e.g. the judge's id); "" for none
        (the hash alone; an aggregate takes the label of the first step it reads that has one)."""
        return ""

    def execute(self, run: "Run") -> None:
        """Do the step's work for the run's cases (the shard of them in an array task); case
        steps leave this to the executor."""
        raise NotImplementedError(f"step {self.name}: no execute")


class CaseStep(Step):
    """One JSON file per unit, under `<run>/<folder>/<key>/`."""

    folder: str
    keyed = True
    # An infrastructure error of one unit is tried this many more times before it is recorded.
    retries: int = 1

    def keys(self, case: TestCase) -> tuple[str, ...]:
        """The units of a case ("" for one file per case)."""
        return ("",)

    def filename(self, case_id: str, key: str) -> str:
        return f"{case_id}@{key}.json" if key else f"{case_id}.json"

    def inputs(self, run: "Run", unit: Unit) -> dict[str, Any]:
        """What the unit's file is made from beyond its case's session (e.g. the id of another
        recording): kept in the file's provenance; a file made from other inputs is made again."""
        return {}

    def prepare(self, run: "Run", todo: list[Unit]) -> None:
        """Load what every unit needs (an ASR model, a judge), once, when there is work."""

    @abc.abstractmethod
    def make(self, run: "Run", unit: Unit) -> dict[str, Any]:
        """The file's content for `unit` (the executor adds provenance and writes it)."""

    def result(self, payload: Mapping[str, Any]) -> Result | None:
        """A written file's result record, for status counts and generic reports (None: the
        step's files hold no result, e.g. transcripts). Raises ValueError on a malformed file."""
        if "value" in payload and "status" in payload:
            try:
                return Result.from_dict(payload)
            except (KeyError, TypeError) as e:
                raise ValueError(f"not a result record ({e})") from None
        return None

    def check(self, payload: Mapping[str, Any], path: Path) -> None:
        """Raise ValueError when a written file does not read back as this step's output
        (the executor then makes it again)."""
        self.result(payload)

    def finish(self, run: "Run", made: list[Unit]) -> None:
        """After the units: side files (e.g. an ASR runtime record)."""


class Aggregate(Step):
    """A whole-run step (tables over every case); always recomputed from the case files, into
    `<run>/<folder>/<key>/` (the key names the inputs' settings, as a case step's)."""

    placement: Placement = "cpu_job"
    folder: str
    keyed = True

    def label(self, run: "Run") -> str:
        """The label of the first step it reads that has one (`scores/<judge>-<hash>`)."""
        return next((x for u in run.upstream(self) if (x := run.step_label(u))), "")


class Metric(abc.ABC):
    """A score a benchmark declares: computed by the shared `score` step from its steps' files.

    `tables` names the files it writes under the score step's folder (`scores/<key>/<name>.csv`);
    `compute` writes them and returns the markdown to print. `owns`: config paths only this
    metric reads (as `Step.owns`)."""

    name: str
    version: str = "1"
    needs: tuple[str, ...] = ()
    tables: tuple[str, ...] = ()
    owns: tuple[str, ...] = ()

    @abc.abstractmethod
    def compute(self, run: "Run", scores_dir: Path) -> str:
        """Write this metric's tables into `scores_dir`; return what to print (markdown)."""

    def identity(self) -> dict[str, Any]:
        return {"name": self.name, "version": self.version}
