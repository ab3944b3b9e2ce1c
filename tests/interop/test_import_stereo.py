"""Stereo recordings made elsewhere, imported and then transcribed, judged and scored by the engine.

The "external" recordings are a real default run's session WAVs (ch0 user, ch1 model) and its
model's words (written in FDB's output.json layout, as a system that logs its text would give
them): nothing of the run's logs is copied, the turns are found again in channel 0.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import zlib
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf

from fdeval.engine.run import step_dir
from fdeval.errors import FdevalError
from fdeval.interop.import_stereo import import_recordings
from fdeval.interop.recording import find_turn, match, played_until
from fdeval.interop.runs import launch_args
from fdeval.orchestrator.recorder import read_session_log


def external_copy(run: Path, dest: Path) -> tuple[Path, Path]:
    """(recordings, words) folders made from a live run's sessions."""
    rec, words = dest / "rec", dest / "words"
    rec.mkdir(parents=True)
    words.mkdir()
    for h5 in sorted((run / "sessions").glob("*.h5")):
        shutil.copy(h5.with_suffix(".wav"), rec / f"{h5.stem}.wav")
        rows = [r for r in read_session_log(h5)["model_text"] if not r["dropped"]]
        chunks = [
            {"text": r["text"], "timestamp": [r["play_s"], r["play_s"] + r["duration_s"]]}
            for r in rows
        ]
        (words / f"{h5.stem}.json").write_text(
            json.dumps({"text": " ".join(c["text"] for c in chunks), "chunks": chunks})
        )
    return rec, words


def strip(d: dict) -> dict:
    return {k: v for k, v in d.items() if k not in ("provenance", "model_id")}


def test_imported_recordings_are_transcribed_judged_and_scored(live_run, run_launch, tmp_path):
    run, overrides = live_run
    rec, words = external_copy(run, tmp_path)
    imported = import_recordings(rec, overrides, words)
    assert imported.parent == run.parent and imported.name.startswith("imported-")
    run_launch(tmp_path, *launch_args(overrides))
    for h5 in sorted((run / "sessions").glob("*.h5")):
        live, got = read_session_log(h5), read_session_log(imported / "sessions" / h5.name)
        assert got["attrs"]["imported"] and got["attrs"]["imported_from"] == str(
            (rec / f"{h5.stem}.wav").resolve()
        )
        assert got["attrs"]["model_id"].startswith("imported:")
        for a, b in zip(
            live["turns"], got["turns"], strict=True
        ):  # every turn found where it was played
            assert (b["start_s"], b["end_s"], b["cut_short"]) == pytest.approx(
                (a["start_s"], a["end_s"], a["cut_short"]), abs=0.033
            )
    tr_run, tr_imp = step_dir(run, "transcribe"), step_dir(imported, "transcribe")
    names = sorted(p.name for p in tr_run.glob("*.json"))
    assert names and names == sorted(p.name for p in tr_imp.glob("*.json"))
    for n in names:
        assert strip(json.loads((tr_imp / n).read_text())) == strip(
            json.loads((tr_run / n).read_text())
        )
    v_run, v_imp = step_dir(run, "judge"), step_dir(imported, "judge")
    verdicts = sorted(p.name for p in v_run.glob("*.json"))
    assert verdicts
    for n in verdicts:
        assert strip(json.loads((v_imp / n).read_text())) == strip(
            json.loads((v_run / n).read_text())
        )
    ias = (step_dir(imported, "score") / "ias.md").read_text()
    assert (
        "model_id: imported:" in ias
        and ias.split("| instruction")[1]
        == (step_dir(run, "score") / "ias.md").read_text().split("| instruction")[1]
    )


def one_case(run: Path, tmp: Path, case_id: str) -> tuple[Path, Path, list[str]]:
    rec, words = external_copy(run, tmp)
    for p in [*rec.iterdir(), *words.iterdir()]:
        if p.stem != case_id:
            p.unlink()
    return rec, words, [f"benchmark.cases=[{case_id}]"]


CASE = "fresh_pasta_stop__acknowledge"


def tag(tmp: Path, n: int = 1) -> str:
    """A folder of its own per test (an import's model identity names its source folder)."""
    return f"run_tag=t{zlib.crc32(str(tmp).encode())}-{n}"


def rewrite(wav: Path, fn) -> None:
    x, sr = sf.read(wav, dtype="int16")
    y, sr2 = fn(x, sr)
    sf.write(wav, y, sr2, subtype="PCM_16")


