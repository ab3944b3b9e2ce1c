"""The Instruct-FD human study mode of the review app (paper §5, A.3, A.12, A.13).

A study is built once from Instruct-FD cases (a generated data folder or a run folder), then
served: each participant registers, completes the onboarding, and answers their assigned items.
Items, decision points and scoring are the benchmark's (``Benchmark.review().human_study()``,
fdeval/engine/review.py: Instruct-FD's :mod:`fdeval.benchmarks.instructfd.metrics.human`), reached
through the benchmark object of the run folder (or, for a data folder, the one its cases name,
built from its config): this module imports no benchmark. It registers its routes and header link
on the review server when imported (``python -m fdeval.review`` imports it).

Folder (``<source>/review/study/``, or ``--out``)::

    study.json                        the items, their stimuli and the settings (seed, step, design)
    stimuli/<item_id>.wav             the audio a participant hears (stereo: ch0 user, ch1 model)
    participants/<name>.json          who, when registered / onboarded, the assigned order
    answers/<name>/<item_id>.json     one answer: who, when, the action at each decision point

Stimuli (``audio="reference"``, the default) are built from the case itself, as the paper plays
"the conversation from the test case turn logs": the user turns' own audio and the reference
model's replies spoken by espeak-ng in a voice that is not the user's, laid out turn after turn
with ``GAP_S`` between them, up to the decision turn: for proactive items the whole decision turn
(the page stops at each decision point), for responsive items the model's reply with the user's
interjection starting ``barge_in_after_s`` after the reply's onset, cut ``OVERLAP_S`` into the
interjection. The model keeps talking through the interjection in the stimulus either way: the
participant decides whether it should. A run folder with ``audio="session"`` plays the session
recording instead (its turn log says where the decision turn starts).

Design: ``between`` (the paper's) gives each participant one item per conversation, so nobody
hears a conversation twice; the item is the least-assigned one of the conversation so far
(ties broken by the seeded draw), which balances instructions and conditions across
participants. ``within`` gives every participant every item, the conversation's items without
the instruction first, so the instruction cannot shape the default answer. The order is a
seeded shuffle per participant (``random.Random(f"{seed}:{name}")``): the same study, seed and
name give the same order. An answer is final: a second answer to the same item is refused.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import random
import re
import sys
import threading
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable, Mapping

import numpy as np

from fdeval.audio.io import read_wav, write_wav
from fdeval.audio.tts import EspeakTTS
from fdeval.audio.resample import resample
from fdeval.cases.schema import case_files
from fdeval.engine.review import HumanStudy, benchmark_named
from fdeval.errors import FdevalError
from fdeval.files import write_json_atomic
from fdeval.orchestrator.config import TurnConfig
from fdeval.orchestrator.turns import barge_in_delay_s
from fdeval.recording import read_session
from fdeval.report.runview import open_run, reopen
from fdeval.review import server
from fdeval.types import TestCase

STUDY_VERSION = "1"
GAP_S = 0.6  # silence between turns in a stimulus
SAMPLE_RATE = 16000
DESIGNS = ("between", "within")
AUDIO_SOURCES = ("reference", "session")
NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
MODEL_VOICES = (
    "en-us+f2",
    "en-us+m3",
    "en+f4",
    "en+m1",
)  # the reference model's voice: the first not the user's

# What the participant reads: one definition per action (the A.12 modules' first part).
ACTION_TEXT = {
    "listen": "Stay silent and let the user keep talking: no listener sounds, no cutting in.",
    "backchannel": "Give a short listener signal such as 'mm-hmm' or 'yeah' without taking the floor; "
    "the user keeps talking.",
    "interrupt": "Cut in now, while the user is still talking, and take the floor to say something.",
    "continue": "The model is talking and the user chimes in: keep talking and finish the point.",
    "acknowledge": "The model is talking and the user cuts in: stop, take up what the user said, and adapt.",
}


class StudyError(FdevalError):
    """A study, a source or an answer that cannot be used (one line); the benchmark's study rules
    raise their own FdevalError, answered alike."""


def now_utc() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


# -- building ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Source:
    """Where the cases and their audio come from: a data folder or a run folder."""

    path: Path
    kind: str  # "data" | "run"
    cases: tuple[TestCase, ...]
    case_root: Path  # turn audio paths are relative to it
    sessions: Mapping[str, tuple[Path | None, Path | None]]  # run only: case id -> (wav, h5)
    benchmark: str  # the benchmark's name
    rules: HumanStudy  # its human study: items, answers, scoring


def study_rules(bench: Any, where: Path) -> HumanStudy:
    """The human study of a benchmark object (a StudyError when it has none)."""
    rules = bench.review().human_study()
    if rules is None:
        raise StudyError(
            f"{where}: a {bench.name} folder; benchmark {bench.name} has no human study"
        )
    return rules


def rules_named(benchmark: str) -> HumanStudy:
    """The human study of the benchmark `benchmark=<name>` selects."""
    return study_rules(benchmark_named(benchmark), Path(benchmark))


def _cases_benchmark(folder: Path) -> str:
    """The benchmark the case files of a data folder name (their ``benchmark`` field)."""
    files = case_files(folder)
    try:
        name = json.loads(files[0].read_text(encoding="utf-8")).get("benchmark") if files else None
    except (OSError, ValueError, AttributeError) as e:
        raise StudyError(f"{files[0]}: not a readable case file ({e})") from None
    if not isinstance(name, str) or not name:
        raise StudyError(f"{folder}: no case file naming its benchmark")
    return name


def open_source(path: str | Path) -> Source:
    """A generated data folder (``cases/`` inside) or a run folder (``run.json`` inside) of a
    benchmark with a human study (Instruct-FD)."""
    p = Path(path)
    if (p / "run.json").is_file():
        view = open_run(p)
        return Source(
            p,
            "run",
            tuple(s.case for s in view.sessions),
            Path(reopen(p).case_root),
            {s.case.case_id: (s.wav, s.log) for s in view.sessions},
            view.benchmark,
            study_rules(view.bench, p),
        )
    if (p / "cases").is_dir():
        bench = benchmark_named(_cases_benchmark(p / "cases"))
        rules = study_rules(bench, p)
        return Source(p, "data", tuple(bench.load(p)), p, {}, bench.name, rules)
    raise StudyError(f"{p}: neither a run folder (run.json) nor a data folder (cases/)")


def _mono(path: Path) -> np.ndarray:
    x, sr = read_wav(path, mono=True)
    x = np.asarray(x, dtype=np.float32).reshape(-1)
    return x if sr == SAMPLE_RATE else resample(x, sr, SAMPLE_RATE)


def _model_lines(case: TestCase) -> list[list[str]]:
    """The reference model's speech after each user line group: per model 'take-turn' line, that line
    plus the untagged model lines that go on after a user backchannel (the model kept talking)."""
    out: list[list[str]] = []
    for r in case.data.reference:
        if r.speaker != "model":
            continue
        if r.tag == "take-turn":
            out.append([r.text])
        elif r.tag == "" and out:
            out[-1].append(r.text)
    return out


class _Track:
    """Two channels laid out in time (ch0 user, ch1 model)."""

    def __init__(self) -> None:
        self.ch: list[np.ndarray] = [np.zeros(0, np.float32), np.zeros(0, np.float32)]

    def put(self, ch: int, at_s: float, x: np.ndarray) -> None:
        i = int(round(at_s * SAMPLE_RATE))
        need = i + len(x)
        for k in (0, 1):
            if len(self.ch[k]) < need:
                self.ch[k] = np.concatenate(
                    [self.ch[k], np.zeros(need - len(self.ch[k]), np.float32)]
                )
        self.ch[ch][i:need] += x

    @property
    def end_s(self) -> float:
        return len(self.ch[0]) / SAMPLE_RATE

    def stereo(self, until_s: float) -> np.ndarray:
        n = int(round(until_s * SAMPLE_RATE))
        self.put(0, until_s, np.zeros(0, np.float32))
        return np.clip(np.stack([self.ch[0][:n], self.ch[1][:n]], axis=1), -1.0, 1.0)


def reference_stimulus(
    case: TestCase, item: Any, root: Path, speak: Callable[[str], np.ndarray]
) -> tuple[np.ndarray, float, float]:
    """(stereo samples, decision turn start, stimulus end) for one item (module doc); `speak` gives
    16 kHz mono float32 for a model line."""
    track = _Track()
    replies = _model_lines(case)
    t, r = 0.0, 0
    for turn in case.turns[: item.turn]:
        if turn.turn_type != "take-turn":
            continue  # an earlier interjection: the reference reply after it is not replayed
        x = _mono(root / turn.audio_path)
        track.put(0, t, x)
        t += len(x) / SAMPLE_RATE + GAP_S
        if r < len(replies) and not (item.kind == "responsive" and turn.index == item.turn - 1):
            y = speak(" ".join(replies[r]))
            track.put(1, t, y)
            t += len(y) / SAMPLE_RATE + GAP_S
            r += 1
    decision = case.turns[item.turn]
    if item.kind == "responsive":
        if r >= len(replies):
            raise StudyError(f"case {case.case_id}: no reference model reply to interject into")
        track.put(1, t, speak(" ".join(replies[r])))
        start = t + barge_in_delay_s(decision, TurnConfig())  # as a session would inject it
        track.put(0, start, _mono(root / decision.audio_path))
        end = start + item.points[-1]
    else:
        start = t
        track.put(0, start, _mono(root / decision.audio_path))
        end = start + decision.duration_s
    return track.stereo(end), round(start, 4), round(end, 4)


def _espeak_speaker(case: TestCase) -> Callable[[str], np.ndarray]:
    user = (case.data.voice or {}).get("voice")
    voice = next(v for v in MODEL_VOICES if v != user)
    tts = EspeakTTS(voice=voice, sample_rate=SAMPLE_RATE)
    return functools.lru_cache(maxsize=None)(lambda text: tts.synthesize(text).samples)


def _session_offset(h5: Path, turn: int) -> float:
    for row in read_session(h5, tables=("turns",)).turns:
        if row.index == turn:
            return row.start_s
    raise StudyError(f"{h5}: turn {turn} is not in the session's turn log")


def build_study(
    source: str | Path,
    out: str | Path | None = None,
    *,
    seed: int = 0,
    step_s: float | None = None,
    design: str = "between",
    audio: str = "reference",
    speaker: Callable[[TestCase], Callable[[str], np.ndarray]] | None = None,
) -> Path:
    """Plan every item of the source's cases, write their stimuli and study.json (`step_s`: the
    seconds between decision points, the benchmark's default when None)."""
    if design not in DESIGNS:
        raise StudyError(f"design must be one of {DESIGNS}, got {design!r}")
    if audio not in AUDIO_SOURCES:
        raise StudyError(f"audio must be one of {AUDIO_SOURCES}, got {audio!r}")
    src = open_source(source)
    if audio == "session" and src.kind != "run":
        raise StudyError(
            f"{src.path}: audio=session needs a run folder (a data folder has no sessions)"
        )
    out = Path(out) if out is not None else src.path / "review" / "study"
    if (out / "study.json").exists():
        raise StudyError(
            f"{out}: a study is already there (answers may depend on it); choose another --out"
        )
    cases = {c.case_id: c for c in src.cases}
    step_s = src.rules.STEP_S if step_s is None else step_s
    items = src.rules.plan_study(cases.values(), step_s)
    if not items:
        raise StudyError(f"{src.path}: no {src.benchmark} cases to build a study from")
    speakers: dict[
        str | None, Callable[[str], np.ndarray]
    ] = {}  # one per user voice: a conversation's lines once
    entries = []
    for item in items:
        case = cases[item.case_id]
        if audio == "session":
            wav, h5 = src.sessions.get(case.case_id, (None, None))
            if wav is None or h5 is None:
                raise StudyError(f"case {case.case_id}: no session recording in {src.path}")
            start = _session_offset(h5, item.turn)
            end = start + (
                item.points[-1] if item.kind == "responsive" else case.turns[item.turn].duration_s
            )
            stim = {
                "path": os.path.relpath(wav, out),
                "start_s": round(start, 4),
                "end_s": round(end, 4),
            }
        else:
            key = (case.data.voice or {}).get("voice")
            if key not in speakers:
                speakers[key] = (speaker or _espeak_speaker)(case)
            samples, start, end = reference_stimulus(case, item, src.case_root, speakers[key])
            rel = f"stimuli/{item.item_id}.wav"
            (out / "stimuli").mkdir(parents=True, exist_ok=True)
            write_wav(out / rel, samples, SAMPLE_RATE)
            stim = {"path": rel, "start_s": start, "end_s": end}
        entries.append({**item.to_dict(), "stimulus": stim})
    u, m = (EspeakTTS(voice=v, sample_rate=SAMPLE_RATE) for v in TUTORIAL_VOICES)
    build_tutorial(
        out,
        functools.lru_cache(maxsize=None)(lambda t: u.synthesize(t).samples),
        functools.lru_cache(maxsize=None)(lambda t: m.synthesize(t).samples),
    )
    write_json_atomic(
        out / "study.json",
        {
            "study_version": STUDY_VERSION,
            "benchmark": src.benchmark,
            "source": str(src.path),
            "source_kind": src.kind,
            "seed": int(seed),
            "step_s": float(step_s),
            "tolerance_s": src.rules.TOLERANCE_S,
            "design": design,
            "audio": audio,
            "created_at": now_utc(),
            "items": entries,
        },
    )
    return out


