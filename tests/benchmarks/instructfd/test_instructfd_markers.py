from __future__ import annotations

import pytest

from fdeval.benchmarks.instructfd.markers import Marker, MarkerError, Pause, Speech, parse_markers
from fdeval.errors import FdevalError


def test_plain_text() -> None:
    p = parse_markers("  hello   there, friend ")
    assert p.segments == (Speech("hello there, friend", 0),)
    assert p.markers == () and p.text == "hello there, friend" and not p.has_pauses


def test_markers_and_pauses_positions() -> None:
    p = parse_markers(
        "so it is four one five, <pause: 1.2> <backchannel: mm-hmm> then eight <pause:0.5s> two"
    )
    assert p.words == ("so", "it", "is", "four", "one", "five,", "then", "eight", "two")
    assert p.segments == (
        Speech("so it is four one five,", 0),
        Pause(1.2, 6),
        Speech("then eight", 6),
        Pause(0.5, 8),
        Speech("two", 8),
    )
    assert p.markers == (Marker("backchannel", "mm-hmm", 6, 2),)
    assert p.text_before(p.markers[0]) == "so it is four one five,"
    assert p.text_after(p.markers[0]) == "then eight two"


def test_interrupt_splits_speech_and_take_turn_at_end() -> None:
    p = parse_markers(
        "I will mix bleach <interrupt: no,   don't do that> and ammonia. <take-turn: okay then>"
    )
    assert [s.text for s in p.segments] == ["I will mix bleach", "and ammonia."]
    assert p.markers == (
        Marker("interrupt", "no, don't do that", 4, 1),
        Marker("take-turn", "okay then", 6, 2),
    )


def test_marker_kind_is_case_insensitive() -> None:
    assert parse_markers("a <Backchannel: yeah> b").markers[0].kind == "backchannel"


@pytest.mark.parametrize(
    "text,fragment",
    [
        ("hello <backchannel: yeah", "unclosed marker"),
        ("hello <backchannel: <pause: 1> yeah>", "inside a marker"),
        ("hello > there", "stray '>'"),
        ("hello <laugh: haha> there", "unknown marker kind"),
        ("hello <backchannel> there", "expected <KIND: CONTENT>"),
        ("hello <interrupt:   > there", "empty <interrupt:>"),
        ("hello <pause: soon> there", "pause must be a number"),
        ("hello <pause: 0> there", "pause must be a number"),
        ("hello <pause: -1> there", "pause must be a number"),
        ("hello <pause: 45> there", "pause must be a number"),
        ("hello <take-turn: sure> there", "very end"),
    ],
)
def test_malformed_markers(text: str, fragment: str) -> None:
    with pytest.raises(MarkerError, match="column") as info:
        parse_markers(text)
    assert fragment in str(info.value)
    assert isinstance(info.value, FdevalError) and isinstance(info.value, ValueError)
