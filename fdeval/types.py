"""Frozen records shared by every stage of fdeval.

Times are seconds (float) and carry a `_s` suffix; sample counts carry `n_`. Every record that
belongs to one test case carries its `case_id`, so a record can be read, logged or joined on
its own. These are plain data: loading, validation and (de)serialisation live next to the stage
that owns the file (``fdeval.cases`` for test cases, ``fdeval.transcript`` for transcripts,
``fdeval.benchmarks.instructfd.judges`` for verdicts).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

Seconds = float

Speaker = Literal["user", "model"]
TurnType = Literal["take-turn", "barge-in"]
BargeInHandling = Literal["hold", "yield"]
BargeInSubtype = Literal["interrupt", "backchannel"]
# The five Instruct-FD instructions, plus "none" for the un-instructed baseline.
Policy = Literal["listen", "backchannel", "interrupt", "continue", "acknowledge", "none"]
POLICIES: tuple[str, ...] = ("backchannel", "listen", "interrupt", "continue", "acknowledge")
WordSource = Literal["tts", "model_text", "asr"]
VerdictLabel = Literal["adhere", "not_adhere", "error"]


@dataclass(frozen=True)
class WordTiming:
    """One word of a synthesized user turn, relative to the start of that turn's audio."""

    text: str
    start_s: Seconds
    end_s: Seconds


@dataclass(frozen=True)
class Trigger:
    """A moment inside a user turn where the reference expects a model action.

    `kind` is what the reference model does there ("backchannel" or "interrupt"), `at_s` is the
    cut-in point relative to the start of the turn audio (the end of the word before the inline
    marker), `phrase` is what the reference model says, `word_index` the number of turn words
    spoken before the cut-in point.
    """

    kind: Literal["backchannel", "interrupt"]
    at_s: Seconds
    word_index: int
    phrase: str


@dataclass(frozen=True)
class Turn:
    """One scripted user turn of a test case (superset of Instruct-FD's turn manifest)."""

    case_id: str
    index: int
    label: str
    turn_type: TurnType
    audio_path: str  # relative to the dataset root; never escapes it
    text: str
    words: tuple[WordTiming, ...]
    duration_s: Seconds
    timeout_s: Seconds = 60.0
    barge_in_after_s: Seconds | None = None  # barge-in only: delay after model speech onset
    barge_in_handling: BargeInHandling | None = None  # barge-in only
    subtype: BargeInSubtype | None = None  # barge-in only
    triggers: tuple[Trigger, ...] = ()


@dataclass(frozen=True)
class ReferenceLine:
    """One line of the expected turn-taking transcript.

    `tag` marks overlap behaviour: "" for a normal turn, "backchannel" / "interrupt" for a
    scripted cut-in (by either speaker), "take-turn" for the model's turn after the user.
    """

    speaker: Speaker
    text: str
    tag: str = ""


@dataclass(frozen=True)
class TestCase:
    """One Instruct-FD style test case: an instruction (or none) and an ordered turn manifest."""

    __test__ = False  # not a pytest test class

    case_id: str
    conversation_id: str
    benchmark: str
    scenario: str
    policy_name: Policy
    system_instruction: str | None
    turns: tuple[Turn, ...]
    reference: tuple[ReferenceLine, ...]
    # Instructions this case is judged against: (policy_name,) for an instructed case; for an
    # un-instructed baseline, every policy its conversation carries (delta-IAS pairs).
    judge_policies: tuple[str, ...]
    # Instruction text per judged policy (the baseline is judged against its siblings' text).
    judge_instructions: dict[str, str] = field(default_factory=dict, compare=False, hash=False)
    seed: int = 0
    version: str = "1"


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
    ceded the floor (`cut_short`). Triggers are moved onto the session clock.
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


@dataclass(frozen=True)
class Verdict:
    """A judge's decision on one (case, instruction) pair. An error is never a failure."""

    case_id: str
    policy: str
    verdict: VerdictLabel
    reasoning: str
    judge: str  # judge id, e.g. "rules" or "llm:<model>"
    judge_version: str
    prompt_hash: str
    checks: dict[str, bool] = field(default_factory=dict, compare=False, hash=False)
