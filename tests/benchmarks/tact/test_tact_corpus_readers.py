"""The corpus readers: TextGrid (long and short), CTM, RTTM, fdeval's JSON words, two-channel
audio (stereo, mono pairs, mixed rates) and the annotators' labels file. Each parses what it
should, and each bad input is one line naming the file, the line and (where one applies) the field."""

from __future__ import annotations

import json

import numpy as np
import pytest
import soundfile as sf
from helpers.tact_corpus import (
    planned_conversation,
    write_audio,
    write_ctm,
    write_json_words,
    write_rttm,
    write_textgrid,
)

from fdeval.audio.resample import resample
from fdeval.benchmarks.tact.corpus.audio import (
    load_two_channel,
    mono_channel,
    pair_mono,
    stereo_channels,
    suffix_key,
)
from fdeval.benchmarks.tact.corpus.labels import read_labels
from fdeval.benchmarks.tact.corpus.records import CorpusFileError, Transcript, Word
from fdeval.benchmarks.tact.corpus.transcripts import (
    read_ctm,
    read_json_words,
    read_rttm,
    read_textgrid,
    read_transcript,
)
from fdeval.benchmarks.tact.importer import CorpusError

TIERS = {"A": [("hello", 0.5, 0.9), ("there", 1.0, 1.4)], "B": [("hi", 1.6, 1.9)]}


def _err(call, path, line, field=None) -> str:
    with pytest.raises(CorpusFileError) as e:
        call()
    text = str(e.value)
    assert "\n" not in text, text
    prefix = f"{path}:{line}:" if line else f"{path}:"
    assert text.startswith(prefix), text
    if field:
        assert f" field {field!r}: " in text, text
    assert isinstance(e.value, CorpusError)  # caught with the importer's errors
    return text


@pytest.mark.parametrize("short", [False, True])
def test_textgrid_both_formats(tmp_path, short):
    f = write_textgrid(tmp_path / "c1.TextGrid", TIERS, 2.0, short=short)
    t = read_textgrid(f)
    assert t.conversation_id == "c1" and t.speakers == ("A", "B") and t.path == str(f)
    assert t.words == (
        Word("c1", "A", "hello", 0.5, 0.9),
        Word("c1", "A", "there", 1.0, 1.4),
        Word("c1", "B", "hi", 1.6, 1.9),
    )
    assert read_textgrid(f, "other").words[0].conversation_id == "other"


def test_textgrid_strings_point_tiers_and_utf16(tmp_path):
    text = """File type = "ooTextFile"
Object class = "TextGrid"

xmin = 0
xmax = 3
tiers? <exists>
size = 2
item []:
    item [1]:
        class = "TextTier"
        name = "events"
        xmin = 0
        xmax = 3
        points: size = 1
        points [1]:
            number = 1.5
            mark = "laugh"
    item [2]:
        class = "IntervalTier"
        name = "Ana María"
        xmin = 0
        xmax = 3
        intervals: size = 2
        intervals [1]:
            xmin = 0
            xmax = 1.25
            text = "she said ""no""
and left"
        intervals [2]:
            xmin = 1.25
            xmax = 3
            text = ""
"""
    f = tmp_path / "u.TextGrid"
    f.write_bytes(
        text.encode("utf-16")
    )  # Praat writes UTF-16 (with a byte-order mark) for non-ASCII text
    t = read_textgrid(f)
    assert t.speakers == ("Ana María",)
    assert t.words == (Word("u", "Ana María", 'she said "no" and left', 0.0, 1.25),)


@pytest.mark.parametrize(
    "edit, line, field, message",
    [  # lines of write_textgrid's long format
        (
            lambda s: s.replace("xmax = 0.9 ", "xmax = 0,9 "),
            21,
            "item[1].intervals[2].xmax",
            "expected a number, got '0,9'",
        ),
        (
            lambda s: s.replace("xmin = 1.0 ", "xmin = 0.8 "),
            28,
            "item[1].intervals[4].xmin",
            "0.8 is before the previous interval's end 1",
        ),
        (
            lambda s: s.replace("xmax = 1.4 ", "xmax = 0.95 ", 1),
            29,
            "item[1].intervals[4].xmax",
            "0.95 is before xmin 1",
        ),
        (
            lambda s: s.replace(
                '"IntervalTier" \n        name = "B"', '"PointTier" \n        name = "B"'
            ),
            36,
            "item[2].class",
            "unknown tier class 'PointTier'",
        ),
        (
            lambda s: s.replace("intervals: size = 5", "intervals: size = 2.5"),
            14,
            "item[1].intervals: size",
            "expected a count",
        ),
        (
            lambda s: s[: s.index("    item [2]")],
            34,
            "item[2].class",
            "the file ends where a quoted string should be",
        ),
        (lambda s: s.replace('"TextGrid"', '"Sound"'), 2, "Object class", "not a TextGrid"),
        (
            lambda s: s.replace('name = "B"', 'name = "A"'),
            36,
            "item[2].name",
            "a second interval tier named 'A'",
        ),
    ],
)
def test_textgrid_errors(tmp_path, edit, line, field, message):
    f = write_textgrid(tmp_path / "bad.TextGrid", TIERS, 2.0)
    f.write_text(edit(f.read_text()))
    assert message in _err(lambda: read_textgrid(f), f, line, field)


