"""Render a session transcript as time-stamped text lines, the form a judge (or a person) reads.

Both channels are interleaved on the session clock, one line per stretch of one speaker::

    [10.40-13.52] MODEL: sure a simple way is to start with basic
    [13.52-14.00] [Overlap] MODEL (cont.): shapes
    [13.68-14.00] [Overlap] USER: wait
    [14.32-14.64] USER (cont.): wait

* Consecutive words of a speaker share a line while the silence between them is shorter than
  ``gap_s``; a longer silence starts a new line.
* A word is *overlapping* when its time span shares a positive stretch with a word of the other
  speaker. A line holds only overlapping or only non-overlapping words; overlapping lines carry
  ``[Overlap]``. A line is also broken where the other speaker says something inside a short
  silence of this speaker, so that the lines read in time order.
* A line that continues the same speaker's previous line without a pause of ``gap_s`` or more
  (it was only split at an overlap boundary) carries ``(cont.)``.
* Lines are ordered by start time (the user first on a tie); times have two decimals.

The format is described in ``docs/judging.md``; :func:`fdeval.transcript.io.parse_rendered` reads
it back.
"""

from __future__ import annotations

from bisect import bisect_left
from dataclasses import dataclass
from typing import Iterable, Sequence

from fdeval.types import Transcript, Word

DEFAULT_GAP_S = 1.0
# Shared time shorter than this is not an overlap (touching words, rounding).
OVERLAP_EPS_S = 1e-6

SPEAKER_LABEL = {"user": "USER", "model": "MODEL"}


@dataclass(frozen=True)
class Line:
    """One rendered line: a stretch of words of one speaker."""

    speaker: str
    start_s: float
    end_s: float
    text: str
    overlap: bool = False
    cont: bool = False

    def format(self) -> str:
        mark = "[Overlap] " if self.overlap else ""
        cont = " (cont.)" if self.cont else ""
        return f"[{self.start_s:.2f}-{self.end_s:.2f}] {mark}{SPEAKER_LABEL[self.speaker]}{cont}: {self.text}"


def _shares_time(a_s: float, a_e: float, b_s: float, b_e: float) -> bool:
    return min(a_e, b_e) - max(a_s, b_s) > OVERLAP_EPS_S


class _Other:
    """The other speaker's words, sorted, for quick interval queries."""

    def __init__(self, words: Sequence[Word]):
        self.words = sorted(words, key=lambda w: (w.start_s, w.end_s))
        self.starts = [w.start_s for w in self.words]
        self.max_len = max((w.end_s - w.start_s for w in self.words), default=0.0)

    def _near(self, start_s: float, end_s: float) -> Iterable[Word]:
        lo = bisect_left(self.starts, start_s - self.max_len - OVERLAP_EPS_S)
        hi = bisect_left(self.starts, end_s + OVERLAP_EPS_S)
        return self.words[lo:hi]

    def overlaps(self, w: Word) -> bool:
        return any(
            _shares_time(w.start_s, w.end_s, o.start_s, o.end_s)
            for o in self._near(w.start_s, w.end_s)
        )

    def speaks_within(self, start_s: float, end_s: float) -> bool:
        """Whether a word of the other speaker lies wholly inside the silence [start_s, end_s]."""
        return any(
            o.start_s >= start_s - OVERLAP_EPS_S and o.end_s <= end_s + OVERLAP_EPS_S
            for o in self._near(start_s, end_s)
        )


def _speaker_lines(own: Sequence[Word], other: _Other, gap_s: float) -> list[Line]:
    lines: list[Line] = []
    run: list[Word] = []
    run_overlap = False
    run_cont = False

    def flush() -> None:
        if run:
            lines.append(
                Line(
                    run[0].speaker,
                    run[0].start_s,
                    run[-1].end_s,
                    " ".join(w.text for w in run),
                    run_overlap,
                    run_cont,
                )
            )

    prev: Word | None = None
    for w in own:
        ov = other.overlaps(w)
        if prev is None or w.start_s - prev.end_s >= gap_s:
            flush()
            run, run_overlap, run_cont = [w], ov, False
        elif ov != run_overlap or other.speaks_within(prev.end_s, w.start_s):
            flush()
            run, run_overlap, run_cont = [w], ov, True
        else:
            run.append(w)
        prev = w
    flush()
    return lines


def transcript_lines(words: Iterable[Word], gap_s: float = DEFAULT_GAP_S) -> list[Line]:
    """The rendered lines of `words` (both speakers), in time order."""
    if gap_s <= 0:
        raise ValueError(f"gap_s must be > 0, got {gap_s!r}")
    by_speaker: dict[str, list[Word]] = {"user": [], "model": []}
    for w in words:
        by_speaker[w.speaker].append(w)
    for ws in by_speaker.values():
        ws.sort(key=lambda w: (w.start_s, w.end_s))
    lines = _speaker_lines(by_speaker["user"], _Other(by_speaker["model"]), gap_s) + _speaker_lines(
        by_speaker["model"], _Other(by_speaker["user"]), gap_s
    )
    lines.sort(key=lambda ln: (ln.start_s, 0 if ln.speaker == "user" else 1, ln.end_s))
    return lines


def render_words(words: Iterable[Word], gap_s: float = DEFAULT_GAP_S) -> str:
    """`words` rendered as text, one line per :class:`Line`, joined by newlines."""
    return "\n".join(ln.format() for ln in transcript_lines(words, gap_s))


def render(transcript: Transcript, gap_s: float = DEFAULT_GAP_S) -> str:
    """The session transcript as time-stamped lines (see the module docstring for the format)."""
    return render_words(transcript.words, gap_s)
