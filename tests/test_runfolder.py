"""What a run's identity covers, how its folder is named, and the folder lock (fdeval.engine.identity)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from fdeval.errors import FdevalError
from fdeval.engine.identity import (
    RunLock,
    describe_diff,
    identity_hash,
    readable_tag,
    result_config,
)

BASE = {
    "seed": 0,
    "out_root": "outputs",
    "progress": True,
    "run_tag": None,
    "resume": "auto",
    "stage": {"steps": ["run"]},
    "launcher": {"name": "local"},
    "report": {"ci": 0.95},
    "orchestrator": {"barge_in_delay_s": 2.0, "silence_s": 1.5},
    "judge": {
        "_target_": "fdeval.benchmarks.instructfd.judges.llm.LLMJudge",
        "base_url": None,
        "cache_dir": "/x",
        "timeout_s": 120.0,
    },
    "model": {
        "name": "moshi",
        "server": {"instances_per_gpu": 1, "log_dir": None, "command": ["a"]},
    },
}


def with_(path: str, value, base=BASE):
    import copy

    d = copy.deepcopy(base)
    node = d
    *parents, last = path.split(".")
    for k in parents:
        node = node[k]
    node[last] = value
    return d


def h(cfg, env=None):
    return identity_hash(result_config(cfg, env or {}))


def test_where_and_how_a_run_goes_does_not_change_its_identity():
    for path, value in [
        ("out_root", "/elsewhere"),
        ("progress", False),
        ("stage.steps", ["score"]),
        ("launcher.name", "slurm"),
        ("report.ci", 0.9),
        ("judge.cache_dir", "/y"),
        ("judge.timeout_s", 5.0),
        ("model.server.instances_per_gpu", 4),
        ("resume", "redo"),
    ]:
        assert h(with_(path, value)) == h(BASE), path


def test_what_can_change_a_result_changes_the_identity():
    for path, value in [
        ("seed", 1),
        ("orchestrator.barge_in_delay_s", 1.0),
        ("orchestrator.silence_s", 1.2),
        ("model.server.command", ["b"]),
        ("judge.base_url", "https://other.example"),
    ]:
        assert h(with_(path, value)) != h(BASE), path


def test_a_null_endpoint_is_the_one_the_environment_gives():
    assert h(BASE, {"ANTHROPIC_BASE_URL": "http://127.0.0.1:9"}) != h(BASE, {})
    assert result_config(BASE, {})["judge"]["base_url"] == "https://api.anthropic.com"


def test_whole_numbers_are_one_setting_however_written():
    assert h(with_("orchestrator.barge_in_delay_s", 2)) == h(
        with_("orchestrator.barge_in_delay_s", 2.0)
    )


def test_describe_diff_names_the_fields():
    a, b = result_config(BASE, {}), result_config(with_("orchestrator.silence_s", 1.2), {})
    assert describe_diff(a, b) == "orchestrator.silence_s: 1.5 -> 1.2"


def test_readable_tag_is_short_and_leaves_out_what_does_not_name_a_run():
    long = "benchmark.cases=[" + ",".join(f"case_{i}" for i in range(40)) + "]"
    tag = readable_tag(
        [long, "launcher.partition=gpu", "orchestrator.barge_in_delay_s=2", "out_root=/x"],
        {"out_root"},
        ("launcher.",),
    )
    assert tag == "benchmark.cases=40items,orchestrator.barge_in_delay_s=2"
    assert readable_tag([], set(), ()) == "default"
    assert "/" not in readable_tag(["benchmark.cases_dir=/tmp/x/y"], set(), ())


def test_the_lock_refuses_a_second_holder_and_dies_with_its_process(tmp_path):
    code = (
        "from fdeval.engine.identity import RunLock; "
        f"RunLock(__import__('pathlib').Path({str(tmp_path)!r})).acquire(); "
        "print('held', flush=True); import time; time.sleep(60)"
    )
    holder = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        with pytest.raises(
            FdevalError,
            match=rf"another fdeval process is using this run folder \(pid {holder.pid} ",
        ):
            RunLock(tmp_path).acquire()
    finally:
        holder.kill()
        holder.wait()
    with RunLock(tmp_path):  # the kernel dropped the dead holder's lock
        pass
