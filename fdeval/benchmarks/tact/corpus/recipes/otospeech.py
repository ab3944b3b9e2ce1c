"""otoSpeech-full-duplex: two-speaker English calls as stereo FLAC, one speaker per channel.

The raw release (otoSpeech-full-duplex-280h) is 48 kHz, its cleaned companion (processed-141h)
44.1 kHz; both are resampled to 16 kHz and the original rate is recorded. The dataset cards
describe channel-separated audio with session metadata, speaker profiles, redaction intervals
and surveys, but no time-aligned transcript, so the finder reads each channel's speech with
Silero VAD unless a transcript (TextGrid, CTM, RTTM or fdeval word file, from an aligner or ASR)
is put beside a recording under its stem. The metadata files' format is not published; speakers
are named per conversation (`<conv>-A`, `<conv>-B`) and their attributes are unknown.
"""

from __future__ import annotations

from pathlib import Path

from ._common import Recipe, folder_conversations

LAYOUT = """\
<root>/**/<session>.flac                       stereo FLAC (48 kHz raw, 44.1 kHz processed), one speaker per channel
<root>/**/<session>.TextGrid|.ctm|.rttm|.json  optional transcript you add (else speech from VAD)
"""


def conversations(root: Path):
    return folder_conversations(root, "otospeech", LAYOUT, suffixes=(".flac", ".wav"), pairs=False)


RECIPE = Recipe(
    "otospeech",
    "otoSpeech-full-duplex (280h raw / 141h processed)",
    LAYOUT,
    "Hugging Face dataset cards (audio format only; the folder structure inside is not published)",
    conversations,
)
