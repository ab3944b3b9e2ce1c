"""SSSD: crowdsourced spontaneous English dyads (the paper's 727-hour source of scale).

We found no published description of this corpus's files, so this recipe reads the generic
layout (`folder.py`): the user arranges (or links) the recordings and transcripts that way.
docs/tact-corpora.md says so; a recipe for the real layout replaces this module once it is known.
"""

from __future__ import annotations

from pathlib import Path

from ._common import Recipe, folder_conversations
from .folder import LAYOUT


def conversations(root: Path):
    return folder_conversations(root, "sssd", LAYOUT)


RECIPE = Recipe(
    "sssd",
    "SSSD (crowdsourced spontaneous English dyads)",
    LAYOUT,
    "unverified: no published layout found; the generic layout is assumed",
    conversations,
)
