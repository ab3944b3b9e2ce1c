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
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

if __name__ != "__main__":
    import pytest

    from conftest_moshi import last_session_record, stream_tone

    from fdeval.models.moshi import Moshi


def serve(argv: list[str]) -> None:
    import argparse

    import aiohttp
    import sphn
    from aiohttp import web
    from conftest_moshi import opus_frames
    from fake_servers_common import Heard

    p = argparse.ArgumentParser()
    p.add_argument("--port", type=int)
    p.add_argument("--record")
    p.add_argument("--busy-s", type=float, default=0.5)
    p.add_argument("--answer-every", type=int, default=1)  # > 1: a server that keeps up with 1/N of its input
    a, rest = p.parse_known_args(argv)
    print(f"fake moshi: args {rest}", flush=True)

    async def chat(request):
        ws = web.WebSocketResponse()
        await ws.prepare(request)
        print("accepted connection", flush=True)
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
        if a.record:
            with open(a.record, "a") as f:
                f.write(json.dumps({"early": early, "frames": n, "query": dict(request.query), "args": rest,
                                    "heard": heard.record()}) + "\n")
        return ws

    app = web.Application()
    app.router.add_get("/api/chat", chat)
    web.run_app(app, host="127.0.0.1", port=a.port, print=None)


if __name__ != "__main__":

    def fake_server(tmp: Path, **kw) -> dict:
        return {"python": sys.executable, "log_dir": str(tmp / "servers"), "startup_timeout_s": 60,
                "command": ["{python}", __file__, "--port", "{port}", "--record", str(tmp / "record.jsonl")], **kw}

    def test_server_args_env_and_identity(tmp_path):
        w = tmp_path / "model.safetensors"
        w.write_bytes(b"weights")
        m = Moshi(server=fake_server(tmp_path), hf_repo=None, moshi_weight=str(w), device="cpu", half=True,
                  token_log=str(tmp_path / "t.jsonl"))
        assert m.spec.command[-5:] == ("--moshi-weight", str(w), "--device", "cpu", "--half")
        env = m.pool.extra_env
        assert json.loads(env["FDEVAL_MOSHI_LM_GEN"]) == {"temp": 0.8, "temp_text": 0.7, "top_k": 250, "top_k_text": 25}
        assert env["FDEVAL_MOSHI_TOKEN_LOG"] == str(tmp_path / "t.jsonl")
        ident = m.identity()
        assert ident["files"]["moshi_weight"]["sha256"] == hashlib.sha256(b"weights").hexdigest()
        assert ident["hf_repo"] is None and ident["dtype"] == "float16"
        assert m.turn_silence_s == 2.5 and m.clock == "realtime" and m.frame_s == 0.08 and m.sample_rate == 24000
        d = Moshi(port=8998, host="127.0.0.1")  # a server fdeval did not start: it cannot say what it runs
        assert d.identity()["checkpoint"] == "unknown: not started by fdeval" and "hf_repo" not in d.identity()
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
        cmd = [sys.executable, "-m", "fdeval.launch", f"out_root={tmp_path / 'outputs'}", "progress=false",
               "model=moshi", "model.hf_repo=null", "model.device=cpu", f"model.server.python={sys.executable}",
               f"model.server.command=['{{python}}','{__file__}',--port,'{{port}}']", "model.server.instances_per_gpu=2",
               "benchmark.timeout_s=4", "stage.steps=[generate,run]", f"benchmark.cases=[{','.join(cases)}]"]
        env = {**os.environ, "CUDA_VISIBLE_DEVICES": ""}
        t0 = time.monotonic()
        proc = subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, timeout=300, env=env)
        wall = time.monotonic() - t0
        assert proc.returncode == 0, (proc.stdout + proc.stderr)[-4000:]
        run = next((tmp_path / "outputs" / "instructfd" / "moshi").iterdir())
        durations, pacing = [], []
        for cid in cases:
            with h5py.File(run / "sessions" / f"{cid}.h5") as f:
                durations.append(f.attrs["duration_s"])
                uf = f["user_frames"][()]
                pacing.extend(uf["t_sent_s"] - uf["t_nominal_s"])
        logs = {p.name: p.read_text() for p in (run / "servers").glob("*.log")}
        assert sorted(logs) == ["moshi-0.log", "moshi-1.log"]
        assert all("accepted connection" in body for body in logs.values())  # one session on each
        assert wall < sum(durations) + 25  # the sessions overlapped
        for cid in cases:  # a server that keeps up is healthy: its lag stays within a few frames
            with h5py.File(run / "sessions" / f"{cid}.h5") as f:
                assert f.attrs["valid"] and f.attrs["health_model_lag_max_s"] < 0.5, f.attrs["invalid_reason"]
        assert float(np.percentile(pacing, 99)) <= 0.020
        print(f"2 instances: {sum(durations):.1f} session-s in {wall:.1f} s wall; "
              f"pacing p99 {np.percentile(pacing, 99) * 1e3:.2f} ms")


    def test_a_server_falling_behind_real_time_makes_the_session_invalid(tmp_path):
        """The issue's case: a server that processed a sixth of the user's audio was a normal
        session at 1.0 session-seconds per wall-second. Now it is invalid, counted, not scored."""
        import h5py

        case = "balcony_tomatoes__continue"
        args = [f"out_root={tmp_path / 'outputs'}", "progress=false", "model=moshi", "model.hf_repo=null",
                "model.device=cpu", f"model.server.python={sys.executable}",
                f"model.server.command=['{{python}}','{__file__}',--port,'{{port}}',--answer-every,'6']",
                "benchmark.timeout_s=4", f"benchmark.cases=[{case}]"]
        env = {**os.environ, "CUDA_VISIBLE_DEVICES": ""}
        proc = subprocess.run([sys.executable, "-m", "fdeval.launch", *args], cwd=tmp_path, capture_output=True,
                              text=True, timeout=300, env=env)
        assert proc.returncode == 0, (proc.stdout + proc.stderr)[-4000:]
        assert "1 session(s) invalid and not scored" in proc.stdout and "the model fell behind real time" in proc.stdout
        run = next((tmp_path / "outputs" / "instructfd" / "moshi").iterdir())
        with h5py.File(run / "sessions" / f"{case}.h5") as f:
            assert not f.attrs["valid"] and f.attrs["health_model_lag_max_s"] > 1.0
            assert f.attrs["end_reason"] == "behind_real_time" and f.attrs["health_pacing_lag_max_s"] < 0.25
        assert not list((run / "verdicts").glob("*.json"))
        status = subprocess.run([sys.executable, "-m", "fdeval.launch", *args, "stage=status"], cwd=tmp_path,
                                capture_output=True, text=True, timeout=120, env=env).stdout
        assert "invalid: 1" in status


if __name__ == "__main__":
    serve(sys.argv[1:])
