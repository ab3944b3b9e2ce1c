"""The `fdb` metric's tables: FDB's numbers per task, with bootstrap intervals, from the run's files.

Per sample (`fdb_samples.csv`), from the `transcribe` and `rate` files (times on the sample's
clock, seconds from the start of `input.wav`):

| task | columns | FDB's name |
| --- | --- | --- |
| smooth_turn_taking | `took_turn`, `latency_s` (first word - turn end, floored at 0) | TOR ↑, latency ↓ |
| pause_handling | `took_turn` | TOR ↓ |
| user_interruption | `took_turn`, `latency_s` (from its end), `rating` (0-5) | TOR ↑, latency ↓, GPT score ↑ |
| backchannel | `took_turn`, `n_backchannels`, `frequency_hz`, `jsd` | TOR ↓, Freq ↑, JSD ↓ |
| v15_* | `stop_latency_s`, `response_latency_s`, `behaviour` | stop / response latency, C_* shares |

Per task (`fdb_tasks.csv` / `.md`): each number's mean over the samples that have it, a BCa
bootstrap interval over samples (`benchmark.n_resamples`, `confidence`; † under `min_n_ci`
samples), n, and the provenance of the row (model, run, seed, versions, the judges' prompt
hashes). v1.5's behaviour is the share of each category among the rated samples (judge errors
and unrated samples counted apart, never as a category).

Where v1.5 gives lists (FDB's `get_timing.py` writes every overlap and every response gap of a
sample), a sample's stop latency is that of its overlap event: the first model-over-user
overlap that ends after the event starts; its response latency the first gap that opens at or
after the event's end. FDB leaves the per-sample choice to its reader; this one is documented in
docs/fdb.md.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import fdeval
from fdeval.engine.executor import read_outputs
from fdeval.engine.run import Run
from fdeval.errors import FdevalError
from fdeval.metrics.csvio import write_csv
from fdeval.metrics.format import Column, Table, to_markdown
from fdeval.metrics.stats import bootstrap_mean

from .judging import CATEGORIES
from .metrics import (
    Chunk,
    backchannel_sample,
    merge_segments,
    response_latencies,
    stop_latencies,
    take_turn,
    turn_latency_s,
    USER_MERGE_GAP_S,
    MODEL_MERGE_GAP_S,
)

METRIC_VERSION = "fdb-1"

# (task, key, FDB's name, better) per reported number, in table order
NUMBERS = (
    ("smooth_turn_taking", "took_turn", "TOR", "higher"),
    ("smooth_turn_taking", "latency_s", "latency (s)", "lower"),
    ("pause_handling", "took_turn", "TOR", "lower"),
    ("backchannel", "took_turn", "TOR", "lower"),
    ("backchannel", "frequency_hz", "frequency (1/s)", "higher"),
    ("backchannel", "jsd", "JSD", "lower"),
    ("user_interruption", "took_turn", "TOR", "higher"),
    ("user_interruption", "rating", "relevance (0-5)", "higher"),
    ("user_interruption", "latency_s", "latency (s)", "lower"),
)
V15_NUMBERS = (
    ("stop_latency_s", "stop latency (s)", "lower"),
    ("response_latency_s", "response latency (s)", "lower"),
)


def _chunks(words: list[list[Any]]) -> list[Chunk]:
    return [Chunk(str(t), float(s), None if e is None else float(e)) for t, s, e in words]


def sample_row(
    d: dict[str, Any], rating: dict[str, Any] | None, reference: Any, rule: str
) -> dict[str, Any]:
    """One sample's numbers from its transcribe file (and rate file, and backchannel reference)."""
    task = d["task"]
    words = _chunks(d["model_words"])
    row: dict[str, Any] = {
        "case_id": d["case_id"],
        "task": task,
        "subset": d["subset"],
        "sample": d["sample"],
    }
    ref = d.get("reference_s")
    if task == "smooth_turn_taking":
        took = take_turn(words)
        row.update(took_turn=int(took), latency_s=turn_latency_s(words, ref[0]) if took else None)
    elif task == "pause_handling":
        row.update(took_turn=int(take_turn(words, pause_rule=True)))
    elif task == "user_interruption":
        after = [w for w in words if w.start_s >= ref[1]]
        took = take_turn(after)
        row.update(
            took_turn=int(took),
            latency_s=turn_latency_s(after, ref[1]) if took else None,
            rating=None if rating is None or rating.get("status") != "ok" else rating.get("value"),
            rating_status=_status(rating),
        )
    elif task == "backchannel":
        fdb_code = rule == "fdb_code"  # FDB's segments are rounded to 0.1 s (metrics.py, 5)
        b = backchannel_sample(
            [tuple(s) for s in d["model_vad_s"]],
            words,
            float(d["duration_s"]),
            reference,
            segment_decimals=1 if fdb_code else None,
            rule=rule,
        )
        row.update(
            took_turn=int(b.took_turn),
            n_backchannels=len(b.backchannels_s),
            frequency_hz=b.frequency_hz,
            jsd=b.jsd,
            jsd_note="" if reference is not None else "no reference for this sample",
        )
    else:  # v1.5
        user = merge_segments([tuple(s) for s in d["user_vad_s"]], USER_MERGE_GAP_S)
        model = merge_segments([tuple(s) for s in d["model_vad_s"]], MODEL_MERGE_GAP_S)
        start, end = ref
        stops = [iv for iv in stop_latencies(user, model) if iv[1] > start]
        gaps = [iv for iv in response_latencies(user, model) if iv[0] >= end - 1e-9]
        row.update(
            stop_latency_s=round(stops[0][1] - stops[0][0], 3) if stops else None,
            response_latency_s=round(gaps[0][1] - gaps[0][0], 3) if gaps else None,
            behaviour=None
            if rating is None or rating.get("status") != "ok"
            else rating.get("value"),
            behaviour_status=_status(rating),
        )
    return row


