"""Randomly initialised tiny Whisper and Qwen3-ASR checkpoints, built offline for the ASR tests.

No hub, no downloaded files: every piece is constructed here and written with save_pretrained,
then loaded back by the backends through from_pretrained(local folder, local_files_only=True),
the same code path real checkpoints take.

Tokenizers: transformers ships no vocabulary files, so each tokenizer is a byte-level BPE whose
vocabulary is the 256 byte symbols of `tokenizers.pre_tokenizers.ByteLevel.alphabet()` and no
merges (every byte is a token), plus the special tokens each model's code looks up by name:
- Whisper: <|endoftext|>, <|startoftranscript|>, one <|xx|> per language in transformers' own
  LANGUAGES table (contiguous, as WhisperTokenizer.prefix_tokens expects), <|translate|>,
  <|transcribe|>, <|startoflm|>, <|startofprev|>, <|nospeech|>, <|notimestamps|>, then the 1501
  timestamp tokens <|0.00|> ... <|30.00|>; the generation config carries the ids Whisper's
  generate() needs (lang_to_id, task_to_id, no_timestamps_token_id, alignment_heads, ...).
- Qwen3-ASR: the ChatML and audio tokens (<|im_start|>, <|im_end|>, <|audio_start|>,
  <|audio_pad|>, <|audio_end|>) and <asr_text>, <timestamp>; chat templates written here that
  render the prompt layout of the transformers-format checkpoints (system, user audio
  placeholder, assistant prefill; aligner: audio then words joined by <timestamp> pairs).

The output text of random weights is garbage and no test reads it. One thing is rigged: the tiny
Qwen3-ASR's LM head is zero and vocabulary id 0 is the symbol for "a ", so greedy decoding emits
"a a a ..." (all logits tie, argmax takes id 0) and the forced aligner always has words to align;
the aligner itself is random.
"""

from __future__ import annotations

from pathlib import Path


def _byte_vocab(first: tuple[str, ...] = ()) -> dict[str, int]:
    from tokenizers.pre_tokenizers import ByteLevel

    symbols = list(first) + [c for c in sorted(ByteLevel.alphabet()) if c not in first]
    return {s: i for i, s in enumerate(symbols)}


def build_tiny_whisper(out: Path, seed: int = 0) -> Path:
    import torch
    from transformers import (
        GenerationConfig,
        WhisperConfig,
        WhisperFeatureExtractor,
        WhisperForConditionalGeneration,
        WhisperProcessor,
        WhisperTokenizer,
    )
    from transformers.models.whisper.tokenization_whisper import LANGUAGES

    tok = WhisperTokenizer(vocab=_byte_vocab(), merges=[], pad_token="<|endoftext|>")
    specials = (
        ["<|startoftranscript|>"]
        + [f"<|{code}|>" for code in LANGUAGES]
        + [
            "<|translate|>",
            "<|transcribe|>",
            "<|startoflm|>",
            "<|startofprev|>",
            "<|nospeech|>",
            "<|notimestamps|>",
        ]
    )
    tok.add_special_tokens({"extra_special_tokens": specials})
    tok.add_tokens([f"<|{i * 0.02:.2f}|>" for i in range(1501)])
    ids = tok.convert_tokens_to_ids
    eot, sot = ids("<|endoftext|>"), ids("<|startoftranscript|>")
    config = WhisperConfig(
        vocab_size=len(tok),
        num_mel_bins=80,
        d_model=64,
        encoder_layers=2,
        decoder_layers=2,
        encoder_attention_heads=2,
        decoder_attention_heads=2,
        encoder_ffn_dim=128,
        decoder_ffn_dim=128,
        max_source_positions=1500,
        max_target_positions=448,
        pad_token_id=eot,
        bos_token_id=eot,
        eos_token_id=eot,
        decoder_start_token_id=sot,
    )
    torch.manual_seed(seed)
    model = WhisperForConditionalGeneration(config).eval()
    model.generation_config = GenerationConfig(
        decoder_start_token_id=sot,
        bos_token_id=eot,
        eos_token_id=eot,
        pad_token_id=eot,
        max_length=448,
        is_multilingual=True,
        lang_to_id={f"<|{c}|>": ids(f"<|{c}|>") for c in LANGUAGES},
        task_to_id={"transcribe": ids("<|transcribe|>"), "translate": ids("<|translate|>")},
        no_timestamps_token_id=ids("<|notimestamps|>"),
        prev_sot_token_id=ids("<|startofprev|>"),
        alignment_heads=[[1, 0], [1, 1]],
        begin_suppress_tokens=[eot],
        max_initial_timestamp_index=50,
    )
    processor = WhisperProcessor(
        feature_extractor=WhisperFeatureExtractor(feature_size=80), tokenizer=tok
    )
    model.save_pretrained(out)
    processor.save_pretrained(out)
    return out


