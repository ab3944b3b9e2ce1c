"""LLMClient against a local stand-in of the Messages API (tests/helpers/fake_messages_server.py).

The real anthropic SDK sends every request over loopback to the fake server; nothing reaches the
hosted API. A dummy key is set by the `fake_api` fixture.
"""

from __future__ import annotations

import inspect
import json
import logging
import random
import socket
import sys

import pytest

from helpers.fake_messages_server import DUMMY_KEY, drop, error, fake_api, raw, slow, text  # noqa: F401
from helpers.llm_time import virtual_time

from fdeval.errors import FdevalError
from fdeval.llm import LLMClient, LLMConfigError, LLMError, request_hash
from fdeval.llm.client import DEFAULT_BASE_URL, LLMUnavailable, resolve_endpoint

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
    assert c.endpoint == fake_api.base_url
    assert first.prompt_hash == request_hash(
        MODEL, 0.0, 256, "be brief", "say hello", None, endpoint=c.endpoint
    )
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
    assert entry["request"]["endpoint"] == fake_api.base_url


def test_cache_key_covers_every_request_field():
    base = dict(
        model=MODEL,
        temperature=0.0,
        max_tokens=256,
        system="s",
        prompt="p",
        seed=None,
        endpoint="https://api.anthropic.com",
    )
    h0 = request_hash(**base)
    assert request_hash(**{**base, "temperature": 0}) == h0  # 0 and 0.0 are one setting
    assert request_hash(**base, attempt=0) == h0
    for change in (
        {"model": "other"},
        {"temperature": 0.5},
        {"temperature": None},
        {"max_tokens": 512},
        {"system": "s2"},
        {"prompt": "p2"},
        {"seed": 1},
        {"endpoint": "http://127.0.0.1:8080"},
    ):
        assert request_hash(**{**base, **change}) != h0, change
    assert request_hash(**base, attempt=1) != h0


def test_retries_429_and_5xx_then_succeeds(fake_api, tmp_path, caplog):
    fake_api.push(
        error(429, "rate_limit_error", "slow down", {"retry-after": "0"}),
        error(500),
        error(503),
        error(529, "overloaded_error"),
        text("finally"),
    )
    with caplog.at_level(logging.WARNING, logger="fdeval.llm"):
        r = client(fake_api, tmp_path).complete("s", "p")
    assert r.text == "finally" and not r.cached
    assert len(fake_api.message_requests) == 5
    retries = [rec.getMessage() for rec in caplog.records if "retry" in rec.getMessage()]
    assert (
        len(retries) == 4
        and "HTTP 429" in retries[0]
        and "retry 1/5" in retries[0]
        and "HTTP 529" in retries[3]
    )


def test_retries_connection_errors_and_timeouts(fake_api, tmp_path, caplog):
    # a timeout well above a loopback answer on a loaded machine (the third must come within it),
    # the slow answer far above the timeout
    fake_api.push(drop(), slow(20.0, text("too late")), text("ok"))
    with caplog.at_level(logging.WARNING, logger="fdeval.llm"):
        r = client(fake_api, tmp_path, timeout_s=2.0).complete("s", "p")
    assert r.text == "ok"
    assert len(fake_api.message_requests) == 3
    msgs = " | ".join(rec.getMessage() for rec in caplog.records)
    assert "connection error" in msgs and "timeout" in msgs


def test_gives_up_after_max_retries(fake_api, tmp_path):
    fake_api.push(
        error(500, message="boom 1"), error(502, message="boom 2"), error(500, message="boom 3")
    )
    with pytest.raises(LLMError) as e:
        client(fake_api, tmp_path, max_retries=2).complete("s", "p")
    assert not isinstance(e.value, LLMConfigError) and isinstance(e.value, FdevalError)
    msg = str(e.value)
    assert "\n" not in msg and "failed after 3 attempt(s)" in msg and "boom 3" in msg
    assert len(fake_api.message_requests) == 3
    assert cache_files(tmp_path) == []  # failures are not cached: a rerun asks again


@pytest.mark.parametrize(
    "status,kind",
    [
        (400, LLMError),
        (422, LLMError),
        (401, LLMConfigError),
        (403, LLMConfigError),
        (404, LLMConfigError),
    ],
)
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
    fake_api.push(
        raw(200, b"<html>proxy page</html>", "text/html"),
        raw(200, b"{not json"),
        raw(200, b'{"weird": 1}'),
        text("real answer"),
    )
    assert client(fake_api, tmp_path).complete("s", "p").text == "real answer"
    fake_api.push(raw(200, b"<html>proxy page</html>", "text/html"))
    with pytest.raises(LLMError, match="malformed response"):
        client(fake_api, tmp_path, max_retries=0).complete("s", "another")
    assert len(cache_files(tmp_path)) == 1


