"""Launchers: where the steps of a run execute. One interface; `launch.py` picks the implementation.

The engine groups the selected steps into phases by placement (consecutive steps with the same
placement form one phase): `local` steps always run in the launching process; `gpu_array` and
`cpu_array` phases are one task per shard of the cases, `cpu_job` phases one task. The local
launcher runs every phase in this process; a cluster launcher (`fdeval.cluster.slurm`) submits
each as an array chained to the previous one. Each task calls `fdeval.engine.driver.run_steps`.
"""

from __future__ import annotations

import abc
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from omegaconf import DictConfig

# The phase a placement's steps form (names used in job names and the cluster's jobs.json).
PHASE_NAMES = {"gpu_array": "run", "cpu_array": "post", "cpu_job": "score"}


@dataclass(frozen=True)
class Phase:
    """Consecutive steps with one placement, run as `n_tasks` tasks (shards of the cases)."""

    name: str
    steps: tuple[str, ...]
    placement: str
    gpu: bool
    n_tasks: int


def phases(steps: list[Any], n_shards: int) -> list[Phase]:
    out: list[Phase] = []
    for s in steps:
        if out and out[-1].placement == s.placement:
            last = out.pop()
            out.append(
                Phase(last.name, (*last.steps, s.name), last.placement, last.gpu, last.n_tasks)
            )
            continue
        n = 1 if s.placement == "cpu_job" else n_shards
        out.append(
            Phase(
                PHASE_NAMES.get(s.placement, s.placement),
                (s.name,),
                s.placement,
                s.placement == "gpu_array",
                n,
            )
        )
    return out


class Launcher(abc.ABC):
    """Runs (or submits) the phases of a run that are not `local`."""

    name: str

    def __init__(self, cfg: DictConfig):
        self.cfg = cfg

    def check(self) -> None:
        """Settings that can be checked before any work (e.g. time limits)."""

    def n_shards(self, n_cases: int) -> int:
        return 1

    @abc.abstractmethod
    def launch(
        self, run_dir: Path, phases: list[Phase], run_here: Callable[[list[str]], Any]
    ) -> None:
        """Run `phases` (`run_here(step_names)` runs steps in this process)."""

    def status_lines(self, run_dir: Path) -> list[str]:
        """What the launcher knows of the run's jobs, for `stage=status`."""
        return []


class LocalLauncher(Launcher):
    name = "local"

    def launch(
        self, run_dir: Path, phases: list[Phase], run_here: Callable[[list[str]], Any]
    ) -> None:
        names = [n for p in phases for n in p.steps]
        if names:
            run_here(names)
