"""The Instruct-FD human study's tables (paper §5, A.3 Tables 9-11, A.13), from participants' answers.

A study *item* is one case as a participant meets it: the conversation played up to a user turn
(the *decision turn*) and a question at each *decision point* in it. Items and points come from
the case alone (:func:`plan_item`), so the same case set always gives the same study:

* Proactive (listen, backchannel, interrupt): the decision turn is the first take-turn user turn
  that carries triggers (the reference model's cut-in points), else the case's last take-turn. A
  point is asked about every ``step_s`` (2 s) of that turn's audio, moved to the nearest word end
  within ``SNAP_S`` so the audio never stops inside a word; none in the last ``END_MARGIN_S`` of the
  turn (the user is done there). The choices are Listen, Backchannel, Interrupt; an Interrupt
  answer ends the item (the model has taken the floor, later points are not asked).
* Responsive (continue, acknowledge): the decision turn is the user's interjection (the first
  barge-in turn); one point, ``OVERLAP_S`` (2 s) into it or its end if shorter. The choices are
  Continue (keep the floor) and Acknowledge (yield and take up what the user said).

An item is shown *with* its case's instruction or *without* any (the un-instructed baseline case,
or an instructed case with the instruction hidden when the set has no baseline). Its answers are
scored against each instruction it is judged for: the instructed case's own, or every
instruction of the conversation for the baseline (as delta-IAS pairs a case with its baseline).

Scoring one answer against instruction ``p`` (:func:`score`):

* listen: every asked point must be Listen.
* backchannel / interrupt: each trigger of that kind (a *cue*) has a tolerance window of
  ``TOLERANCE_S`` (2 s) either side (A.13: the cue times were chosen offline, a human hears the
  audio causally). The case is correct only when every cue gets the action at some point inside
  its window, and no point outside every window gets anything but Listen, and no point inside a
  window gets the other proactive action: the strict no-false-alarm criterion of A.13, under
  which one premature answer fails the whole case.
* continue / acknowledge: the one answer must be that action.

An answer that skips a point it should have answered is *incomplete*: counted, never scored.

Tables (rows are plain dicts; accuracies are fractions in [0, 1], None over zero items):

* :func:`case_rows` (Tables 9 and 10 shape): case accuracy with the instruction, per scenario and
  action, then per action an ``average`` row (the mean of its scenarios' accuracies, the paper's
  Average row) and a ``pooled`` row (all its answers together).
* :func:`summary_rows`: pooled case accuracy with the instruction, overall / proactive / responsive
  (the §5 headline figures), and the same without it.
* :func:`frame_rows` (A.13's per-frame view): per action and condition, the decision points
  answered, the cues and how many were hit (detection rate), the points outside every window and
  how many got a non-Listen answer (false-alarm rate), and frame accuracy (cues hit plus quiet
  points answered Listen, over cues plus quiet points; for listen and the responsive actions
  every point is one frame).
* :func:`delta_rows` (Table 11 shape): the change in case accuracy when the instruction is given,
  per action, with the exact McNemar test and Holm's correction over the five actions. The paper
  never shows one participant a conversation twice, so the two conditions of a case are answered
  by different people; the pairs are formed per (conversation, action): the k-th answer with the
  instruction beside the k-th answer without it, each side ordered by participant name, extra
  answers on one side left unpaired (``n_with`` / ``n_without`` count them all). ``delta`` is the
  paired difference; ``accuracy_with_all`` / ``accuracy_without_all`` use every answer.

Everything is deterministic: rows come in a fixed order (actions in taxonomy order, scenarios in
the order of first appearance of their items), no resampling.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping, Sequence

from fdeval.benchmarks.instructfd.records import NO_POLICY, POLICIES, InstructFDCase
from fdeval.errors import FdevalError
from fdeval.metrics.stats import discordant, holm, mcnemar_exact
from fdeval.types import TestCase, Turn

PROACTIVE = ("listen", "backchannel", "interrupt")
RESPONSIVE = ("continue", "acknowledge")
ACTIONS = (*PROACTIVE, *RESPONSIVE)  # the columns of Tables 9-11
STEP_S = 2.0  # §5: a decision about every 2 s of the decision turn
SNAP_S = 0.5  # a point moves at most this far to land on a word end
END_MARGIN_S = 0.3  # no point this close to the end of the turn
OVERLAP_S = 2.0  # §5: responsive items play at most 2 s of the interjection
TOLERANCE_S = 2.0  # A.13: +-2 s around a cue
CONDITIONS = ("with", "without")

CASE_COLUMNS = ("scenario", "action", "condition", "n", "n_correct", "n_incomplete", "accuracy")
SUMMARY_COLUMNS = ("group", "condition", "n", "n_correct", "n_incomplete", "accuracy")
FRAME_COLUMNS = (
    "action",
    "condition",
    "n_items",
    "n_points",
    "n_cues",
    "n_cues_hit",
    "detection_rate",
    "n_quiet_points",
    "n_false_alarms",
    "false_alarm_rate",
    "n_frames",
    "n_frames_correct",
    "frame_accuracy",
)
DELTA_COLUMNS = (
    "action",
    "n_pairs",
    "accuracy_with",
    "accuracy_without",
    "delta",
    "b",
    "c",
    "mcnemar_p",
    "holm_p",
    "alpha",
    "significant",
    "n_with",
    "n_without",
    "accuracy_with_all",
    "accuracy_without_all",
)


class StudyError(FdevalError):
    """A study or answer that cannot be used; one line naming the item (and file) at fault."""


@dataclass(frozen=True)
class StudyItem:
    """One case as the study shows it: where to stop the audio and what to ask there."""

    item_id: str
    case_id: str
    conversation_id: str
    scenario: str
    condition: str  # "with" (instruction shown) or "without"
    instruction: str | None  # the text shown ("with" only)
    judged: tuple[str, ...]  # the instructions its answers are scored against
    kind: str  # "proactive" | "responsive"
    turn: int  # the decision turn's index
    points: tuple[float, ...]  # decision times, seconds into the decision turn's audio
    cues: Mapping[str, tuple[float, ...]] = field(default_factory=dict)  # trigger kind -> cue times

    @property
    def choices(self) -> tuple[str, ...]:
        return PROACTIVE if self.kind == "proactive" else RESPONSIVE

    def to_dict(self) -> dict[str, Any]:
        return {
            "item_id": self.item_id,
            "case_id": self.case_id,
            "conversation_id": self.conversation_id,
            "scenario": self.scenario,
            "condition": self.condition,
            "instruction": self.instruction,
            "judged": list(self.judged),
            "kind": self.kind,
            "turn": self.turn,
            "points": list(self.points),
            "cues": {k: list(v) for k, v in self.cues.items()},
            "choices": list(self.choices),
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "StudyItem":
        return cls(
            d["item_id"],
            d["case_id"],
            d["conversation_id"],
            d["scenario"],
            d["condition"],
            d["instruction"],
            tuple(d["judged"]),
            d["kind"],
            int(d["turn"]),
            tuple(float(t) for t in d["points"]),
            {k: tuple(float(t) for t in v) for k, v in d["cues"].items()},
        )


@dataclass(frozen=True)
class Answer:
    """One participant's decisions on one item: the action chosen at each asked point, in order."""

    participant: str
    item_id: str
    actions: tuple[str, ...]


