"""Keys stay where they are needed: planted in the environment (ANTHROPIC_API_KEY, OPENAI_API_KEY,
GEMINI_API_KEY, XAI_API_KEY, HF_TOKEN, each a unique random value), they appear in no output file, log, HDF5
attribute or string dataset, server log, review-server answer or label file, in no request but the
judge's own header, and in the environment of no process fdeval starts (read from
/proc/<pid>/environ while the launch runs: tests/faults/observe.py).

The launch: one case on a Moshi server pool (the official moshi.server on a tiny random
checkpoint, CPU; skipped with the reason where the moshi venv cannot be built) judged by the LLM
judge on the local Messages stand-in. The Slurm path is not covered here: it needs the local Slurm
of slurm/ (tests/cluster). A hosted model's key (OPENAI_API_KEY, XAI_API_KEY) on its client
processes and its service: tests/models/test_hosted_runs.py.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
import urllib.request

import h5py
import numpy as np
import pytest

from .conftest import TWO
from .observe import Watch, keyed_environ, leaks, planted_keys, pool_servers, review_server


def POOL(test):  # the tests on the watched launch: it starts a real model server
    return pytest.mark.slow(pytest.mark.server(test))


@POOL
def test_the_launch_itself_had_the_keys(watched_pool_launch):
    """The premise: the planted values were in the launch's environment, and /proc shows them."""
    w = watched_pool_launch
    env = w.watch.seen[w.watch.pid].environ
    assert {k: env.get(k) for k in w.keys} == w.keys


@POOL
def test_no_key_in_any_output_log_hdf5_attribute_or_server_log(watched_pool_launch):
    w = watched_pool_launch
    logs = list((w.run_dir / "servers").glob("*.log"))
    assert logs and (w.run_dir / "fdeval.log").is_file() and list(w.run_dir.glob("sessions/*.h5"))
    assert leaks(w.tmp, w.keys) == []
    assert not [name for name, v in w.keys.items() if v in w.proc.stdout + w.proc.stderr]


@POOL
def test_no_process_fdeval_starts_gets_a_key(watched_pool_launch):
    w = watched_pool_launch
    children = w.watch.children()
    servers = pool_servers(w.run_dir)
    assert servers and set(servers) <= {c.pid for c in children}, (
        servers,
        [c.cmdline for c in children],
    )
    # none of them needs a key: the judge runs in the launch itself
    given = {
        (
            " ".join(c.cmdline)[:120],
            tuple(sorted(k for k, v in c.environ.items() if k in w.keys or v in w.keys.values())),
        )
        for c in children
    }
    assert not [g for g in given if g[1]], sorted(g for g in given if g[1])


@POOL
def test_the_judge_key_goes_only_into_the_judges_auth_header(watched_pool_launch):
    w = watched_pool_launch
    key = w.keys["ANTHROPIC_API_KEY"]
    auth = (
        "x-api-key",
        "authorization",
    )  # the SDK's header: x-api-key, or (2.x) Authorization: Bearer
    reqs = w.judge.message_requests
    assert reqs and all(key in " ".join(r.headers.get(h, "") for h in auth) for r in reqs)
    for r in reqs:
        sent = json.dumps([{k: v for k, v in r.headers.items() if k not in auth}, r.body, r.path])
        assert not [name for name, v in w.keys.items() if v in sent]


