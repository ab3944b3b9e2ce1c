"""model=gpt_realtime and model=grok_voice through `python -m fdeval.launch` under the realtime
clock with a dummy key, against local stand-ins of their APIs on 127.0.0.1
(fake_servers_openai_realtime.py: a scripted model, not OpenAI's or xAI's service): Instruct-FD's
two built-in cases recorded, valid, transcribed, judged and scored (gpt_realtime); one EchoChain
conversation (grok_voice). The launches run at once (they wait on the real-time
clock, not on the CPU) against one stand-in per dialect served from this process, so every
truncate a stand-in received is checked against the played ms in fdeval's session logs. Every
launch has planted keys in its environment (tests/faults/observe.py: unique random values of
OPENAI_API_KEY, XAI_API_KEY and the others); the gpt_realtime Instruct-FD launch spreads its
sessions over two client processes and is watched: the model's key reaches those clients and,
from them, only the service's Authorization header; no other key reaches them; no key is in any
output.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytest.importorskip("openai")

from fake_servers_common import free_port, make_reply
from fake_servers_openai_realtime import FakeRealtime
from faults.observe import Watch, keyed_environ, leaks, planted_keys
from helpers.health import LENIENT_ARGS
from helpers.launching import TWO_CASES, seed_data
from standins._common import ThreadServer

from fdeval.orchestrator.recorder import flush_played_ms, read_session_log

pytestmark = pytest.mark.slow

KEY_VAR = {"gpt_realtime": "OPENAI_API_KEY", "grok_voice": "XAI_API_KEY"}
DIALECT = {"gpt_realtime": "openai", "grok_voice": "xai"}
BENCHMARKS = {
    "instructfd": [TWO_CASES, "model.concurrency=2", "orchestrator.client_processes=2"],
    "echochain": [
        "benchmark=echochain",
        "benchmark.n_conversations=1",
        "benchmark.n_resamples=200",
        "benchmark.half_duplex=false",
    ],
    "tact": [
        "benchmark=tact",
        "benchmark.n_episodes=1",
        "benchmark.n_resamples=200",
        "model.concurrency=3",
    ],
}
# Each dialect once, on the benchmarks with barge-ins (TACT, the other pairs and the EchoChain
# control are the same code paths on a realtime model: run by hand for the closing note of issue
# 25, not in CI's time; test_nova_sonic_runs_the_benchmarks_on_its_stand_in runs all three)
LAUNCHES = (("gpt_realtime", "instructfd"), ("grok_voice", "echochain"))


@pytest.fixture(scope="module")
def hosted(tmp_path_factory):
    """{(model, benchmark): (exit code, output, run folders)}, the stand-ins, the planted keys and
    the watch of the gpt_realtime Instruct-FD launch, after all the launches."""
    keys = planted_keys()
    replies = [
        make_reply(
            "Sure. Start with short easy runs, three times a week, and walk when you need to."
        ),
        make_reply(
            "Okay, I will stop there. Tell me what you would like to change, and we can plan it again."
        ),
    ]
    fakes, servers, procs = {}, [], {}
    try:
        for model, dialect in DIALECT.items():
            port = free_port()
            fakes[model] = (
                FakeRealtime(replies, dialect=dialect, api_key=keys[KEY_VAR[model]]),
                port,
            )
            servers.append(ThreadServer(fakes[model][0].app(), port))
        env = {k: v for k, v in keyed_environ(keys).items() if k != "OPENAI_BASE_URL"}
        for model, bench in LAUNCHES:
            tmp = tmp_path_factory.mktemp(f"{model}-{bench}")
            out = seed_data(tmp / "out") if bench == "instructfd" else tmp / "out"
            cmd = [
                sys.executable,
                "-m",
                "fdeval.launch",
                f"out_root={out}",
                "progress=false",
                f"model={model}",
                f"model.base_url=ws://127.0.0.1:{fakes[model][1]}/v1",
                "orchestrator.clock=realtime",
                *LENIENT_ARGS,
                *BENCHMARKS[bench],
            ]
            procs[model, bench] = (
                subprocess.Popen(
                    cmd,
                    cwd=tmp,
                    env=env,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.STDOUT,
                    text=True,
                ),
                out,
            )
        watch = Watch(procs["gpt_realtime", "instructfd"][0].pid)
        done = {}
        t_end = time.monotonic() + 600
        for k, (p, out) in procs.items():
            try:
                text, _ = p.communicate(timeout=max(1.0, t_end - time.monotonic()))
            except subprocess.TimeoutExpired:
                p.kill()
                text, _ = p.communicate()
                raise AssertionError(f"{k}: still running after 600 s:\n{text[-3000:]}") from None
            runs = sorted(d for d in out.glob("*/*/*") if (d / "sessions").is_dir())
            done[k] = (p.returncode, text, runs)
        watch.stop()
        yield done, {m: f for m, (f, _) in fakes.items()}, keys, watch
    finally:
        for p, _ in procs.values():
            if p.poll() is None:
                p.kill()
        for s in servers:
            s.close()


def _logs(runs: list[Path]) -> list[dict]:
    return [read_session_log(h5) for run in runs for h5 in sorted((run / "sessions").glob("*.h5"))]


@pytest.mark.parametrize("model,bench", LAUNCHES)
def test_each_benchmark_runs_end_to_end_on_the_stand_in(hosted, model, bench):
    done, fakes, keys, _ = hosted
    rc, text, runs = done[model, bench]
    assert rc == 0, text[-4000:]
    logs = _logs(runs)
    assert logs and all(lg["attrs"]["valid"] for lg in logs), [
        lg["attrs"]["invalid_reason"] for lg in logs
    ]
    for lg in logs:
        report = json.loads(lg["attrs"]["model_report"])
        assert report["cost_usd"] > 0 and report["prices"]["date"]
        ident = json.loads(lg["attrs"]["model"])
        assert ident["dialect"] == DIALECT[model] and ident["endpoint"].startswith(
            "ws://127.0.0.1:"
        )
    assert "service cost" in text
    (run,) = [r for r in runs if r.parent.name == model]
    if bench == "instructfd":
        assert (
            len(logs) == 2
            and list((run / "transcripts").glob("*/*.json"))
            and list((run / "verdicts").glob("*/*.json"))
        )
        assert list((run / "scores").glob("*/ias.*"))
    assert (
        fakes[model].invalid == []
    )  # every event of every launch validated against the SDK's types
    assert leaks(run.parents[2], keys) == [] and not [name for name, v in keys.items() if v in text]
    for s in fakes[model].sessions:  # the key went in the Authorization header, and nowhere else
        assert s.authorization == f"Bearer {keys[KEY_VAR[model]]}"
        sent = json.dumps(
            [
                {k: v for k, v in s.headers.items() if k.lower() != "authorization"},
                s.session_updates,
                s.query,
                s.item_creates,
            ]
        )
        assert not [name for name, v in keys.items() if v in sent]


def test_the_client_processes_get_the_models_key_and_no_other(hosted):
    done, _, keys, watch = hosted
    assert done["gpt_realtime", "instructfd"][0] == 0
    clients = [c for c in watch.children() if "spawn_main" in " ".join(c.cmdline)]
    assert len(clients) == 2, [c.cmdline for c in watch.children()]
    for c in clients:
        assert {k for k, v in c.environ.items() if k in keys or v in keys.values()} == {
            "OPENAI_API_KEY"
        }


def test_every_truncate_the_service_received_is_what_fdeval_played(hosted):
    """The barge-in table: the stand-in's audio_end_ms against the played ms in fdeval's log."""
    done, fakes, _, _ = hosted
    played: dict[str, float] = {}
    for rc, _, runs in done.values():
        for lg in _logs(runs):
            for e in lg["events"]:
                if e["kind"] == "playback_flush":
                    played.update(flush_played_ms(e["detail"]))
    rows = [
        (m, t.item_id, t.audio_end_ms, played[t.item_id])
        for m, f in fakes.items()
        for s in f.sessions
        for t in s.truncates
    ]
    print(
        "\n| model | item | audio_end_ms (stand-in) | played ms (fdeval log) | difference ms |\n"
        "|---|---|---:|---:|---:|"
    )
    for m, item, end, ms in rows:
        print(f"| {m} | {item} | {end} | {ms:.3f} | {end - ms:+.3f} |")
    assert rows and {m for m, *_ in rows} == set(DIALECT)
    assert max(abs(end - ms) for _, _, end, ms in rows) <= 20.0, rows
    assert all(t.accepted for f in fakes.values() for s in f.sessions for t in s.truncates)


def test_nova_sonic_runs_the_benchmarks_on_its_stand_in(tmp_path, monkeypatch):
    """The same three benchmarks with model=nova_sonic against the TLS HTTP/2 stand-in of Bedrock's
    stream: Python 3.12 only (its SDK), skipped in one line on older interpreters."""
    from standins.nova_sonic import nova_model

    replies = [
        make_reply(
            "Sure. Start with short easy runs, three times a week, and walk when you need to."
        ),
        make_reply(
            "Okay, I will stop there. Tell me what you would like to change, and we can plan it again."
        ),
    ]
    with nova_model(tmp_path, monkeypatch, replies) as (model, server):
        env = {**os.environ}
        for bench, args in BENCHMARKS.items():
            out = (
                seed_data(tmp_path / bench / "out")
                if bench == "instructfd"
                else tmp_path / bench / "out"
            )
            cmd = [
                sys.executable,
                "-m",
                "fdeval.launch",
                f"out_root={out}",
                "progress=false",
                "model=nova_sonic",
                f"model.endpoint={model.endpoint}",
                f"model.ca_file={model.ca_file}",
                "orchestrator.clock=realtime",
                *LENIENT_ARGS,
                *[a for a in args if not a.startswith("orchestrator.client_processes")],
            ]
            proc = subprocess.run(
                cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600
            )
            assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
            logs = _logs(sorted(d for d in out.glob("*/*/*") if (d / "sessions").is_dir()))
            assert logs and all(lg["attrs"]["valid"] for lg in logs)
        assert server.barge_ins >= 1
