#!/usr/bin/env python
"""Agreement of fdeval's FDB metrics (fdeval/benchmarks/fdb/metrics.py) with FDB's own evaluators.

Builds a small deterministic fixture set in Full-Duplex-Bench's per-sample folder layout, its
speech synthesized with fdeval's espeak-ng TTS, and (with ``--run-fdb``) runs FDB's unmodified
evaluators on it in a separate Python that has torch, torchaudio and silero-vad, then stores
what they printed in ``tests/benchmarks/fdb/data/fdb_reference.json``. The test
``tests/benchmarks/fdb/test_fdb_metrics.py`` rebuilds the fixtures with ``build_fixtures`` below
(the one definition of the set), checks their sha256 against the stored ones, and compares
fdeval's numbers with FDB's.

    python benchmarks/fdb_agreement.py --fixtures DIR                # write the fixtures only
    python benchmarks/fdb_agreement.py --run-fdb --fdb-python /tmp/fdb-venv/bin/python
        [--fixtures DIR] [--fdb-repo GIT_DIR] [--out JSON]

The FDB Python needs: torch, torchaudio (a pair whose ``torchaudio.load`` works without
torchcodec, e.g. 2.8), silero-vad, scipy, numpy, tqdm, python-dotenv, openai, soundfile.

Layout (task folders hold only sample folders, as FDB's evaluators list them):

- ``smooth_turn_taking/<n>/``: input.wav, output.wav, output.json, turn_taking.json
- ``pause_handling/<n>/``: input.wav, output.wav, output.json, pause.json
- ``user_interruption/<n>/``: input.wav, output.wav, output.json (only the words that start at
  or after the interruption's end, as FDB's ASR step crops), interrupt.json
- ``backchannel/<n>/`` (n = 0..6) and ``backchannel_missing_key/7/``: input.wav, output.wav,
  output.json; the reference distributions (made up here, keys "0".."6") are in
  ``backchannel_reference.json``
- ``v1_5/<n>/``: input.wav, output.wav (v1.5 timing)
- ``user_interruption_words.json``: every word of each interruption sample's model channel, the
  list fdeval's own ASR would give (fdeval crops it itself)
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.metadata
import json
import math
import platform
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import soundfile as sf

from fdeval.audio.tts import EspeakTTS, Synthesis

REPO_ROOT = Path(__file__).resolve().parent.parent
DEFAULT_OUT = REPO_ROOT / "tests" / "benchmarks" / "fdb" / "data" / "fdb_reference.json"
DEFAULT_FDB_REPO = Path("/work/.mirror/DanielLin94144+Full-Duplex-Bench/repo")
FDB_URL = "https://github.com/DanielLin94144/Full-Duplex-Bench"
FDB_COMMIT = "d7336bda1385872b83b48a8d45d9c0003836a60d"
FDB_EVALUATORS = (
    "v1_v1.5/evaluation/eval_smooth_turn_taking.py",
    "v1_v1.5/evaluation/eval_pause_handling.py",
    "v1_v1.5/evaluation/eval_user_interruption.py",
    "v1_v1.5/evaluation/eval_backchannel.py",
    "v1_v1.5/evaluation/get_timing.py",
)

SR = 16000
TTS_SETTINGS = {"voice": "en-us", "rate_wpm": 175, "sample_rate": SR}
WORD_DECIMALS = 3  # word and marker times are written in ms, like an ASR's
# What the stand-in judge answers for user interruption (no LLM is called).
JUDGE_RATING = 4
JUDGE_ANSWER = (
    "Analysis: fixed answer of a stand-in judge; no language model was asked.\n"
    f"I would rate the AI's response as {JUDGE_RATING}"
)

ANSWER = "sure let me explain how that works"  # about 2.0 s
LONG_ANSWER = (
    "well I think that is a really good question and I would love to talk about it"  # 3.8 s
)


@dataclass(frozen=True)
class Say:
    """Speech placed at `at_s` on a track; `keep_s` cuts the audio that long after its start,
    `null_last_end` writes the last word's end as null (an ASR that gave none)."""

    at_s: float
    text: str
    keep_s: float | None = None
    null_last_end: bool = False


