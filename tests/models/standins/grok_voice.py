"""model=grok_voice: the OpenAI Realtime adapter in the xai dialect, against the stand-in speaking it."""

from __future__ import annotations

from pathlib import Path

from standins.gpt_realtime import realtime_standin


def standin(tts, tmp: Path, request):
    return realtime_standin("grok_voice", "xai", request)
