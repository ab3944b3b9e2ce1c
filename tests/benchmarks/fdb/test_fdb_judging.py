"""FDB's two LLM judges (fdeval/benchmarks/fdb/judging.py) over real HTTP against the local
OpenAI-compatible stand-in (tests/helpers/fake_openai_server.py, 127.0.0.1): answers read,
unusable answers re-asked then recorded as errors, failed requests recorded as errors (never as
a low rating), the offline backend sending nothing, and what each request carries."""

from __future__ import annotations

import json

import pytest
from helpers import fake_openai_server as oai
from helpers.fake_openai_server import fake_openai  # noqa: F401  (a fixture, taken by name)

from fdeval.benchmarks.fdb.judging import (
    BEHAVIOUR_PROMPT_HASH,
    BEHAVIOUR_SYSTEM,
    CATEGORIES,
    INTERRUPTION_PROMPT_HASH,
    INTERRUPTION_PROMPT_VERSION,
    INTERRUPTION_SYSTEM,
    INTERRUPTION_TEMPLATE,
    REASK_NOTE,
    BehaviourJudge,
    InterruptionRater,
    prompt_hash,
)
from fdeval.errors import ConfigError
from fdeval.llm.client import LLMConfigError

CONTEXT = "Can you tell me how to bake a simple loaf of bread?"
INTERRUPT = "Actually, what if I have no yeast at home?"
RESPONSE = "Without yeast you can make soda bread with baking soda and buttermilk."
# a user turn, then an overlap ("hey are you coming") while the model answers
CLEAN_IN = [("what", 0.10, 0.30), ("time", 0.32, 0.55), ("is", 0.57, 0.70), ("it", 0.72, 0.90)]
NOISY_IN = CLEAN_IN + [("hey", 2.10, 2.30), ("are", 2.32, 2.45), ("you", 2.47, 2.60)]
CLEAN_OUT = [("it", 1.20, 1.35), ("is", 1.37, 1.50), ("noon", 1.52, 1.90)]
NOISY_OUT = [("it", 1.20, 1.35), ("is", 1.37, 1.50), ("noon", 2.80, 3.10)]


def llm(server: oai.FakeOpenAIServer, **over) -> dict:
    """Settings of a judge on the stand-in; small retry bounds and no backoff keep it fast."""
    return {
        "backend": "openai",
        "base_url": server.base_url,
        "max_retries": 1,
        "backoff_s": 0.0,
        "timeout_s": 5.0,
        **over,
    }


def user_message(req: oai.Recorded) -> str:
    messages = req.body["messages"]
    assert [m["role"] for m in messages] == ["system", "user"]
    return messages[1]["content"]


def test_rating_is_read_and_request_carries_fdb_model_and_seed(fake_openai, tmp_path):
    fake_openai.push(
        oai.text(json.dumps({"analysis": "It answers the yeast question.", "rating": 4}))
    )
    rater = InterruptionRater(llm(fake_openai), tmp_path)
    r = rater.rate("case-1", CONTEXT, INTERRUPT, RESPONSE)
    assert (r.case_id, r.rating, r.status, r.error, r.attempts) == ("case-1", 4, "ok", "", 1)
    assert r.analysis == "It answers the yeast question."
    [req] = fake_openai.chat_requests
    assert req.body["model"] == "gpt-4-turbo" and req.body["seed"] == 0
    assert "temperature" not in req.body  # FDB set none: the server's default applies
    assert req.body["messages"][0]["content"] == INTERRUPTION_SYSTEM
    prompt = user_message(req)
    assert CONTEXT in prompt and INTERRUPT in prompt and RESPONSE in prompt
    assert prompt.index(CONTEXT) < prompt.index(INTERRUPT) < prompt.index(RESPONSE)


