"""Run the contract checks (contract_checks.py) on an in-process batched model (moshi_lockstep or
personaplex_lockstep), inside the moshi venv, on its tiny random checkpoint, greedy (so that it is
deterministic): `python contract_runner.py MODEL TINY_JSON AUDIO_NPY OUT_JSON`. The model comes
from its stand-in module's `build(tiny)` (tests/models/standins/MODEL.py). Writes each check's
result (what it measured, or its error) to OUT_JSON; test_contract.py reads it.
"""

from __future__ import annotations

import asyncio
import json
import sys
import traceback
from pathlib import Path

import numpy as np
from contract_checks import (
    Target,
    check_cancel,
    check_chunking,
    check_close_twice,
    check_text_before_audio,
    sessions_in_1_and_37,
)
from standins import discover


def main(name: str, tiny: dict, audio: np.ndarray, out: Path) -> None:
    m = discover([name])[0][name].build(tiny)
    t = Target(
        m, audio, has_text=True, held=lambda: sum(o is not None for o in m.pool.owner), quiet_s=0.0
    )
    results: dict = {}

    def record(name: str, fn) -> None:
        try:
            results[name] = {"ok": True, "measured": fn()}
        except BaseException as e:  # every check reports, whatever the one before did
            results[name] = {
                "ok": False,
                "error": f"{type(e).__name__}: {e}\n{traceback.format_exc()[-2000:]}",
            }

    runs: dict = {}
    record("sessions", lambda: runs.update(asyncio.run(sessions_in_1_and_37(t))) or len(runs))
    record("chunking", lambda: check_chunking(t, runs))
    record("text_before_audio", lambda: check_text_before_audio(t, runs))
    record("close_twice", lambda: asyncio.run(check_close_twice(t)))
    record("cancel", lambda: asyncio.run(check_cancel(t)))
    record("model_close_twice", lambda: (m.close(), m.close(), m._pool is None)[-1])
    out.write_text(json.dumps(results))


if __name__ == "__main__":
    main(sys.argv[1], json.loads(sys.argv[2]), np.load(sys.argv[3]), Path(sys.argv[4]))
