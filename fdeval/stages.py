"""The stages of a run: generate -> run -> transcribe -> judge -> score, over files.

Everything lives under one run folder (`fdeval.runfolder` names it from the run's identity):

    <run_dir>/sessions/<case_id>.wav|.h5     stereo recording (ch0 user, ch1 model) + session log
    <run_dir>/transcripts/<case_id>.json|.txt
    <run_dir>/verdicts/<case_id>@<policy>.json
    <run_dir>/scores/ias.csv|.md, results.csv
Generated benchmark data is shared by runs: <out_root>/<benchmark>/_data/<data_id>/.

Every stage is resumable. A case is done for a stage when its file is there, reads back whole
and carries the identity that the stage would write now: the session the run's identity hash,
the case's digest and the model's id; a transcript or verdict the id of the session it was made
from (and a verdict its judge's id, version and prompt hash). An unreadable file is redone; a
file made by another identity stops the stage with one line naming the differing fields, unless
`resume=redo`. A session whose timing was broken (the model behind real time, the session cut at
`max_session_s`) is recorded, marked invalid, never transcribed, judged or scored, and run again
on relaunch.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import math
import platform
import time
import traceback
import uuid
import zlib
from dataclasses import dataclass, field, replace
from functools import cached_property
from pathlib import Path
from typing import Any, Callable

import numpy as np
from hydra.utils import instantiate
from omegaconf import DictConfig, OmegaConf
from tqdm import tqdm

import fdeval
from fdeval.errors import ConfigError, FdevalError
from fdeval.files import file_sha256, remove_stale_temps, write_json_atomic, write_text_atomic
from fdeval.orchestrator.recorder import LOG_SCHEMA_VERSION, CorruptSession, check_session
from fdeval.runfolder import (ForeignArtifact, RunLock, check_resume, data_dir, describe_diff, identity_hash,
                              result_config)
from fdeval.types import TestCase

log = logging.getLogger("fdeval")

STEPS = ("generate", "run", "transcribe", "judge", "score")
# What the engine does with a session (turn manager, health rules, artifact rules): bumped when a
# change can alter a recording or what counts as done, so old folders are never resumed.
ENGINE_VERSION = "2"
# A run whose first this-many cases all fail stops instead of failing every case the same way.
FAIL_FAST_CASES = 3


def _instantiate(node: Any) -> Any:
    """hydra's instantiate, but a constructor's user error stays a one-line FdevalError."""
    from hydra.errors import InstantiationException

    try:
        return instantiate(node)
    except InstantiationException as e:
        cause = e.__cause__
        while cause is not None and not isinstance(cause, FdevalError):
            cause = cause.__cause__
        if cause is not None:
            raise cause from None
        raise


class RunFailures(FdevalError):
    """Some cases could not be run (infrastructure errors); the others were recorded."""


def short_hash(obj: Any) -> str:
    return hashlib.sha256(json.dumps(obj, sort_keys=True, default=str).encode()).hexdigest()[:12]


def case_seed(seed: int, case_id: str) -> int:
    """A per-case seed that does not depend on which other cases run."""
    return (seed * 1_000_003 + zlib.crc32(case_id.encode())) % (2**31)


def run_identity(cfg: DictConfig, benchmark: Any) -> dict[str, Any]:
    """Everything that can change a result of this run (see `fdeval.runfolder`)."""
    plain = OmegaConf.to_container(cfg, resolve=True)
    cases_dir = getattr(benchmark, "cases_dir", None)
    return {
        "config": result_config(plain),
        "benchmark": {"name": benchmark.name, "version": str(benchmark.version),
                      "data_id": benchmark.data_id(int(cfg.seed)), "cases_dir": str(cases_dir) if cases_dir else None},
        "code": {"fdeval": fdeval.__version__, "engine": ENGINE_VERSION, "session_log": LOG_SCHEMA_VERSION},
    }


@dataclass(frozen=True)
class SessionState:
    """Whether a case's recording can be used: done | missing | failed | invalid | corrupt | foreign."""

    case_id: str
    state: str
    why: str = ""
    session_id: str = ""


