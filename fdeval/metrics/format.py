"""Tables for people: one :class:`Table` rendered as Markdown or LaTeX (booktabs).

A table is a title, typed columns and rows of raw values; the renderers format each cell by its
column's kind, so the CSV (raw values, :func:`fdeval.metrics.csvio.write_csv`) and the two text
forms come from the same numbers. Kinds:

- ``text``: as is; ``int``: a count;
- ``pct``: a rate in [0, 1] as a percentage with one decimal (``66.7%``);
- ``delta``: a signed percentage-point change (``+42.5%``, ``-11.2%``);
- ``ci``: a ``(low, high)`` rate interval (``[40.1, 90.0]``);
- ``pct_ci``: a ``(rate, low, high)`` triple (``66.7 [40.1, 90.0]``);
- ``num_ci``: a ``(value, low, high)`` triple of plain numbers, three decimals (``0.412 [0.30, 0.55]``);
- ``p``: a p-value (four decimals, ``<0.0001`` below that);
- ``flag``: a boolean as ``yes`` / ``no``;
- ``rate``: a fraction in [0, 1] with three decimals.

A value of ``None`` shows as ``n/a``; a key missing from the row (no such cell, e.g. an
instruction a scenario does not carry) as ``-``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

MISSING = "-"
NA = "n/a"
SMALL_N_MARK = " †"  # after an interval drawn from fewer units than the report's min_n_ci


@dataclass(frozen=True)
class Column:
    key: str
    header: str
    kind: str = "text"
    latex_header: str | None = None  # raw LaTeX, when the header needs math


@dataclass
class Table:
    title: str
    columns: list[Column]
    rows: list[dict[str, Any]]
    notes: list[str] = field(default_factory=list)
    bold: set[tuple[int, str]] = field(default_factory=set)  # (row index, column key)
    label: str = ""  # LaTeX \label


def _pct(x: float) -> str:
    return f"{100 * x:.1f}"


def format_cell(value: Any, kind: str) -> str:
    """The plain-text form of one cell (no escaping)."""
    if value is None:
        return NA
    if kind == "int":
        return str(int(value))
    if kind == "pct":
        return _pct(value) + "%"
    if kind == "delta":
        return f"{100 * value:+.1f}%"
    if kind == "rate":
        return f"{value:.3f}"
    if kind == "ci":  # (low, high[, small]): `small` marks an interval from too few units
        low, high, *small = value
        return (
            NA
            if low is None
            else f"[{_pct(low)}, {_pct(high)}]" + (SMALL_N_MARK if any(small) else "")
        )
    if kind == "pct_ci":  # (x, low, high[, small])
        x, low, high, *small = value
        if x is None:
            return NA
        return (
            f"{_pct(x)}%"
            + ("" if low is None else f" [{_pct(low)}, {_pct(high)}]")
            + (SMALL_N_MARK if low is not None and any(small) else "")
        )
    if kind == "num_ci":  # (x, low, high[, small]): seconds, ratings, divergences
        x, low, high, *small = value
        if x is None:
            return NA
        return (
            f"{x:.3f}"
            + ("" if low is None else f" [{low:.3f}, {high:.3f}]")
            + (SMALL_N_MARK if low is not None and any(small) else "")
        )
    if kind == "p":
        return "<0.0001" if value < 1e-4 else f"{value:.4f}"
    if kind == "flag":
        return "yes" if value else "no"
    return str(value)


_MD_SPECIAL = {"&": "&amp;", "<": "&lt;", ">": "&gt;", "|": "\\|"}
_MD_RE = re.compile("[&<>|]")


def md_text(text: Any) -> str:
    """`text` safe in a Markdown table cell: `|` escaped, and `&`, `<`, `>` as HTML entities, so a
    case's text (a scenario, an instruction) never becomes raw HTML in a rendered report."""
    return _MD_RE.sub(lambda m: _MD_SPECIAL[m.group()], str(text))


def md_cell(x: Any) -> str:
    """A raw value as a Markdown cell, whatever its column: n/a, three decimals, text escaped (md_text)."""
    if x is None:
        return NA
    if isinstance(x, float):
        return f"{x:.3f}"
    return md_text(x)


