"""The rows behind the Instruct-FD result tables, for one model's verdicts.

* :func:`ias_ci_rows` (Table 3 shape): IAS per instruction and overall, with a bootstrap
  interval over cases. An instruction's interval resamples its judged cases (errors left out, as
  in IAS); the overall interval resamples cases within their instruction (stratified), so every
  resample keeps the design's number of cases per instruction.
* :func:`delta_rows` (Table 4 shape): delta-IAS per instruction on the pairs present (an
  instructed case and its un-instructed baseline, both judged against the instruction, neither an
  error), with a bootstrap interval resampling whole pairs, the discordant counts ``b`` (the
  instructed session passes, the baseline fails) and ``c`` (the reverse), the exact McNemar
  p-value and the Holm-adjusted p-value over the instructions of this model (one family per
  model); ``significant`` is ``holm_p < alpha``. The ``overall`` row pools all pairs; it is one
  more test outside the family, so its ``holm_p`` is empty and ``significant`` uses its own p.
* :func:`scenario_rows` (Tables 5 and 6 shape): IAS (and baseline / delta-IAS) per scenario and
  instruction, the same arithmetic as :func:`fdeval.benchmarks.instructfd.metrics.ias.ias_rows`
  on each scenario's cases.

Every row carries the provenance columns and ``metric_version``. ``small_n`` is true where the
interval rests on fewer than ``min_n`` cases (pairs): the tables mark it, since a bootstrap over a
handful of outcomes says little (over n identical outcomes it is the single point [x, x]).
"""

from __future__ import annotations

from typing import Any, Mapping

from fdeval.benchmarks.instructfd.metrics.ias import (
    OVERALL,
    ias_rows,
    join_verdicts,
    with_provenance,
)
from fdeval.benchmarks.instructfd.records import POLICIES, Verdict
from fdeval.metrics.stats import bootstrap_mean, discordant, holm, mcnemar_exact
from fdeval.types import TestCase

MIN_N_CI = 10  # the report's default `min_n_ci`

IAS_CI_COLUMNS = (
    "instruction",
    "n",
    "n_error",
    "n_judged",
    "n_pass",
    "ias",
    "ias_ci_low",
    "ias_ci_high",
    "small_n",
    "ci_method",
    "ci_level",
    "boot_unit",
    "boot_n",
    "boot_resamples",
    "boot_seed",
)
DELTA_COLUMNS = (
    "instruction",
    "n_pairs",
    "ias_paired",
    "baseline_ias",
    "delta_ias",
    "delta_ias_ci_low",
    "delta_ias_ci_high",
    "small_n",
    "b",
    "c",
    "mcnemar_p",
    "holm_p",
    "alpha",
    "significant",
    "ci_method",
    "ci_level",
    "boot_unit",
    "boot_n",
    "boot_resamples",
    "boot_seed",
)
SCENARIO_COLUMNS = (
    "scenario",
    "instruction",
    "n",
    "n_pass",
    "n_error",
    "ias",
    "n_pairs",
    "baseline_ias",
    "delta_ias",
)


def _boot(resamples: int, seed: int, level: float, method: str) -> dict[str, Any]:
    return {"resamples": resamples, "seed": seed, "level": level, "method": method}


def ias_ci_rows(
    verdicts: list[Verdict],
    cases: Mapping[str, TestCase],
    provenance: Mapping[str, Any] | None = None,
    *,
    resamples: int = 10_000,
    seed: int = 0,
    level: float = 0.95,
    method: str = "bca",
    min_n: int = MIN_N_CI,
) -> list[dict[str, Any]]:
    """IAS per instruction (taxonomy order) and ``overall``, each with a bootstrap interval over cases."""
    prov = with_provenance(provenance, IAS_CI_COLUMNS)
    j = join_verdicts(verdicts, cases)
    boot = _boot(resamples, seed, level, method)
    rows = []
    pooled: list[tuple[str, float]] = []
    for p in [*j.policies, OVERALL]:
        vs = j.instructed[p] if p != OVERALL else [v for q in j.policies for v in j.instructed[q]]
        judged = [v for v in vs if v.verdict != "error"]
        if p == OVERALL:
            ci = bootstrap_mean(
                [x for _, x in pooled],
                strata=[s for s, _ in pooled],
                unit="case (within instruction)",
                **boot,
            )
        else:
            pooled += [(p, float(v.verdict == "adhere")) for v in judged]
            ci = bootstrap_mean([float(v.verdict == "adhere") for v in judged], unit="case", **boot)
        rows.append(
            {
                "instruction": p,
                "n": len(vs),
                "n_error": len(vs) - len(judged),
                "n_judged": len(judged),
                "n_pass": sum(v.verdict == "adhere" for v in judged),
                "ias": ci.estimate,
                **ci.columns("ias"),
                "small_n": len(judged) < min_n,
                **prov,
            }
        )
    return rows


