"""model=gpt_realtime_2: the gpt_realtime adapter with TACT's model id, on the same stand-in."""

from __future__ import annotations

from pathlib import Path

from standins.gpt_realtime import realtime_standin


def standin(tts, tmp: Path, request):
    return realtime_standin("gpt_realtime_2", "openai", request)
