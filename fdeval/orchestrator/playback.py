"""Client-side playback of the model channel on the shared session timeline.

A model chunk starts playing at max(arrival, end of the previous chunk, what was already
rendered): a model that sends audio faster than real time queues up, one that is late leaves
gaps. An interruption signal drops everything not yet played, and the drop is recorded with
how much of each output item (a hosted API's item id) had been played: that is what such an API
is told the user heard.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class ScheduledChunk:
    arrival_s: float
    play_start_s: float
    n_samples: int
    start_n: int = 0
    item: str = ""


@dataclass(frozen=True)
class Flush:
    t_s: float
    n_dropped: int
    played_n: tuple[
        tuple[str, int], ...
    ] = ()  # (item, samples of it played before t_s), items only


class Playback:
    """The model channel as a listener hears it, sample-exact at `sample_rate`."""

    def __init__(self, sample_rate: int, capacity_s: float = 60.0):
        self.sample_rate = sample_rate
        self._buf = np.zeros(int(capacity_s * sample_rate), dtype=np.float32)
        self.queue_end_n = 0  # end of the last scheduled sample
        self.rendered_n = 0  # samples already handed to the listener (VAD, recording)
        self.chunks: list[ScheduledChunk] = []
        self.flushes: list[Flush] = []
        self._item_spans: list[
            list
        ] = []  # [item, start_n, n kept]: chunks of items, cut by flushes
        # an item's audio that stalls: a chunk starting after the previous chunk of the same item
        # ended (it arrived late: the listener hears a gap the model did not mean)
        self.item_stall_max_n = 0
        self._last_item, self._last_end_n = "", 0

    def _ensure(self, n: int) -> None:
        if n > len(self._buf):
            new = np.zeros(max(n, 2 * len(self._buf)), dtype=np.float32)
            new[: len(self._buf)] = self._buf
            self._buf = new

    @property
    def queue_end_s(self) -> float:
        return self.queue_end_n / self.sample_rate

    def next_start_s(self, arrival_s: float) -> float:
        """Where a chunk arriving at `arrival_s` would start playing."""
        start = max(int(round(arrival_s * self.sample_rate)), self.queue_end_n, self.rendered_n)
        return start / self.sample_rate

    def add(self, samples: np.ndarray, arrival_s: float, item: str = "") -> ScheduledChunk:
        start = int(round(self.next_start_s(arrival_s) * self.sample_rate))
        n = len(samples)
        self._ensure(start + n)
        self._buf[start : start + n] = samples
        self.queue_end_n = start + n
        chunk = ScheduledChunk(arrival_s, start / self.sample_rate, n, start, item)
        if item:
            self._item_spans.append([item, start, n])
            if item == self._last_item and start > self._last_end_n:
                self.item_stall_max_n = max(self.item_stall_max_n, start - self._last_end_n)
            self._last_item, self._last_end_n = item, start + n
        self.chunks.append(chunk)
        return chunk

    def flush(self, t_s: float) -> Flush:
        """Drop what is queued after `t_s` (never what was already played)."""
        n = max(int(round(t_s * self.sample_rate)), self.rendered_n)
        played: dict[str, int] = {}
        for span in self._item_spans:
            span[2] = min(
                max(0, n - span[1]), span[2]
            )  # what was dropped now or before is not played
            played[span[0]] = played.get(span[0], 0) + span[2]
        self._last_item = ""
        dropped = max(0, self.queue_end_n - n)
        if dropped:
            self._buf[n : self.queue_end_n] = 0.0
            self.queue_end_n = n
        f = Flush(n / self.sample_rate, dropped, tuple(played.items()))
        self.flushes.append(f)
        return f

    def render_to(self, n_end: int) -> np.ndarray:
        """The samples played from the last render up to sample `n_end` (a copy)."""
        self._ensure(n_end)
        out = self._buf[self.rendered_n : n_end].copy()
        self.rendered_n = max(self.rendered_n, n_end)
        return out

    def track(self, n_samples: int) -> np.ndarray:
        """The played channel for the first `n_samples` (what the recording holds)."""
        self._ensure(n_samples)
        return self._buf[:n_samples].copy()
