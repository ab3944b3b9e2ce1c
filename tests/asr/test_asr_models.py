"""WhisperASR and Qwen3ASR end to end on randomly initialised tiny checkpoints (see asr_tiny_models).

Real code paths: save_pretrained -> from_pretrained(local folder, local_files_only=True) ->
transformers' ASR pipeline / Qwen3-ASR generate + forced aligner, on real espeak-ng speech. The
weights are random, so the words are garbage: the tests check the contract (Words, source "asr",
case and speaker, times valid, inside the audio and inside the VAD speech segments), never text.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from asr_audio import SR

pytestmark = pytest.mark.asr
pytest.importorskip("torch")
pytest.importorskip("transformers", minversion="5.13")

from asr_tiny_models import build_tiny_qwen3, build_tiny_whisper

from fdeval.asr import (
    ASRUnavailableError,
    Qwen3ASR,
    WhisperASR,
    read_channel,
    speech_segments,
)
from fdeval.errors import ConfigError
from fdeval.types import Word


@pytest.fixture(scope="module")
def whisper(tmp_path_factory) -> WhisperASR:
    path = build_tiny_whisper(tmp_path_factory.mktemp("tiny_whisper"))
    return WhisperASR(
        model=str(path), local_files_only=True, device="cpu", batch_size=8, max_new_tokens=8
    )


@pytest.fixture(scope="module")
def qwen3(tmp_path_factory) -> Qwen3ASR:
    asr, aligner = build_tiny_qwen3(tmp_path_factory.mktemp("tiny_qwen3"))
    return Qwen3ASR(
        model=str(asr),
        aligner=str(aligner),
        local_files_only=True,
        device="cpu",
        batch_size=4,
        max_new_tokens=6,
    )


@pytest.fixture(params=["whisper", "qwen3"])
def backend(request):
    return request.getfixturevalue(request.param)


def check_words(words, case_id, speaker, t0, t1):
    assert isinstance(words, list) and words, "no words: the tiny models always produce some"
    assert all(isinstance(w, Word) for w in words)
    assert {(w.case_id, w.speaker, w.source, w.turn) for w in words} == {
        (case_id, speaker, "asr", None)
    }
    assert all(w.text and w.text == w.text.strip() for w in words)
    assert all(t0 <= w.start_s <= w.end_s <= t1 for w in words)
    starts = [w.start_s for w in words]
    assert starts == sorted(starts)


def test_transcribe_clip(backend, utterances):
    clip = utterances["question"]
    words = backend.transcribe(clip.samples, clip.sample_rate, "case-1", "user")
    check_words(words, "case-1", "user", 0.0, clip.duration_s)
    assert backend.runtime["device"] == "cpu" and backend.runtime["dtype"] == "float32"
    json.dumps({"identity": backend.identity(), "runtime": backend.runtime})


def test_transcribe_session_inside_speech_segments(backend, session):
    words = backend.transcribe_session(session.path, "case-3")
    assert [w.start_s for w in words] == sorted(w.start_s for w in words)
    for channel, speaker in ((0, "user"), (1, "model")):
        mine = [w for w in words if w.speaker == speaker]
        check_words(mine, "case-3", speaker, 0.0, session.duration_s)
        segments = speech_segments(read_channel(session.path, channel), backend.segmentation)
        for w in mine:
            assert any(a <= w.start_s <= w.end_s <= b for a, b in segments), (w, segments)
        hit = {i for w in mine for i, (a, b) in enumerate(segments) if a <= w.start_s <= b}
        assert len(hit) >= 2  # words from more than one segment, each moved onto the session clock


def test_qwen3_align_keeps_tokens_as_written(qwen3, utterances):
    clip = utterances["question"].samples
    text = "Hello there, I would like to book a table -- for two tonight, please."
    (words,) = qwen3.align([clip], [text])
    assert [w.text for w in words] == [
        t for t in text.split() if t != "--"
    ]  # punctuation kept, "--" unspoken
    (units,) = qwen3.align(
        [clip], ["你好 world"]
    )  # a token of two aligned units: the units are reported
    assert [w.text for w in units] == ["你", "好", "world"]
    assert qwen3.align([clip, clip], ["", "  "]) == [[], []]
    with pytest.raises(ValueError, match="2 segments but 1 texts"):
        qwen3.align([clip, clip], ["a"])


def test_qwen3_refuses_a_language_the_aligner_lacks(qwen3):
    other = Qwen3ASR(model=qwen3.model, aligner=qwen3.aligner, local_files_only=True, language="ar")
    with pytest.raises(ConfigError, match="forced aligner"):
        other.transcribe(np.zeros(SR, np.float32), SR, "c", "user")


def test_missing_local_checkpoint_is_one_clear_error(tmp_path, utterances):
    for backend in (
        WhisperASR(model=str(tmp_path / "nothing"), local_files_only=True),
        Qwen3ASR(
            model=str(tmp_path / "nothing"),
            aligner=str(tmp_path / "nothing"),
            local_files_only=True,
        ),
        WhisperASR(model="openai/whisper-never-downloaded", local_files_only=True),
    ):
        with pytest.raises(ASRUnavailableError, match="cannot load"):
            backend.transcribe(utterances["short"].samples, SR, "c", "user")


def test_gpu_auto_device_and_dtype(whisper, qwen3, utterances):
    """Where a GPU exists: device/dtype "auto" pick it with float16 (Whisper) / bfloat16 (Qwen3)."""
    import torch

    if not torch.cuda.is_available():
        pytest.skip("no GPU")
    clip = utterances["question"]
    for tiny, dtype in ((whisper, "float16"), (qwen3, "bfloat16")):
        kw = (
            {"aligner": tiny.aligner, "max_new_tokens": 6}
            if isinstance(tiny, Qwen3ASR)
            else {"max_new_tokens": 8}
        )
        backend = type(tiny)(model=tiny.model, local_files_only=True, **kw)
        words = backend.transcribe(clip.samples, clip.sample_rate, "gpu", "user")
        check_words(words, "gpu", "user", 0.0, clip.duration_s)
        assert backend.runtime["device"].startswith("cuda") and backend.runtime["dtype"] == dtype
