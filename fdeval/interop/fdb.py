"""Full-Duplex-Bench v1 per-sample layout: export fdeval sessions to it, import it back.

`python -m fdeval.interop.fdb export RUN_DIR --out DIR --task TASK [--turn K] [--window full|turn]`
`python -m fdeval.interop.fdb import DIR [--stages S] [OVERRIDES]`

The layout follows the reading code of Full-Duplex-Bench (github.com/DanielLin94144/Full-Duplex-Bench,
commit d7336bda1385872b83b48a8d45d9c0003836a60d), `v1_v1.5/evaluation/`:
`eval_smooth_turn_taking.eval_smooth_turn_taking` (each sample folder under the root: `output.json`
`chunks[*].timestamp` and `turn_taking.json[0].timestamp[0]`, the user's turn end),
`eval_user_interruption.eval_user_interruption` (`interrupt.json[0]`: `context`, `interrupt`,
`timestamp[1]`, the interruption's end; `output.json` `text` and `chunks`),
`eval_pause_handling.eval_pause_handling` (`output.json` `chunks`), and
`v1_v1.5/get_transcript/asr.get_time_aligned_transcription` (writes `output.json` from each
`<sample>/output.wav`, cropped after `interrupt.json`'s end for user_interruption). Every entry
of the root must be a sample folder (the evaluators `os.listdir` each one; only `*.md` and
`.DS_Store` are skipped), and folder names are digits (`eval_backchannel` skips others), so the
samples are `1`, `2`, ... and fdeval's own record of each sample is `fdeval.json` inside it.

Per sample: `input.wav` (the user channel), `output.wav` (the model channel), both mono 16-bit
at the run's rate on the session clock; the task JSON; `transcription.json` (the user's words,
`[{"speaker": 0, "item": [{"text", "timestamp": [start, end]}]}]` as in FDB's example data);
`output.json` (the model's words from fdeval's transcript, in the layout FDB's ASR writes;
`--no-output-json` leaves it to their `asr.py`); `fdeval.json` (case, run, session, task, turn,
window and the launch overrides the import uses to find the case set again).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

import numpy as np
import soundfile as sf
import yaml

from fdeval.audio.io import read_wav, write_wav
from fdeval.audio.vad import SileroVAD
from fdeval.errors import FdevalError, FileFieldError
from fdeval.files import write_json_atomic
from fdeval.interop.recording import Words, import_arrays, run_rate
from fdeval.interop.runs import cli, open_import_run, read_json, then
from fdeval.recording import read_info
from fdeval.report.runview import open_run

TASKS = {
    "smooth_turn_taking": "turn_taking.json",
    "user_interruption": "interrupt.json",
    "pause_handling": "pause.json",
}
WINDOWS = ("full", "turn")
FDEVAL_JSON = "fdeval.json"


def _words(transcript: dict[str, Any], speaker: str, t0: float, t1: float) -> list[dict[str, Any]]:
    return [
        {"text": w["text"], "timestamp": [float(w["start_s"]), float(w["end_s"])]}
        for w in transcript["words"]
        if w["speaker"] == speaker and t0 <= float(w["start_s"]) < t1
    ]


def _pick_turn(task: str, turns: list[dict[str, Any]], turn: int | None) -> dict[str, Any] | None:
    """The user turn the task JSON points at: `turn`, else the first barge-in (user_interruption)
    or the first turn (the others); None when the session has no such turn."""
    if turn is not None:
        return next((t for t in turns if int(t["index"]) == turn), None)
    if task == "user_interruption":
        return next((t for t in turns if t["turn_type"] == "barge-in"), None)
    return turns[0] if turns else None


def task_json(
    task: str, transcript: dict[str, Any], t: dict[str, Any], nxt: float
) -> list[dict[str, Any]]:
    start, end = float(t["start_s"]), float(t["end_s"])
    if task == "user_interruption":
        said = [
            w["text"]
            for w in transcript["words"]
            if w["speaker"] == "user" and w.get("turn") == t["index"]
        ]
        before = [
            w["text"]
            for w in transcript["words"]
            if w["speaker"] == "user"
            and w.get("turn") is not None
            and int(w["turn"]) < int(t["index"])
        ]
        return [
            {"context": " ".join(before), "interrupt": " ".join(said), "timestamp": [start, end]}
        ]
    label = "[TURN-TAKING]" if task == "smooth_turn_taking" else "[PAUSE]"
    return [{"text": label, "timestamp": [end, nxt]}]  # the user's silence after the turn


def export(
    run_dir: Path,
    out: Path,
    task: str,
    turn: int | None = None,
    window: str = "full",
    output_json: bool = True,
) -> tuple[int, list[str]]:
    """Write one FDB v1 sample per usable session with a transcript and the task's turn; the
    number written and the cases skipped for having no such turn."""
    if task not in TASKS:
        raise FdevalError(f"--task: unknown task {task!r}; valid: {', '.join(TASKS)}")
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
        n += 1
        d = out / str(n)
        write_wav(d / "input.wav", x[:k, 0], sr)
        write_wav(d / "output.wav", x[:k, 1], sr)
        write_json_atomic(d / TASKS[task], task_json(task, tr, t, nxt))
        write_json_atomic(
            d / "transcription.json", [{"speaker": 0, "item": _words(tr, "user", 0.0, t1)}]
        )
        if output_json:
            chunks = _words(
                tr, "model", float(t["end_s"]) if task == "user_interruption" else 0.0, t1
            )
            write_json_atomic(
                d / "output.json", {"text": " ".join(c["text"] for c in chunks), "chunks": chunks}
            )
        write_json_atomic(
            d / FDEVAL_JSON,
            {
                "case_id": s.case.case_id,
                "benchmark": view.benchmark,
                "model": view.model,
                "model_id": view.model_id,
                "run_dir": str(view.run_dir),
                "run_id": view.run_id,
                "session_id": _session_id(s.log),
                "task": task,
                "turn": int(t["index"]),
                "window": window,
                "window_s": [0.0, k / sr],
                "sample_rate": sr,
                "launch_overrides": overrides,
                "output_json": "fdeval transcript" if output_json else "none",
            },
        )
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
        out.append(p)
    if not out:
        raise FdevalError(f"{root}: no sample folders")
    return out


def _mono(path: Path, case_id: str, sr: int) -> np.ndarray:
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
    if info.samplerate != sr:
        raise FileFieldError(
            str(path), case_id, "sample_rate", f"{info.samplerate} Hz; this run records at {sr} Hz"
        )
    return read_wav(path)[0]


def import_fdb(root: Path, overrides: list[str] | None = None) -> Path:
    """Import every sample back as an imported session; the run folder. The launch overrides
    come from the samples' fdeval.json (given ones are added after them)."""
    dirs = samples(root)
    metas = []
    for d in dirs:
        m = read_json(d / FDEVAL_JSON)
        if not isinstance(m, dict) or not isinstance(m.get("case_id"), str):
            raise FileFieldError(
                str(d / FDEVAL_JSON), None, "case_id", "missing: which fdeval case this sample is"
            )
        metas.append(m)
    run = open_import_run(import_overrides(metas[0], overrides or []), Path(root))
    by_id = {c.case_id: c for c in run.cases}
    sr = run_rate(run)
    vad = SileroVAD(sample_rate=sr)
    seen: set[str] = set()
    for d, m in zip(dirs, metas):
        cid = m["case_id"]
        if cid not in by_id:
            raise FileFieldError(
                str(d / FDEVAL_JSON), cid, "case_id", "not a case of this run's case set"
            )
        if cid in seen:
            raise FileFieldError(
                str(d / FDEVAL_JSON), cid, "case_id", "a second sample of the same case"
            )
        seen.add(cid)
        user, model = _mono(d / "input.wav", cid, sr), _mono(d / "output.wav", cid, sr)
        n = max(len(user), len(model))  # a model's output may stop early: the rest is its silence
        user, model = np.pad(user, (0, n - len(user))), np.pad(model, (0, n - len(model)))
        words = Words.read(d / "output.json", cid) if (d / "output.json").is_file() else None
        import_arrays(
            run,
            by_id[cid],
            d / "input.wav",
            user,
            model,
            words,
            vad,
            partial=m.get("window") == "turn",
        )
    missing = sorted(set(by_id) - seen)
    if missing:
        raise FdevalError(
            f"{root}: no sample for case {missing[0]!r} ({len(missing)} missing); add "
            f"benchmark.cases=[...] to import a subset"
        )
    return run.run_dir


