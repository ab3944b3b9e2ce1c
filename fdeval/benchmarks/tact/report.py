"""TACT score stage: median-of-runs selection, the composite table, per-episode rows and slices.

Files (all under `<run_dir>/scores/`, written atomically and left untouched when unchanged):

* `tact_composite.csv` / `.md`: for the system (and, when every episode records its human
  continuation, for that human topline) the composite S and the four category scores with BCa
  intervals, the category's mean component scores, and the population S_T and S_L (point
  estimates). Every row carries its provenance.
* `tact_episodes.csv`: one row per episode: the kept run, its onset, duration, component and
  composite scores, every run's composite, the posterior and the slices.
* `tact_slices.csv`: the composite S per slice value (gender, age band, first-language region,
  SNR, articulation-rate tercile) with BCa intervals.
"""

from __future__ import annotations

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

from .analysis import slice_table
from .composite import TactResult, episode_scores, median_runs, score_episodes
from .episodes import SLICE_KEYS, Episode
from .laws import INTENTS
from .measure import fit_completion, measure_response, overlap_events, psi_at
from .records import provenance, score_input_from_judged, split_case_id
from .scoring import CATEGORIES, DurationReference, EpisodeScoreInput, overlap_penalty_s

log = logging.getLogger("fdeval")

SCORE_NAMES = ("S", *CATEGORIES)
TABLE_COLUMNS = ("system", "score", "estimate", "ci_low", "ci_high", "n_episodes", "timing", "length", "overlap")


def duration_reference(episodes: list[Episode], q: dict[str, np.ndarray]) -> DurationReference | None:
    """Human response durations per (posterior-mode intent, context bucket) from the episodes'
    recorded continuations; None when no episode records a response."""
    cells: dict[tuple[str, str], list[float]] = defaultdict(list)
    for e in episodes:
        if e.human is not None and e.human.duration_s is not None:
            cells[(INTENTS[int(np.argmax(q[e.episode_id]))], e.context_bucket)].append(e.human.duration_s)
    if not cells:
        return None
    # A bucket without any human response borrows each intent's durations pooled over buckets
    # (the scorer's own fallback for a missing cell within a known bucket).
    for b in sorted({e.context_bucket for e in episodes} - {b for _, b in cells}):
        for z in INTENTS:
            pooled = [d for (zz, _), ds in list(cells.items()) if zz == z for d in ds]
            if pooled:
                cells[(z, b)] = pooled
    return DurationReference.from_samples(cells)


def human_inputs(episodes: list[Episode], q: dict[str, np.ndarray], merge_gap_s: float, backchannel_max_s: float,
                 estimator) -> list[EpisodeScoreInput] | None:
    """The episodes' human continuations as scorer inputs (None unless every episode has one)."""
    if not episodes or any(e.human is None for e in episodes):
        return None
    out = []
    for e in episodes:
        segs = [] if e.human.onset_s is None else [(e.human.onset_s, e.human.onset_s + e.human.duration_s)]
        r = measure_response(segs, e.focal_speech, merge_gap_s, backchannel_max_s)
        psi = psi_at(estimator, e.focal_speech, [o.onset_s for o in r.overlaps])
        out.append(EpisodeScoreInput(e.episode_id, e.category, tuple(q[e.episode_id]), r.onset_s, r.duration_s,
                                     overlap_events(r.overlaps, psi), e.context_bucket, dict(e.slices)))
    return out


def _num(x: float) -> float | None:
    return None if x is None or not math.isfinite(x) else round(float(x), 6)


def result_rows(system: str, res: TactResult, inputs: list[EpisodeScoreInput], prov: dict[str, Any]) -> list[dict]:
    counts = {c: sum(1 for e in inputs if e.category == c) for c in CATEGORIES}
    rows = []
    for name in SCORE_NAMES:
        iv = res.composite if name == "S" else res.categories[name]
        comp = res.components.get(name, {})
        rows.append({"system": system, "score": name, "estimate": _num(iv.estimate), "ci_low": _num(iv.low),
                     "ci_high": _num(iv.high), "n_episodes": len(inputs) if name == "S" else counts[name],
                     "timing": _num(comp.get("timing", math.nan)), "length": _num(comp.get("length", math.nan)),
                     "overlap": _num(comp.get("overlap", math.nan)), "confidence": iv.confidence,
                     "n_resamples": iv.n_resamples, **prov})
    for name, value in (("S_T (population)", res.timing_population), ("S_L (population)", res.length_population)):
        rows.append({"system": system, "score": name, "estimate": _num(value), "ci_low": None, "ci_high": None,
                     "n_episodes": len(inputs), "timing": None, "length": None, "overlap": None,
                     "confidence": None, "n_resamples": None, **prov})
    return rows


