"""Transcript JSON: round trip and strict validation."""

from __future__ import annotations

import copy
import json

import pytest

from fdeval.transcript.io import (
    TranscriptError,
    load_transcript,
    transcript_from_dict,
    transcript_to_dict,
    write_transcript,
)
from fdeval.types import PlayedTurn, Transcript, Word

CID = "conv__continue"

TRANSCRIPT = Transcript(
    CID,
    (
        Word(CID, "user", "hello", 0.1, 0.4, "tts", 0),
        Word(CID, "model", "hi", 1.0, 1.2, "model_text", None),
        Word(CID, "user", "mm-hmm", 1.1, 1.3, "tts", 1),
        Word(CID, "model", "there", 1.25, 1.5, "asr", None),
    ),
    (
        PlayedTurn(
            CID, 0, "turn1", "take-turn", None, 0.1, 0.4, 0.0, False, 1, 1, (("backchannel", 0.3),)
        ),
        PlayedTurn(
            CID, 1, "turn2_backchannel", "barge-in", "backchannel", 1.1, 1.3, 1.05, False, 1, 1
        ),
    ),
    2.5,
)


def test_round_trip(tmp_path):
    d = transcript_to_dict(TRANSCRIPT)
    assert d["format"] == "fdeval.transcript" and "case_id" not in d["words"][0]
    assert transcript_from_dict(json.loads(json.dumps(d))) == TRANSCRIPT
    path = tmp_path / "t" / f"{CID}.json"
    write_transcript(TRANSCRIPT, path)
    assert load_transcript(path) == TRANSCRIPT
    assert [p.name for p in path.parent.iterdir()] == [path.name]  # no temp file left


def _broken(edit) -> dict:
    d = copy.deepcopy(transcript_to_dict(TRANSCRIPT))
    edit(d)
    return d


@pytest.mark.parametrize(
    "edit, field, message",
    [
        (lambda d: d.pop("words"), "words", "missing"),
        (lambda d: d.update(extra=1), "extra", "unknown key"),
        (lambda d: d.update(format="other"), "format", "expected"),
        (lambda d: d.update(format_version=9), "format_version", "unsupported"),
        (lambda d: d["words"][1].update(end_s=0.5), "words[1].end_s", "before start"),
        (lambda d: d["words"][0].update(start_s=-1), "words[0].start_s", ">= 0"),
        (lambda d: d["words"][0].update(start_s=float("nan")), "words[0].start_s", "finite"),
        (lambda d: d["words"][0].update(speaker="robot"), "words[0].speaker", "invalid value"),
        (lambda d: d["words"][0].update(source="mic"), "words[0].source", "invalid value"),
        (lambda d: d["words"][0].update(turn=7), "words[0].turn", "no user turn"),
        (lambda d: d["words"][0].update(text=""), "words[0].text", "non-empty"),
        (
            lambda d: d["user_turns"][0].update(n_words_played=3),
            "user_turns[0].n_words_played",
            "more than",
        ),
        (lambda d: d["user_turns"][1].update(subtype=None), "user_turns[1].subtype", "barge-in"),
        (
            lambda d: d["user_turns"][0].update(subtype="interrupt"),
            "user_turns[0].subtype",
            "only allowed",
        ),
        (lambda d: d["user_turns"][1].update(index=0), "user_turns[1].index", "twice"),
        (
            lambda d: d["user_turns"][0]["triggers"][0].update(kind=""),
            "user_turns[0].triggers[0].kind",
            "non-empty",
        ),
        (
            lambda d: d["user_turns"][0].update(cut_short="no"),
            "user_turns[0].cut_short",
            "true or false",
        ),
    ],
)
def test_validation_names_file_and_field(edit, field, message):
    with pytest.raises(TranscriptError) as e:
        transcript_from_dict(_broken(edit), "runs/x/transcripts/t.json")
    assert e.value.field == field, str(e.value)
    assert message in str(e.value)
    assert str(e.value).startswith("runs/x/transcripts/t.json: case 'conv__continue': field ")


def test_load_errors(tmp_path):
    with pytest.raises(TranscriptError, match="not found"):
        load_transcript(tmp_path / "missing.json")
    bad = tmp_path / "bad.json"
    bad.write_text("{")
    with pytest.raises(TranscriptError, match="bad.json"):
        load_transcript(bad)
    with pytest.raises(TranscriptError, match="expected an object"):
        transcript_from_dict([1, 2])


def test_to_dict_rejects_words_of_another_case():
    t = Transcript(CID, (Word("other", "user", "x", 0, 1, "tts", None),), (), 1.0)
    with pytest.raises(TranscriptError, match=r"words\[0\].case_id"):
        transcript_to_dict(t)
