"""The judge interface, and verdicts on disk.

A judge decides whether the model in one session followed one turn-management instruction:
``judge(case, policy, transcript) -> Verdict``. An instructed case is judged against its own
policy; an un-instructed baseline against each policy of its conversation (``judge_policies``),
which is what delta-IAS compares. A verdict is ``adhere``, ``not_adhere`` or ``error``; ``error``
means the pair could not be judged (bad input, unknown policy, judge failure) and is never
counted as a failure (see :mod:`fdeval.benchmarks.instructfd.metrics.ias`).

Every verdict names the judge that produced it: ``judge`` (id), ``judge_version`` and
``prompt_hash`` (for an LLM judge, a hash of its prompt template; for the rules judge, a hash of
its thresholds and version), so scores computed from different judge settings never mix silently.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from pathlib import Path
from typing import Any

from fdeval.errors import FileFieldError
from fdeval.files import read_json_file, write_json_atomic
from fdeval.benchmarks.instructfd.records import Verdict
from fdeval.types import TestCase, Transcript

VERDICT_LABELS = ("adhere", "not_adhere", "error")
VERDICT_KEYS = (
    "case_id",
    "policy",
    "verdict",
    "reasoning",
    "judge",
    "judge_version",
    "prompt_hash",
    "checks",
)


class VerdictError(FileFieldError):
    """A verdict file that cannot be used: unreadable, not JSON, not a verdict object, a field of
    the wrong type, or (with :func:`load_verdict`'s expectations) another case's verdict.

    Raised by :func:`load_verdict` / :func:`verdict_from_dict` only, so the judge stage can catch
    it, log the one-line message and judge that pair again.
    """


class Judge(ABC):
    """Decides instruction adherence of one session transcript."""

    id: str
    version: str
    # What this judge cannot see, printed under every table its verdicts make (one or two sentences).
    limits: str = ""

    @property
    @abstractmethod
    def prompt_hash(self) -> str:
        """A short hash of everything that shapes the judge's decisions (prompt or rule settings)."""

    @abstractmethod
    def judge(self, case: TestCase, policy: str, transcript: Transcript) -> Verdict:
        """The verdict on `transcript` (a session of `case`) under instruction `policy`."""

    def provenance(self) -> dict[str, str]:
        """The judge columns every score row carries."""
        return {"judge": self.id, "judge_version": self.version, "prompt_hash": self.prompt_hash}

    def verdict(
        self,
        case_id: str,
        policy: str,
        label: str,
        reasoning: str,
        checks: dict[str, bool] | None = None,
    ) -> Verdict:
        """A :class:`Verdict` stamped with this judge's id, version and prompt hash."""
        if label not in VERDICT_LABELS:
            raise ValueError(f"verdict label must be one of {VERDICT_LABELS}, got {label!r}")
        return Verdict(
            case_id,
            policy,
            label,
            reasoning,
            self.id,
            self.version,
            self.prompt_hash,  # type: ignore[arg-type]
            dict(checks or {}),
        )


def judge_case(judge: Judge, case: TestCase, transcript: Transcript) -> list[Verdict]:
    """`case`'s verdicts under every policy it is judged against (``case.data.judge_policies``)."""
    return [judge.judge(case, policy, transcript) for policy in case.data.judge_policies]


# --------------------------------------------------------------------------------------------
# (De)serialisation


def verdict_to_dict(v: Verdict) -> dict[str, Any]:
    """The JSON object for `v` (key order fixed)."""
    return {
        "case_id": v.case_id,
        "policy": v.policy,
        "verdict": v.verdict,
        "reasoning": v.reasoning,
        "judge": v.judge,
        "judge_version": v.judge_version,
        "prompt_hash": v.prompt_hash,
        "checks": {str(k): bool(b) for k, b in v.checks.items()},
    }


def verdict_from_dict(d: Any, path: str | Path = "<verdict>") -> Verdict:
    """Validate the JSON object `d` (read from `path`) and build its :class:`Verdict`.

    Keys beyond the verdict's own (a runner may add provenance such as ``model_id``) are ignored.
    Raises :class:`VerdictError` naming the file, case and field.
    """
    case_id = (
        d.get("case_id") if isinstance(d, dict) and isinstance(d.get("case_id"), str) else None
    )

    def fail(field: str, message: str) -> VerdictError:
        return VerdictError(str(path), case_id, field, message)

    if not isinstance(d, dict):
        raise fail("<root>", f"expected an object, got {type(d).__name__}")
    for key in VERDICT_KEYS:
        if key not in d:
            raise fail(key, "missing required field")
    for key in VERDICT_KEYS[:-1]:
        if not isinstance(d[key], str):
            raise fail(key, f"expected a string, got {d[key]!r}")
        if key != "reasoning" and not d[key].strip():
            raise fail(key, "must not be empty")
    if d["verdict"] not in VERDICT_LABELS:
        raise fail(
            "verdict",
            f"invalid value {d['verdict']!r}; expected one of {', '.join(map(repr, VERDICT_LABELS))}",
        )
    checks = d["checks"]
    if not isinstance(checks, dict):
        raise fail("checks", f"expected an object of name -> true/false, got {checks!r}")
    for name, value in checks.items():
        if not isinstance(value, bool):
            raise fail(f"checks.{name}", f"expected true or false, got {value!r}")
    return Verdict(
        d["case_id"],
        d["policy"],
        d["verdict"],
        d["reasoning"],
        d["judge"],
        d["judge_version"],
        d["prompt_hash"],
        dict(checks),
    )


def write_verdict(v: Verdict, path: str | Path) -> None:
    """Write `v` to `path` as JSON, atomically."""
    write_json_atomic(path, verdict_to_dict(v))


def load_verdict(
    path: str | Path, case_id: str | None = None, policy: str | None = None
) -> Verdict:
    """Read and validate a verdict JSON file; raises :class:`VerdictError` on anything wrong.

    `case_id` / `policy`, when given, are what the file must hold (the pair its name stands for).
    """
    v = verdict_from_dict(read_json_file(path, VerdictError), path)
    for field, want, got in (("case_id", case_id, v.case_id), ("policy", policy, v.policy)):
        if want is not None and got != want:
            raise VerdictError(
                str(path), v.case_id, field, f"{got!r} but this file is for {want!r}"
            )
    return v
