"""Full-Duplex-Bench export and import.

The layout is checked against the reading code of Full-Duplex-Bench at commit
d7336bda1385872b83b48a8d45d9c0003836a60d (github.com/DanielLin94144/Full-Duplex-Bench), in
`v1_v1.5/evaluation/`: `eval_smooth_turn_taking.py::eval_smooth_turn_taking`,
`eval_user_interruption.py::eval_user_interruption`, `eval_pause_handling.py::eval_pause_handling`
and `eval_backchannel.py::eval_backchannel` (folder names), the v1.5 readers
(`eval_behavior.py::eval_behavior_all`, `eval_general_before_after.py`), plus
`v1_v1.5/get_transcript/asr.py::get_time_aligned_transcription` (output.json). Their code is not
vendored here: `read_like_fdb` below does what those functions do to find and read a sample
(list the root and each entry, the JSON keys and indices), so a layout they could not read fails
here. (Their v1 evaluators were also run on an export by hand: see docs/interop.md.)
"""

from __future__ import annotations

import csv
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Callable

import numpy as np
import pytest
import soundfile as sf
from scipy.signal import resample_poly

from fdeval.engine.run import step_dir
from fdeval.errors import FdevalError
from fdeval.interop.fdb import (
    FULL_WORDS,
    V15_MISSING,
    export,
    import_fdb,
    import_root,
    main,
    parse,
)
from fdeval.interop.recording import WORDS_END_TOLERANCE_S, Words
from fdeval.interop.runs import launch_args
from fdeval.orchestrator.recorder import read_session_log

TASKS = ("smooth_turn_taking", "pause_handling", "user_interruption")


def read_like_fdb(root: str, task: str) -> list[dict]:
    """What FDB's v1 evaluators read from each sample (as they read it, in their order)."""
    out = []
    for folder in os.listdir(root):  # eval_smooth_turn_taking / eval_pause_handling
        if folder.endswith(".DS_Store") or folder.endswith(".md"):
            continue
        files = os.listdir(os.path.join(root, folder))  # raises for an entry that is no folder
        assert folder.isdigit()  # eval_backchannel: `if not spk.isdigit(): continue`
        # eval_smooth_turn_taking / eval_pause_handling take every file ending in output.json
        assert [f for f in files if f.endswith("output.json")] == ["output.json"]
        got = {"folder": folder}
        with open(os.path.join(root, folder, "output.json")) as f:
            output = json.load(f)
        segments_cw = output["chunks"]
        got["text"] = output["text"]
        if segments_cw:
            got["output_start"] = segments_cw[0]["timestamp"][0]
            got["output_end"] = segments_cw[-1]["timestamp"][-1]
        if task == "smooth_turn_taking":
            (name,) = [f for f in files if f.endswith("turn_taking.json")]
            with open(os.path.join(root, folder, name)) as f:
                got["input_end_time"] = json.load(f)[0]["timestamp"][0]
        if task == "user_interruption":
            with open(os.path.join(root, folder, "interrupt.json")) as f:
                metadata = json.load(f)
            got["context"], got["interrupt"] = metadata[0]["context"], metadata[0]["interrupt"]
            got["input_end_time"] = metadata[0]["timestamp"][1]
        wav, sr = sf.read(os.path.join(root, folder, "output.wav"))  # asr.py; eval_backchannel
        got["output_s"] = len(wav) / sr
        out.append(got)
    return out


def transcript(run: Path, case_id: str) -> dict:
    return json.loads((step_dir(run, "transcribe") / f"{case_id}.json").read_text())


def meta_of(sample: Path) -> dict:
    return json.loads((sample / "fdeval.json").read_text())


@pytest.fixture(scope="module")
def exports(live_run, tmp_path_factory) -> dict[str, Path]:
    """One v1 export (--window full) of the live run per task; tests copy before changing one."""
    run, _ = live_run
    tmp = tmp_path_factory.mktemp("fdb_exports")
    return {task: (export(run, tmp / task, task), tmp / task)[1] for task in TASKS}


