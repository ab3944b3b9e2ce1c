"""model=nova_sonic: the real aws-sdk-bedrock-runtime against the TLS HTTP/2 stand-in of
Bedrock's bidirectional stream (fake_servers_nova.py), served from a thread, trusted through
`model.ca_file`. The SDK needs Python 3.12: on an older interpreter the contract checks are
skipped, in one line; so are they when the SDK setting `ca_file` relies on has changed."""

from __future__ import annotations

import contextlib
import sys
from pathlib import Path
from typing import Iterator

import pytest

SKIP_311 = (
    "model=nova_sonic: its SDK (aws-sdk-bedrock-runtime) needs Python 3.12; this is Python {v}"
)


def python_312() -> None:
    if sys.version_info < (3, 12):
        pytest.skip(SKIP_311.format(v=".".join(map(str, sys.version_info[:3]))))


@contextlib.contextmanager
def nova_model(tmp: Path, monkeypatch, replies) -> Iterator:
    """(model, stand-in) with dummy AWS credentials in the environment."""
    python_312()
    from fake_servers_common import model_from_yaml, self_signed_cert
    from fake_servers_nova import FakeNovaSonic, serve_in_thread

    from fdeval.errors import ConfigError

    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIDSTANDIN0123456789")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "standin-secret-0123456789")
    cert, key = self_signed_cert(tmp)
    server = FakeNovaSonic(replies, cert, key)
    with serve_in_thread(server) as port:
        m = model_from_yaml("nova_sonic", endpoint=f"https://127.0.0.1:{port}", ca_file=str(cert))
        try:
            m.transport(m.client_module("smithy_http.aio.crt"))
        except ConfigError as e:
            pytest.skip(f"model=nova_sonic: {e}")
        yield m, server
        assert server.problems == [], server.problems


@contextlib.contextmanager
def standin(tts, tmp: Path, request) -> Iterator:
    python_312()
    from contract_checks import Target
    from fake_servers_common import make_reply
    from standins._common import REPLY, reply_due, user_audio

    with nova_model(tmp, request.getfixturevalue("monkeypatch_module"), [make_reply(REPLY)]) as (
        m,
        server,
    ):
        yield Target(
            m,
            user_audio(tts, m.sample_rate),
            has_text=True,
            due=reply_due(make_reply(REPLY)),
            heard=lambda: [s["heard"] for s in server.sessions if s["heard"]["samples"] > 0],
        )