@dataclass(frozen=True)
class Outcome:
    correct: bool | None  # None: incomplete
    n_points: int = 0
    cues: int = 0
    cues_hit: int = 0
    quiet: int = 0  # points outside every cue window
    false_alarms: int = 0  # quiet points answered with anything but Listen
    frames: int = 0
    frames_correct: int = 0


# -- planning ----------------------------------------------------------------------------------


def _decision_turn(case: TestCase, kind: str) -> Turn:
    turns = case.turns
    if kind == "responsive":
        for t in turns:
            if t.turn_type == "barge-in":
                return t
        raise StudyError(
            f"case {case.case_id}: a responsive instruction but no barge-in (interjection) turn"
        )
    data: InstructFDCase = case.data
    takes = [t for t in turns if t.turn_type == "take-turn"]
    for t in takes:
        if data.turn_triggers(t.index):
            return t
    if not takes:
        raise StudyError(f"case {case.case_id}: no take-turn user turn to ask about")
    return takes[-1]


def proactive_points(turn: Turn, step_s: float = STEP_S) -> tuple[float, ...]:
    """Decision times in a turn: every `step_s`, snapped to the nearest word end within SNAP_S."""
    limit = turn.duration_s - END_MARGIN_S
    ends = [w.end_s for w in turn.words]
    out: list[float] = []
    k = 1
    while k * step_s <= limit + 1e-9:
        nominal = k * step_s
        near = [e for e in ends if abs(e - nominal) <= SNAP_S and e <= limit]
        t = min(near, key=lambda e: (abs(e - nominal), e)) if near else nominal
        if not out or t > out[-1] + step_s / 2:
            out.append(round(t, 4))
        k += 1
    if not out:  # a turn shorter than one step: ask once, halfway
        out.append(round(turn.duration_s / 2, 4))
    return tuple(out)


