"""Turn a stereo recording made outside fdeval into a session the engine reads (docs/interop.md).

An external recording has no session log: what the later steps need from one is rebuilt from
the audio and the case. Each scripted user turn is found in channel 0 by normalised
cross-correlation with the turn's own audio (searched after the previous turn), and where it
stops early (a user that yielded) by the first 32 ms frame where the turn's audio has speech but
the channel is near silent; the model's speech segments are Silero VAD on channel 1 with the
orchestrator's VAD settings; the model's words, when given (FDB `output.json` layout), become
the log's `model_text` rows (`text_stream = words`), else the run needs an ASR (`asr=whisper`).
The log is marked `imported = true` with its source file; what a live session measures and an
import cannot (pacing, the injection error, wall time) is NaN; a turn counts as due where it starts.
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


@dataclass(frozen=True)
class Words:
    """Model words with times on the recording's clock (FDB `output.json`: text + chunks)."""

    words: tuple[tuple[str, float, float], ...]

    @classmethod
    def read(cls, path: Path, case_id: str) -> "Words":
        try:
            d = json.loads(Path(path).read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, ValueError) as e:
            raise FileFieldError(
                str(path), case_id, "<file>", f"unreadable JSON ({type(e).__name__})"
            ) from None
        chunks = d.get("chunks") if isinstance(d, dict) else None
        if not isinstance(chunks, list):
            raise FileFieldError(
                str(path), case_id, "chunks", "expected a list of {text, timestamp: [start, end]}"
            )
        out = []
        for i, c in enumerate(chunks):
            ts = c.get("timestamp") if isinstance(c, dict) else None
            if (
                not isinstance(c, dict)
                or not isinstance(c.get("text"), str)
                or not isinstance(ts, list)
                or len(ts) != 2
                or not isinstance(ts[0], (int, float))
            ):
                raise FileFieldError(
                    str(path),
                    case_id,
                    f"chunks[{i}]",
                    "expected {text: str, timestamp: [start, end]}",
                )
            start = float(ts[0])
            end = (
                float(ts[1]) if isinstance(ts[1], (int, float)) else NAN
            )  # FDB's ASR may leave an end null
            out.append((c["text"], start, end))
        return cls(tuple(out))


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
) -> SessionLog:
    """The session log of an imported recording (see the module doc). `partial`: the recording
    was cut (an FDB export's `--window turn`): the turns from the first one not found on are
    left out as never played."""
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
        "session_step": "run",
        "model": {"imported": True},
        "versions": versions(),
        "turn_config": asdict(turn_cfg),
        "health_bounds": asdict(ocfg.health),
        "run_id": run.run_id,
        "run_identity": run.folder.identity,
        "case_digest": run.case_digest(case),
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
        "imported_words": "given" if words is not None else "none",
    }
    return log


def import_session(
    run: Run, case: TestCase, wav: Path, words_path: Path | None, vad: SileroVAD
) -> None:
    """Validate one stereo recording against its case and write the run's sessions/<case>.wav + .h5."""
    user, model = load_stereo(wav, case.case_id, run_rate(run))
    words = Words.read(words_path, case.case_id) if words_path is not None else None
    import_arrays(run, case, wav, user, model, words, vad)


def run_rate(run: Run) -> int:
    return int(typed(run.cfg.orchestrator, OrchestratorSettings, "orchestrator").sample_rate)


def import_arrays(
    run: Run,
    case: TestCase,
    source: Path,
    user: np.ndarray,
    model: np.ndarray,
    words: Words | None,
    vad: SileroVAD,
    partial: bool = False,
) -> None:
    """Write one imported session from its two channels (at the run's rate); `partial`: see build_log."""
    sr = run_rate(run)
    need = sum(t.duration_s for t in case.turns)
    if len(user) / sr < need and not partial:
        raise FileFieldError(
            str(source),
            case.case_id,
            "length",
            f"{len(user) / sr:.2f} s, shorter than the case's {need:.2f} s of user turns",
        )
    log = build_log(run, case, source, user, model, words, vad, partial)
    h5, out_wav = run.folder.session_paths(case.case_id)
    h5.parent.mkdir(parents=True, exist_ok=True)
    write_session(log, user, model, out_wav, h5)
