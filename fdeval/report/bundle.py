"""`python -m fdeval.report.bundle RUN_DIR [RUN_DIR ...] --out DIR`: a static HTML bundle to share.

Every session of every run gets its timeline PNG (drawn from the run folder as it is now) and a
copy of its stereo WAV; `DIR/index.html` lists the cases with the runs side by side (state,
results, links), `DIR/cases/<case>.html` shows one case's timelines of every run one under the
other with their audio, all on one time axis (from 0 to the longest of the case's sessions), and
`DIR/runs/<run>/index.html` is one run's table. A run is named by what differs between the
runs (`fdeval.report.runnames`: `delay 1 s` / `delay 3 s` for the two points of a sweep), its
folder in the bundle by that name. Links are relative and no page or picture holds a path of
this machine (a reason or an explanation that names a file under a run's out_root says
`<out_root>/...` instead), so the folder opens from disk in a browser with no server, and can
be zipped and sent. Any benchmark (runs of several benchmarks may share a bundle; cases are
matched by id). A user error prints one line and exits 2.
"""

from __future__ import annotations

import argparse
import html
import re
import shutil
import sys
from dataclasses import replace
from pathlib import Path
from urllib.parse import quote

from fdeval.errors import FdevalError
from fdeval.report.runnames import run_names, slug
from fdeval.report.runview import RunView, SessionView, open_run
from fdeval.report.timeline import (
    link,
    render,
    run_line,
    run_table,
    session_span,
    summary,
    write_page,
)

e = html.escape


def run_folders(names: list[str]) -> list[str]:
    """A folder name inside the bundle for each run's name, unique (`-2`, `-3`)."""
    taken: set[str] = set()
    out = []
    for n in names:
        base = slug(n)
        label, i = base, 2
        while label in taken:
            label, i = f"{base}-{i}", i + 1
        taken.add(label)
        out.append(label)
    return out


class Portable:
    """Text with this machine's paths taken out: a run's out_root becomes `<out_root>`, the
    bundle's folder `<bundle>`, the working folder `.` and the home folder `~` (the longest
    first, each absolute as given and resolved)."""

    def __init__(self, views: list[RunView], out: Path):
        pairs: dict[str, str] = {}
        for p, mark in [
            (v.run_dir.parents[2], "<out_root>") for v in views if len(v.run_dir.parents) > 2
        ] + [(out, "<bundle>"), (Path.cwd(), "."), (Path.home(), "~")]:
            for q in (Path(p).absolute(), Path(p).resolve()):
                if str(q) not in ("/", "") and str(q) not in pairs:
                    pairs[str(q)] = mark
        # longest first; a path only where it ends (not "/tmp" inside "/tmpx")
        self.pairs = [
            (re.compile(re.escape(p) + r"(?![\w.-])"), mark)
            for p, mark in sorted(pairs.items(), key=lambda kv: -len(kv[0]))
        ]

    def text(self, s: str) -> str:
        for path, mark in self.pairs:
            s = path.sub(mark, s)
        return s

    def session(self, s: SessionView) -> SessionView:
        """The session as the bundle shows it: its reason and its results' explanations portable."""
        results = {
            step: [
                replace(
                    r,
                    explanation=self.text(r.explanation),
                    value=self.text(r.value) if isinstance(r.value, str) else r.value,
                )
                for r in rs
            ]
            for step, rs in s.results.items()
        }
        return replace(s, reason=self.text(s.reason), results=results)


def _href(*parts: str) -> str:
    return "/".join(quote(p) for p in parts)


def _cell(s: SessionView | None, folder: str) -> str:
    """One run's column of a case row in the bundle's index."""
    if s is None:
        return "<td class=muted>not in this run</td>"
    state = e(s.state + (f": {s.reason}" if s.reason else ""))
    links = link(_href("runs", folder, f"{s.case_id}.png"), "PNG")
    if s.wav is not None:
        links += " · " + link(_href("runs", folder, f"{s.case_id}.wav"), "WAV")
    return f"<td class={'ok' if s.state == 'usable' else 'bad'}>{state}<br>{e(summary(s, 6))}<br>{links}</td>"


def write_bundle(run_dirs: list[Path], out: Path) -> Path:
    views = [open_run(d) for d in run_dirs]
    out.mkdir(parents=True, exist_ok=True)
    names = run_names(views)
    folders = run_folders(names)
    portable = Portable(views, out)
    by_run = [{s.case_id: portable.session(s) for s in v.sessions} for v in views]
    case_ids = list(dict.fromkeys(s.case_id for v in views for s in v.sessions))
    # one time axis per case: the timelines of a case, stacked on its page, line up second by second
    span = {cid: max(session_span(r[cid]) for r in by_run if cid in r) for cid in case_ids}
    for v, name, folder, r in zip(views, names, folders, by_run):
        d = out / "runs" / folder
        d.mkdir(parents=True, exist_ok=True)
        for s in v.sessions:
            render(r[s.case_id], d / f"{s.case_id}.png", span_s=span[s.case_id])
            if s.wav is not None:
                shutil.copy2(s.wav, d / f"{s.case_id}.wav")
        rows = [
            (r[s.case_id], _href(f"{s.case_id}.png"), _href(f"{s.case_id}.wav") if s.wav else None)
            for s in v.sessions
        ]
        run_table(d / "index.html", name, v, rows)
    (out / "cases").mkdir(exist_ok=True)
    for cid in case_ids:
        _case_page(out / "cases" / f"{cid}.html", cid, names, folders, by_run, span[cid])
    head = "".join(
        f'<th><a href="{_href("runs", f, "index.html")}">{e(n)}</a></th>'
        for n, f in zip(names, folders)
    )
    body = []
    for cid in case_ids:
        first = next(r[cid] for r in by_run if cid in r)
        cells = "".join(_cell(r.get(cid), f) for r, f in zip(by_run, folders))
        body.append(
            f'<tr><td><a href="{_href("cases", cid + ".html")}">{e(cid)}</a></td>'
            f"<td>{e(first.case.scenario or '')}</td>{cells}</tr>"
        )
    write_page(
        out / "index.html",
        "fdeval bundle",
        [
            "<p class=muted>"
            + "<br>".join(e(f"{n}: {portable.text(run_line(v))}") for v, n in zip(views, names))
            + "</p>",
            f"<table><tr><th>case</th><th>scenario</th>{head}</tr>",
            *body,
            "</table>",
        ],
    )
    return out / "index.html"


def _case_page(
    path: Path, cid: str, names: list[str], folders: list[str], by_run: list[dict], span_s: float
) -> None:
    parts = [
        '<p><a href="../index.html">all cases</a></p>',
        f"<p class=muted>every timeline on one time axis, 0 to {span_s:.1f} s</p>",
    ]
    for name, folder, r in zip(names, folders, by_run):
        s = r.get(cid)
        parts.append(f"<h2>{e(name)}</h2>")
        if s is None:
            parts.append("<p class=muted>not in this run</p>")
            continue
        parts.append(
            f"<p>{e(s.state + (': ' + s.reason if s.reason else ''))} · {e(summary(s, 12))}</p>"
        )
        parts.append(
            f'<img src="{_href("..", "runs", folder, cid + ".png")}" alt="timeline of {e(cid)} in {e(name)}">'
        )
        if s.wav is not None:
            parts.append(
                f'<p><audio controls preload=none src="{_href("..", "runs", folder, cid + ".wav")}"></audio></p>'
            )
    write_page(path, cid, parts)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m fdeval.report.bundle", description=__doc__.splitlines()[0].split(": ", 1)[1]
    )
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
