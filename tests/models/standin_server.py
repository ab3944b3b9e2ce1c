"""Serve one of the local stand-in servers as a process, the way a `ServerPool` starts a model's
server: `python standin_server.py KIND --host H --port P [--record FILE]`.

KIND is minicpmo, freezeomni (HTTPS with a throwaway certificate, as its demo server makes its
own) or funaudiochat: the stand-ins of tests/models/fake_servers_*.py, written from each upstream
protocol with a scripted model behind them, not the real models. `--record` gets one JSON line
per session with a digest of the user audio the server heard.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

from aiohttp import web
from fake_servers_common import make_reply, self_signed_cert, server_ssl

REPLY = "Sure. Start with short easy runs, three times a week."


def app_for(kind: str, record: str | None):
    if kind == "minicpmo":
        from fake_servers_minicpmo import FakeMiniCPMOWorker

        return FakeMiniCPMOWorker([make_reply(REPLY)], record=record).app(), None
    if kind == "freezeomni":
        from fake_servers_freezeomni import FakeFreezeOmniServer

        tls = server_ssl(*self_signed_cert(Path(tempfile.mkdtemp(prefix="standin-tls-"))))
        return FakeFreezeOmniServer([make_reply(REPLY)], record=record).app(), tls
    if kind == "funaudiochat":
        from fake_servers_funaudiochat import FakeFunAudioChatServer

        return FakeFunAudioChatServer([make_reply(REPLY)], record=record).app(), None
    raise SystemExit(f"unknown stand-in {kind!r}")


def main(argv: list[str]) -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("kind", choices=["minicpmo", "freezeomni", "funaudiochat"])
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--record")
    a, _ = ap.parse_known_args(argv)
    app, tls = app_for(a.kind, a.record)
    print(f"stand-in {a.kind} on {a.host}:{a.port}", flush=True)
    web.run_app(app, host=a.host, port=a.port, ssl_context=tls, print=None)


if __name__ == "__main__":
    main(sys.argv[1:])
