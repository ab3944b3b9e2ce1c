"""Full-Duplex-Bench's per-sample folders, read and validated: which task a folder holds, what each
sample's annotation file says, and one `FdbSample` record per sample.

A data folder (`benchmark.data_dir`) is either one task folder (sample folders `<id>/` holding
`input.wav` and the task's annotation) or a folder of task folders (FDB's `v1_0/` or `v1_5/`
download), or a folder of those (both downloads side by side). The task of a folder is found
from its samples' files, as FDB's evaluators tell them apart
(github.com/DanielLin94144/Full-Duplex-Bench, commit d7336bd, `v1_v1.5/evaluation/` and
`v1_v1.5/dataset/README.md`):

| task | a sample's annotation | the point the task scores from |
| --- | --- | --- |
| `smooth_turn_taking` | `turn_taking.json` `[{text, timestamp}]` | `timestamp[0]`: the turn ends |
| `pause_handling` | `pause.json` `[{text, timestamp}]` | the pause (a reply counts against) |
| `user_interruption` | `interrupt.json` `[{context, interrupt, timestamp}]` | `timestamp[1]` |
| `backchannel` | none (`input.wav` only) | the whole recording |
| `v15_<subset>` | `metadata.json` `{context_text, current_turn_text, timestamps}` | the overlap |

(v1.5 samples also hold `clean_input.wav`, the same input without the overlap event.)

v1.5's four subsets (`user_interruption`, `user_backchannel`, `talking_to_other`,
`background_speech`) are told apart by their folder name, as FDB names them; `benchmark.task_of`
names the task of any other folder. Every time is checked when it is read: a number (not a
bool), finite, `start <= end`, inside the recording; a bad one is one line naming the file, the
sample and the field.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import soundfile as sf

from fdeval.errors import ConfigError, FileFieldError

V1_TASKS = ("smooth_turn_taking", "pause_handling", "backchannel", "user_interruption")
V15_SUBSETS = ("user_interruption", "user_backchannel", "talking_to_other", "background_speech")
V15_TASKS = tuple(f"v15_{s}" for s in V15_SUBSETS)
TASKS = V1_TASKS + V15_TASKS
ANNOTATION = {
    "smooth_turn_taking": "turn_taking.json",
    "pause_handling": "pause.json",
    "user_interruption": "interrupt.json",
    **{t: "metadata.json" for t in V15_TASKS},
}
# An annotated time may lie this far past the end of input.wav (one 32 ms VAD frame): FDB's
# annotations are rounded word times of the same audio.
END_SLACK_S = 0.032


@dataclass(frozen=True)
class FdbSample:
    """One sample folder: where it is, its task, and what its annotation says (times in seconds
    from the start of `input.wav`). v1.5: `clean_audio_path` is its `clean_input.wav`, recorded
    as a second session of the same case (steps.CleanSessions)."""

    case_id: str
    task: str
    subset: str  # the task folder's name
    sample: str  # the sample folder's name (FDB's key, e.g. for the backchannel reference)
    audio_path: str  # relative to the data folder
    duration_s: float
    reference_s: tuple[float, float] | None = None  # the annotated [start, end]
    context_text: str = ""
    turn_text: str = ""  # interrupt / current_turn text
    clean_audio_path: str | None = None  # v1.5: relative to the data folder

    @property
    def version(self) -> str:
        return "1.5" if self.task in V15_TASKS else "1"


def _number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def read_span(
    value: Any, path: Path, case_id: str, field: str, duration_s: float
) -> tuple[float, float]:
    """A `[start, end]` pair of seconds inside a recording of `duration_s`, or one line naming
    the file, case and field."""
    if not isinstance(value, (list, tuple)) or len(value) != 2:
        raise FileFieldError(str(path), case_id, field, f"expected [start, end], got {value!r}")
    for i, v in enumerate(value):
        if not _number(v):
            raise FileFieldError(
                str(path), case_id, f"{field}[{i}]", f"expected a finite number, got {v!r}"
            )
    start, end = float(value[0]), float(value[1])
    if start < 0:
        raise FileFieldError(str(path), case_id, f"{field}[0]", f"negative time {start:g} s")
    if end < start:
        raise FileFieldError(
            str(path), case_id, f"{field}[1]", f"ends at {end:g} s, before its start {start:g} s"
        )
    if end > duration_s + END_SLACK_S:
        raise FileFieldError(
            str(path),
            case_id,
            f"{field}[1]",
            f"{end:g} s is past the end of the recording ({duration_s:.3f} s)",
        )
    return start, end


def _json(path: Path, case_id: str) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise FileFieldError(str(path), case_id, "<file>", "missing") from None
    except (OSError, UnicodeDecodeError, ValueError) as e:
        raise FileFieldError(str(path), case_id, "<file>", f"unreadable JSON ({e})") from None


def _text(d: Mapping[str, Any], key: str, path: Path, case_id: str, field: str) -> str:
    v = d.get(key)
    if not isinstance(v, str):
        raise FileFieldError(str(path), case_id, field, f"expected a string, got {v!r}")
    return v


def mono_rate(path: Path, case_id: str) -> tuple[int, int]:
    """(sample rate, frames) of a mono audio file; one-line errors for anything else."""
    try:
        info = sf.info(str(path))
    except Exception:
        raise FileFieldError(
            str(path), case_id, "<file>", "missing or not a readable audio file"
        ) from None
    if info.channels != 1:
        raise FileFieldError(
            str(path), case_id, "channels", f"{info.channels} channel(s); expected 1"
        )
    return int(info.samplerate), int(info.frames)


def audio_seconds(path: Path, case_id: str) -> float:
    """The length of a mono WAV (a stereo or unreadable one is one line)."""
    rate, frames = mono_rate(path, case_id)
    return frames / rate


def task_of_folder(folder: Path, given: Mapping[str, str]) -> str | None:
    """The task of a folder of samples, from `given` (folder name -> task), else its files; None
    when it holds no sample folder (no `*/input.wav`)."""
    if folder.name in given:
        return given[folder.name]
    samples = sorted(p for p in folder.iterdir() if (p / "input.wav").is_file())
    if not samples:
        return None
    files = {f.name for f in samples[0].iterdir()}
    if "metadata.json" in files or "clean_input.wav" in files:
        subset = next((s for s in V15_SUBSETS if s in folder.name), None)
        if subset is None:
            raise ConfigError(
                f"{folder}: a v1.5 folder (metadata.json) whose name names none of FDB's subsets "
                f"{list(V15_SUBSETS)}; name its task with benchmark.task_of={{{folder.name}: "
                f"<one of {list(V15_TASKS)}>}}"
            )
        return f"v15_{subset}"
    for task in ("user_interruption", "smooth_turn_taking", "pause_handling"):
        if ANNOTATION[task] in files:
            return task
    return "backchannel"


def task_folders(data_dir: Path, given: Mapping[str, str]) -> list[tuple[Path, str]]:
    """(folder, task) of every task folder of the data folder: itself when it holds samples, else
    its subfolders that do, and theirs (a folder holding FDB's `v1_0/` and `v1_5/` downloads)."""
    data_dir = Path(data_dir)
    if not data_dir.is_dir():
        raise ConfigError(f"benchmark.data_dir: {data_dir} is not a folder")
    for name, task in given.items():
        if task not in TASKS:
            raise ConfigError(
                f"benchmark.task_of: {name}: unknown task {task!r}; valid: {', '.join(TASKS)}"
            )

    def find(folder: Path, depth: int) -> list[tuple[Path, str]]:
        task = task_of_folder(folder, given)
        if task is not None:
            return [(folder, task)]
        if depth == 0:
            return []
        subs = sorted(p for p in folder.iterdir() if p.is_dir())
        return [found for sub in subs for found in find(sub, depth - 1)]

    out = find(data_dir, 2)
    if not out:
        raise ConfigError(
            f"benchmark.data_dir: {data_dir} holds no FDB sample folder (<id>/input.wav), "
            "itself or up to two levels down"
        )
    return out


def _sample_key(p: Path) -> tuple[int, int, str]:
    return (0, int(p.name), "") if p.name.isdigit() else (1, 0, p.name)


def read_samples(data_dir: Path, folder: Path, task: str) -> list[FdbSample]:
    """The validated samples of one task folder, in FDB's numeric order."""
    out: list[FdbSample] = []
    for d in sorted((p for p in folder.iterdir() if p.is_dir()), key=_sample_key):
        cid = f"{folder.name}-{d.name}"
        wav = d / "input.wav"
        if not wav.is_file():
            raise FileFieldError(str(wav), cid, "<file>", "missing: every sample plays input.wav")
        dur = audio_seconds(wav, cid)
        rel = str(wav.relative_to(data_dir))
        base = dict(task=task, subset=folder.name, sample=d.name, duration_s=dur)
        if task == "backchannel":
            out.append(FdbSample(cid, audio_path=rel, **base))
            continue
        path = d / ANNOTATION[task]
        raw = _json(path, cid)
        if task in V15_TASKS:
            if not isinstance(raw, dict):
                raise FileFieldError(str(path), cid, "<file>", "expected a JSON object")
            span = read_span(raw.get("timestamps"), path, cid, "timestamps", dur)
            ctx = _text(raw, "context_text", path, cid, "context_text")
            turn = _text(raw, "current_turn_text", path, cid, "current_turn_text")
            clean = d / "clean_input.wav"
            audio_seconds(clean, cid)  # mono and readable (its length may differ)
            out.append(
                FdbSample(
                    cid,
                    audio_path=rel,
                    reference_s=span,
                    context_text=ctx,
                    turn_text=turn,
                    clean_audio_path=str(clean.relative_to(data_dir)),
                    **base,
                )
            )
            continue
        if not isinstance(raw, list) or not raw or not isinstance(raw[0], dict):
            raise FileFieldError(str(path), cid, "[0]", "expected a list holding one object")
        first = raw[0]
        span = read_span(first.get("timestamp"), path, cid, "[0].timestamp", dur)
        if task == "user_interruption":
            ctx = _text(first, "context", path, cid, "[0].context")
            turn = _text(first, "interrupt", path, cid, "[0].interrupt")
            out.append(
                FdbSample(
                    cid, audio_path=rel, reference_s=span, context_text=ctx, turn_text=turn, **base
                )
            )
        else:
            out.append(FdbSample(cid, audio_path=rel, reference_s=span, **base))
    if not out:
        raise ConfigError(f"{folder}: no sample folders")
    return out


def read_data_dir(
    data_dir: Path, tasks: list[str] | None, given: Mapping[str, str]
) -> list[FdbSample]:
    """Every sample of the data folder whose task is in `tasks` (None: all), validated."""
    if tasks is not None:
        bad = [t for t in tasks if t not in TASKS]
        if bad:
            raise ConfigError(
                f"benchmark.tasks: unknown task {bad[0]!r}; valid: {', '.join(TASKS)}"
            )
    found = task_folders(data_dir, given)
    picked = [(f, t) for f, t in found if tasks is None or t in tasks]
    if not picked:
        have = sorted({t for _, t in found})
        raise ConfigError(
            f"benchmark.tasks: {data_dir} holds none of {tasks}; it holds {', '.join(have)}"
        )
    out = [s for f, t in picked for s in read_samples(Path(data_dir), f, t)]
    ids = [s.case_id for s in out]
    dup = next((i for i in ids if ids.count(i) > 1), None)
    if dup is not None:
        raise ConfigError(f"{data_dir}: two task folders give case id {dup!r}; rename one")
    return out


def transcription_words(folder: Path, case_id: str) -> list[tuple[str, float, float]]:
    """The user's words of a sample's optional `transcription.json` (FDB's example layout,
    `[{speaker, item: [{text, timestamp}]}]`, every speaker's words, sorted by start); [] when
    the file is absent."""
    path = folder / "transcription.json"
    if not path.is_file():
        return []
    raw = _json(path, case_id)
    if not isinstance(raw, list):
        raise FileFieldError(str(path), case_id, "<file>", "expected a list of speakers")
    dur = audio_seconds(folder / "input.wav", case_id)
    words = []
    for i, spk in enumerate(raw):
        items = spk.get("item") if isinstance(spk, dict) else None
        if not isinstance(items, list):
            raise FileFieldError(str(path), case_id, f"[{i}].item", "expected a list of words")
        for j, w in enumerate(items):
            where = f"[{i}].item[{j}]"
            if not isinstance(w, dict) or not isinstance(w.get("text"), str):
                raise FileFieldError(str(path), case_id, where, "expected {text, timestamp}")
            s, e = read_span(w.get("timestamp"), path, case_id, f"{where}.timestamp", dur)
            words.append((w["text"], s, e))
    return sorted(words, key=lambda w: w[1])
