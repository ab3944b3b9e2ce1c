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
always kept. :func:`render_reference` is the text a judge reads.
"""

from __future__ import annotations

from fdeval.benchmarks.instructfd.records import ReferenceLine
from fdeval.transcript.render import SPEAKER_LABEL
from fdeval.types import TestCase

CUT_IN_TAGS = ("backchannel", "interrupt")


def reference_for_policy(
    reference: tuple[ReferenceLine, ...], policy: str
) -> tuple[ReferenceLine, ...]:
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
        if (
            dropped
            and out
            and line.speaker == "user"
            and out[-1].speaker == "user"
            and line.tag == ""
        ):
            prev = out.pop()
            line = ReferenceLine("user", f"{prev.text} {line.text}", prev.tag)
        dropped = False
        out.append(line)
    return tuple(out)


def render_reference(case: TestCase, policy: str | None = None) -> str:
    """The expected turn-taking transcript of `case`, one line per reference line.

    Lines read ``USER: text`` or, for a scripted cut-in or turn transition, ``MODEL [tag]: text``.
    With `policy`, the reference is first read under that instruction (:func:`reference_for_policy`:
    model cut-ins the instruction does not ask for are dropped); without it, the stored reference is
    rendered as is.
    """
    reference = case.data.reference
    lines = reference if policy is None else reference_for_policy(reference, policy)
    out = []
    for ln in lines:
        tag = f" [{ln.tag}]" if ln.tag else ""
        out.append(f"{SPEAKER_LABEL[ln.speaker]}{tag}: {ln.text}")
    return "\n".join(out)
