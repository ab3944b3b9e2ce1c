"""A corpus in the generic layout, written here (a TextGrid with a tier per speaker beside two mono
WAVs at 16 and 24 kHz, the speech from espeak-ng), imported end to end by the command: it finds the
planted decision points, writes the importer's inputs, leaves the unlabelled point out and imports
the rest as episodes that `load_episodes` reads back."""

from __future__ import annotations

import csv
import json

import pytest
import soundfile as sf
from helpers.launching import run_launch
from helpers.tact_corpus import labels_for, planned_conversation, write_audio, write_textgrid

from fdeval.benchmarks.tact.benchmark import Tact
from fdeval.benchmarks.tact.corpus.__main__ import main
from fdeval.benchmarks.tact.episodes import load_episodes


def _rows(path):
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    p = planned_conversation()
    corpus = tmp_path_factory.mktemp("corpus")
    out = tmp_path_factory.mktemp("out")
    write_audio(corpus / "talks" / "call1_A.wav", p.channel(0), 16000)
    write_audio(corpus / "talks" / "call1_B.wav", p.channel(1, 24000), 24000)
    write_textgrid(
        corpus / "talks" / "call1.TextGrid", {"Ann": p.words(0), "Bea": p.words(1)}, p.duration_s
    )
    assert (
        main(["folder", str(corpus), str(out)]) == 0
    )  # first pass: points only, for the annotators
    points = _rows(out / "decision_points.jsonl")
    labels = out.parent / "labels.jsonl"
    labels.write_text("".join(json.dumps(r) + "\n" for r in labels_for(points, skip=1)))
    assert main(["folder", str(corpus), str(out), "--labels", str(labels)]) == 0
    (root,) = (out / "data").iterdir()
    return p, corpus, out, points, labels, root


def test_points_found_are_the_planted_ones(run):
    p, corpus, out, points, *_ = run
    got = [(r["focal_channel"], r["decision_s"], r["category"]) for r in points]
    assert got == [(c, round(t, 4), k) for c, t, k in p.points()]
    inter = next(r for r in points if r["category"] == "user_interruption")
    assert (
        inter["context_s"] > 8.0 and -inter["context_s"] < inter["interruption"]["prompt_end_s"] < 0
    )
    assert all(r["id"].startswith("call1.c") and r["audio"] == "audio/call1.wav" for r in points)


def test_conversation_written_at_16k_with_its_original_rates(run):
    p, corpus, out, *_ = run
    (conv,) = _rows(out / "conversations.jsonl")
    assert [c["sample_rate_hz"] for c in conv["channels"]] == [16000, 24000]
    assert [c["speaker"]["id"] for c in conv["channels"]] == ["call1-A", "call1-B"]
    assert conv["sample_rate_hz"] == 16000 and conv["speech"] == "words" and conv["points"] == 6
    info = sf.info(str(out / conv["audio"]))
    assert (info.samplerate, info.channels) == (16000, 2)
    words = json.loads((out / conv["words"]).read_text())
    assert {w["channel"] for w in words} == {0, 1} and words[0]["text"] == "So"


def test_episodes_round_trip_and_unlabelled_left_out(run):
    p, corpus, out, points, labels, root = run
    eps = {e.episode_id: e for e in load_episodes(root)}
    first = points[0]["id"]
    assert sorted(eps) == sorted(r["id"] for r in points[1:])  # the first point had no labels
    assert (out / "unlabelled.txt").read_text() == f"{first}\n"
    assert [r["episode_id"] for r in _rows(out / "annotations.jsonl")] == [
        r["id"] for r in points[1:]
    ]
    for r in points[1:]:
        e = eps[r["id"]]
        assert e.category == r["category"] and e.focal_channel == r["focal_channel"]
        assert e.source == "import:call1.wav" and e.speaker_id == r["speaker"]["id"]
        assert e.history and e.history[-1].end_s <= 0.0  # the transcript before the point
        assert e.annotations.labels[0] in ("hold", "bck", "ans")
        assert e.human is not None  # the other channel after the point, measured
    inter = next(e for e in eps.values() if e.category == "user_interruption")
    assert [t.kind for t in inter.replay] == ["take-turn", "barge-in"]
    bck = next(e for e in eps.values() if e.category == "backchanneling")
    assert bck.human.onset_s == pytest.approx(
        -0.3, abs=0.1
    )  # the planted "Wow." 0.3 s before the point


def test_the_benchmark_loads_the_rows(run, tmp_path):
    p, corpus, out, points, labels, root = run
    bench = Tact(source="import", corpus=str(out / "annotations.jsonl"), context_s=8.0, repeats=1)
    assert len(bench.load(root)) == len(points) - 1


def test_the_imported_corpus_runs_and_scores(run, tmp_path):
    """The annotation file the command wrote, launched as TACT's import source: every labelled point
    is a session of the reference model, measured, and in the composite table."""
    p, corpus, out, points, labels, root = run
    proc = run_launch(
        [
            f"out_root={tmp_path / 'outputs'}",
            "progress=false",
            "benchmark=tact",
            "benchmark.source=import",
            f"benchmark.corpus={out / 'annotations.jsonl'}",
            "benchmark.repeats=1",
            "benchmark.n_resamples=200",
        ],
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    (run_dir,) = (tmp_path / "outputs" / "tact" / "reference").iterdir()
    assert sorted(f.stem for f in (run_dir / "sessions").glob("*.h5")) == sorted(
        f"{r['id']}__r0" for r in points[1:]
    )
    (episodes_csv,) = (run_dir / "scores").rglob("tact_episodes.csv")
    with episodes_csv.open() as f:
        rows = list(csv.DictReader(f))
    assert sorted(r["episode_id"] for r in rows) == sorted(r["id"] for r in points[1:])
    (composite,) = (run_dir / "scores").rglob("tact_composite.csv")
    assert "reference" in composite.read_text()


def test_rerun_with_the_same_labels_imports_nothing_new(run, capsys):
    p, corpus, out, points, labels, root = run
    before = {f: f.stat().st_mtime_ns for f in root.rglob("*") if f.is_file()}
    assert main(["folder", str(corpus), str(out), "--labels", str(labels)]) == 0
    assert "0 episode(s) imported now" in capsys.readouterr().out
    assert {f: f.stat().st_mtime_ns for f in root.rglob("*") if f.is_file()} == before


def test_a_bad_labels_file_is_one_line_and_exit_2(run, tmp_path, capsys):
    p, corpus, out, points, *_ = run
    bad = tmp_path / "labels.jsonl"
    rows = labels_for(points, skip=0)
    rows[2]["id"] = "call1.c0.99999999"
    bad.write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert main(["folder", str(corpus), str(out), "--labels", str(bad)]) == 2
    err = capsys.readouterr().err.strip()
    assert (
        "\n" not in err
        and f"{bad}:3: field 'id': no decision point has id 'call1.c0.99999999'" in err
    )


def test_command_errors_are_one_line(tmp_path, capsys):
    assert main(["nosuch", str(tmp_path), str(tmp_path / "o")]) == 2
    assert (
        "unknown corpus recipe 'nosuch'; valid: ami, candor, folder, otospeech, seamless, sssd"
        in capsys.readouterr().err
    )
    assert main(["folder", str(tmp_path), str(tmp_path / "o")]) == 2
    assert "no conversation in the folder layout here" in capsys.readouterr().err
