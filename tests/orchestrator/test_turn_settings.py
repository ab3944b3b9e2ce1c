"""One source for the turn settings: the plan and the turn manager share the delay and silence
functions, and the log holds the effective settings once plus the delay each barge-in ran with."""

import asyncio
import json
import math
from dataclasses import asdict, replace

import h5py
import numpy as np
import pytest
from omegaconf import OmegaConf

from fdeval.cluster.plan import estimate_case, plan_turn_config
from fdeval.models.reference import ReferenceAgent
from fdeval.orchestrator.clock import LockstepClock
from fdeval.orchestrator.recorder import (
    LOG_SCHEMA_VERSION,
    CorruptSession,
    check_session,
    read_session_log,
    write_session,
)
from fdeval.orchestrator.session import OrchestratorConfig, run_session
from fdeval.orchestrator.turns import (
    DEFAULT_BARGE_IN_AFTER_S,
    TurnConfig,
    TurnManager,
    barge_in_delay_s,
)
from fdeval.types import TestCase, Turn

SR, FRAME = 1000, 10


def _case(barge_in_after_s):
    kinds = ("take-turn", "barge-in")
    turns = tuple(
        Turn(
            "c",
            i,
            f"t{i}",
            k,
            "",
            "",
            (),
            0.2,
            20.0,
            barge_in_after_s=barge_in_after_s if k == "barge-in" else None,
            barge_in_handling="hold" if k == "barge-in" else None,
            subtype="backchannel" if k == "barge-in" else None,
        )
        for i, k in enumerate(kinds)
    )
    return TestCase("c", "c", "instructfd", "s", None, turns)


def _scheduled_after_onset(case, cfg, onset_s=2.0):
    """Drive the turn manager with a model that starts talking at `onset_s`; the barge-in's delay."""
    tm = TurnManager(case.turns, [np.ones(200, np.float32)] * 2, SR, cfg, lambda *a: None)
    for k in range(600):
        tm.frame(k * FRAME, FRAME)
        t = (k + 1) * FRAME / SR
        tm.observe(
            (k + 1) * FRAME,
            t > onset_s,
            0.0 if t > onset_s else 10.0,
            [onset_s] if k * FRAME / SR < onset_s <= t else [],
        )
    rec = tm.records[1]
    assert rec.scheduled_n / SR - rec.onset_s == pytest.approx(rec.delay_s, abs=1 / SR)
    return rec.delay_s


@pytest.mark.parametrize(
    "per_turn,override,expected",
    [
        (None, None, DEFAULT_BARGE_IN_AFTER_S),
        (1.25, None, 1.25),
        (1.25, 0.5, 0.5),
        (None, 0.0, 0.0),
    ],
)
def test_plan_and_turn_manager_use_the_same_barge_in_delay(per_turn, override, expected):
    case = _case(per_turn)
    cfg = TurnConfig(barge_in_delay_s=override)
    assert barge_in_delay_s(case.turns[1], cfg) == expected
    assert _scheduled_after_onset(case, cfg) == expected
    # the plan adds exactly that delay (a turn without its own delay used to be planned at 0 s)
    planned = (
        estimate_case(case, 1.5, 1.0, 8.0, override).expected_s
        - estimate_case(case, 1.5, 1.0, 8.0, 0.0).expected_s
    )
    assert planned == pytest.approx(expected)


def test_plan_sees_the_turn_settings_the_session_runs_with(responsive_case, vad):
    """A model with its own turn silence and a benchmark's fixed tail: the plan's settings are the
    ones the session writes to its log."""
    case, audio = responsive_case
    agent = ReferenceAgent()
    agent.turn_silence_s = 1.2  # as a model that pauses inside its answers declares it
    configured = TurnConfig(silence_s=1.5, trailing_silence_s=0.4, barge_in_delay_s=0.5)
    fixed = {"tail_after_last_turn_s": 4.0}
    res = asyncio.run(
        run_session(
            case,
            audio,
            agent,
            OrchestratorConfig(turns=replace(configured, **fixed)),
            LockstepClock(),
            vad,
            seed=1,
        )
    )
    o = OmegaConf.create({"silence_s": 1.5, "trailing_silence_s": 0.4, "barge_in_delay_s": 0.5})
    planned = plan_turn_config(o, agent.turn_silence_s, fixed)
    assert res.log.attrs["turn_config"] == asdict(planned) and planned.silence_s == 1.2
    assert res.log.attrs["end_reason"] == "tail"


def test_the_log_holds_the_effective_settings_once_and_each_barge_ins_delay(
    responsive_case, agent, vad, tmp_path
):
    case, audio = responsive_case
    cfg = OrchestratorConfig(turns=TurnConfig(barge_in_delay_s=0.5))
    res = asyncio.run(run_session(case, audio, agent, cfg, LockstepClock(), vad, seed=1))
    wav, h5 = tmp_path / "s.wav", tmp_path / "s.h5"
    write_session(res.log, res.user, res.model, wav, h5)
    back = read_session_log(h5)
    assert back["attrs"]["schema_version"] == LOG_SCHEMA_VERSION == "3"
    assert json.loads(back["attrs"]["turn_config"]) == asdict(cfg.turns)
    holders = [
        k for k, v in back["attrs"].items() if isinstance(v, str) and "barge_in_delay_s" in v
    ]
    assert holders == ["turn_config"]  # one copy
    rows = back["turns"]
    assert [r["turn_type"] for r in rows] == ["take-turn", "barge-in", "take-turn"]
    assert math.isnan(rows[0]["delay_s"]) and math.isnan(rows[2]["delay_s"])
    assert rows[1]["delay_s"] == 0.5 and rows[1]["scheduled_s"] == pytest.approx(
        rows[1]["onset_s"] + 0.5, abs=1 / 16000
    )
    assert check_session(h5, wav)["case_id"] == case.case_id
    with h5py.File(h5, "r+") as f:  # a log written before the delay column: recorded again
        f.attrs["schema_version"] = "2"
    with pytest.raises(CorruptSession, match="schema version 2, this fdeval writes 3"):
        check_session(h5, wav)
