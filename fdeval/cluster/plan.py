"""Sizing for cluster operators (`stage=plan`): what a run will cost, without submitting anything.

A plan needs no audio. Its cases are the data folder's when it holds them (their turns' measured
durations), else the benchmark's case specs (`Benchmark.case_specs`: the cases generate would
write, each turn as long as the run's TTS is estimated to take to say it, `tts.estimate_s`); a
data folder a generate left unfinished is completed with the specs of the cases it lacks. Only
a benchmark that cannot give specs is generated first. The plan says which it used.

Per case, the expected session length is built from the case itself: every user turn's audio and
trailing silence, plus the waits the turn manager will make: the initial silence, one expected
model turn (`launcher.plan.model_turn_s`) plus the completion silence after each user take-turn,
and the barge-in delay before each barge-in. The worst case replaces every wait by the turn's
timeout. Parallelism comes from the model's resources (`model.resources`: GPU memory per
instance, whether it runs at wall speed) and the launcher profile (GPUs per task and their memory).
A realtime model's sessions also cost client CPU (pacing, VAD, recording, the model's client): the
plan gives the client processes and cores a task needs from the measured cost per session-second,
`orchestrator.client_cpu_s_per_session_s` or, when `launcher.plan.bench` names the JSON of a
`python -m fdeval.bench` run, the figure it measured.

A model whose `resources.gpu_mem_gb` is 0 (the CPU reference agent, a hosted API) uses no GPU: its
parallelism is `launcher.instances_per_task`, its GPU-hours are 0, and GPUs the launcher would
still request for the run array are reported (and warned about) as requested, not used.

A batched lockstep model (`resources.realtime: false` with a `model.batch_size` B) runs one instance
of B rows per GPU: its speed is per GPU, not per row. Its speed and memory come from the JSON of
`benchmarks/moshi_lockstep_speed.py` on a GPU when `launcher.plan.lockstep_bench` names one (measured
at a few B, interpolated in between), else from `resources.lockstep_speed` and `resources.gpu_mem_gb`,
which the plan labels as guesses.
"""

from __future__ import annotations

import json
import logging
import math
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any, Callable

from fdeval.engine.benchmark import PlannedRequests
from fdeval.engine.clients import auto_processes
from fdeval.engine.shared import Generate
from fdeval.errors import CaseError, ConfigError
from fdeval.settings import OrchestratorSettings, model_resources
from fdeval.files import write_json_atomic, write_text_atomic
from fdeval.orchestrator.turns import (
    EXPECTED_MODEL_TURN_S,
    TurnConfig,
    effective_turn_config,
    session_length_s,
)
from fdeval.types import TestCase

log = logging.getLogger("fdeval")

GB_BYTES = 10**9  # launcher.gpu_mem_gb's unit (decimal: the safe side of a GPU's nominal size)
MEASURE_LOCKSTEP = (
    "python benchmarks/moshi_lockstep_speed.py --moshiko-shapes on the GPU, "
    "then launcher.plan.lockstep_bench=<its speed.json>"
)
NOT_GPU = "not GPU figures (a finished run of benchmarks/moshi_lockstep_speed.py --moshiko-shapes on a GPU has them)"


@dataclass(frozen=True)
class CaseEstimate:
    case_id: str
    audio_s: float
    expected_s: float
    worst_s: float


def estimate_case(
    case: TestCase,
    silence_s: float,
    trailing_s: float,
    model_turn_s: float,
    delay_override_s: float | None,
    tail_s: float | None = None,
) -> CaseEstimate:
    return estimate_session(
        case,
        TurnConfig(
            silence_s=silence_s,
            trailing_silence_s=trailing_s,
            barge_in_delay_s=delay_override_s,
            tail_after_last_turn_s=tail_s,
        ),
        model_turn_s,
    )


def estimate_session(case: TestCase, turns: TurnConfig, model_turn_s: float) -> CaseEstimate:
    """The case's expected and worst session length under the effective turn settings `turns`
    (the turn manager's own arithmetic: `fdeval.orchestrator.turns.session_length_s`)."""
    expected, worst = session_length_s(case.turns, turns, model_turn_s)
    return CaseEstimate(case.case_id, sum(t.duration_s for t in case.turns), expected, worst)