@POOL
def test_the_review_server_shows_and_writes_no_key(watched_pool_launch):
    w = watched_pool_launch
    keys = planted_keys()  # fresh values: only this server had them
    with review_server([w.run_dir], keys) as (proc, url):
        answers = [
            urllib.request.urlopen(f"{url}{path}", timeout=30).read()
            for path in (
                "/",
                "/api/runs",
                "/api/sessions",
                "/api/session?run=0&case=fresh_pasta_stop__acknowledge",
                "/api/validation",
            )
        ]
        body = json.dumps(
            {
                "run": 0,
                "case": "fresh_pasta_stop__acknowledge",
                "key": "acknowledge",
                "fields": {"label": "adhere", "note": "fine"},
            }
        ).encode()
        # as the page posts it: same origin, with the token the server put in the page
        token = (
            answers[0].decode().split('<meta name="fdeval-token" content="', 1)[1].split('"', 1)[0]
        )
        req = urllib.request.Request(
            f"{url}/api/label",
            body,
            {"Content-Type": "application/json", "Origin": url, "X-Fdeval-Token": token},
        )
        answers.append(urllib.request.urlopen(req, timeout=30).read())
    out, err = proc.communicate(timeout=30)
    assert list((w.run_dir / "review").rglob("*.*")), "the label was not saved"
    assert "GET /api/runs" in err  # the request log (FDEVAL_REVIEW_LOG=1) was on and is grepped too
    assert not [
        name for name, v in keys.items() if any(v.encode() in a for a in answers) or v in out + err
    ]
    assert leaks(w.run_dir, keys) == []


def test_realtime_client_processes_get_no_key(tmp_path):
    """Sessions spread over client processes (orchestrator.client_processes): the reference agent
    needs no key there, so none may reach them. Watched until both have started, then the launch
    is killed (its clients end with it: PR_SET_PDEATHSIG; any left are ended by pid)."""
    keys = planted_keys()
    cmd = [
        sys.executable,
        "-m",
        "fdeval.launch",
        f"out_root={tmp_path / 'outputs'}",
        "progress=false",
        TWO,
        "stage.steps=[generate,run]",
        "orchestrator.clock=realtime",
        "model.concurrency=2",
        "orchestrator.client_processes=2",
    ]
    log = tmp_path / "launch.out"
    with open(log, "w") as f:  # a file, not a pipe: nobody reads it while the launch runs
        p = subprocess.Popen(
            cmd, cwd=tmp_path, env=keyed_environ(keys), stdout=f, stderr=subprocess.STDOUT
        )
    watch = Watch(p.pid)
    try:
        deadline = (
            time.monotonic() + 600
        )  # generate, then the clients start: minutes on a loaded machine at most
        while len(spawned(watch)) < 2 and p.poll() is None and time.monotonic() < deadline:
            time.sleep(0.1)
        waited_out = time.monotonic() >= deadline
        time.sleep(0.3)  # a last sample of each
    finally:
        watch.stop()
        p.kill()
        for c in spawned(watch):  # they hold the output pipe open
            with contextlib.suppress(ProcessLookupError):
                os.kill(c.pid, signal.SIGKILL)
        p.wait(timeout=60)
    assert len(spawned(watch)) == 2, (
        "still waiting for the client processes after 600 s" if waited_out else "",
        log.read_text()[-3000:],
        [c.cmdline for c in watch.children()],
    )
    given = {
        (
            " ".join(c.cmdline)[:120],
            tuple(sorted(k for k, v in c.environ.items() if k in keys or v in keys.values())),
        )
        for c in watch.children()
    }
    assert not [g for g in given if g[1]], sorted(g for g in given if g[1])


def spawned(watch: Watch) -> list:
    """multiprocessing's spawned workers (not its resource tracker)."""
    return [c for c in watch.children() if "spawn_main" in " ".join(c.cmdline)]


def test_the_grep_finds_a_key_in_a_compressed_hdf5_string_and_attribute(tmp_path):
    """What the checks above would catch: a value hidden from a byte grep by compression."""
    keys = planted_keys()
    with h5py.File(tmp_path / "x.h5", "w") as f:
        f.create_dataset(
            "notes",
            data=np.array([b"x" * 200 + keys["HF_TOKEN"].encode()] * 50),
            compression="gzip",
        )
        f["notes"].attrs["env"] = keys["GEMINI_API_KEY"]
    assert keys["HF_TOKEN"].encode() not in (tmp_path / "x.h5").read_bytes()
    found = leaks(tmp_path, keys)
    assert any(x.endswith(":notes: HF_TOKEN") for x in found) and any(
        x.endswith(":notes@env: GEMINI_API_KEY") for x in found
    )
