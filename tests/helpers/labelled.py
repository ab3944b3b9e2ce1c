"""What the labelled sets of the tests share (tests/judges/labelled/, tests/benchmarks/echochain/labelled/)."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, TypeVar

T = TypeVar("T")


def load_unique(
    files: Iterable[Path],
    load_file: Callable[[Path], list[T]],
    error: Callable[[str, Any, str, str], Exception],
) -> list[T]:
    """The items of `files` in order, each file read by `load_file`; an id used twice is
    `error(path, id, "id", why)` naming the file that used it first."""
    items: list[T] = []
    seen: dict[str, Path] = {}
    for path in files:
        for it in load_file(path):
            if it.id in seen:
                raise error(str(path), it.id, "id", f"already used in {seen[it.id].name}")
            seen[it.id] = path
            items.append(it)
    return items
