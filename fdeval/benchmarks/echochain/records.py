"""EchoChain's part of a case (`TestCase.data`): the conversation's seed and how it is run.

A live case is one conversation: its scenario seed, the voice its user speaks with, the responder
it was assigned to, the planner's first blueprint and the exchange-1 message (its audio is the
case's one scripted turn); the later exchanges are written during the session by the user policy.
A replay case is one flagged exchange of another run, played as scripted audio: the `replay`
block says where it came from and what was said before (the history, given to the model as text).
The record sits under the key `echochain` of a case file and is validated when it is loaded.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar, Mapping

from fdeval.cases.schema import _Ctx, _kind
from fdeval.errors import ConfigError
from fdeval.types import Turn

from .seeds import Seed

MODES = ("live", "replay")
REPLAY_KEYS = {
    "source_run_id": True,
    "source_model_id": True,
    "source_case_id": True,
    "source_session_id": True,
    "exchange": True,
    "history": True,
    "message": True,
    "barge_in": True,
    "barge_in_label": True,
    "delay_s": True,
}


@dataclass(frozen=True)
class EchoChainCase:
    """One conversation (live) or one replayed exchange (replay); see the module doc."""

    case_keys: ClassVar[Mapping[str, bool]] = {"echochain": True}
    turn_keys: ClassVar[Mapping[str, bool]] = {}

    mode: str
    seed: Seed
    voice: str
    responder: str
    max_exchanges: int
    blueprint: str = ""
    replay: Mapping[str, Any] | None = None  # replay: REPLAY_KEYS (history: list of exchange dicts)

    def case_fields(self) -> dict[str, Any]:
        d: dict[str, Any] = {
            "mode": self.mode,
            "seed": self.seed.to_dict(),
            "voice": self.voice,
            "responder": self.responder,
            "max_exchanges": self.max_exchanges,
            "blueprint": self.blueprint,
        }
        if self.replay is not None:
            d["replay"] = dict(self.replay)
        return {"echochain": d}

    def turn_fields(self, index: int) -> dict[str, Any]:
        return {}

    @classmethod
    def read(cls, ctx: _Ctx, d: Mapping[str, Any], turns: tuple[Turn, ...]) -> "EchoChainCase":
        e = d["echochain"]
        if not isinstance(e, dict):
            raise ctx.fail("echochain", f"expected an object, got {_kind(e)}")
        known = {"mode", "seed", "voice", "responder", "max_exchanges", "blueprint", "replay"}
        for k in e:
            if k not in known:
                raise ctx.fail(f"echochain.{k}", f"unknown key; valid: {sorted(known)}")
        for k in ("mode", "seed", "voice", "responder", "max_exchanges"):
            if k not in e:
                raise ctx.fail(f"echochain.{k}", "missing")
        if e["mode"] not in MODES:
            raise ctx.fail("echochain.mode", f"expected one of {list(MODES)}, got {e['mode']!r}")
        try:
            seed = Seed.from_dict(e["seed"], f"{ctx.path}")
        except ConfigError as err:
            raise ctx.fail("echochain.seed", str(err)) from None
        n = e["max_exchanges"]
        if isinstance(n, bool) or not isinstance(n, int) or n < 1:
            raise ctx.fail("echochain.max_exchanges", f"expected a positive integer, got {n!r}")
        for k in ("voice", "responder", "blueprint"):
            if k in e and not isinstance(e[k], str):
                raise ctx.fail(f"echochain.{k}", f"expected a string, got {_kind(e[k])}")
        replay = e.get("replay")
        if e["mode"] == "replay":
            if not isinstance(replay, dict):
                raise ctx.fail("echochain.replay", "a replay case needs its replay block")
            for k in REPLAY_KEYS:
                if k not in replay:
                    raise ctx.fail(f"echochain.replay.{k}", "missing")
            if len(turns) != 2 or turns[1].turn_type != "barge-in":
                raise ctx.fail("turns", "a replay case has two turns: the message and its barge-in")
        elif replay is not None:
            raise ctx.fail("echochain.replay", "only replay cases have a replay block")
        return cls(e["mode"], seed, e["voice"], e["responder"], n, e.get("blueprint", ""), replay)
