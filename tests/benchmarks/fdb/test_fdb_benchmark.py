"""`benchmark=fdb`: Full-Duplex-Bench's samples played live, written in FDB's layout, scored.

One real launch (`python -m fdeval.launch benchmark=fdb`, the reference agent, one sample per
task of the embedded set) is shared by the tests. They check that the FDB files a run writes are
what FDB's evaluators read (the statements those evaluators use to find and read a sample, as in
tests/interop/test_fdb.py), that `output.wav` is `input.wav`'s length and time-aligned with it,
that the table's numbers are the per-sample numbers of those files, that a relaunch rewrites
nothing, and that the judged numbers go through fdeval's LLM client to a loopback stand-in
(tests/helpers/fake_openai_server.py: a real HTTP server on 127.0.0.1) with a judge error kept
as an error. The loader's one-line errors for malformed FDB folders are checked table-driven.
"""

from __future__ import annotations

import csv
import json
import math
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf
from helpers import fake_openai_server as oai
from helpers import launching
from helpers.fake_openai_server import fake_openai  # noqa: F401  (a fixture, taken by name)

from fdeval.benchmarks.fdb.benchmark import FullDuplexBench
from fdeval.benchmarks.fdb.layout import read_data_dir
from fdeval.benchmarks.fdb.metrics import Chunk, take_turn, turn_latency_s
from fdeval.engine.run import step_dir
from fdeval.errors import FdevalError
from fdeval.transcript.build import build_transcript


def launch(cwd: Path, *args: str):
    proc = launching.run_launch(list(args), cwd, timeout_s=600)
    assert proc.returncode == 0, f"{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    return proc


@pytest.fixture(scope="module")
def fdb_run(tmp_path_factory) -> tuple[Path, list[str], Path]:
    """(run folder, its overrides, the folder the launch ran in)."""
    tmp = tmp_path_factory.mktemp("fdb")
    overrides = [
        f"out_root={tmp / 'out'}",
        "progress=false",
        "benchmark=fdb",
        "benchmark.n_per_task=1",
    ]
    launch(tmp, *overrides)
    (run,) = [p.parent for p in (tmp / "out" / "fdb").glob("reference/*/run.json")]
    return run, overrides, tmp


def fdb_root(run: Path) -> Path:
    return step_dir(run, "transcribe") / "fdb"


def test_files_are_what_fdbs_evaluators_read(fdb_run):
    run, _, _ = fdb_run
    root = fdb_root(run)
    assert sorted(p.name for p in root.iterdir()) == [
        "backchannel",
        "pause_handling",
        "smooth_turn_taking",
        "user_interruption",
        "v15_user_backchannel",
        "v15_user_interruption",
    ]
    for task, annotation in (
        ("smooth_turn_taking", "turn_taking.json"),
        ("pause_handling", "pause.json"),
        ("user_interruption", "interrupt.json"),
    ):
        folder = root / task
        for sample in os.listdir(folder):  # FDB's evaluators list every entry of the task folder
            files = os.listdir(folder / sample)
            assert sample.isdigit() and annotation in files, (task, files)
            with open(folder / sample / "output.json") as f:
                out = json.load(f)
            assert isinstance(out["text"], str)
            for c in out["chunks"]:
                assert isinstance(c["text"], str) and len(c["timestamp"]) == 2
            x_in, sr_in = sf.read(folder / sample / "input.wav")
            x_out, sr_out = sf.read(folder / sample / "output.wav")
            assert x_in.ndim == x_out.ndim == 1 and sr_in == sr_out
            assert len(x_in) == len(x_out)  # time-synchronous: one clock, one length
    # backchannel: FDB's evaluator keeps the digit-named folders, numbered from 0
    assert sorted(p.name for p in (root / "backchannel").iterdir() if p.name.isdigit()) == ["0"]
    v15 = sorted(os.listdir(root / "v15_user_interruption" / "1"))
    for name in ("input.wav", "clean_input.wav", "output.wav", "clean_output.wav", "metadata.json"):
        assert name in v15


