"""Judge one session from the command line and print the verdicts as JSON.

::

    python -m fdeval.benchmarks.instructfd.judge_case --case CASE.json --transcript TRANSCRIPT.(json|txt)
                                [--policy P] [--judge rules|llm|ensemble] [--root DIR] [KEY=VALUE ...]

* ``--case``: a case file (``docs/cases.md``); ``--root``: its dataset root, to check that the
  turns' audio files exist (without it only the paths' shape is checked).
* ``--transcript``: a transcript JSON file (``docs/judging.md``), or any other file read as the
  rendered text format (``[0.24-8.08] USER: ...`` lines, :func:`fdeval.transcript.io.parse_rendered`).
  The text format has no turn structure, so the played user turns are rebuilt from the case:
  :func:`transcript_from_words`.
* ``--policy``: judge only this instruction (default: every policy in the case's
  ``judge_policies``).
* ``--judge``: a config in ``conf/judge/`` (default ``rules``); ``KEY=VALUE`` arguments are Hydra
  overrides of the root config, e.g. ``judge.model=...`` or ``out_root=/tmp/x`` (the LLM judge
  caches under ``${out_root}/_cache/llm_judge``).

Prints a JSON array of verdict objects (the verdict file format) on stdout; exit 0. Bad input or a
bad setting prints one line on stderr naming the file and field (or the setting) and exits 2,
without a traceback.
"""

from __future__ import annotations

import argparse
import json
import logging
import re
import sys
from dataclasses import replace
from pathlib import Path
from typing import Sequence

from hydra import compose, initialize_config_dir
from hydra.core.global_hydra import GlobalHydra
from hydra.errors import InstantiationException
from hydra.utils import instantiate

from fdeval.benchmarks.instructfd.judges.base import verdict_to_dict
from fdeval.benchmarks.instructfd.records import InstructFDCase
from fdeval.cases import load_case
from fdeval.errors import CaseError, FdevalError
from fdeval.settings import CONF_DIR  # importing settings registers the schemas the YAML names
from fdeval.transcript.io import TranscriptError, load_transcript, parse_rendered
from fdeval.types import PlayedTurn, TestCase, Transcript, Turn, Word

MIN_MATCH_FRACTION = 0.3  # of the user words, that must equal a word of the case's turns
EPS_S = 1e-6


# --------------------------------------------------------------------------------------------
# Rebuilding the played user turns of a rendered transcript


def _norm(token: str) -> str:
    t = re.sub(r"[^0-9a-z]", "", token.lower().replace("’", "'"))
    return t or token.lower()


def _turn_tokens(turn: Turn) -> list[str]:
    return [w.text for w in turn.words] if turn.words else turn.text.split()


def _align(user: list[str], ref: list[str]) -> list[int | None]:
    """For each user token, the index of the reference token it is aligned to (None: extra word).

    A minimum edit-distance alignment (match 0, substitution 1, extra or missing word 1); on equal
    cost the trace back prefers a match or substitution, then a missing reference word.
    """
    n, m = len(user), len(ref)
    prev = list(range(m + 1))
    moves: list[bytearray] = [
        bytearray(m + 1)
    ]  # 0 diag, 1 up (extra user word), 2 left (missing ref word)
    for j in range(1, m + 1):
        moves[0][j] = 2
    for i in range(1, n + 1):
        cur = [i] + [0] * m
        mv = bytearray(m + 1)
        mv[0] = 1
        ui = user[i - 1]
        for j in range(1, m + 1):
            diag = prev[j - 1] + (0 if ui == ref[j - 1] else 1)
            left = cur[j - 1] + 1
            up = prev[j] + 1
            if diag <= left and diag <= up:
                cur[j] = diag
            elif left <= up:
                cur[j], mv[j] = left, 2
            else:
                cur[j], mv[j] = up, 1
        moves.append(mv)
        prev = cur
    out: list[int | None] = [None] * n
    i, j = n, m
    while i > 0 or j > 0:
        mv = moves[i][j]
        if mv == 0 and i > 0 and j > 0:
            out[i - 1] = j - 1
            i, j = i - 1, j - 1
        elif mv == 2:
            j -= 1
        else:
            i -= 1
    return out


