"""Full-Duplex-Bench's evaluation on the engine: transcribe -> rate -> the `fdb` metric.

* `clean` (stage run): v1.5's `clean_input.wav`, a second session of each v1.5 case;
* `transcribe` (stage transcribe): per session, the model's words on the sample's clock (its
  text stream with `asr=exact`, else the ASR backend on its channel), the speech segments of both
  channels (Silero VAD with FDB's settings, `benchmark.vad_min_speech_s`), and the sample's FDB
  files under `<step folder>/fdb/<task folder>/<sample>/`: `input.wav` and the annotation
  (copied from the data), `output.wav` (the model channel from the sample's first frame, exactly
  as long as `input.wav`), `output.json` (`{text, chunks: [{text, timestamp}]}`; for user
  interruption only the words from the interruption's end on, as FDB's ASR crops, with the whole
  list in `output_full.json`); v1.5 adds `clean_output.wav` / `clean_output.json` from the
  sample's `clean` session. FDB's own evaluators read `<step folder>/fdb/<task folder>` as is;
* `rate` (stage judge): user interruption's 0-5 relevance rating where the model took the turn,
  v1.5's behaviour category of each overlapped sample (judging.py), one file per sample;
* the `fdb` metric (report.py): FDB's numbers per task with intervals.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from dataclasses import replace
from pathlib import Path
from typing import Any, Mapping

import numpy as np
from omegaconf import OmegaConf

from fdeval.audio.io import read_wav, write_wav
from fdeval.cases.schema import case_to_dict
from fdeval.engine.run import Run, build
from fdeval.engine.shared import RecordSessions
from fdeval.engine.steps import CaseStep, Metric, Result, Unit
from fdeval.files import file_sha256, write_json_atomic
from fdeval.types import TestCase
from fdeval.recording import read_info
from fdeval.transcript.build import build_transcript
from fdeval.transcript.io import transcript_to_dict

from .judging import BehaviourJudge, InterruptionRater
from .layout import ANNOTATION
from .metrics import Chunk, take_turn, vad_segments_s
from .report import METRIC_VERSION, fdb_tables

FDB_FOLDER = "fdb"
CLEAN_FOLDER = "clean_sessions"


def _chunks(words: list[tuple[str, float, float]]) -> dict[str, Any]:
    return {
        "text": " ".join(t for t, _, _ in words),
        "chunks": [{"text": t, "timestamp": [s, e]} for t, s, e in words],
    }


def _public(d: dict[str, Any]) -> dict[str, Any]:
    """What of `_listen`'s result goes into the file (not the audio arrays)."""
    return {k: v for k, v in d.items() if not k.startswith("_")}


def _copy(src: Path, dest: Path) -> None:
    tmp = dest.with_name(f".{dest.name}.tmp")
    shutil.copyfile(src, tmp)
    tmp.replace(dest)


def _fit(x: np.ndarray, n: int) -> np.ndarray:
    return x[:n] if len(x) >= n else np.pad(x, (0, n - len(x)))


def clean_case(case: TestCase) -> TestCase:
    """A v1.5 case with its `clean_input.wav` as the user's turn (same id, no overlap words)."""
    d = case.data
    turn = replace(case.turns[0], audio_path=d.clean_audio_path, words=(), text=d.context_text)
    return replace(case, turns=(turn,))


class CleanSessions(RecordSessions):
    """v1.5's non-overlap reference: each v1.5 case's `clean_input.wav` played as a session of its
    own, recorded, resumed and checked as the run step's, in `clean_sessions/` under the same case
    id, so an array task records (and later transcribes) a sample's two sessions together."""

    name = "clean"
    stage = "run"
    folder = CLEAN_FOLDER
    needs = ("run",)

    def __init__(self, bench: Any):
        self.bench = bench

    def session_cases(self, run: Run) -> list[TestCase]:
        return [clean_case(c) for c in run.cases if c.data.clean_audio_path]

    def digest(self, run: Run, case: TestCase) -> str:
        # run.case_digest caches by case id (the input.wav case's): this one hashes its own audio
        h = hashlib.sha256(json.dumps(case_to_dict(case), sort_keys=True, default=str).encode())
        h.update(file_sha256(run.case_root / case.turns[0].audio_path).encode())
        return h.hexdigest()[:16]


def _cut(wav: Path, t0: float, duration_s: float) -> tuple[np.ndarray, np.ndarray, int]:
    """The user and model channels from `t0`, exactly `duration_s` long (padded with silence)."""
    x, sr = read_wav(wav)
    i0, n = int(round(t0 * sr)), int(round(duration_s * sr))
    return _fit(x[i0:, 0], n), _fit(x[i0:, 1], n), sr


