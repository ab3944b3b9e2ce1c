"""Instruction Adherence Score (IAS) and its un-instructed counterpart (Instruct-FD, Eqs. 1-3).

For instruction I:

* ``IAS(I)``: the share of instructed cases of I whose session the judge finds adherent (Eq. 1).
  Verdicts of ``error`` (the pair could not be judged) are left out of the denominator and
  counted in ``n_error``; they are never failures.
* ``IAS(none | I)``: the same share for the un-instructed baseline sessions of those cases, each
  judged against I (Eq. 2).
* ``delta-IAS(I) = IAS(I) - IAS(none | I)`` (Eq. 3): how much giving the instruction changes the
  behaviour. It is computed on the *pairs present*: an instructed case and the baseline of the
  same conversation and seed, both judged without error. ``baseline_ias`` is taken over those
  pairs, and so is the instructed rate that ``delta_ias`` subtracts it from; when every pair is
  present that rate equals ``ias``. ``n_pairs`` says how many pairs there were.

A row per instruction (in the taxonomy's order) and an ``overall`` row pooling all instructed
cases (and all pairs). Every row carries the caller's provenance columns (benchmark version,
model, judge id/version/prompt hash, seed, ...) and ``metric_version``.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Mapping

from fdeval.benchmarks.instructfd.records import NO_POLICY, POLICIES, Verdict
from fdeval.errors import FdevalError
from fdeval.files import write_text_atomic
from fdeval.metrics.csvio import columns
from fdeval.metrics.format import md_cell
from fdeval.types import TestCase

METRIC_VERSION = "1"
OVERALL = "overall"
METRIC_COLUMNS = (
    "instruction",
    "n",
    "n_pass",
    "n_error",
    "ias",
    "n_pairs",
    "baseline_ias",
    "delta_ias",
)


def _rate(passes: Iterable[bool]) -> float | None:
    xs = list(passes)
    return sum(xs) / len(xs) if xs else None


def _row(
    instruction: str, instructed: list[Verdict], pairs: list[tuple[bool, bool]]
) -> dict[str, Any]:
    judged = [v for v in instructed if v.verdict != "error"]
    ias_pairs, base = _rate(p for p, _ in pairs), _rate(b for _, b in pairs)
    return {
        "instruction": instruction,
        "n": len(instructed),
        "n_pass": sum(v.verdict == "adhere" for v in judged),
        "n_error": len(instructed) - len(judged),
        "ias": _rate(v.verdict == "adhere" for v in judged),
        "n_pairs": len(pairs),
        "baseline_ias": base,
        "delta_ias": None if base is None or ias_pairs is None else ias_pairs - base,
    }


@dataclass(frozen=True)
class Joined:
    """Verdicts checked and grouped for scoring (see :func:`join_verdicts`).

    `instructed[I]`: the instructed cases' verdicts under I, in input order. `pairs[I]`: for each
    of those whose baseline (same conversation and seed, judged against I) exists and neither
    verdict is an error, ``(instructed case id, instructed passes, baseline passes)``.
    `policies`: the instructions present, in the taxonomy's order (then any others, sorted).
    """

    instructed: dict[str, list[Verdict]]
    pairs: dict[str, list[tuple[str, bool, bool]]]
    policies: list[str]


def join_verdicts(verdicts: list[Verdict], cases: Mapping[str, TestCase]) -> Joined:
    """Check `verdicts` against `cases` and group them by instruction, with the delta-IAS pairs.

    Raises :class:`FdevalError` on inconsistent input (see :func:`ias_rows`).
    """
    seen: set[tuple[str, str]] = set()
    instructed: dict[str, list[Verdict]] = {}
    baselines: dict[tuple[str, int, str], Verdict] = {}
    for v in verdicts:
        case = cases.get(v.case_id)
        if case is None:
            raise FdevalError(
                f"score: verdict for unknown case {v.case_id!r} (policy {v.policy!r})"
            )
        if (v.case_id, v.policy) in seen:
            raise FdevalError(f"score: two verdicts for case {v.case_id!r} under {v.policy!r}")
        seen.add((v.case_id, v.policy))
        if case.data.policy_name == NO_POLICY:
            key = (case.conversation_id, case.seed, v.policy)
            if key in baselines:
                raise FdevalError(
                    f"score: baselines {baselines[key].case_id!r} and {v.case_id!r} both pair with "
                    f"conversation {case.conversation_id!r} (seed {case.seed}) under {v.policy!r}"
                )
            baselines[key] = v
        elif v.policy != case.data.policy_name:
            raise FdevalError(
                f"score: instructed case {v.case_id!r} ({case.data.policy_name}) was judged against "
                f"{v.policy!r}; instructed cases are judged only against their own instruction"
            )
        else:
            instructed.setdefault(v.policy, []).append(v)

    def pairs_of(vs: list[Verdict]) -> list[tuple[str, bool, bool]]:
        out = []
        for v in vs:
            case = cases[v.case_id]
            b = baselines.get((case.conversation_id, case.seed, v.policy))
            if v.verdict != "error" and b is not None and b.verdict != "error":
                out.append((v.case_id, v.verdict == "adhere", b.verdict == "adhere"))
        return out

    policies = [p for p in POLICIES if p in instructed or any(k[2] == p for k in baselines)]
    policies += sorted({k[2] for k in baselines} - set(POLICIES)) + sorted(
        set(instructed) - set(POLICIES)
    )
    return Joined(
        {p: instructed.get(p, []) for p in policies},
        {p: pairs_of(instructed.get(p, [])) for p in policies},
        policies,
    )


def ias_rows(
    verdicts: list[Verdict],
    cases: Mapping[str, TestCase],
    provenance: Mapping[str, Any] | None = None,
) -> list[dict[str, Any]]:
    """IAS, baseline IAS and delta-IAS per instruction, plus an ``overall`` row.

    `cases` maps case id to its :class:`TestCase` (every verdict's case must be there). An
    instructed case must be judged against its own instruction; a baseline case (policy "none")
    against any instruction, at most once per conversation, seed and instruction.
    `provenance` columns are added to every row (``metric_version`` defaults to METRIC_VERSION).
    Raises :class:`FdevalError` on inconsistent input.
    """
    prov = with_provenance(provenance, METRIC_COLUMNS)
    j = join_verdicts(verdicts, cases)
    rows = [_row(p, j.instructed[p], [(a, b) for _, a, b in j.pairs[p]]) for p in j.policies]
    every = [v for p in j.policies for v in j.instructed[p]]
    rows.append(_row(OVERALL, every, [(a, b) for p in j.policies for _, a, b in j.pairs[p]]))
    return [{**row, **prov} for row in rows]


def with_provenance(provenance: Mapping[str, Any] | None, columns: Iterable[str]) -> dict[str, Any]:
    """The provenance columns (``metric_version`` by default); ValueError if one would overwrite `columns`."""
    prov = {"metric_version": METRIC_VERSION, **(provenance or {})}
    clash = sorted(set(prov) & set(columns))
    if clash:
        raise ValueError(f"provenance columns {clash} would overwrite metric columns")
    return prov


# --------------------------------------------------------------------------------------------
# Writers


def write_markdown(
    rows: list[Mapping[str, Any]], path: str | Path, notes: Iterable[str] = ()
) -> None:
    """`rows` as a Markdown table, atomically, with `notes` (what the counts mean, the judge's limits) under it.

    Columns other than the metric columns that hold one value in every row (the provenance) are
    listed once above the table instead of repeating in each row.
    """
    cols = columns(rows)
    shared = [
        c
        for c in cols
        if c not in METRIC_COLUMNS
        and rows
        and all(c in r for r in rows)
        and len({repr(r[c]) for r in rows}) == 1
    ]
    table = [c for c in cols if c not in shared]
    lines = ["# Instruction adherence (IAS)", ""]
    lines += [f"- {c}: {md_cell(rows[0][c])}" for c in shared]
    if shared:
        lines.append("")
    lines.append("| " + " | ".join(table) + " |")
    lines.append("|" + "|".join("---" if c == "instruction" else "---:" for c in table) + "|")
    lines += ["| " + " | ".join(md_cell(r.get(c)) for c in table) + " |" for r in rows]
    notes = list(notes)
    if notes:
        lines += [""] + [f"- {n}" for n in notes]
    write_text_atomic(path, "\n".join(lines) + "\n")
