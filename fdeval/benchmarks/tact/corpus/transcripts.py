"""Transcript readers: Praat TextGrid, NIST CTM, RTTM and fdeval's JSON word files.

Each reader returns `Transcript` records (`records.py`) and raises `CorpusFileError` on the
first problem, in one line naming the file, the line and, where one applies, the field:

    call1.TextGrid:41: field 'item[2].intervals[7].xmax': expected a number, got '"1,5"'

* **TextGrid** (`read_textgrid`): Praat's long ("text") and short text formats, in UTF-8, UTF-16
  (with its byte-order mark) or, failing those, Latin-1. Both formats are the same sequence of
  values, the long one with labels around them, so one tokenizer reads both: quoted strings
  (`""` is a quote inside one, and a string may span lines), numbers and the `<exists>` flag
  count; labels and the `[k]` indices between them do not. Every interval tier is a speaker;
  its non-empty intervals are `Word`s (an interval may hold a phrase). Point tiers are skipped.
  Intervals must not run backwards or overlap the previous one.
* **CTM** (`read_ctm`): `<file> <channel> <start> <duration> <word> [<confidence> ...]`, one word
  a line; `;;` comments and blank lines skipped. The file field is the conversation, the channel
  field the speaker label; a file can hold many conversations.
* **RTTM** (`read_rttm`): `SPEAKER <file> <channel> <start> <duration> <ortho> <type> <name> ...`;
  only SPEAKER lines count (other line types are skipped), giving `Turn`s without text of the
  speaker `<name>`. The file field is the conversation.
* **JSON words** (`read_json_words`): the importer's word file, a JSON list of
  `{channel, text, start_s, end_s}`; the channel number ("0" or "1") is the speaker label. The
  line an item starts on is found by decoding the list item by item.

Speaker labels of CTM, RTTM and JSON files are listed sorted; a TextGrid's in tier order.
"""

from __future__ import annotations

import bisect
import json
import math
import re
from collections import defaultdict
from pathlib import Path

from .records import CorpusFileError, Transcript, Turn, Word

# A TextGrid token: a quoted string, a bracketed index (skipped), a flag, a number, a value-like
# word that is no number ("0,9": reported where a number is due), or a label word (skipped).
_TG_TOKEN = re.compile(
    r'"((?:[^"]|"")*)"'
    r"|(\[[^\]\n]*\])"
    r"|(<exists>|<absent>)"
    r"|([-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)(?![^\s\[\]\"<])"
    r'|([-+.\d][^\s"\[<]*)'
    r'|([^\s"\[<]+|<)'
)
_TG_KINDS = (None, "str", "skip", "flag", "num", "word", "skip")
CTM_FIELDS = ("file", "channel", "start", "duration", "word")
RTTM_FIELDS = ("type", "file", "channel", "tbeg", "tdur", "ortho", "stype", "name")


def _decode(path: Path, raw: bytes) -> str:
    """Praat writes UTF-8 or, with non-ASCII text, UTF-16 with a byte-order mark."""
    if raw.startswith((b"\xff\xfe", b"\xfe\xff")):
        return raw.decode("utf-16")
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError:
        return raw.decode("latin-1")  # older tools: Latin-1 text; wrong characters beat no import


def _read(path: str | Path) -> tuple[Path, bytes]:
    p = Path(path)
    try:
        return p, p.read_bytes()
    except OSError as e:
        raise CorpusFileError(p, None, f"cannot read: {e.strerror or e}") from None


