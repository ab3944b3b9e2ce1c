"""Where the user's next audio comes from: the user policy of a session.

The turn manager (turns.py) decides *when* a user turn plays; a `UserPolicy` decides *what* the
user says. The session asks it once before the session starts (the first turns) and again each
time the turn manager has no queued turn left and its closing wait ends (the model answered and
was then silent `silence_s`, the last turn's timeout passed, or the fixed tail ended). Its answer
is the next user turns; an empty answer ends the session with that wait's reason.

- `ScriptedPolicy`: today's scripted case, every turn known from the start; asked again, it has
  nothing more.
- An interactive policy writes the next turns from the `Conversation` so far (what the user
  played, what the model said). A batch may pair a take-turn with the barge-in that follows it:
  the take-turn is due where the closing wait ended, the barge-in is timed from the model's
  speech onset after it, as any scripted barge-in.

Under the lockstep clock the session awaits the policy before the next frame (the session clock
stands still while it thinks: deterministic). Under the realtime clock it runs as a task while
silence frames keep flowing, so it must not block the event loop (do heavy work with
`asyncio.to_thread`); its turn starts on the first frame after it is ready, and the log keeps
when it was due (`scheduled_s`), when it started and how long the policy took (`user_policy`
events).
"""

from __future__ import annotations

import abc
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from fdeval.orchestrator.config import TurnConfig
from fdeval.orchestrator.turns import model_speaking_at
from fdeval.types import Turn

DEFAULT_SILENCE_S = TurnConfig.silence_s  # one source: the turn manager's default


@dataclass(frozen=True, eq=False)  # eq=False: field-wise == on an ndarray has no single truth value
class UserTurn:
    """One user turn and its audio: float32 mono at the session rate. `turn.index` continues the
    session's numbering (`Conversation.next_index`)."""

    turn: Turn
    audio: np.ndarray


@dataclass(frozen=True)
class PlayedUserTurn:
    """A user turn as played so far (session clock). `cut_short`: a yield barge-in stopped early."""

    index: int
    label: str
    turn_type: str
    text: str
    start_s: float
    end_s: float
    cut_short: bool


@dataclass(frozen=True)
class ModelText:
    """One piece of the model's text stream whose audio has started playing (never a dropped one)."""

    text: str
    play_s: float
    duration_s: float


@dataclass(frozen=True)
class Conversation:
    """What the user has heard and said when the policy is asked (`now_s`, session clock)."""

    case_id: str
    now_s: float
    user: tuple[PlayedUserTurn, ...]
    model: tuple[ModelText, ...]
    text_stream: str = "words"  # how the model's pieces join (docs/judging.md): words | pieces
    # the played model channel's speech (VAD segments, start_s, end_s; one still open ends at
    # now_s) and the silence that ends its answer (orchestrator.silence_s): see model_speaking_at
    model_speech: tuple[tuple[float, float], ...] = ()
    silence_s: float = DEFAULT_SILENCE_S

    def model_speaking_at(self, t_s: float) -> bool:
        """Whether the model's answer was under way at `t_s` (:func:`turns.model_speaking_at`)."""
        return model_speaking_at(self.model_speech, t_s, self.silence_s)

    @property
    def next_index(self) -> int:
        return len(self.user)

    def model_text_since(self, t_s: float) -> str:
        """The model's text played from `t_s` on, pieces joined by the model's text rule."""
        pieces = [m.text for m in self.model if m.play_s >= t_s - 1e-9]
        if self.text_stream == "pieces":
            return "".join(pieces).strip()
        return " ".join(p.strip() for p in pieces if p.strip())


class UserPolicy(abc.ABC):
    """The user side of a session (see the module doc)."""

    name: str = "policy"

    @abc.abstractmethod
    async def next_turns(self, conversation: Conversation) -> Sequence[UserTurn]:
        """The next user turns (empty: the user is done)."""

    def record(self) -> dict | None:
        """What the policy wants kept with the session (its plans, messages, verdicts), written
        into the session log as the `user_policy_record` attribute after the session ends, so it
        is exactly as current as the recording; None keeps nothing."""
        return None


class ScriptedPolicy(UserPolicy):
    """A scripted case: all its turns at the first question, nothing after."""

    name = "scripted"

    def __init__(self, turns: Sequence[Turn], audio: Sequence[np.ndarray]):
        if len(turns) != len(audio):
            raise ValueError("one audio array per turn")
        self._turns = [UserTurn(t, x) for t, x in zip(turns, audio)]
        self._given = False

    async def next_turns(self, conversation: Conversation) -> Sequence[UserTurn]:
        if self._given:
            return ()
        self._given = True
        return tuple(self._turns)
