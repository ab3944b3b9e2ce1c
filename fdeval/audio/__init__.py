"""Audio layer of fdeval: speech synthesis with exact word timings, voice activity detection,
sample-rate conversion and WAV files.

- `tts`: espeak-ng voices (`EspeakTTS`) rendering text to float32 audio plus one `SpokenWord`
  per whitespace token; deterministic.
- `vad`: Silero VAD on onnxruntime (`SileroVAD`), offline probabilities or a streaming
  segmenter (`VADStream`) that gives the same events however the audio is chunked.
- `resample`: offline `resample` and a chunk-invariant `StreamResampler` with the same filter.
- `io`: atomic `write_wav`, `read_wav`, `to_float32`.

Everything here is float32 mono in [-1, 1] unless said otherwise; the session clock runs at
16 kHz.
"""

from fdeval.audio.io import read_wav, to_float32, write_wav
from fdeval.audio.resample import StreamResampler, resample
from fdeval.audio.tts import EspeakTTS, EspeakUnavailableError, SpokenWord, Synthesis, silence
from fdeval.audio.vad import SileroVAD, VADEvent, VADStream

# Eager on purpose: the function `resample` shares its name with the submodule, and only an
# import here keeps `fdeval.audio.resample` (the attribute) bound to the function.
__all__ = [
    "EspeakTTS",
    "EspeakUnavailableError",
    "SileroVAD",
    "SpokenWord",
    "StreamResampler",
    "Synthesis",
    "VADEvent",
    "VADStream",
    "read_wav",
    "resample",
    "silence",
    "to_float32",
    "write_wav",
]