# -- serving -----------------------------------------------------------------------------------


class Study:
    """A built study folder: assignments, answers, tables. Thread-safe for the server's threads."""

    def __init__(self, folder: str | Path):
        self.folder = Path(folder)
        path = self.folder / "study.json"
        try:
            self.meta = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as e:
            raise StudyError(f"{path}: not a readable study ({e})") from None
        # the benchmark whose study it is (a study.json without one predates the field: Instruct-FD's)
        self.rules = rules_named(str(self.meta.get("benchmark") or "instructfd"))
        self.items = [self.rules.StudyItem.from_dict(d) for d in self.meta["items"]]
        self.by_id = {it.item_id: it for it in self.items}
        self.stimuli = {d["item_id"]: d["stimulus"] for d in self.meta["items"]}
        self._lock = threading.Lock()

    # participants
    def _pfile(self, name: str) -> Path:
        if not isinstance(name, str) or not NAME_RE.match(name):
            raise StudyError(
                f"participant name {name!r}: use 1-64 letters, digits, '_', '.' or '-'"
            )
        return self.folder / "participants" / f"{name}.json"

    def participant(self, name: str) -> dict[str, Any] | None:
        p = self._pfile(name)
        return json.loads(p.read_text(encoding="utf-8")) if p.is_file() else None

    def participants(self) -> list[dict[str, Any]]:
        d = self.folder / "participants"
        return (
            [
                json.loads(p.read_text(encoding="utf-8"))
                for p in sorted(d.glob("*.json"))
                if not p.name.startswith(".")
            ]
            if d.is_dir()
            else []
        )

    def assign(self, name: str) -> list[str]:
        """The item order for a participant (module doc: design, balance, seeded order)."""
        rng = random.Random(f"{self.meta['seed']}:{name}")
        convs: dict[str, list[Any]] = {}
        for it in self.items:
            convs.setdefault(it.conversation_id, []).append(it)
        if self.meta["design"] == "within":
            groups = [
                sorted(v, key=lambda it: (it.condition != "without", it.item_id))
                for v in convs.values()
            ]
            rng.shuffle(groups)
            return [it.item_id for g in groups for it in g]
        seen: dict[str, int] = {}
        for p in self.participants():
            for i in p["order"]:
                seen[i] = seen.get(i, 0) + 1
        chosen = []
        for conv in sorted(convs):
            options = convs[conv]
            least = min(seen.get(it.item_id, 0) for it in options)
            pool = [it for it in options if seen.get(it.item_id, 0) == least]
            chosen.append(rng.choice(sorted(pool, key=lambda it: it.item_id)).item_id)
        rng.shuffle(chosen)
        return chosen

    def register(self, name: str) -> dict[str, Any]:
        with self._lock:
            existing = self.participant(name)
            if existing is not None:
                return existing
            rec = {
                "participant": name,
                "registered_at": now_utc(),
                "onboarded_at": None,
                "order": self.assign(name),
            }
            write_json_atomic(self._pfile(name), rec)
            return rec

    def onboarded(self, name: str) -> dict[str, Any]:
        with self._lock:
            rec = self.participant(name)
            if rec is None:
                raise StudyError(f"participant {name}: not registered")
            if not rec["onboarded_at"]:
                rec["onboarded_at"] = now_utc()
                write_json_atomic(self._pfile(name), rec)
            return rec

    # answers
    def _afile(self, name: str, item_id: str) -> Path:
        self._pfile(name)
        return self.folder / "answers" / name / f"{item_id}.json"

    def answered(self, name: str) -> set[str]:
        d = self.folder / "answers" / name
        return (
            {p.stem for p in d.glob("*.json") if not p.name.startswith(".")}
            if d.is_dir()
            else set()
        )

    def next_item(self, name: str) -> dict[str, Any] | None:
        rec = self.participant(name)
        if rec is None:
            raise StudyError(f"participant {name}: not registered")
        if not rec["onboarded_at"]:
            raise StudyError(f"participant {name}: complete the onboarding first")
        done = self.answered(name)
        left = [i for i in rec["order"] if i not in done]
        if not left:
            return None
        it = self.by_id[left[0]]
        st = self.stimuli[it.item_id]
        return {
            "item_id": it.item_id,
            "position": len(rec["order"]) - len(left) + 1,
            "total": len(rec["order"]),
            "instruction": it.instruction,
            "kind": it.kind,
            "choices": list(it.choices),
            "audio": f"/api/study/audio?item={it.item_id}",
            "start_s": st["start_s"],
            "end_s": st["end_s"],
            "points_s": [round(st["start_s"] + t, 4) for t in it.points],
        }

    def save_answer(
        self, name: str, item_id: str, actions: list[str], started_at: str | None = None
    ) -> dict[str, Any]:
        rec = self.participant(name)
        if rec is None:
            raise StudyError(f"participant {name}: not registered")
        if item_id not in rec["order"]:
            raise StudyError(f"participant {name}: item {item_id!r} is not assigned to them")
        if not isinstance(actions, list) or not all(isinstance(a, str) for a in actions):
            raise StudyError(f"item {item_id}: actions must be a list of action names")
        it = self.by_id[item_id]
        self.rules.check_answer(it, actions)
        if len(actions) < (asked := self.rules.asked_points(it, actions)):
            raise StudyError(f"item {item_id}: {len(actions)} answers, {asked} points asked")
        path = self._afile(name, item_id)
        out = {
            "participant": name,
            "item_id": item_id,
            "case_id": it.case_id,
            "condition": it.condition,
            "judged": list(it.judged),
            "points_s": list(it.points[: len(actions)]),
            "actions": actions,
            "started_at": started_at,
            "saved_at": now_utc(),
            "study_seed": self.meta["seed"],
        }
        with self._lock:
            if path.exists():
                raise StudyError(
                    f"participant {name}: item {item_id} is already answered (answers are final)"
                )
            write_json_atomic(path, out)
        return out

    def answers(self) -> list[Any]:
        out = []
        root = self.folder / "answers"
        for p in sorted(root.glob("*/*.json")) if root.is_dir() else []:
            if p.name.startswith("."):
                continue
            try:
                d = json.loads(p.read_text(encoding="utf-8"))
                out.append(
                    self.rules.Answer(str(d["participant"]), str(d["item_id"]), tuple(d["actions"]))
                )
            except (OSError, ValueError, KeyError, TypeError) as e:
                raise StudyError(f"{p}: unreadable answer ({e})") from None
        return out

    def tables(self, alpha: float = 0.05) -> dict[str, list[dict[str, Any]]]:
        try:
            return self.rules.tables(self.items, self.answers(), alpha, self.meta["tolerance_s"])
        except FdevalError as e:
            raise StudyError(f"{self.folder}: {e}") from None


