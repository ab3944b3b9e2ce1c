"""TACT's LLM intent judge: a text-only model's distribution over the six intents of each episode,
written as the episode's `judge_logits` (read by `benchmark.posterior=fused`), with a calibration
report. docs/tact.md ("The intent judge") documents settings, files and the report.

    python -m fdeval.benchmarks.tact.intent_judge DATA_ROOT [KEY=VALUE ...] [--replace]

**What the judge reads.** The paper does not list the judge's inputs; it says the history alone
leaves intent ambiguous in many episodes and the focal speaker's profile resolves over half of
them, so the judge gets both. The user message has
(`render_prompt`): one sentence on the situation at t = 0 (the end of speaker A's speech; for
user-interruption episodes, that A cut in while B was speaking), A's measured habits from the
profile, and the time-aligned transcript before t = 0 (A = focal, B = other). The judge does not
see the category name, the annotations, or what the human did after t = 0 (annotators did;
showing the continuation would let the judge read the answer off it).

**How probabilities are obtained.** The model states a probability per intent as one JSON
object (`parse_answer`, strict: the six intents exactly, numbers in [0, 1] adding up to 1 within
0.02; then renormalised). A bad answer is asked again with the reason appended (its own cache
entry), up to `max_attempts` answers. Alternatives we did not take: token log-probabilities
exist on the OpenAI protocol only (not on the Messages API) and score the first token of a
label, not the intent; sampling k labels per episode costs k requests and gives a coarse
histogram that still needs smoothing. Stated probabilities tend to be overconfident and
coarse, which is what the temperature T* fitted on the dev split corrects. The logits written
are log(p) after flooring each p at `PROB_FLOOR` (1e-4) and renormalising, so softmax of them
gives back the stated distribution and an intent stated as 0 stays finite (log 1e-4 = -9.2).

**Errors.** A request that fails after the client's retries, or no valid answer within
`max_attempts`, is recorded as `status: error` in the episode's record; the episode file is left
as it was (an error is never a distribution). No key, rejected credentials, an unknown model or
an unreachable endpoint stop the run with one line (exit 2); what was judged so far is kept and
written. Exit 1 when some episodes ended in error (a relaunch asks those again).

**Files** (under the data root): `intent_judge/cache/` holds the LLM client's answer cache
(keyed by the request's content hash: model, temperature, max_tokens, seed, endpoint, prompts);
`intent_judge/<judge_key>/` the judge's `identity.json`, one record per episode in `records/`
and `report.json` / `report.md`. `judge_key` hashes the judge's identity (`IntentJudge.identity`:
backend, model, sampling settings, endpoint, version and prompt hash). A relaunch reuses every
`ok` record whose prompt is unchanged and resends nothing the cache holds.

**Writing episodes.** An episode's JSON is read as it is on disk, `judge_logits` set and
`meta.intent_judge` (judge id, key, prompt hash) added, validated and written back atomically;
nothing else changes. Logits already present from another source (an import, another judge
setting) are kept unless `--replace` is given.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import logging
import math
import sys
from collections.abc import Mapping, Sequence
from concurrent.futures import FIRST_EXCEPTION, ThreadPoolExecutor, wait
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from fdeval.errors import ConfigError, FdevalError
from fdeval.files import write_json_atomic, write_text_atomic
from fdeval.llm.answers import parse_json_object
from fdeval.llm.client import (
    BACKENDS,
    MAX_TOKENS_PARAMS,
    LLMClient,
    LLMConfigError,
    LLMError,
    protocol_of,
)

from .agreement import episode_agreement
from .calibration import N_BINS, calibration_report, report_markdown
from .episodes import Episode, SpeakerProfile, episode_from_dict, load_episodes
from .laws import INTENTS
from .posterior import JUDGE_WEIGHT, label_counts

log = logging.getLogger("fdeval")

JUDGE_VERSION = "1"  # bump when the prompts, what they are given, or the reading of answers change
PROB_FLOOR = 1e-4
SUM_TOLERANCE = 0.02
FOLDER = "intent_judge"
DEFAULT_MODELS = {"anthropic": "claude-sonnet-4-6"}
OPENAI_ONLY = ("max_tokens_param", "reasoning_effort")
# Settings that decide the answers (identity) come first; the rest only decide whether and how
# fast requests succeed, or what the report computes.
DEFAULTS: dict[str, Any] = {
    "backend": "anthropic",
    "model": None,
    "temperature": 0.0,
    "max_tokens": 1024,
    "seed": 0,
    "base_url": None,
    "max_tokens_param": "max_tokens",
    "reasoning_effort": None,
    "max_attempts": 3,
    "max_retries": 5,
    "timeout_s": 60.0,
    "workers": 4,
    "cache_dir": None,
    "judge_weight": JUDGE_WEIGHT,
    "n_bins": N_BINS,
}

# ---------------------------------------------------------------------------------------------
# The prompts (fdeval's own wording; their hash is recorded with every answer)

SYSTEM_PROMPT = """\
You study turn-taking in recorded conversations between two people, A and B. You get the \
transcript of a conversation up to one moment, t = 0, where A has just stopped talking, and a \
summary of A's usual habits in conversation. Estimate what A intends at t = 0, that is, what A \
expects to happen next, as a probability for each of six intents:

