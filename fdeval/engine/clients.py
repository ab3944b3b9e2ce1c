"""Realtime client processes: the run step's sessions spread over several paced processes.

Under the realtime clock every session in flight costs its client CPU time each frame (the
orchestrator's pacing, the VAD, recording, the model's client): about
`orchestrator.client_cpu_s_per_session_s` CPU seconds per session-second. One process holding
more sessions than one core can pace lets its frames leave late (barge-ins placed late, sessions
marked invalid for pacing lag), so the run step spreads the sessions over
`client_processes` processes, each holding its share of the model's concurrency (its share of a
server pool's instances, `DuplexModel.share`) and recording its cases into the same folder.

The launching process hands the cases out from one queue as the processes' slots free up, collects
each case's outcome (counted as if it were recorded here), forwards the processes' log records to
its own log, and stops every process at the first user error or when the first cases all fail.
A process that dies leaves its unfinished cases unrecorded: the step fails naming it, and a relaunch
records what is missing (each session file is written atomically by the process that recorded it).
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import logging
import logging.handlers
import math
import os
import queue as queue_mod
import resource
import signal
import threading
import time
import traceback
from multiprocessing import get_context
from typing import Any, Callable

from omegaconf import OmegaConf

from fdeval.errors import FdevalError
from fdeval.secrets import secrets_withheld

log = logging.getLogger("fdeval")


class RunFailures(FdevalError):
    """Some cases could not be run (infrastructure errors); the others were recorded."""


# How long the launching process waits for client processes that said they are done to exit.
STOP_GRACE_S = 10.0


def usable_cpus() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def auto_processes(sessions: int, cpu_s_per_session_s: float, cpu_share: float, cpus: int) -> int:
    """Processes so that each is planned to use at most `cpu_share` of a core: ceil(sessions x
    cost / share), at least 1, at most the sessions and the CPUs there are."""
    need = math.ceil(sessions * cpu_s_per_session_s / cpu_share - 1e-9)
    return max(1, min(sessions, cpus, need))


def client_processes(settings: Any, clock: str, sessions: int, n_cases: int) -> int:
    """How many processes record this step's sessions (1 = this one): only a realtime run with
    more than one session in flight is spread; `client_processes` 0 = `auto_processes`."""
    if clock != "realtime" or sessions <= 1 or n_cases <= 1:
        return 1
    asked = int(settings.client_processes)
    n = asked or auto_processes(
        sessions,
        float(settings.client_cpu_s_per_session_s),
        float(settings.client_cpu_share),
        usable_cpus(),
    )
    return max(1, min(n, sessions, n_cases))


def cpu_seconds() -> float:
    """CPU time of this process and of its waited-for children (user + system)."""
    s, c = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return s.ru_utime + s.ru_stime + c.ru_utime + c.ru_stime


def _die_with_parent() -> None:
    """PR_SET_PDEATHSIG: a client process ends when the launching process is killed. Without
    prctl (not Linux) it ends when its queue's pipe closes instead."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)


def _forward_logs(q: Any) -> None:
    while (record := q.get()) is not None:
        logging.getLogger(record.name).handle(record)


