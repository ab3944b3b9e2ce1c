"""The Instruct-FD generation pipeline: scenario specs -> text -> speech -> cases -> sampling.

For each of the 29 scenarios (:mod:`.specs`):

1. **Text.** A persona (the shipped pool or a persona file, dealt from a per-(seed, scenario)
   shuffle) and a text backend (offline grammars or an LLM turn agent) write candidate
   conversations with inline markers until the pool holds ``ceil(n * pool_factor)`` valid ones
   (at most that many plus ``n`` attempts). A candidate that breaks the scenario's layout or the
   marker rules is discarded and counted.
2. **Balanced sampling.** The valid pool is put in a seeded random order that spreads topics
   (one conversation per topic before any repeat); the first ``n`` are the selection, the rest
   are reserves.
3. **Speech.** Each selected conversation is synthesized: every user turn is cut at its markers
   and pauses and each piece synthesized on its own (a barge-in marker's content too), so each
   marker gets an exact timestamp -- the end of the audio before it. Pieces are synthesized by a
   small thread pool (each espeak-ng call is its own process), each distinct text once. A
   conversation whose audio or word timings fail (silent audio, a word count mismatch, a trigger
   outside its words) is discarded and replaced by the next reserve.
4. **Assembly.** One case per instruction of the scenario plus one un-instructed baseline, all
   sharing the conversation's audio and reference (:func:`.generate.build_cases`).

Idempotent and resumable: a conversation whose cases are on disk, valid, with their audio and as
this run would write them, is neither synthesized nor rewritten; files are written atomically,
audio first. ``data_dir/generation_report.json`` records counts per scenario and instruction,
discards by reason, seconds of audio, variety, wall time, backend, seed and version; it is
rewritten only by a run that wrote something.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import math
import random
import re
import shutil
import time
from collections import Counter, deque
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Protocol, Sequence

import numpy as np
from tqdm import tqdm

from fdeval.audio.io import write_wav
from fdeval.audio.tts import EspeakUnavailableError
from fdeval.benchmarks.instructfd.builtin import (
    Conversation,
    Line,
    validate_conversation,
)
from fdeval.benchmarks.instructfd.generate import (
    BENCHMARK,
    BENCHMARK_VERSION,
    ConversationPlan,
    Speaker,
    _audio_rel,
    _load_fresh,
    build_cases,
    estimated_cases,
    pick_voice,
    plan_conversation,
    synthesize_turn,
    voice_record,
)
from fdeval.benchmarks.instructfd.instructions import SCENARIOS
from fdeval.benchmarks.instructfd.markers import MarkerError, Speech, parse_markers
from fdeval.benchmarks.instructfd.offline import OfflineBackend
from fdeval.benchmarks.instructfd.personas import Persona
from fdeval.benchmarks.instructfd.records import NO_POLICY, POLICIES, InstructFDCase
from fdeval.benchmarks.instructfd.specs import (
    SCENARIO_ORDER,
    SPECS,
    ScenarioSpec,
    check_against_spec,
)
from fdeval.cases.schema import case_from_dict, case_to_dict, write_case
from fdeval.orchestrator.turns import DEFAULT_BARGE_IN_AFTER_S
from fdeval.errors import CaseError, FdevalError
from fdeval.files import write_json_atomic
from fdeval.types import DEFAULT_TURN_TIMEOUT_S, TestCase

log = logging.getLogger("fdeval")

# Bump when the pipeline changes what is written for the same inputs (layout, sampling, timing
# rules). The backends carry their own versions (in the data folder name via `identity()`).
GENERATION_VERSION = "2.0"  # 2.0: (voice, text) synthesis pool, voice per persona
DATA_VERSION = f"{BENCHMARK_VERSION}+gen{GENERATION_VERSION}"
REPORT_NAME = "generation_report.json"
SILENT_PEAK = 0.01  # a synthesized piece quieter than this everywhere counts as missing audio
MAX_EMPTY_WORD_SHARE = 0.25  # more zero-length word timings than this in a turn: alignment failure
_WINDOW = 12  # conversations whose syntheses are queued ahead of the one being written


class DraftRejected(Exception):
    """A candidate conversation the backend could not write validly (counted, not fatal)."""

    def __init__(self, reason: str, detail: str = ""):
        self.reason, self.detail = reason, detail
        super().__init__(f"{reason}: {detail}" if detail else reason)


@dataclass(frozen=True)
class Draft:
    """One written conversation before speech: what the text backend produced."""

    conversation_id: str
    scenario: str
    index: int
    persona: Persona
    attribute: str
    grounding: str
    topic: str
    lines: tuple[tuple[str, str], ...]

    def conversation(self) -> Conversation:
        return Conversation(
            self.conversation_id,
            self.scenario,
            self.grounding,
            tuple(Line(s, t) for s, t in self.lines),
        )  # type: ignore[arg-type]

    def script(self, backend: dict, seed: int) -> dict:
        return {
            "conversation_id": self.conversation_id,
            "scenario": self.scenario,
            "candidate_index": self.index,
            "seed": seed,
            "backend": backend,
            "persona": self.persona.to_dict(),
            "attribute": self.attribute,
            "grounding": self.grounding,
            "topic": self.topic,
            "lines": [{"speaker": s, "text": t} for s, t in self.lines],
        }


class TextBackend(Protocol):
    name: str

    def identity(self) -> dict: ...

    def draft(self, spec: ScenarioSpec, index: int, seed: int, persona: Persona) -> Draft: ...


def conversation_id(spec: ScenarioSpec, index: int) -> str:
    return f"{spec.slug}_{index:03d}"


def validate_draft(draft: Draft) -> None:
    """Raise DraftRejected('text_invalid') unless the draft follows its spec and the marker rules."""
    try:
        check_against_spec(draft.lines, SPECS[draft.scenario])
        validate_conversation(draft.conversation())
    except (ValueError, MarkerError) as e:
        raise DraftRejected("text_invalid", str(e)) from None


class OfflineTextBackend:
    """Adapter: the offline grammars (:mod:`.offline`) as a TextBackend."""

    name = "offline"

    def __init__(self):
        self._impl = OfflineBackend()

    def identity(self) -> dict:
        return self._impl.identity()

    def draft(self, spec: ScenarioSpec, index: int, seed: int, persona: Persona) -> Draft:
        lines, grounding, attribute, topic = self._impl.write(spec, index, seed, persona)
        d = Draft(
            conversation_id(spec, index),
            spec.name,
            index,
            persona,
            attribute,
            grounding,
            topic,
            lines,
        )
        validate_draft(d)
        return d


# ------------------------------------------------------------------------------------------------
# Configuration and counts


@dataclass(frozen=True)
class GenerationConfig:
    per_scenario: int
    seed: int = 0
    timeout_s: float = DEFAULT_TURN_TIMEOUT_S
    barge_in_after_s: float = DEFAULT_BARGE_IN_AFTER_S
    pool_factor: float = 1.25
    workers: int = 2
    scenarios: tuple[str, ...] = SCENARIO_ORDER

    def __post_init__(self):
        if self.per_scenario < 1:
            raise ValueError(f"per_scenario must be >= 1, got {self.per_scenario}")
        if self.pool_factor < 1:
            raise ValueError(f"pool_factor must be >= 1, got {self.pool_factor}")
        if self.workers < 1:
            raise ValueError(f"workers must be >= 1, got {self.workers}")
        unknown = [s for s in self.scenarios if s not in SPECS]
        if unknown:
            raise ValueError(f"unknown scenarios {unknown}")

    @property
    def pool_size(self) -> int:
        return max(self.per_scenario, math.ceil(self.per_scenario * self.pool_factor - 1e-9))


def expected_counts(per_scenario: int, scenarios: Iterable[str] = SCENARIO_ORDER) -> dict[str, Any]:
    """Counts implied by the catalog for `per_scenario` conversations per scenario (no generation).

    ``instructed[policy]``: cases per instruction; ``conversations[policy]``: conversations per
    scenario group (a scenario counts under its first instruction); ``baselines``: one per
    conversation. With 24 per scenario this is the paper's Table 2.
    """
    scenarios = list(scenarios)
    instructed = Counter({p: 0 for p in POLICIES})
    convs = Counter({p: 0 for p in POLICIES})
    n_scen = Counter({p: 0 for p in POLICIES})
    for name in scenarios:
        pol = SCENARIOS[name].policies
        for p in pol:
            instructed[p] += per_scenario
        convs[pol[0]] += per_scenario
        n_scen[pol[0]] += 1
    return {
        "scenarios": dict(n_scen),
        "conversations": dict(convs),
        "instructed": dict(instructed),
        "total_conversations": per_scenario * len(scenarios),
        "total_instructed": sum(instructed.values()),
        "baselines": per_scenario * len(scenarios),
    }


# ------------------------------------------------------------------------------------------------
# Text and sampling


def personas_for(personas: Sequence[Persona], seed: int, spec: ScenarioSpec) -> list[Persona]:
    """The scenario's persona order for this seed (candidate i gets entry i mod len)."""
    order = list(personas)
    random.Random(f"fdeval-personas:{seed}:{spec.slug}").shuffle(order)
    return order


