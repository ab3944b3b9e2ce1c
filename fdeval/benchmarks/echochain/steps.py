"""EchoChain's steps after the live sessions: control -> segment -> grade -> the scores.

* `control` (stage run, `control/<case_id>.wav|h5`): the half-duplex control (§1, §6). The
  conversation's evaluated exchange is played again to the same model: the history before it as
  text in the responder prompt, its message as recorded, then the barge-in's content, the same
  audio, as an ordinary turn once the assistant has finished its answer;
* `segment` (stage transcribe, `exchanges/<asr>-<key>/<case_id>.json`): the exchanges of the live (or
  replayed) session and of its control, from the model's text stream (`asr=exact`) or an ASR
  backend, plus each barge-in's scheduled and actual time;
* `grade` (stage judge, `graded/<key>/<case_id>.json`): on the evaluated exchange (the last interrupted
  one: a flagged conversation stopped at it) the classifier's k votes, the rubric, its grades for
  the interrupted and for the control delivery, and the automatic taxonomy label;
* the `echochain` metric: `scores/<key>/echochain_*.csv|.md` (scoring.py) with human review labels
  applied, `echochain_results.csv` (one row per conversation with seeds, role settings, prompt
  hashes and versions) and `echochain_timing.csv` (barge-in offsets).
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from collections import Counter
from pathlib import Path
from typing import Any, Mapping

import numpy as np
from omegaconf import OmegaConf

import fdeval
from fdeval.audio.io import read_wav
from fdeval.cases.schema import case_to_dict
from fdeval.engine.executor import read_outputs
from fdeval.engine.run import Run, SessionState, build
from fdeval.engine.shared import RecordSessions
from fdeval.engine.steps import CaseStep, Metric, Unit
from fdeval.errors import FdevalError
from fdeval.files import write_json_atomic
from fdeval.metrics.csvio import write_csv
from fdeval.recording import Session, read_info, read_session
from fdeval.transcript.build import log_model_words
from fdeval.types import TestCase, Turn, WordTiming

from .classifier import Exchange
from .dialogue import history_text, responder_prompt
from .review import apply_human, human_labels, save_review_input
from .rubrics import Grade as RubricGrade
from .scoring import GradedConversation, score_tables, write_tables
from .segment import (
    barge_in_label,
    exchange_from_dict,
    exchange_to_dict,
    exchanges,
    log_spans,
    message_label,
)
from .taxonomy import TAXONOMY, category

CONTROL_FOLDER = "control"


def said_of(case: TestCase, log: Session) -> dict[int, dict[str, Any]]:
    """What the user said per exchange: the live policy's record, or the replayed case's texts."""
    rec = log.policy_record
    if rec:
        return {int(k): v for k, v in rec["said"].items()}
    r = case.data.replay
    if r is not None:
        k = int(r["exchange"])
        return {
            k: {
                "message": r["message"],
                "barge_in": r["barge_in"],
                "barge_in_label": r["barge_in_label"],
            }
        }
    raise FdevalError(
        f"case {case.case_id}: its session log has no user_policy_record; record it again (stage=run)"
    )


def model_pieces(log: Session, asr_words: list | None) -> list[tuple[float, str]]:
    """The assistant's words or text pieces with their play times (ASR words when given)."""
    if asr_words is not None:
        return [(w.start_s, w.text) for w in asr_words]
    return [(r.play_s, r.text) for r in log.model_text if not r.dropped]


def evaluated_index(exs: tuple[Exchange, ...]) -> int | None:
    """The exchange a conversation is judged on: its last interrupted one."""
    hit = [e.index for e in exs if e.interrupted]
    return hit[-1] if hit else None


def history_of(case: TestCase, exs: tuple[Exchange, ...], k: int) -> tuple[Exchange, ...]:
    """The exchanges before k: from the session, or, for a replayed exchange, from its source."""
    r = case.data.replay
    if r is not None:
        return tuple(exchange_from_dict(case.case_id, d) for d in r["history"])
    return tuple(e for e in exs if e.index < k)