# ------------------------------------------------------------------------------- the fixture set
# Model speech is given relative to the task's reference point (turn end, pause start,
# interruption end); comments name the branch each sample covers.

SMOOTH_USER = "could you tell me how the weather will be tomorrow"
SMOOTH = (
    (),  # no words: no turn
    (Say(0.3, "yeah"),),  # one short word: no turn
    (Say(0.4, "no no no no"),),  # under 1 s but four words: a turn
    (Say(0.7, ANSWER),),  # an answer 0.7 s after the turn end
    (Say(-0.3, ANSWER),),  # starts before the turn end: latency clipped to 0
    (Say(0.2, "okay"), Say(1.2, "sure")),  # two words spanning over 1 s: a turn
)

PAUSE_BEFORE = "I was thinking about going to the"
PAUSE_AFTER = "beach this weekend with my friends"
PAUSE_S = 2.5
PAUSE = (
    (),  # silent through the pause
    (Say(0.5, "mm-hmm"),),  # a backchannel: no turn
    (Say(0.4, ANSWER),),  # a full answer in the pause: a turn
    # two words, the last one's end null: spans 0.7 s by its start (no turn; by its end it
    # would span about 1.2 s)
    (Say(0.1, "okay"), Say(0.8, "sure", null_last_end=True)),
    (Say(0.3, ANSWER, null_last_end=True),),  # null end, over 1 s by the start: a turn
    (Say(0.5, "no no no no"),),  # four quick words: a turn
)

INTERRUPT_CONTEXT = "could you suggest some books about personal growth"
INTERRUPT_TEXT = "can we talk about fiction instead"
# (what the model says from 0.5 s after the context ends, its reply after the interruption)
INTERRUPT = (
    (ANSWER, ()),  # stops and never replies: no words after the interruption
    (ANSWER, (Say(0.5, ANSWER),)),  # replies 0.5 s after the interruption
    (ANSWER, (Say(0.3, "okay"),)),  # one short word: no turn
    (ANSWER, (Say(0.6, "no no no no"),)),  # four quick words: a turn
    (LONG_ANSWER, ()),  # talks through the interruption: only its tail is cropped in
    (LONG_ANSWER, (Say(1.2, ANSWER),)),  # talks through, then replies
)

BACKCHANNEL_USER = (Say(0.5, LONG_ANSWER), Say(6.0, LONG_ANSWER))
BACKCHANNEL_S = 12.0
BACKCHANNEL = (
    (Say(2.0, "yeah"), Say(5.5, "mm-hmm"), Say(9.0, "uh-huh")),  # three backchannels
    (),  # silent: no segments, JSD 1
    # a backchannel, then a segment over 3 s (a turn; the loop stops, "yeah" is never seen)
    (Say(1.5, "mm-hmm"), Say(4.0, LONG_ANSWER), Say(9.5, "yeah")),
    # a 2 s answer between two backchannels: FDB lists all three and the flag follows the last
    (Say(2.0, "yeah"), Say(5.0, ANSWER), Say(9.0, "right")),
    (Say(3.0, "no no no no"),),  # four quick words: a turn, still listed
    # null ends: "sure" (inside its segment) and "yeah" are not attributed to their segments
    (Say(2.0, "okay sure", null_last_end=True), Say(7.0, "yeah", null_last_end=True)),
    (Say(4.0, "yes I do"),),  # three words under 1 s: a turn
)
BACKCHANNEL_MISSING_KEY = {"7": (Say(3.0, "yeah"), Say(8.0, "mm-hmm"))}

