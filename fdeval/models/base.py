"""The model interface every adapter implements (the contract), and the shared in-process session.

An adapter is small: it says what rate and frame it speaks (`sample_rate`, `frame_s`), which clock
suits it, and opens a `DuplexSession` (an async context manager) in which it takes user audio
(`send`, cut into the model's frames) and hands back what the model produced since the last call
(`receive`). What the run asks of every model (`concurrency`, `case_retries`, `set_run_dir`,
`close`) is declared on `DuplexModel` with its default; a session its infrastructure lost raises
`ModelUnavailable`, the one error the run retries. Pacing, resampling, playback, VAD and recording
live in the orchestrator, written once for all models; what network adapters share is in
`fdeval.models.network`. `optional_import` is how an adapter imports a heavy optional package.

In-process models implement the synchronous `InProcessSession.step(frame) -> events` instead;
`InProcessSession` turns that into `send` / `receive`, so the same turn manager drives them under
the lockstep clock (as fast as they compute) or the realtime clock (paced at wall time).
"""

from __future__ import annotations

import abc
import importlib
import importlib.util
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any, Literal, Sequence

import numpy as np

from fdeval.errors import ConfigError

EventKind = Literal["audio", "text", "interrupted", "vendor"]


@dataclass(frozen=True, eq=False)
class ModelEvent:
    """Something the model produced.

    audio: `audio` is float32 mono at the model's `sample_rate`.
    text: `text` is a piece of the model's own text stream; it is shown when the audio that
      follows it in the same batch starts playing, plus `offset_s`; `duration_s` says how long
      the word is spoken, where the model knows it.
    interrupted: the model (or its server) asks the client to drop audio not yet played; the
      orchestrator then tells the session what of each output item was played
      (`DuplexSession.flushed`).
    vendor: something the model's service said that the session log keeps (`text` names it,
      `detail` gives its figures): a hosted API's turn-detection events, response ids and states,
      truncations. Logged in the events table as `vendor:<text>` at its arrival; nothing else.
    `item` names the model's output item an audio chunk belongs to (a hosted API's item id; "" for
    models without items): the play record counts what was played per item.
    `arrival_mono` is the monotonic time the adapter received it (network adapters); when None
    the orchestrator stamps the event when it drains it.
    """

    kind: EventKind
    audio: np.ndarray | None = None
    text: str = ""
    offset_s: float = 0.0
    duration_s: float | None = None
    arrival_mono: float | None = None
    item: str = ""
    detail: str = ""

    @staticmethod
    def audio_chunk(samples: np.ndarray) -> "ModelEvent":
        return ModelEvent("audio", audio=np.asarray(samples, dtype=np.float32))


# -- optional client packages --------------------------------------------------------------
# pip distribution of an importable module, where the names differ
DISTRIBUTIONS = {
    "socketio": "python-socketio",
    "google.genai": "google-genai",
    "websockets.exceptions": "websockets",
}
# what a server fdeval did not start records for what it cannot know (checkpoint, decoding)
NOT_STARTED = "unknown: not started by fdeval"


def pip_extra(extra: str) -> str:
    """The install command of one of fdeval's extras."""
    return f"pip install 'fdeval[{extra}]'"


def optional_import(
    module: str, install: str, user: str, needs: Sequence[str] = (), *, find_only: bool = False
) -> ModuleType | None:
    """`import module` (a heavy or optional dependency), or one line naming the install command.

    The error is a ConfigError (exit code 2, no traceback): "<user> needs <needs>: <install>
    (import <module>: <reason>)", `needs` being every optional module `user` wants (default: this
    one), by its pip name. `install` is the exact command, e.g. ``pip_extra("moshi-client")``.
    `find_only`: check that the module can be found without importing it (for a module whose
    import itself is slow, e.g. torch, when the model is built); returns None then.
    """
    try:
        if find_only:
            if importlib.util.find_spec(module) is None:
                raise ImportError(f"No module named {module!r}")
            return None
        return importlib.import_module(module)
    except (
        ImportError,
        ValueError,
    ) as e:  # ValueError: find_spec of a module set to None in sys.modules
        names = " and ".join(DISTRIBUTIONS.get(m, m) for m in (needs or (module,)))
        raise ConfigError(f"{user} needs {names}: {install} (import {module}: {e})") from None


