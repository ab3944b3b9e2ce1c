"""Every corpus recipe on a small tree in its corpus's published layout, written here from the
espeak-ng conversation (audio at the corpus's own rate and format, transcripts in its own format):
the command finds the planted decision points and imports the labelled ones as episodes."""

from __future__ import annotations

import json
import logging
import re
from pathlib import Path

import pytest
from helpers.tact_corpus import THIRD, labels_for, planned_conversation, write_audio, write_ctm

from fdeval.benchmarks.tact.corpus.__main__ import main
from fdeval.benchmarks.tact.corpus.recipes import all_recipes, get_recipe
from fdeval.benchmarks.tact.episodes import load_episodes
from fdeval.errors import ConfigError

VAD_TOL_S = 0.15  # where the speech comes from VAD, its boundaries differ from the word times
UUID = "23d4ec0e-9357-400e-ba97-386dcd264a9d"
USERS = ("5e531b2205acdb33c0f5f24c", "5ee91d6e634e8e1290804250")


def _candor(root: Path, p) -> dict:
    d = root / UUID
    write_audio(d / "processed" / f"{UUID}.mp3", p.pair(48000), 48000)
    (d / "processed" / "channel_map.json").write_text(json.dumps({"L": USERS[0], "R": USERS[1]}))
    rows = [
        "turn_id,speaker,start,stop,utterance,interval,delta,questions,end_question,overlap,n_words"
    ]
    for k, ln in enumerate(
        sorted((ln for ln in p.lines if ln.speaker < 2), key=lambda ln: ln.start_s)
    ):
        rows.append(
            f'{k},{USERS[ln.speaker]},{ln.start_s:.2f},{ln.end_s:.2f},"{ln.text}",0,0,0,False,False,0'
        )
    (d / "transcription").mkdir()
    (d / "transcription" / "transcript_audiophile.csv").write_text("\n".join(rows) + "\n")
    (d / "survey.csv").write_text(
        f"user_id,partner_id,sex,age\n{USERS[0]},{USERS[1]},male,34\n"
        f"{USERS[1]},{USERS[0]},female,52\n"
    )
    return {"tol": VAD_TOL_S, "speakers": USERS, "slices": [("m", "30-49"), ("f", "50+")]}


def _sssd(root: Path, p) -> dict:
    write_audio(root / "batch1" / "conv_0001.flac", p.pair(44100), 44100)
    write_ctm(root / "batch1" / "conv_0001.ctm", "conv_0001", {"A": p.words(0), "B": p.words(1)})
    return {"tol": 1e-3, "speakers": ("conv_0001-A", "conv_0001-B")}


def _otospeech(root: Path, p) -> dict:
    write_audio(root / "data" / "session_0042.flac", p.pair(48000), 48000)
    return {"tol": VAD_TOL_S, "speakers": ("session_0042-A", "session_0042-B")}


def _seamless(root: Path, p) -> dict:
    folder = root / "naturalistic" / "dev" / "0000" / "0003"
    for k, pid in enumerate(("P0947", "P0948")):
        stem = folder / f"V00_S0809_I00000582_{pid}"
        write_audio(stem.with_suffix(".wav"), p.channel(k, 48000), 48000)
        segs = [
            {
                "start": ln.start_s,
                "end": ln.end_s,
                "transcript": ln.text,
                "words": [{"word": t, "start": a, "end": b, "score": 0.9} for t, a, b in ln.words],
            }
            for ln in p.lines
            if ln.speaker == k
        ]
        stem.with_suffix(".json").write_text(
            json.dumps({"id": stem.name, "metadata:transcript": segs, "metadata:vad": []})
        )
    # a participant whose partner is not in this download: reported and skipped
    write_audio(
        root / "naturalistic" / "dev" / "0000" / "0004" / "V00_S0810_I00000583_P0950.wav",
        p.channel(0, 48000)[: 48000 * 2],
        48000,
    )
    return {"tol": 1e-4, "speakers": ("P0947", "P0948")}


