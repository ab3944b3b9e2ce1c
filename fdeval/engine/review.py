"""The read side of a benchmark: what a reader of its runs sees, and how the review app and the
reports show, label and tabulate them.

A reader (``fdeval.report.runview``: the timelines, the bundle, the review app, the notebooks)
turns a run folder into a :class:`RunView` of :class:`SessionView`\\ s through the engine's own
objects, and carries the run's `Benchmark` (``RunView.bench``, built from run.json's config as
a launch builds it). What is the benchmark's own it then asks of that object, never of a
benchmark package (an import wall: ``fdeval.review`` and ``fdeval.report`` import no benchmark):

* ``Benchmark.review()`` -> :class:`ReviewView`: the label form of a session (its fields and
  choices, :class:`LabelForm`, which also checks a saved label), the keys a session is labelled
  under, the sections its page shows beyond the generic ones (players, timeline, words, results,
  labels), whether the model is hidden from the reviewer, the judge-validation table recomputed
  from the saved labels, and the benchmark's human study when it has one;
* ``Benchmark.report()`` -> :class:`ReportView`: the ``report`` settings it reads and its
  cross-run tables (``python -m fdeval.report``).

Both have generic defaults: any benchmark (the toy in tests/engine/toy included) gets a review
page with an agree / disagree label per result key and the side-by-side report of its metrics.

Labels live in ``<run_dir>/review/labels/`` (:func:`labels_dir`): the review app writes them
(``fdeval.review.labels``), and a benchmark may read them back (EchoChain's scoring does).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any, Literal, Mapping, Protocol, Sequence

from hydra import compose, initialize_config_dir
from hydra.core.global_hydra import GlobalHydra
from hydra.errors import HydraException

from fdeval.engine.run import build
from fdeval.engine.steps import Result
from fdeval.errors import FdevalError
from fdeval.settings import CONF_DIR
from fdeval.types import TestCase

REVIEW_DIR = "review"  # <run_dir>/review/: what people add to a run
LABELS_DIR = "labels"  # <run_dir>/review/labels/: the saved labels
NO_KEY = "case"  # the label key of a result without a key

FieldType = Literal["choice", "select", "check", "seconds", "text"]
FIELD_TYPES = ("choice", "select", "check", "seconds", "text")
TEXT_MAX_CHARS = 4000  # the longest text field (a note) a label may hold


class LabelError(FdevalError):
    """A label that cannot be saved (one line naming the field)."""


def labels_dir(run_dir: str | Path) -> Path:
    """Where a run's labels are: ``<run_dir>/review/labels/``."""
    return Path(run_dir) / REVIEW_DIR / LABELS_DIR


# ---------------------------------------------------------------------------------------------
# What a reader sees of a run


@dataclass(frozen=True)
class SessionView:
    case: TestCase
    wav: Path | None  # sessions/<case>.wav (stereo: ch0 user, ch1 model)
    log: Path | None  # sessions/<case>.h5
    state: str  # usable | invalid | failed | missing
    reason: str  # why not usable ("" when usable)
    transcript: Path | None  # the transcribe-stage step's JSON for the case, when there is one
    results: dict[str, list[Result]]  # step name -> that step's Results for this case

    @property
    def case_id(self) -> str:
        return self.case.case_id

    @property
    def result_keys(self) -> list[str]:
        """The keys its results carry, in order (NO_KEY for a result without one)."""
        return list(dict.fromkeys(r.key or NO_KEY for rs in self.results.values() for r in rs))


@dataclass(frozen=True)
class RunView:
    run_dir: Path
    benchmark: str
    model: str
    model_id: str
    run_id: str
    sessions: tuple[SessionView, ...]
    steps: Mapping[str, str] = field(
        default_factory=dict
    )  # step name -> the folder its results are read from
    bench: Any = field(
        default=None, compare=False
    )  # the run's Benchmark object (its review() and report())

    def session(self, case_id: str) -> SessionView:
        for s in self.sessions:
            if s.case.case_id == case_id:
                return s
        raise FdevalError(f"{self.run_dir}: no case {case_id!r} in this run")

    @property
    def result_steps(self) -> tuple[str, ...]:
        """The steps that have results in some session, in pipeline order."""
        seen: dict[str, None] = {}
        for s in self.sessions:
            seen.update(dict.fromkeys(s.results))
        return tuple(seen)

    def review(self) -> "ReviewView":
        """The benchmark's review view (the generic one when the run has no benchmark object)."""
        return self.bench.review() if self.bench is not None else ReviewView()

    def report(self) -> "ReportView":
        return self.bench.report() if self.bench is not None else ReportView()