def delta_rows(
    verdicts: list[Verdict],
    cases: Mapping[str, TestCase],
    provenance: Mapping[str, Any] | None = None,
    *,
    resamples: int = 10_000,
    seed: int = 0,
    level: float = 0.95,
    method: str = "bca",
    alpha: float = 0.05,
    min_n: int = MIN_N_CI,
) -> list[dict[str, Any]]:
    """delta-IAS per instruction and ``overall`` with its interval, McNemar and Holm (see the module doc)."""
    prov = with_provenance(provenance, DELTA_COLUMNS)
    j = join_verdicts(verdicts, cases)
    boot = _boot(resamples, seed, level, method)
    rows = []
    for p in [*j.policies, OVERALL]:
        pairs = j.pairs[p] if p != OVERALL else [x for q in j.policies for x in j.pairs[q]]
        b, c = discordant((a, base) for _, a, base in pairs)
        n = len(pairs)
        ci = bootstrap_mean([float(a) - float(base) for _, a, base in pairs], unit="pair", **boot)
        rows.append(
            {
                "instruction": p,
                "n_pairs": n,
                "ias_paired": sum(a for _, a, _ in pairs) / n if n else None,
                "baseline_ias": sum(base for _, _, base in pairs) / n if n else None,
                "delta_ias": ci.estimate,
                **ci.columns("delta_ias"),
                "small_n": n < min_n,
                "b": b,
                "c": c,
                "mcnemar_p": mcnemar_exact(b, c) if n else None,
            }
        )
    adjusted = holm([r["mcnemar_p"] for r in rows[:-1]])
    for r, h in zip(rows, [*adjusted, None]):
        deciding = r["mcnemar_p"] if r["instruction"] == OVERALL else h
        r.update(
            {
                "holm_p": h,
                "alpha": alpha,
                "significant": None if deciding is None else bool(deciding < alpha),
            }
        )
    return [{**{k: r[k] for k in DELTA_COLUMNS}, **prov} for r in rows]


def scenario_order(cases: Mapping[str, TestCase]) -> list[str]:
    """Scenarios by the first instruction (taxonomy order) that any of their instructed cases carry, then name."""
    rank: dict[str, int] = {}
    for c in cases.values():
        r = POLICIES.index(c.data.policy_name) if c.data.policy_name in POLICIES else len(POLICIES)
        rank[c.scenario] = min(rank.get(c.scenario, r), r)
    return sorted(rank, key=lambda s: (rank[s], s))


def scenario_rows(
    verdicts: list[Verdict],
    cases: Mapping[str, TestCase],
    provenance: Mapping[str, Any] | None = None,
) -> list[dict[str, Any]]:
    """IAS, baseline and delta-IAS per (scenario, instruction) present, scenarios in :func:`scenario_order`."""
    prov = with_provenance(provenance, SCENARIO_COLUMNS)
    join_verdicts(verdicts, cases)  # check the whole set once
    rows = []
    for s in scenario_order(
        {c.case_id: c for c in cases.values() if c.case_id in {v.case_id for v in verdicts}}
    ):
        mine = [v for v in verdicts if cases[v.case_id].scenario == s]
        for r in ias_rows(mine, cases):
            if r["instruction"] != OVERALL:
                rows.append({"scenario": s, **{k: r[k] for k in SCENARIO_COLUMNS[1:]}, **prov})
    return rows
