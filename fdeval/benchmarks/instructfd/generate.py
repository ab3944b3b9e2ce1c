"""Turn the built-in Instruct-FD scripts into test cases: audio + case JSONs.

For each conversation (see :mod:`fdeval.benchmarks.instructfd.builtin`):

* every user line becomes a take-turn :class:`Turn`; a line with markers or pauses is synthesized
  segment by segment (split at every marker and pause, joined with the pauses' silence), so each
  model cut-in marker gets an exact :class:`Trigger` time — the end of the audio before it;
* every user barge-in marker in a model line becomes its own barge-in turn (subtype from the
  marker; handling ``hold`` for a backchannel, ``yield`` for an interrupt), synthesized alone;
* the reference is the script in order, with tags (see ``docs/cases.md``);
* one case per instruction of the scenario (``<conversation_id>__<policy>``) and one
  un-instructed baseline (``<conversation_id>__none``), all sharing the same audio.

Layout under `out_dir` (the dataset root): ``audio/<conversation_id>/<label>.wav`` and
``cases/<case_id>.json``. Idempotent per conversation: when all its case files exist, match what
this code would write (texts, instructions, seed, version, timing parameters) and their audio
exists, nothing is synthesized or written; otherwise the conversation's audio and cases are
rewritten. Audio is written first and every file atomically, so a case file never points at
missing or partial audio.

BENCHMARK_VERSION is recorded in every case. Bump it whenever generated content changes for the
same seed — a script line, an instruction template, a scenario trigger phrase, or the way turns,
triggers or references are built: the minor number for wording changes, the major number for
changes to structure or semantics (new fields, different turn/trigger rules).
"""

from __future__ import annotations

import dataclasses
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable, Protocol, Sequence

import numpy as np
from tqdm import tqdm

from fdeval.audio.io import write_wav
from fdeval.audio.tts import Synthesis
from fdeval.benchmarks.instructfd.builtin import (
    BUILTIN_CONVERSATIONS,
    Conversation,
    Line,
    validate_conversation,
)
from fdeval.benchmarks.instructfd.instructions import render_instruction
from fdeval.benchmarks.instructfd.markers import (
    CUT_IN_KINDS,
    ParsedText,
    Pause,
    Speech,
    parse_markers,
)
from fdeval.benchmarks.instructfd.records import NO_POLICY, InstructFDCase, ReferenceLine, Trigger
from fdeval.cases.schema import load_case, write_case
from fdeval.orchestrator.turns import DEFAULT_BARGE_IN_AFTER_S
from fdeval.errors import CaseError
from fdeval.types import DEFAULT_TURN_TIMEOUT_S, TestCase, Turn, WordTiming

BENCHMARK = "instructfd"
# 1.1: espeak-ng noise seed pinned (audio no longer varies with the clock). 2.0: a voice per persona
# recorded in each case, 60 s turn timeouts (A.7), trigger placement and generator rewrites (issue 12).
BENCHMARK_VERSION = "2.0"
_ROUND = 4  # decimals kept for times written to case files (0.1 ms)


class Speaker(Protocol):
    """What the generator needs of a synthesizer (`fdeval.audio.tts.EspeakTTS`, `fdeval.audio.piper.PiperTTS`)."""

    sample_rate: int
    voices: tuple[str, ...]

    def with_voice(self, voice: str) -> "Speaker": ...

    def voice_sex(self, voice: str) -> str | None: ...

    def identity(self) -> dict[str, Any]: ...

    def synthesize(self, text: str) -> Synthesis: ...


@dataclass(frozen=True)
class TurnPlan:
    """A user turn before synthesis."""

    label: str
    turn_type: str  # take-turn | barge-in
    parsed: ParsedText  # what is spoken (a barge-in: its content, no markers)
    subtype: str | None = None


@dataclass(frozen=True)
class ConversationPlan:
    conversation: Conversation
    persona: str
    turns: tuple[TurnPlan, ...]
    reference: tuple[ReferenceLine, ...]


def plan_conversation(conv: Conversation, seed: int) -> ConversationPlan:
    """Everything about a conversation's cases that does not need audio."""
    validate_conversation(conv)
    persona, lines = conv.render(seed)
    return ConversationPlan(conv, persona, _plan_turns(lines), build_reference(lines))


def _plan_turns(lines: Sequence[Line]) -> tuple[TurnPlan, ...]:
    turns: list[TurnPlan] = []
    for line in lines:
        parsed = parse_markers(line.text)
        if line.speaker == "user":
            turns.append(TurnPlan(f"turn{len(turns) + 1}", "take-turn", parsed))
            continue
        for m in parsed.markers:
            if m.kind in CUT_IN_KINDS:
                content = parse_markers(m.content)
                turns.append(
                    TurnPlan(f"turn{len(turns) + 1}_{m.kind}", "barge-in", content, m.kind)
                )
    return tuple(turns)


