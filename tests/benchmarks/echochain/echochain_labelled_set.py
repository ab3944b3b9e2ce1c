"""The labelled EchoChain conversations under tests/benchmarks/echochain/labelled/: loading,
validation, and the agreement of a classifier and grader with the labels.

One file per expected outcome (``pass.json`` and one per taxonomy category)::

    {"group": "interruption_amnesia", "description": "...", "items": [
      {"id": "ia_dinner_nuts_back", "seed": "cooking-dinner-for-six",
       "failure": true,                    # should the A.4 classifier flag the evaluated exchange?
       "category": "interruption_amnesia", # a reviewer's TAXONOMY category; null when the reply passes
       "grades": {"ex3.c1": "pass", "ex3.c2": "pass", "ex3.c3": "fail"},  # every criterion of the rubric
       "why": "one sentence citing the paper's rule",
       "tags": ["ia:one-later"],
       "written_after_rules": true,        # optional: written after the offline rules started changing
       "held_out": true,                   # optional: written for classifier v3 by someone who never read
                                           # the rules, and not used to design them
       "extra_criteria": [...],            # optional: reviewer-authored criteria (seed criterion format)
       "exchanges": [{"index": 1, "message": "...", "answer_before": "", "barge_in": null,
                      "barge_in_label": null, "continuation": "..."}, ...]}]}

``seeds.json`` holds seeds written for the set (the seed-file format); every other item names a
shipped seed. The exchanges are the classifier's :class:`Exchange` fields, numbered from one; the
last is the evaluated one. Messages, barge-ins and labels must be the seed script's own, so the
offline roles read the right script. The rubric of the evaluated exchange is the seed's criteria
plus the item's ``extra_criteria``; ``grades`` labels each of them. A category is given exactly
when the reply fails (``failure`` or a failed criterion), and it names the file the item is in
(``pass.json`` items have none).

Labels were decided by reading the paper (sections 2, 5, 6 and A.4), never by running a
classifier; a disagreement is a finding about the pipeline, not a reason to change a label. A bad
item raises :class:`LabelledSetError` naming the file, the item and the field.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from helpers.labelled import load_unique
from omegaconf import OmegaConf

from fdeval.benchmarks.echochain.classifier import (
    Classifier,
    ClassifierVerdict,
    Exchange,
    make_classifier,
)
from fdeval.benchmarks.echochain.rubrics import Grader, OfflineDrafter, OfflineGrader, Rubric
from fdeval.benchmarks.echochain.seeds import Criterion, Seed, SeedFileError, load_seeds
from fdeval.benchmarks.echochain.steps import propose_taxonomy
from fdeval.benchmarks.echochain.taxonomy import TAXONOMY
from fdeval.errors import FileFieldError
from fdeval.settings import CONF_DIR

LABELLED_DIR = Path(__file__).parent / "labelled"
SEEDS_NAME = "seeds.json"
PASS = "pass"
GROUPS = (PASS, *TAXONOMY)  # file stems, in table order
GRADE_VALUES = {"pass": True, "fail": False}
FILE_KEYS = {"group": True, "description": True, "items": True}  # key -> required
ITEM_KEYS = {
    "id": True,
    "seed": True,
    "failure": True,
    "category": True,
    "grades": True,
    "why": True,
    "tags": True,
    "exchanges": True,
    "extra_criteria": False,
    "written_after_rules": False,
    "held_out": False,
}
EXCHANGE_KEYS = {
    "index": True,
    "message": True,
    "answer_before": True,
    "barge_in": True,
    "barge_in_label": True,
    "continuation": True,
}
CRITERION_KEYS = {
    "criterion_id": True,
    "text": True,
    "require_any": False,
    "forbid": False,
    "scope": False,
}


class LabelledSetError(FileFieldError):
    """A labelled-set file or item that fails validation."""


@dataclass(frozen=True)
class LabelledItem:
    id: str
    group: str
    seed: Seed
    failure: bool
    category: str | None
    grades: tuple[tuple[str, bool], ...]  # (criterion id, expected pass), in rubric order
    why: str
    tags: tuple[str, ...]
    exchanges: tuple[Exchange, ...]
    extra_criteria: tuple[Criterion, ...]
    written_after_rules: bool
    held_out: bool
    path: Path

    @property
    def evaluated(self) -> Exchange:
        return self.exchanges[-1]

    @property
    def history(self) -> tuple[Exchange, ...]:
        return self.exchanges[:-1]

    def rubric(self) -> Rubric:
        """The offline drafter's rubric (the seed's criteria) plus the item's reviewer criteria."""
        r = OfflineDrafter().draft(self.seed, self.history, self.evaluated, self.id)
        return Rubric(r.case_id, r.exchange, r.criteria + self.extra_criteria, r.source)