def plan_turn_config(
    o: Any, model_turn_silence_s: float | None, fixed: dict[str, Any]
) -> TurnConfig:
    """The turn settings a session of this run will use: the orchestrator group, the benchmark's
    fixed settings, the model's own turn silence (as the run stage and the session apply them)."""
    delay = o.get("barge_in_delay_s", None)
    turns = TurnConfig(
        silence_s=float(o.silence_s),
        trailing_silence_s=float(o.trailing_silence_s),
        barge_in_delay_s=None if delay is None else float(delay),
    )
    return effective_turn_config(replace(turns, **fixed), model_turn_silence_s)


@dataclass(frozen=True)
class BatchSizing:
    """How a batched lockstep model was sized: measured figures (`source` = the speed JSON) or the
    model's configured guesses (`measured` false; `measure_with` says how to measure them)."""

    batch_size: int
    measured: bool
    source: str
    speed_per_gpu: float  # session-seconds per wall-second of the GPU's one instance, all B rows
    gpu_mem_per_instance_bytes: float
    gpu_name: str | None = None  # the GPU the figures were measured on
    gpu_name_checked: bool = False  # against launcher.gpu_name (unset: not checked)
    measured_batch_sizes: tuple[int, ...] = ()
    weights_bytes: float | None = None
    gpu_mem_per_row_bytes: float | None = None
    largest_fitting_batch_size: int | None = (
        None  # within the measured range, on this launcher's GPU
    )
    measure_with: str | None = None


@dataclass(frozen=True)
class Durations:
    """Where the turn durations a plan sizes by come from: `kind` measured (the data folder's
    audio), estimated (the case specs, no audio) or mixed (a data folder a generate left short)."""

    kind: str
    cases_measured: int
    cases_estimated: int
    detail: str  # the plan table's line


@dataclass(frozen=True)
class CostEstimate:
    """What a hosted API will bill for the run, from the model's price table (`model.prices`)."""

    usd_expected: float
    usd_worst: float
    basis: str  # how it was estimated
    prices: str  # the price table's date and source


def estimate_cost(prices: Any, est: list[CaseEstimate]) -> CostEstimate | None:
    """The run's cost under `prices` (None without a table). Audio sent is the whole session
    (silence is streamed and billed); audio received is estimated as the session time the user
    is not speaking. Token prices: OpenAI's audio token rates (`estimate_tokens_per_s`); the
    context each answer re-reads is cached and not counted, so it is a lower bound."""
    if not prices:
        return None
    where = f"{prices.get('date')}, {prices.get('source')}"

    def usd(session_s: float, audio_s: float) -> float:
        sent_s, received_s = session_s, max(0.0, session_s - audio_s)
        if "usd_per_audio_minute" in prices:
            return (sent_s + received_s) / 60.0 * float(prices["usd_per_audio_minute"])
        r, tps = (
            prices["usd_per_1m_tokens"],
            prices.get("estimate_tokens_per_s") or {"audio_in": 10, "audio_out": 20},
        )
        return (
            sent_s * float(tps["audio_in"]) * float(r["audio_in"])
            + received_s * float(tps["audio_out"]) * float(r["audio_out"])
        ) / 1e6

    basis = (
        "audio minutes sent (the whole session) and received (the session less the user's speech)"
        if "usd_per_audio_minute" in prices
        else "audio tokens at the table's rates per second: sent = the whole session, received = the session less the "
        "user's speech; cached context re-reads not counted (a lower bound)"
    )
    return CostEstimate(
        sum(usd(e.expected_s, e.audio_s) for e in est),
        sum(usd(e.worst_s, e.audio_s) for e in est),
        basis,
        where,
    )


