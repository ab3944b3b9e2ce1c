"""The review web app's server: a stdlib ThreadingHTTPServer on 127.0.0.1 only, a JSON API under
/api/, static files (plain HTML + JS, no build step) from ``static/``, session audio with HTTP Range.

A thin view over run folders: everything is read through :mod:`fdeval.report.runview`; the only
writes are the human labels (:mod:`fdeval.review.labels`) in each run's ``review/labels/``. What
is a benchmark's own (its label form and the check of a label, the label keys of a session, the
page's extra sections, blinding, the judge-validation table) comes from the run's benchmark object
(``RunView.bench.review()``, fdeval/engine/review.py); this module imports no benchmark.

Extension point: ``@route("GET", "/api/study/...")`` in a module that imports this one registers a
handler ``(app, request) -> Response`` in :data:`ROUTES` (the human study, ``fdeval.review.study``,
imported by ``python -m fdeval.review``); :data:`NAV` holds extra header links ``(title, href)``.

Routes: ``GET /api/runs``, ``GET /api/sessions?benchmark=&instruction=&scenario=&model=&verdict=&
disagree=1&unlabelled=1&human_vs_judge=1&invalid=1[&at_run=I&at_case=ID]`` (with ``at_*``: the
previous and next session of that filtered list around the session, ``around``),
``GET /api/session?run=I&case=ID``, ``POST /api/label`` (JSON body
``{"run", "case", "key", "fields"}``), ``GET /api/validation``, ``GET /audio?run=I&case=ID&ch=both|0|1``,
``GET /timeline?run=I&case=ID`` (the PNG, when one was written), ``GET /favicon.ico``. Runs are
named by the settings they differ in (:meth:`ReviewApp.run_name`); URLs keep their index.

Safe on a shared machine (docs/review.md, "Security"): a request whose Host is not the bound
address is a 421 before any route runs; a POST (PUT, DELETE) needs its Origin (else Referer) to be
this server and this launch's token (``ReviewApp.token``, handed to the pages in a
``<meta name="fdeval-token">``, sent back in ``X-Fdeval-Token``); bodies are limited to
:data:`MAX_BODY` (413), a malformed Content-Length is a 400, a bad Range a 416, an idle socket is
closed after :data:`REQUEST_TIMEOUT_S`; files are read only from inside their run folder with
symlinks resolved (:func:`inside`); every response carries :data:`SECURITY_HEADERS` (a strict CSP);
a route's unexpected exception is a one-line JSON 500 (the traceback goes to the server's log).
"""

from __future__ import annotations

import dataclasses
import hmac
import io
import json
import logging
import os
import re
import secrets
import sys
import threading
from collections import OrderedDict
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Callable, Mapping
from urllib.parse import parse_qs, urlsplit

import numpy as np
import soundfile as sf

from fdeval.engine.review import LabelledRun, ReviewView
from fdeval.errors import FdevalError
from fdeval.recording import read_info
from fdeval.report.runnames import run_names
from fdeval.report.runview import RunView, SessionView, open_run

# where the timeline PNGs are and where their axes sit (the playhead is placed on the drawn axis)
from fdeval.report.timeline import (
    FOLDER as TIMELINE_FOLDER,
    LEFT as TIMELINE_LEFT,
    RIGHT as TIMELINE_RIGHT,
)
from fdeval.report.timeline import session_log as timeline_session_log, session_words

from . import labels as L


STATIC = Path(__file__).resolve().parent / "static"
HIDDEN = "[hidden]"
_MIME = {
    ".html": "text/html; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".png": "image/png",
    ".svg": "image/svg+xml",
    ".json": "application/json",
    ".wav": "audio/wav",
}
_RANGE = re.compile(
    r"bytes=([0-9]{0,18})-([0-9]{0,18})"
)  # one range; ASCII digits, no huge numbers
ENVELOPE_BINS = 800

# Safety on a shared machine (docs/review.md, "Security"): what a request may be, and what every
# response says to the browser.
MAX_BODY = 256 * 1024  # bytes of a request body; more is a 413
REQUEST_TIMEOUT_S = 30.0  # a socket idle this long (a body promised and not sent) is closed
TOKEN_HEADER = "X-Fdeval-Token"  # the per-launch token a state-changing request must carry
TOKEN_META = (
    "fdeval-token"  # the <meta name=...> of the served HTML pages that hands it to the page
)
STATE_CHANGING = frozenset({"POST", "PUT", "DELETE", "PATCH"})
SECURITY_HEADERS = {
    "Content-Security-Policy": "default-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; "
    "frame-ancestors 'none'",
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "same-origin",
    "Cross-Origin-Resource-Policy": "same-origin",
}
_CONTENT_LENGTH = re.compile(r"[0-9]{1,18}")
log = logging.getLogger("fdeval.review")