def spread(
    recorder: Any, processes: int, sessions: int, target: Callable[[dict[str, Any]], None]
) -> float:
    """Record `recorder.todo` in `processes` client processes running `target`; the outcomes are
    counted by `recorder.tally`; returns the elapsed wall time."""
    run, step = recorder.run, recorder.step
    ctx = get_context("spawn")  # a fork would copy the threads (ONNX, espeak pools) mid-state
    with secrets_withheld(
        keep=run.model.env_keys
    ):  # the queues start multiprocessing's resource tracker
        tasks, outcomes, logs = ctx.Queue(), ctx.Queue(), ctx.Queue()
    for case in recorder.todo:
        tasks.put(case.case_id)
    for _ in range(sessions):  # one end mark per slot
        tasks.put(None)
    spec = {
        "cfg": OmegaConf.to_container(run.cfg, resolve=True),
        "run_dir": str(run.run_dir),
        "out_root": str(run.out_root),
        "identity": run.folder.identity,
        "shard": run.shard,
        "step": step.name,
        "todo": [c.case_id for c in recorder.todo],
        "count": processes,
    }
    forwarder = threading.Thread(
        target=_forward_logs, args=(logs,), daemon=True, name="client-logs"
    )
    forwarder.start()
    t0 = time.perf_counter()
    procs = [
        ctx.Process(
            target=target,
            args=({**spec, "index": i, "tasks": tasks, "outcomes": outcomes, "logs": logs},),
            name=f"fdeval-client-{i}",
            daemon=True,
        )
        for i in range(processes)
    ]
    with secrets_withheld(
        keep=run.model.env_keys
    ):  # a client process gets only the keys its model reads
        for p in procs:
            p.start()
    log.info(
        "%s: %d cases over %d client processes (%d sessions in flight)",
        step.name,
        len(recorder.todo),
        processes,
        min(sessions, len(recorder.todo)),
    )
    bar = run.bar(recorder.todo, step.name)
    reported: set[str] = set()
    finished: set[int] = set()
    ok = False
    try:
        while len(finished) < processes:
            try:
                msg = outcomes.get(timeout=0.5)
            except queue_mod.Empty:
                for i, p in enumerate(procs):
                    if i not in finished and p.exitcode is not None:
                        finished.add(i)  # died without its end message
                        raise FdevalError(
                            f"{step.name}: client process {i} exited with code {p.exitcode} before its "
                            f"cases were done; relaunch the same command to record what is missing"
                        )
                continue
            if "fatal" in msg:
                raise _fatal(msg)
            if "done" in msg:
                finished.add(msg["done"])
                continue
            reported.add(msg["case_id"])
            recorder.tally(msg)
            bar.update(1)
        ok = True
    finally:
        bar.close()
        _stop(procs, graceful=ok)
        logs.put(None)
        forwarder.join(timeout=5)
    missing = [c.case_id for c in recorder.todo if c.case_id not in reported]
    if missing:
        raise FdevalError(
            f"{step.name}: {len(missing)} case(s) were not recorded (e.g. {missing[0]}); relaunch the "
            "same command to record them"
        )
    return time.perf_counter() - t0


def _fatal(msg: dict[str, Any]) -> FdevalError:
    kind = RunFailures if msg.get("kind") == "failures" else FdevalError
    return kind(msg["fatal"])


def _stop(procs: list[Any], graceful: bool) -> None:
    """Wait for processes that said they are done; after a fatal error stop the others at once
    (a session they were recording is unfinished anyway: its temp files are swept on relaunch)."""
    deadline = time.monotonic() + (STOP_GRACE_S if graceful else 0.0)
    for p in procs:
        if p.exitcode is None:
            p.join(timeout=max(0.0, deadline - time.monotonic()))
    for p in procs:
        if p.exitcode is None:
            p.terminate()
            p.join(timeout=5)


def serve(spec: dict[str, Any], make_recorder: Callable[[dict[str, Any]], Any]) -> None:
    """A client process's life: log to the launching process, build the run and the model, take
    cases from the queue until the end marks, report each outcome; a fatal error is reported and
    ends it. `make_recorder(spec)` builds this process's recorder (prepared, share taken)."""
    _die_with_parent()
    index, outcomes = spec["index"], spec["outcomes"]
    root = logging.getLogger("fdeval")
    root.handlers[:] = [logging.handlers.QueueHandler(spec["logs"])]
    root.setLevel(logging.INFO)
    root.propagate = False
    rec = None
    try:
        rec = make_recorder(spec)
        rec.on_outcome = outcomes.put
        loop_tasks = spec["tasks"]
        by_id = {c.case_id: c for c in rec.todo}

        async def next_case():
            case_id = await asyncio.get_running_loop().run_in_executor(None, loop_tasks.get)
            return None if case_id is None else by_id[case_id]

        asyncio.run(rec.concurrently(max(1, int(rec.run.model.concurrency)), next_case))
        outcomes.put({"done": index})
    except FdevalError as e:
        outcomes.put(
            {"fatal": str(e), "kind": "failures" if isinstance(e, RunFailures) else "user"}
        )
    except BaseException as e:  # noqa: BLE001 - reported to the launching process, which stops the step
        first = (str(e).strip().splitlines() or [""])[0]
        log.error("client process %d: %s", index, "".join(traceback.format_exception(e))[-3000:])
        outcomes.put(
            {
                "fatal": f"{spec['step']}: client process {index} failed: {type(e).__name__}: {first}",
                "kind": "crash",
            }
        )
    finally:
        if rec is not None:
            rec.run.close()