def test_export_reads_like_fdb_user_interruption(live_run, tmp_path):
    """The interruption is a barge-in of subtype "interrupt": a session whose only barge-in is a
    backchannel is skipped, like one with none; output.json holds the model's words after the
    interruption (as FDB's asr.py crops), output_full.json all of them."""
    run, _ = live_run
    out = tmp_path / "fdb"
    n, skipped = export(run, out, "user_interruption", window="turn")
    assert n == 2 and sorted(skipped) == [
        "balcony_tomatoes__continue",
        "bathroom_cleaning_mix__interrupt",
    ]
    samples = read_like_fdb(str(out), "user_interruption")
    assert len(samples) == n
    for s in samples:
        meta = meta_of(out / s["folder"])
        tr = transcript(run, meta["case_id"])
        (turn,) = [t for t in tr["user_turns"] if t["index"] == meta["turn"]]
        assert (turn["turn_type"], turn["subtype"]) == ("barge-in", "interrupt")
        assert s["input_end_time"] == pytest.approx(turn["end_s"])
        said = [
            w["text"] for w in tr["words"] if w["speaker"] == "user" and w["turn"] == turn["index"]
        ]
        assert s["interrupt"] == " ".join(said) and s["context"]
        t1 = meta["window_s"][1]
        model = [w for w in tr["words"] if w["speaker"] == "model" and w["start_s"] < t1]
        after = [w for w in model if w["start_s"] >= turn["end_s"]]
        assert s["text"] == " ".join(w["text"] for w in after)
        if after:
            assert s["output_start"] >= s["input_end_time"]
        full = json.loads((out / s["folder"] / FULL_WORDS).read_text())
        assert [c["text"] for c in full["chunks"]] == [w["text"] for w in model]
        assert len(full["chunks"]) > len(after)
        assert max(c["timestamp"][1] for c in full["chunks"]) <= t1
        assert s["output_s"] == pytest.approx(t1, abs=1e-4)


def test_export_reads_like_fdb_smooth_turn_taking_and_refuses_a_used_folder(live_run, exports):
    run, _ = live_run
    out = exports["smooth_turn_taking"]
    got = read_like_fdb(str(out), "smooth_turn_taking")
    assert len(got) == 4
    for s in got:
        meta = meta_of(out / s["folder"])
        first = min(transcript(run, meta["case_id"])["user_turns"], key=lambda t: t["start_s"])
        assert s["input_end_time"] == pytest.approx(first["end_s"])
        user = json.loads((out / s["folder"] / "transcription.json").read_text())
        assert user[0]["speaker"] == 0 and user[0]["item"][0]["timestamp"][0] == pytest.approx(
            first["start_s"]
        )
        assert not (out / s["folder"] / FULL_WORDS).exists()  # output.json is whole here
    with pytest.raises(FdevalError, match="not empty"):
        export(run, out, "smooth_turn_taking")


def _same(a: dict, b: dict) -> bool:
    """Equal but for what names the run that wrote them (model_id, provenance)."""
    drop = ("model_id", "provenance")
    return {k: v for k, v in a.items() if k not in drop} == {
        k: v for k, v in b.items() if k not in drop
    }


def test_round_trip_gives_the_same_verdicts(live_run, run_launch, exports, tmp_path):
    """Each task's export imported back (its cases, found from the samples' fdeval.json) and
    transcribed, judged and scored again: the same audio, transcripts and verdicts per case.
    user_interruption goes through the command line, the overrides after --stages.

    Measured (this test, printed with -s):

    | task | samples | verdicts identical / total |
    | --- | ---: | ---: |
    | smooth_turn_taking | 4 | 4 / 4 |
    | pause_handling | 4 | 4 / 4 |
    | user_interruption | 2 | 2 / 2 |
    """
    run, _ = live_run
    rows = []
    for task in TASKS:
        out = exports[task]
        if task == "user_interruption":
            proc = subprocess.run(
                [sys.executable, "-m", "fdeval.interop.fdb", "import", str(out), "--stages"]
                + ["transcribe,judge,score", f"run_tag=fdb-{task}", "progress=false"],
                cwd=tmp_path,
                capture_output=True,
                text=True,
                timeout=600,
            )
            assert proc.returncode == 0, proc.stderr[-3000:]
            (imported,) = run.parent.glob(f"fdb-{task}-*")
        else:
            imported, overrides = import_root(out, [f"run_tag=fdb-{task}"])
            assert f"run_tag=fdb-{task}" in overrides
            run_launch(tmp_path, *launch_args(overrides))
        cases = [meta_of(d)["case_id"] for d in sorted(out.iterdir())]
        assert sorted(p.stem for p in (imported / "sessions").glob("*.h5")) == sorted(cases)
        for case in cases:
            a, _ = sf.read(run / "sessions" / f"{case}.wav", dtype="int16")
            b, _ = sf.read(imported / "sessions" / f"{case}.wav", dtype="int16")
            assert np.array_equal(a, b), (task, case)
            assert _same(transcript(imported, case), transcript(run, case)), (task, case)
        names = sorted(
            p.name for p in step_dir(run, "judge").glob("*.json") if p.name.split("@")[0] in cases
        )
        got = sorted(p.name for p in step_dir(imported, "judge").glob("*.json"))
        assert names and got == names, task
        same = sum(
            _same(
                json.loads((step_dir(imported, "judge") / n).read_text()),
                json.loads((step_dir(run, "judge") / n).read_text()),
            )
            for n in names
        )
        rows.append((task, len(cases), same, len(names)))
    table = "\n".join(
        ["| task | samples | verdicts identical / total |", "| --- | ---: | ---: |"]
        + [f"| {t} | {n} | {s} / {k} |" for t, n, s, k in rows]
    )
    print("\n" + table)
    assert all(s == k for _, _, s, k in rows), table


