"""Instruct-FD as an engine benchmark: the built-in small set, a generated set, or your own cases.

Sizes:

* ``small`` (default): the hand-written built-in set (:mod:`.builtin`), 11 conversations.
* ``sample``: a generated set with 2 conversations per scenario (58 conversations) -- a quick look.
* ``full``: the generated set of the paper's Table 2: 24 conversations per scenario, 696
  conversations, 912 instructed cases plus 696 un-instructed baselines.

``conversations_per_scenario`` overrides the per-scenario count of ``sample``/``full`` (the
per-instruction proportions stay those of the catalog). ``text_backend`` picks who writes the
generated conversations: ``offline`` (grammars, no network) or ``llm`` (the LLM turn agent on the
endpoint ``llm`` names: Anthropic, OpenAI, or a vLLM / SGLang server; ``anthropic`` is ``llm``
held to Anthropic settings). See ``docs/generation.md``.
"""

from __future__ import annotations

import hashlib
import json
import logging
from pathlib import Path
from typing import Any, Callable, Mapping

from fdeval.benchmarks.instructfd.generate import (
    BENCHMARK_VERSION,
    case_ids,
    estimated_builtin,
    generate_builtin,
)
from fdeval.benchmarks.instructfd.llm_backend import PROMPT_VERSION, make_llm_backend
from fdeval.benchmarks.instructfd.offline import OFFLINE_VERSION
from fdeval.benchmarks.instructfd.personas import PersonaFileError, file_digest, load_personas
from fdeval.benchmarks.instructfd.pipeline import (
    DATA_VERSION,
    GENERATION_VERSION,
    GenerationConfig,
    OfflineTextBackend,
    estimated_dataset,
    generate_dataset,
    report_table,
)
from fdeval.benchmarks.instructfd.records import InstructFDCase
from fdeval.benchmarks.instructfd.review import InstructFDReport, InstructFDReview
from fdeval.benchmarks.instructfd.steps import IAS, Judge, Transcribe
from fdeval.cases import load_cases
from fdeval.engine.benchmark import Benchmark
from fdeval.engine.steps import Metric, Step
from fdeval.orchestrator.turns import DEFAULT_BARGE_IN_AFTER_S
from fdeval.errors import ConfigError
from fdeval.types import DEFAULT_TURN_TIMEOUT_S, TestCase, plain

log = logging.getLogger("fdeval")

SIZES = ("small", "sample", "full")
DEFAULT_PER_SCENARIO = {"sample": 2, "full": 24}
# "llm": the LLM turn agent on whatever `benchmark.llm` names (anthropic, openai, vllm, sglang);
# "anthropic": the same, requiring Anthropic settings (the name earlier configs used).
TEXT_BACKENDS = ("offline", "llm", "anthropic")
LLM_BACKENDS = ("anthropic", "openai", "vllm", "sglang")
LLM_KEYS = (
    "backend",
    "model",
    "temperature",
    "top_p",
    "max_tokens",
    "seed",
    "base_url",
    "cache_dir",
    "max_attempts",
    "concurrency",
)


