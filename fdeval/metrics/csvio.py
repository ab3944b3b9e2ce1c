"""CSV tables: writing score tables, and strict reading of small CSV input files (human labels,
a run's verdict table).

Every reading problem is one :class:`FdevalError` line naming the file, the line and the field.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

from fdeval.errors import FdevalError
from fdeval.files import write_text_atomic


class CsvError(FdevalError):
    """A CSV input file that fails validation: ``<file>: line <n>: field '<name>': <message>``."""

    def __init__(self, path: str | Path, line: int, field: str, message: str):
        self.path, self.line, self.field, self.message = str(path), line, field, message
        super().__init__(f"{path}: line {line}: field {field!r}: {message}")


def read_csv_rows(
    path: str | Path, required: tuple[str, ...], optional: tuple[str, ...] = ()
) -> Iterator[tuple[int, dict[str, str]]]:
    """Yield ``(line number, row)`` for each data row, cells stripped; absent optional columns are ''.

    The header must hold every `required` column and nothing outside `required` + `optional`.
    Blank lines are skipped. A UTF-8 byte-order mark (as spreadsheets write) is accepted.
    """
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8-sig")
    except OSError as e:
        raise FdevalError(f"{path}: cannot read: {e.strerror or e}") from None
    except UnicodeDecodeError as e:
        raise FdevalError(f"{path}: not UTF-8 text ({e.reason} at byte {e.start})") from None
    reader = csv.reader(io.StringIO(text, newline=""))
    header = next(reader, None)
    if header is None:
        raise CsvError(path, 1, "<header>", f"empty file; expected columns {', '.join(required)}")
    header = [h.strip() for h in header]
    for name in required:
        if name not in header:
            raise CsvError(path, 1, name, f"missing column; the header is {', '.join(header)}")
    for name in header:
        if name not in required + optional:
            raise CsvError(
                path, 1, name, f"unknown column; valid: {', '.join(required + optional)}"
            )
        if header.count(name) > 1:
            raise CsvError(path, 1, name, "column appears twice")
    for cells in reader:
        line = reader.line_num
        if not any(c.strip() for c in cells):
            continue
        if len(cells) != len(header):
            raise CsvError(path, line, "<row>", f"{len(cells)} cells for {len(header)} columns")
        row = {name: "" for name in optional}
        row.update({h: c.strip() for h, c in zip(header, cells)})
        yield line, row


def columns(rows: Iterable[Mapping[str, Any]]) -> list[str]:
    """The keys of `rows` in order of first appearance."""
    cols: list[str] = []
    for row in rows:
        cols.extend(k for k in row if k not in cols)
    return cols


def _csv_cell(x: Any) -> str:
    if x is None:
        return ""
    if isinstance(x, float):
        return f"{x:.6f}".rstrip("0").rstrip(".") if x == x else "nan"
    return str(x)


def write_csv(
    rows: list[Mapping[str, Any]], path: str | Path, significant: Iterable[str] = ()
) -> None:
    """`rows` as CSV (columns in order of first appearance; None as an empty cell), atomically.

    Floats get at most six decimals, except in the `significant` columns (p-values, which may be
    tiny): six significant digits there.
    """
    cols = columns(rows)
    sig = set(significant)
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(cols)
    for row in rows:
        w.writerow(
            [
                f"{row[c]:.6g}"
                if c in sig and isinstance(row.get(c), float)
                else _csv_cell(row.get(c))
                for c in cols
            ]
        )
    write_text_atomic(path, buf.getvalue())