ans: A wants a reply now. A has asked a direct question or made a request that is complete, and \
expects B to answer promptly.
ref: A has handed the turn to B with something that takes thought; a reply is expected after a \
considered pause, or B may leave it.
rhe: what A said does not really call for an answer (a rhetorical question, thinking aloud, a \
remark to themselves); B staying silent is fine and A will probably carry on.
hold: A is not finished. This is a pause inside A's turn (a filled pause, a trailing "and" or \
"so", an unfinished list or sentence) and A means to go on; B should stay quiet.
bck: A keeps the turn but invites something short from B: a listener token such as "mhm" or \
"right", a completion of A's sentence, or a quick clarification. Such responses often come \
before A has quite finished.
abn: A gives up the turn without finishing it (trails off, "never mind", "forget it"); B may \
take over, with no hurry.

How to judge:
- Use the words, the timing in the transcript and A's habits (a speaker who often pauses inside \
their turns is more likely to be holding the floor in a silence).
- When several readings are plausible, share the probability among them; give 0 only to an \
intent that is plainly impossible here.
- Make the numbers mean what they say: of all the moments you give 0.7 for an intent, about \
seven in ten should turn out to have that intent.

Answer with one JSON object and nothing else, in this form:
{"reasoning": "<three sentences at most>", "probabilities": {"ans": <p>, "ref": <p>, "rhe": <p>, \
"hold": <p>, "bck": <p>, "abn": <p>}}
Every <p> is a number from 0 to 1, and the six add up to 1."""

USER_TEMPLATE = """\
At t = 0: {situation}

A's habits, measured on {evidence} of A's other conversations:
{profile}

Transcript before t = 0 (times in seconds relative to t = 0):
{transcript}

Give your probabilities for A's intent at t = 0."""

SITUATIONS = {
    "turn_end": "A has just stopped speaking; t = 0 is the end of A's speech.",
    "cut_in": "B was speaking when A started talking over B; t = 0 is the end of what A said.",
}

REASK_NOTE = """

Your previous answer could not be used: {reason}
Answer again with the JSON object alone, in the form described."""


def prompt_hash() -> str:
    """16 hex digits of SHA-256 over the version and every template the prompts are made of."""
    blob = json.dumps(
        [
            JUDGE_VERSION,
            SYSTEM_PROMPT,
            USER_TEMPLATE,
            SITUATIONS,
            REASK_NOTE,
            PROB_FLOOR,
            SUM_TOLERANCE,
        ],
        ensure_ascii=False,
        sort_keys=True,
        separators=(",", ":"),
    )
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()[:16]


def _s(x: float | None, fmt: str, unit: str = "") -> str:
    return "not measured" if x is None else f"{x:{fmt}}{unit}"


