"""The review app is safe on a shared machine (issue 28 item 4), over real HTTP on 127.0.0.1
against the real server: a foreign Host is refused before any route (DNS rebinding), a POST
needs the same origin and the launch's token (CSRF), files come only from inside the run folder
(symlinks resolved), bodies and headers are checked (413, 400, 416, no hanging thread), every
response carries a strict CSP, a route's bug is a one-line 500, case text is escaped in the
Markdown report, and the human study's participant mode exposes no review page or verdict."""

from __future__ import annotations

import csv
import http.client
import json
import logging
import re
import shutil
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

import numpy as np
import pytest

from fdeval.review.server import ROUTES, ReviewApp, make_server, route


@pytest.fixture()
def run_copy(instructfd_run, tmp_path) -> Path:
    """A private copy of the shared run (tests here plant symlinks and write labels)."""
    dst = tmp_path / "out" / "instructfd" / instructfd_run.parent.name / instructfd_run.name
    shutil.copytree(instructfd_run, dst)
    shutil.copytree(instructfd_run.parents[1] / "_data", tmp_path / "out" / "instructfd" / "_data")
    return dst


def _start(app: ReviewApp, **kw):
    srv = make_server(app, **kw)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    return srv


@pytest.fixture()
def served(run_copy):
    """(base URL, app, run folder, port) of a server over the private copy."""
    app = ReviewApp([run_copy], "tester")
    srv = _start(app)
    port = srv.server_address[1]
    yield f"http://127.0.0.1:{port}", app, run_copy, port
    srv.shutdown()
    srv.server_close()


def request(
    url: str, data: bytes | None = None, headers: dict | None = None, method: str | None = None
):
    req = urllib.request.Request(url, data=data, headers=headers or {}, method=method)
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status, dict(r.headers), r.read()
    except urllib.error.HTTPError as e:
        return e.code, dict(e.headers), e.read()


def raw(port: int, head: bytes, body: bytes = b"", wait_s: float = 20.0) -> bytes:
    """Send bytes as they are (headers a client library would not send) and read the answer until
    the server closes the connection or `wait_s` passes (then b'' marks a server that did not answer)."""
    with socket.create_connection(("127.0.0.1", port), timeout=wait_s) as s:
        s.sendall(head + body)
        out = b""
        try:
            while chunk := s.recv(65536):
                out += chunk
                if b"\r\n\r\n" in out and b"Connection: close" not in out.split(b"\r\n\r\n")[0]:
                    break  # a keep-alive answer: enough of it
        except (TimeoutError, ConnectionResetError):
            pass
        return out


def status_of(answer: bytes) -> int | None:
    m = re.match(rb"HTTP/1\.[01] (\d{3}) ", answer)
    return int(m.group(1)) if m else None


def label_body(app: ReviewApp, note: str = "") -> tuple[bytes, Path]:
    s = next(s for s in app.views[0].sessions if s.results.get("judge"))
    key = s.results["judge"][0].key
    body = json.dumps(
        {"run": 0, "case": s.case_id, "key": key, "fields": {"label": "adhere", "note": note}}
    )
    return body.encode(), app.views[0].run_dir / "review" / "labels" / f"{s.case_id}@{key}.json"


def page_token(base: str) -> str:
    html = request(base + "/")[2].decode()
    return re.search(r'<meta name="fdeval-token" content="([^"]+)">', html).group(1)


def still_answers(base: str) -> None:
    status, _, body = request(base + "/api/runs")
    assert status == 200 and json.loads(body)["runs"], body


# -- CSRF ---------------------------------------------------------------------------------------


