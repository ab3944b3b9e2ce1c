"""Launch the official `moshi.server` unchanged, with fdeval's decoding settings and CPU fallback.

Run with the model's own interpreter (imports only the standard library, torch and moshi):

    <moshi-venv>/bin/python fdeval/models/moshi_launch.py --host 127.0.0.1 --port P --static none ...

Everything on the command line goes to `moshi.server` as is. Before it starts, this launcher:
- merges the JSON object in FDEVAL_MOSHI_LM_GEN (e.g. {"temp": 0.8, "temp_text": 0.7, "top_k": 250,
  "top_k_text": 25}) into the checkpoint's `lm_gen_config`, which the server passes to `LMGen`:
  `moshi.server` has no command-line flags for the decoding parameters, and this is the route by
  which it takes them from a checkpoint's config.json;
- on a torch without CUDA, makes `torch.cuda.synchronize` a no-op (the server's warmup calls it and
  would die; only for `--device cpu`, i.e. tests and benchmarks on tiny checkpoints);
- with FDEVAL_MOSHI_TOKEN_LOG=path, appends every `LMGen.step` output (text token, then the audio
  tokens) as one JSON line: the greedy token-equality test compares them with the in-process path.
"""

from __future__ import annotations

import json
import os
import runpy
import sys

# Run as a script, this file's folder (fdeval/models, which holds fdeval's own moshi.py) would come
# first on sys.path and shadow the real `moshi` package.
_here = __import__("os").path.dirname(__import__("os").path.abspath(__file__))
sys.path[:] = [p for p in sys.path if __import__("os").path.abspath(p or ".") != _here]


def _patch() -> None:
    import torch

    if not torch.cuda.is_available():
        torch.cuda.synchronize = lambda *a, **k: None  # type: ignore[assignment]

    from moshi.models import loaders

    lm_gen = json.loads(os.environ.get("FDEVAL_MOSHI_LM_GEN", "") or "{}")
    if lm_gen:
        original = loaders.CheckpointInfo.from_hf_repo

        def from_hf_repo(*args, **kwargs):
            info = original(*args, **kwargs)
            info.lm_gen_config = {**info.lm_gen_config, **lm_gen}
            print(f"[fdeval] lm_gen_config = {info.lm_gen_config}", file=sys.stderr, flush=True)
            return info

        loaders.CheckpointInfo.from_hf_repo = staticmethod(from_hf_repo)  # type: ignore[method-assign]

    token_log = os.environ.get("FDEVAL_MOSHI_TOKEN_LOG")
    if token_log:
        from moshi.models import lm

        step = lm.LMGen.step
        counter = {"n": 0}

        def logged_step(self, *args, **kwargs):
            out = step(self, *args, **kwargs)
            counter["n"] += 1
            # the warmup's 4 frames are not a session: mark resets so readers can split sessions
            row = None if out is None else out[0, :, 0].tolist()
            with open(token_log, "a") as f:
                f.write(
                    json.dumps({"offset": int(self._streaming_state.offset_cpu), "tokens": row})
                    + "\n"
                )
            return out

        lm.LMGen.step = logged_step  # type: ignore[method-assign]


def main() -> None:
    _patch()
    sys.argv = ["moshi.server", *sys.argv[1:]]
    runpy.run_module("moshi.server", run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main()