class _Tokens:
    """The value tokens of a TextGrid, each with the line it starts on; `line` is the line of the
    last token taken (where an error about it points)."""

    def __init__(self, path: Path, text: str):
        self.path = path
        starts = [0] + [m.end() for m in re.finditer(r"\n", text)]
        self.items: list[tuple[str, str, int]] = []  # (kind, value, line)
        for m in _TG_TOKEN.finditer(text):
            kind = _TG_KINDS[m.lastindex or 0]
            if kind == "skip":
                continue
            value = m.group(1).replace('""', '"') if kind == "str" else m.group(m.lastindex or 0)
            self.items.append((kind, value, bisect.bisect_right(starts, m.start())))
        self.i = 0
        self.line = 1

    def take(self, field: str, what: str) -> tuple[str, str]:
        if self.i >= len(self.items):
            raise CorpusFileError(
                self.path, self.line, f"the file ends where {what} should be", field
            )
        kind, value, self.line = self.items[self.i]
        self.i += 1
        return kind, value

    def string(self, field: str) -> str:
        kind, value = self.take(field, "a quoted string")
        if kind != "str":
            raise CorpusFileError(
                self.path, self.line, f"expected a quoted string, got {value!r}", field
            )
        return value

    def number(self, field: str) -> float:
        kind, value = self.take(field, "a number")
        if kind != "num":
            shown = f'"{value}"' if kind == "str" else value
            raise CorpusFileError(self.path, self.line, f"expected a number, got {shown!r}", field)
        x = float(value)
        if not math.isfinite(x):
            raise CorpusFileError(
                self.path, self.line, f"expected a finite number, got {value!r}", field
            )
        return x

    def count(self, field: str) -> int:
        x = self.number(field)
        if x < 0 or x != int(x):
            raise CorpusFileError(
                self.path, self.line, f"expected a count (a whole number >= 0), got {x:g}", field
            )
        return int(x)


def read_textgrid(path: str | Path, conversation_id: str | None = None) -> Transcript:
    """The interval tiers of a TextGrid as one `Transcript` (one speaker per tier)."""
    p, raw = _read(path)
    conv = conversation_id or p.stem
    text = _decode(p, raw)
    if "ooBinaryFile" in text[:64]:
        raise CorpusFileError(p, 1, "a binary TextGrid; save it from Praat as a text file")
    tk = _Tokens(p, text)
    if tk.string("File type") not in ("ooTextFile", "ooTextFile short"):
        raise CorpusFileError(
            p, tk.line, 'not a Praat text file (File type must be "ooTextFile")', "File type"
        )
    if tk.string("Object class") != "TextGrid":
        raise CorpusFileError(
            p, tk.line, 'not a TextGrid (Object class must be "TextGrid")', "Object class"
        )
    tk.number("xmin")
    tk.number("xmax")
    kind, flag = tk.take("tiers?", "<exists> or <absent>")
    if kind != "flag":
        raise CorpusFileError(p, tk.line, f"expected <exists> or <absent>, got {flag!r}", "tiers?")
    n_tiers = tk.count("size") if flag == "<exists>" else 0
    speakers: list[str] = []
    words: list[Word] = []
    for k in range(1, n_tiers + 1):
        item = f"item[{k}]"
        cls = tk.string(f"{item}.class")
        class_line = tk.line
        name = tk.string(f"{item}.name")
        tk.number(f"{item}.xmin")
        tk.number(f"{item}.xmax")
        if cls == "IntervalTier":
            n = tk.count(f"{item}.intervals: size")
            if name in speakers:
                raise CorpusFileError(
                    p, class_line, f"a second interval tier named {name!r}", f"{item}.name"
                )
            speakers.append(name)
            prev_end = -math.inf
            for j in range(1, n + 1):
                f = f"{item}.intervals[{j}]"
                a = tk.number(f"{f}.xmin")
                if a < prev_end - 1e-9:
                    raise CorpusFileError(
                        p,
                        tk.line,
                        f"{a:g} is before the previous interval's end {prev_end:g}",
                        f"{f}.xmin",
                    )
                b = tk.number(f"{f}.xmax")
                if b < a:
                    raise CorpusFileError(p, tk.line, f"{b:g} is before xmin {a:g}", f"{f}.xmax")
                label = tk.string(f"{f}.text")
                prev_end = b
                if label.strip():
                    words.append(Word(conv, name, " ".join(label.split()), a, b))
        elif cls == "TextTier":
            for j in range(1, tk.count(f"{item}.points: size") + 1):
                tk.number(f"{item}.points[{j}].number")
                tk.string(f"{item}.points[{j}].mark")
        else:
            raise CorpusFileError(
                p,
                class_line,
                f"unknown tier class {cls!r}; expected IntervalTier or TextTier",
                f"{item}.class",
            )
    return Transcript(
        conv, str(p), tuple(speakers), tuple(sorted(words, key=lambda w: (w.start_s, w.speaker)))
    )


def _lines(path: str | Path):
    """(line number, fields) of a whitespace-separated text file, skipping blanks and ';;' comments."""
    p, raw = _read(path)
    for n, line in enumerate(_decode(p, raw).splitlines(), start=1):
        s = line.strip()
        if s and not s.startswith(";;"):
            yield p, n, s.split()