# --- malformed layouts: each one a one-line error naming the file and the field ---------------


def _chunk(i: int, ts: list) -> Callable[[Path], None]:
    def change(root: Path) -> None:
        p = root / "1" / "output.json"
        d = json.loads(p.read_text())
        d["chunks"][i]["timestamp"] = ts
        p.write_text(json.dumps(d))  # json.dumps writes NaN as NaN, as json.loads reads it

    return change


def _past_end(root: Path) -> None:
    p = root / "1" / "output.json"
    d = json.loads(p.read_text())
    dur = sf.info(str(root / "1" / "output.wav")).duration
    d["chunks"][-1]["timestamp"] = [round(dur + 1.0, 3), round(dur + 1.5, 3)]
    p.write_text(json.dumps(d))


def _edit(name: str, fn) -> Callable[[Path], None]:
    def change(root: Path) -> None:
        p = root / "1" / name
        p.write_text(json.dumps(fn(json.loads(p.read_text()))))

    return change


def _text_not_str(d: dict) -> dict:
    d["chunks"][0]["text"] = 3
    return d


def _no_timestamp(d: list) -> list:
    del d[0]["timestamp"]
    return d


def _stereo_input(root: Path) -> None:
    sf.write(root / "1" / "input.wav", np.zeros((16000, 2), dtype=np.float32), 16000)


def _empty(root: Path) -> None:
    for p in root.iterdir():
        shutil.rmtree(p)


