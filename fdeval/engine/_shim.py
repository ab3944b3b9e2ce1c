"""Temporary: the hand-written config checks of the old stages module, until fdeval.settings lands."""

from __future__ import annotations

from omegaconf import DictConfig

from fdeval.engine.identity import check_resume
from fdeval.errors import ConfigError


def _number(node: DictConfig, group: str, key: str, ok, why: str, optional: bool = False) -> float | None:
    value, name = node[key], f"{group}.{key}" if group else key
    if value is None and optional:
        return None
    try:
        x = float(value)
    except (TypeError, ValueError):
        raise ConfigError(f"{name}: expected a number, got {value!r}") from None
    if not ok(x):
        raise ConfigError(f"{name}: {why}, got {value!r}")
    return x


def orchestrator_settings(o: DictConfig):
    """The orchestrator group as typed config; a bad value is a one-line ConfigError."""
    from fdeval.orchestrator.session import HealthBounds, OrchestratorConfig
    from fdeval.orchestrator.turns import TurnConfig

    def num(key, ok, why, optional=False):
        return _number(o, "orchestrator", key, ok, why, optional)

    if o.clock not in ("auto", "lockstep", "realtime"):
        raise ConfigError(f"orchestrator.clock: unknown clock {o.clock!r}; valid: auto, lockstep, realtime")
    sr = num("sample_rate", lambda x: x == 16000, "must be 16000 (the rate Silero VAD runs at)")
    turns = TurnConfig(
        silence_s=num("silence_s", lambda x: x > 0, "must be > 0"),
        trailing_silence_s=num("trailing_silence_s", lambda x: x >= 0, "must be >= 0"),
        yield_after_s=num("yield_after_s", lambda x: x > 0, "must be > 0"),
        barge_in_delay_s=num("barge_in_delay_s", lambda x: x >= 0, "must be >= 0", optional=True),
        max_session_s=num("max_session_s", lambda x: x > 0, "must be > 0"),
    )
    health = HealthBounds(
        max_pacing_lag_s=num("max_pacing_lag_s", lambda x: x > 0, "must be > 0"),
        max_model_lag_s=num("max_model_lag_s", lambda x: x > 0, "must be > 0"),
    )
    return OrchestratorConfig(
        int(sr), num("vad_threshold", lambda x: 0 < x < 1, "must be in (0, 1)"),
        num("vad_min_silence_s", lambda x: x >= 0, "must be >= 0"), turns, health,
    )




def check_run_options(cfg: DictConfig) -> None:
    if cfg.launcher.name not in ("local", "slurm"):
        raise ConfigError(f"launcher.name: unknown launcher {cfg.launcher.name!r}; valid: local, slurm")
    _number(cfg, "", "seed", lambda x: x >= 0 and x == int(x), "must be a non-negative integer")
    check_resume(cfg.get("resume", "auto"))
