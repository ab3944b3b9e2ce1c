"""`python -m fdeval.report RUN_DIR [RUN_DIR ...] --out DIR [--labels human.csv]`: the cross-model report.

Any benchmark's runs: the benchmark is read from each folder's run.json (all runs must be of one
benchmark) and built as the launch builds it; its report view (``Benchmark.report()``,
fdeval/engine/review.py) reads the settings and, when it has one, writes its own cross-model
report (Instruct-FD: the IAS,
delta-IAS and scenario tables with models as columns, the figure and judge validation, from
``scores/<key>/verdicts.csv`` checked against ``verdicts/<key>/``, the folders of each run's last
launch as its run.json names them); for the others, every table of every declared metric is
written with the runs side by side (``run`` and ``scores`` columns first). Defaults come from
``conf/report/default.yaml``. A user error prints one line and exits 2.
"""

from __future__ import annotations

import argparse
import csv
import json
import sys
from pathlib import Path

from hydra.errors import InstantiationException
from omegaconf import OmegaConf

from fdeval.engine.run import build, step_dir
from fdeval.errors import FdevalError
from fdeval.metrics.csvio import write_csv

CONF = Path(__file__).resolve().parent.parent / "conf" / "report" / "default.yaml"


def _defaults() -> dict:
    return dict(OmegaConf.to_container(OmegaConf.load(CONF)))  # type: ignore[arg-type]


def _benchmark(run_dir: Path):
    """The benchmark a run folder was made with (from its run.json)."""
    f = run_dir / "run.json"
    if not run_dir.is_dir():
        raise FdevalError(f"{run_dir}: not a folder")
    try:
        cfg = json.loads(f.read_text(encoding="utf-8")).get("command_config") or {}
    except (OSError, ValueError, AttributeError) as e:
        raise FdevalError(f"{f}: not a run.json ({e}); is this a run folder?") from None
    if not isinstance(cfg.get("benchmark"), dict):
        raise FdevalError(f"{f}: no benchmark in its config; is this a run folder?")
    try:
        return build(cfg["benchmark"])
    except InstantiationException as e:
        raise FdevalError(f"{f}: benchmark: {str(e).splitlines()[0]}") from None


def side_by_side(runs: list[Path], metrics: list, out: Path) -> list[Path]:
    """Every table of every metric, the runs' rows one after another with a `run` column and a
    `scores` column (the score folder of the run's last launch: which settings the row shows)."""
    paths = []
    for m in metrics:
        for table in m.tables:
            rows = []
            for r in runs:
                folder = step_dir(r, "score")
                f = folder / f"{table}.csv"
                if not f.is_file():
                    raise FdevalError(f"{f}: missing; run stage=score in that run")
                with f.open(encoding="utf-8", newline="") as fh:
                    rows += [
                        {"run": r.name, "scores": str(folder.relative_to(r)), **row}
                        for row in csv.DictReader(fh)
                    ]
            write_csv(rows, out / f"{table}.csv")
            paths.append(out / f"{table}.csv")
    return paths


def main(argv: list[str] | None = None) -> int:
    d = _defaults()  # the `report` group's defaults: every key the options below set is there
    ap = argparse.ArgumentParser(
        prog="python -m fdeval.report", description=__doc__.splitlines()[0].split(": ", 1)[1]
    )
    ap.add_argument("runs", nargs="+", metavar="RUN_DIR", help="run folders (one model each)")
    ap.add_argument("--out", required=True, help="folder for the report files")
    ap.add_argument(
        "--labels", default=d["human_labels"], help="human-labels CSV for judge validation"
    )
    ap.add_argument(
        "--resamples", type=int, default=d["bootstrap_resamples"], help="bootstrap resamples"
    )
    ap.add_argument("--seed", type=int, default=d["bootstrap_seed"], help="bootstrap seed")
    ap.add_argument(
        "--level", type=float, default=d["ci_level"], help="confidence level of the intervals"
    )
    ap.add_argument("--method", default=d["ci_method"], help="interval method: bca or percentile")
    ap.add_argument(
        "--alpha", type=float, default=d["alpha"], help="significance level (Holm-adjusted)"
    )
    ap.add_argument("--no-figure", action="store_true", help="skip the PNG figure")
    args = ap.parse_args(argv)
    values = {
        **d,
        "human_labels": args.labels,
        "bootstrap_resamples": args.resamples,
        "bootstrap_seed": args.seed,
        "ci_level": args.level,
        "ci_method": args.method,
        "alpha": args.alpha,
        "figure": bool(d["figure"]) and not args.no_figure,
    }
    values.pop("writers", None)  # the views the score step draws; not a report setting
    try:
        dirs = [Path(r) for r in args.runs]
        benches = [_benchmark(d) for d in dirs]
        names = sorted({b.name for b in benches})
        if len(names) > 1:
            raise FdevalError(
                f"the runs are of different benchmarks ({', '.join(names)}); report each benchmark apart"
            )
        view = benches[0].report()
        paths = view.cross_report(dirs, Path(args.out), view.settings(values))
        if paths is None:
            paths = side_by_side(dirs, benches[0].metrics(), Path(args.out))
    except FdevalError as e:
        print(f"fdeval.report: error: {e}", file=sys.stderr)
        return 2
    for p in paths:
        print(p)
    return 0


if __name__ == "__main__":
    sys.exit(main())
