"""Full-Duplex-Bench (FDB) per-sample layout: export fdeval sessions to it, import them back.

`python -m fdeval.interop.fdb export RUN_DIR --out DIR --task TASK [--version 1|1.5] [--turn K]
[--window full|turn] [--no-output-json]`
`python -m fdeval.interop.fdb import DIR [--stages S] [OVERRIDES]` (overrides and options in any
order)

What FDB's code reads, and so what this module writes, was taken from Full-Duplex-Bench
(github.com/DanielLin94144/Full-Duplex-Bench, commit d7336bda1385872b83b48a8d45d9c0003836a60d),
`v1_v1.5/`: the v1 evaluators in `evaluation/` (`eval_smooth_turn_taking`,
`eval_user_interruption`, `eval_pause_handling`, `eval_backchannel` for the folder names), the
v1.5 ones (`eval_behavior`, `eval_general_before_after`, `get_timing`), the dataset README (the
v1.5 `metadata.json`) and `get_transcript/asr.py` (how `output.json` is made: one chunk per word,
times on the `output.wav` clock, and for user_interruption only the words after
`interrupt.json`'s `timestamp[1]`, where it crops the audio before transcribing). The root holds
only sample folders named `1`, `2`, ... (the evaluators list every entry of it, skipping only
`*.md` and `.DS_Store`); fdeval's own record of a sample is `fdeval.json` inside it.

A v1 sample: `input.wav` / `output.wav` (the user and model channels, mono 16-bit at the run's
rate, on the session clock), the task JSON, `transcription.json` (the user's words),
`output.json` (the model's words as FDB's ASR lays them out, cropped like it for
user_interruption) and, where output.json is cropped, `output_full.json` (all the model's words,
same layout: what the import reads back). A v1.5 sample: the two channels, `metadata.json`,
`input.json` and `output.json` (the user's and the model's words, whole); FDB's `clean_*` pair
(the same dialogue without the overlap event) needs a session fdeval never recorded and is not
written (docs/interop.md).

The import takes an export (each sample's fdeval.json names its case and the run's launch
overrides; the run's benchmark, the samples' cases) or a root of FDB's own samples (no
fdeval.json: a `benchmark=fdb benchmark.data_dir=ROOT` run, whose cases are the samples). Per
sample it reads the two WAVs (resampled to the run's rate, their own rates recorded) and the
model's words (output_full.json, else output.json; an output.json that FDB's asr.py cropped
leaves the earlier words unknown, so asr=exact refuses it, except into benchmark=fdb, which
reads only the words after the crop), checks every sample before writing any session, and
writes one imported session per sample (fdeval/interop/recording.py).
"""

from __future__ import annotations

import argparse
import math
import re
import sys
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from fdeval.audio.io import read_wav, write_wav
from fdeval.audio.resample import resample
from fdeval.audio.vad import SileroVAD
from fdeval.errors import FdevalError, FileFieldError
from fdeval.files import write_json_atomic
from fdeval.benchmarks.fdb.layout import mono_rate
from fdeval.benchmarks.fdb.steps import CleanSessions, clean_case
from fdeval.interop.recording import FRAME_S, Words, import_arrays, run_rate
from fdeval.interop.runs import cli, open_import_run, read_json, then
from fdeval.recording import read_info
from fdeval.report.runview import open_run

