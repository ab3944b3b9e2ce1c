"""Speech recognition with word times for sessions whose model returns no text stream.

- `ASRBackend` (`base`): the interface (`id`, `identity()`, `transcribe`, `transcribe_channel`,
  `transcribe_session`); speech segmentation with Silero VAD (`speech_segments`, `Segmentation`)
  and one set of rules that makes every backend's word times valid (`clean_words`).
- `WhisperASR` (`whisper`): Whisper through transformers, word times by cross-attention DTW.
- `Qwen3ASR` (`qwen3`): Qwen3-ASR + Qwen3-ForcedAligner through transformers (the Instruct-FD
  paper's pairing).

The model backends need the `asr` extra (`pip install -e ".[asr]"`); importing this package and
configuring a backend does not: torch and transformers are imported on first recognition.
See docs/asr.md.
"""

from fdeval.asr.base import (
    CHANNELS,
    INSTALL_HINT,
    SAMPLE_RATE,
    ASRBackend,
    ASRUnavailableError,
    Segmentation,
    TimedWord,
    clean_words,
    read_channel,
    speech_segments,
)
from fdeval.asr.qwen3 import Qwen3ASR
from fdeval.asr.whisper import WhisperASR

__all__ = [
    "CHANNELS",
    "INSTALL_HINT",
    "SAMPLE_RATE",
    "ASRBackend",
    "ASRUnavailableError",
    "Qwen3ASR",
    "Segmentation",
    "TimedWord",
    "WhisperASR",
    "clean_words",
    "read_channel",
    "speech_segments",
]