@dataclass
class RunContext:
    cfg: DictConfig
    run_dir: Path
    out_root: Path
    shard: tuple[int, int] | None = None  # (index, count): this process handles cases[index::count]
    stats: dict[str, Any] = field(default_factory=dict)
    identity: dict[str, Any] | None = None  # computed from cfg when not given (run.json holds it)

    @property
    def seed(self) -> int:
        return int(self.cfg.seed)

    @property
    def progress(self) -> bool:
        return bool(self.cfg.progress)

    @property
    def resume(self) -> str:
        return check_resume(self.cfg.get("resume", "auto"))

    @cached_property
    def benchmark(self):
        return _instantiate(self.cfg.benchmark)

    @cached_property
    def run_identity(self) -> dict[str, Any]:
        return self.identity if self.identity is not None else run_identity(self.cfg, self.benchmark)

    @cached_property
    def run_id(self) -> str:
        return identity_hash(self.run_identity)

    @cached_property
    def data_dir(self) -> Path:
        return data_dir(self.out_root, self.benchmark, self.seed)

    @cached_property
    def case_root(self) -> Path:
        return self.benchmark.cases_dir or self.data_dir

    @cached_property
    def all_cases(self) -> list[TestCase]:
        cases = self.benchmark.load(self.data_dir)
        if not cases:
            raise ConfigError(f"{self.case_root}: the case set is empty; nothing to run")
        return cases

    @cached_property
    def cases(self) -> list[TestCase]:
        """The cases this process handles: all of them, or its shard of the stable order."""
        if self.shard is None:
            return self.all_cases
        i, n = self.shard
        return self.all_cases[i::n]

    @cached_property
    def model(self):
        # `resources` describes the model for stage=plan; it is not a constructor argument
        node = OmegaConf.to_container(self.cfg.model, resolve=True)
        node.pop("resources", None)
        return _instantiate(node)

    @cached_property
    def judge(self):
        return _instantiate(self.cfg.judge)

    def recorded_model(self) -> dict[str, Any] | None:
        f = self.run_dir / "model.json"
        try:
            d = json.loads(f.read_text())
        except FileNotFoundError:
            return None
        except (OSError, ValueError) as e:
            raise FdevalError(f"{f}: unreadable ({e}); delete it to record the model again") from None
        if not isinstance(d, dict) or not isinstance(d.get("model_id"), str):
            raise FdevalError(f"{f}: not a model record (no model_id); delete it to record the model again")
        return d

    @cached_property
    def model_id(self) -> str:
        """Name plus a hash of the model's identity, as recorded in model.json by the run stage.

        Later stages (and array tasks on CPU nodes) read it without loading the model. Where the
        model is loaded, its identity must match the folder's unless resume=redo.
        """
        recorded = self.recorded_model()
        if recorded is not None and "model" not in self.__dict__:
            return recorded["model_id"]
        identity = self.model.identity()
        model_id = f"{self.cfg.model.name}:{short_hash(identity)}"
        if recorded is not None and recorded["model_id"] != model_id:
            if self.resume != "redo":
                raise ForeignArtifact(
                    f"{self.run_dir}: recorded with model {recorded['model_id']}, but the configured model is "
                    f"{model_id} ({describe_diff(recorded.get('identity'), identity)}); "
                    "pass resume=redo to record its sessions again")
            log.warning("run: model changed (%s -> %s): its sessions are recorded again", recorded["model_id"], model_id)
        write_json_atomic(self.run_dir / "model.json", {"model_id": model_id, "identity": identity})
        return model_id

    # -- artifacts -------------------------------------------------------------------------
    def case_digest(self, case: TestCase) -> str:
        """A hash of the case as loaded and of its turns' audio files."""
        cache = self.__dict__.setdefault("_digests", {})
        if case.case_id not in cache:
            from fdeval.cases.schema import case_to_dict

            h = hashlib.sha256(json.dumps(case_to_dict(case), sort_keys=True, default=str).encode())
            for turn in case.turns:
                h.update(file_sha256(self.case_root / turn.audio_path).encode())
            cache[case.case_id] = h.hexdigest()[:16]
        return cache[case.case_id]

    def session_paths(self, case_id: str) -> tuple[Path, Path]:
        base = self.run_dir / "sessions" / case_id
        return base.with_name(f"{case_id}.h5"), base.with_name(f"{case_id}.wav")

    def session_state(self, case: TestCase, model_id: str | None = None) -> SessionState:
        """Whether `case`'s recording is there, whole, and this run's (see the module doc)."""
        h5, wav = self.session_paths(case.case_id)
        cid = case.case_id
        if not h5.exists():
            err = self.run_dir / "sessions" / f"{cid}.error.json"
            if err.exists():
                try:
                    why = json.loads(err.read_text()).get("error", "?")
                except (OSError, ValueError, AttributeError):
                    why = "unreadable error record"
                return SessionState(cid, "failed", str(why))
            return SessionState(cid, "missing")
        try:
            attrs = check_session(h5, wav)
        except CorruptSession as e:
            return SessionState(cid, "corrupt", str(e))
        recorded = {"run_id": attrs.get("run_id"), "case_digest": attrs.get("case_digest")}
        current = {"run_id": self.run_id, "case_digest": self.case_digest(case)}
        if model_id is not None:
            recorded["model_id"], current["model_id"] = attrs.get("model_id"), model_id
        if recorded != current:
            if recorded["run_id"] != current["run_id"]:
                try:
                    why = describe_diff(json.loads(attrs.get("run_identity", "{}")), self.run_identity)
                except ValueError:
                    why = f"run_id: {recorded['run_id']} -> {current['run_id']}"
            else:
                why = describe_diff(recorded, current)
            return SessionState(cid, "foreign", why)
        if not attrs.get("valid", True):
            return SessionState(cid, "invalid", str(attrs.get("invalid_reason", "invalid")), str(attrs.get("session_id", "")))
        return SessionState(cid, "done", "", str(attrs.get("session_id", "")))

    def derived_state(self, path: Path, session: SessionState) -> str:
        """done | missing | stale (made from another session) | corrupt | foreign, for a JSON file
        that one stage derived from `session` (its `provenance` says which)."""
        if not path.exists():
            return "missing"
        try:
            d = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, ValueError, RecursionError):
            return "corrupt"
        prov = d.get("provenance") if isinstance(d, dict) else None
        if not isinstance(prov, dict):
            return "corrupt" if not isinstance(d, dict) else "foreign"
        if prov.get("run_id") != self.run_id:
            return "foreign"
        return "done" if prov.get("session_id") == session.session_id else "stale"

    def provenance(self, session: SessionState) -> dict[str, str]:
        return {"run_id": self.run_id, "session_id": session.session_id}

    def bar(self, items: list, desc: str):
        return tqdm(items, desc=desc, unit="case", disable=not self.progress or len(items) < 2, leave=False)