def server_identity(
    ident: dict[str, Any], external: tuple[str, int] | None, checkpoint_label: str | None
) -> dict[str, Any]:
    """`ident` finished for where the model's server comes from. One fdeval starts: as given, plus
    the user's `model.checkpoint_label` if any. One someone else runs (`external` = host, port):
    its address, and checkpoint and decoding unknown (or the label), never the config's defaults."""
    if external is not None:
        host, port = external
        return {
            **ident,
            "server": f"external {host}:{port}",
            "checkpoint": checkpoint_label or NOT_STARTED,
            "decoding": NOT_STARTED,
        }
    return (
        {**ident, "checkpoint_label": checkpoint_label} if checkpoint_label is not None else ident
    )


@dataclass(frozen=True)
class PlayedFlush:
    """A playback flush as the session is told of it: the session time of the flush and, for
    each output item with audio on the model channel, the seconds of it played before it."""

    t_s: float
    played_s: dict[str, float]
    n_dropped: int


class ModelUnavailable(Exception):
    """The model's infrastructure lost a session (its server died, dropped or refused it): not
    the model's behaviour. The run retries the case up to `DuplexModel.case_retries` times and
    records a case that still fails as an infrastructure error, never as a verdict. Any other
    exception from a session is an infrastructure error that is not retried."""


class DuplexSession(abc.ABC):
    """One live conversation with a model. Its lifetime is an async context manager.

    `send` takes the user's audio cut in any pieces: the session hands the model whole frames of
    `frame_n` samples (`frame_s` at the model's rate) and keeps a partial frame for the next call,
    so how the audio is cut never changes what the model hears (the orchestrator sends whole
    frames, which pass straight through). A session with `frame_n = 0` takes each piece as a frame.
    """

    frame_n: int = 0
    _rest: np.ndarray = np.zeros(
        0, np.float32
    )  # the partial frame held back (replaced, never mutated)

    async def send(self, audio: np.ndarray) -> None:
        """Give the model user audio (float32 mono at the model's rate; silence too)."""
        n = self.frame_n
        if n <= 0 or (len(audio) == n and not len(self._rest)):
            await self.send_frame(np.asarray(audio, dtype=np.float32))
            return
        buf = np.concatenate([self._rest, np.asarray(audio, dtype=np.float32).reshape(-1)])
        whole = len(buf) // n * n
        self._rest = buf[whole:]
        for i in range(0, whole, n):
            await self.send_frame(buf[i : i + n])

    @abc.abstractmethod
    async def send_frame(self, frame: np.ndarray) -> None:
        """Give the model one frame of `frame_n` samples."""

    @abc.abstractmethod
    async def receive(self) -> list[ModelEvent]:
        """Everything the model produced since the previous call (may be empty)."""

    async def flushed(self, flush: "PlayedFlush") -> None:
        """Called after the orchestrator dropped this session's queued audio on its `interrupted`
        event, before the next frame is sent: `flush` says when, and how much of each output item
        (`ModelEvent.item`) had been played by then, from the play record (never wall time). A
        hosted API whose server must be told what the user heard (OpenAI's truncate) sends it
        here. Nothing by default."""

    def report(self) -> dict[str, Any]:
        """What the session reports of itself once it ended, kept in the session log's attrs as
        `model_report` (JSON): a hosted API's usage and its cost (`cost_usd`), events dropped.
        Empty by default."""
        return {}

    def hear_user_words(self, words: list[tuple[str, float]]) -> None:
        """Oracle text, for models that declare `oracle_user_text`: the user's words (text, session
        time of the word's start) whose audio starts in the frame about to be sent. Called before
        that frame's `send`; nothing by default."""


