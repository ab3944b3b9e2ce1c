"""Typed settings: the type, default and allowed range of every run option, orchestrator and launcher key.

Hydra composes the YAML groups onto these dataclasses (registered in its ConfigStore by `register`,
which runs on import; each YAML selects its schema in its defaults list), so an unknown key or a
value of the wrong type fails while composing, naming the key. Ranges are checked in the
dataclasses' `__post_init__`, which `OmegaConf.to_object` runs (`typed`). Every problem is one
`ConfigError` line that names the key.

One default per setting: the orchestrator's come from the orchestrator's own dataclasses
(`TurnConfig`, `HealthBounds`, `OrchestratorConfig`; its `clock` is here), the run options' are here,
the launchers' stay in their YAML profiles (a site copies and edits those): their schemas here say
which keys exist and type and check the keys every launcher has. The Slurm-only keys are typed
`Any`: `fdeval.cluster.slurm` checks them (time limits together with their warning).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields, make_dataclass
from pathlib import Path
from typing import Any, Callable, Optional, TypeVar

from hydra.core.config_store import ConfigStore
from omegaconf import MISSING, DictConfig, OmegaConf
from omegaconf.errors import (
    ConfigAttributeError,
    ConfigKeyError,
    MissingMandatoryValue,
    OmegaConfBaseException,
    ValidationError,
)
from omegaconf.nodes import BooleanNode, FloatNode, IntegerNode

from fdeval.errors import ConfigError
from fdeval.orchestrator.config import HealthBounds, OrchestratorConfig, TurnConfig

CONF_DIR = Path(__file__).resolve().parent / "conf"
CLOCKS = ("auto", "lockstep", "realtime")
LAUNCHERS = ("local", "slurm")
RESUME_MODES = ("auto", "redo")
GROUPS = (
    "model",
    "benchmark",
    "stage",
    "launcher",
    "orchestrator",
    "tts",
    "asr",
    "judge",
    "report",
)
# The members of judge=ensemble, read from their own group files (a list element cannot be a
# Hydra package, so the defaults list cannot place them; conf/judge/ensemble.yaml says so).
ENSEMBLE_MEMBERS = ("rules", "llm")

T = TypeVar("T")
_EXPECTED = {FloatNode: "a number", IntegerNode: "an integer", BooleanNode: "true or false"}


def _show(value: Any) -> str:
    return f"{value:g}" if isinstance(value, float) else repr(value)


def _ranges(where: str, obj: Any, rules: dict[str, tuple[Callable[[Any], bool], str]]) -> None:
    """One ConfigError line for the first field of `obj` outside its range (None = unset, allowed)."""
    for key, (ok, why) in rules.items():
        value = getattr(obj, key)
        if value is not None and not ok(value):
            raise ConfigError(f"{where}{key}: {why}, got {_show(value)}")


def _finite_positive(x: float) -> bool:
    return math.isfinite(x) and x > 0


def _finite_non_negative(x: float) -> bool:
    return math.isfinite(x) and x >= 0


@dataclass
class OrchestratorSettings:
    """The multi-turn user orchestrator (Instruct-FD 2.3), group `orchestrator`."""

    clock: str = "auto"  # auto = the model's own (lockstep in-process, realtime for network models)
    sample_rate: int = OrchestratorConfig.sample_rate  # the run's one sample rate: recordings, VAD
    silence_s: float = TurnConfig.silence_s  # take-turn: model silence that completes its turn
    trailing_silence_s: float = (
        TurnConfig.trailing_silence_s
    )  # silence after each user turn before the next wait
    yield_after_s: float = (
        TurnConfig.yield_after_s
    )  # yield barge-in: user stops if the model still talks this long
    # None = each turn's own barge_in_after_s; a number overrides every turn
    barge_in_delay_s: Optional[float] = TurnConfig.barge_in_delay_s
    max_session_s: float = TurnConfig.max_session_s  # the session is cut (and invalid) here
    vad_threshold: float = OrchestratorConfig.vad_threshold
    vad_min_silence_s: float = OrchestratorConfig.vad_min_silence_s
    # Realtime health (HealthBounds says why these values): a session past either bound is recorded
    # but marked invalid, never scored, and recorded again on relaunch (at most invalid_retries times).
    max_pacing_lag_s: float = (
        HealthBounds.max_pacing_lag_s
    )  # latest a user frame may leave after its time
    max_model_lag_s: float = (
        HealthBounds.max_model_lag_s
    )  # furthest a frame-per-frame model's audio may trail
    # Realtime client processes (fdeval.engine.clients): how many processes pace the sessions in
    # flight (0 = as many as the sessions' CPU cost needs). The cost is CPU seconds of the client
    # (orchestrator, VAD, recording, the model's client) per session-second, measured by
    # `python -m fdeval.bench` (section realtime); the share is how much of one core a client
    # process is planned to use, so that its frames keep their times. 0.05: the reference agent,
    # 8 sessions in one process, measured by `python -m fdeval.bench --quick` on a 2-core EPYC
    # (2026-12-02; 0.066 in the full section, 0.034 with 32 sessions, whose fixed costs spread further).
    client_processes: int = 0
    client_cpu_s_per_session_s: float = 0.05
    client_cpu_share: float = 0.5
    # How many relaunches record an invalid session again (its log counts them: `recording_attempt`).
    # A passing stall (another job on the machine) rarely hits one case three times running; a
    # cause that stays (a model slower than real time, a max_session_s too short) would otherwise
    # be recorded again on every relaunch. After that the session is kept, invalid, with its reason.
    invalid_retries: int = 2

    def __post_init__(self) -> None:
        if self.clock not in CLOCKS:
            raise ConfigError(
                f"orchestrator.clock: unknown clock {self.clock!r}; valid: {', '.join(CLOCKS)}"
            )
        _ranges(
            "orchestrator.",
            self,
            {
                "sample_rate": (
                    lambda x: x == 16000,
                    "must be 16000 (the rate Silero VAD runs at)",
                ),
                "silence_s": (_finite_positive, "must be > 0"),
                "trailing_silence_s": (_finite_non_negative, "must be >= 0"),
                "yield_after_s": (_finite_positive, "must be > 0"),
                "barge_in_delay_s": (_finite_non_negative, "must be >= 0"),
                "max_session_s": (_finite_positive, "must be > 0"),
                "vad_threshold": (lambda x: 0 < x < 1, "must be in (0, 1)"),
                "vad_min_silence_s": (_finite_non_negative, "must be >= 0"),
                "max_pacing_lag_s": (_finite_positive, "must be > 0"),
                "max_model_lag_s": (_finite_positive, "must be > 0"),
                "client_processes": (lambda x: x >= 0, "must be >= 0 (0 = auto)"),
                "client_cpu_s_per_session_s": (_finite_positive, "must be > 0"),
                "client_cpu_share": (lambda x: 0 < x <= 1, "must be in (0, 1]"),
                "invalid_retries": (lambda x: x >= 0, "must be >= 0"),
            },
        )

    def to_config(self) -> OrchestratorConfig:
        turns = TurnConfig(
            silence_s=self.silence_s,
            trailing_silence_s=self.trailing_silence_s,
            yield_after_s=self.yield_after_s,
            barge_in_delay_s=self.barge_in_delay_s,
            max_session_s=self.max_session_s,
        )
        health = HealthBounds(
            max_pacing_lag_s=self.max_pacing_lag_s, max_model_lag_s=self.max_model_lag_s
        )
        return OrchestratorConfig(
            sample_rate=self.sample_rate,
            vad_threshold=self.vad_threshold,
            vad_min_silence_s=self.vad_min_silence_s,
            turns=turns,
            health=health,
        )


@dataclass
class LauncherSettings:
    """The keys every launcher profile has, group `launcher` (values: conf/launcher/*.yaml)."""

    name: str = MISSING  # local | slurm
    cases_per_task: int = MISSING  # shard size: tasks = ceil(cases / cases_per_task)
    gpus_per_task: int = MISSING
    instances_per_task: int = MISSING  # CPU models: sessions in parallel per task (stage=plan)

    def __post_init__(self) -> None:
        if self.name not in LAUNCHERS:
            raise ConfigError(
                f"launcher.name: unknown launcher {self.name!r}; valid: {', '.join(LAUNCHERS)}"
            )
        _ranges(
            "launcher.",
            self,
            {
                "cases_per_task": (lambda x: x >= 1, "must be >= 1"),
                "gpus_per_task": (lambda x: x >= 0, "must be >= 0"),
                "instances_per_task": (lambda x: x >= 1, "must be >= 1"),
            },
        )


@dataclass
class SlurmLauncherSettings(LauncherSettings):
    """launcher=slurm and the profiles built on it; conf/launcher/slurm.yaml documents every key."""

    partition: Optional[str] = MISSING
    account: Optional[str] = MISSING
    qos: Optional[str] = MISSING
    gpu_mem_gb: Any = MISSING
    gpu_name: Optional[str] = MISSING
    instances_per_gpu: Any = MISSING
    cpus_per_task: Any = MISSING
    mem_gb: Any = MISSING
    timeout_min: Any = MISSING
    array_parallelism: Any = MISSING
    signal_delay_s: Any = MISSING
    setup: list[str] = MISSING
    sbatch_extra: dict[str, Any] = MISSING
    export_env: list[str] = MISSING
    llm_server: Any = MISSING
    wait: bool = MISSING
    cpu_job: Any = MISSING
    plan: Any = MISSING


LAUNCHER_SCHEMAS: dict[str, type[LauncherSettings]] = {
    "local": LauncherSettings,
    "slurm": SlurmLauncherSettings,
}


@dataclass
class ModelResources:
    """`model.resources`: what `stage=plan` sizes a model by (fdeval/cluster/plan.py), checked with
    the run's other values before any work; never a constructor argument (the engine takes it out of
    the `model` node when it builds the model). A model config without the block plans as a
    realtime model that needs no GPU and starts at once."""

    gpu_mem_gb: float = (
        0.0  # GPU memory of one instance, GB (10^9 bytes); 0: no GPU (CPU model, hosted API)
    )
    realtime: bool = True  # false: a lockstep model, as fast as it computes
    lockstep_speed: float = (
        1.0  # lockstep: session-seconds per wall-second of one instance (all its rows)
    )
    startup_s: float = 0.0  # load and warm-up of one instance

    def __post_init__(self) -> None:
        _ranges(
            "model.resources.",
            self,
            {
                "gpu_mem_gb": (_finite_non_negative, "must be >= 0"),
                "lockstep_speed": (_finite_positive, "must be > 0"),
                "startup_s": (_finite_non_negative, "must be >= 0"),
            },
        )


def model_resources(model: Any) -> ModelResources:
    """The `resources` block of a model config (composed or plain), typed and checked (the defaults
    when it has none); a bad key or value is one ConfigError line naming it."""
    node = model.get("resources", None) if model is not None else None
    return typed(node if node is not None else {}, ModelResources, "model.resources")


@dataclass
class RunOptions:
    """The top-level options of a run."""

    seed: int = 0
    out_root: str = "outputs"  # where runs go (relative to the working directory unless absolute)
    # The run folder is <out_root>/<benchmark>/<model>/<run_tag>-<identity hash>; None = a readable
    # digest of the command-line overrides.
    run_tag: Optional[str] = None
    # auto: reuse every finished artifact that reads back whole and carries this run's identity,
    # stop at one made by another; redo: make those others again.
    resume: str = "auto"
    progress: bool = True

    def __post_init__(self) -> None:
        if self.resume not in RESUME_MODES:
            raise ConfigError(
                f"resume: unknown mode {self.resume!r}; valid: {', '.join(RESUME_MODES)}"
            )
        _ranges("", self, {"seed": (lambda x: x >= 0, "must be a non-negative integer")})


# The config groups of conf/config.yaml, in its order; each is typed by its own schema where it has one.
_Groups = make_dataclass("_Groups", [(g, Any, MISSING) for g in GROUPS])


@dataclass
class RunSettings(RunOptions, _Groups):  # type: ignore[misc,valid-type]
    """The root config: the groups, then the run options (dataclass fields follow the reversed MRO)."""


@dataclass
class CheckedRun:
    """What `check_run_options` returns: the run options, launcher and orchestrator, typed and checked."""

    options: RunOptions
    launcher: LauncherSettings
    orchestrator: OrchestratorSettings


def describe(e: OmegaConfBaseException, where: str = "") -> str:
    """One line for an OmegaConf error, naming the key (`where` prefixes a key relative to a sub-node)."""
    full = f"{where}.{e.full_key}" if where and e.full_key else (e.full_key or where)
    if isinstance(e, (ConfigKeyError, ConfigAttributeError)) and isinstance(
        e.parent_node, DictConfig
    ):
        parent = full.rsplit(".", 1)[0] if "." in full else ""
        valid = ", ".join(
            str(k) for k in e.parent_node.keys() if parent or k != "hydra"
        )  # hydra.*: Hydra's own
        return f"unknown key '{full}'; valid keys {f'under {parent!r}' if parent else 'at the top level'}: {valid}"
    if isinstance(e, ValidationError) and type(e.child_node) in _EXPECTED:
        return f"{full}: expected {_EXPECTED[type(e.child_node)]}, got {e.value!r}"
    if isinstance(e, MissingMandatoryValue):
        return f"{full}: no value (this profile must set it)"
    return f"{full}: {str(e.msg).splitlines()[0]}" if full else str(e.msg).splitlines()[0]


def typed(node: Any, schema: type[T], where: str) -> T:
    """`node` (a composed or plain config, or a dict) checked against `schema` and returned as an instance;
    `where` is its key in the whole config (for the messages).

    A composed node is resolved first: its interpolations may point anywhere in the whole config."""
    try:
        plain = OmegaConf.to_container(node, resolve=True) if isinstance(node, DictConfig) else node
    except OmegaConfBaseException as e:
        raise ConfigError(
            describe(e)
        ) from None  # the node still knows its place: the key is already full
    try:
        return OmegaConf.to_object(OmegaConf.merge(OmegaConf.structured(schema), plain))  # type: ignore[return-value]
    except OmegaConfBaseException as e:
        raise ConfigError(describe(e, where)) from None


def orchestrator_settings(node: Any) -> OrchestratorConfig:
    """The orchestrator group (`cfg.orchestrator`) as the session's config; a bad value is one ConfigError line."""
    return typed(node, OrchestratorSettings, "orchestrator").to_config()


def launcher_settings(node: Any) -> LauncherSettings:
    """The launcher group, checked against its own schema (the one it was composed with, else by its name)."""
    schema = OmegaConf.get_type(node) if isinstance(node, DictConfig) else None
    if not (isinstance(schema, type) and issubclass(schema, LauncherSettings)):
        name = node.get("name") if hasattr(node, "get") else None
        if name not in LAUNCHER_SCHEMAS:
            raise ConfigError(
                f"launcher.name: unknown launcher {name!r}; valid: {', '.join(LAUNCHERS)}"
            )
        schema = LAUNCHER_SCHEMAS[name]
    return typed(node, schema, "launcher")


def check_run_options(cfg: Any) -> CheckedRun:
    """Check the run options (seed, resume, run_tag, ...), the launcher and the orchestrator (clock
    included) of a composed config, before any work; each problem is one ConfigError line."""
    names = [f.name for f in fields(RunOptions)]
    options = typed({k: cfg[k] for k in names if k in cfg}, RunOptions, "")
    return CheckedRun(
        options,
        launcher_settings(cfg["launcher"]),
        typed(cfg["orchestrator"], OrchestratorSettings, "orchestrator"),
    )


def _group_file(conf_dir: Path, group: str, name: str) -> dict[str, Any]:
    node = OmegaConf.to_container(
        OmegaConf.load(conf_dir / group / f"{name}.yaml")
    )  # interpolations kept as text
    assert isinstance(node, dict)
    node.pop("defaults", None)
    return node


def register(conf_dir: Path = CONF_DIR) -> None:
    """Put the schemas into Hydra's ConfigStore (idempotent); every YAML that names one needs this first.

    `conf_dir`: where the ensemble's members are read from (the shipped conf/ unless a test says)."""
    cs = ConfigStore.instance()
    cs.store(name="run_schema", node=RunSettings)
    cs.store(group="orchestrator", name="schema", node=OrchestratorSettings)
    cs.store(group="launcher", name="schema_local", node=LauncherSettings)
    cs.store(group="launcher", name="schema_slurm", node=SlurmLauncherSettings)
    cs.store(
        group="judge",
        name="ensemble_members",
        node={"judges": [_group_file(conf_dir, "judge", m) for m in ENSEMBLE_MEMBERS]},
    )


register()