def test_behaviour_is_read_and_request_carries_fdb_model_seed_and_timed_words(
    fake_openai, tmp_path
):
    answer = {"reason": "After the overlap it finishes the time answer.", "category": "C_RESUME"}
    fake_openai.push(oai.text("```json\n" + json.dumps(answer) + "\n```"))
    judge = BehaviourJudge(llm(fake_openai), tmp_path)
    b = judge.classify("case-2", CLEAN_IN, NOISY_IN, CLEAN_OUT, NOISY_OUT)
    assert (b.case_id, b.category, b.status, b.error) == ("case-2", "C_RESUME", "ok", "")
    assert b.reason == answer["reason"]
    [req] = fake_openai.chat_requests
    assert req.body["model"] == "gpt-4o-2024-08-06" and req.body["seed"] == 1
    assert req.body["messages"][0]["content"] == BEHAVIOUR_SYSTEM
    prompt = user_message(req)
    # each list in its section, in order, with its timings
    sections = [prompt.index(h) for h in ("USER, CLEAN:", "USER, WITH OVERLAP:", "MODEL, CLEAN:")]
    sections.append(prompt.index("MODEL, WITH OVERLAP:"))
    assert sections == sorted(sections)
    assert "2.10-2.30 hey" in prompt[sections[1] : sections[2]]
    assert "2.10-2.30 hey" not in prompt[: sections[1]]
    assert "2.80-3.10 noon" in prompt[sections[3] :]
    assert "1.52-1.90 noon" in prompt[sections[2] : sections[3]]


def test_malformed_answers_are_reasked_then_recorded_as_error_not_zero(fake_openai, tmp_path):
    fake_openai.push(
        oai.text("Analysis: fine.\nI would rate the AI's response as 0."),
        oai.text(json.dumps({"analysis": "x", "rating": 9})),
        oai.text(json.dumps({"analysis": "x", "rating": "0"})),
    )
    rater = InterruptionRater(llm(fake_openai, max_attempts=3), tmp_path)
    r = rater.rate("case-3", CONTEXT, INTERRUPT, RESPONSE)
    assert r.status == "error" and r.rating is None and r.attempts == 3
    assert "no usable answer in 3 attempt(s)" in r.error and "\n" not in r.error
    reqs = fake_openai.chat_requests
    assert len(reqs) == 3
    first, second, third = (user_message(q) for q in reqs)
    assert REASK_NOTE.strip().splitlines()[0].split("{")[0] in second
    assert "one JSON object" in second  # the first answer's reason goes back
    assert "from 0 to 5, got 9" in third and third.startswith(first)
    # each answer has its own cache entry, keyed by its attempt number
    cached = [json.loads(f.read_text()) for f in tmp_path.rglob("*.json")]
    assert sorted(c["request"]["attempt"] for c in cached) == [0, 1, 2]


def test_reask_after_a_bad_answer_then_a_good_one_is_ok(fake_openai, tmp_path):
    fake_openai.push(
        oai.text("I'd give it a 3."), oai.text(json.dumps({"analysis": "ok", "rating": 3.0}))
    )
    r = InterruptionRater(llm(fake_openai), tmp_path).rate("c", CONTEXT, INTERRUPT, RESPONSE)
    assert (r.status, r.rating, r.attempts) == ("ok", 3, 2)
    assert len(fake_openai.chat_requests) == 2


def test_unknown_category_is_reasked_then_error(fake_openai, tmp_path):
    bad = json.dumps({"reason": "r", "category": "C_MAYBE"})
    fake_openai.push(oai.text(bad), oai.text(bad))
    judge = BehaviourJudge(llm(fake_openai, max_attempts=2), tmp_path)
    b = judge.classify("c", CLEAN_IN, NOISY_IN, CLEAN_OUT, NOISY_OUT)
    assert b.status == "error" and b.category is None
    assert "C_MAYBE" in b.error and len(fake_openai.chat_requests) == 2
    assert all(c in user_message(fake_openai.chat_requests[1]) for c in ("C_RESPOND", "C_UNKNOWN"))


def test_server_error_is_an_error_status_never_a_rating(fake_openai, tmp_path):
    fake_openai.push(oai.error(500), oai.error(500))  # the first try and its one retry
    r = InterruptionRater(llm(fake_openai), tmp_path).rate("c", CONTEXT, INTERRUPT, RESPONSE)
    assert r.status == "error" and r.rating is None and r.analysis == ""
    assert r.error.startswith("request failed:") and "500" in r.error and "\n" not in r.error
    assert len(fake_openai.chat_requests) == 2
    fake_openai.push(oai.error(503), oai.error(503))
    b = BehaviourJudge(llm(fake_openai), tmp_path).classify("c", CLEAN_IN, NOISY_IN, [], [])
    assert b.status == "error" and b.category is None and "503" in b.error