class FdbTranscribe(CaseStep):
    name = stage = "transcribe"
    folder = "transcripts"
    uses = ("asr",)
    owns = ("asr", "benchmark.vad_min_speech_s")
    version = "1"

    def __init__(self, bench: Any):
        self.bench = bench

    def identity(self, run: Run) -> dict[str, Any]:
        return {
            "asr": OmegaConf.to_container(run.cfg.asr, resolve=True),
            "vad_min_speech_s": self.bench.vad_min_speech_s,
        }

    def label(self, run: Run) -> str:
        return str(run.cfg.asr.get("name") or "asr")

    def inputs(self, run: Run, unit: Unit) -> dict[str, Any]:
        if not unit.case.data.clean_audio_path:
            return {}
        h5 = run.folder.session_paths(unit.case_id, CLEAN_FOLDER)[0]
        try:
            return {"clean_session": read_info(h5).session_id}
        except (OSError, ValueError, KeyError):
            return {"clean_session": None}

    def prepare(self, run: Run, todo: list[Unit]) -> None:
        self.asr = None if run.cfg.asr.name == "exact" else build(run.cfg.asr)
        self.clean = CleanSessions(self.bench)

    def _listen(self, run: Run, case: TestCase, folder: str) -> dict[str, Any]:
        """One session's words, speech segments and channels on the sample's clock."""
        h5, wav = run.folder.session_paths(case.case_id, folder)
        model_words = (
            None if self.asr is None else self.asr.transcribe_channel(wav, 1, case.case_id, "model")
        )
        # FDB's user-interruption numbers read only the words after the crop of an imported one
        tr = build_transcript(case, h5, model_words=model_words, cropped_ok=True)
        played = [t for t in tr.user_turns if t.index == 0]
        if not played:
            raise RuntimeError(f"{folder}/{case.case_id}: the sample's input was never played")
        t0 = float(played[0].start_s)
        user, model, sr = _cut(wav, t0, case.turns[0].duration_s)
        words = [
            (w.text, round(w.start_s - t0, 3), round(w.end_s - t0, 3))
            for w in tr.words
            if w.speaker == "model" and w.start_s >= t0 - 1e-9
        ]
        said = [
            (w.text, round(w.start_s - t0, 3), round(w.end_s - t0, 3))
            for w in tr.words
            if w.speaker == "user"
        ]
        mvad = vad_segments_s(model, sr, self.bench.vad_min_speech_s)
        uvad = vad_segments_s(user, sr, self.bench.vad_min_speech_s)
        return {
            "start_s": round(t0, 6),
            "model_words": [list(w) for w in words],
            "user_words": [list(w) for w in said],
            "model_vad_s": [[round(a, 3), round(b, 3)] for a, b in mvad],
            "user_vad_s": [[round(a, 3), round(b, 3)] for a, b in uvad],
            "session_id": read_info(h5).session_id,
            "transcript": transcript_to_dict(tr),
            "_model": model,
            "_sr": sr,
        }

    def make(self, run: Run, unit: Unit) -> dict[str, Any]:
        case, data = unit.case, unit.case.data
        main = self._listen(run, case, "sessions")
        clean = None
        if data.clean_audio_path:
            cc = clean_case(case)
            state = self.clean.state(run, cc, run.model_id)
            if state.state != "done":
                # an invalid clean session (timing broken) makes the sample unscorable, as an
                # invalid session would; a missing one is the clean step's to record first
                if state.state != "invalid":
                    raise RuntimeError(
                        f"{CLEAN_FOLDER}/{unit.case_id}: {state.state}; run stage=run"
                    )
                clean = {"state": "invalid", "why": state.why}
            else:
                clean = self._listen(run, cc, CLEAN_FOLDER)
        fdb_dir = self._write_fdb(run, unit, main, clean)
        return {
            "case_id": unit.case_id,
            "task": data.task,
            "subset": data.subset,
            "sample": data.sample,
            "duration_s": data.duration_s,
            "reference_s": list(data.reference_s) if data.reference_s else None,
            **_public(main),
            "clean": None if clean is None else _public(clean),
            "fdb_dir": str(fdb_dir.relative_to(run.run_dir)),
            "model_id": run.model_id,
        }

    def _write_fdb(
        self, run: Run, unit: Unit, main: dict[str, Any], clean: dict[str, Any] | None
    ) -> Path:
        """The sample's folder in FDB's layout (this run's files in it)."""
        data = unit.case.data
        src = (run.case_root / unit.case.turns[0].audio_path).parent
        d = run.step_dir(self) / FDB_FOLDER / data.subset / data.sample
        d.mkdir(parents=True, exist_ok=True)
        names = ["input.wav", "transcription.json", ANNOTATION.get(data.task, "")]
        if data.clean_audio_path:
            names.append("clean_input.wav")
        for name in names:
            if name and (src / name).is_file():
                _copy(src / name, d / name)
        ref = self.bench.reference_distribution(run.data_dir, data.subset)
        if data.task == "backchannel" and ref is not None:
            _copy(ref, d.parent / "reference_distribution.json")  # the JSD's, keyed by sample
        words = [tuple(w) for w in main["model_words"]]
        write_wav(d / "output.wav", main["_model"], main["_sr"])
        if data.task == "user_interruption":
            # FDB's ASR transcribes only from the interruption's end: its evaluator reads that
            cut = data.reference_s[1]
            write_json_atomic(d / "output.json", _chunks([w for w in words if w[1] >= cut]))
            write_json_atomic(d / "output_full.json", _chunks(words))
        else:
            write_json_atomic(d / "output.json", _chunks(words))
        if clean is not None and "_model" in clean:
            write_wav(d / "clean_output.wav", clean["_model"], clean["_sr"])
            write_json_atomic(
                d / "clean_output.json", _chunks([tuple(w) for w in clean["model_words"]])
            )
        return d

    def check(self, payload: Mapping[str, Any], path: Path) -> None:
        for key in ("model_words", "model_vad_s", "user_vad_s", "transcript"):
            if key not in payload:
                raise ValueError(f"{key}: missing")


