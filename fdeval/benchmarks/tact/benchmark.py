"""TACT as an engine benchmark: episodes -> sessions -> onsets -> intent posteriors -> composite table.

`python -m fdeval.launch benchmark=tact` runs every stage:

* generate: writes the episodes into `<out_root>/tact/_data/<data_id>/` (the synthetic generator,
  or the corpus importer with `benchmark.source=import benchmark.corpus=<annotations.jsonl>`);
* run (shared): each test-split episode becomes `repeats` test cases `<episode_id>__r<r>` whose
  user turns stream the focal channel (its replay pieces) with the rendered profile synopsis as
  the system instruction; the run stage derives a different seed per case from the case id.
  Sessions end `length_horizon_s` (12 s) after the decision point (`orchestrator_overrides`), so
  a response that starts by T_h = 5 s is followed until it ends. `profiles=swapped` gives each
  speaker's cases the profile of a speaker of opposite behavioural type (`swap.py`, Sec. VI);
* its evaluation steps (`steps.py`): `measure` (stage transcribe) measures each session: onset,
  duration and overlaps relative to the decision point (`measure.py`) -> `<run_dir>/measures/<key>/<case_id>.json`;
  `posterior` (stage judge): the episode's intent posterior (annotator labels, fused with judge
  logits where configured) and psi for each overlap -> `<run_dir>/judged/<key>/<case_id>.json`;
* its metric (`tact_composite`, run by the shared score step): keeps the median-scoring of each
  episode's runs and writes `scores/<key>/tact_composite.csv|.md` (S and the four categories with
  BCa intervals, population S_T and S_L, the human topline from the episodes' own continuations),
  `scores/tact_episodes.csv` and `scores/tact_slices.csv`.

Every stage skips work whose final file exists and writes atomically; score rewrites nothing
when its tables come out the same.
"""

from __future__ import annotations

import hashlib
import logging
from pathlib import Path
from typing import Any, Callable

import numpy as np

from fdeval.audio.tts import EspeakTTS
from fdeval.engine.benchmark import Benchmark
from fdeval.engine.steps import Metric, Step
from fdeval.errors import ConfigError
from fdeval.types import TestCase, Turn, WordTiming

from .episodes import Episode, ReplayTurn, load_episodes, render_synopsis
from .importer import IMPORTER_VERSION, import_corpus
from .laws import T_H_S
from .lawfile import LawFileError, resolve_laws
from .measure import LENGTH_HORIZON_S
from .posterior import empirical_posterior, fit_temperature, fuse_posterior, label_counts
from .records import METRIC_VERSION, TactCaseData, case_id, score_input_from_judged, split_case_id
from .review import TactReview
from .steps import Composite, Measure, Posterior
from .swap import swap_partners
from .synthetic import (
    GENERATOR_VERSION,
    generate_synthetic,
    plan_episode,
    planned_replay,
    synthetic_speakers,
)

log = logging.getLogger("fdeval")

BENCHMARK_VERSION = "1.0"
SOURCES = ("synthetic", "import")
POSTERIORS = ("annotators", "fused")
DURATION_REFERENCES = ("episodes", "none")
# own: each episode's speaker profile; swapped: the profile of the speaker of opposite behavioural
# type (`swap.swap_partners`), for the profile-swap ablation (Sec. VI, `python -m fdeval.benchmarks.tact.swap`)
PROFILE_MODES = ("own", "swapped")
TAKE_TURN_TIMEOUT_S = 20.0
BARGE_IN_TIMEOUT_S = 6.0  # a barge-in piece plays after this long when the system never speaks