V15_S = 10.0
# (user speech, model speech), absolute times
V15 = (
    # a plain answer 0.8 s after the question
    ((Say(0.5, SMOOTH_USER),), (Say(3.4, ANSWER),)),
    # two user phrases 1.2 s apart lead to the same model start: the later one is kept
    (
        (Say(0.5, "I have a question"), Say(2.6, "about my travel plans for next week")),
        (Say(5.5, ANSWER),),
    ),
    # the user cuts in and the model stops 0.8 s later, then answers
    ((Say(2.7, "hold on wait a second"),), (Say(0.5, LONG_ANSWER, keep_s=3.0), Say(4.8, ANSWER))),
    # a 0.4 s user pause and a 0.3 s model pause are merged away
    (
        (Say(0.5, PAUSE_BEFORE), Say(2.6, PAUSE_AFTER)),
        (Say(5.0, "okay sure"), Say(6.0, "what time does the museum open")),
    ),
    # the model never speaks
    ((Say(0.5, "what time does the museum open"),), ()),
    # a user "yeah" inside the model's turn, then a question and a short answer
    ((Say(2.0, "yeah"), Say(5.0, SMOOTH_USER)), (Say(0.5, LONG_ANSWER), Say(7.9, "yes I do"))),
    # the model says "okay" inside a 0.55 s user pause: the pause is merged away, so it is an
    # overlap, not a response
    (
        (Say(0.5, PAUSE_BEFORE), Say(2.75, PAUSE_AFTER)),
        (Say(2.3, "okay"), Say(5.4, ANSWER)),
    ),
)


def reference_distribution(key: int) -> list[float]:
    """A made-up, smooth reference histogram for sample `key` (closed form, so it never drifts).

    A floor plus two cosine bumps whose places and widths depend on the key; its length differs
    per key so the resizing to the prediction's length is exercised both ways.
    """
    n = 40 + 23 * key
    values = []
    for i in range(n):
        x = i / (n - 1)
        bump1 = max(0.0, math.cos((x - 0.15 - 0.1 * (key % 4)) * math.pi / 0.3)) ** 2
        bump2 = max(0.0, math.cos((x - 0.55 - 0.05 * (key % 5)) * math.pi / 0.4)) ** 2
        values.append(0.02 + bump1 + 0.6 * bump2)
    total = sum(values)
    return [round(v / total, 9) for v in values]


# ------------------------------------------------------------------------------- building


class _Builder:
    """Writes fixture files; each text is synthesized once."""

    def __init__(self):
        self.tts = EspeakTTS(**TTS_SETTINGS)
        self._speech: dict[str, Synthesis] = {}

    def speech(self, text: str) -> Synthesis:
        if text not in self._speech:
            self._speech[text] = self.tts.synthesize(text)
        return self._speech[text]

    def end_s(self, say: Say) -> float:
        """Where the last word of `say` ends on the track (ms)."""
        start = round(say.at_s * SR) / SR
        return round(start + self.speech(say.text).words[-1].end_s, WORD_DECIMALS)

    def track(self, says: tuple[Say, ...], duration_s: float) -> tuple[np.ndarray, list[dict]]:
        """Samples of `says` mixed on a silent track, and their words as FDB chunks."""
        audio = np.zeros(int(round(duration_s * SR)), dtype=np.float32)
        chunks = []
        for say in says:
            speech = self.speech(say.text)
            first = int(round(say.at_s * SR))
            samples = speech.samples
            if say.keep_s is not None:
                samples = samples[: int(round(say.keep_s * SR))]
            audio[first : first + len(samples)] += samples[: len(audio) - first]
            words = [w for w in speech.words if say.keep_s is None or w.start_s < say.keep_s]
            for k, w in enumerate(words):
                end = min(w.end_s, say.keep_s) if say.keep_s is not None else w.end_s
                null = say.null_last_end and k == len(words) - 1
                chunks.append(
                    {
                        "text": w.text,
                        "timestamp": [
                            round(first / SR + w.start_s, WORD_DECIMALS),
                            None if null else round(first / SR + end, WORD_DECIMALS),
                        ],
                    }
                )
        return np.clip(audio, -1.0, 1.0), chunks

    def wav(self, path: Path, audio: np.ndarray) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        sf.write(path, audio, SR, subtype="PCM_16")

    def json(self, path: Path, data) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")

    def output(self, folder: Path, says: tuple[Say, ...], duration_s: float, keep_from_s=None):
        """output.wav and output.json (words from `keep_from_s` on, when given); all chunks."""
        audio, chunks = self.track(says, duration_s)
        self.wav(folder / "output.wav", audio)
        kept = [c for c in chunks if keep_from_s is None or c["timestamp"][0] >= keep_from_s]
        self.json(
            folder / "output.json", {"text": " ".join(c["text"] for c in kept), "chunks": kept}
        )
        return chunks


