"""The reference agent: fdeval's embedded default model under test.

A small cascaded full-duplex agent that runs in-process on a CPU, in the spirit of the cascade
baselines of the papers: Silero VAD on what it hears, a turn-taking policy read from the system
instruction, espeak-ng for its voice, and its own words reported with their times. It has no
speech recognition, so it cannot understand content: it acts on what a VAD can tell (the user
speaks, pauses, stops, overlaps it) and says generic things. That makes it a real, weak baseline
whose score is whatever the judge finds, and a deterministic fixture for the engine.
Text rule `text_stream = "words"`: one text event per spoken word, timed by espeak-ng.

Policies (chosen by `parse_policy` from the instruction text):
- default (no instruction): takes the turn after a short silence, so it talks into mid-turn
  pauses; yields to any overlap and then resumes its old answer without acknowledging.
- listen: waits for a long silence before taking the turn; never cuts in.
- backchannel: a short "mm-hmm"-type token at mid-turn pauses, otherwise listens.
- interrupt: cuts in at the first clear pause after the user has talked for a while.
- continue: keeps talking through short overlaps; yields only to long ones.
- acknowledge: stops as soon as the user overlaps, acknowledges, then answers afresh.
"""

from __future__ import annotations

import random
import re
import time
from dataclasses import asdict, dataclass, replace
from typing import Any

import numpy as np

from fdeval.audio.tts import EspeakTTS, Synthesis
from fdeval.audio.vad import SileroVAD
from fdeval.errors import ConfigError
from fdeval.models.base import DuplexModel, InProcessSession, ModelEvent

AGENT_VERSION = "1"


@dataclass(frozen=True)
class Policy:
    """Timing rules of the agent (seconds)."""

    kind: str = "default"
    take_turn_silence_s: float = 0.7  # user silence after which it answers
    backchannel: bool = False
    backchannel_pause_s: float = 0.35  # a pause this long mid-turn invites a backchannel
    backchannel_gap_s: float = 4.0  # at most one backchannel per this long
    interrupt: bool = False
    interrupt_pause_s: float = 0.25
    interrupt_after_speech_s: float = 2.5  # user speech in the turn before it will cut in
    overlap_yield_s: float = 0.3  # overlapping user speech this long makes it stop
    acknowledge: bool = False  # after yielding: acknowledge and answer afresh (else resume)
    min_user_speech_s: float = 0.3  # user speech that counts as a turn worth answering


POLICIES: dict[str, Policy] = {
    "default": Policy(),
    "listen": Policy("listen", take_turn_silence_s=1.6, overlap_yield_s=0.6, acknowledge=True),
    "backchannel": Policy("backchannel", take_turn_silence_s=1.6, backchannel=True, overlap_yield_s=0.6, acknowledge=True),
    "interrupt": Policy("interrupt", take_turn_silence_s=1.6, interrupt=True, overlap_yield_s=0.6, acknowledge=True),
    "continue": Policy("continue", take_turn_silence_s=1.0, overlap_yield_s=1.2, acknowledge=True),
    "acknowledge": Policy("acknowledge", take_turn_silence_s=1.0, overlap_yield_s=0.25, acknowledge=True),
}

_RESPONSIVE = re.compile(
    r"while you(?:'re| are) (?:speaking|talking|answering|explaining)|mid-answer|(?:hold|keep|give) (?:up )?the floor"
    r"|user interrupts you|user backchannels"
)
_ACK = re.compile(r"acknowledg|give (?:up )?the floor|adapt|adjust|yield")
_NEGATED = re.compile(r"(?:\bno\b|\bnever\b|\bnot\b|\bdon't\b|\bdo not\b|\bwithout\b)[^.,;:]*")
_INT = re.compile(r"\binterrupt|\bcut in|\bjump in|\bbreak in")
_BC = re.compile(r"backchannel|listener signal|mm-?hmm|uh-huh")
_LISTEN = re.compile(r"listen|silent|quiet")


