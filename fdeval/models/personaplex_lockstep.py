"""PersonaPlex in-process, batched: B sessions per forward pass, under the lockstep clock.

The server path (`fdeval.models.personaplex`) runs NVIDIA's server, one session at a time at wall
speed. This adapter loads the same checkpoint into kyutai's moshi modules in this process and
steps up to `batch_size` sessions together (`fdeval.models.lockstep`: the slot pool;
`fdeval.models.personaplex_rows`: the torch side, stepping the model as NVIDIA's server does).
Each session is conditioned as the server conditions it: its row first runs the voice prompt
(`voice_prompt`, a file of `voice_prompt_dir`: a `.pt` of saved embeddings, as PersonaPlex ships
its voices, or audio), silence, the instruction as the text prompt, and silence; those prompt
steps run in the row beside the other rows' conversation steps. A session without an instruction
runs no text prompt (NVIDIA's server fails on an empty one). With temperature 0 (greedy) a
session's tokens equal the server's on the same input, alone, in a batch and in a reused row
(tested against NVIDIA's server on a tiny random checkpoint where its fork is installed:
tests/models/test_personaplex_lockstep.py). Text rule `text_stream = "pieces"`, as the server.

Checkpoint: `hf_repo` (the files PersonaPlex's loader names, `voices.tgz` unpacked for the voice
prompts), or with `hf_repo: null` local files only: `moshi_weight`, `mimi_weight`, `tokenizer` and
`voice_prompt_dir` are required; `config_path` (a kyutai-style config.json: the LM's kwargs and
`mimi_config_name`) is for other architectures than PersonaPlex 7B, e.g. tests' tiny one.
`kv_cache_s` (the config passes `orchestrator.max_session_s`) and `max_text_prompt_tokens` size
each row's KV cache, as for `model=moshi_lockstep`.

It runs inside the moshi venv (kyutai's moshi, not NVIDIA's fork: `python -m fdeval.models.moshi_env
--with-fdeval`):

    .cache/moshi-venv/bin/python -m fdeval.launch model=personaplex_lockstep stage=run ...
"""

from __future__ import annotations

import json
import os
import tarfile
from pathlib import Path
from typing import Any

from fdeval.errors import ConfigError
from fdeval.files import file_sha256
from fdeval.models.lockstep import Rows
from fdeval.models.moshi import ADAPTER_VERSION, checkpoint_identity
from fdeval.models.moshi_lockstep import MoshiFamilyBatched, need

# the files of PersonaPlex's hub repository, as its loader names them
HUB_FILES = {
    "moshi_weight": "model.safetensors",
    "mimi_weight": "tokenizer-e351c8d8-checkpoint125.safetensors",
    "tokenizer": "tokenizer_spm_32k_3.model",
}
VOICES = "voices.tgz"


