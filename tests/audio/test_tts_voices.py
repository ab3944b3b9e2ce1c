"""EspeakTTS voice members against the real espeak-ng: the default voice list, sexes, with_voice, identity."""

from __future__ import annotations

import itertools
import json

import numpy as np
import pytest
from scipy.signal import welch

from fdeval.audio.tts import DEFAULT_VOICES, EspeakTTS
from fdeval.errors import ConfigError

from test_tts import _f0_hz  # tests/audio is on sys.path (rootdir conftest)

TEXT = "Hello there, how are you doing today? I am really very well."


def _ltas_db(x: np.ndarray, sr: int) -> np.ndarray:
    """Long-term average spectrum, 100-6000 Hz, in dB around its mean (the voice's timbre)."""
    f, p = welch(x, sr, nperseg=512)
    db = 10 * np.log10(p[(f > 100) & (f < 6000)] + 1e-12)
    return db - db.mean()


def test_default_voices_exist_mix_sexes_and_sound_apart():
    tts = EspeakTTS()
    assert (
        tts.backend == "espeak"
        and tts.voices == DEFAULT_VOICES
        and tts.voices[0] == tts.voice == "en-us+m3"
    )
    sexes = [tts.voice_sex(v) for v in tts.voices]
    assert len(set(tts.voices)) >= 6 and sexes.count("female") >= 3 and sexes.count("male") >= 3, (
        sexes
    )
    feats = {}
    for v, sex in zip(tts.voices, sexes):
        syn = tts.with_voice(v).synthesize(TEXT)  # every default voice is one espeak-ng accepts
        feats[v] = (_f0_hz(syn.samples, syn.sample_rate), _ltas_db(syn.samples, syn.sample_rate))
        assert (feats[v][0] > 160) if sex == "female" else (feats[v][0] < 130), (v, feats[v][0])
    # Same text, so a spectral difference is the voice: each pair differs in pitch (>= 10%) or timbre.
    for a, b in itertools.combinations(tts.voices, 2):
        df0 = abs(np.log(feats[a][0] / feats[b][0]))
        dltas = float(np.sqrt(np.mean((feats[a][1] - feats[b][1]) ** 2)))
        assert df0 >= 0.1 or dltas >= 4.0, (a, b, df0, dltas)


def test_configured_voices_put_the_default_first():
    tts = EspeakTTS(voice="en+f4", voices=["en-us+f2", "en+f4", "en-us+m7", "en-us+f2"])
    assert tts.voices == ("en+f4", "en-us+f2", "en-us+m7")
    assert EspeakTTS(voices=[]).voices == ("en-us+m3",)
    assert tts.voice_sex("en-us") is None and tts.voice_sex("en-us+m7") == "male"


def test_with_voice_keeps_settings_and_speaks_that_voice():
    tts = EspeakTTS(rate_wpm=180, pitch=40, sample_rate=24000)
    other = tts.with_voice("en-us+f2")
    assert (other.voice, other.rate_wpm, other.pitch, other.sample_rate) == (
        "en-us+f2",
        180,
        40,
        24000,
    )
    assert other.voices[0] == "en-us+f2" and sorted(other.voices) == sorted(
        tts.voices
    )  # its voice first
    direct = EspeakTTS(voice="en-us+f2", rate_wpm=180, pitch=40, sample_rate=24000).synthesize(
        "Good morning."
    )
    assert np.array_equal(other.synthesize("Good morning.").samples, direct.samples)
    assert tts.voice == "en-us+m3"  # unchanged


def test_identity_is_json_and_names_what_changes_the_samples():
    tts = EspeakTTS()
    ident = tts.identity()
    assert json.loads(json.dumps(ident)) == ident
    assert (
        ident["backend"] == "espeak" and ident["voice"] == "en-us+m3" and ident["rate_wpm"] == 165
    )
    assert tts.with_voice("en+m1").identity()["voice"] == "en+m1"
    assert (
        EspeakTTS(rate_wpm=200).identity() != ident
        and EspeakTTS(voices=["en+f4"]).identity() == ident
    )


def test_unknown_voices_are_config_errors_naming_them():
    with pytest.raises(ConfigError, match=r"tts\.voices: unknown espeak-ng voice 'en-us\+zz9'"):
        EspeakTTS(voices=["en-us+f2", "en-us+zz9"])
    with pytest.raises(ConfigError, match=r"tts\.voice: unknown espeak-ng voice 'en-gb\+m3'"):
        EspeakTTS(voice="en-gb+m3")  # "en-gb" is a language tag espeak-ng's voice lookup refuses
    with pytest.raises(ConfigError, match=r"'en-us\+f5' is not one of .*en-us\+m3, en-us\+f2"):
        EspeakTTS(voices=["en-us+f2"]).with_voice("en-us+f5")
    with pytest.raises(ValueError):  # still a ValueError, as before voices were checked up front
        EspeakTTS(voice="no-such-voice")


def test_the_espeak_preset_lists_the_default_voices():
    from omegaconf import OmegaConf

    from fdeval.engine.run import build

    tts = build(OmegaConf.load("fdeval/conf/tts/espeak.yaml"))
    assert isinstance(tts, EspeakTTS) and tts.voices == DEFAULT_VOICES and tts.voice == "en-us+m3"
