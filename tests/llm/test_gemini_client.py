"""LLMClient on Gemini's text generateContent (backend gemini), against a real HTTP stand-in on
127.0.0.1 that validates each request and answer with the google-genai package's own types
(tests/helpers/fake_gemini_text_server.py). The hosted API cannot be reached here; the key, where
one is used, is a dummy. The retry loop and the cache are the ones the OpenAI tests cover; these
tests check what differs: the wire shapes, the key header, thought parts, stop reasons, errors.
"""

from __future__ import annotations

import json
import logging

import pytest

from helpers.fake_gemini_text_server import DUMMY_GEMINI_KEY, error, fake_gemini, raw, text  # noqa: F401

from fdeval.llm import LLMClient, LLMConfigError, LLMError
from fdeval.llm.client import key_variables, resolve_endpoint

MODEL = "gemini-3-pro-preview"


def client(server, tmp_path, **kw) -> LLMClient:
    kw = {
        "backoff_s": 0.001,
        "max_backoff_s": 0.01,
        "timeout_s": 5.0,
        "backend": "gemini",
        "base_url": server.base_url,
        **kw,
    }
    return LLMClient(MODEL, 0.9, 300, tmp_path / "cache", seed=11, **kw)


def test_answer_sends_the_sdk_shapes_and_keeps_only_the_answer_text(fake_gemini, tmp_path):
    fake_gemini.push(text("the answer", thought="thinking it over"))
    c = client(fake_gemini, tmp_path, top_p=0.95)
    r = c.complete("be brief", "say something")
    assert (r.text, r.cached, r.model, r.stop_reason) == ("the answer", False, MODEL, "end_turn")
    assert r.usage["input_tokens"] >= 1 and r.usage["output_tokens"] >= 1
    assert fake_gemini.invalid == []
    [req] = fake_gemini.generate_requests
    assert req.path == f"/v1beta/models/{MODEL}:generateContent"
    assert req.body == {
        "contents": [{"role": "user", "parts": [{"text": "say something"}]}],
        "systemInstruction": {"parts": [{"text": "be brief"}]},
        "generationConfig": {"maxOutputTokens": 300, "temperature": 0.9, "topP": 0.95, "seed": 11},
    }
    assert "x-goog-api-key" not in req.headers  # a loopback server without a key gets none
    [f] = sorted((tmp_path / "cache").rglob("*.json"))
    entry = json.loads(f.read_text())
    assert entry["request"]["backend"] == "gemini" and entry["request"]["seed_sent"] is True
    again = client(fake_gemini, tmp_path, top_p=0.95).complete("be brief", "say something")
    assert again.cached and again.text == "the answer" and len(fake_gemini.generate_requests) == 1


def test_key_goes_in_its_header_only_and_a_remote_endpoint_needs_one(
    fake_gemini, tmp_path, monkeypatch, caplog
):
    monkeypatch.setenv("GOOGLE_API_KEY", DUMMY_GEMINI_KEY)
    fake_gemini.push(error(503, "overloaded"), text("ok"))
    with caplog.at_level(logging.DEBUG):
        assert client(fake_gemini, tmp_path).complete("s", "p").text == "ok"
    assert [r.headers.get("x-goog-api-key") for r in fake_gemini.generate_requests] == [
        DUMMY_GEMINI_KEY
    ] * 2
    assert all("authorization" not in r.headers for r in fake_gemini.generate_requests)
    assert DUMMY_GEMINI_KEY not in caplog.text
    assert not [p for p in tmp_path.rglob("*.json") if DUMMY_GEMINI_KEY in p.read_text()]
    monkeypatch.delenv("GOOGLE_API_KEY")
    remote = LLMClient(MODEL, 0.9, 300, tmp_path / "c2", backend="gemini")
    assert remote.endpoint == "https://generativelanguage.googleapis.com/v1beta"
    with pytest.raises(LLMConfigError, match="GEMINI_API_KEY"):
        remote.check_ready()
    assert set(key_variables("gemini")) == {"GEMINI_API_KEY", "GOOGLE_API_KEY"}
    with pytest.raises(LLMConfigError, match="plain http"):
        resolve_endpoint("http://example.org/v1beta", backend="gemini")


def test_errors_cut_and_blocked_answers(fake_gemini, tmp_path):
    fake_gemini.push(error(404, "models/x is not found"))
    with pytest.raises(LLMConfigError, match="model or endpoint not found.*NOT_FOUND"):
        client(fake_gemini, tmp_path).complete("s", "one")
    fake_gemini.push(error(400, "bad field"))
    with pytest.raises(LLMError, match="rejected: HTTP 400 INVALID_ARGUMENT: bad field"):
        client(fake_gemini, tmp_path).complete("s", "two")
    fake_gemini.push(text("half an ans", finish_reason="MAX_TOKENS"))
    assert client(fake_gemini, tmp_path).complete("s", "three").stop_reason == "max_tokens"
    blocked = json.dumps({"promptFeedback": {"blockReason": "SAFETY"}}).encode()
    fake_gemini.push(*[raw(200, blocked)] * 3)
    with pytest.raises(LLMError, match="prompt blocked: SAFETY"):
        client(fake_gemini, tmp_path, max_retries=2).complete("s", "four")
    assert fake_gemini.invalid == []


def test_openai_reasoning_settings_are_refused_for_gemini(tmp_path):
    with pytest.raises(LLMConfigError, match="settings of the OpenAI protocol"):
        LLMClient(
            MODEL, 0.9, 300, tmp_path, backend="gemini", max_tokens_param="max_completion_tokens"
        )
