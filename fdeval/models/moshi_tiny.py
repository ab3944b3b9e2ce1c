"""Build a TINY randomly initialised Moshi checkpoint (for tests and benchmarks; no model hub).

Run with the moshi venv's interpreter (it imports `moshi`, `torch`, `sentencepiece`, `safetensors`;
nothing from fdeval):

    <moshi-venv>/bin/python fdeval/models/moshi_tiny.py OUT_DIR [--seed 0]

OUT_DIR receives what `moshi.server` / `loaders.CheckpointInfo.from_hf_repo` read, in the official
layouts: `model.safetensors` (LM: dim 64, 2 layers, 4 heads, depformer 64 / 2 layers, 16 streams,
text vocabulary = a locally trained 128-piece sentencepiece model), `mimi.safetensors` plus
`mimi.json` (a small Mimi: SEANet dim 128, 8 filters, 1 transformer layer, 16 codebooks, made to
hear: `mimi_that_hears`),
`tokenizer.model`, and `config.json` (the LM kwargs, `"model_type": "moshi"`,
`"mimi_config_name": "file:///abs/mimi.json"`). The weights are random: the model babbles noise
and random text pieces, which is all an engine test needs. Building takes a few seconds.
"""

from __future__ import annotations

import argparse
import copy
import json
import sys
from pathlib import Path

import numpy as np

# Run as a script, this file's folder (fdeval/models, which holds fdeval's own moshi.py) would come
# first on sys.path and shadow the real `moshi` package.
_here = __import__("os").path.dirname(__import__("os").path.abspath(__file__))
sys.path[:] = [p for p in sys.path if __import__("os").path.abspath(p or ".") != _here]

MIMI_RATE = 24000

CORPUS = """\
Sure, I can help with that. Let me walk you through it one step at a time.
Okay, that makes sense. The simplest way to think about it is to break it into a few small pieces.
Good question. In most cases the answer depends on your situation, so start with what you know.
Thanks for telling me. Here is how I would approach it: first get clear on the goal.
Can you tell me how to start running when I have never done it before?
Wait, I only have twenty minutes a day. Okay, thanks. Hold on a second.
The quick brown fox jumps over the lazy dog while the cat sleeps in the warm sun.
We should check the weather, pack some water, and leave early in the morning.
Yesterday my neighbour baked fresh bread, and the whole street smelled of it for hours.
Please remember the meeting moves to Thursday afternoon, right after lunch in the big room.
How many kilometres is it from the station to the museum, and is there a bus at night?
I think your plan is good, but maybe you could practise the harder parts first, slowly.
Mm-hmm, yeah, right, I see. Oh, sorry, go ahead. Got it, let me adjust my answer.
"""


def tiny_lm_kwargs(text_card: int) -> dict:
    from moshi.models import loaders

    kw = copy.deepcopy(loaders._lm_kwargs)
    kw.update(
        dim=64,
        num_heads=4,
        num_layers=2,
        text_card=text_card,
        depformer_dim=64,
        depformer_dim_feedforward=int(4.125 * 64),
        depformer_num_heads=4,
        depformer_num_layers=2,
    )
    return kw


def small_mimi_config() -> dict:
    from moshi.models import loaders

    cfg = copy.deepcopy(loaders._mimi_config)
    cfg["seanet"].update(dimension=128, n_filters=8)
    cfg["quantizer"].update(dimension=64, n_q=16, input_dimension=128, output_dimension=128)
    cfg["transformer"].update(
        d_model=128,
        num_heads=4,
        num_layers=1,
        dim_feedforward=256,
        input_dimension=128,
        output_dimensions=[128],
    )
    return cfg


def varied_audio(seconds: float = 2.0, seed: int = 0):
    """A deterministic batch of 24 kHz clips, (n, 1, T): noise at several levels, steady and gliding
    tones, and pulses, with silence among them."""
    rng = np.random.RandomState(seed)
    t = np.arange(int(seconds * MIMI_RATE)) / MIMI_RATE
    clips = [np.zeros_like(t)]
    for level in (0.003, 0.03, 0.3):
        clips.append(level * rng.randn(len(t)))
    for f0 in (90.0, 150.0, 240.0, 400.0, 700.0, 1200.0, 2500.0):
        clips.append(0.4 * np.sin(2 * np.pi * f0 * t))
        clips.append(0.2 * np.sin(2 * np.pi * (f0 * t + 0.5 * f0 * t * t / seconds)))
    for rate in (2.0, 5.0, 11.0):
        clips.append(0.5 * (np.sin(2 * np.pi * rate * t) > 0.7) * rng.randn(len(t)))
    return np.stack(clips).astype(np.float32)[:, None, :]