def balanced_order(drafts: Sequence[Draft], seed: int, spec: ScenarioSpec) -> list[Draft]:
    """A seeded random order of `drafts` that lists one per topic before any topic repeats."""
    order = list(drafts)
    random.Random(f"fdeval-sample:{seed}:{spec.slug}").shuffle(order)
    seen: Counter[str] = Counter()
    keyed = []
    for pos, d in enumerate(order):
        keyed.append((seen[d.topic], pos, d))
        seen[d.topic] += 1
    return [d for _, _, d in sorted(keyed, key=lambda k: (k[0], k[1]))]


@dataclass
class ScenarioPlan:
    spec: ScenarioSpec
    order: list[Draft]  # balanced order: the first n are selected, the rest are reserves
    discards: Counter = field(default_factory=Counter)
    attempts: int = 0


@dataclass
class DatasetPlan:
    config: GenerationConfig
    backend: dict
    scenarios: dict[str, ScenarioPlan]

    def selected(self, scenario: str) -> list[Draft]:
        return self.scenarios[scenario].order[: self.config.per_scenario]

    def cases(self) -> dict[str, list[TestCase]]:
        """Per scenario, the cases of the selected conversations, before synthesis (no timings)."""
        out = {}
        for name in self.scenarios:
            out[name] = [c for d in self.selected(name) for c in _expected_cases(d, self.config)]
        return out


