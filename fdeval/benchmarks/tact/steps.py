"""TACT's evaluation: measure -> intent posterior -> composite.

* `measure` (stage transcribe): onset, duration and overlaps of the system's response relative to
  the decision point (`measure.py`) -> `measures/<key>/<case_id>.json`;
* `posterior` (stage judge): the episode's intent posterior (annotator labels, fused with judge
  logits where configured) and psi for each overlap -> `judged/<key>/<case_id>.json`;
* the composite metric: keeps the median-scoring of each episode's runs and writes
  `scores/<key>/tact_composite.csv|.md`, `tact_table1.csv|.md`, `tact_intents.csv|.png`,
  `tact_episodes.csv` and `tact_slices.csv` (`report.py`).
The settings each of them reads (`owns`) are outside the run identity: changing one remakes that
step's files (in a folder of their own) and never records a session again.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any, Mapping

import numpy as np

from fdeval.engine.executor import read_outputs
from fdeval.engine.run import Run
from fdeval.engine.steps import CaseStep, Metric, Result, Unit
from fdeval.recording import read_session

from .laws import INTENTS, use_laws
from .measure import fit_completion, measure_session, psi_at
from .records import METRIC_VERSION, laws_provenance, split_case_id
from .report import score_tables


class Measure(CaseStep):
    name = "measure"
    stage = "transcribe"
    folder = "measures"
    owns = ("benchmark.merge_gap_s", "benchmark.backchannel_max_s")  # read after the sessions only

    def __init__(self, bench: Any):
        self.bench = bench

    def identity(self, run: Run) -> dict[str, Any]:
        # length_horizon_s is part of the run (it sets how long sessions record); naming it here
        # remakes the files measured when durations stopped at T_h
        return {
            "merge_gap_s": self.bench.merge_gap_s,
            "backchannel_max_s": self.bench.backchannel_max_s,
            "length_horizon_s": self.bench.length_horizon_s,
        }

    def prepare(self, run: Run, todo: list[Unit]) -> None:
        self.by_id = {e.episode_id: e for e in self.bench.episodes(run.data_dir)}

    def make(self, run: Run, unit: Unit) -> dict[str, Any]:
        b = self.bench
        session = read_session(
            run.folder.session_paths(unit.case_id)[0],
            tables=("turns", "vad_segments", "model_text"),
        )
        m = measure_session(
            session,
            self.by_id[unit.case.conversation_id],
            b.merge_gap_s,
            b.backchannel_max_s,
            b.length_horizon_s,
        )
        eid, r = split_case_id(unit.case_id)
        return {
            "case_id": unit.case_id,
            "episode_id": eid,
            "repeat": r,
            **m,
            "settings": {
                "merge_gap_s": b.merge_gap_s,
                "backchannel_max_s": b.backchannel_max_s,
                "length_horizon_s": b.length_horizon_s,
            },
            "model_id": session.info.attrs.get("model_id"),
            "case_seed": session.info.attrs.get("case_seed"),
        }


class Posterior(CaseStep):
    name = "posterior"
    stage = "judge"
    folder = "judged"
    needs = ("measure",)
    owns = ("benchmark.posterior", "benchmark.judge_weight")

    def __init__(self, bench: Any):
        self.bench = bench

    def identity(self, run: Run) -> dict[str, Any]:
        ident = {
            "posterior": self.bench.posterior,
            "judge_weight": self.bench.judge_weight,
            "metric_version": METRIC_VERSION,
        }
        if self.bench.posterior == "fused":
            # the judge's logits are the episodes' (the intent judge writes them in place): logits
            # written after a run's posteriors remake them instead of being passed over
            logits = [[e.episode_id, e.judge_logits] for e in self.bench.episodes(run.data_dir)]
            ident["judge_logits_sha256"] = hashlib.sha256(json.dumps(logits).encode()).hexdigest()[
                :16
            ]
        return ident

    def prepare(self, run: Run, todo: list[Unit]) -> None:
        eps = self.bench.episodes(run.data_dir)
        self.by_id = {e.episode_id: e for e in eps}
        self.q, self.info = self.bench.posteriors(run.data_dir)
        self.estimator = fit_completion(eps)
        self.psi_info = (
            None
            if self.estimator is None
            else {
                "coef": [round(x, 6) for x in self.estimator.coef],
                "intercept": round(self.estimator.intercept, 6),
            }
        )

    def make(self, run: Run, unit: Unit) -> dict[str, Any]:
        m = json.loads(run.file_of("measure", unit.case_id).read_text())
        e = self.by_id[m["episode_id"]]
        q = self.q[e.episode_id]
        psi = psi_at(
            self.estimator,
            [tuple(x) for x in m["focal_speech"]],
            [o["onset_s"] for o in m["overlaps"]],
        )
        return {
            "case_id": unit.case_id,
            "episode_id": e.episode_id,
            "repeat": m["repeat"],
            "category": e.category,
            "context_bucket": e.context_bucket,
            "posterior": [float(x) for x in q],
            "posterior_mode": INTENTS[int(np.argmax(q))],
            **self.info,
            "onset_s": m["onset_s"],
            "duration_s": m["duration_s"],
            "running_at_start": m["running_at_start"],
            "overlaps": [{**o, "psi": round(float(p), 6)} for o, p in zip(m["overlaps"], psi)],
            "psi_model": self.psi_info,
            "slices": dict(e.slices),
            "model_id": run.model_id,
            "metric_version": METRIC_VERSION,
        }

    def result(self, payload: Mapping[str, Any]) -> Result:
        onset = payload.get("onset_s")
        why = (
            "no response in the window"
            if onset is None
            else f"response {onset:+.2f} s from the decision point"
        )
        # keyed by what the value is (the onset in seconds from the decision point), so a reader
        # never shows it under the step's name, "posterior"
        return Result(
            str(payload.get("case_id")),
            "onset_s",
            onset,
            f"{why}; intent mode {payload.get('posterior_mode')}",
            {"category": payload.get("category"), "n_overlaps": len(payload.get("overlaps") or [])},
        )


class Composite(Metric):
    """TACT's composite S with its four categories and population S_T / S_L (BCa intervals)."""

    name = "tact_composite"
    version = METRIC_VERSION
    needs = ("posterior",)
    tables = ("tact_composite", "tact_episodes", "tact_slices", "tact_table1", "tact_intents")
    owns = (
        "benchmark.duration_reference",
        "benchmark.n_resamples",
        "benchmark.confidence",
        "benchmark.topline_folds",
        "benchmark.laws",
    )

    def __init__(self, bench: Any):
        self.bench = bench

    def identity(self) -> dict[str, Any]:
        # the laws' content hash, not their path: a law file rewritten in place rescores
        return {**super().identity(), "laws_sha256": laws_provenance(self.bench)["laws_sha256"]}

    def compute(self, run: Run, scores_dir: Path) -> str:
        done, skipped = read_outputs(run, "posterior")
        judged = {u.case_id: d for u, d in done}
        with use_laws(
            getattr(self.bench, "law_set", None)
        ):  # every table below scores against benchmark.laws
            return score_tables(
                self.bench,
                judged,
                skipped,
                system=str(run.cfg.model.name),
                seed=run.seed,
                model_id=run.model_id,
                run_id=run.run_id,
                data_dir=run.data_dir,
                scores_dir=scores_dir,
            )