def _field_num(p: Path, n: int, value: str, field: str, lo: float | None = None) -> float:
    try:
        x = float(value)
    except ValueError:
        raise CorpusFileError(p, n, f"expected a number, got {value!r}", field) from None
    if not math.isfinite(x):
        raise CorpusFileError(p, n, f"expected a finite number, got {value!r}", field)
    if lo is not None and x < lo:
        raise CorpusFileError(p, n, f"must be >= {lo:g}, got {value}", field)
    return x


def _transcripts(
    path: Path, words: dict[str, list[Word]], turns: dict[str, list[Turn]]
) -> dict[str, Transcript]:
    out = {}
    for conv in sorted(set(words) | set(turns)):
        ws, ts = words.get(conv, []), turns.get(conv, [])
        speakers = sorted({w.speaker for w in ws} | {t.speaker for t in ts})
        out[conv] = Transcript(
            conv,
            str(path),
            tuple(speakers),
            tuple(sorted(ws, key=lambda w: (w.start_s, w.speaker))),
            tuple(sorted(ts, key=lambda t: (t.start_s, t.speaker))),
        )
    return out


def read_ctm(path: str | Path) -> dict[str, Transcript]:
    """The words of a CTM file, one `Transcript` per conversation (the file field)."""
    words: dict[str, list[Word]] = defaultdict(list)
    p = Path(path)
    for p, n, f in _lines(path):
        if len(f) < len(CTM_FIELDS):
            raise CorpusFileError(
                p,
                n,
                f"expected at least {len(CTM_FIELDS)} fields ({' '.join(CTM_FIELDS)}), "
                f"got {len(f)}",
            )
        start = _field_num(p, n, f[2], "start", lo=0.0)
        dur = _field_num(p, n, f[3], "duration", lo=0.0)
        if len(f) > 5 and f[5].upper() not in ("NA", "-"):
            conf = _field_num(p, n, f[5], "confidence")
            if not 0.0 <= conf <= 1.0:
                raise CorpusFileError(p, n, f"must be in [0, 1], got {f[5]}", "confidence")
        words[f[0]].append(
            Word(f[0], f[1], f[4], start, round(start + dur, 6))
        )  # no 1.9000000000000001
    if not words:
        raise CorpusFileError(p, None, "no words (an empty CTM file)")
    return _transcripts(p, words, {})


def read_rttm(path: str | Path) -> dict[str, Transcript]:
    """The SPEAKER turns of an RTTM file, one `Transcript` per conversation (the file field)."""
    turns: dict[str, list[Turn]] = defaultdict(list)
    p = Path(path)
    for p, n, f in _lines(path):
        if f[0] != "SPEAKER":
            continue  # other RTTM line types (SPKR-INFO, LEXEME, NOSCORE, ...) carry no turns
        if len(f) < len(RTTM_FIELDS):
            raise CorpusFileError(
                p,
                n,
                f"a SPEAKER line needs at least {len(RTTM_FIELDS)} fields "
                f"({' '.join(RTTM_FIELDS)}), got {len(f)}",
            )
        start = _field_num(p, n, f[3], "tbeg", lo=0.0)
        dur = _field_num(p, n, f[4], "tdur", lo=0.0)
        turns[f[1]].append(Turn(f[1], f[7], start, round(start + dur, 6)))
    if not turns:
        raise CorpusFileError(p, None, "no SPEAKER lines")
    return _transcripts(p, {}, turns)


def _json_items(p: Path, text: str) -> list[tuple[int, object]]:
    """(line, item) of a JSON list, decoding item by item so each knows the line it starts on."""
    dec = json.JSONDecoder()
    line_of = lambda i: text.count("\n", 0, i) + 1  # noqa: E731
    i = len(text) - len(text.lstrip())
    if not text.startswith("[", i):
        raise CorpusFileError(
            p, line_of(i), "expected a JSON list of {channel, text, start_s, end_s}"
        )
    i += 1
    items: list[tuple[int, object]] = []
    while True:
        while i < len(text) and text[i].isspace():
            i += 1
        if i < len(text) and text[i] == "]" and not items:
            i += 1
            break
        start = i
        try:
            item, i = dec.raw_decode(text, i)
        except json.JSONDecodeError as e:
            raise CorpusFileError(
                p, e.lineno, f"invalid JSON at column {e.colno}: {e.msg}"
            ) from None
        items.append((line_of(start), item))
        while i < len(text) and text[i].isspace():
            i += 1
        if i < len(text) and text[i] == ",":
            i += 1
            continue
        if i < len(text) and text[i] == "]":
            i += 1
            break
        raise CorpusFileError(p, line_of(i), "invalid JSON: expected ',' or ']' after a list item")
    if text[i:].strip():
        raise CorpusFileError(p, line_of(i), "invalid JSON: extra data after the list")
    return items