def test_backoff_grows_is_capped_jittered_and_seeded(tmp_path):
    c = LLMClient(MODEL, 0.0, 16, tmp_path, backoff_s=1.0, max_backoff_s=8.0)
    d = [c._delay(k, random.Random("s"), None) for k in range(6)]
    for k, x in enumerate(d):
        assert 0.5 * min(8.0, 2**k) <= x < min(8.0, 2**k)
    assert d == [c._delay(k, random.Random("s"), None) for k in range(6)]
    assert c._delay(0, random.Random("s"), 5.0) == 5.0  # Retry-After is honoured
    assert c._delay(0, random.Random("s"), 99.0) == 8.0  # ... up to the cap


@pytest.mark.parametrize(
    "kw",
    [
        {"temperature": -1},
        {"temperature": float("nan")},
        {"temperature": "0"},
        {"temperature": True},
        {"max_tokens": 0},
        {"max_tokens": 10.0},
        {"model": ""},
        {"model": "claude sonnet"},
        {"max_retries": -1},
        {"timeout_s": 0},
        {"timeout_s": float("inf")},
        {"seed": "x"},
        {"max_retry_s": -1},
        {"max_unreachable": 0},
        {"max_failed_requests": "3"},
        {"cache_dir": 5},
        {"base_url": ""},
        {"base_url": 8080},
    ],
)
def test_bad_settings_are_config_errors_naming_the_field(tmp_path, kw):
    args = {"model": MODEL, "temperature": 0.0, "max_tokens": 16, "cache_dir": tmp_path, **kw}
    with pytest.raises(LLMConfigError) as e:
        LLMClient(**args, name="judge")
    [field] = kw
    assert str(e.value).startswith(f"judge.{field}: ") and "\n" not in str(e.value)


def test_missing_sdk_gives_install_hint(tmp_path, monkeypatch):
    monkeypatch.setenv("ANTHROPIC_API_KEY", DUMMY_KEY)
    monkeypatch.setitem(sys.modules, "anthropic", None)  # import anthropic -> ImportError
    with pytest.raises(LLMConfigError, match="pip install anthropic"):
        LLMClient(MODEL, 0.0, 16, tmp_path).complete("s", "p")


# ------------------------------------------------------------------------------------------------
# Endpoint: resolution, plain-http refusal, part of the cache key


