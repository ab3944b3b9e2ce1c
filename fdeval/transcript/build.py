"""Build a session's transcript from its test case and HDF5 log, with exact word times.

User words come from the TTS word timings of each turn, moved to where the turn was placed in
the recording (and cut where a yield turn stopped). Model words come from the model's own text
stream, at the time their audio was played, by the rule the log's `text_stream` attribute names
(the adapter's `DuplexModel.text_stream`; logs without it are read as "words"):

- "words": every whitespace-separated token of a piece is a word, timed as its piece;
- "pieces": the pieces are one running string (SentencePiece / BPE fragments): concatenated and
  split on whitespace, a word runs from its first piece's play time to its last piece's end; a
  flush, a dropped piece or a pause of PAUSE_S in the model's audio also ends a word.

Pieces whose audio was dropped by a flush are left out. Models that return no text need an ASR
backend instead (see `fdeval.asr`). The rules are documented in docs/judging.md.

A benchmark may mark points inside its user turns (Instruct-FD: where the reference model cuts
in); given as `triggers`, they are moved onto the session clock with their turn and kept when the
turn played past them.
"""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Any, Sequence

from fdeval.errors import FileFieldError
from fdeval.recording import ModelText, Session, read_session
from fdeval.types import PlayedTurn, Seconds, TestCase, Transcript, Word

# A text piece without a duration is assumed to last until the next piece, at most this long.
MAX_WORD_S = 0.6
# "pieces": model audio silent this long between two pieces ends a word. Streams whose answers
# start without a leading space (BPE transcription deltas) would otherwise glue an answer's first
# word to the previous answer's last; sub-word pieces of one spoken word are never this far apart
# in continuous audio (MiniCPM-o's 1 s chunks play back to back).
PAUSE_S = 0.5
TEXT_STREAMS = ("words", "pieces")


def build_transcript(
    case: TestCase,
    log_path: Path,
    model_words: list[Word] | None = None,
    triggers: Sequence[Sequence[tuple[str, Seconds]]] = (),
    cropped_ok: bool = False,
) -> Transcript:
    """The session transcript; `model_words` (e.g. from ASR on the model channel) replace the
    model's own text stream when given. `triggers[i]`: the (kind, time in the turn audio) points
    of turn i (a turn past the end has none). An imported recording whose words were cropped
    (FDB's user-interruption output.json) has no text stream before the crop: without
    `model_words` it is refused in one line, unless the caller reads only words after the crop
    (`cropped_ok`, Full-Duplex-Bench's own steps)."""
    log = read_session(log_path, tables=("turns", "model_text", "model_chunks", "flushes"))
    duration_s = log.duration_s
    words: list[Word] = []
    played: list[PlayedTurn] = []
    for row in log.turns:
        turn = case.turns[row.index]
        start = row.start_s
        if not row.played:
            continue
        end = row.end_s
        turn_words = [w for w in turn.words if start + w.start_s < end]
        marks = triggers[turn.index] if turn.index < len(triggers) else ()
        for w in turn_words:
            words.append(
                Word(
                    case.case_id,
                    "user",
                    w.text,
                    start + w.start_s,
                    min(start + w.end_s, end),
                    "tts",
                    turn.index,
                )
            )
        played.append(
            PlayedTurn(
                case_id=case.case_id,
                index=turn.index,
                label=turn.label,
                turn_type=turn.turn_type,
                subtype=turn.subtype,
                start_s=start,
                end_s=end,
                scheduled_s=row.scheduled_s,
                cut_short=row.cut_short,
                n_words_total=len(turn.words),
                n_words_played=len(turn_words),
                triggers_s=tuple(
                    (kind, start + at_s) for kind, at_s in marks if start + at_s < end
                ),
            )
        )
    if model_words is not None:
        words.extend(w for w in model_words if w.start_s < duration_s)
    else:
        if log.info.attrs.get("imported_words") == "cropped" and not cropped_ok:
            raise FileFieldError(
                str(log_path),
                case.case_id,
                "imported_words",
                "cropped: the model's words before "
                f"{log.info.attrs.get('imported_words_from_s')} s are unknown; transcribe its "
                "channel (asr=whisper or asr=qwen3)",
            )
        words.extend(log_model_words(case.case_id, log, str(log_path)))
    words.sort(key=lambda w: (w.start_s, w.speaker))
    return Transcript(case.case_id, tuple(words), tuple(played), duration_s)


