"""Turn a stereo recording made outside fdeval into a session the engine reads (docs/interop.md).

An external recording has no session log: what the later steps need from one is rebuilt from
the audio and the case. Each scripted user turn is found in channel 0 by normalised
cross-correlation with the turn's own audio (searched after the previous turn), and where it
stops early (a user that yielded) by the first 32 ms frame where the turn's audio has speech but
the channel is near silent; the model's speech segments are Silero VAD on channel 1 with the
orchestrator's VAD settings; the model's words, when given (FDB `output.json` layout), become
the log's `model_text` rows (`text_stream = words`), else the run needs an ASR (`asr=whisper`).
The log is marked `imported = true` with its source file, how its words came (`imported_words`:
given, cropped with `imported_words_from_s`, or none) and each source file's own sample rate
(`imported_rates`; the channels arrive here at the run's rate); what a live session measures and
an import cannot (pacing, the injection error, wall time) is NaN; a turn counts as due where it
starts.
"""

from __future__ import annotations

import json
import math
import uuid
from dataclasses import asdict, dataclass, replace
from pathlib import Path

import numpy as np
import soundfile as sf
from scipy.signal import fftconvolve

from fdeval.audio.io import read_wav
from fdeval.audio.vad import SileroVAD
from fdeval.engine.run import Run
from fdeval.engine.shared import case_seed, turn_audio, versions
from fdeval.errors import FileFieldError
from fdeval.orchestrator.recorder import SessionLog, write_session
from fdeval.orchestrator.turns import effective_turn_config
from fdeval.settings import OrchestratorSettings, typed
from fdeval.types import TestCase

FRAME_S = 0.032
# A turn counts as found when, over the part that played, its audio explains at least this share
# of the channel's energy (1.0 for an exact copy at any gain; a re-encoded one stays well above).
MIN_MATCH = 0.5
SPEECH_RMS = 1e-3
SILENT_SHARE = 0.1
NAN = float("nan")


# How far a word's time may run past the end of the recording it was taken from (one 32 ms
# frame: an ASR's last word may end on the frame after the audio's last sample).
WORDS_END_TOLERANCE_S = FRAME_S


@dataclass(frozen=True)
class Words:
    """Model words with times on the recording's clock (FDB `output.json`: text + chunks).
    `from_s`: the words are known only from there on (an output.json that FDB's asr.py cropped
    at a user interruption's end); what the model said before is unknown, not silence."""

    words: tuple[tuple[str, float, float], ...]
    from_s: float = 0.0

    @classmethod
    def read(cls, path: Path, case_id: str, duration_s: float | None = None) -> "Words":
        """Read and check an FDB `output.json`: every `chunks[i]` is `{text: str, timestamp:
        [start, end]}` with finite, non-negative seconds (a JSON `true` is no number), end >= start,
        both within `duration_s` (the recording's length, when given) plus
        WORDS_END_TOLERANCE_S. Only the last chunk's end may be null (a Whisper pipeline leaves
        it so when the audio stops mid-word, and FDB's eval_pause_handling reads it that way):
        the word runs to the end of the recording (NaN when `duration_s` is not given)."""
        try:
            d = json.loads(Path(path).read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, ValueError) as e:
            raise FileFieldError(
                str(path), case_id, "<file>", f"unreadable JSON ({type(e).__name__})"
            ) from None
        if not isinstance(d, dict):
            raise FileFieldError(
                str(path),
                case_id,
                "<file>",
                f"a JSON {_kind(d)}; expected an object {{text, chunks: [...]}}",
            )
        chunks = d.get("chunks")
        if not isinstance(chunks, list):
            raise FileFieldError(
                str(path), case_id, "chunks", "expected a list of {text, timestamp: [start, end]}"
            )

        def bad(field: str, why: str) -> FileFieldError:
            return FileFieldError(str(path), case_id, f"chunks[{i}]{field}", why)

        out = []
        for i, c in enumerate(chunks):
            if not isinstance(c, dict):
                raise bad("", f"a JSON {_kind(c)}; expected {{text: str, timestamp: [start, end]}}")
            if not isinstance(c.get("text"), str):
                raise bad(".text", f"a JSON {_kind(c.get('text'))}; expected a string")
            if "timestamp" not in c:
                raise bad("", "no timestamp; expected {text: str, timestamp: [start, end]}")
            ts = c["timestamp"]
            if not isinstance(ts, list) or len(ts) != 2:
                raise bad(".timestamp", "expected [start_s, end_s]")
            start = _seconds(ts[0])
            if start is None:
                raise bad(".timestamp[0]", f"{_show(ts[0])}; expected a finite number >= 0")
            last = i == len(chunks) - 1
            if ts[1] is None and last:
                end = max(start, duration_s) if duration_s is not None else NAN
            elif ts[1] is None:
                raise bad(".timestamp[1]", "null; only the last chunk's end may be null")
            else:
                end = _seconds(ts[1])
                if end is None:
                    raise bad(".timestamp[1]", f"{_show(ts[1])}; expected a finite number >= 0")
                if end < start:
                    raise bad(".timestamp[1]", f"{end:g} s, before the word's start {start:g} s")
            if duration_s is not None:
                limit = duration_s + WORDS_END_TOLERANCE_S
                for k, v in ((0, start), (1, end)):
                    if v > limit:
                        raise bad(
                            f".timestamp[{k}]",
                            f"{v:g} s, past the end of the recording ({duration_s:g} s)",
                        )
            out.append((c["text"], start, end))
        return cls(tuple(out))