# v1: task -> the task JSON FDB's evaluator reads.
TASKS = {
    "smooth_turn_taking": "turn_taking.json",
    "user_interruption": "interrupt.json",
    "pause_handling": "pause.json",
}
# v1.5 tasks fdeval has an overlap event for (FDB's talking_to_other and background_speech have
# no counterpart in fdeval's benchmarks).
TASKS_V15 = ("user_interruption", "user_backchannel")
# The barge-in subtype of the task's turn (the interruption, v1.5's overlap event) when --turn
# does not name the turn.
SUBTYPE = {"user_interruption": "interrupt", "user_backchannel": "backchannel"}
VERSIONS = ("1", "1.5")
WINDOWS = ("full", "turn")
FDEVAL_JSON = "fdeval.json"
FULL_WORDS = "output_full.json"  # not "*output.json": FDB's v1 evaluators read every such file
V15_MISSING = ("clean_input.wav", "clean_input.json", "clean_output.wav", "clean_output.json")
# A cropped output.json's first word may start this much before the crop (FDB's asr.py adds the
# crop to times measured from it, so its words never do; one frame of rounding is allowed).
CROP_TOLERANCE_S = FRAME_S
# A launch override as Hydra takes it: key=value (key with +/++/~ prefixes, dots, slashes, @),
# or ~key.
OVERRIDE = re.compile(r"(?:[+~]{0,2}[A-Za-z_][\w.\-/@]*=.*|~[A-Za-z_][\w.\-/@]*)", re.S)


def _chunks(transcript: dict[str, Any], speaker: str, t0: float, t1: float) -> list[dict[str, Any]]:
    """The speaker's words starting in [t0, t1), in FDB's chunk layout (ends cut at t1)."""
    return [
        {"text": w["text"], "timestamp": [float(w["start_s"]), min(float(w["end_s"]), t1)]}
        for w in transcript["words"]
        if w["speaker"] == speaker and t0 <= float(w["start_s"]) < t1
    ]


def _words_json(chunks: list[dict[str, Any]]) -> dict[str, Any]:
    return {"text": " ".join(c["text"] for c in chunks), "chunks": chunks}


def _pick_turn(task: str, turns: list[dict[str, Any]], turn: int | None) -> dict[str, Any] | None:
    """The user turn the task points at: `turn`, else the first barge-in of the task's subtype
    (user_interruption: "interrupt", user_backchannel: "backchannel"), else the first turn;
    None when the session has no such turn."""
    if turn is not None:
        return next((t for t in turns if int(t["index"]) == turn), None)
    if task in SUBTYPE:
        return next(
            (
                t
                for t in turns
                if t["turn_type"] == "barge-in" and t.get("subtype") == SUBTYPE[task]
            ),
            None,
        )
    return turns[0] if turns else None


def _said(transcript: dict[str, Any], t: dict[str, Any]) -> tuple[str, str]:
    """(the user's words before turn `t`, the words of `t`)."""
    user = [w for w in transcript["words"] if w["speaker"] == "user" and w.get("turn") is not None]
    before = [w["text"] for w in user if int(w["turn"]) < int(t["index"])]
    said = [w["text"] for w in user if int(w["turn"]) == int(t["index"])]
    return " ".join(before), " ".join(said)


def task_json(
    task: str, transcript: dict[str, Any], t: dict[str, Any], nxt: float
) -> list[dict[str, Any]]:
    start, end = float(t["start_s"]), float(t["end_s"])
    if task == "user_interruption":
        before, said = _said(transcript, t)
        return [{"context": before, "interrupt": said, "timestamp": [start, end]}]
    label = "[TURN-TAKING]" if task == "smooth_turn_taking" else "[PAUSE]"
    return [{"text": label, "timestamp": [end, nxt]}]  # the user's silence after the turn


