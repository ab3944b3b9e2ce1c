"""LLMClient against a local stand-in of the Messages API (tests/helpers/fake_messages_server.py).

The real anthropic SDK sends every request over loopback to the fake server; nothing reaches the
hosted API. A dummy key is set by the `fake_api` fixture.
"""

from __future__ import annotations

import inspect
import json
import logging
import random
import sys

import pytest

from helpers.fake_messages_server import DUMMY_KEY, drop, error, fake_api, raw, slow, text  # noqa: F401

from fdeval.errors import FdevalError
from fdeval.llm import LLMClient, LLMConfigError, LLMError, request_hash

MODEL = "claude-sonnet-4-6"


def client(server, tmp_path, **kw) -> LLMClient:
    kw = {"backoff_s": 0.001, "max_backoff_s": 0.01, "timeout_s": 5.0, **kw}
    return LLMClient(MODEL, 0.0, 256, tmp_path / "cache", base_url=server.base_url, **kw)


def sdk_takes_temperature() -> bool:
    import anthropic

    sdk = anthropic.Anthropic(api_key="x", base_url="http://127.0.0.1:9", max_retries=0)
    return "temperature" in inspect.signature(sdk.messages.create).parameters


def cache_files(tmp_path):
    return sorted((tmp_path / "cache").rglob("*.json"))


def test_answer_then_cache_hit_without_a_second_request(fake_api, tmp_path):
    fake_api.push(text("hello there"))
    c = client(fake_api, tmp_path)
    first = c.complete("be brief", "say hello")
    assert (first.text, first.cached, first.model) == ("hello there", False, MODEL)
    assert first.prompt_hash == request_hash(MODEL, 0.0, 256, "be brief", "say hello", None)
    assert first.usage["output_tokens"] >= 1 and first.stop_reason == "end_turn"
    # a new client on the same folder: the answer comes from disk, the server sees nothing more
    again = client(fake_api, tmp_path).complete("be brief", "say hello")
    assert again.cached and again.text == first.text and again.prompt_hash == first.prompt_hash
    assert len(fake_api.message_requests) == 1
    body = fake_api.message_requests[0].body
    assert body["model"] == MODEL and body["max_tokens"] == 256 and body["system"] == "be brief"
    assert body["messages"] == [{"role": "user", "content": "say hello"}]
    assert ("temperature" in body) == sdk_takes_temperature()
    [f] = cache_files(tmp_path)
    entry = json.loads(f.read_text())
    assert f.stem == first.prompt_hash and entry["key"] == first.prompt_hash
    assert entry["response"]["text"] == "hello there" and entry["request"]["prompt"] == "say hello"


def test_cache_key_covers_every_request_field():
    base = dict(model=MODEL, temperature=0.0, max_tokens=256, system="s", prompt="p", seed=None)
    h0 = request_hash(**base)
    assert request_hash(**{**base, "temperature": 0}) == h0  # 0 and 0.0 are one setting
    assert request_hash(**base, attempt=0) == h0
    for change in ({"model": "other"}, {"temperature": 0.5}, {"temperature": None}, {"max_tokens": 512},
                   {"system": "s2"}, {"prompt": "p2"}, {"seed": 1}):
        assert request_hash(**{**base, **change}) != h0, change
    assert request_hash(**base, attempt=1) != h0


def test_retries_429_and_5xx_then_succeeds(fake_api, tmp_path, caplog):
    fake_api.push(error(429, "rate_limit_error", "slow down", {"retry-after": "0"}), error(500), error(503),
                  error(529, "overloaded_error"), text("finally"))
    with caplog.at_level(logging.WARNING, logger="fdeval.llm"):
        r = client(fake_api, tmp_path).complete("s", "p")
    assert r.text == "finally" and not r.cached
    assert len(fake_api.message_requests) == 5
    retries = [rec.getMessage() for rec in caplog.records if "retry" in rec.getMessage()]
    assert len(retries) == 4 and "HTTP 429" in retries[0] and "retry 1/5" in retries[0] and "HTTP 529" in retries[3]


def test_retries_connection_errors_and_timeouts(fake_api, tmp_path, caplog):
    fake_api.push(drop(), slow(2.0, text("too late")), text("ok"))
    with caplog.at_level(logging.WARNING, logger="fdeval.llm"):
        r = client(fake_api, tmp_path, timeout_s=0.3).complete("s", "p")
    assert r.text == "ok"
    assert len(fake_api.message_requests) == 3
    msgs = " | ".join(rec.getMessage() for rec in caplog.records)
    assert "connection error" in msgs and "timeout" in msgs


def test_gives_up_after_max_retries(fake_api, tmp_path):
    fake_api.push(error(500, message="boom 1"), error(502, message="boom 2"), error(500, message="boom 3"))
    with pytest.raises(LLMError) as e:
        client(fake_api, tmp_path, max_retries=2).complete("s", "p")
    assert not isinstance(e.value, LLMConfigError) and isinstance(e.value, FdevalError)
    msg = str(e.value)
    assert "\n" not in msg and "failed after 3 attempt(s)" in msg and "boom 3" in msg
    assert len(fake_api.message_requests) == 3
    assert cache_files(tmp_path) == []  # failures are not cached: a rerun asks again


@pytest.mark.parametrize("status,kind", [(400, LLMError), (422, LLMError), (401, LLMConfigError),
                                         (403, LLMConfigError), (404, LLMConfigError)])
