"""Shared fixtures: small real test cases synthesized with espeak-ng (no fakes)."""

from __future__ import annotations

import numpy as np
import pytest

from fdeval.types import TestCase, Turn


@pytest.fixture(scope="session")
def tts():
    from fdeval.audio.tts import EspeakTTS

    return EspeakTTS()


@pytest.fixture(scope="session")
def vad():
    from fdeval.audio.vad import SileroVAD

    return SileroVAD()


@pytest.fixture(scope="session")
def agent():
    from fdeval.models.reference import ReferenceAgent

    return ReferenceAgent()


def make_turn(case_id, index, syn, kind="take-turn", timeout_s=20.0, **kw) -> Turn:
    return Turn(case_id, index, f"turn{index}", kind, f"{case_id}/turn{index}.wav", syn.text, syn.words,
                syn.duration_s, timeout_s, **kw)


@pytest.fixture(scope="session")
def responsive_case(tts) -> tuple[TestCase, list[np.ndarray]]:
    """Question, model answer, user interrupt barge-in 1.5 s into the answer, closing question."""
    q = tts.synthesize("Can you tell me how to start running when I have never done it before?")
    bi = tts.synthesize("wait, I only have twenty minutes a day")
    q2 = tts.synthesize("Okay, thanks.")
    cid = "engine_responsive"
    turns = (
        make_turn(cid, 0, q),
        make_turn(cid, 1, bi, "barge-in", barge_in_after_s=1.5, barge_in_handling="yield", subtype="interrupt"),
        make_turn(cid, 2, q2),
    )
    case = TestCase(cid, cid, "instructfd", "Add Constraint", None, turns)
    return case, [q.samples, bi.samples, q2.samples]