# (name, export the layout starts from, the change, the error; ROOT: the root, CASE: the first
# sample's case). Rows marked "accepted before" were imported without a word before this change
# (checked by hand with the previous fdb.py / recording.py).
MALFORMED = [
    (
        "timestamp true (accepted before, as 1.0)",
        "pause_handling",
        _chunk(1, [True, 2.0]),
        "ROOT/1/output.json: case 'CASE': field 'chunks[1].timestamp[0]': true; "
        "expected a finite number >= 0",
    ),
    (
        "timestamp NaN start (accepted before; the word vanished)",
        "pause_handling",
        _chunk(2, [float("nan"), 3.0]),
        "ROOT/1/output.json: case 'CASE': field 'chunks[2].timestamp[0]': NaN; "
        "expected a finite number >= 0",
    ),
    (
        "timestamp end before start (accepted before; failed two stages later)",
        "pause_handling",
        _chunk(3, [5.0, 4.5]),
        "ROOT/1/output.json: case 'CASE': field 'chunks[3].timestamp[1]': 4.5 s, "
        "before the word's start 5 s",
    ),
    (
        "timestamp past the recording's end (accepted before)",
        "pause_handling",
        _past_end,
        None,  # the times depend on the recording: checked by pattern below
    ),
    (
        "timestamp null end, not the last chunk (accepted before, as NaN)",
        "pause_handling",
        _chunk(0, [1.0, None]),
        "ROOT/1/output.json: case 'CASE': field 'chunks[0].timestamp[1]': null; "
        "only the last chunk's end may be null",
    ),
    (
        "output.wav missing",
        "pause_handling",
        lambda root: (root / "1" / "output.wav").unlink(),
        "ROOT/1/output.wav: case 'CASE': field '<file>': missing or not a readable audio file",
    ),
    (
        "stereo input.wav",
        "pause_handling",
        _stereo_input,
        "ROOT/1/input.wav: case 'CASE': field 'channels': 2 channel(s); expected 1",
    ),
    (
        "sample folder not a number (accepted before)",
        "pause_handling",
        lambda root: (root / "2").rename(root / "two"),
        "ROOT/two: sample folder name is not a number (FDB's sample ids are; its "
        "eval_backchannel skips other folders)",
    ),
    (
        "a stray file at the root",
        "pause_handling",
        lambda root: (root / "stray.json").write_text("{}"),
        "ROOT/stray.json: not a sample folder (FDB's evaluators list every entry of the root)",
    ),
    (
        "interrupt.json without timestamp (accepted before)",
        "user_interruption",
        _edit("interrupt.json", _no_timestamp),
        "ROOT/1/interrupt.json: case 'CASE': field '[0].timestamp': missing or not "
        "[start_s, end_s]",
    ),
    (
        "chunk text not a string",
        "pause_handling",
        _edit("output.json", _text_not_str),
        "ROOT/1/output.json: case 'CASE': field 'chunks[0].text': a JSON number; expected a string",
    ),
    (
        "output.json not an object",
        "pause_handling",
        _edit("output.json", lambda d: d["chunks"]),
        "ROOT/1/output.json: case 'CASE': field '<file>': a JSON array; "
        "expected an object {text, chunks: [...]}",
    ),
    (
        "an empty root",
        "pause_handling",
        _empty,
        "ROOT: no sample folders",
    ),
]


def test_malformed_layouts_are_one_line_errors(live_run, exports, tmp_path, capsys):
    """Each malformed layout: exit code 2, one line on stderr naming the file and the field, no
    traceback, nothing imported. Printed with -s as a table (layout | message)."""
    rows = []
    for k, (name, task, change, want) in enumerate(MALFORMED):
        root = tmp_path / f"m{k}"
        shutil.copytree(exports[task], root)
        case = meta_of(root / "1")["case_id"]
        change(root)
        with pytest.raises(SystemExit) as e:
            main(["import", str(root), f"run_tag=fdb-malformed-{k}"])
        cap = capsys.readouterr()
        err = cap.err.strip().splitlines()
        assert e.value.code == 2 and len(err) == 1, (name, cap.err)
        assert "Traceback" not in cap.err and not cap.out, name
        msg = err[0].removeprefix("fdeval: error: ").replace(str(root), "ROOT")
        if want is None:
            assert re.fullmatch(
                rf"ROOT/1/output\.json: case '{case}': field 'chunks\[\d+\]\.timestamp\[0\]': "
                r"[\d.]+ s, past the end of the recording \([\d.]+ s\)",
                msg,
            ), msg
        else:
            assert msg == want.replace("CASE", case), name
        rows.append(f"| {name} | `{msg}` |")
    assert not list(live_run[0].parent.glob("fdb-malformed-*"))  # checked before any folder
    print("\n| layout | message |\n| --- | --- |\n" + "\n".join(rows))


def test_words_read_allows_a_null_last_end_and_one_frame_past_the_end(tmp_path):
    """FDB's eval_pause_handling reads a null end of the last chunk (a Whisper pipeline's word
    that runs to the end of the audio): it ends with the recording. One frame past it is fine."""
    p = tmp_path / "output.json"
    p.write_text(
        json.dumps(
            {
                "text": "a b",
                "chunks": [
                    {"text": "a", "timestamp": [0.5, 2.0 + WORDS_END_TOLERANCE_S]},
                    {"text": "b", "timestamp": [1.5, None]},
                ],
            }
        )
    )
    w = Words.read(p, "c", 2.0)
    assert w.words == (("a", 0.5, 2.0 + WORDS_END_TOLERANCE_S), ("b", 1.5, 2.0))
    with pytest.raises(FdevalError, match=r"chunks\[0\].timestamp\[1\]': 2.032 s, past the end"):
        Words.read(p, "c", 2.0 - 0.008)