def test_non_retryable_statuses_fail_at_once(fake_api, tmp_path, status, kind):
    fake_api.push(error(status, "some_error", "nope"))
    with pytest.raises(kind) as e:
        client(fake_api, tmp_path).complete("s", "p")
    assert f"HTTP {status}" in str(e.value) and "\n" not in str(e.value)
    assert len(fake_api.message_requests) == 1


def test_missing_key_is_one_line_naming_the_variable(fake_api, tmp_path, monkeypatch):
    monkeypatch.delenv("ANTHROPIC_API_KEY")
    with pytest.raises(LLMConfigError) as e:
        client(fake_api, tmp_path).complete("s", "p")
    msg = str(e.value)
    assert "ANTHROPIC_API_KEY" in msg and "\n" not in msg
    assert fake_api.requests == []


def test_cached_answer_needs_no_key(fake_api, tmp_path, monkeypatch):
    fake_api.push(text("kept"))
    client(fake_api, tmp_path).complete("s", "p")
    monkeypatch.delenv("ANTHROPIC_API_KEY")
    assert client(fake_api, tmp_path).complete("s", "p").text == "kept"


def test_key_never_reaches_cache_or_logs(fake_api, tmp_path, caplog):
    fake_api.push(error(429, "rate_limit_error", f"echoing {DUMMY_KEY}"), text("fine"))
    with caplog.at_level(logging.DEBUG):  # every logger, the SDK's included
        c = client(fake_api, tmp_path)
        c.complete("s", "p")
        fake_api.push(error(400, "invalid_request_error", f"bad key {DUMMY_KEY}"))
        with pytest.raises(LLMError) as e:
            c.complete("s", "other prompt")
    assert DUMMY_KEY not in str(e.value) and "***" in str(e.value)
    assert DUMMY_KEY not in caplog.text
    assert DUMMY_KEY not in repr(c)
    for f in cache_files(tmp_path):
        assert DUMMY_KEY not in f.read_text()
    # the key did travel, from the environment, to the (fake) API
    sent = fake_api.message_requests[0].headers
    assert DUMMY_KEY in (sent.get("x-api-key", "") + sent.get("authorization", ""))


def test_attempt_gets_its_own_cache_entry(fake_api, tmp_path):
    fake_api.push(text("first"), text("second"))
    c = client(fake_api, tmp_path)
    assert c.complete("s", "p").text == "first"
    assert c.complete("s", "p", attempt=1).text == "second"
    assert c.complete("s", "p", attempt=1).cached
    assert len(fake_api.message_requests) == 2 and len(cache_files(tmp_path)) == 2


def test_unreadable_cache_file_is_asked_again(fake_api, tmp_path):
    fake_api.push(text("one"), text("two"))
    c = client(fake_api, tmp_path)
    r = c.complete("s", "p")
    c.cache_path(r.prompt_hash).write_text("{not json")
    assert c.complete("s", "p").text == "two"
    assert json.loads(c.cache_path(r.prompt_hash).read_text())["response"]["text"] == "two"


def test_malformed_http_bodies_are_retried_then_an_error(fake_api, tmp_path):
    fake_api.push(raw(200, b"<html>proxy page</html>", "text/html"), raw(200, b"{not json"), raw(200, b'{"weird": 1}'),
                  text("real answer"))
    assert client(fake_api, tmp_path).complete("s", "p").text == "real answer"
    fake_api.push(raw(200, b"<html>proxy page</html>", "text/html"))
    with pytest.raises(LLMError, match="malformed response"):
        client(fake_api, tmp_path, max_retries=0).complete("s", "another")
    assert len(cache_files(tmp_path)) == 1


def test_backoff_grows_is_capped_jittered_and_seeded(tmp_path):
    c = LLMClient(MODEL, 0.0, 16, tmp_path, backoff_s=1.0, max_backoff_s=8.0)
    d = [c._delay(k, random.Random("s"), None) for k in range(6)]
    for k, x in enumerate(d):
        assert 0.5 * min(8.0, 2 ** k) <= x < min(8.0, 2 ** k)
    assert d == [c._delay(k, random.Random("s"), None) for k in range(6)]
    assert c._delay(0, random.Random("s"), 5.0) == 5.0  # Retry-After is honoured
    assert c._delay(0, random.Random("s"), 99.0) == 8.0  # ... up to the cap


@pytest.mark.parametrize("kw", [{"temperature": -1}, {"temperature": float("nan")}, {"max_tokens": 0},
                                {"model": ""}, {"max_retries": -1}, {"timeout_s": 0}, {"seed": "x"}])
def test_bad_settings_are_config_errors(tmp_path, kw):
    args = {"model": MODEL, "temperature": 0.0, "max_tokens": 16, "cache_dir": tmp_path, **kw}
    with pytest.raises(LLMConfigError):
        LLMClient(**args)


def test_missing_sdk_gives_install_hint(tmp_path, monkeypatch):
    monkeypatch.setenv("ANTHROPIC_API_KEY", DUMMY_KEY)
    monkeypatch.setitem(sys.modules, "anthropic", None)  # import anthropic -> ImportError
    with pytest.raises(LLMConfigError, match="pip install anthropic"):
        LLMClient(MODEL, 0.0, 16, tmp_path).complete("s", "p")
