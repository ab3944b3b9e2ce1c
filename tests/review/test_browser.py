"""The review app in headless Chromium (Debian's /usr/bin/chromium driven by Playwright's Python
package; no browser download): the session list loads, a session plays, a label entered in the
browser shows in the judge-validation table. Screenshots go to $FDEVAL_TEST_ARTIFACTS/review_browser
(or a tmp folder), printed by the test. Skipped, with the reason, when chromium or playwright is missing.
One browser for the module (conftest.py's `chromium`), a context per test; every wait is a function
(the server's CSP forbids the string eval Playwright uses for an expression)."""

from __future__ import annotations

import json
import os
import shutil
import threading
from pathlib import Path

import pytest
from helpers.launching import run_launch

from fdeval.benchmarks.echochain.review import automatic_taxonomy
from fdeval.benchmarks.instructfd.metrics.validation import HUMAN_LABELS
from fdeval.benchmarks.tact.review import decision_point_s
from fdeval.review.server import ReviewApp, filter_rows, make_server, session_rows

from test_labelling import (
    copy_run,
)  # tests/review is on sys.path (no __init__.py: rootdir-relative import)

try:  # the timeline writer (issue 13 item 1); without it the page's canvas is the timeline
    from fdeval.report.timeline import LEFT, RIGHT, render
except ImportError:
    render = None

TOY = Path(__file__).resolve().parents[1] / "engine" / "toy"  # a benchmark from outside fdeval
CHROMIUM = os.environ.get("FDEVAL_CHROMIUM", "/usr/bin/chromium")
sync_api = pytest.importorskip(
    "playwright.sync_api", reason="playwright is not installed (pip install playwright)"
)
if not Path(CHROMIUM).is_file():
    pytest.skip(f"no Chromium at {CHROMIUM} (apt-get install -y chromium)", allow_module_level=True)


@pytest.fixture()
def artifacts(tmp_path) -> Path:
    root = os.environ.get("FDEVAL_TEST_ARTIFACTS")
    out = Path(root) / "review_browser" if root else tmp_path / "review_browser"
    out.mkdir(parents=True, exist_ok=True)
    print(f"\nreview browser screenshots: {out}")
    return out


