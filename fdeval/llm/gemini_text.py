"""One text request to Gemini's ``generateContent`` (the Gemini API's REST form), standard library only.

:func:`post_generate` sends ``POST {endpoint}/models/{model}:generateContent`` with the key in the
``x-goog-api-key`` header and returns the answer as a :class:`~fdeval.llm.openai_chat.ChatAnswer`,
or raises :class:`~fdeval.llm.openai_chat.AttemptFailed`. The endpoint includes the API version
(default ``https://generativelanguage.googleapis.com/v1beta``, what the ``google-genai`` SDK calls).

Why not the ``google-genai`` SDK: the transport is the one :mod:`fdeval.llm.openai_chat` already
hardens (no redirects followed with the key, no proxy for a loopback endpoint, one retry loop in
:class:`fdeval.llm.client.LLMClient`), and a text request needs nothing else of the SDK. The wire
shapes are the SDK's: the test stand-in validates every request and answer against
``google.genai.types``.

Thinking models (Gemini 3) may return thought parts; only the non-thought text is the answer, and
their thinking counts against ``maxOutputTokens`` (raise ``max_tokens`` if answers come back cut:
the stop reason is then ``max_tokens``).
"""

from __future__ import annotations

import json
import urllib.parse
import urllib.request
from typing import Any

from fdeval.llm.openai_chat import AttemptFailed, ChatAnswer, post_json

DEFAULT_URL = "https://generativelanguage.googleapis.com/v1beta"
KEY_VARIABLES = ("GEMINI_API_KEY", "GOOGLE_API_KEY")  # the order google-genai reads them in
# Gemini's finish reasons -> the stop vocabulary of LLMResponse
_STOP = {"STOP": "end_turn", "MAX_TOKENS": "max_tokens"}


def generate_body(
    system: str,
    prompt: str,
    *,
    temperature: float | None,
    max_tokens: int,
    seed: int | None,
    top_p: float | None,
) -> dict[str, Any]:
    """The JSON body of one request: the system instruction, one user turn, the sampling settings
    that are set (None sends nothing)."""
    config: dict[str, Any] = {"maxOutputTokens": int(max_tokens)}
    for name, value in (("temperature", temperature), ("topP", top_p), ("seed", seed)):
        if value is not None:
            config[name] = value
    body: dict[str, Any] = {
        "contents": [{"role": "user", "parts": [{"text": prompt}]}],
        "generationConfig": config,
    }
    if system:
        body["systemInstruction"] = {"parts": [{"text": system}]}
    return body


def parse_generate(raw: bytes) -> ChatAnswer:
    """The answer in a ``GenerateContentResponse`` body; :class:`AttemptFailed` (malformed, or a
    prompt the service blocked: no candidate) otherwise."""
    try:
        body = json.loads(raw)
    except ValueError as e:
        raise AttemptFailed(f"malformed response: not JSON ({e})") from None
    if not isinstance(body, dict):
        raise AttemptFailed("malformed response: not a GenerateContentResponse")
    candidates = body.get("candidates")
    if not isinstance(candidates, list) or not candidates or not isinstance(candidates[0], dict):
        feedback = body.get("promptFeedback")
        blocked = feedback.get("blockReason") if isinstance(feedback, dict) else None
        raise AttemptFailed(
            f"no candidate in the answer (prompt blocked: {blocked})"
            if blocked
            else "malformed response: not a GenerateContentResponse (no candidates)"
        )
    first = candidates[0]
    content = first.get("content")
    parts = content.get("parts") if isinstance(content, dict) else None
    finish = first.get("finishReason")
    if not isinstance(parts, list):
        if finish in _STOP:  # e.g. every output token spent on thinking: an empty, cut answer
            parts = []
        else:
            raise AttemptFailed(
                f"malformed response: the first candidate has no content (finishReason {finish})"
            )
    texts = [p.get("text") for p in parts if isinstance(p, dict) and not p.get("thought")]
    if not all(isinstance(t, str) for t in texts):
        raise AttemptFailed("malformed response: a content part is not text")
    usage: dict[str, int] = {}
    meta = body.get("usageMetadata")
    for theirs, ours in (
        ("promptTokenCount", "input_tokens"),
        ("candidatesTokenCount", "output_tokens"),
        ("thoughtsTokenCount", "thinking_tokens"),
    ):
        v = meta.get(theirs) if isinstance(meta, dict) else None
        if isinstance(v, int) and not isinstance(v, bool):
            usage[ours] = v
    model, rid = body.get("modelVersion"), body.get("responseId")
    stop = _STOP.get(finish, finish.lower() if isinstance(finish, str) else None)
    return ChatAnswer(
        "".join(texts),
        model if isinstance(model, str) and model else None,
        stop,
        usage,
        rid if isinstance(rid, str) else None,
    )


def post_generate(
    endpoint: str,
    model: str,
    body: dict,
    key: str | None,
    timeout: float,
    *,
    open_: urllib.request.OpenerDirector,
) -> ChatAnswer:
    """Send one generateContent request (see the module docstring)."""
    url = f"{endpoint}/models/{urllib.parse.quote(model, safe='-._')}:generateContent"
    headers = {"x-goog-api-key": key} if key else {}
    return parse_generate(post_json(url, body, headers, timeout, open_=open_))