def build_reference(lines: Iterable[Line]) -> tuple[ReferenceLine, ...]:
    """The script as an expected turn-taking transcript.

    Speech runs are split at cut-in markers: a marker in a user line becomes a MODEL line tagged
    with its kind (the model's expected cut-in), a marker in a model line a USER line tagged with
    its kind (the user's barge-in), ``<take-turn: X>`` a MODEL line tagged ``take-turn``. A model
    line is tagged ``take-turn`` when it follows user speech or a user interrupt, and untagged
    when it continues the model's own speech (after a user backchannel).
    """
    out: list[ReferenceLine] = []

    def emit(speaker: str, text: str, tag: str = "") -> None:
        if text:
            out.append(ReferenceLine(speaker, text, tag))  # type: ignore[arg-type]

    def model_tag() -> str:
        if not out:
            return "take-turn"
        prev = out[-1]
        continues = prev.speaker == "model" or (
            prev.speaker == "user" and prev.tag == "backchannel"
        )
        return "" if continues else "take-turn"

    for line in lines:
        parsed = parse_markers(line.text)
        other = "model" if line.speaker == "user" else "user"
        start = 0
        for m in parsed.markers:
            piece = " ".join(parsed.words[start : m.word_index])
            emit(line.speaker, piece, model_tag() if line.speaker == "model" and piece else "")
            start = m.word_index
            if m.kind == "take-turn":
                emit("model", m.content, "take-turn")
            else:
                emit(other, m.content, m.kind)
        piece = " ".join(parsed.words[start:])
        emit(line.speaker, piece, model_tag() if line.speaker == "model" and piece else "")
    return tuple(out)


# ------------------------------------------------------------------------------------------------
# Audio


@dataclass(frozen=True)
class TurnAudio:
    samples: np.ndarray
    sample_rate: int
    words: tuple[WordTiming, ...]
    segment_starts_s: tuple[float, ...]  # start of each segment of the plan, in order

    @property
    def duration_s(self) -> float:
        return self.samples.shape[0] / self.sample_rate


def synthesize_turn(parsed: ParsedText, tts: Speaker) -> TurnAudio:
    """Synthesize a turn's speech segments one by one and join them with its pauses."""
    speech = [s for s in parsed.segments if isinstance(s, Speech)]
    if not speech:
        raise ValueError(f"nothing to synthesize in {parsed.source!r}")
    synths = {id(s): tts.synthesize(s.text) for s in speech}
    rates = {syn.sample_rate for syn in synths.values()}
    if len(rates) != 1:
        raise RuntimeError(f"TTS returned mixed sample rates {sorted(rates)}")
    sr = rates.pop()
    chunks: list[np.ndarray] = []
    words: list[WordTiming] = []
    starts: list[float] = []
    n = 0
    for seg in parsed.segments:
        offset_s = n / sr
        starts.append(offset_s)
        if isinstance(seg, Pause):
            chunk = np.zeros(int(round(seg.seconds * sr)), dtype=np.float32)
        else:
            syn = synths[id(seg)]
            if len(syn.words) != len(seg.words):
                raise RuntimeError(
                    f"TTS gave {len(syn.words)} word timings for {len(seg.words)} words: {seg.text!r}"
                )
            chunk = np.asarray(syn.samples, dtype=np.float32).reshape(-1)
            words.extend(
                WordTiming(
                    tok, round(offset_s + w.start_s, _ROUND), round(offset_s + w.end_s, _ROUND)
                )
                for tok, w in zip(seg.words, syn.words)
            )
        chunks.append(chunk)
        n += chunk.shape[0]
    return TurnAudio(np.concatenate(chunks), sr, tuple(words), tuple(starts))


# ------------------------------------------------------------------------------------------------
# Voices

_SEX_OF_PRONOUN = {"she": "female", "he": "male"}


def pick_voice(tts: Speaker, speaker_key: str, seed: int, pronoun: str | None = None) -> str:
    """The voice a speaker (a persona) gets from `tts.voices`: seeded by the speaker, so one persona
    keeps one voice across its conversations; a voice of the persona's sex when the synthesizer
    knows voices' sexes and has one, else any of its voices."""
    voices = list(tts.voices)
    if not voices:
        raise ValueError(f"{type(tts).__name__} offers no voices")
    sex = _SEX_OF_PRONOUN.get(pronoun or "")
    same = [v for v in voices if sex is not None and tts.voice_sex(v) == sex]
    choices = same or voices
    return choices[zlib.crc32(f"fdeval-voice:{seed}:{speaker_key}".encode()) % len(choices)]