def refuse_foreign(ctx: RunContext, what: str, names: list[str], why: str) -> None:
    """Stop with one line unless resume=redo (then the caller redoes them)."""
    if names and ctx.resume != "redo":
        raise ForeignArtifact(f"{ctx.run_dir}: {what} {names[0]} was made by another run ({why}); {len(names)} such "
                              "file(s); pass resume=redo to make them again")


def _number(node: DictConfig, group: str, key: str, ok, why: str, optional: bool = False) -> float | None:
    value, name = node[key], f"{group}.{key}" if group else key
    if value is None and optional:
        return None
    try:
        x = float(value)
    except (TypeError, ValueError):
        raise ConfigError(f"{name}: expected a number, got {value!r}") from None
    if not ok(x):
        raise ConfigError(f"{name}: {why}, got {value!r}")
    return x


def orchestrator_config(o: DictConfig):
    """The orchestrator group as typed config; a bad value is a one-line ConfigError."""
    from fdeval.orchestrator.session import HealthBounds, OrchestratorConfig
    from fdeval.orchestrator.turns import TurnConfig

    def num(key, ok, why, optional=False):
        return _number(o, "orchestrator", key, ok, why, optional)

    if o.clock not in ("auto", "lockstep", "realtime"):
        raise ConfigError(f"orchestrator.clock: unknown clock {o.clock!r}; valid: auto, lockstep, realtime")
    sr = num("sample_rate", lambda x: x == 16000, "must be 16000 (the rate Silero VAD runs at)")
    turns = TurnConfig(
        silence_s=num("silence_s", lambda x: x > 0, "must be > 0"),
        trailing_silence_s=num("trailing_silence_s", lambda x: x >= 0, "must be >= 0"),
        yield_after_s=num("yield_after_s", lambda x: x > 0, "must be > 0"),
        barge_in_delay_s=num("barge_in_delay_s", lambda x: x >= 0, "must be >= 0", optional=True),
        max_session_s=num("max_session_s", lambda x: x > 0, "must be > 0"),
    )
    health = HealthBounds(
        max_pacing_lag_s=num("max_pacing_lag_s", lambda x: x > 0, "must be > 0"),
        max_model_lag_s=num("max_model_lag_s", lambda x: x > 0, "must be > 0"),
    )
    return OrchestratorConfig(
        int(sr), num("vad_threshold", lambda x: 0 < x < 1, "must be in (0, 1)"),
        num("vad_min_silence_s", lambda x: x >= 0, "must be >= 0"), turns, health,
    )


# -- generate -----------------------------------------------------------------------------------
def stage_generate(ctx: RunContext) -> None:
    tts = instantiate(ctx.cfg.tts)
    t0 = time.perf_counter()
    if ctx.data_dir.is_dir():  # temp files of a generate that was killed
        for sub in [ctx.data_dir, *(p for p in ctx.data_dir.rglob("*") if p.is_dir())]:
            remove_stale_temps(sub)
    ctx.benchmark.generate(ctx.data_dir, tts, ctx.seed, ctx.progress)
    n = len(ctx.cases)
    log.info("generate: %d cases in %s (%.1f s)", n, ctx.data_dir, time.perf_counter() - t0)


