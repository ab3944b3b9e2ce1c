"""The embedded FDB-layout set: samples of every Full-Duplex-Bench task spoken by the run's TTS.

`benchmark=fdb` with no `benchmark.data_dir` generates this set (FDB's own data is CC BY-NC and
downloads from Google Drive; none of it is shipped or copied). Each task folder holds
`n_per_task` samples in FDB's per-sample layout (layout.py), so the same reader, steps and
metrics serve it and a user's FDB download, and FDB's own evaluators read it too:

* `smooth_turn_taking/<n>`: a question, then silence; `turn_taking.json` marks the question's end;
* `pause_handling/<n>`: a sentence broken by a long pause mid-clause; `pause.json` marks the pause;
* `user_interruption/<n>`: a request, room for the model's answer, then an interruption at a fixed
  time; `interrupt.json` holds both texts and the interruption's span;
* `backchannel/<k>` (k from 0, as FDB numbers its ICC samples): a story told in sentences with
  short pauses; `reference_distribution.json` (keyed by sample) is where a listener would
  backchannel here: a triangular bump over each pause between sentences, in 0.2 s windows;
* `v15_user_interruption/<n>`, `v15_user_backchannel/<n>`: FDB v1.5's pairs: `input.wav` with the
  overlap event (a new request, or a listener's "uh-huh") while the model should be answering,
  `clean_input.wav` the same without it, `metadata.json` with the texts and the event's span.

Lines are fdeval's own. The sample rate is the TTS's; the times are the synthesizer's word times
placed on the sample's clock. Written idempotently: a sample folder whose files exist is kept.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from fdeval.audio.io import write_wav
from fdeval.files import write_json_atomic

GENERATOR_VERSION = "1"
LEAD_S = 0.3  # silence before the user's first word
REFERENCE_WINDOW_S = 0.2  # FDB's backchannel histogram window

QUESTIONS = (
    "Could you tell me how long it takes to boil an egg?",
    "What is a good way to start learning the guitar?",
    "Do you know why the sky looks blue in the afternoon?",
    "Which vegetables grow well on a small balcony?",
    "How should I prepare for a job interview next week?",
)
PAUSED = (
    ("I was planning to visit my sister and", "then drive up to the lake for the weekend."),
    ("The thing I keep forgetting is", "where I parked the car this morning."),
    ("What I would really like to know is", "how the recipe turns out without butter."),
    ("My neighbour told me that the", "library closes early on Fridays now."),
    ("Before we start I should mention", "that my phone battery is almost empty."),
)
INTERRUPTIONS = (
    ("Can you suggest a few films to watch this weekend?", "Actually, make it documentaries."),
    ("Tell me about the history of the bicycle.", "Sorry, can you keep it short?"),
    ("Give me some ideas for a birthday dinner.", "Wait, it has to be vegetarian."),
    ("Explain how a rainbow forms.", "Hold on, what about double rainbows?"),
    ("What should I pack for a beach holiday?", "Oh, and it might rain a lot."),
)
STORIES = (
    (
        "So last summer I finally took the train across the country.",
        "The first day was mostly farmland and long straight tracks.",
        "Then we reached the mountains and everyone crowded the windows.",
        "By the third day I had made friends with half the carriage.",
    ),
    (
        "My grandmother used to keep bees behind her house.",
        "Every spring she would open the hives and check the queens.",
        "I was terrified of them at first, to be honest.",
        "But after a while I started helping her collect the honey.",
    ),
    (
        "I started running about a year ago, almost by accident.",
        "A friend needed someone to train with for a charity race.",
        "The first few weeks were honestly miserable.",
        "Now I go out three mornings a week and really miss it when I skip.",
    ),
)
BACKCHANNELS = ("Uh-huh.", "Yeah.", "Mm-hmm.", "Right.", "Okay.")
STORY_GAP_S = 0.7


def _silence(s: float, sr: int) -> np.ndarray:
    return np.zeros(int(round(s * sr)), dtype=np.float32)


class _Track:
    """A mono track built left to right; `say` returns the words placed on its clock."""

    def __init__(self, sr: int):
        self.sr, self.parts, self.n = sr, [], 0

    @property
    def t_s(self) -> float:
        return self.n / self.sr

    def pause(self, s: float) -> None:
        x = _silence(s, self.sr)
        self.parts.append(x)
        self.n += len(x)

    def say(self, tts: Any, text: str) -> list[tuple[str, float, float]]:
        syn = tts.synthesize(text)
        if syn.sample_rate != self.sr:
            raise ValueError(f"TTS rate {syn.sample_rate} Hz, expected {self.sr} Hz")
        t0 = self.t_s
        self.parts.append(syn.samples.astype(np.float32))
        self.n += len(syn.samples)
        return [(w.text, round(t0 + w.start_s, 3), round(t0 + w.end_s, 3)) for w in syn.words]

    def audio(self) -> np.ndarray:
        return np.concatenate(self.parts) if self.parts else _silence(0, self.sr)


def _transcription(words: list[tuple[str, float, float]]) -> list[dict[str, Any]]:
    return [{"speaker": 0, "item": [{"text": t, "timestamp": [s, e]} for t, s, e in words]}]


def _done(d: Path, names: tuple[str, ...]) -> bool:
    return all((d / n).is_file() for n in names)


def _smooth(d: Path, tts: Any, sr: int, i: int) -> None:
    tr = _Track(sr)
    tr.pause(LEAD_S)
    words = tr.say(tts, QUESTIONS[i % len(QUESTIONS)])
    end = words[-1][2]
    tr.pause(6.0)
    write_wav(d / "input.wav", tr.audio(), sr)
    write_json_atomic(d / "transcription.json", _transcription(words))
    write_json_atomic(
        d / "turn_taking.json", [{"text": "[TURN-TAKING]", "timestamp": [end, tr.t_s]}]
    )


def _pause(d: Path, tts: Any, sr: int, i: int) -> None:
    first, second = PAUSED[i % len(PAUSED)]
    tr = _Track(sr)
    tr.pause(LEAD_S)
    w1 = tr.say(tts, first)
    tr.pause(1.6)
    w2 = tr.say(tts, second)
    tr.pause(0.4)
    write_wav(d / "input.wav", tr.audio(), sr)
    write_json_atomic(d / "transcription.json", _transcription(w1 + w2))
    write_json_atomic(d / "pause.json", [{"text": "[PAUSE]", "timestamp": [w1[-1][2], w2[0][1]]}])


def _interrupt(d: Path, tts: Any, sr: int, i: int) -> None:
    context, interrupt = INTERRUPTIONS[i % len(INTERRUPTIONS)]
    tr = _Track(sr)
    tr.pause(LEAD_S)
    w1 = tr.say(tts, context)
    tr.pause(5.0)  # the model is answering here
    w2 = tr.say(tts, interrupt)
    tr.pause(7.0)
    write_wav(d / "input.wav", tr.audio(), sr)
    write_json_atomic(d / "transcription.json", _transcription(w1 + w2))
    write_json_atomic(
        d / "interrupt.json",
        [{"context": context, "interrupt": interrupt, "timestamp": [w2[0][1], w2[-1][2]]}],
    )


def reference_distribution(gaps_s: list[tuple[float, float]], duration_s: float) -> list[float]:
    """Where a listener would backchannel: a triangular bump over each pause, in FDB's 0.2 s
    windows, normalised to sum 1."""
    n = int(duration_s / REFERENCE_WINDOW_S) + 1
    centres = (np.arange(n) + 0.5) * REFERENCE_WINDOW_S
    mass = np.zeros(n)
    for s, e in gaps_s:
        mid, half = (s + e) / 2, max((e - s) / 2 + REFERENCE_WINDOW_S, REFERENCE_WINDOW_S)
        mass += np.clip(1 - np.abs(centres - mid) / half, 0, None)
    mass += 1e-6  # every window possible, as a human reference is
    return [round(float(x), 8) for x in mass / mass.sum()]


def _backchannel(d: Path, tts: Any, sr: int, i: int) -> list[float]:
    tr = _Track(sr)
    tr.pause(LEAD_S)
    words: list[tuple[str, float, float]] = []
    gaps = []
    story = STORIES[i % len(STORIES)]
    for k, line in enumerate(story):
        words += tr.say(tts, line)
        if k < len(story) - 1:
            s = tr.t_s
            tr.pause(STORY_GAP_S)
            gaps.append((s, tr.t_s))
    tr.pause(1.0)
    write_wav(d / "input.wav", tr.audio(), sr)
    write_json_atomic(d / "transcription.json", _transcription(words))
    return reference_distribution(gaps, tr.t_s)


def _v15(d: Path, tts: Any, sr: int, i: int, subset: str) -> None:
    context, follow = INTERRUPTIONS[i % len(INTERRUPTIONS)]
    overlap = follow if subset == "user_interruption" else BACKCHANNELS[i % len(BACKCHANNELS)]
    noisy, clean = _Track(sr), _Track(sr)
    for tr in (noisy, clean):
        tr.pause(LEAD_S)
        tr.say(tts, context)
        tr.pause(4.0)  # the model is answering when the overlap comes
    w = noisy.say(tts, overlap)
    clean.pause(noisy.t_s - clean.t_s)
    for tr in (noisy, clean):
        tr.pause(7.0)
    write_wav(d / "input.wav", noisy.audio(), sr)
    write_wav(d / "clean_input.wav", clean.audio(), sr)
    write_json_atomic(
        d / "metadata.json",
        {"context_text": context, "current_turn_text": overlap, "timestamps": [w[0][1], w[-1][2]]},
    )


TASK_WRITERS = {
    "smooth_turn_taking": ("turn_taking.json", _smooth),
    "pause_handling": ("pause.json", _pause),
    "user_interruption": ("interrupt.json", _interrupt),
}
GENERATED_TASKS = (
    "smooth_turn_taking",
    "pause_handling",
    "user_interruption",
    "backchannel",
    "v15_user_interruption",
    "v15_user_backchannel",
)


def generate_set(data_dir: Path, tts: Any, n_per_task: int, tasks: list[str] | None) -> int:
    """Write the samples of `tasks` (None: all generated tasks) into `data_dir`; the number of
    sample folders written (existing complete ones are kept)."""
    data_dir = Path(data_dir)
    sr = int(getattr(tts, "sample_rate", 16000))
    made = 0
    for task in GENERATED_TASKS:
        if tasks is not None and task not in tasks:
            continue
        folder = data_dir / task
        if task == "backchannel":
            ref_path = folder / "reference_distribution.json"
            ref = json.loads(ref_path.read_text()) if ref_path.is_file() else {}
            for k in range(n_per_task):
                d = folder / str(k)
                if _done(d, ("input.wav", "transcription.json")) and str(k) in ref:
                    continue
                ref[str(k)] = _backchannel(d, tts, sr, k)
                made += 1
            write_json_atomic(ref_path, ref)
            continue
        for n in range(1, n_per_task + 1):
            d = folder / str(n)
            if task.startswith("v15_"):
                if _done(d, ("input.wav", "clean_input.wav", "metadata.json")):
                    continue
                _v15(d, tts, sr, n - 1, task[len("v15_") :])
            else:
                name, writer = TASK_WRITERS[task]
                if _done(d, ("input.wav", "transcription.json", name)):
                    continue
                writer(d, tts, sr, n - 1)
            made += 1
    return made
