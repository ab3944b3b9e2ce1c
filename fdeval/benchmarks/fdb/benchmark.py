"""Full-Duplex-Bench v1 and v1.5 as an engine benchmark: each FDB sample is played live to the model.

`python -m fdeval.launch benchmark=fdb [benchmark.data_dir=DIR] [benchmark.tasks=[...]]`:

* generate: with no `data_dir`, writes the embedded FDB-layout set (generate.py) into
  `<out_root>/fdb/_data/<data_id>/`; with one, reads the user's FDB folders where they are;
* run (shared): one case per sample: its `input.wav` is the user channel, played from the
  session's first frame to its end, and the session stops when it ends (`tail_s`, default 0:
  FDB's `output.wav` is exactly as long as its `input.wav`), under either clock, on any model
  and launcher; `clean` (stage run, steps.py): a v1.5 sample's `clean_input.wav` as a second
  session of the same case, in `clean_sessions/` (so both land in one array task's shard);
* `transcribe` (steps.py): the model's words (its text stream, or `asr=whisper|qwen3` on its
  channel), the two channels' speech segments, and the sample's FDB files: `output.wav`
  (time-synchronous with `input.wav`) and `output.json`, so FDB's own evaluators read the run;
* `rate` (stage judge): user interruption's relevance rating and v1.5's behaviour category through
  fdeval's LLM backends (judging.py; `backend: offline` rates nothing and says so);
* the `fdb` metric: FDB's numbers per task, with intervals (metrics.py, report.py).

It is a live examiner of FDB v1 / v1.5's tasks, not FDB v2 (whose examiner is itself an agent
that talks to the model): see docs/fdb.md.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, ClassVar

from fdeval.engine.benchmark import Benchmark
from fdeval.engine.steps import Metric, Step
from fdeval.errors import ConfigError
from fdeval.types import TestCase, Turn, WordTiming, plain

from .generate import GENERATED_TASKS, GENERATOR_VERSION, generate_set
from .layout import TASKS, FdbSample, read_data_dir, transcription_words
from .metrics import RULES, VAD_MIN_SPEECH_S
from .steps import CleanSessions, FdbMetric, FdbTranscribe, Rate

log = logging.getLogger("fdeval")

BENCHMARK_VERSION = "1.0"
START_TIMEOUT_S = 0.0  # the sample starts at the session's first frame, whatever the model does
# definitions=paper: Silero's shortest speech segment. FDB keeps Silero's 250 ms default, which
# drops a short word ("yeah", "no") whole; 100 ms keeps the shortest words (about three 32 ms
# VAD windows) while a click or breath stays out.
PAPER_MIN_SPEECH_S = 0.1


@dataclass(frozen=True)
class FdbCaseData:
    """An FDB case's own record (`TestCase.data`): the sample it plays and its annotation."""

    task: str
    subset: str
    sample: str
    reference_s: tuple[float, float] | None
    context_text: str
    turn_text: str
    clean_audio_path: str | None  # v1.5: clean_input.wav, relative to the data folder
    duration_s: float

    case_keys: ClassVar[Mapping[str, bool]] = {}
    turn_keys: ClassVar[Mapping[str, bool]] = {}

    @classmethod
    def of(cls, s: FdbSample) -> "FdbCaseData":
        return cls(
            s.task,
            s.subset,
            s.sample,
            s.reference_s,
            s.context_text,
            s.turn_text,
            s.clean_audio_path,
            round(s.duration_s, 6),
        )

    @property
    def version(self) -> str:
        return "1.5" if self.task.startswith("v15_") else "1"

    def case_fields(self) -> dict[str, Any]:
        d = asdict(self)
        d["reference_s"] = list(self.reference_s) if self.reference_s else None
        return {"fdb": d}

    def turn_fields(self, index: int) -> dict[str, Any]:
        return {}

    @property
    def triggers(self) -> tuple[tuple[Mark, ...], ...]:
        """The points the task scores from, in `input.wav`'s time (timelines draw them)."""
        if self.reference_s is None:
            return ((),)
        start, end = self.reference_s
        if self.task == "smooth_turn_taking":
            return ((Mark("turn end", start),),)
        if self.task == "pause_handling":
            return ((Mark("pause", start), Mark("pause end", end)),)
        kind = "interruption" if self.task == "user_interruption" else "overlap"
        return ((Mark(kind, start), Mark(f"{kind} end", end)),)


