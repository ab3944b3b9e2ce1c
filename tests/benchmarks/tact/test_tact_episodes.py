"""TACT episode format: round trip, strict validation with one-line errors, profile renderings."""

from __future__ import annotations

import json
import math
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from fdeval.audio.io import write_wav
from fdeval.benchmarks.tact.episodes import (
    PROFILE_FEATURES,
    Annotations,
    Episode,
    EpisodeError,
    HistoryLine,
    HumanContinuation,
    ReplayTurn,
    SpeakerProfile,
    episode_from_dict,
    episode_to_dict,
    load_episode,
    load_episodes,
    profile_features,
    render_synopsis,
    write_episode,
)
from fdeval.models.reference import parse_policy

SR = 16000


def profile(**kw) -> SpeakerProfile:
    base = dict(
        evidence_min=12.5,
        fto_median_s=0.2,
        fto_p10_s=-0.1,
        fto_p90_s=0.7,
        pause_median_s=0.4,
        pause_p90_s=0.9,
        abstention_tolerance_s=1.5,
        backchannel_solicitation_per_min=4.0,
        backchannel_production_per_min=6.0,
        articulation_rate_syl_s=4.5,
        floor_holding_per_min={"filled_pause": 2.0, "trailing_conjunction": 1.0},
    )
    return SpeakerProfile(**{**base, **kw})


def make_episode(root: Path, eid: str = "ep1", context_s: float = 2.0) -> Episode:
    n = int(context_s * SR)
    t = np.arange(n) / SR
    focal = (0.3 * np.sin(2 * np.pi * 220 * t) * (t > 0.5)).astype(np.float32)
    write_wav(root / "audio" / f"{eid}.wav", np.stack([focal, np.zeros(n, np.float32)], axis=1), SR)
    write_wav(root / "audio" / f"{eid}.turn0.wav", focal, SR)
    ann = Annotations(
        ("ans", "ans", "ref"),
        (0.0, 0.1, 0.4),
        (((0.0, 0.8),), ((-0.1, 1.0),), ()),
        ((-1.2, 0.0), (0.0,), ()),
    )
    return Episode(
        eid,
        "test",
        "smooth_turn_taking",
        f"audio/{eid}.wav",
        0,
        SR,
        context_s,
        (ReplayTurn("take-turn", f"audio/{eid}.turn0.wav", -context_s, 0.0),),
        ((-1.5, 0.0),),
        (
            HistoryLine("other", "How are you?", -4.0, -3.0),
            HistoryLine("focal", "Fine, and you?", -1.5, 0.0),
        ),
        "spk1",
        profile(),
        ann,
        {
            "gender": "f",
            "age_band": "30-49",
            "l1_region": "north_america",
            "snr": "high",
            "rate_tercile": "mid",
        },
        "smooth_turn_taking",
        "test",
        None,
        HumanContinuation(0.25, 1.5),
        {"note": "hand-made"},
    )


def test_round_trip(tmp_path):
    e = make_episode(tmp_path)
    path = write_episode(e, tmp_path)
    assert path == tmp_path / "episodes" / "ep1.json"
    back = load_episode(path, tmp_path)
    assert back == e and back.slices == e.slices and back.meta == e.meta
    assert episode_to_dict(back) == json.loads(path.read_text())
    assert load_episodes(tmp_path) == [e]


