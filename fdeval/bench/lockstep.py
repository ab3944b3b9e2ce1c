"""Lockstep speed of the reference agent on the built-in set, and its cost per part.

Two runs of the real run step on the same cases: one plain (the speed), one with wrapped timers
on the parts (VAD, TTS, the agent's policy, WAV, HDF5), each part's exclusive main-thread time as
a share of that run's wall time (TTS in background threads overlaps the main thread: it is listed
apart and is not in the rest). The speed's baseline is the agent alone: the session-seconds
per second of its own work (its VAD, policy and TTS), i.e. the bound with no orchestrator or
recording around it.
"""

from __future__ import annotations

from typing import Any

from fdeval.audio.tts import EspeakTTS
from fdeval.audio.vad import VADStream
from fdeval import recording
from fdeval.bench.common import Context, PartTimer, row
from fdeval.engine import shared
from fdeval.models.reference import ReferenceAgent, ReferenceSession

QUICK_CASES = 8

TARGETS = [
    (VADStream, "push", "vad (orchestrator)", {"policy": "vad (agent)"}),
    (EspeakTTS, "synthesize", "tts", None),
    (ReferenceAgent, "warm", "tts", None),  # waits for the fixed texts' syntheses (pool threads)
    (ReferenceSession, "step", "policy", None),
    (recording, "write_audio", "wav", None),
    (shared, "write_session", "hdf5", None),  # write_session minus its WAV
]
AGENT_PARTS = ("vad (agent)", "policy", "tts")


def run(ctx: Context) -> dict[str, Any]:
    out = ctx.fresh("lockstep")
    gen, _ = ctx.launch(out, "stage=generate")  # generation is not the run step's cost
    ids = [c.case_id for c in gen.cases][: QUICK_CASES if ctx.quick else None]
    cases = f"benchmark.cases=[{','.join(ids)}]"
    plain, wall = ctx.launch(out, "stage=run", cases)
    st = plain.stats["run"]
    speed = st["session_s"] / wall

    timer = PartTimer()  # a second folder of the same identity (run_tag), recorded with timers on
    with timer.patched(TARGETS):
        timed, timed_wall = ctx.launch(out, "stage=run", cases, "run_tag=parts")
    parts = dict(sorted(timer.totals.items()))
    main = {k: v for k, v in parts.items() if "background" not in k}
    rest = timed_wall - sum(main.values())
    agent_s = sum(parts.get(k, 0.0) for k in AGENT_PARTS)
    rows = [
        row(
            "lockstep speed, run step",
            speed,
            "session-s per wall-s",
            "the agent alone (its VAD, policy, TTS)",
            st["session_s"] / agent_s if agent_s else None,
            note="wall = the whole run step (model, cases, sessions, recording)",
        )
    ]
    for name, t in parts.items():
        rows.append(
            row(
                f"part {name}",
                t,
                "s",
                "run-step wall (timed run); ratio = share",
                timed_wall,
                note=f"{timer.calls[name]} calls",
            )
        )
    rows.append(
        row(
            "part orchestrator, case loading and the rest",
            rest,
            "s",
            "run-step wall (timed run); ratio = share",
            timed_wall,
        )
    )
    return {
        "cases": len(ids),
        "session_s": st["session_s"],
        "wall_s": wall,
        "sessions_wall_s": st["wall_s"],
        "speed": speed,
        "timed_wall_s": timed_wall,
        "timed_speed": timed.stats["run"]["session_s"] / timed_wall,
        "parts_s": parts,
        "rest_s": rest,
        "rows": rows,
    }
