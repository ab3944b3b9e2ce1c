"""A two-speaker conversation synthesised with espeak-ng, with its decision points planted, and
writers of the transcript and audio files the TACT corpus tests lay out (TextGrid, CTM, RTTM,
fdeval word JSON; WAV, FLAC, MP3). Synthesised once per test process (`planned_conversation` is cached), so
every module that builds a corpus tree from it shares the same audio.

The plan (A is channel 0, B channel 1; each line's timing is relative to an earlier line) puts
one point of every category where the finder's rules must find it, and nothing else that could
be one: the two openers end before the 8 s context fits, the other ends fall in no category.
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import soundfile as sf

from fdeval.audio.io import write_wav
from fdeval.audio.resample import resample
from fdeval.audio.tts import EspeakTTS

RATE = 16000
VOICES = ("en-us+m3", "en-us+f1", "en+m1")  # A, B and a third person (AMI)
TAIL_S = 6.0  # silence after the last line of A and B: their horizons fit
# (speaker, text, anchor): ("at", t) | ("after", k, gap) from line k's end | ("from_start", k, d) | ("before_end", k, d)
PLAN = (
    (1, "So tell me all about your long weekend away at the lake house.", ("at", 1.0)),  # 0
    (0, "We drove up there late on Friday night.", ("after", 0, 0.4)),  # 1
    (0, "It took us almost four hours to get there.", ("after", 1, 0.3)),  # 2 pause
    (0, "The cabin was right on the water.", ("after", 2, 1.2)),  # 3 backchannel
    (1, "Wow.", ("before_end", 3, 0.3)),  # 4 token
    (0, "We went swimming every single morning.", ("after", 3, 0.7)),  # 5 smooth
    (1, "That sounds absolutely wonderful to me.", ("after", 5, 0.25)),  # 6
    (1, "I have not been swimming outside in years and years now.", ("after", 6, 0.3)),  # 7
    (0, "Hold on did you really say years and years?", ("from_start", 7, 1.2)),  # 8 interruption
    (1, "Yes it has been a very long time.", ("after", 8, 0.3)),  # 9 smooth (B)
    (0, "Well you should come with us next time then.", ("after", 9, 0.5)),  # 10 smooth
    (1, "I would love that.", ("after", 10, 0.4)),  # 11
    (2, "Sorry I am late everyone.", ("after", 11, 2.0)),  # 12 third person
)
PLANTED = (
    (2, "pause_handling"),
    (3, "backchanneling"),
    (5, "smooth_turn_taking"),
    (8, "user_interruption"),
    (9, "smooth_turn_taking"),
    (10, "smooth_turn_taking"),
)  # (line whose end is the point, category)
THIRD = 12


@dataclass(frozen=True)
class Line:
    speaker: int
    text: str
    start_s: float
    end_s: float
    words: tuple[
        tuple[str, float, float], ...
    ]  # (text, start_s, end_s) on the conversation clock; some last 0 s


@dataclass(frozen=True, eq=False)
class Planned:
    lines: tuple[Line, ...]
    tracks: np.ndarray  # (n, 3) at RATE: A, B, the third person
    duration_s: float

    def points(self, drop: tuple[int, ...] = ()) -> list[tuple[int, float, str]]:
        """The planted points as (focal channel, decision_s, category), in time order (the finder's)."""
        return sorted(
            (
                (self.lines[k].speaker, self.lines[k].end_s, cat)
                for k, cat in PLANTED
                if k not in drop
            ),
            key=lambda p: (p[1], p[0]),
        )

    def pair(self, rate: int = RATE) -> np.ndarray:
        """A and B as a stereo (n, 2) signal at `rate`."""
        x = self.tracks[:, :2]
        return x if rate == RATE else resample(x, RATE, rate)

    def channel(self, k: int, rate: int = RATE) -> np.ndarray:
        x = self.tracks[:, k]
        return x if rate == RATE else resample(x, RATE, rate)

    def words(self, speaker: int) -> list[tuple[str, float, float]]:
        return [w for ln in self.lines if ln.speaker == speaker for w in ln.words]


@functools.lru_cache(maxsize=1)
def planned_conversation() -> Planned:
    tts = [EspeakTTS(voice=v) for v in VOICES]
    lines: list[Line] = []
    samples: list[np.ndarray] = []
    for speaker, text, anchor in PLAN:
        syn = tts[speaker].synthesize(text)
        kind = anchor[0]
        start = (
            anchor[1]
            if kind == "at"
            else lines[anchor[1]].end_s + anchor[2]
            if kind == "after"
            else lines[anchor[1]].start_s + anchor[2]
            if kind == "from_start"
            else lines[anchor[1]].end_s - anchor[2]
        )
        start = round(start * RATE) / RATE
        words = tuple(
            (w.text, round(start + w.start_s, 4), round(start + w.end_s, 4)) for w in syn.words
        )
        lines.append(Line(speaker, text, start, max(b for _, _, b in words), words))
        samples.append(syn.samples)
    # the tail follows A and B; the third person's line ends inside it
    duration = max(
        max(ln.end_s for ln in lines if ln.speaker < 2) + TAIL_S, lines[THIRD].end_s + 0.5
    )
    tracks = np.zeros((int(round(duration * RATE)), 3), np.float32)
    for k, ln in enumerate(lines):
        i = int(round(ln.start_s * RATE))
        s = samples[k]
        tracks[i : i + s.size, ln.speaker] += s
    planned = Planned(tuple(lines), tracks, tracks.shape[0] / RATE)
    _check_plan(planned)
    return planned


def _check_plan(p: Planned) -> None:
    """The timing facts the planted points rely on (espeak-ng's durations are not ours to set)."""
    ln = p.lines
    assert ln[1].end_s < 8.0 <= ln[2].end_s, (
        "line 1 must end before the 8 s context fits, line 2 after"
    )
    assert ln[7].end_s - ln[8].start_s > 0.5, (
        "B's long line must outlast A's cut-in start by over 0.5 s"
    )
    assert ln[8].end_s - ln[8].start_s > 1.0 and ln[7].end_s - ln[7].start_s > 1.0
    assert ln[12].end_s + 5.0 > p.duration_s, (
        "the third person's line must leave no horizon for a point of theirs"
    )


# --- transcript writers ------------------------------------------------------------------------


def _q(s: str) -> str:
    return '"' + s.replace('"', '""') + '"'


def write_textgrid(
    path: Path,
    tiers: dict[str, list[tuple[str, float, float]]],
    duration_s: float,
    short: bool = False,
) -> Path:
    """A TextGrid with one interval tier per speaker (gaps filled with empty intervals; a word of
    no length, which an interval cannot be, joins the next word's interval)."""
    filled = {}
    for name, words in tiers.items():
        ivs, t, pending = [], 0.0, ""
        for text, a, b in sorted(words, key=lambda w: w[1]):
            if b <= a:
                pending += text + " "
                continue
            if a > t:
                ivs.append((t, a, ""))
            ivs.append((a, b, pending + text))
            t, pending = b, ""
        if t < duration_s:
            ivs.append((t, duration_s, ""))
        filled[name] = ivs
    if short:
        out = [
            'File type = "ooTextFile"',
            'Object class = "TextGrid"',
            "",
            "0",
            f"{duration_s}",
            "<exists>",
            f"{len(filled)}",
        ]
        for name, ivs in filled.items():
            out += ['"IntervalTier"', _q(name), "0", f"{duration_s}", f"{len(ivs)}"]
            for a, b, text in ivs:
                out += [f"{a}", f"{b}", _q(text)]
    else:
        out = [
            'File type = "ooTextFile"',
            'Object class = "TextGrid"',
            "",
            "xmin = 0 ",
            f"xmax = {duration_s} ",
            "tiers? <exists> ",
            f"size = {len(filled)} ",
            "item []: ",
        ]
        for k, (name, ivs) in enumerate(filled.items(), start=1):
            out += [
                f"    item [{k}]:",
                '        class = "IntervalTier" ',
                f"        name = {_q(name)} ",
                "        xmin = 0 ",
                f"        xmax = {duration_s} ",
                f"        intervals: size = {len(ivs)} ",
            ]
            for j, (a, b, text) in enumerate(ivs, start=1):
                out += [
                    f"        intervals [{j}]:",
                    f"            xmin = {a} ",
                    f"            xmax = {b} ",
                    f"            text = {_q(text)} ",
                ]
    path.write_text("\n".join(out) + "\n", encoding="utf-8")
    return path


def write_ctm(path: Path, conv: str, tiers: dict[str, list[tuple[str, float, float]]]) -> Path:
    rows = sorted((a, ch, text, b) for ch, words in tiers.items() for text, a, b in words)
    path.write_text(
        ";; conversation words\n"
        + "".join(f"{conv} {ch} {a:.3f} {b - a:.3f} {text} 0.95\n" for a, ch, text, b in rows),
        encoding="utf-8",
    )
    return path


def write_rttm(path: Path, conv: str, turns: dict[str, list[tuple[float, float]]]) -> Path:
    rows = sorted((a, name, b) for name, ts in turns.items() for a, b in ts)
    path.write_text(
        "".join(
            f"SPEAKER {conv} 1 {a:.3f} {b - a:.3f} <NA> <NA> {name} <NA> <NA>\n"
            for a, name, b in rows
        ),
        encoding="utf-8",
    )
    return path


def write_json_words(path: Path, tiers: dict[int, list[tuple[str, float, float]]]) -> Path:
    items = sorted(
        (
            {"channel": ch, "text": t, "start_s": a, "end_s": b}
            for ch, ws in tiers.items()
            for t, a, b in ws
        ),
        key=lambda w: w["start_s"],
    )
    path.write_text(json.dumps(items, indent=1), encoding="utf-8")
    return path


def write_audio(path: Path, x: np.ndarray, rate: int) -> Path:
    """WAV through fdeval's writer; FLAC and MP3 through soundfile (by the path's suffix)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.suffix == ".wav":
        write_wav(path, x, rate)
    else:
        sf.write(str(path), np.clip(x, -1, 1), rate, format=path.suffix[1:].upper())
    return path


def labels_for(points: list[dict], skip: int = 1) -> list[dict]:
    """Annotator labels for every decision point but the first `skip` (a plausible panel of three)."""
    by_cat = {
        "pause_handling": "hold",
        "backchanneling": "bck",
        "smooth_turn_taking": "ans",
        "user_interruption": "ans",
    }
    out = []
    for p in points[skip:]:
        z = by_cat[p["category"]]
        out.append(
            {
                "id": p["id"],
                "labels": [z, z, "ref"],
                "silence_acceptability": [0.1, 0.2, 0.5],
                "onset_windows": [[[0.0, 1.0]], [], [[0.5, 2.0]]],
                "completion_marks": [[0.0], [], [-0.5]],
            }
        )
    return out