def test_a_cross_origin_post_is_refused(served):
    """A page on another site may POST a text/plain body without a preflight: refused (403), and
    so is a POST without Origin or Referer, or without the launch's token; the page's own POST
    (same origin, the token from its <meta>) is saved."""
    base, app, run, _ = served
    body, path = label_body(app, "csrf")
    token = page_token(base)
    assert token == app.token
    for headers in (
        {"Content-Type": "text/plain", "Origin": "http://evil.example"},
        {"Content-Type": "text/plain", "Origin": "http://evil.example", "X-Fdeval-Token": token},
        {"Content-Type": "text/plain", "Referer": "http://evil.example/page"},
        {"Content-Type": "application/json", "Origin": "null", "X-Fdeval-Token": token},
        {"Content-Type": "application/json"},  # neither Origin nor Referer
        {"Content-Type": "application/json", "Origin": base},  # same origin, no token
        {"Content-Type": "application/json", "Origin": base, "X-Fdeval-Token": "guess"},
    ):
        status, _, answer = request(base + "/api/label", body, headers)
        assert status == 403, (headers, status, answer)
        assert len(json.loads(answer)["error"].splitlines()) == 1
        assert not path.exists(), headers
    same = {"Content-Type": "application/json", "Origin": base, "X-Fdeval-Token": token}
    status, _, answer = request(base + "/api/label", body, same)
    assert status == 200, answer
    assert json.loads(path.read_text())["note"] == "csrf"
    # no Origin (some browsers' same-origin requests): the Referer decides
    referred = {
        "Content-Type": "application/json",
        "Referer": base + "/#/session/0/x",
        "X-Fdeval-Token": token,
    }
    status, _, answer = request(base + "/api/label", body, referred)
    assert status == 200, answer


# -- DNS rebinding --------------------------------------------------------------------------------


def test_a_foreign_host_is_refused_before_any_route(served):
    base, app, run, port = served
    s = app.views[0].sessions[0]
    for host in (
        "evil.example",
        f"evil.example:{port}",
        f"127.0.0.1:{port + 1}",
        "127.0.0.1",
        "localhost",
    ):
        for path in ("/api/runs", f"/audio?run=0&case={s.case_id}", "/"):
            status, headers, answer = request(base + path, headers={"Host": host})
            assert status in (421, 403), (host, path, status)
            assert s.case_id.encode() not in answer and b"RIFF" not in answer
            assert "Content-Security-Policy" in headers
    # the bound address and localhost (an SSH tunnel on the same port) are this server
    for host in (f"127.0.0.1:{port}", f"localhost:{port}", f"LOCALHOST:{port}"):
        assert request(base + "/api/runs", headers={"Host": host})[0] == 200, host
    # a POST to a foreign Host is refused too, even with the right origin and token
    body, path = label_body(app)
    status, _, _ = request(
        base + "/api/label",
        body,
        {"Host": "evil.example", "Origin": "http://evil.example", "X-Fdeval-Token": app.token},
    )
    assert status in (421, 403) and not path.exists()


# -- files --------------------------------------------------------------------------------------


def test_files_outside_the_run_folder_are_not_served(served, tmp_path):
    """A session WAV that is a symlink out of the run (to /etc/passwd, to another folder's file)
    and a timeline PNG that is one are refused, and nothing of them reaches the session page."""
    base, app, run, _ = served
    secret = tmp_path / "elsewhere" / "secret.wav"
    secret.parent.mkdir()
    secret.write_bytes(b"RIFF-not-yours-" + b"x" * 100)
    a, b = app.views[0].sessions[0], app.views[0].sessions[1]
    a.wav.unlink()
    a.wav.symlink_to("/etc/passwd")
    b.wav.unlink()
    b.wav.symlink_to(secret)
    png = run / "timelines" / f"{a.case_id}.png"
    png.parent.mkdir(exist_ok=True)
    png.unlink(missing_ok=True)
    png.symlink_to(secret)
    for s in (a, b):
        for ch in ("both", "0", "1"):
            status, _, answer = request(f"{base}/audio?run=0&case={s.case_id}&ch={ch}")
            assert status in (403, 404), (s.case_id, ch, status)
            assert b"root:" not in answer and b"not-yours" not in answer
        detail = request(f"{base}/api/session?run=0&case={s.case_id}")[2]
        assert (
            b"root:" not in detail
            and b"not-yours" not in detail
            and str(secret).encode() not in detail
        )
        assert json.loads(detail)["audio"] is None
    status, _, answer = request(f"{base}/timeline?run=0&case={a.case_id}")
    assert status in (403, 404) and b"not-yours" not in answer
    assert json.loads(request(f"{base}/api/session?run=0&case={a.case_id}")[2])["timeline"] is None
    # a recording inside the run is served as before
    c = app.views[0].sessions[2]
    status, _, answer = request(f"{base}/audio?run=0&case={c.case_id}")
    assert status == 200 and answer == c.wav.read_bytes()


