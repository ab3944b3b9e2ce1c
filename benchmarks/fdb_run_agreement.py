"""FDB's own evaluators beside fdeval's `fdb` table, on one run's (or one folder's) FDB samples.

    python benchmarks/fdb_run_agreement.py RUN_DIR --fdb-python /tmp/fdb-venv/bin/python \
        [--root FOLDER] [--out table.md]

RUN_DIR is a `benchmark=fdb` run (live or imported). FDB's evaluators (the unmodified files of
benchmarks/fdb_agreement.py's commit, copied out of a Full-Duplex-Bench git directory, run by a
Python that has their dependencies: see that script) are run on each task folder of `--root`
(default: the FDB-layout folders the run's transcribe step wrote), on a scratch copy (two of them
write into the sample folders); the numbers they print are set beside the run's
`fdb_tasks.csv`. User interruption's GPT judge is a stand-in with a fixed answer (no network
here), so its rating is not compared. Backchannel's reference distribution is the one the run
used (the transcribe step copies it beside the samples as `reference_distribution.json`),
copied to the `./icc_gt_distribution.json` FDB reads. v1.5's timing lists are compared per
sample with the ones fdeval computes from the run's speech segments.

A run scored with `benchmark.definitions=fdb_code` should agree to the last printed digit; the
default `paper` differs where docs/fdb.md says FDB's code and its papers differ.
"""

from __future__ import annotations

import argparse
import csv
import importlib.util
import json
import subprocess
import sys
import tempfile
from pathlib import Path

from fdeval.benchmarks.fdb.metrics import (
    MODEL_MERGE_GAP_S,
    USER_MERGE_GAP_S,
    merge_segments,
    response_latencies,
    stop_latencies,
)
from fdeval.engine.run import step_dir

HERE = Path(__file__).resolve().parent
_spec = importlib.util.spec_from_file_location("fdb_agreement", HERE / "fdb_agreement.py")
agreement = importlib.util.module_from_spec(_spec)
sys.modules["fdb_agreement"] = agreement  # its dataclasses look their module up by name
_spec.loader.exec_module(agreement)

DRIVER = (
    r"""
import contextlib, io, json, os, shutil, sys
from pathlib import Path
from types import SimpleNamespace

EVAL_DIR, JOBS = Path(sys.argv[1]), json.loads(sys.argv[2])
sys.path.insert(0, str(EVAL_DIR))
import torch, silero_vad

# get_timing.py loads Silero from torch.hub (GitHub) at import; there is no network here
torch.hub.load = lambda *a, **k: (silero_vad.load_silero_vad(), None)
import eval_backchannel, eval_pause_handling, eval_smooth_turn_taking
import eval_user_interruption, get_timing


class Judge:  # FDB's OpenAI client, answered by a stand-in: its rating means nothing
    def __init__(self):
        self.chat = SimpleNamespace(completions=SimpleNamespace(create=self.create))

    def create(self, **request):
        text = "Analysis: stand-in.\nI would rate the AI's response as 3"
        return SimpleNamespace(choices=[SimpleNamespace(message=SimpleNamespace(content=text))])

"""
    + agreement.CAPTURE
    + r"""

results = {}
for job in JOBS:
    folder, task = job["folder"], job["task"]
    if task == "smooth_turn_taking":
        text, err = capture(eval_smooth_turn_taking.eval_smooth_turn_taking, folder)
        got = {"took_turn": printed(text, "Average take turn:"),
               "latency_s": printed(text, "Average latency:")}
    elif task == "pause_handling":
        text, err = capture(eval_pause_handling.eval_pause_handling, folder)
        got = {"took_turn": printed(text, "Average take turn:")}
    elif task == "user_interruption":
        text, err = capture(eval_user_interruption.eval_user_interruption, folder, Judge())
        got = {"took_turn": printed(text, "Average take turn:"),
               "latency_s": printed(text, "Average latency:")}
    elif task == "backchannel":
        os.chdir(job["cwd"])  # eval_backchannel reads ./icc_gt_distribution.json
        text, err = capture(eval_backchannel.eval_backchannel, folder)
        got = {"jsd": printed(text, "JSD - Mean:"), "took_turn": printed(text, "TOR - Mean:"),
               "frequency_hz": printed(text, "Frequency - Mean:")}
    else:
        sys.argv = ["get_timing.py", "--root_dir", folder]
        text, err = capture(get_timing.main)
        got = {p.name: json.loads((p / "latency_intervals.json").read_text())
               for p in Path(folder).iterdir() if (p / "latency_intervals.json").is_file()}
    results[job["name"]] = {"task": task, "numbers": got, "error": err}
print("RESULTS " + json.dumps(results))
"""
)


def _rows(path: Path) -> list[dict[str, str]]:
    with open(path, newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))