@dataclass(frozen=True)
class Mark:
    """A point of a sample's annotation: what it is, and seconds from the start of input.wav."""

    kind: str
    at_s: float


class FullDuplexBench(Benchmark):
    name = "fdb"
    version = BENCHMARK_VERSION
    data_uses_tts = True
    cropped_words_ok = True  # user interruption reads the words after the interruption only

    def __init__(
        self,
        name: str = "fdb",
        data_dir: str | None = None,
        tasks: list[str] | None = None,
        task_of: Mapping[str, str] | None = None,
        n_per_task: int = 3,
        tail_s: float = 0.0,
        definitions: str = "paper",
        vad_min_speech_s: float | None = None,
        backchannel_reference: str | None = None,
        rater: Mapping[str, Any] | None = None,
        behaviour_judge: Mapping[str, Any] | None = None,
        cache_dir: str | None = None,
        n_resamples: int = 10_000,
        confidence: float = 0.95,
        min_n_ci: int = 10,
        cases: list[str] | None = None,
    ):
        def bad(key: str, why: str, value: Any) -> None:
            raise ConfigError(f"benchmark.{key}: {why}, got {value!r}")

        tasks = plain(tasks, copy=True)
        if tasks is not None:
            if not isinstance(tasks, list) or not tasks:
                bad("tasks", "expected a non-empty list of tasks or null", tasks)
            unknown = [t for t in tasks if t not in TASKS]
            if unknown:
                bad("tasks", f"unknown task; valid: {', '.join(TASKS)}", unknown[0])
        if data_dir is None and tasks is not None:
            missing = [t for t in tasks if t not in GENERATED_TASKS]
            if missing:
                bad(
                    "tasks",
                    f"the embedded set has no {missing[0]!r} (it has {', '.join(GENERATED_TASKS)}); "
                    "give benchmark.data_dir",
                    tasks,
                )
        if isinstance(n_per_task, bool) or not isinstance(n_per_task, int) or n_per_task < 1:
            bad("n_per_task", "must be a positive integer", n_per_task)
        if definitions not in RULES:
            bad("definitions", f"unknown option; valid: {list(RULES)}", definitions)
        if vad_min_speech_s is None:  # each definition's own floor
            vad_min_speech_s = VAD_MIN_SPEECH_S if definitions == "fdb_code" else PAPER_MIN_SPEECH_S
        for key, v in (("tail_s", tail_s), ("vad_min_speech_s", vad_min_speech_s)):
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not v >= 0:
                bad(key, "must be a number >= 0", v)
        if isinstance(n_resamples, bool) or not isinstance(n_resamples, int) or n_resamples < 100:
            bad("n_resamples", "must be an integer >= 100", n_resamples)
        if not 0.0 < float(confidence) < 1.0:
            bad("confidence", "must be in (0, 1)", confidence)
        if isinstance(min_n_ci, bool) or not isinstance(min_n_ci, int) or min_n_ci < 1:
            bad("min_n_ci", "must be a positive integer", min_n_ci)
        self.name = name
        self.data_root = Path(data_dir).expanduser().resolve() if data_dir else None
        if self.data_root is not None and not self.data_root.is_dir():
            bad("data_dir", "not a folder", data_dir)
        self.cases_dir = self.data_root  # a user's folder is read where it is, never written
        self.tasks = list(tasks) if tasks is not None else None
        self.task_of = dict(plain(task_of, copy=True) or {})
        self.n_per_task = int(n_per_task)
        self.tail_s, self.vad_min_speech_s = float(tail_s), float(vad_min_speech_s)
        self.definitions = definitions
        self.backchannel_reference = (
            Path(backchannel_reference).expanduser().resolve() if backchannel_reference else None
        )
        if self.backchannel_reference is not None and not self.backchannel_reference.is_file():
            bad("backchannel_reference", "file not found", backchannel_reference)
        self.rater = dict(plain(rater, copy=True) or {"backend": "offline"})
        self.behaviour_judge = dict(plain(behaviour_judge, copy=True) or {"backend": "offline"})
        self.cache_dir = cache_dir
        self.n_resamples, self.confidence, self.min_n_ci = (
            int(n_resamples),
            float(confidence),
            int(min_n_ci),
        )
        self.case_ids = list(cases) if cases else None
        self._samples: dict[Path, list[FdbSample]] = {}

    # -- data ---------------------------------------------------------------------------------
    def data_id(self, seed: int) -> str:
        if self.data_root is not None:
            return "external"  # each case's digest hashes its annotation and input audio
        tasks = ",".join(self.tasks or GENERATED_TASKS)
        h = hashlib.sha256(tasks.encode()).hexdigest()[:8]
        return f"set-v{self.version}.{GENERATOR_VERSION}-n{self.n_per_task}-{h}"

    def generate(self, data_dir: Path, tts: Any, seed: int, progress: bool) -> None:
        if self.data_root is not None:
            return  # the user's FDB folders; `load` validates them
        n = generate_set(data_dir, tts, self.n_per_task, self.tasks)
        self._samples.pop(Path(data_dir), None)
        log.info("fdb: %d new sample(s) in %s", n, data_dir)

    def samples(self, data_dir: Path) -> list[FdbSample]:
        """Every sample of the run's data folder (the user's, or the generated one), validated."""
        root = self.data_root or Path(data_dir)
        if root not in self._samples:
            if not root.is_dir():
                raise ConfigError(f"no FDB samples in {root}; run stage=generate (or stage=all)")
            self._samples[root] = read_data_dir(root, self.tasks, self.task_of)
        return self._samples[root]

    def load(self, data_dir: Path) -> list[TestCase]:
        root = self.data_root or Path(data_dir)
        cases = [self._case(root, s) for s in self.samples(data_dir)]
        return self.select(cases, self.case_ids)

    def _case(self, root: Path, s: FdbSample) -> TestCase:
        folder = (root / s.audio_path).parent
        said = transcription_words(folder, s.case_id)
        words = tuple(WordTiming(t, round(a, 6), round(b, 6)) for t, a, b in said)
        text = (
            " ".join(w.text for w in words)
            or " ".join(x for x in (s.context_text, s.turn_text) if x)
            or "(FDB input)"
        )
        turn = Turn(
            s.case_id,
            0,
            "input",
            "take-turn",
            s.audio_path,
            text,
            words,
            s.duration_s,
            START_TIMEOUT_S,
        )
        return TestCase(
            s.case_id,
            f"{s.subset}-{s.sample}",
            "fdb",
            s.task,
            None,
            (turn,),
            seed=0,
            version=self.version,
            data=FdbCaseData.of(s),
        )

    def reference_distribution(self, data_dir: Path, subset: str) -> Path | None:
        """The backchannel reference of a task folder: `benchmark.backchannel_reference`, else
        the folder's own `reference_distribution.json` (the embedded set writes one), else none."""
        if self.backchannel_reference is not None:
            return self.backchannel_reference
        root = self.data_root or Path(data_dir)
        folder = root / subset
        if not folder.is_dir() and root.name == subset:
            folder = root  # data_dir is the task folder itself
        p = folder / "reference_distribution.json"
        return p if p.is_file() else None

    # -- engine hooks -------------------------------------------------------------------------
    def orchestrator_overrides(self) -> dict[str, Any]:
        # FDB's output.wav is as long as its input.wav: the session ends when the sample does
        return {"tail_after_last_turn_s": self.tail_s}

    def steps(self) -> list[Step]:
        return [CleanSessions(self), FdbTranscribe(self), Rate(self)]

    def metrics(self) -> list[Metric]:
        return [FdbMetric(self)]
