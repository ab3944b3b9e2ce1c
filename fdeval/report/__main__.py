"""`python -m fdeval.report RUN_DIR [RUN_DIR ...] --out DIR [--labels human.csv]`: the cross-model report.

Reads each run folder (``scores/verdicts.csv``, checked against ``verdicts/``; see
:mod:`fdeval.report.runs`) and writes the tables with models as columns, plus the figure, into
``--out``. Defaults come from ``conf/report/default.yaml``. A user error prints one line and
exits 2.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

CONF = Path(__file__).resolve().parent.parent / "conf" / "report" / "default.yaml"


def _defaults() -> dict:
    from omegaconf import OmegaConf

    return dict(OmegaConf.to_container(OmegaConf.load(CONF))) if CONF.is_file() else {}  # type: ignore[arg-type]


def main(argv: list[str] | None = None) -> int:
    from fdeval.errors import FdevalError
    from fdeval.report.build import ReportSettings, write_cross_report
    from fdeval.report.runs import load_run

    d = {**ReportSettings().__dict__, **_defaults()}
    ap = argparse.ArgumentParser(prog="python -m fdeval.report", description=__doc__.splitlines()[0].split(": ", 1)[1])
    ap.add_argument("runs", nargs="+", metavar="RUN_DIR", help="run folders (one model each)")
    ap.add_argument("--out", required=True, help="folder for the report files")
    ap.add_argument("--labels", default=d["human_labels"], help="human-labels CSV for judge validation")
    ap.add_argument("--resamples", type=int, default=d["bootstrap_resamples"], help="bootstrap resamples")
    ap.add_argument("--seed", type=int, default=d["bootstrap_seed"], help="bootstrap seed")
    ap.add_argument("--level", type=float, default=d["ci_level"], help="confidence level of the intervals")
    ap.add_argument("--method", default=d["ci_method"], help="interval method: bca or percentile")
    ap.add_argument("--alpha", type=float, default=d["alpha"], help="significance level (Holm-adjusted)")
    ap.add_argument("--no-figure", action="store_true", help="skip the PNG figure")
    args = ap.parse_args(argv)
    try:
        settings = ReportSettings.from_config({
            "human_labels": args.labels, "bootstrap_resamples": args.resamples, "bootstrap_seed": args.seed,
            "ci_level": args.level, "ci_method": args.method, "alpha": args.alpha,
            "figure": bool(d["figure"]) and not args.no_figure}, group="report")
        runs = [load_run(r) for r in args.runs]
        dup = {r.name for r in runs if sum(q.name == r.name for q in runs) > 1}
        for run in runs:  # column names must differ: add the run folder's name, then a number
            if run.name in dup:
                run.name = f"{run.name}/{Path(run.source).name}"
        seen: dict[str, int] = {}
        for run in runs:
            seen[run.name] = seen.get(run.name, 0) + 1
            if seen[run.name] > 1:
                run.name = f"{run.name} ({seen[run.name]})"
        paths = write_cross_report(runs, Path(args.out), settings)
    except FdevalError as e:
        print(f"fdeval.report: error: {e}", file=sys.stderr)
        return 2
    for p in paths:
        print(p)
    return 0


if __name__ == "__main__":
    sys.exit(main())
