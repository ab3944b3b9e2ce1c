"""EchoChain metrics (paper §1, §6): MPR, MCP, failure counts and types, the half-duplex control.

The unit is a conversation: one case, answered by one model, with the rubric grades of its
evaluated exchanges (interrupted delivery) and, when the half-duplex control ran, the grades of the
same criteria with the same content delivered after the assistant's complete reply.

* MPR (mean pass rate): the share of scored conversations whose every criterion passes.
* MCP (mean criterion passed): the share of criteria that pass, reported two ways because they
  weight conversations differently: pooled (criteria passed / criteria graded, so a conversation
  with more criteria weighs more) and the per-conversation mean (each conversation's own share,
  averaged, so every conversation weighs the same). They agree when every conversation has the
  same number of criteria.
* A failure is one failed (conversation, criterion) pair; a failed conversation is one with at
  least one. The share of failed conversations with two or more failed criteria tells a model that
  fails in several ways at once from one that misses a single criterion.
* The taxonomy distribution counts failed conversations by their label (one per conversation,
  automatic or from a reviewer), and how many labels of each kind came from each source.
* The half-duplex comparison counts failures on the criteria graded in both deliveries; the net
  reduction is (F_interrupted - F_control) / F_interrupted.

Scored conversations: not screened out by human review and with at least one grade. Classifier
verdicts are reported (flag rate, errors) but never decide a pass: the grades do, and a classifier
error is never a model failure. Intervals are BCa over whole conversations
(:func:`fdeval.metrics.bootstrap.bootstrap_sums`): a conversation's criteria move together.
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from fdeval.files import write_text_atomic
from fdeval.metrics.bootstrap import bootstrap_sums
from fdeval.metrics.csvio import write_csv
from fdeval.metrics.format import Column, Table, to_markdown

from .rubrics import Grade
from .taxonomy import TAXONOMY

POOLED = "all models"
UNLABELLED = "(no label)"
TABLE_PARTS = (
    "scores",
    "failures",
    "half_duplex",
)  # CSV file <stem>_<part>.csv, in score_tables' order
_LABEL_PREFIX = "tab:echochain-"


@dataclass(frozen=True)
class GradedConversation:
    """One conversation as the metrics see it (built by the benchmark's steps from its graded file)."""

    case_id: str
    conversation_id: str
    model: str
    seed_id: str
    topic: str
    flagged: bool | None  # the classifier's verdict (None: classifier error)
    classifier_error: bool
    grades: tuple[Grade, ...]  # the evaluated exchanges' criteria, interrupted delivery
    control_grades: tuple[
        Grade, ...
    ]  # the same criteria, half-duplex delivery (() when no control ran)
    taxonomy: str | None  # a TAXONOMY key; None when it passed
    taxonomy_source: str  # auto | human
    screened_out: bool = False  # rejected by human screening (left out of every metric)
    # the grader's own grades of the interrupted delivery, kept when a reviewer's replace them in
    # `grades`: the half-duplex comparison pairs them with the control's, one grader on both sides
    auto_grades: tuple[Grade, ...] | None = None
    reviewed: bool = False  # a reviewer's label was applied
    audited: bool = False  # ... and a second person audited it (§5's expert audit)

    @property
    def graded_like_control(self) -> tuple[Grade, ...]:
        """The interrupted delivery's grades by the grader that graded the control."""
        return self.grades if self.auto_grades is None else self.auto_grades

    @property
    def scored(self) -> bool:
        return not self.screened_out and bool(self.grades)

    @property
    def n_failed(self) -> int:
        return sum(not g.passed for g in self.grades)


def conversation_passed(c: GradedConversation) -> bool:
    """The MPR unit: True when every criterion passes. A conversation with no grades has no
    outcome (ValueError): a vacuous pass would inflate MPR."""
    if not c.grades:
        raise ValueError(f"conversation {c.case_id!r} has no grades; it cannot pass or fail")
    return all(g.passed for g in c.grades)


def net_reduction(failures_interrupted: int, failures_control: int) -> float:
    """(F_int - F_hd) / F_int: the share of the interrupted delivery's failures that the half-duplex
    delivery does not have (negative when the control fails more). NaN when F_int is 0."""
    if failures_interrupted < 0 or failures_control < 0:
        raise ValueError(
            f"failure counts must be >= 0, got {failures_interrupted}, {failures_control}"
        )
    if failures_interrupted == 0:
        return math.nan
    return (failures_interrupted - failures_control) / failures_interrupted


# ---------------------------------------------------------------------------------------------
# Intervals


def _ratios(pairs: Sequence[tuple[int, int]]):
    """A vectorised statistic: column sums (m, p) -> (m, k) ratios sums[num] / sums[den]."""
    num = np.array([a for a, _ in pairs])
    den = np.array([b for _, b in pairs])

    def statistic(s: np.ndarray) -> np.ndarray:
        with np.errstate(divide="ignore", invalid="ignore"):
            return s[:, num] / s[:, den]

    return statistic


def _intervals(
    X: np.ndarray, pairs: Sequence[tuple[int, int]], n_resamples: int, confidence: float, seed: int
) -> list[tuple[float | None, float | None, float | None]]:
    """(estimate, low, high) per ratio; no interval (low = high = None) with fewer than two units."""
    stat = _ratios(pairs)
    if X.shape[0] < 2:
        est = stat(X.sum(axis=0)[None, :])[0] if X.shape[0] else [math.nan] * len(pairs)
        return [(_num(e), None, None) for e in est]
    ivs = bootstrap_sums(X, stat, n_resamples=n_resamples, confidence=confidence, seed=seed)
    return [(_num(iv.estimate), _num(iv.low), _num(iv.high)) for iv in ivs]


def _num(x: float) -> float | None:
    return None if x is None or not math.isfinite(x) else float(x)


def _share(k: int, n: int) -> float | None:
    return k / n if n else None


# ---------------------------------------------------------------------------------------------
# Tables


def _by_model(convs: list[GradedConversation]) -> dict[str, list[GradedConversation]]:
    out: dict[str, list[GradedConversation]] = defaultdict(list)
    for c in sorted(convs, key=lambda c: (c.model, c.case_id)):
        out[c.model].append(c)
    return dict(out)


def _scores_row(model: str, cs: list[GradedConversation], kw: dict[str, Any]) -> dict[str, Any]:
    scored = [c for c in cs if c.scored]
    # per conversation: passed (0/1), criteria passed, criteria graded, own criterion share, 1
    X = np.array(
        [
            [
                float(conversation_passed(c)),
                len(c.grades) - c.n_failed,
                len(c.grades),
                (len(c.grades) - c.n_failed) / len(c.grades),
                1.0,
            ]
            for c in scored
        ]
    ).reshape(-1, 5)
    mpr, mcp, mcp_mean = _intervals(X, [(0, 4), (1, 2), (3, 4)], **kw)
    failed = [c for c in scored if c.n_failed]
    multi = sum(c.n_failed >= 2 for c in failed)
    verdicts = [c for c in cs if c.flagged is not None and not c.classifier_error]
    grades = [g for c in scored for g in c.grades]
    return {
        "model": model,
        "n_conversations": len(cs),
        "n_scored": len(scored),
        "mpr": mpr,
        "mcp_pooled": mcp,
        "mcp_mean": mcp_mean,
        "n_criteria": len(grades),
        "n_criteria_failed": sum(not g.passed for g in grades),
        "n_criteria_human": sum(g.source == "human" for g in grades),
        "n_failed": len(failed),
        "n_failed_multi": multi,
        "share_failed_multi": _share(multi, len(failed)),
        "classifier_flag_rate": _share(sum(bool(c.flagged) for c in verdicts), len(verdicts)),
        "n_classifier_errors": sum(c.classifier_error for c in cs),
        "n_screened_out": sum(c.screened_out for c in cs),
        "n_ungraded": sum(not c.screened_out and not c.grades for c in cs),
    }


def _type(c: GradedConversation) -> str:
    return c.taxonomy if c.taxonomy in TAXONOMY else UNLABELLED


def _failure_rows(model: str, cs: list[GradedConversation]) -> list[dict[str, Any]]:
    failed = [c for c in cs if c.scored and c.n_failed]
    rows = []
    for t in [*TAXONOMY, UNLABELLED]:
        mine = [c for c in failed if _type(c) == t]
        if t == UNLABELLED and not mine:
            continue
        rows.append(
            {
                "model": model,
                "taxonomy": t,
                "n_failed": len(mine),
                "share": _share(len(mine), len(failed)),
                "n_failures": sum(c.n_failed for c in mine),
                "n_auto": sum(c.taxonomy_source == "auto" for c in mine if t != UNLABELLED),
                "n_human": sum(c.taxonomy_source == "human" for c in mine if t != UNLABELLED),
            }
        )
    return rows


def _half_duplex_row(
    model: str, cs: list[GradedConversation], kw: dict[str, Any]
) -> dict[str, Any]:
    per_conv = []
    for c in cs:
        if not c.scored or not c.control_grades:
            continue
        control = {g.criterion_id: g.passed for g in c.control_grades}
        paired = [
            (g.passed, control[g.criterion_id])
            for g in c.graded_like_control
            if g.criterion_id in control
        ]
        if not paired:
            continue
        f_int = sum(not a for a, _ in paired)
        f_hd = sum(not b for _, b in paired)
        per_conv.append(
            (
                len(paired),
                f_int,
                f_hd,
                sum(not a and b for a, b in paired),
                sum(a and not b for a, b in paired),
                float(f_int > 0),
                float(f_hd > 0),
            )
        )
    P = np.array(per_conv, dtype=float).reshape(-1, 7)
    tot = P.sum(axis=0).astype(int) if len(per_conv) else np.zeros(7, dtype=int)
    # net reduction = 1 - F_hd / F_int: a ratio of sums over whole conversations, so the same BCa step
    X = np.column_stack([P[:, 1], P[:, 2]]) if len(per_conv) else np.zeros((0, 2))
    ((ratio, low, high),) = _intervals(X, [(1, 0)], **kw)
    nr = (
        None if ratio is None else 1 - ratio,
        None if high is None else 1 - high,
        None if low is None else 1 - low,
    )
    return {
        "model": model,
        "n_conversations": len(per_conv),
        "n_criteria": int(tot[0]),
        "failures_interrupted": int(tot[1]),
        "failures_control": int(tot[2]),
        "fixed_by_control": int(tot[3]),
        "new_in_control": int(tot[4]),
        "net_reduction": nr,
        "failed_conversations_interrupted": int(tot[5]),
        "failed_conversations_control": int(tot[6]),
        "net_reduction_conversations": _num(net_reduction(int(tot[5]), int(tot[6]))),
    }


def score_tables(
    convs: list[GradedConversation], *, n_resamples: int, confidence: float, seed: int
) -> list[Table]:
    """The three EchoChain tables (per-model scores, failure types, half-duplex control), in
    :data:`TABLE_PARTS` order; rows hold raw values (rates in [0, 1], intervals as tuples)."""
    kw = {"n_resamples": int(n_resamples), "confidence": float(confidence), "seed": int(seed)}
    groups = _by_model(convs)
    level = f"{100 * confidence:g}%"
    recipe = {
        "ci_level": confidence,
        "n_resamples": n_resamples,
        "boot_seed": seed,
        "boot_unit": "conversation",
    }
    grades = [g for c in convs if c.scored for g in c.grades]
    n_human = sum(g.source == "human" for g in grades)
    n_reviewed = sum(c.reviewed for c in convs)
    n_audited = sum(c.audited for c in convs)
    labels = Counter(
        c.taxonomy_source for c in convs if c.scored and c.n_failed and c.taxonomy in TAXONOMY
    )

    rows = [{**_scores_row(m, cs, kw), **recipe} for m, cs in groups.items()]
    scores = Table(
        f"EchoChain scores per model [{level} BCa over conversations]",
        [
            Column("model", "Model"),
            Column("n_conversations", "Conversations", "int"),
            Column("n_scored", "Scored", "int"),
            Column("mpr", "MPR", "pct_ci"),
            Column("mcp_pooled", "MCP (pooled)", "pct_ci"),
            Column("mcp_mean", "MCP (per-conversation mean)", "pct_ci"),
            Column("n_criteria", "Criteria", "int"),
            Column("n_failed", "Failed conversations", "int"),
            Column("share_failed_multi", "Failed with >= 2 criteria", "pct"),
            Column("classifier_flag_rate", "Classifier flag rate", "pct"),
            Column("n_classifier_errors", "Classifier errors", "int"),
            Column("n_screened_out", "Screened out", "int"),
            Column("n_ungraded", "Ungraded", "int"),
        ],
        rows,
        notes=[
            "MPR: share of scored conversations passing every criterion. MCP (pooled): criteria passed / "
            "criteria graded. MCP (per-conversation mean): each conversation's share of criteria passed, averaged.",
            "Scored: not screened out and graded. Grades are automatic (rubric grader) except where a reviewer's "
            f"imported grade overrides a criterion: {n_human} of {len(grades)} graded criteria are human"
            + (
                f"; {n_audited} of {n_reviewed} reviewed conversations audited by a second person."
                if n_reviewed
                else "."
            ),
            "Classifier flag rate and errors are over all of a model's conversations with a verdict; a classifier "
            "error is never a failure (the grades decide pass or fail). Screened out: rejected by human screening.",
            f"Intervals: BCa, {level}, {n_resamples} resamples of whole conversations, seed {seed}; "
            "a model with fewer than two scored conversations has no interval (the estimate alone is shown).",
        ],
        label=_LABEL_PREFIX + "scores",
    )

    frows = [{**r, **recipe} for m, cs in groups.items() for r in _failure_rows(m, cs)]
    failures = Table(
        "Failure types per model (failed conversations)",
        [
            Column("model", "Model"),
            Column("taxonomy", "Type"),
            Column("n_failed", "Failed conversations", "int"),
            Column("share", "Share", "pct"),
            Column("n_failures", "Failed criteria", "int"),
            Column("n_auto", "Label automatic", "int"),
            Column("n_human", "Label human", "int"),
        ],
        frows,
        notes=[
            "Each failed conversation carries one type; share is of the model's failed conversations. "
            f"Labels: {labels['auto']} automatic, {labels['human']} from human review"
            + (
                f"; {UNLABELLED}: a failed conversation without a type."
                if any(r["taxonomy"] == UNLABELLED for r in frows)
                else "."
            ),
        ],
        label=_LABEL_PREFIX + "failures",
    )

    hd_groups = [*groups.items(), (POOLED, [c for cs in groups.values() for c in cs])]
    hrows = [{**_half_duplex_row(m, cs, kw), **recipe} for m, cs in hd_groups]
    half = Table(
        f"Half-duplex control: failures with and without interruption [{level} BCa]",
        [
            Column("model", "Model"),
            Column("n_conversations", "Conversations", "int"),
            Column("n_criteria", "Criteria", "int"),
            Column("failures_interrupted", "Failures (interrupted)", "int"),
            Column("failures_control", "Failures (half-duplex)", "int"),
            Column("fixed_by_control", "Failed only interrupted", "int"),
            Column("new_in_control", "Failed only half-duplex", "int"),
            Column("net_reduction", "Net reduction", "pct_ci"),
            Column("failed_conversations_interrupted", "Failed conv. (interrupted)", "int"),
            Column("failed_conversations_control", "Failed conv. (half-duplex)", "int"),
            Column("net_reduction_conversations", "Net reduction (conv.)", "pct"),
        ],
        hrows,
        notes=[
            "A failure is a failed (conversation, criterion) pair, counted on the criteria graded in both deliveries "
            "of scored conversations with a control; net reduction = (F_interrupted - F_half-duplex) / F_interrupted.",
            "Both deliveries are compared on the rubric grader's own grades: where a reviewer's grades replace them "
            "in the scores above, this table still pairs the grader's (human review grades the interrupted delivery "
            "only, so a human grade is never set against an automatic one).",
        ],
        label=_LABEL_PREFIX + "half_duplex",
    )
    return [scores, failures, half]


# ---------------------------------------------------------------------------------------------
# Files


def _csv_rows(t: Table) -> list[dict[str, Any]]:
    """A table's rows with its interval cells spread over plain columns (``x``, ``x_ci_low``, ``x_ci_high``)."""
    out = []
    for row in t.rows:
        flat: dict[str, Any] = {}
        for c in t.columns:
            v = row.get(c.key)
            if c.kind == "pct_ci":
                est, low, high = v if v is not None else (None, None, None)
                flat.update({c.key: est, f"{c.key}_ci_low": low, f"{c.key}_ci_high": high})
            elif c.kind == "ci":
                low, high = v if v is not None else (None, None)
                flat.update({f"{c.key}_ci_low": low, f"{c.key}_ci_high": high})
            else:
                flat[c.key] = v
        flat.update(
            {k: v for k, v in row.items() if k not in flat and k not in {c.key for c in t.columns}}
        )
        out.append(flat)
    return out


def write_tables(
    tables: list[Table], scores_dir: str | Path, stem: str = "echochain", notes: Sequence[str] = ()
) -> str:
    """Write ``<stem>_<part>.csv`` per table (part from its label: scores, failures, half_duplex) and
    ``<stem>.md`` with all of them; returns the markdown. `notes` go under the document's title."""
    scores_dir = Path(scores_dir)
    for t in tables:
        if not t.label.startswith(_LABEL_PREFIX):
            raise ValueError(f"table {t.title!r} has no EchoChain label (got {t.label!r})")
        write_csv(_csv_rows(t), scores_dir / f"{stem}_{t.label[len(_LABEL_PREFIX) :]}.csv")
    md = to_markdown(tables, "EchoChain", list(notes))
    write_text_atomic(scores_dir / f"{stem}.md", md)
    return md