# The tutorial's worked examples and practice questions (A.12's structure, our own situations):
# per action two examples (what the user says, what the model was saying for responsive ones, the
# answer and why) and one practice question. Spoken at build time: the tutorial has audio without
# playing any of the study's own conversations.
TUTORIAL: dict[str, dict[str, Any]] = {
    "listen": {
        "examples": [
            (
                "My number is five five five, two one, and then",
                None,
                "listen",
                "They are in the middle of giving details; any sound would get in the way.",
            ),
            (
                "So I was thinking, um, maybe Thursday or",
                None,
                "listen",
                "A thinking pause is not an invitation to speak; the instruction says stay silent.",
            ),
        ],
        "practice": ("Let me think for a second about which one I want", None, "listen"),
    },
    "backchannel": {
        "examples": [
            (
                "It keeps happening when I'm on a call, and, hang on one second,",
                None,
                "backchannel",
                "They asked you to wait: a brief 'sure' shows you are there and hands the floor straight back.",
            ),
            (
                "So that was the first problem. Are you still with me?",
                None,
                "backchannel",
                "A short 'yeah' answers the check without taking over.",
            ),
        ],
        "practice": ("One moment, someone is at the door,", None, "backchannel"),
    },
    "interrupt": {
        "examples": [
            (
                "I'm going to mix bleach and ammonia so it's stronger, and then",
                None,
                "interrupt",
                "Something dangerous is about to happen: the instruction asks you to cut in before they act on it.",
            ),
            (
                "Since the first moon landing was in nineteen seventy five, I figured",
                None,
                "interrupt",
                "A clear factual mistake that the instruction tells you to correct straight away.",
            ),
        ],
        "practice": ("I'll just leave the gas on while I'm out, it's fine, and", None, "interrupt"),
    },
    "continue": {
        "examples": [
            (
                "uh-huh",
                "Start with the sunniest corner of the balcony, because tomatoes need six hours of sun",
                "continue",
                "'uh-huh' urges you on; stopping would break the explanation for nothing.",
            ),
            (
                "right, right",
                "First warm the pan, then add a little oil and wait until it shimmers",
                "continue",
                "Agreement while you talk is not a request for the floor.",
            ),
        ],
        "practice": (
            "mm-hmm",
            "Next you fold the dough over itself and press it down with your palms",
            "continue",
        ),
    },
    "acknowledge": {
        "examples": [
            (
                "wait, actually",
                "Pile the flour on the counter and press a well into the middle for the eggs",
                "acknowledge",
                "The user is stopping you: yield and take up what they say.",
            ),
            (
                "sorry, can you repeat that?",
                "Set the oven to two hundred degrees and bake it for forty minutes",
                "acknowledge",
                "A repair request needs an answer before you go on.",
            ),
        ],
        "practice": (
            "hold on, I don't have any eggs",
            "Crack two eggs into the well and mix them in slowly",
            "acknowledge",
        ),
    },
}
TUTORIAL_VOICES = ("en-us+m7", "en-us+f5")  # user, model
TUTORIAL_OVERLAP_S = 1.5  # the user cuts in this far into the model's line