def test_output_is_the_model_channel_from_the_samples_first_frame(fdb_run):
    run, _, _ = fdb_run
    t = json.loads(
        (step_dir(run, "transcribe") / "smooth_turn_taking-1.json").read_text(encoding="utf-8")
    )
    x, sr = sf.read(run / "sessions" / "smooth_turn_taking-1.wav", dtype="int16")
    out, _ = sf.read(fdb_root(run) / "smooth_turn_taking" / "1" / "output.wav", dtype="int16")
    inp, _ = sf.read(fdb_root(run) / "smooth_turn_taking" / "1" / "input.wav", dtype="int16")
    i0 = int(round(t["start_s"] * sr))
    assert i0 > 0  # the sample started one frame into the session: the cut is not a no-op
    np.testing.assert_array_equal(out, x[i0 : i0 + len(out), 1])
    np.testing.assert_array_equal(inp, x[i0 : i0 + len(inp), 0])
    # the words in output.json are the model's text stream on the sample's clock
    words = json.loads((fdb_root(run) / "smooth_turn_taking" / "1" / "output.json").read_text())
    session_words = [w for w in t["transcript"]["words"] if w["speaker"] == "model"]
    assert [c["text"] for c in words["chunks"]] == [w["text"] for w in session_words]
    assert math.isclose(
        words["chunks"][0]["timestamp"][0], session_words[0]["start_s"] - t["start_s"], abs_tol=1e-3
    )


def test_interruption_output_json_is_cropped_as_fdbs_asr_and_the_full_list_kept(fdb_run):
    run, _, _ = fdb_run
    d = fdb_root(run) / "user_interruption" / "1"
    end = json.loads((d / "interrupt.json").read_text())[0]["timestamp"][1]
    cropped = json.loads((d / "output.json").read_text())["chunks"]
    full = json.loads((d / "output_full.json").read_text())["chunks"]
    assert cropped and all(c["timestamp"][0] >= end for c in cropped)
    assert len(full) > len(cropped)  # the reference agent answered before the interruption too
    assert full[-len(cropped) :] == cropped


def _rows(path: Path) -> list[dict]:
    with open(path, newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))


def test_table_numbers_are_the_fdb_files_numbers(fdb_run):
    run, _, _ = fdb_run
    scores = step_dir(run, "score")
    samples = {r["case_id"]: r for r in _rows(scores / "fdb_samples.csv")}
    assert set(samples) == {
        "smooth_turn_taking-1",
        "pause_handling-1",
        "user_interruption-1",
        "backchannel-0",
        "v15_user_interruption-1",
        "v15_user_backchannel-1",
    }
    root = fdb_root(run)
    for task, cid, ref_key in (
        ("smooth_turn_taking", "smooth_turn_taking-1", ("turn_taking.json", 0)),
        ("user_interruption", "user_interruption-1", ("interrupt.json", 1)),
    ):
        d = root / task / "1"
        chunks = [
            Chunk(c["text"], *c["timestamp"])
            for c in json.loads((d / "output.json").read_text())["chunks"]
        ]
        ref = json.loads((d / ref_key[0]).read_text())[0]["timestamp"][ref_key[1]]
        row = samples[cid]
        assert int(row["took_turn"]) == int(take_turn(chunks))
        assert float(row["latency_s"]) == pytest.approx(turn_latency_s(chunks, ref), abs=1e-6)
    tasks = _rows(scores / "fdb_tasks.csv")
    tor = [r for r in tasks if r["task"] == "smooth_turn_taking" and r["key"] == "took_turn"]
    assert len(tor) == 1 and float(tor[0]["value"]) == float(
        samples["smooth_turn_taking-1"]["took_turn"]
    )
    # an offline judge rates nothing: no number, and the table says why
    (rating,) = [r for r in tasks if r["key"] == "rating"]
    assert rating["value"] == "" and rating["n"] == "0" and "not_rated" in rating["note"]
    for r in tasks:  # every row says what made it
        assert r["model_id"].startswith("reference:") and r["run_id"] and r["metric_version"]


def test_relaunch_rewrites_nothing(fdb_run):
    run, overrides, cwd = fdb_run
    kept = {
        p: p.stat().st_mtime_ns
        for p in [*run.glob("sessions/*"), *step_dir(run, "transcribe").rglob("*")]
        if p.is_file()
    }
    launch(cwd, *overrides)
    assert {p: p.stat().st_mtime_ns for p in kept} == kept
    status = launch(cwd, *overrides, "stage=status").stdout
    assert "step clean (run) clean_sessions: 2/2 recorded" in status, status