@dataclass(frozen=True)
class Plan:
    benchmark: str
    model: str
    cases: int
    session_s_expected: float
    session_s_worst: float
    model_gpu_mem_gb: float
    gpu_mem_gb: float
    instances_per_gpu: int | None  # None: the model uses no GPU
    gpus_per_task: int  # the GPUs the model uses
    sessions_in_parallel_per_task: int
    session_speed: float  # session-seconds per wall-second of one instance
    cases_per_task: int
    tasks: int
    wall_s_per_task_expected: float
    wall_s_per_task_worst: float
    gpu_hours_expected: float
    gpu_hours_worst: float
    client_cpu_s_per_session_s: float | None = None  # None: a lockstep model (nothing is paced)
    client_cost_source: str = ""
    client_processes_per_task: int = 1
    client_cpu_cores_per_task: float = 0.0
    cpus_per_task: int | None = None
    batched: BatchSizing | None = None  # a batched lockstep model only
    gpus_requested_per_task: int = (
        0  # what the launcher asks for the run array (launcher.gpus_per_task)
    )
    durations: Durations | None = None
    cost: CostEstimate | None = None  # a hosted API with a price table (model.prices)
    instances_source: str = "launcher.instances_per_task"  # a CPU or hosted model's parallelism
    llm_requests: tuple[PlannedRequests, ...] = ()  # the benchmark's language-model roles


def make_plan(
    cases: list[TestCase],
    cfg: Any,
    fixed: dict[str, Any] | None = None,
    durations: Durations | None = None,
) -> Plan:
    """`fixed`: the benchmark's own orchestrator settings (Benchmark.orchestrator_overrides);
    `durations`: where the cases' turn durations come from (reported as given)."""
    fixed = fixed or {}
    o, lc = cfg.orchestrator, cfg.launcher
    res = model_resources(cfg.model)
    pc = lc.get("plan", None) or {}
    model_mem = float(res.gpu_mem_gb)
    realtime = res.realtime
    speed = 1.0 if realtime else float(res.lockstep_speed)
    startup_s = float(res.startup_s)
    gpus = int(lc.get("gpus_per_task", 0))
    gpu_mem = float(lc.get("gpu_mem_gb", 0.0))
    util = float(pc.get("gpu_mem_util", 0.9))
    turns = plan_turn_config(o, cfg.model.get("turn_silence_s", None), fixed)
    est = [
        estimate_session(c, turns, float(pc.get("model_turn_s", EXPECTED_MODEL_TURN_S)))
        for c in cases
    ]
    server = cfg.model.get("server", None)
    batch = cfg.model.get("batch_size", None)
    batched = None
    if not realtime and batch is not None:
        if not (isinstance(batch, int) and batch >= 1):
            raise ConfigError(f"model.batch_size: must be an integer >= 1, got {batch!r}")
        if gpus > 1:
            raise ConfigError(
                f"launcher.gpus_per_task={gpus}: model={cfg.model.name} runs one instance per task on "
                "model.device (its model.batch_size rows are the parallelism); set launcher.gpus_per_task=1 "
                "and let the array spread the cases over GPUs"
            )
        batched = batch_sizing(
            batch,
            speed,
            model_mem,
            pc.get("lockstep_bench", None),
            lc.get("gpu_name", None),
            gpu_mem,
            util,
            cfg.model.get("kv_cache_s", None),
        )
        speed, model_mem = batched.speed_per_gpu, batched.gpu_mem_per_instance_bytes / GB_BYTES
    if gpus > 0 and model_mem > 0:
        fit = int(gpu_mem * util // model_mem)
        if fit < 1:
            raise ConfigError(
                f"launcher: a {gpu_mem:g} GB GPU (x{util:g} usable) cannot hold one {model_mem:g} GB "
                f"instance of {cfg.model.name}"
            )
        if server is not None:
            # the server pool starts model.server.instances_per_gpu per GPU: plan exactly that
            per_gpu = int(server.get("instances_per_gpu", 1) or 1)
            if per_gpu > fit:
                raise ConfigError(
                    f"model.server.instances_per_gpu={per_gpu}: {per_gpu} x {model_mem:g} GB does not fit "
                    f"in a {gpu_mem:g} GB GPU (x{util:g} usable); at most {fit}"
                )
        elif batched is not None:
            per_gpu = 1  # the run loads one instance; its B rows are the parallelism
        elif lc.get("instances_per_gpu"):
            per_gpu = int(lc.instances_per_gpu)
        else:
            per_gpu = fit
        instances = per_gpu * gpus
        clients_source = "launcher.instances_per_task"
    else:
        clients_source = "launcher.instances_per_task"
        per_gpu = 0 if model_mem > 0 else None  # a GPU model on a task without GPUs: none fit
        # a hosted API holds model.concurrency sessions (per key); other CPU models one per instance
        instances = max(1, int(cfg.model.get("concurrency", 0) or lc.get("instances_per_task", 1)))
        if cfg.model.get("concurrency", 0):
            clients_source = "model.concurrency"
    used = gpus if model_mem > 0 else 0
    parallel = instances * (batched.batch_size if batched else 1)
    per_task = int(lc.get("cases_per_task", max(1, len(cases))))
    tasks = max(1, math.ceil(len(cases) / per_task)) if cases else 0
    exp_total = sum(e.expected_s for e in est)
    worst_total = sum(e.worst_s for e in est)
    # the slowest task holds the most expensive shard; shards are cases[i::n]
    shard_exp = max((sum(e.expected_s for e in est[i::tasks]) for i in range(tasks)), default=0.0)
    shard_worst = max((sum(e.worst_s for e in est[i::tasks]) for i in range(tasks)), default=0.0)
    # `speed` is per instance: a batched instance's measured speed already counts its B rows
    wall_exp = startup_s + shard_exp / (instances * speed)
    wall_worst = startup_s + shard_worst / (instances * speed)
    gpu_h = lambda wall: tasks * used * wall / 3600.0  # noqa: E731
    cpus = lc.get("cpus_per_task", None)
    cpus = int(cpus) if cpus is not None else None
    clients: dict[str, Any] = {"cpus_per_task": cpus}
    if realtime:
        cost, source = client_cost(o, pc)
        in_flight = min(parallel, max(1, per_task))
        asked = int(o.get("client_processes", 0) or 0)
        share = float(o.get("client_cpu_share", OrchestratorSettings.client_cpu_share))
        procs = asked or auto_processes(in_flight, cost, share, cpus or in_flight)
        clients.update(
            client_cpu_s_per_session_s=cost,
            client_cost_source=source,
            client_processes_per_task=min(procs, in_flight),
            client_cpu_cores_per_task=in_flight * cost,
        )
    return Plan(
        cfg.benchmark.name,
        cfg.model.name,
        len(cases),
        exp_total,
        worst_total,
        model_mem,
        gpu_mem,
        per_gpu,
        used,
        parallel,
        speed,
        per_task,
        tasks,
        wall_exp,
        wall_worst,
        gpu_h(wall_exp),
        gpu_h(wall_worst),
        **clients,
        batched=batched,
        gpus_requested_per_task=gpus,
        durations=durations,
        cost=estimate_cost(cfg.model.get("prices", None), est),
        instances_source=clients_source,
    )


def interpolate(points: dict[int, float], x: int) -> float:
    """`points`' value at `x`, linear between the nearest measured keys (`x` within their range)."""
    if x in points:
        return points[x]
    keys = sorted(points)
    hi = next(i for i, k in enumerate(keys) if k > x)
    x0, x1 = keys[hi - 1], keys[hi]
    return points[x0] + (points[x1] - points[x0]) * (x - x0) / (x1 - x0)


def _number(ok: Callable[[float], bool]) -> Callable[[Any], bool]:
    return lambda v: (
        isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) and ok(v)
    )


