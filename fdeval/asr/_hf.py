"""Lazy torch / transformers access for the ASR backends (the `asr` extra).

Nothing here imports torch at module import time: `fdeval.asr` imports, and its backends can be
configured and asked for `identity()`, on a machine without the extra; the first recognition
imports the packages and fails with the install command if they are missing.
"""

from __future__ import annotations

import importlib
from typing import Any

from fdeval.asr.base import INSTALL_HINT, ASRUnavailableError
from fdeval.errors import ConfigError

MIN_TRANSFORMERS = (5, 13)  # first release with Qwen3-ASR (Qwen3ASRForTokenClassification)
_DTYPES = {
    "float32": "float32",
    "fp32": "float32",
    "float16": "float16",
    "fp16": "float16",
    "half": "float16",
    "bfloat16": "bfloat16",
    "bf16": "bfloat16",
}


def require(backend: str) -> tuple[Any, Any]:
    """(torch, transformers), or ASRUnavailableError naming the install command."""
    try:
        torch = importlib.import_module("torch")
        transformers = importlib.import_module("transformers")
    except ImportError as e:
        raise ASRUnavailableError(
            f"{backend} needs torch and transformers (missing: {e.name or e}); "
            f"install the extra: {INSTALL_HINT}"
        ) from None
    version = tuple(int(p) for p in transformers.__version__.split(".")[:2] if p.isdigit())
    if version < MIN_TRANSFORMERS:
        raise ASRUnavailableError(
            f"{backend} needs transformers>={'.'.join(map(str, MIN_TRANSFORMERS))}, "
            f"found {transformers.__version__}; {INSTALL_HINT}"
        )
    return torch, transformers


def check_dtype(dtype: str) -> str:
    """Validate a dtype name at configuration time ("auto" or one of _DTYPES)."""
    if dtype != "auto" and str(dtype).lower() not in _DTYPES:
        raise ConfigError(
            f"asr.dtype: unknown dtype {dtype!r}; valid: auto, {', '.join(sorted(_DTYPES))}"
        )
    return str(dtype).lower()


def resolve_device(torch: Any, device: str) -> Any:
    """ "auto" -> cuda when available, else cpu; anything else as torch.device understands it."""
    if device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        return torch.device(device)
    except (RuntimeError, TypeError) as e:
        raise ConfigError(f"asr.device: {e}") from None


def resolve_dtype(torch: Any, dtype: str, device: Any, accelerator_default: str) -> Any:
    """ "auto" -> `accelerator_default` on a GPU, float32 on the CPU; else the named dtype."""
    name = check_dtype(dtype)
    if name == "auto":
        name = accelerator_default if device.type != "cpu" else "float32"
    return getattr(torch, _DTYPES[name])


def load_pretrained(
    what: str,
    processor_cls: Any,
    model_cls: Any,
    name: str,
    revision: str | None,
    local_files_only: bool,
    device: Any,
    dtype: Any,
) -> tuple[Any, Any]:
    """(processor, model in eval mode on `device`) from a hub id or folder; a failure is one
    ASRUnavailableError line naming what could not be loaded."""
    kw = {"revision": revision, "local_files_only": local_files_only}
    try:
        processor = processor_cls.from_pretrained(name, **kw)
        model = model_cls.from_pretrained(name, dtype=dtype, **kw)
    except (OSError, ValueError) as e:
        where = f"{name!r}" + (f" (revision {revision})" if revision else "")
        hint = (
            "; local_files_only=true: the weights must be in the Hugging Face cache or the name a local folder"
            if local_files_only
            else ""
        )
        first = str(e).splitlines()[0] if str(e) else ""
        raise ASRUnavailableError(
            f"cannot load {what} {where}: {type(e).__name__}: {first}{hint}"
        ) from None
    return processor, model.to(device).eval()


def runtime(torch: Any, transformers: Any, model: Any, device: Any) -> dict:
    """What was actually loaded: versions, device, dtype and the resolved hub commit (if any)."""
    return {
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "device": str(device),
        "dtype": str(model.dtype).replace("torch.", ""),
        "commit": getattr(model.config, "_commit_hash", None),
    }
