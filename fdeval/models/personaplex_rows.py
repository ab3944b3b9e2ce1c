"""The torch side of batched PersonaPlex: B rows, each conditioned on its own voice and text prompt.

Imported only inside the moshi venv (kyutai's `moshi` 0.2.13: its `LMModel`, Mimi and streaming
transformer with per-row masks and resets). NVIDIA's PersonaPlex is a fine-tune of Moshi whose
server (a fork of moshi 0.1) steps the model differently from kyutai's `LMGen`, and whose
streaming state cannot hold rows at different positions; so this module steps kyutai's modules
the way the fork's generator does, for B rows at once, each row at its own position:

- Every step writes the tokens it is given ("provided": the user's codes in conversation; in the
  prompt also the model's own audio and text) into a small per-row ring of tokens at their
  delayed positions, then runs the transformer on the previous position to predict the current
  one, so the output lags one step behind kyutai's Moshi; provided tokens replace what the model
  samples, in the text stream and inside the depth transformer (teacher forcing).
- The depth transformer generates all 16 audio streams (the model's 8, then its guess at the
  user's 8; provided user codes replace the guess); an output row is the text token, the model's
  8 audio tokens, then the user's 8.
- Before it listens, a session's row runs its prompt: the voice prompt (a `.pt` of saved input
  embeddings and token ring, replayed; or audio, whose Mimi codes are fed as the model's own
  voice), 0.5 s of silence, the text prompt (the instruction in `<system>` tags, one token per
  step), 0.5 s of silence. During the prompt the user stream carries the codes of a 440 Hz tone
  and the silent stretches the codes of silence, as the fork hard-codes them (`PROMPT_CODES`).
  A session without an instruction runs no text prompt (the fork's server fails on an empty one).
- The first step of a row (position 0) runs no model: it only fills the ring with start tokens;
  it is done when the row is taken (`start_row`), so every batched step runs the model on every
  row it steps.

The token bookkeeping (the rings, positions, what is provided) is a few dozen integers per row
and lives in numpy on the host; the device runs the embeddings, the transformer, the text head
and the depth transformer, each step once for all rows (under CUDA, in graphs: `CUDAGraphed`).
With greedy decoding a row's tokens equal the fork's server's on the same input (tested against
the real server on a tiny random checkpoint, alone, in a batch and in a reused row).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np
import pyloudnorm
import sphn
import torch
from moshi.models.lm import LMModel
from moshi.utils.compile import CUDAGraphed
from moshi.utils.sampling import sample_token
from safetensors.torch import load_file

from fdeval.errors import ConfigError
from fdeval.models.base import ModelEvent
from fdeval.models.moshi_rows import MimiRows, size_kv_cache

AUDIO_STREAM = 8  # codebooks per audio stream (the model's, the user's)
TEXT_PAD = (
    3  # the text token of a step that says nothing (the fork feeds it through the voice prompt)
)
SILENCE_STEPS_S = 0.5  # each silent stretch of the prompt
# The Mimi codes the fork feeds while a prompt runs (fixed there, whatever the Mimi): those of a
# silent frame (the model's stream in silent stretches) and of a 440 Hz tone (the user's stream).
PROMPT_CODES = {
    "silence": (948, 243, 1178, 546, 1736, 1030, 1978, 2008),
    "tone": (430, 1268, 381, 1611, 1095, 1495, 56, 472),
}


@dataclass(frozen=True)
class VoicePrompt:
    """A voice prompt, ready to step: either the saved input embeddings of its steps and the token
    ring they left (`.pt`), or the Mimi codes of its audio frames (8 per step)."""

    name: str
    embeddings: torch.Tensor | None = None  # (n_steps, dim)
    ring: np.ndarray | None = None  # (K, ring) tokens the replay leaves
    codes: np.ndarray | None = None  # (n_frames, 8)

    @property
    def steps(self) -> int:
        return len(self.embeddings) if self.embeddings is not None else len(self.codes)


def system_prompt(instruction: str) -> str:
    """The instruction as the model reads it: between `<system>` tags (added when missing)."""
    text = instruction.strip()
    return (
        text
        if text.startswith("<system>") and text.endswith("<system>")
        else f"<system> {text} <system>"
    )


class PersonaPlexRows(MimiRows):
    """B rows of PersonaPlex (see the module doc)."""

    def __init__(
        self,
        lm: Any,
        mimi: Any,
        tokenizer: Any,
        batch_size: int,
        device: str,
        voice: VoicePrompt,
        decoding: dict[str, Any],
        kv_steps: int | None = None,
        max_text_tokens: int = 0,
        log_tokens: bool = False,
    ):
        super().__init__(mimi, tokenizer, batch_size, device, log_tokens)
        B = self.batch_size
        self.lm, self.voice = lm, voice
        self.delays = np.asarray(lm.delays, dtype=np.int64)
        self.K = len(self.delays)  # 1 text + 2 x 8 audio streams
        if self.K != 1 + 2 * AUDIO_STREAM or lm.dep_q != 2 * AUDIO_STREAM:
            raise ValueError(
                f"not a PersonaPlex LM: {self.K} streams, depth transformer of {lm.dep_q} (want 17, 16)"
            )
        self.max_delay = int(self.delays.max())
        self.ring = self.max_delay + 3  # the fork's ring length
        self.initial = np.array(
            [lm.text_initial_token_id] + [lm.initial_token_id] * (self.K - 1), dtype=np.int64
        )
        self.silence_steps = int(SILENCE_STEPS_S * mimi.frame_rate)
        # the longest prompt a row may run: the voice, two silences and max_text_tokens
        self.max_prompt_steps = voice.steps + 2 * self.silence_steps + int(max_text_tokens)
        context = int(lm.context)
        self.kv_capacity = size_kv_cache(
            lm.transformer, context, None if kv_steps is None else kv_steps + self.max_prompt_steps
        )
        self.temp, self.temp_text = float(decoding["temp"]), float(decoding["temp_text"])
        self.top_k, self.top_k_text = int(decoding["top_k"]), int(decoding["top_k_text"])
        # host-side token bookkeeping, per row
        self.tokens = np.zeros((B, self.K, self.ring), dtype=np.int64)
        self.given = np.zeros((B, self.K, self.ring), dtype=bool)
        self.position = np.zeros(B, dtype=np.int64)
        self.script: list[list[tuple]] = [
            [] for _ in range(B)
        ]  # each row's prompt steps still to run
        self._reset_rows: list[int] = []
        self._exit.append(lm.streaming(B))
        self._lm_rows: tuple[int, ...] | None = None
        cuda = str(device).startswith("cuda")
        self._main = CUDAGraphed(self._forward_main, disable=not cuda)
        self._depth = CUDAGraphed(self._forward_depth, disable=not cuda)
        dim = lm.dim
        dtype = next(lm.parameters()).dtype
        self._replayed = torch.zeros(B, 1, dim, device=device, dtype=dtype)
        self._use_replayed = np.zeros(B, dtype=bool)
        if voice.embeddings is not None:
            voice_embeddings = voice.embeddings.to(device=device, dtype=dtype)
            self._voice_embeddings = voice_embeddings
        self.warm_up()

    # -- the device side ----------------------------------------------------------------------
    def _embed(self, ids: torch.Tensor) -> torch.Tensor:
        lm = self.lm
        x = None
        for k in range(
            lm.num_audio_codebooks
        ):  # the audio streams in order, then the text (as the fork sums)
            e = lm.emb[k](ids[:, k + lm.audio_offset])
            x = e if x is None else x + e
        return x + lm.text_emb(ids[:, 0])

    def _forward_main(self, ids: torch.Tensor, replayed: torch.Tensor, use_replayed: torch.Tensor):
        x = torch.where(use_replayed[:, None, None], replayed, self._embed(ids))
        out = self.lm.transformer(x)
        if self.lm.out_norm:
            out = self.lm.out_norm(out)
        return out, self.lm.text_linear(out)[:, None]

    def _forward_depth(
        self, text: torch.Tensor, out: torch.Tensor, target: torch.Tensor, given: torch.Tensor
    ):
        lm = self.lm
        prev, sampled = text, []
        with lm.depformer.streaming(text.shape[0]):
            for cb in range(lm.dep_q):
                logits = lm.forward_depformer(cb, prev[:, None, None], out)
                token = sample_token(logits.float(), self.temp > 0, self.temp, self.top_k)[:, 0, 0]
                sampled.append(token)
                prev = torch.where(
                    given[:, cb], target[:, cb], token
                )  # teacher forcing where provided
        return torch.stack(sampled, dim=1)

    # -- rows ---------------------------------------------------------------------------------
    def start_row(self, row: int, instruction: str | None, seed: int) -> int:
        super().start_row(row, instruction, seed)
        text = (
            self.tokenizer.encode(system_prompt(instruction))
            if instruction and instruction.strip()
            else []
        )
        n_text = self.max_prompt_steps - self.voice.steps - 2 * self.silence_steps
        if self.kv_capacity < int(self.lm.context) and len(text) > n_text:
            raise ConfigError(
                f"model.max_text_prompt_tokens: an instruction of {len(text)} tokens does not fit "
                f"the {n_text} the KV cache was sized for: raise it"
            )
        silence = [("tokens", PROMPT_CODES["silence"], TEXT_PAD)] * self.silence_steps
        if self.voice.embeddings is not None:
            voice = [("replay", i) for i in range(self.voice.steps)] + [("ring",)]
        else:
            voice = [
                ("tokens", tuple(int(c) for c in codes), TEXT_PAD) for codes in self.voice.codes
            ]
        script = (
            voice + silence + [("tokens", PROMPT_CODES["silence"], int(t)) for t in text] + silence
        )
        # the row starts afresh; its first step (position 0) only fills the ring with start tokens
        self.tokens[row] = -2  # (the fork's "not generated yet")
        self.given[row] = False
        self.position[row] = 0
        self._reset_rows.append(row)
        first = script[0]
        if first[0] == "replay":  # replaying: the dummy tokens first, the embedding at position 1
            self._provide(
                row, self.initial[1 : 1 + AUDIO_STREAM], self.initial[1 + AUDIO_STREAM :], TEXT_PAD
            )
        else:
            self._provide(row, PROMPT_CODES["tone"], first[1], first[2])
            script = script[1:]
        self.script[row] = script
        return sum(1 for s in script if s[0] != "ring")

    def _provide(
        self, row: int, user: Sequence[int] | None, model: Sequence[int] | None, text: int | None
    ) -> bool:
        """Write the provided tokens of row's next step at their delayed positions; False when
        the row is at position 0 (it then only starts, no model runs)."""
        pos, d, R = int(self.position[row]), self.delays, self.ring
        for first, codes in ((1 + AUDIO_STREAM, user), (1, model)):
            if codes is not None:
                k = np.arange(first, first + AUDIO_STREAM)
                at = (pos + d[k]) % R
                self.tokens[row, k, at] = codes
                self.given[row, k, at] = True
        if text is not None:
            at = (pos + d[0]) % R
            self.tokens[row, 0, at], self.given[row, 0, at] = text, True
        early = np.flatnonzero(pos <= d)  # streams still inside their delay: start tokens
        self.tokens[row, early, pos % R] = self.initial[early]
        self.given[row, early, pos % R] = True
        if pos == 0:
            self.tokens[row, :, 0] = self.initial
            self.position[row] = 1
            return False
        return True

    # -- one batched step ---------------------------------------------------------------------
    def step(
        self, frames: dict[int, np.ndarray], prompting: Sequence[int]
    ) -> dict[int, list[ModelEvent]]:
        rows = sorted(frames)
        active = sorted([*rows, *prompting])
        B, R = self.batch_size, self.ring
        with torch.no_grad():
            if self._reset_rows:
                reset = self.mask(sorted(set(self._reset_rows)))
                self.lm.reset_streaming(reset)
                self.reset_mimi(sorted(set(self._reset_rows)))
                self._reset_rows = []
                self._lm_rows = None
            user = self.encode(frames, rows)[:, :AUDIO_STREAM, 0].cpu().numpy() if rows else None
            self._use_replayed[:] = False
            for i in rows:
                self._provide(i, user[i], None, None)
            for i in prompting:
                item = self.script[i][0]
                if (
                    item[0] == "replay"
                ):  # (the dummy tokens of the first one went in twice: at position 0 too)
                    self._provide(
                        i,
                        self.initial[1 : 1 + AUDIO_STREAM],
                        self.initial[1 + AUDIO_STREAM :],
                        TEXT_PAD,
                    )
                    self._replayed[i, 0] = self._voice_embeddings[item[1]]
                    self._use_replayed[i] = True
                else:
                    self._provide(i, PROMPT_CODES["tone"], item[1], item[2])
            pos = self.position
            inp = (pos - 1) % R
            tgt = pos % R
            b = np.arange(B)
            ids = torch.from_numpy(self.tokens[b, :, inp][:, :, None]).to(self.device)
            target = self.tokens[b, :, tgt]
            given = self.given[b, :, tgt]
            if tuple(active) != self._lm_rows:
                self.lm.set_exec_mask(self.mask(active))
                self._lm_rows = tuple(active)
            out, text_logits = self._main(
                ids, self._replayed, torch.from_numpy(self._use_replayed).to(self.device)
            )
            sampled_text = sample_token(
                text_logits.float(), self.temp_text > 0, self.temp_text, self.top_k_text
            )[:, 0, 0]
            given_t = torch.from_numpy(given).to(self.device)
            target_t = torch.from_numpy(target).to(self.device)
            text = torch.where(given_t[:, 0], target_t[:, 0], sampled_text)
            audio = self._depth(text, out, target_t[:, 1:], given_t[:, 1:])
            sampled = torch.cat([sampled_text[:, None], audio], dim=1).cpu().numpy()
        outputs: dict[int, np.ndarray | None] = {}
        for i in active:
            self.given[i, :, inp[i]] = False
            keep = self.given[i, :, tgt[i]]
            self.tokens[i, :, tgt[i]] = np.where(keep, self.tokens[i, :, tgt[i]], sampled[i])
            p = int(pos[i])
            outputs[i] = (
                None
                if p <= self.max_delay
                else self.tokens[
                    i, np.arange(self.K), (p - self.max_delay + self.delays) % R
                ].copy()
            )
            self.position[i] = p + 1
        for i in prompting:
            self.script[i].pop(0)
            if (
                self.script[i] and self.script[i][0][0] == "ring"
            ):  # the replay is over: its saved ring
                self.tokens[i] = self.voice.ring
                self.script[i].pop(0)
        return self._emit(rows, outputs)

    def _emit(
        self, rows: Sequence[int], outputs: dict[int, np.ndarray | None]
    ) -> dict[int, list[ModelEvent]]:
        valid = [i for i in rows if outputs[i] is not None]
        tok = np.zeros((self.batch_size, self.K), dtype=np.int64)
        for i in valid:
            tok[i] = outputs[i]
        pcm = None
        if valid:
            audio = torch.from_numpy(tok[:, 1 : 1 + AUDIO_STREAM, None]).to(self.device)
            with torch.no_grad():
                pcm = self.decode(audio, valid)
        return self.events(rows, tok, valid, pcm)

    def warm_up(self, steps: int = 3) -> None:
        """A few batched steps of every kind on every row, then fresh rows: the first steps compile
        and capture graphs, which belong to the load."""
        every = list(range(self.batch_size))
        silence = {i: np.zeros(self.frame_n, np.float32) for i in every}
        for i in every:
            self.start_row(i, None, 0)
        for _ in range(steps):
            self.step({}, every)
        # conversation steps on rings of valid codes (a prompt's first outputs are start tokens,
        # which Mimi cannot decode: a session only hears its row after the whole prompt)
        self.tokens[:, 1:] = 0
        self.tokens[:, 0] = TEXT_PAD
        self.given[:] = False
        self.position[:] = self.max_delay + 1
        for _ in range(steps):
            self.step(silence, [])
        for i in every:
            self.script[i] = []
            self.needs_reset[i] = False
            self.logs[i] = None
        self._reset_rows = list(every)
        if str(self.device).startswith("cuda"):
            torch.cuda.synchronize()


def load_voice_prompt(
    path: str, mimi_factory: Any, device: str, sample_rate: int, frame_n: int
) -> VoicePrompt:
    """A voice prompt file: `.pt` (the fork's saved embeddings and token ring) or audio (encoded
    here with a Mimi of its own, frame by frame after loudness normalisation to -24 LUFS, as the
    fork does)."""
    name = os.path.basename(path)
    if path.endswith(".pt"):
        saved = torch.load(path, map_location="cpu")
        emb = saved["embeddings"]
        return VoicePrompt(
            name,
            embeddings=emb.reshape(emb.shape[0], -1),
            ring=saved["cache"][0].numpy().astype(np.int64),
        )
    pcm, sr = sphn.read(path)
    pcm = sphn.resample(pcm, src_sample_rate=sr, dst_sample_rate=sample_rate)
    mono = pcm[0] if pcm.ndim == 2 else pcm
    meter = pyloudnorm.Meter(sample_rate)
    mono = pyloudnorm.normalize.loudness(mono, meter.integrated_loudness(mono), -24.0)
    n = -(-len(mono) // frame_n)
    padded = np.zeros(n * frame_n)
    padded[: len(mono)] = mono
    mimi = mimi_factory()
    codes = []
    with torch.no_grad(), mimi.streaming(1):
        for k in range(n):
            x = torch.tensor(
                padded[k * frame_n : (k + 1) * frame_n], dtype=torch.float32, device=device
            )[None, None]
            codes.append(mimi.encode(x)[0, :AUDIO_STREAM, 0].cpu().numpy())
    return VoicePrompt(name, codes=np.stack(codes).astype(np.int64))


# The LM of PersonaPlex 7B (personaplex-7b-v1) in kyutai's LMModel terms: Moshi 7B's layout with a
# depth transformer that generates all 16 audio streams (NVIDIA/personaplex, moshi/models/loaders.py).
PERSONAPLEX_7B = {
    "dim": 4096,
    "text_card": 32000,
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
    "depformer_dim_feedforward": 4224,
    "depformer_num_heads": 16,
    "depformer_num_layers": 6,
    "depformer_layer_scale": None,
    "depformer_multi_linear": True,
    "depformer_context": 8,
    "depformer_max_period": 10000,
    "depformer_gating": "silu",
    "depformer_pos_emb": "none",
    "depformer_weights_per_step": True,
    "delays": [0, 0, 1, 1, 1, 1, 1, 1, 1, 0, 1, 1, 1, 1, 1, 1, 1],
}
# per-codebook modules the fork fills for codebooks 8-15 from 0-7 when a checkpoint lacks them
PER_CODEBOOK = re.compile(r"(^|\.)(gating|linears|depformer_in|depformer_emb)\.(\d+)\.")
STEP_PROJECTION = re.compile(r"^(depformer\..*self_attn)\.(in|out)_projs\.(\d+)\.weight$")


def complete_like_the_fork(
    state: dict[str, torch.Tensor], want: dict[str, torch.Tensor]
) -> list[str]:
    """Fill what a PersonaPlex checkpoint may lack, as NVIDIA's loader does before it loads one:
    depth-transformer attention projections with fewer steps than the model repeat their steps,
    and per-codebook weights of codebooks 8-15 that are missing are those of codebook k - 8.
    `state` is in the fork's layout (one stacked projection per attention), `want` kyutai's
    state dict of the model. Returns what was filled; anything else missing stays missing."""
    filled: list[str] = []
    steps: dict[tuple[str, str], list[torch.Tensor]] = {}
    for key, value in want.items():
        m = STEP_PROJECTION.match(key)
        if m:
            steps.setdefault((m.group(1), m.group(2)), []).append(value)
    for (prefix, kind), parts in steps.items():
        key = f"{prefix}.in_proj_weight" if kind == "in" else f"{prefix}.out_proj.weight"
        rows = sum(p.shape[0] for p in parts)
        have = state.get(key)
        if have is not None and have.shape[0] < rows and rows % have.shape[0] == 0:
            state[key] = torch.cat([have] * (rows // have.shape[0]), dim=0)
            filled.append(key)
    for key in want:
        if key in state or STEP_PROJECTION.match(key):
            continue
        m = PER_CODEBOOK.search(key)
        if m and int(m.group(3)) >= AUDIO_STREAM:
            source = key[: m.start(3)] + str(int(m.group(3)) - AUDIO_STREAM) + key[m.end(3) :]
            if source in state:
                state[key] = state[source]
                filled.append(key)
    return filled


def load_lm(path: str, lm_kwargs: dict[str, Any], device: str, dtype: torch.dtype) -> Any:
    """kyutai's LMModel with a PersonaPlex checkpoint's weights (completed as the fork does)."""
    kwargs = {
        k: v for k, v in lm_kwargs.items() if k != "depformer_causal"
    }  # (a key kyutai dropped)
    model = LMModel(device=torch.device("meta"), dtype=dtype, **kwargs)
    state = load_file(path, device="cpu")
    complete_like_the_fork(state, model.state_dict())
    state = {
        k: v.to(device=device, dtype=dtype if v.is_floating_point() else v.dtype)
        for k, v in state.items()
    }
    model.load_state_dict(state, strict=True, assign=True)
    return model.eval()
