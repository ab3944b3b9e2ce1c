"""Rendering transcripts as time-stamped lines, and reading that format back."""

from __future__ import annotations

import pytest

from fdeval.errors import FdevalError
from fdeval.transcript.io import TranscriptError, parse_rendered
from fdeval.transcript.render import render, render_words, transcript_lines
from fdeval.types import PlayedTurn, Transcript, Word

CID = "conv__listen"


def W(speaker: str, text: str, start: float, end: float) -> Word:
    return Word(
        CID,
        speaker,
        text,
        start,
        end,
        "tts" if speaker == "user" else "model_text",
        0 if speaker == "user" else None,
    )


WORDS = (
    W("user", "so", 0.00, 0.30),
    W("user", "I", 0.35, 0.50),
    W("user", "was", 0.55, 0.80),
    W("user", "thinking", 0.85, 1.30),
    W("user", "about", 1.35, 1.60),
    W("user", "it", 1.65, 1.90),
    W("model", "mm-hmm", 1.00, 1.40),  # overlaps "thinking" and "about"
    W("model", "sure", 2.50, 2.80),
    W("model", "here", 2.85, 3.10),
    W("model", "is", 3.15, 3.30),
    W("user", "right", 3.45, 3.80),  # said inside the model's short pause
    W("model", "one", 4.00, 4.25),
    W("model", "idea", 4.30, 4.60),
    W("model", "anyway", 6.00, 6.40),  # after a pause longer than gap_s: a new line
)

GOLDEN = """\
[0.00-0.80] USER: so I was
[0.85-1.60] [Overlap] USER (cont.): thinking about
[1.00-1.40] [Overlap] MODEL: mm-hmm
[1.65-1.90] USER (cont.): it
[2.50-3.30] MODEL: sure here is
[3.45-3.80] USER: right
[4.00-4.60] MODEL (cont.): one idea
[6.00-6.40] MODEL: anyway"""


def transcript(words=WORDS) -> Transcript:
    turn = PlayedTurn(CID, 0, "turn1", "take-turn", None, 0.0, 3.8, 0.0, False, 7, 7)
    return Transcript(CID, tuple(words), (turn,), 7.0)


def test_render_golden():
    assert render(transcript()) == GOLDEN


def test_render_ignores_word_order_and_gap_is_a_parameter():
    assert render(transcript(tuple(reversed(WORDS)))) == GOLDEN
    # With a 2 s grouping gap, "anyway" joins the model's previous line.
    assert (
        render(transcript(), gap_s=2.0).splitlines()[-1]
        == "[4.00-6.40] MODEL (cont.): one idea anyway"
    )
    with pytest.raises(ValueError):
        render(transcript(), gap_s=0)


def test_touching_and_zero_length_words_do_not_overlap():
    words = [W("user", "a", 0.0, 1.0), W("model", "b", 1.0, 1.5), W("model", "c", 0.5, 0.5)]
    lines = transcript_lines(words)
    assert not any(ln.overlap for ln in lines)


def test_tie_puts_user_first():
    words = [W("model", "so", 1.0, 1.4), W("user", "wait", 1.0, 1.3)]
    assert render_words(words).splitlines() == [
        "[1.00-1.30] [Overlap] USER: wait",
        "[1.00-1.40] [Overlap] MODEL: so",
    ]


def test_parse_rendered_spreads_words_evenly():
    words = parse_rendered("[1.00-2.00] [Overlap] MODEL (cont.): a b c d  [2.50-2.50] USER: x", CID)
    assert [(w.speaker, w.text) for w in words] == [
        ("model", "a"),
        ("model", "b"),
        ("model", "c"),
        ("model", "d"),
        ("user", "x"),
    ]
    assert [(round(w.start_s, 6), round(w.end_s, 6)) for w in words[:4]] == [
        (1.0, 1.25),
        (1.25, 1.5),
        (1.5, 1.75),
        (1.75, 2.0),
    ]
    assert (words[4].start_s, words[4].end_s) == (2.5, 2.5)
    assert all(w.case_id == CID and w.source == "asr" and w.turn is None for w in words)
    assert parse_rendered("[0-1] USER: hi", CID, source="tts")[0].source == "tts"


def test_parse_then_render_round_trip():
    # One-word lines keep their exact times, so the golden transcript survives parse + render
    # where no line's even spread changes which words overlap.
    text = (
        "[0.24-8.08] USER: hey can you help me with a sketch\n"
        "[10.40-13.52] MODEL: sure a simple way is to start with basic\n"
        "[13.52-14.00] [Overlap] MODEL (cont.): shapes\n"
        "[13.68-14.00] [Overlap] USER: wait\n"
        "[14.32-14.64] USER (cont.): wait\n"
        "[17.12-18.64] MODEL: oh sorry what's up"
    )
    assert render_words(parse_rendered(text, CID)) == text


@pytest.mark.parametrize(
    "text, field, message",
    [
        ("hello [0.0-1.0] USER: hi", "line 1", "expected"),
        ("[0.0-1.0] USER: hi [2.0-1.0] MODEL: yo", "line 2", "before start"),
        ("[0.0-1.0] USER: [1.0-2.0] MODEL: yo", "line 1", "no words"),
    ],
)
def test_parse_rendered_errors(text, field, message):
    with pytest.raises(TranscriptError) as e:
        parse_rendered(text, CID)
    assert e.value.field == field and message in str(e.value) and CID in str(e.value)
    assert isinstance(e.value, FdevalError)
