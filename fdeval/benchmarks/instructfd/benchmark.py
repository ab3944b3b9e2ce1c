"""Instruct-FD as an engine benchmark: the built-in small set, or a folder of your own cases."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from fdeval.benchmarks.base import Benchmark
from fdeval.errors import ConfigError
from fdeval.types import TestCase

SIZES = ("small",)


class InstructFD(Benchmark):
    name = "instructfd"

    def __init__(self, name: str = "instructfd", size: str = "small", timeout_s: float = 20.0,
                 barge_in_after_s: float = 3.0, cases_dir: str | None = None, cases: list[str] | None = None):
        from fdeval.benchmarks.instructfd.generate import BENCHMARK_VERSION

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

    def data_id(self, seed: int) -> str:
        if self.cases_dir is not None:
            return "external"
        return f"{self.size}-v{self.version}-seed{seed}-t{self.timeout_s:g}-b{self.barge_in_after_s:g}"

    def generate(self, data_dir: Path, tts: Any, seed: int, progress: bool) -> None:
        if self.cases_dir is not None:
            return  # the user brings the cases; `load` validates them
        from fdeval.benchmarks.instructfd.generate import generate_builtin

        generate_builtin(data_dir, tts, seed=seed, timeout_s=self.timeout_s,
                         barge_in_after_s=self.barge_in_after_s, show_progress=progress)

    def load(self, data_dir: Path) -> list[TestCase]:
        from fdeval.cases import load_cases

        root = self.cases_dir if self.cases_dir is not None else data_dir
        cases_dir = root / "cases" if (root / "cases").is_dir() else root
        if not cases_dir.is_dir():
            if self.cases_dir is None:
                raise ConfigError(f"no generated cases in {data_dir}; run stage=generate (or stage=all) first")
            raise ConfigError(f"benchmark.cases_dir: {cases_dir} is not a folder")
        return self.select(load_cases(cases_dir, root), self.case_ids)
