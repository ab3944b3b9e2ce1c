"""model=personaplex: its protocol's stand-in server (test_personaplex.py), with a fake voice prompt."""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Iterator

from contract_checks import Target
from fake_servers_common import model_from_yaml
from standins._common import MODELS, frame_due, heard_rows, pool_held, pooled, started, user_audio


@contextlib.contextmanager
def standin(tts, tmp: Path, request) -> Iterator[Target]:
    record, voices = tmp / "personaplex.jsonl", tmp / "voices"
    voices.mkdir(exist_ok=True)
    (voices / "NATF0.pt").write_bytes(b"embedding")
    m = started(
        model_from_yaml(
            "personaplex",
            hf_repo=None,
            device="cpu",
            voice_prompt_dir=str(voices),
            server=pooled(
                [
                    "{python}",
                    str(MODELS / "test_personaplex.py"),
                    "--port",
                    "{port}",
                    "--prompt-s",
                    "0.1",
                    "--record",
                    str(record),
                ],
                tmp,
            ),
        )
    )
    yield Target(
        m,
        user_audio(tts, m.sample_rate),
        has_text=True,
        due=frame_due,
        heard=heard_rows(record, "heard"),
        held=pool_held(m),
    )
