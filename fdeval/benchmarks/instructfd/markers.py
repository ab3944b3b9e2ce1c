"""Inline markers in a scripted line of speech.

A script line is plain spoken text with markers in angle brackets::

    so my number is five five five <pause: 1.2> <backchannel: mm-hmm> two one two

``<backchannel: PHRASE>`` / ``<interrupt: CONTENT>``
    the OTHER speaker cuts in at this point, saying PHRASE / CONTENT (in a user line: the model's
    expected cut-in; in a model line: the user's barge-in).
``<take-turn: CONTENT>``
    the other speaker takes the floor after this line, saying CONTENT; only at the very end.
``<pause: SECONDS>``
    silence inside the speaker's own turn (a filler or thinking pause), 0 < SECONDS <= 30;
    a trailing ``s`` is allowed (``<pause: 1.5s>``).

:func:`parse_markers` splits a line into segments (speech runs and pauses, in order) and the
non-pause markers, each located by ``word_index`` — the number of the speaker's words spoken
before it — and ``segment_index`` — the number of segments before it.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from fdeval.errors import FdevalError

MARKER_KINDS = ("backchannel", "interrupt", "take-turn", "pause")
CUT_IN_KINDS = ("backchannel", "interrupt")
MAX_PAUSE_S = 30.0

_BODY_RE = re.compile(r"^\s*([A-Za-z-]+)\s*:(.*)$", re.DOTALL)
_SECONDS_RE = re.compile(r"^(\d+(?:\.\d*)?|\.\d+)\s*s?$")


class MarkerError(FdevalError, ValueError):
    """A malformed inline marker in a script line."""


@dataclass(frozen=True)
class Speech:
    """A run of spoken words between markers; `first_word` indexes the line's spoken words."""

    text: str
    first_word: int

    @property
    def words(self) -> tuple[str, ...]:
        return tuple(self.text.split())


@dataclass(frozen=True)
class Pause:
    """Silence inside the speaker's turn, placed after `word_index` words."""

    seconds: float
    word_index: int


@dataclass(frozen=True)
class Marker:
    """A non-pause marker: `kind` is backchannel, interrupt or take-turn."""

    kind: str
    content: str
    word_index: int
    segment_index: int


@dataclass(frozen=True)
class ParsedText:
    source: str
    segments: tuple[Speech | Pause, ...]
    markers: tuple[Marker, ...]

    @property
    def words(self) -> tuple[str, ...]:
        return tuple(w for s in self.segments if isinstance(s, Speech) for w in s.words)

    @property
    def text(self) -> str:
        """The spoken words only, single-spaced."""
        return " ".join(self.words)

    @property
    def has_pauses(self) -> bool:
        return any(isinstance(s, Pause) for s in self.segments)

    def text_before(self, marker: Marker) -> str:
        return " ".join(self.words[: marker.word_index])

    def text_after(self, marker: Marker) -> str:
        return " ".join(self.words[marker.word_index :])


def _fail(source: str, pos: int, problem: str) -> MarkerError:
    lo, hi = max(0, pos - 25), min(len(source), pos + 25)
    snippet = source[lo:hi].replace("\n", " ")
    return MarkerError(f"{problem} at column {pos + 1}: ...{snippet}...")


def parse_markers(source: str) -> ParsedText:
    """Parse one script line. Raises :class:`MarkerError` on a malformed marker."""
    segments: list[Speech | Pause] = []
    markers: list[Marker] = []
    n_words = 0
    pos = 0

    def add_speech(run: str, at: int) -> None:
        nonlocal n_words
        if ">" in run:
            raise _fail(source, at + run.index(">"), "stray '>' outside a marker")
        words = run.split()
        if words:
            segments.append(Speech(" ".join(words), n_words))
            n_words += len(words)

    while True:
        start = source.find("<", pos)
        if start < 0:
            add_speech(source[pos:], pos)
            break
        add_speech(source[pos:start], pos)
        end = source.find(">", start + 1)
        nested = source.find("<", start + 1)
        if end < 0:
            raise _fail(source, start, "unclosed marker '<' (no '>')")
        if 0 <= nested < end:
            raise _fail(source, nested, "'<' inside a marker (unclosed or nested marker)")
        body = source[start + 1 : end]
        m = _BODY_RE.match(body)
        if not m:
            raise _fail(source, start, f"malformed marker <{body}>; expected <KIND: CONTENT>")
        kind, content = m.group(1).lower(), " ".join(m.group(2).split())
        if kind not in MARKER_KINDS:
            raise _fail(
                source,
                start,
                f"unknown marker kind {kind!r}; expected one of {', '.join(MARKER_KINDS)}",
            )
        if not content:
            raise _fail(source, start, f"empty <{kind}:> marker")
        if kind == "pause":
            sm = _SECONDS_RE.match(content)
            seconds = float(sm.group(1)) if sm else math.nan
            if not (0 < seconds <= MAX_PAUSE_S):
                raise _fail(
                    source,
                    start,
                    f"pause must be a number of seconds in (0, {MAX_PAUSE_S:g}], got {content!r}",
                )
            segments.append(Pause(seconds, n_words))
        else:
            if kind == "take-turn" and source[end + 1 :].strip():
                raise _fail(source, start, "<take-turn:> must come at the very end of the line")
            markers.append(Marker(kind, content, n_words, len(segments)))
        pos = end + 1
    return ParsedText(source, tuple(segments), tuple(markers))
