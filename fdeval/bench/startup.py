"""The `launch` section: what a launch costs before it does any work, in CPU and wall seconds.

Each launch is a child process of the bench, started in a scratch folder as a user would; its
CPU seconds are user + system of the child and of the children it waited for (`os.wait4`), its
wall seconds from start to exit. The kinds:

- `pass`: `python -c pass`, the interpreter alone: the baseline of every row;
- `cfg`: `python -m fdeval.launch --cfg job`: the command line checked, the config composed and
  printed, nothing run (to the first config check);
- `error`: `python -m fdeval.launch nosuchkey=1`: the one-line error, exit 2 (the same point,
  the way most mistakes end);
- `session`: one built-in case (the shortest by its user audio), `stage=run` on data generated
  beforehand, a new run folder each time (`run_tag`); run through `fdeval.bench.first_session`,
  which notes the CPU seconds and time at which the first session starts; the launch's own end
  gives the figures of the whole launch.

The kinds take turns in each round (a machine that drifts moves them all alike); the figures are
medians over `ROUNDS` rounds (`QUICK_ROUNDS` with --quick). The children's output stays in
`<out>/work/launch/` (`<kind>-<round>.out` / `.err`).
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from fdeval.bench.common import Context, row
from fdeval.bench.first_session import MARK_ENV
from fdeval.recording import read_info

ROUNDS = 5
QUICK_ROUNDS = 3
TIMEOUT_S = 600  # per launch: generous, the figures are seconds
KINDS = ("pass", "cfg", "error", "session")
BASELINE = "`python -c pass`, same rounds"


def timed(
    cmd: list[str], cwd: Path, log: Path, env: dict[str, str] | None = None
) -> dict[str, Any]:
    """Run `cmd`; its exit status, CPU and wall seconds and start time; stdout/stderr in `log`.out/.err.

    The CPU is what `wait4` reports for this one child (its own and its reaped children's), so a
    child of the bench reaped meanwhile (a TTS worker, a thread's subprocess) cannot count."""
    killed = threading.Event()
    with open(log.with_suffix(".out"), "w") as out, open(log.with_suffix(".err"), "w") as err:
        t_start, t0 = time.time(), time.perf_counter()
        proc = subprocess.Popen(cmd, cwd=cwd, stdout=out, stderr=err, env=env)
        timer = threading.Timer(TIMEOUT_S, lambda: (killed.set(), proc.kill()))
        timer.start()
        try:
            _, status, usage = os.wait4(proc.pid, 0)
        except BaseException:  # interrupted: leave no launch running behind the bench
            proc.kill()
            proc.wait()
            raise
        finally:
            timer.cancel()
        wall = time.perf_counter() - t0
    proc.returncode = os.waitstatus_to_exitcode(
        status
    )  # reaped here: Popen must not wait for it again
    if killed.is_set():
        raise RuntimeError(
            f"launch: `{' '.join(cmd)}` ran past {TIMEOUT_S} s (output in {log}.out/.err)"
        )
    return {
        "rc": proc.returncode,
        "cpu_s": usage.ru_utime + usage.ru_stime,
        "wall_s": wall,
        "t_start": t_start,
    }


def _fail(what: str, log: Path) -> RuntimeError:
    """`what`, with the child's last line of output (stderr, else stdout: a run logs to stdout)."""
    for f in (log.with_suffix(".err"), log.with_suffix(".out")):
        if lines := f.read_text(errors="replace").strip().splitlines():
            return RuntimeError(f"launch: {what} (last line of {f}: {lines[-1]})")
    return RuntimeError(f"launch: {what} (no output in {log}.out/.err)")


def measure(kind: str, i: int, ctx: Context, d: Path, case_id: str) -> dict[str, Any]:
    py, log = sys.executable, d / f"{kind}-{i}"
    if kind == "pass":
        m = timed([py, "-c", "pass"], d, log)
    elif kind == "cfg":
        m = timed([py, "-m", "fdeval.launch", "--cfg", "job"], d, log)
        if m["rc"] != 0 or "out_root" not in log.with_suffix(".out").read_text():
            raise _fail(f"--cfg job exited {m['rc']} without printing the config", log)
    elif kind == "error":
        m = timed([py, "-m", "fdeval.launch", "nosuchkey=1"], d, log)
        lines = log.with_suffix(".err").read_text().strip().splitlines()
        if m["rc"] != 2 or len(lines) != 1 or "nosuchkey" not in lines[0]:
            raise _fail(
                f"nosuchkey=1 exited {m['rc']} with {len(lines)} line(s), not one line naming the key and exit 2",
                log,
            )
    else:
        mark = d / f"session-{i}.mark.json"
        mark.unlink(missing_ok=True)
        tag = f"launch-{i}"
        m = timed(
            [
                py,
                "-m",
                "fdeval.bench.first_session",
                f"out_root={d / 'runs'}",
                "stage=run",
                f"seed={ctx.seed}",
                f"benchmark.cases=[{case_id}]",
                f"run_tag={tag}",
            ],
            d,
            log,
            env={**os.environ, MARK_ENV: str(mark)},
        )
        if m["rc"] != 0:
            raise _fail(f"the one-case run exited {m['rc']}", log)
        h5 = sorted((d / "runs").glob(f"*/*/{tag}-*/sessions/{case_id}.h5"))
        if not h5:
            raise _fail(f"the one-case run recorded no session {case_id}.h5", log)
        info = read_info(h5[0])
        m["session_s"], m["clock"] = info.duration_s, info.clock
        if not mark.is_file():
            raise _fail(
                "the one-case run finished without its first session being noted (run_session not entered?)",
                log,
            )
        first = json.loads(mark.read_text())
        m["first_cpu_s"], m["first_wall_s"] = first["cpu_s"], first["time"] - m["t_start"]
    return m


def median(xs: list[float]) -> float:
    return float(statistics.median(xs))


def run(ctx: Context) -> dict[str, Any]:
    d = ctx.fresh("launch")
    gen, _ = ctx.launch(d / "runs", "stage=generate")  # the data every session launch reads
    case = min(gen.cases, key=lambda c: sum(t.duration_s for t in c.turns))
    n = QUICK_ROUNDS if ctx.quick else ROUNDS
    got: dict[str, list[dict[str, Any]]] = {k: [] for k in KINDS}
    for i in range(n):
        for kind in KINDS:
            got[kind].append(measure(kind, i, ctx, d, case.case_id))
    figures = {
        k: {"cpu_s": [m["cpu_s"] for m in ms], "wall_s": [m["wall_s"] for m in ms]}
        for k, ms in got.items()
    }
    figures["first_session"] = {
        "cpu_s": [m["first_cpu_s"] for m in got["session"]],
        "wall_s": [m["first_wall_s"] for m in got["session"]],
    }
    for f in figures.values():
        f["cpu_s_median"], f["wall_s_median"] = median(f["cpu_s"]), median(f["wall_s"])
    user_s = sum(t.duration_s for t in case.turns)
    session_s = median([m["session_s"] for m in got["session"]])
    what = {  # figure -> its row's words
        "cfg": "to first config check: `--cfg job` (config composed and printed)",
        "error": "to first config check: one-line config error (`nosuchkey=1`, exit 2)",
        "first_session": f"to first session: `stage=run`, 1 built-in case ({case.case_id})",
        "session": "whole launch: `stage=run`, 1 built-in case, to exit",
    }
    clock = got["session"][0]["clock"]
    notes = {
        "cfg": "",
        "error": "",
        "first_session": "when run_session is first entered (fdeval.bench.first_session)",
        "session": f"a {session_s:.1f} s session ({user_s:.1f} s of user audio, {clock} clock) on data "
        "generated beforehand",
    }
    base = figures["pass"]
    rows = []
    for unit, key in (("CPU-s", "cpu_s_median"), ("wall-s", "wall_s_median")):
        for k, words in what.items():
            note = "; ".join(x for x in (f"median of {n}", notes[k]) if x)
            rows.append(
                row(f"{words}, {unit}", figures[k][key], unit, BASELINE, base[key], note=note)
            )
    return {
        "rounds": n,
        "case": case.case_id,
        "case_user_audio_s": user_s,
        "session_s": session_s,
        "figures": figures,
        "python_pass_cpu_s": base["cpu_s_median"],
        "config_check_cpu_s": figures["cfg"]["cpu_s_median"],
        "config_error_cpu_s": figures["error"]["cpu_s_median"],
        "first_session_cpu_s": figures["first_session"]["cpu_s_median"],
        "launch_to_exit_cpu_s": figures["session"]["cpu_s_median"],
        "rows": rows,
    }
