"""The generic layout: any folder of two-speaker recordings with transcripts beside them.

For a corpus no other recipe knows, or one converted into this shape. Stereo files hold a
speaker per channel; a mono pair `<conv>_A` / `<conv>_B` in one folder is one conversation
(A is channel 0). The transcript, if any, has the audio's stem and one of the endings
`.TextGrid`, `.ctm`, `.rttm`, `.words.json` or `.json` (fdeval's word file). Without one, the
finder reads the speech from Silero VAD and the episodes have no transcript history.
"""

from __future__ import annotations

from pathlib import Path

from ._common import Recipe, folder_conversations

LAYOUT = """\
<root>/**/<conv>.wav|.flac|.mp3                       stereo: channel 0 and 1 are the two speakers
<root>/**/<conv>_A.wav + <conv>_B.wav (or .flac)      or one mono file per speaker, in one folder
<root>/**/<conv>.TextGrid|.ctm|.rttm|.words.json      optional transcript beside the audio
"""


def conversations(root: Path):
    return folder_conversations(root, "folder", LAYOUT)


RECIPE = Recipe(
    "folder",
    "any two-speaker corpus in the generic layout",
    LAYOUT,
    "fdeval's own layout (nothing to verify)",
    conversations,
)
