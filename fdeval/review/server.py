"""The review web app's server: a stdlib ThreadingHTTPServer on 127.0.0.1 only, a JSON API under
/api/, static files (plain HTML + JS, no build step) from ``static/``, session audio with HTTP Range.

A thin view over run folders: everything is read through :mod:`fdeval.report.runview`; the only
writes are the human labels (:mod:`fdeval.review.labels`) in each run's ``review/labels/``.

Extension point: ``@route("GET", "/api/study/...")`` in any module imported here registers a
handler ``(app, request) -> Response`` in :data:`ROUTES` (the human study, ``fdeval.review.study``,
is imported at the bottom when present); :data:`NAV` holds extra header links ``(title, href)``.

Routes: ``GET /api/runs``, ``GET /api/sessions?benchmark=&instruction=&scenario=&model=&verdict=&
disagree=1&invalid=1``, ``GET /api/session?run=I&case=ID``, ``POST /api/label`` (JSON body
``{"run", "case", "key", "fields"}``), ``GET /api/validation``, ``GET /audio?run=I&case=ID&ch=both|0|1``,
``GET /timeline?run=I&case=ID`` (the PNG, when one was written).
"""

from __future__ import annotations

import importlib
import importlib.util
import io
import json
import os
import re
import sys
import threading
from collections import OrderedDict
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Callable, Mapping
from urllib.parse import parse_qs, urlsplit

import h5py
import numpy as np
import soundfile as sf

from fdeval.benchmarks.echochain.review import REVIEW_DIR, REVIEW_INPUT, SCREENING_CHECKS
from fdeval.benchmarks.echochain.taxonomy import TAXONOMY
from fdeval.benchmarks.instructfd.metrics.validation import (VALIDATION_COLUMNS, ModelVerdict, validate_judge)
from fdeval.benchmarks.instructfd.records import Verdict
from fdeval.errors import FdevalError
from fdeval.report.runview import RunView, SessionView, open_run
# where the timeline PNGs are and where their axes sit (the playhead is placed on the drawn axis)
from fdeval.report.timeline import FOLDER as TIMELINE_FOLDER, LEFT as TIMELINE_LEFT, RIGHT as TIMELINE_RIGHT
from fdeval.report.timeline import session_log as timeline_session_log, session_words

from . import labels as L


STATIC = Path(__file__).resolve().parent / "static"
HIDDEN = "[hidden]"
BLIND_BENCHMARKS = frozenset({"echochain"})  # the reviewer must not see which model answered
_MIME = {".html": "text/html; charset=utf-8", ".js": "text/javascript; charset=utf-8",
         ".css": "text/css; charset=utf-8", ".png": "image/png", ".svg": "image/svg+xml",
         ".json": "application/json", ".wav": "audio/wav"}
_RANGE = re.compile(r"^bytes=(\d*)-(\d*)$")
ENVELOPE_BINS = 800


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


def route(method: str, path: str) -> Callable[[Handler], Handler]:
    """Register `fn` for `METHOD path` (exact path; parameters go in the query string or body)."""
    def deco(fn: Handler) -> Handler:
        ROUTES[f"{method.upper()} {path}"] = fn
        return fn
    return deco


# ---------------------------------------------------------------------------------------------
# The app: the runs, the reviewer, a small cache of per-channel audio


class ReviewApp:
    def __init__(self, run_dirs: list[str | Path], reviewer: str):
        self.views: list[RunView] = [open_run(d) for d in run_dirs]
        self.reviewer = reviewer
        self._lock = threading.Lock()
        self._audio: OrderedDict[tuple[str, int], bytes] = OrderedDict()

    def reload(self, i: int) -> RunView:
        with self._lock:
            self.views[i] = open_run(self.views[i].run_dir)
            return self.views[i]

    def view(self, req: Request) -> tuple[int, RunView]:
        try:
            i = int(req.arg("run"))
            return i, self.views[i]
        except (ValueError, IndexError):
            raise HttpError(404, f"no run {req.query.get('run')!r}") from None

    def session(self, req: Request) -> tuple[int, RunView, SessionView]:
        i, v = self.view(req)
        try:
            return i, v, v.session(req.arg("case"))
        except FdevalError as e:
            raise HttpError(404, str(e)) from None

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


def _instruction(s: SessionView) -> str:
    """The instruction the case was given (Instruct-FD's policy; 'none' for its baseline); '' otherwise."""
    data = s.case.data
    if hasattr(data, "policy_name"):
        return data.policy_name or "none"
    return ""