# -- run ----------------------------------------------------------------------------------------
def _turn_audio(case: TestCase, root: Path, sr: int) -> list[np.ndarray]:
    from fdeval.audio.io import read_wav
    from fdeval.audio.resample import resample

    out = []
    for turn in case.turns:
        x, file_sr = read_wav(root / turn.audio_path, mono=True)
        out.append(resample(x, file_sr, sr) if file_sr != sr else x)
    return out


def _versions() -> dict[str, str]:
    import h5py
    import onnxruntime

    return {"fdeval": fdeval.__version__, "python": platform.python_version(), "numpy": np.__version__,
            "onnxruntime": onnxruntime.__version__, "h5py": h5py.__version__}


def _check_fits(cases: list[TestCase], max_session_s: float) -> None:
    """A case whose user turns alone outlast max_session_s would be cut: an error before any session."""
    for c in cases:
        total = sum(t.duration_s for t in c.turns)
        if total >= max_session_s:
            raise ConfigError(f"case {c.case_id!r}: field 'turns': {total:.1f} s of user audio does not fit in "
                              f"orchestrator.max_session_s={max_session_s:g}; raise it or shorten the case")


def _resume_sessions(ctx: RunContext, model_id: str | None) -> dict[str, SessionState]:
    states = {c.case_id: ctx.session_state(c, model_id) for c in ctx.cases}
    foreign = [s for s in states.values() if s.state == "foreign"]
    refuse_foreign(ctx, "session", [f"sessions/{s.case_id}.h5" for s in foreign], foreign[0].why if foreign else "")
    for s in states.values():
        if s.state == "corrupt":
            log.warning("run: sessions/%s.h5 cannot be used (%s); recording it again", s.case_id, s.why)
        elif s.state == "foreign":
            log.warning("run: sessions/%s.h5 is another run's (%s); recording it again (resume=redo)", s.case_id, s.why)
    return states


