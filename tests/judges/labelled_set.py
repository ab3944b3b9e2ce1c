"""The labelled Instruct-FD sessions under tests/judges/labelled/: loading, validation, case building.

Each file holds the items of one instruction::

    {"instruction": "listen", "description": "...", "items": [
      {"id": "...", "policy": "listen", "label": "adhere" | "not_adhere",
       "why": "one sentence citing the A.11 criterion the verdict rests on",
       "instruction": "the behavioural instruction the session ran under (own words)",
       "tags": ["listen:silent", "issue12:...", ...],
       "transcript": ["[0.24-4.53] USER: ...", "[10.44-17.64] MODEL: ..."],
       "turns": [{"span": [0.24, 9.68], "kind": "take-turn", "text": "full reference turn, punctuated.",
                  "triggers": [["backchannel", 16, "yeah"]], "reply": "reference model reply"}]}]}

Labels were decided by reading the paper's judge prompt (A.11), not by running a judge. `turns`
are the user turns as `judge_fixtures.Session.rendered` takes them: `span` selects the user lines of
the turn, `text` is the whole scripted turn (the played words are a prefix of it, punctuation
aside), a trigger `[kind, k, phrase]` sits after the turn's first k words. A bad item raises
`LabelledSetError` naming the file, the item id and the field.
"""

from __future__ import annotations

import dataclasses
import json
import math
import re
from dataclasses import dataclass
from pathlib import Path

from helpers.labelled import load_unique
from judge_fixtures import Session

from fdeval.benchmarks.instructfd.records import POLICIES
from fdeval.errors import FileFieldError
from fdeval.transcript.io import TranscriptError, parse_rendered
from fdeval.types import TestCase, Transcript

LABELLED_DIR = Path(__file__).parent / "labelled"
LABELS = ("adhere", "not_adhere")
TURN_KINDS = ("take-turn", "backchannel", "interrupt")
TRIGGER_KINDS = ("backchannel", "interrupt")
ITEM_KEYS = {
    "id": True,
    "policy": True,
    "label": True,
    "why": True,
    "instruction": True,
    "tags": True,
    "transcript": True,
    "turns": True,
}  # key -> required
TURN_KEYS = {"span": True, "kind": True, "text": True, "triggers": True, "reply": False}
FILE_KEYS = {"instruction": True, "description": True, "items": True}
SPAN_TOL_S = 1e-6  # as in Session.rendered


class LabelledSetError(FileFieldError):
    """A labelled-set file or item that fails validation."""


@dataclass(frozen=True)
class LabelledItem:
    id: str
    policy: str
    label: str
    why: str
    instruction: str
    tags: tuple[str, ...]
    transcript: tuple[str, ...]
    turns: tuple[dict, ...]
    path: Path

    def build(self) -> tuple[TestCase, Transcript]:
        """The case and transcript, built by `Session` from the rendered lines and turn specs."""
        turns = [
            {**t, "span": tuple(t["span"]), "triggers": [tuple(tr) for tr in t["triggers"]]}
            for t in self.turns
        ]
        case, transcript = (
            Session(self.id, self.policy).rendered("\n".join(self.transcript), turns).build()
        )
        return dataclasses.replace(case, system_instruction=self.instruction), transcript


def _bare(token: str) -> str:
    """A reference token as a transcript shows it: no punctuation around it, case ignored."""
    return re.sub(r"[^\w'\-]", "", token).lower()


def _check_keys(fail, d, spec: dict[str, bool], where: str) -> None:
    if not isinstance(d, dict):
        raise fail(where or "item", f"expected an object, got {type(d).__name__}")
    unknown = sorted(set(d) - set(spec))
    if unknown:
        raise fail(f"{where}{unknown[0]}", f"unknown key (valid: {', '.join(spec)})")
    missing = [k for k, req in spec.items() if req and k not in d]
    if missing:
        raise fail(f"{where}{missing[0]}", "missing")


