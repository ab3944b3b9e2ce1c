"""The model interface every adapter implements, and the shared in-process session.

An adapter is small: it says what rate and frame it speaks (`sample_rate`, `frame_s`), which clock
suits it, and opens a `DuplexSession` (an async context manager) in which it takes user frames
(`send`) and hands back what the model produced since the last call (`receive`). Pacing,
resampling, playback, VAD and recording live in the orchestrator, written once for all models.

In-process models implement the synchronous `InProcessSession.step(frame) -> events` instead;
`InProcessSession` turns that into `send` / `receive`, so the same turn manager drives them under
the lockstep clock (as fast as they compute) or the realtime clock (paced at wall time).
"""

from __future__ import annotations

import abc
import importlib
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np

from fdeval.errors import ConfigError

EventKind = Literal["audio", "text", "interrupted"]


@dataclass(frozen=True, eq=False)
class ModelEvent:
    """Something the model produced.

    audio: `audio` is float32 mono at the model's `sample_rate`.
    text: `text` is a piece of the model's own text stream; it is shown when the audio that
      follows it in the same batch starts playing, plus `offset_s`; `duration_s` says how long
      the word is spoken, where the model knows it.
    interrupted: the model (or its server) asks the client to drop audio not yet played.
    `arrival_mono` is the monotonic time the adapter received it (network adapters); when None
    the orchestrator stamps the event when it drains it.
    """

    kind: EventKind
    audio: np.ndarray | None = None
    text: str = ""
    offset_s: float = 0.0
    duration_s: float | None = None
    arrival_mono: float | None = None

    @staticmethod
    def audio_chunk(samples: np.ndarray) -> "ModelEvent":
        return ModelEvent("audio", audio=np.asarray(samples, dtype=np.float32))


# -- shared by the network adapters -------------------------------------------------------
DISTRIBUTIONS = {"sphn": "sphn", "aiohttp": "aiohttp", "socketio": "python-socketio", "google.genai": "google-genai"}
# what a server fdeval did not start records for what it cannot know (checkpoint, decoding)
NOT_STARTED = "unknown: not started by fdeval"


def require_client(model: str, modules: tuple[str, ...], extra: str) -> None:
    """Import an adapter's optional client packages when the model is built, so that a missing
    one stops the run at once with one line (model, packages, install command), not once per case."""
    for mod in modules:
        try:
            importlib.import_module(mod)
        except ImportError as e:
            names = " and ".join(DISTRIBUTIONS.get(m, m) for m in modules)
            raise ConfigError(f"model={model} needs {names}: pip install 'fdeval[{extra}]' "
                              f"(import {mod}: {e})") from None


def server_identity(ident: dict[str, Any], external: tuple[str, int] | None,
                    checkpoint_label: str | None) -> dict[str, Any]:
    """`ident` finished for where the model's server comes from. One fdeval starts: as given, plus
    the user's `model.checkpoint_label` if any. One someone else runs (`external` = host, port):
    its address, and checkpoint and decoding unknown (or the label), never the config's defaults."""
    if external is not None:
        host, port = external
        return {**ident, "server": f"external {host}:{port}", "checkpoint": checkpoint_label or NOT_STARTED,
                "decoding": NOT_STARTED}
    return {**ident, "checkpoint_label": checkpoint_label} if checkpoint_label is not None else ident



class DuplexSession(abc.ABC):
    """One live conversation with a model. Its lifetime is an async context manager."""

    @abc.abstractmethod
    async def send(self, frame: np.ndarray) -> None:
        """Give the model one user frame (float32 mono at the model's rate; silence too)."""

    @abc.abstractmethod
    async def receive(self) -> list[ModelEvent]:
        """Everything the model produced since the previous call (may be empty)."""


class DuplexModel(abc.ABC):
    """A full-duplex model under test. Subclasses set the class attributes and `session`."""

    name: str = "model"
    sample_rate: int = 16000
    frame_s: float = 0.08
    clock: Literal["lockstep", "realtime"] = "realtime"
    # Model silence that completes a turn for the take-turn wait; None = orchestrator default.
    turn_silence_s: float | None = None
    # True when the model answers every input frame with a frame of audio (silence included): the
    # orchestrator then measures how far its audio falls behind real time (session.HealthBounds).
    audio_per_frame: bool = False
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

    def identity(self) -> dict[str, Any]:
        """What identifies the model's behaviour: name, version, weights hash, settings."""
        return {"name": self.name}

    @abc.abstractmethod
    def session(self, instruction: str | None, seed: int) -> AbstractAsyncContextManager[DuplexSession]:
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

    async def send(self, frame: np.ndarray) -> None:
        self._pending.extend(self.step(frame))

    async def receive(self) -> list[ModelEvent]:
        out, self._pending = self._pending, []
        return out

    async def __aenter__(self) -> "InProcessSession":
        return self

    async def __aexit__(self, *exc: object) -> None:
        self._pending.clear()