def export(
    run_dir: Path,
    out: Path,
    task: str,
    turn: int | None = None,
    window: str = "full",
    output_json: bool = True,
    version: str = "1",
) -> tuple[int, list[str]]:
    """Write one FDB sample per usable session with a transcript and the task's turn; the
    number written and the cases skipped for having no such turn."""
    if version not in VERSIONS:
        raise FdevalError(f"--version: unknown version {version!r}; valid: {', '.join(VERSIONS)}")
    tasks = TASKS if version == "1" else TASKS_V15
    if task not in tasks:
        raise FdevalError(
            f"--task: {task!r} is no FDB v{version} task fdeval exports; valid: {', '.join(tasks)}"
        )
    if window not in WINDOWS:
        raise FdevalError(f"--window: unknown window {window!r}; valid: {', '.join(WINDOWS)}")
    view = open_run(run_dir)
    out = Path(out)
    if out.exists() and any(out.iterdir()):
        raise FdevalError(
            f"{out}: --out: not empty (the evaluators read every entry there); give a new folder"
        )
    overrides = _overrides(view.run_dir)
    n, skipped = 0, []
    for s in view.sessions:
        if s.state != "usable" or s.transcript is None or s.wav is None:
            continue
        tr = read_json(s.transcript)
        turns = sorted(tr["user_turns"], key=lambda t: float(t["start_s"]))
        t = _pick_turn(task, turns, turn)
        if t is None:
            skipped.append(s.case.case_id)
            continue
        later = [float(u["start_s"]) for u in turns if float(u["start_s"]) > float(t["end_s"])]
        duration = float(tr["duration_s"])
        nxt = later[0] if later else duration
        t1 = nxt if window == "turn" else duration
        x, sr = read_wav(s.wav)
        k = int(round(t1 * sr))
        t1 = k / sr
        n += 1
        d = out / str(n)
        write_wav(d / "input.wav", x[:k, 0], sr)
        write_wav(d / "output.wav", x[:k, 1], sr)
        meta: dict[str, Any] = {
            "case_id": s.case.case_id,
            "benchmark": view.benchmark,
            "model": view.model,
            "model_id": view.model_id,
            "run_dir": str(view.run_dir),
            "run_id": view.run_id,
            "session_id": _session_id(s.log),
            "version": version,
            "task": task,
            "turn": int(t["index"]),
            "window": window,
            "window_s": [0.0, t1],
            "sample_rate": sr,
            "launch_overrides": overrides,
            "output_json": "fdeval transcript" if output_json else "none",
        }
        model_all = _chunks(tr, "model", 0.0, t1)
        if version == "1":
            write_json_atomic(d / TASKS[task], task_json(task, tr, t, nxt))
            write_json_atomic(
                d / "transcription.json",
                [{"speaker": 0, "item": _chunks(tr, "user", 0.0, t1)}],
            )
            if output_json and task == "user_interruption":
                # FDB's asr.py transcribes only what follows the interruption's end
                cropped = _chunks(tr, "model", float(t["end_s"]), t1)
                write_json_atomic(d / "output.json", _words_json(cropped))
                write_json_atomic(d / FULL_WORDS, _words_json(model_all))
            elif output_json:
                write_json_atomic(d / "output.json", _words_json(model_all))
        else:
            before, said = _said(tr, t)
            write_json_atomic(
                d / "metadata.json",
                {
                    "context_text": before,
                    "current_turn_text": said,
                    "timestamps": [float(t["start_s"]), float(t["end_s"])],
                },
            )
            if output_json:
                write_json_atomic(d / "input.json", _words_json(_chunks(tr, "user", 0.0, t1)))
                write_json_atomic(d / "output.json", _words_json(model_all))
            meta["missing"] = list(V15_MISSING)
        write_json_atomic(d / FDEVAL_JSON, meta)
    if n == 0:
        raise FdevalError(
            f"{run_dir}: no usable session with a transcript and the task's turn to export "
            f"({len(skipped)} without it); run stage=transcribe first, or pass another --turn"
        )
    return n, skipped


def _overrides(run_dir: Path) -> list[str]:
    """The launch overrides of the run (.hydra/overrides.yaml), without the folder-only ones."""
    p = run_dir / ".hydra" / "overrides.yaml"
    if not p.is_file():
        return []
    got = yaml.safe_load(p.read_text(encoding="utf-8")) or []
    drop = ("stage=", "stage.", "run_tag=", "progress=", "resume=", "launcher")
    return [str(o) for o in got if not str(o).startswith(drop)]