def plan_item(
    case: TestCase,
    condition: str,
    item_id: str | None = None,
    judged: Sequence[str] | None = None,
    step_s: float = STEP_S,
) -> StudyItem:
    """The study item of one Instruct-FD case, shown with or without its instruction (module doc)."""
    data = case.data
    if not isinstance(data, InstructFDCase):
        raise StudyError(
            f"case {case.case_id}: not an Instruct-FD case (benchmark {case.benchmark})"
        )
    if condition not in CONDITIONS:
        raise StudyError(
            f"case {case.case_id}: condition must be one of {CONDITIONS}, got {condition!r}"
        )
    if condition == "with" and data.policy_name == NO_POLICY:
        raise StudyError(
            f"case {case.case_id}: the un-instructed baseline has no instruction to show"
        )
    judged = (
        tuple(judged)
        if judged
        else ((data.policy_name,) if data.policy_name != NO_POLICY else tuple(data.judge_policies))
    )
    kinds = {"responsive" if p in RESPONSIVE else "proactive" for p in judged}
    if len(kinds) != 1:
        raise StudyError(
            f"case {case.case_id}: judged against both proactive and responsive instructions {judged}"
        )
    kind = kinds.pop()
    turn = _decision_turn(case, kind)
    if kind == "responsive":
        points: tuple[float, ...] = (round(min(OVERLAP_S, turn.duration_s), 4),)
        cues: dict[str, tuple[float, ...]] = {}
    else:
        points = proactive_points(turn, step_s)
        cues = {}
        for trig in data.turn_triggers(turn.index):
            cues.setdefault(trig.kind, ())
            cues[trig.kind] += (float(trig.at_s),)
        for p in judged:
            if p in ("backchannel", "interrupt") and not cues.get(p):
                raise StudyError(
                    f"case {case.case_id}: judged for {p} but turn {turn.index} has no {p} trigger"
                )
    return StudyItem(
        item_id or case.case_id,
        case.case_id,
        case.conversation_id,
        case.scenario,
        condition,
        case.system_instruction if condition == "with" else None,
        judged,
        kind,
        turn.index,
        points,
        cues,
    )


