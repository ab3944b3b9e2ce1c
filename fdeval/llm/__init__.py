"""Calling hosted language models: a cached, retrying client for the Anthropic Messages API.

``LLMClient(model, temperature, max_tokens, cache_dir, ...).complete(system, prompt)`` returns an
:class:`LLMResponse`; failures raise :class:`LLMError` (one line). The ``anthropic`` package is
imported only when a request actually goes out. See ``docs/llm-judge.md``.
"""

from fdeval.llm.client import API_KEY_ENV, LLMClient, LLMConfigError, LLMError, LLMResponse, request_hash

__all__ = ["API_KEY_ENV", "LLMClient", "LLMConfigError", "LLMError", "LLMResponse", "request_hash"]