def _seconds(v: object) -> float | None:
    """A JSON number as seconds (finite, >= 0); None for anything else (bool included)."""
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return None
    f = float(v)
    return f if math.isfinite(f) and f >= 0 else None


def _kind(v: object) -> str:
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "boolean"
    if isinstance(v, (int, float)):
        return "number"
    return {str: "string", list: "array", dict: "object"}.get(type(v), type(v).__name__)


def _show(v: object) -> str:
    """A JSON value as the file spells it (true, null, NaN, "text")."""
    return json.dumps(v)[:40] if isinstance(v, (bool, int, float, str)) or v is None else _kind(v)


def load_stereo(path: Path, case_id: str, sample_rate: int) -> tuple[np.ndarray, np.ndarray]:
    """(user, model) float32 channels of a stereo recording; one-line errors for the wrong shape."""
    try:
        info = sf.info(str(path))
    except Exception as e:
        raise FileFieldError(
            str(path),
            case_id,
            "<file>",
            f"not a readable audio file ({str(e).splitlines()[0] if str(e) else type(e).__name__})",
        ) from None
    if info.channels != 2:
        raise FileFieldError(
            str(path),
            case_id,
            "channels",
            f"{info.channels} channel(s); expected 2 (ch0 user, ch1 model)",
        )
    if info.samplerate != sample_rate:
        raise FileFieldError(
            str(path),
            case_id,
            "sample_rate",
            f"{info.samplerate} Hz; this run records at {sample_rate} Hz "
            f"(resample it, or pass orchestrator.sample_rate={info.samplerate})",
        )
    x, _ = read_wav(path)
    return np.ascontiguousarray(x[:, 0]), np.ascontiguousarray(x[:, 1])


def _rms_frames(x: np.ndarray, n: int) -> np.ndarray:
    k = len(x) // n
    return np.sqrt(np.mean(x[: k * n].reshape(k, n) ** 2, axis=1)) if k else np.zeros(0)


def find_turn(user: np.ndarray, audio: np.ndarray, from_n: int) -> tuple[int, float]:
    """(start sample, score) of `audio` in `user` at or after `from_n`: where the best-scaled
    copy of the whole turn explains the largest share of the channel's energy under it (a turn
    the user stopped early scores its played share: `match` judges the played part)."""
    seg = user[from_n:]
    if len(seg) < len(audio) // 2 or not len(audio):
        return -1, 0.0
    a = audio.astype(np.float64)
    ea = float(a @ a)
    if ea == 0.0:
        return from_n, 1.0
    corr = fftconvolve(seg, a[::-1], mode="full")[len(a) - 1 :]  # corr[k] = sum seg[k + j] a[j]
    c2 = np.concatenate([[0.0], np.cumsum(seg.astype(np.float64) ** 2)])
    ends = np.minimum(np.arange(len(seg)) + len(a), len(seg))
    eseg = c2[ends] - c2[np.arange(len(seg))]
    score = np.where(eseg > 0, np.maximum(corr, 0) ** 2 / (ea * np.maximum(eseg, 1e-12)), 0.0)
    k = int(np.argmax(score))
    return from_n + k, float(score[k])