def plan_study(cases: Iterable[TestCase], step_s: float = STEP_S) -> list[StudyItem]:
    """Every item of a case set: each instructed case with its instruction, each baseline without;
    a conversation with no baseline gets one made by hiding each instructed case's instruction."""
    cases = [c for c in cases if isinstance(c.data, InstructFDCase)]
    has_baseline = {c.conversation_id for c in cases if c.data.policy_name == NO_POLICY}
    items = []
    for c in sorted(cases, key=lambda c: c.case_id):
        if c.data.policy_name == NO_POLICY:
            items.append(plan_item(c, "without", step_s=step_s))
            continue
        items.append(plan_item(c, "with", step_s=step_s))
        if c.conversation_id not in has_baseline:
            items.append(plan_item(c, "without", item_id=f"{c.case_id}@without", step_s=step_s))
    return items


# -- scoring -----------------------------------------------------------------------------------


def asked_points(item: StudyItem, actions: Sequence[str]) -> int:
    """How many points an answer had to cover: all, or up to and including its first Interrupt."""
    for i, a in enumerate(actions):
        if a == "interrupt":
            return i + 1
    return len(item.points)


def check_answer(item: StudyItem, actions: Sequence[str]) -> None:
    """Raise StudyError when an answer does not fit its item (unknown action, too many points)."""
    if len(actions) > len(item.points):
        raise StudyError(
            f"item {item.item_id}: {len(actions)} answers for {len(item.points)} decision points"
        )
    for i, a in enumerate(actions):
        if a not in item.choices:
            raise StudyError(
                f"item {item.item_id}: answer {i} is {a!r}, expected one of {list(item.choices)}"
            )
        if a == "interrupt" and i + 1 < len(actions):
            raise StudyError(f"item {item.item_id}: answers go on after an interrupt at point {i}")


def score(
    item: StudyItem, actions: Sequence[str], policy: str, tolerance_s: float = TOLERANCE_S
) -> Outcome:
    """Score one answer against one instruction (module doc)."""
    check_answer(item, actions)
    if policy not in item.judged:
        raise StudyError(
            f"item {item.item_id}: not judged for {policy!r} (judged: {list(item.judged)})"
        )
    if len(actions) < asked_points(item, actions):
        return Outcome(None)
    n = len(actions)
    if policy in RESPONSIVE:
        ok = actions[0] == policy
        return Outcome(ok, n, frames=1, frames_correct=int(ok))
    if policy == "listen":
        good = sum(a == "listen" for a in actions)
        return Outcome(good == n, n, quiet=n, false_alarms=n - good, frames=n, frames_correct=good)
    other = "interrupt" if policy == "backchannel" else "backchannel"
    cues = item.cues.get(policy, ())
    hit = [False] * len(cues)
    quiet = false_alarms = wrong = 0
    for t, a in zip(item.points, actions):
        inside = [j for j, c in enumerate(cues) if abs(t - c) <= tolerance_s + 1e-9]
        if not inside:
            quiet += 1
            false_alarms += a != "listen"
        elif a == policy:
            for j in inside:
                hit[j] = True
        elif a == other:
            wrong += 1
    ok = all(hit) and false_alarms == 0 and wrong == 0
    return Outcome(
        ok,
        n,
        len(cues),
        sum(hit),
        quiet,
        false_alarms,
        len(cues) + quiet,
        sum(hit) + quiet - false_alarms,
    )


# -- tables ------------------------------------------------------------------------------------


def _index(items: Iterable[StudyItem]) -> dict[str, StudyItem]:
    out: dict[str, StudyItem] = {}
    for it in items:
        if it.item_id in out:
            raise StudyError(f"item {it.item_id}: listed twice")
        out[it.item_id] = it
    return out


def outcomes(
    items: Iterable[StudyItem], answers: Iterable[Answer], tolerance_s: float = TOLERANCE_S
) -> list[tuple[StudyItem, Answer, str, Outcome]]:
    """(item, answer, action, outcome) for every answer and every instruction its item is judged
    for, answers in (participant, item) order; an answer to an unknown item is an error."""
    by_id = _index(items)
    out = []
    for a in sorted(answers, key=lambda a: (a.participant, a.item_id)):
        if a.item_id not in by_id:
            raise StudyError(f"participant {a.participant}: answer to unknown item {a.item_id!r}")
        it = by_id[a.item_id]
        for p in it.judged:
            out.append((it, a, p, score(it, a.actions, p, tolerance_s)))
    return out