def test_list_play_label_validation(instructfd_run, tmp_path, artifacts, chromium):
    run = tmp_path / "out" / "instructfd" / instructfd_run.parent.name / instructfd_run.name
    shutil.copytree(instructfd_run, run)
    shutil.copytree(instructfd_run.parents[1] / "_data", tmp_path / "out" / "instructfd" / "_data")
    app = ReviewApp([run], "browser-tester")
    case = next(s for s in app.views[0].sessions if s.results.get("judge"))
    other = next(s for s in app.views[0].sessions if s.case_id != case.case_id)
    if render is not None:  # the played session has its PNG (the score step may have written it)
        render(case, run / "timelines" / f"{case.case_id}.png")
    (run / "timelines" / f"{other.case_id}.png").unlink(
        missing_ok=True
    )  # this one shows the canvas
    srv = make_server(app)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{srv.server_address[1]}/"
    n = len(app.views[0].sessions)
    key, judged = case.results["judge"][0].key, case.results["judge"][0].value
    human = "not_adhere" if judged == "adhere" else "adhere"
    try:
        with chromium.new_context(
            viewport={"width": 1280, "height": 900}
        ) as ctx:  # the module's one browser
            page = ctx.new_page()
            page.set_default_timeout(
                120_000
            )  # every wait returns once its condition holds: room for a loaded machine
            errors: list[str] = []
            page.on("pageerror", lambda e: errors.append(str(e)))

            # the list loads, with every session, and a filter narrows it
            page.goto(base)
            page.wait_for_selector("#sessions tbody tr")
            assert page.locator("#sessions tbody tr").count() == n
            page.screenshot(path=str(artifacts / "1_list.png"), full_page=True)
            page.select_option('select[name="instruction"]', "listen")
            page.wait_for_function(
                "() => document.querySelector('#count').textContent.startsWith('%d ')"
                % sum(
                    1
                    for s in app.views[0].sessions
                    if getattr(s.case.data, "policy_name", None) == "listen"
                )
            )

            # a session plays: the play promise resolves and the clock moves, the playhead with it
            page.goto(f"{base}#/session/0/{case.case_id}")
            page.wait_for_selector("#audio-stereo")
            page.wait_for_function("() => document.querySelector('#audio-stereo').readyState >= 1")
            page.evaluate("document.querySelector('#audio-stereo').play()")
            page.wait_for_function(
                "() => document.querySelector('#audio-stereo').currentTime > 1.0"
            )
            page.evaluate("document.querySelector('#audio-stereo').pause()")
            t = page.evaluate("document.querySelector('#audio-stereo').currentTime")
            # the playhead moves on animation frames: two after the pause (not a time a loaded machine may miss)
            page.evaluate("new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)))")
            left = page.evaluate("parseFloat(document.querySelector('#playhead').style.left)")
            if render is not None:  # on the PNG's time axis (the writer's margins)
                assert page.locator("#timeline img").count() == 1
                dur = page.evaluate(
                    "fetch('/api/session?run=0&case=%s').then(r => r.json())"
                    ".then(d => d.timeline_axes.duration_s)" % case.case_id
                )
                assert left == pytest.approx(100 * (LEFT + t / dur * (RIGHT - LEFT)), abs=0.2)
            assert left > (100 * LEFT if render else 0), "the playhead did not move"
            page.screenshot(path=str(artifacts / "2_session_playing.png"), full_page=True)
            # each channel alone plays too
            page.evaluate("document.querySelector('#audio-model').play()")
            page.wait_for_function("() => document.querySelector('#audio-model').currentTime > 0.3")

            # a label entered in the browser (the page stays: no auto-advance to the next session) ...
            page.uncheck("#auto-advance")
            form = page.locator(f'form.label[data-key="{key}"]')
            form.locator(f'input[name="label"][value="{human}"]').check()
            form.locator('input[name="note"]').fill("entered in the browser")
            form.locator('button[type="submit"]').click()
            page.wait_for_function(
                f"() => document.querySelector('form.label[data-key=\"{key}\"] .status').textContent"
                ".startsWith('saved by browser-tester')"
            )
            page.screenshot(path=str(artifacts / "3_label_saved.png"), full_page=True)
            saved = json.loads(
                (run / "review" / "labels" / f"{case.case_id}@{key}.json").read_text()
            )
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
            assert (row["group"], row["n_labels"], row["n_compared"], row["accuracy"]) == (
                "overall",
                "1",
                "1",
                "0",
            )
            assert row["fn" if human == "adhere" else "fp"] == "1"
            page.screenshot(path=str(artifacts / "5_validation.png"), full_page=True)
            assert not errors, errors
    finally:
        srv.shutdown()
        srv.server_close()