def _shift(says: tuple[Say, ...], by_s: float) -> tuple[Say, ...]:
    return tuple(
        Say(round(s.at_s + by_s, WORD_DECIMALS), s.text, s.keep_s, s.null_last_end) for s in says
    )


def build_fixtures(root: Path) -> dict[str, str]:
    """Write the fixture set under `root`; return {relative path: sha256} of every file."""
    root = Path(root)
    b = _Builder()

    user = (Say(0.5, SMOOTH_USER),)
    turn_end = b.end_s(user[0])
    for n, model in enumerate(SMOOTH):
        folder = root / "smooth_turn_taking" / str(n)
        b.wav(folder / "input.wav", b.track(user, 8.0)[0])
        b.output(folder, _shift(model, turn_end), 8.0)
        marker = [{"text": "[TURN-TAKING]", "timestamp": [turn_end, round(turn_end + 0.4, 3)]}]
        b.json(folder / "turn_taking.json", marker)

    pause_start = b.end_s(Say(0.5, PAUSE_BEFORE))
    user = (Say(0.5, PAUSE_BEFORE), Say(round(pause_start + PAUSE_S, 3), PAUSE_AFTER))
    for n, model in enumerate(PAUSE):
        folder = root / "pause_handling" / str(n)
        b.wav(folder / "input.wav", b.track(user, 10.0)[0])
        b.output(folder, _shift(model, pause_start), 10.0)
        marker = [{"text": "[PAUSE]", "timestamp": [pause_start, user[1].at_s]}]
        b.json(folder / "pause.json", marker)

    context = Say(0.3, INTERRUPT_CONTEXT)
    context_end = b.end_s(context)
    interrupt = Say(round(context_end + 1.5, 3), INTERRUPT_TEXT)
    interrupt_end = b.end_s(interrupt)
    all_words = {}
    for n, (before, reply) in enumerate(INTERRUPT):
        folder = root / "user_interruption" / str(n)
        b.wav(folder / "input.wav", b.track((context, interrupt), 12.0)[0])
        model = (Say(round(context_end + 0.5, 3), before), *_shift(reply, interrupt_end))
        all_words[str(n)] = b.output(folder, model, 12.0, keep_from_s=interrupt_end)
        meta = {
            "context": INTERRUPT_CONTEXT,
            "interrupt": INTERRUPT_TEXT,
            "timestamp": [interrupt.at_s, interrupt_end],
        }
        b.json(folder / "interrupt.json", [meta])
    b.json(root / "user_interruption_words.json", all_words)

    user_audio = b.track(BACKCHANNEL_USER, BACKCHANNEL_S)[0]
    samples = {("backchannel", str(n)): m for n, m in enumerate(BACKCHANNEL)}
    samples.update({("backchannel_missing_key", k): m for k, m in BACKCHANNEL_MISSING_KEY.items()})
    for (task, name), model in samples.items():
        folder = root / task / name
        b.wav(folder / "input.wav", user_audio)
        b.output(folder, model, BACKCHANNEL_S)
    refs = {str(k): reference_distribution(k) for k in range(len(BACKCHANNEL))}
    b.json(root / "backchannel_reference.json", refs)

    for n, (user, model) in enumerate(V15):
        folder = root / "v1_5" / str(n)
        b.wav(folder / "input.wav", b.track(user, V15_S)[0])
        b.wav(folder / "output.wav", b.track(model, V15_S)[0])

    return fixture_hashes(root)


def fixture_hashes(root: Path) -> dict[str, str]:
    """{path relative to `root`: sha256} of every file under `root`, sorted."""
    return {
        p.relative_to(root).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(Path(root).rglob("*"))
        if p.is_file()
    }


# ------------------------------------------------------------------------------- running FDB

# How the harnesses run one of FDB's evaluators and read the numbers it prints (FDB's Python;
# benchmarks/fdb_run_agreement.py uses them too).
CAPTURE = r"""
def capture(fn, *args):
    out = io.StringIO()
    error = None
    with contextlib.redirect_stdout(out):
        try:
            fn(*args)
        except Exception as e:
            error = f"{type(e).__name__}: {e}"
    return out.getvalue(), error


def printed(text, label):
    for line in reversed(text.splitlines()):
        if line.startswith(label):
            return float(line[len(label):].split()[0])
    return None
"""

