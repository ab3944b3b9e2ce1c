"""Instruct-FD's evaluation: transcribe -> judge each instruction -> IAS tables.

* `transcribe`: both channels' words on the session clock: the user's from the TTS timings, the
  model's from its own text stream (`asr=exact`) or from an ASR backend on the model channel
  (`asr=whisper|qwen3`) -> `transcripts/<asr>-<key>/<case_id>.json` (+ a `.txt` rendering);
* `judge`: one verdict per (case, instruction it is judged against) ->
  `verdicts/<judge>-<key>/<case_id>@<policy>.json`; a judge error is recorded as `error`, never
  as `not_adhere`, and judged again on relaunch;
* the IAS metric: `scores/<judge>-<key>/ias.csv|.md`, `results.csv`, `verdicts.csv` and the run
  report (confidence intervals, delta-IAS, scenario tables, figure).
The `asr` and `judge` groups belong to these steps, not to the run: another judge or ASR reuses
the recordings, and its files go to a folder of their own beside the others'.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping

from omegaconf import OmegaConf

import fdeval
from fdeval.benchmarks.instructfd.judges.base import (
    VerdictError,
    verdict_from_dict,
    verdict_to_dict,
)
from fdeval.benchmarks.instructfd.metrics.ias import METRIC_VERSION, ias_rows, write_markdown
from fdeval.benchmarks.instructfd.reporting.build import (
    JUDGE_LIMITS,
    ReportSettings,
    RunData,
    counts_note,
    write_run_report,
)
from fdeval.benchmarks.instructfd.reporting.runs import verdict_table
from fdeval.engine.executor import read_outputs
from fdeval.engine.run import Run, build
from fdeval.engine.steps import CaseStep, Metric, Result, Unit
from fdeval.files import read_json_file, write_json_atomic, write_text_atomic
from fdeval.metrics.csvio import write_csv
from fdeval.transcript.build import build_transcript
from fdeval.transcript.io import TranscriptError, transcript_from_dict, transcript_to_dict
from fdeval.transcript.render import render
from fdeval.types import TestCase


def read_transcript(path: Path):
    """A transcript written by the transcribe step (its provenance set aside)."""
    d = read_json_file(path, TranscriptError)
    if isinstance(d, dict):
        d = {k: v for k, v in d.items() if k != "provenance"}
    return transcript_from_dict(d, path)


class Transcribe(CaseStep):
    name = stage = "transcribe"
    folder = "transcripts"
    uses = owns = ("asr",)

    def identity(self, run: Run) -> dict[str, Any]:
        return {"asr": OmegaConf.to_container(run.cfg.asr, resolve=True)}

    def label(self, run: Run) -> str:
        return str(run.cfg.asr.get("name") or "asr")

    def prepare(self, run: Run, todo: list[Unit]) -> None:
        self.asr = None
        if run.cfg.asr.name != "exact":
            self.asr = build(run.cfg.asr)
            write_json_atomic(run.step_dir(self) / "asr.json", {"identity": self.asr.identity()})

    def make(self, run: Run, unit: Unit) -> dict[str, Any]:
        h5, wav = run.folder.session_paths(unit.case_id)
        model_words = (
            None if self.asr is None else self.asr.transcribe_channel(wav, 1, unit.case_id, "model")
        )
        triggers = [[(t.kind, t.at_s) for t in turn] for turn in unit.case.data.triggers]
        tr = build_transcript(unit.case, h5, model_words=model_words, triggers=triggers)
        write_text_atomic(unit.path.with_suffix(".txt"), render(tr) + "\n")
        return transcript_to_dict(tr)

    def check(self, payload: Mapping[str, Any], path: Path) -> None:
        try:
            transcript_from_dict({k: v for k, v in payload.items() if k != "provenance"}, path)
        except TranscriptError as e:
            raise ValueError(str(e)) from None

    def finish(self, run: Run, made: list[Unit]) -> None:
        asr = getattr(self, "asr", None)
        if asr is not None and getattr(asr, "runtime", None):
            write_json_atomic(
                run.step_dir(self) / "asr.json",
                {"identity": asr.identity(), "runtime": asr.runtime},
            )


class Judge(CaseStep):
    """One verdict per instruction the case is judged against (its own, or its siblings' for an
    un-instructed baseline)."""

    name = stage = "judge"
    folder = "verdicts"
    needs = ("transcribe",)
    retries = 0  # the judges retry their own requests; a failure is an `error` verdict
    uses = owns = ("judge",)

    def preflight(self, run: Run, steps: set[str]) -> None:
        """Judge settings are checked before any session runs; new sessions will need verdicts,
        so the judge's key and SDK must be there too."""
        judge = run.component("judge")
        if "run" in steps and hasattr(judge, "check_ready"):
            judge.check_ready()

    def identity(self, run: Run) -> dict[str, Any]:
        return run.component("judge").provenance()

    def label(self, run: Run) -> str:
        return str(run.component("judge").id)

    def keys(self, case: TestCase) -> tuple[str, ...]:
        return tuple(case.data.judge_policies)

    def make(self, run: Run, unit: Unit) -> dict[str, Any]:
        judge = run.component("judge")
        transcript = read_transcript(run.file_of("transcribe", unit.case_id))
        verdict = judge.judge(unit.case, unit.key, transcript)
        return {**verdict_to_dict(verdict), "model_id": run.model_id}

    def check(self, payload: Mapping[str, Any], path: Path) -> None:
        try:
            verdict_from_dict(payload, path)
        except VerdictError as e:
            raise ValueError(str(e)) from None

    def result(self, payload: Mapping[str, Any]) -> Result:
        v = payload.get("verdict")
        return Result(
            str(payload.get("case_id")),
            str(payload.get("policy")),
            None if v == "error" else v,
            str(payload.get("reasoning", "")),
            {"judge": payload.get("judge")},
            "error" if v == "error" else "ok",
        )