def _session_id(h5: Path | None) -> str:
    return read_info(h5).session_id if h5 is not None else ""


def samples(root: Path) -> list[Path]:
    """The sample folders of an FDB root, in numeric order; one-line errors for other entries."""
    root = Path(root)
    if not root.is_dir():
        raise FdevalError(f"{root}: not a folder")
    out = []
    for p in sorted(
        root.iterdir(),
        key=lambda p: (not p.name.isdigit(), int(p.name) if p.name.isdigit() else 0, p.name),
    ):
        if p.name.endswith(".md") or p.name == ".DS_Store":
            continue
        if not p.is_dir():
            raise FdevalError(
                f"{p}: not a sample folder (FDB's evaluators list every entry of the root)"
            )
        if not p.name.isdigit():
            raise FdevalError(
                f"{p}: sample folder name is not a number (FDB's sample ids are; its "
                f"eval_backchannel skips other folders)"
            )
        out.append(p)
    if not out:
        raise FdevalError(f"{root}: no sample folders")
    return out


@dataclass(frozen=True)
class Sample:
    """One sample, checked: what the import reads from it (the audio itself is read later)."""

    dir: Path
    meta: dict[str, Any]  # fdeval.json ({} for FDB's own samples)
    case_id: str
    user_wav: Path
    model_wav: Path
    rates: dict[str, int]  # file name -> its sample rate
    words: Words | None
    words_file: Path | None


def _interrupt_end(path: Path, case_id: str) -> float:
    """`[0].timestamp[1]` of an interrupt.json (the interruption's end, where FDB crops)."""
    d = read_json(path)
    first = d[0] if isinstance(d, list) and d else None
    if not isinstance(first, dict):
        raise FileFieldError(
            str(path), case_id, "[0]", "expected [{context, interrupt, timestamp: [start, end]}]"
        )
    ts = first.get("timestamp")
    if not isinstance(ts, list) or len(ts) != 2:
        raise FileFieldError(str(path), case_id, "[0].timestamp", "missing or not [start_s, end_s]")
    vals = []
    for k, v in enumerate(ts):
        ok = isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) and v >= 0
        if not ok:
            raise FileFieldError(
                str(path), case_id, f"[0].timestamp[{k}]", "expected a finite number >= 0"
            )
        vals.append(float(v))
    if vals[1] < vals[0]:
        raise FileFieldError(
            str(path), case_id, "[0].timestamp[1]", f"{vals[1]:g} s, before its start {vals[0]:g} s"
        )
    return vals[1]


def _check_files(d: Path, cid: str, meta: dict[str, Any], prefix: str = "") -> Sample:
    """Check a sample's two WAVs, its model words and its interrupt.json. `prefix`: "clean_" for
    a v1.5 sample's clean pair (clean_input.wav, clean_output.wav, clean_output.json)."""
    user_wav, model_wav = d / f"{prefix}input.wav", d / f"{prefix}output.wav"
    rates = {}
    for p in (user_wav, model_wav):
        rates[p.name], frames = mono_rate(p, cid)
    duration = frames / rates[model_wav.name]  # the model's words are timed on its own file
    crop = None
    if not prefix and (d / "interrupt.json").is_file():
        crop = _interrupt_end(d / "interrupt.json", cid)
    names = [f"{prefix}output.json"] if prefix else [FULL_WORDS, "output.json"]
    words_file = next((d / f for f in names if (d / f).is_file()), None)
    words = Words.read(words_file, cid, duration) if words_file is not None else None
    if words is not None and crop is not None and words_file.name == "output.json":
        for i, (_, start, _) in enumerate(words.words):
            if start < crop - CROP_TOLERANCE_S:
                raise FileFieldError(
                    str(words_file),
                    cid,
                    f"chunks[{i}].timestamp[0]",
                    f"{start:g} s, before interrupt.json's timestamp[1] ({crop:g} s), where "
                    f"FDB's asr.py crops output.json; whole words go in {FULL_WORDS}",
                )
        words = replace(words, from_s=crop)
    return Sample(d, meta, cid, user_wav, model_wav, rates, words, words_file)