# Run by the FDB Python (it has torch; fdeval's does not): argv = evaluator folder, fixtures,
# scratch folder, output JSON. Works on a copy, since two evaluators write into sample folders.
_HARNESS = (
    r"""
import ast, contextlib, importlib.metadata, io, json, os, platform, shutil, sys
from pathlib import Path
from types import SimpleNamespace

EVAL_DIR, FIXTURES, SCRATCH, OUT = (Path(a) for a in sys.argv[1:5])
ANSWER = sys.argv[5]
sys.path.insert(0, str(EVAL_DIR))
WORK = SCRATCH / "fixtures"
shutil.copytree(FIXTURES, WORK)

import torch
import silero_vad

NOTES = []


def hub_load(*args, **kwargs):
    # get_timing.py loads Silero from torch.hub (GitHub) at import; there is no network here.
    NOTES.append(
        f"get_timing.py: torch.hub.load{args} answered with silero_vad.load_silero_vad() "
        "(the TorchScript model packaged in the silero-vad wheel; no network)"
    )
    return silero_vad.load_silero_vad(), None


torch.hub.load = hub_load
import eval_backchannel, eval_pause_handling, eval_smooth_turn_taking
import eval_user_interruption, get_timing

"""
    + CAPTURE
    + r'''


def alone(task, name):
    """A folder holding only sample `name` of `task` (FDB prints some numbers only as means)."""
    folder = SCRATCH / "alone" / task / name
    shutil.copytree(WORK / task / name, folder / name)
    return folder


def samples(task):
    return sorted((p.name for p in (WORK / task).iterdir()), key=int)


class Judge:
    def __init__(self):
        self.calls = []
        self.chat = SimpleNamespace(completions=SimpleNamespace(create=self.create))

    def create(self, **request):
        self.calls.append(request)
        message = SimpleNamespace(content=ANSWER)
        return SimpleNamespace(choices=[SimpleNamespace(message=message)])


class NumpySpy:
    """eval_backchannel's numpy, recording the lists it averages (FDB prints means to 4 places)."""

    def __init__(self, real):
        self.real, self.means = real, []

    def __getattr__(self, name):
        return getattr(self.real, name)

    def mean(self, values, *args, **kwargs):
        self.means.append([float(v) for v in values])
        return self.real.mean(values, *args, **kwargs)


results = {}

task = "smooth_turn_taking"
text, error = capture(eval_smooth_turn_taking.eval_smooth_turn_taking, str(WORK / task))
per, name = {}, None
for line in text.splitlines():
    if line.endswith("output.json"):
        name = Path(line).parent.name
        per[name] = {}
    elif line.startswith("the TOR is "):
        per[name]["take_turn"] = int(line.split()[-1])
    elif line.startswith("the latency is "):
        value = line.split()[-1]
        per[name]["latency_unclipped"] = None if value == "None" else float(value)
results[task] = {
    "average_take_turn": printed(text, "Average take turn:"),
    "average_latency": printed(text, "Average latency:"),
    "error": error,
    "samples": dict(sorted(per.items(), key=lambda kv: int(kv[0]))),
}

task = "pause_handling"
text, error = capture(eval_pause_handling.eval_pause_handling, str(WORK / task))
per = {}
for name in samples(task):
    one, one_error = capture(eval_pause_handling.eval_pause_handling, str(alone(task, name)))
    per[name] = {"take_turn": printed(one, "Average take turn:"), "error": one_error}
results[task] = {"average_take_turn": printed(text, "Average take turn:"), "error": error,
                 "samples": per}

task = "user_interruption"
judge = Judge()
text, error = capture(eval_user_interruption.eval_user_interruption, str(WORK / task), judge)
per = {}
for name in samples(task):
    one_judge = Judge()
    one, one_error = capture(
        eval_user_interruption.eval_user_interruption, str(alone(task, name)), one_judge
    )
    per[name] = {
        "judge_calls": len(one_judge.calls),
        "average_latency": printed(one, "Average latency:"),
        "error": one_error,
    }
results[task] = {
    "average_rating": printed(text, "Average rating:"),
    "average_take_turn": printed(text, "Average take turn:"),
    "average_latency": printed(text, "Average latency:"),
    "judge_calls": len(judge.calls),
    "error": error,
    "samples": per,
}

shutil.copy(WORK / "backchannel_reference.json", SCRATCH / "icc_gt_distribution.json")
os.chdir(SCRATCH)  # eval_backchannel reads ./icc_gt_distribution.json
for task in ("backchannel", "backchannel_missing_key"):
    spy = NumpySpy(eval_backchannel.np)
    eval_backchannel.np = spy
    order = [d for d in os.listdir(WORK / task) if d.isdigit()]  # the evaluator's own order
    text, error = capture(eval_backchannel.eval_backchannel, str(WORK / task))
    eval_backchannel.np = spy.real
    lists = spy.means[:3] if len(spy.means) >= 3 else [[], [], []]
    predictions = [
        ast.literal_eval(line.split(" is ", 1)[1])
        for line in text.splitlines()
        if line.startswith("backchannel prediction is ")
    ]
    per = {}
    for k, name in enumerate(order):
        per[name] = {
            "backchannels": predictions[k] if k < len(predictions) else None,
            "jsd": lists[0][k] if k < len(lists[0]) else None,
            "take_turn": lists[1][k] if k < len(lists[1]) else None,
            "frequency": lists[2][k] if k < len(lists[2]) else None,
        }
    results[task] = {
        "printed": {
            key: printed(text, label)
            for key, label in (("jsd_mean", "JSD - Mean:"), ("take_turn_mean", "TOR - Mean:"),
                               ("frequency_mean", "Frequency - Mean:"))
        }
        if error is None
        else None,
        "error": error,
        "samples": dict(sorted(per.items(), key=lambda kv: int(kv[0]))),
    }
task = "v1_5"
saved_argv = sys.argv
sys.argv = ["get_timing.py", "--root_dir", str(WORK / task)]
text, error = capture(get_timing.main)
sys.argv = saved_argv
per = {}
for name in samples(task):
    path = WORK / task / name / "latency_intervals.json"
    per[name] = json.loads(path.read_text()) if path.exists() else None
results[task] = {"error": error, "samples": per}


def version(dist):
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return None


packages = ("torch", "torchaudio", "silero-vad", "numpy", "scipy", "soundfile", "tqdm", "openai")
json.dump(
    {
        "python": platform.python_version(),
        "packages": {p: version(p) for p in packages},
        "get_timing_vad_branch": "VoiceActivityDetector"
        if hasattr(silero_vad, "VoiceActivityDetector")
        else "torch.hub + get_speech_timestamps",
        "notes": NOTES,
        "results": results,
    },
    open(OUT, "w"),
    indent=2,
)
'''
)


