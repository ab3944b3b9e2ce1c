"""Runs named by what differs between them (fdeval.report.runnames), on run folders that hold only
the identity of their run.json (what the names are made of)."""

from __future__ import annotations

import copy
import json
from pathlib import Path

from fdeval.report.runnames import describe, run_names, slug

BASE = {
    "config": {
        "model": {"name": "reference", "voice": "en-us+f3"},
        "benchmark": {"name": "instructfd", "barge_in_after_s": 3.0, "size": "small"},
        "orchestrator": {"barge_in_delay_s": None, "silence_s": 1.5},
        "seed": 0,
    },
    "benchmark": {"name": "instructfd", "version": "1.2", "data_id": "small-seed0-aaaa"},
    "code": {"fdeval": "0.1.0", "engine": "4"},
}


def folder(tmp: Path, name: str, **changes) -> Path:
    """A run folder named `name` whose identity is BASE with `changes` ({"a.b": value}) applied."""
    ident = copy.deepcopy(BASE)
    for path, value in changes.items():
        node = ident
        *head, last = path.split(".")
        for k in head:
            node = node[k]
        node[last] = value
    d = tmp / name
    d.mkdir(parents=True)
    (d / "run.json").write_text(json.dumps({"identity": ident}))
    return d


def test_a_delay_sweep_is_named_by_its_delay(tmp_path):
    runs = [
        folder(
            tmp_path,
            f"orchestrator.barge_in_delay_s={v}-{i}",
            **{"config.orchestrator.barge_in_delay_s": v},
        )
        for i, v in enumerate((1, 3.0, None))
    ]
    assert run_names(runs) == ["delay 1 s", "delay 3 s", "delay per case"]
    assert [slug(n) for n in run_names(runs)] == ["delay_1_s", "delay_3_s", "delay_per_case"]


def test_what_follows_from_a_difference_is_not_named_again(tmp_path):
    # a benchmark setting that changes the data set: its data_id differs too, and is not named
    a = folder(tmp_path, "a", **{"config.benchmark.barge_in_after_s": 2, "benchmark.data_id": "x"})
    b = folder(tmp_path, "b", **{"config.benchmark.barge_in_after_s": 4, "benchmark.data_id": "y"})
    assert run_names([a, b]) == ["barge-in after 2 s", "barge-in after 4 s"]
    # another model: its name, not its settings
    m = folder(tmp_path, "m", **{"config.model": {"name": "moshi_lockstep", "device": "cpu"}})
    assert run_names([folder(tmp_path, "r"), m]) == ["reference", "moshi_lockstep"]
    # two keys of a sweep, one of them a new seed
    s = folder(tmp_path, "s", **{"config.seed": 2, "config.orchestrator.silence_s": 1.2})
    assert run_names([folder(tmp_path, "d"), s]) == [
        "silence 1.5 s, seed 0",
        "silence 1.2 s, seed 2",
    ]
    # only the code differs: then it is named
    c = folder(tmp_path, "c", **{"code.engine": "5"})
    assert run_names([folder(tmp_path, "e"), c]) == ["engine 4", "engine 5"]


def test_runs_that_differ_in_nothing_keep_their_folder_names(tmp_path):
    a = folder(tmp_path / "x", "default-0b9d")
    b = folder(tmp_path / "y", "default-0b9d")
    assert run_names([a, b]) == ["default-0b9d", "default-0b9d #2"]
    assert run_names([a]) == ["default-0b9d"]
    assert describe("benchmark.half_duplex", True) == "half duplex on"
