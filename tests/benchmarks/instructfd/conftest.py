"""Shared fixtures of the Instruct-FD tests."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def espeak():
    """A real espeak-ng voice (the tests skip where the library cannot be loaded)."""
    from fdeval.audio.tts import EspeakTTS, EspeakUnavailableError

    tts = EspeakTTS()
    try:
        tts.synthesize("check")
    except EspeakUnavailableError as e:  # pragma: no cover - depends on the machine
        pytest.skip(str(e))
    return tts