def read_lockstep_bench(path: Path) -> tuple[str, float, dict[int, tuple[float, float]]]:
    """(GPU name, weights bytes, {B: (speed, GPU bytes per row)}) from the JSON that
    benchmarks/moshi_lockstep_speed.py writes on a GPU; anything else is one ConfigError line."""
    where = f"launcher.plan.lockstep_bench: {path}"
    try:
        data = json.loads(path.read_text())
    except OSError as e:
        raise ConfigError(f"{where}: cannot read: {e.strerror or e}") from None
    except ValueError as e:
        raise ConfigError(f"{where}: not JSON: {e}") from None

    def get(keys: tuple[str | int, ...], ok: Callable[[Any], bool], why: str) -> Any:
        name = "".join(f"[{k}]" if isinstance(k, int) else f".{k}" for k in keys).lstrip(".")
        node = data
        try:
            for k in keys:
                node = node[k]
        except (KeyError, IndexError, TypeError):
            raise ConfigError(f"{where}: field '{name}': missing: {why}") from None
        if not ok(node):
            raise ConfigError(f"{where}: field '{name}': {why}, got {node!r}")
        return node

    get(("env", "device_kind"), lambda v: str(v).startswith("cuda"), NOT_GPU)
    device = str(
        get(("env", "device"), lambda v: isinstance(v, str) and v.strip(), "the GPU's name")
    ).strip()
    weights = float(get(("weights_bytes",), _number(lambda x: x > 0), "must be > 0"))
    rows = get(("harness",), lambda v: isinstance(v, list) and v, "the measured batch sizes")
    figures: dict[int, tuple[float, float]] = {}
    for i in range(len(rows)):
        b = get(
            ("harness", i, "batch"),
            lambda v: isinstance(v, int) and v >= 1 and v not in figures,
            "an integer >= 1, each measured once",
        )
        figures[b] = (
            float(get(("harness", i, "speed"), _number(lambda x: x > 0), "must be > 0")),
            float(get(("harness", i, "gpu_mem_per_row_bytes"), _number(lambda x: x >= 0), NOT_GPU)),
        )
    return device, weights, figures