def plan_scenario(
    spec: ScenarioSpec, cfg: GenerationConfig, backend: TextBackend, personas: Sequence[Persona]
) -> ScenarioPlan:
    """Write candidates 0, 1, 2, ... until the pool holds `cfg.pool_size` valid ones (or the attempt
    limit is reached), then order them for sampling. A backend with ``concurrency > 1`` writes
    several candidates at once; the result is the same as one at a time."""
    plan = ScenarioPlan(spec, [])
    order = personas_for(personas, cfg.seed, spec)
    target, limit = cfg.pool_size, cfg.pool_size + cfg.per_scenario
    pool: list[Draft] = []

    def write(i: int) -> Draft:
        return backend.draft(spec, i, cfg.seed, order[i % len(order)])

    def rejected(i: int, e: DraftRejected) -> None:
        plan.discards[e.reason] += 1
        log.debug("instructfd: %s candidate %d discarded (%s)", spec.name, i, e)

    concurrency = int(getattr(backend, "concurrency", 1) or 1)
    if concurrency <= 1:
        i = 0
        while len(pool) < target and i < limit:
            try:
                pool.append(write(i))
            except DraftRejected as e:
                rejected(i, e)
            i += 1
        plan.attempts = i
    else:
        with ThreadPoolExecutor(max_workers=concurrency, thread_name_prefix="fdeval-text") as ex:
            pending: dict[int, Future] = {i: ex.submit(write, i) for i in range(min(target, limit))}
            nxt = len(pending)
            while pending:
                i = min(pending)
                try:
                    pool.append(pending.pop(i).result())
                except DraftRejected as e:
                    rejected(i, e)
                    if nxt < limit and len(pool) + len(pending) < target:
                        pending[nxt] = ex.submit(write, nxt)
                        nxt += 1
            plan.attempts = nxt
    plan.order = balanced_order(pool, cfg.seed, spec)
    return plan


def plan_dataset(
    cfg: GenerationConfig, backend: TextBackend, personas: Sequence[Persona]
) -> DatasetPlan:
    """Text generation and balanced sampling for every scenario: everything before speech."""
    if not personas:
        raise ValueError("no personas")
    return DatasetPlan(
        cfg,
        backend.identity(),
        {name: plan_scenario(SPECS[name], cfg, backend, personas) for name in cfg.scenarios},
    )


