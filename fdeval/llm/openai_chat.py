"""One request to an OpenAI-compatible chat-completions endpoint (vLLM, SGLang, OpenAI), standard
library only.

:func:`post_chat` sends ``POST {endpoint}/chat/completions`` and returns the parsed answer as a
:class:`ChatAnswer`, or raises :class:`AttemptFailed` saying whether any HTTP answer came back
(``unanswered``), its status and ``Retry-After``. The retry loop, the cache and the run-stopping
counts are :class:`fdeval.llm.client.LLMClient`'s, shared with the Anthropic path.

Why not ``urllib.request.urlopen`` as is: its default opener follows redirects with the
``Authorization`` header (to any host, even over plain http) and sends loopback requests through
``$http_proxy``. Here redirects are refused (a 3xx is an error naming the fix), and loopback
requests never use a proxy, so the key of a local server never leaves the machine.
"""

from __future__ import annotations

import http.client
import json
import socket
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from typing import Any

USER_AGENT = "fdeval-llm"


@dataclass(frozen=True)
class ChatAnswer:
    text: str
    model: str | None
    finish_reason: str | None
    usage: dict[str, int] = field(default_factory=dict)
    id: str | None = None


class AttemptFailed(Exception):
    """One attempt that brought no usable answer. `unanswered`: no HTTP answer at all (refused,
    reset, timeout); `status`: the HTTP status when there was one (0 for a malformed 200)."""

    def __init__(
        self,
        why: str,
        *,
        unanswered: bool = False,
        status: int = 0,
        retry_after: float | None = None,
    ):
        super().__init__(why)
        self.why, self.unanswered, self.status, self.retry_after = (
            why,
            unanswered,
            status,
            retry_after,
        )


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None  # urllib then raises HTTPError with the 3xx status


def opener(loopback: bool) -> urllib.request.OpenerDirector:
    """An opener that never follows redirects; without proxies for a loopback endpoint."""
    proxies = urllib.request.ProxyHandler({}) if loopback else urllib.request.ProxyHandler()
    return urllib.request.build_opener(proxies, _NoRedirect())


def _retry_after(headers: Any) -> float | None:
    try:
        value = headers.get("retry-after") if headers is not None else None
        return max(float(value), 0.0) if value is not None else None
    except (TypeError, ValueError):
        return None


def _error_text(status: int, raw: bytes) -> str:
    """``HTTP 429 rate_limit: message`` from an OpenAI- or Google-style (``{"error": {...}}``) or
    vLLM-style (``{"object": "error", "message": ...}``) body, else the start of the body."""
    try:
        body = json.loads(raw)
    except ValueError:
        body = None
    err = body.get("error") if isinstance(body, dict) else None
    if not isinstance(err, dict) and isinstance(body, dict) and "message" in body:
        err = body
    if isinstance(err, dict):
        kind = err.get("type") or err.get("status") or err.get("code") or ""  # Google's: status
        return f"HTTP {status} {kind}: {err.get('message') or ''}"
    snippet = raw[:120].decode("utf-8", "replace")
    return f"HTTP {status}: {snippet or http.client.responses.get(status, '')}"


def _text_of(content: Any) -> str | None:
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # content parts: keep the text ones
        parts = [p.get("text") for p in content if isinstance(p, dict) and p.get("type") == "text"]
        if parts and all(isinstance(p, str) for p in parts):
            return "".join(parts)
    return None


def parse_completion(raw: bytes) -> ChatAnswer:
    """The answer in a chat-completions body; raises :class:`AttemptFailed` (malformed) otherwise."""
    try:
        body = json.loads(raw)
    except ValueError as e:
        raise AttemptFailed(f"malformed response: not JSON ({e})") from None
    choices = body.get("choices") if isinstance(body, dict) else None
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        raise AttemptFailed("malformed response: not a chat completion (no choices)")
    message = choices[0].get("message")
    text = _text_of(message.get("content")) if isinstance(message, dict) else None
    if text is None:
        raise AttemptFailed("malformed response: the first choice has no text content")
    usage: dict[str, int] = {}
    u = body.get("usage")
    for theirs, ours in (("prompt_tokens", "input_tokens"), ("completion_tokens", "output_tokens")):
        v = u.get(theirs) if isinstance(u, dict) else None
        if isinstance(v, int) and not isinstance(v, bool):
            usage[ours] = v
    model = body.get("model")
    finish = choices[0].get("finish_reason")
    rid = body.get("id")
    return ChatAnswer(
        text,
        model if isinstance(model, str) and model else None,
        finish if isinstance(finish, str) else None,
        usage,
        rid if isinstance(rid, str) else None,
    )


def post_json(
    url: str,
    body: dict,
    headers: dict[str, str],
    timeout: float,
    *,
    open_: urllib.request.OpenerDirector,
) -> bytes:
    """POST `body` as JSON to `url` and return the 2xx answer's raw body, or raise
    :class:`AttemptFailed` (see the module docstring). Shared by every HTTP protocol of
    :mod:`fdeval.llm` (chat completions here, Gemini's generateContent in
    :mod:`fdeval.llm.gemini_text`). Error texts never hold a key (the caller scrubs them too)."""
    headers = {
        "Content-Type": "application/json",
        "Accept": "application/json",
        "User-Agent": USER_AGENT,
        **headers,
    }
    data = json.dumps(body, ensure_ascii=False).encode("utf-8")
    req = urllib.request.Request(url, data=data, headers=headers, method="POST")
    try:
        with open_.open(req, timeout=timeout) as resp:
            return resp.read()
    except urllib.error.HTTPError as e:
        try:
            raw = e.read()
        except (OSError, http.client.HTTPException):
            raw = b""
        status = int(e.code)
        why = _error_text(status, raw)
        if 300 <= status < 400:
            why += "; redirects are not followed (the key would go along): set base_url to the final URL"
        raise AttemptFailed(why, status=status, retry_after=_retry_after(e.headers)) from None
    except urllib.error.URLError as e:
        reason = e.reason
        if isinstance(reason, (socket.timeout, TimeoutError)):
            raise AttemptFailed(
                f"no answer within {timeout:g} s (timeout)", unanswered=True
            ) from None
        raise AttemptFailed(f"connection error: {reason}", unanswered=True) from None
    except (socket.timeout, TimeoutError):
        raise AttemptFailed(f"no answer within {timeout:g} s (timeout)", unanswered=True) from None
    except (ConnectionError, http.client.HTTPException, OSError) as e:
        raise AttemptFailed(f"connection error: {type(e).__name__}: {e}", unanswered=True) from None


def post_chat(
    endpoint: str,
    body: dict,
    key: str | None,
    timeout: float,
    *,
    open_: urllib.request.OpenerDirector,
) -> ChatAnswer:
    """Send one chat-completions request; see the module docstring."""
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    return parse_completion(
        post_json(f"{endpoint}/chat/completions", body, headers, timeout, open_=open_)
    )