class DuplexModel(abc.ABC):
    """A full-duplex model under test. Subclasses set the class attributes and `session`.

    What the run asks of every model is declared here with its default, so the engine reads it
    as it is (no probing): `concurrency`, `case_retries`, `set_run_dir`, `close`, and, for the
    orchestrator, `sample_rate`, `frame_s`, `clock`, `turn_silence_s`, `audio_per_frame` and
    `text_stream`. A session that the model's infrastructure lost raises `ModelUnavailable`.
    """

    name: str = "model"
    sample_rate: int = 16000
    frame_s: float = 0.08
    clock: Literal["lockstep", "realtime"] = "realtime"
    turn_silence_s: float | None = None
    """Model silence that completes a turn for the take-turn wait; None = orchestrator default."""
    audio_per_frame: bool = False
    """True when the model answers every input frame with a frame of audio (silence included):
    the orchestrator then measures how far its audio falls behind real time (session.HealthBounds)."""
    text_stream: Literal["words", "pieces"] = "words"
    """How the text pieces of this model's `ModelEvent("text")` become transcript words (recorded
    in the session log as `text_stream`; docs/judging.md, "Model words").

    "words": each piece holds whole words separated by whitespace; every whitespace-separated
      token of a piece is one word, timed as its piece.
    "pieces": pieces are sub-word fragments of one running string (SentencePiece / BPE pieces,
      streamed transcription deltas): the pieces are concatenated and split on whitespace, so a
      piece without leading whitespace continues the previous word. A word's start is its first
      piece's play time and its end its last piece's end; a flush, a dropped piece or a pause in
      the model's audio also ends a word.
    """
    concurrency: int = 1
    """Sessions the model holds at once (server instances, rows of a batch): the run keeps this
    many cases in flight, each in its own session."""
    env_keys: tuple[str, ...] = ()
    """The credential variables its sessions read from the environment (a hosted API's key): the
    only secrets a realtime client process that holds its sessions is given."""
    case_retries: int = 0
    """How often the run retries a case whose session raised `ModelUnavailable`."""
    max_session_s: float | None = None
    """The longest session the model's service allows (a hosted stream that closes after a fixed
    time); None: no limit. A run whose cases could last longer is refused before any session."""
    oracle_user_text: bool = False
    """True for a model that is given the user's words as they are played (oracle text, no ASR:
    `DuplexSession.hear_user_words`). Only reference models that stand in for speech
    understanding declare it; the session log records it (`oracle_user_text`)."""

    def set_run_dir(self, path: Path) -> None:
        """Where the run writes (called before the first session): servers started in the job
        keep their logs under it. Nothing by default."""

    def identity(self) -> dict[str, Any]:
        """What identifies the model's behaviour: name, version, weights hash, settings."""
        return {"name": self.name}

    def share(self, index: int, count: int) -> None:
        """Hold only this client process's share of the sessions: the run spreads a realtime run's
        sessions over `count` processes, this one being `index` (called before the first session);
        `concurrency` is then this process's share. A model that cannot be split says so."""
        raise ConfigError(
            f"model {self.name}: its sessions cannot be spread over client processes; "
            "set orchestrator.client_processes=1"
        )

    @abc.abstractmethod
    def session(
        self, instruction: str | None, seed: int
    ) -> AbstractAsyncContextManager[DuplexSession]:
        """Open a session conditioned on `instruction` (None = un-instructed)."""

    def close(self) -> None:
        """Release whatever the model holds (servers, weights). Safe to call twice."""


@dataclass
class InProcessSession(DuplexSession):
    """A session computed in this process: `step` maps one input frame to the events it causes.

    `send` runs `step` at once; `receive` drains what it produced. Subclasses hold all of the
    session's streaming state, so a session is one object created on entry and dropped on exit.
    """

    _pending: list[ModelEvent] = field(default_factory=list, init=False, repr=False)

    @abc.abstractmethod
    def step(self, frame: np.ndarray) -> list[ModelEvent]:
        """Consume one frame of user audio, return what the model emits for it."""

    async def send_frame(self, frame: np.ndarray) -> None:
        self._pending.extend(self.step(frame))

    async def receive(self) -> list[ModelEvent]:
        out, self._pending = self._pending, []
        return out

    async def __aenter__(self) -> "InProcessSession":
        return self

    async def __aexit__(self, *exc: object) -> None:
        self._pending.clear()