def test_command_line_takes_overrides_anywhere_and_refuses_unknown_flags(tmp_path, capsys):
    a = parse(["import", "ROOT", "a.b=1", "--stages", "transcribe", "run_tag=x", "+c=[1,2]"])
    assert (str(a.root), a.stages, a.overrides) == (
        "ROOT",
        "transcribe",
        ["a.b=1", "run_tag=x", "+c=[1,2]"],
    )
    for argv, bad in (
        (["import", "ROOT", "--stages", "transcribe", "--frobnicate"], "'--frobnicate'"),
        (["import", "ROOT", "notanoverride"], "'notanoverride'"),
        (["export", "RUN", "--out", "X", "--task", "pause_handling", "seed=1"], "'seed=1'"),
        (["export", "RUN", "--out", "X", "--task", "nope"], "invalid choice"),
    ):
        with pytest.raises(SystemExit) as e:
            main(argv)
        err = capsys.readouterr().err.strip().splitlines()
        assert e.value.code == 2 and len(err) == 1 and bad in err[0], (argv, err)


def test_a_cropped_output_json_needs_an_asr(exports, tmp_path):
    """Only FDB's cropped output.json (no output_full.json): the words before the crop are
    unknown, so asr=exact (which would read them as everything the model said) is refused; with
    an ASR the import keeps them, marked as starting at the crop."""
    root = tmp_path / "ui"
    shutil.copytree(exports["user_interruption"], root)
    for d in root.iterdir():
        (d / FULL_WORDS).unlink()
    case = meta_of(root / "1")["case_id"]
    crop = json.loads((root / "1" / "interrupt.json").read_text())[0]["timestamp"][1]
    with pytest.raises(FdevalError) as e:
        import_fdb(root, ["run_tag=fdb-cropped"])
    assert str(e.value).startswith(
        f"{root}/1/output.json: case '{case}': field 'chunks': cropped at interrupt.json's "
        f"timestamp[1] ({crop:g} s)"
    )
    assert not list((root.parent).glob("**/sessions/*.h5"))
    imported = import_fdb(root, ["run_tag=fdb-cropped", "asr=whisper"])
    log = read_session_log(imported / "sessions" / f"{case}.h5")
    assert log["attrs"]["imported_words"] == "cropped"
    assert log["attrs"]["imported_words_from_s"] == pytest.approx(crop)
    assert log["model_text"] and min(r["play_s"] for r in log["model_text"]) >= crop


def test_mixed_sample_rates_are_resampled_and_recorded(exports, tmp_path):
    """FDB's own pause example pairs a 48 kHz input.wav with a 16 kHz output.wav."""
    root = tmp_path / "rates"
    shutil.copytree(exports["pause_handling"], root)
    x, sr = sf.read(root / "1" / "input.wav", dtype="float32")
    sf.write(root / "1" / "input.wav", resample_poly(x, 3, 1), 48000, subtype="PCM_16")
    case = meta_of(root / "1")["case_id"]
    imported = import_fdb(root, ["run_tag=fdb-rates"])
    log = read_session_log(imported / "sessions" / f"{case}.h5")
    assert json.loads(log["attrs"]["imported_rates"]) == {"input.wav": 48000, "output.wav": 16000}
    live = read_session_log(Path(meta_of(root / "1")["run_dir"]) / "sessions" / f"{case}.h5")
    for a, b in zip(live["turns"], log["turns"], strict=True):
        assert b["start_s"] == pytest.approx(a["start_s"], abs=0.033)


