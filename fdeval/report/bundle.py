"""`python -m fdeval.report.bundle RUN_DIR [RUN_DIR ...] --out DIR`: a static HTML bundle to share.

Every session of every run gets its timeline PNG (drawn from the run folder as it is now) and a
copy of its stereo WAV; `DIR/index.html` lists the cases with the runs side by side (state,
results, links), `DIR/cases/<case>.html` shows one case's timelines of every run one under the
other with their audio, and `DIR/runs/<run>/index.html` is one run's table. Links are relative,
so the folder opens from disk in a browser with no server, and can be zipped and sent. Any
benchmark (runs of several benchmarks may share a bundle; cases are matched by id). A user
error prints one line and exits 2.
"""

from __future__ import annotations

import argparse
import html
import re
import shutil
import sys
from pathlib import Path
from urllib.parse import quote

from fdeval.errors import FdevalError
from fdeval.report.runview import RunView, SessionView, open_run
from fdeval.report.timeline import link, render, run_line, run_table, summary, write_page

e = html.escape


def run_label(view: RunView, taken: set[str]) -> str:
    """A folder name for the run inside the bundle: benchmark-model-runfolder, made unique."""
    base = re.sub(r"[^A-Za-z0-9._-]+", "_", f"{view.benchmark}-{view.model}-{view.run_dir.name}")
    label, i = base, 2
    while label in taken:
        label, i = f"{base}-{i}", i + 1
    taken.add(label)
    return label


def _href(*parts: str) -> str:
    return "/".join(quote(p) for p in parts)


def _cell(s: SessionView | None, label: str) -> str:
    """One run's column of a case row in the bundle's index."""
    if s is None:
        return "<td class=muted>not in this run</td>"
    state = e(s.state + (f": {s.reason}" if s.reason else ""))
    links = link(_href("runs", label, f"{s.case_id}.png"), "PNG")
    if s.wav is not None:
        links += " · " + link(_href("runs", label, f"{s.case_id}.wav"), "WAV")
    return f"<td class={'ok' if s.state == 'usable' else 'bad'}>{state}<br>{e(summary(s, 6))}<br>{links}</td>"


def write_bundle(run_dirs: list[Path], out: Path) -> Path:
    views = [open_run(d) for d in run_dirs]
    out.mkdir(parents=True, exist_ok=True)
    taken: set[str] = set()
    labels = [run_label(v, taken) for v in views]
    for v, label in zip(views, labels):
        d = out / "runs" / label
        d.mkdir(parents=True, exist_ok=True)
        for s in v.sessions:
            render(s, d / f"{s.case_id}.png")
            if s.wav is not None:
                shutil.copy2(s.wav, d / f"{s.case_id}.wav")
        rows = [(s, _href(f"{s.case_id}.png"), _href(f"{s.case_id}.wav") if s.wav else None) for s in v.sessions]
        run_table(d / "index.html", f"{v.benchmark} · {v.model} · {v.run_dir.name}", v, rows)
    case_ids = list(dict.fromkeys(s.case_id for v in views for s in v.sessions))
    by_run = [{s.case_id: s for s in v.sessions} for v in views]
    (out / "cases").mkdir(exist_ok=True)
    for cid in case_ids:
        _case_page(out / "cases" / f"{cid}.html", cid, views, labels, by_run)
    head = "".join(f"<th><a href=\"{_href('runs', lb, 'index.html')}\">{e(lb)}</a></th>" for lb in labels)
    body = []
    for cid in case_ids:
        first = next(r[cid] for r in by_run if cid in r)
        cells = "".join(_cell(r.get(cid), lb) for r, lb in zip(by_run, labels))
        body.append(f"<tr><td><a href=\"{_href('cases', cid + '.html')}\">{e(cid)}</a></td>"
                    f"<td>{e(first.case.scenario or '')}</td>{cells}</tr>")
    write_page(out / "index.html", "fdeval bundle", [
        "<p class=muted>" + "<br>".join(e(f"{lb}: {run_line(v)}") for v, lb in zip(views, labels)) + "</p>",
        f"<table><tr><th>case</th><th>scenario</th>{head}</tr>", *body, "</table>"])
    return out / "index.html"


def _case_page(path: Path, cid: str, views: list[RunView], labels: list[str], by_run: list[dict]) -> None:
    parts = ['<p><a href="../index.html">all cases</a></p>']
    for v, lb, r in zip(views, labels, by_run):
        s = r.get(cid)
        parts.append(f"<h2>{e(lb)}</h2>")
        if s is None:
            parts.append("<p class=muted>not in this run</p>")
            continue
        parts.append(f"<p>{e(s.state + (': ' + s.reason if s.reason else ''))} · {e(summary(s, 12))}</p>")
        parts.append(f'<img src="{_href("..", "runs", lb, cid + ".png")}" alt="timeline of {e(cid)} in {e(lb)}">')
        if s.wav is not None:
            parts.append(f'<p><audio controls preload=none src="{_href("..", "runs", lb, cid + ".wav")}"></audio></p>')
    write_page(path, cid, parts)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m fdeval.report.bundle", description=__doc__.splitlines()[0].split(": ", 1)[1])
    ap.add_argument("runs", nargs="+", metavar="RUN_DIR", help="run folders (any benchmark)")
    ap.add_argument("--out", required=True, help="folder for the bundle (made if missing)")
    a = ap.parse_args(argv)
    try:
        index = write_bundle([Path(r) for r in a.runs], Path(a.out))
    except FdevalError as err:
        print(f"fdeval: error: {err}", file=sys.stderr)
        return 2
    print(f"fdeval: bundle of {len(a.runs)} run(s): {index}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
