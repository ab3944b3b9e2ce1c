"""Build a TINY randomly initialised PersonaPlex checkpoint (tests only; no model hub, no real voice).

Run with the KYUTAI moshi venv's interpreter (moshi 0.2.13, as `fdeval.models.moshi_env` builds it;
CI has no PersonaPlex):

    <moshi-venv>/bin/python fdeval/models/personaplex_tiny.py OUT_DIR [--seed 0]

The LM has PersonaPlex's structure (its loaders' `_lm_kwargs`: 16 audio streams of which the
depformer generates all 16, i.e. 8 for the model's voice and 8 for its guess of the user, the 17
delays, text padding id 3, one depformer input projection and one set of depformer weights per
codebook) at moshi_tiny's sizes (dim 64, 2 layers, 4 heads, depformer 64 / 2 layers), over the
128-piece sentencepiece model moshi_tiny trains (ids 0 and 3: unk and pad). Mimi is moshi_tiny's
small one, made to hear (`moshi_tiny.mimi_that_hears`: a new random Mimi encodes every input to code 0, so
the user's audio would never reach the LM). The weights are random and saved in the layout of
NVIDIA's fork (one `self_attn.in_proj_weight` / `self_attn.out_proj.weight` per attention, the
per-step projections stacked along the first axis), which kyutai's `StreamingMultiheadAttention`
also takes (its load hook splits them into `in_projs.{i}` / `out_projs.{i}`): the build checks
that kyutai's loaders load both files strictly and get the same numbers back.

OUT_DIR receives `model.safetensors`, `mimi.safetensors`, `tokenizer.model`;
`personaplex_arch.json` (FDEVAL_PERSONAPLEX_ARCH for `personaplex_launch.py`: the fork's
loaders build this architecture instead of the 7B one); `config.json` + `mimi.json` for kyutai's
`loaders.CheckpointInfo.from_hf_repo(None, ..., config_path=...)` (NB: its `get_mimi()` picks
max(dep_q, n_q - dep_q) = 16 codebooks for this config, the fork's server always uses 8);
`voices/tiny_voice.wav`, a deterministic 2 s harmonic tone with a syllable-rate envelope (24 kHz
mono, 16-bit) to use as the voice prompt; and `tiny.json`, the paths as a dict.

With an interpreter that has NVIDIA's fork (`moshi-personaplex`), `--voice-embeddings` adds
`voices/tiny_voice.pt`, written by the fork's own save path (`LMGen(...,
save_voice_prompt_embeddings=True)` running the voice prompt), and checks that the fork's
LMModel and Mimi take every key of the two weight files:

    <personaplex-venv>/bin/python fdeval/models/personaplex_tiny.py OUT_DIR --voice-embeddings
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import sys
import wave
from pathlib import Path

import numpy as np

# Run as a script, this file's folder (fdeval/models, which holds fdeval's own moshi.py) would come
# first on sys.path and shadow the real `moshi` package.
_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != _HERE]

VOICE = "tiny_voice"
SAMPLE_RATE = 24000
ARCH_SIZES = {
    "dim": 64,
    "num_heads": 4,
    "num_layers": 2,
    "depformer_dim": 64,
    "depformer_dim_feedforward": int(4.125 * 64),
    "depformer_num_heads": 4,
    "depformer_num_layers": 2,
}


def _sibling(name: str):
    """A module of this folder loaded from its file (the folder itself is kept off sys.path)."""
    spec = importlib.util.spec_from_file_location(
        f"_fdeval_{name}", os.path.join(_HERE, f"{name}.py")
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    return module


def personaplex_lm_kwargs(text_card: int) -> dict:
    """PersonaPlex's LM structure (NVIDIA/personaplex `loaders._lm_kwargs`, with the dep_q of 16
    that its `get_moshi_lm` forces) at tiny sizes."""
    return {
        "dim": 4096,
        "text_card": text_card,
        "existing_text_padding_id": 3,
        "n_q": 16,
        "dep_q": 16,
        "card": 2048,
        "num_heads": 32,
        "num_layers": 32,
        "hidden_scale": 4.125,
        "causal": True,
        "layer_scale": None,
        "context": 3000,
        "max_period": 10000,
        "gating": "silu",
        "norm": "rms_norm_f32",
        "positional_embedding": "rope",
        "depformer_dim": 1024,
        "depformer_dim_feedforward": int(4.125 * 1024),
        "depformer_num_heads": 16,
        "depformer_num_layers": 6,
        "depformer_causal": True,
        "depformer_layer_scale": None,
        "depformer_multi_linear": True,
        "depformer_context": 8,
        "depformer_max_period": 10000,
        "depformer_gating": "silu",
        "depformer_pos_emb": "none",
        "depformer_weights_per_step": True,
        "delays": [0, 0, 1, 1, 1, 1, 1, 1, 1, 0, 1, 1, 1, 1, 1, 1, 1],
    } | ARCH_SIZES


def to_fork_layout(state: dict) -> dict:
    """kyutai's per-step attention projections (`in_projs.{i}.weight`, `out_projs.{i}.weight`)
    stacked into the fork's single `in_proj_weight` / `out_proj.weight` (step i = rows block i)."""
    out, stacks = {}, {}
    for key, value in state.items():
        for kind, fork_name in (("in_projs", "in_proj_weight"), ("out_projs", "out_proj.weight")):
            marker = f".{kind}."
            if marker in key and key.endswith(".weight"):
                prefix, rest = key.split(marker)
                stacks.setdefault(f"{prefix}.{fork_name}", {})[int(rest.split(".")[0])] = value
                break
        else:
            out[key] = value
    import torch

    for key, parts in stacks.items():
        assert sorted(parts) == list(range(len(parts))), (key, sorted(parts))
        out[key] = torch.cat([parts[i] for i in range(len(parts))], dim=0)
    return {k: v.contiguous() for k, v in out.items()}