def test_a_study_stimulus_outside_the_study_is_not_served(tmp_path):
    """The human study's audio passes the same check: a stimulus symlinked out of the study folder
    (and not a session recording of its run) is a 404."""
    from fdeval.review import study as ST

    folder = tmp_path / "study"
    (folder / "stimuli").mkdir(parents=True)
    (folder / "stimuli" / "ok.wav").write_bytes(b"RIFF-ok")
    (folder / "stimuli" / "bad.wav").symlink_to("/etc/passwd")
    st = ST.Study.__new__(ST.Study)
    st.folder = folder
    st.stimuli = {
        "ok": {"path": "stimuli/ok.wav"},
        "bad": {"path": "stimuli/bad.wav"},
        "up": {"path": "../../../../etc/passwd"},
    }
    assert ST.audio_path(st, "ok") == (folder / "stimuli" / "ok.wav").resolve()
    for item in ("bad", "up"):
        with pytest.raises(ST.StudyError, match="outside"):
            ST.audio_path(st, item)


# -- bodies, headers, threads ---------------------------------------------------------------------


def test_a_10_mb_body_is_413_and_a_long_note_400(served):
    base, app, run, port = served
    body, path = label_body(app)
    head = (
        f"POST /api/label HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nOrigin: {base}\r\nX-Fdeval-Token: {app.token}\r\n"
        f"Content-Type: application/json\r\nContent-Length: {10 * 1024 * 1024}\r\n\r\n"
    ).encode()
    answer = raw(port, head, b"x" * 65536)  # the server answers before the 10 MB arrive
    assert status_of(answer) == 413, answer[:300]
    assert b"Traceback" not in answer and not path.exists()
    # a note over the cap (the body itself under the limit): one line naming the field
    body, path = label_body(app, "n" * 5000)
    status, _, answer = request(
        base + "/api/label",
        body,
        {"Content-Type": "application/json", "Origin": base, "X-Fdeval-Token": app.token},
    )
    assert status == 400, answer
    err = json.loads(answer)["error"]
    assert "field note" in err and len(err.splitlines()) == 1 and not path.exists()
    still_answers(base)


def test_a_malformed_content_length_is_400(served):
    base, app, run, port = served
    for value in ("abc", "-5", "1e3", "12 34", "9" * 5000):
        head = (
            f"POST /api/label HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nOrigin: {base}\r\n"
            f"X-Fdeval-Token: {app.token}\r\nContent-Length: {value}\r\n\r\n"
        ).encode()
        answer = raw(port, head, b"{}")
        assert status_of(answer) == 400, (value[:20], answer[:300])
        assert b"Traceback" not in answer
        assert len(json.loads(answer.split(b"\r\n\r\n", 1)[1])["error"].splitlines()) == 1
    still_answers(base)


def test_a_body_shorter_than_announced_does_not_hold_a_thread(run_copy):
    """A client that announces more than it sends is dropped when the socket times out (here
    1 s), with an answer, and the server goes on answering."""
    app = ReviewApp([run_copy], "tester")
    srv = _start(app, timeout_s=1.0)
    port = srv.server_address[1]
    base = f"http://127.0.0.1:{port}"
    try:
        head = (
            f"POST /api/label HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nOrigin: {base}\r\n"
            f"X-Fdeval-Token: {app.token}\r\nContent-Length: 100\r\n\r\n"
        ).encode()
        t0 = time.monotonic()
        answer = raw(port, head, b'{"run": 0', wait_s=20)
        assert status_of(answer) in (400, 408), answer[:300]
        assert time.monotonic() - t0 < 10
        still_answers(base)
    finally:
        srv.shutdown()
        srv.server_close()


