"""Build small test cases and their session transcripts by hand, for the judge tests.

A `Session` collects user turns and model words on one session clock and builds the matching
`TestCase` (turn manifest, triggers, a minimal reference) and `Transcript` (words, played turns).
User turns are given either as text spoken at an even pace or as words read from a rendered
transcript (`parse_rendered`), so the paper's worked examples and synthetic cases share one path.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from fdeval.benchmarks.instructfd.records import InstructFDCase, ReferenceLine, Trigger
from fdeval.transcript.io import parse_rendered
from fdeval.types import PlayedTurn, TestCase, Transcript, Turn, Word, WordTiming

PACE_S = 0.3  # seconds per word of synthetic speech
WORD_S = 0.25  # duration of one synthetic word


@dataclass
class _UserSpec:
    kind: str  # "take-turn" | "backchannel" | "interrupt"  (the latter two are barge-ins)
    words: list[Word]
    text: str  # the full scripted turn (reference), >= the played words
    triggers: list[
        tuple
    ]  # (kind, number of turn words before the cut-in point[, the reference's cut-in phrase])
    cut_short: bool
    indexed: bool = True  # False: leave the words' turn index unset (the judge places them by time)
    reply: str | None = None  # take-turn: the reference model reply after it (None: a generic one)


@dataclass
class Session:
    case_id: str
    policy: str
    judge_policies: tuple[str, ...] = ()
    users: list[_UserSpec] = field(default_factory=list)
    model_words: list[Word] = field(default_factory=list)

    # -- user side ---------------------------------------------------------------------------
    def user(
        self,
        text: str,
        start: float,
        *,
        kind: str = "take-turn",
        triggers=(),
        played: int | None = None,
        pauses: dict[int, float] | None = None,
        reply: str | None = None,
    ) -> "Session":
        """A user turn spoken at PACE_S per word from `start`; `pauses` adds silence before word i;
        `played` stops it after that many words (cut short); `reply` is the reference model reply."""
        tokens = text.split()
        n = len(tokens) if played is None else played
        t, words = start, []
        for i, tok in enumerate(tokens[:n]):
            t += (pauses or {}).get(i, 0.0)
            words.append(Word(self.case_id, "user", tok, round(t, 6), round(t + WORD_S, 6), "tts"))
            t += PACE_S
        self.users.append(
            _UserSpec(kind, words, text, list(triggers), n < len(tokens), reply=reply)
        )
        return self

    def user_words(
        self,
        words: list[Word],
        *,
        kind: str = "take-turn",
        text: str | None = None,
        triggers=(),
        indexed: bool = True,
        reply: str | None = None,
    ) -> "Session":
        """A user turn made of given words (e.g. parsed from a rendered transcript)."""
        text = text if text is not None else " ".join(w.text for w in words)
        self.users.append(
            _UserSpec(
                kind,
                list(words),
                text,
                list(triggers),
                len(words) < len(text.split()),
                indexed,
                reply,
            )
        )
        return self

    # -- model side --------------------------------------------------------------------------
    def model(self, text: str, start: float, pace: float = PACE_S) -> "Session":
        for i, tok in enumerate(text.split()):
            s = start + i * pace
            self.model_words.append(
                Word(
                    self.case_id,
                    "model",
                    tok,
                    round(s, 6),
                    round(s + min(WORD_S, pace), 6),
                    "model_text",
                )
            )
        return self

    # -- from a rendered transcript ------------------------------------------------------------
    def rendered(self, text: str, turns: list[dict]) -> "Session":
        """Words of a rendered transcript; `turns` lists each user turn as a dict with `span`
        (start, end: which user lines belong to it), and optional `kind`, `text`, `triggers`, `reply`."""
        words = parse_rendered(text, self.case_id)
        self.model_words.extend(w for w in words if w.speaker == "model")
        users = [w for w in words if w.speaker == "user"]
        for spec in turns:
            lo, hi = spec["span"]
            mine = [w for w in users if lo - 1e-6 <= w.start_s and w.end_s <= hi + 1e-6]
            self.user_words(
                mine,
                kind=spec.get("kind", "take-turn"),
                text=spec.get("text"),
                triggers=spec.get("triggers", ()),
                indexed=False,
                reply=spec.get("reply"),
            )
        return self

    # -- build -------------------------------------------------------------------------------
    def build(self, duration_s: float | None = None) -> tuple[TestCase, Transcript]:
        cid = self.case_id
        turns, played, words, reference, triggers = [], [], [], [], []
        for idx, u in enumerate(sorted(self.users, key=lambda u: u.words[0].start_s)):
            start, end = u.words[0].start_s, u.words[-1].end_s
            barge = u.kind != "take-turn"
            trig = []
            for kind, k, *phrase in u.triggers:
                at = u.words[k - 1].end_s if k > 0 else start
                default = "mm-hmm" if kind == "backchannel" else "wait, that is not right"
                trig.append(
                    Trigger(kind, round(at - start, 6), k, phrase[0] if phrase else default)
                )
            turns.append(
                Turn(
                    case_id=cid,
                    index=idx,
                    label=f"turn{idx + 1}",
                    turn_type="barge-in" if barge else "take-turn",
                    audio_path=f"audio/{cid}/turn{idx + 1}.wav",
                    text=u.text,
                    words=tuple(
                        WordTiming(w.text, round(w.start_s - start, 6), round(w.end_s - start, 6))
                        for w in u.words
                    ),
                    duration_s=round(end - start + 0.5, 6),
                    barge_in_after_s=1.0 if barge else None,
                    barge_in_handling=("hold" if u.kind == "backchannel" else "yield")
                    if barge
                    else None,
                    subtype=u.kind if barge else None,
                )
            )
            triggers.append(tuple(trig))
            played.append(
                PlayedTurn(
                    case_id=cid,
                    index=idx,
                    label=f"turn{idx + 1}",
                    turn_type="barge-in" if barge else "take-turn",
                    subtype=u.kind if barge else None,
                    start_s=start,
                    end_s=end,
                    scheduled_s=start,
                    cut_short=u.cut_short,
                    n_words_total=len(u.text.split()),
                    n_words_played=len(u.words),
                    triggers_s=tuple((t.kind, start + t.at_s) for t in trig),
                )
            )
            words.extend(
                Word(cid, "user", w.text, w.start_s, w.end_s, w.source, idx if u.indexed else None)
                for w in u.words
            )
            tag = u.kind if barge else ""
            reference.append(ReferenceLine("user", u.text, tag))
            if not barge:
                reference.append(
                    ReferenceLine(
                        "model", u.reply or "a reply that fits the conversation", "take-turn"
                    )
                )
        words.extend(self.model_words)
        words.sort(key=lambda w: (w.start_s, w.speaker))
        end = max((w.end_s for w in words), default=0.0)
        judge_policies = self.judge_policies or (self.policy,)
        case = TestCase(
            case_id=cid,
            conversation_id=cid.split("__")[0],
            benchmark="instructfd",
            scenario="test",
            system_instruction=None
            if self.policy == "none"
            else f"Follow the {self.policy} policy.",
            turns=tuple(turns),
            data=InstructFDCase(
                self.policy,
                tuple(reference),
                judge_policies,  # type: ignore[arg-type]
                triggers=tuple(triggers),
            ),
        )
        return case, Transcript(
            cid, tuple(words), tuple(played), duration_s if duration_s is not None else end + 3.0
        )