def _check_keys(
    fail: Callable[[str, str], LabelledSetError], d: Any, spec: dict[str, bool], where: str
) -> None:
    if not isinstance(d, dict):
        raise fail(where.rstrip(".") or "item", f"expected an object, got {type(d).__name__}")
    unknown = sorted(set(d) - set(spec))
    if unknown:
        raise fail(f"{where}{unknown[0]}", f"unknown key (valid: {', '.join(spec)})")
    missing = [k for k, req in spec.items() if req and k not in d]
    if missing:
        raise fail(f"{where}{missing[0]}", "missing")


def _words(fail, v: Any, field: str) -> tuple[str, ...]:
    if v is None:
        return ()
    if not isinstance(v, list) or not all(isinstance(w, str) and w.strip() for w in v):
        raise fail(field, "expected a list of non-empty strings")
    return tuple(w.strip() for w in v)


def _criterion(fail, d: Any, where: str) -> Criterion:
    _check_keys(fail, d, CRITERION_KEYS, where)
    for key in ("criterion_id", "text"):
        if not isinstance(d[key], str) or not d[key].strip():
            raise fail(f"{where}{key}", "expected a non-empty string")
    require_any, forbid = (
        _words(fail, d.get("require_any"), f"{where}require_any"),
        _words(fail, d.get("forbid"), f"{where}forbid"),
    )
    if not require_any and not forbid:
        raise fail(
            where.rstrip("."), "a criterion needs require_any or forbid words (its offline check)"
        )
    scope = d.get("scope", "continuation")
    if scope not in ("continuation", "answer"):
        raise fail(f"{where}scope", f"{scope!r} is not continuation or answer")
    return Criterion(d["criterion_id"], d["text"].strip(), require_any, forbid, scope)