@dataclass
class Request:
    method: str
    path: str
    query: dict[str, str]
    headers: Mapping[str, str]
    body: bytes = b""

    def json(self) -> Any:
        try:
            return json.loads(self.body.decode("utf-8") or "null")
        except (UnicodeDecodeError, ValueError) as e:
            raise HttpError(400, f"request body is not JSON: {e}") from None

    def arg(self, name: str) -> str:
        if name not in self.query:
            raise HttpError(400, f"query parameter {name!r} is missing")
        return self.query[name]


@dataclass
class Response:
    status: int = 200
    body: bytes = b""
    content_type: str = "application/json"
    headers: dict[str, str] = field(default_factory=dict)


class HttpError(Exception):
    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status = status


def json_response(obj: Any, status: int = 200) -> Response:
    return Response(status, json.dumps(obj, default=str).encode("utf-8"))


Handler = Callable[["ReviewApp", Request], Response]
ROUTES: dict[str, Handler] = {}
NAV: list[tuple[str, str]] = [("Sessions", "#/"), ("Judge validation", "#/validation")]
# What a server in participant mode (the human study's `serve`: ReviewApp(participant=True)) answers:
# the routes registered with participant=True and these static files; nothing of the review app.
PARTICIPANT_ROUTES: set[str] = set()
PARTICIPANT_FILES: set[str] = set()  # names under static/, e.g. "study.html"
PARTICIPANT_HOME: str | None = None  # where "/" sends a participant (the study page), when set


def route(method: str, path: str, *, participant: bool = False) -> Callable[[Handler], Handler]:
    """Register `fn` for `METHOD path` (exact path; parameters go in the query string or body);
    `participant`: also answered in participant mode."""

    def deco(fn: Handler) -> Handler:
        key = f"{method.upper()} {path}"
        ROUTES[key] = fn
        (PARTICIPANT_ROUTES.add if participant else PARTICIPANT_ROUTES.discard)(key)
        return fn

    return deco


def inside(path: str | Path, root: str | Path) -> Path | None:
    """`path` with every symlink resolved, when it lies inside `root` (resolved too); else None.
    Every file the server reads for a response (recordings, timelines, stimuli) passes this."""
    try:
        real = Path(path).resolve()
        return real if real.is_relative_to(Path(root).resolve()) else None
    except (OSError, RuntimeError):  # a symlink loop, an unreadable folder
        return None


# ---------------------------------------------------------------------------------------------
# The app: the runs, the reviewer, a small cache of per-channel audio


class ReviewApp:
    """The runs served and who labels. `participant`: the server answers only the human study's
    participant routes (no run, verdict or review page); `token`: this launch's secret that a
    state-changing request must send in the X-Fdeval-Token header (the served pages carry it)."""

    def __init__(self, run_dirs: list[str | Path], reviewer: str, *, participant: bool = False):
        self.views: list[RunView] = [open_run(d) for d in run_dirs]
        self.names: list[str] = run_names(
            self.views
        )  # each run by the settings it differs in (run_name)
        self.reviewer = reviewer
        self.participant = participant
        self.token = secrets.token_urlsafe(32)
        self._lock = threading.Lock()
        self._audio: OrderedDict[tuple[str, int], bytes] = OrderedDict()

    def reload(self, i: int) -> RunView:
        with self._lock:
            self.views[i] = open_run(self.views[i].run_dir)
            self.names = run_names(self.views)
            return self.views[i]

    def run_name(self, i: int) -> str:
        """Run `i`'s name on the pages: the settings it differs in from the other loaded runs
        (fdeval.report.runnames); a blind run's with the model's identity strings hidden."""
        v = self.views[i]
        return _hide(self.names[i], v) if _blind(v) else self.names[i]

    def view(self, req: Request) -> tuple[int, RunView]:
        try:
            i = int(req.arg("run"))
            return i, self.views[i]
        except (ValueError, IndexError):
            raise HttpError(404, f"no run {req.query.get('run')!r}") from None

    def session(self, req: Request) -> tuple[int, RunView, SessionView]:
        """The session asked for, its files (recording, log, transcript) resolved and kept only
        when they lie inside its run folder (a symlink out of it reads as no file)."""
        i, v = self.view(req)
        try:
            s = v.session(req.arg("case"))
        except FdevalError as e:
            raise HttpError(404, str(e)) from None
        files = {k: getattr(s, k) for k in ("wav", "log", "transcript")}
        return (
            i,
            v,
            dataclasses.replace(s, **{k: p and inside(p, v.run_dir) for k, p in files.items()}),
        )

    def channel_wav(self, wav: Path, ch: int) -> bytes:
        """One channel of a session as a mono WAV (made on request; the last few are kept)."""
        key = (str(wav), ch)
        with self._lock:
            if key in self._audio:
                self._audio.move_to_end(key)
                return self._audio[key]
        data, rate = sf.read(str(wav), dtype="int16", always_2d=True)
        if ch >= data.shape[1]:
            raise HttpError(404, f"{wav.name} has {data.shape[1]} channel(s); no channel {ch}")
        buf = io.BytesIO()
        sf.write(buf, data[:, ch], rate, subtype="PCM_16", format="WAV")
        out = buf.getvalue()
        with self._lock:
            self._audio[key] = out
            while len(self._audio) > 8:
                self._audio.popitem(last=False)
        return out


