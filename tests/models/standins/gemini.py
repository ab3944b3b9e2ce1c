"""model=gemini: the real google-genai SDK against a TLS stand-in of the Live API
(fake_servers_gemini.py), served from a thread."""

from __future__ import annotations

import asyncio
import contextlib
import ssl
import threading
from pathlib import Path
from typing import Iterator

from contract_checks import Target
from fake_servers_common import free_port, make_reply, model_from_yaml, self_signed_cert, server_ssl, start_app
from fake_servers_gemini import FakeGeminiLive
from standins._common import REPLY, reply_due, user_audio

GEMINI_KEY = "test-key-0123456789"


class _ThreadServer:
    """An aiohttp app served on 127.0.0.1 from a thread with its own event loop, so that the
    client's loop holds only the client's tasks."""

    def __init__(self, app, port: int, ssl_context: ssl.SSLContext | None):
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self.runner = asyncio.run_coroutine_threadsafe(start_app(app, port, ssl_context), self.loop).result(30)

    def close(self) -> None:
        asyncio.run_coroutine_threadsafe(self.runner.cleanup(), self.loop).result(30)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)
        self.loop.close()


@contextlib.contextmanager
def standin(tts, tmp: Path, request) -> Iterator[Target]:
    monkeypatch = request.getfixturevalue("monkeypatch_module")
    monkeypatch.delenv("GOOGLE_API_KEY", raising=False)
    monkeypatch.setenv("GEMINI_API_KEY", GEMINI_KEY)
    cert, key = self_signed_cert(tmp)
    fake, port = FakeGeminiLive([make_reply(REPLY)]), free_port()
    server = _ThreadServer(fake.app(), port, server_ssl(cert, key))
    try:
        m = model_from_yaml("gemini", http_options={
            "base_url": f"https://127.0.0.1:{port}",
            "async_client_args": {"ssl": ssl.create_default_context(cafile=str(cert))}})
        yield Target(m, user_audio(tts, m.sample_rate), has_text=True, due=reply_due(make_reply(REPLY)),
                     heard=lambda: [h for h in fake.heard if h["samples"] > 0])
    finally:
        server.close()