def import_overrides(meta: dict[str, Any], given: list[str]) -> list[str]:
    """The exported run's launch overrides, then the given ones; run_tag=fdb-import unless given."""
    base = [str(o) for o in meta.get("launch_overrides") or []]
    tag = [] if any(o.startswith("run_tag=") for o in given) else ["run_tag=fdb-import"]
    return [*base, *tag, *given]


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(
        prog="python -m fdeval.interop.fdb", description="Full-Duplex-Bench v1 layout"
    )
    sub = p.add_subparsers(dest="cmd", required=True)
    e = sub.add_parser("export", help="fdeval sessions -> FDB v1 sample folders")
    e.add_argument("run_dir", type=Path)
    e.add_argument("--out", type=Path, required=True)
    e.add_argument("--task", required=True, choices=sorted(TASKS))
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
        help="leave output.json to FDB's get_transcript/asr.py",
    )
    i = sub.add_parser(
        "import", help="FDB v1 sample folders (made by export) -> an fdeval run folder"
    )
    i.add_argument("root", type=Path)
    i.add_argument("--stages", help="run these stages after importing, e.g. transcribe,judge,score")
    i.add_argument("overrides", nargs="*")
    a = p.parse_args(argv)

    def go() -> None:
        if a.cmd == "export":
            n, skipped = export(a.run_dir, a.out, a.task, a.turn, a.window, not a.no_output_json)
            note = (
                f"; {len(skipped)} session(s) without the task's turn skipped (e.g. {skipped[0]})"
                if skipped
                else ""
            )
            print(f"fdeval: exported {n} sample(s) to {a.out} (task {a.task}){note}", flush=True)
            return
        run_dir = import_fdb(a.root, a.overrides)
        then(
            run_dir,
            import_overrides(read_json(samples(a.root)[0] / FDEVAL_JSON), a.overrides),
            a.stages,
        )

    cli(go)


if __name__ == "__main__":
    main(sys.argv[1:])
