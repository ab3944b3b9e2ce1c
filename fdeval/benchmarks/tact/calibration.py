"""The intent judge's calibration report: T* on the dev split, ECE before and after, reliability
tables, and whether the fusion predicts a held-out annotator better than either source alone.

`calibration_report(counts, judge_logits, dev)` is pure (arrays in, a JSON-ready dict out);
`report_markdown` renders it. The pieces come from `posterior.py` (`fit_temperature`,
`scaled_judge`, `reliability_table`, `expected_calibration_error`, `held_out_by_source`,
`held_out_log_likelihood`, `fit_judge_weight`); this module only decides which episodes fit and which evaluate:

* T* (and the fitted lambda) are fitted on the dev split, and everything is evaluated on the
  test split, so the figures are held out. Without a dev split (or without a test split) both
  use all episodes and the report says `in_sample: true`.
* "Before" is the judge's own distribution softmax(l) (T = 1: the stated probabilities, floored,
  when the logits are `intent_judge`'s log-probabilities); "after" is softmax(l / T*).
* Held-out annotator: each label of a test episode with two or more annotators is predicted
  from the other annotators' labels and/or the judge (`posterior.held_out_log_likelihood`,
  mean log-likelihood per label). Sources: the other annotators alone (their label shares;
  -inf, written null, as soon as one held-out label was given by nobody else, and the count of
  such labels), the calibrated judge alone, the fusion at the configured lambda (0.3), the fusion
  at lambda fitted on dev, and, as a control, the other annotators smoothed toward the uniform
  distribution with a weight fitted on dev: a fusion that only beats that control by smoothing
  shows the judge adds nothing. `fusion_beats_both` / `fitted_fusion_beats_both` say whether the
  fusion (configured / fitted lambda) beats the better of the annotators alone and the judge alone.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from scipy.special import softmax

from .laws import N_INTENTS
from .posterior import (
    JUDGE_WEIGHT,
    _as_matrix,
    expected_calibration_error,
    fit_judge_weight,
    fit_temperature,
    held_out_by_source,
    held_out_log_likelihood,
    reliability_table,
    scaled_judge,
)

N_BINS = 10


def _finite(x: float | None, nd: int = 6) -> float | None:
    return None if x is None or not math.isfinite(x) else round(float(x), nd)


def _mean_nll(probs: np.ndarray, counts: np.ndarray) -> float:
    with np.errstate(divide="ignore"):
        ll = counts * np.log(np.where(counts > 0, probs, 1.0))
    return float(-ll.sum() / counts.sum())


def calibration_report(
    counts, judge_logits, dev, judge_weight: float = JUDGE_WEIGHT, n_bins: int = N_BINS
) -> dict[str, Any]:
    """The report of the module docstring for (n, 6) label counts, (n, 6) judge logits and an
    (n,) boolean dev-split mask."""
    c = _as_matrix(counts, "counts")
    logits = _as_matrix(judge_logits, "judge_logits")
    dev = np.asarray(dev, dtype=bool).reshape(-1)
    if not (len(c) == len(logits) == len(dev)) or len(c) == 0:
        raise ValueError(
            f"need the same nonzero number of episodes, got {len(c)}, {len(logits)}, {len(dev)}"
        )
    split = bool(dev.any() and (~dev).any())
    fit_on = dev if split else np.ones(len(c), dtype=bool)
    evaluate = ~dev if split else np.ones(len(c), dtype=bool)
    t_star = fit_temperature(logits[fit_on], c[fit_on])
    ce, le = c[evaluate], logits[evaluate]
    before, after = softmax(le, axis=1), scaled_judge(le, t_star)
    top = before.argmax(axis=1)
    out: dict[str, Any] = {
        "temperature": round(t_star, 6),
        "temperature_fit_on": "dev" if split else "all",
        "evaluated_on": "test" if split else "all",
        "in_sample": not split,
        "n_episodes": {"fit": int(fit_on.sum()), "evaluated": int(evaluate.sum())},
        "n_labels_evaluated": int(ce.sum()),
        "n_bins": n_bins,
        "accuracy": round(float(ce[np.arange(len(ce)), top].sum() / ce.sum()), 6),
        "ece_before": round(expected_calibration_error(before, ce, n_bins), 6),
        "ece_after": round(expected_calibration_error(after, ce, n_bins), 6),
        "nll_before": round(_mean_nll(before, ce), 6),
        "nll_after": round(_mean_nll(after, ce), 6),
        "reliability_before": _rounded(reliability_table(before, ce, n_bins)),
        "reliability_after": _rounded(reliability_table(after, ce, n_bins)),
        "held_out_annotator": _held_out(c, logits, t_star, fit_on, evaluate, judge_weight),
    }
    return out


def _rounded(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{k: round(v, 6) if isinstance(v, float) else v for k, v in r.items()} for r in rows]


def _held_out(
    c: np.ndarray,
    logits: np.ndarray,
    t_star: float,
    fit_on: np.ndarray,
    evaluate: np.ndarray,
    judge_weight: float,
) -> dict[str, Any]:
    multi = c.sum(axis=1) >= 2
    ev, fit = evaluate & multi, fit_on & multi
    if not ev.any():
        return {
            "n_episodes": 0,
            "n_labels": 0,
            "note": "no evaluated episode has two or more annotators",
        }
    ce, pe = c[ev], scaled_judge(logits[ev], t_star)
    uniform = np.full((1, N_INTENTS), 1.0 / N_INTENTS)
    lam_fit = fit_judge_weight(c[fit], scaled_judge(logits[fit], t_star)) if fit.any() else None
    lam_u = fit_judge_weight(c[fit], np.repeat(uniform, fit.sum(), axis=0)) if fit.any() else None
    unseen = int(ce[ce == 1].sum())  # held-out labels that no other annotator of the episode gave
    by_source = held_out_by_source(ce, pe, judge_weight)
    sources: dict[str, dict[str, Any]] = {
        "annotators": {
            "log_likelihood": _finite(by_source["annotators"]),
            "zero_probability_labels": unseen,
        },
        "judge": {"log_likelihood": _finite(by_source["judge"])},
        "fused": {"log_likelihood": _finite(by_source["fused"]), "judge_weight": judge_weight},
    }
    if lam_fit is not None:
        sources["fused_fitted"] = {
            "log_likelihood": _finite(held_out_log_likelihood(ce, pe, lam_fit)),
            "judge_weight": round(lam_fit, 6),
        }
        sources["annotators_smoothed"] = {
            "log_likelihood": _finite(
                held_out_log_likelihood(ce, np.repeat(uniform, len(ce), axis=0), lam_u)
            ),
            "uniform_weight": round(lam_u, 6),
        }
    ll = {
        k: (v["log_likelihood"] if v["log_likelihood"] is not None else -math.inf)
        for k, v in sources.items()
    }
    best_single = max(ll["annotators"], ll["judge"])
    return {
        "n_episodes": int(ev.sum()),
        "n_labels": int(ce.sum()),
        "sources": sources,
        "fusion_beats_both": bool(ll["fused"] > best_single),
        "fitted_fusion_beats_both": bool(ll["fused_fitted"] > best_single)
        if "fused_fitted" in ll
        else None,
    }


def report_markdown(report: dict[str, Any]) -> str:
    """The report (`calibration_report`, plus `agreement` and `judge` where present) as Markdown."""
    f = lambda x, nd=3: "n/a" if x is None else (f"{x:.{nd}f}" if isinstance(x, float) else str(x))  # noqa: E731
    lines = ["# TACT intent judge: calibration report", ""]
    j = report.get("judge")
    if j:
        lines += [
            f"Judge `{j.get('judge')}` (version {j.get('version')}, prompt hash `{j.get('prompt_hash')}`, "
            f"key `{j.get('judge_key')}`); {report.get('n_judged')} of {report.get('n_episodes')} "
            f"episodes judged.",
            "",
        ]
    cal = report.get("calibration")
    if cal:
        where = (
            "in-sample (no dev/test split)"
            if cal["in_sample"]
            else "T* fitted on dev, evaluated on test"
        )
        lines += [
            f"T* = {cal['temperature']:.3f} ({where}; {cal['n_episodes']['fit']} fit, "
            f"{cal['n_episodes']['evaluated']} evaluated episodes, {cal['n_labels_evaluated']} labels)",
            "",
            "| | before (T = 1) | after (T*) |",
            "|---|---:|---:|",
            f"| ECE ({cal['n_bins']} bins) | {cal['ece_before']:.4f} | {cal['ece_after']:.4f} |",
            f"| NLL per label | {cal['nll_before']:.4f} | {cal['nll_after']:.4f} |",
            f"| top-label accuracy | {cal['accuracy']:.4f} | {cal['accuracy']:.4f} |",
            "",
        ]
        for name in ("before", "after"):
            lines += [
                f"Reliability {name} calibration:",
                "",
                "| confidence bin | mean confidence | accuracy | labels | episodes |",
                "|---|---:|---:|---:|---:|",
            ]
            lines += [
                f"| [{r['lo']:.2f}, {r['hi']:.2f}) | {r['mean_confidence']:.3f} | {r['accuracy']:.3f} | "
                f"{r['n_labels']} | {r['n_episodes']} |"
                for r in cal[f"reliability_{name}"]
            ]
            lines.append("")
        ho = cal["held_out_annotator"]
        if ho.get("sources"):
            lines += [
                f"Held-out annotator ({ho['n_labels']} labels of {ho['n_episodes']} episodes with 2+ annotators; "
                f"mean log-likelihood per label, higher is better):",
                "",
                "| source | log-likelihood | note |",
                "|---|---:|---|",
            ]
            for k, v in ho["sources"].items():
                note = ", ".join(f"{a} {b}" for a, b in v.items() if a != "log_likelihood")
                lines.append(f"| {k} | {f(v['log_likelihood'], 4)} | {note} |")
            yn = lambda b: "n/a" if b is None else ("yes" if b else "no")  # noqa: E731
            lines += [
                "",
                f"Fusion better than either source alone: {yn(ho['fusion_beats_both'])} at lambda = "
                f"{ho['sources']['fused']['judge_weight']:g}, {yn(ho['fitted_fusion_beats_both'])} at the "
                f"lambda fitted on dev",
                "",
            ]
        else:
            lines += [f"Held-out annotator: {ho.get('note')}", ""]
    ag = report.get("agreement")
    if ag:
        lines += [
            "Krippendorff's alpha (episodes with 2+ annotators):",
            "",
            "| annotation | level | alpha | units | values |",
            "|---|---|---:|---:|---:|",
        ]
        lines += [
            f"| {k} | {v['level']} | {f(v['alpha'])} | {v['units']} | {v['values']} |"
            for k, v in ag.items()
        ]
        lines.append("")
    return "\n".join(lines)


__all__ = ["N_BINS", "calibration_report", "report_markdown"]