def copy_evaluators(fdb_repo: Path, dest: Path) -> None:
    """FDB's evaluator files at the pinned commit, unmodified, into `dest`."""
    dest.mkdir(parents=True, exist_ok=True)
    for path in FDB_EVALUATORS:
        source = subprocess.run(
            ["git", "-C", str(fdb_repo), "show", f"{FDB_COMMIT}:{path}"],
            check=True,
            capture_output=True,
        ).stdout
        (dest / Path(path).name).write_bytes(source)


def run_fdb(fixtures: Path, fdb_python: Path, fdb_repo: Path) -> dict:
    """FDB's numbers on `fixtures`, from its evaluators run by `fdb_python`."""
    with tempfile.TemporaryDirectory(prefix="fdb-agreement-") as tmp:
        tmp = Path(tmp)
        copy_evaluators(fdb_repo, tmp / "evaluation")
        (tmp / "harness.py").write_text(_HARNESS, encoding="utf-8")
        out = tmp / "fdb.json"
        proc = subprocess.run(
            [
                str(fdb_python),
                str(tmp / "harness.py"),
                str(tmp / "evaluation"),
                str(fixtures),
                str(tmp / "scratch"),
                str(out),
                JUDGE_ANSWER,
            ],
            capture_output=True,
            text=True,
            check=False,
        )
        if proc.returncode != 0:
            raise SystemExit(f"FDB harness failed ({proc.returncode}):\n{proc.stderr[-4000:]}")
        return json.loads(out.read_text())


