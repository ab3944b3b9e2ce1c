"""Batched lockstep PersonaPlex (fdeval.models.personaplex_lockstep, kyutai's moshi modules stepped as
NVIDIA's server steps its fork) on a tiny random PersonaPlex checkpoint.

- Against NVIDIA's real server (needs its fork: FDEVAL_PERSONAPLEX_PYTHON, see tests/helpers/personaplex_fixtures.py):
  with greedy decoding the server's conversation tokens and the lockstep path's are equal for the
  same input, alone (B=1), in a batch of 2 next to a session with another prompt, and once more in
  a row an earlier session used; for an audio voice prompt and for the `.pt` the fork saves from it.
- Without the fork (CI): the lockstep path agrees with itself: B=1, in a batch, in a reused row,
  with prompts of different lengths running beside conversation steps; sampling draws stay in
  range; the run stage records a batch through `python -m fdeval.launch model=personaplex_lockstep`.

This file is also the script the moshi venv runs for the lockstep side (`__main__`).
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path

import numpy as np

if __name__ != "__main__":  # (the moshi venv runs this file as a script, without pytest)
    import pytest
    from helpers.moshi_fixtures import run_stage
    from helpers.personaplex_fixtures import personaplex_server_tokens

    pytestmark = [pytest.mark.server, pytest.mark.slow]

FRAME = 1920
N_FRAMES = 30
TEXT_PROMPT = "You enjoy a good conversation."
OTHER_PROMPT = "Only listen, and say nothing at all until asked."


def lockstep_tokens(
    tiny: dict, voice: str, frames_path: str, out_path: str, greedy: bool = True
) -> None:
    """(moshi venv) The lockstep path's conversation tokens for the input, three ways, as JSON."""
    from fdeval.models.personaplex_lockstep import PersonaPlexLockstep

    frames = np.load(frames_path)
    noise = np.random.RandomState(0).randn(*frames.shape).astype(np.float32) * 0.05
    decoding = {"temp": 0, "temp_text": 0} if greedy else {}

    def make(batch):
        return PersonaPlexLockstep(
            batch_size=batch,
            hf_repo=None,
            config_path=tiny["config"],
            moshi_weight=tiny["moshi_weight"],
            mimi_weight=tiny["mimi_weight"],
            tokenizer=tiny["tokenizer"],
            voice_prompt=voice,
            voice_prompt_dir=tiny["voice_prompt_dir"],
            device="cpu",
            dtype="bfloat16",
            torch_threads=1,
            log_tokens=True,
            kv_cache_s=8.0,
            **decoding,
        )

    async def session(model, prompt, x, n):
        async with model.session(prompt, 0) as s:
            for f in x[:n]:
                await s.send(f)
                await s.receive()
            return s.token_log

    async def alone():
        return await session(make(1), TEXT_PROMPT, frames, len(frames))

    async def batched():
        model = make(2)

        async def other_then_same():
            # row 1: a shorter session with a longer prompt on other input, then the test input in the freed row
            t = await session(model, OTHER_PROMPT, noise, 7)
            return t, await session(model, TEXT_PROMPT, frames, len(frames))

        a, (b, c) = await asyncio.gather(
            session(model, TEXT_PROMPT, frames, len(frames)), other_then_same()
        )
        return a, c, model.counters(), model.pool.rows.kv_capacity

    b1 = asyncio.run(alone())
    a, c, counters, kv = asyncio.run(batched())
    Path(out_path).write_text(
        json.dumps(
            {"b1": b1, "b2_row0": a, "b2_reused_row": c, "counters": counters, "kv_capacity": kv}
        )
    )


def too_long_prompt(tiny: dict, out_path: str) -> None:
    """(moshi venv) A row whose KV cache was sized for 4 text-prompt tokens, given a longer instruction."""
    from fdeval.errors import ConfigError
    from fdeval.models.personaplex_lockstep import PersonaPlexLockstep

    model = PersonaPlexLockstep(
        batch_size=1,
        hf_repo=None,
        config_path=tiny["config"],
        moshi_weight=tiny["moshi_weight"],
        mimi_weight=tiny["mimi_weight"],
        tokenizer=tiny["tokenizer"],
        voice_prompt=tiny["voice_wav"],
        voice_prompt_dir=tiny["voice_prompt_dir"],
        device="cpu",
        torch_threads=1,
        kv_cache_s=8.0,
        max_text_prompt_tokens=4,
    )

    async def go():
        async with model.session(TEXT_PROMPT, 0):
            pass

    try:
        asyncio.run(go())
        Path(out_path).write_text(json.dumps({"error": None}))
    except ConfigError as e:
        Path(out_path).write_text(json.dumps({"error": str(e), "free": model.pool.owner == [None]}))