def _validate_item(path: Path, instruction: str, pos: int, d) -> LabelledItem:
    item_id = (
        d.get("id") if isinstance(d, dict) and isinstance(d.get("id"), str) else f"items[{pos}]"
    )

    def fail(field: str, msg: str) -> LabelledSetError:
        return LabelledSetError(str(path), item_id, field, msg)

    _check_keys(fail, d, ITEM_KEYS, "")
    for key in ("id", "why", "instruction"):
        if not isinstance(d[key], str) or not d[key].strip():
            raise fail(key, "expected a non-empty string")
    if not d["why"].rstrip().endswith(".") or re.search(r"[.!?]\s+[A-Z]", d["why"]):
        raise fail("why", "expected one sentence")
    if not re.fullmatch(r"[a-z0-9_]+", d["id"]):
        raise fail("id", "use lower-case letters, digits and _ only")
    if d["policy"] not in POLICIES:
        raise fail("policy", f"{d['policy']!r} is not one of {', '.join(POLICIES)}")
    if d["policy"] != instruction:
        raise fail("policy", f"{d['policy']!r} in the file of instruction {instruction!r}")
    if d["label"] not in LABELS:
        raise fail("label", f"{d['label']!r} is not one of {', '.join(LABELS)}")
    if not isinstance(d["tags"], list) or not all(isinstance(t, str) and t for t in d["tags"]):
        raise fail("tags", "expected a list of non-empty strings")
    lines = d["transcript"]
    if not isinstance(lines, list) or not all(isinstance(x, str) for x in lines):
        raise fail("transcript", "expected a list of rendered lines (strings)")
    try:
        words = parse_rendered("\n".join(lines), d["id"])
    except TranscriptError as e:
        raise fail(f"transcript.{e.field}", e.message) from None
    users = [w for w in words if w.speaker == "user"]
    if not isinstance(d["turns"], list) or not d["turns"]:
        raise fail("turns", "expected a non-empty list of user turns")
    claimed: set[int] = set()
    last_end = -math.inf
    for i, t in enumerate(d["turns"]):
        where = f"turns[{i}]."
        _check_keys(fail, t, TURN_KEYS, where)
        span = t["span"]
        if (
            not isinstance(span, list)
            or len(span) != 2
            or not all(isinstance(x, (int, float)) for x in span)
            or not span[0] <= span[1]
        ):
            raise fail(f"{where}span", f"expected [start, end] with start <= end, got {span!r}")
        if span[0] < last_end:
            raise fail(f"{where}span", "turns must be listed in time order without overlapping")
        last_end = span[1]
        if t["kind"] not in TURN_KINDS:
            raise fail(f"{where}kind", f"{t['kind']!r} is not one of {', '.join(TURN_KINDS)}")
        if not isinstance(t["text"], str) or not t["text"].strip():
            raise fail(f"{where}text", "expected the full reference turn as a non-empty string")
        if "reply" in t and not isinstance(t["reply"], str):
            raise fail(f"{where}reply", "expected a string")
        lo, hi = span
        mine = [
            j
            for j, w in enumerate(users)
            if lo - SPAN_TOL_S <= w.start_s and w.end_s <= hi + SPAN_TOL_S
        ]
        if not mine:
            raise fail(f"{where}span", f"holds no user words of the transcript ({lo:g}-{hi:g})")
        claimed.update(mine)
        played = [users[j].text.lower() for j in mine]
        ref = [_bare(x) for x in t["text"].split()]
        if played != ref[: len(played)]:
            bad = next((k for k, (a, b) in enumerate(zip(played, ref)) if a != b), len(ref))
            raise fail(
                f"{where}text",
                f"the transcript's user word {bad + 1} ({played[bad]!r}) does not match "
                f"the reference ({ref[bad] if bad < len(ref) else 'past its end'!r})",
            )
        if not isinstance(t["triggers"], list):
            raise fail(f"{where}triggers", "expected a list of [kind, k, phrase]")
        for j, tr in enumerate(t["triggers"]):
            tw = f"{where}triggers[{j}]"
            if (
                not isinstance(tr, list)
                or len(tr) != 3
                or tr[0] not in TRIGGER_KINDS
                or not isinstance(tr[1], int)
                or isinstance(tr[1], bool)
                or not isinstance(tr[2], str)
            ):
                raise fail(tw, f"expected [backchannel|interrupt, k, phrase], got {tr!r}")
            if not 1 <= tr[1] <= len(played):
                raise fail(tw, f"k = {tr[1]} must count 1..{len(played)} played words of the turn")
    stray = [users[j] for j in range(len(users)) if j not in claimed]
    if stray:
        raise fail(
            "turns",
            f"user word {stray[0].text!r} at {stray[0].start_s:.2f} s belongs to no turn's span",
        )
    return LabelledItem(
        d["id"],
        d["policy"],
        d["label"],
        d["why"].strip(),
        d["instruction"],
        tuple(d["tags"]),
        tuple(lines),
        tuple(d["turns"]),
        path,
    )


def load_file(path: Path) -> list[LabelledItem]:
    path = Path(path)
    try:
        doc = json.loads(path.read_text())
    except json.JSONDecodeError as e:
        raise LabelledSetError(
            str(path), None, f"line {e.lineno}", f"not valid JSON: {e.msg}"
        ) from None

    def fail(field: str, msg: str) -> LabelledSetError:
        return LabelledSetError(str(path), None, field, msg)

    _check_keys(fail, doc, FILE_KEYS, "")
    if doc["instruction"] not in POLICIES:
        raise fail("instruction", f"{doc['instruction']!r} is not one of {', '.join(POLICIES)}")
    if not isinstance(doc["items"], list):
        raise fail("items", "expected a list")
    return [_validate_item(path, doc["instruction"], i, d) for i, d in enumerate(doc["items"])]


def load(directory: Path = LABELLED_DIR) -> list[LabelledItem]:
    """Every item of every *.json file in `directory`, validated; ids are unique over the set."""
    return load_unique(sorted(Path(directory).glob("*.json")), load_file, LabelledSetError)


@dataclass(frozen=True)
class Agreement:
    """A judge's verdicts against the labels."""

    rows: tuple[tuple[LabelledItem, str, str], ...]  # (item, judge verdict, judge reasoning)

    def by_policy(self) -> dict[str, tuple[int, int]]:
        """policy -> (n items, n where the judge agrees with the label), in POLICIES order."""
        out = {}
        for p in POLICIES:
            mine = [(it, v) for it, v, _ in self.rows if it.policy == p]
            if mine:
                out[p] = (len(mine), sum(v == it.label for it, v in mine))
        return out

    @property
    def overall(self) -> tuple[int, int]:
        return len(self.rows), sum(v == it.label for it, v, _ in self.rows)

    def disagreements(self) -> list[tuple[LabelledItem, str, str]]:
        return [r for r in self.rows if r[1] != r[0].label]

    def table(self) -> str:
        """Per-instruction agreement as a markdown table."""
        lines = ["| instruction | n | agree | % |", "|---|---:|---:|---:|"]
        rows = list(self.by_policy().items()) + [("all", self.overall)]
        for p, (n, k) in rows:
            name = f"**{p}**" if p == "all" else p
            lines.append(f"| {name} | {n} | {k} | {100 * k / n:.1f} |")
        return "\n".join(lines)


def agreement(judge, items: list[LabelledItem]) -> Agreement:
    rows = []
    for it in items:
        case, transcript = it.build()
        v = judge.judge(case, it.policy, transcript)
        rows.append((it, v.verdict, v.reasoning))
    return Agreement(tuple(rows))
