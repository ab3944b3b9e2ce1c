"""Build a session's transcript from its test case and HDF5 log, with exact word times.

User words come from the TTS word timings of each turn, moved to where the turn was placed in
the recording (and cut where a yield turn stopped). Model words come from the model's own text
stream, at the time their audio was played; pieces whose audio was dropped by a flush are left
out. Models that return no text need an ASR backend instead (see `fdeval.transcript.asr`).
"""

from __future__ import annotations

import math
from pathlib import Path

from fdeval.orchestrator.recorder import read_session_log
from fdeval.types import PlayedTurn, TestCase, Transcript, Word

# A text piece without a duration is assumed to last until the next piece, at most this long.
MAX_WORD_S = 0.6


def build_transcript(case: TestCase, log_path: Path, model_words: list[Word] | None = None) -> Transcript:
    """The session transcript; `model_words` (e.g. from ASR on the model channel) replace the
    model's own text stream when given."""
    log = read_session_log(log_path)
    duration_s = float(log["attrs"]["duration_s"])
    words: list[Word] = []
    played: list[PlayedTurn] = []
    for row in log["turns"]:
        turn = case.turns[int(row["index"])]
        start = float(row["start_s"])
        if math.isnan(start):
            continue
        end = float(row["end_s"])
        turn_words = [w for w in turn.words if start + w.start_s < end]
        for w in turn_words:
            words.append(Word(case.case_id, "user", w.text, start + w.start_s, min(start + w.end_s, end), "tts", turn.index))
        played.append(
            PlayedTurn(
                case_id=case.case_id, index=turn.index, label=turn.label, turn_type=turn.turn_type,
                subtype=turn.subtype, start_s=start, end_s=end, scheduled_s=float(row["scheduled_s"]),
                cut_short=bool(row["cut_short"]), n_words_total=len(turn.words), n_words_played=len(turn_words),
                triggers_s=tuple((tr.kind, start + tr.at_s) for tr in turn.triggers if start + tr.at_s < end),
            )
        )
    if model_words is not None:
        words.extend(w for w in model_words if w.start_s < duration_s)
        words.sort(key=lambda w: (w.start_s, w.speaker))
        return Transcript(case.case_id, tuple(words), tuple(played), duration_s)
    pieces = [r for r in log["model_text"] if not r["dropped"] and r["text"].strip() and r["play_s"] < duration_s]
    pieces.sort(key=lambda r: r["play_s"])
    for i, r in enumerate(pieces):
        start = float(r["play_s"])
        nxt = float(pieces[i + 1]["play_s"]) if i + 1 < len(pieces) else duration_s
        dur = float(r["duration_s"])
        end = start + dur if not math.isnan(dur) else min(nxt, start + MAX_WORD_S)
        for token in r["text"].split():
            words.append(Word(case.case_id, "model", token, start, min(end, duration_s), "model_text"))
    words.sort(key=lambda w: (w.start_s, w.speaker))
    return Transcript(case.case_id, tuple(words), tuple(played), duration_s)
