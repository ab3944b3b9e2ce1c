"""TACT score stage: median-of-runs selection, the composite table, per-episode rows and slices.

Files (all under `<run_dir>/scores/<key>/`, written atomically and left untouched when unchanged):

* `tact_composite.csv` / `.md`: for the system and, when every episode records its human
  continuation, for two human toplines (in-sample: scored against durations fitted on the same
  continuations; held-out: k-fold cross-fitted, `topline.py`) the composite S and the four
  category scores with BCa intervals, the category's mean component scores, the population S_T
  (the proper score) with its BCa interval and the population S_L (point estimate). Every row
  carries its provenance.
* `tact_table1.csv` / `.md`: Table I in one row per system: S, the categories, S_T, S_L, and the
  two baselines, binary v1 (with its BCa interval) and the median latency (`analysis.py`).
* `tact_intents.csv` / `.png`: Fig. 2's cells, per system, category and posterior-mode intent.
* `tact_episodes.csv`: one row per episode: the kept run, its onset, duration, component and
  composite scores, every run's composite, the posterior and the slices.
* `tact_slices.csv`: the composite S per slice value (gender, age band, first-language region,
  SNR, articulation-rate tercile) with BCa intervals, for the system and both human toplines;
  the system's S against the slice's own kernel where the slice has enough human continuations.
"""

from __future__ import annotations

import dataclasses
import logging
import math
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np

from fdeval.errors import FdevalError
from fdeval.files import write_text_atomic
from fdeval.metrics.csvio import write_csv
from fdeval.metrics.format import md_cell as _cell

from .analysis import binary_v1, intent_cells, median_latency, slice_table
from .composite import TactResult, episode_scores, median_runs, score_episodes
from .episodes import SLICE_KEYS, Episode
from .figure import write_intent_figure
from .laws import INTENTS
from .measure import LENGTH_HORIZON_S, fit_completion, measure_response, overlap_events, psi_at
from .records import provenance, score_input_from_judged, split_case_id
from .scoring import CATEGORIES, DurationReference, EpisodeScoreInput, overlap_penalty_s
from .topline import fit_episode_reference, held_out_topline, human_durations

log = logging.getLogger("fdeval")

SCORE_NAMES = ("S", *CATEGORIES)
TABLE_COLUMNS = (
    "system",
    "score",
    "estimate",
    "ci_low",
    "ci_high",
    "n_episodes",
    "timing",
    "length",
    "overlap",
)
HUMAN_IN_SAMPLE = "human (in-sample)"


def held_out_name(k: int) -> str:
    return f"human (held-out, {k}-fold)"


def duration_reference(
    episodes: list[Episode], q: dict[str, np.ndarray], max_duration_s: float = LENGTH_HORIZON_S
) -> DurationReference | None:
    """Human response durations per (posterior-mode intent, context bucket) from the episodes'
    recorded continuations, on the support [0, `max_duration_s`] (the length horizon, so a 12 s
    reply and a 5 s one score differently); None when no episode records a response. A bucket
    without any human response borrows each intent's durations pooled over buckets."""
    pseudo = [
        EpisodeScoreInput(
            e.episode_id,
            e.category,
            tuple(q[e.episode_id]),
            math.nan if e.human is None or e.human.onset_s is None else e.human.onset_s,
            math.nan if e.human is None or e.human.duration_s is None else e.human.duration_s,
            (),
            e.context_bucket,
        )
        for e in episodes
    ]
    cells = human_durations(pseudo)
    return DurationReference.from_samples(cells, max_duration_s=max_duration_s) if cells else None


def human_inputs(
    episodes: list[Episode],
    q: dict[str, np.ndarray],
    merge_gap_s: float,
    backchannel_max_s: float,
    estimator,
    length_horizon_s: float = LENGTH_HORIZON_S,
    *,
    require_all: bool = True,
) -> list[EpisodeScoreInput] | None:
    """The episodes' human continuations as scorer inputs, measured like a system's response
    (durations followed up to `length_horizon_s`). None unless every episode has one; with
    `require_all=False`, the episodes that have one."""
    if require_all and (not episodes or any(e.human is None for e in episodes)):
        return None
    out = []
    for e in episodes:
        if e.human is None:
            continue
        segs = (
            []
            if e.human.onset_s is None
            else [(e.human.onset_s, e.human.onset_s + e.human.duration_s)]
        )
        r = measure_response(
            segs, e.focal_speech, merge_gap_s, backchannel_max_s, until_s=length_horizon_s
        )
        psi = psi_at(estimator, e.focal_speech, [o.onset_s for o in r.overlaps])
        out.append(
            EpisodeScoreInput(
                e.episode_id,
                e.category,
                tuple(q[e.episode_id]),
                r.onset_s,
                r.duration_s,
                overlap_events(r.overlaps, psi),
                e.context_bucket,
                dict(e.slices),
            )
        )
    return out