def test_the_benchmarks_forms_drive_the_page(
    instructfd_run, tmp_path, artifacts, monkeypatch, chromium
):
    """The label form is the benchmark's (its review view): EchoChain's form (screening, a grade per
    criterion, taxonomy beside the automatic label, audit by a second reviewer) and TACT's (onset
    judgment, own onset time marked at the playhead) work in the page as they did when the page
    knew them by name, shown here on the Instruct-FD run by giving its benchmark those views."""
    from fdeval.benchmarks.echochain.review import EchoChainReview, automatic_taxonomy
    from fdeval.benchmarks.echochain.taxonomy import TAXONOMY
    from fdeval.benchmarks.instructfd.benchmark import InstructFD
    from fdeval.benchmarks.tact.review import TactReview

    class EchoChainLike(
        EchoChainReview
    ):  # one rubric criterion (an EchoChain run's come from its scoring)
        def label_form(self, run, session):
            return self.form(
                [{"criterion_id": "c1", "text": "keeps the budget"}], automatic_taxonomy(session)
            )

    class TactLike(TactReview):  # no decision point section: these are Instruct-FD cases
        def sections(self, run, session):
            return []

    run = tmp_path / "out" / "instructfd" / instructfd_run.parent.name / instructfd_run.name
    shutil.copytree(instructfd_run, run)
    shutil.copytree(instructfd_run.parents[1] / "_data", tmp_path / "out" / "instructfd" / "_data")
    view = EchoChainLike()
    monkeypatch.setattr(InstructFD, "review", lambda self: view)
    app = ReviewApp([run], "browser-tester")
    case = next(s for s in app.views[0].sessions if s.results.get("judge"))
    srv = make_server(app)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{srv.server_address[1]}/"
    taxonomy = sorted(TAXONOMY)[0]
    try:
        with chromium.new_context(
            viewport={"width": 1280, "height": 900}
        ) as ctx:  # the module's one browser
            page = ctx.new_page()
            page.set_default_timeout(120_000)
            errors: list[str] = []
            page.on("pageerror", lambda e: errors.append(str(e)))

            # EchoChain's form: one label per conversation, blind
            page.goto(f"{base}#/session/0/{case.case_id}")
            form = page.locator('form.label[data-key="review"]')
            form.wait_for()
            page.uncheck(
                "#auto-advance"
            )  # each save stays on this session (the browser remembers it)
            assert (
                page.locator("form.label").count() == 1
                and "[hidden]" in page.locator("main p").first.inner_text()
            )
            assert form.locator("#auto-taxonomy").inner_text() == "no automatic result"
            for k in ("coherent", "naturalistic", "audio_quality", "accepted"):
                form.locator(f'input[name="screening.{k}"]').check()
            form.locator('input[name="grades.c1"][value="fail"]').check()
            form.locator('select[name="taxonomy"]').select_option(taxonomy)
            form.locator('input[name="screening.note"]').fill("checked in the browser")
            assert form.locator('button[type="submit"]').inner_text() == "save label"
            form.locator('button[type="submit"]').click()
            page.wait_for_function(
                "() => document.querySelector('form.label .status').textContent"
                ".startsWith('saved by')"
            )
            path = run / "review" / "labels" / f"{case.case_id}@review.json"
            rec = json.loads(path.read_text())
            assert (
                rec["kind"],
                rec["reviewer"],
                rec["grades"],
                rec["taxonomy"],
                rec["rubric"],
                rec["audit"],
            ) == ("echochain", "browser-tester", {"c1": "fail"}, taxonomy, None, None)
            assert rec["screening"] == {
                "coherent": True,
                "naturalistic": True,
                "audio_quality": True,
                "accepted": True,
                "note": "checked in the browser",
            }
            page.screenshot(path=str(artifacts / "6_echochain_form.png"), full_page=True)
            # another reviewer's save is the label's audit
            app.reviewer = "auditor"
            page.reload()
            form.wait_for()
            assert form.locator('input[name="screening.coherent"]').is_checked()
            assert form.locator('button[type="submit"]').inner_text() == "save as audit"
            form.locator('button[type="submit"]').click()
            page.wait_for_function(
                "() => document.querySelector('form.label .status').textContent"
                ".includes('audited by auditor')"
            )
            rec = json.loads(path.read_text())
            assert rec["reviewer"] == "browser-tester" and rec["audit"]["verdict"] == "confirmed"

            # TACT's form: onset judgment and the reviewer's own onset time, marked at the playhead
            monkeypatch.setattr(InstructFD, "review", lambda self: TactLike())
            app.reviewer = "browser-tester"
            key = case.results["judge"][0].key
            page.reload()  # the same session, drawn again with the form the view now gives
            form = page.locator(f'form.label[data-key="{key}"]')
            form.locator('input[name="onset"]').first.wait_for()
            assert page.locator("h2").inner_text() == case.case_id
            page.wait_for_function("() => document.querySelector('#audio-stereo').readyState >= 1")
            page.evaluate("document.querySelector('#audio-stereo').play()")
            page.wait_for_function(
                "() => document.querySelector('#audio-stereo').currentTime > 0.5"
            )
            page.evaluate("document.querySelector('#audio-stereo').pause()")
            t = page.evaluate("document.querySelector('#audio-stereo').currentTime")
            form.locator('input[name="onset"][value="too_early"]').check()
            form.locator("button.mark").click()
            assert float(form.locator('input[name="onset_s"]').input_value()) == pytest.approx(
                t, abs=0.01
            )
            form.locator('input[name="note"]').fill("early")
            form.locator('button[type="submit"]').click()
            page.wait_for_function(
                f"() => document.querySelector('form.label[data-key=\"{key}\"] .status').textContent"
                ".startsWith('saved by')"
            )
            rec = json.loads((run / "review" / "labels" / f"{case.case_id}@{key}.json").read_text())
            assert (rec["kind"], rec["onset"], rec["note"]) == ("tact", "too_early", "early")
            assert rec["onset_s"] == pytest.approx(t, abs=0.01)
            page.screenshot(path=str(artifacts / "7_tact_form.png"), full_page=True)
            assert not errors, errors
    finally:
        srv.shutdown()
        srv.server_close()


