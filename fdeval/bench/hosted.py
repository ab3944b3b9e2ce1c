"""A hosted realtime API under load: `model=gpt_realtime` against the local Realtime API stand-in
(`tests/models/standin_server.py openai_realtime`: the OpenAI protocol with a scripted model on
127.0.0.1, not OpenAI's service), 8 sessions at once in one client process beside 1 session, on
the realtime section's short cases (a first turn and a barge-in into the answer).

Per run: barge-in |error| p50 / p99 and the largest pacing lag (as in the realtime section), and
the truncate error: for every barge-in into the model's answer, the `audio_end_ms` the stand-in
received minus the ms of that item fdeval's play record says were played (what the server is told
the user heard; the adapter floors it, so 0 to -1 ms is exact). The stand-in is a process of its
own; the dummy key it is given never leaves this machine. Needs a source checkout (its tests/);
not in --quick: two realtime waves add most of a minute.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from fdeval.bench.common import REPO, Context, row, sessions, skipped
from fdeval.bench.realtime import measure, short_cases

SERVER = REPO / "tests" / "models" / "standin_server.py"
LEVELS = (1, 8)
SINGLE_CASES = 2


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_port(port: int, proc: subprocess.Popen, timeout_s: float = 60.0) -> None:
    t_end = time.monotonic() + timeout_s
    while time.monotonic() < t_end:
        if proc.poll() is not None:
            raise RuntimeError(f"the stand-in exited with {proc.returncode} before it listened")
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.2)
    raise RuntimeError(f"the stand-in did not listen on 127.0.0.1:{port} within {timeout_s:g} s")


def played_ms(run_dir: Path) -> dict[str, float]:
    """item id -> ms of it played before its flush, from the runs' playback_flush events."""
    out: dict[str, float] = {}
    for log in sessions(run_dir):
        for e in log.events:
            out.update(e.played_ms())
    return out


def run(ctx: Context) -> dict[str, Any]:
    if ctx.quick:
        return skipped("not in --quick (run python -m fdeval.bench --only hosted)")
    if not SERVER.is_file():
        return skipped(f"{SERVER} not found (the tests/ folder of a source checkout)")
    port, record = _free_port(), ctx.work / "hosted-standin.jsonl"
    record.unlink(missing_ok=True)
    server = subprocess.Popen(
        [
            sys.executable,
            str(SERVER),
            "openai_realtime",
            "--port",
            str(port),
            "--record",
            str(record),
        ],
        cwd=SERVER.parent,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    old_key = os.environ.get("OPENAI_API_KEY")
    os.environ["OPENAI_API_KEY"] = (
        "sk-bench-local-standin"  # never a real key: the stand-in is local
    )
    runs: list[dict[str, Any]] = []
    try:
        _wait_port(port, server)
        gen, _ = ctx.launch(ctx.fresh("hosted-data"), "stage=generate")
        for n in LEVELS:
            cases = short_cases(
                gen.data_dir, ctx.work / f"hosted-cases-{n}", n if n > 1 else SINGLE_CASES
            )
            m = measure(
                ctx, cases, n, 1, "model=gpt_realtime", f"model.base_url=ws://127.0.0.1:{port}/v1"
            )
            runs.append(m)
            ctx.log(
                f"bench hosted: {n} session(s): p99 {m['barge_in_p99_ms']} ms, pacing lag {m['pacing_lag_max_ms']} ms"
            )
    finally:
        server.send_signal(signal.SIGTERM)
        try:
            server.wait(30)
        except subprocess.TimeoutExpired:
            server.kill()
        if old_key is None:
            os.environ.pop("OPENAI_API_KEY", None)
        else:
            os.environ["OPENAI_API_KEY"] = old_key
    truncates = (
        [t for line in record.read_text().splitlines() for t in json.loads(line)["truncates"]]
        if record.is_file()
        else []
    )
    invalid = (
        {x for line in record.read_text().splitlines() for x in json.loads(line)["invalid"]}
        if record.is_file()
        else set()
    )
    for m in runs:
        played = played_ms(Path(m["run_dir"]))
        diffs = [
            t["audio_end_ms"] - played[t["item_id"]] for t in truncates if t["item_id"] in played
        ]
        m.update(
            truncates=len(diffs),
            truncate_error_max_ms=max((abs(d) for d in diffs), default=None),
            truncates_refused=sum(not t["accepted"] for t in truncates if t["item_id"] in played),
        )
    one, many = runs
    rows = [
        row(
            f"{many['concurrency']} gpt_realtime sessions, 1 process: {what}",
            many[k],
            unit,
            "1 session, 1 process",
            one[k],
            note=note(many),
        )
        for k, what, unit in (
            ("barge_in_p50_ms", "barge-in |error| p50", "ms"),
            ("barge_in_p99_ms", "barge-in |error| p99", "ms"),
            ("pacing_lag_max_ms", "max pacing lag", "ms"),
            ("truncate_error_max_ms", "max |audio_end_ms - played ms|", "ms"),
        )
    ]
    return {"runs": runs, "rows": rows, "standin_invalid_events": sorted(invalid)}


def note(m: dict[str, Any]) -> str:
    return (
        f"{m['barge_ins']} barge-ins, {m['truncates']} truncates ({m['truncates_refused']} refused) "
        f"in {m['cases']} sessions, {m['invalid']} invalid"
    )