def stage_run(ctx: RunContext) -> None:
    from fdeval.audio.vad import SileroVAD
    from fdeval.orchestrator.clock import make_clock
    from fdeval.orchestrator.recorder import write_session
    from fdeval.orchestrator.session import run_session

    ocfg = orchestrator_config(ctx.cfg.orchestrator)
    if fixed := ctx.benchmark.orchestrator_overrides():
        ocfg = replace(ocfg, turns=replace(ocfg.turns, **fixed))
    sessions = ctx.run_dir / "sessions"
    model = ctx.model  # constructing it is cheap (servers and weights load on first use)
    model_id = ctx.model_id  # records model.json for the later stages
    states = _resume_sessions(ctx, model_id)
    todo = [c for c in ctx.cases if states[c.case_id].state != "done"]
    if not todo:
        log.info("run: all %d cases already recorded", len(ctx.cases))
        return
    _check_fits(todo, ocfg.turns.max_session_s)
    clock_kind = model.clock if ctx.cfg.orchestrator.clock == "auto" else ctx.cfg.orchestrator.clock
    vad = SileroVAD(sample_rate=ocfg.sample_rate)
    root = ctx.case_root
    base_attrs = {
        "model": model.identity(), "model_id": model_id, "benchmark": ctx.benchmark.name,
        "benchmark_version": ctx.benchmark.version, "seed": ctx.seed, "versions": _versions(),
        "run_id": ctx.run_id, "run_identity": ctx.run_identity,
    }
    sim_s = wall_s = 0.0
    failures: list[str] = []
    invalid: list[str] = []
    recorded = 0
    if hasattr(model, "set_run_dir"):  # in-job servers keep their logs in the run folder
        model.set_run_dir(ctx.run_dir)
    retries = int(getattr(model, "case_retries", 0) or 0)

    async def attempt(case):
        audio = _turn_audio(case, root, ocfg.sample_rate)
        seed = case_seed(ctx.seed, case.case_id)
        attrs = {**base_attrs, "case_seed": seed, "case_version": case.version,
                 "case_digest": ctx.case_digest(case), "session_id": uuid.uuid4().hex}
        for i in range(retries + 1):
            try:
                return await run_session(case, audio, model, ocfg, make_clock(clock_kind), vad, seed=seed,
                                         instruction=case.system_instruction, attrs=attrs)
            except Exception as e:  # a lost model server is restarted by the model: retry the case (bounded)
                if not getattr(e, "retryable", False) or i == retries:
                    raise
                log.warning("run: %s: %s; retrying the case (%d/%d)", case.case_id, str(e).splitlines()[0], i + 1, retries)

    def record(case, result, exc):
        nonlocal sim_s, wall_s, recorded
        err_file = sessions / f"{case.case_id}.error.json"
        if exc is not None:
            if isinstance(exc, FdevalError):
                raise exc
            # an infrastructure failure of this case: recorded, never a verdict
            failures.append(case.case_id)
            first = (str(exc).strip().splitlines() or [""])[0]
            write_json_atomic(err_file, {"case_id": case.case_id, "stage": "run", "error": f"{type(exc).__name__}: {exc}",
                                         "traceback": "".join(traceback.format_exception(exc))[-4000:], "model_id": model_id})
            log.error("run: %s failed: %s: %s", case.case_id, type(exc).__name__, first)
            if recorded == 0 and len(failures) >= min(FAIL_FAST_CASES, len(todo)) and len(todo) > 1:
                raise RunFailures(f"run: the first {len(failures)} case(s) all failed, so the run stops (e.g. "
                                  f"{failures[0]}: {type(exc).__name__}: {first}); reasons in {sessions}/*.error.json")
            return
        h = result.log.attrs
        write_session(result.log, result.user, result.model, *reversed(ctx.session_paths(case.case_id)))
        err_file.unlink(missing_ok=True)
        recorded += 1
        sim_s += result.log.duration_s
        wall_s += result.wall_s
        if not h["valid"]:
            invalid.append(case.case_id)
            log.warning("run: %s: session invalid, not scored: %s", case.case_id, h["invalid_reason"])
        errs = [t["error_s"] for t in result.log.turns if t["turn_type"] == "barge-in" and not math.isnan(t["error_s"])]
        lag = h.get("health_model_lag_max_s", float("nan"))
        health = "" if clock_kind != "realtime" else f", pacing lag {1000 * h['health_pacing_lag_max_s']:.1f} ms" + (
            "" if math.isnan(lag) else f", model lag {lag:.2f} s")
        log.info("run: %s: %.1f s session in %.2f s wall (%s)%s%s", case.case_id, result.log.duration_s, result.wall_s,
                 h.get("end_reason"), health, f", barge-in error {max(errs) * 1000:.2f} ms" if errs else "")

    async def run_concurrently(n: int):
        # n sessions in flight (server instances, or rows of a batched in-process model); wall time
        # is the elapsed time, not the sum of the overlapping sessions' times
        queue, bar = list(todo), ctx.bar(todo, "run")
        t0 = time.perf_counter()

        async def worker():
            while queue:
                case = queue.pop(0)
                try:
                    result, exc = await attempt(case), None
                except Exception as e:
                    result, exc = None, e
                record(case, result, exc)
                bar.update(1)

        try:
            await asyncio.gather(*(worker() for _ in range(min(n, len(todo)))))
        finally:
            bar.close()
        return time.perf_counter() - t0

    n_parallel = int(getattr(model, "concurrency", 1) or 1)
    if n_parallel > 1 and len(todo) > 1:
        wall_s = asyncio.run(run_concurrently(n_parallel))
    else:
        for case in ctx.bar(todo, "run"):
            try:
                result, exc = asyncio.run(attempt(case)), None
            except Exception as e:
                result, exc = None, e
            record(case, result, exc)
    ctx.stats["run"] = {"cases": len(todo), "recorded": recorded, "invalid": len(invalid), "failed": len(failures),
                        "session_s": sim_s, "wall_s": wall_s, "clock": clock_kind,
                        "speed": sim_s / wall_s if wall_s > 0 and recorded else None}
    if recorded:
        msg = (f"run: {recorded} of {len(todo)} cases recorded, {sim_s:.1f} session-s in {wall_s:.1f} wall-s = "
               f"{sim_s / wall_s:.1f} session-seconds per wall-second ({clock_kind})")
        log.info(msg)
        print(msg, flush=True)
    if invalid:
        print(f"fdeval: warning: {len(invalid)} session(s) invalid and not scored (e.g. {invalid[0]}: "
              f"{states_reason(ctx, invalid[0])}); relaunch to record them again", flush=True)
    if failures:
        raise RunFailures(f"run: {len(failures)} case(s) failed (e.g. {failures[0]}; reasons in sessions/*.error.json); "
                          "relaunch the same command to retry them")


def states_reason(ctx: RunContext, case_id: str) -> str:
    case = next(c for c in ctx.cases if c.case_id == case_id)
    return ctx.session_state(case).why


def scorable(ctx: RunContext, stage: str) -> tuple[list[tuple[TestCase, SessionState]], dict[str, list[str]]]:
    """The cases with a usable session, and the others by state (what a later stage skips).

    A case never run is an error (run the run stage first); one whose session is unreadable too
    (the run stage records it again). Failed and invalid sessions are skipped and counted.
    """
    ok, skipped = [], {"failed": [], "invalid": []}
    for c in ctx.cases:
        s = ctx.session_state(c)
        if s.state == "done":
            ok.append((c, s))
        elif s.state in skipped:
            skipped[s.state].append(c.case_id)
        elif s.state == "missing":
            raise FdevalError(f"{stage}: no session recorded for case {c.case_id}; run stage=run first")
        else:
            raise FdevalError(f"{stage}: {ctx.run_dir}/sessions/{c.case_id}.h5 cannot be used ({s.why}); "
                              "run stage=run to record it again")
    for state, ids in skipped.items():
        if ids:
            log.warning("%s: %d case(s) skipped, session %s (e.g. %s)", stage, len(ids), state, ids[0])
    return ok, skipped