def read_json_words(path: str | Path, conversation_id: str | None = None) -> Transcript:
    """An fdeval word file (the importer's `words`): speakers "0" and "1" are its channels."""
    p, raw = _read(path)
    conv = conversation_id or p.stem.removesuffix(".words")
    words = []
    for k, (n, w) in enumerate(_json_items(p, _decode(p, raw))):
        at = f"[{k}]"
        if not isinstance(w, dict):
            raise CorpusFileError(p, n, "expected an object {channel, text, start_s, end_s}", at)
        for key in w:
            if key not in ("channel", "text", "start_s", "end_s"):
                raise CorpusFileError(
                    p,
                    n,
                    f"unknown key {key!r}; valid keys: channel, text, start_s, end_s",
                    f"{at}.{key}",
                )
        for key in ("channel", "text", "start_s", "end_s"):
            if key not in w:
                raise CorpusFileError(p, n, "missing required field", f"{at}.{key}")
        if isinstance(w["channel"], bool) or w["channel"] not in (0, 1):
            raise CorpusFileError(p, n, f"must be 0 or 1, got {w['channel']!r}", f"{at}.channel")
        if not isinstance(w["text"], str):
            raise CorpusFileError(
                p, n, f"expected a string, got {type(w['text']).__name__}", f"{at}.text"
            )
        times = []
        for key in ("start_s", "end_s"):
            x = w[key]
            if (
                isinstance(x, bool)
                or not isinstance(x, (int, float))
                or not math.isfinite(x)
                or x < 0
            ):
                raise CorpusFileError(
                    p, n, f"expected a finite number >= 0, got {x!r}", f"{at}.{key}"
                )
            times.append(float(x))
        if times[1] < times[0]:
            raise CorpusFileError(
                p, n, f"{times[1]:g} is before start_s {times[0]:g}", f"{at}.end_s"
            )
        words.append(Word(conv, str(w["channel"]), w["text"], times[0], times[1]))
    return _transcripts(p, {conv: words}, {}).get(conv) or Transcript(conv, str(p), ())


READERS = {".textgrid": "textgrid", ".ctm": "ctm", ".rttm": "rttm", ".json": "json"}


def read_transcript(path: str | Path, conversation_id: str) -> Transcript:
    """The transcript of one conversation from a file of any supported format (by its suffix).

    A CTM or RTTM file must hold that conversation (its file field) or exactly one conversation,
    which is then taken as this one (a per-conversation file named differently inside).
    """
    p = Path(path)
    kind = READERS.get(p.suffix.lower())
    if kind == "textgrid":
        return read_textgrid(p, conversation_id)
    if kind == "json":
        return read_json_words(p, conversation_id)
    if kind in ("ctm", "rttm"):
        found = read_ctm(p) if kind == "ctm" else read_rttm(p)
        if conversation_id in found:
            return found[conversation_id]
        if len(found) == 1:
            t = next(iter(found.values()))
            return Transcript(
                conversation_id,
                t.path,
                t.speakers,
                tuple(
                    Word(conversation_id, w.speaker, w.text, w.start_s, w.end_s) for w in t.words
                ),
                tuple(
                    Turn(conversation_id, u.speaker, u.start_s, u.end_s, u.text) for u in t.turns
                ),
            )
        raise CorpusFileError(
            p,
            None,
            f"holds no conversation {conversation_id!r} (it has {', '.join(sorted(found))})",
        )
    raise CorpusFileError(
        p,
        None,
        f"unknown transcript format {p.suffix!r}; expected one of .TextGrid, .ctm, .rttm, .json",
    )


__all__ = [
    "READERS",
    "read_ctm",
    "read_json_words",
    "read_rttm",
    "read_textgrid",
    "read_transcript",
]
