"""model=freezeomni: the Freeze-Omni server stand-in (fake_servers_freezeomni.py, as a process);
it sends no text."""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Iterator

from contract_checks import Target
from standins._common import heard_rows, pool_held, standin_process, user_audio


@contextlib.contextmanager
def standin(tts, tmp: Path, request) -> Iterator[Target]:
    m, record = standin_process("freezeomni", tmp)
    yield Target(
        m,
        user_audio(tts, m.sample_rate),
        has_text=False,
        heard=heard_rows(record),
        held=pool_held(m),
    )
