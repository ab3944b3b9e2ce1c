"""EspeakTTS against the real espeak-ng: word timings, voices, determinism, threads, errors."""

from __future__ import annotations

import threading

import numpy as np
import pytest

from fdeval.audio.tts import (
    INSTALL_HINT,
    SILENCE_THRESHOLD,
    EspeakTTS,
    EspeakUnavailableError,
    _espeak_paths,
    _run_worker,
    silence,
)


def _f0_hz(x: np.ndarray, sr: int) -> float:
    """Median autocorrelation pitch of the loud 40 ms frames, searched over 60-400 Hz."""
    n = int(0.04 * sr)
    lo, hi = sr // 400, sr // 60
    f0s = []
    for start in range(0, x.size - n, n):
        frame = x[start : start + n] - x[start : start + n].mean()
        if np.sqrt(np.mean(frame**2)) < 0.05:
            continue
        ac = np.correlate(frame, frame, mode="full")[n - 1 :]
        lag = lo + int(np.argmax(ac[lo:hi]))
        if ac[lag] > 0.5 * ac[0]:  # voiced
            f0s.append(sr / lag)
    assert len(f0s) >= 5
    return float(np.median(f0s))


def test_one_word_per_token_in_order(sentence):
    assert [w.text for w in sentence.words] == sentence.text.split()
    for w, nxt in zip(sentence.words, sentence.words[1:]):
        assert 0.0 <= w.start_s < w.end_s <= nxt.start_s
    assert sentence.words[0].start_s == 0.0
    assert sentence.words[-1].end_s <= sentence.duration_s
    assert sentence.samples.dtype == np.float32 and sentence.samples.ndim == 1
    assert np.abs(sentence.samples).max() <= 1.0
    assert sentence.sample_rate == 16000


def test_words_hold_the_sound_and_pauses_are_outside_them(sentence):
    x, sr = sentence.samples, sentence.sample_rate
    for w, nxt in zip(sentence.words, sentence.words[1:] + (None,)):
        a, b = round(w.start_s * sr), round(w.end_s * sr)
        assert np.sqrt(np.mean(x[a:b] ** 2)) > 0.01, w
        gap_end = round(nxt.start_s * sr) if nxt else x.size
        assert np.abs(x[b:gap_end]).max(initial=0.0) <= SILENCE_THRESHOLD, w


def test_word_starts_are_acoustic_onsets(tts):
    # Words after a pause that begin with a vowel or nasal (no silent stop closure): the sound
    # must rise right at the reported start, not before it.
    syn = tts.synthesize("Hello. Mary? Only nine. Anna, Nora, Eleven.")
    x, sr = syn.samples, syn.sample_rate
    loud = np.flatnonzero(np.abs(x) > SILENCE_THRESHOLD)
    paused = [w for prev, w in zip(syn.words, syn.words[1:]) if w.start_s - prev.end_s >= 0.05]
    assert len(paused) >= 4
    for w in paused:
        start = round(w.start_s * sr)
        first = loud[
            np.searchsorted(loud, start - int(0.002 * sr))
        ]  # allow the filter's pre-ringing
        assert (first - start) / sr < 0.03, (w, (first - start) / sr)


def test_voices_differ_in_f0():
    text = "Hello there, how are you doing today? I am really very well."
    low = EspeakTTS(voice="en-us+m3").synthesize(text)
    high = EspeakTTS(voice="en-us+f3").synthesize(text)
    f_low, f_high = _f0_hz(low.samples, low.sample_rate), _f0_hz(high.samples, high.sample_rate)
    assert 80 < f_low < 150, f_low
    assert 160 < f_high < 280, f_high


def test_deterministic_across_calls_and_voices(tts, sentence):
    EspeakTTS(voice="en-us+f3", pitch=80).synthesize("Something else entirely, first.")
    again = tts.synthesize(sentence.text)
    assert np.array_equal(again.samples, sentence.samples)
    assert again.words == sentence.words


def test_concurrent_threads_match_serial(tts):
    texts = ["The first thread speaks this line.", "And the second thread says another one."]
    serial = [tts.synthesize(t) for t in texts]
    results: dict[int, list] = {0: [], 1: []}

    def work(i: int) -> None:
        for _ in range(2):
            results[i].append(tts.synthesize(texts[i]))

    threads = [threading.Thread(target=work, args=(i,)) for i in (0, 1)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for i in (0, 1):
        assert len(results[i]) == 2
        for syn in results[i]:
            assert np.array_equal(syn.samples, serial[i].samples) and syn.words == serial[i].words


def test_native_rate_gives_the_same_times(tts):
    text = "Timing does not depend on the output rate."
    native = EspeakTTS(sample_rate=22050).synthesize(text)
    low = tts.synthesize(text)
    assert abs(native.duration_s - low.duration_s) < 1e-3
    for a, b in zip(native.words, low.words):
        assert abs(a.start_s - b.start_s) <= 1 / 16000
        assert abs(a.end_s - b.end_s) < 2e-3


def test_unspoken_and_numeric_tokens_keep_alignment(tts):
    text = "Well — it was 1999 ... OK?"
    syn = tts.synthesize(text)
    assert [w.text for w in syn.words] == text.split()
    by_text = {w.text: w for w in syn.words}
    dash, dots = by_text["—"], by_text["..."]
    assert dash.start_s == dash.end_s == by_text["Well"].end_s
    assert dots.start_s == dots.end_s == by_text["1999"].end_s
    assert by_text["1999"].end_s - by_text["1999"].start_s > 0.5  # "nineteen ninety-nine"


def test_errors(tts):
    with pytest.raises(ValueError, match="voice"):
        EspeakTTS(voice="no-such-voice").synthesize("hello")
    with pytest.raises(ValueError):
        tts.synthesize("   ")
    with pytest.raises(ValueError):
        EspeakTTS(rate_wpm=10)
    _, data = _espeak_paths()
    request = {
        "library": "/nonexistent/libespeak-ng.so",
        "data": data,
        "voice": "en-us",
        "rate_wpm": 165,
        "pitch": None,
        "text": "hello",
    }
    with pytest.raises(EspeakUnavailableError, match=INSTALL_HINT):
        _run_worker(request)


def test_silence():
    s = silence(0.25, 16000)
    assert s.dtype == np.float32 and s.shape == (4000,) and not s.any()
    assert silence(0.0, 24000).shape == (0,)
    with pytest.raises(ValueError):
        silence(-1.0, 16000)


def test_synthesis_does_not_depend_on_the_clock():
    """espeak-ng seeds its noise from the current second; the worker pins the seed."""
    import time

    t = EspeakTTS(voice="en-us+f3", rate_wpm=175)
    a = t.synthesize("Let me walk you through it one step at a time.")
    time.sleep(1.1)
    b = t.synthesize("Let me walk you through it one step at a time.")
    assert np.array_equal(a.samples, b.samples)