# ---------------------------------------------------------------------------------------------
# The label form: fields and choices, sent to the page, and the check of a saved label


def _where(path: Sequence[str]) -> str:
    return ".".join(path)


def _lookup(fields: Mapping[str, Any], path: Sequence[str]) -> tuple[bool, Any]:
    """(present, value) of `path` in the nested `fields`."""
    node: Any = fields
    for i, k in enumerate(path):
        if not isinstance(node, Mapping):
            raise LabelError(f"field {_where(path[:i])}: expected an object")
        if k not in node:
            return False, None
        node = node[k]
    return True, node


def _leaves(d: Mapping[str, Any], prefix: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    out = []
    for k, v in d.items():
        p = (*prefix, str(k))
        out += _leaves(v, p) if isinstance(v, Mapping) else [p]
    return out


@dataclass(frozen=True)
class Field:
    """One field of a label form.

    `path`: where its value sits in the saved label (``("label",)``, ``("screening", "coherent")``,
    ``("grades", "c1")``). `type`: ``choice`` one of `choices` (radio buttons; required unless
    `optional`, then left out when unset), ``select`` one of `choices` or null (a drop-down whose
    empty entry reads `empty`), ``check`` true or false, ``seconds`` a time >= 0 or null (with a
    button taking the player's time when `mark`), ``text`` a string ('' when absent; at most
    TEXT_MAX_CHARS characters). `label` is
    shown before it, `detail` after the label (in italics), `hint` beside it; fields with the same
    `group` share one line headed by the group."""

    path: tuple[str, ...]
    type: FieldType
    label: str = ""
    choices: tuple[str, ...] = ()
    optional: bool = False
    group: str = ""
    detail: str = ""
    hint: str = ""
    empty: str = ""
    mark: bool = False

    def __post_init__(self) -> None:
        if self.type not in FIELD_TYPES:
            raise ValueError(
                f"label field {_where(self.path)}: type {self.type!r}; valid: {', '.join(FIELD_TYPES)}"
            )
        if not self.path or not all(isinstance(p, str) and p for p in self.path):
            raise ValueError(f"label field {self.path!r}: a path of non-empty names")

    @property
    def name(self) -> str:
        return _where(self.path)

    def check(self, present: bool, value: Any) -> tuple[bool, Any]:
        """(keep, value): the checked value, and whether the label holds it (LabelError naming the field)."""
        name = self.name
        if self.type == "choice":
            if self.optional and value is None:
                return False, None
            if value not in self.choices:
                raise LabelError(
                    f"field {name}: expected one of {', '.join(self.choices)}, got {value!r}"
                )
        elif self.type == "select":
            if value is not None and value not in self.choices:
                raise LabelError(
                    f"field {name}: expected one of {', '.join(self.choices)} or null, got {value!r}"
                )
        elif self.type == "check":
            if not isinstance(value, bool):
                raise LabelError(f"field {name}: expected true or false, got {value!r}")
        elif self.type == "seconds":
            if value is not None and (
                isinstance(value, bool)
                or not isinstance(value, (int, float))
                or not math.isfinite(value)
                or value < 0
            ):
                raise LabelError(f"field {name}: expected seconds >= 0 or null, got {value!r}")
        else:
            value = "" if not present or value is None else value
            if not isinstance(value, str):
                raise LabelError(f"field {name}: expected a string")
            if len(value) > TEXT_MAX_CHARS:
                raise LabelError(f"field {name}: {len(value)} characters; at most {TEXT_MAX_CHARS}")
        return True, value

    def to_dict(self) -> dict[str, Any]:
        return {
            "path": list(self.path),
            "name": self.name,
            "type": self.type,
            "label": self.label,
            "choices": list(self.choices),
            "optional": self.optional,
            "group": self.group,
            "detail": self.detail,
            "hint": self.hint,
            "empty": self.empty,
            "mark": self.mark,
        }


NOTE = Field(("note",), "text", "note")


@dataclass(frozen=True)
class LabelForm:
    """A session's label form: the label's `kind` (saved in every label; readers select on it),
    its fields in page order, and whether another reviewer's save of a label is its `audit`
    (the page's button then says "save as audit")."""

    kind: str
    fields: tuple[Field, ...]
    audit: bool = False

    def check(self, values: Mapping[str, Any]) -> dict[str, Any]:
        """The label's fields as saved (nested by path), checked; an entry the form does not have
        is refused (LabelError naming it)."""
        if not isinstance(values, Mapping):
            raise LabelError("field fields: expected an object")
        out: dict[str, Any] = {}
        for f in self.fields:
            keep, v = f.check(*_lookup(values, f.path))
            if keep:
                node = out
                for k in f.path[:-1]:
                    node = node.setdefault(k, {})
                node[f.path[-1]] = v
        known = {f.path for f in self.fields}
        for leaf in _leaves(values):
            if leaf not in known and not any(leaf[: len(p)] == p for p in known):
                raise LabelError(
                    f"field {_where(leaf)}: not a field of this label "
                    f"({', '.join(f.name for f in self.fields)})"
                )
        return out

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "fields": [f.to_dict() for f in self.fields],
            "audit": self.audit,
        }