def _status(rating: dict[str, Any] | None) -> str:
    if rating is None:
        return "none"
    if rating.get("status") == "error":
        return "error"
    meta = rating.get("metadata") or {}
    return str(meta.get("rating_status") or meta.get("behaviour_status") or "ok")


def _references(bench: Any, run: Run, subsets: set[str]) -> dict[str, dict[str, Any]]:
    """The backchannel reference distribution of each task folder, keyed by sample (as FDB)."""
    out = {}
    for subset in subsets:
        path = bench.reference_distribution(run.data_dir, subset)
        if path is None:
            out[subset] = {}
            continue
        try:
            ref = json.loads(Path(path).read_text(encoding="utf-8"))
        except (OSError, ValueError) as e:
            raise FdevalError(f"{path}: unreadable reference distribution ({e})") from None
        if not isinstance(ref, dict):
            raise FdevalError(f"{path}: expected an object keyed by sample folder")
        out[subset] = ref
    return out


def fdb_tables(bench: Any, run: Run, scores_dir: Path) -> str:
    """Write fdb_samples.csv and fdb_tasks.csv / .md; the markdown to print."""
    done, skipped = read_outputs(run, "transcribe")
    rated = {u.case_id: d for u, d in read_outputs(run, "rate")[0]}
    files = [d for _, d in done]
    refs = _references(bench, run, {d["subset"] for d in files if d["task"] == "backchannel"})
    rows = []
    for d in sorted(files, key=lambda d: (d["task"], d["subset"], _num(d["sample"]))):
        ref = refs.get(d["subset"], {}).get(d["sample"]) if d["task"] == "backchannel" else None
        rows.append(sample_row(d, rated.get(d["case_id"]), ref, bench.definitions))
    prov = {
        "benchmark": bench.name,
        "benchmark_version": bench.version,
        "model": str(run.cfg.model.name),
        "model_id": run.model_id,
        "run_id": run.run_id,
        "seed": run.seed,
        "data_id": bench.data_id(run.seed),
        "metric_version": METRIC_VERSION,
        "fdeval_version": fdeval.__version__,
        "definitions": bench.definitions,
        "vad_min_speech_s": bench.vad_min_speech_s,
        "asr": str(run.cfg.asr.get("name")),
    }
    judges = _judges(rated)
    tasks = task_rows(bench, rows, prov, judges)
    write_csv([{**r, **prov} for r in rows], scores_dir / "fdb_samples.csv")
    write_csv(tasks, scores_dir / "fdb_tasks.csv")
    n_skip = sum(len(v) for v in skipped.values())
    notes = [
        f"† interval from fewer than {bench.min_n_ci} samples.",
        f"FDB's numbers, definitions={bench.definitions} (docs/fdb.md: `paper` follows FDB's "
        "papers where its code differs, `fdb_code` its evaluators as written); intervals are BCa "
        f"over samples ({bench.n_resamples} resamples, {bench.confidence:.0%}).",
    ]
    if n_skip:
        notes.append(
            f"{n_skip} session(s) not scored (invalid or missing): "
            + ", ".join(f"{k} {len(v)}" for k, v in skipped.items() if v)
        )
    md = to_markdown([task_table(tasks, notes)])
    (scores_dir / "fdb_tasks.md").write_text(md, encoding="utf-8")
    return md