def test_v15_export_reads_like_fdb_and_says_what_is_missing(live_run, tmp_path):
    run, _ = live_run
    out = tmp_path / "v15"
    n, skipped = export(run, out, "user_backchannel", version="1.5")
    assert n == 1 and len(skipped) == 3
    (d,) = list(out.iterdir())
    files = set(os.listdir(d))
    # eval_general_before_after takes a folder holding these three
    assert {"output.json", "metadata.json", "output.wav"} <= files
    assert not files & set(V15_MISSING)  # eval_behavior skips the sample: said, not faked
    meta = meta_of(d)
    assert meta["missing"] == list(V15_MISSING) and meta["version"] == "1.5"
    md = json.loads((d / "metadata.json").read_text())
    tr = transcript(run, meta["case_id"])
    (turn,) = [t for t in tr["user_turns"] if t["index"] == meta["turn"]]
    assert (turn["turn_type"], turn["subtype"]) == ("barge-in", "backchannel")
    assert md["timestamps"] == pytest.approx([turn["start_s"], turn["end_s"]])
    assert md["current_turn_text"] and md["context_text"]
    inp, outp = (json.loads((d / f).read_text()) for f in ("input.json", "output.json"))
    for w, speaker in ((inp, "user"), (outp, "model")):
        assert [c["text"] for c in w["chunks"]] == [
            x["text"] for x in tr["words"] if x["speaker"] == speaker
        ]
    with pytest.raises(FdevalError, match="no FDB v1.5 task"):
        export(run, tmp_path / "x", "pause_handling", version="1.5")


def test_import_of_a_cut_window_keeps_the_turns_it_holds(live_run, tmp_path):
    """--window turn cuts at the next user turn: imported back, the later turns are not played."""
    run, _ = live_run
    out = tmp_path / "fdb"
    export(run, out, "smooth_turn_taking", window="turn")
    imported = import_fdb(out, ["run_tag=fdb-cut"])
    for d in sorted(p for p in out.iterdir()):
        meta = meta_of(d)
        live = read_session_log(run / "sessions" / f"{meta['case_id']}.h5")["turns"]
        got = read_session_log(imported / "sessions" / f"{meta['case_id']}.h5")
        kept = [t for t in live if t["end_s"] <= meta["window_s"][1]]
        assert kept and [(t["index"], t["start_s"]) for t in got["turns"]] == [
            (t["index"], t["start_s"]) for t in kept
        ]
        assert got["attrs"]["n_samples"] == round(meta["window_s"][1] * 16000)


def _fdb_took_turn(chunks: list[dict]) -> int:
    """FDB v1's take-turn rule: some words, spanning at least 1 s or more than 3 of them."""
    if not chunks:
        return 0
    span = chunks[-1]["timestamp"][-1] - chunks[0]["timestamp"][0]
    return int(span >= 1 or len(chunks) > 3)


def test_fdb_own_samples_import_into_benchmark_fdb(live_run, run_launch, exports, tmp_path):
    """A root of FDB's own sample folders (no fdeval.json; user_interruption's output.json only
    as FDB's asr.py crops it) imports into a `benchmark=fdb` run on that root with nothing
    added, and the fdb metric gives per sample what FDB's v1 rules give on the files."""
    _, overrides = live_run
    root = tmp_path / "fdb_own"
    for task in TASKS:
        shutil.copytree(exports[task], root / task)
        for d in (root / task).iterdir():
            (d / "fdeval.json").unlink()
            (d / FULL_WORDS).unlink(missing_ok=True)
    out_root = next(o for o in overrides if o.startswith("out_root="))
    imported, used = import_root(root, [out_root, "progress=false"])
    assert used[:2] == ["benchmark=fdb", f"benchmark.data_dir={root.resolve()}"]
    run_launch(tmp_path, *launch_args(used))
    (table,) = (imported / "scores").glob("*/fdb_samples.csv")
    rows = list(csv.DictReader(table.read_text().splitlines()))
    assert sorted(r["case_id"] for r in rows) == sorted(
        f"{t}-{d.name}" for t in TASKS for d in (root / t).iterdir()
    )
    for r in rows:
        d = root / r["subset"] / r["sample"]
        chunks = json.loads((d / "output.json").read_text())["chunks"]
        took = _fdb_took_turn(chunks)
        assert int(r["took_turn"]) == took, r
        ref = None
        if r["task"] == "smooth_turn_taking":
            ref = json.loads((d / "turn_taking.json").read_text())[0]["timestamp"][0]
        if r["task"] == "user_interruption":
            ref = json.loads((d / "interrupt.json").read_text())[0]["timestamp"][1]
            log = read_session_log(imported / "sessions" / f"{r['case_id']}.h5")
            assert log["attrs"]["imported_words"] == "cropped"
            assert log["attrs"]["imported_words_from_s"] == pytest.approx(ref)
        if ref is not None and took:
            want = max(0.0, chunks[0]["timestamp"][0] - ref)
            assert float(r["latency_s"]) == pytest.approx(want, abs=1e-3), r