def _measured_kv_cache_s(path: Path) -> float | None:
    """The KV cache (seconds of session per row) a speed JSON was measured with; None for a JSON
    written before the script recorded it (then nothing can be compared)."""
    value = json.loads(path.read_text()).get("env", {}).get("kv_cache_s")
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def batch_sizing(
    batch: int,
    guess_speed: float,
    guess_mem_gb: float,
    bench: Any,
    gpu_name: str | None,
    gpu_mem_gb: float,
    util: float,
    kv_cache_s: float | None = None,
) -> BatchSizing:
    """A batched lockstep model's sizing at `batch` rows: measured when `bench` names a speed JSON,
    else the model's configured guesses (`resources.lockstep_speed`, `resources.gpu_mem_gb`)."""
    if bench:
        return measured_batch_sizing(
            Path(str(bench)).expanduser(), batch, gpu_name, gpu_mem_gb, util, kv_cache_s
        )
    guesses = "model.resources.lockstep_speed and gpu_mem_gb: configured guesses, not measured"
    return BatchSizing(
        batch,
        measured=False,
        source=guesses,
        speed_per_gpu=guess_speed,
        gpu_mem_per_instance_bytes=guess_mem_gb * GB_BYTES,
        measure_with=MEASURE_LOCKSTEP,
    )


def measured_batch_sizing(
    path: Path,
    batch: int,
    gpu_name: str | None,
    gpu_mem_gb: float,
    util: float,
    kv_cache_s: float | None = None,
) -> BatchSizing:
    """The sizing at `batch` rows from a speed JSON measured on this launcher's GPU (`gpu_name`, when
    set) with rows whose KV cache holds at least this run's sessions (`kv_cache_s`: a longer cache
    costs more memory per row and more time per step): speed and memory per row interpolated
    between the measured batch sizes; the instance (weights + `batch` rows) must fit in the GPU's
    usable memory."""
    device, weights, figures = read_lockstep_bench(path)
    where = f"launcher.plan.lockstep_bench: {path}"
    measured_kv = _measured_kv_cache_s(path)
    if measured_kv is not None and (kv_cache_s is None or float(kv_cache_s) > measured_kv):
        raise ConfigError(
            f"{where}: field 'env.kv_cache_s': measured with rows holding {measured_kv:g} s of session, but "
            f"this run's hold {'the whole context' if kv_cache_s is None else f'{float(kv_cache_s):g} s'} "
            "(model.kv_cache_s = orchestrator.max_session_s): more memory per row and slower steps than "
            "measured; measure with --max-session-s at this run's orchestrator.max_session_s"
        )
    if gpu_name and str(gpu_name).strip() != device:
        raise ConfigError(
            f"{where}: field 'env.device': measured on {device!r} but launcher.gpu_name is {gpu_name!r}: "
            "figures from another GPU would mislead; measure on this one"
        )
    sizes = sorted(figures)
    if not sizes[0] <= batch <= sizes[-1]:
        raise ConfigError(
            f"{where}: model.batch_size={batch} is outside the measured batch sizes "
            f"{', '.join(map(str, sizes))}: measure it (--batch) or pick one in that range"
        )
    row = {b: m for b, (_, m) in figures.items()}
    instance = lambda b: weights + b * interpolate(row, b)  # noqa: E731
    usable = gpu_mem_gb * util * GB_BYTES
    fitting = [b for b in range(sizes[0], sizes[-1] + 1) if instance(b) <= usable]
    if instance(batch) > usable:
        largest = (
            f"the largest measured-range B that fits is {fitting[-1]}"
            if fitting
            else f"no B in the measured range {sizes[0]}-{sizes[-1]} fits"
        )
        raise ConfigError(
            f"{where}: model.batch_size={batch}: weights {weights / GB_BYTES:.1f} GB + {batch} x "
            f"{interpolate(row, batch) / GB_BYTES:.2f} GB per row = {instance(batch) / GB_BYTES:.1f} GB "
            f"does not fit in a {gpu_mem_gb:g} GB GPU (x{util:g} usable); {largest}"
        )
    speed = interpolate({b: s for b, (s, _) in figures.items()}, batch)
    return BatchSizing(
        batch,
        measured=True,
        source=str(path),
        speed_per_gpu=speed,
        gpu_mem_per_instance_bytes=instance(batch),
        gpu_name=device,
        gpu_name_checked=bool(gpu_name),
        measured_batch_sizes=tuple(sizes),
        weights_bytes=weights,
        gpu_mem_per_row_bytes=interpolate(row, batch),
        largest_fitting_batch_size=fitting[-1],
    )


