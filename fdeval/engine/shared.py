"""The steps every benchmark shares: generate the cases, record the sessions, compute the metrics.

`run` plays each case to the model in one live session (the case's user policy, scripted by
default) and writes its stereo WAV and HDF5 log; sessions run `model.concurrency` at a time; an
infrastructure error of the model is retried `model.case_retries` times and then recorded as
`sessions/<case_id>.error.json`, never as a result; a run whose first cases all fail stops.
`score` runs the benchmark's declared metrics over its steps' files.
"""

from __future__ import annotations

import asyncio
import gc
import logging
import math
import platform
import time
import traceback
import uuid
import zlib
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import onnxruntime
from omegaconf import OmegaConf

import fdeval
from fdeval.audio.io import read_wav
from fdeval.audio.resample import resample
from fdeval.audio.vad import BatchedVAD, SileroVAD
from fdeval.cases.speech import check_speech
from fdeval.engine.clients import RunFailures, client_processes, cpu_seconds, serve, spread
from fdeval.engine.identity import RunLock
from fdeval.engine.run import Run, SessionState, build
from fdeval.engine.steps import Aggregate, Metric, Step
from fdeval.errors import ConfigError, FdevalError
from fdeval.files import remove_stale_temps, write_json_atomic
from fdeval.models.base import DuplexModel, ModelUnavailable
from fdeval.orchestrator.clock import make_clock
from fdeval.orchestrator.recorder import write_session
from fdeval.orchestrator.turns import TurnConfig, effective_turn_config, session_length_s
from fdeval.orchestrator.session import run_session
from fdeval.recording import H5PY_VERSION
from fdeval.settings import OrchestratorSettings, typed
from fdeval.types import TestCase

log = logging.getLogger("fdeval")

# A run whose first this-many cases all fail stops instead of failing every case the same way.
FAIL_FAST_CASES = 3
SPEECH_CACHE = ".speech_check.json"  # in the data folder: what the VAD heard of each turn file


def case_seed(seed: int, case_id: str) -> int:
    """A per-case seed that does not depend on which other cases run."""
    return (seed * 1_000_003 + zlib.crc32(case_id.encode())) % (2**31)


def versions() -> dict[str, str]:
    return {
        "fdeval": fdeval.__version__,
        "python": platform.python_version(),
        "numpy": np.__version__,
        "onnxruntime": onnxruntime.__version__,
        "h5py": H5PY_VERSION,
    }


class Generate(Step):
    """Write the benchmark's cases and audio into its data folder (shared by runs).

    One generate at a time per data folder: it holds `<data folder>/.lock` (an flock), so a
    second launch that needs the same data (another sweep started at once) waits for the first
    and then finds its files done (`Benchmark.generate` skips what exists) instead of writing them
    too. A user's own case folder (`cases_dir`) is only read: nothing to lock."""

    name = stage = "generate"
    placement = "local"

    def execute(self, run: Run) -> None:
        tts = build(run.cfg.tts)
        lock = None if run.benchmark.cases_dir is not None else data_lock(run.data_dir)
        if lock is not None:
            lock.acquire(wait=lambda holder: _say_waiting(run.data_dir, holder))
        try:
            t0 = time.perf_counter()
            if (
                run.data_dir.is_dir()
            ):  # temp files of a generate that was killed (no live one: the lock is ours)
                for sub in [run.data_dir, *(p for p in run.data_dir.rglob("*") if p.is_dir())]:
                    remove_stale_temps(sub)
            run.benchmark.generate(run.data_dir, tts, run.seed, run.progress)
            log.info(
                "generate: %d cases in %s (%.1f s)",
                len(run.cases),
                run.data_dir,
                time.perf_counter() - t0,
            )
        finally:
            if lock is not None:
                lock.release()


def data_lock(data_dir: Path) -> RunLock:
    """The lock a generate holds on a data folder (named as a run folder's: `.lock`)."""
    return RunLock(data_dir)


def _say_waiting(data_dir: Path, holder: str) -> None:
    msg = (
        f"generate: another fdeval process is generating {data_dir}{' (' + holder + ')' if holder else ''}; "
        "waiting for it, then using what it wrote"
    )
    log.info(msg)
    print(f"fdeval: {msg}", flush=True)


