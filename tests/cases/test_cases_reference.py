from __future__ import annotations

from fdeval.benchmarks.instructfd.records import InstructFDCase
from fdeval.benchmarks.instructfd.records import ReferenceLine as R
from fdeval.benchmarks.instructfd.reference import reference_for_policy, render_reference
from fdeval.types import TestCase

REF = (
    R("user", "tell me", ""),
    R("model", "sure", "take-turn"),
    R("user", "venus is farthest", ""),
    R("model", "actually it is second", "interrupt"),
    R("user", "so I will wait", ""),
    R("model", "okay", "take-turn"),
)


def test_cut_in_policy_keeps_its_cut_ins() -> None:
    assert reference_for_policy(REF, "interrupt") == REF
    assert reference_for_policy(REF, "none") == REF


def test_listen_drops_model_cut_ins_and_joins_user_speech() -> None:
    assert reference_for_policy(REF, "listen") == (
        R("user", "tell me", ""),
        R("model", "sure", "take-turn"),
        R("user", "venus is farthest so I will wait", ""),
        R("model", "okay", "take-turn"),
    )
    assert reference_for_policy(REF, "backchannel") == reference_for_policy(REF, "listen")


def test_user_barge_ins_always_kept() -> None:
    ref = (
        R("user", "how", ""),
        R("model", "first", "take-turn"),
        R("user", "mm-hmm", "backchannel"),
        R("model", "then", ""),
    )
    for policy in ("continue", "acknowledge", "listen", "none"):
        assert reference_for_policy(ref, policy) == ref


def test_render_reference():
    reference = (
        R("user", "so my plan is"),
        R("model", "mm-hmm", "backchannel"),
        R("user", "to start early"),
        R("model", "good idea", "take-turn"),
    )
    case = TestCase(
        "conv__listen",
        "conv",
        "instructfd",
        "s",
        "Listen quietly.",
        (),
        data=InstructFDCase("listen", reference, ("listen",)),
    )
    assert render_reference(case) == (
        "USER: so my plan is\nMODEL [backchannel]: mm-hmm\nUSER: to start early\n"
        "MODEL [take-turn]: good idea"
    )
    # Read under "listen", the model's scripted backchannel is dropped and the user's speech joined.
    assert (
        render_reference(case, "listen")
        == "USER: so my plan is to start early\nMODEL [take-turn]: good idea"
    )