def _cells(table: Table) -> list[list[str]]:
    return [
        [format_cell(row[c.key], c.kind) if c.key in row else MISSING for c in table.columns]
        for row in table.rows
    ]


def _numeric(c: Column) -> bool:
    return c.kind != "text"


def to_markdown(
    tables: list[Table], title: str | None = None, notes: list[str] | None = None
) -> str:
    """One Markdown document: an optional ``#`` title and notes, then each table under ``##``."""
    out: list[str] = []
    if title:
        out += [f"# {title}", ""]
    if notes:
        out += [f"- {n}" for n in notes] + [""]
    for t in tables:
        out += [f"## {t.title}", ""]
        if t.notes:
            out += [f"- {n}" for n in t.notes] + [""]
        out.append("| " + " | ".join(md_text(c.header) for c in t.columns) + " |")
        out.append("|" + "|".join("---:" if _numeric(c) else "---" for c in t.columns) + "|")
        for i, cells in enumerate(_cells(t)):
            # text cells hold case text (scenarios, instructions): escaped; numbers keep e.g. "<0.0001"
            cells = [
                md_text(x) if c.kind == "text" else x.replace("|", "\\|")
                for c, x in zip(t.columns, cells)
            ]
            shown = [f"**{x}**" if (i, c.key) in t.bold else x for c, x in zip(t.columns, cells)]
            out.append("| " + " | ".join(shown) + " |")
        out.append("")
    return "\n".join(out)


_LATEX_SPECIAL = {
    "\\": r"\textbackslash{}",
    "&": r"\&",
    "%": r"\%",
    "$": r"\$",
    "#": r"\#",
    "_": r"\_",
    "{": r"\{",
    "}": r"\}",
    "~": r"\textasciitilde{}",
    "^": r"\textasciicircum{}",
    "<": r"\textless{}",
    ">": r"\textgreater{}",
    "|": r"\textbar{}",
    # the few non-ASCII symbols the tables use, so that plain pdflatex reads the file
    "Δ": r"\ensuremath{\Delta}",
    "∅": r"\ensuremath{\emptyset}",
    "†": r"\ensuremath{\dagger}",
}
_LATEX_RE = re.compile("|".join(re.escape(k) for k in _LATEX_SPECIAL))


def latex_escape(text: str) -> str:
    """`text` with LaTeX's special characters made literal (one pass, so escapes are not re-escaped)."""
    return _LATEX_RE.sub(lambda m: _LATEX_SPECIAL[m.group()], str(text))


def _latex_cell(text: str) -> str:
    s = latex_escape(text)
    # a leading minus of a number as a math minus (a hyphen looks wrong in a column of numbers)
    return re.sub(r"^-(?=\d)", "$-$", s)


def to_latex(tables: list[Table], notes: list[str] | None = None) -> str:
    """Each table as a LaTeX ``table`` with a booktabs ``tabular`` (needs ``\\usepackage{booktabs}``)."""
    out = ["% Generated by fdeval; needs \\usepackage{booktabs}."]
    out += [f"% {n}" for n in (notes or [])]
    for t in tables:
        out += ["", r"\begin{table}[t]", r"\centering", f"\\caption{{{latex_escape(t.title)}}}"]
        if t.label:
            out.append(f"\\label{{{t.label}}}")
        out += [f"% {n}" for n in t.notes]
        if len(t.columns) > 7:  # a wide table: smaller type and tighter columns to fit a page
            out += [r"\small", r"\setlength{\tabcolsep}{3pt}"]
        out.append(
            r"\begin{tabular}{" + "".join("r" if _numeric(c) else "l" for c in t.columns) + "}"
        )
        out.append(r"\toprule")
        out.append(" & ".join(c.latex_header or latex_escape(c.header) for c in t.columns) + r" \\")
        out.append(r"\midrule")
        for i, cells in enumerate(_cells(t)):
            shown = [
                f"\\textbf{{{_latex_cell(x)}}}" if (i, c.key) in t.bold else _latex_cell(x)
                for c, x in zip(t.columns, cells)
            ]
            out.append(" & ".join(shown) + r" \\")
        out += [r"\bottomrule", r"\end{tabular}", r"\end{table}"]
    return "\n".join(out) + "\n"