class PersonaPlexLockstep(MoshiFamilyBatched):
    """PersonaPlex in this process, `batch_size` sessions per forward pass."""

    def __init__(
        self,
        name: str = "personaplex-lockstep",
        batch_size: int = 8,
        turn_silence_s: float | None = 5.0,
        hf_repo: str | None = "nvidia/personaplex-7b-v1",
        config_path: str | None = None,
        moshi_weight: str | None = None,
        mimi_weight: str | None = None,
        tokenizer: str | None = None,
        voice_prompt: str = "NATF0.pt",
        voice_prompt_dir: str | None = None,
        device: str = "cuda",
        dtype: str = "bfloat16",
        temp: float = 0.8,
        temp_text: float = 0.7,
        top_k: int = 250,
        top_k_text: int = 25,
        seed: int = 42424242,
        torch_threads: int | None = None,
        kv_cache_s: float | None = None,
        max_text_prompt_tokens: int = 512,
        log_tokens: bool = False,
    ):
        super().__init__(
            name,
            batch_size,
            turn_silence_s,
            hf_repo,
            config_path,
            moshi_weight,
            mimi_weight,
            tokenizer,
            device,
            dtype,
            {"temp": temp, "temp_text": temp_text, "top_k": top_k, "top_k_text": top_k_text},
            seed,
            torch_threads,
            kv_cache_s,
            log_tokens,
        )
        self.voice_prompt, self.voice_prompt_dir = voice_prompt, voice_prompt_dir
        if int(max_text_prompt_tokens) < 0:
            raise ConfigError(
                f"model.max_text_prompt_tokens: must be >= 0, got {max_text_prompt_tokens}"
            )
        self.max_text_prompt_tokens = int(max_text_prompt_tokens)
        if not hf_repo:
            for key in ("moshi_weight", "mimi_weight", "tokenizer", "voice_prompt_dir"):
                if not getattr(self, key):
                    raise ConfigError(
                        f"model.{key}: required when model.hf_repo is null (local files, no model hub)"
                    )
        if voice_prompt_dir is not None:
            path = Path(voice_prompt_dir) / voice_prompt
            if not path.is_file():
                raise ConfigError(
                    f"model.voice_prompt: no such file: {path} (model.voice_prompt_dir)"
                )

    def identity(self) -> dict[str, Any]:
        voice = None
        if (
            self.voice_prompt_dir is not None
        ):  # (from the hub: its revision, in checkpoint_identity)
            path = Path(self.voice_prompt_dir) / self.voice_prompt
            voice = {"path": str(path), "sha256": file_sha256(path)}
        return {
            "name": self.name,
            "kind": "personaplex-lockstep",
            "adapter_version": ADAPTER_VERSION,
            **checkpoint_identity(self),
            "voice_prompt": self.voice_prompt,
            "voice_prompt_file": voice,
            "dtype": self.dtype,
            "device": self.device,
            "decoding": self.decoding,
            "batch_size": self.batch_size,
            "seed": self.seed,
            "turn_silence_s": self.turn_silence_s,
        }

    def _files(self) -> dict[str, str]:
        """The checkpoint's files, local or fetched from `hf_repo` (as NVIDIA's loader fetches them)."""
        files = {key: getattr(self, key) for key in HUB_FILES}
        voices = self.voice_prompt_dir
        if self.hf_repo:
            hub = need("huggingface_hub", self.name)
            for key, name in HUB_FILES.items():
                files[key] = files[key] or hub.hf_hub_download(self.hf_repo, name)
            if voices is None:
                archive = Path(hub.hf_hub_download(self.hf_repo, VOICES))
                voices = str(archive.parent / "voices")
                if not Path(voices).is_dir():
                    with tarfile.open(archive) as tar:
                        tar.extractall(archive.parent, filter="data")
        files["voice"] = os.path.join(str(voices), self.voice_prompt)
        return files

    def _load(self) -> Rows:
        torch = self.torch_setup()
        rows = need("fdeval.models.personaplex_rows", self.name)
        loaders = need("moshi.models.loaders", self.name)
        sentencepiece = need("sentencepiece", self.name)
        files = self._files()
        lm_kwargs, mimi_config = dict(rows.PERSONAPLEX_7B), None
        if self.config_path:
            raw = json.loads(Path(self.config_path).read_text())
            lm_kwargs = {k: v for k, v in raw.items() if k not in CONFIG_KEYS}
            if raw.get("mimi_config_name"):
                ref = str(raw["mimi_config_name"]).removeprefix("file://")
                ref = (
                    ref
                    if os.path.isabs(ref)
                    else os.path.join(os.path.dirname(self.config_path), ref)
                )
                mimi_config = json.loads(Path(ref).read_text())

        def mimi():  # PersonaPlex uses 8 of Mimi's codebooks
            return loaders.get_mimi(
                files["mimi_weight"], mimi_config, device=self.device, num_codebooks=8
            )

        codec = mimi()
        lm = rows.load_lm(files["moshi_weight"], lm_kwargs, self.device, getattr(torch, self.dtype))
        frame_n = int(codec.sample_rate / codec.frame_rate)
        voice = rows.load_voice_prompt(
            files["voice"], mimi, self.device, int(codec.sample_rate), frame_n
        )
        tokenizer = sentencepiece.SentencePieceProcessor(str(files["tokenizer"]))
        return rows.PersonaPlexRows(
            lm,
            codec,
            tokenizer,
            self.batch_size,
            self.device,
            voice,
            self.decoding,
            self.kv_steps,
            self.max_text_prompt_tokens,
            self.log_tokens,
        )


# keys of a kyutai-style config.json that are not the LM's kwargs
CONFIG_KEYS = (
    "model_type",
    "moshi_name",
    "mimi_name",
    "mimi_config_name",
    "tokenizer_name",
    "lora_name",
    "lm_gen_config",
    "tts_config",
    "stt_config",
    "model_id",
)
