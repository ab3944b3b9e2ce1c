"""A case folder (`benchmark.cases_dir=`) broken after its sessions were recorded: corrupt,
truncated, 0-frame and NaN WAVs, a WAV relabelled with the wrong sample rate or with 3 channels;
malformed JSON, invalid UTF-8, huge numbers and deep nesting in the case file.

tests/cases/test_cases_bad_input.py checks each message at load (and that a fresh launch writes
nothing); here, through `python -m fdeval.launch` on a folder with a recorded session, each fault
is the exact one-line error, every file of the run is byte-identical afterwards (none added), and
once the input is put right the relaunch of the same command completes the steps still missing.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf
from helpers.case_data import CASE_ID, SAMPLE_RATE, valid_case_dict, write_turn_audio

from fdeval.engine.run import step_dir

from .conftest import digests, launch, one_line_error, runs, sibling_module

bad = sibling_module("cases/test_cases_bad_input.py")  # its damage helpers and message builders


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    """A case folder with the valid case, its session recorded (`stage=run`): transcripts,
    verdicts and scores are what a full launch still has to make."""
    tmp = tmp_path_factory.mktemp("bad-inputs")
    root = tmp / "data"
    write_turn_audio(root, valid_case_dict())
    (root / "cases").mkdir()
    bad.write_text_case(root, json.dumps(valid_case_dict()))
    launch(tmp, f"benchmark.cases_dir={root}", "stage=run")
    (d,) = runs(tmp / "outputs")
    pristine = {p: p.read_bytes() for p in root.rglob("*") if p.is_file()}
    return tmp, root, d, pristine, digests(d / "sessions")


def _case_text(root: Path) -> bytes:
    return bad.case_path(root).read_bytes()


def corrupt_wav(root):
    w = bad.wav(root)
    w.write_bytes(
        np.random.default_rng(1).bytes(4000)
    )  # these bytes also make libmpg123 print a warning
    return (
        bad.prefix(root, "turns[0].audio_path")
        + f"{w}: not readable audio: {bad.libsndfile_reason(w)}"
    )


def truncated_wav_header(root):
    w = bad.wav(root, "turn2_interrupt")
    w.write_bytes(w.read_bytes()[:30])
    return (
        bad.prefix(root, "turns[1].audio_path")
        + f"{w}: not readable audio: {bad.libsndfile_reason(w)}"
    )


def truncated_wav_data(root):
    bad.wav(root).write_bytes(
        bad.wav(root).read_bytes()[: 44 + 2 * SAMPLE_RATE]
    )  # 1 s of 16-bit mono left
    return bad.prefix(root, "turns[0].duration_s") + (
        f"3.2 s but {bad.wav(root)} lasts 1.0000 s ({SAMPLE_RATE} frames at {SAMPLE_RATE} Hz; tolerance 0.02 s)"
    )


def nan_wav(root):
    x = np.zeros(int(3.2 * SAMPLE_RATE), np.float32)
    x[8000] = np.nan
    sf.write(bad.wav(root), x, SAMPLE_RATE, subtype="FLOAT")
    return bad.prefix(root, "turns[0].audio_path") + (
        f"{bad.wav(root)}: non-finite sample (NaN or inf) at frame 8000 (0.500 s)"
    )


def wrong_sample_rate(root):
    """16 kHz samples under an 8 kHz header (a file relabelled): it lasts twice its duration_s."""
    data = bytearray(bad.wav(root).read_bytes())
    assert data[24:28] == SAMPLE_RATE.to_bytes(4, "little")  # canonical 44-byte PCM header
    data[24:28], data[28:32] = (8000).to_bytes(4, "little"), (16000).to_bytes(4, "little")
    bad.wav(root).write_bytes(bytes(data))
    n = int(3.2 * SAMPLE_RATE)
    return bad.prefix(root, "turns[0].duration_s") + (
        f"3.2 s but {bad.wav(root)} lasts {n / 8000:.4f} s ({n} frames at 8000 Hz; tolerance 0.02 s)"
    )


def three_channels(root):
    sf.write(bad.wav(root), np.full((int(3.2 * SAMPLE_RATE), 3), 0.1, np.float32), SAMPLE_RATE)
    return (
        bad.prefix(root, "turns[0].audio_path")
        + f"{bad.wav(root)}: has 3 channels; turn audio is mono or stereo"
    )


def malformed_json(root):
    text = _case_text(root)[:-40]  # cut short, as a copy interrupted mid-file leaves it
    bad.write_text_case(root, text)
    try:
        json.loads(text)
    except json.JSONDecodeError as e:
        return (
            bad.prefix(root, "<json>", None)
            + f"invalid JSON at line {e.lineno} column {e.colno}: {e.msg}"
        )
    raise AssertionError("the cut text still parses")


def invalid_utf8(root):
    text = _case_text(root)
    at = text.index(b"Give")
    bad.write_text_case(root, text[:at] + b"\xff" + text[at:])
    return bad.prefix(root, "<file>", None) + f"not valid UTF-8: byte {at} (line 1) is b'\\xff'"


def float_overflow(root):
    bad.write_text_case(
        root, _case_text(root).decode().replace('"timeout_s": 20.0', '"timeout_s": 1e400', 1)
    )
    return bad.prefix(root, "turns[0].timeout_s") + "must be finite, got inf"


def deep_nesting(root):
    bad.write_text_case(root, '{"seed": ' + "[" * 100_000 + "]" * 100_000 + "}")
    return bad.prefix(root, "<json>", None) + "nested too deeply to parse"


FAULTS = [
    corrupt_wav,
    truncated_wav_header,
    truncated_wav_data,
    bad._zero_frame_audio,
    nan_wav,
    wrong_sample_rate,
    three_channels,
    malformed_json,
    invalid_utf8,
    bad._bad_json,
    float_overflow,
    deep_nesting,
]
IDS = [
    "corrupt_wav",
    "truncated_wav_header",
    "truncated_wav_data",
    "zero_frame_wav",
    "nan_wav",
    "wrong_sample_rate",
    "three_channels",
    "malformed_json",
    "invalid_utf8",
    "huge_integer",
    "float_overflow",
    "deep_nesting",
]


@pytest.mark.parametrize("fault", FAULTS, ids=IDS)
def test_a_broken_case_input_is_one_line_and_the_run_is_untouched(recorded, fault):
    tmp, root, d, pristine, _ = recorded
    before = digests(tmp / "outputs")
    try:
        expected = fault(root)
        err = one_line_error(launch(tmp, f"benchmark.cases_dir={root}", check=False))
        assert err == f"fdeval: error: {expected}"
        assert digests(tmp / "outputs") == before  # nothing changed, nothing added
    finally:
        for p, data in pristine.items():
            p.write_bytes(data)


def test_with_the_input_put_right_the_relaunch_completes_and_keeps_the_session(recorded):
    """After any of the faults above the run's files are as the fixture left them (each test checks
    it), so this one relaunch stands for the relaunch after each."""
    tmp, root, d, _, sessions = recorded
    launch(tmp, f"benchmark.cases_dir={root}")
    assert digests(d / "sessions") == sessions  # not recorded again
    assert (step_dir(d, "transcribe") / f"{CASE_ID}.json").is_file() and (
        step_dir(d, "score") / "ias.csv"
    ).is_file()
    assert len(list(step_dir(d, "judge").glob(f"{CASE_ID}@*.json"))) == 1
