"""Turn audio that is not speech where its words are (issue 24): a WAV with a valid header and
random samples after it is one line before any session (exit 2, naming the file, the case and the
turn), not a run that blames the model; real espeak-ng audio passes (fdeval.cases.speech)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf

from fdeval.audio.tts import EspeakTTS
from fdeval.benchmarks.instructfd.builtin import BUILTIN_CONVERSATIONS
from fdeval.benchmarks.instructfd.generate import generate_builtin
from fdeval.cases import speech
from fdeval.cases.speech import MIN_SPEECH_IN_WORDS, SpeechCheck, check_speech, speech_figures
from fdeval.errors import CaseError
from fdeval.types import WordTiming

CASE = "bakery_phone_number__listen"  # its turn 1 reads a number out with pauses: time between words too


@pytest.fixture(scope="module")
def conversation(tmp_path_factory):
    """One built-in conversation, spoken by espeak-ng: its cases and audio."""
    root = tmp_path_factory.mktemp("speech") / "data"
    (conv,) = [c for c in BUILTIN_CONVERSATIONS if c.conversation_id == "bakery_phone_number"]
    cases = generate_builtin(root, EspeakTTS(), conversations=[conv])
    return root, {c.case_id: c for c in cases}


def copy_of(conversation, tmp_path) -> tuple[Path, dict]:
    root, cases = conversation
    shutil.copytree(root, tmp_path / "data")
    return tmp_path / "data", cases


def overwrite(path: Path, make) -> None:
    """Same length, rate and format (a valid header), other samples."""
    info = sf.info(str(path))
    sf.write(str(path), make(info.frames), info.samplerate, subtype=info.subtype, format="WAV")


def test_real_speech_passes_and_shows_the_margin(conversation):
    root, cases = conversation
    check_speech(cases.values(), root)
    figures = [
        speech_figures(
            SpeechCheck().speech(root / t.audio_path), [(w.start_s, w.end_s) for w in t.words]
        )
        for t in cases[CASE].turns
    ]
    assert min(f["in_words"] for f in figures) > 2 * MIN_SPEECH_IN_WORDS
    judged = [f["between"] for f in figures if f["between_s"] >= speech.MIN_AWAY_S]
    assert judged and max(judged) < speech.MAX_SPEECH_AWAY / 2


@pytest.mark.parametrize(
    "make",
    [
        lambda n: np.random.default_rng(1).uniform(-1, 1, n),
        lambda n: 0.05 * np.random.default_rng(2).standard_normal(n),
        lambda n: np.zeros(n),
    ],
    ids=["random-samples", "quiet-noise", "silence"],
)
def test_noise_or_silence_behind_a_valid_header_is_one_line_naming_file_case_and_turn(
    conversation, tmp_path, make
):
    root, cases = copy_of(conversation, tmp_path)
    wav = root / cases[CASE].turns[1].audio_path
    overwrite(wav, make)
    with pytest.raises(CaseError) as e:
        check_speech([cases[CASE]], root)
    msg = str(e.value)
    assert msg.startswith(
        f"{wav}: case '{CASE}': field 'turns[1].audio_path': the audio does not sound like its "
        "words: the VAD hears speech in 0% of the "
    )
    assert "\n" not in msg


def test_word_times_that_are_not_the_files_are_caught_between_the_words(conversation, tmp_path):
    root, cases = copy_of(conversation, tmp_path)
    turn = cases[CASE].turns[0]
    x, sr = sf.read(str(root / turn.audio_path), dtype="float32")
    shift_s = 1.0  # the words said to come a second later than the speech that is there
    sf.write(
        str(root / turn.audio_path),
        np.concatenate([x, np.zeros(int(shift_s * sr), np.float32)]),
        sr,
    )
    moved = replace(
        turn,
        words=tuple(WordTiming(w.text, w.start_s + shift_s, w.end_s + shift_s) for w in turn.words),
        duration_s=turn.duration_s + shift_s,
    )
    with pytest.raises(
        CaseError,
        match=r"field 'turns\[0\]\.audio_path': the audio does not match its word times: "
        r"the VAD hears speech in \d+% of the [0-9.]+ s between its words",
    ):
        check_speech([replace(cases[CASE], turns=(moved, *cases[CASE].turns[1:]))], root)


def test_what_the_vad_heard_is_cached_by_content(conversation, tmp_path, monkeypatch):
    root, cases = copy_of(conversation, tmp_path)
    cache = tmp_path / "cache.json"
    check_speech(cases.values(), root, cache)
    assert cache.is_file()

    def deaf(*a, **k):
        raise AssertionError("the VAD ran again on a file it had heard")

    monkeypatch.setattr(speech.SileroVAD, "probs", deaf)
    check_speech(cases.values(), root, cache)  # every file from the cache
    overwrite(root / cases[CASE].turns[1].audio_path, np.zeros)  # new content: heard again
    with pytest.raises(AssertionError, match="the VAD ran again"):
        check_speech([cases[CASE]], root, cache)


def test_a_launch_on_a_case_folder_with_random_samples_stops_before_any_session(
    conversation, tmp_path
):
    root, cases = copy_of(conversation, tmp_path)
    wav = root / cases[CASE].turns[1].audio_path
    overwrite(wav, lambda n: np.random.default_rng(3).integers(-32768, 32767, n, dtype=np.int16))
    out = tmp_path / "outputs"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "fdeval.launch",
            f"out_root={out}",
            "progress=false",
            f"benchmark.cases_dir={root}",
            f"benchmark.cases=[{CASE}]",
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert proc.returncode == 2, (proc.returncode, proc.stdout[-2000:], proc.stderr[-2000:])
    assert "Traceback" not in proc.stdout + proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(
        f"fdeval: error: {wav}: case '{CASE}': field 'turns[1].audio_path': the audio does not sound like its words"
    ), lines
    assert not list(out.rglob("*.h5")) and not list(out.rglob("*.wav"))
