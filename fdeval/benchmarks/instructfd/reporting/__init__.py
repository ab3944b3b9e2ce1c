"""Instruct-FD's report: IAS, delta-IAS and scenario tables (csv, Markdown, LaTeX), intervals,
judge validation and the figure, for one run (its score step) or across runs (`fdeval.report`)."""

from fdeval.benchmarks.instructfd.reporting.build import (
    ReportSettings,
    RunData,
    write_cross_report,
    write_run_report,
)
from fdeval.benchmarks.instructfd.reporting.runs import load_run, read_verdict_table, verdict_table

__all__ = [
    "ReportSettings",
    "RunData",
    "load_run",
    "read_verdict_table",
    "verdict_table",
    "write_cross_report",
    "write_run_report",
]