def _num(x: float) -> float | None:
    return None if x is None or not math.isfinite(x) else round(float(x), 6)


def result_rows(
    system: str, res: TactResult, inputs: list[EpisodeScoreInput], prov: dict[str, Any]
) -> list[dict]:
    counts = {c: sum(1 for e in inputs if e.category == c) for c in CATEGORIES}
    rows = []
    for name in SCORE_NAMES:
        iv = res.composite if name == "S" else res.categories[name]
        comp = res.components.get(name, {})
        rows.append(
            {
                "system": system,
                "score": name,
                "estimate": _num(iv.estimate),
                "ci_low": _num(iv.low),
                "ci_high": _num(iv.high),
                "n_episodes": len(inputs) if name == "S" else counts[name],
                "timing": _num(comp.get("timing", math.nan)),
                "length": _num(comp.get("length", math.nan)),
                "overlap": _num(comp.get("overlap", math.nan)),
                "confidence": iv.confidence,
                "n_resamples": iv.n_resamples,
                **prov,
            }
        )
    t_ci = res.timing_population_ci
    for name, value, iv in (
        ("S_T (population)", res.timing_population, t_ci),
        ("S_L (population)", res.length_population, None),
    ):
        rows.append(
            {
                "system": system,
                "score": name,
                "estimate": _num(value),
                "ci_low": None if iv is None else _num(iv.low),
                "ci_high": None if iv is None else _num(iv.high),
                "n_episodes": len(inputs),
                "timing": None,
                "length": None,
                "overlap": None,
                "confidence": None if iv is None else iv.confidence,
                "n_resamples": None if iv is None else iv.n_resamples,
                **prov,
            }
        )
    return rows


TABLE1_COLUMNS = (
    "system",
    "S",
    "S_low",
    "S_high",
    *CATEGORIES,
    "S_T",
    "S_T_low",
    "S_T_high",
    "S_L",
    "binary_v1",
    "binary_v1_low",
    "binary_v1_high",
    "latency_median_s",
    "latency_n",
    "n_episodes",
)


def table1_row(
    system: str,
    res: TactResult,
    inputs: list[EpisodeScoreInput],
    takeover_min_s: float,
    kw: dict[str, Any],
    prov: dict[str, Any],
) -> dict[str, Any]:
    """One row of Table I: TACT's scores beside the binary v1 and latency baselines."""
    v1 = binary_v1(inputs, takeover_min_s, **kw)["S"]
    lat, n_lat = median_latency(inputs)
    t = res.timing_population_ci
    return {
        "system": system,
        "S": _num(res.composite.estimate),
        "S_low": _num(res.composite.low),
        "S_high": _num(res.composite.high),
        **{c: _num(res.categories[c].estimate) for c in CATEGORIES},
        "S_T": _num(res.timing_population),
        "S_T_low": None if t is None else _num(t.low),
        "S_T_high": None if t is None else _num(t.high),
        "S_L": _num(res.length_population),
        "binary_v1": _num(v1.estimate),
        "binary_v1_low": _num(v1.low),
        "binary_v1_high": _num(v1.high),
        "latency_median_s": _num(lat),
        "latency_n": n_lat,
        "n_episodes": len(inputs),
        **prov,
    }


def table1_markdown(rows: list[dict], confidence: float, n_resamples: int) -> str:
    def iv(r, k):
        return (
            f"{_cell(r[k])} [{_cell(r[k + '_low'])}, {_cell(r[k + '_high'])}]"
            if r[k + "_low"] is not None
            else _cell(r[k])
        )

    lines = [
        "# TACT Table I",
        "",
        f"S, S_T and binary v1 with BCa {int(confidence * 100)}% intervals ({n_resamples} resamples over "
        "episodes). binary v1: share of right takeover decisions per category (a response over the "
        "backchannel length is a takeover; wanted in smooth turn-taking and user interruption only), "
        "averaged over categories. latency: median onset of the responses at or after the decision point "
        "in smooth turn-taking and user interruption (n responses).",
        "",
        "| system | S | pause | backchannel | turn-taking | interruption | S_T | S_L | binary v1 "
        "| latency (s) | n |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        lines.append(
            f"| {r['system']} | {iv(r, 'S')} | "
            + " | ".join(_cell(r[c]) for c in CATEGORIES)
            + f" | {iv(r, 'S_T')} | {_cell(r['S_L'])} | {iv(r, 'binary_v1')} | "
            f"{_cell(r['latency_median_s'])} ({r['latency_n']}) | {r['n_episodes']} |"
        )
    return "\n".join(lines) + "\n"


