"""A local stand-in for the hosted Anthropic Messages API, for tests only.

:class:`FakeMessagesServer` is a real HTTP server on 127.0.0.1 (a free port picked by the OS, served
from a background thread). It answers ``POST /v1/messages`` in the shape of the Messages API (id,
type, role, content ``[{type: text, text}]``, model, stop_reason, usage), so the real ``anthropic``
SDK talks to it through ``base_url``. Nothing leaves the machine: no network beyond loopback, no
real key (tests set a dummy one with ``monkeypatch.setenv``).

Each test scripts it:

* ``server.push(reply, ...)`` queues replies, used one per request in order;
* ``server.responder = fn`` answers requests once the queue is empty (``fn(body) -> Reply``);
* replies: :func:`text` (a 200 message), :func:`error` (an API error with status, type and
  optional headers such as ``retry-after``), :func:`slow` (answer after a delay, to provoke client
  timeouts), :func:`raw` (any status and body), :func:`drop` (close the connection unanswered).

Every request is recorded (``server.requests``: method, path, lower-cased headers, parsed JSON
body). A request with no reply scripted gets HTTP 400 ``unscripted request``, which the client does
not retry, so a test that sends more requests than it expected fails loudly.
"""

from __future__ import annotations

import json
import threading
from collections import deque
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable, Iterator

import pytest

DUMMY_KEY = "sk-ant-test-DUMMY-KEY-0123456789abcdef"


@dataclass
class Reply:
    """What the fake server does with one request."""

    status: int = 200
    text: str | None = None  # a Messages API answer with this text (status 200)
    body: bytes | None = None  # raw body (overrides `text`)
    headers: dict[str, str] = field(default_factory=dict)
    delay_s: float = 0.0
    drop: bool = False
    stop_reason: str = "end_turn"


def text(answer: str, *, stop_reason: str = "end_turn") -> Reply:
    """A successful answer whose content is one text block."""
    return Reply(200, text=answer, stop_reason=stop_reason)


def error(
    status: int,
    etype: str = "api_error",
    message: str = "fake failure",
    headers: dict[str, str] | None = None,
) -> Reply:
    """An API error body ``{"type": "error", "error": {"type", "message"}}`` with `status`."""
    body = json.dumps({"type": "error", "error": {"type": etype, "message": message}}).encode()
    return Reply(status, body=body, headers=dict(headers or {}))


def slow(delay_s: float, then: Reply) -> Reply:
    """`then`, sent only after `delay_s` seconds."""
    return Reply(
        then.status, then.text, then.body, dict(then.headers), delay_s, then.drop, then.stop_reason
    )


def raw(status: int, body: bytes, content_type: str = "application/json") -> Reply:
    return Reply(status, body=body, headers={"content-type": content_type})


def drop() -> Reply:
    """Close the connection without answering (the client sees a connection error)."""
    return Reply(drop=True)


@dataclass(frozen=True)
class Recorded:
    method: str
    path: str
    headers: dict[str, str]
    body: Any


class FakeMessagesServer:
    """A scriptable Messages API on 127.0.0.1 (see the module docstring). Use as a context manager."""

    def __init__(self, port: int = 0) -> None:
        self.port = port  # 0: a free one
        self.queue: deque[Reply] = deque()
        self.responder: Callable[[Any], Reply] | None = None
        self.requests: list[Recorded] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._count = 0
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- scripting -------------------------------------------------------------------------------
    def push(self, *replies: Reply) -> "FakeMessagesServer":
        with self._lock:
            self.queue.extend(replies)
        return self

    @property
    def base_url(self) -> str:
        assert self._httpd is not None, "server not started"
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}"

    @property
    def message_requests(self) -> list[Recorded]:
        return [
            r
            for r in self.requests
            if r.method == "POST" and r.path.split("?")[0] == "/v1/messages"
        ]

    def _next(self, body: Any) -> Reply:
        with self._lock:
            if self.queue:
                return self.queue.popleft()
        if self.responder is not None:
            return self.responder(body)
        return error(400, "invalid_request_error", "unscripted request")

    # A subclass that needs the request's path or headers overrides these two.
    def _reply_to(self, rec: Recorded) -> Reply:
        return self._next(rec.body)

    def _message_to(self, reply: Reply, rec: Recorded) -> bytes:
        return self._message(reply, rec.body)

    def _message(self, reply: Reply, body: Any) -> bytes:
        with self._lock:
            self._count += 1
            n = self._count
        model = body.get("model", "fake-model") if isinstance(body, dict) else "fake-model"
        return json.dumps(
            {
                "id": f"msg_fake_{n:04d}",
                "type": "message",
                "role": "assistant",
                "content": [{"type": "text", "text": reply.text}],
                "model": model,
                "stop_reason": reply.stop_reason,
                "stop_sequence": None,
                "usage": {
                    "input_tokens": max(1, len(json.dumps(body)) // 4),
                    "output_tokens": max(1, len(reply.text or "") // 4),
                },
            }
        ).encode()

    # -- lifecycle -------------------------------------------------------------------------------
    def start(self) -> "FakeMessagesServer":
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:  # keep test output clean
                pass

            def _handle(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                data = self.rfile.read(length) if length else b""
                try:
                    body = json.loads(data) if data else None
                except ValueError:
                    body = data.decode("utf-8", "replace")
                rec = Recorded(
                    self.command, self.path, {k.lower(): v for k, v in self.headers.items()}, body
                )
                with server._lock:
                    server.requests.append(rec)
                reply = server._reply_to(rec)
                if reply.delay_s and server._stop.wait(reply.delay_s):
                    return
                if reply.drop:
                    self.close_connection = True
                    return
                payload = reply.body if reply.body is not None else server._message_to(reply, rec)
                try:
                    self.send_response(reply.status)
                    headers = {
                        "content-type": "application/json",
                        "request-id": "req_fake",
                        **reply.headers,
                    }
                    for k, v in headers.items():
                        self.send_header(k, v)
                    self.send_header("content-length", str(len(payload)))
                    self.end_headers()
                    self.wfile.write(payload)
                except (BrokenPipeError, ConnectionResetError):  # the client gave up (timeout)
                    self.close_connection = True

            do_POST = _handle
            do_GET = _handle

        self._httpd = ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, args=(0.02,), name="fake-messages-api", daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def __enter__(self) -> "FakeMessagesServer":
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()


@pytest.fixture
def fake_api(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeMessagesServer]:
    """A started :class:`FakeMessagesServer`, with a dummy ``ANTHROPIC_API_KEY`` set for the test
    and the SDK's own environment settings (base URL, auth token, profiles) cleared."""
    for var in (
        "ANTHROPIC_BASE_URL",
        "ANTHROPIC_AUTH_TOKEN",
        "ANTHROPIC_PROFILE",
        "ANTHROPIC_CUSTOM_HEADERS",
    ):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("ANTHROPIC_API_KEY", DUMMY_KEY)
    with FakeMessagesServer() as server:
        yield server
