"""The LLM client's clock in tests that check its waits (backoff, retry window), not the machine.

`virtual_time(monkeypatch)` gives fdeval.llm.client a clock of its own: `time.sleep` records the
delay and returns at once, and `time.monotonic` is the delays slept so far plus the timeouts of
attempts that timed out (`charge`, called by `timed`). So "stops within N s" is a statement about
the delays and timeouts the client chose, the same on an idle or a loaded machine, and a
closed-port test does not wait out its backoff. The real network waits (a stand-in's slow answer
until the client's timeout) still happen; they are not counted twice.
"""

from __future__ import annotations

from types import SimpleNamespace

from fdeval.llm import client as client_mod


class VirtualTime:
    def __init__(self) -> None:
        self.t = 0.0
        self.sleeps: list[float] = []
        self.timeouts: list[float] = []  # the timeout each attempt was given (through `timed`)

    def monotonic(self) -> float:
        return self.t

    def sleep(self, delay_s: float) -> None:
        self.sleeps.append(delay_s)
        self.t += delay_s

    def timed(self, c) -> None:
        """Record each attempt's timeout of client `c`, and charge a timed-out attempt its timeout."""
        for name in ("_anthropic_sender", "_openai_sender"):
            orig = getattr(c, name)

            def sender(system, prompt, _orig=orig):
                send = _orig(system, prompt)

                def attempt(timeout):
                    self.timeouts.append(timeout)
                    try:
                        return send(timeout)
                    except client_mod.AttemptFailed as f:
                        if "(timeout)" in f.why:  # it waited its whole timeout
                            self.t += timeout
                        raise

                return attempt

            setattr(c, name, sender)


def virtual_time(monkeypatch) -> VirtualTime:
    vt = VirtualTime()
    monkeypatch.setattr(client_mod, "time", SimpleNamespace(monotonic=vt.monotonic, sleep=vt.sleep))
    return vt
