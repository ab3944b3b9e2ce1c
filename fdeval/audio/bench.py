"""Measures the audio layer's costs and accuracy on this machine: `python -m fdeval.audio.bench`.

Prints the Silero VAD cost per 512-sample chunk (streaming, one thread), the espeak-ng
real-time factor (synthesis wall time / audio duration, process start included) and the VAD
onset error against TTS speech placed at 1.0 s in silence. Not a test: the figures depend on
the machine.
"""

from __future__ import annotations

import time

import numpy as np

from fdeval.audio.resample import StreamResampler
from fdeval.audio.tts import SILENCE_THRESHOLD, EspeakTTS, silence
from fdeval.audio.vad import CHUNK, SileroVAD

SENTENCES = (
    "Can you tell me how to start running when I have never done it before?",
    "Okay, thanks. And what should I eat the evening before a long run?",
    "Wait, I only have twenty minutes a day.",
)


def main() -> None:
    sr = 16000
    syntheses = []
    for voice in ("en-us+m3", "en-us+f3"):
        tts = EspeakTTS(voice=voice, sample_rate=sr)
        for text in SENTENCES:
            t0 = time.perf_counter()
            syntheses.append(tts.synthesize(text))
            wall = time.perf_counter() - t0
            print(f"tts {voice}: {wall * 1e3:5.1f} ms for {syntheses[-1].duration_s:.2f} s of audio, "
                  f"RTF {wall / syntheses[-1].duration_s:.4f}")

    vad = SileroVAD()
    errors = []
    n_chunks, vad_wall = 0, 0.0
    for syn in syntheses:
        x = np.concatenate([silence(1.0, sr), syn.samples, silence(1.0, sr)])
        stream = vad.stream()
        t0 = time.perf_counter()
        events = [e for i in range(0, x.size, 320) for e in stream.push(x[i : i + 320])]
        vad_wall += time.perf_counter() - t0
        n_chunks += x.size // CHUNK
        truth = 1.0 + np.flatnonzero(np.abs(syn.samples) > SILENCE_THRESHOLD)[0] / sr
        errors.append(events[0].t_s - truth)
    print(f"vad: {vad_wall / n_chunks * 1e3:.3f} ms per 512-sample chunk (20 ms pushes, {n_chunks} chunks)")
    print(f"vad onset error vs TTS onset at 1.0 s: mean {np.mean(errors) * 1e3:+.1f} ms, "
          f"max |err| {np.max(np.abs(errors)) * 1e3:.1f} ms")

    x = syntheses[0].samples
    r = StreamResampler(16000, 24000)
    t0 = time.perf_counter()
    for i in range(0, x.size, 320):
        r.push(x[i : i + 320])
    r.flush()
    print(f"stream resample 16k->24k: {(time.perf_counter() - t0) / (x.size / 320) * 1e3:.3f} ms per 20 ms frame")


if __name__ == "__main__":
    main()