def _expected_cases(
    draft: Draft,
    cfg: GenerationConfig,
    plan: ConversationPlan | None = None,
    audio=None,
    voice: dict | None = None,
) -> list[TestCase]:
    plan = plan or plan_conversation(draft.conversation(), cfg.seed)
    return [
        dataclasses.replace(c, version=DATA_VERSION)
        for c in build_cases(plan, audio, cfg.seed, cfg.timeout_s, cfg.barge_in_after_s, voice)
    ]


def estimated_dataset(
    cfg: GenerationConfig,
    backend: TextBackend,
    personas: Sequence[Persona],
    speech_s: Callable[[str], float],
) -> list[TestCase]:
    """The selected conversations' cases, sorted by id, with estimated turn lengths and no audio
    (`stage=plan`): the text is written (an LLM backend's from its cache), nothing is spoken. A
    conversation that synthesis would discard is counted in place of the reserve replacing it."""
    dplan = plan_dataset(cfg, backend, personas)
    cases = [
        dataclasses.replace(c, version=DATA_VERSION)
        for name in dplan.scenarios
        for d in dplan.selected(name)
        for c in estimated_cases(
            plan_conversation(d.conversation(), cfg.seed),
            speech_s,
            cfg.seed,
            cfg.timeout_s,
            cfg.barge_in_after_s,
        )
    ]
    return sorted(cases, key=lambda c: c.case_id)


# ------------------------------------------------------------------------------------------------
# Speech


class _SynthPool:
    """Synthesizes distinct (voice, text) pairs on a few threads.

    Every pair is synthesized once per run: `expect` announces the uses a conversation will make
    of its pairs, `want` starts the syntheses not yet started, and `release` drops a result once
    its last expected use is done (so memory holds only what conversations in flight need)."""

    def __init__(self, tts: Speaker, workers: int):
        self.tts = tts
        self.speakers: dict[str, Speaker] = {}
        self.ex = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="fdeval-tts")
        self.futures: dict[tuple[str, str], Future] = {}
        self.refs: Counter[tuple[str, str]] = Counter()
        self.calls = 0

    def expect(self, texts: Iterable[tuple[str, str]]) -> None:
        self.refs.update(texts)

    def want(self, texts: Iterable[tuple[str, str]]) -> None:
        for voice, t in texts:
            if (voice, t) not in self.futures:
                if voice not in self.speakers:
                    self.speakers[voice] = self.tts.with_voice(voice)
                self.calls += 1
                self.futures[(voice, t)] = self.ex.submit(self.speakers[voice].synthesize, t)

    def voice(self, voice: str) -> "_Voice":
        return _Voice(self, voice)

    def release(self, texts: Iterable[tuple[str, str]]) -> None:
        for t in texts:
            self.refs[t] -= 1
            if self.refs[t] <= 0:
                del self.refs[t]
                self.futures.pop(t, None)

    def close(self) -> None:
        for f in self.futures.values():
            f.cancel()
        self.ex.shutdown(wait=True, cancel_futures=True)


@dataclass(frozen=True)
class _Voice:
    """One voice of the pool, with the synthesizer interface `synthesize_turn` uses."""

    pool: _SynthPool
    name: str

    def synthesize(self, text: str):
        return self.pool.futures[(self.name, text)].result()


def _speech_texts(plan: ConversationPlan, voice: str) -> list[tuple[str, str]]:
    return [
        (voice, s.text) for tp in plan.turns for s in tp.parsed.segments if isinstance(s, Speech)
    ]


@dataclass
class _Job:
    draft: Draft
    plan: ConversationPlan
    texts: list[tuple[str, str]]
    voice: dict  # the case's voice record