def reference_record(hashes: dict[str, str], fdb: dict) -> dict:
    """The stored JSON: where FDB's numbers come from and what they were computed on."""
    tts = EspeakTTS(**TTS_SETTINGS)
    return {
        "about": (
            "Numbers printed by Full-Duplex-Bench's own evaluators on the fixture set of "
            "benchmarks/fdb_agreement.py; checked against fdeval by "
            "tests/benchmarks/fdb/test_fdb_metrics.py."
        ),
        "fdb": {"repository": FDB_URL, "commit": FDB_COMMIT, "evaluators": list(FDB_EVALUATORS)},
        "fdb_environment": {
            "python": fdb["python"],
            "packages": fdb["packages"],
            "get_timing_vad_branch": fdb["get_timing_vad_branch"],
        },
        "notes": [
            "The evaluators ran unmodified, on a scratch copy of the fixtures (user interruption "
            "writes rating.json and get_timing latency_intervals.json into sample folders).",
            "User interruption: the OpenAI client was a stand-in whose every answer is "
            f"judge_answer (rating {JUDGE_RATING}); no language model was called.",
            *fdb["notes"][:1],
            "Backchannel: the reference distribution is the made-up backchannel_reference.json, "
            "copied to ./icc_gt_distribution.json in the evaluator's working folder. The lists "
            "it averages (per-sample JSD, take-turn, frequency) were recorded by wrapping the "
            "numpy module it calls (np.mean), as it prints the means only to 4 places.",
            "Pause handling and user interruption print only means: their per-sample values "
            "come from runs on a folder holding that one sample (a user-interruption sample "
            "without a turn then fails with ZeroDivisionError on an empty list; it is the "
            "judge_calls == 0 that marks it).",
            "Smooth turn-taking's per-sample latency_unclipped is the value it prints, before "
            "it floors negatives at 0 for its mean.",
        ],
        "judge_answer": JUDGE_ANSWER,
        "judge_rating": JUDGE_RATING,
        "fixtures": {
            "builder": "benchmarks/fdb_agreement.py:build_fixtures",
            "tts": tts.identity(),
            "builder_environment": {
                "python": platform.python_version(),
                "numpy": importlib.metadata.version("numpy"),
                "soundfile": importlib.metadata.version("soundfile"),
                "libsndfile": sf.__libsndfile_version__,
            },
            "sha256": hashes,
        },
        "results": fdb["results"],
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--fixtures", type=Path, help="folder to write the fixtures into")
    ap.add_argument("--run-fdb", action="store_true", help="run FDB's evaluators, write --out")
    ap.add_argument("--fdb-python", type=Path, help="the Python that runs FDB's evaluators")
    ap.add_argument("--fdb-repo", type=Path, default=DEFAULT_FDB_REPO, help="FDB git directory")
    ap.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = ap.parse_args(argv)
    if not args.run_fdb and args.fixtures is None:
        ap.error("give --fixtures DIR, --run-fdb, or both")
    if args.run_fdb and args.fdb_python is None:
        ap.error("--run-fdb needs --fdb-python")

    with tempfile.TemporaryDirectory(prefix="fdb-fixtures-") as tmp:
        fixtures = args.fixtures or Path(tmp)
        if fixtures.exists() and any(fixtures.iterdir()):
            # Only a folder this script wrote before is replaced.
            if not (fixtures / "backchannel_reference.json").is_file():
                raise SystemExit(f"{fixtures} is not empty and holds no earlier fixture set")
            shutil.rmtree(fixtures)
        hashes = build_fixtures(fixtures)
        print(f"{len(hashes)} fixture files in {fixtures}")
        if not args.run_fdb:
            return 0
        fdb = run_fdb(fixtures, args.fdb_python, args.fdb_repo)
        args.out.parent.mkdir(parents=True, exist_ok=True)
        record = reference_record(hashes, fdb)
        args.out.write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
        print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
