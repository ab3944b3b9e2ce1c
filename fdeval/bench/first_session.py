"""`python -m fdeval.bench.first_session OVERRIDES`: `python -m fdeval.launch OVERRIDES` that also
notes when its first session starts.

The moment `fdeval.orchestrator.session.run_session` is first entered (the VAD and the case's
audio are ready; the model's session is not opened yet, no frame has been played), this process's
CPU seconds (user + system, its waited-for children included) and the time (`time.time()`) are
written as JSON to the file that `FDEVAL_BENCH_MARK` names; the launch then runs on to its end as
usual. The function is replaced in its own module before `fdeval.launch` is imported, so every
later import of it gets the wrapper. The only extra work before the mark: importing the session
module a little earlier than the launch would (it needs it before its first session anyway) and
this module itself.
"""

from __future__ import annotations

import json
import os
import runpy
import time

from fdeval.orchestrator import session

MARK_ENV = "FDEVAL_BENCH_MARK"


def main() -> None:
    mark = os.environ[MARK_ENV]
    original = session.run_session
    marked = False

    async def noted(*args, **kwargs):
        nonlocal marked
        if not marked:
            marked = True
            t = os.times()
            now = time.time()
            with open(mark, "w") as f:
                json.dump(
                    {"cpu_s": t.user + t.system + t.children_user + t.children_system, "time": now},
                    f,
                )
        return await original(*args, **kwargs)

    session.run_session = noted
    # as `python -m fdeval.launch`: the module runs as __main__ and reads the overrides from sys.argv
    runpy.run_module("fdeval.launch", run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main()