def _situation(user: str, model: str | None) -> str:
    return (
        f"User: '{user}…'"
        if model is None
        else f"The model is saying '{model}…' and the user says '{user}'"
    )


def tutorial_clips() -> list[tuple[str, str, str | None]]:
    """(clip id, user text, model text) of every tutorial example and practice question."""
    out = []
    for a, t in TUTORIAL.items():
        for k, (user, model, _, _) in enumerate(t["examples"]):
            out.append((f"{a}-{k}", user, model))
        out.append((f"{a}-practice", t["practice"][0], t["practice"][1]))
    return out


def build_tutorial(
    out: Path, speak_user: Callable[[str], np.ndarray], speak_model: Callable[[str], np.ndarray]
) -> None:
    """Speak the tutorial clips into ``<study>/stimuli/tutorial/`` (stereo, ch0 user, ch1 model)."""
    for clip, user, model in tutorial_clips():
        track = _Track()
        if model is None:
            track.put(0, 0.0, speak_user(user))
        else:
            track.put(1, 0.0, speak_model(model))
            track.put(0, TUTORIAL_OVERLAP_S, speak_user(user))
        end = (
            TUTORIAL_OVERLAP_S + len(speak_user(user)) / SAMPLE_RATE + 0.3
            if model
            else track.end_s + 0.2
        )
        (out / "stimuli" / "tutorial").mkdir(parents=True, exist_ok=True)
        write_wav(out / "stimuli" / "tutorial" / f"{clip}.wav", track.stereo(end), SAMPLE_RATE)