def voice_record(tts: Speaker, voice: str) -> dict:
    """What a case records about the voice that spoke it (everything that changes the samples)."""
    return {"voice": voice, **tts.with_voice(voice).identity()}


# ------------------------------------------------------------------------------------------------
# Cases


def _case_id(conversation_id: str, policy: str) -> str:
    return f"{conversation_id}__{policy}"


def case_ids(conversations: Sequence[Conversation] = BUILTIN_CONVERSATIONS) -> list[str]:
    """The ids of the cases `build_cases` makes of `conversations` (known without audio), sorted."""
    return sorted(
        _case_id(c.conversation_id, p) for c in conversations for p in (*c.policies, NO_POLICY)
    )


def _audio_rel(conversation_id: str, label: str) -> str:
    return f"audio/{conversation_id}/{label}.wav"


def _build_turn(
    plan: TurnPlan,
    index: int,
    case_id: str,
    conversation_id: str,
    audio: TurnAudio | None,
    timeout_s: float,
    barge_in_after_s: float,
) -> Turn:
    """A Turn; with ``audio=None`` the timing fields are left empty (for freshness comparison)."""
    barge = plan.turn_type == "barge-in"
    return Turn(
        case_id=case_id,
        index=index,
        label=plan.label,
        turn_type=plan.turn_type,  # type: ignore[arg-type]
        audio_path=_audio_rel(conversation_id, plan.label),
        text=plan.parsed.text,
        words=() if audio is None else audio.words,
        duration_s=0.0 if audio is None else round(audio.duration_s, _ROUND),
        timeout_s=float(timeout_s),
        barge_in_after_s=float(barge_in_after_s) if barge else None,
        barge_in_handling=("hold" if plan.subtype == "backchannel" else "yield") if barge else None,  # type: ignore[arg-type]
        subtype=plan.subtype if barge else None,  # type: ignore[arg-type]
    )


def _build_triggers(plan: TurnPlan, audio: TurnAudio | None) -> tuple[Trigger, ...]:
    """The model cut-in points of a take-turn (at 0 s with ``audio=None``)."""
    if plan.turn_type != "take-turn":
        return ()
    out = []
    for m in plan.parsed.markers:
        if m.kind in CUT_IN_KINDS:
            at_s = 0.0 if audio is None else round(audio.segment_starts_s[m.segment_index], _ROUND)
            out.append(Trigger(m.kind, at_s, m.word_index, m.content))  # type: ignore[arg-type]
    return tuple(out)


def build_cases(
    plan: ConversationPlan,
    audio: Sequence[TurnAudio] | None,
    seed: int,
    timeout_s: float,
    barge_in_after_s: float,
    voice: dict | None = None,
) -> list[TestCase]:
    """The conversation's instructed cases and its baseline (timings empty when `audio` is None)."""
    conv = plan.conversation
    cid = conv.conversation_id
    texts = {p: render_instruction(p, conv.scenario) for p in conv.policies}
    triggers = tuple(
        _build_triggers(tp, None if audio is None else audio[i]) for i, tp in enumerate(plan.turns)
    )
    cases = []
    for policy in (*conv.policies, NO_POLICY):
        case_id = _case_id(cid, policy)
        turns = tuple(
            _build_turn(
                tp,
                i,
                case_id,
                cid,
                None if audio is None else audio[i],
                timeout_s,
                barge_in_after_s,
            )
            for i, tp in enumerate(plan.turns)
        )
        instructed = policy != NO_POLICY
        data = InstructFDCase(
            policy_name=policy,  # type: ignore[arg-type]
            reference=plan.reference,
            judge_policies=(policy,) if instructed else tuple(conv.policies),
            judge_instructions={policy: texts[policy]} if instructed else dict(texts),
            triggers=triggers,
            voice=voice,
        )
        cases.append(
            TestCase(
                case_id=case_id,
                conversation_id=cid,
                benchmark=BENCHMARK,
                scenario=conv.scenario,
                system_instruction=texts[policy] if instructed else None,
                turns=turns,
                seed=seed,
                version=BENCHMARK_VERSION,
                data=data,
            )
        )
    return cases


def estimated_turn_s(parsed: ParsedText, speech_s: Callable[[str], float]) -> float:
    """A turn's length before synthesis: each speech segment as long as `speech_s` says (the
    run's TTS's estimate), each pause as written."""
    return sum(
        seg.seconds if isinstance(seg, Pause) else speech_s(seg.text) for seg in parsed.segments
    )


