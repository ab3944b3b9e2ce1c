"""NVIDIA's real PersonaPlex server (its moshi.server fork, through fdeval/models/personaplex_launch.py)
on a tiny random checkpoint, on CPU with greedy decoding: the reference side of the PersonaPlex
token-equality test. Skipped unless FDEVAL_PERSONAPLEX_PYTHON names a venv with NVIDIA's fork
(not on PyPI; see tests/helpers/personaplex_fixtures.py).
"""

from __future__ import annotations

import numpy as np
import pytest
from helpers.personaplex_fixtures import personaplex_server_tokens

pytestmark = [pytest.mark.server, pytest.mark.slow]

N_FRAMES = 24
FRAME = 1920
TEXT_PROMPT = "You enjoy a good conversation."


def test_tiny_server_runs_greedy(personaplex_python, tiny_personaplex_pt, tmp_path, tts):
    from fdeval.audio.resample import resample

    syn = tts.synthesize("Can you tell me how to start running?")
    x = resample(syn.samples, syn.sample_rate, 24000).astype(np.float32)
    x = np.concatenate([np.zeros(4800, np.float32), x, np.zeros(N_FRAMES * FRAME, np.float32)])[
        : N_FRAMES * FRAME
    ]
    frames = x.reshape(-1, FRAME)
    tiny = tiny_personaplex_pt
    runs = [
        personaplex_server_tokens(
            personaplex_python, tiny, frames, TEXT_PROMPT, tiny["voice_wav"], tmp_path / f"run{i}"
        )
        for i in range(2)
    ]
    a, b = runs
    assert (
        a["conversation"] == b["conversation"] and a["prompt"] == b["prompt"]
    )  # greedy: deterministic
    assert np.array_equal(a["server_input"], b["server_input"])
    n = len(a["conversation"])
    # one row per frame the server decoded (the Opus stream holds back at most the last page)
    assert n == len(a["server_input"]) and N_FRAMES - 3 <= n <= N_FRAMES, (
        n,
        len(a["server_input"]),
    )
    assert all(
        t is not None and len(t) == 17 for t in a["conversation"]
    )  # past the delays: no None
    assert (
        len({tuple(t[9:]) for t in a["conversation"]}) > N_FRAMES // 2
    )  # the user's audio reaches the LM
    text = [t[0] for t in a["conversation"] if t[0] not in (0, 3)]
    assert text, "no text token in the conversation"
    assert len(a["pieces"]) == len(text)  # the server sent a 0x02 piece for each
    parts = [r["part"] for r in a["prompt"]]
    assert parts[0] == "voice" and parts[-1] == "silence_after_text" and "text" in parts
    print(
        f"{len(a['prompt'])} prompt steps ({', '.join(f'{p} {parts.count(p)}' for p in dict.fromkeys(parts))}), "
        f"{n} conversation steps, {len(text)} text tokens: identical in two runs"
    )
