"""ASR test fixtures: a real two-channel session recording made from espeak-ng speech.

Tests that need torch/transformers (the `asr` extra) carry the `asr` marker and skip where the
extra is not installed; `-m "not asr"` deselects them.
"""

from __future__ import annotations

import numpy as np
import pytest
from asr_audio import SR, Session, place

from fdeval.audio.io import write_wav


def pytest_configure(config):
    config.addinivalue_line(
        "markers", "asr: needs the asr extra (torch, transformers); skipped without it"
    )


@pytest.fixture(scope="session")
def utterances(tts):
    say = tts.synthesize
    return {
        "question": say("Hello there, I would like to book a table for two tonight, please."),
        "answer": say("Sure, what time would you like to come in?"),
        "short": say("Okay."),
        "late": say("Seven thirty works for us, thank you very much."),
    }


@pytest.fixture(scope="session")
def session(tmp_path_factory, utterances) -> Session:
    """24 s stereo WAV: ch0 user speaks at 1 s, 12 s and 20.5 s; ch1 model answers at 6 s and 14.5 s."""
    u = {k: v.samples for k, v in utterances.items()}
    user, user_spans = place(24.0, [(1.0, u["question"]), (12.0, u["short"]), (20.5, u["late"])])
    model, model_spans = place(24.0, [(6.0, u["answer"]), (14.5, u["answer"])])
    path = tmp_path_factory.mktemp("asr_session") / "case.wav"
    write_wav(path, np.stack([user, model], axis=1), SR)
    return Session(str(path), 24.0, {"user": user_spans, "model": model_spans})
