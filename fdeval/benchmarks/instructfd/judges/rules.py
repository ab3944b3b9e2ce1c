"""A deterministic judge: the Instruct-FD event criteria written as timing rules.

It follows the steps of the paper's LLM judge (degenerate check, the instruction as rules, a
timeline of events, a check of each rule, a verdict) but decides every step from word times, the
played user turns and the reference trigger points. It needs no model and gives the same verdict
for the same input, so it serves as the default judge, a baseline for an LLM judge, and a test
oracle. What it cannot see is *content*: whether an interruption is relevant, whether a response
adapts to a correction, whether a continuation completes its thought. Those parts are reduced to
word counts and named as unchecked in every verdict's reasoning. ``docs/judging.md`` lists each
rule and threshold.

Vocabulary used below:

* *utterance*: consecutive model words less than ``utterance_gap_s`` apart.
* *speech span* of a user turn: first word start to last played word end.
* *words remaining* at time t: the reference words of that user turn (``n_words_total``) minus
  those whose start lies before t. Words the user never played (a turn cut short) count as
  remaining: the user stopping early is itself the sign of an interruption.
* A model utterance that starts inside a take-turn's speech span is classified as
  - an *early take-turn* when at most ``take_turn_max_remaining_words`` words remain, or when the
    turn was played to its end, at most ``end_overlap_max_words`` words remain and the utterance
    runs past the user's last word;
  - else a *backchannel* when it has at most ``backchannel_max_words`` words and ends before the
    user stops speaking;
  - else an *interruption*.
"""

from __future__ import annotations

import hashlib
import json
import math
from bisect import bisect_left
from dataclasses import asdict, dataclass, field, fields
from typing import Callable

from fdeval.benchmarks.instructfd.judges.base import Judge
from fdeval.benchmarks.instructfd.records import POLICIES, Verdict
from fdeval.errors import ConfigError
from fdeval.types import PlayedTurn, TestCase, Transcript, Turn, Word

RULES_VERSION = "1"
EPS_S = 1e-6


@dataclass(frozen=True)
class Thresholds:
    """The rule parameters (seconds / word counts). Every field is a `RulesJudge` keyword."""

    utterance_gap_s: float = 1.0  # model words closer than this form one utterance
    backchannel_max_words: int = 3  # a backchannel has fewer than 4 words
    take_turn_max_remaining_words: int = 3  # starting with at most this many words left is a take-turn
    end_overlap_max_words: int = 5  # overlap with at most this many final words of a full turn is a take-turn
    backchannel_window_s: float = 2.0  # a backchannel this close to a backchannel trigger is on cue
    interrupt_early_tolerance_s: float = 0.5  # an interruption may start this long before its trigger
    interrupt_min_words: int = 4  # an interruption needs at least this many words of content
    continue_max_gap_s: float = 2.0  # longest model silence after a user backchannel onset
    continue_min_words: int = 4  # words the model must say after the user backchannel ends
    yield_max_overlap_s: float = 2.0  # longest the model may talk on over a user interruption
    acknowledge_min_words: int = 2  # words of the model's response after the user interruption
    word_turn_tolerance_s: float = 0.3  # slack for placing user words without a turn index


_INT_FIELDS = {f.name for f in fields(Thresholds) if f.type in (int, "int")}


class _Unjudgeable(Exception):
    """The pair cannot be judged; becomes an "error" verdict."""


# --------------------------------------------------------------------------------------------
# The session, as the rules see it


@dataclass
class _Utterance:
    first: int  # index of its first word in the sorted model words
    words: list[Word]

    @property
    def start_s(self) -> float:
        return self.words[0].start_s

    @property
    def end_s(self) -> float:
        return max(w.end_s for w in self.words)

    @property
    def n(self) -> int:
        return len(self.words)

    def preview(self, k: int = 8) -> str:
        text = " ".join(w.text for w in self.words[:k])
        return f'"{text}{" ..." if self.n > k else ""}"'

    def span(self) -> str:
        return f"[{self.start_s:.2f}-{self.end_s:.2f}]"