def _acc(outs: Sequence[Outcome]) -> dict[str, Any]:
    done = [o for o in outs if o.correct is not None]
    k = sum(bool(o.correct) for o in done)
    return {
        "n": len(done),
        "n_correct": k,
        "n_incomplete": len(outs) - len(done),
        "accuracy": k / len(done) if done else None,
    }


def _ratio(a: int, b: int) -> float | None:
    return a / b if b else None


def case_rows(
    items: Iterable[StudyItem],
    answers: Iterable[Answer],
    condition: str = "with",
    tolerance_s: float = TOLERANCE_S,
) -> list[dict[str, Any]]:
    """Case accuracy per (scenario, action), then ``average`` and ``pooled`` rows per action."""
    items = list(items)
    order = list(dict.fromkeys(it.scenario for it in items))
    cell: dict[tuple[str, str], list[Outcome]] = defaultdict(list)
    for it, _, p, o in outcomes(items, answers, tolerance_s):
        if it.condition == condition:
            cell[(it.scenario, p)].append(o)
    rows = []
    for p in ACTIONS:
        for s in order:
            if (s, p) in cell:
                rows.append(
                    {"scenario": s, "action": p, "condition": condition, **_acc(cell[(s, p)])}
                )
    for p in ACTIONS:
        mine = [r for r in rows if r["action"] == p]
        if not mine:
            continue
        accs = [r["accuracy"] for r in mine if r["accuracy"] is not None]
        pooled = _acc([o for s in order for o in cell.get((s, p), [])])
        rows.append(
            {
                "scenario": "average",
                "action": p,
                "condition": condition,
                "n": pooled["n"],
                "n_correct": pooled["n_correct"],
                "n_incomplete": pooled["n_incomplete"],
                "accuracy": sum(accs) / len(accs) if accs else None,
            }
        )
        rows.append({"scenario": "pooled", "action": p, "condition": condition, **pooled})
    return [{k: r[k] for k in CASE_COLUMNS} for r in rows]


def summary_rows(
    items: Iterable[StudyItem], answers: Iterable[Answer], tolerance_s: float = TOLERANCE_S
) -> list[dict[str, Any]]:
    """Pooled case accuracy overall, proactive and responsive, with and without the instruction."""
    outs = outcomes(items, answers, tolerance_s)
    rows = []
    for cond in CONDITIONS:
        for group, acts in (
            ("overall", ACTIONS),
            ("proactive", PROACTIVE),
            ("responsive", RESPONSIVE),
        ):
            rows.append(
                {
                    "group": group,
                    "condition": cond,
                    **_acc([o for it, _, p, o in outs if it.condition == cond and p in acts]),
                }
            )
    return rows


def frame_rows(
    items: Iterable[StudyItem], answers: Iterable[Answer], tolerance_s: float = TOLERANCE_S
) -> list[dict[str, Any]]:
    """Per action and condition: points, cue detection, false alarms and frame accuracy."""
    cell: dict[tuple[str, str], list[Outcome]] = defaultdict(list)
    for it, _, p, o in outcomes(items, answers, tolerance_s):
        if o.correct is not None:
            cell[(p, it.condition)].append(o)
    rows = []
    for p in ACTIONS:
        for cond in CONDITIONS:
            os_ = cell.get((p, cond))
            if not os_:
                continue
            s = {
                f: sum(getattr(o, f) for o in os_)
                for f in (
                    "n_points",
                    "cues",
                    "cues_hit",
                    "quiet",
                    "false_alarms",
                    "frames",
                    "frames_correct",
                )
            }
            rows.append(
                {
                    "action": p,
                    "condition": cond,
                    "n_items": len(os_),
                    "n_points": s["n_points"],
                    "n_cues": s["cues"],
                    "n_cues_hit": s["cues_hit"],
                    "detection_rate": _ratio(s["cues_hit"], s["cues"]),
                    "n_quiet_points": s["quiet"],
                    "n_false_alarms": s["false_alarms"],
                    "false_alarm_rate": _ratio(s["false_alarms"], s["quiet"]),
                    "n_frames": s["frames"],
                    "n_frames_correct": s["frames_correct"],
                    "frame_accuracy": _ratio(s["frames_correct"], s["frames"]),
                }
            )
    return rows