def _blind(v: RunView) -> bool:
    return v.benchmark in BLIND_BENCHMARKS


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
                    seen.setdefault(k, {}).setdefault(_judge_of(r) or f"run{i}", set()).add(str(r.value))
                    where.setdefault(k, set()).add((i, s.case_id))
    out: set[tuple[int, str]] = set()
    for k, by_judge in seen.items():
        values = set().union(*by_judge.values())
        if len(by_judge) > 1 and len(values) > 1:
            out |= where[k]
    return out


def _multi_judged(views: list[RunView]) -> bool:
    judges = {(v.model_id, s.case_id, _judge_of(r) or str(i)) for i, v in enumerate(views)
              for s in v.sessions for rs in s.results.values() for r in rs}
    return len(judges) > len({(m, c) for m, c, _ in judges})


def session_rows(app: ReviewApp) -> list[dict[str, Any]]:
    disagree = _disagreements(app.views)
    rows = []
    for i, v in enumerate(app.views):
        saved = L.run_labels(v.run_dir)
        for s in v.sessions:
            results = [{"step": step, "key": r.key, "value": r.value, "status": r.status}
                       for step, rs in s.results.items() for r in rs]
            rows.append({
                "run": i, "case_id": s.case_id, "benchmark": v.benchmark,
                "model": HIDDEN if _blind(v) else v.model, "scenario": s.case.scenario or "",
                "instruction": _instruction(s), "state": s.state, "reason": s.reason, "results": results,
                # the labels a result gave (numbers, e.g. TACT onsets, are not a verdict to filter on)
                "verdicts": sorted({"error" if r["status"] == "error" else r["value"] for r in results
                                    if r["status"] == "error" or isinstance(r["value"], str)}),
                "disagree": (i, s.case_id) in disagree,
                "labelled": sum(1 for (c, _k) in saved if c == s.case_id),
            })
    return rows


FILTERS = ("benchmark", "instruction", "scenario", "model", "verdict")


def filter_rows(rows: list[dict[str, Any]], q: Mapping[str, str]) -> list[dict[str, Any]]:
    out = []
    for r in rows:
        if any(q.get(f) and (q[f] not in r["verdicts"] if f == "verdict" else r[f] != q[f]) for f in FILTERS):
            continue
        if q.get("disagree") == "1" and not r["disagree"]:
            continue
        if q.get("invalid") == "1" and r["state"] == "usable":
            continue
        out.append(r)
    return out


@route("GET", "/api/runs")
def api_runs(app: ReviewApp, req: Request) -> Response:
    return json_response({"reviewer": app.reviewer, "nav": NAV, "runs": [
        {"run": i, "benchmark": v.benchmark, "model": HIDDEN if _blind(v) else v.model,
         "run_id": HIDDEN if _blind(v) else v.run_id, "n_sessions": len(v.sessions),
         "results_from": dict(v.steps)}  # the step folders (which judge, which ASR) the results come from
        for i, v in enumerate(app.views)]})


@route("GET", "/api/sessions")
def api_sessions(app: ReviewApp, req: Request) -> Response:
    rows = session_rows(app)
    facets = {f: sorted({x for r in rows for x in (r["verdicts"] if f == "verdict" else [r[f]]) if x})
              for f in FILTERS}
    return json_response({"rows": filter_rows(rows, req.query), "n_total": len(rows), "facets": facets,
                          "multi_judged": _multi_judged(app.views)})


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
    return {"words": words, "user_turns": t.get("user_turns") or [], "duration_s": t.get("duration_s")}


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


def _echochain_criteria(v: RunView, case_id: str) -> tuple[list[dict[str, Any]], str]:
    """The conversation's rubric criteria and transcript text, from the run's review input
    (written by EchoChain's scoring for its blind export)."""
    path = v.run_dir / REVIEW_DIR / REVIEW_INPUT
    try:
        items = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return [], ""
    for c in items if isinstance(items, list) else []:
        if isinstance(c, dict) and c.get("case_id") == case_id:
            return [k for k in c.get("rubric") or [] if isinstance(k, dict)], str(c.get("transcript_text") or "")
    return [], ""


def timeline_png(v: RunView, case_id: str) -> Path | None:
    """The session's timeline PNG (fdeval.report.timeline writes it), when there is one."""
    p = v.run_dir / TIMELINE_FOLDER / f"{case_id}.png"
    return p if p.is_file() else None


