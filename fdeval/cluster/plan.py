"""Sizing for cluster operators (`stage=plan`): what a run will cost, without submitting anything.

Per case, the expected session length is built from the case itself: every user turn's audio and
trailing silence, plus the waits the turn manager will make: the initial silence, one expected
model turn (`launcher.plan.model_turn_s`) plus the completion silence after each user take-turn,
and the barge-in delay before each barge-in. The worst case replaces every wait by the turn's
timeout. Parallelism comes from the model's resources (`model.resources`: GPU memory per
instance, whether it runs at wall speed) and the launcher profile (GPUs per task and their memory).
"""

from __future__ import annotations

import logging
import math
from dataclasses import asdict, dataclass, replace
from typing import Any

from fdeval.errors import ConfigError
from fdeval.files import write_json_atomic, write_text_atomic
from fdeval.orchestrator.turns import TurnConfig, barge_in_delay_s, closing_timeout_s, effective_turn_config
from fdeval.types import TestCase

log = logging.getLogger("fdeval")


@dataclass(frozen=True)
class CaseEstimate:
    case_id: str
    audio_s: float
    expected_s: float
    worst_s: float


def estimate_case(case: TestCase, silence_s: float, trailing_s: float, model_turn_s: float,
                  delay_override_s: float | None, tail_s: float | None = None) -> CaseEstimate:
    return estimate_session(case, TurnConfig(silence_s=silence_s, trailing_silence_s=trailing_s,
                                             barge_in_delay_s=delay_override_s, tail_after_last_turn_s=tail_s), model_turn_s)


def estimate_session(case: TestCase, turns: TurnConfig, model_turn_s: float) -> CaseEstimate:
    """The case's expected and worst session length under the effective turn settings `turns`
    (the delays and the closing timeout are the turn manager's own functions)."""
    audio = sum(t.duration_s for t in case.turns)
    expected = worst = 0.0
    for i, turn in enumerate(case.turns):
        if turn.turn_type == "barge-in":
            delay = barge_in_delay_s(turn, turns)
            expected += delay
            worst += turn.timeout_s + delay
        elif i == 0:
            expected += turns.silence_s
            worst += turns.silence_s
        else:
            expected += model_turn_s + turns.silence_s
            worst += turn.timeout_s
        expected += turn.duration_s + turns.trailing_silence_s
        worst += turn.duration_s + turns.trailing_silence_s
    tail_s = turns.tail_after_last_turn_s
    if tail_s is not None:  # a fixed observation window ends the session (e.g. TACT)
        return CaseEstimate(case.case_id, audio, expected + tail_s, worst + tail_s)
    expected += model_turn_s + turns.silence_s
    worst += closing_timeout_s(case.turns)
    return CaseEstimate(case.case_id, audio, expected, worst)


def plan_turn_config(o: Any, model_turn_silence_s: float | None, fixed: dict[str, Any]) -> TurnConfig:
    """The turn settings a session of this run will use: the orchestrator group, the benchmark's
    fixed settings, the model's own turn silence (as the run stage and the session apply them)."""
    delay = o.get("barge_in_delay_s", None)
    turns = TurnConfig(silence_s=float(o.silence_s), trailing_silence_s=float(o.trailing_silence_s),
                       barge_in_delay_s=None if delay is None else float(delay))
    return effective_turn_config(replace(turns, **fixed), model_turn_silence_s)


@dataclass(frozen=True)
class Plan:
    benchmark: str
    model: str
    cases: int
    session_s_expected: float
    session_s_worst: float
    model_gpu_mem_gb: float
    gpu_mem_gb: float
    instances_per_gpu: int
    gpus_per_task: int
    sessions_in_parallel_per_task: int
    session_speed: float  # session-seconds per wall-second of one instance
    cases_per_task: int
    tasks: int
    wall_s_per_task_expected: float
    wall_s_per_task_worst: float
    gpu_hours_expected: float
    gpu_hours_worst: float


