"""Instruct-FD's own records: the instructions, a case's Instruct-FD part, and verdicts.

A case's Instruct-FD part (`InstructFDCase`, carried as `TestCase.data`) is the instruction's name,
the expected turn-taking reference, the instructions the case is judged against and the points
inside each user turn where the reference model cuts in (`Trigger`). Its keys sit beside the
generic ones in a case file (``docs/cases.md``): `InstructFDCase.read` validates them with the
field checks of :mod:`fdeval.cases.schema`, naming file, case and field.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal, Mapping

from fdeval.cases.schema import TIME_EPS_S, _Ctx, _check_keys, _enum, _int, _kind, _list, _num, _str
from fdeval.types import Seconds, Speaker, Turn

# The five Instruct-FD instructions, plus "none" for the un-instructed baseline.
Policy = Literal["listen", "backchannel", "interrupt", "continue", "acknowledge", "none"]
POLICIES: tuple[str, ...] = ("backchannel", "listen", "interrupt", "continue", "acknowledge")
NO_POLICY = "none"
VerdictLabel = Literal["adhere", "not_adhere", "error"]

TRIGGER_KINDS = ("backchannel", "interrupt")
SPEAKERS = ("user", "model")
REFERENCE_TAGS = ("", "backchannel", "interrupt", "take-turn")
TRIGGER_KEYS: dict[str, bool] = {"kind": True, "at_s": True, "word_index": True, "phrase": True}
REFERENCE_KEYS: dict[str, bool] = {"speaker": True, "text": True, "tag": False}


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
class ReferenceLine:
    """One line of the expected turn-taking transcript.

    `tag` marks overlap behaviour: "" for a normal turn, "backchannel" / "interrupt" for a
    scripted cut-in (by either speaker), "take-turn" for the model's turn after the user.
    """

    speaker: Speaker
    text: str
    tag: str = ""


@dataclass(frozen=True)
class InstructFDCase:
    """The Instruct-FD part of a test case (`TestCase.data`)."""

    policy_name: Policy
    reference: tuple[ReferenceLine, ...]
    # Instructions this case is judged against: (policy_name,) for an instructed case; for an
    # un-instructed baseline, every policy its conversation carries (delta-IAS pairs).
    judge_policies: tuple[str, ...]
    # Instruction text per judged policy (the baseline is judged against its siblings' text).
    judge_instructions: dict[str, str] = field(default_factory=dict, compare=False, hash=False)
    # The triggers of each turn, by turn index (a turn past the end has none).
    triggers: tuple[tuple[Trigger, ...], ...] = ()
    # The synthesizer and voice that spoke the user turns ({"voice": ..., **tts identity}); None
    # for cases that do not say (a user's own case files). Compared: new voice, new audio.
    voice: dict[str, Any] | None = field(default=None, hash=False)

    case_keys: ClassVar[Mapping[str, bool]] = {
        "policy_name": True,
        "judge_policies": True,
        "judge_instructions": False,
        "reference": True,
        "voice": False,
    }
    turn_keys: ClassVar[Mapping[str, bool]] = {"triggers": False}

    def turn_triggers(self, index: int) -> tuple[Trigger, ...]:
        return self.triggers[index] if index < len(self.triggers) else ()

    # -- the case file form (fdeval.cases.schema.CaseRecord) -----------------------------------
    def case_fields(self) -> dict[str, Any]:
        out = {
            "policy_name": self.policy_name,
            "judge_policies": list(self.judge_policies),
            "judge_instructions": dict(self.judge_instructions),
            "reference": [
                {"speaker": r.speaker, "text": r.text, "tag": r.tag} for r in self.reference
            ],
        }
        if self.voice is not None:
            out["voice"] = dict(self.voice)
        return out

    def turn_fields(self, index: int) -> dict[str, Any]:
        return {
            "triggers": [
                {
                    "kind": t.kind,
                    "at_s": float(t.at_s),
                    "word_index": int(t.word_index),
                    "phrase": t.phrase,
                }
                for t in self.turn_triggers(index)
            ]
        }

    @classmethod
    def read(cls, ctx: _Ctx, d: Mapping[str, Any], turns: tuple[Turn, ...]) -> "InstructFDCase":
        policy = _enum(ctx, d["policy_name"], "policy_name", (*POLICIES, NO_POLICY))
        instruction = d["system_instruction"]
        if policy == NO_POLICY and instruction is not None:
            raise ctx.fail("system_instruction", "must be null when policy_name is 'none'")
        if policy != NO_POLICY and instruction is None:
            raise ctx.fail(
                "system_instruction",
                f"is null but policy_name is {policy!r}; only 'none' has no instruction",
            )

        jp_raw = _list(ctx, d["judge_policies"], "judge_policies", nonempty=True)
        judge_policies = tuple(
            _enum(ctx, p, f"judge_policies[{i}]", POLICIES) for i, p in enumerate(jp_raw)
        )
        if len(set(judge_policies)) != len(judge_policies):
            raise ctx.fail("judge_policies", f"has duplicates: {list(judge_policies)}")
        if policy != NO_POLICY and policy not in judge_policies:
            raise ctx.fail("judge_policies", f"must include the case's own policy {policy!r}")
        ji_raw = d.get("judge_instructions", {})
        if not isinstance(ji_raw, dict):
            raise ctx.fail("judge_instructions", f"expected an object, got {_kind(ji_raw)}")
        judge_instructions: dict[str, str] = {}
        for key, text in ji_raw.items():
            if key not in judge_policies:
                raise ctx.fail(
                    f"judge_instructions.{key}",
                    f"{key!r} is not in judge_policies {list(judge_policies)}",
                )
            judge_instructions[key] = _str(ctx, text, f"judge_instructions.{key}")
        if (
            policy != NO_POLICY
            and policy in judge_instructions
            and judge_instructions[policy] != instruction
        ):
            raise ctx.fail(f"judge_instructions.{policy}", "differs from system_instruction")

        triggers = tuple(
            _triggers(ctx, raw.get("triggers", []), turn) for raw, turn in zip(d["turns"], turns)
        )

        reference: list[ReferenceLine] = []
        for i, item in enumerate(_list(ctx, d["reference"], "reference")):
            f = f"reference[{i}]"
            _check_keys(ctx, item, REFERENCE_KEYS, f)
            speaker = _enum(ctx, item["speaker"], f"{f}.speaker", SPEAKERS)
            text = _str(ctx, item["text"], f"{f}.text")
            tag = _enum(ctx, item.get("tag", ""), f"{f}.tag", REFERENCE_TAGS)
            reference.append(ReferenceLine(speaker, text, tag))  # type: ignore[arg-type]
        voice = d.get("voice")
        if voice is not None:
            if (
                not isinstance(voice, dict)
                or not isinstance(voice.get("voice"), str)
                or not voice["voice"]
            ):
                raise ctx.fail(
                    "voice",
                    f"expected an object with a non-empty string 'voice', got {_kind(voice)}",
                )
        return cls(policy, tuple(reference), judge_policies, judge_instructions, triggers, voice)  # type: ignore[arg-type]


def _triggers(ctx: _Ctx, value: Any, turn: Turn) -> tuple[Trigger, ...]:
    where, words, duration_s = f"turns[{turn.index}].triggers", turn.words, turn.duration_s
    out: list[Trigger] = []
    for i, item in enumerate(_list(ctx, value, where)):
        f = f"{where}[{i}]"
        _check_keys(ctx, item, TRIGGER_KEYS, f)
        kind = _enum(ctx, item["kind"], f"{f}.kind", TRIGGER_KINDS)
        at = _num(ctx, item["at_s"], f"{f}.at_s", min_=0.0)
        if at > duration_s + TIME_EPS_S:
            raise ctx.fail(f"{f}.at_s", f"{at:g} is past the turn duration {duration_s:g}")
        wi = _int(ctx, item["word_index"], f"{f}.word_index", min_=0)
        if wi > len(words):
            raise ctx.fail(f"{f}.word_index", f"{wi} is past the turn's {len(words)} words")
        if words:
            if wi > 0 and at < words[wi - 1].end_s - TIME_EPS_S:
                raise ctx.fail(
                    f"{f}.at_s",
                    f"{at:g} is before the end of word {wi - 1} ({words[wi - 1].end_s:g})",
                )
            if wi < len(words) and at > words[wi].start_s + TIME_EPS_S:
                raise ctx.fail(
                    f"{f}.at_s", f"{at:g} is after the start of word {wi} ({words[wi].start_s:g})"
                )
        phrase = _str(ctx, item["phrase"], f"{f}.phrase")
        out.append(Trigger(kind, at, wi, phrase))  # type: ignore[arg-type]
    if out and turn.turn_type != "take-turn":
        raise ctx.fail(where, "triggers (model cut-in points) belong to take-turn turns")
    return tuple(out)


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