def played_until(user: np.ndarray, audio: np.ndarray, start: int, frame_n: int) -> tuple[int, bool]:
    """(end sample, cut_short): where the turn stops playing in the channel."""
    n = min(len(audio), len(user) - start)
    ra, ru = _rms_frames(audio[:n], frame_n), _rms_frames(user[start : start + n], frame_n)
    silent = np.nonzero((ra > SPEECH_RMS) & (ru < SILENT_SHARE * ra))[0]
    if len(silent):
        return start + int(silent[0]) * frame_n, True
    return start + n, n < len(audio)


def match(user: np.ndarray, audio: np.ndarray, start: int, end: int) -> float:
    """Squared cosine of the channel and the turn over the part that played (1.0: a copy at any gain)."""
    a = audio[: end - start].astype(np.float64)
    u = user[start:end].astype(np.float64)
    den = float(a @ a) * float(u @ u)
    return float(a @ u) ** 2 / den if den > 0 else 0.0


def build_log(
    run: Run,
    case: TestCase,
    source: Path,
    user: np.ndarray,
    model: np.ndarray,
    words: Words | None,
    vad: SileroVAD,
    partial: bool = False,
    source_rates: dict[str, int] | None = None,
    digest: str | None = None,
    step: str = "run",
) -> SessionLog:
    """The session log of an imported recording (see the module doc). `partial`: the recording
    was cut (an FDB export's `--window turn`): the turns from the first one not found on are
    left out as never played. `source_rates`: each source file's sample rate before it was
    resampled to the run's (recorded as `imported_rates`). `digest`: the case digest the session
    step that owns it checks (default: the run step's)."""
    settings = typed(run.cfg.orchestrator, OrchestratorSettings, "orchestrator")
    ocfg = settings.to_config()
    sr = ocfg.sample_rate
    frame_n = int(round(FRAME_S * sr))
    n = len(user)
    turns_cfg = ocfg.turns
    if fixed := run.benchmark.orchestrator_overrides():
        turns_cfg = replace(turns_cfg, **fixed)
    turn_cfg = effective_turn_config(turns_cfg, run.cfg.model.get("turn_silence_s", None))
    vstream = vad.stream(threshold=ocfg.vad_threshold, min_silence_s=ocfg.vad_min_silence_s)
    vad_events = [*vstream.push(model), *vstream.close()]
    segments = [(float(a), float(b)) for a, b in vstream.segments]
    log = SessionLog(case.case_id, sr, frame_n / sr, "imported")
    log.event(0.0, "session_start", -1, f"imported from {source.name}")
    audio = turn_audio(case, run.case_root, sr)
    cursor = 0
    for i, (turn, a) in enumerate(zip(case.turns, audio)):
        start, _ = find_turn(user, a, cursor)
        end, cut = played_until(user, a, start, frame_n) if start >= 0 else (start, False)
        share = match(user, a, start, end) if end > start else 0.0
        if share < MIN_MATCH and partial:
            break
        if share < MIN_MATCH:
            raise FileFieldError(
                str(source),
                case.case_id,
                "channel 0",
                f"user turn {i} ({turn.label}) not found after {cursor / sr:.2f} s (best match "
                f"{share:.2f} < {MIN_MATCH}); is channel 0 the user and this the case's recording?",
            )
        start_s, end_s = start / sr, end / sr
        onsets = [s for s, _ in segments if s <= start_s]
        onset = onsets[-1] if turn.turn_type == "barge-in" and onsets else NAN
        log.turns.append(
            {
                "index": i,
                "label": turn.label,
                "turn_type": turn.turn_type,
                "subtype": turn.subtype or "",
                "scheduled_s": start_s,
                "start_s": start_s,
                "actual_s": start_s,
                "error_s": NAN,
                "end_s": end_s,
                "cut_short": bool(cut),
                "onset_s": onset,
                "delay_s": start_s - onset,
                "wait_reason": "imported",
                "n_samples_played": end - start,
            }
        )
        log.event(start_s, "turn_start", i, "imported")
        log.event(end_s, "turn_end", i, "cut_short" if cut else "complete")
        cursor = end
    for e in vad_events:
        log.event(e.t_s, f"vad_{e.kind}", -1, "model channel")
    log.event(n / sr, "session_end", -1, "imported")
    log.events.sort(key=lambda e: e[0])
    log.vad_segments = segments
    log.model_chunks = [(0.0, 0.0, n)]  # the model channel as recorded: one chunk, no flushes known
    if words is not None:
        log.model_text = [
            [s, s, (e - s) if not math.isnan(e) else NAN, t, False] for t, s, e in words.words
        ]
    log.duration_s = n / sr
    log.attrs = {
        "end_reason": "imported",
        "wall_s": NAN,
        "model_id": run.model_id,
        "benchmark": run.benchmark.name,
        "benchmark_version": run.benchmark.version,
        "seed": run.seed,
        "case_seed": case_seed(run.seed, case.case_id),
        "case_version": case.version,
        "text_stream": "words",
        "user_policy": "imported",
        "user_policy_asks": 0,
        "user_policy_think_max_s": NAN,
        "oracle_user_text": False,
        "session_step": step,
        "model": {"imported": True},
        "versions": versions(),
        "turn_config": asdict(turn_cfg),
        "health_bounds": asdict(ocfg.health),
        "run_id": run.run_id,
        "run_identity": run.folder.identity,
        "case_digest": digest or run.case_digest(case),
        "session_id": uuid.uuid4().hex,
        "valid": True,
        "invalid_reason": "",
        "health_pacing_lag_max_s": NAN,
        "health_model_lag_max_s": NAN,
        "health_model_first_audio_s": NAN,
        "health_model_audio_s": n / sr,
        "health_frames_sent": 0,
        "health_realtime_factor": NAN,
        "imported": True,
        "imported_from": str(source.resolve()),
        "imported_words": ("none" if words is None else "cropped" if words.from_s > 0 else "given"),
        "imported_words_from_s": words.from_s if words is not None else NAN,
        "imported_rates": dict(source_rates or {source.name: sr}),
    }
    return log


