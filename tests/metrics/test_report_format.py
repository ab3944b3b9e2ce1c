"""Markdown and LaTeX renderings of a table, and LaTeX escaping."""

from __future__ import annotations

import pytest

from fdeval.metrics.format import Column, Table, format_cell, latex_escape, to_latex, to_markdown


@pytest.mark.parametrize(
    "text, expected",
    [
        ("a_b", r"a\_b"),
        ("50%", r"50\%"),
        ("R&D #1 $5", r"R\&D \#1 \$5"),
        ("{x}", r"\{x\}"),
        ("~^", r"\textasciitilde{}\textasciicircum{}"),
        ("C:\\path", r"C:\textbackslash{}path"),
        ("p < 0.05 > q", r"p \textless{} 0.05 \textgreater{} q"),
        ("ΔIAS", r"\ensuremath{\Delta}IAS"),
        ("plain text", "plain text"),
    ],
)
def test_latex_escape(text, expected):
    assert latex_escape(text) == expected


def test_escape_is_one_pass():
    # the backslash produced for one special character is not escaped again
    assert latex_escape("\\_") == r"\textbackslash{}\_"


@pytest.mark.parametrize(
    "value, kind, text",
    [
        (0.6667, "pct", "66.7%"),
        (0.425, "delta", "+42.5%"),
        (-0.112, "delta", "-11.2%"),
        (0.0, "delta", "+0.0%"),
        ((0.401, 0.9), "ci", "[40.1, 90.0]"),
        ((None, None), "ci", "n/a"),
        ((0.5, 0.25, 0.75), "pct_ci", "50.0% [25.0, 75.0]"),
        ((0.5, None, None), "pct_ci", "50.0%"),
        (0.03125, "p", "0.0312"),
        (1e-6, "p", "<0.0001"),
        (True, "flag", "yes"),
        (None, "pct", "n/a"),
        (3, "int", "3"),
    ],
)
def test_cells(value, kind, text):
    assert format_cell(value, kind) == text


TABLE = Table(
    "Scores of model_x & co",
    [
        Column("name", "Scenario"),
        Column("ias", "IAS", "pct"),
        Column("d", "ΔIAS", "delta", r"$\Delta$IAS"),
    ],
    [{"name": "User_Filler 50%", "ias": 0.5, "d": -0.25}, {"name": "b|c", "d": None}],
    notes=["a note"],
    bold={(0, "d")},
    label="tab:x",
)


def test_markdown():
    md = to_markdown([TABLE], "Title", ["top note"])
    assert md.startswith("# Title\n\n- top note\n\n## Scores of model_x & co\n\n- a note\n")
    assert "| Scenario | IAS | ΔIAS |\n|---|---:|---:|" in md
    assert "| User_Filler 50% | 50.0% | **-25.0%** |" in md
    assert "| b\\|c | - | n/a |" in md  # missing key '-', None 'n/a', pipes escaped


def test_latex_booktabs():
    tex = to_latex([TABLE], ["a comment"])
    assert "% a comment" in tex
    assert r"\caption{Scores of model\_x \& co}" in tex and r"\label{tab:x}" in tex
    assert r"\begin{tabular}{lrr}" in tex
    lines = tex.splitlines()
    top, mid, bottom = (
        lines.index(r"\toprule"),
        lines.index(r"\midrule"),
        lines.index(r"\bottomrule"),
    )
    assert top < mid < bottom
    assert lines[top + 1] == r"Scenario & IAS & $\Delta$IAS \\"
    assert lines[mid + 1] == r"User\_Filler 50\% & 50.0\% & \textbf{$-$25.0\%} \\"
    assert lines[mid + 2] == r"b\textbar{}c & - & n/a \\"
    assert tex.count(r"\begin{table}") == tex.count(r"\end{table}") == 1