def read_sample(d: Path) -> Sample:
    """Check one exported sample folder (fdeval.json, then the files `_check_files` reads)."""
    meta = read_json(d / FDEVAL_JSON) if (d / FDEVAL_JSON).is_file() else None
    if not isinstance(meta, dict) or not isinstance(meta.get("case_id"), str):
        raise FileFieldError(
            str(d / FDEVAL_JSON),
            None,
            "case_id",
            "missing: which fdeval case this sample is (a root of FDB's own samples has no "
            "fdeval.json in any of them)",
        )
    cid = meta["case_id"]
    lo = meta.get("launch_overrides", [])
    if not isinstance(lo, list) or not all(isinstance(o, str) for o in lo):
        raise FileFieldError(str(d / FDEVAL_JSON), cid, "launch_overrides", "expected strings")
    return _check_files(d, cid, meta)


def read_root(root: Path) -> list[Sample]:
    """Every sample of an exported root, checked before anything is written; one-line errors."""
    out = [read_sample(d) for d in samples(root)]
    first = out[0].meta.get("launch_overrides", [])
    for s in out[1:]:
        if s.meta.get("launch_overrides", []) != first:
            raise FileFieldError(
                str(s.dir / FDEVAL_JSON),
                s.case_id,
                "launch_overrides",
                f"not those of {out[0].dir / FDEVAL_JSON}: one import reads one run's samples",
            )
    return out


def is_fdb_native(root: Path) -> bool:
    """True for a root of FDB's own samples: no sample folder (one level down) holds an
    fdeval.json. Errors for a root that is no folder or holds nothing."""
    root = Path(root)
    if not root.is_dir():
        raise FdevalError(f"{root}: not a folder")
    entries = [p for p in root.iterdir() if not (p.name.endswith(".md") or p.name == ".DS_Store")]
    if not entries:
        raise FdevalError(f"{root}: no sample folders")
    return not any((p / FDEVAL_JSON).is_file() for p in entries if p.is_dir())


def _hydra_item(s: str) -> str:
    """A string as a Hydra override value or list element (quoted unless plainly a name)."""
    if re.fullmatch(r"[A-Za-z_/][\w./\-]*", s) and s not in ("null", "true", "false"):
        return s
    return "'" + s.replace("\\", "\\\\").replace("'", "\\'") + "'"


def import_overrides(found: list[Sample], given: list[str]) -> list[str]:
    """The exported run's launch overrides, then the given ones; run_tag=fdb-import unless given;
    and, unless given, benchmark.cases = the samples' case ids (the exported cases)."""
    base = [str(o) for o in found[0].meta.get("launch_overrides") or []]
    tag = [] if any(o.startswith("run_tag=") for o in given) else ["run_tag=fdb-import"]
    cases = []
    if not any(o.lstrip("+").startswith("benchmark.cases=") for o in given):
        base = [o for o in base if not o.lstrip("+").startswith("benchmark.cases=")]
        cases = [f"benchmark.cases=[{','.join(_hydra_item(s.case_id) for s in found)}]"]
    return [*base, *cases, *tag, *given]


def native_overrides(root: Path, given: list[str]) -> list[str]:
    """FDB's own samples: a `benchmark=fdb` run on the root (its cases are the samples), then the
    given overrides; run_tag=fdb-import unless given."""
    base = ["benchmark=fdb", f"benchmark.data_dir={_hydra_item(str(Path(root).resolve()))}"]
    tag = [] if any(o.startswith("run_tag=") for o in given) else ["run_tag=fdb-import"]
    return [*base, *tag, *given]