def test_judged_numbers_go_through_the_llm_client_and_errors_stay_errors(fdb_run, fake_openai):
    run, overrides, cwd = fdb_run

    def answer(body):
        system = body["messages"][0]["content"]
        if "C_RESPOND" in system:
            return oai.text('{"reason": "it answers the new request", "category": "C_RESPOND"}')
        return oai.error(400, "invalid_request_error")  # fails at once: an error, never a rating

    fake_openai.responder = answer
    judge = f"{{backend: openai, base_url: '{fake_openai.base_url}'}}"
    launch(
        cwd,
        *overrides,
        f"benchmark.rater={judge}",
        f"benchmark.behaviour_judge={judge}",
        "stage.steps=[rate,score]",
    )
    rates = step_dir(run, "rate")
    got = {p.name: json.loads(p.read_text()) for p in rates.glob("*.json")}
    assert got["v15_user_interruption-1@behaviour.json"]["value"] == "C_RESPOND"
    bad = got.get("user_interruption-1@relevance.json") or got.get(
        "user_interruption-1@relevance.error.json"
    )
    assert bad is not None and bad.get("value") is None and bad.get("status") == "error"
    sent = [r.body for r in fake_openai.chat_requests]
    assert {b["model"] for b in sent} == {"gpt-4-turbo", "gpt-4o-2024-08-06"}  # FDB's judges


def _sample(root: Path, task: str, n: str, annotation: dict | list | None, name: str) -> Path:
    d = root / task / n
    d.mkdir(parents=True)
    sf.write(d / "input.wav", np.zeros(16000 * 4, dtype=np.float32), 16000, subtype="PCM_16")
    if annotation is not None:
        (d / name).write_text(json.dumps(annotation))
    return d


def _v15_sample(root: Path, folder: str) -> None:
    meta = {"context_text": "a", "current_turn_text": "b", "timestamps": [1.0, 1.5]}
    d = _sample(root, folder, "1", meta, "metadata.json")
    sf.write(d / "clean_input.wav", np.zeros(16000 * 4, dtype=np.float32), 16000)


BAD_LAYOUTS = [
    # (case, task folder, annotation file, annotation, expected words in the message)
    (
        "bool time",
        "turns",
        "turn_taking.json",
        [{"text": "x", "timestamp": [True, 2.0]}],
        "[0].timestamp[0]",
    ),
    (
        "NaN time",
        "turns",
        "turn_taking.json",
        [{"text": "x", "timestamp": [float("nan"), 2.0]}],
        "[0].timestamp[0]",
    ),
    (
        "end before start",
        "pauses",
        "pause.json",
        [{"text": "x", "timestamp": [2.0, 1.0]}],
        "before its start",
    ),
    (
        "past the end",
        "pauses",
        "pause.json",
        [{"text": "x", "timestamp": [1.0, 9.0]}],
        "past the end",
    ),
    (
        "no context",
        "inter",
        "interrupt.json",
        [{"interrupt": "x", "timestamp": [1.0, 2.0]}],
        "[0].context",
    ),
    ("not a list", "inter", "interrupt.json", {"context": "x"}, "[0]"),
]


@pytest.mark.parametrize(
    "case,folder,name,annotation,expect", BAD_LAYOUTS, ids=[b[0] for b in BAD_LAYOUTS]
)
def test_malformed_samples_are_one_line_errors(tmp_path, case, folder, name, annotation, expect):
    _sample(tmp_path, folder, "1", annotation, name)
    with pytest.raises(FdevalError) as e:
        read_data_dir(tmp_path, None, {})
    msg = str(e.value)
    assert "\n" not in msg and expect in msg and f"{folder}-1" in msg and name in msg, msg