# ---- a day of labelling: the keyboard, the filtered list, TACT's and EchoChain's pages ---------------
# (issue 28 item 5). The pages run under the server's CSP: a violation fails the test.


class Page:
    """A fresh browser context on a server over `runs`; page errors and CSP violations collected."""

    def __init__(self, chromium, runs: list[Path], reviewer: str):
        self.app = ReviewApp(runs, reviewer)
        self.srv = make_server(self.app)
        threading.Thread(target=self.srv.serve_forever, daemon=True).start()
        self.base = f"http://127.0.0.1:{self.srv.server_address[1]}/"
        self.ctx = chromium.new_context(viewport={"width": 1000, "height": 900})
        self.page = self.ctx.new_page()
        self.page.set_default_timeout(
            120_000
        )  # each wait returns once its condition holds: room for a loaded machine
        self.errors: list[str] = []
        self.page.on("pageerror", lambda e: self.errors.append(str(e)))
        self.page.on(
            "console",
            lambda m: (
                self.errors.append(m.text)
                if m.type == "error" and "Content Security Policy" in m.text
                else None
            ),
        )

    def wait(self, predicate: str, arg=None) -> None:
        self.page.wait_for_function(predicate, arg=arg)

    def clock(self) -> float:
        return self.page.evaluate("() => document.querySelector('#audio-stereo').currentTime")

    def seek(self, t: float) -> None:
        self.page.evaluate("(t) => { document.querySelector('#audio-stereo').currentTime = t; }", t)

    def close(self) -> None:
        self.ctx.close()
        self.srv.shutdown()
        self.srv.server_close()


def on_session(p: Page, case_id: str) -> None:
    """Wait for `case_id`'s page at the current address (not the page before it), drawn with its
    current label form."""
    p.wait(
        "(c) => { const h = document.querySelector('h2'); return document.body.dataset.shown === location.hash"
        " && h && h.textContent === c && document.querySelector('form.label.active'); }",
        case_id,
    )