def _audio_at(path: Path, sr: int) -> np.ndarray:
    """A mono file's samples at `sr` (resampled as fdeval resamples a turn's audio)."""
    x, rate = read_wav(path)
    return x if rate == sr else resample(x, rate, sr)


def _native_samples(run: Any) -> tuple[list[Sample], list[Sample]]:
    """The sample files of each case of a `benchmark=fdb` run: beside the case's input.wav, its
    output.wav and output.json; and, for a v1.5 case, its clean pair (clean_input.wav,
    clean_output.wav, clean_output.json), which becomes the case's `clean` session."""
    out, clean = [], []
    for case in run.cases:
        d = (run.case_root / case.turns[0].audio_path).parent
        out.append(_check_files(d, case.case_id, {}))
        if case.data.clean_audio_path:
            clean.append(_check_files(d, case.case_id, {}, "clean_"))
    return out, clean


def import_root(root: Path, given: list[str] | None = None) -> tuple[Path, list[str]]:
    """Import every sample as an imported session: (the run folder, its launch overrides). A
    root fdeval exported goes back into its run's benchmark; FDB's own samples (no fdeval.json)
    into a `benchmark=fdb` run on the root."""
    root, given = Path(root), list(given or [])
    native = is_fdb_native(root)
    clean: list[Sample] = []
    if native:
        overrides = native_overrides(root, given)
        run = open_import_run(overrides, root)
        found, clean = _native_samples(run)
        by_id = {c.case_id: c for c in run.cases}
    else:
        found = read_root(root)
        overrides = import_overrides(found, given)
        run = open_import_run(overrides, root)
        by_id = {c.case_id: c for c in run.cases}
        seen: set[str] = set()
        for s in found:
            where = str(s.dir / FDEVAL_JSON)
            if s.case_id not in by_id:
                raise FileFieldError(
                    where, s.case_id, "case_id", "not a case of this run's case set"
                )
            if s.case_id in seen:
                raise FileFieldError(
                    where, s.case_id, "case_id", "a second sample of the same case"
                )
            seen.add(s.case_id)
        missing = sorted(set(by_id) - seen)
        if missing:
            raise FdevalError(
                f"{root}: no sample for case {missing[0]!r} ({len(missing)} missing); leave "
                f"benchmark.cases out (the samples' cases) or list only cases that have one"
            )
    if str(run.cfg.asr.name) == "exact":
        _check_exact([*found, *clean], run.benchmark.cropped_words_ok)
    sr = run_rate(run)
    vad = SileroVAD(sample_rate=sr)
    sessions = [(s, by_id[s.case_id], {}) for s in found]
    if clean:
        step = CleanSessions(run.benchmark)
        for s in clean:
            cc = clean_case(by_id[s.case_id])
            where = {"folder": step.folder, "step": step.name, "digest": step.digest(run, cc)}
            sessions.append((s, cc, where))
    for s, case, where in sessions:
        user, model = _audio_at(s.user_wav, sr), _audio_at(s.model_wav, sr)
        n = max(len(user), len(model))  # a model's output may stop early: the rest is its silence
        user, model = np.pad(user, (0, n - len(user))), np.pad(model, (0, n - len(model)))
        import_arrays(
            run,
            case,
            s.user_wav,
            user,
            model,
            s.words,
            vad,
            partial=s.meta.get("window") == "turn",
            source_rates=s.rates,
            **where,
        )
    return run.run_dir, overrides


