"""Whisper through transformers: word times from the ASR pipeline's `return_timestamps="word"`.

Word times are transformers' own: dynamic time warping over the cross-attention heads listed in
the checkpoint's `generation_config.alignment_heads` (the OpenAI method). A checkpoint without
them (most fine-tunes) cannot give word times and is refused at load. Each segment is at most
30 s (Whisper's window), so the pipeline never runs its own long-form chunking.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from fdeval.asr import _hf
from fdeval.asr.base import (
    SAMPLE_RATE,
    ASRBackend,
    ASRUnavailableError,
    Segmentation,
    TimedWord,
)
from fdeval.errors import ConfigError


class WhisperASR(ASRBackend):
    """OpenAI Whisper (any transformers Whisper checkpoint with alignment heads).

    `model` is a hub id or a local folder; `revision` a hub branch, tag or commit (pin a commit
    for reproducible runs); `local_files_only` never touches the network. `device` "auto" picks
    cuda when available, else cpu; `dtype` "auto" is float16 on a GPU and float32 on the CPU.
    `language` (a code such as "en" or a name; None: detected per segment) and task "transcribe"
    are forced on multilingual checkpoints and ignored by English-only ones. `batch_size`
    segments go through the model at once. Loading happens on first use.
    """

    max_input_s = 30.0

    def __init__(
        self,
        model: str = "openai/whisper-large-v3",
        revision: str | None = None,
        device: str = "auto",
        dtype: str = "auto",
        batch_size: int = 8,
        language: str | None = "en",
        local_files_only: bool = False,
        num_beams: int = 1,
        max_new_tokens: int | None = None,
        segmentation: Segmentation | Mapping[str, Any] | None = None,
        name: str = "whisper",
    ):
        super().__init__(segmentation)
        if int(batch_size) < 1:
            raise ConfigError(f"asr.batch_size: must be >= 1, got {batch_size!r}")
        if int(num_beams) < 1:
            raise ConfigError(f"asr.num_beams: must be >= 1, got {num_beams!r}")
        if max_new_tokens is not None and not 1 <= int(max_new_tokens) <= 444:
            raise ConfigError(
                f"asr.max_new_tokens: must be in [1, 444] (Whisper's 448-token window less its "
                f"prompt) or null, got {max_new_tokens!r}"
            )
        self.name, self.model, self.revision = str(name), str(model), revision
        self.device, self.dtype = str(device), _hf.check_dtype(dtype)
        self.batch_size, self.num_beams = int(batch_size), int(num_beams)
        self.max_new_tokens = None if max_new_tokens is None else int(max_new_tokens)
        self.language = None if language in (None, "", "auto") else str(language)
        self.local_files_only = bool(local_files_only)
        self.id = f"{self.name}:{self.model}" + (f"@{self.revision}" if self.revision else "")
        self._pipe = None
        self._multilingual = True
        self.runtime: dict | None = (
            None  # what was loaded (versions, device, commit), after first use
        )

    def identity(self) -> dict:
        return {
            "backend": "whisper",
            "name": self.name,
            "model": self.model,
            "revision": self.revision,
            "dtype": self.dtype,
            "language": self.language,
            "task": "transcribe",
            "num_beams": self.num_beams,
            "max_new_tokens": self.max_new_tokens,
            "word_times": "transformers cross-attention DTW",
            **self.settings(),
        }

    def _load(self):
        if self._pipe is not None:
            return self._pipe
        torch, transformers = _hf.require("WhisperASR")
        from transformers import WhisperForConditionalGeneration, WhisperProcessor, pipeline

        device = _hf.resolve_device(torch, self.device)
        dtype = _hf.resolve_dtype(torch, self.dtype, device, "float16")
        processor, model = _hf.load_pretrained(
            "Whisper model",
            WhisperProcessor,
            WhisperForConditionalGeneration,
            self.model,
            self.revision,
            self.local_files_only,
            device,
            dtype,
        )
        gc = model.generation_config
        if not getattr(gc, "alignment_heads", None):
            raise ASRUnavailableError(
                f"{self.model!r} has no generation_config.alignment_heads: Whisper word "
                "times need them (use an OpenAI checkpoint or add its heads)"
            )
        self._multilingual = bool(getattr(gc, "is_multilingual", True))
        tokenizer = processor.tokenizer
        if tokenizer.pad_token is None:  # batching pads the generated ids
            tokenizer.pad_token = tokenizer.eos_token
        self._pipe = pipeline(
            "automatic-speech-recognition",
            model=model,
            tokenizer=tokenizer,
            feature_extractor=processor.feature_extractor,
            device=device,
            dtype=dtype,
        )
        self.runtime = _hf.runtime(torch, transformers, model, device)
        return self._pipe

    def recognize(self, segments: list[np.ndarray]) -> list[list[TimedWord]]:
        if not segments:
            return []
        pipe = self._load()
        generate: dict[str, Any] = {"num_beams": self.num_beams}
        if self._multilingual:
            generate["task"] = "transcribe"
            if self.language is not None:
                generate["language"] = self.language
        if self.max_new_tokens is not None:
            generate["max_new_tokens"] = self.max_new_tokens
        inputs = [
            {"raw": np.asarray(s, dtype=np.float32), "sampling_rate": SAMPLE_RATE} for s in segments
        ]
        outputs = pipe(
            inputs, batch_size=self.batch_size, return_timestamps="word", generate_kwargs=generate
        )
        return [
            [TimedWord(c["text"], *c["timestamp"]) for c in out.get("chunks", [])]
            for out in outputs
        ]
