"""The profile-swap ablation (Sec. VI): does a system's timing follow the speaker's profile?

A profile reaches a system only as its instruction (the rendered synopsis, `render_synopsis`).
`benchmark.profiles=swapped` gives every speaker's episodes the profile of a speaker of the
opposite behavioural type instead of their own; everything else about the run is unchanged, so
the case ids, and with them the per-case seeds, are the same as in the run with their own
profiles. This module pairs the speakers, compares the two runs and writes the paper's table:

    python -m fdeval.benchmarks.tact.swap [--out DIR] [launch overrides ...]
    python -m fdeval.benchmarks.tact.swap --runs OWN_RUN_DIR SWAPPED_RUN_DIR [--out DIR]

The first form launches `python -m fdeval.launch benchmark=tact <overrides>` twice (own profiles,
then `benchmark.profiles=swapped`; a launch already done is resumed, so it costs nothing), the
second only compares two finished runs. The table (`profile_swap.csv` / `.md`, by default under
`<out_root>/tact/_profile_swap/<model>-<own run id>-<swapped run id>/`) has, per system, JSD_2
between its onsets (every repeat of every episode) under its own and the swapped profiles
(`analysis.profile_swap_jsd`: 0.25 s bins over T plus no response, in bits), and
Delta S = S(swapped) - S(own).

The human row asks the same of the human continuations: the onsets that answered each speaker
against those that answered their swap partner (each episode contributes its partner's
continuations with total weight 1). Synthetic continuations are drawn from the intent's law
whoever the speaker is, so there it measures only sampling noise (JSD_2 of small samples is
biased upward); on a corpus it is the paper's "held-out human behaviour shifts" figure.

Behavioural type (the paper does not define it): a speaker's timing score is the z-scored FTO
median plus the z-scored abstention tolerance (how soon they take the floor and how long they
let a silence run), over the speakers present; the lower half by score (ties by id) is "quick",
the rest "patient". A speaker's partner is the speaker of the other type farthest from them in
the z-scored behaviour features (`BEHAVIOUR_FEATURES`; missing values count as the mean).
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import re
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from omegaconf import OmegaConf

from fdeval.engine.run import Run, RunFolder, step_dir
from fdeval.errors import FdevalError
from fdeval.files import write_text_atomic
from fdeval.metrics.csvio import write_csv
from fdeval.metrics.format import md_cell

from .analysis import jsd2, onset_histogram, profile_swap_jsd
from .episodes import SpeakerProfile, profile_features

BEHAVIOUR_FEATURES = (
    "fto_median_s",
    "pause_median_s",
    "abstention_tolerance_s",
    "backchannel_solicitation_per_min",
    "backchannel_production_per_min",
    "articulation_rate_syl_s",
)
TYPE_FEATURES = ("fto_median_s", "abstention_tolerance_s")
TABLE = "profile_swap"


def _zscores(
    profiles: Mapping[str, SpeakerProfile], names: Sequence[str]
) -> tuple[list[str], np.ndarray]:
    ids = sorted(profiles)
    X = np.array(
        [[profile_features(profiles[s])[f] for f in names] for s in ids], dtype=float
    ).reshape(len(ids), -1)
    with np.errstate(invalid="ignore"):
        mu = np.nanmean(X, axis=0) if len(ids) else np.zeros(len(names))
        sd = np.nanstd(X, axis=0) if len(ids) else np.ones(len(names))
    mu = np.nan_to_num(mu)
    sd = np.where(np.isfinite(sd) & (sd > 0), sd, 1.0)
    return ids, np.nan_to_num((X - mu) / sd)


def behaviour_types(profiles: Mapping[str, SpeakerProfile]) -> dict[str, str]:
    """Each speaker's type, "quick" or "patient" (module docstring)."""
    ids, Z = _zscores(profiles, TYPE_FEATURES)
    score = Z.sum(axis=1)
    order = sorted(range(len(ids)), key=lambda i: (score[i], ids[i]))
    quick = {ids[i] for i in order[: len(ids) // 2]}
    return {s: "quick" if s in quick else "patient" for s in ids}


def swap_partners(profiles: Mapping[str, SpeakerProfile]) -> dict[str, str]:
    """speaker id -> the speaker whose profile replaces theirs: the farthest of the other type.
    A speaker with nobody of the other type (a single speaker) has no partner and is left out."""
    types = behaviour_types(profiles)
    ids, Z = _zscores(profiles, BEHAVIOUR_FEATURES)
    out = {}
    for i, s in enumerate(ids):
        other = [j for j, t in enumerate(ids) if types[t] != types[s]]
        if other:
            dist = np.sum((Z[other] - Z[i]) ** 2, axis=1)
            out[s] = ids[other[int(np.argmax(dist))]]  # argmax keeps the first (lowest id) of ties
    return out


# ---------------------------------------------------------------------------------------------
# Comparing two runs


def open_run(run_dir: str | Path) -> Run:
    """The engine's `Run` of a finished run folder (its run.json's command config)."""
    run_dir = Path(run_dir).expanduser().resolve()
    try:
        cfg = json.loads((run_dir / "run.json").read_text(encoding="utf-8"))["command_config"]
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise FdevalError(f"{run_dir}: not a run folder ({e})") from None
    if not isinstance(cfg, dict) or (cfg.get("benchmark") or {}).get("name") != "tact":
        raise FdevalError(f"{run_dir}: not a TACT run")
    out_root = run_dir.parents[2]
    cfg["out_root"] = str(out_root)
    return Run(OmegaConf.create(cfg), run_dir, out_root, identity=RunFolder.read_identity(run_dir))


def run_onsets(run_dir: Path) -> dict[str, float]:
    """case id -> onset (NaN: no response) from the run's judged files."""
    out = {}
    for p in sorted(step_dir(run_dir, "posterior").glob("*.json")):
        d = json.loads(p.read_text())
        if "case_id" in d and "onset_s" in d:
            out[d["case_id"]] = math.nan if d["onset_s"] is None else float(d["onset_s"])
    if not out:
        raise FdevalError(f"{run_dir}: no judged files; run it to the end (stage=all) first")
    return out


def run_composite(run_dir: Path) -> tuple[str, float]:
    """(system, S) from the run's composite table."""
    path = step_dir(run_dir, "score") / "tact_composite.csv"
    if not path.is_file():
        raise FdevalError(f"{path}: missing; run the score stage first")
    for r in csv.DictReader(path.open()):
        if r["score"] == "S" and not r["system"].startswith("human"):
            return r["system"], float(r["estimate"])
    raise FdevalError(f"{path}: no system row")


def human_swap_jsd(run: Run) -> tuple[float, int]:
    """(JSD_2, episodes) of the human continuations answering each speaker vs their partner's."""
    eps = [e for e in run.benchmark.episodes(run.data_dir) if e.human is not None]
    partners = swap_partners(
        {e.speaker_id: e.profile for e in run.benchmark.episodes(run.data_dir)}
    )
    by_speaker: dict[str, list[float]] = {}
    for e in eps:
        by_speaker.setdefault(e.speaker_id, []).append(
            math.nan if e.human.onset_s is None else e.human.onset_s
        )
    own, swapped = [], []
    for e in eps:
        p = partners.get(e.speaker_id)
        if p in by_speaker:
            own.append(e.human.onset_s if e.human.onset_s is not None else math.nan)
            swapped.append(onset_histogram(by_speaker[p]))
    if not own:
        return math.nan, 0
    return jsd2(onset_histogram(own), np.mean(swapped, axis=0)), len(own)


def swap_rows(own_dir: str | Path, swapped_dir: str | Path) -> list[dict[str, Any]]:
    """The table's rows: the system, then the human continuations."""
    own_dir, swapped_dir = Path(own_dir).resolve(), Path(swapped_dir).resolve()
    own_run, swapped_run = open_run(own_dir), open_run(swapped_dir)
    if own_run.benchmark.profiles != "own" or swapped_run.benchmark.profiles != "swapped":
        raise FdevalError(
            f"expected a run with benchmark.profiles=own and one with =swapped, got "
            f"{own_run.benchmark.profiles!r} and {swapped_run.benchmark.profiles!r}"
        )
    a, b = run_onsets(own_dir), run_onsets(swapped_dir)
    common = sorted(set(a) & set(b))
    if not common:
        raise FdevalError("the two runs share no case")
    system, s_own = run_composite(own_dir)
    _, s_swapped = run_composite(swapped_dir)
    prov = {
        "own_run": own_dir.name,
        "swapped_run": swapped_dir.name,
        "data_id": own_run.benchmark.data_id(own_run.seed),
    }
    rows = [
        {
            "system": system,
            "onsets": len(common),
            "jsd2": round(profile_swap_jsd([a[c] for c in common], [b[c] for c in common]), 6),
            "S_own": round(s_own, 6),
            "S_swapped": round(s_swapped, 6),
            "delta_S": round(s_swapped - s_own, 6),
            **prov,
        }
    ]
    h, n = human_swap_jsd(own_run)
    rows.append(
        {
            "system": "human (continuations)",
            "onsets": n,
            "jsd2": None if math.isnan(h) else round(h, 6),
            "S_own": None,
            "S_swapped": None,
            "delta_S": None,
            **prov,
        }
    )
    return rows


def markdown(rows: list[dict[str, Any]]) -> str:
    lines = [
        "# TACT profile swap",
        "",
        f"- own profiles: {rows[0]['own_run']}",
        f"- swapped profiles: {rows[0]['swapped_run']}",
        f"- data: {rows[0]['data_id']}",
        "- JSD_2: onsets under own vs swapped profiles, 0.25 s bins over [-2, 5] s plus no response, in bits; "
        "Delta S = S(swapped) - S(own)",
        "",
        "| system | JSD_2 | Delta S | S (own) | S (swapped) | onsets |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        lines.append(
            f"| {r['system']} | {md_cell(r['jsd2'])} | {md_cell(r['delta_S'])} | {md_cell(r['S_own'])} | "
            f"{md_cell(r['S_swapped'])} | {r['onsets']} |"
        )
    return "\n".join(lines) + "\n"


def write_table(
    own_dir: str | Path, swapped_dir: str | Path, out: str | Path | None = None
) -> Path:
    """Write profile_swap.csv / .md for two runs; returns the folder."""
    rows = swap_rows(own_dir, swapped_dir)
    if out is None:
        own = Path(own_dir).resolve()
        out = (
            own.parents[2]
            / "tact"
            / "_profile_swap"
            / (
                f"{own.parent.name}-{own.name.rsplit('-', 1)[-1]}-{Path(swapped_dir).resolve().name.rsplit('-', 1)[-1]}"
            )
        )
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    write_csv(rows, out / f"{TABLE}.csv")
    write_text_atomic(out / f"{TABLE}.md", markdown(rows))
    return out


# ---------------------------------------------------------------------------------------------
# Command line

_RUN_FOLDER = re.compile(r"^fdeval: run folder (.+)$", re.M)


def launch(overrides: Sequence[str], cwd: Path | None = None) -> Path:
    """`python -m fdeval.launch benchmark=tact <overrides>`; the run folder it used."""
    proc = subprocess.run(
        [sys.executable, "-m", "fdeval.launch", "benchmark=tact", *overrides],
        cwd=cwd,
        capture_output=True,
        text=True,
    )
    found = _RUN_FOLDER.findall(proc.stdout)
    if proc.returncode != 0 or not found:
        tail = (proc.stdout + proc.stderr).strip().splitlines()[-15:]
        raise FdevalError(
            f"launch {' '.join(overrides) or '(defaults)'} exited {proc.returncode}:\n"
            + "\n".join(tail)
        )
    return Path(found[-1].strip())


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m fdeval.benchmarks.tact.swap",
        description="TACT profile swap (Sec. VI): JSD_2 of onsets under own vs swapped "
        "profiles. Other arguments are overrides for both launches.",
    )
    ap.add_argument(
        "--runs",
        nargs=2,
        metavar=("OWN", "SWAPPED"),
        type=Path,
        help="compare two finished runs instead of launching them",
    )
    ap.add_argument("--out", type=Path, help="folder for profile_swap.csv / .md")
    args, overrides = ap.parse_known_args(argv)
    try:
        if args.runs:
            if overrides:
                ap.error(f"--runs takes no launch overrides, got {overrides}")
            own, swapped = args.runs
        else:
            bad = [
                o
                for o in overrides
                if o.lstrip("+~").startswith(("benchmark.profiles=", "benchmark="))
            ]
            if bad:
                ap.error(f"{bad[0]}: the command sets benchmark and benchmark.profiles itself")
            own = launch(overrides)
            print(f"own profiles: {own}", file=sys.stderr)
            swapped = launch([*overrides, "benchmark.profiles=swapped"])
            print(f"swapped profiles: {swapped}", file=sys.stderr)
        out = write_table(own, swapped, args.out)
    except FdevalError as e:
        print(f"fdeval: error: {e}", file=sys.stderr)
        return 2
    print((out / f"{TABLE}.md").read_text())
    print(f"wrote {out / (TABLE + '.csv')} and {out / (TABLE + '.md')}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