def test_stereo_input_and_unnamed_v15_folder_are_refused(tmp_path):
    d = _sample(
        tmp_path / "a", "pauses", "1", [{"text": "x", "timestamp": [1.0, 2.0]}], "pause.json"
    )
    sf.write(d / "input.wav", np.zeros((16000, 2), dtype=np.float32), 16000)
    with pytest.raises(FdevalError, match="channels"):
        read_data_dir(tmp_path / "a", None, {})
    _v15_sample(tmp_path / "b", "mine")
    with pytest.raises(FdevalError, match="benchmark.task_of"):
        read_data_dir(tmp_path / "b", None, {})
    got = read_data_dir(tmp_path / "b", None, {"mine": "v15_talking_to_other"})
    assert [s.case_id for s in got] == ["mine-1"]
    assert got[0].clean_audio_path == "mine/1/clean_input.wav"


def test_fdb_folders_of_a_run_import_back_to_the_same_numbers(fdb_run, tmp_path):
    """The run's FDB-layout folders, imported as FDB's own samples (no fdeval.json: the cases come
    from the task files, v1.5's clean pair becomes each case's clean session), score the same
    sample for sample."""
    run, _, _ = fdb_run
    out = tmp_path / "imported"
    cmd = [sys.executable, "-m", "fdeval.interop.fdb", "import", str(fdb_root(run))]
    args = ["--stages", "transcribe,rate,score", f"out_root={out}", "progress=false"]
    proc = subprocess.run([*cmd, *args], cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    (imported,) = [p.parent for p in out.glob("fdb/reference/*/run.json")]
    assert sorted(p.name for p in (imported / "clean_sessions").glob("*.h5")) == [
        "v15_user_backchannel-1.h5",
        "v15_user_interruption-1.h5",
    ]
    keep = ("took_turn", "latency_s", "n_backchannels", "frequency_hz", "jsd")
    keep += ("stop_latency_s", "response_latency_s")
    live = {r["case_id"]: r for r in _rows(step_dir(run, "score") / "fdb_samples.csv")}
    back = {r["case_id"]: r for r in _rows(step_dir(imported, "score") / "fdb_samples.csv")}
    assert set(back) == set(live)
    for cid, r in live.items():
        assert {k: r.get(k) for k in keep} == {k: back[cid].get(k) for k in keep}, cid


def test_a_cropped_import_refuses_an_exact_transcript_outside_fdb(fdb_run, tmp_path):
    """FDB's own user-interruption sample has only the words after the interruption (no
    output_full.json): benchmark=fdb reads it (its numbers need no more), any other reader of the
    session's text stream is refused in one line."""
    run, _, _ = fdb_run
    root = tmp_path / "ui"
    shutil.copytree(fdb_root(run) / "user_interruption", root)
    (root / "1" / "output_full.json").unlink()
    cmd = [sys.executable, "-m", "fdeval.interop.fdb", "import", str(root)]
    proc = subprocess.run(
        [*cmd, f"out_root={tmp_path / 'out'}", "progress=false"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    (h5,) = (tmp_path / "out").glob("fdb/reference/*/sessions/ui-1.h5")
    (case,) = FullDuplexBench(data_dir=str(root)).load(root)
    marks = [(m.kind, m.at_s) for m in case.data.triggers[0]]  # what the timelines draw
    assert marks == [
        ("interruption", case.data.reference_s[0]),
        ("interruption end", case.data.reference_s[1]),
    ]
    with pytest.raises(FdevalError, match="imported_words") as e:
        build_transcript(case, h5)
    assert "\n" not in str(e.value)
    words = [w for w in build_transcript(case, h5, cropped_ok=True).words if w.speaker == "model"]
    assert words and min(w.start_s for w in words) >= case.data.reference_s[1] - 0.05


def test_both_downloads_side_by_side_are_found_two_levels_down(tmp_path):
    _sample(
        tmp_path / "v1_0",
        "candor_turn_taking",
        "3",
        [{"text": "x", "timestamp": [1.0, 2.0]}],
        "turn_taking.json",
    )
    _v15_sample(tmp_path / "v1_5", "user_backchannel")
    got = read_data_dir(tmp_path, None, {})
    assert [(s.case_id, s.task) for s in got] == [
        ("candor_turn_taking-3", "smooth_turn_taking"),
        ("user_backchannel-1", "v15_user_backchannel"),
    ]