def _choices(action: str) -> list[str]:
    """The actions offered in `action`'s module: the proactive ones (the user is talking: no model
    line in its practice question) or the responsive ones (the user cuts into the model)."""
    proactive = TUTORIAL[action]["practice"][1] is None
    return [a for a, t in TUTORIAL.items() if (t["practice"][1] is None) == proactive]


def onboarding(study: "Study | None" = None) -> dict[str, Any]:
    """The tutorial (A.12's structure, our words): an orientation, then one module per action with a
    definition, two worked examples with the reason, and a practice question with feedback; each
    example and question with its audio clip when the study has the tutorial clips."""

    def audio(clip: str) -> str | None:
        if study is None or not (study.folder / "stimuli" / "tutorial" / f"{clip}.wav").is_file():
            return None
        return f"/api/study/audio?tutorial={clip}"

    return {
        "orientation": [
            "You will hear short conversations between a user and a voice assistant (the model).",
            "The audio stops at moments in the user's speech (about every 2 seconds) or just after "
            "the user speaks over the model. At each stop, choose what the model should do now.",
            "Some conversations come with an instruction for the model: when one is shown, decide "
            "as the instruction asks. When none is shown, decide what you would find natural.",
            "Choosing Interrupt ends that conversation: the model has taken the floor.",
        ],
        "modules": [
            {
                "action": a,
                "definition": ACTION_TEXT[a],
                "choices": _choices(a),
                "examples": [
                    {
                        "situation": _situation(u, m),
                        "answer": ans,
                        "why": why,
                        "audio": audio(f"{a}-{k}"),
                    }
                    for k, (u, m, ans, why) in enumerate(TUTORIAL[a]["examples"])
                ],
                "practice": {
                    "situation": _situation(*TUTORIAL[a]["practice"][:2]),
                    "answer": TUTORIAL[a]["practice"][2],
                    "audio": audio(f"{a}-practice"),
                },
            }
            for a in TUTORIAL
        ],
    }