@pytest.mark.parametrize(
    "damage, field",
    [
        (lambda x, sr: (x[:, 1], sr), "'channels'"),
        (lambda x, sr: (x[::2], sr // 2), "'sample_rate'"),
        (lambda x, sr: (x[: sr * 2], sr), "'length'"),
        (
            lambda x, sr: (x[:, ::-1], sr),
            "'channel 0'",
        ),  # channels swapped: the user's turns are not in ch0
    ],
)
def test_bad_recording_is_one_line_naming_file_case_and_field(live_run, tmp_path, damage, field):
    run, overrides = live_run
    rec, words, sel = one_case(run, tmp_path, CASE)
    rewrite(rec / f"{CASE}.wav", damage)
    with pytest.raises(FdevalError) as e:
        import_recordings(rec, [*overrides, *sel, tag(tmp_path)], words)
    msg = str(e.value)
    assert (
        "\n" not in msg and str(rec / f"{CASE}.wav") in msg and repr(CASE) in msg and field in msg
    )


def test_bad_words_and_missing_recordings(live_run, tmp_path):
    run, overrides = live_run
    rec, words, sel = one_case(run, tmp_path, CASE)
    (words / f"{CASE}.json").write_text(json.dumps({"text": "x", "chunks": [{"text": "x"}]}))
    with pytest.raises(FdevalError, match=r"field 'chunks\[0\]'"):
        import_recordings(rec, [*overrides, *sel, tag(tmp_path)], words)
    with pytest.raises(FdevalError, match=r"no recording for case 'fresh_pasta_stop__none'"):
        import_recordings(
            rec,
            [
                *overrides,
                "benchmark.cases=[fresh_pasta_stop__acknowledge,fresh_pasta_stop__none]",
                tag(tmp_path, 2),
            ],
            None,
        )


def test_cli_error_exit_2_no_traceback(live_run, tmp_path):
    run, overrides = live_run
    rec, _, sel = one_case(run, tmp_path, CASE)
    rewrite(rec / f"{CASE}.wav", lambda x, sr: (x[:, 1], sr))
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "fdeval.interop.import_stereo",
            "--recordings",
            str(rec),
            *overrides,
            *sel,
            tag(tmp_path),
        ],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=tmp_path,
    )
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "field 'channels'" in lines[0] and "Traceback" not in proc.stderr


def test_import_refuses_the_live_runs_folder(live_run, tmp_path):
    """The live run's overrides and its folder's tag name its folder: refused, nothing changed."""
    run, overrides = live_run
    rec, words = external_copy(run, tmp_path)
    before = {p: p.stat().st_mtime_ns for p in run.rglob("*") if p.is_file()}
    with pytest.raises(FdevalError, match=r"model\.json: this folder holds model reference:"):
        import_recordings(rec, [*overrides, f"run_tag='{run.name.rsplit('-', 1)[0]}'"], words)
    assert {p: p.stat().st_mtime_ns for p in run.rglob("*") if p.is_file()} == before


def test_channels_are_found_not_copied(live_run, tmp_path):
    """A recording shifted by 0.5 s of leading silence: the turns move with it."""
    run, overrides = live_run
    rec, words, sel = one_case(run, tmp_path, CASE)

    def shift(x, sr):
        return np.concatenate([np.zeros((sr // 2, 2), dtype=x.dtype), x]), sr

    rewrite(rec / f"{CASE}.wav", shift)
    out = import_recordings(rec, [*overrides, *sel, tag(tmp_path)], None)
    live = read_session_log(run / "sessions" / f"{CASE}.h5")["turns"]
    got = read_session_log(out / "sessions" / f"{CASE}.h5")
    assert [t["start_s"] for t in got["turns"]] == pytest.approx(
        [t["start_s"] + 0.5 for t in live], abs=1e-9
    )
    assert got["attrs"]["imported_words"] == "none" and got["model_text"] == []


def test_a_turn_the_user_stopped_early_is_cut_short():
    """A user that yielded half way: found where it starts, cut within one 32 ms frame of where it stopped."""
    sr, frame_n = 16000, 512
    turn = np.random.default_rng(0).normal(0, 0.1, sr).astype(np.float32)
    user = np.concatenate([np.zeros(4800, np.float32), turn[: sr // 2], np.zeros(sr, np.float32)])
    start, _ = find_turn(user, turn, 0)
    assert start == 4800
    end, cut = played_until(user, turn, start, frame_n)
    assert cut and 0 <= end - (4800 + sr // 2) < frame_n
    assert (
        match(user, turn, start, end) > 0.95
    )  # the played half is the turn's (up to a frame past its stop)
    assert match(0.3 * user, turn, start, end) == pytest.approx(
        match(user, turn, start, end)
    )  # at any gain
    assert match(np.roll(user, 3000), turn, start, end) < 0.1
    assert played_until(
        np.concatenate([np.zeros(4800, np.float32), turn]), turn, 4800, frame_n
    ) == (4800 + sr, False)