class Tact(Benchmark):
    name = "tact"
    version = BENCHMARK_VERSION

    def __init__(
        self,
        name: str = "tact",
        source: str = "synthetic",
        n_episodes: int = 48,
        corpus: str | None = None,
        context_s: float = 8.0,
        repeats: int = 3,
        posterior: str = "annotators",
        judge_weight: float | None = None,
        merge_gap_s: float = 0.5,
        backchannel_max_s: float = 1.0,
        duration_reference: str = "episodes",
        n_resamples: int = 10_000,
        confidence: float = 0.95,
        workers: int = 2,
        cases: list[str] | None = None,
        length_horizon_s: float = LENGTH_HORIZON_S,
        profiles: str = "own",
        topline_folds: int = 5,
        laws: str = "paper",
    ):
        def bad(key, why, value):
            raise ConfigError(f"benchmark.{key}: {why}, got {value!r}")

        if isinstance(length_horizon_s, bool) or not float(length_horizon_s) >= T_H_S:
            bad("length_horizon_s", f"must be at least T_h = {T_H_S} s", length_horizon_s)
        if profiles not in PROFILE_MODES:
            bad("profiles", f"unknown option; valid: {list(PROFILE_MODES)}", profiles)
        if (
            isinstance(topline_folds, bool)
            or not isinstance(topline_folds, int)
            or topline_folds < 2
        ):
            bad("topline_folds", "must be an integer >= 2", topline_folds)
        self.length_horizon_s, self.profiles, self.topline_folds = (
            float(length_horizon_s),
            profiles,
            topline_folds,
        )
        self._swap: dict[
            str, Any
        ] = {}  # speaker id -> the profile it is swapped for (profiles=swapped)

        if source not in SOURCES:
            bad("source", f"unknown source; valid: {list(SOURCES)}", source)
        if source == "synthetic" and (
            isinstance(n_episodes, bool) or not isinstance(n_episodes, int) or n_episodes < 1
        ):
            bad("n_episodes", "must be a positive integer", n_episodes)
        if source == "import":
            if not corpus:
                bad("corpus", "an annotation JSONL is required with source=import", corpus)
            if not Path(corpus).expanduser().is_file():
                bad("corpus", "file not found", corpus)
        if not float(context_s) > 0:
            bad("context_s", "must be > 0", context_s)
        if isinstance(repeats, bool) or not isinstance(repeats, int) or repeats < 1:
            bad("repeats", "must be a positive integer", repeats)
        if posterior not in POSTERIORS:
            bad("posterior", f"unknown posterior; valid: {list(POSTERIORS)}", posterior)
        try:  # "paper" or a law file (h_z and lambda; docs/tact.md "Fitting the laws")
            self.law_set = resolve_laws(str(laws) if laws is not None else None)
        except LawFileError as e:
            raise ConfigError(f"benchmark.laws: {e}") from None
        if judge_weight is None:  # lambda comes with the laws
            judge_weight = self.law_set.judge_weight
        if isinstance(judge_weight, bool) or not 0.0 <= float(judge_weight) <= 1.0:
            bad("judge_weight", "must be in [0, 1]", judge_weight)
        if not float(merge_gap_s) >= 0:
            bad("merge_gap_s", "must be >= 0", merge_gap_s)
        if not float(backchannel_max_s) >= 0:
            bad("backchannel_max_s", "must be >= 0", backchannel_max_s)
        if duration_reference not in DURATION_REFERENCES:
            bad(
                "duration_reference",
                f"unknown option; valid: {list(DURATION_REFERENCES)}",
                duration_reference,
            )
        if isinstance(n_resamples, bool) or not isinstance(n_resamples, int) or n_resamples < 100:
            bad("n_resamples", "must be an integer >= 100", n_resamples)
        if not 0.0 < float(confidence) < 1.0:
            bad("confidence", "must be in (0, 1)", confidence)
        if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
            bad("workers", "must be a positive integer", workers)
        self.name, self.source = name, source
        self.n_episodes = int(n_episodes)
        self.corpus = Path(corpus).expanduser().resolve() if corpus else None
        self.context_s, self.repeats = float(context_s), int(repeats)
        self.posterior, self.judge_weight = posterior, float(judge_weight)
        self.merge_gap_s, self.backchannel_max_s = float(merge_gap_s), float(backchannel_max_s)
        self.duration_reference = duration_reference
        self.n_resamples, self.confidence, self.workers = (
            int(n_resamples),
            float(confidence),
            int(workers),
        )
        self.case_ids = list(cases) if cases else None
        self.cases_dir = None  # the run stage reads turn audio from the data folder
        self._episodes: dict[Path, list[Episode]] = {}

    # -- data ---------------------------------------------------------------------------------
    def data_id(self, seed: int) -> str:
        if self.source == "synthetic":
            return f"synthetic-v{self.version}.{GENERATOR_VERSION}-n{self.n_episodes}-seed{seed}"
        h = hashlib.sha256(self.corpus.read_bytes())
        h.update(f"{self.corpus}|{self.context_s}|{IMPORTER_VERSION}".encode())
        return f"import-v{self.version}-{self.corpus.stem}-{h.hexdigest()[:12]}"

    def generate(self, data_dir: Path, tts: Any, seed: int, progress: bool) -> None:
        if self.source == "synthetic":
            n = generate_synthetic(
                data_dir,
                self.n_episodes,
                seed,
                sample_rate=int(getattr(tts, "sample_rate", 16000)),
                workers=self.workers,
                progress=progress,
            )
        else:
            n = import_corpus(self.corpus, data_dir, context_s=self.context_s, progress=progress)
        self._episodes.pop(Path(data_dir), None)
        log.info("tact: %d new episode(s) in %s", n, data_dir)

    def episodes(self, data_dir: Path) -> list[Episode]:
        """All episodes of the data folder (dev split included), validated, sorted by id."""
        key = Path(data_dir)
        if key not in self._episodes:
            if not (key / "episodes").is_dir():
                raise ConfigError(
                    f"no TACT episodes in {key}; run stage=generate (or stage=all) first"
                )
            self._episodes[key] = load_episodes(key)
        return self._episodes[key]

    def load(self, data_dir: Path) -> list[TestCase]:
        eps = self.episodes(data_dir)
        self._set_swap({e.speaker_id: e.profile for e in eps})
        cases = [c for e in eps if e.split == "test" for c in self.episode_cases(e)]
        if not cases:
            raise ConfigError(f"no test-split TACT episodes in {data_dir}")
        return self.select(cases, self.case_ids)

    def select(self, cases: list[TestCase], ids: list[str] | None) -> list[TestCase]:
        """Keep the named episodes (all their repeats) or cases."""
        if not ids:
            return cases
        episodes = {c.conversation_id for c in cases}
        expanded = [case_id(i, r) for i in ids if i in episodes for r in range(self.repeats)]
        return super().select(cases, expanded + [i for i in ids if i not in episodes])

    def episode_cases(self, e: Episode) -> list[TestCase]:
        """The `repeats` engine cases of an episode (identical but for their ids, hence their seeds)."""
        lines = [
            [
                h
                for h in e.history
                if h.speaker == "focal" and h.end_s > piece.start_s and h.start_s < piece.end_s
            ]
            for piece in e.replay
        ]
        # The transcript is timed by line, not by word: each focal line is one timed entry of its
        # piece (clipped to it). Shown by readers only (the case record's `shown_words`): as the
        # turns' `words` an oracle-text model would hear them, which no TACT system does.
        words = [
            tuple(
                WordTiming(
                    h.text,
                    round(max(0.0, h.start_s - p.start_s), 6),
                    round(min(p.end_s, h.end_s) - p.start_s, 6),
                )
                for h in ls
            )
            for p, ls in zip(e.replay, lines)
        ]
        said = [" ".join(h.text for h in ls) for ls in lines]
        return self._repeat_cases(
            e.episode_id,
            e.category,
            self._swap.get(e.speaker_id, e.profile),
            list(zip(e.replay, said)),
            words,
        )

    def _set_swap(self, profiles: dict[str, Any]) -> None:
        """With `profiles=swapped`, each speaker's cases carry their swap partner's profile."""
        self._swap = {}
        if self.profiles == "swapped":
            partners = swap_partners(profiles)
            self._swap = {s: profiles[p] for s, p in partners.items()}

    def _repeat_cases(
        self,
        episode_id: str,
        category: str,
        profile: Any,
        pieces: list[tuple[ReplayTurn, str]],
        words: list[tuple[WordTiming, ...]] | None = None,
    ) -> list[TestCase]:
        """The `repeats` cases of an episode from its replay pieces, the focal text of each and,
        where known, its timed lines. The case's record says where the decision point (t = 0)
        falls in its last piece."""
        synopsis = render_synopsis(profile)
        data = (
            TactCaseData(round(-pieces[-1][0].start_s, 6), len(pieces), tuple(words or ()))
            if pieces
            else None
        )
        out = []
        for r in range(self.repeats):
            cid = case_id(episode_id, r)
            turns = []
            for k, (piece, said) in enumerate(pieces):
                barge = piece.kind == "barge-in"
                turns.append(
                    Turn(
                        cid,
                        k,
                        f"turn{k}",
                        piece.kind,
                        piece.audio_path,
                        said or "(focal channel)",
                        (),
                        piece.end_s - piece.start_s,
                        BARGE_IN_TIMEOUT_S if barge else TAKE_TURN_TIMEOUT_S,
                        barge_in_after_s=piece.barge_in_after_s if barge else None,
                        barge_in_handling="hold" if barge else None,
                        subtype="interrupt" if barge else None,
                    )
                )
            out.append(
                TestCase(
                    cid,
                    episode_id,
                    "tact",
                    category,
                    synopsis,
                    tuple(turns),
                    seed=0,
                    version=self.version,
                    data=data,
                )
            )
        return out

    def case_specs(
        self, data_dir: Path, seed: int, speech_s: Callable[[str], float] | None
    ) -> list[TestCase] | None:
        """Synthetic episodes from their plans, without audio: each line as long as espeak-ng is
        estimated to say it at its speaker's rate (TACT's own voices, not the run's TTS). An
        imported corpus is cut from its recordings (None: imported to be measured)."""
        if self.source != "synthetic":
            return None
        voices: dict[tuple[str, int], EspeakTTS] = {}

        def estimate_s(voice: str, rate_wpm: int, text: str) -> float:
            if (voice, rate_wpm) not in voices:
                voices[(voice, rate_wpm)] = EspeakTTS(voice=voice, rate_wpm=rate_wpm)
            return voices[(voice, rate_wpm)].estimate_s(text)

        speakers = synthetic_speakers(seed)
        plans = [
            plan_episode(seed, i, speakers) for i in range(self.n_episodes)
        ]  # every synthetic episode is "test"
        self._set_swap({p.speaker.speaker_id: p.speaker.profile for p in plans})
        cases = [
            c
            for p in sorted(plans, key=lambda p: p.episode_id)
            for c in self._repeat_cases(
                p.episode_id,
                p.category,
                self._swap.get(p.speaker.speaker_id, p.speaker.profile),
                list(planned_replay(p, estimate_s)),
            )
        ]
        return self.select(cases, self.case_ids)

    # -- engine hooks -------------------------------------------------------------------------
    def orchestrator_overrides(self) -> dict[str, Any]:
        # recorded past T_h so that a response's duration can be followed (measure.py, rule 4)
        return {"tail_after_last_turn_s": self.length_horizon_s}

    # -- judge: intent posterior and psi ------------------------------------------------------
    def posteriors(self, data_dir: Path) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
        """q(z | e) per episode id, and how it was made."""
        eps = self.episodes(data_dir)
        counts = label_counts([e.annotations.labels for e in eps])
        if self.posterior == "annotators":
            q, info = empirical_posterior(counts), {"posterior_source": "annotators"}
        else:
            missing = [e.episode_id for e in eps if e.judge_logits is None]
            if missing:
                raise ConfigError(
                    f"benchmark.posterior=fused: {len(missing)} episode(s) have no judge_logits, "
                    f"e.g. {missing[0]}; use benchmark.posterior=annotators"
                )
            logits = np.array([e.judge_logits for e in eps], dtype=float)
            dev = np.array([e.split == "dev" for e in eps])
            fit_on = dev if dev.any() else np.ones(len(eps), dtype=bool)
            temperature = fit_temperature(logits[fit_on], counts[fit_on])
            q = fuse_posterior(counts, logits, temperature, self.judge_weight)
            info = {
                "posterior_source": "fused",
                "temperature": round(temperature, 6),
                "judge_weight": self.judge_weight,
                "temperature_fit_on": "dev" if dev.any() else "all",
            }
        return {e.episode_id: q[i] for i, e in enumerate(eps)}, info

    # -- engine hooks: evaluation steps and metric ------------------------------------------
    def steps(self) -> list[Step]:
        return [Measure(self), Posterior(self)]

    def metrics(self) -> list[Metric]:
        return [Composite(self)]

    def review(self) -> TactReview:
        return TactReview()


__all__ = [
    "BENCHMARK_VERSION",
    "METRIC_VERSION",
    "Tact",
    "case_id",
    "score_input_from_judged",
    "split_case_id",
]
