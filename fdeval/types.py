"""Frozen records shared by every stage of fdeval.

Times are seconds (float) and carry a `_s` suffix; sample counts carry `n_`. Every record that
belongs to one test case carries its `case_id`, so a record can be read, logged or joined on
its own. These are plain data: loading, validation and (de)serialisation live next to the step
that owns the file (``fdeval.cases`` for test cases, ``fdeval.transcript`` for transcripts). A
benchmark's own records (Instruct-FD's instructions, triggers and verdicts) live in its package and
ride on a case as `TestCase.data`.
"""

from __future__ import annotations

import copy as _copy
from dataclasses import dataclass
from typing import Any, Literal

from omegaconf import DictConfig, ListConfig, OmegaConf

Seconds = float

Speaker = Literal["user", "model"]
TurnType = Literal["take-turn", "barge-in"]
BargeInHandling = Literal["hold", "yield"]
BargeInSubtype = Literal["interrupt", "backchannel"]
WordSource = Literal["tts", "model_text", "asr"]


def plain(node: Any, *, copy: bool = False) -> Any:
    """A config value as plain data: Hydra hands nested values to a constructor as OmegaConf
    containers (a new plain container, interpolations resolved); anything else is returned as it is
    (it may hold objects that cannot be copied, e.g. a test's SSL context), or, with `copy`, deep-copied
    so that the caller may change it without touching the value it was given."""
    if isinstance(node, (DictConfig, ListConfig)):
        return OmegaConf.to_container(node, resolve=True)
    return _copy.deepcopy(node) if copy else node


# A take-turn waits at most this long for the model to go quiet (Instruct-FD A.7: 60 s), counted
# from the end of the previous user turn; the default of every generated case.
DEFAULT_TURN_TIMEOUT_S = 60.0


@dataclass(frozen=True)
class WordTiming:
    """One word of a synthesized user turn, relative to the start of that turn's audio."""

    text: str
    start_s: Seconds
    end_s: Seconds


@dataclass(frozen=True)
class Turn:
    """One scripted user turn of a test case: what the turn manager needs to play it."""

    case_id: str
    index: int
    label: str
    turn_type: TurnType
    audio_path: str  # relative to the dataset root; never escapes it
    text: str
    words: tuple[WordTiming, ...]
    duration_s: Seconds
    timeout_s: Seconds = DEFAULT_TURN_TIMEOUT_S
    barge_in_after_s: Seconds | None = None  # barge-in only: delay after model speech onset
    barge_in_handling: BargeInHandling | None = None  # barge-in only
    subtype: BargeInSubtype | None = None  # barge-in only


@dataclass(frozen=True)
class TestCase:
    """One test case: the system instruction the model gets (or none) and an ordered turn manifest.

    `data` is the benchmark's own frozen record (Instruct-FD: the instruction's name, the
    reference, the instructions it is judged against, the trigger points), None when it has none.
    A record that a case file holds implements :class:`fdeval.cases.schema.CaseRecord`.
    """

    __test__ = False  # not a pytest test class

    case_id: str
    conversation_id: str
    benchmark: str
    scenario: str
    system_instruction: str | None
    turns: tuple[Turn, ...]
    seed: int = 0
    version: str = "1"
    data: Any = None


@dataclass(frozen=True)
class Word:
    """One word of a session transcript, on the session clock."""

    case_id: str
    speaker: Speaker
    text: str
    start_s: Seconds
    end_s: Seconds
    source: WordSource
    turn: int | None = None  # user words: index of the scripted turn they belong to


@dataclass(frozen=True)
class PlayedTurn:
    """A user turn as it was actually streamed in one session (session clock).

    `end_s` is where streaming stopped: the end of the audio, or earlier when a yield turn
    ceded the floor (`cut_short`). `triggers_s` are the points of the turn its benchmark marked
    (Instruct-FD: where the reference model cuts in), moved onto the session clock.
    """

    case_id: str
    index: int
    label: str
    turn_type: TurnType
    subtype: BargeInSubtype | None
    start_s: Seconds
    end_s: Seconds
    scheduled_s: Seconds
    cut_short: bool
    n_words_total: int
    n_words_played: int
    triggers_s: tuple[tuple[str, Seconds], ...] = ()  # (kind, session time)


@dataclass(frozen=True)
class Transcript:
    """Both channels' words on one session clock, plus the user turns as played."""

    case_id: str
    words: tuple[Word, ...]
    user_turns: tuple[PlayedTurn, ...]
    duration_s: Seconds
