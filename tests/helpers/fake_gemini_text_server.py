"""A local stand-in for the Gemini API's text ``generateContent``, for tests only.

:class:`FakeGeminiServer` is the real HTTP server of :mod:`helpers.fake_messages_server`
(127.0.0.1, a free port, a background thread, the same scripting: ``push``, ``responder``,
recorded ``requests``) answering ``POST /v1beta/models/{model}:generateContent``. ``base_url``
ends in ``/v1beta``, as the service's does. Every request body is validated against the
``google-genai`` package's own types (``Content``, ``GenerationConfig``: unknown keys are
refused), and every answer it sends is a ``GenerateContentResponse`` that those types read back,
so fdeval's standard-library client speaks exactly the SDK's wire shapes. A request that fails
validation is answered 400 and listed in ``invalid``. Nothing leaves the machine.

Replies: :func:`text` (a 200 answer; ``finish_reason="MAX_TOKENS"`` for a cut one, ``thought``
for a thinking part sent before the answer), :func:`error` (Google's error body ``{"error":
{"code", "message", "status"}}``), and from the Messages stand-in :func:`raw`, :func:`slow`,
:func:`drop`.
"""

from __future__ import annotations

import json
import re
from typing import Any, Iterator

import pytest
from google.genai import types

from helpers.fake_messages_server import FakeMessagesServer, Recorded, Reply, drop, raw, slow  # noqa: F401

DUMMY_GEMINI_KEY = "gemini-test-DUMMY-KEY-not-a-real-key"
_PATH = re.compile(r"^/v1beta/models/([^/:]+):generateContent$")
_STATUS = {
    400: "INVALID_ARGUMENT",
    401: "UNAUTHENTICATED",
    403: "PERMISSION_DENIED",
    404: "NOT_FOUND",
    429: "RESOURCE_EXHAUSTED",
    500: "INTERNAL",
    503: "UNAVAILABLE",
}


def text(answer: str, *, finish_reason: str = "STOP", thought: str | None = None) -> Reply:
    """An answer whose candidate holds `answer` (after a thought part when `thought` is given)."""
    return Reply(
        200,
        text=answer,
        stop_reason=finish_reason,
        headers={"x-thought": thought} if thought else {},
    )


def error(
    status: int, message: str = "fake failure", headers: dict[str, str] | None = None
) -> Reply:
    body = json.dumps(
        {"error": {"code": status, "message": message, "status": _STATUS.get(status, "UNKNOWN")}}
    )
    return Reply(status, body=body.encode(), headers=dict(headers or {}))


def check_request(path: str, body: Any) -> str | None:
    """Why a request is not one the service takes (None when it is)."""
    if _PATH.match(path.split("?")[0]) is None:
        return f"not a generateContent path: {path}"
    if not isinstance(body, dict):
        return "the body is not a JSON object"
    extra = set(body) - {"contents", "systemInstruction", "generationConfig"}
    if extra:
        return f"unknown request keys {sorted(extra)}"
    try:
        for c in body["contents"]:
            types.Content.model_validate(c)
        if "systemInstruction" in body:
            types.Content.model_validate(body["systemInstruction"])
        types.GenerationConfig.model_validate(body.get("generationConfig") or {})
    except Exception as e:  # noqa: BLE001 - pydantic's ValidationError, reported as the reason
        return f"{type(e).__name__}: {' '.join(str(e).split())[:300]}"
    return None


class FakeGeminiServer(FakeMessagesServer):
    """A scriptable generateContent API on 127.0.0.1 (see the module docstring)."""

    def __init__(self) -> None:
        super().__init__()
        self.invalid: list[str] = []

    @property
    def base_url(self) -> str:
        return super().base_url + "/v1beta"

    @property
    def generate_requests(self) -> list[Recorded]:
        return [
            r for r in self.requests if r.method == "POST" and _PATH.match(r.path.split("?")[0])
        ]

    message_requests = generate_requests  # the name the Messages stand-in's callers use

    def _reply_to(self, rec: Recorded) -> Reply:
        why = check_request(rec.path, rec.body)
        if why is not None:
            with self._lock:
                self.invalid.append(why)
            return error(400, f"the stand-in refused the request: {why}")
        return self._next(rec.body)

    def _message_to(self, reply: Reply, rec: Recorded) -> bytes:
        body = rec.body
        n = len(self.generate_requests)
        parts: list[dict[str, Any]] = []
        if reply.headers.get("x-thought"):
            parts.append({"text": reply.headers["x-thought"], "thought": True})
        parts.append({"text": reply.text})
        model = _PATH.match(rec.path.split("?")[0]).group(1)  # type: ignore[union-attr]
        answer = {
            "candidates": [
                {
                    "content": {"role": "model", "parts": parts},
                    "finishReason": reply.stop_reason,
                    "index": 0,
                }
            ],
            "usageMetadata": {
                "promptTokenCount": max(1, len(json.dumps(body)) // 4),
                "candidatesTokenCount": max(1, len(reply.text or "") // 4),
                "totalTokenCount": max(1, len(json.dumps(body)) // 4)
                + max(1, len(reply.text or "") // 4),
            },
            "modelVersion": model,
            "responseId": f"fake-{n:04d}",
        }
        types.GenerateContentResponse.model_validate(answer)  # what the SDK would read
        return json.dumps(answer).encode()


@pytest.fixture
def fake_gemini(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeGeminiServer]:
    """A started :class:`FakeGeminiServer`; the Gemini key variables are unset (a loopback server
    needs none; a test that wants one sets :data:`DUMMY_GEMINI_KEY`), proxies are cleared."""
    for var in (
        "GEMINI_API_KEY",
        "GOOGLE_API_KEY",
        "http_proxy",
        "HTTP_PROXY",
        "https_proxy",
        "HTTPS_PROXY",
        "all_proxy",
        "ALL_PROXY",
    ):
        monkeypatch.delenv(var, raising=False)
    with FakeGeminiServer() as server:
        yield server