def _timeline_axes(s: SessionView) -> dict[str, float]:
    """Where the PNG's time axis lies (fractions of its width) and the seconds it spans: as the
    timeline writer sets them (from 0 to the longer of the log's and the WAV's duration, >= 1 s),
    so the playhead lands on the drawn time."""
    dur = max(1.0, _duration(s) or 0.0)
    if s.log is not None:
        try:
            with h5py.File(s.log, "r") as f:
                dur = max(dur, float(f.attrs.get("duration_s", 0.0)))
        except (OSError, ValueError):
            pass  # an unreadable log: the WAV's duration, as the timeline writer falls back to
    return {"left": TIMELINE_LEFT, "right": TIMELINE_RIGHT, "duration_s": dur}


def _hide(text: str, v: RunView) -> str:
    for s in sorted({v.model, v.model_id, v.model_id.split(":", 1)[0], v.run_id} - {""}, key=len, reverse=True):
        text = re.sub(re.escape(s), HIDDEN, text, flags=re.IGNORECASE)
    return text


def session_detail(app: ReviewApp, i: int, v: RunView, s: SessionView) -> dict[str, Any]:
    blind = _blind(v)
    kind = L.kind_of(v.benchmark)
    results = []
    for step, rs in s.results.items():
        for r in rs:
            expl = _hide(r.explanation, v) if blind else r.explanation
            # the result's scalar metadata (e.g. an automatic label the reviewer's may replace)
            meta = {k: (_hide(x, v) if blind and isinstance(x, str) else x) for k, x in (r.metadata or {}).items()
                    if x is None or isinstance(x, (str, int, float, bool))}
            results.append({"step": step, "key": r.key or L.NO_KEY, "value": r.value, "status": r.status,
                            "explanation": expl, "judge": _judge_of(r), "metadata": meta})
    keys = list(dict.fromkeys(r["key"] for r in results)) or [L.NO_KEY if kind != "echochain" else "review"]
    if kind == "echochain":
        keys = ["review"]
    saved = {k: rec for (c, k), rec in L.run_labels(v.run_dir).items() if c == s.case_id}
    criteria, text = _echochain_criteria(v, s.case_id) if kind == "echochain" else ([], "")
    t = _transcript(s)
    base = f"run={i}&case={s.case_id}"
    out = {
        "run": i, "case_id": s.case_id, "benchmark": v.benchmark, "blind": blind,
        "model": HIDDEN if blind else v.model, "model_id": HIDDEN if blind else v.model_id,
        "run_dir": HIDDEN if blind else str(v.run_dir), "scenario": s.case.scenario or "",
        "instruction": _instruction(s), "state": s.state, "reason": s.reason,
        # the recording's own length (a benchmark's transcript may cover only a window of it)
        "duration_s": _duration(s) or t["duration_s"], "words": t["words"], "user_turns": t["user_turns"],
        "envelope": envelope(s) if not timeline_png(v, s.case_id) else None,
        "results": results, "kind": kind, "keys": keys, "labels": saved, "reviewer": app.reviewer,
        "audio": {n: f"/audio?{base}&ch={c}" for n, c in (("stereo", "both"), ("user", "0"), ("model", "1"))}
        if s.wav else None,
        "timeline": f"/timeline?{base}" if timeline_png(v, s.case_id) else None,
        "timeline_axes": _timeline_axes(s) if timeline_png(v, s.case_id) else None,
        "choices": {"instructfd": list(L.HUMAN_LABELS), "generic": list(L.GENERIC_LABELS),
                    "tact": list(L.ONSET_JUDGMENTS), "taxonomy": sorted(TAXONOMY),
                    "screening": list(SCREENING_CHECKS)},
        "criteria": [{"criterion_id": c["criterion_id"], "text": _hide(str(c.get("text", "")), v)}
                     for c in criteria if "criterion_id" in c],
        "transcript_text": _hide(text, v) if blind else text,
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
    fake = Request("GET", req.path, {"run": str(body.get("run")), "case": str(body.get("case"))}, req.headers)
    i, v, s = app.session(fake)
    key = str(body.get("key") or "")
    kind = L.kind_of(v.benchmark)
    criteria = tuple(c["criterion_id"] for c in _echochain_criteria(v, s.case_id)[0]) if kind == "echochain" else ()
    if kind == "instructfd" and key not in {r.key for rs in s.results.values() for r in rs}:
        raise HttpError(400, f"field key: {key!r} is not an instruction this case was judged against")
    try:
        rec = L.save_label(v.run_dir, v.benchmark, s.case_id, key, app.reviewer, body.get("fields") or {}, criteria)
    except L.LabelError as e:
        raise HttpError(400, str(e)) from None
    return json_response({"saved": rec, "path": str(L.label_path(v.run_dir, s.case_id, key))})


# ---------------------------------------------------------------------------------------------
# Judge validation (Instruct-FD), recomputed from the saved labels on every request


def validation(app: ReviewApp) -> dict[str, Any]:
    labels, verdicts = [], []
    runs = []
    for v in app.views:
        if v.benchmark != "instructfd":
            continue
        name = f"{v.model} ({v.run_id})"
        tag = f"{v.model_id or v.model}@{v.run_id}"  # one run's verdicts answer only its own labels
        labels += [L.HumanLabel(h.case_id, h.policy, h.label, tag, h.annotator, h.path, h.line)
                   for h in L.to_human_labels(v.run_dir, tag)]
        for s in v.sessions:
            for r in s.results.get("judge", []):
                verdicts.append(ModelVerdict(Verdict(s.case_id, r.key, "error" if r.status == "error" else r.value,
                                                     r.explanation, _judge_of(r), "", ""), tag, name))
        runs.append(name)
    result = validate_judge(labels, verdicts)
    return {"columns": list(VALIDATION_COLUMNS), "rows": result.rows, "n_labels": result.n_labels,
            "n_unmatched": result.n_unmatched, "runs": runs}


@route("GET", "/api/validation")
def api_validation(app: ReviewApp, req: Request) -> Response:
    return json_response(validation(app))


# ---------------------------------------------------------------------------------------------
# Audio and images


def ranged(req: Request, data: bytes, content_type: str) -> Response:
    """`data` whole (200) or the requested byte range (206), as browsers seek audio with."""
    n = len(data)
    headers = {"Accept-Ranges": "bytes"}
    m = _RANGE.match(req.headers.get("Range", "").strip())
    if not m or not (m.group(1) or m.group(2)):
        return Response(200, data, content_type, headers)
    if m.group(1):
        start = int(m.group(1))
        end = min(int(m.group(2)), n - 1) if m.group(2) else n - 1
    else:  # a suffix: the last N bytes
        start, end = max(0, n - int(m.group(2))), n - 1
    if start >= n or start > end:
        return Response(416, b"", content_type, {**headers, "Content-Range": f"bytes */{n}"})
    return Response(206, data[start:end + 1], content_type, {**headers, "Content-Range": f"bytes {start}-{end}/{n}"})


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


def static_file(path: str) -> Response:
    name = "index.html" if path in ("", "/") else path.removeprefix("/static/")
    f = (STATIC / name).resolve()
    if not f.is_relative_to(STATIC) or not f.is_file():
        raise HttpError(404, f"no file {path}")
    return Response(200, f.read_bytes(), _MIME.get(f.suffix, "application/octet-stream"))


# ---------------------------------------------------------------------------------------------
# HTTP


def dispatch(app: ReviewApp, req: Request) -> Response:
    try:
        fn = ROUTES.get(f"{req.method} {req.path}")
        if fn is not None:
            return fn(app, req)
        if req.method == "GET" and (req.path in ("", "/") or req.path.startswith("/static/")):
            return static_file(req.path)
        raise HttpError(404, f"no route {req.method} {req.path}")
    except HttpError as e:
        return json_response({"error": str(e)}, e.status)
    except FdevalError as e:
        return json_response({"error": str(e)}, 500)


def make_handler(app: ReviewApp) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def _serve(self) -> None:
            u = urlsplit(self.path)
            n = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(n) if n else b""
            q = {k: v[-1] for k, v in parse_qs(u.query, keep_blank_values=True).items()}
            resp = dispatch(app, Request(self.command, u.path, q, self.headers, body))
            self.send_response(resp.status)
            self.send_header("Content-Type", resp.content_type)
            self.send_header("Content-Length", str(len(resp.body)))
            self.send_header("Cache-Control", "no-store")
            for k, val in resp.headers.items():
                self.send_header(k, val)
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(resp.body)

        do_GET = do_POST = do_HEAD = _serve

        def log_message(self, format: str, *args: Any) -> None:  # quiet: the console shows the URL only
            if os.environ.get("FDEVAL_REVIEW_LOG"):
                super().log_message(format, *args)

    return Handler


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        # a browser drops audio connections when it seeks or leaves the page: not an error
        if not isinstance(sys.exc_info()[1], (ConnectionResetError, BrokenPipeError)):
            super().handle_error(request, client_address)


def make_server(app: ReviewApp, port: int = 0) -> ThreadingHTTPServer:
    """Bound to 127.0.0.1 only (reviews hold unpublished audio); port 0 picks a free one."""
    server = _Server(("127.0.0.1", port), make_handler(app))
    server.daemon_threads = True
    return server


# Extensions register their routes on import: the human study, when it is installed.
if importlib.util.find_spec("fdeval.review.study") is not None:
    importlib.import_module("fdeval.review.study")