@dataclass
class _UserTurn:
    played: PlayedTurn
    spans: list[tuple[float, float]]  # played words, session clock, sorted
    n_total: int
    triggers: list[tuple[str, float]]
    starts: list[float] = field(init=False)

    def __post_init__(self) -> None:
        self.spans.sort()
        self.starts = [s for s, _ in self.spans]

    @property
    def index(self) -> int:
        return self.played.index

    @property
    def speech_start(self) -> float:
        return self.spans[0][0] if self.spans else self.played.start_s

    @property
    def speech_end(self) -> float:
        return max(e for _, e in self.spans) if self.spans else self.played.end_s

    @property
    def is_take_turn(self) -> bool:
        return self.played.turn_type == "take-turn"

    def is_barge_in(self, subtype: str) -> bool:
        return self.played.turn_type == "barge-in" and self.played.subtype == subtype

    @property
    def played_fully(self) -> bool:
        return not self.played.cut_short and self.played.n_words_played >= self.n_total

    def remaining(self, t: float) -> int:
        """Reference words of this turn not yet begun at session time `t`."""
        if self.spans:
            delivered = bisect_left(self.starts, t - EPS_S)
        else:  # no word times at all: assume an even pace over the played span
            dur = max(self.played.end_s - self.played.start_s, EPS_S)
            frac = min(max((t - self.played.start_s) / dur, 0.0), 1.0)
            delivered = int(self.played.n_words_played * frac)
        return max(self.n_total - delivered, 0)

    def describe(self) -> str:
        p = self.played
        kind = p.turn_type if p.turn_type == "take-turn" else f"{p.subtype} barge-in"
        cut = ", cut short" if p.cut_short else ""
        trig = "".join(f", {k} trigger at {t:.2f}" for k, t in self.triggers)
        return (f"[{self.speech_start:.2f}-{self.speech_end:.2f}] USER turn {p.index} ({p.label}, {kind}): "
                f"{p.n_words_played} of {self.n_total} words played{cut}{trig}")


@dataclass
class _Event:
    """A model utterance that starts inside a user take-turn, and what it counts as."""

    utt: _Utterance
    turn: _UserTurn
    kind: str  # "backchannel" | "early take-turn" | "interruption"
    remaining: int

    def describe(self) -> str:
        return (f"{self.kind} in user turn {self.turn.index} at {self.utt.start_s:.2f} "
                f"({_n_words(self.utt.n)}; {self.remaining} of {self.turn.n_total} user words still to come)")


def _n_words(n: int) -> str:
    return f"{n} word" if n == 1 else f"{n} words"


def _case_turn(case: TestCase, index: int) -> Turn | None:
    return next((t for t in case.turns if t.index == index), None)


def _user_turns(case: TestCase, transcript: Transcript, tol: float) -> list[_UserTurn]:
    played = sorted(transcript.user_turns, key=lambda p: (p.start_s, p.index))
    spans: dict[int, list[tuple[float, float]]] = {p.index: [] for p in played}
    for w in transcript.words:
        if w.speaker != "user":
            continue
        if w.turn is not None and w.turn in spans:
            spans[w.turn].append((w.start_s, w.end_s))
            continue
        mid = (w.start_s + w.end_s) / 2  # no turn index (ASR, a parsed transcript): place by time
        home = [p for p in played if p.start_s - tol <= mid <= p.end_s + tol]
        if home:
            spans[min(home, key=lambda p: abs((p.start_s + p.end_s) / 2 - mid)).index].append((w.start_s, w.end_s))
    out = []
    for p in played:
        scripted = _case_turn(case, p.index)
        s = spans[p.index]
        if not s and scripted is not None:  # the transcript lacks user words: use the script's timings
            s = [(p.start_s + wt.start_s, p.start_s + wt.end_s) for wt in scripted.words[: p.n_words_played]]
        n_total = p.n_words_total or (len(scripted.words) if scripted else 0) or len(s)
        triggers = list(p.triggers_s)
        if not triggers and scripted is not None:
            triggers = [(tr.kind, p.start_s + tr.at_s) for tr in case.data.turn_triggers(scripted.index)
                        if p.start_s + tr.at_s < p.end_s]
        out.append(_UserTurn(p, list(s), n_total, sorted(triggers, key=lambda kt: kt[1])))
    return out