def _user_words(log: Session, said: Mapping[int, Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The user's words on the session clock: each played turn's TTS word times (`said`, relative to
    the turn) moved to where the turn started, those past a cut-short turn's end left out."""
    out = []
    for t in log.turns:
        m = re.match(r"^ex([0-9]+)_(message|barge_in)$", t.label)
        start, end = t.start_s, t.end_s
        if m is None or math.isnan(start):
            continue
        for text, a, b in (said.get(int(m.group(1))) or {}).get(f"{m.group(2)}_words") or []:
            if start + float(a) < end:
                out.append(
                    {
                        "speaker": "user",
                        "text": str(text),
                        "start_s": round(start + float(a), 4),
                        "end_s": round(min(start + float(b), end), 4),
                    }
                )
    return out


def _span_times(sp: Any) -> dict[str, float | None]:
    """An exchange's times on the session clock (seconds; None: that turn never played), kept with
    the segmented exchange so the review export and the review page can cue the audio."""

    def t(x: float) -> float | None:
        return None if math.isnan(x) or math.isinf(x) else round(float(x), 4)

    return {
        "message_start_s": t(sp.message_start_s),
        "message_end_s": t(sp.message_end_s),
        "barge_in_start_s": t(sp.barge_in_start_s),
        "barge_in_end_s": t(sp.barge_in_end_s),
        "end_s": t(sp.end_s),
    }


def _words(raw: Any) -> tuple[WordTiming, ...]:
    return tuple(WordTiming(str(t), float(a), float(b)) for t, a, b in (raw or []))


CONTROL_HISTORIES = ("text", "audio")


class HalfDuplexControl(RecordSessions):
    """The half-duplex control sessions (see the module doc). `benchmark.control_history` says how
    the earlier exchanges reach the model: ``text`` (the responder prompt holds them, as the
    paper's replay gives a flagged exchange to other models) or ``audio`` (the live session's own
    user turns of those exchanges are played again, barge-ins at their offset after the model's
    new onset; the model answers them anew), so the control hears its history in the live arm's
    modality and differs from it only in the evaluated exchange's interruption."""

    name = "control"
    stage = "run"
    folder = CONTROL_FOLDER
    needs = ("run",)
    owns = (
        "benchmark.control_history",
    )  # in the control's digest (the derived case), not the run's identity

    def __init__(self, bench: Any):
        self.bench = bench
        self._derived: dict[str, tuple[TestCase, str, list[tuple[float, float]]]] = {}

    def session_cases(self, run: Run) -> list[TestCase]:
        out = []
        for case in run.cases:
            s = run.session_state(case)
            if s.state != "done":
                continue  # failed or invalid live sessions have nothing to control
            derived = self._derive(run, case, s.session_id)
            if derived is not None:
                out.append(derived)
        return out

    def _derive(self, run: Run, case: TestCase, session_id: str) -> TestCase | None:
        log = read_session(run.folder.session_paths(case.case_id)[0])
        said = said_of(case, log)
        sps = log_spans(log)
        exs = exchanges(case.case_id, sps, said, model_pieces(log, None), log.info.text_stream)
        k = evaluated_index(exs)
        if k is None:
            return None
        sp = next(x for x in sps if x.index == k)
        timeout = self.bench.turn_timeout_s
        turns: list[Turn] = []
        cuts: list[tuple[float, float]] = []

        def add(
            label: str, kind: str, text: str, words: Any, a: float, b: float, barge: bool = False
        ) -> None:
            turns.append(
                Turn(
                    case.case_id,
                    len(turns),
                    label,
                    kind,
                    "",
                    text,
                    _words(words),
                    b - a,
                    timeout,
                    barge_in_after_s=self.bench.barge_in_after_s if barge else None,
                    barge_in_handling="hold" if barge else None,
                    subtype="interrupt" if barge else None,
                )
            )
            cuts.append((a, b))

        audio_history = self.bench.control_history == "audio"
        for h in (x for x in sps if x.index < k) if audio_history else ():
            said_h = said[h.index]
            add(
                message_label(h.index),
                "take-turn",
                str(said_h["message"]),
                said_h.get("message_words"),
                h.message_start_s,
                h.message_end_s,
            )
            if h.barge_in_played:  # as in the live arm: a barge-in timed from the model's onset
                add(
                    barge_in_label(h.index),
                    "barge-in",
                    str(said_h["barge_in"]),
                    said_h.get("barge_in_words"),
                    h.barge_in_start_s,
                    h.barge_in_end_s,
                    barge=True,
                )
        s = said[k]
        add(
            message_label(k),
            "take-turn",
            str(s["message"]),
            s.get("message_words"),
            sp.message_start_s,
            sp.message_end_s,
        )
        # the barge-in's content as an ordinary turn, once the answer is complete
        add(
            barge_in_label(k),
            "take-turn",
            str(s["barge_in"]),
            s.get("barge_in_words"),
            sp.barge_in_start_s,
            sp.barge_in_end_s,
        )
        prompt = (
            responder_prompt()
            if audio_history
            else responder_prompt(history_text(history_of(case, exs, k), labels=False), None, k)
        )
        derived = TestCase(
            case.case_id,
            case.conversation_id,
            case.benchmark,
            case.scenario,
            prompt,
            tuple(turns),
            case.seed,
            case.version,
            case.data,
        )
        self._derived[case.case_id] = (derived, session_id, cuts)
        return derived

    def digest(self, run: Run, case: TestCase) -> str:
        derived, live_session, _ = self._derived[case.case_id]
        blob = json.dumps(
            {"case": case_to_dict(derived), "live_session_id": live_session},
            sort_keys=True,
            default=str,
        )
        return hashlib.sha256(blob.encode()).hexdigest()[:16]

    def audio(self, run: Run, case: TestCase, sample_rate: int) -> list[np.ndarray]:
        """The live session's own user audio of the exchange: the identical samples."""
        _, _, cuts = self._derived[case.case_id]
        x, sr = read_wav(run.folder.session_paths(case.case_id)[1], mono=False)
        user = x[:, 0] if x.ndim == 2 else x
        if sr != sample_rate:
            raise FdevalError(
                f"{run.folder.session_paths(case.case_id)[1]}: recorded at {sr} Hz, "
                f"the control session runs at {sample_rate} Hz"
            )
        return [
            np.ascontiguousarray(user[int(round(a * sr)) : int(round(b * sr))]) for a, b in cuts
        ]

    def policy(self, run: Run, case: TestCase, audio: list[np.ndarray]) -> Any:
        return None  # scripted: the message, then the content after the complete answer

    def state(self, run: Run, case: TestCase, model_id: str | None = None) -> SessionState:
        s = super().state(run, case, model_id)
        if s.state == "foreign":
            h5 = run.folder.session_paths(case.case_id, self.folder)[0]
            if read_info(h5).run_id == run.run_id:
                # this run's control of an older live session (recorded again since): out of date, not foreign
                return SessionState(
                    case.case_id, "stale", f"made from an older live session ({s.why})"
                )
        return s


def control_inputs(bench: Any, run: Run, unit: Unit) -> dict[str, Any]:
    """A unit's control session (its id), which the segment and grade files are made from too."""
    if not bench.half_duplex:
        return {}
    h5 = run.folder.session_paths(unit.case_id, CONTROL_FOLDER)[0]
    if not h5.exists():
        return {"control_session": None}
    try:
        return {"control_session": read_info(h5).session_id}
    except (OSError, ValueError, KeyError):
        return {"control_session": "unreadable"}


class Segment(CaseStep):
    name = "segment"
    stage = "transcribe"
    folder = "exchanges"
    uses = owns = ("asr",)

    def __init__(self, bench: Any):
        self.bench = bench

    # 2: a barge-in after the answer had ended is late (segment.py), not an interruption
    version = "2"

    def identity(self, run: Run) -> dict[str, Any]:
        return {"asr": OmegaConf.to_container(run.cfg.asr, resolve=True)}

    def label(self, run: Run) -> str:
        return str(run.cfg.asr.get("name") or "asr")

    def inputs(self, run: Run, unit: Unit) -> dict[str, Any]:
        return control_inputs(self.bench, run, unit)

    def prepare(self, run: Run, todo: list[Unit]) -> None:
        self.asr = None if run.cfg.asr.name == "exact" else build(run.cfg.asr)

    def _exchanges(
        self, run: Run, case: TestCase, folder: str
    ) -> tuple[tuple[Exchange, ...], Session, dict, list | None]:
        h5, wav = run.folder.session_paths(case.case_id, folder)
        log = read_session(
            h5, tables=("turns", "vad_segments", "model_text", "model_chunks", "flushes")
        )
        words = (
            None if self.asr is None else self.asr.transcribe_channel(wav, 1, case.case_id, "model")
        )
        # the control's texts are the live exchange's (make() puts them back in)
        said = said_of(case, log) if folder == "sessions" else {}
        exs = exchanges(
            case.case_id, log_spans(log), said, model_pieces(log, words), log.info.text_stream
        )
        return exs, log, said, words

    def make(self, run: Run, unit: Unit) -> dict[str, Any]:
        case = unit.case
        exs, log, said, asr_words = self._exchanges(run, case, "sessions")
        k = evaluated_index(exs)
        late = {e.index: e.late for e in exs if e.barge_in is not None}
        timing = []
        for t in log.turns:
            if t.turn_type != "barge-in":
                continue
            ex = int(t.label[2 : t.label.index("_")])
            timing.append(
                {
                    "exchange": ex,
                    "scheduled_s": t.scheduled_s,
                    "actual_s": t.actual_s,
                    "onset_s": t.onset_s,
                    "delay_s": t.delay_s,
                    "error_s": t.error_s,
                    "wait_reason": t.wait_reason,
                    "model_speaking": (not late.get(ex, False)) if t.played else None,
                }
            )
        times = {sp.index: _span_times(sp) for sp in log_spans(log)}
        words = _user_words(log, said) + [
            {
                "speaker": "model",
                "text": w.text,
                "start_s": round(w.start_s, 4),
                "end_s": round(w.end_s, 4),
            }
            for w in (asr_words if asr_words is not None else log_model_words(case.case_id, log))
        ]
        words.sort(key=lambda w: (w["start_s"], w["speaker"]))
        out: dict[str, Any] = {
            # a word-timed transcript, as a transcribe-stage file has one (the review page follows the playhead)
            "words": words,
            "duration_s": log.duration_s,
            "case_id": case.case_id,
            "exchanges": [{**exchange_to_dict(e), **times.get(e.index, {})} for e in exs],
            "evaluated": k,
            "said": {
                str(i): {kk: v for kk, v in s.items() if not kk.endswith("_words")}
                for i, s in said.items()
            },
            "record": {kk: v for kk, v in (log.policy_record or {}).items() if kk != "said"},
            "barge_ins": timing,
            "clock": log.info.clock,
            "frame_s": log.info.frame_s,
            "control": None,
        }
        h5c = run.folder.session_paths(case.case_id, CONTROL_FOLDER)[0]
        if self.bench.half_duplex and k is not None and h5c.exists():
            cexs, clog, _, _ = self._exchanges(run, case, CONTROL_FOLDER)
            # the control's "barge-in" turn is the same content as an ordinary turn after the answer
            # (with control_history=audio the earlier exchanges come first: only exchange k is graded)
            fixed = [
                Exchange(
                    e.case_id,
                    e.index,
                    exs[[x.index for x in exs].index(k)].message,
                    e.answer_before,
                    said[k]["barge_in"],
                    said[k]["barge_in_label"],
                    e.continuation,
                )
                for e in cexs
                if e.index == k
            ]
            out["control"] = {
                "session_id": clog.session_id,
                "valid": clog.info.valid,
                "exchanges": [exchange_to_dict(e) for e in fixed],
            }
        return out

    def check(self, payload: Mapping[str, Any], path: Path) -> None:
        for key in ("case_id", "exchanges", "evaluated", "said", "barge_ins"):
            if key not in payload:
                raise ValueError(f"missing {key!r}")


class Grade(CaseStep):
    name = "grade"
    stage = "judge"
    folder = "graded"
    needs = ("segment",)
    retries = 0  # the roles retry their own requests; what still fails is recorded as an error
    # read here only (the classifier also runs in the loop, so it stays in the run identity)
    owns = ("benchmark.drafter", "benchmark.grader")

    def __init__(self, bench: Any):
        self.bench = bench

    def identity(self, run: Run) -> dict[str, Any]:
        b = self.bench
        return {r: b.role(r).identity() for r in ("classifier", "drafter", "grader")} | {
            "score_on": b.score_on
        }

    def inputs(self, run: Run, unit: Unit) -> dict[str, Any]:
        return control_inputs(self.bench, run, unit)

    def preflight(self, run: Run, steps: set[str]) -> None:
        if "run" in steps or self.name in steps:
            for r in ("classifier",):
                ready = getattr(self.bench.role(r), "check_ready", None)
                if ready is not None:
                    ready()

    def make(self, run: Run, unit: Unit) -> dict[str, Any]:
        b, case = self.bench, unit.case
        seg = json.loads(run.file_of("segment", unit.case_id).read_text())
        exs = tuple(exchange_from_dict(case.case_id, d) for d in seg["exchanges"])
        k = seg["evaluated"]
        base = {
            "case_id": case.case_id,
            "model_id": run.model_id,
            "seed_id": case.data.seed.seed_id,
            "seed": case.data.seed.to_dict(),
            "topic": case.data.seed.topic,
            "responder": case.data.responder,
            "mode": case.data.mode,
        }
        if k is None:
            return {
                **base,
                "value": None,
                "status": "ok",
                "evaluated": None,
                "flagged": False,
                "explanation": "no interrupted exchange (the session ended before exchange two, or every "
                "barge-in came after the answer had ended)",
                "metadata": {},
            }
        ex = next(e for e in exs if e.index == k)
        history = history_of(case, exs, k)
        verdict = b.role("classifier").classify(case.data.seed, history, ex, case.case_id)
        rubric = b.role("drafter").draft(case.data.seed, history, ex, case.case_id)
        grades = b.role("grader").grade(rubric, history, ex)
        control = None
        if seg.get("control"):
            cex = exchange_from_dict(case.case_id, seg["control"]["exchanges"][-1])
            control = {
                "session_id": seg["control"]["session_id"],
                "valid": seg["control"]["valid"],
                "grades": [_grade_dict(g) for g in b.role("grader").grade(rubric, history, cex)],
            }
        passed = all(g.passed for g in grades)
        taxonomy = None if passed else propose_taxonomy(verdict)
        status = "ok" if verdict.status == "ok" else "error"
        why = explain(k, verdict, rubric, grades, taxonomy)
        if status == "error":
            why = f"classifier error: {'; '.join(verdict.errors)[:300]}"
        loop = (seg.get("record") or {}).get("loop_verdicts") or []
        return {
            **base,
            "value": ("pass" if passed else "fail") if status == "ok" else None,
            "status": status,
            "explanation": why,
            "evaluated": k,
            "flagged": verdict.flagged,
            "flagged_in_loop": any(v.get("flagged") for v in loop),
            "stop_reason": (seg.get("record") or {}).get("stop_reason"),
            "classifier": verdict.to_dict(),
            "rubric": {
                "source": rubric.source,
                "drafter": b.role("drafter").identity(),
                "criteria": [c.to_dict() for c in rubric.criteria],
            },
            "grader": b.role("grader").identity(),
            "grades": [_grade_dict(g) for g in grades],
            "control": control,
            "taxonomy": taxonomy,
            "taxonomy_source": "auto" if taxonomy else None,
            "metadata": {"flagged": verdict.flagged, "taxonomy": taxonomy},
        }

    def check(self, payload: Mapping[str, Any], path: Path) -> None:
        self.result(payload)
        for key in ("case_id", "evaluated", "flagged"):
            if key not in payload:
                raise ValueError(f"missing {key!r}")


def explain(
    k: int, verdict: Any, rubric: Any, grades: tuple[RubricGrade, ...], taxonomy: str | None
) -> str:
    """The grade's explanation, as the review page shows it: the criteria, then each classifier
    vote with its fields and reason, then the automatic taxonomy label."""
    yes = sum(verdict.votes)
    lines = [
        f"{sum(g.passed for g in grades)}/{len(grades)} criteria passed on exchange {k}; the classifier "
        f"{'flagged' if verdict.flagged else 'did not flag'} it: {yes} of {len(verdict.votes)} vote(s) for a "
        f"failure ({verdict.rule} rule{', a tie flags' if verdict.tie else ''})"
    ]
    text = {c.criterion_id: c.text for c in rubric.criteria}
    for g in grades:
        lines.append(
            f"  {'PASS' if g.passed else 'FAIL'} {g.criterion_id}: {text.get(g.criterion_id, '')} -- {g.reason}"
        )
    for i, (s, v) in enumerate(zip(verdict.samples, verdict.votes), start=1):
        lines.append(
            f"  vote {i}: {'failure' if v else 'no failure'} (type {s.failure_type or 'none'}, memory "
            f"{'YES' if s.memory_demonstrated else 'NO'}, integration {s.integration}, confidence "
            f"{s.confidence}): {s.reason}"
        )
    lines.append(
        f"taxonomy (automatic): {taxonomy}"
        if taxonomy
        else "taxonomy (automatic): none"
        + ("" if verdict.flagged else " (only a flagged conversation gets one)")
    )
    return "\n".join(lines)


def _grade_dict(g: RubricGrade) -> dict[str, Any]:
    return {
        "criterion_id": g.criterion_id,
        "passed": bool(g.passed),
        "reason": g.reason,
        "source": g.source,
    }


def propose_taxonomy(verdict: Any) -> str | None:
    """The automatic taxonomy label of a conversation: only a flagged verdict has one (paper
    section 5: flagged conversations are the ones categorised); an unflagged one, a rubric failure
    included, gets None. The label is :func:`taxonomy.category` of the flagging samples, the most
    common one (ties: TAXONOMY order)."""
    if not getattr(verdict, "flagged", False):
        return None
    counts = Counter(
        category(s.memory_demonstrated, s.integration, s.failure_type)
        for s, v in zip(verdict.samples, verdict.votes)
        if v
    )
    if not counts:
        return None
    top = max(counts.values())
    return next(t for t in TAXONOMY if counts.get(t) == top)


class Scores(Metric):
    """MPR / MCP, failures per taxonomy type, the half-duplex comparison (scoring.py)."""

    name = "echochain"
    version = "1"
    needs = ("grade",)
    tables = (
        "echochain_scores",
        "echochain_failures",
        "echochain_half_duplex",
        "echochain_results",
        "echochain_timing",
    )
    owns = ("benchmark.score_on", "benchmark.n_resamples", "benchmark.confidence")

    def __init__(self, bench: Any):
        self.bench = bench

    def compute(self, run: Run, scores_dir: Path) -> str:
        b = self.bench
        done, skipped = read_outputs(run, "grade")
        segs, _ = read_outputs(run, "segment")
        timing = [dict(t, case_id=u.case_id) for u, d in segs for t in d.get("barge_ins", [])]
        labels = human_labels(run.run_dir)
        model = str(run.cfg.model.name)
        convs, rows, review = [], [], []
        seg_of = {u.case_id: d for u, d in segs}
        for u, d in done:
            if d.get("evaluated") is None:
                continue
            flagged = d.get("flagged") if d.get("status") == "ok" else None
            if b.score_on == "flagged" and b.mode == "live" and not flagged:
                continue  # a replayed exchange was flagged when it was chosen: every model is scored on it
            grades = tuple(
                RubricGrade(g["criterion_id"], bool(g["passed"]), g["reason"], g["source"])
                for g in d.get("grades") or []
            )
            control = d.get("control") or {}
            cgrades = (
                tuple(
                    RubricGrade(g["criterion_id"], bool(g["passed"]), g["reason"], g["source"])
                    for g in control.get("grades") or []
                )
                if control.get("valid", True)
                else ()
            )
            c = GradedConversation(
                u.case_id,
                u.case.conversation_id,
                model,
                d["seed_id"],
                d["topic"],
                flagged,
                d.get("status") == "error",
                grades,
                cgrades,
                d.get("taxonomy"),
                d.get("taxonomy_source") or "auto",
            )
            if u.case_id in labels:
                c = apply_human(c, labels[u.case_id])
            convs.append(c)
            rows.append(self._row(run, u, d, c))
            review.append(self._review_item(run, u, d, seg_of.get(u.case_id) or {}))
        tables = score_tables(
            convs, n_resamples=b.n_resamples, confidence=b.confidence, seed=run.seed
        )
        text = write_tables(tables, scores_dir, "echochain")
        write_csv(rows, scores_dir / "echochain_results.csv")
        errs = [
            abs(float(t["error_s"]))
            for t in timing
            if t["error_s"] is not None and not math.isnan(float(t["error_s"]))
        ]
        write_csv(
            [{**t, "error_ms": round(1000 * float(t["error_s"]), 3)} for t in timing]
            or [{"case_id": "", "exchange": "", "error_ms": ""}],
            scores_dir / "echochain_timing.csv",
        )
        first_exchange = [t for t in timing if t["exchange"] == 1]
        if first_exchange:
            raise FdevalError(
                f"echochain: a barge-in in exchange 1 of {first_exchange[0]['case_id']} (never allowed)"
            )
        landed = [t for t in timing if t.get("model_speaking") is not None]
        if landed:  # docs/echochain.md, "A barge-in after the answer"
            after = sum(1 for t in landed if not t["model_speaking"])
            unscored = sum(1 for _, d in done if d.get("evaluated") is None)
            text += (
                f"\nbarge-ins after the answer had ended (not interruptions, left out of the metrics): {after} of "
                f"{len(landed)} ({100.0 * after / len(landed):.1f} %); conversations without an interruption: "
                f"{unscored} of {len(done)}"
            )
        if errs:
            text += (
                f"\nbarge-in offsets ({len(errs)}): |actual - scheduled| "
                f"p50 {1000 * float(np.percentile(errs, 50)):.2f} ms, "
                f"p99 {1000 * float(np.percentile(errs, 99)):.2f} ms, max {1000 * max(errs):.2f} ms"
            )
        write_json_atomic(
            scores_dir / "echochain_settings.json",
            {"benchmark": b.settings(), "run_id": run.run_id},
        )
        if review:  # the human-review hand-off: `python -m fdeval.benchmarks.echochain.review export RUN_DIR OUT`
            save_review_input(run.run_dir, review)
        return text

    @staticmethod
    def _review_item(
        run: Run, u: Unit, d: Mapping[str, Any], seg: Mapping[str, Any]
    ) -> dict[str, Any]:
        exs = seg.get("exchanges") or []
        lines = []
        for e in exs:
            lines.append(f"[exchange {e['index']}] USER: {e['message']}")
            if e.get("barge_in"):
                lines += [
                    f"ASSISTANT (before the barge-in): {e['answer_before']}",
                    f"USER (barge-in, {e.get('barge_in_label')}): {e['barge_in']}",
                ]
            lines.append(f"ASSISTANT: {e['continuation']}")
        model_id = str(d.get("model_id") or "")
        return {
            "case_id": u.case_id,
            "conversation_id": u.case.conversation_id,
            "transcript_text": "\n".join(lines),
            "exchanges": exs,
            "rubric": (d.get("rubric") or {}).get("criteria") or [],
            "wav_path": str(run.folder.session_paths(u.case_id)[1]),
            "model": [m for m in {str(run.cfg.model.name), model_id, model_id.split(":")[0]} if m],
        }

    def _row(
        self, run: Run, u: Unit, d: Mapping[str, Any], c: GradedConversation
    ) -> dict[str, Any]:
        cl = d.get("classifier") or {}
        passed = sum(g.passed for g in c.grades)
        return {
            "case_id": u.case_id,
            "model": c.model,
            "model_id": d.get("model_id"),
            "seed_id": c.seed_id,
            "topic": c.topic,
            "responder": d.get("responder"),
            "mode": d.get("mode"),
            "exchange": d.get("evaluated"),
            "flagged": c.flagged,
            "flagged_in_loop": d.get("flagged_in_loop"),
            "stop_reason": d.get("stop_reason"),
            "criteria": len(c.grades),
            "passed": passed,
            "mpr_pass": bool(c.grades) and passed == len(c.grades),
            "control_criteria": len(c.control_grades),
            "control_passed": sum(g.passed for g in c.control_grades),
            "taxonomy": c.taxonomy,
            "taxonomy_source": c.taxonomy_source,
            "screened_out": c.screened_out,
            "rubric_source": (d.get("rubric") or {}).get("source"),
            "classifier_error": c.classifier_error,
            "classifier": json.dumps((cl.get("classifier") or {}), sort_keys=True),
            "roles": json.dumps(self.bench.role_identities(), sort_keys=True),
            "deviations": json.dumps(self.bench.role_deviations(), sort_keys=True),
            "seed": run.seed,
            "case_seed": u.case.seed,
            "barge_in_after_s": self.bench.barge_in_after_s,
            "run_id": run.run_id,
            "benchmark_version": self.bench.version,
            "fdeval": fdeval.__version__,
        }
