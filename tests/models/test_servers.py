"""ServerPool with real processes: a small kind-byte WebSocket server (this file run as a script).

Start per visible GPU with per-instance CUDA_VISIBLE_DEVICES and free ports, health by a real
handshake, bounded start attempts with the log tail in the error, restart of a dead server (bounded),
stop on close and on SIGTERM of the process that owns the pool, and the logs in the run folder.
One process per instance however many sessions ask at once (counted from /proc), and a minimal
server environment without keys (read back from the server process).
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

if __name__ != "__main__":
    import pytest

    from fdeval.models.moshi import handshake
    from fdeval.models.servers import (
        ServerError,
        ServerPool,
        ServerSpec,
        is_secret_name,
        visible_gpus,
    )


def serve(argv: list[str]) -> None:
    """A kind-byte server: --mode ok | crash | hang; records its environment in --record."""
    import argparse

    from aiohttp import web

    p = argparse.ArgumentParser()
    p.add_argument("--port", type=int)
    p.add_argument("--mode", default="ok")
    p.add_argument("--record")
    p.add_argument("--dump-env")
    a = p.parse_args(argv)
    if a.dump_env:
        with open(a.dump_env, "w") as f:
            json.dump(dict(os.environ), f)
    print(
        f"fake server pid {os.getpid()} mode {a.mode} CUDA_VISIBLE_DEVICES={os.environ.get('CUDA_VISIBLE_DEVICES')}",
        flush=True,
    )
    if a.record:
        with open(a.record, "a") as f:
            f.write(
                json.dumps(
                    {
                        "port": a.port,
                        "cuda": os.environ.get("CUDA_VISIBLE_DEVICES"),
                        "pid": os.getpid(),
                        "extra": os.environ.get("FAKE_EXTRA"),
                    }
                )
                + "\n"
            )
    if a.mode == "crash":
        print("boom: cannot load weights", flush=True)
        sys.exit(3)

    async def chat(request):
        ws = web.WebSocketResponse()
        await ws.prepare(request)
        print("accepted connection", flush=True)
        if a.mode == "hang":
            await asyncio.sleep(3600)
        await ws.send_bytes(b"\x00")
        async for msg in ws:
            if msg.data[:1] == b"\x01":
                await ws.send_bytes(msg.data)
        return ws

    app = web.Application()
    app.router.add_get("/api/chat", chat)
    web.run_app(app, host="127.0.0.1", port=a.port, print=None)


if __name__ != "__main__":

    def spec(tmp: Path, mode: str = "ok", extra_args: tuple[str, ...] = (), **kw) -> ServerSpec:
        return ServerSpec(
            command=(
                sys.executable,
                __file__,
                "--port",
                "{port}",
                "--mode",
                mode,
                "--record",
                str(tmp / "record.jsonl"),
                *extra_args,
            ),
            log_dir=str(tmp / "servers"),
            **kw,
        )

    def live_servers(tmp: Path) -> list[int]:
        """Pids of running processes (zombies excluded) whose command line names this test's record
        file: what the OS runs, whatever the pool believes."""
        marker, pids = str(tmp / "record.jsonl").encode(), []
        for d in Path("/proc").iterdir():
            if d.name.isdigit():
                try:
                    if marker in (d / "cmdline").read_bytes():
                        pids.append(int(d.name))
                except OSError:  # ended meanwhile
                    pass
        return sorted(pids)

    def wait_none_alive(
        tmp: Path, timeout_s: float = 60.0
    ) -> list[int]:  # returns as soon as none is left
        deadline = time.monotonic() + timeout_s
        while live_servers(tmp) and time.monotonic() < deadline:
            time.sleep(0.05)
        return live_servers(tmp)

    async def probe(host: str, port: int) -> None:
        await handshake(host, port, timeout_s=5)

    def records(tmp: Path) -> list[dict]:
        f = tmp / "record.jsonl"
        return [json.loads(x) for x in f.read_text().splitlines()] if f.exists() else []

    def test_visible_gpus():
        assert visible_gpus({"CUDA_VISIBLE_DEVICES": "0,1,3"}) == ["0", "1", "3"]
        assert visible_gpus({"CUDA_VISIBLE_DEVICES": "GPU-aa, GPU-bb"}) == ["GPU-aa", "GPU-bb"]
        assert visible_gpus({"CUDA_VISIBLE_DEVICES": ""}) == [None]
        assert visible_gpus({"CUDA_VISIBLE_DEVICES": "2,-1,3"}) == ["2"]

    def test_spec_from_config_checks_keys():
        s = ServerSpec.from_config(
            {"command": ["{python}", "-m", "x"], "python": None, "env": {"A": 1}}
        )
        assert s.python == sys.executable and s.env == {"A": "1"}
        assert ServerSpec.from_config(None) is None
        with pytest.raises(ValueError, match="unknown key"):
            ServerSpec.from_config({"command": ["x"], "instances_per_gpus": 2})
        with pytest.raises(ValueError, match="instances_per_gpu"):
            ServerSpec.from_config({"command": ["x"], "instances_per_gpu": 0})

    def test_instances_per_gpu_ports_devices_and_logs(tmp_path):
        pool = ServerPool(
            "fake",
            spec(tmp_path, instances_per_gpu=2, env={"FAKE_EXTRA": "yes"}),
            probe,
            gpus=["0", "1"],
        )
        assert pool.size == 4

        async def go():
            await pool.start()
            insts = [await pool.acquire() for _ in range(4)]
            for inst in insts:  # every instance answers the protocol handshake
                await handshake(inst.host, inst.port, timeout_s=5)
            return insts

        try:
            insts = asyncio.run(go())
            rec = records(tmp_path)
            assert sorted(r["cuda"] for r in rec) == ["0", "0", "1", "1"]
            assert {r["extra"] for r in rec} == {"yes"}
            assert len({i.port for i in insts}) == 4 and all(i.host == "127.0.0.1" for i in insts)
            assert [i.device for i in insts] == ["0", "0", "1", "1"]
            logs = sorted(p.name for p in (tmp_path / "servers").iterdir())
            assert logs == ["fake-0.log", "fake-1.log", "fake-2.log", "fake-3.log"]
            assert "healthy after" in (tmp_path / "servers" / "fake-0.log").read_text()
            pids = [i.proc.pid for i in insts]
        finally:
            pool.stop()
        for pid in pids:  # all stopped
            with pytest.raises(ProcessLookupError):
                os.kill(pid, 0)

    def test_a_client_process_share_starts_only_its_instances_with_the_pools_numbers(tmp_path):
        pool = ServerPool("fake", spec(tmp_path, instances_per_gpu=2), probe, gpus=["0", "1"])
        pool.share(1, 2)  # the second of two client processes
        assert pool.size == 2
        with pytest.raises(ValueError, match="cannot share"):
            pool.share(2, 2)
        try:
            asyncio.run(pool.start())
            assert [(i.index, i.device) for i in pool.instances] == [(1, "0"), (3, "1")]
            assert sorted(r["cuda"] for r in records(tmp_path)) == ["0", "1"]
            assert sorted(p.name for p in (tmp_path / "servers").iterdir()) == [
                "fake-1.log",
                "fake-3.log",
            ]
            with pytest.raises(ValueError, match="started: True"):
                pool.share(0, 2)
        finally:
            pool.stop()

    @pytest.mark.parametrize("repeat", range(4))
    def test_concurrent_acquires_start_each_instance_once(tmp_path, repeat):
        pool = ServerPool("fake", spec(tmp_path, instances_per_gpu=2), probe, gpus=["0"])
        seen: list[int] = []

        async def session(k: int) -> None:
            await asyncio.sleep(0.01 * k)  # some come during start-up, some after
            inst = await pool.acquire()
            try:
                await handshake(inst.host, inst.port, timeout_s=5)
                seen.append(inst.proc.pid)
                await asyncio.sleep(0.05)
            finally:
                pool.release(inst)

        async def go() -> list[int]:
            await asyncio.gather(*(session(k) for k in range(8)))
            return live_servers(tmp_path)

        try:
            running = asyncio.run(go())
        finally:
            pool.stop()
        started = [r["pid"] for r in records(tmp_path)]
        assert len(started) == 2 and running == sorted(started) == sorted(set(seen))
        for inst in pool.instances:  # one start per instance log
            assert inst.log_path.read_text().count("=== fdeval") == 3  # start, pid, healthy
        assert wait_none_alive(tmp_path) == []

    def test_a_pool_stopped_while_starting_starts_nothing_more(tmp_path):
        # "hang" servers never finish the handshake: the pool is stopped in the middle of its start
        # a startup timeout no loaded machine comes near: a stop that waited for it (3 attempts of 600 s)
        # instead of ending the starts at once runs into the 300 s wait below
        pool = ServerPool(
            "fake",
            spec(
                tmp_path,
                mode="hang",
                instances_per_gpu=2,
                start_attempts=3,
                startup_timeout_s=600,
                probe_timeout_s=0.5,
            ),
            probe,
            gpus=[None],
        )

        async def go():
            starting = [asyncio.ensure_future(pool.acquire()) for _ in range(3)]
            while len(records(tmp_path)) < 2:
                await asyncio.sleep(0.05)
            pool.stop()
            try:
                return await asyncio.wait_for(
                    asyncio.gather(*starting, return_exceptions=True), 300
                )
            except asyncio.TimeoutError:
                raise AssertionError(
                    "the stopped pool's starts were still running 300 s later"
                ) from None

        results = asyncio.run(go())
        assert all(
            isinstance(r, ServerError) and "stopped while it started" in str(r) for r in results
        ), results
        time.sleep(0.5)  # a new attempt, were one made, would have been recorded by now
        assert len(records(tmp_path)) == 2 and wait_none_alive(tmp_path) == []

    def test_servers_get_no_keys_from_the_environment(tmp_path, monkeypatch):
        planted = {  # fake values (never real keys): none may reach the server
            "ANTHROPIC_API_KEY": "planted-value-1",
            "OPENAI_API_KEY": "planted-value-2",
            "GEMINI_API_KEY": "PLANTED3",
            "GOOGLE_APPLICATION_CREDENTIALS": "/PLANTED4.json",
            "AWS_SECRET_ACCESS_KEY": "PLANTED5",
            "AWS_ACCESS_KEY_ID": "PLANTED6",
            "HF_TOKEN": "planted-value-7",
            "GITHUB_TOKEN": "planted-value-8",
            "SLURM_JOB_SECRET": "PLANTED9",
            "ANTHROPIC_BASE_URL": "https://PLANTED10",
            "MY_DB_PASSWORD": "PLANTED11",
            "SOME_UNLISTED_VARIABLE": "PLANTED12",
            "WANDB_API_KEY": "PLANTED13",
            "OPENAI_ORG": "PLANTED14",
        }
        kept = {
            "HF_HOME": str(tmp_path / "hf"),
            "OMP_NUM_THREADS": "3",
            "SLURM_JOB_ID": "4242",
            "LC_ALL": "C.UTF-8",
            "TORCH_HOME": str(tmp_path / "torch"),
            "PYTHONPATH": str(tmp_path),
        }
        for k, v in {**planted, **kept, "MODEL_OWN_TOKEN": "own-token"}.items():
            monkeypatch.setenv(k, v)
        dump = tmp_path / "env.json"
        s = spec(
            tmp_path,
            extra_args=("--dump-env", str(dump)),
            pass_env=("MODEL_OWN_TOKEN",),
            env={"GEMINI_API_KEY": "set-by-the-model-config"},
        )
        pool = ServerPool("fake", s, probe, gpus=["0"])
        try:
            asyncio.run(pool.start())
        finally:
            pool.stop()
        env = json.loads(dump.read_text())
        leaked = sorted(
            k for k, v in env.items() if "PLANTED" in v or (k in planted and k != "GEMINI_API_KEY")
        )
        assert leaked == []
        assert {k: env.get(k) for k in kept} == kept and env["CUDA_VISIBLE_DEVICES"] == "0"
        assert env["PATH"] == os.environ["PATH"] and env["HOME"] == os.environ["HOME"]
        assert (
            env["MODEL_OWN_TOKEN"] == "own-token"
            and env["GEMINI_API_KEY"] == "set-by-the-model-config"
        )
        assert not [
            k for k in env if is_secret_name(k) and k not in ("MODEL_OWN_TOKEN", "GEMINI_API_KEY")
        ]

    def test_pass_env_must_be_a_list_of_names():
        assert ServerSpec.from_config({"command": ["x"], "pass_env": ["HF_TOKEN"]}).pass_env == (
            "HF_TOKEN",
        )
        for bad in ("HF_TOKEN", ["HF TOKEN"], [1]):
            with pytest.raises(ValueError, match="server.pass_env"):
                ServerSpec.from_config({"command": ["x"], "pass_env": bad})

    def test_array_tasks_get_their_own_logs(tmp_path, monkeypatch):
        monkeypatch.setenv("SLURM_ARRAY_TASK_ID", "7")
        pool = ServerPool("fake", spec(tmp_path), probe, gpus=[None])
        try:
            asyncio.run(pool.start())
        finally:
            pool.stop()
        assert [p.name for p in (tmp_path / "servers").iterdir()] == ["fake-t7-0.log"]

    def test_run_dir_gets_the_logs(tmp_path):
        s = ServerSpec(command=(sys.executable, __file__, "--port", "{port}"))
        pool = ServerPool("fake", s, probe, gpus=[None])
        pool.set_run_dir(tmp_path / "run")
        try:
            asyncio.run(pool.start())
        finally:
            pool.stop()
        assert (tmp_path / "run" / "servers" / "fake-0.log").exists()

    def test_a_server_that_crashes_fails_with_its_log_tail(tmp_path):
        pool = ServerPool(
            "fake", spec(tmp_path, mode="crash", start_attempts=2), probe, gpus=[None]
        )
        with pytest.raises(
            ServerError,
            match="(?s)did not become healthy after 2 attempt.*boom: cannot load weights",
        ):
            asyncio.run(pool.acquire())
        assert len(records(tmp_path)) == 2  # bounded attempts
        with pytest.raises(
            ServerError, match="boom"
        ):  # later sessions fail at once, no new attempts
            asyncio.run(pool.acquire())
        assert len(records(tmp_path)) == 2

    def test_a_retired_instance_leaves_the_others_serving(tmp_path):
        pool = ServerPool(
            "fake", spec(tmp_path, instances_per_gpu=2, max_restarts=0), probe, gpus=[None]
        )

        async def go():
            a = await pool.acquire()
            pool.release(a)
            os.kill(a.proc.pid, signal.SIGKILL)
            a.proc.wait(5)
            b = await pool.acquire()  # a cannot be restarted (max_restarts=0): retired, b serves
            assert b is not a and a.retired and b.alive()
            pool.release(b)
            c = await pool.acquire()
            assert c is b

        try:
            asyncio.run(go())
        finally:
            pool.stop()

    def test_a_server_without_handshake_times_out(tmp_path):
        pool = ServerPool(
            "fake",
            spec(tmp_path, mode="hang", start_attempts=1, startup_timeout_s=3, probe_timeout_s=1),
            probe,
            gpus=[None],
        )
        with pytest.raises(
            ServerError, match="did not become healthy"
        ):  # at its 3 s timeout, the log says
            asyncio.run(
                asyncio.wait_for(pool.start(), 300)
            )  # (a start that ignored it: a TimeoutError here)
        assert "not healthy after 3 s" in (tmp_path / "servers" / "fake-0.log").read_text()

    def test_a_dead_server_is_restarted_then_given_up(tmp_path):
        pool = ServerPool("fake", spec(tmp_path, max_restarts=1), probe, gpus=[None])

        async def go():
            inst = await pool.acquire()
            first = inst.proc.pid
            pool.release(inst)
            os.kill(first, signal.SIGKILL)
            inst.proc.wait(5)
            inst = await pool.acquire()  # found dead: restarted
            assert inst.proc.pid != first and inst.restarts == 1
            pool.release(inst)
            os.kill(inst.proc.pid, signal.SIGKILL)
            inst.proc.wait(5)
            with pytest.raises(ServerError, match="restarted 1 time"):
                await pool.acquire()
            with pytest.raises(ServerError, match="restarted 1 time"):  # retired: fails at once
                await pool.acquire()

        try:
            asyncio.run(go())
        finally:
            pool.stop()
        log = (tmp_path / "servers" / "fake-0.log").read_text()
        assert "was found dead (exit code -9); restart 1/1" in log

    def test_sigterm_of_the_owner_stops_its_servers(tmp_path):
        script = tmp_path / "owner.py"
        script.write_text(
            textwrap.dedent(f"""
            import asyncio, sys, time
            sys.path.insert(0, {str(Path(__file__).parent)!r})
            from test_servers import spec, probe
            from fdeval.models.servers import ServerPool
            from pathlib import Path
            pool = ServerPool("fake", spec(Path({str(tmp_path)!r}), instances_per_gpu=2), probe, gpus=[None])
            asyncio.run(pool.start())
            print("ready", flush=True)
            time.sleep(600)
        """)
        )
        owner = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True)
        try:
            assert owner.stdout.readline().strip() == "ready"
            pids = [r["pid"] for r in records(tmp_path)]
            assert len(pids) == 2
            owner.send_signal(signal.SIGTERM)
            assert (
                owner.wait(20) == -signal.SIGTERM
            )  # the default action still runs after the cleanup
        finally:
            owner.kill()
        for pid in pids:
            with pytest.raises(ProcessLookupError):
                os.kill(pid, 0)

    def test_sigkill_of_the_owner_takes_its_servers_along(tmp_path):
        script = tmp_path / "owner.py"
        script.write_text(
            textwrap.dedent(f"""
            import asyncio, sys, time
            sys.path.insert(0, {str(Path(__file__).parent)!r})
            from test_servers import spec, probe
            from fdeval.models.servers import ServerPool
            from pathlib import Path
            pool = ServerPool("fake", spec(Path({str(tmp_path)!r})), probe, gpus=[None])
            asyncio.run(pool.start())
            print("ready", flush=True)
            time.sleep(600)
        """)
        )
        owner = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True)
        assert owner.stdout.readline().strip() == "ready"
        pid = records(tmp_path)[0]["pid"]
        owner.kill()
        owner.wait(10)
        deadline = (
            time.monotonic() + 120
        )  # PR_SET_PDEATHSIG acts at once; a loaded machine may take a while
        while time.monotonic() < deadline:
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                break
            time.sleep(0.1)
        else:
            os.kill(pid, signal.SIGKILL)
            pytest.fail("the server outlived its SIGKILLed owner")


if __name__ == "__main__":
    serve(sys.argv[1:])