def test_a_bad_range_is_416_and_the_server_goes_on(served):
    base, app, run, port = served
    s = app.views[0].sessions[0]
    url = f"{base}/audio?run=0&case={s.case_id}"
    n = len(s.wav.read_bytes())
    for rng in (
        "bytes=abc",
        "bytes=0-1,5-6",
        "items=0-9",
        "bytes=--1",
        "bytes=-",
        f"bytes={n}-",
        "bytes=5-1",
        "bytes=" + "9" * 5000 + "-",
        "bytes=1-2 x",
    ):
        status, headers, answer = request(url, headers={"Range": rng})
        assert status in (416, 400), (rng[:30], status)
        assert b"Traceback" not in answer and headers.get("Content-Range") == f"bytes */{n}"
        still_answers(base)
    assert request(url, headers={"Range": "bytes=0-9"})[0] == 206  # a good one still seeks


# -- headers and errors ---------------------------------------------------------------------------


def test_every_response_sends_a_strict_csp(served):
    base, app, run, port = served
    s = app.views[0].sessions[0]
    for path in (
        "/",
        "/static/app.js",
        "/api/runs",
        f"/api/session?run=0&case={s.case_id}",
        f"/audio?run=0&case={s.case_id}",
        "/nope",
        "/api/session?run=9&case=x",
    ):
        _, headers, _ = request(base + path)
        csp = headers.get("Content-Security-Policy", "")
        assert "default-src 'self'" in csp and "frame-ancestors 'none'" in csp, (path, headers)
        assert "unsafe-inline" not in csp and "unsafe-eval" not in csp
        assert (
            headers.get("X-Content-Type-Options") == "nosniff"
            and headers.get("X-Frame-Options") == "DENY"
        )
    # a refusal and the stdlib's own error pages carry them too
    assert "Content-Security-Policy" in request(base + "/", headers={"Host": "evil.example"})[1]
    answer = raw(port, b"BREW / HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n\r\n" % port)
    assert status_of(answer) == 501 and b"Content-Security-Policy: default-src 'self'" in answer
    # the pages work under it: no inline script, no inline handler, no style attribute
    for page in ("/", "/static/study.html"):
        html = request(base + page)[2].decode()
        assert all('src="' in tag for tag in re.findall(r"<script[^>]*>", html)), html
        assert not re.search(r"\son[a-z]+=|\sstyle=|<style", html), html


def test_a_route_that_fails_is_a_one_line_500(served, caplog):
    base, app, run, _ = served

    @route("GET", "/api/test-boom")
    def boom(app, req):
        raise RuntimeError("secret internals /home/someone/.key")

    try:
        with caplog.at_level(logging.ERROR, logger="fdeval.review"):
            status, headers, answer = request(base + "/api/test-boom")
        assert status == 500 and headers["Content-Type"] == "application/json"
        err = json.loads(answer)["error"]
        assert (
            len(err.splitlines()) == 1 and "Traceback" not in err and "secret internals" not in err
        )
        assert "secret internals" in caplog.text  # the traceback is the server's log's
        still_answers(base)
    finally:
        ROUTES.pop("GET /api/test-boom")


# -- reports --------------------------------------------------------------------------------------


def test_scenario_ias_md_escapes_case_text(tmp_path):
    """scenario_ias.md (written by the Instruct-FD report, build._write of _scenario_pivot) holds
    the cases' scenario and instruction text: HTML in it stays text, and a `|` stays in its cell;
    the CSV keeps the raw text and the LaTeX its own escaping."""
    from fdeval.benchmarks.instructfd.reporting.build import _scenario_pivot, _write

    evil = '<img src=x onerror="alert(1)"> Q&A | split'
    rows = [
        {"scenario": evil, "instruction": "listen", "ias": 0.5},
        {"scenario": evil, "instruction": "<b>x</b>", "ias": 1.0},
        {"scenario": "plain", "instruction": "listen", "ias": 0.25},
    ]
    _write(tmp_path, "scenario_ias", rows, [_scenario_pivot(rows)], "Scenario-level IAS", [])
    md = (tmp_path / "scenario_ias.md").read_text()
    assert "<img" not in md and "<b>" not in md and 'onerror="alert' in md
    assert '&lt;img src=x onerror="alert(1)"&gt; Q&amp;A \\| split' in md and "&lt;b&gt;" in md
    table = [line for line in md.splitlines() if line.startswith("|")]
    assert (
        len({line.replace("\\|", "").count("|") for line in table}) == 1
    )  # every row has its columns
    with open(tmp_path / "scenario_ias.csv", newline="") as f:
        assert {r["scenario"] for r in csv.DictReader(f)} == {evil, "plain"}
    assert r"\textless{}img" in (tmp_path / "scenario_ias.tex").read_text()


