"""The ASR interface without a model: segmentation, word cleaning, clock offsets, configs, errors.

These run everywhere (no torch). The backend used here, `SpanReporter`, is a test double: it
recognises nothing and reports, for each segment it is given, one word per second of audio with
times deliberately partly out of range, so the base class's placement and cleaning can be
checked against the segments it chose.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest
from asr_audio import SR, place
from hydra.utils import instantiate
from omegaconf import OmegaConf

from fdeval.asr import (
    INSTALL_HINT,
    ASRBackend,
    ASRUnavailableError,
    Qwen3ASR,
    Segmentation,
    TimedWord,
    WhisperASR,
    clean_words,
    read_channel,
    speech_segments,
)
from fdeval.errors import ConfigError
from fdeval.types import Word

CONF = Path(__file__).resolve().parents[2] / "fdeval" / "conf" / "asr"


class SpanReporter(ASRBackend):
    id = "span-reporter"

    def __init__(self, max_input_s: float = 30.0, **kw):
        self.max_input_s = max_input_s
        super().__init__(**kw)
        self.calls: list[list[float]] = []

    def identity(self) -> dict:
        return {"backend": "span-reporter", **self.settings()}

    def recognize(self, segments):
        self.calls.append([len(s) / SR for s in segments])
        out = []
        for s in segments:
            d = len(s) / SR
            words = [
                TimedWord(f"w{i}", i - 0.5, i + 1.5) for i in range(max(1, int(d)))
            ]  # spills both ways
            out.append(words + [TimedWord("tail", None, None)])
        return out


def _covered(span, segments, tol=0.1):
    a, b = span
    return any(s - tol <= a and b <= e + tol for s, e in segments)


def test_segments_cover_the_speech_and_only_it(session):
    for ch, speaker in ((0, "user"), (1, "model")):
        x = read_channel(session.path, ch)
        segs = speech_segments(x)
        assert segs == sorted(segs)
        assert all(0 <= a < b <= session.duration_s for a, b in segs)
        assert all(b - a <= 30.0 for a, b in segs)
        assert all(segs[i][1] <= segs[i + 1][0] for i in range(len(segs) - 1))
        for span in session.placed[speaker]:
            assert _covered(span, segs), (speaker, span, segs)
        for a, b in segs:  # every segment holds some of the placed speech
            assert any(a < e and s < b for s, e in session.placed[speaker]), (a, b)


def test_merge_gap_and_padding(session):
    x = read_channel(session.path, 0)
    apart = speech_segments(x, Segmentation(merge_gap_s=0.0, pad_s=0.0))
    padded = speech_segments(x, Segmentation(merge_gap_s=0.0, pad_s=0.3))
    joined = speech_segments(x, Segmentation(merge_gap_s=10.0))
    assert len(apart) == len(padded) == 3
    for (a0, b0), (a1, b1) in zip(apart, padded):
        assert a1 == pytest.approx(max(0.0, a0 - 0.3), abs=1e-3) and b1 == pytest.approx(
            b0 + 0.3, abs=1e-3
        )
    assert len(joined) == 1  # the three user turns are < 10 s apart and fit in 30 s
    assert joined[0][0] <= apart[0][0] and joined[0][1] >= apart[-1][1]


def test_long_speech_is_cut_into_pieces_that_tile_it(tts):
    clip = tts.synthesize(
        "one two three four five six seven eight nine ten eleven twelve thirteen fourteen "
        "fifteen sixteen seventeen eighteen nineteen twenty"
    ).samples
    x, _ = place(2.0 + 3 * len(clip) / SR, [(1.0 + i * len(clip) / SR, clip) for i in range(3)])
    seg = Segmentation(max_segment_s=6.0, pad_s=0.2)
    segs = speech_segments(x, seg)
    assert len(segs) >= 2
    assert all(b - a <= 6.0 + 1e-9 for a, b in segs)
    assert all(segs[i][1] <= segs[i + 1][0] for i in range(len(segs) - 1))


def test_silence_has_no_segments_and_no_words():
    x = np.zeros(5 * SR, dtype=np.float32)
    assert speech_segments(x) == []
    backend = SpanReporter(max_input_s=2.0, segmentation={"max_segment_s": 2.0})
    assert backend.transcribe(x, SR, "c", "user") == []  # long clip -> VAD -> nothing to recognise
    assert backend.calls == []


def test_clean_words_rules():
    raw = [
        TimedWord(" hi ", -0.3, 0.2),
        TimedWord("", 0.1, 0.2),
        TimedWord("there", None, 0.5),
        TimedWord("big gap", 0.4, 1.0),
        TimedWord("back", 0.2, 0.1),
        TimedWord("end", 2.5, None),
        TimedWord("nan", float("nan"), float("inf")),
    ]
    out = clean_words(raw, 2.0)
    assert [w.text for w in out] == ["hi", "there", "big", "gap", "back", "end", "nan"]
    assert out[0] == TimedWord("hi", 0.0, 0.2)
    assert out[1] == TimedWord("there", 0.0, 0.5)  # missing start: the previous word's start
    assert (out[2].start_s, out[2].end_s, out[3].start_s, out[3].end_s) == pytest.approx(
        (0.4, 0.7, 0.7, 1.0)
    )
    assert out[4] == TimedWord("back", 0.7, 0.7)  # starts never go back; end at least start
    assert out[5] == TimedWord("end", 2.0, 2.0) and out[6] == TimedWord("nan", 2.0, 2.0)
    starts = [w.start_s for w in out]
    assert starts == sorted(starts) and all(0 <= w.start_s <= w.end_s <= 2.0 for w in out)


def test_transcribe_channel_places_words_inside_their_segments(session):
    backend = SpanReporter()
    words = backend.transcribe_channel(session.path, 1, "case-1", "model")
    segs = speech_segments(read_channel(session.path, 1), backend.segmentation)
    assert backend.calls == [
        [pytest.approx(b - a, abs=1 / SR) for a, b in segs]
    ]  # one batch, only speech
    assert words and all(isinstance(w, Word) for w in words)
    assert {(w.case_id, w.speaker, w.source, w.turn) for w in words} == {
        ("case-1", "model", "asr", None)
    }
    for w in words:
        assert any(a <= w.start_s <= w.end_s <= b for a, b in segs), w
    assert sum(w.text == "tail" for w in words) == len(segs)
    assert [w.start_s for w in words] == sorted(w.start_s for w in words)


def test_transcribe_short_and_long_clips(utterances):
    clip = utterances["question"].samples
    backend = SpanReporter(max_input_s=10.0, segmentation={"max_segment_s": 10.0})
    words = backend.transcribe(clip, SR, "c", "user")
    assert backend.calls == [[pytest.approx(len(clip) / SR)]]  # short: the whole clip, no VAD
    assert all(0 <= w.start_s <= w.end_s <= len(clip) / SR for w in words)
    x, spans = place(25.0, [(2.0, clip), (15.0, clip)])
    words = backend.transcribe(x, SR, "c", "user")  # over max_input_s: VAD segments
    assert len(backend.calls[-1]) == 2 and all(d < 10.0 for d in backend.calls[-1])
    assert all(any(s - 0.5 <= w.start_s <= w.end_s <= e + 0.5 for s, e in spans) for w in words)
    resampled = backend.transcribe(np.repeat(clip, 3), 3 * SR, "c", "user")  # 48 kHz in
    assert backend.calls[-1] == [pytest.approx(len(clip) / SR, abs=1e-3)]
    assert resampled[-1].end_s <= len(clip) / SR + 1e-3


def test_transcribe_session_sorts_both_channels(session):
    words = SpanReporter().transcribe_session(session.path, "case-1")
    assert {w.speaker for w in words} == {"user", "model"}
    assert [w.start_s for w in words] == sorted(w.start_s for w in words)


def test_bad_arguments():
    backend = SpanReporter()
    with pytest.raises(ValueError, match="speaker"):
        backend.transcribe(np.zeros(SR, np.float32), SR, "c", "agent")
    with pytest.raises(ConfigError, match="pad_s"):
        Segmentation(pad_s=-1)
    with pytest.raises(ConfigError, match="unknown key"):
        Segmentation.of({"pad": 0.1})
    with pytest.raises(ConfigError, match="max_segment_s"):
        WhisperASR(segmentation={"max_segment_s": 40})
    with pytest.raises(ConfigError, match="dtype"):
        Qwen3ASR(dtype="int3")
    with pytest.raises(ValueError, match="longer than"):
        backend.transcribe_segments(np.zeros(40 * SR, np.float32), [(0.0, 40.0)], "c", "user")


def test_configs_instantiate_without_loading_anything():
    assert OmegaConf.load(CONF / "exact.yaml").name == "exact"
    whisper = instantiate(OmegaConf.load(CONF / "whisper.yaml"))
    qwen = instantiate(OmegaConf.load(CONF / "qwen3.yaml"))
    assert isinstance(whisper, WhisperASR) and whisper.model == "openai/whisper-large-v3"
    assert isinstance(qwen, Qwen3ASR) and qwen.model == "Qwen/Qwen3-ASR-1.7B-hf"
    assert qwen.aligner == "Qwen/Qwen3-ForcedAligner-0.6B-hf"
    for backend in (whisper, qwen):
        assert backend.segmentation == Segmentation()
        json.dumps(backend.identity())
        assert backend.runtime is None  # nothing loaded


def test_missing_extra_names_the_install_command(monkeypatch, utterances):
    monkeypatch.setitem(sys.modules, "transformers", None)  # as if the extra were not installed
    for backend in (WhisperASR(), Qwen3ASR()):
        with pytest.raises(ASRUnavailableError) as err:
            backend.transcribe(utterances["short"].samples, SR, "c", "user")
        assert 'pip install -e ".[asr]"' in str(err.value) and "torch==2.13.0" in str(err.value)
    assert "torch==2.13.0" in INSTALL_HINT