# ---------------------------------------------------------------------------------------------
# Session rows and filters


def _instruction(v: RunView, s: SessionView) -> str:
    """What the benchmark shows as the case's instruction (Instruct-FD's; '' for none)."""
    return v.review().instruction(s.case)


def _blind(v: RunView) -> bool:
    """The reviewer must not see which model answered (the benchmark's view says so)."""
    return v.review().blind


def _judge_of(r: Any) -> str:
    return str((r.metadata or {}).get("judge") or "")


def _disagreements(views: list[RunView]) -> set[tuple[int, str]]:
    """(run index, case id) of the sessions where judges disagree: the same model's case and key
    judged by more than one judge (over the loaded runs, or inside one run's steps) with different
    values."""
    seen: dict[tuple[str, str, str], dict[str, set]] = {}
    where: dict[tuple[str, str, str], set[tuple[int, str]]] = {}
    for i, v in enumerate(views):
        for s in v.sessions:
            for step, results in s.results.items():
                for r in results:
                    if r.status != "ok":
                        continue
                    k = (v.model_id or v.model, s.case_id, f"{step}:{r.key}")
                    seen.setdefault(k, {}).setdefault(_judge_of(r) or f"run{i}", set()).add(
                        str(r.value)
                    )
                    where.setdefault(k, set()).add((i, s.case_id))
    out: set[tuple[int, str]] = set()
    for k, by_judge in seen.items():
        values = set().union(*by_judge.values())
        if len(by_judge) > 1 and len(values) > 1:
            out |= where[k]
    return out


def _multi_judged(views: list[RunView]) -> bool:
    judges = {
        (v.model_id, s.case_id, _judge_of(r) or str(i))
        for i, v in enumerate(views)
        for s in v.sessions
        for rs in s.results.values()
        for r in rs
    }
    return len(judges) > len({(m, c) for m, c, _ in judges})


def session_rows(app: ReviewApp) -> list[dict[str, Any]]:
    disagree = _disagreements(app.views)
    rows = []
    for i, v in enumerate(app.views):
        review = v.review()
        by_case: dict[str, dict[str, dict[str, Any]]] = {}
        for (c, k), rec in L.run_labels(v.run_dir).items():
            by_case.setdefault(c, {})[k] = rec
        for s in v.sessions:
            results = [
                {"step": step, "key": r.key, "value": r.value, "status": r.status}
                for step, rs in s.results.items()
                for r in rs
            ]
            saved = by_case.get(s.case_id, {})
            rows.append(
                {
                    "run": i,
                    "run_name": app.run_name(i),
                    "case_id": s.case_id,
                    "benchmark": v.benchmark,
                    "model": HIDDEN if _blind(v) else v.model,
                    "scenario": s.case.scenario or "",
                    "instruction": _instruction(v, s),
                    "state": s.state,
                    "reason": s.reason,
                    "results": results,
                    # the labels a result gave (numbers, e.g. TACT onsets, are not a verdict to filter on)
                    "verdicts": sorted(
                        {
                            "error" if r["status"] == "error" else r["value"]
                            for r in results
                            if r["status"] == "error" or isinstance(r["value"], str)
                        }
                    ),
                    "disagree": (i, s.case_id) in disagree,
                    "labelled": len(saved),
                    # a label key of the session without a saved label
                    "unlabelled": any(k not in saved for k in review.label_keys(v, s)),
                    # a saved label that disagrees with the automatic result (the benchmark's view decides)
                    "human_vs_judge": any(
                        review.disagrees(v, s, k, rec) for k, rec in saved.items()
                    ),
                }
            )
    return rows


