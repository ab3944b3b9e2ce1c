"""From a corpus to TACT episodes: mine the decision points, then import the labelled ones.

`prepare` takes a recipe's `Conversation`s and writes, under the output folder:

    audio/<conversation>.wav       both channels at 16 kHz (channel 0, channel 1), for the importer
    words/<conversation>.json      the importer's word file (words, or texted turns), if any text
    conversations.jsonl            one line per conversation: its sources with their own sample
                                   rates, its speakers, where its speech came from, its points
    decision_points.jsonl          every decision point found: what the annotators label

Only conversations with at least one point get their audio written (a conversation without one
adds nothing to an episode or a profile). `import_labelled` then joins the points with the
annotators' labels file (`labels.py`) into `annotations.jsonl`, the rows
`fdeval.benchmarks.tact.importer.import_corpus` reads, lists the points left without labels in
`unlabelled.txt`, and imports the rows into `data/import-<hash>/` (episodes/ and audio/): the hash
covers the rows, the context and the importer's version, so new labels never meet episodes
imported from old ones. Re-running writes the same files; episodes already imported are kept.
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from collections.abc import Iterable
from itertools import islice
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tqdm import tqdm

from fdeval.audio.io import write_wav
from fdeval.audio.vad import SileroVAD
from fdeval.files import write_json_atomic, write_text_atomic

from ..importer import IMPORTER_VERSION, import_corpus
from ..profiles import vad_segments
from .audio import duration_s, load_two_channel
from .finder import DecisionPoint, FinderSettings, find_decision_points
from .labels import read_labels
from .records import Conversation, CorpusFileError

AUDIO_DIR, WORDS_DIR, DATA_DIR = "audio", "words", "data"
CONVERSATIONS, POINTS, ANNOTATIONS, UNLABELLED = (
    "conversations.jsonl",
    "decision_points.jsonl",
    "annotations.jsonl",
    "unlabelled.txt",
)
ROUND = 4  # decimals of the times written (0.1 ms)


@dataclass(frozen=True)
class Prepared:
    """What `prepare` wrote: how many conversations, and every decision point."""

    out_dir: Path
    n_conversations: int
    points: tuple[DecisionPoint, ...]

    def by_category(self) -> dict[str, int]:
        return dict(sorted(Counter(p.category for p in self.points).items()))


@dataclass(frozen=True)
class Imported:
    """What `import_labelled` did: the rows written, the points left out, the episodes' folder."""

    annotations: Path
    root: Path
    n_rows: int
    n_written: int
    unlabelled: tuple[str, ...]


def _jsonl(path: Path, rows: Iterable[dict[str, Any]]) -> None:
    write_text_atomic(path, "".join(json.dumps(r) + "\n" for r in rows))


def _speaker(conv: Conversation, ch: int) -> dict[str, str]:
    s = conv.speakers[ch]
    return {
        "id": s.speaker_id,
        "gender": s.gender,
        "age_band": s.age_band,
        "l1_region": s.l1_region,
    }


def _channel_speech(conv: Conversation) -> list[list[tuple[float, float]]]:
    """Each channel's speech from the transcript (words or turns, as `speech_source` says)."""
    t = conv.transcript
    items = (t.words if conv.speech_source == "words" else t.turns) if t is not None else ()
    speech: list[list[tuple[float, float]]] = [[], []]
    for it in items:
        ch = conv.channel_of(it.speaker)
        if ch is not None:
            speech[ch].append((it.start_s, it.end_s))
    return speech


def _word_file(conv: Conversation) -> list[dict[str, Any]]:
    """The importer's word entries: the words, or (a turn-level transcript) the turns with text."""
    t = conv.transcript
    if t is None:
        return []
    items = t.words if t.words else tuple(u for u in t.turns if u.text.strip())
    out = []
    for it in items:
        ch = conv.channel_of(it.speaker)
        if ch is not None and it.text.strip():
            out.append(
                {
                    "channel": ch,
                    "text": it.text,
                    "start_s": round(it.start_s, ROUND),
                    "end_s": round(it.end_s, ROUND),
                }
            )
    return out


