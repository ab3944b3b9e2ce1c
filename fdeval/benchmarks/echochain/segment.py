"""Cut a session into EchoChain exchanges: the message, what the assistant said before the
barge-in, the barge-in, and the continuation (§3.1, §4.3).

User turns are labelled `ex<k>_message` and `ex<k>_barge_in` (k from 1). Exchange k runs from
its message's start to the next message's start (or the end of the session). The assistant's
words are split at the barge-in's first sample: before it, `answer_before`; from it on,
`continuation`. An exchange without a barge-in has its whole answer as `continuation`. The same
rule runs in the live loop (on the model's text pieces as the user heard them) and after the
session (on the transcript's words), so both see the same segments.

A barge-in whose first sample found the assistant's answer already over
(:func:`fdeval.orchestrator.turns.model_speaking_at` False on the played model channel's speech)
is *late*: the exchange keeps its words but is not interrupted (docs/echochain.md, "A barge-in
after the answer"). The loop and the segment step decide it from the same VAD segments.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Iterable, Mapping, Sequence

from fdeval.orchestrator.policy import DEFAULT_SILENCE_S
from fdeval.orchestrator.turns import model_speaking_at
from fdeval.recording import Session

from .classifier import Exchange

_LABEL = re.compile(r"^ex([0-9]+)_(message|barge_in)$")


def message_label(k: int) -> str:
    return f"ex{k}_message"


def barge_in_label(k: int) -> str:
    return f"ex{k}_barge_in"


@dataclass(frozen=True)
class Span:
    """Where exchange `index` sits on the session clock (NaN: that turn never played)."""

    index: int
    message_start_s: float
    message_end_s: float
    barge_in_start_s: float = math.nan
    barge_in_end_s: float = math.nan
    end_s: float = math.inf
    barge_in_late: bool = False  # the answer had ended when the barge-in started

    @property
    def interrupted(self) -> bool:
        return not math.isnan(self.barge_in_start_s) and not self.barge_in_late

    @property
    def barge_in_played(self) -> bool:
        return not math.isnan(self.barge_in_start_s)


def spans(
    turns: Iterable[Mapping],
    duration_s: float,
    model_speech: Sequence[tuple[float, float]] | None = None,
    silence_s: float = math.nan,
) -> list[Span]:
    """Exchange spans from user turn rows (`label`, `start_s`, `end_s`); turns that never
    started are left out. With `model_speech` (the played model channel's VAD segments) and
    `silence_s` (the session's answer-ending silence), a barge-in that started after the answer
    had ended is marked late."""
    parts: dict[int, dict[str, tuple[float, float]]] = {}
    for t in turns:
        m = _LABEL.match(str(t["label"]))
        start = float(t["start_s"])
        if m is None or math.isnan(start):
            continue
        parts.setdefault(int(m.group(1)), {})[m.group(2)] = (start, float(t["end_s"]))
    out: list[Span] = []
    ks = sorted(k for k in parts if "message" in parts[k])
    for i, k in enumerate(ks):
        ms, me = parts[k]["message"]
        bs, be = parts[k].get("barge_in", (math.nan, math.nan))
        end = parts[ks[i + 1]]["message"][0] if i + 1 < len(ks) else duration_s
        late = (
            model_speech is not None
            and not math.isnan(bs)
            and not model_speaking_at(model_speech, bs, silence_s)
        )
        out.append(Span(k, ms, me, bs, be, end, late))
    return out


def log_spans(log: Session) -> list[Span]:
    """:func:`spans` of a recorded session (`fdeval.recording.read_session`): its turns, its
    duration, its model channel's VAD segments and the answer-ending silence it ran with."""
    cfg = log.info.json("turn_config") or {}
    speech = [(s.start_s, s.end_s) for s in log.vad_segments]
    rows = [{"label": t.label, "start_s": t.start_s, "end_s": t.end_s} for t in log.turns]
    return spans(rows, log.duration_s, speech, float(cfg.get("silence_s", DEFAULT_SILENCE_S)))


def join(
    pieces: Sequence[tuple[float, str]], a_s: float, b_s: float, text_stream: str = "words"
) -> str:
    """The assistant's text whose play time is in [a_s, b_s), joined by the model's text rule."""
    chosen = [t for at, t in pieces if a_s - 1e-9 <= at < b_s - 1e-9]
    if text_stream == "pieces":
        return re.sub(r"\s+", " ", "".join(chosen)).strip()
    return " ".join(p.strip() for p in chosen if p.strip())


def exchanges(
    case_id: str,
    span_list: Sequence[Span],
    said: Mapping[int, Mapping[str, str | None]],
    pieces: Sequence[tuple[float, str]],
    text_stream: str = "words",
) -> tuple[Exchange, ...]:
    """The exchanges of a session. `said[k]`: the user's `message`, `barge_in` and
    `barge_in_label` of exchange k (what the user policy wrote or the case holds)."""
    out = []
    for sp in span_list:
        s = said.get(sp.index, {})
        if sp.barge_in_played:
            before = join(pieces, sp.message_start_s, sp.barge_in_start_s, text_stream)
            cont = join(pieces, sp.barge_in_start_s, sp.end_s, text_stream)
            out.append(
                Exchange(
                    case_id,
                    sp.index,
                    str(s.get("message") or ""),
                    before,
                    s.get("barge_in"),
                    s.get("barge_in_label"),
                    cont,
                    sp.barge_in_late,
                )
            )
        else:
            out.append(
                Exchange(
                    case_id,
                    sp.index,
                    str(s.get("message") or ""),
                    "",
                    None,
                    None,
                    join(pieces, sp.message_start_s, sp.end_s, text_stream),
                )
            )
    return tuple(out)


def exchange_to_dict(e: Exchange) -> dict:
    return {
        "index": e.index,
        "message": e.message,
        "answer_before": e.answer_before,
        "barge_in": e.barge_in,
        "barge_in_label": e.barge_in_label,
        "continuation": e.continuation,
        "late": e.late,
    }


def exchange_from_dict(case_id: str, d: Mapping) -> Exchange:
    return Exchange(
        case_id,
        int(d["index"]),
        str(d["message"]),
        str(d["answer_before"]),
        d.get("barge_in"),
        d.get("barge_in_label"),
        str(d["continuation"]),
        bool(d.get("late", False)),
    )