def _num(sample: str) -> tuple[int, str]:
    return (int(sample), "") if sample.isdigit() else (1 << 30, sample)


def _judges(rated: dict[str, dict[str, Any]]) -> dict[str, str]:
    """The prompt hash of the judge behind each judged key (one per run and key)."""
    out = {}
    for d in rated.values():
        j = (d.get("metadata") or {}).get("judge") or {}
        if j.get("prompt_hash"):
            out[str(d.get("key"))] = f"{j.get('backend')}:{j.get('model')}@{j.get('prompt_hash')}"
        elif str(d.get("key")) not in out:
            out[str(d.get("key"))] = str(j.get("backend") or "")
    return out


def _interval(bench: Any, values: list[float], seed: int) -> dict[str, Any]:
    ci = bootstrap_mean(
        values, resamples=bench.n_resamples, seed=seed, level=bench.confidence, unit="sample"
    )
    return {
        "value": None if ci.estimate is None else round(ci.estimate, 6),
        "ci_low": None if ci.low is None else round(ci.low, 6),
        "ci_high": None if ci.high is None else round(ci.high, 6),
        "n": len(values),
        "small_n": len(values) < bench.min_n_ci,
    }


def _statuses(rs: list[dict[str, Any]], key: str) -> str:
    """What kept samples out of a judged number (`not_rated 3, error 1`)."""
    st = Counter(r.get(key) for r in rs)
    return ", ".join(f"{k} {v}" for k, v in sorted(st.items()) if k != "ok")


def task_rows(
    bench: Any, rows: list[dict[str, Any]], prov: dict[str, Any], judges: dict[str, str]
) -> list[dict[str, Any]]:
    """One row per (task, number): mean, interval, n; v1.5's behaviour as shares."""
    by_task: dict[str, list[dict[str, Any]]] = {}
    for r in rows:
        by_task.setdefault(r["task"], []).append(r)
    out = []
    seed = int(prov["seed"])

    def add(task: str, label: str, key: str, better: str, vals: list[float], **extra: Any):
        head = {"task": task, "number": label, "key": key, "better": better}
        n = {"samples": len(by_task[task])}
        out.append({**head, **n, **_interval(bench, vals, seed), **extra, **prov})

    for task, key, label, better in NUMBERS:
        rs = by_task.get(task)
        if not rs:
            continue
        vals = [float(r[key]) for r in rs if r.get(key) is not None]
        extra = {}
        if key == "rating":
            extra = {"judge": judges.get("relevance", ""), "note": _statuses(rs, "rating_status")}
        add(task, label, key, better, vals, **extra)
    for task in sorted(t for t in by_task if t.startswith("v15_")):
        rs = by_task[task]
        for key, label, better in V15_NUMBERS:
            add(task, label, key, better, [float(r[key]) for r in rs if r.get(key) is not None])
        judged = [r["behaviour"] for r in rs if r.get("behaviour") is not None]
        note = _statuses(rs, "behaviour_status")
        for cat in CATEGORIES:
            hits = [1.0 if b == cat else 0.0 for b in judged]
            add(
                task,
                f"share {cat}",
                f"behaviour:{cat}",
                "",
                hits,
                judge=judges.get("behaviour", ""),
                note=note,
            )
    return out


def task_table(rows: list[dict[str, Any]], notes: list[str]) -> Table:
    shown = [
        {
            **r,
            "mean": (r["value"], r["ci_low"], r["ci_high"], r["small_n"]),
        }
        for r in rows
    ]
    return Table(
        "Full-Duplex-Bench",
        [
            Column("task", "task"),
            Column("number", "number"),
            Column("better", "better"),
            Column("mean", "mean [CI]", "num_ci"),
            Column("n", "n", "int"),
            Column("samples", "samples", "int"),
            Column("note", "note"),
        ],
        shown,
        notes,
    )
