"""Serve one of the local stand-in servers as a process, the way a `ServerPool` starts a model's
server: `python standin_server.py KIND --host H --port P [--record FILE]`.

KIND is minicpmo, freezeomni (HTTPS with a throwaway certificate, as its demo server makes its
own), funaudiochat, or openai_realtime / xai_realtime (the Realtime API stand-in in either dialect,
for `model=gpt_realtime` / `model=grok_voice` with `model.base_url=ws://HOST:PORT/v1`): the
stand-ins of tests/models/fake_servers_*.py, written from each upstream protocol with a scripted
model behind them, not the real models. `--record` gets one JSON line per session with a digest of
the user audio the server heard; for the Realtime stand-ins, written when the server is stopped
(SIGTERM or SIGINT), with the truncates it received and the events that failed validation.
"""

from __future__ import annotations

import argparse
import json
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
    if kind in ("openai_realtime", "xai_realtime"):
        from fake_servers_openai_realtime import FakeRealtime

        fake = FakeRealtime(
            [make_reply(REPLY), make_reply("Okay, I will stop there.")], dialect=kind.split("_")[0]
        )
        app = fake.app()
        if record:

            async def dump(_app) -> None:  # aiohttp's shutdown, on SIGTERM or SIGINT
                with open(record, "a") as f:
                    for s in fake.sessions:
                        f.write(
                            json.dumps(
                                {
                                    "model": s.model,
                                    "heard": s.heard,
                                    "invalid": fake.invalid,
                                    "truncates": [t._asdict() for t in s.truncates],
                                    "deletes": [d._asdict() for d in s.deletes],
                                }
                            )
                            + "\n"
                        )

            app.on_shutdown.append(dump)
        return app, None
    raise SystemExit(f"unknown stand-in {kind!r}")


def main(argv: list[str]) -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument(
        "kind",
        choices=["minicpmo", "freezeomni", "funaudiochat", "openai_realtime", "xai_realtime"],
    )
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--record")
    a, _ = ap.parse_known_args(argv)
    app, tls = app_for(a.kind, a.record)
    print(f"stand-in {a.kind} on {a.host}:{a.port}", flush=True)
    web.run_app(app, host=a.host, port=a.port, ssl_context=tls, print=None)


if __name__ == "__main__":
    main(sys.argv[1:])