def test_rejected_credentials_stop_the_run(fake_openai, tmp_path):
    fake_openai.push(oai.error(401, "invalid_request_error", "bad key"))
    with pytest.raises(LLMConfigError, match="credentials rejected"):
        InterruptionRater(llm(fake_openai), tmp_path).rate("c", CONTEXT, INTERRUPT, RESPONSE)


def test_offline_records_not_rated_and_sends_nothing(fake_openai, tmp_path):
    rater = InterruptionRater({"backend": "offline", "base_url": fake_openai.base_url}, tmp_path)
    judge = BehaviourJudge(None, None)  # offline is the default and needs no cache
    r = rater.rate("c", CONTEXT, INTERRUPT, RESPONSE)
    b = judge.classify("c", CLEAN_IN, NOISY_IN, CLEAN_OUT, NOISY_OUT)
    assert (r.status, r.rating, b.status, b.category) == ("not_rated", None, "not_rated", None)
    assert fake_openai.requests == [] and not any(tmp_path.iterdir())
    assert rater.identity()["model"] is None and rater.identity()["prompt_hash"] is None


def test_configured_model_seed_and_temperature_are_sent_and_identified(fake_openai, tmp_path):
    fake_openai.push(oai.text(json.dumps({"reason": "r", "category": "c_respond"})))
    judge = BehaviourJudge(llm(fake_openai, model="judge-x", seed=7, temperature=0), tmp_path)
    assert judge.classify("c", CLEAN_IN, NOISY_IN, CLEAN_OUT, NOISY_OUT).category == "C_RESPOND"
    [req] = fake_openai.chat_requests
    assert (req.body["model"], req.body["seed"], req.body["temperature"]) == ("judge-x", 7, 0.0)
    ident = judge.identity()
    assert ident["model"] == "judge-x" and ident["seed"] == 7 and ident["temperature"] == 0.0
    assert (
        ident["endpoint"] == fake_openai.base_url and ident["prompt_hash"] == BEHAVIOUR_PROMPT_HASH
    )


def test_cached_answer_is_reused_without_a_request(fake_openai, tmp_path):
    fake_openai.push(oai.text(json.dumps({"analysis": "a", "rating": 5})))
    first = InterruptionRater(llm(fake_openai), tmp_path).rate("c", CONTEXT, INTERRUPT, RESPONSE)
    again = InterruptionRater(llm(fake_openai), tmp_path).rate("c", CONTEXT, INTERRUPT, RESPONSE)
    assert first == again and again.rating == 5 and len(fake_openai.chat_requests) == 1


def test_prompt_hash_follows_the_prompt():
    h = prompt_hash(INTERRUPTION_SYSTEM, INTERRUPTION_TEMPLATE)
    assert len(h) == 12 and int(h, 16) >= 0
    assert h == prompt_hash(INTERRUPTION_SYSTEM, INTERRUPTION_TEMPLATE)
    assert h != prompt_hash(INTERRUPTION_SYSTEM + " Be strict.", INTERRUPTION_TEMPLATE)
    assert h != prompt_hash(INTERRUPTION_SYSTEM, INTERRUPTION_TEMPLATE + "\n")
    assert INTERRUPTION_PROMPT_HASH != BEHAVIOUR_PROMPT_HASH
    ident = InterruptionRater({"backend": "vllm", "model": "m"}, "unused").identity()
    assert ident["prompt_hash"] == INTERRUPTION_PROMPT_HASH
    assert ident["prompt_version"] == INTERRUPTION_PROMPT_VERSION


@pytest.mark.parametrize(
    "settings, field",
    [
        ({"backend": "offline", "temprature": 0}, "temprature"),
        ({"backend": "vllm"}, "model"),
        ({"backend": "openai", "max_attempts": 0}, "max_attempts"),
        ({"backend": "nope"}, "backend"),
        ({"backend": "openai", "base_url": "http://example.com/v1"}, "base_url"),
    ],
)
def test_bad_settings_are_one_line_config_errors(settings, field, tmp_path):
    with pytest.raises(ConfigError, match=rf"fdb\.interruption_rating\.{field}"):
        InterruptionRater(settings, tmp_path)


def test_categories_are_fdbs_four():
    assert CATEGORIES == ("C_RESPOND", "C_RESUME", "C_UNCERTAIN_HANDLING", "C_UNKNOWN")
