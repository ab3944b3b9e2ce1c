"""Full-Duplex-Bench v1 export and import.

The layout is checked against the reading code of Full-Duplex-Bench at commit
d7336bda1385872b83b48a8d45d9c0003836a60d (github.com/DanielLin94144/Full-Duplex-Bench), in
`v1_v1.5/evaluation/`: `eval_smooth_turn_taking.py::eval_smooth_turn_taking`,
`eval_user_interruption.py::eval_user_interruption`, `eval_pause_handling.py::eval_pause_handling`
and `eval_backchannel.py::eval_backchannel` (folder names), plus
`v1_v1.5/get_transcript/asr.py::get_time_aligned_transcription` (output.json). Their code is not
vendored here: `read_like_fdb` below repeats exactly the statements those functions use to find
and read a sample (listdir of the root and of each entry, the JSON keys and indices), so a layout
they could not read fails here. (Their evaluators were also run on an export by hand: see
docs/interop.md.)
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf

from fdeval.engine.run import step_dir
from fdeval.errors import FdevalError
from fdeval.interop.fdb import export, import_fdb, import_overrides, main
from fdeval.interop.runs import launch_args
from fdeval.orchestrator.recorder import read_session_log


def read_like_fdb(root: str, task: str) -> list[dict]:
    """What FDB's evaluators read from each sample (their statements, in their order)."""
    out = []
    for folder in os.listdir(root):  # eval_smooth_turn_taking / eval_pause_handling
        if folder.endswith(".DS_Store") or folder.endswith(".md"):
            continue
        files = os.listdir(
            os.path.join(root, folder)
        )  # raises for a root entry that is not a folder
        assert folder.isdigit()  # eval_backchannel: `if not spk.isdigit(): continue`
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
        wav, sr = sf.read(
            os.path.join(root, folder, "output.wav")
        )  # asr.py; eval_backchannel (torchaudio)
        got["output_s"] = len(wav) / sr
        out.append(got)
    return out


def transcript(run: Path, case_id: str) -> dict:
    return json.loads((step_dir(run, "transcribe") / f"{case_id}.json").read_text())


def test_export_reads_like_fdb_user_interruption(live_run, tmp_path):
    run, _ = live_run
    out = tmp_path / "fdb"
    n, skipped = export(run, out, "user_interruption", window="turn")
    assert n >= 1 and n + len(skipped) == 3
    samples = read_like_fdb(str(out), "user_interruption")
    assert len(samples) == n
    for s in samples:
        meta = json.loads((out / s["folder"] / "fdeval.json").read_text())
        tr = transcript(run, meta["case_id"])
        (turn,) = [t for t in tr["user_turns"] if t["index"] == meta["turn"]]
        assert turn["turn_type"] == "barge-in" and s["input_end_time"] == pytest.approx(
            turn["end_s"]
        )
        said = [
            w["text"] for w in tr["words"] if w["speaker"] == "user" and w["turn"] == turn["index"]
        ]
        assert s["interrupt"] == " ".join(said) and s["context"]
        # as FDB's asr.py crops: only the model's words after the interruption's end
        model = [
            w
            for w in tr["words"]
            if w["speaker"] == "model" and turn["end_s"] <= w["start_s"] < meta["window_s"][1]
        ]
        assert s["text"] == " ".join(w["text"] for w in model)
        if model:
            assert s["output_start"] >= s["input_end_time"]
        assert s["output_s"] == pytest.approx(meta["window_s"][1], abs=1e-4)


def test_export_reads_like_fdb_smooth_turn_taking_and_refuses_a_used_folder(live_run, tmp_path):
    run, _ = live_run
    out = tmp_path / "fdb"
    n, skipped = export(run, out, "smooth_turn_taking")
    assert (n, skipped) == (3, [])
    for s in read_like_fdb(str(out), "smooth_turn_taking"):
        meta = json.loads((out / s["folder"] / "fdeval.json").read_text())
        first = min(transcript(run, meta["case_id"])["user_turns"], key=lambda t: t["start_s"])
        assert s["input_end_time"] == pytest.approx(first["end_s"])
        user = json.loads((out / s["folder"] / "transcription.json").read_text())
        assert user[0]["speaker"] == 0 and user[0]["item"][0]["timestamp"][0] == pytest.approx(
            first["start_s"]
        )
    with pytest.raises(FdevalError, match="not empty"):
        export(run, out, "smooth_turn_taking")


def test_round_trip_same_audio_and_transcripts(live_run, run_launch, tmp_path):
    run, _ = live_run
    out = tmp_path / "fdb"
    export(run, out, "pause_handling")
    imported = import_fdb(out)
    assert imported.name.startswith("fdb-import-") and imported.parent == run.parent
    meta = json.loads((out / "1" / "fdeval.json").read_text())
    run_launch(tmp_path, *launch_args(import_overrides(meta, [])))
    for wav in sorted((run / "sessions").glob("*.wav")):
        a, _ = sf.read(wav, dtype="int16")
        b, _ = sf.read(imported / "sessions" / wav.name, dtype="int16")
        assert np.array_equal(a, b)
        case = wav.stem
        strip = lambda d: {k: v for k, v in d.items() if k != "provenance"}  # noqa: E731
        assert strip(transcript(imported, case)) == strip(transcript(run, case))


def test_import_errors_are_one_line(live_run, tmp_path, capsys):
    run, _ = live_run
    out = tmp_path / "fdb"
    export(run, out, "pause_handling")
    (out / "stray.json").write_text("{}")
    with pytest.raises(SystemExit) as e:
        main(["import", str(out)])
    err = capsys.readouterr().err.strip().splitlines()
    assert e.value.code == 2 and len(err) == 1 and "stray.json: not a sample folder" in err[0]
    (out / "stray.json").unlink()
    sf.write(out / "1" / "input.wav", np.zeros((16000, 2), dtype=np.float32), 16000)
    meta = json.loads((out / "1" / "fdeval.json").read_text())
    with pytest.raises(
        FdevalError, match=rf"input\.wav: case '{meta['case_id']}': field 'channels'"
    ):
        import_fdb(out, ["run_tag=fdb-errors"])


def test_import_of_a_cut_window_keeps_the_turns_it_holds(live_run, tmp_path):
    """--window turn cuts at the next user turn: imported back, the later turns are not played."""
    run, _ = live_run
    out = tmp_path / "fdb"
    export(run, out, "smooth_turn_taking", window="turn")
    imported = import_fdb(out, ["run_tag=fdb-cut"])
    for d in sorted(p for p in out.iterdir()):
        meta = json.loads((d / "fdeval.json").read_text())
        live = read_session_log(run / "sessions" / f"{meta['case_id']}.h5")["turns"]
        got = read_session_log(imported / "sessions" / f"{meta['case_id']}.h5")
        kept = [t for t in live if t["end_s"] <= meta["window_s"][1]]
        assert kept and [(t["index"], t["start_s"]) for t in got["turns"]] == [
            (t["index"], t["start_s"]) for t in kept
        ]
        assert got["attrs"]["n_samples"] == round(meta["window_s"][1] * 16000)
