#!/usr/bin/env python
"""Agreement of EchoChain's offline classifier and grader with the labelled conversations
(tests/benchmarks/echochain/labelled/).

Prints a markdown table per expected outcome (pass and each taxonomy category): failure detection
(flag = label), taxonomy agreement among the conversations both the labels and the classifier flag,
and criterion-level pass agreement; then every disagreement. Deterministic and offline: no model
sessions, no network. Usage: python scripts/echochain_agreement.py [--rule paper|strict] [--reasons]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(
    0, str(ROOT / "tests" / "benchmarks" / "echochain")
)  # the loader lives beside the tests
sys.path.insert(0, str(ROOT / "tests"))  # and the helpers it shares with the other labelled set

import echochain_labelled_set as L  # noqa: E402

from fdeval.benchmarks.echochain.classifier import OFFLINE_VERSION, OfflineClassifier  # noqa: E402

WATCHED = (
    "fdeval/benchmarks/echochain/classifier.py",
    "fdeval/benchmarks/echochain/rubrics.py",
    "fdeval/benchmarks/echochain/taxonomy.py",
    "fdeval/benchmarks/echochain/steps.py",
)


def _commit() -> str:
    try:
        out = subprocess.run(
            ["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True, text=True
        )
        dirty = subprocess.run(
            ["git", "-C", str(ROOT), "status", "--porcelain", "--", *WATCHED],
            capture_output=True,
            text=True,
        )
        return out.stdout.strip() + (" (offline rules modified)" if dirty.stdout.strip() else "")
    except OSError:
        return "unknown"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--rule",
        choices=("paper", "strict"),
        help="decision rule (default: the benchmark config's)",
    )
    ap.add_argument(
        "--reasons", action="store_true", help="print the classifier's reason for each disagreement"
    )
    args = ap.parse_args(argv)
    items = L.load()
    clf = L.default_classifier()
    if args.rule:
        clf = OfflineClassifier(votes=clf.votes, decision_rule=args.rule)
    result = L.agreement(items, classifier=clf)
    late, held = sum(it.written_after_rules for it in items), sum(it.held_out for it in items)
    print(
        f"Offline classifier v{OFFLINE_VERSION} (rule {clf.rule}, votes {clf.votes}) and offline grader on "
        f"{len(items)} labelled conversations ({late} written after the rules changed, {held} held out; "
        f"commit {_commit()}):\n"
    )
    print(result.table())
    parts = (
        (
            "written before the rules changed",
            lambda it: not it.written_after_rules and not it.held_out,
        ),
        ("written after", lambda it: it.written_after_rules and not it.held_out),
        (
            "held out from classifier v3 (written by a reader of the paper who never saw the rules)",
            lambda it: it.held_out,
        ),
    )
    for name, member in parts:
        part = L.Agreement(tuple(r for r in result.rows if member(r.item))).overall
        if part["n"]:
            print(
                f"\n{name}: {part['n']} items, failure detection {part['detect']}/{part['n']}, taxonomy "
                f"{part['taxonomy']}/{part['both']}, criteria {part['criteria_agree']}/{part['criteria']}",
                end="",
            )
    print()
    bad = result.disagreements()
    print(f"\nDisagreements ({len(bad)}):")
    reasons = {r.item.id: r.verdict.samples[0].reason for r in result.rows if r.verdict.samples}
    for line in bad:
        print(f"- {line}")
        if args.reasons:
            print(f"    classifier: {reasons.get(line.split(' ')[0], '(no sample)')}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
