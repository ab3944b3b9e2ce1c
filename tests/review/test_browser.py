"""The review app in headless Chromium (Debian's /usr/bin/chromium driven by Playwright's Python
package; no browser download): the session list loads, a session plays, a label entered in the
browser shows in the judge-validation table. Screenshots go to $FDEVAL_TEST_ARTIFACTS/review_browser
(or a tmp folder), printed by the test. Skipped, with the reason, when chromium or playwright is missing."""

from __future__ import annotations

import json
import os
import shutil
import threading
from pathlib import Path

import pytest

from fdeval.review.server import ReviewApp, make_server

try:  # the timeline writer (issue 13 item 1); without it the page's canvas is the timeline
    from fdeval.report.timeline import LEFT, RIGHT, render
except ImportError:
    render = None

CHROMIUM = os.environ.get("FDEVAL_CHROMIUM", "/usr/bin/chromium")
sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed (pip install playwright)")
if not Path(CHROMIUM).is_file():
    pytest.skip(f"no Chromium at {CHROMIUM} (apt-get install -y chromium)", allow_module_level=True)


@pytest.fixture()
def artifacts(tmp_path) -> Path:
    root = os.environ.get("FDEVAL_TEST_ARTIFACTS")
    out = Path(root) / "review_browser" if root else tmp_path / "review_browser"
    out.mkdir(parents=True, exist_ok=True)
    print(f"\nreview browser screenshots: {out}")
    return out


def test_list_play_label_validation(instructfd_run, tmp_path, artifacts):
    run = tmp_path / "out" / "instructfd" / instructfd_run.parent.name / instructfd_run.name
    shutil.copytree(instructfd_run, run)
    shutil.copytree(instructfd_run.parents[1] / "_data", tmp_path / "out" / "instructfd" / "_data")
    app = ReviewApp([run], "browser-tester")
    case = next(s for s in app.views[0].sessions if s.results.get("judge"))
    other = next(s for s in app.views[0].sessions if s.case_id != case.case_id)
    if render is not None:  # the played session has its PNG (the score step may have written it)
        render(case, run / "timelines" / f"{case.case_id}.png")
    (run / "timelines" / f"{other.case_id}.png").unlink(missing_ok=True)  # this one shows the canvas
    srv = make_server(app)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{srv.server_address[1]}/"
    n = len(app.views[0].sessions)
    key, judged = case.results["judge"][0].key, case.results["judge"][0].value
    human = "not_adhere" if judged == "adhere" else "adhere"
    try:
        with sync_api.sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, headless=True,
                                        args=["--autoplay-policy=no-user-gesture-required", "--no-sandbox"])
            page = browser.new_page(viewport={"width": 1280, "height": 900})
            page.set_default_timeout(120_000)  # every wait returns once its condition holds: room for a loaded machine
            errors: list[str] = []
            page.on("pageerror", lambda e: errors.append(str(e)))

            # the list loads, with every session, and a filter narrows it
            page.goto(base)
            page.wait_for_selector("#sessions tbody tr")
            assert page.locator("#sessions tbody tr").count() == n
            page.screenshot(path=str(artifacts / "1_list.png"), full_page=True)
            page.select_option('select[name="instruction"]', "listen")
            page.wait_for_function("document.querySelector('#count').textContent.startsWith('%d ')" % sum(
                1 for s in app.views[0].sessions if getattr(s.case.data, "policy_name", None) == "listen"))

            # a session plays: the play promise resolves and the clock moves, the playhead with it
            page.goto(f"{base}#/session/0/{case.case_id}")
            page.wait_for_selector("#audio-stereo")
            page.wait_for_function("document.querySelector('#audio-stereo').readyState >= 1")
            page.evaluate("document.querySelector('#audio-stereo').play()")
            page.wait_for_function("document.querySelector('#audio-stereo').currentTime > 1.0")
            page.evaluate("document.querySelector('#audio-stereo').pause()")
            t = page.evaluate("document.querySelector('#audio-stereo').currentTime")
            # the playhead moves on animation frames: two after the pause (not a time a loaded machine may miss)
            page.evaluate("new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)))")
            left = page.evaluate("parseFloat(document.querySelector('#playhead').style.left)")
            if render is not None:  # on the PNG's time axis (the writer's margins)
                assert page.locator("#timeline img").count() == 1
                dur = page.evaluate("fetch('/api/session?run=0&case=%s').then(r => r.json())"
                                    ".then(d => d.timeline_axes.duration_s)" % case.case_id)
                assert left == pytest.approx(100 * (LEFT + t / dur * (RIGHT - LEFT)), abs=0.2)
            assert left > (100 * LEFT if render else 0), "the playhead did not move"
            page.screenshot(path=str(artifacts / "2_session_playing.png"), full_page=True)
            # each channel alone plays too
            page.evaluate("document.querySelector('#audio-model').play()")
            page.wait_for_function("document.querySelector('#audio-model').currentTime > 0.3")

            # a label entered in the browser ...
            form = page.locator(f'form.label[data-key="{key}"]')
            form.locator(f'input[name="label"][value="{human}"]').check()
            form.locator('input[name="note"]').fill("entered in the browser")
            form.locator('button[type="submit"]').click()
            page.wait_for_function(f"document.querySelector('form.label[data-key=\"{key}\"] .status').textContent"
                                   ".startsWith('saved by browser-tester')")
            page.screenshot(path=str(artifacts / "3_label_saved.png"), full_page=True)
            saved = json.loads((run / "review" / "labels" / f"{case.case_id}@{key}.json").read_text())
            assert saved["label"] == human and saved["reviewer"] == "browser-tester"

            # ... appears in the judge-validation table: 1 label, compared, and the judge wrong on it
            # a session without a PNG: the canvas of its words
            page.goto(f"{base}#/session/0/{other.case_id}")
            page.wait_for_selector("#timeline canvas")
            page.screenshot(path=str(artifacts / "4_session_canvas.png"), full_page=True)

            page.goto(f"{base}#/validation")
            page.wait_for_selector("#validation tbody tr")
            cells = page.locator("#validation tbody tr").first.locator("td").all_inner_texts()
            cols = page.locator("#validation thead th").all_inner_texts()
            row = dict(zip(cols, cells))
            assert (row["group"], row["n_labels"], row["n_compared"], row["accuracy"]) == ("overall", "1", "1", "0")
            assert row["fn" if human == "adhere" else "fp"] == "1"
            page.screenshot(path=str(artifacts / "5_validation.png"), full_page=True)
            assert not errors, errors
            browser.close()
    finally:
        srv.shutdown()
        srv.server_close()