def _lockstep(
    py: Path, tiny: dict, voice: str, frames: np.ndarray, tmp: Path, greedy: bool = True
) -> dict:
    np.save(tmp / "frames.npy", frames)
    out = tmp / "lockstep.json"
    proc = subprocess.run(
        [
            str(py),
            __file__,
            json.dumps(tiny),
            voice,
            str(tmp / "frames.npy"),
            str(out),
            "greedy" if greedy else "sample",
        ],
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    return json.loads(out.read_text())


def _speech(tts) -> np.ndarray:
    from fdeval.audio.resample import resample

    syn = tts.synthesize("Can you tell me how to start running when I have never done it before?")
    x = resample(syn.samples, syn.sample_rate, 24000).astype(np.float32)
    x = np.concatenate([np.zeros(4800, np.float32), x, np.zeros(N_FRAMES * FRAME, np.float32)])[
        : N_FRAMES * FRAME
    ]
    return x.reshape(-1, FRAME)


if __name__ != "__main__":

    @pytest.mark.parametrize("voice", ["voice_wav", "voice_pt"])
    def test_greedy_tokens_equal_nvidias_server(
        personaplex_python, moshi_python, tiny_personaplex_pt, tmp_path, tts, voice
    ):
        tiny = tiny_personaplex_pt
        server = personaplex_server_tokens(
            personaplex_python, tiny, _speech(tts), TEXT_PROMPT, tiny[voice], tmp_path / "server"
        )
        inp = server[
            "server_input"
        ]  # the PCM the server's Mimi encoded: the lockstep side gets the same
        n = len(server["conversation"])
        assert n == len(inp) >= N_FRAMES - 3
        lock = _lockstep(moshi_python, tiny, tiny[voice], inp, tmp_path)
        for key in ("b1", "b2_row0", "b2_reused_row"):
            got = lock[key]
            assert len(got) == n, (key, len(got), n)
            diff = [i for i in range(n) if got[i] != server["conversation"][i]]
            assert not diff, (
                f"{key}: first difference at conversation step {diff[0]}: lockstep {got[diff[0]]} "
                f"vs server {server['conversation'][diff[0]]}"
            )
        c = lock["counters"]
        assert c["steps"] < c["row_steps"] + c["prompt_steps"]  # rows really ran together
        text = sum(1 for t in server["conversation"] if t[0] not in (0, 3))
        print(
            f"{voice}: greedy token equality over {n} conversation steps x 17 tokens ({text} text tokens, "
            f"{len(server['prompt'])} prompt steps before): server == lockstep B=1 == B=2 row 0 == B=2 reused row "
            f"(beside another prompt); {c['row_steps']} conversation + {c['prompt_steps']} prompt row-steps in "
            f"{c['steps']} batched steps"
        )

    def test_lockstep_agrees_with_itself_alone_batched_and_reused(
        moshi_python, tiny_personaplex, tmp_path, tts
    ):
        """Without NVIDIA's fork: B=1, B=2 beside another prompt and in a reused row give the same
        greedy tokens, whose user stream follows the input, and the KV cache is sized from kv_cache_s."""
        tiny = tiny_personaplex
        lock = _lockstep(moshi_python, tiny, tiny["voice_wav"], _speech(tts), tmp_path)
        assert lock["b1"] == lock["b2_row0"] == lock["b2_reused_row"]
        rows = lock["b1"]
        assert len(rows) == N_FRAMES and all(r is not None and len(r) == 17 for r in rows)
        assert len({tuple(r[9:]) for r in rows}) > N_FRAMES // 2  # the user's codes reach the LM
        c = lock["counters"]
        assert (
            c["row_steps"] == 2 * N_FRAMES + 7
            and c["prompt_steps"] > 0
            and c["steps"] < c["row_steps"] + c["prompt_steps"]
        )
        # 8 s of session + the prompt's allowance (voice, two silences, 512 text tokens), under the 3000 context
        assert lock["kv_capacity"] < 3000

    def test_sampling_runs_and_stays_in_range(moshi_python, tiny_personaplex, tmp_path, tts):
        tiny = tiny_personaplex
        lock = _lockstep(
            moshi_python, tiny, tiny["voice_wav"], _speech(tts), tmp_path, greedy=False
        )
        rows = [r for r in lock["b1"] if r is not None]
        assert len(rows) == N_FRAMES
        assert all(
            0 <= r[0] < tiny["text_card"] and all(0 <= t < 2048 for t in r[1:]) for r in rows
        )
        assert len({tuple(r[1:9]) for r in rows}) > N_FRAMES // 2  # draws, not one repeated frame

    def test_an_instruction_longer_than_the_kv_cache_allows_is_a_config_error(
        moshi_python, tiny_personaplex, tmp_path
    ):
        out = tmp_path / "out.json"
        proc = subprocess.run(
            [str(moshi_python), __file__, "too-long", json.dumps(tiny_personaplex), str(out)],
            capture_output=True,
            text=True,
            timeout=900,
        )
        assert proc.returncode == 0, proc.stderr[-3000:]
        res = json.loads(out.read_text())
        assert (
            res["error"].startswith("model.max_text_prompt_tokens: an instruction of ")
            and res["free"]
        ), res

    def test_run_stage_runs_a_batch(moshi_python, tiny_personaplex, tmp_path):
        tiny = tiny_personaplex
        cases = [
            "balcony_tomatoes__continue",
            "fresh_pasta_stop__acknowledge",
            "bakery_phone_number__listen",
        ]
        _, h5s = run_stage(
            moshi_python,
            tmp_path,
            "personaplex_lockstep",
            cases,
            f"model.config_path={tiny['config']}",
            *(
                f"model.{k}={tiny[k]}"
                for k in ("moshi_weight", "mimi_weight", "tokenizer", "voice_prompt_dir")
            ),
            f"model.voice_prompt={tiny['voice_wav']}",
        )
        import h5py

        assert [p.stem for p in h5s] == sorted(cases)
        for p in h5s:
            with h5py.File(p) as f:
                assert f.attrs["clock"] == "lockstep" and len(f["model_chunks"]) > 50
                ident = json.loads(f.attrs["model"])
                assert ident["kind"] == "personaplex-lockstep" and ident["batch_size"] == 2
                assert ident["voice_prompt_file"]["sha256"]


if __name__ == "__main__":
    if sys.argv[1] == "too-long":
        too_long_prompt(json.loads(sys.argv[2]), sys.argv[3])
    else:
        lockstep_tokens(
            json.loads(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5] == "greedy"
        )