# -- HTTP handlers (plain: (study, query, body) -> (status, payload)) --------------------------


def api_info(study: Study, query: Mapping[str, str], body: Any = None) -> tuple[int, Any]:
    return 200, {
        "n_items": len(study.items),
        "design": study.meta["design"],
        "seed": study.meta["seed"],
        "step_s": study.meta["step_s"],
        "actions": ACTION_TEXT,
        "onboarding": onboarding(study),
        "participants": [p["participant"] for p in study.participants()],
    }


def api_register(study: Study, query: Mapping[str, str], body: Any = None) -> tuple[int, Any]:
    rec = study.register((body or {}).get("participant"))
    return 200, {**rec, "answered": sorted(study.answered(rec["participant"]))}


def api_onboarded(study: Study, query: Mapping[str, str], body: Any = None) -> tuple[int, Any]:
    return 200, study.onboarded((body or {}).get("participant"))


def api_next(study: Study, query: Mapping[str, str], body: Any = None) -> tuple[int, Any]:
    return 200, {"item": study.next_item(query.get("participant", ""))}


def api_answer(study: Study, query: Mapping[str, str], body: Any = None) -> tuple[int, Any]:
    b = body or {}
    return 200, study.save_answer(
        b.get("participant"), b.get("item_id"), b.get("actions"), b.get("started_at")
    )