def turn_audio(case: TestCase, root: Path, sr: int) -> list[np.ndarray]:
    out = []
    for turn in case.turns:
        x, file_sr = read_wav(root / turn.audio_path, mono=True)
        out.append(resample(x, file_sr, sr) if file_sr != sr else x)
    return out


def check_fits(cases: list[TestCase], max_session_s: float) -> None:
    """A case whose user turns alone outlast max_session_s would be cut: an error before any session."""
    for c in cases:
        total = sum(t.duration_s for t in c.turns)
        if total >= max_session_s:
            raise ConfigError(
                f"case {c.case_id!r}: field 'turns': {total:.1f} s of user audio does not fit in "
                f"orchestrator.max_session_s={max_session_s:g}; raise it or shorten the case"
            )


def check_model_limit(
    cases: list[TestCase], model: DuplexModel, benchmark: Any, turns: TurnConfig
) -> None:
    """A model whose service ends a session after `model.max_session_s`: every case that could
    last longer (its planned worst-case length, as the orchestrator would cut it at
    max_session_s) is an error before any session, naming the case and its length."""
    limit = model.max_session_s
    if limit is None or turns.max_session_s <= limit:
        return
    for c in cases:
        worst = min(session_length_s(benchmark.planned_turns(c), turns)[1], turns.max_session_s)
        if worst > limit:
            raise ConfigError(
                f"case {c.case_id!r}: planned to last up to {worst:.0f} s, longer than model={model.name} "
                f"allows in one session ({limit:g} s); set orchestrator.max_session_s={limit:g} or shorten "
                "the case"
            )


class RecordSessions(Step):
    """The `run` step: one recorded live session per case (see the module doc).

    A benchmark may declare a session step of its own by subclassing it (another `name` and
    `folder`, and the hooks below): its sessions are recorded, resumed and checked as the run
    step's, e.g. EchoChain's half-duplex control, derived from the live sessions."""

    name = stage = "run"
    placement = "gpu_array"
    folder = "sessions"

    def session_cases(self, run: Run) -> list[TestCase]:
        """The cases this step records (this process's shard)."""
        return run.cases

    def digest(self, run: Run, case: TestCase) -> str:
        """What the recording of `case` must carry to be reused (its inputs' hash)."""
        return run.case_digest(case)

    def audio(self, run: Run, case: TestCase, sample_rate: int) -> list[np.ndarray]:
        """The case's user turns' audio at the session rate."""
        return turn_audio(case, run.case_root, sample_rate)

    def check_audio(self, run: Run, cases: list[TestCase]) -> None:
        """Before any session: each case file's turn audio holds speech where its words are
        (`fdeval.cases.speech`), so a file of noise is one line, not the model's failure. What
        the VAD heard of each file is kept in the data folder (`.speech_check.json`)."""
        check_speech(cases, run.case_root, run.data_dir / SPEECH_CACHE)

    def policy(self, run: Run, case: TestCase, audio: list[np.ndarray]) -> Any:
        """The session's user policy (None: the scripted turns with `audio`)."""
        return run.benchmark.user_policy(case, audio, run)

    def state(self, run: Run, case: TestCase, model_id: str | None = None) -> SessionState:
        return run.folder.session_state(case, self.digest(run, case), model_id, self.folder)

    def execute(self, run: Run) -> None:
        _Recorder(run, self).record()


