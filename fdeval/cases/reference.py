"""The expected turn-taking reference of a case, as read under one instruction.

A case stores ONE reference per conversation: the script in order, with every scripted cut-in
tagged (see ``docs/cases.md``). The instructed cases of a conversation and its un-instructed
baseline share it, so the judge sees the same reference for ``judge(x_I, I)`` and
``judge(x_none, I)``. What a scripted MODEL cut-in means depends on the instruction:

* under ``backchannel`` / ``interrupt`` a model line tagged ``backchannel`` / ``interrupt`` is a
  moment where the model is expected to cut in;
* under every other instruction (``listen`` in particular) the model is expected to stay silent
  there, so :func:`reference_for_policy` drops those lines and joins the user's speech around them.

User barge-ins (user lines tagged ``backchannel`` / ``interrupt``) are part of the stimulus and are
always kept.
"""

from __future__ import annotations

from fdeval.types import ReferenceLine

CUT_IN_TAGS = ("backchannel", "interrupt")


def reference_for_policy(reference: tuple[ReferenceLine, ...], policy: str) -> tuple[ReferenceLine, ...]:
    """`reference` as expected under `policy` (a policy name, or "none" for the full script)."""
    keep = {policy} if policy in CUT_IN_TAGS else set()
    if policy == "none":
        keep = set(CUT_IN_TAGS)
    out: list[ReferenceLine] = []
    dropped = False
    for line in reference:
        if line.speaker == "model" and line.tag in CUT_IN_TAGS and line.tag not in keep:
            dropped = True
            continue
        if dropped and out and line.speaker == "user" and out[-1].speaker == "user" and line.tag == "":
            prev = out.pop()
            line = ReferenceLine("user", f"{prev.text} {line.text}", prev.tag)
        dropped = False
        out.append(line)
    return tuple(out)
