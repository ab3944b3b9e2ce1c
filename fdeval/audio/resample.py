"""Sample-rate conversion, offline and streaming, with one filter so both give the same samples.

`resample` converts a whole signal with `scipy.signal.resample_poly`. `StreamResampler` converts
a signal that arrives in chunks (16 kHz <-> 24 kHz between the session clock and a model) with
the same Kaiser-windowed polyphase FIR, the same zero padding at both ends and the same
`upfirdn` kernel over a window of its input, so the concatenation of its outputs equals the
offline result sample for sample, however the input was cut, edges included. Its latency is
about 10 * max(up, down) / up input samples (0.6 ms for 16k <-> 24k): an output sample is
emitted as soon as every input it depends on has arrived.
"""

from __future__ import annotations

from math import gcd

import numpy as np


def _signal():
    """scipy.signal, imported on first use: it costs about a CPU-second, more than the rest of
    `python -m fdeval.launch`'s imports together, and a launch that resamples nothing (a config
    check, `--cfg job`, a plan, a status) should not pay for it."""
    import scipy.signal

    return scipy.signal


# resample_poly's default design, repeated here so the streaming filter is the same one.
_WINDOW = ("kaiser", 5.0)


def _ratio(sr_in: int, sr_out: int) -> tuple[int, int]:
    if int(sr_in) != sr_in or int(sr_out) != sr_out or sr_in <= 0 or sr_out <= 0:
        raise ValueError(f"sample rates must be positive integers, got {sr_in} -> {sr_out}")
    g = gcd(int(sr_in), int(sr_out))
    return int(sr_out) // g, int(sr_in) // g


def resample(x: np.ndarray, sr_in: int, sr_out: int) -> np.ndarray:
    """Resample `x` ((n,) or (n, ch)) from `sr_in` to `sr_out` Hz along axis 0; float32 out.

    Output length is ceil(n * sr_out / sr_in). Computed in float64 so that it and
    `StreamResampler` differ only by the final rounding to float32.
    """
    up, down = _ratio(sr_in, sr_out)
    x = np.asarray(x)
    if up == down:
        return x.astype(np.float32, copy=True)
    return (
        _signal()
        .resample_poly(x.astype(np.float64), up, down, axis=0, window=_WINDOW)
        .astype(np.float32)
    )


class StreamResampler:
    """Stateful polyphase resampler for a mono stream; output equals `resample` of the whole.

    Output sample k is sum_n x[n] * h[k*down + H - n*up] with h the (2H+1)-tap low-pass filter
    (scaled by up) and x zero outside the stream: what `resample_poly` computes, with its
    `upfirdn` run over just the inputs the pending outputs read (each output sums the same
    terms in the same order, so the samples are identical).
    `push` returns the outputs whose inputs have all arrived; `flush` ends the stream (zeros
    after the last input), returns the rest, and leaves the resampler ready for a new stream.
    """

    def __init__(self, sr_in: int, sr_out: int):
        self.sr_in, self.sr_out = int(sr_in), int(sr_out)
        self._up, self._down = _ratio(sr_in, sr_out)
        self._identity = self._up == self._down
        if self._identity:
            return
        up = self._up
        self._half = 10 * max(self._up, self._down)
        signal = _signal()
        self._upfirdn = signal.upfirdn
        h = signal.firwin(2 * self._half + 1, 1.0 / max(self._up, self._down), window=_WINDOW) * up
        # Polyphase split: for phase r, output taps are h[r], h[r + up], h[r + 2*up], ...
        self._n_taps = -(-h.size // up)
        # resample_poly's own arrangement: the filter zero-padded in front so that an output sits
        # at a whole output index of upfirdn's result (offset `_pre_remove`); the stream runs the
        # same upfirdn over a window of its input, which gives the same sums.
        pre_pad = self._down - self._half % self._down
        self._h = np.concatenate([np.zeros(pre_pad), h])
        self._pre_remove = (self._half + pre_pad) // self._down
        self._reset()

    def _reset(self) -> None:
        # The buffer starts before the stream with the zeros resample_poly pads with (and `down`
        # more, so that a window can start on a multiple of `down`).
        n = self._n_taps - 1 + self._down
        self._buf = np.zeros(n)
        self._base = -n  # stream index of self._buf[0]
        self._n_in = 0
        self._k = 0  # next output index

    def _newest_input(self, k: np.ndarray | int) -> np.ndarray | int:
        return (k * self._down + self._half) // self._up

    def _emit(self, k_end: int) -> np.ndarray:
        """Outputs self._k .. k_end-1 from the buffer, then drop inputs no later output needs."""
        k0 = self._k
        if k_end <= k0:
            return np.zeros(0, dtype=np.float32)
        # the inputs outputs k0..k_end-1 read, from a multiple of `down` (so that the window's
        # outputs fall on whole indices of the whole stream's)
        lo = self._oldest_needed(k0)
        hi = int(self._newest_input(k_end - 1)) + 1
        y = self._upfirdn(
            self._h, self._buf[lo - self._base : hi - self._base], self._up, self._down
        )
        j0 = k0 + self._pre_remove - lo * self._up // self._down
        out = y[j0 : j0 + k_end - k0]
        self._k = k_end
        keep = self._oldest_needed(k_end)
        if keep > self._base:
            self._buf = self._buf[keep - self._base :]
            self._base = keep
        return out.astype(np.float32)

    def _oldest_needed(self, k: int) -> int:
        """The first input output k reads, rounded down to a multiple of `down`."""
        lo = int(self._newest_input(k)) - (self._n_taps - 1)
        return lo - lo % self._down

    def push(self, chunk: np.ndarray) -> np.ndarray:
        """Feed the next input samples (1-D); returns the output samples now complete."""
        chunk = np.asarray(chunk)
        if chunk.ndim != 1:
            raise ValueError(
                f"StreamResampler is mono: expected a 1-D chunk, got shape {chunk.shape}"
            )
        if self._identity:
            return chunk.astype(np.float32, copy=True)
        self._buf = np.concatenate([self._buf, chunk.astype(np.float64)])
        self._n_in += chunk.size
        # Largest k whose newest input index (k*down + H)//up is already here.
        k_end = max(0, (self._n_in * self._up - 1 - self._half) // self._down + 1)
        return self._emit(k_end)

    def flush(self) -> np.ndarray:
        """End the stream: the remaining output samples (total ceil(n_in*up/down)), then reset."""
        if self._identity:
            return np.zeros(0, dtype=np.float32)
        n_total = -(-self._n_in * self._up // self._down)
        if n_total > self._k:
            needed = int(self._newest_input(n_total - 1)) - (self._n_in - 1)
            if needed > 0:
                self._buf = np.concatenate([self._buf, np.zeros(needed)])
        out = self._emit(n_total)
        self._reset()
        return out