# -- the human study's participant mode -------------------------------------------------------------


@pytest.fixture()
def study_dir(run_copy, tmp_path) -> Path:
    """A study built from the run (the reference model's lines as silence: no voice needed)."""
    from fdeval.review import study as ST

    silent = lambda case: lambda text: np.zeros(1600, np.float32)  # noqa: E731
    return ST.build_study(run_copy, tmp_path / "study", speaker=silent)


def test_participant_mode_exposes_no_review_page_or_verdict(study_dir, run_copy):
    """`python -m fdeval.review.study serve` (participant mode, as a participant gets it): the study
    page has no link to the review app, the review API and pages are refused (runs, sessions,
    verdicts, labels, audio), the study itself works."""
    p = subprocess.Popen(
        [sys.executable, "-m", "fdeval.review.study", "serve", str(study_dir)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        line = p.stdout.readline().strip()
        assert line.startswith("fdeval study: http://127.0.0.1:"), (line, p.poll())
        base = line.split(": ", 1)[1].removesuffix("/static/study.html")
        port = int(base.rsplit(":", 1)[1])
        page = request(base + "/static/study.html")[2].decode()
        assert 'href="/"' not in page and "Review app" not in page
        token = re.search(r'<meta name="fdeval-token" content="([^"]+)">', page).group(1)
        info = json.loads(request(base + "/api/study/info")[2])
        assert info["review_app"] is False and "participants" not in info and info["n_items"] > 0
        conn = http.client.HTTPConnection(
            "127.0.0.1", port, timeout=30
        )  # "/" leads to the study page
        conn.request("GET", "/")
        r = conn.getresponse()
        assert r.status == 303 and r.getheader("Location") == "/static/study.html"
        conn.close()
        case = next((run_copy / "sessions").glob("*.wav")).stem
        for path in (
            "/api/runs",
            "/api/sessions",
            f"/api/session?run=0&case={case}",
            "/api/validation",
            f"/audio?run=0&case={case}",
            f"/timeline?run=0&case={case}",
            "/api/study/list",
            "/static/index.html",
            "/static/app.js",
        ):
            status, _, answer = request(base + path)
            assert status == 403, (path, status)
            assert b"verdict" not in answer and b"adhere" not in answer
        same = {"Content-Type": "application/json", "Origin": base, "X-Fdeval-Token": token}
        status, _, _ = request(
            base + "/api/label",
            json.dumps(
                {"run": 0, "case": case, "key": "listen", "fields": {"label": "adhere"}}
            ).encode(),
            same,
        )
        assert status == 403 and not (run_copy / "review" / "labels").exists()
        # the participant's own routes work
        status, _, answer = request(
            base + "/api/study/participant", json.dumps({"participant": "p1"}).encode(), same
        )
        assert status == 200 and json.loads(answer)["participant"] == "p1"
        status, _, answer = request(base + "/api/study/audio?tutorial=listen-0")
        assert status == 200 and answer[:4] == b"RIFF"
    finally:
        p.terminate()
        p.wait(timeout=30)


def test_the_review_app_still_links_its_study(study_dir, run_copy):
    """Served by `python -m fdeval.review RUN` (not participant mode) the study page may link back."""
    from fdeval.review import study as ST

    app = ReviewApp([run_copy], "tester")
    app.studies = [ST.Study(study_dir)]
    srv = _start(app)
    base = f"http://127.0.0.1:{srv.server_address[1]}"
    try:
        assert json.loads(request(base + "/api/study/info")[2])["review_app"] is True
        assert request(base + "/api/runs")[0] == 200
    finally:
        srv.shutdown()
        srv.server_close()
