"""PersonaPlex adapter, protocol only: against a local server (this file run as a script) that does
what NVIDIA/personaplex `moshi/moshi/server.py` does on the wire: both query parameters required,
voice prompt looked up in --voice-prompt-dir, prompts run BEFORE the 0x00 handshake while whatever
the client sends is read and dropped, then Ogg/Opus both ways with each frame's text piece sent
before its audio. No PersonaPlex weights are used (none are available here).
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
from pathlib import Path


if __name__ != "__main__":
    import pytest

    from helpers.moshi_fixtures import last_session_record, stream_tone

    from fdeval.models.personaplex import PersonaPlex


def serve(argv: list[str]) -> None:
    import argparse

    import aiohttp
    import sphn
    from aiohttp import web
    from fake_servers_common import Heard, opus_frames

    p = argparse.ArgumentParser()
    p.add_argument("--port", type=int)
    p.add_argument("--voice-prompt-dir")
    p.add_argument("--record")
    p.add_argument("--prompt-s", type=float, default=0.6)
    a, rest = p.parse_known_args(argv)
    lock = asyncio.Lock()

    async def chat(request):
        ws = web.WebSocketResponse()
        await ws.prepare(request)
        text_prompt = request.query["text_prompt"]  # KeyError -> 500, as upstream
        voice = os.path.join(a.voice_prompt_dir, request.query["voice_prompt"])
        assert os.path.exists(voice), voice
        dropped = 0
        async with lock:
            # the system prompts run first; messages that arrive meanwhile are read and dropped
            t_end = time.monotonic() + a.prompt_s
            while time.monotonic() < t_end:
                try:
                    msg = await asyncio.wait_for(ws.receive(), timeout=0.01)
                    if msg.type == aiohttp.WSMsgType.BINARY:
                        dropped += 1
                except asyncio.TimeoutError:
                    pass
            await ws.send_bytes(b"\x00")
            writer, n, heard = sphn.OpusStreamWriter(24000), 0, Heard()
            async for frame in opus_frames(ws):
                n += 1
                heard.add(frame)
                await ws.send_bytes(b"\x02" + f" w{n}".encode())  # text first ...
                await asyncio.sleep(0.002)
                data = writer.append_pcm(0.5 * frame)
                if data:
                    await ws.send_bytes(b"\x01" + data)  # ... then its audio (send loop)
            with open(a.record, "a") as f:
                f.write(
                    json.dumps(
                        {
                            "text_prompt": text_prompt,
                            "voice_prompt": request.query["voice_prompt"],
                            "dropped_before_handshake": dropped,
                            "frames": n,
                            "extra_args": rest,
                            "heard": heard.record(),
                        }
                    )
                    + "\n"
                )
        return ws

    app = web.Application()
    app.router.add_get("/api/chat", chat)
    web.run_app(app, port=a.port, print=None)  # no --host: all interfaces, as upstream


if __name__ != "__main__":

    @pytest.fixture
    def plex(tmp_path):
        (tmp_path / "voices").mkdir()
        (tmp_path / "voices" / "NATF0.pt").write_bytes(b"embedding")
        model = PersonaPlex(
            server={
                "python": sys.executable,
                "log_dir": str(tmp_path / "servers"),
                "startup_timeout_s": 60,
                "command": [
                    "{python}",
                    __file__,
                    "--port",
                    "{port}",
                    "--record",
                    str(tmp_path / "record.jsonl"),
                ],
            },
            voice_prompt_dir=str(tmp_path / "voices"),
            hf_repo=None,
            device="cpu",
        )
        yield model, tmp_path
        model.close()

    def test_config_and_identity():
        from omegaconf import OmegaConf

        cfg = OmegaConf.load(
            Path(__file__).parents[2] / "fdeval" / "conf" / "model" / "personaplex.yaml"
        )
        assert cfg.turn_silence_s == 5.0 and cfg.voice_prompt == "NATF0.pt"
        assert cfg._target_ == "fdeval.models.personaplex.PersonaPlex"
        m = PersonaPlex(port=1, host="127.0.0.1")
        assert (
            m.turn_silence_s == 5.0
            and m.clock == "realtime"
            and m.sample_rate == 24000
            and m.frame_s == 0.08
        )
        assert m.identity()["tested"] == "protocol only"
        assert m.query("Only listen.", 3) == {
            "text_prompt": "Only listen.",
            "voice_prompt": "NATF0.pt",
        }
        assert m.query(None, 3)["text_prompt"] == ""

    def test_session_protocol(plex):
        model, tmp = plex

        async def go():
            async with model.session("Listen quietly; do not interrupt.", 0) as s:
                return await stream_tone(s, 25)

        batches = asyncio.run(go())
        session = last_session_record(tmp / "record.jsonl")  # (not the health probes' rows)
        assert (
            session["text_prompt"] == "Listen quietly; do not interrupt."
            and session["voice_prompt"] == "NATF0.pt"
        )
        assert session["dropped_before_handshake"] == 0  # nothing sent before 0x00
        assert session["extra_args"] == [
            "--device",
            "cpu",
        ]  # (--voice-prompt-dir parsed; hf_repo=None not passed)
        flat = [e for b in batches for e in b]
        texts = [e.text for e in flat if e.kind == "text"]
        audio = [e for e in flat if e.kind == "audio"]
        assert texts[:3] == [" w1", " w2", " w3"] and len(audio) >= 15
        assert all(e.arrival_mono is not None for e in flat)
        # a text piece precedes the audio it belongs to in the event stream
        first_text = next(i for i, e in enumerate(flat) if e.kind == "text")
        first_audio = next(i for i, e in enumerate(flat) if e.kind == "audio")
        assert first_text < first_audio

    def test_missing_voice_prompt_fails_the_health_check(tmp_path):
        (tmp_path / "voices").mkdir()
        model = PersonaPlex(
            server={
                "python": sys.executable,
                "log_dir": str(tmp_path / "servers"),
                "startup_timeout_s": 4,
                "start_attempts": 1,
                "probe_timeout_s": 2,
                "command": [
                    "{python}",
                    __file__,
                    "--port",
                    "{port}",
                    "--record",
                    str(tmp_path / "r.jsonl"),
                ],
            },
            voice_prompt_dir=str(tmp_path / "voices"),
            hf_repo=None,
            device="cpu",
        )
        from fdeval.models.servers import ServerError

        async def go():
            async with model.session(None, 0):
                pass

        try:
            with pytest.raises(ServerError, match="did not become healthy"):
                asyncio.run(go())
        finally:
            model.close()


if __name__ == "__main__":
    serve(sys.argv[1:])
