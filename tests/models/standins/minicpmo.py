"""model=minicpmo: the MiniCPM-o-Demo worker stand-in (fake_servers_minicpmo.py, as a process)."""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Iterator

from contract_checks import Target
from fake_servers_common import make_reply
from standins._common import REPLY, heard_rows, pool_held, reply_due, standin_process, user_audio


@contextlib.contextmanager
def standin(tts, tmp: Path, request) -> Iterator[Target]:
    m, record = standin_process("minicpmo", tmp)
    yield Target(
        m,
        user_audio(tts, m.sample_rate),
        has_text=True,
        due=reply_due(make_reply(REPLY)),
        heard=heard_rows(record),
        held=pool_held(m),
    )