def client_cost(o: Any, pc: Any) -> tuple[float, str]:
    """The client CPU seconds per session-second the plan uses, and where it comes from."""
    bench = pc.get("bench", None)
    if not bench:
        return (
            float(
                o.get("client_cpu_s_per_session_s", OrchestratorSettings.client_cpu_s_per_session_s)
            ),
            "orchestrator.client_cpu_s_per_session_s",
        )
    path = Path(str(bench)).expanduser()
    try:
        figure = json.loads(path.read_text())["realtime"]["client_cpu_s_per_session_s"]
        value = float(figure)
    except OSError as e:
        raise ConfigError(f"launcher.plan.bench: {path}: cannot read: {e.strerror or e}") from None
    except (ValueError, KeyError, TypeError):
        raise ConfigError(
            f"launcher.plan.bench: {path}: field 'realtime.client_cpu_s_per_session_s': not a measured "
            "figure (a JSON written by python -m fdeval.bench with its realtime section)"
        ) from None
    if not (math.isfinite(value) and value > 0):
        raise ConfigError(
            f"launcher.plan.bench: {path}: field 'realtime.client_cpu_s_per_session_s': must be > 0, "
            f"got {value!r}"
        )
    return value, str(path)


def render(plan: Plan) -> str:
    rows = [
        ("benchmark / model", f"{plan.benchmark} / {plan.model}"),
        ("cases", f"{plan.cases}"),
        *([("turn durations", plan.durations.detail)] if plan.durations is not None else []),
        (
            "session time, expected / worst",
            f"{plan.session_s_expected / 3600:.2f} h / {plan.session_s_worst / 3600:.2f} h",
        ),
        *_device_rows(plan),
        ("sessions in parallel per task", f"{plan.sessions_in_parallel_per_task}"),
        (
            "session-seconds per wall-second per instance",
            f"{plan.session_speed:g}" + _speed_source(plan.batched),
        ),
        ("cases per task", f"{plan.cases_per_task}"),
        ("array tasks", f"{plan.tasks}"),
        (
            "wall time per task, expected / worst",
            f"{plan.wall_s_per_task_expected / 60:.1f} min / {plan.wall_s_per_task_worst / 60:.1f} min",
        ),
        ("GPU-hours, expected / worst", _gpu_hours(plan)),
    ]
    if plan.batched is not None:
        rows += _batched_rows(plan.batched)
    if plan.client_cpu_s_per_session_s is not None:
        cores = f"{plan.client_cpu_cores_per_task:.2f}" + (
            f" of {plan.cpus_per_task}" if plan.cpus_per_task else ""
        )
        rows += [
            (
                "client CPU per session-second",
                f"{plan.client_cpu_s_per_session_s:.4f} s ({plan.client_cost_source})",
            ),
            ("client CPU cores per task", cores),
            ("client processes per task", f"{plan.client_processes_per_task}"),
        ]
    for r in plan.llm_requests:
        rows += [
            (
                f"LLM requests, {r.role}",
                f"at most {r.at_most} ({r.backend} {r.model}; before the cache)"
                + (f"; deviation: {r.note}" if r.note else ""),
            )
        ]
    if plan.cost is not None:
        rows += [
            (
                "service cost, expected / worst",
                f"{plan.cost.usd_expected:.2f} / {plan.cost.usd_worst:.2f} USD "
                f"({plan.cost.basis}; prices {plan.cost.prices})",
            )
        ]
    w = max(len(k) for k, _ in rows)
    return "\n".join(
        ["| quantity | value |", "|---|---|"] + [f"| {k.ljust(w)} | {v} |" for k, v in rows]
    )