def log_model_words(case_id: str, log: Session, where: str = "session log") -> list[Word]:
    """The model's words in a read session log (`fdeval.recording.read_session`: its model_text,
    and for the "pieces" rule its model_chunks and flushes), timed when their audio played, by the
    log's `text_stream` rule (see the module doc)."""
    duration_s = log.duration_s
    rule = log.info.text_stream
    if rule == "words":
        return _words_rule(case_id, log.model_text, duration_s)
    if rule == "pieces":
        return _pieces_rule(case_id, log, duration_s)
    raise FileFieldError(
        where,
        case_id,
        "attrs.text_stream",
        f"unknown text rule {rule!r} (expected one of {', '.join(TEXT_STREAMS)})",
    )


def _piece_ends(pieces: Sequence[ModelText], duration_s: float) -> list[float]:
    """Where each piece (sorted by play time) stops: its own duration, else the next piece's
    start, at most MAX_WORD_S after its own."""
    ends = []
    for i, r in enumerate(pieces):
        start = r.play_s
        nxt = pieces[i + 1].play_s if i + 1 < len(pieces) else duration_s
        dur = r.duration_s
        ends.append(start + dur if not math.isnan(dur) else min(nxt, start + MAX_WORD_S))
    return ends


def _words_rule(case_id: str, rows: Sequence[ModelText], duration_s: float) -> list[Word]:
    pieces = [r for r in rows if not r.dropped and r.text.strip() and r.play_s < duration_s]
    pieces.sort(key=lambda r: r.play_s)
    out = []
    for r, end in zip(pieces, _piece_ends(pieces, duration_s)):
        for token in r.text.split():
            out.append(Word(case_id, "model", token, r.play_s, min(end, duration_s), "model_text"))
    return out


def _audio_spans(log: Session) -> list[tuple[float, float]]:
    """The stretches of played model audio (merged), each chunk cut at the flush that followed it."""
    sr = float(log.info.sample_rate_hz)
    flush_ts = sorted(f.t_s for f in log.flushes)
    spans = []
    for c in log.model_chunks:
        start, end = c.play_start_s, c.play_start_s + c.n_samples / sr
        cut = next((t for t in flush_ts if t >= c.arrival_s), math.inf)
        if min(end, cut) > start:
            spans.append((start, min(end, cut)))
    merged: list[tuple[float, float]] = []
    for s, e in sorted(spans):
        if merged and s <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], e))
        else:
            merged.append((s, e))
    return merged


def _longest_silence(spans: list[tuple[float, float]], a: float, b: float) -> float:
    """The longest stretch inside [a, b] with no model audio playing."""
    longest, t = 0.0, a
    for s, e in spans:
        if e <= t:
            continue
        if s >= b:
            break
        longest = max(longest, s - t)
        t = max(t, e)
    return max(longest, b - t)


def _pieces_rule(case_id: str, log: Session, duration_s: float) -> list[Word]:
    kept = sorted(
        (r for r in log.model_text if not r.dropped and r.text.strip()), key=lambda r: r.play_s
    )
    end_of = {id(r): e for r, e in zip(kept, _piece_ends(kept, duration_s))}
    flushes = [f.t_s for f in log.flushes if f.n_dropped > 0]
    spans = _audio_spans(log)
    groups: list[list[Any]] = []  # [text, first piece, last piece] per word
    open_word = False
    for r in log.model_text:  # stream order: the order the model produced them
        if r.dropped:
            open_word = False  # never played: left out, and it ends the word played before it
            continue
        if open_word:
            a, b = groups[-1][2].play_s, r.play_s
            if any(a < t <= b for t in flushes) or _longest_silence(spans, a, b) >= PAUSE_S:
                open_word = False
        for part in re.split(r"(\s+)", r.text):
            if not part:
                continue
            if part.isspace():
                open_word = False
            elif open_word:
                groups[-1][0] += part
                groups[-1][2] = r
            else:
                groups.append([part, r, r])
                open_word = True
    out = []
    for text, first, last in groups:
        start = first.play_s
        if start >= duration_s:
            continue
        cut = next(
            (t for t in flushes if t > start), math.inf
        )  # where its audio was cut, if it was
        out.append(
            Word(
                case_id,
                "model",
                text,
                start,
                min(max(start, end_of[id(last)]), cut, duration_s),
                "model_text",
            )
        )
    return out
