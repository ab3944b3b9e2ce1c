"""The human-study mode (fdeval.review.study): building from a real generated data folder (espeak-ng,
no fakes), assignments, answer storage, the API handlers, and the HTTP routes on W's server
(127.0.0.1 only)."""

from __future__ import annotations

import json
import threading
import urllib.request
from pathlib import Path

import numpy as np
import pytest

from fdeval.audio.io import read_wav
from fdeval.benchmarks.instructfd.builtin import BUILTIN_CONVERSATIONS
from fdeval.benchmarks.instructfd.generate import generate_conversation
from fdeval.review import server, study as S

CONVS = (
    "laptop_shutdown_hold",
    "fresh_pasta_stop",
)  # backchannel + listen + baseline; acknowledge + baseline


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory) -> Path:
    from fdeval.audio.tts import EspeakTTS

    out = tmp_path_factory.mktemp("study_data")
    tts = EspeakTTS()
    for conv in BUILTIN_CONVERSATIONS:
        if conv.conversation_id in CONVS:
            generate_conversation(conv, out, tts, seed=0)
    return out


@pytest.fixture(scope="module")
def built(data_dir, tmp_path_factory) -> Path:
    return S.build_study(data_dir, tmp_path_factory.mktemp("study") / "s", seed=3)


def fresh(built: Path, tmp_path: Path, design: str | None = None) -> S.Study:
    """A copy of the built study, so each test starts with no participants."""
    import shutil

    dst = tmp_path / "study"
    shutil.copytree(built, dst)
    if design:
        meta = json.loads((dst / "study.json").read_text())
        meta["design"] = design
        (dst / "study.json").write_text(json.dumps(meta))
    return S.Study(dst)