def closed_port() -> int:
    """A loopback port nothing listens on (bound, then released: connecting is refused)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_endpoint_is_base_url_else_environment_else_sdk_default(monkeypatch):
    monkeypatch.delenv("ANTHROPIC_BASE_URL", raising=False)
    assert resolve_endpoint(None) == DEFAULT_BASE_URL == "https://api.anthropic.com"
    monkeypatch.setenv("ANTHROPIC_BASE_URL", "https://Proxy.Example.com:443/anthropic/")
    assert resolve_endpoint(None) == "https://proxy.example.com/anthropic"
    assert resolve_endpoint("http://127.0.0.1:8080/") == "http://127.0.0.1:8080"


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1:9",
        "http://127.8.9.10",
        "http://localhost:5000",
        "http://[::1]:80",
        "https://api.anthropic.com",
        "https://10.1.2.3:8443/v",
    ],
)
def test_https_anywhere_and_http_only_to_loopback_are_accepted(url, tmp_path):
    assert LLMClient(MODEL, 0.0, 16, tmp_path, base_url=url).endpoint.split("://")[0] in (
        "http",
        "https",
    )


@pytest.mark.parametrize(
    "url,needle",
    [
        ("http://example.com", "refusing plain http to example.com"),
        ("http://10.0.0.5:8080", "refusing plain http to 10.0.0.5"),
        ("http://127.0.0.1.evil.com", "refusing plain http"),  # a name, not the loopback address
        ("http://[::ffff:8.8.8.8]", "refusing plain http"),
        ("ftp://127.0.0.1", "expected an http:// or https:// URL"),
        ("http://user:s3cret@127.0.0.1", "must not carry credentials"),
        ("https://127.0.0.1/?key=s3cret", "must not carry credentials"),
        ("s3cret", "expected an http:// or https:// URL"),  # e.g. a key pasted in the wrong place
        ("http://[::1", "not a valid URL"),
    ],
)
def test_other_endpoints_are_refused_at_construction_in_one_line(url, needle, tmp_path, fake_api):
    with pytest.raises(LLMConfigError) as e:
        LLMClient(MODEL, 0.0, 16, tmp_path, base_url=url, name="judge")
    msg = str(e.value)
    assert msg.startswith("judge.base_url: ") and needle in msg and "\n" not in msg
    assert "s3cret" not in msg and fake_api.requests == []


def test_environment_endpoint_is_checked_and_named(tmp_path, monkeypatch):
    monkeypatch.setenv("ANTHROPIC_BASE_URL", "http://judge-proxy.internal:8000")
    with pytest.raises(
        LLMConfigError, match="^environment variable ANTHROPIC_BASE_URL: refusing plain http"
    ):
        LLMClient(MODEL, 0.0, 16, tmp_path)


def test_answers_of_one_endpoint_are_never_reused_for_another(fake_api, tmp_path, monkeypatch):
    with type(fake_api)() as other:  # a second stand-in, another port
        fake_api.push(text("from A"))
        other.push(text("from B"))
        a, b = client(fake_api, tmp_path), client(other, tmp_path)  # one cache folder
        assert a.request_hash("s", "p") != b.request_hash("s", "p")
        assert a.complete("s", "p").text == "from A"
        rb = b.complete("s", "p")
        assert (rb.text, rb.cached) == ("from B", False) and len(other.message_requests) == 1
        # the same endpoint through ANTHROPIC_BASE_URL is the same cache entry
        monkeypatch.setenv("ANTHROPIC_BASE_URL", fake_api.base_url + "/")
        via_env = LLMClient(MODEL, 0.0, 256, tmp_path / "cache")
        assert via_env.endpoint == a.endpoint and via_env.complete("s", "p").text == "from A"
        assert len(fake_api.message_requests) == 1 and len(cache_files(tmp_path)) == 2


def test_entry_of_another_endpoint_under_the_key_is_not_trusted(fake_api, tmp_path):
    fake_api.push(text("mine"), text("asked again"))
    c = client(fake_api, tmp_path)
    r = c.complete("s", "p")
    path = c.cache_path(r.prompt_hash)
    entry = json.loads(path.read_text())
    entry["request"]["endpoint"] = "https://elsewhere.example"
    path.write_text(json.dumps(entry))
    assert c.complete("s", "p").text == "asked again"


def test_sdk_gets_the_resolved_endpoint_not_its_own_environment(fake_api, tmp_path, monkeypatch):
    c = client(fake_api, tmp_path)
    monkeypatch.setenv(
        "ANTHROPIC_BASE_URL", f"http://127.0.0.1:{closed_port()}"
    )  # set after construction
    fake_api.push(text("here"))
    assert c.complete("s", "p").text == "here" and len(fake_api.message_requests) == 1


# ------------------------------------------------------------------------------------------------
# An endpoint that cannot be reached, and the bound on one request's retries


def test_closed_port_raises_unavailable_after_three_attempts_in_seconds(tmp_path, monkeypatch):
    monkeypatch.setenv("ANTHROPIC_API_KEY", DUMMY_KEY)
    vt = virtual_time(monkeypatch)  # the client's own waits, not the machine's speed
    url = f"http://127.0.0.1:{closed_port()}"
    c = LLMClient(
        MODEL, 0.0, 16, tmp_path, base_url=url
    )  # default backoff (1 s), retries and bounds
    vt.timed(c)
    with pytest.raises(LLMUnavailable) as e:
        c.complete("s", "p")
    msg = str(e.value)
    assert "\n" not in msg and msg.startswith(
        f"llm: endpoint {url} unavailable (3 consecutive attempts"
    )
    assert "connection error" in msg.lower() and DUMMY_KEY not in msg
    # 3 attempts, two backoff delays of 0.5-1 s and 1-2 s between them: stopped within 3 s of waiting
    assert len(vt.timeouts) == 3 and len(vt.sleeps) == 2, (vt.timeouts, vt.sleeps)
    assert 0.5 <= vt.sleeps[0] < 1.0 and 1.0 <= vt.sleeps[1] < 2.0, vt.sleeps
    with pytest.raises(LLMUnavailable):  # sticky: no further attempts, no wait
        c.complete("s", "another prompt")
    assert len(vt.timeouts) == 3 and len(vt.sleeps) == 2
    assert isinstance(e.value, LLMConfigError) and isinstance(e.value, FdevalError)


def test_count_of_unanswered_attempts_spans_requests(fake_api, tmp_path):
    fake_api.push(drop(), drop())
    c = client(fake_api, tmp_path, max_retries=0)
    for _ in range(2):
        with pytest.raises(LLMError) as e:
            c.complete("s", "p")
        assert not isinstance(e.value, LLMUnavailable)
    fake_api.push(drop())
    with pytest.raises(LLMUnavailable, match="3 consecutive attempts without an answer"):
        c.complete("s", "p")
    assert len(fake_api.message_requests) == 3


def test_timeouts_count_as_no_answer(fake_api, tmp_path):
    fake_api.push(slow(3.0, text("late")), slow(3.0, text("late")))
    last = r"2 consecutive attempts without an answer; last: no answer within 0\.3 s"
    # (no bound on the wall time: an attempt not cut at 0.3 s would get the late answer, no raise)
    with pytest.raises(LLMUnavailable, match=last):
        client(fake_api, tmp_path, timeout_s=0.3, max_unreachable=2).complete("s", "p")
    assert len(fake_api.message_requests) == 2


def test_any_answer_resets_the_count(fake_api, tmp_path):
    fake_api.push(drop(), drop(), error(500), drop(), drop(), text("made it"))
    assert client(fake_api, tmp_path).complete("s", "p").text == "made it"
    assert len(fake_api.message_requests) == 6


@pytest.mark.parametrize(
    "failure",
    [
        error(500, message="down"),
        error(529, "overloaded_error"),
        error(429, "rate_limit_error", headers={"retry-after": "0"}),
        raw(200, b"<html>captive portal</html>", "text/html"),
    ],
    ids=["500", "529", "429", "garbage"],
)
def test_requests_failing_after_their_retries_stop_at_the_third(fake_api, tmp_path, failure):
    fake_api.responder = lambda body: failure
    c = client(fake_api, tmp_path, max_retries=1)
    for i in range(2):  # ordinary failures: the caller records them
        with pytest.raises(LLMError) as e:
            c.complete("s", f"p{i}")
        assert not isinstance(e.value, LLMUnavailable) and "failed after 2 attempt(s)" in str(
            e.value
        )
    with pytest.raises(LLMUnavailable) as e:
        c.complete("s", "p2")
    assert "3 consecutive requests failed after their retries" in str(
        e.value
    ) and fake_api.base_url in str(e.value)
    assert len(fake_api.message_requests) == 6 and cache_files(tmp_path) == []


def test_a_success_resets_the_failed_request_count(fake_api, tmp_path):
    c = client(fake_api, tmp_path, max_retries=0)
    for i, reply in enumerate(
        [error(500), error(500), text("ok"), error(500), error(500), text("ok")]
    ):
        fake_api.push(reply)
        if reply.status == 200:
            assert c.complete("s", f"p{i}").text == "ok"
        else:
            with pytest.raises(LLMError) as e:
                c.complete("s", f"p{i}")
            assert not isinstance(e.value, LLMUnavailable)


def test_retry_window_bounds_one_request(fake_api, tmp_path, monkeypatch):
    vt = virtual_time(monkeypatch)  # the window on the client's own waits, not the machine's speed
    fake_api.responder = lambda body: error(503)
    c = client(
        fake_api,
        tmp_path,
        max_retries=1000,
        backoff_s=0.05,
        max_backoff_s=0.05,
        max_retry_s=0.5,
        max_failed_requests=10,
    )
    with pytest.raises(LLMError):
        c.complete("s", "p")
    n = len(fake_api.message_requests)
    # delays of 0.025-0.05 s inside a 0.5 s window: 10 to 21 attempts, not the 1001 retries allow,
    # and no retry starts after the window
    assert sum(vt.sleeps) < 0.5 and 10 <= n <= 21 and n == len(vt.sleeps) + 1, (vt.sleeps, n)


def test_retry_timeout_is_cut_to_the_window(fake_api, tmp_path, monkeypatch):
    vt = virtual_time(
        monkeypatch
    )  # each timed-out attempt is charged its timeout on the client's clock
    fake_api.responder = lambda body: slow(5.0, text("late"))
    c = client(fake_api, tmp_path, timeout_s=1.0, max_retry_s=0.4, max_unreachable=10)
    vt.timed(c)
    with pytest.raises(LLMError, match="timeout"):
        c.complete("s", "p")
    # the first attempt's full timeout, then retries whose timeouts and delays fit the 0.4 s window
    first, *retries = vt.timeouts
    assert first == 1.0 and retries and all(t < 0.4 for t in retries), vt.timeouts
    assert sum(retries) + sum(vt.sleeps) <= 0.4 + 1e-9, (vt.timeouts, vt.sleeps)


def test_check_ready_needs_key_and_sdk_but_no_request(fake_api, tmp_path, monkeypatch):
    c = client(fake_api, tmp_path)
    c.check_ready()
    monkeypatch.delenv("ANTHROPIC_API_KEY")
    with pytest.raises(LLMConfigError, match="ANTHROPIC_API_KEY"):
        c.check_ready()
    assert fake_api.requests == []