def _check_audio(plan: ConversationPlan, audio, speaker: "_Voice") -> str | None:
    """Why the synthesized conversation is unusable (None when fine)."""
    for text in {t for _, t in _speech_texts(plan, speaker.name)}:
        syn = speaker.synthesize(text)
        if syn.samples.size == 0 or float(np.max(np.abs(syn.samples))) < SILENT_PEAK:
            return f"tts_silent: {text!r}"
    for tp, ta in zip(plan.turns, audio):
        # espeak-ng folds a short word into its neighbour now and then (a zero-length timing, see
        # fdeval.audio.tts); many such words in one turn means the timings cannot be trusted.
        empty = [w.text for w in ta.words if w.end_s <= w.start_s]
        if len(empty) > MAX_EMPTY_WORD_SHARE * len(ta.words):
            return f"alignment: {len(empty)} of {len(ta.words)} words of {tp.label} have no timing"
    return None


def _write_conversation(
    job: _Job, pool: _SynthPool, out_dir: Path, cfg: GenerationConfig
) -> tuple[list[TestCase] | None, str]:
    """Synthesize and write one conversation: (cases, '') or (None, discard reason)."""
    cid = job.draft.conversation_id
    speaker = pool.voice(job.voice["voice"])
    try:
        audio = [synthesize_turn(tp.parsed, speaker) for tp in job.plan.turns]  # type: ignore[arg-type]
        problem = _check_audio(job.plan, audio, speaker)
    except EspeakUnavailableError:
        raise
    except RuntimeError as e:
        problem = f"alignment: {e}" if "word timings" in str(e) else f"tts: {e}"
    except ValueError as e:
        problem = f"tts: {e}"
    if problem:
        return None, problem
    cases = _expected_cases(job.draft, cfg, job.plan, audio, job.voice)
    # Validate every case before writing anything, so a bad conversation leaves no files.
    try:
        for case in cases:
            case_from_dict(case_to_dict(case), f"<{case.case_id}>", None, InstructFDCase)
    except CaseError as e:
        return None, f"alignment: {e.field}: {e.message}"
    for tp, ta in zip(job.plan.turns, audio):
        write_wav(out_dir / _audio_rel(cid, tp.label), ta.samples, ta.sample_rate)
    for case in cases:
        write_case(case, out_dir / "cases" / f"{case.case_id}.json")
    return cases, ""


@dataclass
class GenerationResult:
    cases: list[TestCase]
    report: dict


def _reason_key(problem: str) -> str:
    return problem.split(":", 1)[0]


