"""model=funaudiochat: the Fun-Audio-Chat server stand-in (fake_servers_funaudiochat.py, as a process)."""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Iterator

from contract_checks import Target
from fake_servers_common import make_reply
from standins._common import REPLY, heard_rows, pool_held, reply_due, standin_process, user_audio


@contextlib.contextmanager
def standin(tts, tmp: Path, request) -> Iterator[Target]:
    # start_settle_s=0: the adapter's only wall-clock rule (hold the audio after START) off, so
    # that what it sends depends on the audio alone
    m, record = standin_process("funaudiochat", tmp, pause_after_silence_s=0.6, start_settle_s=0.0)
    yield Target(
        m,
        user_audio(tts, m.sample_rate),
        has_text=True,
        due=reply_due(make_reply(REPLY)),
        heard=heard_rows(record),
        held=pool_held(m),
        quiet_s=0.8,
    )
