"""Fixtures of the case-loading tests."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers.case_data import valid_case_dict, write_turn_audio


@pytest.fixture
def root(tmp_path: Path) -> Path:
    """A dataset root with an empty cases/ folder and real turn audio for the valid case (3.2 s and
    1.0 s, mono 16 kHz)."""
    write_turn_audio(tmp_path, valid_case_dict())
    (tmp_path / "cases").mkdir()
    return tmp_path