def generate_dataset(
    out_dir: Path,
    tts: Speaker,
    cfg: GenerationConfig,
    backend: TextBackend,
    personas: Sequence[Persona],
    show_progress: bool = False,
    extra_report: dict | None = None,
) -> GenerationResult:
    """Plan, synthesize and write the dataset under `out_dir`; see the module docstring."""
    t0 = time.perf_counter()
    out_dir = Path(out_dir)
    dplan = plan_dataset(cfg, backend, personas)
    n = cfg.per_scenario
    accepted: dict[str, list[tuple[Draft, list[TestCase]]]] = {name: [] for name in dplan.scenarios}
    tts_discards: dict[str, Counter] = {name: Counter() for name in dplan.scenarios}
    next_reserve = {name: n for name in dplan.scenarios}
    queue: deque[Draft] = deque(d for name in dplan.scenarios for d in dplan.selected(name))
    written = reused = 0
    pool = _SynthPool(tts, cfg.workers)
    window: deque[_Job] = deque()
    bar = None
    if show_progress:
        bar = tqdm(total=len(queue), desc="instructfd: generate", unit="conversation", leave=False)

    plans: dict[str, ConversationPlan] = {}
    voices: dict[str, dict] = {}

    def expect(draft: Draft) -> None:
        plan = plan_conversation(draft.conversation(), cfg.seed)
        plans[draft.conversation_id] = plan
        name = pick_voice(tts, draft.persona.pid, cfg.seed, draft.persona.pronoun)
        voices[draft.conversation_id] = voice_record(tts, name)
        pool.expect(_speech_texts(plan, name))

    for d in queue:
        expect(d)

    def replace(draft: Draft) -> None:
        name = draft.scenario
        k = next_reserve[name]
        order = dplan.scenarios[name].order
        if k < len(order):
            queue.append(order[k])
            expect(order[k])
            next_reserve[name] = k + 1
            if bar is not None:
                bar.total += 1

    def finish(job: _Job) -> None:
        nonlocal written
        cases, problem = _write_conversation(job, pool, out_dir, cfg)
        pool.release(job.texts)
        if cases is None:
            tts_discards[job.draft.scenario][_reason_key(problem)] += 1
            log.warning("instructfd: discarded %s (%s)", job.draft.conversation_id, problem)
            replace(job.draft)
        else:
            accepted[job.draft.scenario].append((job.draft, cases))
            written += 1
        if bar is not None:
            bar.update(1)

    try:
        while queue or window:
            if queue:
                draft = queue.popleft()
                plan, voice = plans[draft.conversation_id], voices[draft.conversation_id]
                texts = _speech_texts(plan, voice["voice"])
                fresh = _load_fresh(out_dir, _expected_cases(draft, cfg, plan, voice=voice))
                if fresh is not None:
                    accepted[draft.scenario].append((draft, fresh))
                    reused += 1
                    pool.release(texts)
                    if bar is not None:
                        bar.update(1)
                    continue
                pool.want(texts)
                window.append(_Job(draft, plan, texts, voice))
                if len(window) <= _WINDOW and queue:
                    continue
            if window:
                finish(window.popleft())
    finally:
        pool.close()
        if bar is not None:
            bar.close()

    backend_id = dplan.backend
    for name, items in accepted.items():
        for draft, _ in items:
            write_json_atomic(
                out_dir / "scripts" / f"{draft.conversation_id}.json",
                draft.script(backend_id, cfg.seed),
            )
    removed = _remove_strays(
        out_dir, {d.conversation_id for items in accepted.values() for d, _ in items}
    )

    all_cases = sorted(
        (c for items in accepted.values() for _, cs in items for c in cs), key=lambda c: c.case_id
    )
    report = _report(
        cfg,
        dplan,
        accepted,
        tts_discards,
        pool.calls,
        written,
        reused,
        removed,
        time.perf_counter() - t0,
        extra_report or {},
    )
    report_path = out_dir / REPORT_NAME
    if written or removed or not report_path.is_file():
        write_json_atomic(report_path, report)
    short = {name: len(items) for name, items in accepted.items() if len(items) < n}
    if short:
        raise FdevalError(
            f"instructfd: too few usable conversations for {short} (wanted {n} each); "
            f"see {report_path} for discards; raise benchmark.pool_factor"
        )
    log.info(
        "instructfd: %d conversations (%d written, %d already there), %d cases, %.1f s",
        sum(len(v) for v in accepted.values()),
        written,
        reused,
        len(all_cases),
        time.perf_counter() - t0,
    )
    return GenerationResult(all_cases, report)


_CID = re.compile(r"^([a-z0-9_]+_\d{3})__[a-z]+\.json$")


def _remove_strays(out_dir: Path, keep: set[str]) -> int:
    """Delete generated conversations in `out_dir` that are not part of this selection."""
    slugs = tuple(SPECS[n].slug + "_" for n in SPECS)
    removed = 0
    cases_dir = out_dir / "cases"
    if not cases_dir.is_dir():
        return 0
    stray_ids = set()
    for p in cases_dir.glob("*.json"):
        m = _CID.match(p.name)
        if m and m.group(1).startswith(slugs) and m.group(1) not in keep:
            stray_ids.add(m.group(1))
            p.unlink()
            removed += 1
    for cid in stray_ids:
        shutil.rmtree(out_dir / "audio" / cid, ignore_errors=True)
        (out_dir / "scripts" / f"{cid}.json").unlink(missing_ok=True)
    if removed:
        log.info(
            "instructfd: removed %d case file(s) of %d conversation(s) no longer selected",
            removed,
            len(stray_ids),
        )
    return removed


# ------------------------------------------------------------------------------------------------
# Report


def variety(drafts: Sequence[Draft]) -> dict[str, Any]:
    """Fractions of distinct texts among user take-turn lines and among user barge-in contents."""
    turns, barge = [], []
    for d in drafts:
        for speaker, text in d.lines:
            parsed = parse_markers(text)
            if speaker == "user":
                turns.append(parsed.text)
            else:
                barge.extend(
                    parse_markers(m.content).text
                    for m in parsed.markers
                    if m.kind in ("backchannel", "interrupt")
                )

    def frac(xs: list[str]) -> float | None:
        return round(len(set(xs)) / len(xs), 4) if xs else None

    return {
        "user_turns": len(turns),
        "user_turns_distinct_fraction": frac(turns),
        "user_barge_ins": len(barge),
        "user_barge_ins_distinct_fraction": frac(barge),
    }


