"""TACT's review page and label (fdeval.engine.review): per session an onset judgment (timely, too
early, too late, missed, should not respond), optionally the reviewer's own onset time in session
seconds (the page's "mark at playhead" button takes the player's time) and a note.

The page shows where the decision point falls on the session's clock (marked on the timeline, with
the measured onset), and the session's values by name: the onset from the decision point, the
episode's intent (the posterior's mode and the posterior), the response's duration, its overlaps,
and the episode's scores from the run's last scoring (`tact_episodes.csv`: composite S and s_T,
s_L, s_O of the repeat the median-of-runs kept). They are read from the run's `measure` and
`posterior` files (the folders `RunView.steps` names) and from the session log.

The review list's "human ≠ judge" (:meth:`TactReview.disagrees`): the reviewer heard a response
(timely, too early, too late) where none was measured, or says missed where one was, or marked
an onset more than :data:`ONSET_TOLERANCE_S` from the measured one (both on the session clock)."""

from __future__ import annotations

import csv
import json
import math
from pathlib import Path
from typing import Any, Mapping

from fdeval.engine.review import NOTE, Field, LabelForm, ReviewView, RunView, Section, SessionView
from fdeval.engine.run import step_dir
from fdeval.errors import FdevalError
from fdeval.recording import read_session

from .laws import INTENTS

ONSET_JUDGMENTS = ("timely", "too_early", "too_late", "missed", "should_not_respond")
RESPONDED = ("timely", "too_early", "too_late")
ONSET_TOLERANCE_S = 0.5  # a reviewer's onset this far from the measured one disagrees with it
RESULT_STEP, RESULT_KEY = "posterior", "onset_s"
SCORE_TABLE = "tact_episodes.csv"


def _step_file(run: RunView, step: str, case_id: str) -> dict[str, Any] | None:
    """The case's file of a case step (key-less: `<case_id>.json`) in the folder the view reads, or None."""
    folder = run.steps.get(step) if run is not None else None
    if not folder:
        return None
    try:
        d = json.loads((Path(run.run_dir) / folder / f"{case_id}.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return d if isinstance(d, dict) else None


def decision_point_s(run: RunView, session: SessionView) -> float | None:
    """The decision point on the session's clock: the measure step's (the end of the last played
    user turn), else the case's `decision_after_last_turn_s` after that turn's start in the log."""
    m = _step_file(run, "measure", session.case_id)
    if m is not None and isinstance(m.get("decision_session_s"), (int, float)):
        return float(m["decision_session_s"])
    data, turns = session.case.data, session.case.turns
    if data is None or not turns or session.log is None:
        return None
    try:
        logged = read_session(session.log, tables=("turns",)).turns
    except (OSError, ValueError, FdevalError):
        return None
    starts = [t.start_s for t in logged if t.index == turns[-1].index and not math.isnan(t.start_s)]
    return starts[0] + float(data.decision_after_last_turn_s) if starts else None


def measured_onset_s(session: SessionView) -> tuple[bool, float | None]:
    """(whether the session has its current onset result, the onset from the decision point or None
    for no response in the window)."""
    for r in session.results.get(RESULT_STEP, []):
        if r.key == RESULT_KEY and r.status == "ok":
            return True, None if r.value is None else float(r.value)
    return False, None


def episode_scores(run: RunView, episode_id: str) -> dict[str, str] | None:
    """The episode's row of `tact_episodes.csv` in the run's last scoring, or None."""
    try:
        path = step_dir(run.run_dir, "score") / SCORE_TABLE
        with path.open(encoding="utf-8", newline="") as f:
            return next(
                (row for row in csv.DictReader(f) if row.get("episode_id") == episode_id), None
            )
    except (OSError, ValueError, FdevalError, csv.Error):
        return None


def _num(x: Any, digits: int = 3) -> str:
    try:
        v = float(x)
    except (TypeError, ValueError):
        return "n/a"
    return "n/a" if math.isnan(v) else f"{v:.{digits}f}"


class TactReview(ReviewView):
    def label_form(self, run: RunView, session: SessionView) -> LabelForm:
        return LabelForm(
            "tact",
            (
                Field(("onset",), "choice", "onset", ONSET_JUDGMENTS),
                Field(("onset_s",), "seconds", "your onset time (s)", mark=True),
                NOTE,
            ),
        )

    def disagrees(
        self, run: RunView, session: SessionView, key: str, label: Mapping[str, Any]
    ) -> bool:
        have, onset = measured_onset_s(session)
        if not have:
            return False
        judged = label.get("onset")
        if (judged in RESPONDED and onset is None) or (judged == "missed" and onset is not None):
            return True
        mine = label.get("onset_s")
        if isinstance(mine, (int, float)) and not isinstance(mine, bool):
            if onset is None:
                return True
            at = decision_point_s(run, session)
            return at is not None and abs(float(mine) - (at + onset)) > ONSET_TOLERANCE_S
        return False

    def sections(self, run: RunView, session: SessionView) -> list[Section]:
        data, turns = session.case.data, session.case.turns
        if data is None or not turns or not hasattr(data, "decision_after_last_turn_s"):
            return []
        at = decision_point_s(run, session)
        after = (
            f"{data.decision_after_last_turn_s:.2f} s after the start of the last user turn "
            f"(turn {turns[-1].index})"
        )
        marks: list[tuple[float, str]] = [(at, "decision point")] if at is not None else []
        where = f"{at:.2f} s into the session: {after}" if at is not None else after
        values: list[tuple[str, Any]] = [
            ("decision point", after if at is None else f"{at:.2f} s into the session")
        ]
        have, onset = measured_onset_s(session)
        if have and onset is None:
            values.append(("onset", "no response in the window"))
        elif have:
            values.append(
                (
                    "onset",
                    f"{onset:+.2f} s from the decision point"
                    + (f" ({at + onset:.2f} s into the session)" if at is not None else ""),
                )
            )
            if at is not None:
                marks.append((at + onset, "onset"))
        judged = _step_file(run, RESULT_STEP, session.case_id) if have else None
        if judged is not None:
            post = zip(INTENTS, judged.get("posterior") or [])
            dist = ", ".join(f"{i} {float(p):.2f}" for i, p in post if float(p) > 0)
            source = judged.get("posterior_source")
            values += [
                (
                    "intent",
                    f"{judged.get('posterior_mode', 'n/a')} (posterior {dist or 'n/a'}"
                    + (f"; from {source})" if source else ")"),
                ),
                (
                    "response duration",
                    "none"
                    if judged.get("duration_s") is None
                    else f"{_num(judged['duration_s'], 2)} s",
                ),
                ("overlaps", str(len(judged.get("overlaps") or []))),
                ("category", str(judged.get("category", ""))),
            ]
            row = episode_scores(run, str(judged.get("episode_id")))
            if row is not None:
                kept = row.get("kept_repeat")
                values.append(
                    (
                        "score",
                        f"composite {_num(row.get('composite'))} (timing s_T {_num(row.get('s_T'))}, "
                        f"length s_L {_num(row.get('s_L'))}, overlap s_O {_num(row.get('s_O'))})"
                        + (
                            ""
                            if kept in (None, "", str(judged.get("repeat")))
                            else f"; of repeat {kept}, the one the median of runs kept"
                        ),
                    )
                )
        marked = (
            "; the timeline marks it" + (" and the onset" if len(marks) > 1 else "")
            if marks
            else ""
        )
        return [Section("Decision point", where + marked, values=tuple(values), marks=tuple(marks))]