@pytest.mark.parametrize(
    "edit, field, message",
    [
        (lambda d: d.pop("category"), "category", "missing required field"),
        (lambda d: d.update(category="chitchat"), "category", "invalid value 'chitchat'"),
        (lambda d: d.update(colour="red"), "colour", "unknown key 'colour'"),
        (
            lambda d: d["annotations"]["labels"].__setitem__(1, "yes"),
            "annotations.labels[1]",
            "invalid value 'yes'",
        ),
        (
            lambda d: d["annotations"]["silence_acceptability"].pop(),
            "annotations.silence_acceptability",
            "has 2 entries but there are 3 labels",
        ),
        (
            lambda d: d["annotations"]["silence_acceptability"].__setitem__(0, 1.5),
            "annotations.silence_acceptability[0]",
            "must be <= 1",
        ),
        (
            lambda d: d["annotations"]["onset_windows"][0].__setitem__(0, [0.5, 0.2]),
            "annotations.onset_windows[0][0]",
            "is not after start",
        ),
        (
            lambda d: d["annotations"]["onset_windows"][0].__setitem__(0, [0.0, 6.0]),
            "annotations.onset_windows[0][0][1]",
            "outside [-2, 5]",
        ),
        (
            lambda d: d["annotations"]["completion_marks"][0].__setitem__(0, -3.0),
            "annotations.completion_marks[0][0]",
            "outside [-2, 0]",
        ),
        (
            lambda d: d["replay"][0].update(end_s=-0.5),
            "replay[0].audio_path",
            "but the piece spans 1.5000 s",
        ),
        (
            lambda d: (
                d["replay"].append(
                    {
                        **d["replay"][0],
                        "kind": "barge-in",
                        "start_s": -0.5,
                        "end_s": -0.2,
                        "barge_in_after_s": 1.0,
                    }
                )
                or d["replay"][0].update(end_s=-0.5)
            ),
            "replay[0].audio_path",
            "spans 1.5000 s",
        ),
        (
            lambda d: d["replay"][0].update(kind="barge-in", barge_in_after_s=1.0),
            "replay[0].kind",
            "must be a take-turn",
        ),
        (lambda d: d["audio"].update(context_s=3.0), "audio.context_s", "the file lasts 2.0000 s"),
        (
            lambda d: d["audio"].update(path="audio/missing.wav"),
            "audio.path",
            "audio file not found",
        ),
        (lambda d: d["audio"].update(path="../x.wav"), "audio.path", "inside the data root"),
        (lambda d: d["slices"].pop("snr"), "slices.snr", "missing required slice"),
        (lambda d: d.update(judge_logits=[0.0] * 5), "judge_logits", "needs 6 values"),
        (
            lambda d: d["profile"]["fto_s"].update(median="fast"),
            "profile.fto_s.median",
            "expected a number",
        ),
        (
            lambda d: d["human_continuation"].update(onset_s=None),
            "human_continuation.duration_s",
            "both null",
        ),
        (lambda d: d["history"].reverse(), "history[1].start_s", "in order of their start times"),
        (lambda d: d.update(schema_version=2), "schema_version", "unsupported schema version 2"),
    ],
)
def test_validation_errors_name_file_episode_and_field(tmp_path, edit, field, message):
    e = make_episode(tmp_path)
    d = episode_to_dict(e)
    edit(d)
    path = tmp_path / "episodes" / "ep1.json"
    with pytest.raises(EpisodeError) as err:
        episode_from_dict(d, path, tmp_path)
    text = str(err.value)
    assert "\n" not in text and text.startswith(f"{path}: episode 'ep1': field '{field}': "), text
    assert message in text, text


def test_structure_errors_without_audio_lookup(tmp_path):
    d = episode_to_dict(make_episode(tmp_path))
    d["replay"][0]["end_s"] = -0.5
    with pytest.raises(
        EpisodeError,
        match=r"field 'replay\[0\].end_s': the last piece must end at the decision point",
    ):
        episode_from_dict(d, "ep1.json", None)
    d["replay"][0]["end_s"] = 0.0
    d["replay"].append(
        {"kind": "barge-in", "audio_path": "audio/b.wav", "start_s": -1.0, "end_s": 0.0}
    )
    with pytest.raises(
        EpisodeError, match=r"field 'replay\[1\].start_s': -1 is before the previous piece ends"
    ):
        episode_from_dict(d, "ep1.json", None)
    d["replay"][0]["end_s"] = -1.0
    with pytest.raises(
        EpisodeError, match=r"field 'replay\[1\].barge_in_after_s': required for a barge-in"
    ):
        episode_from_dict(d, "ep1.json", None)


def test_file_level_errors(tmp_path):
    (tmp_path / "episodes").mkdir()
    bad = tmp_path / "episodes" / "x.json"
    bad.write_text("{not json")
    with pytest.raises(
        EpisodeError, match=r"x.json: episode \?: field '<json>': invalid JSON at line 1"
    ):
        load_episodes(tmp_path)
    e = make_episode(tmp_path, "other")
    bad.write_text(json.dumps(episode_to_dict(e)))
    with pytest.raises(EpisodeError, match="does not match the file name 'x.json'"):
        load_episodes(tmp_path)


def test_profile_renderings():
    p = profile()
    f = profile_features(p)
    assert list(f) == list(PROFILE_FEATURES) and f["fto_median_s"] == 0.2
    assert f["floor_holding_filled_pause_per_min"] == 2.0
    s = render_synopsis(p)
    for piece in (
        "12.5 minutes",
        "+0.20 s",
        "0.40 s inside their own turns",
        "4.0 times per minute",
        "4.5 syllables per second",
        "filled pauses",
    ):
        assert piece in s, s
    sparse = profile(
        fto_median_s=None,
        fto_p10_s=None,
        fto_p90_s=None,
        articulation_rate_syl_s=None,
        floor_holding_per_min={"filled_pause": None},
    )
    assert math.isnan(profile_features(sparse)["articulation_rate_syl_s"])
    s2 = render_synopsis(sparse)
    assert "take the floor" not in s2 and "syllables" not in s2 and "Devices" not in s2


@pytest.mark.parametrize(
    "kw",
    [
        {},
        {"backchannel_solicitation_per_min": 9.0},
        {"pause_median_s": 1.8},
        {"fto_median_s": -0.3, "fto_p10_s": -0.6},
    ],
)
def test_synopsis_never_switches_the_reference_agents_policy(kw):
    """The agent reads keywords as instructions; a profile must stay context, not a command."""
    assert parse_policy(render_synopsis(profile(**kw))) == "default"


def test_write_validates_before_writing(tmp_path):
    e = replace(make_episode(tmp_path), category="bogus")
    with pytest.raises(EpisodeError, match="field 'category'"):
        write_episode(e, tmp_path)
    assert not (tmp_path / "episodes" / "ep1.json").exists()
