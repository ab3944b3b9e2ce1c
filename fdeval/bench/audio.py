"""Measures the audio layer's costs and accuracy on this machine: `python -m fdeval.bench.audio`.

Prints the Silero VAD cost per 512-sample chunk (streaming, one thread), the real-time factor
(synthesis wall time / audio duration) of espeak-ng (process start included) and of Piper (model
loaded, first call excluded) on the same sentences, the error of Piper's word times at pauses
(`pause_boundary_errors`) and the VAD onset error against TTS speech placed at 1.0 s in silence.
Not a test: the speed figures depend on the machine (the alignment figures do not).
"""

from __future__ import annotations

import time

import numpy as np

from fdeval.audio.piper import PiperTTS
from fdeval.audio.resample import StreamResampler
from fdeval.audio.tts import SILENCE_THRESHOLD, EspeakTTS, silence
from fdeval.audio.vad import CHUNK, SileroVAD
from fdeval.audio.word_times import pause_boundary_errors

SENTENCES = (
    "Can you tell me how to start running when I have never done it before?",
    "Okay, thanks. And what should I eat the evening before a long run?",
    "Wait, I only have twenty minutes a day.",
)
# Sentences with pauses inside (commas, sentence ends) where the sound's own edges are known.
PAUSED = SENTENCES + (
    "Hello there, my friend. I wanted to ask you something about tomorrow's weather.",
    "Well, I think so; but the budget is only four hundred dollars, not six.",
    "Sure, that sounds good. Could you start with the easy parts, please?",
    "No, the capital is Canberra. Sydney is just the largest city.",
    "Right, so first the flour, then the butter, and finally the sugar.",
)


def _rtf(tts, texts) -> tuple[float, float]:
    """(RTF over all texts, total audio seconds)."""
    wall = audio = 0.0
    for text in texts:
        t0 = time.perf_counter()
        syn = tts.synthesize(text)
        wall += time.perf_counter() - t0
        audio += syn.duration_s
    return wall / audio, audio


def tts_report(sr: int = 16000) -> None:
    """espeak vs Piper real-time factor on the same sentences, and Piper's pause-edge errors."""
    espeak, piper = EspeakTTS(sample_rate=sr), PiperTTS(sample_rate=sr)
    t0 = time.perf_counter()
    piper.synthesize("Warm up.")  # loads and patches the model
    print(
        f"piper: first call (model load) {time.perf_counter() - t0:.2f} s, {piper.threads} threads"
    )
    for name, tts in (("espeak", espeak), ("piper", piper)):
        rtf, audio = _rtf(tts, PAUSED)
        print(
            f"tts {name} {tts.voice}: RTF {rtf:.4f} over {audio:.1f} s of audio ({len(PAUSED)} sentences)"
        )
    ends, starts = [], []
    for text in PAUSED:
        e, s = pause_boundary_errors(piper.synthesize(text))
        ends += e
        starts += s
    for name, err in (("word end", ends), ("word start", starts)):
        a = np.abs(np.array(err)) * 1e3
        print(
            f"piper {name} vs pause edge (n={a.size}): |err| p50 {np.percentile(a, 50):.0f} ms, "
            f"p95 {np.percentile(a, 95):.0f} ms, max {a.max():.0f} ms, mean signed {np.mean(err) * 1e3:+.0f} ms"
        )


def main() -> None:
    sr = 16000
    tts_report(sr)
    syntheses = []
    for voice in ("en-us+m3", "en-us+f3"):
        tts = EspeakTTS(voice=voice, sample_rate=sr)
        for text in SENTENCES:
            t0 = time.perf_counter()
            syntheses.append(tts.synthesize(text))
            wall = time.perf_counter() - t0
            print(
                f"tts {voice}: {wall * 1e3:5.1f} ms for {syntheses[-1].duration_s:.2f} s of audio, "
                f"RTF {wall / syntheses[-1].duration_s:.4f}"
            )

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
    print(
        f"vad: {vad_wall / n_chunks * 1e3:.3f} ms per 512-sample chunk (20 ms pushes, {n_chunks} chunks)"
    )
    print(
        f"vad onset error vs TTS onset at 1.0 s: mean {np.mean(errors) * 1e3:+.1f} ms, "
        f"max |err| {np.max(np.abs(errors)) * 1e3:.1f} ms"
    )

    x = syntheses[0].samples
    r = StreamResampler(16000, 24000)
    t0 = time.perf_counter()
    for i in range(0, x.size, 320):
        r.push(x[i : i + 320])
    r.flush()
    print(
        f"stream resample 16k->24k: {(time.perf_counter() - t0) / (x.size / 320) * 1e3:.3f} ms per 20 ms frame"
    )


if __name__ == "__main__":
    main()