class Rate(CaseStep):
    """User interruption's relevance rating (where the model took the turn) and v1.5's behaviour
    category; one file per sample, nothing for the other tasks."""

    name = "rate"
    stage = "judge"
    folder = "ratings"
    needs = ("transcribe",)
    owns = ("benchmark.rater", "benchmark.behaviour_judge")
    retries = 0  # the LLM client retries its own requests; a failure is an error record

    def __init__(self, bench: Any):
        self.bench = bench

    def _cache(self, run: Run) -> Path:
        c = self.bench.cache_dir
        return Path(c).expanduser() if c else run.out_root / "_cache" / "fdb"

    def judges(self, run: Run) -> tuple[InterruptionRater, BehaviourJudge]:
        if not hasattr(self, "_judges"):
            cache = self._cache(run)
            self._judges = (
                InterruptionRater(self.bench.rater, cache, where="benchmark.rater"),
                BehaviourJudge(
                    self.bench.behaviour_judge, cache, where="benchmark.behaviour_judge"
                ),
            )
        return self._judges

    def identity(self, run: Run) -> dict[str, Any]:
        rater, judge = self.judges(run)
        return {"rater": rater.identity(), "behaviour_judge": judge.identity()}

    def preflight(self, run: Run, steps: set[str]) -> None:
        if "run" in steps or self.name in steps:
            for j in self.judges(run):
                j.check_ready()

    def keys(self, case: TestCase) -> tuple[str, ...]:
        d = case.data
        if d.task == "user_interruption":
            return ("relevance",)
        if d.clean_audio_path:
            return ("behaviour",)
        return ()

    def make(self, run: Run, unit: Unit) -> dict[str, Any]:
        rater, judge = self.judges(run)
        d = unit.case.data
        tr = json.loads(run.file_of("transcribe", unit.case_id).read_text())
        words = [tuple(w) for w in tr["model_words"]]
        base = {"case_id": unit.case_id, "key": unit.key, "task": d.task, "model_id": run.model_id}
        if unit.key == "relevance":
            after = [w for w in words if w[1] >= d.reference_s[1]]
            if not take_turn([Chunk(t, s, e) for t, s, e in after]):
                return {
                    **base,
                    "value": None,
                    "status": "ok",
                    "explanation": "the model did not take the turn after the interruption: "
                    "not rated (as FDB)",
                    "metadata": {"rating_status": "no_turn", "judge": rater.identity()},
                }
            r = rater.rate(unit.case_id, d.context_text, d.turn_text, " ".join(w[0] for w in after))
            return {
                **base,
                "value": r.rating,
                "status": "error" if r.status == "error" else "ok",
                "explanation": r.error or r.analysis or r.status,
                "metadata": {"rating_status": r.status, "judge": rater.identity()},
            }
        clean = tr.get("clean") or {}
        if "model_words" not in clean:
            return {
                **base,
                "value": None,
                "status": "ok",
                "explanation": "the clean session is invalid: not judged",
                "metadata": {"behaviour_status": "no_clean_session", "judge": judge.identity()},
            }
        b = judge.classify(
            unit.case_id,
            [tuple(w) for w in clean["user_words"]],
            [tuple(w) for w in tr["user_words"]],
            [tuple(w) for w in clean["model_words"]],
            words,
        )
        return {
            **base,
            "value": b.category,
            "status": "error" if b.status == "error" else "ok",
            "explanation": b.error or b.reason or b.status,
            "metadata": {"behaviour_status": b.status, "judge": judge.identity()},
        }

    def result(self, payload: Mapping[str, Any]) -> Result:
        return Result.from_dict(payload)


class FdbMetric(Metric):
    """FDB's numbers per task (take-turn rates, latencies, backchannel frequency and JSD, the
    interruption rating, v1.5's stop / response latencies and behaviour shares)."""

    name = "fdb"
    version = METRIC_VERSION
    needs = ("rate",)
    tables = ("fdb_tasks", "fdb_samples")
    owns = (
        "benchmark.definitions",
        "benchmark.n_resamples",
        "benchmark.confidence",
        "benchmark.min_n_ci",
        "benchmark.backchannel_reference",
    )

    def __init__(self, bench: Any):
        self.bench = bench

    def compute(self, run: Run, scores_dir: Path) -> str:
        return fdb_tables(self.bench, run, scores_dir)
