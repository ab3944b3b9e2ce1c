"""The bench's sections, in the order they run."""

from __future__ import annotations

from fdeval.bench import (
    batched,
    generation,
    hosted,
    lockstep,
    realtime,
    startup,
    steps,
    tact,
    timelines,
    vad,
)

SECTIONS = {
    "launch": startup.run,
    "lockstep": lockstep.run,
    "realtime": realtime.run,
    "hosted": hosted.run,
    "vad": vad.run,
    "generation": generation.run,
    "tact": tact.run,
    "batched": batched.run,
    "steps": steps.run,
    "timeline": timelines.run,
}