ASR_TEMPLATE = (
    "{%- set ns = namespace(system='') -%}"
    "{%- for m in messages if m.role == 'system' -%}"
    "{%- if m.content is string %}{% set ns.system = ns.system + m.content %}"
    "{%- else %}{% for c in m.content if c.type == 'text' %}{% set ns.system = ns.system + c.text %}{% endfor %}"
    "{%- endif -%}{%- endfor -%}"
    "<|im_start|>system\n{{ ns.system }}<|im_end|>\n<|im_start|>user\n"
    "{%- for m in messages if m.role == 'user' %}{% for c in m.content if c.type == 'audio' -%}"
    "<|audio_start|><|audio_pad|><|audio_end|>{%- endfor %}{% endfor -%}"
    "<|im_end|>\n"
    "{%- for m in messages if m.role == 'assistant' -%}<|im_start|>assistant\n"
    "{%- for c in m.content if c.type == 'text' %}{{ c.text }}{% endfor %}<|im_end|>\n{%- endfor -%}"
    "{%- if add_generation_prompt %}<|im_start|>assistant\n{% endif -%}"
)
ALIGNER_TEMPLATE = (
    "{%- set ns = namespace(words=[]) -%}"
    "{%- for m in messages %}{% for c in m.content -%}"
    "{%- if c.type == 'audio' %}<|audio_start|><|audio_pad|><|audio_end|>"
    "{%- elif c.type == 'text' %}{% set ns.words = ns.words + [c.text] %}{% endif -%}"
    "{%- endfor %}{% endfor -%}"
    "{{ ns.words | join('<timestamp><timestamp>') }}<timestamp><timestamp>"
)


def build_tiny_qwen3(out: Path, seed: int = 0, num_labels: int = 400) -> tuple[Path, Path]:
    """(asr folder, aligner folder)."""
    import torch
    from transformers import (
        GenerationConfig,
        Qwen2Tokenizer,
        Qwen3ASRConfig,
        Qwen3ASRFeatureExtractor,
        Qwen3ASRForConditionalGeneration,
        Qwen3ASRForTokenClassification,
        Qwen3ASRProcessor,
    )

    space = "\u0120"  # byte-level symbol of " "
    tok = Qwen2Tokenizer(
        vocab=_byte_vocab(first=("a" + space,)),
        merges=[],
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        audio_token="<|audio_pad|>",
        audio_bos_token="<|audio_start|>",
        audio_eos_token="<|audio_end|>",
    )
    tok.add_special_tokens(
        {
            "extra_special_tokens": [
                "<|endoftext|>",
                "<|im_start|>",
                "<|im_end|>",
                "<|audio_start|>",
                "<|audio_end|>",
                "<|audio_pad|>",
            ]
        },
        replace_extra_special_tokens=False,
    )
    tok.add_tokens(["<asr_text>", "<timestamp>"])
    ids = tok.convert_tokens_to_ids
    eos = [ids("<|endoftext|>"), ids("<|im_end|>")]
    text = {
        "model_type": "qwen3",
        "vocab_size": len(tok),
        "hidden_size": 32,
        "intermediate_size": 64,
        "num_hidden_layers": 1,
        "num_attention_heads": 2,
        "num_key_value_heads": 1,
        "head_dim": 16,
        "max_position_embeddings": 4096,
        "tie_word_embeddings": False,
    }
    audio = {
        "num_mel_bins": 128,
        "encoder_layers": 1,
        "encoder_attention_heads": 2,
        "encoder_ffn_dim": 64,
        "d_model": 32,
        "output_dim": 32,
        "downsample_hidden_size": 8,
        "n_window": 50,
        "n_window_infer": 800,
    }
    common = {
        "audio_config": audio,
        "text_config": text,
        "audio_token_id": ids("<|audio_pad|>"),
        "timestamp_token_id": ids("<timestamp>"),
        "pad_token_id": ids("<|endoftext|>"),
        "eos_token_id": eos,
        "tie_word_embeddings": False,
    }
    torch.manual_seed(seed)
    asr = Qwen3ASRForConditionalGeneration(Qwen3ASRConfig(**common)).eval()
    with torch.no_grad():
        asr.lm_head.weight.zero_()  # greedy decoding then emits id 0 ("a ") every step
    asr.generation_config = GenerationConfig(
        eos_token_id=eos, pad_token_id=ids("<|endoftext|>"), do_sample=False, max_new_tokens=16
    )
    aligner = Qwen3ASRForTokenClassification(Qwen3ASRConfig(**common, num_labels=num_labels)).eval()
    features = Qwen3ASRFeatureExtractor()
    asr_dir, aligner_dir = out / "asr", out / "aligner"
    Qwen3ASRProcessor(
        feature_extractor=features, tokenizer=tok, chat_template=ASR_TEMPLATE
    ).save_pretrained(asr_dir)
    asr.save_pretrained(asr_dir)
    Qwen3ASRProcessor(
        feature_extractor=features, tokenizer=tok, chat_template=ALIGNER_TEMPLATE
    ).save_pretrained(aligner_dir)
    aligner.save_pretrained(aligner_dir)
    return asr_dir, aligner_dir
