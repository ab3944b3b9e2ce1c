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
import numpy as np
from PIL import Image

from fdeval.report.bundle import main as bundle_main
from fdeval.report.runnames import slug
from fdeval.report.runview import open_run
from fdeval.report.timeline import (
    BARGE_C,
    DPI,
    LANES,
    LEFT,
    RIGHT,
    SIZE_IN,
    TURN_C,
    phrases,
    scripted_words,
    session_log,
    session_span,
    timeline_axes,
    triggers_of,
    write_run,
    x_px,
)

PX = (round(SIZE_IN[0] * DPI), round(SIZE_IN[1] * DPI))


def hrefs(page: Path) -> list[str]:
    return [
        unquote(h) for h in re.findall(r'(?:href|src)="([^"]+)"', page.read_text(encoding="utf-8"))
    ]


def assert_links_resolve(page: Path) -> list[Path]:
    targets = [(page.parent / h).resolve() for h in hrefs(page)]
    missing = [str(t) for t in targets if not t.is_file()]
    assert targets and not missing, missing[:3]
    return targets


def assert_png(path: Path) -> None:
    with Image.open(path) as im:
        im.load()  # decodes every pixel
        assert im.size == PX and im.format == "PNG"
        assert (
            len(set(im.convert("L").resize((64, 28)).get_flattened_data())) > 10
        )  # drawn on, not blank


def test_score_step_writes_a_timeline_per_session_and_an_index(ifd_run, echo_run, tact_run):
    for run in (ifd_run, echo_run, tact_run):  # the engine's hook: no benchmark code
        view = open_run(run)
        index = run / "timelines" / "index.html"
        targets = assert_links_resolve(index)
        for s in view.sessions:
            png = run / "timelines" / f"{s.case_id}.png"
            assert (
                png.resolve() in targets
                and (run / "sessions" / f"{s.case_id}.wav").resolve() in targets
            )
            assert_png(png)
        assert re.search(r"score: \d+ timelines", (run / "fdeval.log").read_text())
    page = (ifd_run / "timelines" / "index.html").read_text()
    assert (
        "acknowledge=adhere" in page or "acknowledge=not_adhere" in page
    )  # the verdicts are listed


def test_triggers_and_words_sit_on_the_session_clock(ifd_run, echo_run):
    s = open_run(ifd_run).session("bathroom_cleaning_mix__interrupt")
    turns = session_log(s.log)["turns"]
    ((t, kind),) = triggers_of(s, turns)
    spoken = turns[1]
    assert kind == "interrupt" and spoken["start_s"] < t < spoken["end_s"]
    for s in open_run(
        echo_run
    ).sessions:  # no transcript format: the user words come from the case's own turns
        turns = session_log(s.log)["turns"]
        words = scripted_words(s, turns)
        first = turns[0]  # the scripted opening message (the policy writes the later turns)
        assert words and all(
            first["start_s"] <= w["start_s"] <= w["end_s"] <= first["end_s"] for w in words
        )
        assert {w["speaker"] for w in words} == {"user"}
        assert len(words) == len(s.case.turns[0].words)
    assert phrases([(0.0, "a"), (0.2, "b"), (1.5, "c")]) == [(0.0, "a b"), (1.5, "c")]


def invalid_copy(run: Path, dest: Path) -> Path:
    """A copy of the run tree whose first session is marked invalid (as a broken clock marks it)."""
    out = shutil.copytree(run.parents[2], dest)
    copy = out / run.relative_to(run.parents[2])
    with h5py.File(copy / "sessions" / "fresh_pasta_stop__none.h5", "r+") as f:
        f.attrs["valid"], f.attrs["invalid_reason"] = (
            False,
            "pacing lag 0.31 s over the 0.1 s bound",
        )
    return copy


def test_an_invalid_session_shows_its_reason(ifd_run, tmp_path):
    run = invalid_copy(ifd_run, tmp_path / "out")
    index = write_run(open_run(run))
    row = next(r for r in index.read_text().split("<tr") if "fresh_pasta_stop__none" in r)
    assert "class=bad" in row and "invalid: pacing lag 0.31 s over the 0.1 s bound" in row
    assert "class=ok" in next(
        r for r in index.read_text().split("<tr") if "fresh_pasta_stop__acknowledge" in r
    )
    assert_png(run / "timelines" / "fresh_pasta_stop__none.png")


def test_bundle_of_two_runs_lists_both_per_case_and_opens_from_disk(ifd_run, tmp_path):
    other = invalid_copy(ifd_run, tmp_path / "out")
    out = tmp_path / "bundle"
    assert bundle_main([str(ifd_run), str(other), "--out", str(out)]) == 0
    shutil.rmtree(tmp_path / "out")  # the bundle stands alone: nothing links back into the runs
    labels = sorted(p.name for p in (out / "runs").iterdir())
    # the runs differ in no setting: named by their run folder, the second one "#2", kept apart
    assert len(labels) == 2 and labels[1] == labels[0] + "_2" and labels[0] == slug(ifd_run.name)
    targets = assert_links_resolve(out / "index.html")
    assert all(out.resolve() in t.parents for t in targets)
    for cid in (
        "fresh_pasta_stop__acknowledge",
        "fresh_pasta_stop__none",
        "bathroom_cleaning_mix__interrupt",
    ):
        row = next(
            r for r in (out / "index.html").read_text().split("<tr") if f"cases/{cid}.html" in r
        )
        assert all(f"runs/{lb}/{cid}.png" in row and f"runs/{lb}/{cid}.wav" in row for lb in labels)
        page = out / "cases" / f"{cid}.html"
        pics = [t for t in assert_links_resolve(page) if t.suffix == ".png"]
        assert len(pics) == 2
        for p in pics:
            assert_png(p)
    row = next(
        r
        for r in (out / "index.html").read_text().split("<tr")
        if "cases/fresh_pasta_stop__none.html" in r
    )
    assert "usable" in row and "invalid: pacing lag" in row
    for lb in labels:
        assert_links_resolve(out / "runs" / lb / "index.html")