def _report(
    cfg: GenerationConfig,
    dplan: DatasetPlan,
    accepted,
    tts_discards,
    calls: int,
    written: int,
    reused: int,
    removed: int,
    wall_s: float,
    extra: dict,
) -> dict:
    by_policy: Counter[str] = Counter()
    by_scenario: dict[str, Any] = {}
    audio_s = 0.0
    discards: Counter[str] = Counter()
    all_drafts: list[Draft] = []
    for name, items in accepted.items():
        sc_policies: Counter[str] = Counter()
        for draft, cases in items:
            all_drafts.append(draft)
            for c in cases:
                sc_policies[c.data.policy_name] += 1
            audio_s += sum(t.duration_s for t in cases[0].turns)
        by_policy.update({k: v for k, v in sc_policies.items() if k != NO_POLICY})
        sp = dplan.scenarios[name]
        d = Counter(sp.discards) + tts_discards[name]
        discards.update(d)
        by_scenario[name] = {
            "group": sp.spec.group,
            "policies": list(sp.spec.policies),
            "conversations": len(items),
            "cases": dict(sc_policies),
            "candidates_written": sp.attempts,
            "pool": len(sp.order),
            "discards": dict(d),
            "variety": variety([dr for dr, _ in items]),
        }
    groups: Counter[str] = Counter()
    for name, items in accepted.items():
        groups[SCENARIOS[name].policies[0]] += len(items)
    voices: Counter[str] = Counter(
        cases[0].data.voice["voice"]
        for items in accepted.values()
        for _, cases in items
        if cases[0].data.voice
    )
    tts_ids = {
        json.dumps({k: v for k, v in cases[0].data.voice.items() if k != "voice"}, sort_keys=True)
        for items in accepted.values()
        for _, cases in items
        if cases[0].data.voice
    }
    return {
        "benchmark": BENCHMARK,
        "version": DATA_VERSION,
        "generation_version": GENERATION_VERSION,
        "seed": cfg.seed,
        "backend": dplan.backend,
        "conversations_per_scenario": cfg.per_scenario,
        "pool_factor": cfg.pool_factor,
        "workers": cfg.workers,
        "timeout_s": cfg.timeout_s,
        "barge_in_after_s": cfg.barge_in_after_s,
        **extra,
        "counts": {
            "conversations": sum(len(v) for v in accepted.values()),
            "instructed_cases": sum(by_policy.values()),
            "baselines": sum(len(v) for v in accepted.values()),
            "instructed_by_policy": {p: by_policy.get(p, 0) for p in POLICIES},
            "conversations_by_group": {p: groups.get(p, 0) for p in POLICIES},
            "expected": expected_counts(cfg.per_scenario, list(accepted)),
        },
        "discards": {"total": sum(discards.values()), "by_reason": dict(discards)},
        "audio": {
            "user_audio_seconds": round(audio_s, 2),
            "distinct_syntheses_this_run": calls,
            "distinct_voices": len(voices),
            "conversations_by_voice": dict(sorted(voices.items())),
            "synthesizers": [json.loads(t) for t in sorted(tts_ids)],
        },
        "variety": variety(all_drafts),
        "run": {
            "wall_s": round(wall_s, 2),
            "conversations_written": written,
            "conversations_reused": reused,
            "stray_case_files_removed": removed,
        },
        "scenarios": by_scenario,
    }


def report_table(report: dict) -> str:
    """Table 2 style summary of a generation report (plain text)."""
    c = report["counts"]
    cols = list(POLICIES)
    rows = [
        ["", *cols, "total"],
        [
            "conversations",
            *[str(c["conversations_by_group"][p]) for p in cols],
            str(c["conversations"]),
        ],
        [
            "instructed cases",
            *[str(c["instructed_by_policy"][p]) for p in cols],
            str(c["instructed_cases"]),
        ],
        ["baselines", *[""] * len(cols), str(c["baselines"])],
    ]
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return "\n".join("  ".join(x.rjust(w) for x, w in zip(r, widths)) for r in rows)


def load_report(data_dir: Path) -> dict | None:
    p = Path(data_dir) / REPORT_NAME
    return json.loads(p.read_text()) if p.is_file() else None
