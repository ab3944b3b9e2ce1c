"""model=reference: the reference agent itself (it runs here as it is)."""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Iterator

from contract_checks import Target
from fake_servers_common import model_from_yaml
from standins._common import user_audio


@contextlib.contextmanager
def standin(tts, tmp: Path, request) -> Iterator[Target]:
    m = model_from_yaml("reference")
    yield Target(m, user_audio(tts, m.sample_rate), has_text=True, quiet_s=0.0)
