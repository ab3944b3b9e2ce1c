"""Shared audio fixtures: real espeak-ng syntheses, made once per test session."""

from __future__ import annotations

import pytest

from fdeval.audio.tts import EspeakTTS, Synthesis

SENTENCE = "Hello there, my friend. I wanted to ask you something about tomorrow's weather."


@pytest.fixture(scope="session")
def tts() -> EspeakTTS:
    return EspeakTTS()  # en-us+m3, 165 wpm, 16 kHz


@pytest.fixture(scope="session")
def sentence(tts: EspeakTTS) -> Synthesis:
    return tts.synthesize(SENTENCE)
