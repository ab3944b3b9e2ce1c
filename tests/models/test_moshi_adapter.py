"""The Moshi adapter's client side against a local server that follows moshi.server's wire order
(this file run as a script): the handshake comes late (the server is busy), then per input frame
the frame's audio and then its text piece. Needs no moshi venv, so it runs everywhere; the real
server is exercised in test_moshi_server.py. Also: two server instances run two cases at once
through `python -m fdeval.launch model=moshi`.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import sys
import time
from pathlib import Path

import numpy as np

if __name__ != "__main__":
    import pytest

    from helpers import health
    from helpers.launching import run_launch
    from helpers.moshi_fixtures import last_session_record, stream_tone

    from fdeval.engine.run import step_dir
    from fdeval.models.moshi import Moshi


def serve(argv: list[str]) -> None:
    import argparse

    import aiohttp
    import sphn
    from aiohttp import web
    from fake_servers_common import Heard, opus_frames

    p = argparse.ArgumentParser()
    p.add_argument("--port", type=int)
    p.add_argument("--record")
    p.add_argument("--busy-s", type=float, default=0.5)
    p.add_argument(
        "--answer-every", type=int, default=1
    )  # > 1: a server that keeps up with 1/N of its input
    a, rest = p.parse_known_args(argv)
    print(f"fake moshi: args {rest}", flush=True)

    async def chat(request):
        ws = web.WebSocketResponse()
        await ws.prepare(request)
        print(f"accepted connection at {time.time():.3f}", flush=True)
        early = 0
        t_end = time.monotonic() + a.busy_s  # another session holds the model: 0x00 comes later
        while time.monotonic() < t_end:
            try:
                msg = await asyncio.wait_for(ws.receive(), timeout=0.01)
                early += msg.type == aiohttp.WSMsgType.BINARY
            except asyncio.TimeoutError:
                pass
        await ws.send_bytes(b"\x00")
        writer, n, heard = sphn.OpusStreamWriter(24000), 0, Heard()
        async for frame in opus_frames(ws):
            n += 1
            heard.add(frame)
            if n % a.answer_every:
                continue
            data = writer.append_pcm(frame)  # the model "speaks" what it hears
            if data:
                await ws.send_bytes(b"\x01" + data)
            await ws.send_bytes(b"\x02" + f" p{n}".encode())  # the frame's text after its audio
        print(f"session over at {time.time():.3f}", flush=True)
        if a.record:
            with open(a.record, "a") as f:
                f.write(
                    json.dumps(
                        {
                            "early": early,
                            "frames": n,
                            "query": dict(request.query),
                            "args": rest,
                            "heard": heard.record(),
                        }
                    )
                    + "\n"
                )
        return ws

    app = web.Application()
    app.router.add_get("/api/chat", chat)
    web.run_app(app, host="127.0.0.1", port=a.port, print=None)


if __name__ != "__main__":

    def fake_server(tmp: Path, **kw) -> dict:
        return {
            "python": sys.executable,
            "log_dir": str(tmp / "servers"),
            "startup_timeout_s": 60,
            "command": [
                "{python}",
                __file__,
                "--port",
                "{port}",
                "--record",
                str(tmp / "record.jsonl"),
            ],
            **kw,
        }

    def test_server_args_env_and_identity(tmp_path):
        w = tmp_path / "model.safetensors"
        w.write_bytes(b"weights")
        m = Moshi(
            server=fake_server(tmp_path),
            hf_repo=None,
            moshi_weight=str(w),
            device="cpu",
            half=True,
            token_log=str(tmp_path / "t.jsonl"),
        )
        assert m.spec.command[-5:] == ("--moshi-weight", str(w), "--device", "cpu", "--half")
        env = m.pool.extra_env
        assert json.loads(env["FDEVAL_MOSHI_LM_GEN"]) == {
            "temp": 0.8,
            "temp_text": 0.7,
            "top_k": 250,
            "top_k_text": 25,
        }
        assert env["FDEVAL_MOSHI_TOKEN_LOG"] == str(tmp_path / "t.jsonl")
        ident = m.identity()
        assert ident["files"]["moshi_weight"]["sha256"] == hashlib.sha256(b"weights").hexdigest()
        assert ident["hf_repo"] is None and ident["dtype"] == "float16"
        assert (
            m.turn_silence_s == 2.5
            and m.clock == "realtime"
            and m.frame_s == 0.08
            and m.sample_rate == 24000
        )
        d = Moshi(
            port=8998, host="127.0.0.1"
        )  # a server fdeval did not start: it cannot say what it runs
        assert (
            d.identity()["checkpoint"] == "unknown: not started by fdeval"
            and "hf_repo" not in d.identity()
        )
        assert d.concurrency == 1

    def test_config_file():
        from omegaconf import OmegaConf

        cfg = OmegaConf.load(Path(__file__).parents[2] / "fdeval" / "conf" / "model" / "moshi.yaml")
        assert cfg._target_ == "fdeval.models.moshi.Moshi" and cfg.turn_silence_s == 2.5
        assert (cfg.temp, cfg.temp_text, cfg.top_k, cfg.top_k_text) == (0.8, 0.7, 250, 25)
        assert cfg.resources.realtime is True and 15 <= cfg.resources.gpu_mem_gb <= 20

    def test_handshake_first_and_text_before_its_audio(tmp_path):
        m = Moshi(server=fake_server(tmp_path), hf_repo=None, device="cpu")

        async def go():
            t0 = time.monotonic()
            async with m.session("Only listen.", 0) as s:
                waited = time.monotonic() - t0
                return waited, await stream_tone(s, 20)

        try:
            waited, batches = asyncio.run(go())
        finally:
            m.close()
        rec = last_session_record(tmp_path / "record.jsonl")
        assert rec["early"] == 0 and waited >= 0.45  # waited for 0x00, sent nothing before it
        assert rec["query"] == {"text_prompt": "Only listen."}
        flat = [e for b in batches for e in b]
        texts = [(i, e.text) for i, e in enumerate(flat) if e.kind == "text"]
        assert [t for _, t in texts[:3]] == [" p1", " p2", " p3"]
        # the server sent audio, then its text: the client puts the text before that audio
        i, _ = texts[1]
        assert flat[i + 1].kind == "audio"
        assert all(e.arrival_mono is not None for e in flat)

    def test_a_text_whose_audio_was_drained_already_is_placed_back_at_it():
        """The server sends a frame's audio, then its text; when the orchestrator drains between
        the two messages, the text gets the audio's length as a negative offset (before: it was
        placed where the next frame's audio starts, one frame late)."""
        import aiohttp
        import sphn

        from fdeval.models import kindbyte

        s = Moshi(port=1).session(None, 0)
        s.codec, s.WSMsgType = kindbyte.OpusCodec(24000), aiohttp.WSMsgType
        writer = sphn.OpusStreamWriter(24000)

        def message(kind: int, payload: bytes):
            return aiohttp.WSMessage(aiohttp.WSMsgType.BINARY, kindbyte.encode(kind, payload), None)

        def audio_frame() -> bytes:
            data = b""
            while not data:  # the writer returns bytes once a page is full
                data = writer.append_pcm(0.1 * np.sin(np.arange(1920) / 6).astype(np.float32))
            return data

        s._on_message(message(kindbyte.AUDIO, audio_frame()), 0.0)
        s._on_message(message(kindbyte.TEXT, b" one"), 0.0)  # not drained yet: put before its audio
        first = asyncio.run(s.receive())
        assert [e.kind for e in first] == ["text", "audio"] and first[0].offset_s == 0.0
        s._on_message(message(kindbyte.AUDIO, audio_frame()), 0.0)
        audio = asyncio.run(s.receive())  # drained between the frame's audio and its text
        s._on_message(message(kindbyte.TEXT, b" two"), 0.0)
        [text] = asyncio.run(s.receive())
        assert [e.kind for e in audio] == ["audio"] and text.text == " two"
        assert text.offset_s == pytest.approx(-len(audio[0].audio) / 24000)

    @pytest.mark.slow
    def test_two_instances_run_two_cases_at_once(tmp_path):
        import h5py

        cases = ["balcony_tomatoes__continue", "bathroom_cleaning_mix__listen"]
        # Health bounds far above any lag of a loaded machine: this is about two instances serving two
        # sessions at once (a session past a bound ends early; the bounds are tested below and in
        # tests/test_trust.py); how far behind a server falls under load is no property of the code.
        args = [
            f"out_root={tmp_path / 'outputs'}",
            "progress=false",
            "model=moshi",
            "model.hf_repo=null",
            "model.device=cpu",
            f"model.server.python={sys.executable}",
            f"model.server.command=['{{python}}','{__file__}',--port,'{{port}}']",
            "model.server.instances_per_gpu=2",
            "benchmark.timeout_s=4",
            "stage.steps=[generate,run]",
            f"benchmark.cases=[{','.join(cases)}]",
            "orchestrator.max_pacing_lag_s=60",
            "orchestrator.max_model_lag_s=60",
        ]
        proc = run_launch(
            args, tmp_path, timeout_s=900, env={**os.environ, "CUDA_VISIBLE_DEVICES": ""}
        )
        assert proc.returncode == 0, (proc.stdout + proc.stderr)[-4000:]
        run = next((tmp_path / "outputs" / "instructfd" / "moshi").iterdir())
        logs = {p.name: p.read_text() for p in (run / "servers").glob("*.log")}
        assert sorted(logs) == ["moshi-0.log", "moshi-1.log"]
        # one session on each (after the health check's connections), and they overlapped: each began
        # before the other ended (the servers' own wall-clock stamps: a launch running them one
        # after the other fails this however fast the machine)
        spans = []
        for body in logs.values():
            stamps = {
                w: [float(x.rsplit(" ", 1)[1]) for x in body.splitlines() if x.startswith(w)]
                for w in ("accepted connection at", "session over at")
            }
            assert len(stamps["accepted connection at"]) == len(stamps["session over at"]) >= 2, (
                body[-2000:]
            )
            spans.append((stamps["accepted connection at"][-1], stamps["session over at"][-1]))
        assert max(s for s, _ in spans) < min(e for _, e in spans), spans
        for cid in cases:
            with h5py.File(run / "sessions" / f"{cid}.h5") as f:
                assert f.attrs["valid"], f.attrs["invalid_reason"]
                # the server answered frame per frame (the model lag was measured) and the figures
                # agree with the frames and the bounds; a server falling behind: the next test
                assert f.attrs["health_model_audio_s"] > 0 and np.isfinite(
                    f.attrs["health_model_lag_max_s"]
                )
                health.check_verdict(f.attrs)
                uf = f["user_frames"][()]
                late = uf["t_sent_s"] - uf["t_nominal_s"]
                assert late.min() >= 0 and f.attrs["health_pacing_lag_max_s"] == late.max()
                print(
                    f"{cid}: {f.attrs['duration_s']:.1f} session-s, pacing lag max {late.max() * 1e3:.2f} ms, "
                    f"model lag max {f.attrs['health_model_lag_max_s'] * 1e3:.0f} ms"
                )

    def test_a_server_falling_behind_real_time_makes_the_session_invalid(tmp_path):
        """The issue's case: a server that processed a sixth of the user's audio was a normal
        session at 1.0 session-seconds per wall-second. Now it is invalid, counted, not scored."""
        import h5py

        case = "balcony_tomatoes__continue"
        # The pacing bound far above any lag of a loaded machine: the session must be invalid for the
        # model's lag (which grows 5/6 of a second per second however fast the machine), not for
        # the client's pacing, which a busy machine can push past its 0.25 s default.
        args = [
            f"out_root={tmp_path / 'outputs'}",
            "progress=false",
            "model=moshi",
            "model.hf_repo=null",
            "model.device=cpu",
            f"model.server.python={sys.executable}",
            f"model.server.command=['{{python}}','{__file__}',--port,'{{port}}',--answer-every,'6']",
            "benchmark.timeout_s=4",
            f"benchmark.cases=[{case}]",
            "orchestrator.max_pacing_lag_s=60",
        ]
        env = {**os.environ, "CUDA_VISIBLE_DEVICES": ""}
        proc = run_launch(args, tmp_path, timeout_s=900, env=env)
        assert proc.returncode == 3, (proc.stdout + proc.stderr)[
            -4000:
        ]  # finished, the session not scored
        assert (
            "1 session(s) invalid and not scored" in proc.stdout
            and "the model fell behind real time" in proc.stdout
        )
        run = next((tmp_path / "outputs" / "instructfd" / "moshi").iterdir())
        with h5py.File(run / "sessions" / f"{case}.h5") as f:
            assert not f.attrs["valid"] and f.attrs["health_model_lag_max_s"] > 1.0
            assert (
                f.attrs["end_reason"] == "behind_real_time"
                and "user audio sent" not in f.attrs["invalid_reason"]
            )
            assert not health.check_verdict(f.attrs)
        assert not list(step_dir(run, "judge").glob("*.json"))
        status = run_launch([*args, "stage=status"], tmp_path, timeout_s=900, env=env).stdout
        assert "invalid: 1" in status


if __name__ == "__main__":
    serve(sys.argv[1:])