def test_a_labelling_session_by_keyboard(instructfd_run, tmp_path, chromium, artifacts):
    run = copy_run(instructfd_run, tmp_path)
    p = Page(chromium, [run], "keyboard")
    page = p.page
    try:
        # the list, filtered: unlabelled sessions of one instruction, in the server's order
        todo = [
            r["case_id"]
            for r in filter_rows(session_rows(p.app), {"instruction": "listen", "unlabelled": "1"})
        ]
        assert len(todo) >= 6
        page.goto(p.base)
        page.wait_for_selector("#sessions tbody tr")
        assert page.locator("link[rel=icon]").get_attribute("href") == "/static/favicon.svg"
        assert (
            page.evaluate("() => fetch('/favicon.ico').then(r => r.headers.get('content-type'))")
            == "image/svg+xml"
        )
        assert page.locator("#sessions tbody td.run").first.inner_text() == p.app.run_name(
            0
        )  # named, not numbered
        page.select_option('select[name="instruction"]', "listen")
        p.wait(
            "() => document.querySelector('#count').textContent.startsWith('%d of')"
            % sum(
                1
                for s in p.app.views[0].sessions
                if getattr(s.case.data, "policy_name", None) == "listen"
            )
        )
        page.check('input[name="unlabelled"]')
        p.wait(
            "(n) => document.querySelector('#count').textContent.startsWith(n + ' of')", len(todo)
        )
        page.locator("#sessions tbody a").first.click()
        on_session(p, todo[0])
        assert page.locator("#run-name").inner_text() == p.app.run_name(0)
        assert page.locator("#position").inner_text() == f"1 of {len(todo)}"

        # the keys overlay
        page.keyboard.press("?")
        p.wait("() => !document.querySelector('#help').hidden")
        assert all(
            k in page.locator("#help").inner_text()
            for k in ("Space", "Enter", "j / n", "k / p", "1 … 9")
        )
        page.screenshot(path=str(artifacts / "k1_keys.png"))
        page.keyboard.press("Escape")
        p.wait("() => document.querySelector('#help').hidden")

        # play / pause and seek by keys
        p.wait("() => document.querySelector('#audio-stereo').readyState >= 1")
        page.keyboard.press("Space")
        p.wait(
            "() => { const a = document.querySelector('#audio-stereo'); return !a.paused && a.currentTime > 0.2; }"
        )
        page.keyboard.press("Space")
        p.wait("() => document.querySelector('#audio-stereo').paused")
        t0 = p.clock()
        page.keyboard.press("ArrowRight")
        assert p.clock() == pytest.approx(t0 + 2, abs=0.05)
        page.keyboard.press("ArrowLeft")
        assert p.clock() == pytest.approx(t0, abs=0.05)

        # no key fires while typing: the note takes "2 j ?" as text; Tab leaves it for the save button
        form = page.locator("form.label.active")
        form.locator('input[name="note"]').focus()
        page.keyboard.type("2 j ?")
        assert form.locator('input[name="note"]').input_value() == "2 j ?"
        assert (
            form.locator("input[type=radio]:checked").count() == 0
            and page.locator("h2").inner_text() == todo[0]
        )
        assert page.locator("#help").is_hidden()
        page.keyboard.press("Tab")

        # five labels, each a digit (the number shown on its button) and Enter; the next session follows
        chosen = {}
        for k in range(5):
            case, digit = todo[k], 1 + k % 2
            if k:
                on_session(p, case)
                assert page.locator("#flash").inner_text().startswith(f"saved {todo[k - 1]}")
            form = page.locator("form.label.active")
            button = form.locator(
                f"label:has(kbd:text-is('{digit}'))"
            )  # the key shown on its choice
            assert button.inner_text().strip() == f"{digit} {HUMAN_LABELS[digit - 1]}"
            page.keyboard.press(str(digit))
            assert form.locator(
                f'input[type=radio][value="{HUMAN_LABELS[digit - 1]}"]'
            ).is_checked()
            if k == 1:
                page.screenshot(path=str(artifacts / "k2_labelling.png"), full_page=True)
            page.keyboard.press("Enter")
            on_session(p, todo[k + 1])
            chosen[case] = HUMAN_LABELS[digit - 1]
        for case, label in chosen.items():  # on disk, one file each, by this reviewer
            rec = json.loads((run / "review" / "labels" / f"{case}@listen.json").read_text())
            assert (rec["label"], rec["reviewer"]) == (label, "keyboard")
        assert (
            json.loads((run / "review" / "labels" / f"{todo[0]}@listen.json").read_text())["note"]
            == "2 j ?"
        )
        assert not (run / "review" / "labels" / f"{todo[5]}@listen.json").exists()
        page.screenshot(path=str(artifacts / "k3_advanced.png"), full_page=True)

        # previous / next: in the unlabelled list the labelled ones are gone; in the plain one they are there
        assert page.locator("#prev.off").count() == 1
        here = page.evaluate("() => location.hash")
        page.keyboard.press("k")  # nothing before it in this list: the key goes nowhere
        assert (
            page.evaluate("() => location.hash") == here
            and page.locator("h2").inner_text() == todo[5]
        )
        page.goto(f"{p.base}#/session/0/{todo[5]}?instruction=listen")
        on_session(p, todo[5])
        page.keyboard.press("p")
        on_session(p, todo[4])
        assert page.locator("form.label .status").inner_text().startswith("saved by keyboard")
        page.keyboard.press("n")
        on_session(p, todo[5])

        # the list's "human ≠ judge": the labels that are not the judge's verdict
        view = p.app.views[0]
        differ = sum(
            1
            for c, label in chosen.items()
            for r in view.session(c).results["judge"]
            if r.value != label
        )
        page.goto(f"{p.base}#/?human_vs_judge=1")
        p.wait(
            "(n) => (document.querySelector('#count') || {textContent: ''}).textContent.startsWith(n + ' of')",
            differ,
        )
        assert not p.errors, p.errors
    finally:
        p.close()