def test_bundle_of_a_folder_that_is_not_a_run_is_one_line(tmp_path):
    proc = subprocess.run(
        [sys.executable, "-m", "fdeval.report.bundle", str(tmp_path), "--out", str(tmp_path / "b")],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 2 and proc.stdout == ""
    assert (
        proc.stderr.count("\n") == 1
        and "run.json" in proc.stderr
        and "Traceback" not in proc.stderr
    )


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


def columns_of(png: Path, color: str, lane: int) -> list[float]:
    """The centres of the runs of pixel columns where `color` is drawn (exactly) in a lane."""
    rgb = tuple(int(color[i : i + 2], 16) for i in (1, 3, 5))
    with Image.open(png) as im:
        a = np.asarray(im.convert("RGB"))
    top, bottom = LANES[
        lane
    ]  # its middle rows: no label (a turn's at the foot, the onset's marker at the top)
    band = a[int(top + 0.2 * (bottom - top)) : int(top + 0.7 * (bottom - top))]
    hit = np.flatnonzero((band == rgb).all(axis=2).any(axis=0))
    runs = np.split(hit, np.flatnonzero(np.diff(hit) > 1) + 1) if len(hit) else []
    return [float(r.mean()) + 0.5 for r in runs]


def test_a_timeline_matches_its_log(ifd_run):
    """The PNG the score step drew puts each turn start and each barge-in's actual injection at
    the pixel of its time in the log (within a pixel), on the axis it records (left and right as
    the review app's playhead reads them, 0 to the session's duration)."""
    checked = 0
    for s in open_run(ifd_run).sessions:
        png = ifd_run / "timelines" / f"{s.case_id}.png"
        axes = timeline_axes(png)
        assert axes == {"left": LEFT, "right": RIGHT, "x0_s": 0.0, "x1_s": session_span(s)}
        turns = session_log(s.log)["turns"]
        starts = columns_of(
            png, TURN_C, 0
        )  # a barge-in starts where it was injected: its red line covers the green
        taken = [t for t in turns if t["turn_type"] != "barge-in"]
        assert len(starts) == len(taken)
        for t, x in zip(taken, starts):
            assert abs(x - float(x_px(float(t["start_s"]), axes["x1_s"]))) <= 1.0
        barges = columns_of(png, BARGE_C, 1)
        for t in turns:
            if t["turn_type"] == "barge-in":
                want = float(x_px(float(t["actual_s"]), axes["x1_s"]))
                assert any(abs(x - want) <= 1.0 for x in barges), (s.case_id, want, barges)
                checked += 1
    assert checked >= 1


def test_bundle_of_a_sweep_names_its_columns_by_the_delay_and_holds_no_local_path(
    delay_sweep, tmp_path
):
    """The two points of a delay sweep are `delay 1 s` and `delay 3 s` (columns, pages and folders);
    no page or picture holds a path of this machine, even a reason that names one; a case's
    timelines share one time axis, so a moment common to both runs is at the same pixel."""
    root = delay_sweep[0].parents[2]
    tree = Path(shutil.copytree(root, tmp_path / "out"))
    runs = [tree / r.relative_to(root) for r in delay_sweep]
    wav = runs[1] / "sessions" / "bathroom_cleaning_mix__interrupt.wav"
    with h5py.File(
        wav.with_suffix(".h5"), "r+"
    ) as f:  # a reason naming a local file, as an error may
        f.attrs["valid"], f.attrs["invalid_reason"] = False, f"clock broken, see {wav}"
    out = tmp_path / "bundle"
    assert bundle_main([str(r) for r in runs] + ["--out", str(out)]) == 0
    index = (out / "index.html").read_text(encoding="utf-8")
    heads = re.findall(r"<th><a href=\"([^\"]+)\">([^<]+)</a></th>", index)
    assert heads == [
        ("runs/delay_1_s/index.html", "delay 1 s"),
        ("runs/delay_3_s/index.html", "delay 3 s"),
    ]
    assert "&lt;out_root&gt;/instructfd/reference/" in index  # the reason, its path made portable
    local = [str(p).encode() for p in {tmp_path, tmp_path.resolve(), root, root.resolve()}]
    for f in out.rglob("*"):
        if f.is_file():
            data = f.read_bytes()
            assert not any(p in data for p in local), f"{f.relative_to(out)} holds a local path"
    views = [open_run(r) for r in runs]
    differ = []
    for cid in ("fresh_pasta_stop__acknowledge", "bathroom_cleaning_mix__interrupt"):
        page = (out / "cases" / f"{cid}.html").read_text(encoding="utf-8")
        assert page.index("<h2>delay 1 s</h2>") < page.index("<h2>delay 3 s</h2>")
        pngs = [out / "runs" / f / f"{cid}.png" for f in ("delay_1_s", "delay_3_s")]
        spans = [session_span(v.session(cid)) for v in views]
        differ.append(spans[0] != spans[1])  # drawn alone, their axes would differ
        assert [timeline_axes(p) for p in pngs] == [
            {"left": LEFT, "right": RIGHT, "x0_s": 0.0, "x1_s": max(spans)}
        ] * 2
        first = [
            columns_of(p, TURN_C, 0)[0] for p in pngs
        ]  # the first turn starts at the same time in both
        assert abs(first[0] - first[1]) <= 1.0
    assert any(differ)  # the later barge-in made a longer session
