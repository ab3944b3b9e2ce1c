"""EchoChain's live loop as the user policy of a session (§4.1-4.3).

Exchange 1 is the case's scripted message (written and synthesized at generate). Each time the
assistant has answered and gone quiet, the policy:

1. cuts the exchange that just ended out of what the user heard (`segment.py`), a barge-in that
   came after the answer had ended marked late (not an interruption);
2. when it was interrupted, asks the in-loop classifier (k votes); a flagged conversation stops
   here (it goes to control, replay and review); a classifier error is recorded, not a verdict;
3. stops after `max_exchanges`;
4. else has the planner update its blueprint, the simulator write the next message and, from
   exchange 2 on, its barge-in (written now, before the reply to that message is heard), and
   synthesizes both with the conversation's one voice, so no synthesis delay shifts the timing.

The message plays as a take-turn; the barge-in is injected `barge_in_after_s` after the assistant's
speech onset and streamed whole (`hold`). Everything it wrote and decided is kept with the session
(`record()` -> the log's `user_policy_record`).
"""

from __future__ import annotations

import asyncio
from typing import Any, Sequence

import numpy as np

from fdeval.audio.resample import resample
from fdeval.orchestrator.policy import Conversation, UserPolicy, UserTurn
from fdeval.types import TestCase, Turn, WordTiming

from .classifier import Exchange
from .dialogue import Blueprint, UserMessage
from .segment import barge_in_label, exchanges, message_label, spans


class EchoChainUser(UserPolicy):
    name = "echochain"

    def __init__(
        self, case: TestCase, audio: Sequence[np.ndarray], bench: Any, tts: Any, sample_rate: int
    ):
        self.case, self.rec, self.bench, self.tts, self.sr = (
            case,
            case.data,
            bench,
            tts,
            int(sample_rate),
        )
        self.first = UserTurn(case.turns[0], audio[0])
        self.blueprint = Blueprint(case.case_id, 1, self.rec.blueprint)
        first = case.turns[0]
        self.said: dict[int, dict[str, Any]] = {
            1: {
                "message": first.text,
                "barge_in": None,
                "barge_in_label": None,
                "message_words": [[w.text, w.start_s, w.end_s] for w in first.words],
            }
        }
        self.done: list[Exchange] = []
        self.verdicts: list[dict] = []
        self.blueprints = [{"version": 1, "text": self.rec.blueprint}]
        self.stop_reason = ""

    async def next_turns(self, conversation: Conversation) -> Sequence[UserTurn]:
        if not conversation.user:
            return (self.first,)
        seed, cid = self.rec.seed, self.case.case_id
        rows = [
            {"label": u.label, "start_s": u.start_s, "end_s": u.end_s} for u in conversation.user
        ]
        pieces = [(m.play_s, m.text) for m in conversation.model]
        exs = exchanges(
            cid,
            spans(rows, conversation.now_s, conversation.model_speech, conversation.silence_s),
            self.said,
            pieces,
            conversation.text_stream,
        )
        k = len(self.done) + 1
        ex = exs[-1]
        self.done.append(ex)
        if ex.interrupted:
            v = await asyncio.to_thread(
                self.bench.role("classifier").classify, seed, tuple(self.done[:-1]), ex, cid
            )
            self.verdicts.append(v.to_dict())
            if v.status == "ok" and v.flagged:
                self.stop_reason = "flagged"
                return ()
        if k >= self.rec.max_exchanges:
            self.stop_reason = "max_exchanges"
            return ()
        history = tuple(self.done)
        self.blueprint = await asyncio.to_thread(
            self.bench.role("planner").plan, seed, history, self.blueprint, cid
        )
        self.blueprints.append({"version": self.blueprint.version, "text": self.blueprint.text})
        msg: UserMessage = await asyncio.to_thread(
            self.bench.role("simulator").next_message, seed, self.blueprint, history, k + 1, cid
        )
        turns = await asyncio.to_thread(self._speak, msg, conversation.next_index)
        self.said[k + 1] = {
            "message": msg.text,
            "barge_in": msg.barge_in,
            "barge_in_label": msg.barge_in_label,
            **{
                f"{'message' if u.turn.turn_type == 'take-turn' else 'barge_in'}_words": [
                    [w.text, w.start_s, w.end_s] for w in u.turn.words
                ]
                for u in turns
            },
        }
        return turns

    def _speak(self, msg: UserMessage, index: int) -> tuple[UserTurn, ...]:
        """Both of the exchange's utterances, synthesized before it starts (§4.2)."""
        cid, k, b = self.case.case_id, msg.exchange, self.bench
        out = []
        for text, label, kind in (
            (msg.text, message_label(k), "take-turn"),
            (msg.barge_in, barge_in_label(k), "barge-in"),
        ):
            if text is None:
                continue
            syn = self.tts.synthesize(text)
            samples = (
                syn.samples
                if syn.sample_rate == self.sr
                else resample(syn.samples, syn.sample_rate, self.sr)
            )
            words = tuple(WordTiming(w.text, w.start_s, w.end_s) for w in syn.words)
            barge = kind == "barge-in"
            turn = Turn(
                cid,
                index + len(out),
                label,
                kind,
                "",
                syn.text,
                words,
                syn.duration_s,
                b.turn_timeout_s,
                barge_in_after_s=b.barge_in_after_s if barge else None,
                barge_in_handling="hold" if barge else None,
                subtype="interrupt" if barge else None,
            )
            out.append(UserTurn(turn, samples))
        return tuple(out)

    def record(self) -> dict:
        return {
            "case_id": self.case.case_id,
            "seed_id": self.rec.seed.seed_id,
            "voice": self.rec.voice,
            "responder": self.rec.responder,
            "said": {str(k): v for k, v in sorted(self.said.items())},
            "blueprints": self.blueprints,
            "loop_verdicts": self.verdicts,
            "stop_reason": self.stop_reason or "ended",
            "exchanges_done": len(self.done),
            "roles": {
                r: self.bench.role(r).identity() for r in ("planner", "simulator", "classifier")
            },
        }