def jobs_for(run: Path, root: Path, scratch: Path) -> list[dict[str, str]]:
    """One evaluator job per task folder of `root` (tasks from the run's fdb_samples.csv)."""
    samples = _rows(step_dir(run, "score") / "fdb_samples.csv")
    task_of = {r["subset"]: r["task"] for r in samples}
    jobs = []
    for sub in sorted(p for p in root.iterdir() if p.is_dir() and p.name in task_of):
        work = scratch / "work" / sub.name
        subprocess.run(["cp", "-r", str(sub), str(work)], check=True)
        for extra in work.glob("*.json"):  # FDB's evaluators list every entry of the folder
            extra.unlink()
        job = {"name": sub.name, "task": task_of[sub.name], "folder": str(work)}
        if job["task"] == "backchannel":
            ref = sub / "reference_distribution.json"  # the transcribe step copies the run's
            cwd = scratch / "cwd" / sub.name
            cwd.mkdir(parents=True)
            (cwd / "icc_gt_distribution.json").write_bytes(Path(ref).read_bytes())
            job["cwd"] = str(cwd)
        jobs.append(job)
    return jobs


def fdeval_lists(run: Path, subset: str) -> dict[str, dict[str, list]]:
    """fdeval's v1.5 timing lists per sample, from the run's transcribe files."""
    out = {}
    for p in step_dir(run, "transcribe").glob(f"{subset}-*.json"):
        d = json.loads(p.read_text())
        user = merge_segments([tuple(s) for s in d["user_vad_s"]], USER_MERGE_GAP_S)
        model = merge_segments([tuple(s) for s in d["model_vad_s"]], MODEL_MERGE_GAP_S)
        out[d["sample"]] = {
            "latency_stop_list": [list(x) for x in stop_latencies(user, model)],
            "latency_resp_list": [list(x) for x in response_latencies(user, model)],
        }
    return out


def side_by_side(run: Path, fdb: dict) -> list[str]:
    tasks = _rows(step_dir(run, "score") / "fdb_tasks.csv")
    lines = ["| task folder | number | FDB's evaluator | fdeval | match |", "|---|---|---|---|---|"]
    for name, got in fdb.items():
        if got["error"]:
            lines.append(f"| {name} | (evaluator failed) | {got['error']} | | |")
            continue
        if got["task"].startswith("v15_"):
            ours = fdeval_lists(run, name)
            same = sum(ours.get(k) == v for k, v in got["numbers"].items())
            lines.append(
                f"| {name} | stop / response lists | {len(got['numbers'])} samples | "
                f"{len(ours)} samples | {same}/{len(got['numbers'])} identical |"
            )
            continue
        for key, theirs in got["numbers"].items():
            row = next((r for r in tasks if r["task"] == got["task"] and r["key"] == key), None)
            mine = float(row["value"]) if row and row["value"] else None
            digits = 4 if got["task"] == "backchannel" else 6  # FDB prints backchannel to 4 places
            ok = (
                theirs is not None
                and mine is not None
                and abs(round(mine, digits) - theirs) <= 0.5 * 10**-digits + 1e-12
            )
            lines.append(
                f"| {name} | {row['number'] if row else key} | {theirs} | "
                f"{None if mine is None else round(mine, 6)} | {'yes' if ok else 'NO'} |"
            )
    return lines


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("run", type=Path)
    ap.add_argument("--fdb-python", type=Path, required=True)
    ap.add_argument("--fdb-repo", type=Path, default=agreement.DEFAULT_FDB_REPO)
    ap.add_argument("--root", type=Path, help="FDB-layout folder (default: the run's own)")
    ap.add_argument("--out", type=Path)
    a = ap.parse_args(argv)
    root = a.root or step_dir(a.run, "transcribe") / "fdb"
    with tempfile.TemporaryDirectory(prefix="fdb-run-agreement-") as tmp:
        scratch = Path(tmp)
        (scratch / "work").mkdir()
        agreement.copy_evaluators(a.fdb_repo, scratch / "eval")
        jobs = jobs_for(a.run, root, scratch)
        proc = subprocess.run(
            [str(a.fdb_python), "-c", DRIVER, str(scratch / "eval"), json.dumps(jobs)],
            capture_output=True,
            text=True,
        )
    line = next((x for x in proc.stdout.splitlines() if x.startswith("RESULTS ")), None)
    if line is None:
        print(proc.stdout[-3000:], proc.stderr[-3000:], file=sys.stderr)
        return 1
    table = "\n".join(
        [
            f"FDB {agreement.FDB_COMMIT[:7]} evaluators on {root}",
            "",
            *side_by_side(a.run, json.loads(line[8:])),
        ]
    )
    print(table)
    if a.out:
        a.out.write_text(table + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