def describe_profile(p: SpeakerProfile) -> str:
    """A's habits as short lines for the judge (unmeasured ones say so)."""
    fto = _s(p.fto_median_s, "+.2f", " s")
    if p.fto_median_s is not None and p.fto_p10_s is not None and p.fto_p90_s is not None:
        fto += f" (10th to 90th percentile {p.fto_p10_s:+.2f} to {p.fto_p90_s:+.2f} s)"
    pause = _s(p.pause_median_s, ".2f", " s")
    if p.pause_median_s is not None and p.pause_p90_s is not None:
        pause += f", 90th percentile {p.pause_p90_s:.2f} s"
    fh = p.floor_holding_per_min
    lines = [
        f"- gap between the other person stopping and A starting (median): {fto}",
        f"- pauses inside A's own turns (median): {pause}",
        f"- silence A sits out before going on when nobody replies: {_s(p.abstention_tolerance_s, '.1f', ' s')}",
        f"- listener tokens ('yeah', 'right') A draws from the other person: "
        f"{_s(p.backchannel_solicitation_per_min, '.1f', ' per minute of A speaking')}",
        "- listener tokens A gives: "
        f"{_s(p.backchannel_production_per_min, '.1f', ' per minute of the other speaking')}",
        f"- speaking rate: {_s(p.articulation_rate_syl_s, '.1f', ' syllables per second')}",
        f"- filled pauses (um, uh): {_s(fh.get('filled_pause'), '.1f', ' per minute')}; trailing conjunctions "
        f"(and, but, so): {_s(fh.get('trailing_conjunction'), '.1f', ' per minute')}",
    ]
    return "\n".join(lines)


def _t(x: float) -> str:
    s = f"{x:.2f}"
    return "0.00" if s == "-0.00" else s


def render_prompt(e: Episode) -> str:
    """The user message for episode `e` (see the module docstring for what it holds)."""
    situation = SITUATIONS["cut_in" if e.category == "user_interruption" else "turn_end"]
    transcript = (
        "\n".join(
            f"[{_t(h.start_s)}, {_t(h.end_s)}] {'A' if h.speaker == 'focal' else 'B'}: {h.text}"
            for h in e.history
        )
        or "(no transcript)"
    )
    return USER_TEMPLATE.format(
        situation=situation,
        evidence=f"{e.profile.evidence_min:.1f} minutes",
        profile=describe_profile(e.profile),
        transcript=transcript,
    )


# ---------------------------------------------------------------------------------------------
# Reading answers


def parse_answer(text: str, stop_reason: str | None = None) -> tuple[np.ndarray, str]:
    """(probabilities in `INTENTS` order, renormalised; the reasoning) from one answer.

    Strict: the whole answer is one JSON object (a single ```json fence around it is accepted)
    with `probabilities` (exactly the six intents, numbers in [0, 1], adding up to 1 within
    `SUM_TOLERANCE`) and optionally `reasoning` (a string); nothing else. Raises ValueError with
    the reason the judge is told on the re-ask.
    """
    if stop_reason == "max_tokens":
        raise ValueError("the answer was cut off at the token limit; keep the reasoning short")
    value = parse_json_object(text)
    extra = sorted(set(value) - {"reasoning", "probabilities"})
    if extra:
        raise ValueError(
            f"unexpected key(s) {extra}; the object has only 'reasoning' and 'probabilities'"
        )
    reasoning = value.get("reasoning", "")
    if not isinstance(reasoning, str):
        raise ValueError("'reasoning' must be a string")
    probs = value.get("probabilities")
    if not isinstance(probs, dict):
        raise ValueError("'probabilities' must be an object with one number per intent")
    missing, unknown = [z for z in INTENTS if z not in probs], sorted(set(probs) - set(INTENTS))
    if missing or unknown:
        raise ValueError(
            f"'probabilities' needs exactly the keys {list(INTENTS)}"
            + (f"; missing {missing}" if missing else "")
            + (f"; unknown {unknown}" if unknown else "")
        )
    p = []
    for z in INTENTS:
        v = probs[z]
        if (
            isinstance(v, bool)
            or not isinstance(v, (int, float))
            or not math.isfinite(v)
            or not 0 <= v <= 1
        ):
            raise ValueError(
                f"probability of {z!r} must be a number from 0 to 1, got {json.dumps(v)}"
            )
        p.append(float(v))
    total = sum(p)
    if abs(total - 1.0) > SUM_TOLERANCE:
        raise ValueError(f"the six probabilities add up to {total:.4g}, not 1")
    return np.asarray(p) / total, reasoning


def probabilities_to_logits(p: Sequence[float]) -> np.ndarray:
    """log of `p` floored at `PROB_FLOOR` and renormalised (softmax of the result is that distribution)."""
    q = np.maximum(np.asarray(p, dtype=float), PROB_FLOOR)
    return np.log(q / q.sum())


