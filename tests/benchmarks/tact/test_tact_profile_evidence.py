"""Profile evidence from separate recordings (or from either side of an episode's excluded span)
is never paired across the gap between them (issue 27, item 3).

The importer's audio and VAD are replaced by given speech segments, so these tests need neither
espeak-ng nor Silero: the WAV files are silent and only fix each recording's length.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from helpers.tact_given_audio import import_given

from fdeval.benchmarks.tact.episodes import render_synopsis
from fdeval.benchmarks.tact.profiles import profile_from_pieces, profile_from_tracks


def _row(eid: str, audio: str, decision_s: float, context_s: float) -> dict:
    return {
        "episode_id": eid,
        "audio": audio,
        "focal_channel": 0,
        "decision_s": decision_s,
        "context_s": context_s,
        "category": "smooth_turn_taking",
        "speaker": {"id": "A", "gender": "m", "age_band": "30-49", "l1_region": "north_america"},
        "labels": ["ans", "ans", "ans"],
        "silence_acceptability": [0.0, 0.1, 0.0],
        "onset_windows": [[], [], []],
        "completion_marks": [[], [], []],
    }


def _import(
    tmp_path: Path, monkeypatch, files: dict[str, tuple[float, list, list]], rows: list[dict]
):
    """Import `rows` over silent stereo files whose (focal ch0, other ch1) speech is given."""
    return import_given(tmp_path, monkeypatch, files, rows)[0]


def test_no_floor_transfer_offset_across_two_files_of_one_speaker(tmp_path, monkeypatch):
    # call1 ends with the other speaker's turn (25-28 s); call2 opens with A's turn at 1.008 s.
    # Laid end to end 60 s apart, they once made an FTO of (30 + 60 + 1.008) - 28 = 63.008 s.
    files = {
        "call1.wav": (30.0, [(3.0, 6.0)], [(25.0, 28.0)]),
        "call2.wav": (20.0, [(1.008, 4.0)], []),
    }
    eps = _import(
        tmp_path,
        monkeypatch,
        files,
        [_row("c1", "call1.wav", 6.0, 4.0), _row("c2", "call2.wav", 12.0, 2.0)],
    )
    p = eps["c1"].profile
    assert (
        p.fto_median_s is None and p.fto_p90_s is None
    )  # no turn of A follows one of the other in a file
    assert "63.01" not in render_synopsis(p) and "take the floor" not in render_synopsis(p)
    assert p.evidence_min == pytest.approx(
        (30.0 - 9.0 + 20.0) / 60.0, abs=0.005
    )  # written to 2 decimals


def test_no_pairing_across_the_episode_span_and_real_pairs_still_count(tmp_path, monkeypatch):
    # c1's own span [5, 11] is cut out of call1: the other's turn ends at 1.5 s and A's next turn
    # starts at 12.0 s, a 10.5 s "offset" across the hole. c2's span [15, 21] is cut out of call2:
    # A stops at 14.5 s and goes on at 22.0 s, a 7.5 s "silence" across that hole.
    files = {
        "call1.wav": (30.0, [(0.0, 0.15), (5.5, 6.0), (12.0, 14.0)], [(0.2, 1.5)]),
        "call2.wav": (30.0, [(8.4, 9.5), (13.0, 14.5), (22.0, 23.0)], [(6.0, 8.0)]),
    }
    eps = _import(
        tmp_path,
        monkeypatch,
        files,
        [_row("c1", "call1.wav", 6.0, 1.0), _row("c2", "call2.wav", 16.0, 1.0)],
    )
    p1, p2 = eps["c1"].profile, eps["c2"].profile
    # c1: only call2's real 0.4 s offset (the other stops at 8.0 s, A starts at 8.4 s)
    assert (p1.fto_median_s, p1.fto_p10_s, p1.fto_p90_s) == pytest.approx((0.4, 0.4, 0.4))
    # c2: the silences A sat out are call1's 6.0 s and call2's 3.5 s, not the 7.5 s across the hole
    assert p2.abstention_tolerance_s == pytest.approx(float(np.quantile([6.0, 3.5], 0.9)))
    assert p2.fto_median_s == pytest.approx(0.4)


def test_pieces_pool_like_separate_recordings():
    # Each piece on its own clock; the same times in both pieces must not interact.
    a = ([(1.0, 3.0), (3.5, 5.0)], [(5.2, 7.0)])  # F pauses 0.5 s; O answers 0.2 s after F
    b = ([(2.3, 4.0)], [(0.5, 2.0)])  # F takes the floor 0.3 s after O
    p = profile_from_pieces([(*a, 10.0, None), (*b, 10.0, None)])
    assert p.fto_median_s == pytest.approx(0.3)  # O's turn in a (ends 7.0) never precedes F in b
    assert p.pause_median_s == pytest.approx(0.5)
    assert p.evidence_min == pytest.approx(20.0 / 60.0)
    # one piece is exactly the old single-track call
    one = profile_from_tracks(*a, 10.0)
    assert one == profile_from_pieces([(*a, 10.0, None)])