def prepare(
    conversations: Iterable[Conversation],
    out_dir: str | Path,
    settings: FinderSettings = FinderSettings(),
    limit: int | None = None,
    progress: bool = False,
) -> Prepared:
    """Find every conversation's decision points and write what the importer needs (module docstring)."""
    out = Path(out_dir)
    vad: SileroVAD | None = None
    manifest, point_rows, points = [], [], []
    seen: set[str] = set()
    n = 0
    for conv in tqdm(
        islice(conversations, limit), desc="conversations", disable=not progress, leave=False
    ):
        cid = conv.conversation_id
        if cid in seen:
            raise CorpusFileError(
                conv.channels[0].path, None, f"a second conversation with id {cid!r}"
            )
        seen.add(cid)
        n += 1
        audio = None
        if conv.speech_source == "vad":
            audio = load_two_channel(cid, conv.channels)
            vad = vad or SileroVAD()
            speech = [
                vad_segments(audio.samples[:, ch], audio.sample_rate_hz, vad) for ch in (0, 1)
            ]
            length = audio.duration_s
        else:
            speech = _channel_speech(conv)
            length = duration_s(conv.channels)
        found = find_decision_points(cid, speech, length, settings, conv.others_s)
        audio_rel = words_rel = None
        if found:
            audio = audio if audio is not None else load_two_channel(cid, conv.channels)
            audio_rel = f"{AUDIO_DIR}/{cid}.wav"
            write_wav(out / audio_rel, audio.samples, audio.sample_rate_hz)
            entries = _word_file(conv)
            if entries:
                words_rel = f"{WORDS_DIR}/{cid}.json"
                write_json_atomic(out / words_rel, entries)
        manifest.append(
            {
                "conversation_id": cid,
                "audio": audio_rel,
                "words": words_rel,
                "sample_rate_hz": audio.sample_rate_hz if audio is not None else None,
                "duration_s": round(length, ROUND),
                "channels": [
                    {
                        "path": src.path,
                        "channel": src.channel,
                        "sample_rate_hz": src.sample_rate_hz,
                        "speaker": _speaker(conv, k),
                    }
                    for k, src in enumerate(conv.channels)
                ],
                "transcript": conv.transcript.path if conv.transcript is not None else None,
                "speech": conv.speech_source,
                "third_party_segments": len(conv.others_s),
                "points": len(found),
            }
        )
        for p in found:
            point_rows.append(
                {
                    "id": p.point_id,
                    "conversation_id": cid,
                    "audio": audio_rel,
                    "words": words_rel,
                    "focal_channel": p.focal_channel,
                    "speaker": _speaker(conv, p.focal_channel),
                    "decision_s": round(p.decision_s, ROUND),
                    "category": p.category,
                    "context_s": round(p.context_s, ROUND),
                    "turn_start_s": round(p.turn_start_s, ROUND),
                    "interruption": None
                    if p.prompt_end_s is None
                    else {
                        "prompt_end_s": round(p.prompt_end_s, ROUND),
                        "cut_in_start_s": round(p.cut_in_start_s, ROUND),
                    },
                    "rule": p.rule,
                }
            )
        points += found
    out.mkdir(parents=True, exist_ok=True)
    _jsonl(out / CONVERSATIONS, manifest)
    _jsonl(out / POINTS, point_rows)
    return Prepared(out, n, tuple(points))


def read_points(out_dir: str | Path) -> list[dict[str, Any]]:
    """The rows of `decision_points.jsonl` as `prepare` wrote them."""
    path = Path(out_dir) / POINTS
    try:
        return [
            json.loads(line)
            for line in path.read_text(encoding="utf-8").splitlines()
            if line.strip()
        ]
    except (OSError, json.JSONDecodeError) as e:
        raise CorpusFileError(
            path, None, f"cannot read the decision points ({e}); run the recipe first"
        ) from None


def annotation_row(point: dict[str, Any], labels: dict[str, Any]) -> dict[str, Any]:
    """The importer's row for one labelled decision point."""
    row = {
        "episode_id": point["id"],
        "audio": point["audio"],
        "focal_channel": point["focal_channel"],
        "decision_s": point["decision_s"],
        "category": point["category"],
        "speaker": point["speaker"],
        "context_s": point["context_s"],
        **labels,
    }
    if point.get("words"):
        row["words"] = point["words"]
    if point.get("interruption"):
        row["interruption"] = point["interruption"]
    return row


def import_labelled(
    out_dir: str | Path,
    labels_path: str | Path,
    context_s: float = FinderSettings().context_s,
    progress: bool = False,
) -> Imported:
    """Write the labelled points' rows, list the unlabelled ones, import the rows (module docstring)."""
    out = Path(out_dir)
    points = read_points(out)
    labels = read_labels(labels_path, {p["id"]: p["context_s"] for p in points})
    rows = [annotation_row(p, labels[p["id"]]) for p in points if p["id"] in labels]
    unlabelled = tuple(p["id"] for p in points if p["id"] not in labels)
    write_text_atomic(out / UNLABELLED, "".join(f"{pid}\n" for pid in unlabelled))
    if not rows:
        raise CorpusFileError(
            labels_path, None, f"labels none of the {len(points)} decision points in {out / POINTS}"
        )
    _jsonl(out / ANNOTATIONS, rows)
    h = hashlib.sha256((out / ANNOTATIONS).read_bytes())
    h.update(f"|{context_s}|{IMPORTER_VERSION}".encode())
    root = out / DATA_DIR / f"import-{h.hexdigest()[:12]}"
    n = import_corpus(out / ANNOTATIONS, root, context_s=context_s, progress=progress)
    return Imported(out / ANNOTATIONS, root, len(rows), n, unlabelled)


__all__ = [
    "ANNOTATIONS",
    "CONVERSATIONS",
    "Imported",
    "POINTS",
    "Prepared",
    "UNLABELLED",
    "annotation_row",
    "import_labelled",
    "prepare",
    "read_points",
]
