"""`python -m fdeval.benchmarks.tact.corpus <recipe> <corpus_dir> <out_dir> [--labels FILE]`.

Reads a local copy of a corpus in the recipe's layout, writes its conversations at 16 kHz and
every decision point found (`<out_dir>/decision_points.jsonl`, what annotators label), and, given
the annotators' labels file, the importer's rows (`annotations.jsonl`) and the episodes
(`<out_dir>/data/import-<hash>/`). Points without labels are counted and listed in
`unlabelled.txt`, never imported. `--list` shows every recipe with its layout. A user error
prints one line and exits 2.
"""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path

from fdeval.errors import FdevalError

from .finder import FinderSettings
from .pipeline import ANNOTATIONS, POINTS, UNLABELLED, import_labelled, prepare
from .recipes import all_recipes, get_recipe

PROG = "python -m fdeval.benchmarks.tact.corpus"


def _list() -> str:
    out = []
    for name, r in all_recipes().items():
        out.append(f"{name}: {r.corpus}\n  layout source: {r.source}")
        out += [f"    {line}" for line in r.layout.rstrip().splitlines()]
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog=PROG,
        description="Find a corpus's TACT decision points and import the labelled "
        "ones as episodes (docs/tact-corpora.md).",
    )
    ap.add_argument("recipe", nargs="?", help="corpus layout: " + ", ".join(all_recipes()))
    ap.add_argument("corpus_dir", nargs="?", type=Path, help="the corpus's local copy")
    ap.add_argument(
        "out_dir",
        nargs="?",
        type=Path,
        help="where to write conversations, points, rows and episodes",
    )
    ap.add_argument(
        "--labels", type=Path, help="the annotators' labels (JSONL keyed by decision point id)"
    )
    ap.add_argument(
        "--context-s",
        type=float,
        default=FinderSettings().context_s,
        help="seconds of history kept before each point (default %(default)s)",
    )
    ap.add_argument("--limit", type=int, help="read at most this many conversations")
    ap.add_argument("--list", action="store_true", help="list the recipes and their layouts")
    ap.add_argument("--progress", action="store_true", help="show progress bars")
    args = ap.parse_args(argv)
    if args.list:
        print(_list())
        return 0
    if not (args.recipe and args.corpus_dir and args.out_dir):
        ap.error("recipe, corpus_dir and out_dir are required (or --list)")
    logging.basicConfig(level=logging.WARNING, format="%(message)s")
    try:
        recipe = get_recipe(args.recipe)
        settings = FinderSettings(context_s=args.context_s)
        if args.limit is not None and args.limit < 1:
            raise FdevalError(f"--limit must be >= 1, got {args.limit}")
        prep = prepare(
            recipe.conversations(args.corpus_dir), args.out_dir, settings, args.limit, args.progress
        )
        cats = ", ".join(f"{n} {c}" for c, n in prep.by_category().items()) or "none"
        print(
            f"{prep.n_conversations} conversation(s), {len(prep.points)} decision point(s) ({cats}): "
            f"{args.out_dir / POINTS}"
        )
        if args.labels is None:
            print(
                f"no --labels: label the points in {POINTS} (docs/tact-corpora.md, 'Labels') and run again "
                "with --labels FILE"
            )
            return 0
        imp = import_labelled(args.out_dir, args.labels, settings.context_s, args.progress)
    except FdevalError as e:
        print(f"{PROG}: error: {e}", file=sys.stderr)
        return 2
    print(
        f"{imp.n_rows} labelled point(s) -> {imp.annotations}; {len(imp.unlabelled)} without labels, left out "
        f"({args.out_dir / UNLABELLED})"
    )
    print(f"{imp.n_written} episode(s) imported now: {imp.root}")
    print(
        f"run them: python -m fdeval.launch benchmark=tact benchmark.source=import "
        f"benchmark.corpus={args.out_dir / ANNOTATIONS}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
