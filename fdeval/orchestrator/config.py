"""The orchestrator's settings records: turn taking, health bounds and the session's audio settings.

Plain frozen dataclasses with nothing heavy behind them (no numpy, no audio), so the config
schemas (fdeval/settings.py) and a launch that only checks its command line can import them;
the turn manager (turns.py) and the session loop (session.py) that use them import them here.
"""

from __future__ import annotations

from dataclasses import dataclass

# A barge-in turn that carries no `barge_in_after_s` of its own is injected this long after the
# model's speech onset (Instruct-FD's 3 s), unless `TurnConfig.barge_in_delay_s` overrides it.
DEFAULT_BARGE_IN_AFTER_S = 3.0


@dataclass(frozen=True)
class TurnConfig:
    """The turn settings of one session (the effective ones are written to its log as `turn_config`).

    `silence_s`: model silence that ends a take-turn wait (a model's own `turn_silence_s`
    replaces it, `effective_turn_config`). `trailing_silence_s`: user silence after every turn
    before the next wait starts. `yield_after_s`: a `yield` barge-in stops when the model is still
    speaking this long into it. `max_session_s`: the session is cut (and invalid) here.

    Two settings decide a barge-in's delay after the model's speech onset (`barge_in_delay_s`):
    - per turn, `Turn.barge_in_after_s`, written into the case when it is generated
      (`benchmark.barge_in_after_s`, Instruct-FD's 3 s; `DEFAULT_BARGE_IN_AFTER_S` when a turn
      has none);
    - `orchestrator.barge_in_delay_s` (this class's `barge_in_delay_s`): None keeps every turn's
      own delay; a number replaces it for every barge-in of the run (a delay sweep without
      regenerating the cases).
    The delay each barge-in ran with is the `delay_s` column of the log's `turns` table.

    `tail_after_last_turn_s`: when set, the closing wait is this long after the last user turn
    ends, whatever the model does (a fixed observation window, e.g. TACT's [-2, 5] s around the
    decision point)."""

    silence_s: float = 1.5
    trailing_silence_s: float = 1.0
    yield_after_s: float = 2.0
    barge_in_delay_s: float | None = None
    max_session_s: float = 300.0
    tail_after_last_turn_s: float | None = None


@dataclass(frozen=True)
class HealthBounds:
    """How far a realtime session may fall behind before it is invalid (docs/architecture.md says why).

    `max_pacing_lag_s`: the latest a user frame may leave after its scheduled time; 0.25 s is
    three 80 ms frames, far above healthy pacing (under 1 ms p99 here) and below the timing
    windows the judges use (0.5 s and up). `max_model_lag_s`: how far the audio of a
    frame-per-frame model may trail the session; 1.0 s is several times a healthy server's fixed
    delay (one to three frames) and a model that far behind answers a second late whatever it
    decides."""

    max_pacing_lag_s: float = 0.25
    max_model_lag_s: float = 1.0


@dataclass(frozen=True)
class OrchestratorConfig:
    sample_rate: int = 16000
    vad_threshold: float = 0.5
    vad_min_silence_s: float = 0.1
    turns: TurnConfig = TurnConfig()
    health: HealthBounds = HealthBounds()