def _device_rows(plan: Plan) -> list[tuple[str, str]]:
    if plan.instances_per_gpu is not None:
        return [
            ("model GPU memory per instance", f"{plan.model_gpu_mem_gb:g} GB"),
            ("GPU memory", f"{plan.gpu_mem_gb:g} GB"),
            ("instances per GPU", f"{plan.instances_per_gpu}"),
            ("GPUs per task", f"{plan.gpus_per_task}"),
        ]
    asked = plan.gpus_requested_per_task
    return [
        (
            "model GPU memory per instance",
            "none: the model uses no GPU (model.resources.gpu_mem_gb = 0)",
        ),
        ("instances per task", f"{plan.sessions_in_parallel_per_task} ({plan.instances_source})"),
        (
            "GPUs per task",
            "0 used"
            + (f"; launcher.gpus_per_task={asked} still requests {asked}" if asked else ""),
        ),
    ]


def _gpu_hours(plan: Plan) -> str:
    figures = f"{plan.gpu_hours_expected:.2f} / {plan.gpu_hours_worst:.2f}"
    if plan.gpus_per_task or not plan.gpus_requested_per_task:
        return figures
    held = plan.tasks * plan.gpus_requested_per_task / 3600.0
    return (
        f"{figures} used; {plan.wall_s_per_task_expected * held:.2f} / {plan.wall_s_per_task_worst * held:.2f} "
        "requested and idle"
    )


def _speed_source(b: BatchSizing | None) -> str:
    if b is None:
        return ""
    return (
        f" per GPU at B={b.batch_size} (measured)"
        if b.measured
        else " (a configured guess, not measured)"
    )


def _batched_rows(b: BatchSizing) -> list[tuple[str, str]]:
    if not b.measured:
        return [
            ("batch size B (model.batch_size)", f"{b.batch_size}"),
            ("lockstep speed and memory", b.source),
            ("to measure them", f"{b.measure_with}"),
        ]
    gb = lambda x: f"{x / GB_BYTES:.2f} GB"  # noqa: E731
    checked = (
        "" if b.gpu_name_checked else "; launcher.gpu_name unset: not checked against this GPU"
    )
    sizes, largest = b.measured_batch_sizes, b.largest_fitting_batch_size
    return [
        ("lockstep figures", f"measured on {b.gpu_name} ({b.source}{checked})"),
        (
            "batch size B (model.batch_size)",
            f"{b.batch_size} (measured at {', '.join(map(str, sizes))})",
        ),
        ("GPU memory per row", gb(b.gpu_mem_per_row_bytes)),
        (
            "GPU memory per instance: weights + B rows",
            f"{gb(b.weights_bytes)} + {b.batch_size} rows = {gb(b.gpu_mem_per_instance_bytes)}",
        ),
        (
            "largest B that fits this GPU",
            f"{largest}" + (" (the largest measured)" if largest == sizes[-1] else ""),
        ),
    ]


def _data_cases(ctx) -> list[TestCase] | None:
    """The cases the data folder holds (their durations measured), or None when it holds none."""
    if not ctx.case_root.is_dir():
        return None
    try:
        return ctx.benchmark.load(ctx.data_dir) or None
    except (ConfigError, CaseError) as e:
        # e.g. a generate stopped before its first case file, or a damaged one (generate would
        # make it again): what the specs say is nearer what the run will see
        log.info("plan: no cases to measure in %s (%s)", ctx.case_root, e)
        return None


