"""CANDOR: 1,656 video calls between strangers, with surveys (BetterUp's release).

Each conversation is a folder named by its UUID. We read `processed/<uuid>.mp3` (the call's audio,
stereo, one participant per channel; a `.wav` or `.flac` of the same stem is taken first if you
converted it), `processed/channel_map.json` (`{"L": <user_id>, "R": <user_id>}`: who is on which
channel), `transcription/transcript_audiophile.csv` (turns: `speaker` = user id, `start`, `stop`,
`utterance`; further columns ignored) and, when present, `survey.csv` (one row per participant:
`user_id`, `sex`, `age`; further columns ignored). This layout is what public code that reads the
release uses; the BetterUp data dictionary itself was not available to check it against.

The transcript is turn-level (its turns run across pauses), so the finder reads each channel's
speech with Silero VAD; the turns give the history's text. The importer then also reads them as
its word file: one entry per turn, so a speaker's articulation rate counts the pauses inside
turns as speaking time (an underestimate) while the history is the transcript's own.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

from ..audio import stereo_channels
from ..records import Conversation, CorpusFileError, Speaker, Transcript, Turn, UNKNOWN, safe_id
from ._common import Recipe, age_band, gender, none_found, number, read_csv_rows, require_dir

LAYOUT = """\
<root>/<uuid>/processed/<uuid>.mp3                          stereo call audio (L, R)
<root>/<uuid>/processed/channel_map.json                    {"L": user_id, "R": user_id}
<root>/<uuid>/transcription/transcript_audiophile.csv       turn_id, speaker, start, stop, utterance, ...
<root>/<uuid>/survey.csv                                    optional: user_id, sex, age, ...
"""
AUDIO_EXTS = (".wav", ".flac", ".mp3")  # a converted copy first, the release's MP3 last
TURN_COLUMNS = ("speaker", "start", "stop", "utterance")


def read_turns(path: Path, conversation_id: str) -> list[Turn]:
    """The turns of a CANDOR transcript CSV (speaker is the user id)."""
    turns = []
    for line, row in read_csv_rows(path, TURN_COLUMNS):
        a = number(path, line, row["start"], "start")
        b = number(path, line, row["stop"], "stop")
        if b < a:
            raise CorpusFileError(path, line, f"{b:g} is before start {a:g}", "stop")
        speaker = (row["speaker"] or "").strip()
        if not speaker:
            raise CorpusFileError(path, line, "empty speaker", "speaker")
        turns.append(
            Turn(conversation_id, speaker, a, b, " ".join((row["utterance"] or "").split()))
        )
    return turns


def read_survey(path: Path) -> dict[str, tuple[str, str]]:
    """user id -> (gender, age band) from a conversation's survey.csv."""
    return {
        row["user_id"].strip(): (gender(row.get("sex")), age_band(row.get("age")))
        for _, row in read_csv_rows(path, ("user_id",))
        if (row.get("user_id") or "").strip()
    }


def _channel_map(path: Path) -> tuple[str, str]:
    try:
        d = json.loads(path.read_text(encoding="utf-8"))
    except OSError as e:
        raise CorpusFileError(path, None, f"cannot read: {e.strerror or e}") from None
    except json.JSONDecodeError as e:
        raise CorpusFileError(
            path, e.lineno, f"invalid JSON at column {e.colno}: {e.msg}"
        ) from None
    if not isinstance(d, dict) or not all(
        isinstance(d.get(k), str) and d[k].strip() for k in ("L", "R")
    ):
        raise CorpusFileError(path, None, 'expected {"L": <user_id>, "R": <user_id>}')
    return d["L"].strip(), d["R"].strip()


def conversations(root: Path) -> Iterator[Conversation]:
    require_dir(root, "candor")
    folders = sorted(d for d in root.iterdir() if (d / "processed").is_dir())
    if not folders:
        raise none_found(root, "candor", LAYOUT)
    for d in folders:
        conv = safe_id(d.name)
        audio = next(
            (p for ext in AUDIO_EXTS if (p := d / "processed" / f"{d.name}{ext}").is_file()), None
        )
        if audio is None:
            raise CorpusFileError(
                d / "processed", None, f"no {d.name}.mp3 (nor .wav, .flac): the call's audio"
            )
        users = _channel_map(d / "processed" / "channel_map.json")
        survey = read_survey(d / "survey.csv") if (d / "survey.csv").is_file() else {}
        speakers = tuple(
            Speaker(conv, safe_id(u), *survey.get(u, (UNKNOWN, UNKNOWN))) for u in users
        )
        csv_path = d / "transcription" / "transcript_audiophile.csv"
        transcript = None
        if csv_path.is_file():
            ids = {u: safe_id(u) for u in users}
            turns = [
                Turn(conv, ids[t.speaker], t.start_s, t.end_s, t.text)
                for t in read_turns(csv_path, conv)
                if t.speaker in ids
            ]
            transcript = Transcript(conv, str(csv_path), tuple(ids.values()), (), tuple(turns))
        yield Conversation(conv, stereo_channels(conv, audio), speakers, transcript, speech="vad")  # type: ignore[arg-type]


RECIPE = Recipe(
    "candor",
    "CANDOR (BetterUp)",
    LAYOUT,
    "public code reading the release (folder names, channel_map.json, the audiophile CSV's columns); "
    "survey.csv columns from ConvoKit's CANDOR notes; not checked against the data dictionary",
    conversations,
)