def markdown(rows: list[dict], prov: dict[str, Any], confidence: float, n_resamples: int) -> str:
    lines = ["# TACT composite", ""]
    lines += [f"- {k}: {v}" for k, v in prov.items()]
    lines += [
        f"- intervals: BCa, {int(confidence * 100)}%, {n_resamples} resamples over episodes "
        "(population S_L: point estimate)",
        "- human (in-sample): durations fitted on these continuations (S_L is 1 by construction); "
        "human (held-out): each fold scored against durations fitted on the other folds",
        "",
    ]
    lines.append("| system | score | estimate | interval | n | timing | length | overlap |")
    lines.append("|---|---|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        ci = "" if r["ci_low"] is None else f"[{_cell(r['ci_low'])}, {_cell(r['ci_high'])}]"
        lines.append(
            f"| {r['system']} | {r['score']} | {_cell(r['estimate'])} | {ci} | {r['n_episodes']} | "
            f"{_cell(r['timing'])} | {_cell(r['length'])} | {_cell(r['overlap'])} |"
        )
    return "\n".join(lines) + "\n"


def score_tables(
    bench,
    judged: dict[str, dict],
    skipped: dict[str, list[str]],
    *,
    system: str,
    seed: int,
    model_id: str,
    run_id: str,
    data_dir: Path,
    scores_dir: Path,
) -> str:
    """Write the composite, episode and slice tables from the judged files (by case id) of a
    run's usable sessions; `skipped` are the cases left out by session state. Returns the
    composite table's markdown."""
    # an episode is scored on all of its runs or not at all (the median of runs needs them all)
    dropped = {split_case_id(cid)[0] for ids in skipped.values() for cid in ids}
    if dropped:
        log.warning(
            "tact score: %d episode(s) left out: a run's session failed or was invalid (e.g. %s)",
            len(dropped),
            sorted(dropped)[0],
        )
    runs: dict[str, dict[int, dict]] = defaultdict(dict)
    for cid, d in judged.items():
        eid, r = split_case_id(cid)
        if eid not in dropped:
            runs[eid][r] = d
    ids = sorted(runs)
    repeat_sets = {tuple(sorted(runs[e])) for e in ids}
    if len(repeat_sets) != 1:
        raise FdevalError(
            f"tact score: episodes were run a different number of times {sorted(repeat_sets)}; "
            "score every episode with the same repeats"
        )
    repeats = next(iter(repeat_sets))
    episodes = {e.episode_id: e for e in bench.episodes(data_dir)}
    scored_eps = [episodes[e] for e in ids]
    q, info = bench.posteriors(data_dir)
    horizon = float(getattr(bench, "length_horizon_s", LENGTH_HORIZON_S))
    ref = (
        None
        if bench.duration_reference == "none"
        else duration_reference(list(episodes.values()), q, horizon)
    )
    if ref is None and bench.duration_reference != "none":
        log.info("tact score: no human durations in the episodes; length is left out")
    per_run = [[score_input_from_judged(runs[e][r]) for e in ids] for r in repeats]
    chosen = median_runs(per_run, ref)
    run_composites = np.stack([episode_scores(run, ref).composite for run in per_run])  # (R, n)
    kept = [
        next(r for k, r in enumerate(repeats) if per_run[k][i] is e) for i, e in enumerate(chosen)
    ]
    kw = {"n_resamples": bench.n_resamples, "confidence": bench.confidence, "seed": seed}
    result = score_episodes(chosen, ref, timing_interval=True, **kw)
    prov = provenance(
        bench,
        model_id,
        seed,
        {
            **info,
            "repeats": len(repeats),
            "duration_reference": "none" if ref is None else bench.duration_reference,
            "run_id": run_id,
            "episodes_left_out": len(dropped),
        },
    )
    rows = result_rows(system, result, chosen, prov)
    takeover_min_s = bench.backchannel_max_s
    table1 = [table1_row(system, result, chosen, takeover_min_s, kw, prov)]
    intents = [(system, intent_cells(result.episodes, [e.posterior for e in chosen]))]

    def fit(train, buckets=()):  # what is fitted from human continuations: their durations
        return fit_episode_reference(train, buckets, max_duration_s=horizon)

    slice_rows = [
        _slice_row(system, r, prov)
        for r in slice_table(
            chosen,
            SLICE_KEYS,
            ref,
            kernel_humans=None if ref is None else _all_humans(bench, episodes, q, horizon),
            fit=fit,
            **kw,
        )
    ]

    estimator = fit_completion(list(episodes.values()))
    humans = human_inputs(
        scored_eps, q, bench.merge_gap_s, bench.backchannel_max_s, estimator, horizon
    )
    if humans is not None:
        tops = [(HUMAN_IN_SAMPLE, score_episodes(humans, ref, timing_interval=True, **kw), None)]
        k = min(int(getattr(bench, "topline_folds", 5)), len(humans))
        if ref is not None and k >= 2:
            held = held_out_topline(humans, fit, k=k, **kw)
            # every fold keeps the configured onset laws (benchmark.laws), so the held-out S_T and
            # its interval are the in-sample ones (`topline.fit_laws_reference` would refit them)
            held = dataclasses.replace(held, timing_population_ci=tops[0][1].timing_population_ci)
            tops.append((held_out_name(k), held, held.episodes))
        for name, res, scores in tops:
            rows += result_rows(name, res, humans, prov)
            table1.append(table1_row(name, res, humans, takeover_min_s, kw, prov))
            intents.append((name, intent_cells(res.episodes, [h.posterior for h in humans])))
            slice_rows += [
                _slice_row(name, r, prov)
                for r in slice_table(humans, SLICE_KEYS, ref, scores=scores, **kw)
            ]

    sdir = scores_dir
    write_csv(rows, sdir / "tact_composite.csv")
    write_text_atomic(
        sdir / "tact_composite.md", markdown(rows, prov, bench.confidence, bench.n_resamples)
    )
    write_csv(table1, sdir / "tact_table1.csv")
    write_text_atomic(
        sdir / "tact_table1.md", table1_markdown(table1, bench.confidence, bench.n_resamples)
    )
    write_csv(
        [
            {
                "system": name,
                **{k: _num(v) if isinstance(v, float) else v for k, v in r.items()},
                **prov,
            }
            for name, cells in intents
            for r in cells
        ],
        sdir / "tact_intents.csv",
    )
    write_intent_figure(intents, sdir / "tact_intents.png")
    sc = result.episodes
    ep_rows = []
    for i, e in enumerate(chosen):
        ep_rows.append(
            {
                "episode_id": e.episode_id,
                "category": e.category,
                "context_bucket": e.context_bucket,
                "posterior_mode": INTENTS[int(np.argmax(e.posterior))],
                "posterior": " ".join(
                    f"{z}={p:.3f}" for z, p in zip(INTENTS, e.posterior) if p > 0
                ),
                "kept_repeat": kept[i],
                "onset_s": _num(e.onset_s),
                "duration_s": _num(e.duration_s),
                "n_overlaps": len(e.overlaps),
                "overlap_penalty_s": _num(overlap_penalty_s(e.overlaps)),
                "s_T": _num(sc.timing[i]),
                "s_L": _num(sc.length[i]),
                "s_O": _num(sc.overlap[i]),
                "composite": _num(sc.composite[i]),
                **{f"composite_r{r}": _num(run_composites[k, i]) for k, r in enumerate(repeats)},
                **{f"onset_r{r}_s": _num(per_run[k][i].onset_s) for k, r in enumerate(repeats)},
                **{k: e.slices.get(k) for k in SLICE_KEYS},
                **prov,
            }
        )
    write_csv(ep_rows, sdir / "tact_episodes.csv")
    write_csv(slice_rows, sdir / "tact_slices.csv")
    return (sdir / "tact_composite.md").read_text()


def _all_humans(bench, episodes: dict[str, Episode], q, horizon: float) -> list[EpisodeScoreInput]:
    """Every episode's known human continuation (dev split included): the evidence for slice kernels."""
    return (
        human_inputs(
            list(episodes.values()),
            q,
            bench.merge_gap_s,
            bench.backchannel_max_s,
            None,
            horizon,
            require_all=False,
        )
        or []
    )


def _slice_row(system: str, r, prov: dict[str, Any]) -> dict[str, Any]:
    k = r.kernel
    return {
        "system": system,
        "slice": r.key,
        "value": r.value,
        "n_episodes": r.n_episodes,
        "estimate": _num(r.composite.estimate),
        "ci_low": _num(r.composite.low),
        "ci_high": _num(r.composite.high),
        "kernel_humans": r.kernel_humans,
        "kernel_estimate": None if k is None else _num(k.estimate),
        "kernel_ci_low": None if k is None else _num(k.low),
        "kernel_ci_high": None if k is None else _num(k.high),
        **prov,
    }
