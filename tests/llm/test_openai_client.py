"""LLMClient on the OpenAI chat-completions protocol (vLLM / SGLang / OpenAI), against a real HTTP
stand-in on 127.0.0.1 (tests/helpers/fake_openai_server.py). Nothing reaches a network beyond
loopback; the key, where one is used, is a dummy.
"""

from __future__ import annotations

import json
import logging
import socket
import time
from pathlib import Path

import pytest
from omegaconf import OmegaConf

from helpers.fake_openai_server import (
    DUMMY_OPENAI_KEY,
    FakeOpenAIServer,
    Reply,
    drop,
    error,
    fake_openai,  # noqa: F401
    raw,
    slow,
    text,
)
from helpers.llm_time import virtual_time

from fdeval.launch import CONF_DIR
from fdeval.llm import LLMClient, LLMConfigError, LLMError, request_hash
from fdeval.llm.client import OPENAI_DEFAULT_URLS, LLMUnavailable

MODEL = "Qwen/Qwen2.5-7B-Instruct"


def client(server, tmp_path, **kw) -> LLMClient:
    kw = {
        "backoff_s": 0.001,
        "max_backoff_s": 0.01,
        "timeout_s": 5.0,
        "backend": "vllm",
        "base_url": server.base_url,
        **kw,
    }
    return LLMClient(MODEL, 0.0, 256, tmp_path / "cache", seed=7, **kw)


def cache_files(tmp_path):
    return sorted((tmp_path / "cache").rglob("*.json"))


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_answer_sends_the_pinned_settings_and_records_them(fake_openai, tmp_path):
    fake_openai.push(text("hello there"))
    c = client(fake_openai, tmp_path, top_p=0.9)
    r = c.complete("be brief", "say hello")
    assert (r.text, r.cached, r.model, r.stop_reason) == ("hello there", False, MODEL, "stop")
    assert r.usage["input_tokens"] >= 1 and r.usage["output_tokens"] >= 1
    [req] = fake_openai.chat_requests
    assert req.path == "/v1/chat/completions"
    assert req.body == {
        "model": MODEL,
        "max_tokens": 256,
        "temperature": 0.0,
        "top_p": 0.9,
        "seed": 7,
        "stream": False,
        "messages": [
            {"role": "system", "content": "be brief"},
            {"role": "user", "content": "say hello"},
        ],
    }
    assert "authorization" not in req.headers  # a loopback server without a key gets none
    [f] = cache_files(tmp_path)
    entry = json.loads(f.read_text())
    assert (
        f.stem
        == r.prompt_hash
        == request_hash(
            MODEL,
            0.0,
            256,
            "be brief",
            "say hello",
            7,
            endpoint=c.endpoint,
            protocol="openai",
            top_p=0.9,
        )
    )
    assert {
        k: entry["request"][k]
        for k in (
            "backend",
            "endpoint",
            "model",
            "temperature",
            "top_p",
            "seed",
            "max_tokens",
            "temperature_sent",
            "top_p_sent",
            "seed_sent",
        )
    } == {
        "backend": "openai",
        "endpoint": fake_openai.base_url,
        "model": MODEL,
        "temperature": 0.0,
        "top_p": 0.9,
        "seed": 7,
        "max_tokens": 256,
        "temperature_sent": True,
        "top_p_sent": True,
        "seed_sent": True,
    }
    assert (
        entry["response"]["text"] == "hello there" and entry["response"]["finish_reason"] == "stop"
    )


def test_cache_hit_makes_no_request_and_needs_no_server(fake_openai, tmp_path):
    fake_openai.push(text("kept"))
    first = client(fake_openai, tmp_path).complete("s", "p")
    fake_openai.stop()
    again = client(fake_openai, tmp_path).complete("s", "p")  # same endpoint, server gone
    assert again.cached and again.text == "kept" and again.prompt_hash == first.prompt_hash
    assert len(fake_openai.chat_requests) == 1