class InstructFD(Benchmark):
    name = "instructfd"
    data_uses_tts = True

    def __init__(
        self,
        name: str = "instructfd",
        size: str = "small",
        timeout_s: float = DEFAULT_TURN_TIMEOUT_S,
        barge_in_after_s: float = DEFAULT_BARGE_IN_AFTER_S,
        cases_dir: str | None = None,
        cases: list[str] | None = None,
        conversations_per_scenario: int | None = None,
        persona_file: str | None = None,
        text_backend: str = "offline",
        llm: Mapping[str, Any] | None = None,
        pool_factor: float = 1.25,
        workers: int = 2,
    ):

        if size not in SIZES:
            raise ConfigError(f"benchmark.size: unknown size {size!r}; valid: {list(SIZES)}")
        if timeout_s <= 0:
            raise ConfigError(f"benchmark.timeout_s: must be > 0, got {timeout_s}")
        if barge_in_after_s < 0:
            raise ConfigError(f"benchmark.barge_in_after_s: must be >= 0, got {barge_in_after_s}")
        self.name, self.size = name, size
        self.version = BENCHMARK_VERSION
        self.timeout_s, self.barge_in_after_s = float(timeout_s), float(barge_in_after_s)
        self.cases_dir = Path(cases_dir).expanduser().resolve() if cases_dir else None
        self.case_ids = list(cases) if cases else None
        self.per_scenario: int | None = None
        self.persona_file = str(Path(persona_file).expanduser().resolve()) if persona_file else None
        self.text_backend = text_backend
        self.llm = dict(plain(llm) or {})
        self.pool_factor, self.workers = pool_factor, workers
        if size == "small":
            for key, value, default in (
                ("conversations_per_scenario", conversations_per_scenario, None),
                ("persona_file", persona_file, None),
                ("text_backend", text_backend, "offline"),
            ):
                if value != default and self.cases_dir is None:
                    raise ConfigError(
                        f"benchmark.{key}: only used with benchmark.size=sample or full "
                        f"(size=small is the hand-written set)"
                    )
            return
        self._check_generated(conversations_per_scenario)

    def _check_generated(self, conversations_per_scenario: int | None) -> None:

        n = (
            conversations_per_scenario
            if conversations_per_scenario is not None
            else DEFAULT_PER_SCENARIO[self.size]
        )
        if isinstance(n, bool) or not isinstance(n, int) or not 1 <= n <= 500:
            raise ConfigError(
                f"benchmark.conversations_per_scenario: expected a whole number in 1..500, got {n!r}"
            )
        self.per_scenario = n
        if self.text_backend not in TEXT_BACKENDS:
            raise ConfigError(
                f"benchmark.text_backend: unknown backend {self.text_backend!r}; valid: {list(TEXT_BACKENDS)}"
            )
        try:
            pf = float(self.pool_factor)
        except (TypeError, ValueError):
            raise ConfigError(
                f"benchmark.pool_factor: expected a number, got {self.pool_factor!r}"
            ) from None
        if not 1.0 <= pf <= 10.0:
            raise ConfigError(
                f"benchmark.pool_factor: must be in [1, 10], got {self.pool_factor!r}"
            )
        self.pool_factor = pf
        if (
            isinstance(self.workers, bool)
            or not isinstance(self.workers, int)
            or not 1 <= self.workers <= 64
        ):
            raise ConfigError(
                f"benchmark.workers: expected a whole number in 1..64, got {self.workers!r}"
            )
        unknown = sorted(set(self.llm) - set(LLM_KEYS))
        if unknown:
            raise ConfigError(f"benchmark.llm: unknown key(s) {unknown}; valid: {list(LLM_KEYS)}")
        if self.text_backend == "anthropic" and self.llm.get("backend", "anthropic") != "anthropic":
            raise ConfigError(
                f"benchmark.text_backend=anthropic needs Anthropic settings in benchmark.llm, got "
                f"backend {self.llm.get('backend')!r}; use llm@benchmark.llm=anthropic or text_backend=llm"
            )
        if self.text_backend == "llm" and self.llm.get("backend", "anthropic") not in LLM_BACKENDS:
            raise ConfigError(
                f"benchmark.llm.backend: unknown backend {self.llm.get('backend')!r}; valid: {list(LLM_BACKENDS)}"
            )
        if self.text_backend in ("llm", "anthropic") and not self.llm.get("model"):
            raise ConfigError(
                f"benchmark.llm.model: a model name is required for text_backend={self.text_backend}"
            )
        try:
            self.personas = load_personas(self.persona_file)
            self._persona_digest = file_digest(self.persona_file)
        except PersonaFileError as e:
            raise ConfigError(f"benchmark.persona_file: {e}") from None
        self.version = DATA_VERSION

    # ----------------------------------------------------------------------------------------
    def _backend_identity(self) -> dict:
        if self.text_backend == "offline":
            return {"backend": "offline", "version": OFFLINE_VERSION}

        keep = ("model", "temperature", "max_tokens", "seed", "base_url", "max_attempts")
        ident = {
            "backend": self.llm.get("backend", "anthropic"),
            **{k: self.llm.get(k) for k in keep},
            "prompt_version": PROMPT_VERSION,
        }
        if (
            self.llm.get("top_p") is not None
        ):  # only when set: earlier Anthropic identities stay as they were
            ident["top_p"] = self.llm["top_p"]
        return ident

    def data_id(self, seed: int) -> str:
        if self.cases_dir is not None:
            return "external"
        base = f"-v{self.version}-seed{seed}-t{self.timeout_s:g}-b{self.barge_in_after_s:g}"
        if self.size == "small":
            return f"{self.size}{base}"
        key = {
            "n": self.per_scenario,
            "pool_factor": self.pool_factor,
            "personas": self._persona_digest,
            "backend": self._backend_identity(),
            "generation": GENERATION_VERSION,
            "benchmark": BENCHMARK_VERSION,
        }
        h = hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:8]
        n_part = (
            "" if self.per_scenario == DEFAULT_PER_SCENARIO[self.size] else f"-n{self.per_scenario}"
        )
        base = f"-g{GENERATION_VERSION}-{self.text_backend}-seed{seed}-t{self.timeout_s:g}-b{self.barge_in_after_s:g}"
        return f"{self.size}{n_part}{base}-{h}"

    def generation_config(self, seed: int):

        return GenerationConfig(
            per_scenario=self.per_scenario,
            seed=seed,
            timeout_s=self.timeout_s,
            barge_in_after_s=self.barge_in_after_s,
            pool_factor=self.pool_factor,
            workers=self.workers,
        )

    def text_backend_for(self, data_dir: Path):
        """The text backend object (offline grammars or the LLM turn agent)."""

        if self.text_backend == "offline":
            return OfflineTextBackend()

        cache = self.llm.get("cache_dir")
        cache_dir = Path(cache).expanduser() if cache else Path(data_dir).parent / "_llm_cache"
        return make_llm_backend(self.llm, cache_dir)

    def generate(self, data_dir: Path, tts: Any, seed: int, progress: bool) -> None:
        if self.cases_dir is not None:
            return  # the user brings the cases; `load` validates them
        if self.size == "small":
            generate_builtin(
                data_dir,
                tts,
                seed=seed,
                timeout_s=self.timeout_s,
                barge_in_after_s=self.barge_in_after_s,
                show_progress=progress,
            )
            return

        result = generate_dataset(
            data_dir,
            tts,
            self.generation_config(seed),
            self.text_backend_for(data_dir),
            self.personas,
            show_progress=progress,
            extra_report={
                "size": self.size,
                "persona_source": self.persona_file or "shipped pool",
                "personas": len(self.personas),
            },
        )
        r = result.report
        log.info("instructfd %s set:\n%s", self.size, report_table(r))
        log.info(
            "instructfd: discards %s; variety: %.1f%% distinct user turns; %.0f s of user audio; %s",
            r["discards"]["by_reason"] or "none",
            100 * (r["variety"]["user_turns_distinct_fraction"] or 0),
            r["audio"]["user_audio_seconds"],
            data_dir / "generation_report.json",
        )

    def planned_case_ids(self, seed: int) -> list[str] | None:
        """The built-in set's ids are fixed; a generated set's are known once its text is written."""
        return case_ids() if self.size == "small" and self.cases_dir is None else None

    def case_specs(
        self, data_dir: Path, seed: int, speech_s: Callable[[str], float] | None
    ) -> list[TestCase] | None:
        """The set's cases from its scripts (built-in) or its written text (generated), each turn
        as long as the run's TTS would say it; a user's own cases are on disk (measured)."""
        if self.cases_dir is not None or speech_s is None:
            return None
        if self.size == "small":
            cases = estimated_builtin(speech_s, seed, self.timeout_s, self.barge_in_after_s)
        else:
            cases = estimated_dataset(
                self.generation_config(seed),
                self.text_backend_for(data_dir),
                self.personas,
                speech_s,
            )
        return self.select(cases, self.case_ids)

    def steps(self) -> list[Step]:
        return [Transcribe(), Judge()]

    def metrics(self) -> list[Metric]:
        return [IAS()]

    def review(self) -> InstructFDReview:
        return InstructFDReview()

    def report(self) -> InstructFDReport:
        return InstructFDReport()

    def load(self, data_dir: Path) -> list[TestCase]:

        root = self.cases_dir if self.cases_dir is not None else data_dir
        cases_dir = root / "cases" if (root / "cases").is_dir() else root
        if not cases_dir.is_dir():
            if self.cases_dir is None:
                raise ConfigError(
                    f"no generated cases in {data_dir}; run stage=generate (or stage=all) first"
                )
            raise ConfigError(f"benchmark.cases_dir: {cases_dir} is not a folder")
        return self.select(load_cases(cases_dir, root, InstructFDCase), self.case_ids)