def _derived_todo(ctx: RunContext, stage: str, jobs: list[tuple[Any, SessionState, Path]]) -> list:
    """The jobs whose file is not done; a file of another run stops the stage (unless resume=redo)."""
    todo, foreign = [], []
    for job in jobs:
        state = ctx.derived_state(job[2], job[1])
        if state == "foreign":
            foreign.append(job[2])
        if state != "done":
            if state == "corrupt":
                log.warning("%s: %s is unreadable; making it again", stage, job[2])
            todo.append(job)
    refuse_foreign(ctx, f"{stage} file", [str(p.relative_to(ctx.run_dir)) for p in foreign], "its run_id differs")
    return todo


# -- transcribe ---------------------------------------------------------------------------------
def stage_transcribe(ctx: RunContext) -> None:
    """Transcripts with exact user words (TTS timings); model words from the model's own text
    stream (`asr=exact`) or from an ASR backend on the model channel (`asr=whisper|qwen3`)."""
    from fdeval.transcript.build import build_transcript
    from fdeval.transcript.io import transcript_to_dict
    from fdeval.transcript.render import render

    out = ctx.run_dir / "transcripts"
    ok, _ = scorable(ctx, "transcribe")
    todo = _derived_todo(ctx, "transcribe", [(c, s, out / f"{c.case_id}.json") for c, s in ok])
    asr = None
    if ctx.cfg.asr.name != "exact" and todo:
        asr = _instantiate(ctx.cfg.asr)
        write_json_atomic(ctx.run_dir / "transcripts" / "asr.json", {"identity": asr.identity()})
    for case, session, path in ctx.bar(todo, "transcribe"):
        h5, wav = ctx.session_paths(case.case_id)
        model_words = None
        if asr is not None:
            model_words = asr.transcribe_channel(wav, 1, case.case_id, "model")
        tr = build_transcript(case, h5, model_words=model_words)
        write_text_atomic(out / f"{case.case_id}.txt", render(tr) + "\n")
        write_json_atomic(path, {**transcript_to_dict(tr), "provenance": ctx.provenance(session)})
    if asr is not None and getattr(asr, "runtime", None):
        write_json_atomic(ctx.run_dir / "transcripts" / "asr.json", {"identity": asr.identity(), "runtime": asr.runtime})
    log.info("transcribe: %d new, %d total", len(todo), len(ok))


def read_transcript(path: Path):
    """A transcript written by the transcribe stage (its provenance set aside)."""
    from fdeval.transcript.io import TranscriptError, read_json_file, transcript_from_dict

    d = read_json_file(path, TranscriptError)
    if isinstance(d, dict):
        d = {k: v for k, v in d.items() if k != "provenance"}
    return transcript_from_dict(d, path)


# -- judge --------------------------------------------------------------------------------------
def _verdict_state(ctx: RunContext, path: Path, session: SessionState, judge: Any) -> str:
    """done | missing | stale | corrupt | error (a judge error: retried) | foreign."""
    state = ctx.derived_state(path, session)
    if state != "done":
        return state
    from fdeval.judges.base import VerdictError, verdict_from_dict

    d = json.loads(path.read_text(encoding="utf-8"))
    try:
        verdict_from_dict(d, path)
    except VerdictError as e:
        log.warning("judge: %s; judging it again", e)
        return "corrupt"
    if d.get("verdict") == "error":
        return "error"
    mine = {"judge": judge.id, "judge_version": judge.version, "prompt_hash": judge.prompt_hash}
    return "done" if {k: d.get(k) for k in mine} == mine else "foreign"