def test_another_endpoint_or_protocol_misses_the_cache(fake_openai, tmp_path, monkeypatch):
    fake_openai.push(text("from server A"))
    a = client(fake_openai, tmp_path).complete("s", "p")
    with FakeOpenAIServer() as other:
        other.push(text("from server B"))
        b = client(other, tmp_path).complete("s", "p")
        assert (b.text, b.cached) == ("from server B", False) and len(other.chat_requests) == 1
    assert a.prompt_hash != b.prompt_hash and len(cache_files(tmp_path)) == 2
    # the backend name is only a default URL: openai at the same URL is the same server and cache
    same = client(fake_openai, tmp_path, backend="openai").complete("s", "p")
    assert same.cached and same.text == "from server A"
    # the Anthropic protocol at the same URL is another API: never answered from this cache
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-dummy")
    anth = LLMClient(MODEL, 0.0, 256, tmp_path / "cache", seed=7, base_url=fake_openai.base_url)
    assert anth.request_hash("s", "p") != a.prompt_hash
    assert len(fake_openai.chat_requests) == 1


@pytest.mark.parametrize(
    "field,value", [("backend", "anthropic"), ("endpoint", "http://127.0.0.1:8000/v1")]
)
def test_entry_of_another_protocol_or_server_under_the_key_is_not_trusted(
    fake_openai, tmp_path, field, value
):
    fake_openai.push(text("one"), text("two"))
    c = client(fake_openai, tmp_path)
    path = c.cache_path(c.complete("s", "p").prompt_hash)
    entry = json.loads(path.read_text())
    entry["request"][field] = value
    path.write_text(json.dumps(entry))
    assert c.complete("s", "p").text == "two"


def test_429_then_success_honours_retry_after(fake_openai, tmp_path, caplog):
    fake_openai.push(error(429, "rate_limit", "slow down", {"retry-after": "0.2"}), text("finally"))
    t0 = time.monotonic()
    with caplog.at_level(logging.WARNING, logger="fdeval.llm"):
        r = client(fake_openai, tmp_path, max_backoff_s=1.0).complete("s", "p")
    assert r.text == "finally" and time.monotonic() - t0 >= 0.2
    assert len(fake_openai.chat_requests) == 2
    [warn] = [rec.getMessage() for rec in caplog.records if "retry" in rec.getMessage()]
    assert "HTTP 429 rate_limit: slow down" in warn and "retry 1/5" in warn


def test_500_exhausts_retries_into_an_error_then_the_run_stops(fake_openai, tmp_path):
    c = client(fake_openai, tmp_path, max_retries=2)
    for n in range(3):
        fake_openai.push(*[error(500, message=f"down {n}")] * 3)
        kind = LLMUnavailable if n == 2 else LLMError
        with pytest.raises(LLMError) as e:
            c.complete("s", f"p{n}")
        assert type(e.value) is kind, (n, e.value)
        assert "\n" not in str(e.value) and f"down {n}" in str(e.value)
    assert len(fake_openai.chat_requests) == 9 and cache_files(tmp_path) == []
    with pytest.raises(LLMUnavailable):  # stopped: nothing more is sent
        c.complete("s", "p4")
    assert len(fake_openai.chat_requests) == 9


@pytest.mark.parametrize(
    "body",
    [
        b"{not json",
        b"<html>gateway</html>",
        b'{"object": "chat.completion"}',
        b'{"choices": []}',
        b'{"choices": [{"message": {"role": "assistant", "content": null}}]}',
        b"[1, 2]",
    ],
)
def test_malformed_bodies_are_retried_then_an_error(fake_openai, tmp_path, body):
    fake_openai.push(raw(200, body), text("real"))
    assert client(fake_openai, tmp_path).complete("s", "p").text == "real"
    fake_openai.push(raw(200, body), raw(200, body))
    with pytest.raises(LLMError, match="malformed response") as e:
        client(fake_openai, tmp_path, max_retries=1).complete("s", "q")
    assert not isinstance(e.value, LLMConfigError)
    assert len(cache_files(tmp_path)) == 1


@pytest.mark.parametrize(
    "status,kind", [(400, LLMError), (422, LLMError), (401, LLMConfigError), (404, LLMConfigError)]
)
def test_non_retryable_statuses_fail_at_once(fake_openai, tmp_path, status, kind):
    fake_openai.push(error(status, "invalid_request_error", "The model `x` does not exist."))
    with pytest.raises(kind) as e:
        client(fake_openai, tmp_path).complete("s", "p")
    assert f"HTTP {status} invalid_request_error: The model" in str(e.value) and "\n" not in str(
        e.value
    )
    assert len(fake_openai.chat_requests) == 1


def test_vllm_style_error_body_is_read(fake_openai, tmp_path):
    body = json.dumps(
        {
            "object": "error",
            "message": "max_tokens is too large",
            "type": "BadRequestError",
            "code": 400,
        }
    ).encode()
    fake_openai.push(Reply(400, body=body))
    with pytest.raises(LLMError, match="HTTP 400 BadRequestError: max_tokens is too large"):
        client(fake_openai, tmp_path).complete("s", "p")


