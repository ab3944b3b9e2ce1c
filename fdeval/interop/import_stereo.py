"""`python -m fdeval.interop.import_stereo --recordings DIR [--cases DIR] [--words DIR] [OVERRIDES]`

Imports stereo recordings made elsewhere (`<recordings>/<case_id>.wav`: ch0 the user, ch1 the
model, at the run's sample rate) of the run's cases into the run folder the same launch
overrides name (with `run_tag=imported` unless given), then prints the launch command that
transcribes, judges and scores them. `--cases DIR`: your own case files
(`benchmark.cases_dir=DIR`); without it the benchmark's generated cases. `--words DIR`: the
model's words per recording, `<case_id>.json` in Full-Duplex-Bench's `output.json` layout;
without it use an ASR for the model channel (`asr=whisper`). `--stages S` runs those stages
at once. See docs/interop.md.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from fdeval.audio.vad import SileroVAD
from fdeval.errors import FdevalError
from fdeval.interop.recording import import_session
from fdeval.interop.runs import cli, open_import_run, then


def import_recordings(recordings: Path, overrides: list[str], words: Path | None = None) -> Path:
    """Import every case's recording; the run folder. Nothing is written for a set that fails
    validation of a file (each is checked before its session is written; earlier ones stay)."""
    recordings = Path(recordings)
    if not recordings.is_dir():
        raise FdevalError(f"{recordings}: --recordings: not a folder")
    if words is not None and not Path(words).is_dir():
        raise FdevalError(f"{words}: --words: not a folder")
    run = open_import_run(overrides, recordings)
    ids = {c.case_id for c in run.cases}
    extra = sorted(p.name for p in recordings.glob("*.wav") if p.stem not in ids)
    if extra:
        raise FdevalError(
            f"{recordings / extra[0]}: no case {Path(extra[0]).stem!r} in this run's case set "
            f"({len(extra)} such file(s)); valid ids: {', '.join(sorted(ids)[:5])}, ..."
        )
    missing = [c.case_id for c in run.cases if not (recordings / f"{c.case_id}.wav").is_file()]
    if missing:
        raise FdevalError(
            f"{recordings / (missing[0] + '.wav')}: no recording for case {missing[0]!r} "
            f"({len(missing)} missing); select the recorded ones with benchmark.cases=[...]"
        )
    vad = SileroVAD(sample_rate=int(run.cfg.orchestrator.sample_rate))
    for case in run.cases:
        w = Path(words) / f"{case.case_id}.json" if words is not None else None
        if w is not None and not w.is_file():
            raise FdevalError(
                f"{w}: case {case.case_id!r}: field '<file>': no model words for this recording"
            )
        import_session(run, case, recordings / f"{case.case_id}.wav", w, vad)
    return run.run_dir


def main() -> None:
    p = argparse.ArgumentParser(
        prog="python -m fdeval.interop.import_stereo", description=__doc__.split("\n\n")[0]
    )
    p.add_argument(
        "--recordings",
        type=Path,
        required=True,
        help="folder of <case_id>.wav (ch0 user, ch1 model)",
    )
    p.add_argument("--cases", type=Path, help="folder of your own case files (benchmark.cases_dir)")
    p.add_argument(
        "--words", type=Path, help="folder of <case_id>.json model words (FDB output.json layout)"
    )
    p.add_argument("--out", help="out_root (default: the launch's)")
    p.add_argument("--stages", help="run these stages after importing, e.g. transcribe,judge,score")
    p.add_argument(
        "overrides", nargs="*", help="launch overrides, e.g. benchmark=instructfd seed=0"
    )
    a = p.parse_args()
    overrides = list(a.overrides)
    if a.cases is not None:
        overrides.append(f"benchmark.cases_dir={a.cases.resolve()}")
    if a.out:
        overrides.append(f"out_root={a.out}")

    def go() -> None:
        then(import_recordings(a.recordings, overrides, a.words), overrides, a.stages)

    cli(go)


if __name__ == "__main__":
    main()