def markdown(rows: list[dict], prov: dict[str, Any], confidence: float, n_resamples: int) -> str:
    lines = ["# TACT composite", ""]
    lines += [f"- {k}: {v}" for k, v in prov.items()]
    lines += [f"- intervals: BCa, {int(confidence * 100)}%, {n_resamples} resamples over episodes "
              "(population S_T and S_L: point estimates)", ""]
    lines.append("| system | score | estimate | interval | n | timing | length | overlap |")
    lines.append("|---|---|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        ci = "" if r["ci_low"] is None else f"[{_cell(r['ci_low'])}, {_cell(r['ci_high'])}]"
        lines.append(f"| {r['system']} | {r['score']} | {_cell(r['estimate'])} | {ci} | {r['n_episodes']} | "
                     f"{_cell(r['timing'])} | {_cell(r['length'])} | {_cell(r['overlap'])} |")
    return "\n".join(lines) + "\n"


def score_tables(bench, judged: dict[str, dict], skipped: dict[str, list[str]], *, system: str, seed: int,
                 model_id: str, run_id: str, data_dir: Path, scores_dir: Path) -> str:
    """Write the composite, episode and slice tables from the judged files (by case id) of a
    run's usable sessions; `skipped` are the cases left out by session state. Returns the
    composite table's markdown."""
    # an episode is scored on all of its runs or not at all (the median of runs needs them all)
    dropped = {split_case_id(cid)[0] for ids in skipped.values() for cid in ids}
    if dropped:
        log.warning("tact score: %d episode(s) left out: a run's session failed or was invalid (e.g. %s)",
                    len(dropped), sorted(dropped)[0])
    runs: dict[str, dict[int, dict]] = defaultdict(dict)
    for cid, d in judged.items():
        eid, r = split_case_id(cid)
        if eid not in dropped:
            runs[eid][r] = d
    ids = sorted(runs)
    repeat_sets = {tuple(sorted(runs[e])) for e in ids}
    if len(repeat_sets) != 1:
        raise FdevalError(f"tact score: episodes were run a different number of times {sorted(repeat_sets)}; "
                          "score every episode with the same repeats")
    repeats = next(iter(repeat_sets))
    episodes = {e.episode_id: e for e in bench.episodes(data_dir)}
    scored_eps = [episodes[e] for e in ids]
    q, info = bench.posteriors(data_dir)
    ref = None if bench.duration_reference == "none" else duration_reference(list(episodes.values()), q)
    if ref is None and bench.duration_reference != "none":
        log.info("tact score: no human durations in the episodes; length is left out")
    per_run = [[score_input_from_judged(runs[e][r]) for e in ids] for r in repeats]
    chosen = median_runs(per_run, ref)
    run_composites = np.stack([episode_scores(run, ref).composite for run in per_run])  # (R, n)
    kept = [next(r for k, r in enumerate(repeats) if per_run[k][i] is e) for i, e in enumerate(chosen)]
    kw = {"n_resamples": bench.n_resamples, "confidence": bench.confidence, "seed": seed}
    result = score_episodes(chosen, ref, **kw)
    prov = provenance(bench, model_id, seed, {**info, "repeats": len(repeats), "duration_reference":
                                   "none" if ref is None else bench.duration_reference,
                                   "run_id": run_id, "episodes_left_out": len(dropped)})
    rows = result_rows(system, result, chosen, prov)
    estimator = fit_completion(list(episodes.values()))
    humans = human_inputs(scored_eps, q, bench.merge_gap_s, bench.backchannel_max_s, estimator)
    if humans is not None:
        rows += result_rows("human (episode continuations)", score_episodes(humans, ref, **kw), humans, prov)

    sdir = scores_dir
    write_csv(rows, sdir / "tact_composite.csv")
    write_text_atomic(sdir / "tact_composite.md", markdown(rows, prov, bench.confidence, bench.n_resamples))
    sc = result.episodes
    ep_rows = []
    for i, e in enumerate(chosen):
        ep_rows.append({
            "episode_id": e.episode_id, "category": e.category, "context_bucket": e.context_bucket,
            "posterior_mode": INTENTS[int(np.argmax(e.posterior))],
            "posterior": " ".join(f"{z}={p:.3f}" for z, p in zip(INTENTS, e.posterior) if p > 0),
            "kept_repeat": kept[i], "onset_s": _num(e.onset_s), "duration_s": _num(e.duration_s),
            "n_overlaps": len(e.overlaps), "overlap_penalty_s": _num(overlap_penalty_s(e.overlaps)),
            "s_T": _num(sc.timing[i]), "s_L": _num(sc.length[i]), "s_O": _num(sc.overlap[i]),
            "composite": _num(sc.composite[i]),
            **{f"composite_r{r}": _num(run_composites[k, i]) for k, r in enumerate(repeats)},
            **{f"onset_r{r}_s": _num(per_run[k][i].onset_s) for k, r in enumerate(repeats)},
            **{k: e.slices.get(k) for k in SLICE_KEYS}, **prov,
        })
    write_csv(ep_rows, sdir / "tact_episodes.csv")
    slice_rows = [{"system": system, "slice": r.key, "value": r.value, "n_episodes": r.n_episodes,
                   "estimate": _num(r.composite.estimate), "ci_low": _num(r.composite.low),
                   "ci_high": _num(r.composite.high), **prov}
                  for r in slice_table(chosen, SLICE_KEYS, ref, **kw)]
    write_csv(slice_rows, sdir / "tact_slices.csv")
    return (sdir / "tact_composite.md").read_text()
