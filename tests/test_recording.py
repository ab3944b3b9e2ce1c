"""fdeval.recording, the one owner of the session files: every table and attribute round-trips
through its typed records; a session written by the code before it (tests/helpers/legacy_recorder.py,
a verbatim copy) is byte-identical to one written now and reads back to the same values; a real
run's sessions read the same through h5py alone and through the typed records."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import math
from pathlib import Path

import h5py
import numpy as np
import pytest
import soundfile as sf
from helpers import legacy_recorder

from fdeval import recording
from fdeval.orchestrator import recorder
from fdeval.orchestrator.clock import LockstepClock
from fdeval.orchestrator.session import OrchestratorConfig, run_session
from fdeval.recording import (
    TABLES,
    CorruptSession,
    Event,
    Flush,
    Health,
    ModelChunk,
    ModelText,
    Session,
    SessionFormatError,
    SessionInfo,
    Turn,
    UserFrame,
    VadSegment,
    check_session,
    read_info,
    read_session,
    write_session,
)

NAN = math.nan
CID, SID = "case_ü", "0123abcd"


def plain(x):
    """`x` as comparable plain data: records as dicts, NaN as a marker (NaN != NaN)."""
    if dataclasses.is_dataclass(x) and not isinstance(x, type):
        return {f.name: plain(getattr(x, f.name)) for f in dataclasses.fields(x)}
    if isinstance(x, dict):
        return {k: plain(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [plain(v) for v in x]
    if isinstance(x, float) and math.isnan(x):
        return "NaN"
    return x


def a_session(n_samples: int, turn_config: object) -> Session:
    """A session with rows in every table, NaNs, non-ASCII text, every kind of attribute."""
    health = Health(
        valid=False,
        invalid_reason="pacing lag 0.31 s over the 0.25 s bound",
        pacing_lag_max_s=0.31,
        model_lag_max_s=NAN,
        model_first_audio_s=0.42,
        model_audio_s=3.5,
        frames_sent=187,
        realtime_factor=1.02,
    )
    attrs = {
        "session_id": SID,
        "run_id": "r1",
        "model_id": "reference:1",
        "case_digest": "d1",
        "end_reason": "behind_real_time",
        "wall_s": 6.1,
        "recording_attempt": 2,
        "text_stream": "pieces",
        "oracle_user_text": True,
        "seed": 7,
        "turn_config": turn_config,
        **health.to_attrs(),
    }
    info = SessionInfo(CID, 16000, 0.032, "realtime", 6.0, n_samples, attrs)
    ids = (CID, SID)
    return Session(
        info,
        events=(
            Event(*ids, 0.0, "session_start", -1, ""),
            Event(*ids, 2.5, "playback_flush", 1, "n_dropped=3 played_ms=it1:250 it2:0.5"),
            Event(*ids, 6.0, "session_end", -1, "naïve ✓"),
        ),
        user_frames=(UserFrame(*ids, 0.0, 0.0004, 512, -1), UserFrame(*ids, 0.032, 0.0321, 512, 0)),
        model_chunks=(ModelChunk(*ids, 1.0, 1.1, 4800), ModelChunk(*ids, 1.5, 1.4, 1600)),
        model_text=(
            ModelText(*ids, 1.0, 1.1, NAN, " Hello", False),
            ModelText(*ids, 1.5, 1.6, 0.2, " wörld", True),
        ),
        vad_segments=(VadSegment(*ids, 1.12, 2.4),),
        flushes=(Flush(*ids, 2.5, 3),),
        turns=(
            Turn(
                *ids,
                0,
                "turn0",
                "take-turn",
                "",
                0.0,
                0.0,
                0.0,
                0.0,
                1.0,
                False,
                NAN,
                NAN,
                "silence",
                16000,
            ),
            Turn(
                *ids,
                1,
                "turn1",
                "barge-in",
                "interrupt",
                2.0,
                2.016,
                2.0163,
                0.0163,
                2.5,
                True,
                1.12,
                0.88,
                "onset",
                7000,
            ),
            Turn(
                *ids,
                2,
                "turn2",
                "take-turn",
                "",
                NAN,
                NAN,
                NAN,
                NAN,
                NAN,
                False,
                NAN,
                NAN,
                "timeout",
                0,
            ),
        ),
        policy_record={"said": {"1": {"message": "ça va?"}}, "n": [1, 2.5, None]},
    )


def test_every_table_and_attribute_round_trips_through_the_typed_records(tmp_path):
    rng = np.random.default_rng(0)
    user, model = (rng.uniform(-0.5, 0.5, 8000).astype(np.float32) for _ in range(2))
    config = {"silence_s": 1.5, "barge_in_delay_s": None}
    s = a_session(8000, config)
    wav, h5 = tmp_path / "s.wav", tmp_path / "s.h5"
    write_session(s, user, model, wav, h5)
    back = read_session(h5)
    # a JSON attribute is stored as its string (sorted keys) and parsed by info.json
    assert back.info.attrs["turn_config"] == json.dumps(config, sort_keys=True)
    assert back.info.json("turn_config") == config and back.info.json("absent", {}) == {}
    expected = dataclasses.replace(
        s,
        info=dataclasses.replace(
            s.info, attrs={**s.info.attrs, "turn_config": json.dumps(config, sort_keys=True)}
        ),
    )
    assert plain(back) == plain(expected)
    for name in TABLES:  # every table had rows, and each row names its session
        rows = getattr(back, name)
        assert rows and {(r.case_id, r.session_id) for r in rows} == {(CID, SID)}, name
    # types as declared (ints, floats, bools, strings: never numpy scalars or bytes)
    t = back.turns[1]
    assert (
        type(t.index),
        type(t.label),
        type(t.start_s),
        type(t.cut_short),
        type(t.n_samples_played),
    ) == (int, str, float, bool, int)
    assert (
        type(back.info.sample_rate_hz) is int and type(back.info.attrs["oracle_user_text"]) is bool
    )
    # the typed views of the attributes
    info = back.info
    assert (info.case_id, info.session_id, info.run_id, info.model_id, info.case_digest) == (
        CID,
        SID,
        "r1",
        "reference:1",
        "d1",
    )
    assert (info.sample_rate_hz, info.frame_s, info.clock, info.duration_s, info.n_samples) == (
        16000,
        0.032,
        "realtime",
        6.0,
        8000,
    )
    assert (info.end_reason, info.text_stream, info.recording_attempt, info.valid) == (
        "behind_real_time",
        "pieces",
        2,
        False,
    )
    assert plain(info.health) == plain(
        Health(False, "pacing lag 0.31 s over the 0.25 s bound", 0.31, NAN, 0.42, 3.5, 187, 1.02)
    )
    assert info.get("sample_rate") == 16000 and info.all_attrs()["n_samples"] == 8000
    assert (
        back.events[1].played_ms() == {"it1": 250.0, "it2": 0.5}
        and back.events[0].played_ms() == {}
    )
    assert back.turns[1].played and not back.turns[2].played
    assert back.user_frames[0].pacing_error_s == pytest.approx(0.0004)
    # the attributes alone, and the check of a whole pair, give the same record
    assert plain(read_info(h5)) == plain(info) == plain(check_session(h5, wav))
    # the WAV: stereo 16-bit at the log's rate, ch0 the user, ch1 the model
    x, sr = sf.read(wav, dtype="float32")
    assert sr == 16000 and x.shape == (8000, 2) and sf.info(str(wav)).subtype == "PCM_16"
    assert np.allclose(x[:, 0], user, atol=1 / 32767) and np.allclose(
        x[:, 1], model, atol=1 / 32767
    )
    # readable with h5py alone, under the names docs/recording.md gives
    with h5py.File(h5, "r") as f:
        assert sorted(f) == sorted([*TABLES, "user_policy_record"])
        assert f.attrs["sample_rate"] == 16000 and f.attrs["schema_version"] == "3"
        assert list(f["turns"].dtype.names) == list(recording.columns("turns"))


def test_a_session_without_rows_or_record_round_trips(tmp_path):
    info = SessionInfo("empty", 24000, 0.08, "lockstep", 0.5, 100, {"session_id": "s0"})
    s = Session(info)
    x = np.zeros(100, np.float32)
    write_session(
        s, x, np.zeros(120, np.float32), tmp_path / "e.wav", tmp_path / "e.h5"
    )  # the longer channel is cut
    back = read_session(tmp_path / "e.h5")
    assert back == s and back.policy_record is None and back.info.health == Health()
    assert recorder.read_session_log(tmp_path / "e.h5") == {
        "attrs": info.all_attrs(),
        **{t: [] for t in TABLES},
    }


def test_only_the_tables_asked_for_are_read(tmp_path):
    s = a_session(10, "{}")
    write_session(s, np.zeros(10), np.zeros(10), tmp_path / "s.wav", tmp_path / "s.h5")
    back = read_session(tmp_path / "s.h5", tables=("turns",))
    assert len(back.turns) == 3 and back.user_frames == () and back.events == ()
    assert back.as_dict(("turns",)).keys() == {"attrs", "turns", "user_policy_record"}
    with pytest.raises(ValueError, match="no session table 'frames'"):
        read_session(tmp_path / "s.h5", tables=("frames",))


def test_what_cannot_be_written_or_read_is_one_line(tmp_path):
    s = a_session(10, "{}")
    with pytest.raises(ValueError, match="n_samples 10, the channels hold 8 samples"):
        write_session(s, np.zeros(8), np.zeros(9), tmp_path / "a.wav", tmp_path / "a.h5")
    bad = dataclasses.replace(
        s, info=dataclasses.replace(s.info, attrs={**s.info.attrs, "clock": "x"})
    )
    with pytest.raises(ValueError, match="attribute 'clock' is a SessionInfo field"):
        write_session(bad, np.zeros(10), np.zeros(10), tmp_path / "a.wav", tmp_path / "a.h5")
    with pytest.raises(TypeError, match="a row of Flush, expected Event"):
        write_session(
            dataclasses.replace(s, events=s.flushes),
            np.zeros(10),
            np.zeros(10),
            tmp_path / "a.wav",
            tmp_path / "a.h5",
        )
    with pytest.raises(TypeError, match="samples must be floats"):
        write_session(
            s, np.zeros(10, np.int16), np.zeros(10, np.int16), tmp_path / "a.wav", tmp_path / "a.h5"
        )
    write_session(s, np.zeros(10), np.zeros(10), tmp_path / "s.wav", tmp_path / "s.h5")
    with h5py.File(tmp_path / "s.h5", "r+") as f:  # a schema-2 log: no delay_s column
        rows = f["turns"][()]
        del f["turns"]
        f.create_dataset("turns", data=rows[[n for n in rows.dtype.names if n != "delay_s"]])
        f.attrs["schema_version"] = "2"
    with pytest.raises(
        SessionFormatError,
        match=r"s\.h5: table 'turns' has no column 'delay_s' \(schema version 2; this fdeval reads 3\)",
    ):
        read_session(tmp_path / "s.h5")
    with pytest.raises(CorruptSession, match="schema version 2, this fdeval writes 3"):
        check_session(tmp_path / "s.h5", tmp_path / "s.wav")
    with h5py.File(tmp_path / "x.h5", "w") as f:
        f.attrs["case_id"] = "x"
    with pytest.raises(SessionFormatError, match="x.h5: no attribute 'schema_version'"):
        read_info(tmp_path / "x.h5")


@pytest.fixture(scope="module")
def live_session(responsive_case, agent, vad):
    """A real lockstep session (the reference agent, espeak-ng turns, Silero VAD), with a user
    policy record added so every dataset is written."""
    case, audio = responsive_case
    attrs = {
        "session_id": SID,
        "run_id": "r1",
        "model": {"name": "reference"},
        "session_step": "run",
    }
    res = asyncio.run(
        run_session(
            case, audio, agent, OrchestratorConfig(), LockstepClock(), vad, seed=1, attrs=attrs
        )
    )
    res.log.policy_record = {"said": {"1": {"message": "hello ü"}}}
    return res


def test_a_session_is_written_byte_for_byte_as_before_and_reads_the_same(live_session, tmp_path):
    res, log = live_session, live_session.log
    legacy_recorder.write_session(
        log, res.user, res.model, tmp_path / "old.wav", tmp_path / "old.h5"
    )
    recorder.write_session(log, res.user, res.model, tmp_path / "new.wav", tmp_path / "new.h5")
    assert (tmp_path / "new.h5").read_bytes() == (tmp_path / "old.h5").read_bytes()
    assert (tmp_path / "new.wav").read_bytes() == (tmp_path / "old.wav").read_bytes()
    old = legacy_recorder.read_session_log(tmp_path / "old.h5")
    s = read_session(tmp_path / "old.h5")
    assert plain(s.as_dict()) == plain(old) == plain(recorder.read_session_log(tmp_path / "old.h5"))
    assert plain(recorder.check_session(tmp_path / "old.h5", tmp_path / "old.wav")) == plain(
        s.info.all_attrs()
    )
    # the typed rows are the session's own observations
    assert log.turns and log.model_text and log.vad_segments and log.events and log.user_frames
    assert plain([[getattr(t, c) for c in recording.columns("turns")] for t in s.turns]) == plain(
        [[t[c] for c in recording.columns("turns")] for t in log.turns]
    )
    assert [(e.t_s, e.kind, e.turn, e.detail) for e in s.events] == [tuple(e) for e in log.events]
    assert [(f.t_nominal_s, f.t_sent_s, f.n_samples, f.turn) for f in s.user_frames] == [
        tuple(f) for f in log.user_frames
    ]
    assert plain(
        [[m.arrival_s, m.play_s, m.duration_s, m.text, m.dropped] for m in s.model_text]
    ) == plain(log.model_text)
    assert [(v.start_s, v.end_s) for v in s.vad_segments] == [tuple(v) for v in log.vad_segments]
    assert s.info.end_reason == log.attrs["end_reason"] and s.info.n_samples == len(res.user)
    assert (
        plain(s.info.health) == plain(Health.from_attrs(log.attrs))
        and s.policy_record == log.policy_record
    )


def test_a_real_runs_sessions_read_the_same_through_h5py_alone(two_case_run):
    """Every session of a launch reads to the same values through the old h5py reader and the
    typed records (and the engine counts each as done through check_session)."""
    _, run = two_case_run
    logs = sorted((run / "sessions").glob("*.h5"))
    assert len(logs) == 2
    for h5 in logs:
        old = legacy_recorder.read_session_log(h5)
        s = read_session(h5)
        assert plain(s.as_dict()) == plain(old)
        assert s.case_id == h5.stem and s.session_id == old["attrs"]["session_id"] and s.turns
        assert all(r.session_id == s.session_id for name in TABLES for r in getattr(s, name))
        assert plain(check_session(h5, h5.with_suffix(".wav"))) == plain(s.info)


def test_only_fdeval_recording_imports_h5py():
    """The wall .importlinter keeps (`h5py` contract), seen from the source: no other file of the
    package names h5py in an import (tests/test_import_walls.py plants one to show it is caught)."""
    root = Path(recording.__file__).parent
    found = [
        str(p.relative_to(root))
        for p in root.rglob("*.py")
        if any(
            line.strip().startswith(("import h5py", "from h5py"))
            for line in p.read_text(encoding="utf-8").splitlines()
        )
    ]
    assert found == ["recording.py"]
