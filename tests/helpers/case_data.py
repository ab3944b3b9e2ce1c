"""A valid test case (as its JSON object) and real WAV files for its turns, for case-loading tests."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np
import soundfile as sf

from fdeval.audio.tts import EspeakTTS

CASE_ID = "conv1__backchannel"
SAMPLE_RATE = 16000


def valid_case_dict() -> dict[str, Any]:
    return {
        "schema_version": 1,
        "test_case_id": CASE_ID,
        "conversation_id": "conv1",
        "benchmark": "instructfd",
        "scenario": "User Attention Check",
        "policy_name": "backchannel",
        "system_instruction": "Give short listener signals when the user checks in.",
        "judge_policies": ["backchannel"],
        "judge_instructions": {
            "backchannel": "Give short listener signals when the user checks in."
        },
        "seed": 3,
        "version": "1.0",
        "turns": [
            {
                "speaker": "user",
                "label": "turn1",
                "turn_type": "take-turn",
                "audio_path": "audio/conv1/turn1.wav",
                "timeout_s": 20.0,
                "text": "so here is the plan, right? and then we go",
                "duration_s": 3.2,
                "words": [
                    {"text": t, "start_s": 0.1 + 0.3 * i, "end_s": 0.35 + 0.3 * i}
                    for i, t in enumerate("so here is the plan, right? and then we go".split())
                ],
                "triggers": [
                    {"kind": "backchannel", "at_s": 1.9, "word_index": 6, "phrase": "yeah"}
                ],
            },
            {
                "speaker": "user",
                "label": "turn2_interrupt",
                "turn_type": "barge-in",
                "audio_path": "audio/conv1/turn2_interrupt.wav",
                "timeout_s": 20.0,
                "barge_in_after_s": 3.0,
                "barge_in_handling": "yield",
                "subtype": "interrupt",
                "text": "wait, hold on",
                "duration_s": 1.0,
                "words": [
                    {"text": "wait,", "start_s": 0.0, "end_s": 0.3},
                    {"text": "hold", "start_s": 0.35, "end_s": 0.6},
                    {"text": "on", "start_s": 0.6, "end_s": 0.9},
                ],
            },
        ],
        "reference": [
            {"speaker": "user", "text": "so here is the plan, right?", "tag": ""},
            {"speaker": "model", "text": "yeah", "tag": "backchannel"},
            {"speaker": "user", "text": "and then we go", "tag": ""},
            {"speaker": "model", "text": "Sounds good. The first thing", "tag": "take-turn"},
            {"speaker": "user", "text": "wait, hold on", "tag": "interrupt"},
            {"speaker": "model", "text": "Sure, go ahead."},
        ],
    }


@lru_cache(maxsize=None)
def _spoken(text: str, sample_rate: int) -> np.ndarray:
    return EspeakTTS(sample_rate=sample_rate).synthesize(text).samples


def write_turn_audio(root: Path, d: dict[str, Any], sample_rate: int = SAMPLE_RATE) -> None:
    """Write a real mono PCM_16 WAV for each turn of case `d` under `root`, lasting its duration_s:
    espeak-ng saying the turn's text over the span its words cover (repeated if it is shorter),
    silence around it. A run checks that turn audio is speech where the words are
    (fdeval.cases.speech), so noise would stop it before any session."""
    for turn in d["turns"]:
        path = root / turn["audio_path"]
        path.parent.mkdir(parents=True, exist_ok=True)
        n = int(round(turn["duration_s"] * sample_rate))
        x = np.zeros(n, np.float32)
        words = turn["words"]
        a, b = (
            (int(words[0]["start_s"] * sample_rate), int(words[-1]["end_s"] * sample_rate))
            if words
            else (0, n)
        )
        x[a:b] = np.resize(_spoken(turn["text"], sample_rate), b - a)
        sf.write(path, x, sample_rate, subtype="PCM_16")