GLOBAL = ("FEE005", "MEE006", "MEE007")


def _ami(root: Path, p) -> dict:
    ann = root / "ami_public_manual_1.6.2"
    (ann / "corpusResources").mkdir(parents=True)
    speakers = "".join(
        f'<speaker nxt_agent="{a}" channel="{k}" global_name="{g}" role="PM"/>'
        for k, (a, g) in enumerate(zip("ABC", GLOBAL))
    )
    (ann / "corpusResources" / "meetings.xml").write_text(
        '<?xml version="1.0" encoding="ISO-8859-1"?>\n<nite:root xmlns:nite="http://nite.sourceforge.net/">\n'
        f'<meeting observation="ES2002a" type="scenario">\n{speakers}\n</meeting>\n'
        '<meeting observation="ES2002b" type="scenario"><speaker nxt_agent="A" channel="0" global_name="FEE005"/>'
        "</meeting>\n</nite:root>\n"
    )
    (ann / "words").mkdir()
    for k, agent in enumerate("ABC"):
        lines = [
            '<?xml version="1.0" encoding="ISO-8859-1"?>',
            f'<nite:root nite:id="ES2002a.{agent}.words" xmlns:nite="http://nite.sourceforge.net/">',
        ]
        for n, (text, a, b) in enumerate(p.words(k)):
            word, punc = re.fullmatch(r"(.*?)([.?!,]*)", text).groups()
            lines.append(
                f'<w nite:id="ES2002a.{agent}.words{n}" starttime="{a}" endtime="{b}">{word}</w>'
            )
            if punc:
                lines.append(
                    f'<w nite:id="ES2002a.{agent}.p{n}" starttime="{b}" endtime="{b}" punc="true">{punc}</w>'
                )
        lines.append(
            f'<vocalsound nite:id="ES2002a.{agent}.v0" starttime="0.1" endtime="0.2" type="cough"/>'
        )
        (ann / "words" / f"ES2002a.{agent}.words.xml").write_text(
            "\n".join(lines + ["</nite:root>"]) + "\n"
        )
        write_audio(
            root / "amicorpus" / "ES2002a" / "audio" / f"ES2002a.Headset-{k}.wav",
            p.channel(k),
            16000,
        )
    # the third person's line reaches into the horizon of A's last smooth point (line 10)
    return {
        "tol": 1e-4,
        "speakers": GLOBAL[:2],
        "conversation": "ES2002a.AB",
        "drop": (10,),
        "slices": [("f", "unknown"), ("m", "unknown")],
    }


TREES = {
    "candor": _candor,
    "sssd": _sssd,
    "otospeech": _otospeech,
    "seamless": _seamless,
    "ami": _ami,
}