def test_tact_and_echochain_pages(tact_run, echochain_run, chromium, artifacts):
    p = Page(chromium, [tact_run, echochain_run], "looker")
    page = p.page
    try:
        # TACT: the decision point (on the timeline, in the transcript, a button to it), the words, named values
        tact = p.app.views[0]
        s = next(s for s in tact.sessions if s.results.get("posterior"))
        at = decision_point_s(tact, s)
        d = json.loads(
            page.context.request.get(f"{p.base}api/session?run=0&case={s.case_id}").body()
        )
        page.goto(f"{p.base}#/session/0/{s.case_id}")
        on_session(p, s.case_id)
        names = page.locator("dl.values dt").all_inner_texts()
        assert {"decision point", "onset", "intent", "score"} <= set(names)
        values = dict(zip(names, page.locator("dl.values dd").all_inner_texts()))
        assert values["decision point"].startswith(f"{at:.2f} s into the session")
        assert values["onset"].startswith(
            f"{s.results['posterior'][0].value:+.2f} s from the decision point"
        )
        assert values["score"].startswith("composite ")
        assert page.locator("#timeline .tl-mark").count() == 2  # the decision point and the onset
        assert page.locator("#transcript .tmark").first.inner_text() == "▼ decision point"
        assert page.locator("#transcript span.w").count() == len(d["words"]) > 0
        assert {"user", "model"} <= set(
            page.evaluate(
                "() => [...document.querySelectorAll('#transcript span.w')].map(e => e.classList[1])"
            )
        )
        p.wait("() => document.querySelector('#audio-stereo').readyState >= 1")
        page.locator("button.seek").first.click()
        assert p.clock() == pytest.approx(at, abs=0.05)
        i, w = next(
            (i, w)
            for i, w in enumerate(d["words"])
            if w["speaker"] == "model" and w["start_s"] >= at
        )
        p.seek((w["start_s"] + w["end_s"]) / 2)
        p.wait(
            "(i) => document.querySelector(`#transcript span.w[data-i='${i}']`).classList.contains('now')",
            i,
        )
        page.screenshot(path=str(artifacts / "t1_tact_page.png"), full_page=True)

        # EchoChain: the classifier's votes and the automatic taxonomy, the words highlighted with the playhead
        echo = p.app.views[1]
        s = next(s for s in echo.sessions if s.results.get("grade"))
        graded = json.loads(
            next((echochain_run / "graded").glob(f"*/{s.case_id}.json")).read_text()
        )
        d = json.loads(
            page.context.request.get(f"{p.base}api/session?run=1&case={s.case_id}").body()
        )
        page.goto(f"{p.base}#/session/1/{s.case_id}")
        on_session(p, s.case_id)
        why = page.locator("pre.why").first.inner_text()
        votes = graded["classifier"]["votes"]
        assert votes and all(
            f"vote {k}: {'failure' if v else 'no failure'}" in why for k, v in enumerate(votes, 1)
        )
        tax = graded["taxonomy"]
        assert f"taxonomy (automatic): {tax or 'none'}" in why
        assert page.locator("#auto-taxonomy").inner_text() == automatic_taxonomy(s)
        assert page.locator("#run-name").inner_text() == p.app.run_name(1)
        assert echo.run_id not in page.locator("main").inner_text()  # blind
        p.wait("() => document.querySelector('#audio-stereo').readyState >= 1")
        box = "document.querySelector('#transcript')"
        assert page.evaluate(f"() => {box}.scrollHeight > {box}.clientHeight"), (
            "the transcript should overflow its box"
        )
        assert page.evaluate(f"() => {box}.scrollTop") == 0
        j, w = next((j, w) for j, w in enumerate(d["words"]) if w["speaker"] == "user")
        p.seek((w["start_s"] + w["end_s"]) / 2)
        p.wait(
            "(i) => document.querySelector(`#transcript span.w[data-i='${i}']`).classList.contains('now')",
            j,
        )
        # late in the conversation: the transcript has scrolled (itself) to keep the current word in view
        j = len(d["words"]) - 1
        w = d["words"][j]
        p.seek((w["start_s"] + w["end_s"]) / 2)
        p.wait(
            "(i) => document.querySelector(`#transcript span.w[data-i='${i}']`).classList.contains('now')",
            j,
        )
        p.wait(f"() => {box}.scrollTop > 0")
        inside = page.evaluate(
            f"""(i) => {{ const b = {box}.getBoundingClientRect(),
            w = document.querySelector(`#transcript span.w[data-i='${{i}}']`).getBoundingClientRect();
            return w.top >= b.top - 1 && w.bottom <= b.bottom + 1; }}""",
            j,
        )
        assert inside, "the current word is out of the transcript's view"
        page.screenshot(path=str(artifacts / "t2_echochain_page.png"), full_page=True)
        assert not p.errors, p.errors
    finally:
        p.close()


