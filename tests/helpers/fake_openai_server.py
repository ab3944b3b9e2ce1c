"""A local stand-in for an OpenAI-compatible chat-completions server (vLLM, SGLang, OpenAI), for
tests only.

:class:`FakeOpenAIServer` is the real HTTP server of :mod:`helpers.fake_messages_server` (127.0.0.1,
a free port, a background thread, the same scripting: ``push``, ``responder``, recorded
``requests``) answering ``POST /v1/chat/completions`` in the chat-completions shape (id, object,
model, ``choices[0].message.content``, ``finish_reason``, usage with prompt/completion tokens).
``base_url`` ends in ``/v1``, as a vLLM server's does. Nothing leaves the machine.

Replies: :func:`text` (a 200 completion; ``finish_reason="length"`` for a cut answer),
:func:`error` (an OpenAI-style error body ``{"error": {"message", "type", "code"}}`` with a status
and optional headers such as ``retry-after``), and from the Messages stand-in :func:`raw`,
:func:`slow`, :func:`drop`. An unscripted request gets HTTP 400 (with the base's error body),
which the client does not retry.
"""

from __future__ import annotations

import argparse
import json
import signal
import threading
from typing import Any, Iterator

import pytest

from helpers.fake_messages_server import FakeMessagesServer, Recorded, Reply, drop, raw, slow  # noqa: F401

DUMMY_OPENAI_KEY = "sk-openai-test-DUMMY-KEY-9876543210fedcba"


def text(answer: str, *, finish_reason: str = "stop") -> Reply:
    """A completion whose first choice's content is `answer`."""
    return Reply(200, text=answer, stop_reason=finish_reason)


def error(
    status: int,
    etype: str = "server_error",
    message: str = "fake failure",
    headers: dict[str, str] | None = None,
) -> Reply:
    body = json.dumps({"error": {"message": message, "type": etype, "code": status}}).encode()
    return Reply(status, body=body, headers=dict(headers or {}))


class FakeOpenAIServer(FakeMessagesServer):
    """A scriptable chat-completions API on 127.0.0.1 (see the module docstring)."""

    @property
    def base_url(self) -> str:
        return super().base_url + "/v1"

    @property
    def chat_requests(self) -> list[Recorded]:
        return [
            r
            for r in self.requests
            if r.method == "POST" and r.path.split("?")[0] == "/v1/chat/completions"
        ]

    message_requests = chat_requests  # the name the Messages stand-in's callers use

    def _message(self, reply: Reply, body: Any) -> bytes:
        n = len(self.chat_requests)  # this request is recorded before it is answered
        model = body.get("model", "fake-model") if isinstance(body, dict) else "fake-model"
        return json.dumps(
            {
                "id": f"chatcmpl-fake-{n:04d}",
                "object": "chat.completion",
                "created": 1700000000 + n,
                "model": model,
                "choices": [
                    {
                        "index": 0,
                        "message": {"role": "assistant", "content": reply.text},
                        "finish_reason": reply.stop_reason,
                        "logprobs": None,
                    }
                ],
                "usage": {
                    "prompt_tokens": max(1, len(json.dumps(body)) // 4),
                    "completion_tokens": max(1, len(reply.text or "") // 4),
                    "total_tokens": max(1, len(json.dumps(body)) // 4)
                    + max(1, len(reply.text or "") // 4),
                },
            }
        ).encode()


@pytest.fixture
def fake_openai(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeOpenAIServer]:
    """A started :class:`FakeOpenAIServer`; ``OPENAI_API_KEY`` is unset (a loopback server needs
    none; a test that wants one sets :data:`DUMMY_OPENAI_KEY`), proxies are cleared."""
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    for var in ("http_proxy", "HTTP_PROXY", "https_proxy", "HTTPS_PROXY", "all_proxy", "ALL_PROXY"):
        monkeypatch.delenv(var, raising=False)
    with FakeOpenAIServer() as server:
        yield server


class StandaloneServer(FakeOpenAIServer):
    """The stand-in as a process of its own, as `vllm serve` would run (``python -m
    helpers.fake_openai_server --port P --answer TEXT --record FILE``): ``GET /v1/models`` lists
    one model once it is up, every chat completion answers ``answer``, and each request (method,
    path, model) is appended to ``record`` as one JSON line. SIGTERM stops it."""

    def __init__(self, port: int, answer: str, record: str) -> None:
        super().__init__(port)
        self.answer, self.record = answer, record

    def _reply_to(self, rec: Recorded) -> Reply:
        with open(self.record, "a") as f:
            f.write(
                json.dumps(
                    {
                        "method": rec.method,
                        "path": rec.path,
                        "model": rec.body.get("model") if isinstance(rec.body, dict) else None,
                    }
                )
                + "\n"
            )
        if rec.method == "GET" and rec.path.split("?")[0] == "/v1/models":
            return raw(
                200,
                json.dumps(
                    {"object": "list", "data": [{"id": "stand-in", "object": "model"}]}
                ).encode(),
            )
        return text(self.answer)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description="An OpenAI-compatible stand-in server (tests only).")
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--answer", required=True)
    ap.add_argument("--record", required=True)
    ap.add_argument(
        "--startup-delay-s", type=float, default=0.0, help="wait this long before listening"
    )
    args = ap.parse_args(argv)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    print(f"stand-in: starting on 127.0.0.1:{args.port}", flush=True)
    if stop.wait(args.startup_delay_s):
        return
    with StandaloneServer(args.port, args.answer, args.record):
        print("stand-in: ready", flush=True)
        stop.wait()
    print("stand-in: stopped on SIGTERM", flush=True)


if __name__ == "__main__":
    main()