def transcript_from_words(
    case: TestCase,
    words: Sequence[Word],
    *,
    path: str = "<rendered>",
    duration_s: float | None = None,
) -> Transcript:
    """A :class:`Transcript` of `case` from words without turn structure (a rendered transcript).

    How the user turns are rebuilt:

    1. The user words, in time order, are aligned to the words of the case's turns, concatenated
       in script order, by a minimum edit-distance alignment on normalised tokens (lower case,
       letters and digits only), so recognition errors, merged or split words and unplayed
       stretches cost little. Each user word takes the turn of the script word it is aligned to;
       an extra word takes the turn of the user word before it (or after it, at the start).
    2. A turn with no user word was not played and is left out. A played turn spans its first
       word's start to its last word's end (``scheduled_s`` = start). ``n_words_total`` is the
       turn's word count in the case; ``n_words_played`` is also that for turns that play to their
       end (take-turns and ``hold`` barge-ins), and for ``yield`` barge-ins the number of script
       words up to the last one aligned, with ``cut_short`` when that is fewer than all.
    3. A trigger after script word k is placed at the end of the user word aligned to word k-1
       (at the turn start for k = 0); if that word has no aligned user word, at the turn start
       plus the trigger's offset from the turn's first scripted word. Triggers after the turn's
       last played word are dropped.

    Model words are kept as they are. The duration is `duration_s`, or the last word's end.
    Raises :class:`TranscriptError` (naming `path`) when there are no user words or fewer than
    :data:`MIN_MATCH_FRACTION` of them equal a word of the case's turns (a transcript of another
    conversation).
    """
    cid = case.case_id
    user = sorted((w for w in words if w.speaker == "user"), key=lambda w: (w.start_s, w.end_s))
    model = [w for w in words if w.speaker != "user"]
    if not user:
        raise TranscriptError(
            path,
            cid,
            "USER lines",
            "the transcript has no USER line; the user turns cannot be placed",
        )
    ref: list[str] = []
    owner: list[
        tuple[int, int]
    ] = []  # per script word: (position in case.turns, position in the turn)
    for k, turn in enumerate(case.turns):
        for p, tok in enumerate(_turn_tokens(turn)):
            ref.append(_norm(tok))
            owner.append((k, p))
    utoks = [_norm(w.text) for w in user]
    aligned = _align(utoks, ref)
    matches = sum(1 for i, j in enumerate(aligned) if j is not None and utoks[i] == ref[j])
    if matches < max(1, MIN_MATCH_FRACTION * len(user)):
        raise TranscriptError(
            path,
            cid,
            "USER lines",
            f"only {matches} of {len(user)} user words match the words of "
            f"case {cid!r}'s turns; is this a transcript of that case?",
        )
    turn_of: list[int | None] = [owner[j][0] if j is not None else None for j in aligned]
    last = next((t for t in turn_of if t is not None), None)
    for i, t in enumerate(turn_of):  # extra words join the turn of the word before them
        if t is None:
            turn_of[i] = last
        else:
            last = t

    played: list[PlayedTurn] = []
    out_words: list[Word] = []
    for k, turn in enumerate(case.turns):
        mine = [i for i, t in enumerate(turn_of) if t == k]
        if not mine:
            continue
        ws = [user[i] for i in mine]
        at_pos = {owner[aligned[i]][1]: user[i] for i in mine if aligned[i] is not None}  # type: ignore[index]
        n_total = len(_turn_tokens(turn))
        start, end = min(w.start_s for w in ws), max(w.end_s for w in ws)
        yields = turn.turn_type == "barge-in" and turn.barge_in_handling == "yield"
        covered = (max(at_pos) + 1) if at_pos else len(ws)
        n_played = min(covered, n_total) if yields else n_total
        triggers = []
        offset0 = turn.words[0].start_s if turn.words else 0.0
        for tr in case.data.turn_triggers(turn.index):
            if tr.word_index == 0:
                at = start
            elif tr.word_index - 1 in at_pos:
                at = at_pos[tr.word_index - 1].end_s
            else:
                at = start + max(tr.at_s - offset0, 0.0)
            if at <= end + EPS_S:
                triggers.append((tr.kind, at))
        played.append(
            PlayedTurn(
                case_id=cid,
                index=turn.index,
                label=turn.label,
                turn_type=turn.turn_type,
                subtype=turn.subtype,
                start_s=start,
                end_s=end,
                scheduled_s=start,
                cut_short=yields and n_played < n_total,
                n_words_total=n_total,
                n_words_played=n_played,
                triggers_s=tuple(triggers),
            )
        )
        out_words.extend(replace(w, case_id=cid, turn=turn.index) for w in ws)
    out_words.extend(replace(w, case_id=cid) for w in model)
    out_words.sort(key=lambda w: (w.start_s, w.end_s, w.speaker))
    dur = duration_s if duration_s is not None else max((w.end_s for w in out_words), default=0.0)
    return Transcript(cid, tuple(out_words), tuple(played), dur)


