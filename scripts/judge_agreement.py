#!/usr/bin/env python
"""Agreement of the rules judge with the labelled Instruct-FD set (tests/judges/labelled/).

Prints a markdown table per instruction (n, agree, %), then each disagreement with the label's
reason and the judge's failed checks. Usage: python scripts/judge_agreement.py [--reasoning]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "judges"))  # the loader lives beside the judge tests
sys.path.insert(0, str(ROOT / "tests"))  # and the helpers it shares with the other labelled set

import labelled_set as L  # noqa: E402

from fdeval.benchmarks.instructfd.judges.rules import RulesJudge  # noqa: E402


def _commit() -> str:
    try:
        out = subprocess.run(
            ["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True, text=True
        )
        dirty = subprocess.run(
            [
                "git",
                "-C",
                str(ROOT),
                "status",
                "--porcelain",
                "--",
                "fdeval/benchmarks/instructfd/judges/rules.py",
            ],
            capture_output=True,
            text=True,
        )
        return out.stdout.strip() + (" (rules.py modified)" if dirty.stdout.strip() else "")
    except OSError:
        return "unknown"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--reasoning",
        action="store_true",
        help="print the judge's full reasoning for each disagreement",
    )
    args = ap.parse_args(argv)
    judge = RulesJudge()
    items = L.load()
    result = L.agreement(judge, items)
    print(f"Rules judge v{judge.version} on {len(items)} labelled sessions (commit {_commit()}):\n")
    print(result.table())
    bad = result.disagreements()
    print(f"\nDisagreements ({len(bad)}):")
    for it, verdict, reasoning in bad:
        failed = [
            ln.strip()
            for ln in reasoning.splitlines()
            if ln.strip().endswith(": no") or ": no - " in ln
        ]
        print(f"- {it.id} ({it.policy}): label {it.label}, judge {verdict}. Label: {it.why}")
        for ln in failed:
            print(f"    judge: {ln}")
        if args.reasoning:
            print("\n".join("      " + ln for ln in reasoning.splitlines()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
