"""Qwen3-ASR with Qwen3-ForcedAligner word times, through transformers' native Qwen3-ASR support.

This is the pairing the Instruct-FD paper uses (Qwen3-ASR-1.7B + Qwen3-ForcedAligner-0.6B, its
section 2.4). transformers (>= 5.13) runs both: `Qwen3ASRForConditionalGeneration` transcribes
(prompt built by `Qwen3ASRProcessor.apply_transcription_request`, the language forced when
given), and `Qwen3ASRForTokenClassification` aligns the transcript to the audio in one forward
pass (`prepare_forced_aligner_inputs` -> logits -> `decode_forced_alignment`): a start and an end
class per word, 80 ms per class, made monotonic by the processor.

Checkpoints: the transformers-format conversions `Qwen/Qwen3-ASR-1.7B-hf` and
`Qwen/Qwen3-ForcedAligner-0.6B-hf` (the same weights as `Qwen/Qwen3-ASR-1.7B` and
`Qwen/Qwen3-ForcedAligner-0.6B`, which are in the layout of Qwen's own `qwen-asr` package; that
package pins transformers 4.57 and is not used here).

The aligner sees words without punctuation (it keeps letters, digits and apostrophes); where
each whitespace token of the transcript maps to exactly one aligned unit, the token is reported
as written ("Hello," keeps its comma), otherwise the aligner's units are reported.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from fdeval.asr import _hf
from fdeval.asr.base import ASRBackend, ASRUnavailableError, Segmentation, TimedWord
from fdeval.errors import ConfigError


class Qwen3ASR(ASRBackend):
    """Qwen3-ASR transcription + Qwen3-ForcedAligner word times.

    `model` / `aligner` are hub ids or local folders, `revision` / `aligner_revision` their hub
    revisions; `local_files_only` never touches the network. `device` "auto" picks cuda when
    available; `dtype` "auto" is bfloat16 on a GPU (the checkpoints' dtype), float32 on the CPU.
    `language` ("en", "English", ...; None: detected) is forced in the prompt and tells the
    aligner how to split words; `context` is the optional system prompt (hot words).
    `max_new_tokens` bounds each segment's transcript (30 s of fast speech is ~150 tokens).
    """

    max_input_s = 30.0

    def __init__(
        self,
        model: str = "Qwen/Qwen3-ASR-1.7B-hf",
        aligner: str = "Qwen/Qwen3-ForcedAligner-0.6B-hf",
        revision: str | None = None,
        aligner_revision: str | None = None,
        device: str = "auto",
        dtype: str = "auto",
        batch_size: int = 8,
        language: str | None = "en",
        context: str = "",
        max_new_tokens: int = 256,
        local_files_only: bool = False,
        segmentation: Segmentation | Mapping[str, Any] | None = None,
        name: str = "qwen3",
    ):
        super().__init__(segmentation)
        if int(batch_size) < 1:
            raise ConfigError(f"asr.batch_size: must be >= 1, got {batch_size!r}")
        if int(max_new_tokens) < 1:
            raise ConfigError(f"asr.max_new_tokens: must be >= 1, got {max_new_tokens!r}")
        self.name, self.model, self.aligner = str(name), str(model), str(aligner)
        self.revision, self.aligner_revision = revision, aligner_revision
        self.device, self.dtype = str(device), _hf.check_dtype(dtype)
        self.batch_size, self.max_new_tokens = int(batch_size), int(max_new_tokens)
        self.language = None if language in (None, "", "auto") else str(language)
        self.context = str(context or "")
        self.local_files_only = bool(local_files_only)
        self.id = f"{self.name}:{self.model}" + (f"@{self.revision}" if self.revision else "")
        self._loaded: tuple | None = None
        self.runtime: dict | None = (
            None  # what was loaded (versions, device, commits), after first use
        )

    def identity(self) -> dict:
        return {
            "backend": "qwen3",
            "name": self.name,
            "model": self.model,
            "revision": self.revision,
            "aligner": self.aligner,
            "aligner_revision": self.aligner_revision,
            "dtype": self.dtype,
            "language": self.language,
            "context": self.context,
            "max_new_tokens": self.max_new_tokens,
            "decoding": "greedy",
            "word_times": "Qwen3-ForcedAligner",
            **self.settings(),
        }

    # -- loading ------------------------------------------------------------------------------
    def _load(self) -> tuple:
        if self._loaded is not None:
            return self._loaded
        torch, transformers = _hf.require("Qwen3ASR")
        from transformers import (
            AutoProcessor,
            Qwen3ASRForConditionalGeneration,
            Qwen3ASRForTokenClassification,
        )

        self._check_language()
        device = _hf.resolve_device(torch, self.device)
        dtype = _hf.resolve_dtype(torch, self.dtype, device, "bfloat16")
        parts = []
        for what, name, revision, cls in (
            ("Qwen3-ASR model", self.model, self.revision, Qwen3ASRForConditionalGeneration),
            (
                "Qwen3 forced aligner",
                self.aligner,
                self.aligner_revision,
                Qwen3ASRForTokenClassification,
            ),
        ):
            processor, net = _hf.load_pretrained(
                what, AutoProcessor, cls, name, revision, self.local_files_only, device, dtype
            )
            if not hasattr(processor, "apply_transcription_request"):
                raise ASRUnavailableError(
                    f"{name!r}: its processor is {type(processor).__name__}, "
                    "not a Qwen3ASRProcessor (a transformers-format Qwen3-ASR checkpoint)"
                )
            parts += [processor, net]
        asr_proc, asr_model, fa_proc, fa_model = parts
        self._loaded = (torch, device, asr_proc, asr_model, fa_proc, fa_model)
        self.runtime = {
            **_hf.runtime(torch, transformers, asr_model, device),
            "aligner_commit": getattr(fa_model.config, "_commit_hash", None),
        }
        return self._loaded

    def _check_language(self) -> None:
        if self.language is None:
            return
        try:
            from transformers.models.qwen3_asr.processing_qwen3_asr import (
                FORCED_ALIGNER_LANGUAGES,
                LANGUAGE_CODE_TO_NAME,
            )
        except ImportError:  # names moved: the processor validates on first use instead
            return
        if _language_name(self.language, LANGUAGE_CODE_TO_NAME) not in FORCED_ALIGNER_LANGUAGES:
            raise ConfigError(
                f"asr.language: {self.language!r} is not one the forced aligner supports: "
                f"{sorted(FORCED_ALIGNER_LANGUAGES)}"
            )

    # -- recognition --------------------------------------------------------------------------
    def recognize(self, segments: list[np.ndarray]) -> list[list[TimedWord]]:
        if not segments:
            return []
        texts, languages = self.transcribe_texts(segments)
        return self.align(segments, texts, languages)

    def transcribe_texts(self, segments: list[np.ndarray]) -> tuple[list[str], list[str | None]]:
        """(transcript, language) per 16 kHz segment: Qwen3-ASR, greedy, `batch_size` at a time."""
        torch, device, proc, model, _, _ = self._load()
        texts: list[str] = []
        languages: list[str | None] = []
        for i in range(0, len(segments), self.batch_size):
            batch = [np.asarray(s, dtype=np.float32) for s in segments[i : i + self.batch_size]]
            inputs = proc.apply_transcription_request(
                audio=batch,
                language=self.language,
                prompt=[self.context] * len(batch) if self.context else None,
            )
            inputs = self._to(inputs, device, model.dtype)
            with torch.inference_mode():
                out = model.generate(**inputs, max_new_tokens=self.max_new_tokens, do_sample=False)
            seqs = out.sequences if hasattr(out, "sequences") else out
            for ids in seqs[:, inputs["input_ids"].shape[1] :]:
                parsed = proc.decode(ids, return_format="parsed")
                texts.append(str(parsed.get("transcription") or "").strip())
                languages.append(self.language or parsed.get("language"))
        return texts, languages

    def align(
        self,
        segments: list[np.ndarray],
        texts: list[str],
        languages: list[str | None] | None = None,
    ) -> list[list[TimedWord]]:
        """Word times of known `texts` in their 16 kHz `segments` (Qwen3-ForcedAligner); usable on
        its own, e.g. to time a model's own text stream against its audio."""
        if len(texts) != len(segments):
            raise ValueError(f"align: {len(segments)} segments but {len(texts)} texts")
        languages = list(languages) if languages is not None else [self.language] * len(texts)
        out: list[list[TimedWord]] = [[] for _ in segments]
        todo = [i for i, t in enumerate(texts) if t.strip()]
        if not todo:
            return out
        torch, device, _, _, proc, model = self._load()
        for k in range(0, len(todo), self.batch_size):
            idx = todo[k : k + self.batch_size]
            batch = [np.asarray(segments[i], dtype=np.float32) for i in idx]
            lang = [self._aligner_language(languages[i]) for i in idx]
            inputs, word_lists = proc.prepare_forced_aligner_inputs(
                audio=batch, transcript=[texts[i] for i in idx], language=lang
            )
            inputs = self._to(inputs, device, model.dtype)
            with torch.inference_mode():
                logits = model(**inputs).logits
            items = proc.decode_forced_alignment(
                logits, inputs["input_ids"], word_lists, model.config.timestamp_token_id
            )
            for i, lng, units in zip(idx, lang, items):
                out[i] = _as_written(
                    texts[i], units, lambda t, lng=lng: proc.split_words_for_alignment(t, lng)
                )
        return out

    def _aligner_language(self, language: str | None) -> str | None:
        """A language the aligner accepts (it refuses others; then split on whitespace as default)."""
        if language is None:
            return None
        try:
            from transformers.models.qwen3_asr.processing_qwen3_asr import (
                FORCED_ALIGNER_LANGUAGES,
                LANGUAGE_CODE_TO_NAME,
            )
        except ImportError:
            return language
        name = _language_name(language, LANGUAGE_CODE_TO_NAME)
        return name if name in FORCED_ALIGNER_LANGUAGES else None

    @staticmethod
    def _to(inputs, device, dtype):
        inputs = inputs.to(device)
        if "input_features" in inputs:
            inputs["input_features"] = inputs["input_features"].to(dtype)
        return inputs


def _language_name(language: str, code_to_name: dict[str, str]) -> str:
    """ "en" / "english" / "English" -> "English" (the names Qwen3-ASR's processor uses)."""
    return code_to_name.get(language.lower(), language.strip().capitalize())


def _as_written(text: str, units: list[dict], split) -> list[TimedWord]:
    """Aligned units back onto the transcript's whitespace tokens (punctuation kept) when each
    token maps to exactly one unit; the aligner's own units otherwise (e.g. CJK characters)."""
    timed = [TimedWord(str(u["text"]), u.get("start_time"), u.get("end_time")) for u in units]
    tokens = text.split()
    counts = [len(split(t)) for t in tokens]
    if sum(counts) != len(timed) or any(c > 1 for c in counts):
        return timed
    spoken = [t for t, c in zip(tokens, counts) if c == 1]
    return [TimedWord(t, u.start_s, u.end_s) for t, u in zip(spoken, timed)]