def parse_policy(instruction: str | None) -> str:
    """Which of the agent's policies an instruction asks for (keyword reading, no model).

    Responsive instructions talk about the agent's own speech being overlapped; among them the
    ones that ask it to give up the floor and acknowledge are `acknowledge`, the rest `continue`.
    For proactive ones, negated clauses ("never cut in", "no listener signals") are removed first,
    then the most specific action still asked for wins: interrupt, backchannel, listen.
    """
    if not instruction or not instruction.strip():
        return "default"
    text = instruction.lower().replace("\u2019", "'")
    if _RESPONSIVE.search(text):
        return "acknowledge" if _ACK.search(text) else "continue"
    asked = _NEGATED.sub(" ", text)
    if _INT.search(asked):
        return "interrupt"
    if _BC.search(asked):
        return "backchannel"
    if _LISTEN.search(text):
        return "listen"
    return "default"


ANSWERS = (
    "Sure, I can help with that. Let me walk you through it one step at a time, starting with the part that matters most, and then we can look at the details together.",
    "Okay, that makes sense. The simplest way to think about it is to break it into a few small pieces, handle the first one today, and leave the rest for later in the week.",
    "Good question. In most cases the answer depends on your situation, so I would start with what you already know, write it down, and then compare a couple of options side by side.",
    "Thanks for telling me. Here is how I would approach it: first get clear on the goal, then pick one small change you can try right away, and check how it feels after a few days.",
)
BACKCHANNELS = ("mm-hmm", "yeah", "okay", "right", "I see")
INTERRUPTS = (
    "Sorry to cut in, but I think something there might not be right. Can we check that first?",
    "Hold on a second, I want to make sure we get that part right before you go on.",
)
ACKS = (
    "Oh, sorry, go ahead. Got it, let me adjust my answer to what you just said.",
    "Okay, thanks for stopping me. Let me change course and focus on that instead.",
)
RESUMES = ("Anyway, as I was saying, ",)


class ReferenceAgent(DuplexModel):
    """In-process cascaded full-duplex agent (VAD + policy + espeak-ng), 16 kHz, 32 ms frames."""

    clock = "lockstep"
    text_stream = "words"

    def __init__(self, name: str = "reference", voice: str = "en-us+f3", rate_wpm: int = 175,
                 sample_rate: int = 16000, frame_s: float = 0.032, vad_threshold: float = 0.5,
                 policy_overrides: dict[str, dict[str, Any]] | None = None, compute_s_per_frame: float = 0.0):
        self.name = name
        if not compute_s_per_frame >= 0:
            raise ConfigError(f"model.compute_s_per_frame: must be >= 0, got {compute_s_per_frame!r}")
        # extra time each frame takes (a model slower than real time, to see the realtime health check)
        self.compute_s_per_frame = float(compute_s_per_frame)
        self.voice, self.rate_wpm = voice, rate_wpm
        self.sample_rate, self.frame_s = sample_rate, frame_s
        self.vad_threshold = vad_threshold
        self.policies = {k: replace(p, **(policy_overrides or {}).get(k, {})) for k, p in POLICIES.items()}
        self._tts = EspeakTTS(voice=voice, rate_wpm=rate_wpm, sample_rate=sample_rate)
        self._vad = SileroVAD(sample_rate=sample_rate)
        self._cache: dict[str, Synthesis] = {}

    def identity(self) -> dict[str, Any]:
        return {
            "name": self.name, "kind": "reference-agent", "version": AGENT_VERSION, "voice": self.voice,
            "rate_wpm": self.rate_wpm, "frame_s": self.frame_s, "vad_threshold": self.vad_threshold,
            "policies": {k: asdict(p) for k, p in self.policies.items()},
            **({"compute_s_per_frame": self.compute_s_per_frame} if self.compute_s_per_frame else {}),
        }

    def synth(self, text: str) -> Synthesis:
        if text not in self._cache:
            self._cache[text] = self._tts.synthesize(text)
        return self._cache[text]

    def session(self, instruction: str | None, seed: int) -> "ReferenceSession":
        return ReferenceSession(self, self.policies[parse_policy(instruction)], seed)


