"""model=moshi_lockstep: the batched in-process Moshi on a tiny random checkpoint, greedy (so that
it is deterministic); the checks run in the moshi venv (contract_runner.py)."""

from __future__ import annotations

from fdeval.models.moshi_lockstep import MoshiLockstep

CHECKPOINT = "tiny_moshi"  # the fixture that builds it (tests/helpers/moshi_fixtures.py)


def tiny_settings(tiny: dict) -> dict:
    """The constructor arguments every lockstep stand-in shares: the tiny checkpoint's files, greedy, CPU."""
    files = {k: tiny[k] for k in ("config", "moshi_weight", "mimi_weight", "tokenizer")}
    files["config_path"] = files.pop("config")
    return dict(
        batch_size=2,
        hf_repo=None,
        device="cpu",
        dtype="float32",
        temp=0,
        temp_text=0,
        torch_threads=1,
        **files,
    )


def build(tiny: dict) -> MoshiLockstep:
    return MoshiLockstep(**tiny_settings(tiny))