def make_plan(cases: list[TestCase], cfg: Any, fixed: dict[str, Any] | None = None) -> Plan:
    """`fixed`: the benchmark's own orchestrator settings (Benchmark.orchestrator_overrides)."""
    fixed = fixed or {}
    o, lc = cfg.orchestrator, cfg.launcher
    res = cfg.model.get("resources", None) or {}
    pc = lc.get("plan", None) or {}
    model_mem = float(res.get("gpu_mem_gb", 0.0))
    realtime = bool(res.get("realtime", True))
    speed = 1.0 if realtime else float(res.get("lockstep_speed", 1.0))
    startup_s = float(res.get("startup_s", 0.0))
    gpus = int(lc.get("gpus_per_task", 0))
    gpu_mem = float(lc.get("gpu_mem_gb", 0.0))
    util = float(pc.get("gpu_mem_util", 0.9))
    turns = plan_turn_config(o, cfg.model.get("turn_silence_s", None), fixed)
    est = [estimate_session(c, turns, float(pc.get("model_turn_s", 8.0))) for c in cases]
    server = cfg.model.get("server", None)
    if gpus > 0 and model_mem > 0:
        fit = int(gpu_mem * util // model_mem)
        if fit < 1:
            raise ConfigError(f"launcher: a {gpu_mem:g} GB GPU (x{util:g} usable) cannot hold one {model_mem:g} GB "
                              f"instance of {cfg.model.name}")
        if server is not None:
            # the server pool starts model.server.instances_per_gpu per GPU: plan exactly that
            per_gpu = int(server.get("instances_per_gpu", 1) or 1)
            if per_gpu > fit:
                raise ConfigError(f"model.server.instances_per_gpu={per_gpu}: {per_gpu} x {model_mem:g} GB does not fit "
                                  f"in a {gpu_mem:g} GB GPU (x{util:g} usable); at most {fit}")
        elif lc.get("instances_per_gpu"):
            per_gpu = int(lc.instances_per_gpu)
        else:
            per_gpu = fit
        parallel = per_gpu * gpus
    else:
        per_gpu = 0
        parallel = max(1, int(lc.get("instances_per_task", 1)))
    per_task = int(lc.get("cases_per_task", max(1, len(cases))))
    tasks = max(1, math.ceil(len(cases) / per_task)) if cases else 0
    exp_total = sum(e.expected_s for e in est)
    worst_total = sum(e.worst_s for e in est)
    # the slowest task holds the most expensive shard; shards are cases[i::n]
    shard_exp = max((sum(e.expected_s for e in est[i::tasks]) for i in range(tasks)), default=0.0)
    shard_worst = max((sum(e.worst_s for e in est[i::tasks]) for i in range(tasks)), default=0.0)
    wall_exp = startup_s + shard_exp / (parallel * speed)
    wall_worst = startup_s + shard_worst / (parallel * speed)
    gpu_h = lambda wall: tasks * gpus * wall / 3600.0  # noqa: E731
    return Plan(cfg.benchmark.name, cfg.model.name, len(cases), exp_total, worst_total, model_mem, gpu_mem, per_gpu,
                gpus, parallel, speed, per_task, tasks, wall_exp, wall_worst, gpu_h(wall_exp), gpu_h(wall_worst))


def render(plan: Plan) -> str:
    rows = [
        ("benchmark / model", f"{plan.benchmark} / {plan.model}"),
        ("cases", f"{plan.cases}"),
        ("session time, expected / worst", f"{plan.session_s_expected / 3600:.2f} h / {plan.session_s_worst / 3600:.2f} h"),
        ("model GPU memory per instance", f"{plan.model_gpu_mem_gb:g} GB"),
        ("GPU memory", f"{plan.gpu_mem_gb:g} GB"),
        ("instances per GPU", f"{plan.instances_per_gpu}"),
        ("GPUs per task", f"{plan.gpus_per_task}"),
        ("sessions in parallel per task", f"{plan.sessions_in_parallel_per_task}"),
        ("session-seconds per wall-second per instance", f"{plan.session_speed:g}"),
        ("cases per task", f"{plan.cases_per_task}"),
        ("array tasks", f"{plan.tasks}"),
        ("wall time per task, expected / worst", f"{plan.wall_s_per_task_expected / 60:.1f} min / {plan.wall_s_per_task_worst / 60:.1f} min"),
        ("GPU-hours, expected / worst", f"{plan.gpu_hours_expected:.2f} / {plan.gpu_hours_worst:.2f}"),
    ]
    w = max(len(k) for k, _ in rows)
    return "\n".join(["| quantity | value |", "|---|---|"] + [f"| {k.ljust(w)} | {v} |" for k, v in rows])


def plan(ctx) -> Plan:
    # a benchmark whose user writes turns during the session says what it expects them to be
    cases = [replace(c, turns=tuple(ctx.benchmark.planned_turns(c))) for c in ctx.all_cases]
    p = make_plan(cases, ctx.cfg, ctx.benchmark.orchestrator_overrides())
    text = render(p)
    write_text_atomic(ctx.run_dir / "plan.md", f"# Sizing plan (nothing submitted)\n\n{text}\n")
    write_json_atomic(ctx.run_dir / "plan.json", asdict(p))
    print(text, flush=True)
    log.info("plan: written to %s", ctx.run_dir / "plan.md")
    return p