def voice_wav(path: Path, seconds: float = 2.0) -> Path:
    """A deterministic voice-like tone (gliding 140 Hz fundamental, 6 harmonics, 4 Hz syllable
    envelope), 24 kHz mono 16-bit PCM."""
    t = np.arange(int(seconds * SAMPLE_RATE)) / SAMPLE_RATE
    f0 = 140.0 + 25.0 * np.sin(2 * np.pi * 0.7 * t)
    phase = 2 * np.pi * np.cumsum(f0) / SAMPLE_RATE
    x = sum(np.sin(k * phase) / k for k in range(1, 7))
    envelope = 0.5 - 0.5 * np.cos(2 * np.pi * 4.0 * t)
    pcm = np.round(0.3 * 32767 * envelope * x / np.max(np.abs(x))).astype("<i2")
    path.parent.mkdir(parents=True, exist_ok=True)
    with wave.open(str(path), "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(SAMPLE_RATE)
        w.writeframes(pcm.tobytes())
    return path


def build(out: Path, seed: int = 0) -> dict:
    """(kyutai moshi venv) Write the tiny checkpoint into `out`; its paths as a dict."""
    import torch
    from moshi.models import loaders
    from safetensors.torch import load_file, save_file

    tiny = _sibling("moshi_tiny")
    out = Path(out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(seed)
    tok = tiny.train_tokenizer(out)
    import sentencepiece as spm

    text_card = spm.SentencePieceProcessor(str(tok)).vocab_size()
    lm_kw = personaplex_lm_kwargs(text_card)
    mimi_cfg = tiny.small_mimi_config()
    (out / "mimi.json").write_text(json.dumps(mimi_cfg, indent=1))
    mimi = loaders.get_mimi(None, mimi_cfg, device="cpu", num_codebooks=8)
    tiny.mimi_that_hears(mimi, seed)
    lm = loaders.get_moshi_lm(None, lm_kwargs=lm_kw, device="cpu", dtype=torch.float32)
    files = {
        "mimi_weight": (mimi, out / "mimi.safetensors"),
        "moshi_weight": (lm, out / "model.safetensors"),
    }
    for module, path in files.values():
        save_file(to_fork_layout(module.state_dict()), str(path))

    # kyutai's loaders take the fork layout (strict load) and give back the same weights
    again = {
        "mimi_weight": loaders.get_mimi(
            str(out / "mimi.safetensors"), mimi_cfg, device="cpu", num_codebooks=8
        ),
        "moshi_weight": loaders.get_moshi_lm(
            str(out / "model.safetensors"), lm_kwargs=lm_kw, device="cpu", dtype=torch.float32
        ),
    }
    for key, (module, _) in files.items():
        a, b = module.state_dict(), again[key].state_dict()
        assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a), (
            f"{key}: kyutai reloads other weights"
        )
    for _, path in files.values():
        assert not [k for k in load_file(str(path)) if "_projs." in k], (
            f"{path}: not in the fork's layout"
        )

    arch = {
        "lm_kwargs": lm_kw,
        "mimi": {k: mimi_cfg[k] for k in ("seanet", "transformer", "quantizer")},
    }
    (out / "personaplex_arch.json").write_text(json.dumps(arch, indent=1))
    config = {
        **lm_kw,
        "model_type": "moshi",
        "mimi_config_name": f"file://{out / 'mimi.json'}",
        "moshi_name": "model.safetensors",
        "mimi_name": "mimi.safetensors",
        "tokenizer_name": "tokenizer.model",
    }
    (out / "config.json").write_text(json.dumps(config, indent=1))
    wav = voice_wav(out / "voices" / f"{VOICE}.wav")
    info = {
        "dir": str(out),
        "config": str(out / "config.json"),
        "arch": str(out / "personaplex_arch.json"),
        "moshi_weight": str(out / "model.safetensors"),
        "mimi_weight": str(out / "mimi.safetensors"),
        "tokenizer": str(tok),
        "voice_prompt_dir": str(wav.parent),
        "voice_wav": wav.name,
        "voice_pt": None,
        "lm_params": sum(p.numel() for p in lm.parameters()),
        "mimi_params": sum(p.numel() for p in mimi.parameters()),
        "text_card": text_card,
    }
    (out / "tiny.json").write_text(json.dumps(info, indent=1))
    return info


def voice_embeddings(out: Path) -> dict:
    """(a venv with NVIDIA's fork) Check that the fork's modules take every key of the tiny
    weights, then write voices/<voice>.pt with the fork's own save path; the updated dict."""
    import torch
    from moshi.models import LMGen, loaders
    from moshi.models.lm import LMModel
    from safetensors.torch import load_file

    if not hasattr(LMGen, "step_system_prompts"):
        raise SystemExit(
            "--voice-embeddings needs NVIDIA's PersonaPlex fork of moshi (moshi-personaplex), "
            f"not the moshi at {os.path.dirname(sys.modules['moshi'].__file__)}"
        )
    out = Path(out).resolve()
    info = json.loads((out / "tiny.json").read_text())
    _sibling("personaplex_launch").apply_arch(info["arch"])

    lm_kw = dict(loaders._lm_kwargs, dep_q=16)  # as the fork's get_moshi_lm builds it
    probe = LMModel(device="cpu", dtype=torch.float32, **lm_kw)
    result = probe.load_state_dict(load_file(info["moshi_weight"]), strict=False)
    if result.missing_keys or result.unexpected_keys:
        raise SystemExit(
            f"the fork's LMModel: missing {result.missing_keys}, unexpected {result.unexpected_keys}"
        )
    mimi = loaders.get_mimi(info["mimi_weight"], "cpu")  # (safetensors' load_model: strict)
    lm = loaders.get_moshi_lm(info["moshi_weight"], device="cpu")

    # as the server's ServerState builds its LMGen, plus the save flag
    gen = LMGen(
        lm,
        audio_silence_frame_cnt=int(0.5 * mimi.frame_rate),
        sample_rate=mimi.sample_rate,
        device="cpu",
        frame_rate=mimi.frame_rate,
        save_voice_prompt_embeddings=True,
    )
    mimi.streaming_forever(1)
    gen.streaming_forever(1)
    wav = os.path.join(info["voice_prompt_dir"], info["voice_wav"])
    gen.load_voice_prompt(wav)
    gen.text_prompt_tokens = []
    mimi.reset_streaming()
    gen.reset_streaming()
    with torch.no_grad():
        gen.step_system_prompts(mimi)  # the voice part saves <wav without .wav>.pt
    pt = Path(os.path.splitext(wav)[0] + ".pt")
    if not pt.is_file():
        raise SystemExit(f"the fork did not write {pt}")
    info["voice_pt"] = pt.name
    info["fork_loads_all_keys"] = True
    (out / "tiny.json").write_text(json.dumps(info, indent=1))
    return info


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("out")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument(
        "--voice-embeddings",
        action="store_true",
        help="(NVIDIA's fork) check the fork loads the weights and write voices/*.pt from the WAV",
    )
    a = p.parse_args(argv)
    print(
        json.dumps(
            voice_embeddings(Path(a.out)) if a.voice_embeddings else build(Path(a.out), a.seed)
        )
    )


if __name__ == "__main__":
    sys.exit(main())
