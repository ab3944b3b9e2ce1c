"""Barge-in delay sweep: run one benchmark at several barge-in delays, then plot IAS vs delay.

    python launchers/barge_in_sweep.py [--delays 0.5,1,1.5,2,2.5,3,3.5,4] [--out DIR] [OVERRIDES...]

OVERRIDES go to `python -m fdeval.launch` (model=..., launcher=slurm launcher.wait=true, ...).
Each delay is its own run folder (a Hydra multirun point), so a rerun resumes; the script then
reads every point's ias.csv (scores/<judge>-<key>/, the folder its run.json names) and writes
ias_vs_delay.csv and ias_vs_delay.png to --out.
"""

from __future__ import annotations

import argparse
import csv
import subprocess
import sys
from pathlib import Path

DEFAULT_DELAYS = "0.5,1,1.5,2,2.5,3,3.5,4"


def find_runs(overrides: list[str], delays: list[float]) -> dict[float, Path]:
    """This sweep's finished run folders, one per delay: the folder each point's command uses,
    found by its identity hash (the readable part of a name is only a reminder)."""
    from fdeval.app import run_folder

    found: dict[float, Path] = {}
    for d in delays:
        expected = run_folder([f"orchestrator.barge_in_delay_s={d}", *overrides])
        suffix = expected.name.rsplit("-", 1)[-1]
        matches = sorted(p for p in expected.parent.glob(f"*-{suffix}") if ias_csv(p) is not None)
        if matches:
            found[d] = matches[0]
    return found


def ias_csv(run: Path) -> Path | None:
    """The run's ias.csv in the score folder of its last launch (run.json), or None."""
    from fdeval.engine.run import step_dir
    from fdeval.errors import FdevalError

    try:
        f = step_dir(run, "score") / "ias.csv"
    except FdevalError:
        return None
    return f if f.is_file() else None


def ias_table(run: Path) -> dict[str, float]:
    path = ias_csv(run)
    if path is None:
        raise FileNotFoundError(f"{run}: no ias.csv; run stage=score there")
    with open(path, newline="") as f:
        return {
            r["instruction"]: float(r["ias"])
            for r in csv.DictReader(f)
            if r.get("ias") not in (None, "")
        }


def plot(rows: list[dict], path: Path, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.4, 4.0), dpi=120)
    instructions = sorted(
        {k for r in rows for k in r if k != "delay_s"}, key=lambda k: (k == "overall", k)
    )
    for ins in instructions:
        xs = [r["delay_s"] for r in rows if ins in r]
        ax.plot(
            xs,
            [100 * r[ins] for r in rows if ins in r],
            marker="o",
            label=ins,
            linewidth=2.5 if ins == "overall" else 1.5,
            color="black" if ins == "overall" else None,
        )
    ax.set_xlabel("barge-in delay after model speech onset (s)")
    ax.set_ylabel("IAS (%)")
    ax.set_ylim(-5, 105)
    ax.set_title(title)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, ncol=2)
    fig.tight_layout()
    fig.savefig(path, metadata={"Software": None})
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--delays", default=DEFAULT_DELAYS)
    ap.add_argument(
        "--out",
        default=None,
        help="where the plot goes (default: <out_root>/<benchmark>/<model>/barge_in_sweep)",
    )
    ap.add_argument("--no-run", action="store_true", help="only collect and plot existing runs")
    args, overrides = ap.parse_known_args(argv)
    delays = [float(d) for d in args.delays.split(",")]
    kv = dict(o.split("=", 1) for o in overrides if "=" in o and not o.startswith("-"))
    out_root, model, benchmark = (
        Path(kv.get("out_root", "outputs")),
        kv.get("model", "reference"),
        kv.get("benchmark", "instructfd"),
    )
    if not args.no_run:
        cmd = [
            sys.executable,
            "-m",
            "fdeval.launch",
            "-m",
            f"orchestrator.barge_in_delay_s={args.delays}",
            *overrides,
        ]
        subprocess.run(cmd, check=True)
    runs = find_runs(overrides, delays)
    missing = [d for d in delays if d not in runs]
    if missing:
        print(
            f"barge_in_sweep: no finished run for delay(s) {missing} under {out_root / benchmark / model}",
            file=sys.stderr,
        )
        return 2
    rows = [{"delay_s": d, **ias_table(runs[d])} for d in delays]
    out = Path(args.out) if args.out else out_root / benchmark / model / "barge_in_sweep"
    out.mkdir(parents=True, exist_ok=True)
    cols = ["delay_s"] + sorted({k for r in rows for k in r if k != "delay_s"})
    with open(out / "ias_vs_delay.csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=cols)
        w.writeheader()
        w.writerows(rows)
    plot(rows, out / "ias_vs_delay.png", f"IAS vs barge-in delay ({model}, {benchmark})")
    print(f"barge_in_sweep: {len(rows)} points -> {out / 'ias_vs_delay.png'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