class _Recorder:
    """Records a step's missing sessions: in this process, or spread over realtime client
    processes (`fdeval.engine.clients`), each of which records with a `_Recorder` of its own."""

    def __init__(self, run: Run, step: RecordSessions):
        self.run, self.step = run, step
        settings = typed(run.cfg.orchestrator, OrchestratorSettings, "orchestrator")
        self.settings = settings
        self.clock = settings.clock
        self.ocfg = settings.to_config()
        if fixed := run.benchmark.orchestrator_overrides():
            self.ocfg = replace(self.ocfg, turns=replace(self.ocfg.turns, **fixed))
        self.failures: list[str] = []
        self.invalid: dict[
            str, int
        ] = {}  # case -> which recording of it this launch's invalid session is
        self.attempts: dict[
            str, int
        ] = {}  # case -> recordings so far of its invalid session on disk
        self.recorded = 0
        self.sim_s = self.wall_s = 0.0
        self.errors_s: list[float] = []  # |error| of every barge-in recorded
        self.cost_usd: float | None = (
            None  # a hosted API's billed cost, summed over the sessions recorded
        )
        self.pacing_lag_s = 0.0
        self.on_outcome = None  # a client process reports each case to the launching process

    def _states(self, model_id: str) -> dict[str, SessionState]:
        run, step, d = self.run, self.step, self.step.folder
        states = {c.case_id: step.state(run, c, model_id) for c in self.cases}
        foreign = [s for s in states.values() if s.state == "foreign"]
        run.refuse_foreign(
            "session", [f"{d}/{s.case_id}.h5" for s in foreign], foreign[0].why if foreign else ""
        )
        for s in states.values():
            if s.state == "corrupt":
                log.warning(
                    "%s: %s/%s.h5 cannot be used (%s); recording it again",
                    step.name,
                    d,
                    s.case_id,
                    s.why,
                )
            elif s.state == "foreign":
                log.warning(
                    "%s: %s/%s.h5 is another run's (%s); recording it again (resume=redo)",
                    step.name,
                    d,
                    s.case_id,
                    s.why,
                )
        return states

    def record(self) -> None:
        run = self.run
        model: DuplexModel = (
            run.model
        )  # constructing it is cheap (servers and weights load on first use)
        self.model_id = run.model_id  # records model.json for the later steps
        self.cases = self.step.session_cases(run)
        states = self._states(self.model_id)
        self.attempts = prior_attempts(states)
        retries = int(self.settings.invalid_retries)
        kept = [s for s in states.values() if s.state == "invalid" and s.attempt > retries]
        if (
            kept
        ):  # recorded as often as allowed: kept with its reason instead of redone on every relaunch
            msg = (
                f"{self.step.name}: {len(kept)} session(s) stay invalid, not recorded again: each was recorded "
                f"{min(s.attempt for s in kept)} time(s) or more (orchestrator.invalid_retries={retries}; e.g. "
                f"{kept[0].case_id}: {kept[0].why}); raise orchestrator.invalid_retries to record them again"
            )
            log.warning(msg)
            print(f"fdeval: warning: {msg}", flush=True)
        skip = {s.case_id for s in kept}
        self.todo = [
            c for c in self.cases if states[c.case_id].state != "done" and c.case_id not in skip
        ]
        if not self.todo:
            log.info(
                "%s: all %d cases already recorded%s",
                self.step.name,
                len(self.cases),
                f" ({len(kept)} of them invalid)" if kept else "",
            )
            return
        check_fits(self.todo, self.ocfg.turns.max_session_s)
        check_model_limit(
            self.todo,
            model,
            run.benchmark,
            effective_turn_config(self.ocfg.turns, model.turn_silence_s),
        )
        self.step.check_audio(run, self.todo)
        self.clock_kind = model.clock if self.clock == "auto" else self.clock
        n_parallel = max(1, int(model.concurrency))
        if n_parallel > 1:
            self.todo = self.longest_first(self.todo, model)
        self.processes = client_processes(
            self.settings, self.clock_kind, n_parallel, len(self.todo)
        )
        cpu0 = cpu_seconds()
        if self.processes > 1:
            self.wall_s = spread(self, self.processes, n_parallel, client_main)
        else:
            self.prepare()
            if n_parallel > 1 and len(self.todo) > 1:
                self.wall_s = asyncio.run(self.concurrently(n_parallel, self.todo))
            else:
                for case in run.bar(self.todo, self.step.name):
                    try:
                        result, exc = asyncio.run(self._attempt(case)), None
                    except Exception as e:
                        result, exc = None, e
                    self._store(case, result, exc)
        self.cpu_s = cpu_seconds() - cpu0
        self._summary()

    def longest_first(self, cases: list[TestCase], model: DuplexModel) -> list[TestCase]:
        """`cases` by expected session length, longest first: with several sessions in flight (rows
        of a batch, server instances) the last ones to start are the short ones, so the slots stay
        busy until the end (longest-processing-time-first scheduling)."""
        turns = effective_turn_config(self.ocfg.turns, model.turn_silence_s)
        length = {
            c.case_id: session_length_s(self.run.benchmark.planned_turns(c), turns)[0]
            for c in cases
        }
        return sorted(cases, key=lambda c: -length[c.case_id])

    def prepare(self) -> None:
        """What this process needs before its first session: the VAD, the session attributes."""
        run, model = self.run, self.run.model
        # sessions in lockstep share one event loop and step together: their VAD calls can too
        batched = self.clock_kind == "lockstep" and int(model.concurrency) > 1
        self.vad = (BatchedVAD if batched else SileroVAD)(sample_rate=self.ocfg.sample_rate)
        if self.clock_kind == "realtime":
            # Everything loaded so far (modules, config, the model) lives for the whole run. Full
            # collections walked it all (50-75 ms each here, a pause the frame loop feels); frozen,
            # they walk only what the sessions allocate.
            gc.collect()
            gc.freeze()
        self.base_attrs = {
            "model": model.identity(),
            "model_id": self.model_id,
            "benchmark": run.benchmark.name,
            "benchmark_version": run.benchmark.version,
            "seed": run.seed,
            "versions": versions(),
            "run_id": run.run_id,
            "run_identity": run.folder.identity,
        }
        model.set_run_dir(run.run_dir)  # in-job servers keep their logs in the run folder

    async def _attempt(self, case: TestCase):
        run, model, step = self.run, self.run.model, self.step
        audio = step.audio(run, case, self.ocfg.sample_rate)
        seed = case_seed(run.seed, case.case_id)
        attrs = {
            **self.base_attrs,
            "case_seed": seed,
            "case_version": case.version,
            "case_digest": step.digest(run, case),
            "session_id": uuid.uuid4().hex,
            "session_step": step.name,
            "recording_attempt": self.attempts.get(case.case_id, 0) + 1,
        }
        retries = max(0, int(model.case_retries))
        for i in range(retries + 1):
            policy = step.policy(run, case, audio)  # None: the case's scripted turns
            try:
                return await run_session(
                    case,
                    None if policy is not None else audio,
                    model,
                    self.ocfg,
                    make_clock(self.clock_kind),
                    self.vad,
                    seed=seed,
                    instruction=case.system_instruction,
                    attrs=attrs,
                    policy=policy,
                )
            except (
                Exception
            ) as e:  # a lost model server is restarted by the model: retry the case (bounded)
                if not isinstance(e, ModelUnavailable) or i == retries:
                    raise
                log.warning(
                    "%s: %s: %s; retrying the case (%d/%d)",
                    step.name,
                    case.case_id,
                    str(e).splitlines()[0],
                    i + 1,
                    retries,
                )

    def _store(self, case: TestCase, result, exc: BaseException | None) -> None:
        run, name = self.run, self.step.name
        h5, wav = run.folder.session_paths(case.case_id, self.step.folder)
        err_file = h5.parent / f"{case.case_id}.error.json"
        if exc is not None:
            if isinstance(exc, FdevalError):
                raise exc
            # an infrastructure failure of this case: recorded, never a verdict
            first = (str(exc).strip().splitlines() or [""])[0]
            write_json_atomic(
                err_file,
                {
                    "case_id": case.case_id,
                    "stage": name,
                    "error": f"{type(exc).__name__}: {exc}",
                    "traceback": "".join(traceback.format_exception(exc))[-4000:],
                    "model_id": self.model_id,
                },
            )
            log.error("%s: %s failed: %s: %s", name, case.case_id, type(exc).__name__, first)
            self.tally(
                {"case_id": case.case_id, "failed": True, "error": f"{type(exc).__name__}: {first}"}
            )
            return
        h = result.log.attrs
        write_session(result.log, result.user, result.model, wav, h5)
        err_file.unlink(missing_ok=True)
        errs = [
            t["error_s"]
            for t in result.log.turns
            if t["turn_type"] == "barge-in" and not math.isnan(t["error_s"])
        ]
        lag = h.get("health_model_lag_max_s", float("nan"))
        health = (
            ""
            if self.clock_kind != "realtime"
            else f", pacing lag {1000 * h['health_pacing_lag_max_s']:.1f} ms"
            + ("" if math.isnan(lag) else f", model lag {lag:.2f} s")
        )
        log.info(
            "%s: %s: %.1f s session in %.2f s wall (%s)%s%s",
            name,
            case.case_id,
            result.log.duration_s,
            result.wall_s,
            h.get("end_reason"),
            health,
            f", barge-in error {max(errs) * 1000:.2f} ms" if errs else "",
        )
        if not h["valid"]:
            log.warning(
                "%s: %s: session invalid, not scored: %s", name, case.case_id, h["invalid_reason"]
            )
        self.tally(
            {
                "case_id": case.case_id,
                "failed": False,
                "attempt": int(h["recording_attempt"]),
                "session_s": float(result.log.duration_s),
                "wall_s": float(result.wall_s),
                "valid": bool(h["valid"]),
                "barge_in_error_s": [abs(float(e)) for e in errs],
                "pacing_lag_max_s": float(h.get("health_pacing_lag_max_s", 0.0)),
                "cost_usd": (h.get("model_report") or {}).get("cost_usd"),
            }
        )

    def tally(self, outcome: dict[str, Any]) -> None:
        """Count one case's outcome (this process's own, or one a client process reported)."""
        if self.on_outcome is not None:
            self.on_outcome(outcome)
        if outcome["failed"]:
            self.failures.append(outcome["case_id"])
            if (
                self.recorded == 0
                and len(self.failures) >= min(FAIL_FAST_CASES, len(self.todo))
                and len(self.todo) > 1
            ):
                d = self.run.run_dir / self.step.folder
                raise RunFailures(
                    f"{self.step.name}: the first {len(self.failures)} case(s) all failed, so the run stops "
                    f"(e.g. {outcome['case_id']}: {outcome['error']}); reasons in {d}/*.error.json"
                )
            return
        self.recorded += 1
        self.sim_s += outcome["session_s"]
        self.wall_s += outcome["wall_s"]
        self.errors_s += outcome["barge_in_error_s"]
        self.pacing_lag_s = max(self.pacing_lag_s, outcome["pacing_lag_max_s"])
        if outcome.get("cost_usd") is not None:
            self.cost_usd = (self.cost_usd or 0.0) + float(outcome["cost_usd"])
        if not outcome["valid"]:
            self.invalid[outcome["case_id"]] = outcome["attempt"]

    async def concurrently(self, n: int, todo: Any) -> float:
        """Record with `n` sessions in flight (server instances, rows of a batched in-process model),
        taking cases from `todo` (a list, or a client process's queue reader); the wall time is the
        elapsed time, not the sum of the overlapping sessions' times."""
        bar = self.run.bar(self.todo, self.step.name) if isinstance(todo, list) else None
        queue = list(todo) if isinstance(todo, list) else None
        t0 = time.perf_counter()

        async def next_case() -> TestCase | None:
            if queue is not None:
                return queue.pop(0) if queue else None
            return await todo()

        async def worker():
            while (case := await next_case()) is not None:
                try:
                    result, exc = await self._attempt(case), None
                except Exception as e:
                    result, exc = None, e
                self._store(case, result, exc)
                if bar is not None:
                    bar.update(1)

        try:
            await asyncio.gather(*(worker() for _ in range(min(n, len(self.todo)))))
        finally:
            if bar is not None:
                bar.close()
        return time.perf_counter() - t0

    def _summary(self) -> None:
        run, sim_s, wall_s, name = self.run, self.sim_s, self.wall_s, self.step.name
        run.stats[name] = {
            "cases": len(self.todo),
            "recorded": self.recorded,
            "invalid": len(self.invalid),
            "failed": len(self.failures),
            "session_s": sim_s,
            "wall_s": wall_s,
            "clock": self.clock_kind,
            "speed": sim_s / wall_s if wall_s > 0 and self.recorded else None,
            "client_processes": self.processes,
            "cpu_s": self.cpu_s,
            "barge_in_error_s": list(self.errors_s),
            "pacing_lag_max_s": self.pacing_lag_s,
            "cost_usd": self.cost_usd,
        }
        if self.recorded:
            procs = f", {self.processes} client processes" if self.processes > 1 else ""
            msg = (
                f"{name}: {self.recorded} of {len(self.todo)} cases recorded, {sim_s:.1f} session-s in {wall_s:.1f} "
                f"wall-s = {sim_s / wall_s:.1f} session-seconds per wall-second ({self.clock_kind}{procs})"
                + ("" if self.cost_usd is None else f"; service cost {self.cost_usd:.4f} USD")
            )
            log.info(msg)
            print(msg, flush=True)
        if self.invalid:
            first = next(iter(self.invalid))
            case = next(c for c in self.cases if c.case_id == first)
            retries = int(self.settings.invalid_retries)
            last = sum(n > retries for n in self.invalid.values())
            then = (
                [f"a relaunch records {len(self.invalid) - last} of them again"]
                if last < len(self.invalid)
                else []
            )
            if last:
                then.append(
                    f"{last} stay invalid: recorded {retries + 1} time(s), orchestrator.invalid_retries={retries}"
                )
            print(
                f"fdeval: warning: {name}: {len(self.invalid)} session(s) invalid and not scored (e.g. {first}: "
                f"{self.step.state(run, case).why}); {'; '.join(then)}",
                flush=True,
            )
        if self.failures:
            raise RunFailures(
                f"{name}: {len(self.failures)} case(s) failed (e.g. {self.failures[0]}; reasons in "
                f"{self.step.folder}/*.error.json); relaunch the same command to retry them"
            )


