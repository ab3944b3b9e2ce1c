"""`python -m fdeval.bench [--quick] [--out DIR] [--only SECTION,...] [--seed N]`.

Measures fdeval's speed on this machine, each figure beside a baseline measured in the same run,
and writes `<out>/bench.json` (the environment, `sections` in the order they ran, and each
section's figures under its name, e.g. `realtime.client_cpu_s_per_session_s`, which
`stage=plan launcher.plan.bench=bench.json` reads) and `<out>/bench.md`. Sections: see
fdeval/bench/__init__.py and docs/bench.md. A section that cannot run records why
(`{"skipped": reason}`); one that fails records its error and the command exits 1 after writing
the others.
"""

from __future__ import annotations

import argparse
import datetime
import logging
import sys
import time
import traceback
from pathlib import Path

from fdeval.bench.sections import SECTIONS
from fdeval.bench.common import Context, environment
from fdeval.bench.report import markdown
from fdeval.files import write_json_atomic, write_text_atomic


def parse_args(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m fdeval.bench", description=__doc__.splitlines()[0])
    p.add_argument(
        "--quick", action="store_true", help="CI-sized: fewer cases, fewer sessions at once"
    )
    p.add_argument("--out", type=Path, help="output folder (default ./bench-<UTC date>)")
    p.add_argument("--only", default="", help=f"comma-separated sections of: {','.join(SECTIONS)}")
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)
    args.only = [s for s in args.only.split(",") if s] or list(SECTIONS)
    if bad := [s for s in args.only if s not in SECTIONS]:
        p.exit(
            2,
            f"fdeval.bench: error: --only: unknown section(s) {','.join(bad)}; valid: {','.join(SECTIONS)}\n",
        )
    if args.out is None:
        args.out = Path(f"bench-{datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d}")
    return args


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    args = parse_args(argv)
    out = args.out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    # the runs' own log lines (warnings about cut sessions, step times) go to a file, not the terminal
    handler = logging.FileHandler(out / "bench.log")
    handler.setFormatter(logging.Formatter("[%(asctime)s][%(name)s][%(levelname)s] - %(message)s"))
    fdeval_log = logging.getLogger("fdeval")
    saved = fdeval_log.level, fdeval_log.propagate
    fdeval_log.addHandler(handler)
    fdeval_log.setLevel(logging.INFO)
    fdeval_log.propagate = False
    try:
        return _bench(args, argv, out)
    finally:
        fdeval_log.removeHandler(handler)
        handler.close()
        fdeval_log.setLevel(saved[0])
        fdeval_log.propagate = saved[1]


def _bench(args: argparse.Namespace, argv: list[str], out: Path) -> int:
    ctx = Context(quick=args.quick, out=out, seed=args.seed)
    started = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
    result = {
        "command": ["python", "-m", "fdeval.bench", *argv],
        "quick": args.quick,
        "started_utc": started,
        "environment": environment(),
        "sections": [],
    }
    failed = False
    t_all = time.perf_counter()
    for name in args.only:
        ctx.log(f"bench: {name} ...")
        t0 = time.perf_counter()
        try:
            section = SECTIONS[name](ctx)
        except Exception as e:  # noqa: BLE001 - one broken section must not cost the others' figures
            failed = True
            section = {
                "error": f"{type(e).__name__}: {(str(e).strip().splitlines() or [''])[0]}",
                "traceback": traceback.format_exc()[-4000:],
            }
        section["section_wall_s"] = time.perf_counter() - t0
        result["sections"].append(name)  # each section's figures at the top level, by its name
        result[name] = section
        ctx.log(
            f"bench: {name} done in {section['section_wall_s']:.1f} s"
            + (f" ({section['skipped']})" if "skipped" in section else "")
            + (f" FAILED: {section['error']}" if "error" in section else "")
        )
        write_json_atomic(out / "bench.json", result)  # what is measured so far survives a crash
    result["wall_s"] = time.perf_counter() - t_all
    write_json_atomic(out / "bench.json", result)
    text = markdown(result)
    write_text_atomic(out / "bench.md", text)
    print(text)
    print(
        f"fdeval.bench: wrote {out / 'bench.json'} and {out / 'bench.md'} in {result['wall_s']:.0f} s",
        file=sys.stderr,
    )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