@dataclass(frozen=True)
class Section:
    """A part of the session page beyond the generic ones: a title, then a text, named values
    (`values`: (name, value) pairs, shown as a list of `name: value`) and/or a table (`rows`, one
    mapping per row; `columns` their order, else the first row's keys). `marks`: (seconds on the
    session's clock, label) the page marks on the timeline, each with a button seeking there."""

    title: str
    text: str = ""
    rows: tuple[Mapping[str, Any], ...] = ()
    columns: tuple[str, ...] = ()
    values: tuple[tuple[str, Any], ...] = ()
    marks: tuple[tuple[float, str], ...] = ()

    def to_dict(self) -> dict[str, Any]:
        cols = list(self.columns or (self.rows[0].keys() if self.rows else ()))
        return {
            "title": self.title,
            "text": self.text,
            "columns": cols,
            "rows": [dict(r) for r in self.rows],
            "values": [[str(n), v] for n, v in self.values],
            "marks": [{"at_s": float(t), "label": str(label)} for t, label in self.marks],
        }


@dataclass(frozen=True)
class SavedLabel:
    """One label the review app saved in a run (``review/labels/<case>@<key>.json``)."""

    case_id: str
    key: str
    kind: str
    reviewer: str
    record: Mapping[str, Any]  # the whole saved record (the form's fields at its top level)
    path: Path


@dataclass(frozen=True)
class LabelledRun:
    """A run with the labels saved in it: what a judge-validation table is computed from."""

    view: RunView
    labels: tuple[SavedLabel, ...]


@dataclass(frozen=True)
class ValidationTable:
    """The judge against the saved labels: `rows` under `columns`; `n_labels` counted, of which
    `n_unmatched` had no result to compare with; `runs` the runs it covers."""

    title: str
    columns: tuple[str, ...]
    rows: tuple[Mapping[str, Any], ...]
    n_labels: int
    n_unmatched: int
    runs: tuple[str, ...]

    def to_dict(self) -> dict[str, Any]:
        return {
            "title": self.title,
            "columns": list(self.columns),
            "rows": [dict(r) for r in self.rows],
            "n_labels": self.n_labels,
            "n_unmatched": self.n_unmatched,
            "runs": list(self.runs),
        }


class HumanStudy(Protocol):
    """A benchmark's human study, served by the review app's study mode (fdeval/review/study.py,
    docs/human-study.md): how items are planned from cases, read back, answered and scored."""

    STEP_S: float  # default seconds between decision points
    TOLERANCE_S: float  # an answer within this of a cue counts
    StudyItem: (
        Any  # the item record (`from_dict`, `to_dict`, item_id, case_id, conversation_id, ...)
    )
    Answer: Any  # Answer(participant, item_id, actions)

    def plan_study(self, cases: Any, step_s: float) -> list[Any]: ...
    def check_answer(self, item: Any, actions: Sequence[str]) -> None: ...
    def asked_points(self, item: Any, actions: Sequence[str]) -> int: ...
    def tables(
        self, items: Any, answers: Any, alpha: float, tolerance_s: float
    ) -> dict[str, Any]: ...