def test_textgrid_binary_and_missing(tmp_path):
    f = tmp_path / "b.TextGrid"
    f.write_bytes(b"ooBinaryFile\x08TextGrid\x00\x00")
    assert "binary TextGrid" in _err(lambda: read_textgrid(f), f, 1)
    assert "cannot read" in _err(
        lambda: read_textgrid(tmp_path / "none.TextGrid"), tmp_path / "none.TextGrid", None
    )


def test_ctm_many_conversations(tmp_path):
    f = write_ctm(tmp_path / "all.ctm", "c1", TIERS)
    f.write_text(
        f.read_text() + "\n;; a second conversation\nc2 1 0.00 0.40 yes\nc2 2 0.50 0.30 no NA\n"
    )
    found = read_ctm(f)
    assert sorted(found) == ["c1", "c2"]
    assert found["c1"].speakers == ("A", "B") and found["c1"].words[2] == Word(
        "c1", "B", "hi", 1.6, 1.9
    )
    assert [(w.speaker, w.text) for w in found["c2"].words] == [("1", "yes"), ("2", "no")]
    # a per-conversation file may name the conversation differently inside
    assert (
        read_transcript(write_ctm(tmp_path / "x.ctm", "inner", TIERS), "outer")
        .words[0]
        .conversation_id
        == "outer"
    )
    assert "holds no conversation 'c3'" in _err(lambda: read_transcript(f, "c3"), f, None)


@pytest.mark.parametrize(
    "line, field, message",
    [
        ("c1 A 0.5 hello", None, "expected at least 5 fields"),
        ("c1 A x 0.3 hello", "start", "expected a number, got 'x'"),
        ("c1 A 0.5 -0.3 hello", "duration", "must be >= 0"),
        ("c1 A 0.5 0.3 hello 1.7", "confidence", "must be in [0, 1]"),
        ("c1 A 0.5 inf hello", "duration", "expected a finite number"),
    ],
)
def test_ctm_errors(tmp_path, line, field, message):
    f = tmp_path / "bad.ctm"
    f.write_text(";; header\nc1 A 0.1 0.2 ok\n\n" + line + "\n")
    assert message in _err(lambda: read_ctm(f), f, 4, field)


def test_rttm_turns(tmp_path):
    f = write_rttm(
        tmp_path / "c1.rttm", "c1", {"spk2": [(1.0, 2.0)], "spk1": [(0.0, 0.8), (2.5, 3.0)]}
    )
    f.write_text("SPKR-INFO c1 1 <NA> <NA> <NA> unknown spk1 <NA> <NA>\n" + f.read_text())
    t = read_rttm(f)["c1"]
    assert t.speakers == ("spk1", "spk2") and not t.words
    assert [(u.speaker, u.start_s, u.end_s, u.text) for u in t.turns] == [
        ("spk1", 0.0, 0.8, ""),
        ("spk2", 1.0, 2.0, ""),
        ("spk1", 2.5, 3.0, ""),
    ]


@pytest.mark.parametrize(
    "line, field, message",
    [
        ("SPEAKER c1 1 0.5 0.3 <NA> <NA>", None, "needs at least 8 fields"),
        ("SPEAKER c1 1 zero 0.3 <NA> <NA> s1 <NA> <NA>", "tbeg", "expected a number"),
        ("SPEAKER c1 1 0.5 -1 <NA> <NA> s1 <NA> <NA>", "tdur", "must be >= 0"),
    ],
)
def test_rttm_errors(tmp_path, line, field, message):
    f = tmp_path / "bad.rttm"
    f.write_text("SPEAKER c1 1 0.0 0.4 <NA> <NA> s1 <NA> <NA>\n" + line + "\n")
    assert message in _err(lambda: read_rttm(f), f, 2, field)
    f.write_text(";; nothing\n")
    assert "no SPEAKER lines" in _err(lambda: read_rttm(f), f, None)


