"""The stages of a run: generate -> run -> transcribe -> judge -> score, over files.

Every stage is idempotent: a case is done for a stage when its final file exists (written to a
temp name, then renamed), so a rerun skips it and a crashed or killed run, relaunched with the
same command, completes only what is missing. Everything lives under one run folder:

    <run_dir>/sessions/<case_id>.wav|.h5     stereo recording (ch0 user, ch1 model) + session log
    <run_dir>/transcripts/<case_id>.json|.txt
    <run_dir>/verdicts/<case_id>@<policy>.json
    <run_dir>/scores/ias.csv|.md, results.csv
Generated benchmark data is shared by runs: <out_root>/<benchmark>/_data/<data_id>/.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import math
import platform
import time
import zlib
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np
from hydra.utils import instantiate
from omegaconf import DictConfig, OmegaConf
from tqdm import tqdm

import fdeval
from fdeval.errors import ConfigError, FdevalError
from fdeval.files import remove_stale_temps, write_json_atomic, write_text_atomic
from fdeval.types import TestCase

log = logging.getLogger("fdeval")

STEPS = ("generate", "run", "transcribe", "judge", "score")


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


@dataclass
class RunContext:
    cfg: DictConfig
    run_dir: Path
    out_root: Path
    shard: tuple[int, int] | None = None  # (index, count): this process handles cases[index::count]
    stats: dict[str, Any] = field(default_factory=dict)

    @property
    def seed(self) -> int:
        return int(self.cfg.seed)

    @property
    def progress(self) -> bool:
        return bool(self.cfg.progress)

    @cached_property
    def benchmark(self):
        return _instantiate(self.cfg.benchmark)

    @cached_property
    def data_dir(self) -> Path:
        return self.out_root / self.benchmark.name / "_data" / self.benchmark.data_id(self.seed)

    @cached_property
    def all_cases(self) -> list[TestCase]:
        return self.benchmark.load(self.data_dir)

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

    @cached_property
    def model_id(self) -> str:
        """Name plus a hash of the model's identity, as recorded in model.json by the run stage.

        Later stages (and array tasks on CPU nodes) read it without loading the model. Where the
        model is loaded, its identity must match the folder's: one run folder, one model.
        """
        f = self.run_dir / "model.json"
        recorded = json.loads(f.read_text())["model_id"] if f.exists() else None
        if recorded is not None and "model" not in self.__dict__:
            return recorded
        identity = self.model.identity()
        model_id = f"{self.cfg.model.name}:{short_hash(identity)}"
        if recorded is not None and recorded != model_id:
            raise ConfigError(f"{self.run_dir}: recorded with model {recorded}, but the configured model is {model_id}; "
                              "pass a different run_tag=... for a new run")
        write_json_atomic(f, {"model_id": model_id, "identity": identity})
        return model_id

    def bar(self, items: list, desc: str):
        return tqdm(items, desc=desc, unit="case", disable=not self.progress or len(items) < 2, leave=False)


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
    from fdeval.orchestrator.session import OrchestratorConfig
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
    return OrchestratorConfig(
        int(sr), num("vad_threshold", lambda x: 0 < x < 1, "must be in (0, 1)"),
        num("vad_min_silence_s", lambda x: x >= 0, "must be >= 0"), turns,
    )


# -- generate -----------------------------------------------------------------------------------
def stage_generate(ctx: RunContext) -> None:
    tts = instantiate(ctx.cfg.tts)
    t0 = time.perf_counter()
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


def stage_run(ctx: RunContext) -> None:
    from fdeval.audio.vad import SileroVAD
    from fdeval.orchestrator.clock import make_clock
    from fdeval.orchestrator.recorder import write_session
    from fdeval.orchestrator.session import run_session

    ocfg = orchestrator_config(ctx.cfg.orchestrator)
    if fixed := ctx.benchmark.orchestrator_overrides():
        from dataclasses import replace

        ocfg = replace(ocfg, turns=replace(ocfg.turns, **fixed))
    sessions = ctx.run_dir / "sessions"
    todo = [c for c in ctx.cases if not (sessions / f"{c.case_id}.h5").exists()]
    if not todo:
        log.info("run: all %d cases already recorded", len(ctx.cases))
        return
    model = ctx.model
    ctx.model_id  # records model.json for the later stages
    clock_kind = model.clock if ctx.cfg.orchestrator.clock == "auto" else ctx.cfg.orchestrator.clock
    vad = SileroVAD(sample_rate=ocfg.sample_rate)
    root = ctx.benchmark.cases_dir or ctx.data_dir
    base_attrs = {
        "model": model.identity(), "model_id": ctx.model_id, "benchmark": ctx.benchmark.name,
        "benchmark_version": ctx.benchmark.version, "seed": ctx.seed, "versions": _versions(),
        "orchestrator": OmegaConf.to_container(ctx.cfg.orchestrator),
    }
    sim_s = wall_s = 0.0
    failures = []
    if hasattr(model, "set_run_dir"):  # in-job servers keep their logs in the run folder
        model.set_run_dir(ctx.run_dir)
    retries = int(getattr(model, "case_retries", 0) or 0)

    async def attempt(case):
        audio = _turn_audio(case, root, ocfg.sample_rate)
        seed = case_seed(ctx.seed, case.case_id)
        attrs = {**base_attrs, "case_seed": seed, "case_version": case.version}
        for i in range(retries + 1):
            try:
                return await run_session(case, audio, model, ocfg, make_clock(clock_kind), vad, seed=seed,
                                         instruction=case.system_instruction, attrs=attrs)
            except Exception as e:  # a lost model server is restarted by the model: retry the case (bounded)
                if not getattr(e, "retryable", False) or i == retries:
                    raise
                log.warning("run: %s: %s; retrying the case (%d/%d)", case.case_id, str(e).splitlines()[0], i + 1, retries)

    def record(case, result, exc):
        nonlocal sim_s, wall_s
        err_file = sessions / f"{case.case_id}.error.json"
        if exc is not None:
            if isinstance(exc, FdevalError):
                raise exc
            # an infrastructure failure of this case: recorded, never a verdict
            import traceback

            failures.append(case.case_id)
            write_json_atomic(err_file, {"case_id": case.case_id, "stage": "run", "error": f"{type(exc).__name__}: {exc}",
                                         "traceback": "".join(traceback.format_exception(exc))[-4000:], "model_id": ctx.model_id})
            log.error("run: %s failed: %s: %s", case.case_id, type(exc).__name__, exc)
            return
        write_session(result.log, result.user, result.model, sessions / f"{case.case_id}.wav", sessions / f"{case.case_id}.h5")
        err_file.unlink(missing_ok=True)
        sim_s += result.log.duration_s
        wall_s += result.wall_s
        errs = [t["error_s"] for t in result.log.turns if t["turn_type"] == "barge-in" and not math.isnan(t["error_s"])]
        log.info("run: %s: %.1f s session in %.2f s wall (%s)%s", case.case_id, result.log.duration_s, result.wall_s,
                 result.log.attrs.get("end_reason"), f", barge-in error {max(errs) * 1000:.2f} ms" if errs else "")

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
    speed = sim_s / wall_s if wall_s > 0 else float("inf")
    ctx.stats["run"] = {"cases": len(todo), "session_s": sim_s, "wall_s": wall_s, "speed": speed, "clock": clock_kind}
    msg = f"run: {len(todo)} cases, {sim_s:.1f} session-s in {wall_s:.1f} wall-s = {speed:.1f} session-seconds per wall-second ({clock_kind})"
    log.info(msg)
    print(msg, flush=True)
    if failures:
        raise RunFailures(f"run: {len(failures)} case(s) failed (e.g. {failures[0]}; reasons in sessions/*.error.json); "
                          "relaunch the same command to retry them")


# -- transcribe ---------------------------------------------------------------------------------
def stage_transcribe(ctx: RunContext) -> None:
    """Transcripts with exact user words (TTS timings); model words from the model's own text
    stream (`asr=exact`) or from an ASR backend on the model channel (`asr=whisper|qwen3`)."""
    from fdeval.transcript.build import build_transcript
    from fdeval.transcript.io import transcript_to_dict
    from fdeval.transcript.render import render

    out = ctx.run_dir / "transcripts"
    todo = [c for c in ctx.cases if not (out / f"{c.case_id}.json").exists()]
    missing = [c.case_id for c in todo if not (ctx.run_dir / "sessions" / f"{c.case_id}.h5").exists()]
    if missing:
        raise FdevalError(f"transcribe: no session recorded for {len(missing)} case(s), e.g. {missing[0]}; run stage=run first")
    asr = None
    if ctx.cfg.asr.name != "exact" and todo:
        asr = _instantiate(ctx.cfg.asr)
        write_json_atomic(ctx.run_dir / "transcripts" / "asr.json", {"identity": asr.identity()})
    for case in ctx.bar(todo, "transcribe"):
        session = ctx.run_dir / "sessions" / f"{case.case_id}"
        model_words = None
        if asr is not None:
            model_words = asr.transcribe_channel(session.with_suffix(".wav"), 1, case.case_id, "model")
        tr = build_transcript(case, session.with_suffix(".h5"), model_words=model_words)
        write_text_atomic(out / f"{case.case_id}.txt", render(tr) + "\n")
        write_json_atomic(out / f"{case.case_id}.json", transcript_to_dict(tr))
    if asr is not None and getattr(asr, "runtime", None):
        write_json_atomic(ctx.run_dir / "transcripts" / "asr.json", {"identity": asr.identity(), "runtime": asr.runtime})
    log.info("transcribe: %d new, %d total", len(todo), len(ctx.cases))


# -- judge --------------------------------------------------------------------------------------
def _judged(path: Path) -> bool:
    """A verdict file counts as done unless it records a judge error (those are retried)."""
    if not path.exists():
        return False
    try:
        return json.loads(path.read_text()).get("verdict") != "error"
    except (OSError, ValueError):
        return False


def stage_judge(ctx: RunContext) -> None:
    from fdeval.judges.base import verdict_to_dict
    from fdeval.transcript.io import load_transcript

    judge, out = ctx.judge, ctx.run_dir / "verdicts"
    jobs = [(c, p) for c in ctx.cases for p in c.judge_policies if not _judged(out / f"{c.case_id}@{p}.json")]
    counts: dict[str, int] = {}
    for case, policy in ctx.bar(jobs, "judge"):
        tpath = ctx.run_dir / "transcripts" / f"{case.case_id}.json"
        if not tpath.exists():
            raise FdevalError(f"judge: no transcript for case {case.case_id} ({tpath}); run stage=transcribe first")
        verdict = judge.judge(case, policy, load_transcript(tpath))
        counts[verdict.verdict] = counts.get(verdict.verdict, 0) + 1
        write_json_atomic(out / f"{case.case_id}@{policy}.json", {**verdict_to_dict(verdict), "model_id": ctx.model_id})
    log.info("judge: %d new verdicts %s", len(jobs), counts)


# -- score --------------------------------------------------------------------------------------
def stage_score(ctx: RunContext) -> None:
    from fdeval.judges.base import verdict_from_dict
    from fdeval.metrics.ias import METRIC_VERSION, ias_rows, write_csv, write_markdown
    from fdeval.report.build import ReportSettings, RunData, write_run_report
    from fdeval.report.runs import verdict_table

    settings = ReportSettings.from_config(ctx.cfg.get("report"))  # checked before any work
    vdir = ctx.run_dir / "verdicts"
    verdicts, missing, model_ids = [], [], {}
    for c in ctx.cases:
        for p in c.judge_policies:
            f = vdir / f"{c.case_id}@{p}.json"
            if f.exists():
                d = json.loads(f.read_text())
                verdicts.append(verdict_from_dict(d, f))
                if isinstance(d, dict) and isinstance(d.get("model_id"), str):
                    model_ids[(c.case_id, p)] = d["model_id"]
            else:
                missing.append(f.name)
    if missing:
        raise FdevalError(f"score: {len(missing)} verdict(s) missing, e.g. {missing[0]}; run stage=judge first")
    judge = ctx.judge
    provenance = {
        "benchmark": ctx.benchmark.name, "benchmark_version": ctx.benchmark.version, "model_id": ctx.model_id,
        "judge": judge.id, "judge_version": judge.version, "prompt_hash": judge.prompt_hash,
        "metric_version": METRIC_VERSION, "seed": ctx.seed, "fdeval_version": fdeval.__version__,
    }
    cases = {c.case_id: c for c in ctx.cases}
    rows = ias_rows(verdicts, cases, provenance)
    sdir = ctx.run_dir / "scores"
    write_csv(rows, sdir / "ias.csv")
    write_markdown(rows, sdir / "ias.md")
    per_case = [{"case_id": v.case_id, "policy": v.policy, "verdict": v.verdict, **provenance} for v in verdicts]
    write_csv(per_case, sdir / "results.csv")
    write_csv(verdict_table(verdicts, cases, model_ids, provenance), sdir / "verdicts.csv")
    run = RunData(str(ctx.cfg.model.name), verdicts, cases, provenance, model_ids, str(ctx.run_dir))
    paths = write_run_report(run, sdir, settings, ias_rows=rows)
    print((sdir / "ias.md").read_text(), flush=True)
    print((sdir / "delta_ias.md").read_text(), flush=True)
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


def run_steps(cfg: DictConfig, run_dir: Path, steps: list[str], shard: tuple[int, int] | None = None) -> RunContext:
    """Run `steps` in this process (locally, or as one array task handling `shard`)."""
    ctx = RunContext(cfg, run_dir, Path(cfg.out_root).expanduser().resolve(), shard=shard)
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
    return ctx


def run_stages(cfg: DictConfig, run_dir: Path) -> RunContext | None:
    """Validate, then run the configured stages here (launcher=local) or submit them (slurm)."""
    steps = list(cfg.stage.steps)
    bad = [s for s in steps if s not in STAGE_FUNCS]
    if bad:
        raise ConfigError(f"stage.steps: unknown step(s) {bad}; valid: {list(STAGE_FUNCS)}")
    if cfg.launcher.name not in ("local", "slurm"):
        raise ConfigError(f"launcher.name: unknown launcher {cfg.launcher.name!r}; valid: local, slurm")
    # Validate everything that can be checked before any work starts.
    orchestrator_config(cfg.orchestrator)
    _number(cfg, "", "seed", lambda x: x >= 0 and x == int(x), "must be a non-negative integer")
    RunContext(cfg, run_dir, Path(cfg.out_root).expanduser().resolve()).benchmark
    run_dir.mkdir(parents=True, exist_ok=True)
    write_json_atomic(run_dir / "run.json", {"command_config": OmegaConf.to_container(cfg, resolve=True),
                                             "versions": _versions()})
    local = [s for s in steps if s in LOCAL_ONLY or cfg.launcher.name == "local"]
    ctx = run_steps(cfg, run_dir, local) if local else None
    remote = [s for s in steps if s not in local]
    if remote:
        from fdeval.cluster.slurm import submit

        n = len(ctx.cases) if ctx is not None else len(run_steps(cfg, run_dir, []).cases)
        submit(cfg, run_dir, remote, n)
    return ctx
