"""Helpers shared by test folders (stand-in servers, case data, another folder's test module)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]


def sibling_module(rel: str):
    """Another test folder's module (for its helpers and fixtures), under the name pytest itself
    gives it, so both share one module object."""
    path = TESTS / rel
    name = path.stem
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, path)
        mod = importlib.util.module_from_spec(spec)
        sys.modules[name] = mod
        spec.loader.exec_module(mod)
    return sys.modules[name]