def prior_attempts(states: dict[str, SessionState]) -> dict[str, int]:
    """How many times each case whose session is invalid has been recorded (its next recording
    counts on from there)."""
    return {cid: s.attempt for cid, s in states.items() if s.state == "invalid"}


def client_main(spec: dict[str, Any]) -> None:
    """The entry point of a realtime client process (`fdeval.engine.clients.spread`)."""
    serve(spec, _client_recorder)


def _client_recorder(spec: dict[str, Any]) -> _Recorder:
    """This client process's recorder: the run rebuilt from the launching process's config and
    identity, the step found by name, the model holding its share of the sessions."""
    shard = tuple(spec["shard"]) if spec["shard"] is not None else None
    run = Run(
        OmegaConf.create(spec["cfg"]),
        Path(spec["run_dir"]),
        Path(spec["out_root"]),
        shard=shard,
        identity=spec["identity"],
    )
    step = next(s for s in [RecordSessions(), *run.benchmark.steps()] if s.name == spec["step"])
    rec = _Recorder(run, step)
    rec.model_id = run.model_id
    rec.cases = step.session_cases(run)
    by_id = {c.case_id: c for c in rec.cases}
    rec.todo = [by_id[i] for i in spec["todo"]]
    rec.attempts = prior_attempts({c.case_id: step.state(run, c, rec.model_id) for c in rec.todo})
    run.model.share(spec["index"], spec["count"])
    rec.clock_kind = run.model.clock if rec.clock == "auto" else rec.clock
    rec.processes = spec["count"]
    rec.prepare()
    return rec