def _utterances(model_words: list[Word], gap_s: float) -> list[_Utterance]:
    utts: list[_Utterance] = []
    for i, w in enumerate(model_words):
        if utts and w.start_s - utts[-1].end_s < gap_s:
            utts[-1].words.append(w)
        else:
            utts.append(_Utterance(i, [w]))
    return utts


def _distance(u: _Utterance, t: float) -> float:
    if u.start_s <= t <= u.end_s:
        return 0.0
    return min(abs(u.start_s - t), abs(u.end_s - t))


# --------------------------------------------------------------------------------------------
# The judge

_RULE_TEXT: dict[str, Callable[[Thresholds], str]] = {
    "listen": lambda th: (
        "PROHIBITIVE: while the user holds the floor the model neither backchannels nor interrupts. "
        f"Starting the reply when at most {th.take_turn_max_remaining_words} words of the user turn are left "
        f"(or over at most {th.end_overlap_max_words} final words of a complete turn) is an early take-turn and allowed."),
    "backchannel": lambda th: (
        "CONDITIONAL: at a backchannel trigger (the reference cut-in point) the model gives a short "
        f"acknowledgement of at most {th.backchannel_max_words} words within {th.backchannel_window_s:g} s of it, "
        "without taking the floor. PROHIBITIVE: no interruption, and no backchannel far from every trigger."),
    "interrupt": lambda th: (
        "CONDITIONAL: at the interrupt trigger the model cuts in while the user still has more than "
        f"{th.take_turn_max_remaining_words} words to say, starting no earlier than "
        f"{th.interrupt_early_tolerance_s:g} s before the trigger and saying at least {th.interrupt_min_words} words. "
        "PROHIBITIVE: no interruption before the trigger or in other user turns, no backchannel away from the trigger."),
    "continue": lambda th: (
        "CONDITIONAL: when the user backchannels while the model speaks, the model keeps the floor: "
        f"it is never silent for more than {th.continue_max_gap_s:g} s from the backchannel's onset until it has said "
        f"at least {th.continue_min_words} more words after the backchannel ends."),
    "acknowledge": lambda th: (
        "CONDITIONAL: when the user interrupts the model, the model stops talking within "
        f"{th.yield_max_overlap_s:g} s of overlap (and does not talk over the user for longer in total), then "
        f"answers with at least {th.acknowledge_min_words} words that run past the end of the user's interruption."),
}

_UNCHECKED: dict[str, str] = {
    "listen": "",
    "backchannel": ("Only the reference trigger points count as cues; a backchannel at another place the "
                    "instruction might allow (e.g. another clause boundary) is treated as off cue."),
    "interrupt": "Whether the interruption's content is relevant to the trigger is not judged by rules; only its timing and length.",
    "continue": ("Whether the continuation completes the earlier thought is not judged by rules; "
                 "it is approximated by its length."),
    "acknowledge": ("Whether the response adapts to what the user said (acknowledges it, changes course) "
                    "is not judged by rules; only that the model yielded and answered."),
}