# --------------------------------------------------------------------------------------------
# Loading the inputs


def load_session_transcript(path: str | Path, case: TestCase) -> Transcript:
    """`path` as a transcript of `case`: JSON (``.json``) or the rendered text format (else)."""
    path = Path(path)
    if path.suffix.lower() == ".json":
        tr = load_transcript(path)
        if tr.case_id != case.case_id:
            raise TranscriptError(
                str(path),
                tr.case_id,
                "case_id",
                f"the transcript is of case {tr.case_id!r}, but the case file is {case.case_id!r}",
            )
        return tr
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise TranscriptError(str(path), case.case_id, "<file>", "file not found") from None
    except (OSError, UnicodeDecodeError) as e:
        raise TranscriptError(str(path), case.case_id, "<file>", f"cannot read: {e}") from None
    if not text.strip():
        raise TranscriptError(str(path), case.case_id, "line 1", "the file is empty")
    try:
        words = parse_rendered(text, case.case_id)
    except TranscriptError as e:
        raise TranscriptError(str(path), e.case_id, e.field, e.message) from None
    return transcript_from_words(case, words, path=str(path))


def _judge_names() -> list[str]:
    return sorted(p.stem for p in (CONF_DIR / "judge").glob("*.yaml"))


def make_judge(name: str, overrides: Sequence[str] = ()):
    """The judge of ``conf/judge/<name>.yaml``, composed with the root config and `overrides`."""
    GlobalHydra.instance().clear()
    try:
        with initialize_config_dir(config_dir=str(CONF_DIR), version_base=None):
            try:
                cfg = compose("config", overrides=[f"judge={name}", *overrides])
            except Exception as e:  # hydra's messages are readable; keep the first line
                raise FdevalError(f"config: {str(e).strip().splitlines()[0]}") from None
    finally:
        GlobalHydra.instance().clear()
    try:
        return instantiate(cfg.judge)
    except InstantiationException as e:
        cause = e.__cause__
        while (
            cause is not None and not isinstance(cause, FdevalError) and cause.__cause__ is not None
        ):
            cause = cause.__cause__
        if isinstance(cause, FdevalError):
            raise cause from None
        raise FdevalError(f"judge={name}: {str(e).strip().splitlines()[-1]}") from None


def run(
    case_path: str,
    transcript_path: str,
    policy: str | None = None,
    judge: str = "rules",
    root: str | None = None,
    overrides: Sequence[str] = (),
) -> list[dict]:
    """The verdicts (as verdict-file dicts) of one case's transcript."""
    case = load_case(case_path, root, InstructFDCase)
    judged = case.data.judge_policies
    if policy is not None and policy not in judged:
        raise CaseError(
            case_path,
            case.case_id,
            "judge_policies",
            f"--policy {policy!r} is not judged for this case; valid: {', '.join(judged)}",
        )
    transcript = load_session_transcript(transcript_path, case)
    j = make_judge(judge, overrides)
    policies = [policy] if policy is not None else list(judged)
    return [verdict_to_dict(j.judge(case, p, transcript)) for p in policies]


def main(argv: Sequence[str] | None = None) -> int:
    names = _judge_names()
    ap = argparse.ArgumentParser(
        prog="python -m fdeval.benchmarks.instructfd.judge_case",
        description="Judge one session transcript of one case; print the verdicts as JSON.",
    )
    ap.add_argument("--case", required=True, help="case file (JSON)")
    ap.add_argument(
        "--transcript", required=True, help="transcript: .json, or the rendered text format"
    )
    ap.add_argument(
        "--policy", help="judge only this instruction (default: all of the case's judge_policies)"
    )
    ap.add_argument(
        "--judge",
        default="rules",
        choices=names,
        help="judge config in conf/judge/ (default: rules)",
    )
    ap.add_argument("--root", help="dataset root of the case (checks its audio paths)")
    ap.add_argument(
        "overrides",
        nargs="*",
        metavar="KEY=VALUE",
        help="Hydra overrides, e.g. judge.model=... out_root=...",
    )
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr, format="fdeval: %(message)s")
    bad = [o for o in args.overrides if "=" not in o]
    if bad:
        ap.error(f"overrides must be KEY=VALUE, got {bad[0]!r}")
    try:
        verdicts = run(
            args.case, args.transcript, args.policy, args.judge, args.root, args.overrides
        )
    except FdevalError as e:
        print(f"fdeval.benchmarks.instructfd.judge_case: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("fdeval.benchmarks.instructfd.judge_case: interrupted", file=sys.stderr)
        return 130
    json.dump(verdicts, sys.stdout, indent=2, ensure_ascii=False)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