def _check_exact(found: list[Sample], cropped_ok: bool) -> None:
    """With asr=exact the model's words are the files' words: each sample needs them, whole.
    A cropped output.json passes only into a benchmark that reads no earlier words
    (`Benchmark.cropped_words_ok`: benchmark=fdb, whose user_interruption numbers read the
    model's words from interrupt.json's timestamp[1] on, as FDB's do)."""
    for s in found:
        if s.words is None:
            raise FileFieldError(
                str(s.model_wav.with_suffix(".json")),
                s.case_id,
                "<file>",
                "missing: the model's words; with asr=exact they come from this file "
                "(or transcribe the model channel: asr=whisper or asr=qwen3)",
            )
        if s.words.from_s > 0 and not cropped_ok:
            raise FileFieldError(
                str(s.words_file),
                s.case_id,
                "chunks",
                f"cropped at interrupt.json's timestamp[1] ({s.words.from_s:g} s) as FDB's "
                f"asr.py writes it, so the model's earlier words are unknown: give "
                f"{FULL_WORDS} (all its words) or pass asr=whisper or asr=qwen3",
            )


def import_fdb(root: Path, overrides: list[str] | None = None) -> Path:
    """`import_root`'s run folder."""
    return import_root(root, overrides)[0]


class _Parser(argparse.ArgumentParser):
    """argparse whose errors are fdeval's one-line user errors (exit 2, no usage block)."""

    def error(self, message: str):  # type: ignore[override]
        raise FdevalError(f"{self.prog}: {message}")


def parse(argv: list[str] | None) -> argparse.Namespace:
    """The command line; launch overrides may come before, between or after the options."""
    p = _Parser(prog="python -m fdeval.interop.fdb", description="Full-Duplex-Bench layout")
    sub = p.add_subparsers(dest="cmd", required=True, metavar="{export,import}")
    e = sub.add_parser("export", help="fdeval sessions -> FDB sample folders")
    e.add_argument("run_dir", type=Path)
    e.add_argument("--out", type=Path, required=True)
    e.add_argument("--task", required=True, choices=sorted({*TASKS, *TASKS_V15}))
    e.add_argument("--version", default="1", choices=VERSIONS, help="FDB v1 (default) or v1.5")
    e.add_argument(
        "--turn",
        type=int,
        help="the user turn the task JSON points at (default: see docs/interop.md)",
    )
    e.add_argument(
        "--window", default="full", choices=WINDOWS, help="turn: cut at the next user turn's start"
    )
    e.add_argument(
        "--no-output-json",
        action="store_true",
        help="leave output.json (v1.5: and input.json) to FDB's get_transcript/asr.py",
    )
    i = sub.add_parser(
        "import",
        help="FDB sample folders (made by export) -> an fdeval run folder; then launch "
        "overrides (key=value), in any order with the options",
    )
    i.add_argument("root", type=Path)
    i.add_argument("--stages", help="run these stages after importing, e.g. transcribe,judge,score")
    a, extra = p.parse_known_args(argv)
    a.overrides = []
    for x in extra:
        if a.cmd == "export" or not OVERRIDE.fullmatch(x):
            what = "an option" if x.startswith("-") else "an argument"
            raise FdevalError(
                f"{p.prog} {a.cmd}: {x!r} is not {what} it takes"
                + ("" if a.cmd == "export" else " (nor a key=value launch override)")
            )
        a.overrides.append(x)
    return a


def main(argv: list[str] | None = None) -> None:
    def go() -> None:
        a = parse(argv)
        if a.cmd == "export":
            n, skipped = export(
                a.run_dir, a.out, a.task, a.turn, a.window, not a.no_output_json, a.version
            )
            note = (
                f"; {len(skipped)} session(s) without the task's turn skipped (e.g. {skipped[0]})"
                if skipped
                else ""
            )
            print(
                f"fdeval: exported {n} sample(s) to {a.out} (FDB v{a.version}, task {a.task})"
                f"{note}",
                flush=True,
            )
            if a.version == "1.5":
                print(
                    f"fdeval: not written (no fdeval session holds them): "
                    f"{', '.join(V15_MISSING)}; see docs/interop.md",
                    flush=True,
                )
            return
        run_dir, overrides = import_root(a.root, a.overrides)
        then(run_dir, overrides, a.stages)

    cli(go)


if __name__ == "__main__":
    main(sys.argv[1:])
