"""Fixtures shared by the Moshi tests (imported by them; not a pytest conftest).

`moshi_python`: the moshi venv's interpreter (built once, cached at .cache/moshi-venv or
FDEVAL_MOSHI_VENV, with fdeval installed --no-deps), or a skip with the reason.
`tiny_moshi`: a tiny random Moshi checkpoint built inside that venv (paths as a dict).
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def moshi_python() -> Path:
    from fdeval.models.moshi_env import MoshiEnvError, ensure_moshi_venv

    try:
        return ensure_moshi_venv(with_fdeval=True)
    except (MoshiEnvError, OSError, subprocess.SubprocessError) as e:
        pytest.skip(f"the moshi venv cannot be built here: {str(e)[:300]}")


@pytest.fixture(scope="session")
def tiny_moshi(moshi_python, tmp_path_factory) -> dict:
    from fdeval.models.moshi_env import MoshiEnvError, build_tiny

    try:
        return build_tiny(moshi_python, tmp_path_factory.mktemp("tiny-moshi"))
    except MoshiEnvError as e:
        pytest.skip(f"the tiny Moshi cannot be built: {str(e)[:300]}")
