"""Calling language models: a cached, retrying client for the Anthropic Messages API and for
OpenAI-compatible chat-completions servers (vLLM, SGLang, OpenAI; ``backend=``).

``LLMClient(model, temperature, max_tokens, cache_dir, ...).complete(system, prompt)`` returns an
:class:`LLMResponse`; failures raise :class:`LLMError` (one line). The ``anthropic`` package is
imported only when an Anthropic request actually goes out. See ``docs/llm-judge.md``.
"""

from fdeval.llm.client import (
    API_KEY_ENV,
    LLMClient,
    LLMConfigError,
    LLMError,
    LLMResponse,
    request_hash,
)

__all__ = ["API_KEY_ENV", "LLMClient", "LLMConfigError", "LLMError", "LLMResponse", "request_hash"]