def api_tables(study: Study, query: Mapping[str, str], body: Any = None) -> tuple[int, Any]:
    return 200, study.tables()


def audio_path(study: Study, item_id: str) -> Path:
    """The stimulus file of an item, symlinks resolved: inside the study folder, or, for
    audio=session, a recording inside the run folder it came from (``<run>/sessions/<case>.wav``,
    a folder with run.json); anything else is refused."""
    if item_id not in study.stimuli:
        raise StudyError(f"no study item {item_id!r}")
    p = study.folder / study.stimuli[item_id]["path"]
    run = Path(os.path.normpath(p)).parent.parent
    real = server.inside(p, study.folder) or (
        (run / "run.json").is_file() and server.inside(p, run) or None
    )
    if real is None:
        raise StudyError(
            f"study item {item_id}: its audio is outside the study folder and its run folder"
        )
    return real


def tutorial_path(study: Study, clip: str) -> Path:
    if clip not in {c for c, _, _ in tutorial_clips()}:
        raise StudyError(f"no tutorial clip {clip!r}")
    real = server.inside(study.folder / "stimuli" / "tutorial" / f"{clip}.wav", study.folder)
    if real is None:
        raise StudyError(f"tutorial clip {clip}: its audio is outside the study folder")
    return real


HANDLERS: dict[tuple[str, str], Callable[[Study, Mapping[str, str], Any], tuple[int, Any]]] = {
    ("GET", "/api/study/info"): api_info,
    ("POST", "/api/study/participant"): api_register,
    ("POST", "/api/study/onboarded"): api_onboarded,
    ("GET", "/api/study/next"): api_next,
    ("POST", "/api/study/answer"): api_answer,
    ("GET", "/api/study/tables"): api_tables,
}


def handle(
    study: Study, method: str, path: str, query: Mapping[str, str], body: Any = None
) -> tuple[int, Any]:
    """Dispatch one API call; a user error (a StudyError, or the study rules' own) is a 400 with its
    one line, an unknown path a 404."""
    fn = HANDLERS.get((method, path))
    if fn is None:
        return 404, {"error": f"no study endpoint {method} {path}"}
    try:
        return fn(study, query, body)
    except FdevalError as e:
        return 400, {"error": str(e)}


# -- the review server's routes (registered on import; `python -m fdeval.review` imports this module) --


def studies_of(app: server.ReviewApp) -> list[Study]:
    """The studies an app serves: those `serve` gave it, else every served run's review/study/."""
    found = getattr(app, "studies", None)
    if found is None:
        found = [
            Study(v.run_dir / "review" / "study")
            for v in app.views
            if (v.run_dir / "review" / "study" / "study.json").is_file()
        ]
        app.studies = found  # type: ignore[attr-defined]
    return found


def _study(app: server.ReviewApp, req: server.Request) -> Study:
    studies = studies_of(app)
    try:
        return studies[int(req.query.get("study", "0"))]
    except (ValueError, IndexError):
        raise server.HttpError(
            404,
            f"no study {req.query.get('study', '0')!r} (this server has {len(studies)}; "
            "build one with python -m fdeval.review.study build)",
        ) from None