# ---------------------------------------------------------------------------------------------
# The views


GENERIC_LABELS = ("agree", "disagree")


class ReviewView:
    """How the review app shows and labels a benchmark's sessions (the generic view: agree or
    disagree with each result, and a note). A benchmark returns its own from `Benchmark.review()`."""

    # The model's identity (name, id, run id and path) is hidden from the reviewer.
    blind: bool = False

    def instruction(self, case: TestCase) -> str:
        """What the list's `instruction` column and filter show for a case ('' for nothing)."""
        return ""

    def label_keys(self, run: RunView, session: SessionView) -> list[str]:
        """The keys the session is labelled under, one form each: its results' keys by default."""
        return session.result_keys or [NO_KEY]

    def label_form(self, run: RunView, session: SessionView) -> LabelForm:
        """The form of the session's labels (every key's)."""
        return LabelForm("generic", (Field(("label",), "choice", choices=GENERIC_LABELS), NOTE))

    def check_key(self, run: RunView, session: SessionView, key: str) -> None:
        """A key the session is not labelled under is refused (LabelError naming the field)."""
        keys = self.label_keys(run, session)
        if key not in keys:
            raise LabelError(
                f"field key: {key!r} is not a label key of case {session.case_id} ({', '.join(keys)})"
            )

    def check_label(self, form: LabelForm, values: Mapping[str, Any]) -> dict[str, Any]:
        """The label as saved, checked: the form's check, then the benchmark's own rules."""
        return form.check(values)

    def saving(
        self, checked: dict[str, Any], old: Mapping[str, Any] | None, reviewer: str, time: str
    ) -> tuple[dict[str, Any], str, str]:
        """What a save writes over `old` (the label there, or None): the fields, and the reviewer
        and time the label names (by default the saver, now)."""
        return checked, reviewer, time

    def disagrees(
        self, run: RunView, session: SessionView, key: str, label: Mapping[str, Any]
    ) -> bool:
        """Whether the saved `label` (the record, the form's fields at its top level) under `key`
        disagrees with the session's automatic result (the review list's "human ≠ judge" filter);
        False when there is nothing to compare. Generic: the reviewer chose `disagree`."""
        return label.get("label") == "disagree"

    def sections(self, run: RunView, session: SessionView) -> list[Section]:
        """What the session page shows beyond its generic parts."""
        return []

    def transcript_text(self, run: RunView, session: SessionView) -> str:
        """A text the page shows as the transcript when the session has no timed words."""
        return ""

    def validation(self, runs: Sequence[LabelledRun]) -> ValidationTable | None:
        """The judge's agreement with the labels saved in `runs` (None: this benchmark has none)."""
        return None

    def human_study(self) -> HumanStudy | None:
        """The benchmark's human study (None: it has none)."""
        return None


class ReportView:
    """How `python -m fdeval.report` reports a benchmark's runs (generic: every metric's tables
    side by side). A benchmark returns its own from `Benchmark.report()`."""

    def settings(self, values: Mapping[str, Any]) -> Any:
        """The ``report`` group's values as the benchmark reads them (checked: a bad one is one
        ConfigError line). The generic report reads none of them."""
        return dict(values)

    def cross_report(self, runs: list[Path], out: Path, settings: Any) -> list[Path] | None:
        """Write a report over several run folders into `out` and return its files, or None for
        the generic one (each metric's tables of every run side by side)."""
        return None


# ---------------------------------------------------------------------------------------------
# A benchmark without a run folder


@lru_cache(maxsize=None)
def benchmark_named(name: str) -> Any:
    """The benchmark `benchmark=<name>` selects, with its config's defaults, built as a launch
    builds it: for a reader that has a benchmark's cases but no run folder (a data folder)."""
    GlobalHydra.instance().clear()
    try:
        with initialize_config_dir(config_dir=str(CONF_DIR), version_base=None):
            cfg = compose("config", overrides=[f"benchmark={name}"])
    except HydraException as e:
        raise FdevalError(f"benchmark {name!r}: {str(e).splitlines()[0]}") from None
    finally:
        GlobalHydra.instance().clear()
    return build(cfg.benchmark)