def import_session(
    run: Run, case: TestCase, wav: Path, words_path: Path | None, vad: SileroVAD
) -> None:
    """Validate one stereo recording against its case and write the run's sessions/<case>.wav + .h5."""
    sr = run_rate(run)
    user, model = load_stereo(wav, case.case_id, sr)
    check_length(run, case, wav, user)  # before the words are held against the recording's end
    words = (
        Words.read(words_path, case.case_id, len(model) / sr) if words_path is not None else None
    )
    import_arrays(run, case, wav, user, model, words, vad)


def run_rate(run: Run) -> int:
    return int(typed(run.cfg.orchestrator, OrchestratorSettings, "orchestrator").sample_rate)


def check_length(run: Run, case: TestCase, source: Path, user: np.ndarray) -> None:
    """A whole recording is at least as long as the case's user turns together."""
    sr = run_rate(run)
    need = sum(t.duration_s for t in case.turns)
    if len(user) / sr < need:
        raise FileFieldError(
            str(source),
            case.case_id,
            "length",
            f"{len(user) / sr:.2f} s, shorter than the case's {need:.2f} s of user turns",
        )


def import_arrays(
    run: Run,
    case: TestCase,
    source: Path,
    user: np.ndarray,
    model: np.ndarray,
    words: Words | None,
    vad: SileroVAD,
    partial: bool = False,
    source_rates: dict[str, int] | None = None,
    folder: str = "sessions",
    digest: str | None = None,
    step: str = "run",
) -> None:
    """Write one imported session from its two channels (at the run's rate) into `folder` (a
    benchmark's own session step's, e.g. `clean_sessions`, with that step's `digest`);
    `partial` and `source_rates`: see build_log."""
    if not partial:
        check_length(run, case, source, user)
    log = build_log(run, case, source, user, model, words, vad, partial, source_rates, digest, step)
    h5, out_wav = run.folder.session_paths(case.case_id, folder)
    h5.parent.mkdir(parents=True, exist_ok=True)
    write_session(log, user, model, out_wav, h5)
