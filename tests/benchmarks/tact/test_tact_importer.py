"""The TACT corpus importer on a stereo corpus synthesized here (one channel per speaker)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from fdeval.audio.io import read_wav, write_wav
from fdeval.audio.resample import resample
from fdeval.benchmarks.tact.benchmark import Tact
from fdeval.benchmarks.tact.episodes import load_episodes
from fdeval.benchmarks.tact.importer import CorpusError, import_corpus, read_rows

# (speaker, text, start_s): A is channel 0, B channel 1.
CALL1 = [
    ("B", "So how was the trip to the coast?", 0.5),
    ("A", "It was lovely, we stayed three nights.", 2.6),
    ("A", "The first day it rained, um", 5.4),
    ("A", "but then the sun came out.", 7.6),
    ("B", "That sounds great. Did you go swimming?", 9.6),
    ("A", "No, the water was far too cold for me.", 12.4),
    ("B", "Fair enough.", 15.2),
]
CALL2 = [
    ("B", "What are you working on these days?", 0.5),
    ("A", "Mostly the new website, and it is a lot of work.", 2.8),
    ("B", "I can imagine.", 6.0),
    ("A", "Yeah, um, we launch next month.", 7.4),
]
VOICES = {"A": "en-us+m3", "B": "en-us+f1"}


def synth_call(
    path: Path, script, sr: int, tail_s: float = 6.0
) -> list[tuple[str, str, float, float]]:
    from fdeval.audio.tts import EspeakTTS

    out, words, end = [], [], 0.0
    for who, text, start in script:
        s = EspeakTTS(voice=VOICES[who]).synthesize(text)
        out.append((who, s, start))
        words += [
            {
                "channel": "AB".index(who),
                "text": w.text,
                "start_s": round(start + w.start_s, 4),
                "end_s": round(start + w.end_s, 4),
            }
            for w in s.words
        ]
        end = max(end, start + s.duration_s)
    n = int((end + tail_s) * 16000)
    x = np.zeros((n, 2), np.float32)
    for who, s, start in out:
        i = int(start * 16000)
        x[i : i + s.samples.size, "AB".index(who)] += s.samples
    write_wav(path, x if sr == 16000 else resample(x, 16000, sr), sr)
    path.with_suffix(".words.json").write_text(json.dumps(words))
    return [
        (who, text, start, start + s.duration_s)
        for (who, s, start), (_, text, _) in zip(out, script)
    ]


def row(**kw):
    base = {
        "episode_id": "c1-hold",
        "audio": "call1.wav",
        "focal_channel": 0,
        "decision_s": 7.2,
        "category": "pause_handling",
        "speaker": {"id": "A", "gender": "m", "age_band": "30-49", "l1_region": "north_america"},
        "labels": ["hold", "hold", "abn"],
        "silence_acceptability": [0.9, 0.8, 0.6],
        "onset_windows": [[[2.0, 4.0]], [], [[1.5, 3.0]]],
        "completion_marks": [[-2.4], [-2.35], []],
        "words": "call1.words.json",
    }
    return {**base, **kw}


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    d = tmp_path_factory.mktemp("corpus")
    t1 = synth_call(d / "call1.wav", CALL1, 16000)
    t2 = synth_call(d / "call2.wav", CALL2, 24000)
    rows = [
        row(),
        row(
            episode_id="c1-ans",
            focal_channel=1,
            decision_s=round(t1[4][3], 3),
            category="smooth_turn_taking",
            speaker={"id": "B", "gender": "f", "age_band": "50+", "l1_region": "british_isles"},
            labels=["ans", "ans", "ans"],
            silence_acceptability=[0, 0.1, 0],
            onset_windows=[[[0.0, 1.0]], [[0.1, 0.8]], [[0.0, 1.2]]],
            completion_marks=[[0.0], [0.0], [-1.5, 0.0]],
            slices={"snr": "mid"},
        ),
        row(
            episode_id="c2-int",
            audio="call2.wav",
            words="call2.words.json",
            decision_s=round(t2[1][2] + 1.2, 3),
            context_s=4.0,
            category="user_interruption",
            focal_channel=1,
            speaker={"id": "B", "gender": "f", "age_band": "50+", "l1_region": "british_isles"},
            labels=["ans", "ans", "hold"],
            silence_acceptability=[0.1, 0.0, 0.9],
            onset_windows=[[], [], []],
            completion_marks=[[], [], []],
            interruption={
                "prompt_end_s": round(t2[0][3] - (t2[1][2] + 1.2) + 0.05, 3),
                "cut_in_start_s": -0.6,
            },
        ),
        row(
            episode_id="c2-dev",
            audio="call2.wav",
            words=None,
            decision_s=11.0,
            split="dev",
            judge_logits=[2, 0, 0, 0, 0, 0],
            labels=["ans", "ans", "ans"],
        ),
    ]
    (d / "ann.jsonl").write_text("\n".join(json.dumps(r) for r in rows) + "\n\n")
    out = tmp_path_factory.mktemp("imported")
    assert import_corpus(d / "ann.jsonl", out, context_s=6.0) == 4
    return d, out, t1, t2, rows


def test_episodes_come_out_valid_and_measured(corpus):
    d, out, t1, t2, rows = corpus
    eps = {e.episode_id: e for e in load_episodes(out)}
    assert sorted(eps) == ["c1-ans", "c1-hold", "c2-dev", "c2-int"]
    hold = eps["c1-hold"]
    assert hold.context_s == pytest.approx(6.0) and hold.source == "import:call1.wav"
    # the context is the file's last 6 s before the decision point, both channels
    x, sr = read_wav(d / "call1.wav")
    ctx, _ = read_wav(out / hold.audio_path)
    np.testing.assert_array_equal(ctx, x[int(1.2 * 16000) : int(7.2 * 16000)])
    # focal speech found by VAD where the TTS put it (relative to the decision point at 7.2 s)
    assert hold.focal_speech[0][0] == pytest.approx(t1[1][2] - 7.2, abs=0.1)
    assert hold.focal_speech[-1][1] == pytest.approx(t1[2][3] - 7.2, abs=0.1)
    # history from the word file: the other's question, then the focal speaker up to the decision point
    assert hold.history[0].speaker == "other" and hold.history[-1].text.endswith("rained, um")
    # the human continuation: A's "but then" at 7.6 s is the same speaker, so B is silent until 9.6 s
    assert hold.human is not None and hold.human.onset_s == pytest.approx(
        CALL1[4][2] - 7.2, abs=0.1
    )
    ans = eps["c1-ans"]
    assert (
        ans.focal_channel == 1 and ans.slices["snr"] == "mid"
    )  # given slice overrides the measured one
    assert ans.human.onset_s == pytest.approx(t1[5][2] - t1[4][3], abs=0.1)
    assert {k: ans.slices[k] for k in ("gender", "age_band", "l1_region")} == {
        "gender": "f",
        "age_band": "50+",
        "l1_region": "british_isles",
    }
    assert hold.slices["snr"] == "high" and hold.slices["rate_tercile"] in ("slow", "mid", "fast")


def test_interruption_becomes_take_turn_plus_barge_in(corpus):
    d, out, t1, t2, rows = corpus
    e = {e.episode_id: e for e in load_episodes(out)}["c2-int"]
    assert [p.kind for p in e.replay] == ["take-turn", "barge-in"]
    assert e.replay[1].start_s == pytest.approx(-0.6) and e.replay[1].end_s == 0.0
    # the cut-in came 1.2 - 0.6 = 0.6 s after A (the other speaker) started answering
    assert e.replay[1].barge_in_after_s == pytest.approx(0.6, abs=0.07)
    bench = Tact(source="import", corpus=str(d / "ann.jsonl"), context_s=6.0)
    cases = bench.load(out)
    assert [c.case_id for c in cases][:3] == ["c1-ans__r0", "c1-ans__r1", "c1-ans__r2"]
    assert "c2-dev__r0" not in {c.case_id for c in cases}  # dev split: calibration only
    intr = next(c for c in cases if c.case_id == "c2-int__r1")
    assert [t.turn_type for t in intr.turns] == ["take-turn", "barge-in"]
    assert (
        intr.turns[1].barge_in_handling == "hold"
        and intr.turns[1].barge_in_after_s == e.replay[1].barge_in_after_s
    )
    assert intr.system_instruction.startswith("About the person you are talking with")


def test_profile_uses_other_material_of_the_speaker_only(corpus):
    d, out, t1, t2, rows = corpus
    eps = {e.episode_id: e for e in load_episodes(out)}
    p = eps["c1-hold"].profile
    # A's evidence: call1 outside [1.2, 12.2] plus all of call2 -> A takes the floor after B in call2
    # (2.8 s after B's question ended) and, in call1, at 12.4 s (after "Did you go swimming?")
    assert p.fto_median_s is not None and 0.0 < p.fto_median_s < 1.0
    assert p.articulation_rate_syl_s is not None and 2.0 < p.articulation_rate_syl_s < 7.0
    assert (
        p.floor_holding_per_min["filled_pause"] > 0
    )  # "Yeah, um," in call2; the episode's own "um" is excluded
    assert 0.3 < p.evidence_min < 1.0
    # the dev row names no word file, but another row gives call2's words
    assert eps["c2-dev"].profile.articulation_rate_syl_s is not None


def test_rerun_writes_nothing(corpus):
    d, out, *_ = corpus
    before = {p: p.stat().st_mtime_ns for p in out.rglob("*") if p.is_file()}
    assert import_corpus(d / "ann.jsonl", out, context_s=6.0) == 0
    assert {p: p.stat().st_mtime_ns for p in out.rglob("*") if p.is_file()} == before


@pytest.mark.parametrize(
    "edit, field, message",
    [
        (lambda r: r.update(labels=["hold", "yes", "abn"]), "labels[1]", "invalid value 'yes'"),
        (lambda r: r.pop("decision_s"), "decision_s", "missing required field"),
        (lambda r: r.update(decision_s=99.0), "decision_s", "outside the audio"),
        (lambda r: r.update(audio="nope.wav"), "audio", "file not found"),
        (lambda r: r.update(audio="mono.wav"), "audio", "1 channel(s); a stereo file"),
        (lambda r: r.update(focal_channel=2), "focal_channel", "must be 0 or 1"),
        (lambda r: r.update(category="chat"), "category", "invalid value 'chat'"),
        (lambda r: r["speaker"].pop("gender"), "speaker.gender", "missing or empty"),
        (
            lambda r: r.update(onset_windows=[[[3.0, 2.0]], [], []]),
            "onset_windows[0][0]",
            "is not after start",
        ),
        (
            lambda r: r.update(completion_marks=[[-9.0], [], []]),
            "completion_marks[0][0]",
            "outside [-6, 0]",
        ),
        (
            lambda r: r.update(interruption={"prompt_end_s": -1.0, "cut_in_start_s": -2.0}),
            "interruption",
            "prompt_end_s <= cut_in_start_s",
        ),
        (lambda r: r.update(slices={"gender": "x"}), "slices", "only 'snr' and 'rate_tercile'"),
        (lambda r: r.update(colour=1), "colour", "unknown key 'colour'"),
    ],
)
def test_row_errors_name_file_line_and_field(corpus, tmp_path, edit, field, message):
    d = corpus[0]
    write_wav(d / "mono.wav", np.zeros(16000, np.float32), 16000)
    good = row(audio=str(d / "call1.wav"), words=str(d / "call1.words.json"))
    bad = row(episode_id="x", audio=str(d / "call1.wav"), words=str(d / "call1.words.json"))
    bad["audio"] = str(d / bad["audio"]) if not Path(bad["audio"]).is_absolute() else bad["audio"]
    edit(bad)
    if bad.get("audio") in ("nope.wav", "mono.wav"):
        bad["audio"] = str(d / bad["audio"])
    f = tmp_path / "ann.jsonl"
    f.write_text(json.dumps(good) + "\n\n" + json.dumps(bad) + "\n")
    with pytest.raises(CorpusError) as err:
        read_rows(f, 6.0)
    text = str(err.value)
    assert "\n" not in text and text.startswith(f"{f}:3: field '{field}': "), text
    assert message in text, text


def test_whole_file_errors(corpus, tmp_path):
    d = corpus[0]
    f = tmp_path / "a.jsonl"
    r = row(audio=str(d / "call1.wav"), words=str(d / "call1.words.json"))
    f.write_text(json.dumps(r) + "\n" + json.dumps(r) + "\n")
    with pytest.raises(
        CorpusError,
        match=r"a.jsonl:2: field 'episode_id': duplicate episode id 'c1-hold' \(also line 1\)",
    ):
        read_rows(f, 6.0)
    f.write_text("{bad\n")
    with pytest.raises(CorpusError, match=r"a.jsonl:1: field '<json>': invalid JSON"):
        read_rows(f, 6.0)
    f.write_text("\n")
    with pytest.raises(CorpusError, match="no episode rows"):
        read_rows(f, 6.0)
