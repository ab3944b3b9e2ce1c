"""What every recipe shares: the `Recipe` record, the generic folder layout, and the small
readers of speaker metadata. A recipe module only knows its corpus's layout."""

from __future__ import annotations

import csv
import logging
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from ..audio import AUDIO_SUFFIXES, mono_channel, pair_mono, stereo_channels, suffix_key
from ..records import Conversation, CorpusFileError, Speaker, Transcript, UNKNOWN, safe_id
from ..transcripts import read_transcript

log = logging.getLogger("fdeval")

# Transcript files looked for beside an audio file, in this order (same stem, these endings).
SIDECARS = (".TextGrid", ".textgrid", ".ctm", ".rttm", ".words.json", ".json")
SIDES = ("A", "B")  # the generic layout's channel names: <conv>_A.wav is channel 0
MFA_WORDS = " - words"  # Montreal Forced Aligner names its word tier "<speaker> - words"


@dataclass(frozen=True)
class Recipe:
    """A corpus's layout: how to find its conversations under a local copy's root.

    `layout` is the expected tree in a few lines (shown by `--list` and in docs/tact-corpora.md);
    `source` says where that layout comes from and how sure we are of it.
    """

    name: str
    corpus: str
    layout: str
    source: str
    conversations: Callable[[Path], Iterator[Conversation]]


def require_dir(root: Path, recipe: str) -> Path:
    if not root.is_dir():
        raise CorpusFileError(root, None, f"not a folder (the {recipe} corpus root)")
    return root


def none_found(root: Path, recipe: str, layout: str) -> CorpusFileError:
    first = layout.strip().splitlines()[0]
    return CorpusFileError(
        root, None, f"no conversation in the {recipe} layout here (expected {first.strip()} ...)"
    )


def sidecar(audio_stem: Path) -> Path | None:
    """The transcript beside an audio file (`<stem>.TextGrid`, `.ctm`, `.rttm`, `.words.json`, `.json`)."""
    for ext in SIDECARS:
        p = audio_stem.with_name(audio_stem.name + ext)
        if p.is_file():
            return p
    return None


def channel_labels(t: Transcript) -> tuple[str, str]:
    """Which of a transcript's speaker labels is channel 0 and which channel 1.

    A TextGrid's two interval tiers in file order (its `<speaker> - words` tiers when a forced
    aligner also wrote phone tiers); any other file's two labels sorted (CTM channels A/B or 1/2,
    RTTM names, JSON channels 0/1).
    """
    labels = t.speakers
    if t.path.lower().endswith(".textgrid"):
        words = tuple(s for s in labels if s.endswith(MFA_WORDS))
        labels = words if len(words) == 2 else labels
    else:
        labels = tuple(sorted(labels))
    if len(labels) != 2:
        raise CorpusFileError(
            t.path,
            None,
            f"needs the speech of 2 speakers (one per channel), found "
            f"{len(labels)}: {', '.join(map(repr, labels)) or 'none'}",
        )
    return labels[0], labels[1]


def two_speaker_transcript(path: Path, conv: str, speakers: tuple[Speaker, Speaker]) -> Transcript:
    """A transcript file relabelled to the speakers' ids (channel 0 first)."""
    t = read_transcript(path, conv)
    a, b = channel_labels(t)
    return t.relabel({a: speakers[0].speaker_id, b: speakers[1].speaker_id})


def folder_conversations(
    root: Path,
    recipe: str,
    layout: str,
    suffixes: tuple[str, ...] = AUDIO_SUFFIXES,
    pairs: bool = True,
) -> Iterator[Conversation]:
    """The generic layout: `<conv>.<ext>` stereo files, or `<conv>_A.<ext>` + `<conv>_B.<ext>` mono
    pairs in one folder (when `pairs`), each with an optional transcript beside it (`sidecar`).
    Speakers are `<conv>-A` and `<conv>-B`: the layout names nobody, so no profile spans two
    conversations."""
    require_dir(root, recipe)
    files = sorted(p for p in root.rglob("*") if p.suffix.lower() in suffixes and p.is_file())
    side_of = suffix_key()

    def key(p: Path) -> tuple[str, str] | None:  # sides pair up only inside one folder
        k = side_of(p)
        return (str(p.parent / k[0]), k[1]) if k else None

    groups = pair_mono(files, key) if pairs else {}
    paired = {p for sides in groups.values() if len(sides) == 2 for _, p in sides}
    units: list[tuple[Path, tuple[Path, ...]]] = []  # (conversation stem path, audio files)
    for stem, sides in groups.items():
        if len(sides) == 2 and tuple(s for s, _ in sides) == SIDES:
            units.append((Path(stem), tuple(p for _, p in sides)))
    units += [(p.with_suffix(""), (p,)) for p in files if p not in paired]
    if not units:
        raise none_found(root, recipe, layout)
    for stem, audio in sorted(units):
        conv = safe_id(stem.name)
        chans = (
            stereo_channels(conv, audio[0])
            if len(audio) == 1
            else (mono_channel(conv, audio[0]), mono_channel(conv, audio[1]))
        )
        speakers = (Speaker(conv, f"{conv}-{SIDES[0]}"), Speaker(conv, f"{conv}-{SIDES[1]}"))
        tr = sidecar(stem)
        yield Conversation(
            conv, chans, speakers, two_speaker_transcript(tr, conv, speakers) if tr else None
        )


# --- speaker metadata -------------------------------------------------------------------------

AGE_BANDS = ((29, "18-29"), (49, "30-49"))  # older: "50+" (the synthetic speakers' bands)


def gender(value: str | None) -> str:
    """ "f" / "m" from the usual spellings; anything else as written (lower case), or unknown."""
    v = (value or "").strip().lower()
    if v in ("f", "female", "woman", "w"):
        return "f"
    if v in ("m", "male", "man"):
        return "m"
    return safe_id(v) if v else UNKNOWN


def age_band(value: str | None) -> str:
    """An age in years as its band (18-29, 30-49, 50+); unknown when it is not a number."""
    try:
        age = float((value or "").strip())
    except ValueError:
        return UNKNOWN
    if age != age or age <= 0:
        return UNKNOWN
    return next((band for top, band in AGE_BANDS if age <= top), "50+")


def read_csv_rows(path: Path, required: tuple[str, ...]) -> Iterator[tuple[int, dict[str, str]]]:
    """(line, row) of a CSV file with a header that has every `required` column."""
    try:
        f = path.open(encoding="utf-8-sig", newline="")
    except OSError as e:
        raise CorpusFileError(path, None, f"cannot read: {e.strerror or e}") from None
    with f:
        reader = csv.DictReader(f)
        header = reader.fieldnames or []
        missing = [c for c in required if c not in header]
        if missing:
            raise CorpusFileError(
                path,
                1,
                f"the header has no column {', '.join(map(repr, missing))} "
                f"(it has {', '.join(header) or 'nothing'})",
            )
        try:
            for row in reader:
                yield reader.line_num, row
        except csv.Error as e:
            raise CorpusFileError(path, reader.line_num, f"not valid CSV: {e}") from None


def number(path: Path, line: int, value: str | None, field: str) -> float:
    try:
        x = float(value or "")
    except ValueError:
        raise CorpusFileError(path, line, f"expected a number, got {value!r}", field) from None
    if x != x or x in (float("inf"), float("-inf")):
        raise CorpusFileError(path, line, f"expected a finite number, got {value!r}", field)
    return x