FILTERS = ("benchmark", "instruction", "scenario", "model", "verdict")
# the check-box filters (`name=1`): the row field each keeps true (invalid: a session not usable)
FLAGS = {"disagree": "disagree", "unlabelled": "unlabelled", "human_vs_judge": "human_vs_judge"}


def filter_rows(rows: list[dict[str, Any]], q: Mapping[str, str]) -> list[dict[str, Any]]:
    out = []
    for r in rows:
        if any(
            q.get(f) and (q[f] not in r["verdicts"] if f == "verdict" else r[f] != q[f])
            for f in FILTERS
        ):
            continue
        if any(q.get(flag) == "1" and not r[f] for flag, f in FLAGS.items()):
            continue
        if q.get("invalid") == "1" and r["state"] == "usable":
            continue
        out.append(r)
    return out


def neighbours(
    rows: list[dict[str, Any]], shown: list[dict[str, Any]], run: str, case: str
) -> dict[str, Any]:
    """The sessions before and after (run, case) in the filtered list `shown` (a subsequence of
    `rows`), found by its place in `rows`: a session the filters leave out (e.g. just labelled, with
    `unlabelled=1`) still has the next one of the list. `position`: its 1-based place in `shown`
    (None when not in it)."""
    at = next(
        (j for j, r in enumerate(rows) if str(r["run"]) == run and r["case_id"] == case), None
    )
    if at is None:
        raise HttpError(404, f"no session {case!r} in run {run!r}")
    place = {(r["run"], r["case_id"]): j for j, r in enumerate(rows)}
    ref = lambda r: {"run": r["run"], "case_id": r["case_id"]}  # noqa: E731
    before = [r for r in shown if place[(r["run"], r["case_id"])] < at]
    after = [r for r in shown if place[(r["run"], r["case_id"])] > at]
    mine = next((k for k, r in enumerate(shown) if place[(r["run"], r["case_id"])] == at), None)
    return {
        "prev": ref(before[-1]) if before else None,
        "next": ref(after[0]) if after else None,
        "position": None if mine is None else mine + 1,
        "n": len(shown),
    }


@route("GET", "/api/runs")
def api_runs(app: ReviewApp, req: Request) -> Response:
    return json_response(
        {
            "reviewer": app.reviewer,
            "nav": NAV,
            "runs": [
                {
                    "run": i,
                    "name": app.run_name(i),
                    "benchmark": v.benchmark,
                    "model": HIDDEN if _blind(v) else v.model,
                    "run_id": HIDDEN if _blind(v) else v.run_id,
                    "n_sessions": len(v.sessions),
                    "results_from": dict(v.steps),
                }  # the step folders (which judge, which ASR) the results come from
                for i, v in enumerate(app.views)
            ],
        }
    )


@route("GET", "/api/sessions")
def api_sessions(app: ReviewApp, req: Request) -> Response:
    rows = session_rows(app)
    facets = {
        f: sorted({x for r in rows for x in (r["verdicts"] if f == "verdict" else [r[f]]) if x})
        for f in FILTERS
    }
    shown = filter_rows(rows, req.query)
    out = {
        "rows": shown,
        "n_total": len(rows),
        "facets": facets,
        "multi_judged": _multi_judged(app.views),
    }
    if (
        "at_run" in req.query or "at_case" in req.query
    ):  # a session page's previous and next in this list
        out["around"] = neighbours(rows, shown, req.arg("at_run"), req.arg("at_case"))
    return json_response(out)


# ---------------------------------------------------------------------------------------------
# One session