def test_json_words(tmp_path):
    f = write_json_words(tmp_path / "c1.words.json", {0: TIERS["A"], 1: TIERS["B"]})
    t = read_json_words(f)
    assert t.conversation_id == "c1" and t.speakers == ("0", "1")
    assert t.words[-1] == Word("c1", "1", "hi", 1.6, 1.9)
    f.write_text("[]")
    assert read_json_words(f).words == ()


@pytest.mark.parametrize(
    "items, line, field, message",
    [
        (
            (
                '[\n {"channel": 0, "text": "a", "start_s": 0, "end_s": 1},\n'
                ' {"channel": 2, "text": "b", "start_s": 1, "end_s": 2}\n]'
            ),
            3,
            "[1].channel",
            "must be 0 or 1",
        ),
        (
            '[{"channel": 0, "text": "a", "start_s": 0, "end_s": 1},\n\n  {"channel": 1, "text": "b", "start_s": 2}]',
            3,
            "[1].end_s",
            "missing required field",
        ),
        (
            '[{"channel": 0, "text": "a", "start_s": 2, "end_s": 1}]',
            1,
            "[0].end_s",
            "is before start_s",
        ),
        (
            '[{"channel": 0, "text": "a", "start_s": 0, "end_s": 1, "who": "x"}]',
            1,
            "[0].who",
            "unknown key",
        ),
        (
            '[{"channel": 0, "text": "a",\n "start_s": 0, "end_s": 1}\n {"channel": 1}]',
            3,
            None,
            "expected ',' or ']'",
        ),
        ('{"words": []}', 1, None, "expected a JSON list"),
        (
            '[{"channel": 0, "text": "a", "start_s": 0, "end_s": 1},\n {"channel": 1, "text": tru}]',
            2,
            None,
            "invalid JSON",
        ),
    ],
)
def test_json_words_errors(tmp_path, items, line, field, message):
    f = tmp_path / "w.json"
    f.write_text(items)
    assert message in _err(lambda: read_json_words(f), f, line, field)


def test_unknown_transcript_format(tmp_path):
    f = tmp_path / "c.srt"
    f.write_text("1\n")
    assert "unknown transcript format '.srt'" in _err(lambda: read_transcript(f, "c"), f, None)


def test_relabel_keeps_conversation_and_drops_others():
    t = Transcript(
        "c", "x.ctm", ("A", "B", "C"), (Word("c", "A", "a", 0, 1), Word("c", "C", "c", 1, 2))
    )
    r = t.relabel({"A": "alice", "B": "bob"})
    assert r.speakers == ("alice", "bob") and r.words == (Word("c", "alice", "a", 0, 1),)


# --- audio ---------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def speech():
    return planned_conversation()


def test_mono_pair_at_mixed_rates_resampled_to_16k(tmp_path, speech):
    a = write_audio(tmp_path / "call_A.wav", speech.channel(0, 24000), 24000)
    b = write_audio(tmp_path / "call_B.flac", speech.channel(1, 48000), 48000)
    write_audio(tmp_path / "lonely_A.wav", speech.channel(0)[:16000], 16000)
    groups = pair_mono(tmp_path.iterdir(), suffix_key())
    assert groups == {"call": (("A", a), ("B", b)), "lonely": (("A", tmp_path / "lonely_A.wav"),)}
    srcs = (mono_channel("call", a), mono_channel("call", b))
    audio = load_two_channel("call", srcs)
    assert audio.sample_rate_hz == 16000 and audio.original_rates_hz == (24000, 48000)
    assert abs(audio.samples.shape[0] - speech.tracks.shape[0]) <= 1 and audio.samples.shape[1] == 2
    ref = speech.pair()[: audio.samples.shape[0]]
    # resampled there and back: the speech is where it was, at the same level
    err = np.abs(audio.samples[: ref.shape[0]] - ref).max()
    assert err < 0.05 * np.abs(ref).max(), err


def test_block_by_block_resampling_equals_resampling_the_whole(tmp_path, speech):
    f = write_audio(
        tmp_path / "s.flac", speech.pair(48000)[: 48000 * 9], 48000
    )  # several decode blocks
    x, rate = sf.read(str(f), dtype="float32")
    audio = load_two_channel("s", stereo_channels("s", f))
    for ch in (0, 1):
        np.testing.assert_array_equal(audio.samples[:, ch], resample(x[:, ch], rate, 16000))