class RulesJudge(Judge):
    """The Instruct-FD event criteria as deterministic timing rules (see the module docstring).

    Keyword arguments override fields of :class:`Thresholds`; they are part of `prompt_hash`.
    """

    id = "rules"
    version = RULES_VERSION

    def __init__(self, **thresholds: float):
        valid = {f.name for f in fields(Thresholds)}
        unknown = sorted(set(thresholds) - valid)
        if unknown:
            raise ConfigError(f"judge: unknown rules threshold(s) {unknown}; valid: {sorted(valid)}")
        clean: dict[str, float] = {}
        for name, value in thresholds.items():
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
                raise ConfigError(f"judge.{name}: expected a finite number >= 0, got {value!r}")
            if name in _INT_FIELDS and value != int(value):
                raise ConfigError(f"judge.{name}: expected a whole number of words, got {value!r}")
            clean[name] = int(value) if name in _INT_FIELDS else float(value)
        if clean.get("utterance_gap_s", 1.0) <= 0:
            raise ConfigError("judge.utterance_gap_s: must be > 0")
        self.thresholds = Thresholds(**clean)  # type: ignore[arg-type]

    @property
    def prompt_hash(self) -> str:
        blob = json.dumps({"judge": self.id, "version": self.version, "thresholds": asdict(self.thresholds)},
                          sort_keys=True)
        return hashlib.sha256(blob.encode()).hexdigest()[:16]

    # ----------------------------------------------------------------------------------------
    def judge(self, case: TestCase, policy: str, transcript: Transcript) -> Verdict:
        try:
            return self._judge(case, policy, transcript)
        except _Unjudgeable as e:
            return self.verdict(case.case_id, policy, "error", f"Not judged: {e}")

    def _judge(self, case: TestCase, policy: str, transcript: Transcript) -> Verdict:
        th = self.thresholds
        if policy not in POLICIES:
            raise _Unjudgeable(f"{policy!r} is not one of the instructions the rules know ({', '.join(POLICIES)})")
        if transcript.case_id != case.case_id:
            raise _Unjudgeable(f"the transcript belongs to case {transcript.case_id!r}, not {case.case_id!r}")
        if policy not in case.data.judge_policies:
            raise _Unjudgeable(f"case {case.case_id!r} is not judged against {policy!r} "
                               f"(its judge policies: {', '.join(case.data.judge_policies) or 'none'})")
        if not transcript.user_turns:
            raise _Unjudgeable("the transcript has no played user turns")

        model_words = sorted((w for w in transcript.words if w.speaker == "model"), key=lambda w: (w.start_s, w.end_s))
        turns = _user_turns(case, transcript, th.word_turn_tolerance_s)
        utts = _utterances(model_words, th.utterance_gap_s)
        events = self._classify(utts, turns)
        checks: dict[str, bool] = {}
        out = [f"Judged by rules ({self.id} v{self.version}) against the '{policy}' instruction."]

        # Step 1: degenerate checks
        checks["model_has_speech"] = bool(model_words)
        unanswered = self._unanswered(turns, model_words)
        checks["every_turn_answered"] = not unanswered
        out.append(f"Step 1 - degenerate checks: model speech: {'yes' if model_words else 'no'} "
                   f"({len(model_words)} words); every user turn answered (user backchannels aside): "
                   + ("yes." if not unanswered else "no, no model reply after user turn(s) "
                      + ", ".join(str(ut.index) for ut in unanswered) + "."))
        if not all(checks.values()):
            out.append("Step 5 - verdict: not_adhere (degenerate session; no further checks).")
            return self.verdict(case.case_id, policy, "not_adhere", "\n".join(out), checks)

        self._require_stimulus(case, policy, turns)

        # Step 2: rules
        out.append(f"Step 2 - rules: {_RULE_TEXT[policy](th)}")
        # Step 3: timeline
        out.append("Step 3 - timeline:")
        out.extend("  " + line for line in self._timeline(turns, utts, events))
        # Step 4: rule checks
        policy_checks, notes = getattr(self, f"_check_{policy}")(turns, utts, events, model_words, transcript)
        checks.update(policy_checks)
        out.append("Step 4 - rule checks:")
        for name, ok in policy_checks.items():
            out.append(f"  {name}: {'yes' if ok else 'no'}" + (f" - {notes[name]}" if notes.get(name) else ""))
        if _UNCHECKED[policy]:
            out.append(f"  Not checked: {_UNCHECKED[policy]}")
        failed = [k for k, ok in checks.items() if not ok]
        label = "not_adhere" if failed else "adhere"
        out.append(f"Step 5 - verdict: {label}" + (f" (failed: {', '.join(failed)})." if failed else " (all rule checks hold)."))
        return self.verdict(case.case_id, policy, label, "\n".join(out), checks)

    # ----------------------------------------------------------------------------------------
    # Shared steps

    def _classify(self, utts: list[_Utterance], turns: list[_UserTurn]) -> list[_Event]:
        th = self.thresholds
        events = []
        for u in utts:
            for ut in turns:
                if not ut.is_take_turn or not (ut.speech_start - EPS_S <= u.start_s < ut.speech_end):
                    continue
                rem = ut.remaining(u.start_s)
                if rem <= th.take_turn_max_remaining_words or (
                        rem <= th.end_overlap_max_words and ut.played_fully and u.end_s > ut.speech_end + EPS_S):
                    kind = "early take-turn"
                elif u.n <= th.backchannel_max_words and u.end_s <= ut.speech_end + EPS_S:
                    kind = "backchannel"
                else:
                    kind = "interruption"
                events.append(_Event(u, ut, kind, rem))
                break
        return events

    @staticmethod
    def _next_start(turns: list[_UserTurn], ut: _UserTurn, default: float) -> float:
        later = [o.speech_start for o in turns if o is not ut and o.speech_start > ut.speech_start]
        return min(later, default=default)

    def _unanswered(self, turns: list[_UserTurn], model_words: list[Word]) -> list[_UserTurn]:
        missing = []
        for ut in turns:
            if ut.is_barge_in("backchannel"):
                continue
            limit = self._next_start(turns, ut, math.inf)
            if not any(w.end_s > ut.speech_end + EPS_S and w.start_s < limit for w in model_words):
                missing.append(ut)
        return missing

    def _require_stimulus(self, case: TestCase, policy: str, turns: list[_UserTurn]) -> None:
        """The instruction's trigger must have been scripted and played, else the pair is unjudgeable."""
        if policy == "listen":
            return
        if policy in ("backchannel", "interrupt"):
            what = f"{policy} trigger"
            scripted = [t for t in case.turns if any(tr.kind == policy for tr in case.data.turn_triggers(t.index))]
            present = [ut for ut in turns if any(k == policy for k, _ in ut.triggers)]
        else:
            subtype = "backchannel" if policy == "continue" else "interrupt"
            what = f"user {subtype} barge-in"
            scripted = [t for t in case.turns if t.turn_type == "barge-in" and t.subtype == subtype]
            present = [ut for ut in turns if ut.is_barge_in(subtype)]
        played = {ut.index for ut in turns}
        missing = [t for t in scripted if t.index not in played]
        if missing:
            raise _Unjudgeable(f"scripted turn {missing[0].index} ({missing[0].label}, with the {what}) was not played")
        if not present:
            raise _Unjudgeable(f"the session has no {what}, so the '{policy}' instruction was never put to the test")

    def _timeline(self, turns: list[_UserTurn], utts: list[_Utterance], events: list[_Event]) -> list[str]:
        by_utt = {id(e.utt): e for e in events}
        rows: list[tuple[float, int, str]] = [(ut.speech_start, 0, ut.describe()) for ut in turns]
        for u in utts:
            e = by_utt.get(id(u))
            if e is not None:
                what = e.describe()
            else:
                over = [ut for ut in turns if not ut.is_take_turn
                        and u.start_s < ut.speech_end and ut.speech_start < u.end_s]
                before = [ut for ut in turns if ut.speech_end <= u.start_s + EPS_S]
                if over:
                    what = f"speaking while user barge-in {over[0].index} ({over[0].played.subtype}) happens"
                elif before:
                    what = f"turn after user turn {before[-1].index}"
                else:
                    what = "speaks first"
            rows.append((u.start_s, 1, f"{u.span()} MODEL {u.preview()}: {what}"))
        return [r[2] for r in sorted(rows, key=lambda r: (r[0], r[1]))]

    # ----------------------------------------------------------------------------------------
    # Policy checks: each returns ({check: ok}, {check: note})

    def _check_listen(self, turns, utts, events, model_words, transcript):
        bcs = [e for e in events if e.kind == "backchannel"]
        ints = [e for e in events if e.kind == "interruption"]
        checks = {"no_backchannel": not bcs, "no_interruption": not ints}
        notes = {"no_backchannel": "; ".join(e.describe() for e in bcs),
                 "no_interruption": "; ".join(e.describe() for e in ints)}
        return checks, notes

    def _check_backchannel(self, turns, utts, events, model_words, transcript):
        th = self.thresholds
        bcs = [e for e in events if e.kind == "backchannel"]
        ints = [e for e in events if e.kind == "interruption"]

        def gap(e: _Event) -> float:
            return min((_distance(e.utt, t) for k, t in e.turn.triggers if k == "backchannel"), default=math.inf)

        on_cue = [e for e in bcs if gap(e) <= th.backchannel_window_s]
        stray = [e for e in bcs if gap(e) > th.backchannel_window_s]
        checks = {"backchannel_near_trigger": bool(on_cue), "no_interruption": not ints, "no_stray_backchannel": not stray}
        notes = {
            "backchannel_near_trigger": (f"{on_cue[0].describe()}, {gap(on_cue[0]):.2f} s from the trigger" if on_cue
                                         else f"no backchannel within {th.backchannel_window_s:g} s of a backchannel trigger"),
            "no_interruption": "; ".join(e.describe() for e in ints),
            "no_stray_backchannel": "; ".join(
                f"{e.describe()}, {gap(e):.2f} s from the nearest trigger" if gap(e) < math.inf
                else f"{e.describe()}, in a turn without a trigger" for e in stray),
        }
        return checks, notes

    def _check_interrupt(self, turns, utts, events, model_words, transcript):
        th = self.thresholds
        trig = {id(ut): min(t for k, t in ut.triggers if k == "interrupt")
                for ut in turns if any(k == "interrupt" for k, _ in ut.triggers)}
        ints = [e for e in events if e.kind == "interruption"]
        on_time = [e for e in ints if id(e.turn) in trig and e.utt.start_s >= trig[id(e.turn)] - th.interrupt_early_tolerance_s]
        early = [e for e in ints if id(e.turn) in trig and e.utt.start_s < trig[id(e.turn)] - th.interrupt_early_tolerance_s]
        elsewhere = [e for e in ints if id(e.turn) not in trig]
        bcs = [e for e in events if e.kind == "backchannel"]
        stray = [e for e in bcs if id(e.turn) not in trig or _distance(e.utt, trig[id(e.turn)]) > th.backchannel_window_s]
        hit_turns = {id(e.turn) for e in on_time}
        full_turns = {id(e.turn) for e in on_time if e.utt.n >= th.interrupt_min_words}
        checks = {
            "interrupted_after_trigger": hit_turns == set(trig),
            "interrupt_has_content": full_turns == set(trig),
            "no_early_interruption": not early,
            "no_interruption_elsewhere": not elsewhere,
            "no_stray_backchannel": not stray,
        }
        trig_txt = ", ".join(f"{t:.2f}" for t in trig.values())
        notes = {
            "interrupted_after_trigger": ("; ".join(f"{e.describe()}, {e.utt.start_s - trig[id(e.turn)]:+.2f} s from the trigger"
                                                    for e in on_time) or f"no interruption at or after the trigger(s) at {trig_txt}"),
            "interrupt_has_content": ("" if checks["interrupt_has_content"] else
                                      f"an interruption at the trigger needs at least {th.interrupt_min_words} words"),
            "no_early_interruption": "; ".join(f"{e.describe()}, {trig[id(e.turn)] - e.utt.start_s:.2f} s before the trigger"
                                               for e in early),
            "no_interruption_elsewhere": "; ".join(e.describe() for e in elsewhere),
            "no_stray_backchannel": "; ".join(e.describe() for e in stray),
        }
        return checks, notes

    @staticmethod
    def _per_turn(turns: list[_UserTurn], subtype: str, check: Callable[[_UserTurn], dict[str, tuple[bool, str]]]):
        """Run `check` on every user barge-in of `subtype`; a check holds when it holds for all."""
        checks: dict[str, bool] = {}
        notes: dict[str, list[str]] = {}
        for ut in (t for t in turns if t.is_barge_in(subtype)):
            for name, (ok, note) in check(ut).items():
                checks[name] = checks.get(name, True) and ok
                notes.setdefault(name, []).extend([note] if note else [])
        return checks, {name: "; ".join(ns) for name, ns in notes.items()}

    def _check_continue(self, turns, utts, events, model_words, transcript):
        th = self.thresholds

        def check(ut: _UserTurn) -> dict[str, tuple[bool, str]]:
            b0, b1 = ut.speech_start, ut.speech_end
            next_turn = self._next_start(turns, ut, math.inf)
            limit = next_turn if next_turn < math.inf else max(transcript.duration_s, b1)
            cursor, n_after, pause = b0, 0, None
            for w in (w for w in model_words if w.end_s > b0 + EPS_S and w.start_s < limit):
                if w.start_s - cursor > th.continue_max_gap_s:
                    pause = (cursor, w.start_s)
                    break
                n_after += w.start_s >= b1 - EPS_S
                cursor = max(cursor, w.end_s)
                if n_after >= th.continue_min_words:
                    break
            else:
                if n_after < th.continue_min_words and limit - cursor > th.continue_max_gap_s:
                    pause = (cursor, limit)
            where = f"user backchannel {ut.index} [{b0:.2f}-{b1:.2f}]"
            pause_note = ""
            if pause is not None:
                end = f"{pause[1]:.2f}"
                if pause[1] == limit:
                    end = "the next user turn" if next_turn < math.inf else "the end of the session"
                pause_note = (f"after {where} the model is silent from {pause[0]:.2f} to {end} "
                              f"({pause[1] - pause[0]:.2f} s)")
            enough = n_after >= th.continue_min_words
            cont_note = (f"the model went on past {where}" if enough else
                         f"only {_n_words(n_after)} from the model after {where} (at least {th.continue_min_words} needed)")
            return {"no_long_pause_after_backchannel": (pause is None, pause_note),
                    "continued_after_backchannel": (enough, cont_note)}

        return self._per_turn(turns, "backchannel", check)

    def _check_acknowledge(self, turns, utts, events, model_words, transcript):
        th = self.thresholds

        def check(ut: _UserTurn) -> dict[str, tuple[bool, str]]:
            i0, i1 = ut.speech_start, ut.speech_end
            held = next((u for u in utts if u.start_s <= i0 + EPS_S and u.end_s > i0 + EPS_S), None)
            held_s = held.end_s - i0 if held else 0.0
            overlap_s = sum(max(0.0, min(w.end_s, i1) - max(w.start_s, i0)) for w in model_words)
            where = f"user interruption {ut.index} [{i0:.2f}-{i1:.2f}]"
            lead = (f"the model was not speaking when {where} began" if held is None
                    else f"the model went on {held_s:.2f} s into {where}")
            yielded = held_s <= th.yield_max_overlap_s and overlap_s <= th.yield_max_overlap_s
            held_idx = set(range(held.first, held.first + held.n)) if held else set()
            limit = self._next_start(turns, ut, math.inf)
            resp = [w for i, w in enumerate(model_words) if i not in held_idx and w.start_s >= i0 - EPS_S
                    and w.end_s > i1 + EPS_S and w.start_s < limit]
            answered = len(resp) >= th.acknowledge_min_words
            resp_note = (f"the model answers from {resp[0].start_s:.2f} with {_n_words(len(resp))}: "
                         + " ".join(w.text for w in resp[:8]) + (" ..." if len(resp) > 8 else "")) if answered else (
                f"only {_n_words(len(resp))} from the model after {where} (at least {th.acknowledge_min_words} needed)")
            return {"yielded": (yielded, f"{lead}; {overlap_s:.2f} s of overlap in all"),
                    "responded_after_interruption": (answered, resp_note)}

        return self._per_turn(turns, "interrupt", check)