def _transcript(s: SessionView) -> dict[str, Any]:
    """The session's words: its transcript file, else what the timeline draws without one (the
    case's scripted user words and the model's own text pieces, from the log)."""
    t: dict[str, Any] = {}
    if s.transcript is not None:
        try:
            t = json.loads(s.transcript.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            t = {}
    words = t.get("words") or []
    if not words and s.log is not None:
        try:
            words = session_words(s, timeline_session_log(s.log))[0]
        except (OSError, KeyError, ValueError):
            words = []
    return {
        "words": words,
        "user_turns": t.get("user_turns") or [],
        "duration_s": t.get("duration_s"),
    }


def _duration(s: SessionView) -> float | None:
    try:
        return float(sf.info(str(s.wav)).duration) if s.wav else None
    except (OSError, RuntimeError):
        return None


def envelope(s: SessionView, bins: int = ENVELOPE_BINS) -> list[list[float]] | None:
    """Per channel, the peak |amplitude| in each of `bins` equal slices of the recording (the
    canvas timeline draws it when there is no PNG)."""
    if s.wav is None:
        return None
    try:
        x, _ = sf.read(str(s.wav), dtype="float32", always_2d=True)
    except (OSError, RuntimeError):
        return None
    if len(x) == 0:
        return [[] for _ in range(x.shape[1])]
    edges = np.linspace(0, len(x), min(bins, len(x)) + 1).astype(int)[:-1]
    peaks = np.maximum.reduceat(np.abs(x), edges, axis=0)
    return [[round(float(v), 3) for v in peaks[:, ch]] for ch in range(x.shape[1])]


def timeline_png(v: RunView, case_id: str) -> Path | None:
    """The session's timeline PNG (fdeval.report.timeline writes it), when there is one inside the
    run folder (symlinks resolved)."""
    p = inside(v.run_dir / TIMELINE_FOLDER / f"{case_id}.png", v.run_dir)
    return p if p is not None and p.is_file() else None


def _timeline_axes(s: SessionView) -> dict[str, float]:
    """Where the PNG's time axis lies (fractions of its width) and the seconds it spans: as the
    timeline writer sets them (from 0 to the longer of the log's and the WAV's duration, >= 1 s),
    so the playhead lands on the drawn time."""
    dur = max(1.0, _duration(s) or 0.0)
    if s.log is not None:
        try:
            dur = max(dur, read_info(s.log).duration_s)
        except (OSError, ValueError):
            pass  # an unreadable log: the WAV's duration, as the timeline writer falls back to
    return {"left": TIMELINE_LEFT, "right": TIMELINE_RIGHT, "duration_s": dur}


def _hide(text: str, v: RunView) -> str:
    for s in sorted(
        {v.model, v.model_id, v.model_id.split(":", 1)[0], v.run_id} - {""}, key=len, reverse=True
    ):
        text = re.sub(re.escape(s), HIDDEN, text, flags=re.IGNORECASE)
    return text


def _hide_all(obj: Any, v: RunView) -> Any:
    """`obj` (JSON data) with the model's identity strings hidden in every text."""
    if isinstance(obj, str):
        return _hide(obj, v)
    if isinstance(obj, dict):
        return {k: _hide_all(x, v) for k, x in obj.items()}
    if isinstance(obj, list):
        return [_hide_all(x, v) for x in obj]
    return obj


def session_detail(app: ReviewApp, i: int, v: RunView, s: SessionView) -> dict[str, Any]:
    review = v.review()
    blind = review.blind
    results = []
    for step, rs in s.results.items():
        for r in rs:
            expl = _hide(r.explanation, v) if blind else r.explanation
            # the result's scalar metadata (e.g. an automatic label the reviewer's may replace)
            meta = {
                k: (_hide(x, v) if blind and isinstance(x, str) else x)
                for k, x in (r.metadata or {}).items()
                if x is None or isinstance(x, (str, int, float, bool))
            }
            results.append(
                {
                    "step": step,
                    "key": r.key or L.NO_KEY,
                    "value": r.value,
                    "status": r.status,
                    "explanation": expl,
                    "judge": _judge_of(r),
                    "metadata": meta,
                }
            )
    form = review.label_form(v, s)
    saved = {k: rec for (c, k), rec in L.run_labels(v.run_dir).items() if c == s.case_id}
    # what the benchmark adds to the page: the label form (fields, choices), sections, a text transcript
    page = {
        "form": form.to_dict(),
        "sections": [x.to_dict() for x in review.sections(v, s)],
        "transcript_text": review.transcript_text(v, s),
    }
    t = _transcript(s)
    base = f"run={i}&case={s.case_id}"
    out = {
        "run": i,
        "run_name": app.run_name(i),
        "case_id": s.case_id,
        "benchmark": v.benchmark,
        "blind": blind,
        "model": HIDDEN if blind else v.model,
        "model_id": HIDDEN if blind else v.model_id,
        "run_dir": HIDDEN if blind else str(v.run_dir),
        "scenario": s.case.scenario or "",
        "instruction": review.instruction(s.case),
        "state": s.state,
        "reason": s.reason,
        # the recording's own length (a benchmark's transcript may cover only a window of it)
        "duration_s": _duration(s) or t["duration_s"],
        "words": t["words"],
        "user_turns": t["user_turns"],
        "envelope": envelope(s) if not timeline_png(v, s.case_id) else None,
        "results": results,
        "kind": form.kind,
        "keys": review.label_keys(v, s),
        "labels": saved,
        "reviewer": app.reviewer,
        "audio": {
            n: f"/audio?{base}&ch={c}"
            for n, c in (("stereo", "both"), ("user", "0"), ("model", "1"))
        }
        if s.wav
        else None,
        "timeline": f"/timeline?{base}" if timeline_png(v, s.case_id) else None,
        "timeline_axes": _timeline_axes(s) if timeline_png(v, s.case_id) else None,
        **(_hide_all(page, v) if blind else page),
    }
    return out


@route("GET", "/api/session")
def api_session(app: ReviewApp, req: Request) -> Response:
    i, v, s = app.session(req)
    return json_response(session_detail(app, i, v, s))


@route("POST", "/api/label")
def api_label(app: ReviewApp, req: Request) -> Response:
    body = req.json()
    if not isinstance(body, dict):
        raise HttpError(400, "expected a JSON object {run, case, key, fields}")
    fake = Request(
        "GET", req.path, {"run": str(body.get("run")), "case": str(body.get("case"))}, req.headers
    )
    i, v, s = app.session(fake)
    key = str(body.get("key") or "")
    review = v.review()
    try:
        review.check_key(v, s, key)
        rec = L.save_label(
            v.run_dir,
            v.benchmark,
            s.case_id,
            key,
            app.reviewer,
            body.get("fields") or {},
            review,
            review.label_form(v, s),
        )
    except L.LabelError as e:
        raise HttpError(400, str(e)) from None
    return json_response({"saved": rec, "path": str(L.label_path(v.run_dir, s.case_id, key))})


# ---------------------------------------------------------------------------------------------
# Judge validation, recomputed from the saved labels on every request: each benchmark's table
# over its loaded runs (Instruct-FD's: the judge's agreement with the labels)


def validation(app: ReviewApp) -> dict[str, Any]:
    by_benchmark: dict[str, tuple[ReviewView, list[LabelledRun]]] = {}
    for v in app.views:
        review, runs = by_benchmark.setdefault(v.benchmark, (v.review(), []))
        runs.append(LabelledRun(v, L.saved_labels(v.run_dir)))
    tables = [
        t.to_dict()
        for review, runs in by_benchmark.values()
        if (t := review.validation(runs)) is not None
    ]
    return {"tables": tables}


@route("GET", "/api/validation")
def api_validation(app: ReviewApp, req: Request) -> Response:
    return json_response(validation(app))


# ---------------------------------------------------------------------------------------------
# Audio and images


def ranged(req: Request, data: bytes, content_type: str) -> Response:
    """`data` whole (200) or the requested byte range (206), as browsers seek audio with. A Range
    that is not one `bytes=` range (several ranges, another unit, not numbers) or that lies past
    the end is a 416."""
    n = len(data)
    headers = {"Accept-Ranges": "bytes"}
    spec = req.headers.get("Range")
    if spec is None:
        return Response(200, data, content_type, headers)
    m = _RANGE.fullmatch(spec.strip())
    if not m or not (m.group(1) or m.group(2)):
        return Response(416, b"", content_type, {**headers, "Content-Range": f"bytes */{n}"})
    if m.group(1):
        start = int(m.group(1))
        end = min(int(m.group(2)), n - 1) if m.group(2) else n - 1
    else:  # a suffix: the last N bytes
        start, end = max(0, n - int(m.group(2))), n - 1
    if start >= n or start > end:
        return Response(416, b"", content_type, {**headers, "Content-Range": f"bytes */{n}"})
    return Response(
        206,
        data[start : end + 1],
        content_type,
        {**headers, "Content-Range": f"bytes {start}-{end}/{n}"},
    )


@route("GET", "/audio")
def audio(app: ReviewApp, req: Request) -> Response:
    _i, _v, s = app.session(req)
    if s.wav is None:
        raise HttpError(404, f"{s.case_id}: no recording ({s.state})")
    ch = req.query.get("ch", "both")
    if ch == "both":
        data = s.wav.read_bytes()
    elif ch in ("0", "1"):
        data = app.channel_wav(s.wav, int(ch))
    else:
        raise HttpError(400, f"query parameter ch: expected both, 0 or 1, got {ch!r}")
    return ranged(req, data, "audio/wav")


@route("GET", "/timeline")
def timeline(app: ReviewApp, req: Request) -> Response:
    _i, v, s = app.session(req)
    png = timeline_png(v, s.case_id)
    if png is None:
        raise HttpError(404, f"{s.case_id}: no timeline image")
    return Response(200, png.read_bytes(), "image/png")


@route("GET", "/favicon.ico")
def favicon(app: ReviewApp, req: Request) -> Response:
    """What a browser asks for by default: the icon the pages link (static/favicon.svg)."""
    return static_file("/static/favicon.svg")


def static_name(path: str) -> str:
    """The file under static/ a GET of `path` asks for ("/" is index.html)."""
    return "index.html" if path in ("", "/") else path.removeprefix("/static/")


def static_file(path: str, token: str | None = None) -> Response:
    """A file of static/; an HTML page gets this launch's `token` in a <meta name="fdeval-token">
    (the page's scripts send it back with every request)."""
    f = inside(STATIC / static_name(path), STATIC)
    if f is None or not f.is_file():
        raise HttpError(404, f"no file {path}")
    body = f.read_bytes()
    if f.suffix == ".html" and token is not None:
        body = body.replace(
            b"<head>", f'<head>\n<meta name="{TOKEN_META}" content="{token}">'.encode(), 1
        )
    return Response(200, body, _MIME.get(f.suffix, "application/octet-stream"))


# ---------------------------------------------------------------------------------------------
# HTTP


def _participant_refusal(req: Request) -> Response | None:
    """In participant mode: a redirect from "/" to the study page, a 403 for anything that is not
    a participant route or file (the review app's pages, runs, verdicts, labels); None when allowed."""
    method = "GET" if req.method == "HEAD" else req.method
    if f"{method} {req.path}" in PARTICIPANT_ROUTES:
        return None
    if method == "GET" and req.path in ("", "/") and PARTICIPANT_HOME:
        return Response(303, b"", "text/plain", {"Location": PARTICIPANT_HOME})
    if (
        method == "GET"
        and req.path.startswith("/static/")
        and static_name(req.path) in PARTICIPANT_FILES
    ):
        return None
    return json_response(
        {
            "error": f"{req.method} {req.path}: not served to study participants "
            "(this server runs a human study in participant mode)"
        },
        403,
    )


def dispatch(app: ReviewApp, req: Request) -> Response:
    try:
        if (
            getattr(app, "participant", False)
            and (refused := _participant_refusal(req)) is not None
        ):
            return refused
        fn = ROUTES.get(f"{'GET' if req.method == 'HEAD' else req.method} {req.path}")
        if fn is not None:
            return fn(app, req)
        if req.method in ("GET", "HEAD") and (
            req.path in ("", "/") or req.path.startswith("/static/")
        ):
            return static_file(req.path, getattr(app, "token", None))
        raise HttpError(404, f"no route {req.method} {req.path}")
    except HttpError as e:
        return json_response({"error": str(e)}, e.status)
    except FdevalError as e:
        return json_response({"error": str(e)}, 500)
    except Exception:  # noqa: BLE001 - a bug in a route: logged here, one line to the client
        log.exception("review server: %s %s failed", req.method, req.path)
        return json_response(
            {"error": f"internal error in {req.method} {req.path} (see the server's log)"}, 500
        )


def _error(status: int, message: str) -> Response:
    return json_response({"error": message}, status)


def _origin(value: str) -> str:
    """scheme://host[:port] of a URL (an Origin or a Referer), lower case; '' when it has none."""
    try:
        u = urlsplit(value.strip())
    except ValueError:
        return ""
    return f"{u.scheme}://{u.netloc}".lower() if u.scheme and u.netloc else ""


def make_handler(
    app: ReviewApp, timeout_s: float | None = REQUEST_TIMEOUT_S
) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        timeout = timeout_s  # on the socket: a client that stops sending (or reading) is dropped

        def end_headers(self) -> None:  # every response, the stdlib's own errors included
            for k, val in SECURITY_HEADERS.items():
                self.send_header(k, val)
            super().end_headers()

        def _hosts(self) -> set[str]:
            """The Host values this server answers: the address it is bound to, and localhost."""
            ip, port = self.server.server_address[:2]
            names = {f"[{ip}]" if ":" in ip else ip, "localhost"}
            return {f"{h}:{port}" for h in names} | (names if port == 80 else set())

        def _refusal(self) -> Response | None:
            """Refuse, before any route runs: another Host (DNS rebinding), a body that is malformed
            or too large, a state change from another origin or without this launch's token."""
            host = (self.headers.get("Host") or "").strip().lower()
            if host not in self._hosts():
                return _error(
                    421,
                    f"Host {host!r} is not this server's address "
                    f"(use http://{sorted(self._hosts())[0]}/)",
                )
            if self.headers.get("Transfer-Encoding"):
                return _error(
                    411, "Transfer-Encoding is not accepted: send the body with a Content-Length"
                )
            lengths = self.headers.get_all("Content-Length") or []
            if len(lengths) > 1 or (lengths and not _CONTENT_LENGTH.fullmatch(lengths[0].strip())):
                return _error(400, f"malformed Content-Length {', '.join(lengths)!r}")
            if lengths and int(lengths[0]) > MAX_BODY:
                return _error(
                    413, f"request body of {int(lengths[0])} bytes; the limit is {MAX_BODY}"
                )
            if self.command in STATE_CHANGING:
                origin = self.headers.get("Origin")
                origin = (
                    _origin(origin)
                    if origin is not None
                    else _origin(self.headers.get("Referer") or "")
                )
                if origin != f"http://{host}":
                    return _error(
                        403,
                        f"cross-origin {self.command} refused (origin {origin or 'unknown'!r}, "
                        f"expected http://{host})",
                    )
                if not hmac.compare_digest(
                    (self.headers.get(TOKEN_HEADER) or "").encode(), app.token.encode()
                ):
                    return _error(
                        403,
                        f"{self.command} without this server's {TOKEN_HEADER} header refused "
                        "(reload the page)",
                    )
            return None

        def _send(self, resp: Response) -> None:
            self.send_response(resp.status)
            self.send_header("Content-Type", resp.content_type)
            self.send_header("Content-Length", str(len(resp.body)))
            self.send_header("Cache-Control", "no-store")
            for k, val in resp.headers.items():
                self.send_header(k, val)
            if self.close_connection:
                self.send_header("Connection", "close")
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(resp.body)

        def _serve(self) -> None:
            refused = self._refusal()
            if refused is not None:
                self.close_connection = True  # a body may follow that was not read
                self._send(refused)
                return
            n = int(self.headers.get("Content-Length") or 0)
            try:
                body = self.rfile.read(n) if n else b""
            except TimeoutError:
                body = None
            if body is None or len(body) < n:  # the client promised more than it sent
                self.close_connection = True
                self._send(
                    _error(
                        408 if body is None else 400,
                        f"request body: {n} bytes announced, {0 if body is None else len(body)} received",
                    )
                )
                return
            u = urlsplit(self.path)
            q = {k: v[-1] for k, v in parse_qs(u.query, keep_blank_values=True).items()}
            self._send(dispatch(app, Request(self.command, u.path, q, self.headers, body)))

        do_GET = do_POST = do_HEAD = do_PUT = do_DELETE = do_PATCH = _serve

        def log_message(
            self, format: str, *args: Any
        ) -> None:  # quiet: the console shows the URL only
            if os.environ.get("FDEVAL_REVIEW_LOG"):
                super().log_message(format, *args)

    return Handler


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        # a browser drops audio connections when it seeks or leaves the page, and a client that
        # stops reading is timed out: not an error
        if not isinstance(sys.exc_info()[1], (ConnectionResetError, BrokenPipeError, TimeoutError)):
            super().handle_error(request, client_address)


def make_server(
    app: ReviewApp, port: int = 0, *, timeout_s: float | None = REQUEST_TIMEOUT_S
) -> ThreadingHTTPServer:
    """Bound to 127.0.0.1 only (reviews hold unpublished audio); port 0 picks a free one. It answers
    only requests addressed to that address (Host 127.0.0.1:PORT or localhost:PORT); a connection
    idle for `timeout_s` seconds is closed."""
    server = _Server(("127.0.0.1", port), make_handler(app, timeout_s))
    server.daemon_threads = True
    return server