def _speech_estimate(ctx) -> Callable[[str], float] | None:
    """How long the run's TTS takes to say a text, estimated without audio (None: it cannot tell)."""
    if "tts" not in ctx.cfg:
        return None
    return getattr(ctx.component("tts"), "estimate_s", None)


def plan_cases(ctx) -> tuple[list[TestCase], Durations]:
    """The cases to size and where their turn durations come from (see the module doc)."""
    bench = ctx.benchmark
    have = _data_cases(ctx)
    specs = bench.case_specs(ctx.data_dir, ctx.seed, _speech_estimate(ctx))
    if have is None and specs is None:
        log.info(
            "plan: benchmark %s gives no case specs without audio: generating its data to measure it",
            bench.name,
        )
        Generate().execute(ctx)
        have = ctx.all_cases
        return have, Durations(
            "measured",
            len(have),
            0,
            f"measured: {bench.name} has no case specs, so its data was generated ({ctx.case_root})",
        )
    if have is None:
        if not specs:
            raise ConfigError(f"benchmark {bench.name}: its case specs are empty; nothing to run")
        return specs, Durations(
            "estimated",
            0,
            len(specs),
            "estimated from the case specs (turn texts at the TTS's speaking rate; no audio made)",
        )
    if specs is None or len(have) >= len(specs):
        return have, Durations(
            "measured", len(have), 0, f"measured from the audio in {ctx.case_root}"
        )
    # a generate that stopped: the cases it has not written yet come from the specs
    known = {c.case_id for c in have}
    rest = [c for c in specs if c.case_id not in known]
    cases = sorted([*have, *rest], key=lambda c: c.case_id)
    return cases, Durations(
        "mixed",
        len(have),
        len(rest),
        f"mixed: {len(have)} cases measured from the audio in {ctx.case_root}, {len(rest)} not "
        "generated yet estimated from their specs",
    )


def plan(ctx) -> Plan:
    cases, durations = plan_cases(ctx)
    return write_plan(ctx, cases, durations)


def write_plan(ctx, cases: list[TestCase], durations: Durations | None = None) -> Plan:
    """Size `cases`, print the table and write plan.md and plan.json into the run folder."""
    # a benchmark whose user writes turns during the session says what it expects them to be
    cases = [replace(c, turns=tuple(ctx.benchmark.planned_turns(c))) for c in cases]
    p = replace(
        make_plan(cases, ctx.cfg, ctx.benchmark.orchestrator_overrides(), durations),
        llm_requests=tuple(ctx.benchmark.planned_requests(cases)),
    )
    text = render(p)
    if p.instances_per_gpu is None and p.gpus_requested_per_task:
        log.warning(
            "plan: model=%s uses no GPU, but launcher.gpus_per_task=%d requests %d per run task that would "
            "stay idle; set launcher.gpus_per_task=0",
            p.model,
            p.gpus_requested_per_task,
            p.gpus_requested_per_task,
        )
    if p.cpus_per_task and p.client_cpu_cores_per_task > p.cpus_per_task:
        log.warning(
            "plan: the sessions of a task need %.1f client cores but launcher.cpus_per_task=%d: realtime "
            "sessions would fall behind and be marked invalid",
            p.client_cpu_cores_per_task,
            p.cpus_per_task,
        )
    write_text_atomic(ctx.run_dir / "plan.md", f"# Sizing plan (nothing submitted)\n\n{text}\n")
    if p.batched is not None and not p.batched.measured:
        log.warning(
            "plan: %s runs B=%d rows per GPU at a configured speed and memory, not measured figures; "
            "measure them: %s",
            p.model,
            p.batched.batch_size,
            p.batched.measure_with,
        )
    figures = asdict(p)
    if p.batched is None:
        del figures["batched"]  # a model that is not batched: plan.json as before
    if p.durations is None:
        del figures["durations"]
    if not p.llm_requests:
        del figures["llm_requests"]  # a benchmark without language-model roles: plan.json as before
    write_json_atomic(ctx.run_dir / "plan.json", figures)
    print(text, flush=True)
    log.info("plan: written to %s", ctx.run_dir / "plan.md")
    return p