def stage_judge(ctx: RunContext) -> None:
    from fdeval.judges.base import verdict_to_dict

    judge, out = ctx.judge, ctx.run_dir / "verdicts"
    ok, _ = scorable(ctx, "judge")
    jobs, foreign = [], []
    for c, s in ok:
        for p in c.judge_policies:
            path = out / f"{c.case_id}@{p}.json"
            state = _verdict_state(ctx, path, s, judge)
            if state == "foreign":
                foreign.append(path.name)
            if state != "done":
                jobs.append((c, s, p, path))
    refuse_foreign(ctx, "verdict", [f"verdicts/{n}" for n in foreign], f"judge or run differs from {judge.id}")
    counts: dict[str, int] = {}
    for case, session, policy, path in ctx.bar(jobs, "judge"):
        tpath = ctx.run_dir / "transcripts" / f"{case.case_id}.json"
        if ctx.derived_state(tpath, session) != "done":
            raise FdevalError(f"judge: no transcript of the current session for case {case.case_id} ({tpath}); "
                              "run stage=transcribe first")
        verdict = judge.judge(case, policy, read_transcript(tpath))
        counts[verdict.verdict] = counts.get(verdict.verdict, 0) + 1
        write_json_atomic(path, {**verdict_to_dict(verdict), "model_id": ctx.model_id, "provenance": ctx.provenance(session)})
    log.info("judge: %d new verdicts %s", len(jobs), counts)


# -- score --------------------------------------------------------------------------------------
def stage_score(ctx: RunContext) -> None:
    from fdeval.judges.base import verdict_from_dict
    from fdeval.metrics.ias import METRIC_VERSION, ias_rows, write_csv, write_markdown
    from fdeval.report.build import ReportSettings, RunData, write_run_report
    from fdeval.report.runs import verdict_table

    settings = ReportSettings.from_config(ctx.cfg.get("report"))  # checked before any work
    vdir = ctx.run_dir / "verdicts"
    ok, skipped = scorable(ctx, "score")
    verdicts, missing, model_ids = [], [], {}
    for c, s in ok:
        for p in c.judge_policies:
            f = vdir / f"{c.case_id}@{p}.json"
            if ctx.derived_state(f, s) == "done":
                d = json.loads(f.read_text(encoding="utf-8"))
                verdicts.append(verdict_from_dict(d, f))
                if isinstance(d.get("model_id"), str):
                    model_ids[(c.case_id, p)] = d["model_id"]
            else:
                missing.append(f.name)
    if missing:
        raise FdevalError(f"score: {len(missing)} verdict(s) missing or stale, e.g. {missing[0]}; run stage=judge first")
    judge = ctx.judge
    provenance = {
        "benchmark": ctx.benchmark.name, "benchmark_version": ctx.benchmark.version, "model_id": ctx.model_id,
        "judge": judge.id, "judge_version": judge.version, "prompt_hash": judge.prompt_hash,
        "metric_version": METRIC_VERSION, "seed": ctx.seed, "fdeval_version": fdeval.__version__,
        "run_id": ctx.run_id, "sessions_scored": len(ok), "sessions_invalid": len(skipped["invalid"]),
        "sessions_failed": len(skipped["failed"]),
    }
    scored = {c.case_id: c for c, _ in ok}
    rows = ias_rows(verdicts, scored, provenance)
    sdir = ctx.run_dir / "scores"
    write_csv(rows, sdir / "ias.csv")
    write_markdown(rows, sdir / "ias.md")
    per_case = [{"case_id": v.case_id, "policy": v.policy, "verdict": v.verdict, **provenance} for v in verdicts]
    write_csv(per_case, sdir / "results.csv")
    write_csv(verdict_table(verdicts, scored, model_ids, provenance), sdir / "verdicts.csv")
    run = RunData(str(ctx.cfg.model.name), verdicts, scored, provenance, model_ids, str(ctx.run_dir))
    paths = write_run_report(run, sdir, settings, ias_rows=rows)
    print((sdir / "ias.md").read_text(), flush=True)
    print((sdir / "delta_ias.md").read_text(), flush=True)
    if skipped["invalid"] or skipped["failed"]:
        print(f"fdeval: warning: {len(skipped['invalid'])} invalid and {len(skipped['failed'])} failed session(s) are "
              "not in these tables (stage=status lists them)", flush=True)
    log.info("score: %s (%s)", sdir, ", ".join(p.name for p in paths))


def stage_plan(ctx: RunContext) -> None:
    from fdeval.cluster.plan import plan

    plan(ctx)


def stage_status(ctx: RunContext) -> None:
    from fdeval.cluster.status import status

    status(ctx)


STAGE_FUNCS = {"generate": stage_generate, "run": stage_run, "transcribe": stage_transcribe,
               "judge": stage_judge, "score": stage_score, "plan": stage_plan, "status": stage_status}
# Steps that always run in the launching process, whatever the launcher.
LOCAL_ONLY = ("generate", "plan", "status")
# Steps that only read the run folder (plan writes its own plan files, never results).
READ_ONLY = ("plan", "status")


