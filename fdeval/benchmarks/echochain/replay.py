"""Replay: the flagged exchanges of other runs, played to this run's model (§4.3).

`benchmark.mode=replay benchmark.replay_from=[RUN_DIR, ...]` builds one scripted case per flagged
conversation of those runs (their `graded/<key>/` files say which, the `exchanges/<key>/` files
what was said, in the folders their run.json names):
the user's message and barge-in are cut from the source recording's user channel, so the second
model hears the identical samples; the barge-in keeps its turn type and the delay it ran with, so
it is injected under the same rule (that delay after this model's own speech onset); the
exchanges before it are given as text in the responder prompt. Each case records its source (run,
model, case, session, exchange); a conversation is not replayed to the model it was recorded with.
"""

from __future__ import annotations

import hashlib
import json
import math
from pathlib import Path
from typing import Any

import numpy as np

from fdeval.audio.io import read_wav, write_wav
from fdeval.cases.schema import write_case
from fdeval.engine.run import step_dir
from fdeval.errors import ConfigError, FdevalError
from fdeval.recording import read_session
from fdeval.types import TestCase, Turn, WordTiming

from .dialogue import history_text, responder_prompt
from .records import EchoChainCase
from .segment import barge_in_label, exchange_from_dict, log_spans, message_label
from .seeds import Seed


def _json(path: Path) -> Any:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError) as e:
        raise ConfigError(f"{path}: unreadable ({e})") from None


def flagged(run_dir: Path) -> list[dict[str, Any]]:
    """The flagged conversations of a source run: its graded and exchanges files (in the folders
    of its last launch's settings, run.json's `steps`), its model."""
    ident = _json(run_dir / "run.json").get("identity") or {}
    bench = (ident.get("config") or {}).get("benchmark") or {}
    model = _json(run_dir / "model.json") if (run_dir / "model.json").is_file() else {}
    try:
        graded, exchanges = step_dir(run_dir, "grade"), step_dir(run_dir, "segment")
    except FdevalError as e:
        raise ConfigError(f"benchmark.replay_from: {e}") from None
    if not graded.is_dir():
        raise ConfigError(
            f"benchmark.replay_from: {run_dir} has no {graded.relative_to(run_dir)}/ folder; "
            "run its stage=judge first"
        )
    out = []
    for g in sorted(graded.glob("*.json")):
        if g.name.endswith(".error.json"):
            continue
        d = _json(g)
        if not d.get("flagged") or d.get("evaluated") is None:
            continue
        seg = _json(exchanges / g.name)
        out.append(
            {
                "run_dir": run_dir,
                "run_id": _json(run_dir / "run.json").get("run_id"),
                "graded": d,
                "segment": seg,
                "graded_dir": str(graded),
                "model_id": model.get("model_id"),
                "model_name": str((model.get("identity") or {}).get("name", "")),
                "benchmark": bench,
            }
        )
    return out


def replay_data_id(bench: Any) -> str:
    h = hashlib.sha256()
    for src in bench.replay_from:
        for f in flagged(src):
            h.update(
                f"{f['run_id']}|{f['graded']['case_id']}|{f['graded']['provenance']['session_id']}".encode()
            )
    return f"replay-v{bench.version}-{h.hexdigest()[:12]}"


def generate_replay(bench: Any, data_dir: Path, tts: Any, seed: int) -> None:
    (data_dir / "cases").mkdir(parents=True, exist_ok=True)
    for src in bench.replay_from:
        for f in flagged(src):
            _one(bench, data_dir, f)


def _one(bench: Any, data_dir: Path, f: dict[str, Any]) -> None:
    d, seg, src = f["graded"], f["segment"], Path(f["run_dir"])
    cid_src, k = d["case_id"], int(d["evaluated"])
    cid = f"rp-{f['run_id'][:8]}-{cid_src}"
    path = data_dir / "cases" / f"{cid}.json"
    if path.exists():
        return
    log = read_session(src / "sessions" / f"{cid_src}.h5", tables=("turns", "vad_segments"))
    rec = log.policy_record or {}
    said = rec.get("said", {}).get(str(k))
    if said is None:
        raise ConfigError(
            f"{src}/sessions/{cid_src}.h5: no record of exchange {k}; it cannot be replayed"
        )
    sp = next(s for s in log_spans(log) if s.index == k)
    x, sr = read_wav(src / "sessions" / f"{cid_src}.wav", mono=False)
    user = x[:, 0] if np.ndim(x) == 2 else x
    delay = next(t.delay_s for t in log.turns if t.label == barge_in_label(k))
    exs = [exchange_from_dict(cid_src, e) for e in seg["exchanges"]]
    history = [e for e in exs if e.index < k]
    turns = []
    for i, (label, kind, a, b, text, words) in enumerate(
        (
            (
                message_label(k),
                "take-turn",
                sp.message_start_s,
                sp.message_end_s,
                said["message"],
                said.get("message_words"),
            ),
            (
                barge_in_label(k),
                "barge-in",
                sp.barge_in_start_s,
                sp.barge_in_end_s,
                said["barge_in"],
                said.get("barge_in_words"),
            ),
        )
    ):
        if math.isnan(a):
            raise ConfigError(f"{src}/sessions/{cid_src}.h5: exchange {k} has no {label} turn")
        rel = f"audio/{cid}/{label}.wav"
        write_wav(
            data_dir / rel, np.ascontiguousarray(user[int(round(a * sr)) : int(round(b * sr))]), sr
        )
        barge = kind == "barge-in"
        turns.append(
            Turn(
                cid,
                i,
                label,
                kind,
                rel,
                str(text),
                tuple(WordTiming(str(t), float(s), float(e)) for t, s, e in words or []),
                round(int(round(b * sr)) / sr - int(round(a * sr)) / sr, 9),
                bench.turn_timeout_s,
                barge_in_after_s=delay if barge else None,
                barge_in_handling="hold" if barge else None,
                subtype="interrupt" if barge else None,
            )
        )
    seed_d = d.get("seed")
    if not isinstance(seed_d, dict):
        raise ConfigError(
            f"{f['graded_dir']}/{cid_src}.json: field seed: missing; grade the source run again"
        )
    replay = {
        "source_run_id": f["run_id"],
        "source_model_id": f["model_id"],
        "source_case_id": cid_src,
        "source_session_id": d["provenance"]["session_id"],
        "exchange": k,
        "history": [e for e in seg["exchanges"] if e["index"] < k],
        "message": said["message"],
        "barge_in": said["barge_in"],
        "barge_in_label": said["barge_in_label"],
        "delay_s": delay,
    }
    record = EchoChainCase(
        "replay",
        Seed.from_dict(seed_d, str(src)),
        str(rec.get("voice", "")),
        f["model_name"] or str(d.get("responder", "")),
        k,
        "",
        replay,
    )
    case = TestCase(
        cid,
        cid_src,
        "echochain",
        record.seed.topic,
        responder_prompt(history_text(tuple(history), labels=False), None, k),
        tuple(turns),
        seed=0,
        version=bench.version,
        data=record,
    )
    write_case(case, path)