def _validate_item(
    path: Path, group: str, pos: int, d: Any, seeds: dict[str, Seed]
) -> LabelledItem:
    item_id = (
        d.get("id") if isinstance(d, dict) and isinstance(d.get("id"), str) else f"items[{pos}]"
    )

    def fail(field: str, msg: str) -> LabelledSetError:
        return LabelledSetError(str(path), item_id, field, msg)

    _check_keys(fail, d, ITEM_KEYS, "")
    for key in ("id", "why", "seed"):
        if not isinstance(d[key], str) or not d[key].strip():
            raise fail(key, "expected a non-empty string")
    if not re.fullmatch(r"[a-z0-9_]+", d["id"]):
        raise fail("id", "use lower-case letters, digits and _ only")
    if not d["why"].rstrip().endswith(".") or re.search(r"[.!?]\s+[A-Z]", d["why"]):
        raise fail("why", "expected one sentence")
    if not isinstance(d["tags"], list) or not all(isinstance(t, str) and t for t in d["tags"]):
        raise fail("tags", "expected a list of non-empty strings")
    if not isinstance(d["failure"], bool):
        raise fail("failure", f"expected true or false, got {d['failure']!r}")
    for key in ("written_after_rules", "held_out"):
        if not isinstance(d.get(key, False), bool):
            raise fail(key, "expected true or false")
    seed = seeds.get(d["seed"])
    if seed is None:
        raise fail("seed", f"{d['seed']!r} is neither a shipped seed nor one of {SEEDS_NAME}")

    raw = d["exchanges"]
    if not isinstance(raw, list) or not raw:
        raise fail("exchanges", "expected a non-empty list")
    if len(raw) > len(seed.exchanges):
        raise fail(
            "exchanges", f"{len(raw)} exchanges; seed {seed.seed_id} scripts {len(seed.exchanges)}"
        )
    exchanges = []
    for i, e in enumerate(raw):
        where = f"exchanges[{i}]."
        _check_keys(fail, e, EXCHANGE_KEYS, where)
        if e["index"] != i + 1:
            raise fail(
                f"{where}index",
                f"expected {i + 1} (numbered from one, in order), got {e['index']!r}",
            )
        script = seed.exchanges[i]
        for key, want in (
            ("message", script.message),
            ("barge_in", script.barge_in),
            ("barge_in_label", script.barge_in_label),
        ):
            if e[key] != want:
                raise fail(f"{where}{key}", f"must be the seed script's ({want!r}), got {e[key]!r}")
        for key in ("answer_before", "continuation"):
            if not isinstance(e[key], str):
                raise fail(f"{where}{key}", "expected a string")
        if e["barge_in"] is None and e["answer_before"]:
            raise fail(
                f"{where}answer_before", "an exchange without a barge-in has only its continuation"
            )
        if not e["continuation"].strip():
            raise fail(f"{where}continuation", "empty")
        exchanges.append(
            Exchange(
                item_id,
                i + 1,
                e["message"],
                e["answer_before"],
                e["barge_in"],
                e["barge_in_label"],
                e["continuation"],
            )
        )

    extra = d.get("extra_criteria") or []
    if not isinstance(extra, list):
        raise fail("extra_criteria", "expected a list of criteria")
    extra_criteria = tuple(
        _criterion(fail, c, f"extra_criteria[{j}].") for j, c in enumerate(extra)
    )
    ids = [c.criterion_id for c in seed.exchanges[len(exchanges) - 1].criteria + extra_criteria]
    if len(set(ids)) != len(ids):
        raise fail("extra_criteria", "a criterion id is used twice in the rubric")
    grades = d["grades"]
    if not isinstance(grades, dict) or set(grades) != set(ids):
        got = set(grades) if isinstance(grades, dict) else set()
        raise fail(
            "grades",
            f"expected one grade per criterion of the rubric {ids}; missing "
            f"{sorted(set(ids) - got)}, unknown {sorted(got - set(ids))}",
        )
    for cid, v in grades.items():
        if v not in GRADE_VALUES:
            raise fail(f"grades.{cid}", f"{v!r} is not pass or fail")

    category, failed = d["category"], d["failure"] or any(v == "fail" for v in grades.values())
    if category is not None and category not in TAXONOMY:
        raise fail("category", f"{category!r} is not one of {', '.join(TAXONOMY)} or null")
    if failed and category is None:
        raise fail("category", "a failing reply needs its category")
    if not failed and category is not None:
        raise fail("category", "a passing reply has no category (null)")
    if (category or PASS) != group:
        raise fail("category", f"{category!r} in the file of group {group!r}")
    return LabelledItem(
        d["id"],
        group,
        seed,
        d["failure"],
        category,
        tuple((cid, GRADE_VALUES[grades[cid]]) for cid in ids),
        d["why"].strip(),
        tuple(d["tags"]),
        tuple(exchanges),
        extra_criteria,
        d.get("written_after_rules", False),
        d.get("held_out", False),
        path,
    )


def load_file(path: Path, seeds: dict[str, Seed]) -> list[LabelledItem]:
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
    if doc["group"] not in GROUPS or doc["group"] != path.stem:
        raise fail(
            "group", f"{doc['group']!r} must be one of {', '.join(GROUPS)} and name the file"
        )
    if not isinstance(doc["items"], list):
        raise fail("items", "expected a list")
    return [_validate_item(path, doc["group"], i, d, seeds) for i, d in enumerate(doc["items"])]


def load(directory: Path = LABELLED_DIR) -> list[LabelledItem]:
    """Every item of every group file in `directory`, validated; ids are unique over the set."""
    directory = Path(directory)
    seeds = {s.seed_id: s for s in load_seeds()}
    own = directory / SEEDS_NAME
    if own.exists():
        try:
            for s in load_seeds(own):
                if s.seed_id in seeds:
                    raise LabelledSetError(
                        str(own), None, "seed_id", f"{s.seed_id!r} is a shipped seed's id"
                    )
                seeds[s.seed_id] = s
        except SeedFileError as e:
            raise LabelledSetError(str(own), None, f"seed {e.seed}: {e.field}", e.why) from None
    files = [p for p in sorted(directory.glob("*.json")) if p.name != SEEDS_NAME]
    return load_unique(files, lambda path: load_file(path, seeds), LabelledSetError)


# ------------------------------------------------------------------------------------------------
# Agreement