def estimated_cases(
    plan: ConversationPlan,
    speech_s: Callable[[str], float],
    seed: int,
    timeout_s: float,
    barge_in_after_s: float,
) -> list[TestCase]:
    """The conversation's cases as `build_cases` writes them, without audio: every turn's
    duration estimated (`estimated_turn_s`), no word or trigger times (`stage=plan` needs none)."""
    lengths = [round(estimated_turn_s(tp.parsed, speech_s), _ROUND) for tp in plan.turns]
    return [
        dataclasses.replace(
            c, turns=tuple(dataclasses.replace(t, duration_s=d) for t, d in zip(c.turns, lengths))
        )
        for c in build_cases(plan, None, seed, timeout_s, barge_in_after_s)
    ]


def estimated_builtin(
    speech_s: Callable[[str], float],
    seed: int = 0,
    timeout_s: float = DEFAULT_TURN_TIMEOUT_S,
    barge_in_after_s: float = DEFAULT_BARGE_IN_AFTER_S,
) -> list[TestCase]:
    """The built-in set's cases as `generate_builtin` returns them, without audio (`estimated_cases`)."""
    cases = [
        c
        for conv in BUILTIN_CONVERSATIONS
        for c in estimated_cases(
            plan_conversation(conv, seed), speech_s, seed, timeout_s, barge_in_after_s
        )
    ]
    return sorted(cases, key=lambda c: c.case_id)


def _without_timing(case: TestCase) -> tuple:
    turns = tuple(dataclasses.replace(t, words=(), duration_s=0.0) for t in case.turns)
    triggers = tuple(
        tuple(dataclasses.replace(g, at_s=0.0) for g in tt) for tt in case.data.triggers
    )
    data = dataclasses.replace(case.data, triggers=triggers)
    return dataclasses.replace(case, turns=turns, data=data), tuple(
        sorted(case.data.judge_instructions.items())
    )


def _load_fresh(out_dir: Path, expected: list[TestCase]) -> list[TestCase] | None:
    """The existing cases if all are on disk, valid, with their audio, and as expected; else None."""
    loaded = []
    for want in expected:
        path = out_dir / "cases" / f"{want.case_id}.json"
        if not path.is_file():
            return None
        try:
            case = load_case(
                path, out_dir, InstructFDCase
            )  # also checks that every audio file exists
        except CaseError:
            return None
        if _without_timing(case) != _without_timing(want):
            return None
        loaded.append(case)
    return loaded


def generate_conversation(
    conv: Conversation,
    out_dir: Path,
    tts: Speaker,
    seed: int = 0,
    timeout_s: float = DEFAULT_TURN_TIMEOUT_S,
    barge_in_after_s: float = DEFAULT_BARGE_IN_AFTER_S,
) -> list[TestCase]:
    """Generate (or reuse, when fresh) one conversation's audio and case files."""
    out_dir = Path(out_dir)
    plan = plan_conversation(conv, seed)
    # The built-in personas are one line of text with the speaker's first name first; their sex is not given.
    voice = pick_voice(tts, plan.persona.split()[0].strip(",."), seed)
    record = voice_record(tts, voice)
    fresh = _load_fresh(out_dir, build_cases(plan, None, seed, timeout_s, barge_in_after_s, record))
    if fresh is not None:
        return fresh
    speaker = tts.with_voice(voice)
    audio = [synthesize_turn(tp.parsed, speaker) for tp in plan.turns]
    for tp, ta in zip(plan.turns, audio):
        write_wav(out_dir / _audio_rel(conv.conversation_id, tp.label), ta.samples, ta.sample_rate)
    cases = build_cases(plan, audio, seed, timeout_s, barge_in_after_s, record)
    for case in cases:
        write_case(case, out_dir / "cases" / f"{case.case_id}.json")
    return cases


def generate_builtin(
    out_dir: Path,
    tts: Speaker,
    seed: int = 0,
    timeout_s: float = DEFAULT_TURN_TIMEOUT_S,
    barge_in_after_s: float = DEFAULT_BARGE_IN_AFTER_S,
    show_progress: bool = False,
    conversations: Sequence[Conversation] | None = None,
) -> list[TestCase]:
    """Write the built-in set (or `conversations`) under `out_dir`; return its cases sorted by id."""
    if timeout_s <= 0:
        raise ValueError(f"timeout_s must be > 0, got {timeout_s}")
    if barge_in_after_s < 0:
        raise ValueError(f"barge_in_after_s must be >= 0, got {barge_in_after_s}")
    convs = BUILTIN_CONVERSATIONS if conversations is None else tuple(conversations)
    ids = [c.conversation_id for c in convs]
    if len(set(ids)) != len(ids):
        raise ValueError(f"duplicate conversation ids in {ids}")
    if show_progress:
        convs = tqdm(convs, desc="instructfd: generate", unit="conversation", leave=False)
    cases: list[TestCase] = []
    for conv in convs:
        cases.extend(
            generate_conversation(conv, Path(out_dir), tts, seed, timeout_s, barge_in_after_s)
        )
    return sorted(cases, key=lambda c: c.case_id)
