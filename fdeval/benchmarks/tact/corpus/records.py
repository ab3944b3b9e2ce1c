"""The common records every corpus reader and recipe produces, and the one error they raise.

A two-speaker corpus is read into `Conversation`s: which file and channel holds each speaker
(`ChannelSource`), who the speakers are (`Speaker`), and what the transcript says (`Word`s with
times, or coarser `Turn`s). Every record names its conversation, so records from a CTM or RTTM
that covers many conversations never lose where they belong. Times are seconds on the
conversation's own clock (the audio file's), and the names say so (`start_s`, `end_s`).

All records are frozen: a reader's output can be shared and compared, never edited in place
(`dataclasses.replace` makes an edited copy, as `Transcript.relabel` does).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Mapping

from ..importer import CorpusError

UNKNOWN = "unknown"  # a speaker attribute the corpus does not give (the importer needs a string)
# Where the decision-point finder takes each channel's speech from (see `Conversation.speech`).
SPEECH_SOURCES = ("words", "turns", "vad")
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


class CorpusFileError(CorpusError):
    """A corpus file that cannot be read: one line naming the file, the line and (where one
    applies) the field. A `CorpusError` too, so callers of the importer catch both alike."""

    def __init__(self, path: str | Path, line: int | None, message: str, field: str | None = None):
        self.path, self.line, self.field = str(path), line, field
        where = f"{path}:{line}" if line else f"{path}"
        what = f" field {field!r}:" if field else ""
        # CorpusError's own constructor insists on a field; the message is built here instead.
        Exception.__init__(self, f"{where}:{what} {message}")


def safe_id(text: str) -> str:
    """`text` as an fdeval id (letters, digits, '.', '_', '-'; starts with a letter or digit)."""
    s = _UNSAFE.sub("-", text.strip()).lstrip("._-")
    return s or "x"


@dataclass(frozen=True)
class Word:
    """One timed stretch of transcript text: a word, or a longer stretch where the transcript is
    no finer (a TextGrid interval holding a phrase). `speaker` is the transcript's own label
    until a recipe relabels it to the speaker's id."""

    conversation_id: str
    speaker: str
    text: str
    start_s: float
    end_s: float


@dataclass(frozen=True)
class Turn:
    """A stretch in which one speaker talks, without word times (RTTM, turn-level CSV);
    `text` is empty when the source has none."""

    conversation_id: str
    speaker: str
    start_s: float
    end_s: float
    text: str = ""


@dataclass(frozen=True)
class Transcript:
    """What one transcript file says about one conversation. `speakers` are its labels in the
    file's order (TextGrid tiers) or sorted (CTM, RTTM and JSON labels)."""

    conversation_id: str
    path: str
    speakers: tuple[str, ...]
    words: tuple[Word, ...] = ()
    turns: tuple[Turn, ...] = ()

    def relabel(self, mapping: Mapping[str, str]) -> Transcript:
        """A copy whose speaker labels are replaced by `mapping` (labels not in it are dropped)."""
        return Transcript(
            self.conversation_id,
            self.path,
            tuple(mapping[s] for s in self.speakers if s in mapping),
            tuple(
                replace(w, speaker=mapping[w.speaker]) for w in self.words if w.speaker in mapping
            ),
            tuple(
                replace(t, speaker=mapping[t.speaker]) for t in self.turns if t.speaker in mapping
            ),
        )


@dataclass(frozen=True)
class ChannelSource:
    """Where one speaker's audio is: channel `channel` of `path`, recorded at `sample_rate_hz`."""

    conversation_id: str
    path: str
    channel: int
    sample_rate_hz: int


@dataclass(frozen=True)
class Speaker:
    """A speaker of a conversation; attributes the corpus does not give are `UNKNOWN`. The id
    must name the same person in every conversation they appear in: the importer pools their
    other conversations into their profile."""

    conversation_id: str
    speaker_id: str
    gender: str = UNKNOWN
    age_band: str = UNKNOWN
    l1_region: str = UNKNOWN


@dataclass(frozen=True)
class Conversation:
    """One dyadic conversation as a recipe found it: channel 0 and 1 of the two-channel audio
    and their speakers, the transcript relabelled to the speakers' ids (None without one), and
    the speech of anyone else present (`others_s`, a multiparty corpus mined as pairs).

    `speech` says where the finder takes each channel's speech from: "words" (inter-pausal units
    of the word times), "turns" (the turns as given) or "vad" (Silero VAD of each channel); empty
    means words if there are any, else turns if there are any, else VAD.
    """

    conversation_id: str
    channels: tuple[ChannelSource, ChannelSource]
    speakers: tuple[Speaker, Speaker]
    transcript: Transcript | None = None
    speech: str = ""
    others_s: tuple[tuple[float, float], ...] = ()

    def __post_init__(self):
        if self.speech and self.speech not in SPEECH_SOURCES:
            raise ValueError(
                f"speech must be one of {SPEECH_SOURCES} or empty, got {self.speech!r}"
            )

    @property
    def speech_source(self) -> str:
        if self.speech:
            return self.speech
        if self.transcript is not None and self.transcript.words:
            return "words"
        if self.transcript is not None and self.transcript.turns:
            return "turns"
        return "vad"

    def channel_of(self, speaker_id: str) -> int | None:
        ids = [s.speaker_id for s in self.speakers]
        return ids.index(speaker_id) if speaker_id in ids else None