def test_cut_answer_is_reported_as_max_tokens(fake_openai, tmp_path):
    fake_openai.push(text('{"reasoning": "Step 1', finish_reason="length"))
    assert client(fake_openai, tmp_path).complete("s", "p").stop_reason == "max_tokens"


def test_key_is_sent_as_bearer_and_never_reaches_cache_logs_or_errors(
    fake_openai, tmp_path, caplog, monkeypatch
):
    monkeypatch.setenv("OPENAI_API_KEY", DUMMY_OPENAI_KEY)
    fake_openai.push(error(429, "rate_limit", f"echoing {DUMMY_OPENAI_KEY}"), text("fine"))
    with caplog.at_level(logging.DEBUG):
        c = client(fake_openai, tmp_path)
        c.complete("s", "p")
        fake_openai.push(error(400, "invalid_request_error", f"bad key {DUMMY_OPENAI_KEY}"))
        with pytest.raises(LLMError) as e:
            c.complete("s", "other")
    assert DUMMY_OPENAI_KEY not in str(e.value) and "***" in str(e.value)
    assert DUMMY_OPENAI_KEY not in caplog.text and DUMMY_OPENAI_KEY not in repr(c)
    assert cache_files(tmp_path) and all(
        DUMMY_OPENAI_KEY not in f.read_text() for f in cache_files(tmp_path)
    )
    assert fake_openai.chat_requests[0].headers["authorization"] == f"Bearer {DUMMY_OPENAI_KEY}"


def test_remote_endpoint_needs_the_key_before_any_request(tmp_path, monkeypatch):
    def no_network(*a, **k):
        raise AssertionError("network I/O")

    monkeypatch.setattr(socket.socket, "connect", no_network)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    c = LLMClient("gpt-4o-2024-08-06", 0.0, 16, tmp_path, backend="openai")
    assert c.endpoint == "https://api.openai.com/v1"
    for call in (c.check_ready, lambda: c.complete("s", "p")):
        with pytest.raises(LLMConfigError) as e:
            call()
        assert "OPENAI_API_KEY" in str(e.value) and "\n" not in str(e.value)
    monkeypatch.setenv("OPENAI_API_KEY", DUMMY_OPENAI_KEY)
    c.check_ready()
    LLMClient(MODEL, 0.0, 16, tmp_path, backend="vllm").check_ready()  # loopback: no key needed
    monkeypatch.delenv("OPENAI_API_KEY")
    LLMClient(MODEL, 0.0, 16, tmp_path, backend="sglang").check_ready()


def test_default_endpoints_and_plain_http_only_to_loopback(tmp_path, monkeypatch):
    monkeypatch.setenv(
        "ANTHROPIC_BASE_URL", "https://anthropic.proxy.example"
    )  # not read by this protocol
    assert {
        b: LLMClient(MODEL, 0.0, 16, tmp_path, backend=b).endpoint for b in OPENAI_DEFAULT_URLS
    } == {
        "openai": "https://api.openai.com/v1",
        "vllm": "http://127.0.0.1:8000/v1",
        "sglang": "http://127.0.0.1:30000/v1",
    }
    assert (
        LLMClient(
            MODEL, 0.0, 16, tmp_path, backend="vllm", base_url="https://gpu.example.org/v1/"
        ).endpoint
        == "https://gpu.example.org/v1"
    )
    with pytest.raises(LLMConfigError, match="refusing plain http to gpu-node-12"):
        LLMClient(MODEL, 0.0, 16, tmp_path, backend="vllm", base_url="http://gpu-node-12:8000/v1")
    for kw, field in (
        ({"backend": "llama"}, "backend"),
        ({"top_p": 0}, "top_p"),
        ({"top_p": 1.5}, "top_p"),
    ):
        with pytest.raises(LLMConfigError, match=f"^llm.{field}: "):
            LLMClient(MODEL, 0.0, 16, tmp_path, **kw)