# ---------------------------------------------------------------------------------------------
# Settings


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _is_num(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def _why(key: str, v: Any) -> str | None:
    """Why `v` is not a valid value of setting `key` (None when it is)."""
    checks = {
        "backend": (lambda: v in BACKENDS, f"one of {list(BACKENDS)}"),
        "model": (
            lambda: (
                v is None
                or (isinstance(v, str) and v.strip() != "" and not any(c.isspace() for c in v))
            ),
            "a model id without spaces, or null (the backend's default)",
        ),
        "temperature": (
            lambda: v is None or (_is_num(v) and 0 <= v <= 2),
            "a number in [0, 2] or null",
        ),
        "max_tokens": (lambda: _is_int(v) and 1 <= v <= 1_000_000, "an integer in [1, 1000000]"),
        "seed": (lambda: _is_int(v), "an integer"),
        "base_url": (
            lambda: v is None or (isinstance(v, str) and v.strip() != ""),
            "a URL or null",
        ),
        "max_tokens_param": (lambda: v in MAX_TOKENS_PARAMS, f"one of {list(MAX_TOKENS_PARAMS)}"),
        "reasoning_effort": (
            lambda: v is None or (isinstance(v, str) and v.isidentifier()),
            "a word such as low, medium or high, or null",
        ),
        "max_attempts": (lambda: _is_int(v) and 1 <= v <= 20, "an integer in [1, 20]"),
        "max_retries": (lambda: _is_int(v) and 0 <= v <= 1000, "an integer in [0, 1000]"),
        "timeout_s": (lambda: _is_num(v) and v > 0, "a number > 0"),
        "workers": (lambda: _is_int(v) and 1 <= v <= 64, "an integer in [1, 64]"),
        "cache_dir": (
            lambda: v is None or (isinstance(v, str) and v.strip() != ""),
            "a folder or null",
        ),
        "judge_weight": (lambda: _is_num(v) and 0 <= v <= 1, "a number in [0, 1]"),
        "n_bins": (lambda: _is_int(v) and 1 <= v <= 100, "an integer in [1, 100]"),
    }
    ok, want = checks[key]
    return None if ok() else f"must be {want}, got {v!r}"


def check_settings(settings: Mapping[str, Any]) -> dict[str, Any]:
    """The validated settings, defaults filled in. Raises ConfigError
    `intent_judge.<key>: <why>` in one line (an unknown key lists the valid ones)."""
    if not isinstance(settings, Mapping):
        raise ConfigError(
            f"intent_judge: settings must be a mapping, got {type(settings).__name__}"
        )
    out = dict(DEFAULTS)
    for key, value in settings.items():
        if key not in DEFAULTS:
            raise ConfigError(
                f"intent_judge.{key}: unknown key; valid: [{', '.join(sorted(DEFAULTS))}]"
            )
        why = _why(key, value)
        if why:
            raise ConfigError(f"intent_judge.{key}: {why}")
        out[key] = value
    for key in ("temperature", "timeout_s", "judge_weight"):
        if out[key] is not None:
            out[key] = float(out[key])
    if out["model"] is None:
        if out["backend"] not in DEFAULT_MODELS:
            raise ConfigError(
                f"intent_judge.model: required for backend {out['backend']} (the model id the "
                f"endpoint serves)"
            )
        out["model"] = DEFAULT_MODELS[out["backend"]]
    for key in OPENAI_ONLY:
        if out[key] != DEFAULTS[key] and protocol_of(out["backend"]) != "openai":
            raise ConfigError(
                f"intent_judge.{key}: a setting of the OpenAI protocol (backend openai, vllm or "
                f"sglang), not of {out['backend']}"
            )
    return out


def parse_overrides(items: Sequence[str]) -> dict[str, Any]:
    """`KEY=VALUE` command-line settings; values read as YAML scalars (null, 0.5, text)."""
    out: dict[str, Any] = {}
    for item in items:
        key, sep, raw = item.partition("=")
        if not sep or not key.strip():
            raise ConfigError(
                f"intent_judge: settings are KEY=VALUE, got {item!r}; valid keys: "
                f"[{', '.join(sorted(DEFAULTS))}]"
            )
        key = key.strip().removeprefix("intent_judge.")
        try:
            out[key] = yaml.safe_load(raw) if raw.strip() else None
        except yaml.YAMLError:
            out[key] = raw
        if key == "model" and out[key] is not None:
            out[key] = str(raw)  # a model id is text even when it looks like a number
    return out


# ---------------------------------------------------------------------------------------------
# The judge


class IntentJudge:
    """One judge setting: its client (pinned model, temperature, seed; answer cache), its
    identity and key, and `judge_episode`. Builds the client at once, so a bad setting is one
    line before any work."""

    def __init__(self, settings: Mapping[str, Any], cache_dir: str | Path):
        self.settings = check_settings(settings)
        s = self.settings
        try:
            self.client = LLMClient(
                s["model"],
                s["temperature"],
                s["max_tokens"],
                Path(cache_dir),
                seed=s["seed"],
                base_url=s["base_url"],
                max_retries=s["max_retries"],
                timeout_s=s["timeout_s"],
                name="intent_judge",
                backend=s["backend"],
                max_tokens_param=s["max_tokens_param"],
                reasoning_effort=s["reasoning_effort"],
            )
        except LLMConfigError as e:
            raise ConfigError(str(e)) from None
        self.prompt_hash = prompt_hash()

    def identity(self) -> dict[str, Any]:
        """What decides the answers: recorded with every record, hashed into `key`."""
        s = self.settings
        ident = {
            "judge": f"llm:{s['model']}"
            + ("" if s["backend"] == "anthropic" else f"@{self.client.endpoint}"),
            "version": JUDGE_VERSION,
            "prompt_hash": self.prompt_hash,
            "backend": s["backend"],
            "model": s["model"],
            "temperature": s["temperature"],
            "max_tokens": s["max_tokens"],
            "seed": s["seed"],
            "endpoint": self.client.endpoint,
        }
        ident.update({k: s[k] for k in OPENAI_ONLY if s[k] != DEFAULTS[k]})
        return ident

    @property
    def key(self) -> str:
        blob = json.dumps(self.identity(), sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(blob.encode("utf-8")).hexdigest()[:12]

    def judge_episode(self, e: Episode) -> dict[str, Any]:
        """The episode's record: `status` ok (with `probabilities`, `judge_logits`, `reasoning`) or
        error (with `error`); `answers` lists the cache key of every answer read and `rejected` why
        each refused one was refused. LLMConfigError (no key, unreachable endpoint, ...) propagates."""
        prompt = render_prompt(e)
        rec: dict[str, Any] = {
            "episode_id": e.episode_id,
            "split": e.split,
            "judge_key": self.key,
            "prompt_hash": self.prompt_hash,
            "input_sha": _sha(prompt),
            "status": "error",
            "answers": [],
            "rejected": [],
        }
        text = ""
        for attempt in range(self.settings["max_attempts"]):
            message = (
                prompt if attempt == 0 else prompt + REASK_NOTE.format(reason=rec["rejected"][-1])
            )
            try:
                r = self.client.complete(SYSTEM_PROMPT, message, attempt=attempt)
            except LLMConfigError:
                raise
            except LLMError as err:
                rec["error"] = f"request failed: {err}"
                return rec
            text = r.text
            rec["answers"].append({"cache_key": r.prompt_hash, "model": r.model})
            try:
                p, reasoning = parse_answer(r.text, r.stop_reason)
            except ValueError as err:
                rec["rejected"].append(str(err))
                continue
            rec.update(
                status="ok",
                probabilities={z: round(float(x), 6) for z, x in zip(INTENTS, p)},
                judge_logits=[round(float(x), 6) for x in probabilities_to_logits(p)],
                reasoning=reasoning,
            )
            return rec
        rec["error"] = (
            f"no valid answer in {self.settings['max_attempts']} attempt(s); last: {rec['rejected'][-1]}; "
            f"answer began: {text.strip()[:160]!r}"
        )
        return rec


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


# ---------------------------------------------------------------------------------------------
# A data root


def write_judge_logits(
    root: Path,
    episode_id: str,
    logits: Sequence[float],
    provenance: Mapping[str, Any],
    replace: bool = False,
) -> str:
    """Set one episode's `judge_logits` (and `meta.intent_judge`) in its file, touching nothing
    else. Returns `written`, `unchanged`, or `kept` (logits from another source, not replaced)."""
    path = root / "episodes" / f"{episode_id}.json"
    d = json.loads(path.read_text(encoding="utf-8"))
    meta = d.get("meta") if isinstance(d.get("meta"), dict) else {}
    ours = (
        isinstance(meta.get("intent_judge"), dict)
        and meta["intent_judge"].get("judge_key") == provenance["judge_key"]
    )
    if d.get("judge_logits") is not None and not ours and not replace:
        return "kept"
    new_logits = [float(x) for x in logits]
    if d.get("judge_logits") == new_logits and meta.get("intent_judge") == dict(provenance):
        return "unchanged"
    d["judge_logits"] = new_logits
    d["meta"] = {**meta, "intent_judge": dict(provenance)}
    episode_from_dict(json.loads(json.dumps(d)), path, None)  # still a valid episode
    write_json_atomic(path, d)
    return "written"


def judge_data_root(
    root: str | Path, settings: Mapping[str, Any] | None = None, replace: bool = False
) -> dict[str, Any]:
    """Judge every episode of `root` (see the module docstring); returns the run's summary.

    Raises ConfigError / EpisodeError for bad settings or episodes, and LLMConfigError when the
    run had to stop (no key, unreachable endpoint, ...): records and logits of the episodes
    judged before are written first.
    """
    root = Path(root)
    s = check_settings(settings or {})
    episodes = load_episodes(root, check_audio=False)
    if not episodes:
        raise ConfigError(f"intent_judge: no episodes in {root / 'episodes'}")
    cache_dir = Path(s["cache_dir"]).expanduser() if s["cache_dir"] else root / FOLDER / "cache"
    judge = IntentJudge(s, cache_dir)
    key, ident = judge.key, judge.identity()
    folder = root / FOLDER / key
    write_json_atomic(folder / "identity.json", {**ident, "judge_key": key})
    records: dict[str, dict[str, Any]] = {}
    todo = []
    for e in episodes:
        path = folder / "records" / f"{e.episode_id}.json"
        old = _read_record(path)
        if old and old.get("status") == "ok" and old.get("input_sha") == _sha(render_prompt(e)):
            records[e.episode_id] = old
        else:
            todo.append(e)
    reused = len(records)

    def one(e: Episode) -> None:
        rec = judge.judge_episode(e)
        rec["identity"] = ident
        write_json_atomic(folder / "records" / f"{e.episode_id}.json", rec)
        records[e.episode_id] = rec

    stop: LLMConfigError | None = None
    if todo:
        with ThreadPoolExecutor(
            max_workers=min(s["workers"], len(todo)), thread_name_prefix="intent-judge"
        ) as pool:
            futures = [pool.submit(one, e) for e in todo]
            _, pending = wait(futures, return_when=FIRST_EXCEPTION)
            for f in pending:
                f.cancel()
            wait(pending)
            for f in futures:
                if not f.cancelled() and f.exception() is not None:
                    if not isinstance(f.exception(), LLMConfigError):
                        raise f.exception()
                    stop = stop or f.exception()

    provenance = {
        "judge": ident["judge"],
        "judge_key": key,
        "version": JUDGE_VERSION,
        "prompt_hash": judge.prompt_hash,
    }
    outcome = {"written": 0, "unchanged": 0, "kept": 0}
    ok = [e for e in episodes if records.get(e.episode_id, {}).get("status") == "ok"]
    for e in ok:
        outcome[
            write_judge_logits(
                root, e.episode_id, records[e.episode_id]["judge_logits"], provenance, replace
            )
        ] += 1
    errors = {
        e.episode_id: records[e.episode_id]["error"]
        for e in episodes
        if records.get(e.episode_id, {}).get("status") == "error"
    }
    summary = {
        "judge": ident["judge"],
        "judge_key": key,
        "folder": str(folder),
        "n_episodes": len(episodes),
        "reused": reused,
        "judged": len(records) - reused,
        "ok": len(ok),
        "errors": errors,
        "episodes": outcome,
        "report": None,
    }
    if outcome["kept"]:
        log.warning(
            "intent_judge: %d episode(s) keep judge_logits from another source; --replace overwrites them",
            outcome["kept"],
        )
    if stop is not None:
        raise stop
    if ok:
        report = build_report(episodes, ok, records, s, ident, key)
        write_json_atomic(folder / "report.json", report)
        write_text_atomic(folder / "report.md", report_markdown(report))
        summary["report"] = report
    return summary


def _read_record(path: Path) -> dict[str, Any] | None:
    try:
        d = json.loads(path.read_text(encoding="utf-8"))
        return d if isinstance(d, dict) else None
    except (OSError, ValueError):
        return None


def build_report(
    episodes: Sequence[Episode],
    ok: Sequence[Episode],
    records: Mapping[str, Mapping[str, Any]],
    s: Mapping[str, Any],
    ident: Mapping[str, Any],
    key: str,
) -> dict[str, Any]:
    """report.json: the judge, the calibration report over the episodes judged `ok`, and the
    annotators' agreement over all `episodes` (it does not depend on the judge)."""
    counts = label_counts([e.annotations.labels for e in ok])
    logits = np.array([records[e.episode_id]["judge_logits"] for e in ok], dtype=float)
    dev = np.array([e.split == "dev" for e in ok])
    return {
        "judge": {**ident, "judge_key": key},
        "n_episodes": len(episodes),
        "n_judged": len(ok),
        "calibration": calibration_report(counts, logits, dev, s["judge_weight"], s["n_bins"]),
        "agreement": episode_agreement([e.annotations for e in episodes]),
    }


def _summary_lines(summary: Mapping[str, Any]) -> list[str]:
    ep = summary["episodes"]
    out = [
        f"intent judge {summary['judge']} (key {summary['judge_key']}): {summary['n_episodes']} episode(s), "
        f"{summary['ok']} ok ({summary['reused']} from earlier records), {len(summary['errors'])} error(s)",
        f"judge_logits: {ep['written']} written, {ep['unchanged']} unchanged, {ep['kept']} kept from another source",
    ]
    out += [f"  error {eid}: {why}" for eid, why in list(summary["errors"].items())[:10]]
    rep = summary.get("report")
    if rep:
        cal = rep["calibration"]
        out.append(
            f"T* = {cal['temperature']:.3f} ({'in-sample' if cal['in_sample'] else 'dev -> test'}); "
            f"ECE {cal['ece_before']:.4f} -> {cal['ece_after']:.4f}"
        )
        ho = cal["held_out_annotator"]
        if ho.get("sources"):
            lls = ", ".join(
                f"{k} {'n/a' if v['log_likelihood'] is None else format(v['log_likelihood'], '.4f')}"
                for k, v in ho["sources"].items()
            )
            out.append(
                f"held-out annotator log-likelihood: {lls}; fusion beats both: {ho['fusion_beats_both']}"
            )
        out.append(
            "alpha: "
            + ", ".join(
                f"{k} {'n/a' if v['alpha'] is None else format(v['alpha'], '.3f')}"
                for k, v in rep["agreement"].items()
            )
        )
        out.append(f"report: {Path(summary['folder']) / 'report.md'}")
    return out


def main(argv: Sequence[str] | None = None) -> int:
    prog = "python -m fdeval.benchmarks.tact.intent_judge"
    ap = argparse.ArgumentParser(
        prog=prog,
        description="Write each TACT episode's judge_logits from an LLM intent "
        "judge and report its calibration (docs/tact.md).",
    )
    ap.add_argument("data_root", help="a TACT data root (holding episodes/)")
    ap.add_argument(
        "settings",
        nargs="*",
        metavar="KEY=VALUE",
        help=f"judge settings: {', '.join(DEFAULTS)} (e.g. backend=vllm model=Qwen/Qwen2.5-72B-Instruct)",
    )
    ap.add_argument(
        "--replace",
        action="store_true",
        help="overwrite judge_logits that came from another source",
    )
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr, format="fdeval: %(message)s")
    try:
        summary = judge_data_root(
            args.data_root, parse_overrides(args.settings), replace=args.replace
        )
    except FdevalError as e:  # ConfigError, EpisodeError, LLMConfigError (LLMUnavailable included)
        print(f"{prog}: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"{prog}: interrupted; records written so far are kept", file=sys.stderr)
        return 130
    print("\n".join(_summary_lines(summary)))
    return 1 if summary["errors"] else 0


if __name__ == "__main__":
    sys.exit(main())
