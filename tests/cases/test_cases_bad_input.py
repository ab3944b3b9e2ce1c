"""Every bad case input fails at load, before any session runs, with one exact line.

Covers the inputs that used to give tracebacks or blame the model (issue 9, items 6 and 7): what the
JSON parser cannot take, ids too long for file names, control characters, case audio that is
unreadable / empty / non-finite / of the wrong length, an empty cases folder, and corrupt verdict
and transcript files. Audio is real WAV written with soundfile; the end-to-end tests run
``python -m fdeval.launch`` as a user does.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import soundfile as sf
from helpers.case_data import CASE_ID, SAMPLE_RATE, valid_case_dict
from helpers.launching import run_launch


from fdeval.benchmarks.instructfd.benchmark import InstructFD
from fdeval.benchmarks.instructfd.judges.base import VerdictError, load_verdict
from fdeval.benchmarks.instructfd.records import InstructFDCase
from fdeval.cases import load_cases
from fdeval.cases.schema import AUDIO_DURATION_TOLERANCE_S, MAX_ID_LEN
from fdeval.errors import CaseError
from fdeval.files import write_json_atomic
from fdeval.transcript.io import TranscriptError, load_transcript


def case_path(root: Path) -> Path:
    return root / "cases" / f"{CASE_ID}.json"


def write_text_case(root: Path, text: str | bytes) -> Path:
    p = case_path(root)
    p.write_bytes(text.encode() if isinstance(text, str) else text)
    return p


ON_DISK = object()


def load_error(root: Path, d: Any = ON_DISK) -> str:
    """The one-line message of loading `d` (or the file already there) as the only case of `root`."""
    if d is not ON_DISK:
        write_text_case(root, json.dumps(d))
    with pytest.raises(CaseError) as info:
        load_cases(root / "cases", root, InstructFDCase)
    line = str(info.value)
    assert "\n" not in line
    return line


def prefix(root: Path, field: str, case: str | None = CASE_ID) -> str:
    where = f"case {case!r}" if case else "case ?"
    return f"{case_path(root)}: {where}: field {field!r}: "


def test_control_case_loads(root: Path) -> None:
    """The unmodified case loads: every failure below comes from its one change."""
    write_text_case(root, json.dumps(valid_case_dict()))
    assert [c.case_id for c in load_cases(root / "cases", root, InstructFDCase)] == [CASE_ID]


# -- what the JSON parser alone would turn into a traceback -------------------------------------
def test_invalid_utf8(root: Path) -> None:
    text = json.dumps(valid_case_dict(), indent=1).encode()
    at = text.index(b"Give")
    write_text_case(root, text[:at] + b"\xff" + text[at:])
    line = text[:at].count(b"\n") + 1
    assert (
        load_error(root)
        == prefix(root, "<file>", None) + f"not valid UTF-8: byte {at} (line {line}) is b'\\xff'"
    )


def test_case_id_too_long_for_file_names(root: Path) -> None:
    d = valid_case_dict()
    d["test_case_id"] = "c" * 220
    shown = "c" * 40 + "...(220 characters)"
    assert load_error(root, d) == (
        prefix(root, "test_case_id", shown)
        + "is 220 characters long; at most 128 (ids name files, whose names hold 255 bytes)"
    )


def test_longest_case_id_fits_every_file_it_names(
    root: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """A 128-character id loads, and the longest file named after it (a verdict's atomic-write
    temporary, `.<id>@acknowledge.json.<host>-<pid>.<random>.tmp.json`) can be written."""
    d = valid_case_dict()
    d["test_case_id"] = cid = "c" * MAX_ID_LEN
    write_text_case(root, json.dumps(d))
    assert load_cases(root / "cases", root, InstructFDCase)[0].case_id == cid
    out = tmp_path_factory.mktemp("verdicts") / f"{cid}@acknowledge.json"
    write_json_atomic(out, {"ok": True})
    assert json.loads(out.read_text()) == {"ok": True}


def test_case_id_with_trailing_newline(root: Path) -> None:
    d = valid_case_dict()
    d["test_case_id"] = "evil\n"
    assert load_error(root, d) == prefix(root, "test_case_id", "evil\n") + (
        "'evil\\n' is not a valid id (letters, digits, '.', '_', '-'; no leading punctuation)"
    )


@pytest.mark.parametrize("char", ["\x00", "\n", "\x7f"])
def test_control_character_in_audio_path(root: Path, char: str) -> None:
    d = valid_case_dict()
    d["turns"][0]["audio_path"] = bad = f"audio/conv1/turn1{char}.wav"
    assert load_error(root, d) == prefix(root, "turns[0].audio_path") + (
        f"{bad!r} contains a control character ({char!r} at position 17)"
    )


def test_float_overflowing_to_inf(root: Path) -> None:
    text = json.dumps(valid_case_dict()).replace('"timeout_s": 20.0', '"timeout_s": 1e400', 1)
    write_text_case(root, text)
    assert load_error(root) == prefix(root, "turns[0].timeout_s") + "must be finite, got inf"


def test_integer_ten_to_the_400(root: Path) -> None:
    text = json.dumps(valid_case_dict()).replace('"timeout_s": 20.0', f'"timeout_s": {10**400}', 1)
    write_text_case(root, text)
    assert load_error(root) == prefix(root, "turns[0].timeout_s") + (
        "integer with 401 digits is out of range (64-bit integers only)"
    )


def test_5000_digit_integer(root: Path) -> None:
    text = json.dumps(valid_case_dict()).replace('"seed": 3', '"seed": ' + "7" * 5000, 1)
    write_text_case(root, text)
    assert (
        load_error(root)
        == prefix(root, "seed") + "integer with 5000 digits is out of range (64-bit integers only)"
    )


def test_huge_integer_where_a_string_belongs(root: Path) -> None:
    text = json.dumps(valid_case_dict()).replace('"version": "1.0"', '"version": ' + "9" * 30, 1)
    write_text_case(root, text)
    assert (
        load_error(root)
        == prefix(root, "version") + "expected a string, got an integer with 30 digits"
    )


def test_deep_nesting(root: Path) -> None:
    write_text_case(root, '{"seed": ' + "[" * 100_000 + "]" * 100_000 + "}")
    assert load_error(root) == prefix(root, "<json>", None) + "nested too deeply to parse"


@pytest.mark.parametrize("value,kind", [([1], "list"), ("x", "str"), (3, "int"), (None, "null")])
def test_top_level_not_an_object(root: Path, value: Any, kind: str) -> None:
    assert (
        load_error(root, value) == prefix(root, "<root>", None) + f"expected an object, got {kind}"
    )


# -- case audio -----------------------------------------------------------------------------------
def wav(root: Path, name: str = "turn1") -> Path:
    return root / "audio" / "conv1" / f"{name}.wav"


def libsndfile_reason(path: Path) -> str:
    """What libsndfile says about `path` (its wording varies by version), as scan_audio quotes it."""
    with pytest.raises(sf.LibsndfileError) as info:
        sf.info(str(path))
    return str(info.value).split("': ", 1)[1]


def test_random_bytes_as_audio(root: Path) -> None:
    wav(root).write_bytes(np.random.default_rng(1).bytes(4000))
    assert load_error(root, valid_case_dict()) == prefix(root, "turns[0].audio_path") + (
        f"{wav(root)}: not readable audio: {libsndfile_reason(wav(root))}"
    )


def test_cut_header(root: Path) -> None:
    wav(root, "turn2_interrupt").write_bytes(wav(root, "turn2_interrupt").read_bytes()[:30])
    assert load_error(root, valid_case_dict()) == prefix(root, "turns[1].audio_path") + (
        f"{wav(root, 'turn2_interrupt')}: not readable audio: {libsndfile_reason(wav(root, 'turn2_interrupt'))}"
    )


def test_zero_frame_wav(root: Path) -> None:
    sf.write(wav(root), np.zeros(0, np.float32), SAMPLE_RATE)
    assert (
        load_error(root, valid_case_dict())
        == prefix(root, "turns[0].audio_path") + f"{wav(root)}: has 0 frames (no audio)"
    )


@pytest.mark.parametrize("value", [np.nan, np.inf])
def test_non_finite_samples(root: Path, value: float) -> None:
    x = np.zeros(int(3.2 * SAMPLE_RATE), np.float32)
    x[8000] = value
    sf.write(wav(root), x, SAMPLE_RATE, subtype="FLOAT")
    assert load_error(root, valid_case_dict()) == prefix(root, "turns[0].audio_path") + (
        f"{wav(root)}: non-finite sample (NaN or inf) at frame 8000 (0.500 s)"
    )


def test_stereo_is_accepted_and_three_channels_are_not(root: Path) -> None:
    n = int(3.2 * SAMPLE_RATE)
    sf.write(wav(root), np.full((n, 2), 0.1, np.float32), SAMPLE_RATE)
    write_text_case(root, json.dumps(valid_case_dict()))
    assert load_cases(root / "cases", root, InstructFDCase)[0].case_id == CASE_ID
    sf.write(wav(root), np.full((n, 3), 0.1, np.float32), SAMPLE_RATE)
    assert (
        load_error(root)
        == prefix(root, "turns[0].audio_path")
        + f"{wav(root)}: has 3 channels; turn audio is mono or stereo"
    )


def test_sample_rate_zero_in_header(root: Path) -> None:
    """A WAV header claiming 0 Hz (written by hand: soundfile refuses to) fails as unreadable:
    libsndfile does not open it."""
    data = bytearray(wav(root).read_bytes())
    assert data[24:28] == SAMPLE_RATE.to_bytes(4, "little")  # canonical 44-byte PCM header
    data[24:28] = (0).to_bytes(4, "little")
    wav(root).write_bytes(bytes(data))
    assert load_error(root, valid_case_dict()) == prefix(root, "turns[0].audio_path") + (
        f"{wav(root)}: not readable audio: {libsndfile_reason(wav(root))}"
    )


@pytest.mark.parametrize(
    "delta_s", [AUDIO_DURATION_TOLERANCE_S + 0.005, -(AUDIO_DURATION_TOLERANCE_S + 0.005)]
)
def test_audio_length_differs_from_duration(root: Path, delta_s: float) -> None:
    """Longer than `duration_s` would play past the transcript's turn end; shorter leaves words
    timed past the audio. Both are errors past the tolerance."""
    n = int(round((3.2 + delta_s) * SAMPLE_RATE))
    sf.write(wav(root), np.full(n, 0.1, np.float32), SAMPLE_RATE)
    assert load_error(root, valid_case_dict()) == prefix(root, "turns[0].duration_s") + (
        f"3.2 s but {wav(root)} lasts {n / SAMPLE_RATE:.4f} s ({n} frames at {SAMPLE_RATE} Hz; tolerance 0.02 s)"
    )


@pytest.mark.parametrize(
    "delta_s", [AUDIO_DURATION_TOLERANCE_S - 0.005, -(AUDIO_DURATION_TOLERANCE_S - 0.005)]
)
def test_audio_length_within_tolerance_loads(root: Path, delta_s: float) -> None:
    sf.write(
        wav(root), np.full(int(round((3.2 + delta_s) * SAMPLE_RATE)), 0.1, np.float32), SAMPLE_RATE
    )
    write_text_case(root, json.dumps(valid_case_dict()))
    assert load_cases(root / "cases", root, InstructFDCase)[0].case_id == CASE_ID


def test_wav_cut_inside_its_data(root: Path) -> None:
    """libsndfile reads a WAV cut mid-data without complaint; the length check catches it."""
    wav(root).write_bytes(wav(root).read_bytes()[: 44 + 2 * SAMPLE_RATE])  # 1 s of 16-bit mono left
    assert load_error(root, valid_case_dict()) == prefix(root, "turns[0].duration_s") + (
        f"3.2 s but {wav(root)} lasts 1.0000 s ({SAMPLE_RATE} frames at {SAMPLE_RATE} Hz; tolerance 0.02 s)"
    )


def test_shared_audio_is_decoded_once_per_load(root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import fdeval.cases.schema as schema

    for cid in ("a__listen", "b__listen"):  # two cases of one conversation share its turn audio
        d = valid_case_dict()
        d.update(
            test_case_id=cid, policy_name="listen", judge_policies=["listen"], judge_instructions={}
        )
        (root / "cases" / f"{cid}.json").write_text(json.dumps(d))
    scanned: list[Path] = []
    real = schema.scan_audio
    monkeypatch.setattr(schema, "scan_audio", lambda p: scanned.append(p) or real(p))
    assert len(load_cases(root / "cases", root, InstructFDCase)) == 2
    assert sorted(p.name for p in scanned) == ["turn1.wav", "turn2_interrupt.wav"]


# -- the cases folder -----------------------------------------------------------------------------
def test_empty_cases_folder(root: Path) -> None:
    (root / "cases" / ".hidden_temporary.json").write_text(
        "{}"
    )  # ignored, like atomic-write leftovers
    with pytest.raises(CaseError) as info:
        load_cases(root / "cases", root, InstructFDCase)
    assert (
        str(info.value)
        == f"{root / 'cases'}: case ?: field '<dir>': no case files (*.json) in this folder"
    )


def test_empty_cases_folder_through_the_benchmark(root: Path) -> None:
    with pytest.raises(CaseError) as info:
        InstructFD(cases_dir=str(root)).load(root / "unused")
    assert (
        str(info.value)
        == f"{root / 'cases'}: case ?: field '<dir>': no case files (*.json) in this folder"
    )


# -- verdict and transcript files -----------------------------------------------------------------
VERDICT = {
    "case_id": CASE_ID,
    "policy": "backchannel",
    "verdict": "adhere",
    "reasoning": "ok",
    "judge": "rules",
    "judge_version": "1",
    "prompt_hash": "abc",
    "checks": {"x": True},
}


@pytest.mark.parametrize(
    "content,field,message",
    [
        ("[1]", "<root>", "expected an object, got list"),
        (json.dumps({**VERDICT, "verdict": 1}), "verdict", "expected a string, got 1"),
        (
            json.dumps({**VERDICT, "checks": [1]}),
            "checks",
            "expected an object of name -> true/false, got [1]",
        ),
        (
            json.dumps({**VERDICT, "checks": {"x": "yes"}}),
            "checks.x",
            "expected true or false, got 'yes'",
        ),
        (
            json.dumps(VERDICT).replace('"rules"', "9" * 5000),
            "judge",
            "expected a string, got <integer with 5000 digits>",
        ),
        (
            '{"case_id": "' + CASE_ID + '", "verdict": ',
            "<json>",
            "invalid JSON at line 1 column 46: Expecting value",
        ),
        (b"\xff{}", "<file>", "not valid UTF-8: byte 0 (line 1) is b'\\xff'"),
        ("", "<json>", "invalid JSON at line 1 column 1: Expecting value"),
    ],
)
def test_bad_verdict_file(tmp_path: Path, content: str | bytes, field: str, message: str) -> None:
    f = tmp_path / f"{CASE_ID}@backchannel.json"
    f.write_bytes(content.encode() if isinstance(content, str) else content)
    with pytest.raises(VerdictError) as info:
        load_verdict(f)
    case = f"case {CASE_ID!r}" if field not in ("<root>", "<json>", "<file>") else "case ?"
    assert str(info.value) == f"{f}: {case}: field {field!r}: {message}"


def test_verdict_of_another_pair(tmp_path: Path) -> None:
    f = tmp_path / "other__listen@listen.json"
    f.write_text(json.dumps(VERDICT))
    assert load_verdict(f).verdict == "adhere"
    with pytest.raises(VerdictError) as info:
        load_verdict(f, "other__listen", "listen")
    assert (
        str(info.value)
        == f"{f}: case {CASE_ID!r}: field 'case_id': {CASE_ID!r} but this file is for 'other__listen'"
    )


@pytest.mark.parametrize(
    "content,field,message",
    [
        (
            '{"format": "fdeval.transcript", "format_vers',
            "<json>",
            "invalid JSON at line 1 column 33: Unterminated string starting at",
        ),
        (
            b'{"format": "fdeval.transcript\xc3"}',
            "<file>",
            "not valid UTF-8: byte 29 (line 1) is b'\\xc3'",
        ),
        ("[" * 100_000, "<json>", "nested too deeply to parse"),
    ],
)
def test_corrupt_transcript_file(
    tmp_path: Path, content: str | bytes, field: str, message: str
) -> None:
    f = tmp_path / f"{CASE_ID}.json"
    f.write_bytes(content.encode() if isinstance(content, str) else content)
    with pytest.raises(TranscriptError) as info:
        load_transcript(f)
    assert str(info.value) == f"{f}: case ?: field {field!r}: {message}"


def test_transcript_time_out_of_range(tmp_path: Path) -> None:
    f = tmp_path / "t.json"
    f.write_text(
        '{"format": "fdeval.transcript", "format_version": 1, "case_id": "c", "duration_s": '
        f'{10**400}, "user_turns": [], "words": []}}'
    )
    with pytest.raises(TranscriptError) as info:
        load_transcript(f)
    assert str(info.value) == (
        f"{f}: case 'c': field 'duration_s': expected a finite number of seconds >= 0, "
        "got <integer with 401 digits>"
    )


# -- end to end: `python -m fdeval.launch benchmark.cases_dir=...` -------------------------------
def launch(tmp: Path, cases_dir: Path) -> subprocess.CompletedProcess:
    return run_launch(
        [f"out_root={tmp / 'outputs'}", "progress=false", f"benchmark.cases_dir={cases_dir}"],
        tmp,
        timeout_s=900,
    )


def _bad_json(root: Path) -> str:
    write_text_case(
        root, json.dumps(valid_case_dict()).replace('"seed": 3', '"seed": ' + "7" * 5000, 1)
    )
    return prefix(root, "seed") + "integer with 5000 digits is out of range (64-bit integers only)"


def _bad_id(root: Path) -> str:
    d = valid_case_dict()
    d["test_case_id"] = "evil\n"
    write_text_case(root, json.dumps(d))
    return prefix(root, "test_case_id", "evil\n") + (
        "'evil\\n' is not a valid id (letters, digits, '.', '_', '-'; no leading punctuation)"
    )


def _zero_frame_audio(root: Path) -> str:
    write_text_case(root, json.dumps(valid_case_dict()))
    sf.write(wav(root, "turn2_interrupt"), np.zeros(0, np.float32), SAMPLE_RATE)
    return (
        prefix(root, "turns[1].audio_path")
        + f"{wav(root, 'turn2_interrupt')}: has 0 frames (no audio)"
    )


def _long_audio(root: Path) -> str:
    write_text_case(root, json.dumps(valid_case_dict()))
    sf.write(wav(root), np.full(5 * SAMPLE_RATE, 0.1, np.float32), SAMPLE_RATE)
    return prefix(root, "turns[0].duration_s") + (
        f"3.2 s but {wav(root)} lasts 5.0000 s ({5 * SAMPLE_RATE} frames at {SAMPLE_RATE} Hz; tolerance 0.02 s)"
    )


def _empty_folder(root: Path) -> str:
    return f"{root / 'cases'}: case ?: field '<dir>': no case files (*.json) in this folder"


@pytest.mark.parametrize(
    "make_bad",
    [_bad_json, _bad_id, _zero_frame_audio, _long_audio, _empty_folder],
    ids=["case_json", "case_id", "audio_empty", "audio_length", "empty_folder"],
)
def test_launch_fails_at_load_with_one_line(
    root: Path, tmp_path_factory: pytest.TempPathFactory, make_bad
) -> None:
    expected = make_bad(root)
    tmp = tmp_path_factory.mktemp("launch")
    proc = launch(tmp, root)
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr
    assert proc.stderr.strip().splitlines() == [f"fdeval: error: {expected}"]
    written = (
        [p for p in (tmp / "outputs").rglob("*") if p.is_file()]
        if (tmp / "outputs").exists()
        else []
    )
    assert not [p for p in written if "sessions" in p.parts or p.suffix in (".h5", ".wav")], written


def test_launch_control_and_nothing_written_is_lost(
    root: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """The unmodified folder runs and records its session (so the checks above can fail); once its
    audio breaks, the relaunch stops at load and leaves every file of the first run as it was."""
    write_text_case(root, json.dumps(valid_case_dict()))
    tmp = tmp_path_factory.mktemp("launch")
    first = launch(tmp, root)
    assert first.returncode == 0, first.stderr
    out = tmp / "outputs"
    assert [p.name for p in out.rglob("*.h5")] == [f"{CASE_ID}.h5"]

    def snapshot() -> dict[str, int]:
        return {
            str(p.relative_to(out)): p.stat().st_mtime_ns
            for p in out.rglob("*")
            if p.is_file()
            and ".hydra" not in p.parts
            and p.suffix not in (".log", ".lock")
            and p.name != ".lock"
        }

    before = snapshot()
    sf.write(wav(root), np.zeros(0, np.float32), SAMPLE_RATE)
    again = launch(tmp, root)
    assert again.returncode == 2 and "Traceback" not in again.stderr
    assert again.stderr.strip().splitlines() == [
        f"fdeval: error: {prefix(root, 'turns[0].audio_path')}{wav(root)}: has 0 frames (no audio)"
    ]
    assert snapshot() == before