class ReferenceSession(InProcessSession):
    """All streaming state of one conversation with the reference agent."""

    def __init__(self, agent: ReferenceAgent, policy: Policy, seed: int):
        super().__init__()
        self.agent, self.policy = agent, policy
        self.rng = random.Random(seed)
        self.vad = agent._vad.stream(threshold=agent.vad_threshold, min_silence_s=0.1)
        self.frame_n = int(round(agent.frame_s * agent.sample_rate))
        self.t_s = 0.0
        # what it hears
        self.user_speaking = False
        self.user_onset_s = 0.0
        self.user_turn_speech_s = 0.0  # user speech since the agent last took the floor
        # what it says
        self.utt: Synthesis | None = None
        self.utt_kind = ""
        self.cursor = 0
        self.last_backchannel_s = -1e9
        self.cut_in_this_turn = False
        self.yielded_answer: str | None = None  # the answer it stopped, to resume or replace
        self.answers = list(ANSWERS)
        self.rng.shuffle(self.answers)

    # -- hearing ------------------------------------------------------------------------------
    def _hear(self, frame: np.ndarray) -> None:
        for e in self.vad.push(frame):
            if e.kind == "onset":
                self.user_speaking, self.user_onset_s = True, e.t_s
            else:
                self.user_speaking = False
        self.t_s += len(frame) / self.agent.sample_rate
        if self.user_speaking:
            self.user_turn_speech_s += len(frame) / self.agent.sample_rate

    # -- speaking -----------------------------------------------------------------------------
    def _say(self, text: str, kind: str) -> None:
        self.utt, self.utt_kind, self.cursor = self.agent.synth(text), kind, 0
        if kind in ("answer", "ack", "resume"):
            self.user_turn_speech_s = 0.0
            self.cut_in_this_turn = False

    def _emit(self) -> list[ModelEvent]:
        assert self.utt is not None
        sr = self.agent.sample_rate
        a, b = self.cursor, min(self.cursor + self.frame_n, len(self.utt.samples))
        events = [
            ModelEvent("text", text=w.text, offset_s=max(0.0, w.start_s - a / sr), duration_s=w.end_s - w.start_s)
            for w in self.utt.words
            if a <= int(round(w.start_s * sr)) < b
        ]
        events.append(ModelEvent.audio_chunk(self.utt.samples[a:b]))
        self.cursor = b
        if b >= len(self.utt.samples):
            if self.utt_kind in ("answer", "ack", "resume"):
                self.yielded_answer = None
            self.utt = None
        return events

    def _next_answer(self) -> str:
        text = self.answers[0]
        self.answers = self.answers[1:] + self.answers[:1]
        return text

    def step(self, frame: np.ndarray) -> list[ModelEvent]:
        if self.agent.compute_s_per_frame:
            time.sleep(self.agent.compute_s_per_frame)  # blocks the loop, as real compute would
        self._hear(frame)
        p = self.policy
        if self.utt is not None:
            overlap_s = self.t_s - self.user_onset_s if self.user_speaking else 0.0
            long_turn = self.utt_kind in ("answer", "ack", "resume", "interrupt")
            if long_turn and self.user_speaking and overlap_s >= p.overlap_yield_s:
                if self.utt_kind in ("answer", "resume"):
                    self.yielded_answer = self.utt.text
                self.utt = None  # stop at once: nothing of ours is queued anywhere
                self.user_turn_speech_s = overlap_s
                return []
            return self._emit()
        silence_s = 0.0 if self.user_speaking else self.vad.silence_s
        if not self.user_speaking and self.user_turn_speech_s >= p.min_user_speech_s and silence_s >= p.take_turn_silence_s:
            if self.yielded_answer is not None and p.acknowledge:
                self.yielded_answer = None
                self._say(self.rng.choice(ACKS) + " " + self._next_answer(), "ack")
            elif self.yielded_answer is not None:
                rest = self.yielded_answer
                self.yielded_answer = None
                self._say(RESUMES[0] + rest[0].lower() + rest[1:], "resume")
            else:
                self._say(self._next_answer(), "answer")
            return self._emit()
        in_pause = not self.user_speaking and self.user_turn_speech_s > 0
        if p.backchannel and in_pause and silence_s >= p.backchannel_pause_s and self.user_turn_speech_s >= 1.5 \
                and self.t_s - self.last_backchannel_s >= p.backchannel_gap_s:
            self.last_backchannel_s = self.t_s
            self._say(self.rng.choice(BACKCHANNELS), "backchannel")
            return self._emit()
        if p.interrupt and in_pause and not self.cut_in_this_turn and silence_s >= p.interrupt_pause_s \
                and self.user_turn_speech_s >= p.interrupt_after_speech_s:
            self.cut_in_this_turn = True
            self._say(self.rng.choice(INTERRUPTS), "interrupt")
            return self._emit()
        return []