def test_closed_port_stops_in_seconds(tmp_path, monkeypatch):
    vt = virtual_time(monkeypatch)  # the client's own waits, not the machine's speed
    c = LLMClient(
        MODEL,
        0.0,
        16,
        tmp_path,
        backend="vllm",
        base_url=f"http://127.0.0.1:{closed_port()}/v1",
        backoff_s=0.01,
        max_backoff_s=0.02,
    )
    vt.timed(c)
    with pytest.raises(LLMUnavailable) as e:
        c.complete("s", "p")
    assert "3 consecutive attempts without an answer" in str(e.value)
    # three attempts and two short delays: no retry past the third, no long wait
    assert len(vt.timeouts) == 3 and len(vt.sleeps) == 2 and sum(vt.sleeps) < 0.05, (
        vt.timeouts,
        vt.sleeps,
    )
    assert "connection error" in str(e.value)


def test_dropped_connection_and_timeout_are_retried(fake_openai, tmp_path, caplog):
    # a timeout well above a loopback answer on a loaded machine (the third must come within it),
    # the slow answer far above the timeout
    fake_openai.push(drop(), slow(20.0, text("too late")), text("ok"))
    with caplog.at_level(logging.WARNING, logger="fdeval.llm"):
        assert client(fake_openai, tmp_path, timeout_s=2.0).complete("s", "p").text == "ok"
    msgs = " | ".join(rec.getMessage() for rec in caplog.records)
    assert "connection error" in msgs and "timeout" in msgs


@pytest.mark.parametrize("status", [302, 303, 307])
def test_loopback_requests_ignore_proxies_and_redirects_are_not_followed(
    fake_openai, tmp_path, monkeypatch, status
):
    monkeypatch.setenv("http_proxy", f"http://127.0.0.1:{closed_port()}")
    monkeypatch.setenv("OPENAI_API_KEY", DUMMY_OPENAI_KEY)
    fake_openai.push(text("direct"))
    assert client(fake_openai, tmp_path).complete("s", "p").text == "direct"
    with FakeOpenAIServer() as elsewhere:
        fake_openai.push(
            Reply(status, body=b"", headers={"location": f"{elsewhere.base_url}/chat/completions"})
        )
        with pytest.raises(LLMError, match=f"HTTP {status}.*redirects are not followed"):
            client(fake_openai, tmp_path).complete("s", "q")
        assert elsewhere.requests == []  # the key never went to the redirect target


@pytest.mark.parametrize(
    "preset,backend,url",
    [
        ("openai", "openai", "https://api.openai.com/v1"),
        ("vllm", "vllm", "http://127.0.0.1:8000/v1"),
        ("sglang", "sglang", "http://127.0.0.1:30000/v1"),
    ],
)
def test_presets_pin_settings_hold_no_key_and_build_a_client(preset, backend, url, tmp_path):
    cfg = OmegaConf.to_container(OmegaConf.load(Path(CONF_DIR) / "llm" / f"{preset}.yaml"))
    assert set(cfg) == set(
        OmegaConf.to_container(OmegaConf.load(Path(CONF_DIR) / "llm" / "anthropic.yaml"))
    )
    assert (cfg["backend"], cfg["base_url"]) == (backend, url)
    assert not any("key" in k or "token" in k for k in cfg if k != "max_tokens")
    c = LLMClient(
        cfg["model"] or MODEL,
        cfg["temperature"],
        cfg["max_tokens"],
        tmp_path,
        seed=cfg["seed"],
        backend=cfg["backend"],
        base_url=cfg["base_url"],
    )
    assert c.endpoint == url and c.protocol == "openai"


def test_reasoning_model_settings_are_sent_and_key_the_cache(fake_openai, tmp_path):
    """GPT-5.x take the output bound as max_completion_tokens and a reasoning_effort."""
    fake_openai.push(text("plain"), text("reasoned"))
    plain = client(fake_openai, tmp_path).complete("s", "p")
    c = client(
        fake_openai, tmp_path, max_tokens_param="max_completion_tokens", reasoning_effort="none"
    )
    reasoned = c.complete("s", "p")
    assert (plain.text, reasoned.text) == (
        "plain",
        "reasoned",
    ) and plain.prompt_hash != reasoned.prompt_hash
    body = fake_openai.chat_requests[1].body
    assert (
        body["max_completion_tokens"] == 256
        and "max_tokens" not in body
        and body["reasoning_effort"] == "none"
    )
    entry = json.loads(c.cache_path(reasoned.prompt_hash).read_text())
    assert (entry["request"]["max_tokens_param"], entry["request"]["reasoning_effort"]) == (
        "max_completion_tokens",
        "none",
    )
    with pytest.raises(LLMConfigError, match="max_tokens_param"):
        client(fake_openai, tmp_path, max_tokens_param="max_output_tokens")
