"""model=personaplex_lockstep: the batched in-process PersonaPlex on a tiny random checkpoint with
a voice prompt, greedy; the checks run in the moshi venv (contract_runner.py)."""

from __future__ import annotations

from standins.moshi_lockstep import tiny_settings

from fdeval.models.personaplex_lockstep import PersonaPlexLockstep

CHECKPOINT = (
    "tiny_personaplex"  # the fixture that builds it (tests/helpers/personaplex_fixtures.py)
)


def build(tiny: dict) -> PersonaPlexLockstep:
    return PersonaPlexLockstep(
        voice_prompt=tiny["voice_wav"],
        voice_prompt_dir=tiny["voice_prompt_dir"],
        **tiny_settings(tiny),
    )
