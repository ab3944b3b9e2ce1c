"""Intent labels for mined decision points: the annotators' file, checked line by line.

Real corpora carry no intent labels, and the importer will not make an episode without them
(`labels`, `silence_acceptability`, `onset_windows`, `completion_marks`, one entry per annotator).
So the labels come from a file the annotators fill in, keyed by the decision point's id as
`decision_points.jsonl` lists it. One JSON object a line (blank lines skipped):

    {"id": "call1.c0.00009213", "labels": ["hold", "hold", "abn"],
     "silence_acceptability": [0.9, 0.8, 0.6], "onset_windows": [[[2.0, 4.0]], [], [[1.5, 3.0]]],
     "completion_marks": [[-2.4], [-2.35], []]}

Optional: `judge_logits` (6 numbers, the intents' order), `split` (test | dev), `context_bucket`.
Times are relative to the decision point, as in an episode: onset windows on [-2, 5], completion
marks inside the point's context (its `context_s`). A point without a line here is reported and
left out; nothing is ever filled in for it. An id that names no decision point, a repeated id or
a bad value stops the import with one line naming the file, the line and the field.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..episodes import SPLITS, _annotations
from ..laws import INTENTS, N_INTENTS
from .records import CorpusFileError

LABEL_KEYS: dict[str, bool] = {  # key -> required
    "id": True,
    "labels": True,
    "silence_acceptability": True,
    "onset_windows": True,
    "completion_marks": True,
    "judge_logits": False,
    "split": False,
    "context_bucket": False,
}
ANNOTATION_KEYS = ("labels", "silence_acceptability", "onset_windows", "completion_marks")


class _LineCtx:
    """What the episode validators need: `fail(field, message)` -> an error naming file and line."""

    def __init__(self, path: Path, line: int):
        self.path, self.line = path, line

    def fail(self, field: str, message: str) -> CorpusFileError:
        return CorpusFileError(self.path, self.line, message, field or None)


def read_labels(path: str | Path, context_s: Mapping[str, float]) -> dict[str, dict[str, Any]]:
    """The labels of each decision point id (checked); `context_s` maps every known id to its
    point's context, which bounds its completion marks."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise CorpusFileError(
            p, None, f"cannot read: {getattr(e, 'strerror', None) or e}"
        ) from None
    out: dict[str, dict[str, Any]] = {}
    lines: dict[str, int] = {}
    for n, raw in enumerate(text.splitlines(), start=1):
        if not raw.strip():
            continue
        c = _LineCtx(p, n)
        try:
            d = json.loads(raw)
        except json.JSONDecodeError as e:
            raise CorpusFileError(p, n, f"invalid JSON at column {e.colno}: {e.msg}") from None
        if not isinstance(d, dict):
            raise c.fail(
                "",
                f"expected an object with {', '.join(k for k, req in LABEL_KEYS.items() if req)}",
            )
        for k in d:
            if k not in LABEL_KEYS:
                raise c.fail(k, f"unknown key {k!r}; valid keys: {', '.join(LABEL_KEYS)}")
        for k, req in LABEL_KEYS.items():
            if req and k not in d:
                raise c.fail(k, "missing required field")
        pid = d["id"]
        if not isinstance(pid, str) or pid not in context_s:
            raise c.fail(
                "id", f"no decision point has id {pid!r} (the ids are in decision_points.jsonl)"
            )
        if pid in lines:
            raise c.fail("id", f"{pid!r} is labelled twice (also line {lines[pid]})")
        lines[pid] = n
        _annotations(c, {k: d[k] for k in ANNOTATION_KEYS}, context_s[pid], prefix="")
        if d.get("judge_logits") is not None:
            jl = d["judge_logits"]
            if not isinstance(jl, list) or len(jl) != N_INTENTS:
                raise c.fail(
                    "judge_logits", f"needs {N_INTENTS} numbers in the order {', '.join(INTENTS)}"
                )
            for i, x in enumerate(jl):
                if isinstance(x, bool) or not isinstance(x, (int, float)) or not math.isfinite(x):
                    raise c.fail(f"judge_logits[{i}]", f"expected a finite number, got {x!r}")
        if d.get("split", "test") not in SPLITS:
            raise c.fail(
                "split", f"invalid value {d['split']!r}; expected one of {', '.join(SPLITS)}"
            )
        if "context_bucket" in d and (
            not isinstance(d["context_bucket"], str) or not d["context_bucket"].strip()
        ):
            raise c.fail("context_bucket", "expected a non-empty string")
        out[pid] = {k: v for k, v in d.items() if k != "id"}
    return out


__all__ = ["ANNOTATION_KEYS", "LABEL_KEYS", "read_labels"]