def test_a_benchmark_from_outside_fdeval_gets_a_review_page(
    tmp_path, chromium, artifacts, monkeypatch
):
    """The toy benchmark (tests/engine/toy: one module, one YAML) declares no review view and no
    line of fdeval/review names it: the engine's generic view gives its session a page, and a
    label picked and saved with the keyboard lands on disk."""
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, [str(TOY), os.environ.get("PYTHONPATH")])),
    }
    proc = run_launch(
        [
            f"out_root={tmp_path / 'out'}",
            "benchmark=toy",
            f"hydra.searchpath=[file://{TOY / 'conf'}]",
            "progress=false",
        ],
        tmp_path,
        env=env,
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    (run,) = (tmp_path / "out" / "toy" / "reference").iterdir()
    monkeypatch.syspath_prepend(str(TOY))  # the run's benchmark object is rebuilt from run.json
    p = Page(chromium, [run], "toy-tester")
    page = p.page
    try:
        case = p.app.views[0].sessions[0].case_id
        page.goto(f"{p.base}#/session/0/{case}")
        on_session(p, case)
        form = page.locator("form.label.active")
        values = form.locator("input[type=radio]").evaluate_all("(els) => els.map((e) => e.value)")
        assert values == ["agree", "disagree"]
        page.keyboard.press("2")
        assert form.locator('input[type=radio][value="disagree"]').is_checked()
        page.keyboard.press("Enter")
        label = run / "review" / "labels" / f"{case}@case.json"
        p.wait(
            "() => document.querySelector('#flash') && document.querySelector('#flash').textContent.startsWith('saved')"
        )
        page.screenshot(path=str(artifacts / "toy_page.png"), full_page=True)
        rec = json.loads(label.read_text())
        assert (rec["kind"], rec["label"], rec["reviewer"]) == ("generic", "disagree", "toy-tester")
        assert not p.errors, p.errors
    finally:
        p.close()
