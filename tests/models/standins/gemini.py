"""model=gemini: the real google-genai SDK against a TLS stand-in of the Live API
(fake_servers_gemini.py), served from a thread."""

from __future__ import annotations

import contextlib
import ssl
from pathlib import Path
from typing import Iterator

from contract_checks import Target
from fake_servers_common import free_port, make_reply, model_from_yaml, self_signed_cert, server_ssl
from fake_servers_gemini import FakeGeminiLive
from standins._common import REPLY, ThreadServer, reply_due, user_audio

GEMINI_KEY = "test-key-0123456789"


@contextlib.contextmanager
def standin(tts, tmp: Path, request) -> Iterator[Target]:
    monkeypatch = request.getfixturevalue("monkeypatch_module")
    monkeypatch.delenv("GOOGLE_API_KEY", raising=False)
    monkeypatch.setenv("GEMINI_API_KEY", GEMINI_KEY)
    cert, key = self_signed_cert(tmp)
    fake, port = FakeGeminiLive([make_reply(REPLY)]), free_port()
    server = ThreadServer(fake.app(), port, server_ssl(cert, key))
    try:
        m = model_from_yaml(
            "gemini",
            http_options={
                "base_url": f"https://127.0.0.1:{port}",
                "async_client_args": {"ssl": ssl.create_default_context(cafile=str(cert))},
            },
        )
        yield Target(
            m,
            user_audio(tts, m.sample_rate),
            has_text=True,
            due=reply_due(make_reply(REPLY)),
            heard=lambda: [h for h in fake.heard if h["samples"] > 0],
        )
    finally:
        server.close()