def test_build_items_and_stimuli(built):
    st = S.Study(built)
    ids = sorted(st.by_id)
    assert ids == [
        "fresh_pasta_stop__acknowledge",
        "fresh_pasta_stop__none",
        "laptop_shutdown_hold__backchannel",
        "laptop_shutdown_hold__listen",
        "laptop_shutdown_hold__none",
    ]
    bc = st.by_id["laptop_shutdown_hold__backchannel"]
    assert bc.kind == "proactive" and bc.condition == "with" and bc.instruction
    assert st.by_id["laptop_shutdown_hold__none"].judged == ("backchannel", "listen")
    for item_id, stim in st.stimuli.items():
        x, sr = read_wav(built / stim["path"])
        assert x.shape[1] == 2 and sr == S.SAMPLE_RATE
        assert x.shape[0] / sr == pytest.approx(stim["end_s"], abs=1e-3)
        i = int(stim["start_s"] * sr)
        # the decision turn's user audio starts at start_s: quiet before it on ch0 in the gap, speech after
        assert np.abs(x[i : i + sr // 2, 0]).max() > 0.05
        assert np.abs(x[i - int(0.3 * sr) : i - int(0.05 * sr), 0]).max() < 0.01, item_id
    # responsive: the reference model (ch1) is speaking while the user's interjection plays
    ak = st.stimuli["fresh_pasta_stop__acknowledge"]
    x, sr = read_wav(built / ak["path"])
    i = int(ak["start_s"] * sr)
    assert np.abs(x[i:, 1]).max() > 0.05 and np.abs(x[i:, 0]).max() > 0.05
    assert st.by_id["fresh_pasta_stop__acknowledge"].points[0] <= 2.0
    # the tutorial: 5 actions x (2 examples + 1 practice), spoken; responsive clips overlap the model
    clips = sorted(p.stem for p in (built / "stimuli" / "tutorial").glob("*.wav"))
    assert len(clips) == 15 and "acknowledge-practice" in clips
    x, sr = read_wav(built / "stimuli" / "tutorial" / "continue-0.wav")
    i = int(S.TUTORIAL_OVERLAP_S * sr)
    assert (
        np.abs(x[:i, 0]).max() < 0.01
        and np.abs(x[i:, 0]).max() > 0.05
        and np.abs(x[i:, 1]).max() > 0.05
    )
    ob = S.onboarding(st)
    assert [m["action"] for m in ob["modules"]] == [
        "listen",
        "backchannel",
        "interrupt",
        "continue",
        "acknowledge",
    ]
    assert all(
        len(m["examples"]) == 2 and m["examples"][1]["audio"] and m["practice"]["audio"]
        for m in ob["modules"]
    )


def test_build_refuses_existing_study_and_wrong_source(built, data_dir, tmp_path, capsys):
    assert S.main(["build", str(data_dir), "--out", str(built)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "already there" in err[0]
    assert S.main(["build", str(tmp_path)]) == 2
    assert "neither a run folder" in capsys.readouterr().err


def test_between_design_balances_and_is_seeded(built, tmp_path):
    st = fresh(built, tmp_path)
    orders = [st.register(f"p{i}")["order"] for i in range(3)]
    for order in orders:  # one item per conversation: nobody hears a conversation twice
        assert sorted(i.split("__")[0] for i in order) == sorted(CONVS)
    # the laptop conversation has 3 items: three participants get each one once
    assert sorted(o for order in orders for o in order if o.startswith("laptop")) == [
        "laptop_shutdown_hold__backchannel",
        "laptop_shutdown_hold__listen",
        "laptop_shutdown_hold__none",
    ]
    assert st.register("p0")["order"] == orders[0]  # registering again keeps the assignment
    st2 = fresh(built, tmp_path / "again")
    assert [
        st2.register(f"p{i}")["order"] for i in range(3)
    ] == orders  # same seed, same names, same orders


def test_within_design_puts_the_uninstructed_item_first(built, tmp_path):
    st = fresh(built, tmp_path, design="within")
    order = st.register("solo")["order"]
    assert sorted(order) == sorted(st.by_id)
    for conv in CONVS:
        mine = [i for i in order if i.startswith(conv)]
        assert mine[0] == f"{conv}__none"


def test_handlers_store_answers_with_who_and_when(built, tmp_path):
    st = fresh(built, tmp_path, design="within")
    assert S.handle(st, "POST", "/api/study/participant", {}, {"participant": "../x"})[0] == 400
    code, rec = S.handle(st, "POST", "/api/study/participant", {}, {"participant": "ann"})
    assert code == 200 and rec["onboarded_at"] is None
    code, err = S.handle(st, "GET", "/api/study/next", {"participant": "ann"})
    assert code == 400 and "onboarding" in err["error"]
    S.handle(st, "POST", "/api/study/onboarded", {}, {"participant": "ann"})
    code, nxt = S.handle(st, "GET", "/api/study/next", {"participant": "ann"})
    item = nxt["item"]
    assert code == 200 and item["item_id"] == rec["order"][0] and item["position"] == 1
    assert item["points_s"][0] > item["start_s"] and item["audio"].endswith(item["item_id"])
    it = st.by_id[item["item_id"]]
    bad = S.handle(
        st,
        "POST",
        "/api/study/answer",
        {},
        {"participant": "ann", "item_id": it.item_id, "actions": ["shout"]},
    )
    assert bad[0] == 400 and "expected one of" in bad[1]["error"]
    short = S.handle(
        st,
        "POST",
        "/api/study/answer",
        {},
        {"participant": "ann", "item_id": it.item_id, "actions": []},
    )
    assert short[0] == 400
    actions = [it.choices[0]] * len(it.points)
    code, saved = S.handle(
        st,
        "POST",
        "/api/study/answer",
        {},
        {"participant": "ann", "item_id": it.item_id, "actions": actions, "started_at": "t0"},
    )
    assert code == 200
    on_disk = json.loads((st.folder / "answers" / "ann" / f"{it.item_id}.json").read_text())
    assert (
        on_disk["participant"] == "ann"
        and on_disk["actions"] == actions
        and on_disk["saved_at"].endswith("+00:00")
    )
    again = S.handle(
        st,
        "POST",
        "/api/study/answer",
        {},
        {"participant": "ann", "item_id": it.item_id, "actions": actions},
    )
    assert again[0] == 400 and "final" in again[1]["error"]
    assert (
        S.handle(st, "GET", "/api/study/next", {"participant": "ann"})[1]["item"]["position"] == 2
    )
    assert S.handle(st, "GET", "/api/nothing", {})[0] == 404
    assert not list((st.folder / "answers" / "ann").glob(".*"))  # no temporaries left behind


def test_tables_from_stored_answers(built, tmp_path):
    st = fresh(built, tmp_path, design="within")
    for name in ("ann", "bob"):
        st.register(name)
        st.onboarded(name)
    bc = st.by_id["laptop_shutdown_hold__backchannel"]
    cue = bc.cues["backchannel"][0]
    hit = ["backchannel" if abs(t - cue) <= 2.0 else "listen" for t in bc.points]
    quiet = ["listen"] * len(bc.points)
    st.save_answer("ann", bc.item_id, hit)  # correct
    st.save_answer(
        "bob", bc.item_id, ["backchannel"] + hit[1:] if abs(bc.points[0] - cue) > 2.0 else quiet
    )
    st.save_answer(
        "ann", "laptop_shutdown_hold__none", quiet
    )  # baseline: fails backchannel, passes listen
    st.save_answer("ann", "fresh_pasta_stop__acknowledge", ["acknowledge"])
    st.save_answer("bob", "fresh_pasta_stop__none", ["continue"])
    code, t = S.handle(st, "GET", "/api/study/tables", {})
    assert code == 200
    rows = {(r["scenario"], r["action"]): r for r in t["cases_with"]}
    # backchannel: ann right, bob wrong (a premature signal, or none at all) -> 1/2
    assert (
        rows[("Floor Hold Signal", "backchannel")]["n_correct"],
        rows[("Floor Hold Signal", "backchannel")]["n"],
    ) == (1, 2)
    assert rows[("Short Stop Repair", "acknowledge")]["accuracy"] == 1.0
    delta = {r["action"]: r for r in t["delta"]}
    # acknowledge: with (ann: T) paired with without (bob: F): delta 1.0, b=1, c=0
    assert (
        delta["acknowledge"]["delta"],
        delta["acknowledge"]["b"],
        delta["acknowledge"]["c"],
    ) == (1.0, 1, 0)
    # backchannel: with (ann T, bob F) sorted by name, without (ann F): one pair (T, F)
    assert delta["backchannel"]["n_pairs"] == 1 and delta["backchannel"]["delta"] == 1.0
    assert delta["listen"]["accuracy_without_all"] == 1.0 and delta["listen"]["n_with"] == 0


def test_routes_on_the_review_server(built, tmp_path):
    st = fresh(built, tmp_path)
    app = server.ReviewApp([], "tester")
    app.studies = [st]
    httpd = server.make_server(app)
    th = threading.Thread(target=httpd.serve_forever, daemon=True)
    th.start()
    base = f"http://127.0.0.1:{httpd.server_address[1]}"

    def call(path, body=None, headers=None):
        data = None if body is None else json.dumps(body).encode()
        same_origin = {
            "Origin": base,
            "X-Fdeval-Token": app.token,
        }  # as the study page sends a POST
        req = urllib.request.Request(
            base + path,
            data=data,
            headers={**same_origin, **(headers or {})},
            method="POST" if body is not None else "GET",
        )
        try:
            with urllib.request.urlopen(req, timeout=10) as r:
                return r.status, r.read(), dict(r.headers)
        except urllib.error.HTTPError as e:
            return e.code, e.read(), dict(e.headers)

    try:
        code, body, _ = call("/api/study/info")
        assert code == 200 and len(json.loads(body)["onboarding"]["modules"]) == 5
        code, body, _ = call("/api/study/participant", {"participant": "cy"})
        assert code == 200 and json.loads(body)["participant"] == "cy"
        code, body, h = call(
            "/api/study/audio?item=fresh_pasta_stop__none", headers={"Range": "bytes=0-99"}
        )
        assert code == 206 and len(body) == 100 and body[:4] == b"RIFF"
        assert call("/api/study/info?study=5")[0] == 404
        code, body, _ = call("/api/study/audio?tutorial=listen-0")
        assert code == 200 and body[:4] == b"RIFF"
        assert call("/api/study/audio?tutorial=../../x")[0] == 404
        code, body, _ = call("/static/study.html")
        assert code == 200 and b"study.js" in body
        assert call("/static/study.js")[0] == 200
        assert ("Human study", "/static/study.html") in server.NAV
    finally:
        httpd.shutdown()
        httpd.server_close()


def test_an_interjection_without_its_own_delay_starts_where_a_session_would_inject_it(
    data_dir, built
):
    """A responsive stimulus places the user's interjection after the reply's onset by the turn's
    own barge-in delay, and, for a turn without one, by the orchestrator's default (the one source
    of the rule, `barge_in_delay_s`), not at the onset."""
    import dataclasses

    from fdeval.orchestrator.config import DEFAULT_BARGE_IN_AFTER_S

    src = S.open_source(data_dir)
    assert src.benchmark == "instructfd" and src.rules.STEP_S == 2.0
    item = S.Study(built).by_id["fresh_pasta_stop__acknowledge"]
    case = next(c for c in src.cases if c.case_id == item.case_id)
    speak = lambda text: np.zeros(S.SAMPLE_RATE, np.float32)  # noqa: E731 - a 1 s model line
    _, start, _ = S.reference_stimulus(case, item, src.case_root, speak)
    turns = tuple(
        dataclasses.replace(t, barge_in_after_s=None) if t.index == item.turn else t
        for t in case.turns
    )
    _, start_default, _ = S.reference_stimulus(
        dataclasses.replace(case, turns=turns), item, src.case_root, speak
    )
    assert (
        case.turns[item.turn].barge_in_after_s == DEFAULT_BARGE_IN_AFTER_S
        and start_default == start
    )
    assert json.loads((built / "study.json").read_text())["benchmark"] == "instructfd"