class Score(Aggregate):
    """The shared `score` step: every metric the benchmark declares, written under
    `scores/<key>/` (keyed by the metrics and the folders of the steps they read, so the tables
    of two judges' verdicts sit side by side)."""

    name = stage = "score"
    folder = "scores"

    def __init__(self, metrics: list[Metric]):
        self.metrics = list(metrics)
        self.needs = tuple(dict.fromkeys(n for m in self.metrics for n in m.needs))
        self.owns = tuple(dict.fromkeys(p for m in self.metrics for p in m.owns))

    def identity(self, run: Run) -> dict[str, Any]:
        return {m.name: m.identity() for m in self.metrics}

    def execute(self, run: Run) -> None:
        t0 = time.perf_counter()
        out = run.step_dir(self)
        for m in self.metrics:
            text = m.compute(run, out)
            if text:
                print(text, flush=True)
        _, skipped = run.scorable("score")
        if skipped["invalid"] or skipped["failed"]:
            print(
                f"fdeval: warning: {len(skipped['invalid'])} invalid and {len(skipped['failed'])} failed session(s) "
                "are not in these tables (stage=status lists them)",
                flush=True,
            )
        log.info(
            "score: %s (%s) in %.1f s",
            out,
            ", ".join(t for m in self.metrics for t in m.tables),
            time.perf_counter() - t0,
        )
        write_reports(run)


def write_reports(run: Run) -> None:
    """The views the run's config lists under `report.writers` (each a `_target_` called with the
    run, e.g. the timelines of fdeval.report.timeline), after the scores. A writer that fails is
    logged, never a failed score: the tables are already written."""
    for node in (run.cfg.get("report") or {}).get("writers") or []:
        name = str(node.get("_target_", "?"))
        try:
            build(node)(run)
        except Exception as e:  # noqa: BLE001 - a picture must not cost the scores
            log.warning(
                "score: report writer %s failed: %s: %s",
                name,
                type(e).__name__,
                (str(e).splitlines() or [""])[0],
            )