def _adapter(method: str, path: str) -> None:
    def fn(app: server.ReviewApp, req: server.Request) -> server.Response:
        body = req.json() if method == "POST" else None
        status, payload = handle(_study(app, req), method, path, req.query, body)
        if path == "/api/study/info" and status == 200:
            # whether the page may link to the review app; a participant is not told who else took part
            payload["review_app"] = not getattr(app, "participant", False)
            if not payload["review_app"]:
                payload.pop("participants", None)
        return server.json_response(payload, status)

    server.route(method, path, participant=True)(fn)


for _m, _p in HANDLERS:
    _adapter(_m, _p)


@server.route("GET", "/api/study/list")
def api_list(app: server.ReviewApp, req: server.Request) -> server.Response:
    return server.json_response(
        {
            "studies": [
                {
                    "index": i,
                    "folder": str(s.folder),
                    "n_items": len(s.items),
                    "design": s.meta["design"],
                }
                for i, s in enumerate(studies_of(app))
            ]
        }
    )


@server.route("GET", "/api/study/audio", participant=True)
def api_audio(app: server.ReviewApp, req: server.Request) -> server.Response:
    study = _study(app, req)
    try:
        clip = req.query.get("tutorial")
        path = (
            tutorial_path(study, clip) if clip is not None else audio_path(study, req.arg("item"))
        )
        return server.ranged(req, path.read_bytes(), "audio/wav")
    except (StudyError, OSError) as e:
        raise server.HttpError(404, str(e)) from None


if ("Human study", "/static/study.html") not in server.NAV:
    server.NAV.append(("Human study", "/static/study.html"))
# participant mode (`serve`): the study page and its routes above, nothing of the review app
server.PARTICIPANT_FILES.update({"study.html", "study.js", "study.css", "favicon.svg"})
server.PARTICIPANT_HOME = "/static/study.html"


def serve(study_dirs: list[str | Path], port: int = 0) -> None:
    """Serve studies alone, in participant mode (no run folders needed: a study of a data folder
    has none): the study page and its API only; the review app's pages, runs, verdicts and labels
    are refused (403)."""
    app = server.ReviewApp([], "study", participant=True)
    app.studies = [Study(d) for d in study_dirs]  # type: ignore[attr-defined]
    httpd = server.make_server(app, port)
    print(f"fdeval study: http://127.0.0.1:{httpd.server_address[1]}/static/study.html", flush=True)
    try:
        httpd.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        httpd.server_close()


# -- command line ------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m fdeval.review.study", description=__doc__.splitlines()[0]
    )
    sub = ap.add_subparsers(dest="cmd", required=True)
    b = sub.add_parser("build", help="build a study from a data folder or a run folder")
    b.add_argument("source")
    b.add_argument("--out", default=None, help="study folder (default <source>/review/study)")
    b.add_argument("--seed", type=int, default=0)
    b.add_argument(
        "--step",
        type=float,
        default=None,
        help="seconds between decision points (default: the benchmark's; Instruct-FD: 2)",
    )
    b.add_argument("--design", choices=DESIGNS, default="between")
    b.add_argument("--audio", choices=AUDIO_SOURCES, default="reference")
    t = sub.add_parser("tables", help="print the tables computed from the saved answers (JSON)")
    t.add_argument("study")
    s = sub.add_parser(
        "serve", help="serve studies on 127.0.0.1 (also served by python -m fdeval.review RUN_DIR)"
    )
    s.add_argument("studies", nargs="+", metavar="STUDY_DIR")
    s.add_argument("--port", type=int, default=0)
    args = ap.parse_args(argv)
    try:
        if args.cmd == "build":
            out = build_study(
                args.source,
                args.out,
                seed=args.seed,
                step_s=args.step,
                design=args.design,
                audio=args.audio,
            )
            print(f"fdeval study: {len(Study(out).items)} items in {out}")
        elif args.cmd == "tables":
            print(json.dumps(Study(args.study).tables(), indent=2))
        else:
            serve(args.studies, args.port)
    except FdevalError as e:
        print(f"fdeval study: {e}", file=sys.stderr)
        return 2
    except OSError as e:  # the port is taken
        print(
            f"fdeval study: cannot listen on 127.0.0.1:{args.port}: {e.strerror or e}",
            file=sys.stderr,
        )
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
