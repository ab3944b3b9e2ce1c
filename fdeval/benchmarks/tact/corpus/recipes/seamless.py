"""Seamless Interaction: face-to-face dyads, one WAV and one JSON per participant.

The repository's README (facebookresearch/seamless_interaction) lays a downloaded batch out as
`<label>/<split>/<batch>/<archive>/V<vendor>_S<session>_I<interaction>_P<participant>.<ext>`
with `.wav` (48 kHz, the participant's own denoised audio), `.json`, `.npz` and `.mp4`. The two
participants of an interaction share the `V.._S.._I..` prefix. Their JSON's
`metadata:transcript` is a list of segments `{start, end, transcript, words: [{word, start, end,
score}]}` in seconds; we take the words (a segment without words becomes a turn). Files are found
at any depth, so the README's other tree (`<split>/audio/`, `<split>/transcript/` folders) works
as long as a participant's `.json` sits beside their `.wav`; without it the speech comes from VAD.
An interaction with one participant on disk is skipped with a warning. Demographics
(`participants.csv`) are not read: its columns are not documented in the README.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ..audio import mono_channel, pair_mono, suffix_key
from ..records import Conversation, CorpusFileError, Speaker, Transcript, Turn, Word
from ._common import Recipe, log, none_found, require_dir

LAYOUT = """\
<root>/<label>/<split>/<batch>/<archive>/V<v>_S<s>_I<i>_P<p>.wav   48 kHz, one participant (any depth)
<root>/.../V<v>_S<s>_I<i>_P<p>.json    beside it: metadata:transcript segments with word times
"""
FILE_ID = r"(?P<conv>V\d+_S\d+_I\d+)_(?P<side>P\d+)"
TRANSCRIPT_KEY = "metadata:transcript"


def _time(path: Path, v: Any, field: str) -> float:
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v < 0:
        raise CorpusFileError(path, None, f"expected a time in seconds >= 0, got {v!r}", field)
    return float(v)


def read_participant(
    path: Path, conversation_id: str, speaker: str
) -> tuple[list[Word], list[Turn]]:
    """One participant's words (and word-less segments as turns) from their JSON."""
    try:
        d = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as e:
        raise CorpusFileError(
            path, None, f"cannot read: {getattr(e, 'strerror', None) or e}"
        ) from None
    except json.JSONDecodeError as e:
        raise CorpusFileError(
            path, e.lineno, f"invalid JSON at column {e.colno}: {e.msg}"
        ) from None
    segs = d.get(TRANSCRIPT_KEY, []) if isinstance(d, dict) else None
    if not isinstance(segs, list):
        raise CorpusFileError(
            path, None, "expected an object whose metadata:transcript is a list", TRANSCRIPT_KEY
        )
    words, turns = [], []
    for i, seg in enumerate(segs):
        at = f"{TRANSCRIPT_KEY}[{i}]"
        if not isinstance(seg, dict):
            raise CorpusFileError(path, None, "expected a segment object", at)
        ws = seg.get("words") or []
        if not isinstance(ws, list):
            raise CorpusFileError(path, None, "expected a list", f"{at}.words")
        for j, w in enumerate(ws):
            if not isinstance(w, dict) or not isinstance(w.get("word"), str):
                raise CorpusFileError(path, None, "expected {word, start, end}", f"{at}.words[{j}]")
            a, b = (
                _time(path, w.get("start"), f"{at}.words[{j}].start"),
                _time(path, w.get("end"), f"{at}.words[{j}].end"),
            )
            if b < a:
                raise CorpusFileError(
                    path, None, f"end {b:g} is before start {a:g}", f"{at}.words[{j}].end"
                )
            if w["word"].strip():
                words.append(Word(conversation_id, speaker, w["word"].strip(), a, b))
        if not ws:
            a, b = (
                _time(path, seg.get("start"), f"{at}.start"),
                _time(path, seg.get("end"), f"{at}.end"),
            )
            text = seg.get("transcript", "")
            turns.append(
                Turn(conversation_id, speaker, a, b, text.strip() if isinstance(text, str) else "")
            )
    return words, turns


def conversations(root: Path) -> Iterator[Conversation]:
    require_dir(root, "seamless")
    groups = pair_mono(
        (p for p in root.rglob("*.wav") if re.fullmatch(FILE_ID, p.stem)), suffix_key(FILE_ID)
    )
    if not groups:
        raise none_found(root, "seamless", LAYOUT)
    for conv, sides in groups.items():
        if len(sides) != 2:
            log.warning(
                "seamless: interaction %s has %d participant file(s), not 2: skipped",
                conv,
                len(sides),
            )
            continue
        chans = (mono_channel(conv, sides[0][1]), mono_channel(conv, sides[1][1]))
        speakers = (Speaker(conv, sides[0][0]), Speaker(conv, sides[1][0]))
        words: list[Word] = []
        turns: list[Turn] = []
        worded = 0  # participants whose transcript has word times
        jsons = [p.with_suffix(".json") for _, p in sides]
        for (side, _), js in zip(sides, jsons):
            if js.is_file():
                w, t = read_participant(js, conv, side)
                words, turns, worded = words + w, turns + t, worded + bool(w)
        transcript = None
        if words or turns:
            transcript = Transcript(
                conv,
                str(jsons[0].parent),
                (sides[0][0], sides[1][0]),
                tuple(sorted(words, key=lambda w: w.start_s)),
                tuple(sorted(turns, key=lambda t: t.start_s)),
            )
        # Word times for one participant only would hide the other's speech from the finder.
        speech = "" if worded in (0, 2) else "vad"
        yield Conversation(conv, chans, speakers, transcript, speech=speech)


RECIPE = Recipe(
    "seamless",
    "Seamless Interaction (Meta)",
    LAYOUT,
    "github.com/facebookresearch/seamless_interaction README (file naming and modalities); "
    "transcript JSON keys from public code that reads it",
    conversations,
)