def test_stereo_file_and_its_errors(tmp_path, speech):
    f = write_audio(tmp_path / "s.flac", speech.pair(44100)[: 44100 * 3], 44100)
    chans = stereo_channels("s", f)
    assert [(c.channel, c.sample_rate_hz) for c in chans] == [(0, 44100), (1, 44100)]
    assert load_two_channel("s", chans).samples.shape == (48000, 2)
    m = write_audio(tmp_path / "m.wav", speech.channel(0)[:16000], 16000)
    assert "1 channel(s); a conversation file needs 2" in _err(
        lambda: stereo_channels("m", m), m, None
    )
    assert "must be mono" in _err(lambda: mono_channel("s", f), f, None)
    junk = tmp_path / "junk.wav"
    junk.write_bytes(b"RIFF....WAVEjunk")
    assert "not readable audio" in _err(lambda: stereo_channels("j", junk), junk, None)


def test_mono_files_of_different_lengths_are_padded(tmp_path, speech):
    a = write_audio(tmp_path / "x_A.wav", speech.channel(0)[:32000], 16000)
    b = write_audio(tmp_path / "x_B.wav", speech.channel(1)[:24000], 16000)
    audio = load_two_channel("x", (mono_channel("x", a), mono_channel("x", b)))
    assert audio.samples.shape == (32000, 2) and not audio.samples[24000:, 1].any()


# --- labels --------------------------------------------------------------------------------------

GOOD = {
    "id": "c.c0.00016000",
    "labels": ["ans", "ans", "ref"],
    "silence_acceptability": [0.1, 0.0, 0.4],
    "onset_windows": [[[0.0, 1.0]], [], [[0.5, 2.0]]],
    "completion_marks": [[0.0], [], [-0.4]],
}
CONTEXTS = {"c.c0.00016000": 8.0, "c.c1.00020000": 8.0}


def test_labels_read_and_checked(tmp_path):
    f = tmp_path / "labels.jsonl"
    other = {
        **GOOD,
        "id": "c.c1.00020000",
        "split": "dev",
        "judge_logits": [1, 0, 0, 0, 0, 0],
        "context_bucket": "q",
    }
    f.write_text(json.dumps(GOOD) + "\n\n" + json.dumps(other) + "\n")
    got = read_labels(f, CONTEXTS)
    assert sorted(got) == sorted(CONTEXTS) and "id" not in got["c.c0.00016000"]
    assert got["c.c1.00020000"]["split"] == "dev"


@pytest.mark.parametrize(
    "edit, field, message",
    [
        (lambda d: d.update(id="c.c0.00016001"), "id", "no decision point has id 'c.c0.00016001'"),
        (lambda d: d.update(labels=["ans", "maybe", "ref"]), "labels[1]", "invalid value 'maybe'"),
        (
            lambda d: d.update(silence_acceptability=[0.1, 0.2]),
            "silence_acceptability",
            "has 2 entries but there are 3",
        ),
        (
            lambda d: d.update(completion_marks=[[-9.0], [], []]),
            "completion_marks[0][0]",
            "outside [-8, 0]",
        ),
        (
            lambda d: d.update(onset_windows=[[[6.0, 7.0]], [], []]),
            "onset_windows[0][0][0]",
            "outside [-2, 5]",
        ),
        (lambda d: d.pop("labels"), "labels", "missing required field"),
        (lambda d: d.update(colour="red"), "colour", "unknown key 'colour'"),
        (lambda d: d.update(judge_logits=[1, 2]), "judge_logits", "needs 6 numbers"),
        (lambda d: d.update(split="train"), "split", "invalid value 'train'"),
    ],
)
def test_labels_errors(tmp_path, edit, field, message):
    bad = json.loads(json.dumps(GOOD))
    bad["id"] = "c.c1.00020000"
    edit(bad)
    f = tmp_path / "labels.jsonl"
    f.write_text(json.dumps(GOOD) + "\n" + json.dumps(bad) + "\n")
    assert message in _err(lambda: read_labels(f, CONTEXTS), f, 2, field)


def test_labels_twice_and_bad_json(tmp_path):
    f = tmp_path / "labels.jsonl"
    f.write_text(json.dumps(GOOD) + "\n" + json.dumps(GOOD) + "\n")
    assert "labelled twice (also line 1)" in _err(lambda: read_labels(f, CONTEXTS), f, 2, "id")
    f.write_text("{oops\n")
    assert "invalid JSON" in _err(lambda: read_labels(f, CONTEXTS), f, 1)