def _rows(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


_RUNS: dict[str, tuple] = {}  # one run per recipe and test process, shared by the tests below


def _run(name: str, tmp_path_factory) -> tuple:
    if name not in _RUNS:
        p = planned_conversation()
        root, out = (
            tmp_path_factory.mktemp(f"{name}-corpus"),
            tmp_path_factory.mktemp(f"{name}-out"),
        )
        spec = TREES[name](root, p)
        assert main([name, str(root), str(out)]) == 0
        points = _rows(out / "decision_points.jsonl")
        labels = out.parent / f"{name}-labels.jsonl"
        labels.write_text("".join(json.dumps(r) + "\n" for r in labels_for(points, skip=0)))
        assert main([name, str(root), str(out), "--labels", str(labels)]) == 0
        (data,) = (out / "data").iterdir()
        _RUNS[name] = (name, p, spec, out, points, data)
    return _RUNS[name]


@pytest.fixture(scope="module", params=sorted(TREES))
def recipe_run(request, tmp_path_factory):
    return _run(request.param, tmp_path_factory)


def test_recipe_finds_the_planted_points(recipe_run):
    name, p, spec, out, points, _ = recipe_run
    conv = spec.get("conversation")
    mine = [r for r in points if conv is None or r["conversation_id"] == conv]
    expected = p.points(drop=spec.get("drop", ()))
    assert [(r["focal_channel"], r["category"]) for r in mine] == [
        (c, k) for c, _, k in expected
    ], name
    for r, (_, t, _) in zip(mine, expected):
        assert r["decision_s"] == pytest.approx(t, abs=spec["tol"]), (name, r["id"])


def test_recipe_imports_episodes_with_the_corpus_speakers(recipe_run):
    name, p, spec, out, points, data = recipe_run
    eps = {e.episode_id: e for e in load_episodes(data)}
    assert sorted(eps) == sorted(r["id"] for r in points)
    convs = {c["conversation_id"]: c for c in _rows(out / "conversations.jsonl")}
    conv = convs[spec.get("conversation") or next(iter(convs))]
    assert [c["speaker"]["id"] for c in conv["channels"]] == list(spec["speakers"])
    for r in points:
        e = eps[r["id"]]
        assert e.speaker_id == r["speaker"]["id"] and e.category == r["category"]
        if r["conversation_id"] == conv["conversation_id"] and "slices" in spec:
            assert (e.slices["gender"], e.slices["age_band"]) == spec["slices"][r["focal_channel"]]
    rates = {c["sample_rate_hz"] for c in conv["channels"]}
    assert rates == {
        {"candor": 48000, "sssd": 44100, "otospeech": 48000, "seamless": 48000, "ami": 16000}[name]
    }


def test_ami_keeps_only_exchanges_nobody_else_joins(tmp_path_factory):
    name, p, spec, out, points, _ = _run("ami", tmp_path_factory)
    assert {r["conversation_id"] for r in _rows(out / "conversations.jsonl")} == {
        "ES2002a.AB",
        "ES2002a.AC",
        "ES2002a.BC",
    }
    outsiders = {
        "ES2002a.AB": 2,
        "ES2002a.AC": 1,
        "ES2002a.BC": 0,
    }  # the plan's speaker outside each pair
    assert p.lines[THIRD].speaker == 2
    for r in points:
        spans = [(a, b) for _, a, b in p.words(outsiders[r["conversation_id"]]) if b > a]
        assert not any(a < r["decision_s"] + 5.0 and b > r["turn_start_s"] for a, b in spans), r[
            "id"
        ]


def test_seamless_reports_an_incomplete_interaction(tmp_path, caplog):
    p = planned_conversation()
    _seamless(tmp_path, p)
    with caplog.at_level(logging.WARNING, logger="fdeval"):
        convs = list(get_recipe("seamless").conversations(tmp_path))
    assert [c.conversation_id for c in convs] == ["V00_S0809_I00000582"]
    assert "V00_S0810_I00000583 has 1 participant file(s), not 2: skipped" in caplog.text


def test_recipes_are_found_by_module_and_describe_their_layout():
    recipes = all_recipes()
    assert sorted(recipes) == ["ami", "candor", "folder", "otospeech", "seamless", "sssd"]
    for name, r in recipes.items():
        assert r.name == name and r.layout.strip().startswith("<root>/") and r.source
    with pytest.raises(ConfigError, match="unknown corpus recipe 'candour'; valid: ami, candor"):
        get_recipe("candour")


def test_candor_errors_name_the_file_and_line(tmp_path, capsys):
    p = planned_conversation()
    _candor(tmp_path, p)
    csv_path = tmp_path / UUID / "transcription" / "transcript_audiophile.csv"
    lines = csv_path.read_text().splitlines()
    lines[3] = lines[3].replace(",", ",x", 3)
    csv_path.write_text("\n".join(lines) + "\n")
    assert main(["candor", str(tmp_path), str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err.strip()
    assert f"{csv_path}:4: field 'start': expected a number" in err and "\n" not in err