def delta_rows(
    items: Iterable[StudyItem],
    answers: Iterable[Answer],
    alpha: float = 0.05,
    tolerance_s: float = TOLERANCE_S,
) -> list[dict[str, Any]]:
    """Change in case accuracy with the instruction vs without, per action (Table 11 shape)."""
    sides: dict[tuple[str, str], dict[str, list[tuple[str, bool]]]] = defaultdict(
        lambda: {"with": [], "without": []}
    )
    for it, a, p, o in outcomes(items, answers, tolerance_s):
        if o.correct is not None:
            sides[(it.conversation_id, p)][it.condition].append((a.participant, bool(o.correct)))
    rows = []
    for p in ACTIONS:
        pairs: list[tuple[bool, bool]] = []
        w_all: list[bool] = []
        wo_all: list[bool] = []
        for (_, q), s in sorted(sides.items()):
            if q != p:
                continue
            w, wo = sorted(s["with"]), sorted(s["without"])
            w_all += [x for _, x in w]
            wo_all += [x for _, x in wo]
            pairs += [(x, y) for (_, x), (_, y) in zip(w, wo)]
        if not w_all and not wo_all:
            continue
        b, c = discordant(pairs)
        n = len(pairs)
        acc_w = _ratio(sum(x for x, _ in pairs), n)
        acc_wo = _ratio(sum(y for _, y in pairs), n)
        rows.append(
            {
                "action": p,
                "n_pairs": n,
                "accuracy_with": acc_w,
                "accuracy_without": acc_wo,
                "delta": None if acc_w is None or acc_wo is None else acc_w - acc_wo,
                "b": b,
                "c": c,
                "mcnemar_p": mcnemar_exact(b, c) if n else None,
                "n_with": len(w_all),
                "n_without": len(wo_all),
                "accuracy_with_all": _ratio(sum(w_all), len(w_all)),
                "accuracy_without_all": _ratio(sum(wo_all), len(wo_all)),
            }
        )
    for r, h in zip(rows, holm([r["mcnemar_p"] for r in rows])):
        r.update(
            {"holm_p": h, "alpha": alpha, "significant": None if h is None else bool(h < alpha)}
        )
    return [{k: r[k] for k in DELTA_COLUMNS} for r in rows]


def tables(
    items: Iterable[StudyItem],
    answers: Iterable[Answer],
    alpha: float = 0.05,
    tolerance_s: float = TOLERANCE_S,
) -> dict[str, list[dict[str, Any]]]:
    """All the human-study tables at once, keyed by name."""
    items, answers = list(items), list(answers)
    return {
        "summary": summary_rows(items, answers, tolerance_s),
        "cases_with": case_rows(items, answers, "with", tolerance_s),
        "cases_without": case_rows(items, answers, "without", tolerance_s),
        "frames": frame_rows(items, answers, tolerance_s),
        "delta": delta_rows(items, answers, alpha, tolerance_s),
    }


__all__ = [
    "ACTIONS",
    "PROACTIVE",
    "RESPONSIVE",
    "POLICIES",
    "StudyItem",
    "Answer",
    "Outcome",
    "StudyError",
    "plan_item",
    "plan_study",
    "proactive_points",
    "score",
    "check_answer",
    "outcomes",
    "case_rows",
    "summary_rows",
    "frame_rows",
    "delta_rows",
    "tables",
]