def run_steps(cfg: DictConfig, run_dir: Path, steps: list[str], shard: tuple[int, int] | None = None,
              identity: dict[str, Any] | None = None) -> RunContext:
    """Run `steps` in this process (locally, or as one array task handling `shard`).

    The identity is the one the launch recorded in run.json (array tasks may see another
    environment), else computed from `cfg`. An array task locks its own shard."""
    if identity is None:
        try:
            identity = json.loads((run_dir / "run.json").read_text()).get("identity")
        except (OSError, ValueError, AttributeError):
            identity = None
    ctx = RunContext(cfg, run_dir, Path(cfg.out_root).expanduser().resolve(), shard=shard, identity=identity)
    lock = RunLock(run_dir, f".lock-shard-{shard[0]}-of-{shard[1]}").acquire() if shard is not None else None
    for sub in ("sessions", "transcripts", "verdicts", "scores"):
        if (run_dir / sub).is_dir() and (n := remove_stale_temps(run_dir / sub)):
            log.info("removed %d temp file(s) left in %s by an interrupted run", n, sub)
    try:
        for step in steps:
            t0 = time.perf_counter()
            (ctx.benchmark.stage(step) or STAGE_FUNCS[step])(ctx)
            log.info("stage %s done in %.1f s", step, time.perf_counter() - t0)
    finally:
        if "model" in ctx.__dict__:
            ctx.model.close()
        if lock is not None:
            lock.release()
    return ctx


def prepare(cfg: DictConfig, tag: str) -> tuple[Path, dict[str, Any]]:
    """Check everything that can be checked before any work; the run folder and its identity.

    The folder is `<out_root>/<benchmark>/<model>/<tag>-<identity hash>` (`run_tag` replaces
    the tag made from the command line)."""
    steps = list(cfg.stage.steps)
    bad = [s for s in steps if s not in STAGE_FUNCS]
    if bad:
        raise ConfigError(f"stage.steps: unknown step(s) {bad}; valid: {list(STAGE_FUNCS)}")
    if cfg.launcher.name not in ("local", "slurm"):
        raise ConfigError(f"launcher.name: unknown launcher {cfg.launcher.name!r}; valid: local, slurm")
    orchestrator_config(cfg.orchestrator)
    _number(cfg, "", "seed", lambda x: x >= 0 and x == int(x), "must be a non-negative integer")
    check_resume(cfg.get("resume", "auto"))
    out_root = Path(cfg.out_root).expanduser().resolve()
    ctx = RunContext(cfg, Path("."), out_root)
    bench = ctx.benchmark
    if "run" in steps and cfg.launcher.name == "local":
        ctx.model  # a missing client package or weight file is one line now, before generate
    if any(s in steps for s in ("judge", "score")) and bench.stage("judge") is None:
        judge = ctx.judge  # judge settings are checked now, not after the sessions ran
        if "run" in steps and "judge" in steps and hasattr(judge, "check_ready"):
            judge.check_ready()  # new sessions will need verdicts: the key and SDK must be there
    identity = ctx.run_identity
    name = str(cfg.get("run_tag") or tag)
    if not name or "/" in name or name.startswith("."):
        raise ConfigError(f"run_tag: {name!r} cannot name a folder")
    return out_root / bench.name / str(cfg.model.name) / f"{name}-{identity_hash(identity)}", identity


def run_stages(cfg: DictConfig, run_dir: Path, identity: dict[str, Any] | None = None,
               submit: Callable[[DictConfig, Path, list[str], int], Any] | None = None) -> RunContext | None:
    """Run the configured stages here, and hand the others to `submit` (the cluster launcher's,
    given by the caller: the engine knows no launcher), holding the folder's lock: a second launch
    on the same folder fails at once."""
    steps = list(cfg.stage.steps)
    if identity is None:
        identity = RunContext(cfg, run_dir, Path(cfg.out_root).expanduser().resolve()).run_identity
    if all(s in READ_ONLY for s in steps):  # looking at a run (e.g. one in progress) needs no lock
        return run_steps(cfg, run_dir, steps, identity=identity)
    with RunLock(run_dir):
        for shard_lock in sorted(run_dir.glob(".lock-shard-*")):  # an array task still working here
            RunLock(run_dir, shard_lock.name).acquire().release()
        write_json_atomic(run_dir / "run.json", {"run_id": identity_hash(identity), "identity": identity,
                                                 "command_config": OmegaConf.to_container(cfg, resolve=True),
                                                 "versions": _versions()})
        local = [s for s in steps if s in LOCAL_ONLY or cfg.launcher.name == "local"]
        ctx = run_steps(cfg, run_dir, local, identity=identity) if local else None
        remote = [s for s in steps if s not in local]
        if remote:
            if submit is None:
                raise ConfigError(f"launcher.name={cfg.launcher.name}: no launcher given to run {remote}")
            n = len(ctx.cases) if ctx is not None else len(run_steps(cfg, run_dir, [], identity=identity).cases)
            submit(cfg, run_dir, remote, n)
    return ctx
