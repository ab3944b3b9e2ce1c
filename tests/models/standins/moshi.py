"""model=moshi: the Moshi-protocol stand-in server (test_moshi_adapter.py), and, where the moshi
venv builds, the official `moshi.server` on a tiny random checkpoint (`moshi:tiny-server`)."""

from __future__ import annotations

import contextlib
import hashlib
import json
from pathlib import Path
from typing import Iterator

from contract_checks import Target
from fake_servers_common import model_from_yaml, read_records
from omegaconf import OmegaConf
from standins._common import (
    CONF,
    MODELS,
    frame_due,
    heard_rows,
    pool_held,
    pooled,
    started,
    user_audio,
)


@contextlib.contextmanager
def standin(tts, tmp: Path, request) -> Iterator[Target]:
    record = tmp / "moshi.jsonl"
    m = started(
        model_from_yaml(
            "moshi",
            hf_repo=None,
            device="cpu",
            server=pooled(
                [
                    "{python}",
                    str(MODELS / "test_moshi_adapter.py"),
                    "--port",
                    "{port}",
                    "--busy-s",
                    "0",
                    "--record",
                    str(record),
                ],
                tmp,
            ),
        )
    )
    yield Target(
        m,
        user_audio(tts, m.sample_rate),
        has_text=True,
        due=frame_due,
        heard=heard_rows(record, "heard"),
        held=pool_held(m),
    )


@contextlib.contextmanager
def tiny_server(tts, tmp: Path, request) -> Iterator[Target]:
    """The official moshi.server on a tiny random checkpoint (greedy, so that it is deterministic)."""
    py, tiny = request.getfixturevalue("moshi_python"), request.getfixturevalue("tiny_moshi")
    command = list(
        OmegaConf.load(CONF / "moshi.yaml").server.command
    )  # the launcher, as configured
    tokens = (
        tmp / "tokens.jsonl"
    )  # the server's LMGen.step outputs: what the model made of what it heard
    m = started(
        model_from_yaml(
            "moshi",
            hf_repo=None,
            config_path=tiny["config"],
            moshi_weight=tiny["moshi_weight"],
            mimi_weight=tiny["mimi_weight"],
            tokenizer=tiny["tokenizer"],
            device="cpu",
            temp=0,
            temp_text=0,
            token_log=str(tokens),
            server=pooled(
                command, tmp, python=str(py), env={"OMP_NUM_THREADS": "1"}, startup_timeout_s=240
            ),
        )
    )

    def sessions() -> (
        list
    ):  # one list of step outputs per stream; the first is the server's warm-up
        out: list = []
        for row in read_records(tokens):
            if row["offset"] == 1:
                out.append([])
            if out:
                out[-1].append(row["tokens"])
        return [
            {"steps": len(x), "sha256": hashlib.sha256(json.dumps(x).encode()).hexdigest()}
            for x in out[1:]
        ]

    yield Target(
        m,
        user_audio(tts, m.sample_rate),
        has_text=True,
        held=pool_held(m),
        quiet_s=2.0,
        max_wait_s=120,
        heard=sessions,
        text_check="random weights: no known word times (the stand-in of model=moshi checks the rule)",
    )


EXTRA = {"moshi:tiny-server": tiny_server}  # the real server too, where the moshi venv exists
