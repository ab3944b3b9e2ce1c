"""The strict JSON reader shared by every file fdeval reads back: cases, transcripts, verdicts.

It sits with the cases, the lowest layer that reads such files, so the transcript and verdict
readers above can use it too.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable

from fdeval.errors import FdevalError


class HugeInt:
    """A JSON integer beyond 64 bits, kept as a marker so the field check can name its field.

    Python's int() refuses more than 4300 digits (a ValueError out of the parser) and float()
    overflows past ~1e308, so such a number would otherwise fail far from its field.
    """

    def __init__(self, digits: int):
        self.digits = digits

    def __repr__(self) -> str:
        return f"<integer with {self.digits} digits>"


_INT64 = 2**63


def _parse_int(s: str) -> int | HugeInt:
    n = len(s.lstrip("-"))
    if n > 19:  # checked before int(): int() of 5000 digits raises
        return HugeInt(n)
    v = int(s)
    return v if -_INT64 <= v < _INT64 else HugeInt(n)


def read_json_file(path: str | Path, error: Callable[[str, None, str, str], FdevalError]) -> Any:
    """The JSON value in `path`, integers beyond 64 bits as :class:`HugeInt`.

    Whatever stops the file being read raises `error(path, None, field, why)`, one line: field
    ``<file>`` when it is missing, unreadable or not UTF-8, ``<json>`` when it is not JSON or is
    nested too deeply for the parser.
    """
    try:
        data = Path(path).read_bytes()
    except FileNotFoundError:
        raise error(str(path), None, "<file>", "file not found") from None
    except OSError as e:
        raise error(str(path), None, "<file>", f"cannot read: {e.strerror or e}") from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        line = data.count(b"\n", 0, e.start) + 1
        raise error(str(path), None, "<file>", f"not valid UTF-8: byte {e.start} (line {line}) is "
                                               f"{data[e.start:e.start + 1]!r}") from None
    try:
        return json.loads(text, parse_int=_parse_int)
    except json.JSONDecodeError as e:
        raise error(str(path), None, "<json>", f"invalid JSON at line {e.lineno} column {e.colno}: {e.msg}") from None
    except RecursionError:
        raise error(str(path), None, "<json>", "nested too deeply to parse") from None
