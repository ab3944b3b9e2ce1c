"""`python -m fdeval.review RUN_DIR [RUN_DIR ...] [--reviewer NAME] [--port N]`: serve the review app
on 127.0.0.1 (a free port unless --port) and print its URL. A run folder that cannot be read is one
line and exit 2."""

from __future__ import annotations

import argparse
import getpass
import os
import sys
from typing import Sequence

from fdeval.errors import FdevalError

from . import study  # noqa: F401 - registers the human study's routes and header link on the server
from .server import ReviewApp, make_server

PROG = "python -m fdeval.review"


def _default_reviewer() -> str:
    try:
        return os.environ.get("USER") or getpass.getuser()
    except (KeyError, OSError):
        return "reviewer"


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog=PROG, description="Review sessions of run folders in a browser."
    )
    ap.add_argument("run_dirs", nargs="+", metavar="RUN_DIR")
    ap.add_argument("--reviewer", default=None, help="your name in saved labels (default: $USER)")
    ap.add_argument("--port", type=int, default=0, help="port on 127.0.0.1 (default: a free one)")
    args = ap.parse_args(argv)
    try:
        app = ReviewApp(args.run_dirs, args.reviewer or _default_reviewer())
        server = make_server(app, args.port)
    except FdevalError as e:
        print(f"{PROG}: error: {e}", file=sys.stderr)
        return 2
    except OSError as e:
        print(
            f"{PROG}: error: cannot listen on 127.0.0.1:{args.port}: {e.strerror or e}",
            file=sys.stderr,
        )
        return 2
    print(f"fdeval review: http://127.0.0.1:{server.server_address[1]}/", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
