"""Report tables (csv, Markdown, LaTeX) and the IAS figure, for one run or across runs.

`python -m fdeval.report RUN_DIR [RUN_DIR ...] --out DIR [--labels human.csv]`; see docs/metrics.md.
"""

from fdeval.report.build import ReportSettings, RunData, write_cross_report, write_run_report
from fdeval.report.format import Column, Table, latex_escape, to_latex, to_markdown
from fdeval.report.runs import load_run, read_verdict_table, verdict_table

__all__ = ["Column", "ReportSettings", "RunData", "Table", "latex_escape", "load_run", "read_verdict_table",
           "to_latex", "to_markdown", "verdict_table", "write_cross_report", "write_run_report"]
