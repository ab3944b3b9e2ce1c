"""model=gpt_realtime: the real openai SDK against a stand-in of the Realtime API
(fake_servers_openai_realtime.py), served from a thread; `realtime_standin` serves the other
configs of the adapter too (grok_voice, gpt_realtime_2)."""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Iterator

from contract_checks import Target
from fake_servers_common import free_port, make_reply, model_from_yaml
from fake_servers_openai_realtime import FakeRealtime
from standins._common import REPLY, ThreadServer, reply_due, user_audio

KEYS = {
    "openai": ("OPENAI_API_KEY", "sk-test-contract-0123456789"),
    "xai": ("XAI_API_KEY", "xai-test-contract-0123"),
}


@contextlib.contextmanager
def realtime_standin(name: str, dialect: str, request) -> Iterator[Target]:
    monkeypatch = request.getfixturevalue("monkeypatch_module")
    var, key = KEYS[dialect]
    monkeypatch.setenv(var, key)
    tts = request.getfixturevalue("tts")
    fake, port = FakeRealtime([make_reply(REPLY)], dialect=dialect, api_key=key), free_port()
    server = ThreadServer(fake.app(), port)
    try:
        m = model_from_yaml(name, base_url=f"ws://127.0.0.1:{port}/v1")
        yield Target(
            m,
            user_audio(tts, m.sample_rate),
            has_text=True,
            due=reply_due(make_reply(REPLY)),
            heard=lambda: [s.heard for s in fake.sessions if s.heard["samples"] > 0],
        )
        assert fake.invalid == [], fake.invalid
    finally:
        server.close()


def standin(tts, tmp: Path, request):
    return realtime_standin("gpt_realtime", "openai", request)
