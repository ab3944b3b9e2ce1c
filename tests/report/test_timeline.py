"""Timelines, the run index the score step writes, and the static bundle, on real run folders
(tests/report/conftest.py: reference model, offline judges)."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path
from urllib.parse import unquote

import h5py
from PIL import Image

from fdeval.report.bundle import main as bundle_main
from fdeval.report.runview import open_run
from fdeval.report.timeline import DPI, SIZE_IN, phrases, scripted_words, session_log, triggers_of, write_run

PX = (round(SIZE_IN[0] * DPI), round(SIZE_IN[1] * DPI))


def hrefs(page: Path) -> list[str]:
    return [unquote(h) for h in re.findall(r'(?:href|src)="([^"]+)"', page.read_text(encoding="utf-8"))]


def assert_links_resolve(page: Path) -> list[Path]:
    targets = [(page.parent / h).resolve() for h in hrefs(page)]
    missing = [str(t) for t in targets if not t.is_file()]
    assert targets and not missing, missing[:3]
    return targets


def assert_png(path: Path) -> None:
    with Image.open(path) as im:
        im.load()  # decodes every pixel
        assert im.size == PX and im.format == "PNG"
        assert len(set(im.convert("L").resize((64, 28)).get_flattened_data())) > 10  # drawn on, not blank


def test_score_step_writes_a_timeline_per_session_and_an_index(ifd_run, echo_run, tact_run):
    for run in (ifd_run, echo_run, tact_run):  # the engine's hook: no benchmark code
        view = open_run(run)
        index = run / "timelines" / "index.html"
        targets = assert_links_resolve(index)
        for s in view.sessions:
            png = run / "timelines" / f"{s.case_id}.png"
            assert png.resolve() in targets and (run / "sessions" / f"{s.case_id}.wav").resolve() in targets
            assert_png(png)
        assert re.search(r"score: \d+ timelines", (run / "fdeval.log").read_text())
    page = (ifd_run / "timelines" / "index.html").read_text()
    assert "acknowledge=adhere" in page or "acknowledge=not_adhere" in page  # the verdicts are listed


def test_triggers_and_words_sit_on_the_session_clock(ifd_run, echo_run):
    s = open_run(ifd_run).session("bathroom_cleaning_mix__interrupt")
    turns = session_log(s.log)["turns"]
    (t, kind), = triggers_of(s, turns)
    spoken = turns[1]
    assert kind == "interrupt" and spoken["start_s"] < t < spoken["end_s"]
    for s in open_run(echo_run).sessions:  # no transcript format: the user words come from the case's own turns
        turns = session_log(s.log)["turns"]
        words = scripted_words(s, turns)
        first = turns[0]  # the scripted opening message (the policy writes the later turns)
        assert words and all(first["start_s"] <= w["start_s"] <= w["end_s"] <= first["end_s"] for w in words)
        assert {w["speaker"] for w in words} == {"user"}
        assert len(words) == len(s.case.turns[0].words)
    assert phrases([(0.0, "a"), (0.2, "b"), (1.5, "c")]) == [(0.0, "a b"), (1.5, "c")]


def invalid_copy(run: Path, dest: Path) -> Path:
    """A copy of the run tree whose first session is marked invalid (as a broken clock marks it)."""
    out = shutil.copytree(run.parents[2], dest)
    copy = out / run.relative_to(run.parents[2])
    with h5py.File(copy / "sessions" / "fresh_pasta_stop__none.h5", "r+") as f:
        f.attrs["valid"], f.attrs["invalid_reason"] = False, "pacing lag 0.31 s over the 0.1 s bound"
    return copy


def test_an_invalid_session_shows_its_reason(ifd_run, tmp_path):
    run = invalid_copy(ifd_run, tmp_path / "out")
    index = write_run(open_run(run))
    row = next(r for r in index.read_text().split("<tr") if "fresh_pasta_stop__none" in r)
    assert "class=bad" in row and "invalid: pacing lag 0.31 s over the 0.1 s bound" in row
    assert "class=ok" in next(r for r in index.read_text().split("<tr") if "fresh_pasta_stop__acknowledge" in r)
    assert_png(run / "timelines" / "fresh_pasta_stop__none.png")


def test_bundle_of_two_runs_lists_both_per_case_and_opens_from_disk(ifd_run, tmp_path):
    other = invalid_copy(ifd_run, tmp_path / "out")
    out = tmp_path / "bundle"
    assert bundle_main([str(ifd_run), str(other), "--out", str(out)]) == 0
    shutil.rmtree(tmp_path / "out")  # the bundle stands alone: nothing links back into the runs
    labels = sorted(p.name for p in (out / "runs").iterdir())
    assert len(labels) == 2 and labels[1] == labels[0] + "-2"  # same folder name twice: kept apart
    targets = assert_links_resolve(out / "index.html")
    assert all(out.resolve() in t.parents for t in targets)
    for cid in ("fresh_pasta_stop__acknowledge", "fresh_pasta_stop__none", "bathroom_cleaning_mix__interrupt"):
        row = next(r for r in (out / "index.html").read_text().split("<tr") if f"cases/{cid}.html" in r)
        assert all(f"runs/{lb}/{cid}.png" in row and f"runs/{lb}/{cid}.wav" in row for lb in labels)
        page = out / "cases" / f"{cid}.html"
        pics = [t for t in assert_links_resolve(page) if t.suffix == ".png"]
        assert len(pics) == 2
        for p in pics:
            assert_png(p)
    row = next(r for r in (out / "index.html").read_text().split("<tr") if "cases/fresh_pasta_stop__none.html" in r)
    assert "usable" in row and "invalid: pacing lag" in row
    for lb in labels:
        assert_links_resolve(out / "runs" / lb / "index.html")


def test_bundle_of_a_folder_that_is_not_a_run_is_one_line(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "fdeval.report.bundle", str(tmp_path), "--out", str(tmp_path / "b")],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.count("\n") == 1 and "run.json" in proc.stderr and "Traceback" not in proc.stderr


def test_redrawn_only_when_what_it_shows_changed(ifd_run, tmp_path):
    """A second write draws nothing (a relaunch rewrites nothing); a session whose recording
    changed (here: its WAV's write time) is drawn again, and only it."""
    root = ifd_run.parents[2]  # the whole out_root: a run finds its cases three levels up
    shutil.copytree(root, tmp_path / "out", copy_function=shutil.copy2)
    run = tmp_path / "out" / ifd_run.relative_to(root)
    view = open_run(run)
    write_run(view)
    pngs = sorted((run / "timelines").glob("*.png"))
    stamp = {p.name: p.stat().st_mtime_ns for p in (run / "timelines").iterdir()}
    write_run(open_run(run))
    assert {p.name: p.stat().st_mtime_ns for p in (run / "timelines").iterdir()} == stamp
    touched = view.sessions[0]
    touched.wav.touch()
    write_run(open_run(run))
    after = {p.name: p.stat().st_mtime_ns for p in pngs}
    assert {n for n in after if after[n] != stamp[n]} == {f"{touched.case_id}.png"}


def test_a_copied_run_writes_the_same_index(ifd_run, tmp_path):
    """The index names the run by its place under out_root, not by its absolute path: a copied
    (or moved) run is the same finished run, and writing its pages there changes no byte (an
    absolute path made a relaunch of a copied run rewrite index.html)."""
    root = ifd_run.parents[2]
    shutil.copytree(root, tmp_path / "out", copy_function=shutil.copy2)
    run = tmp_path / "out" / ifd_run.relative_to(root)
    write_run(open_run(run))
    page = (run / "timelines" / "index.html").read_text(encoding="utf-8")
    assert page == (ifd_run / "timelines" / "index.html").read_text(encoding="utf-8")
    assert str(tmp_path) not in page and "/".join(run.parts[-3:]) in page