class IAS(Metric):
    """Instruction adherence per instruction, the un-instructed baseline and delta-IAS."""

    name = "ias"
    version = METRIC_VERSION
    needs = ("judge",)
    tables = ("ias", "results", "verdicts", "ias_ci", "delta_ias", "scenario_ias")

    def compute(self, run: Run, scores_dir: Path) -> str:
        settings = ReportSettings.from_config(run.cfg.get("report"))
        done, skipped = read_outputs(run, "judge")
        verdicts, model_ids, ok_cases = [], {}, {}
        for unit, d in done:
            verdicts.append(verdict_from_dict(d, unit.path))
            ok_cases[unit.case_id] = unit.case
            if isinstance(d.get("model_id"), str):
                model_ids[(unit.case_id, unit.key)] = d["model_id"]
        judge = run.component("judge")
        scored = {c.case_id: c for c, _ in run.scorable("score")[0]}
        (judge_step,) = run.steps_named(("judge",))
        provenance = {
            "benchmark": run.benchmark.name,
            "benchmark_version": run.benchmark.version,
            "model_id": run.model_id,
            **judge.provenance(),
            "verdicts_dir": str(run.step_dir(judge_step).relative_to(run.run_dir)),
            "metric_version": METRIC_VERSION,
            "seed": run.seed,
            "fdeval_version": fdeval.__version__,
            "run_id": run.run_id,
            "sessions_scored": len(scored),
            "sessions_invalid": len(skipped["invalid"]),
            "sessions_failed": len(skipped["failed"]),
        }
        rows = ias_rows(verdicts, scored, provenance)
        data = RunData(
            str(run.cfg.model.name),
            verdicts,
            scored,
            provenance,
            model_ids,
            str(run.run_dir),
            judge.limits,
        )
        write_csv(rows, scores_dir / "ias.csv")
        notes = [counts_note(data)] + ([f"judge limits: {judge.limits}"] if judge.limits else [])
        write_markdown(rows, scores_dir / "ias.md", notes)
        write_text_atomic(scores_dir / JUDGE_LIMITS, judge.limits + "\n")
        per_case = [
            {"case_id": v.case_id, "policy": v.policy, "verdict": v.verdict, **provenance}
            for v in verdicts
        ]
        write_csv(per_case, scores_dir / "results.csv")
        write_csv(
            verdict_table(verdicts, scored, model_ids, provenance), scores_dir / "verdicts.csv"
        )
        write_run_report(data, scores_dir, settings, ias_rows=rows)
        return (
            (scores_dir / "ias.md").read_text() + "\n" + (scores_dir / "delta_ias.md").read_text()
        )