@dataclass(frozen=True)
class Row:
    """What the pipeline made of one item."""

    item: LabelledItem
    verdict: ClassifierVerdict
    category: str | None  # the pipeline's taxonomy value, as the grade step records it
    grades: tuple[tuple[str, bool], ...]  # (criterion id, passed), rubric order

    @property
    def flagged(self) -> bool:
        return bool(self.verdict.flagged)

    @property
    def criteria_agree(self) -> int:
        want = dict(self.item.grades)
        return sum(want[cid] == passed for cid, passed in self.grades)


def pipeline_category(verdict: ClassifierVerdict, grades_passed: bool) -> str | None:
    """The taxonomy value the grade step stores (steps.Grade.make): none for a passing reply,
    else :func:`steps.propose_taxonomy` of the verdict."""
    return None if grades_passed else propose_taxonomy(verdict)


def default_classifier() -> Classifier:
    """The classifier of the shipped benchmark config (offline backend, its votes and rule)."""
    node = OmegaConf.load(CONF_DIR / "benchmark" / "echochain.yaml").classifier
    return make_classifier(OmegaConf.to_container(node, resolve=True), Path("unused"))


def run(
    items: list[LabelledItem], classifier: Classifier | None = None, grader: Grader | None = None
) -> list[Row]:
    """The offline pipeline (or the given roles) on every item: no model sessions, no network."""
    classifier = classifier or default_classifier()
    grader = grader or OfflineGrader()
    rows = []
    for it in items:
        verdict = classifier.classify(it.seed, it.history, it.evaluated, it.id)
        grades = grader.grade(it.rubric(), it.history, it.evaluated)
        rows.append(
            Row(
                it,
                verdict,
                pipeline_category(verdict, all(g.passed for g in grades)),
                tuple((g.criterion_id, g.passed) for g in grades),
            )
        )
    return rows


@dataclass(frozen=True)
class Agreement:
    """The pipeline's answers against the labels, per expected group."""

    rows: tuple[Row, ...]

    def _stats(self, rows: list[Row]) -> dict[str, int]:
        both = [r for r in rows if r.item.failure and r.flagged]
        return {
            "n": len(rows),
            "detect": sum(r.flagged == r.item.failure for r in rows),
            "both": len(both),
            "taxonomy": sum(r.category == r.item.category for r in both),
            "criteria": sum(len(r.grades) for r in rows),
            "criteria_agree": sum(r.criteria_agree for r in rows),
        }

    def by_group(self) -> dict[str, dict[str, int]]:
        out = {g: self._stats([r for r in self.rows if r.item.group == g]) for g in GROUPS}
        return {g: s for g, s in out.items() if s["n"]}

    @property
    def overall(self) -> dict[str, int]:
        return self._stats(list(self.rows))

    def table(self) -> str:
        """Markdown: failure detection, taxonomy among conversations both sides flag, criteria."""

        def pct(k: int, n: int) -> str:
            return f"{k}/{n} ({100 * k / n:.1f}%)" if n else "-"

        lines = [
            "| expected | n | failure detection | taxonomy (both flag) | criterion pass |",
            "|---|---:|---:|---:|---:|",
        ]
        for g, s in [*self.by_group().items(), ("all", self.overall)]:
            name = f"**{g}**" if g == "all" else g
            lines.append(
                f"| {name} | {s['n']} | {pct(s['detect'], s['n'])} | {pct(s['taxonomy'], s['both'])} | "
                f"{pct(s['criteria_agree'], s['criteria'])} |"
            )
        return "\n".join(lines)

    def disagreements(self) -> list[str]:
        out = []
        for r in self.rows:
            it, bad = r.item, []
            if r.flagged != it.failure:
                bad.append(f"flag {r.flagged} (label {it.failure})")
            if it.failure and r.flagged and r.category != it.category:
                bad.append(f"taxonomy {r.category} (label {it.category})")
            want = dict(it.grades)
            bad += [
                f"{cid} {'pass' if p else 'fail'} (label {'pass' if want[cid] else 'fail'})"
                for cid, p in r.grades
                if p != want[cid]
            ]
            if bad:
                out.append(f"{it.id} [{it.group}]: " + "; ".join(bad))
        return out


def agreement(
    items: list[LabelledItem], classifier: Classifier | None = None, grader: Grader | None = None
) -> Agreement:
    return Agreement(tuple(run(items, classifier, grader)))