def mimi_that_hears(mimi, seed: int) -> None:
    """Make a freshly built (random) Mimi's codes depend on its input. As built, its codebooks are
    all zero, so every input encodes to code 0, and its default initialisation shrinks the signal
    at each encoder layer until the biases drown it: the LM would never see what the user says.
    Here the encoder's convolutions get variance-keeping random weights and no biases, and each
    codebook is drawn from the (residual) latents that varied audio gives at its level."""
    import torch

    g = torch.Generator().manual_seed(seed)
    for module in [*mimi.encoder.modules(), *mimi.downsample.modules()]:
        if isinstance(module, torch.nn.Conv1d):
            fan_in = module.weight[0].numel()
            module.weight.data.copy_(
                torch.randn(module.weight.shape, generator=g) * (2.0 / fan_in) ** 0.5
            )
            if module.bias is not None:
                module.bias.data.zero_()
    with torch.no_grad():
        latent = mimi._encode_to_unquantized_latent(torch.from_numpy(varied_audio(seed=seed)))
        for rvq in (mimi.quantizer.rvq_first, mimi.quantizer.rvq_rest):
            z = rvq.input_proj(latent)
            vectors = z.transpose(1, 2).reshape(-1, z.shape[1])
            for layer in rvq.vq.layers:
                book = layer._codebook
                pick = torch.randint(len(vectors), (book.codebook_size,), generator=g)
                jitter = (
                    torch.randn((book.codebook_size, vectors.shape[1]), generator=g)
                    * vectors.std(0)
                    / 2
                )
                book.embedding_sum.copy_(
                    vectors[pick] + jitter
                )  # (jittered: residuals stay non-zero)
                book.cluster_usage.fill_(1.0)
                book._initialized.fill_(1.0)
                book._embedding = None  # (the cached embedding_sum / cluster_usage)
                vectors = vectors - book.decode(book.encode(vectors))


def train_tokenizer(out: Path, vocab_size: int = 128) -> Path:
    import sentencepiece as spm

    corpus = out / "corpus.txt"
    corpus.write_text(CORPUS * 4)
    # ids as in Moshi's tokenizer: 0 = unk (skipped by the server), 3 = the text padding token
    spm.SentencePieceTrainer.train(
        input=str(corpus),
        model_prefix=str(out / "tokenizer"),
        vocab_size=vocab_size,
        model_type="unigram",
        unk_id=0,
        bos_id=1,
        eos_id=2,
        pad_id=3,
        character_coverage=1.0,
        hard_vocab_limit=True,
        minloglevel=2,
        num_threads=1,
    )
    corpus.unlink()
    (out / "tokenizer.vocab").unlink(missing_ok=True)
    return out / "tokenizer.model"


def build(out: Path, seed: int = 0) -> dict:
    import torch
    from moshi.models import loaders
    from safetensors.torch import save_file

    out = Path(out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(seed)
    tok = train_tokenizer(out)
    import sentencepiece as spm

    text_card = spm.SentencePieceProcessor(str(tok)).vocab_size()
    lm_kw = tiny_lm_kwargs(text_card)
    mimi_cfg = small_mimi_config()
    (out / "mimi.json").write_text(json.dumps(mimi_cfg, indent=1))
    mimi = loaders.get_mimi(None, mimi_cfg, device="cpu", num_codebooks=8)
    mimi_that_hears(mimi, seed)
    save_file(
        {k: v.contiguous() for k, v in mimi.state_dict().items()}, str(out / "mimi.safetensors")
    )
    lm = loaders.get_moshi_lm(None, lm_kwargs=lm_kw, device="cpu", dtype=torch.float32)
    save_file(
        {k: v.contiguous() for k, v in lm.state_dict().items()}, str(out / "model.safetensors")
    )
    config = {
        **lm_kw,
        "model_type": "moshi",
        "mimi_config_name": f"file://{out / 'mimi.json'}",
        "moshi_name": "model.safetensors",
        "mimi_name": "mimi.safetensors",
        "tokenizer_name": "tokenizer.model",
    }
    (out / "config.json").write_text(json.dumps(config, indent=1))
    n_lm = sum(p.numel() for p in lm.parameters())
    n_mimi = sum(p.numel() for p in mimi.parameters())
    info = {
        "dir": str(out),
        "config": str(out / "config.json"),
        "moshi_weight": str(out / "model.safetensors"),
        "mimi_weight": str(out / "mimi.safetensors"),
        "tokenizer": str(tok),
        "lm_params": n_lm,
        "mimi_params": n_mimi,
        "text_card": text_card,
    }
    (out / "tiny.json").write_text(json.dumps(info, indent=1))
    return info


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("out")
    p.add_argument("--seed", type=int, default=0)
    a = p.parse_args(argv)
    print(json.dumps(build(Path(a.out), a.seed)))


if __name__ == "__main__":
    sys.exit(main())
