"""LLMJudge against a local stand-in of the Messages API (tests/helpers/fake_messages_server.py).

The real anthropic SDK talks over loopback to the fake server, which answers as scripted per test.
"""

from __future__ import annotations

import json
from dataclasses import replace

import pytest
from hydra import compose, initialize_config_dir
from hydra.core.global_hydra import GlobalHydra
from hydra.utils import instantiate
from omegaconf import OmegaConf

from helpers.fake_messages_server import DUMMY_KEY, error, fake_api, text  # noqa: F401
from judge_fixtures import Session

from fdeval.judges.base import verdict_to_dict
from fdeval.judges.llm import (LLM_JUDGE_VERSION, RETRY_REMINDER, SYSTEM_PROMPT, LLMJudge, UnreadableAnswer,
                               parse_answer, prompt_hash_of)
from fdeval.launch import CONF_DIR
from fdeval.llm import LLMConfigError
from fdeval.transcript.render import render, render_reference

YES = json.dumps({"reasoning": "Step 1: fine. Step 5: the model yielded and answered.", "adherence": "yes"})
NO = json.dumps({"reasoning": "Step 3: the model talked over the user for 4 s.", "adherence": "no"})


@pytest.fixture
def pair():
    """An acknowledge case: question, model answer, user 'wait' barge-in, model reply."""
    s = (Session("sketch__acknowledge", "acknowledge")
         .user("can you walk me through a simple way to start a character sketch", 0.2)
         .model("sure a simple way is to start with basic shapes", 4.0)
         .user("wait wait", 6.1, kind="interrupt")
         .model("oh sorry what's up", 8.0))
    case, transcript = s.build()
    return replace(case, system_instruction="Yield when the user cuts in and acknowledge them.",
                   judge_instructions={"acknowledge": "Yield when the user cuts in and acknowledge them."}), transcript


def make(server, tmp_path, **kw) -> LLMJudge:
    kw = {"cache_dir": tmp_path / "cache", "base_url": server.base_url, "backoff_s": 0.001, "max_backoff_s": 0.01, **kw}
    return LLMJudge(**kw)


def test_adhere_with_prompt_inputs_and_provenance(fake_api, tmp_path, pair):
    case, tr = pair
    fake_api.push(text(YES))
    judge = make(fake_api, tmp_path)
    v = judge.judge(case, "acknowledge", tr)
    assert v.verdict == "adhere"
    assert (v.judge, v.judge_version) == ("llm:claude-sonnet-4-6", LLM_JUDGE_VERSION)
    assert v.prompt_hash == judge.prompt_hash == prompt_hash_of("claude-sonnet-4-6", 0.0)
    assert "the model yielded and answered" in v.reasoning and judge.prompt_hash in v.reasoning
    [req] = fake_api.message_requests
    assert req.body["system"] == SYSTEM_PROMPT and req.body["model"] == "claude-sonnet-4-6"
    prompt = req.body["messages"][0]["content"]
    assert "Yield when the user cuts in and acknowledge them." in prompt
    assert render(tr) in prompt and render_reference(case, "acknowledge") in prompt
    assert "[Overlap]" in prompt  # "shapes" runs into "wait"


def test_no_maps_to_not_adhere_even_inside_fences_and_prose(fake_api, tmp_path, pair):
    case, tr = pair
    fake_api.push(text(f"Here is my evaluation.\n```json\n{NO}\n```\nThanks."))
    v = make(fake_api, tmp_path).judge(case, "acknowledge", tr)
    assert v.verdict == "not_adhere" and "talked over the user" in v.reasoning


def test_unreadable_answer_is_asked_again_then_error_not_a_failure(fake_api, tmp_path, pair):
    case, tr = pair
    fake_api.push(text("I think the model did fine."), text('{"adherence": "maybe"}'), text("no json here"))
    v = make(fake_api, tmp_path, max_parse_retries=2).judge(case, "acknowledge", tr)
    assert v.verdict == "error"
    assert "no readable answer after 3 attempt(s)" in v.reasoning and '"maybe"' in v.reasoning
    reqs = fake_api.message_requests
    assert len(reqs) == 3
    first = reqs[0].body["messages"][0]["content"]
    assert not first.endswith(RETRY_REMINDER)
    assert [r.body["messages"][0]["content"] for r in reqs[1:]] == [first + RETRY_REMINDER] * 2


def test_unreadable_then_readable_answer(fake_api, tmp_path, pair):
    case, tr = pair
    fake_api.push(text("```\nnot the format\n```"), text(YES))
    judge = make(fake_api, tmp_path)
    v = judge.judge(case, "acknowledge", tr)
    assert v.verdict == "adhere" and len(fake_api.message_requests) == 2
    # the rerun reads both answers from the cache: same verdict, no request
    again = make(fake_api, tmp_path).judge(case, "acknowledge", tr)
    assert verdict_to_dict(again) == verdict_to_dict(v) and len(fake_api.message_requests) == 2


def test_api_failure_after_retries_is_an_error_verdict(fake_api, tmp_path, pair):
    case, tr = pair
    fake_api.push(error(500, message="down"), error(529, "overloaded_error", "busy"))
    v = make(fake_api, tmp_path, max_retries=1).judge(case, "acknowledge", tr)
    assert v.verdict == "error" and "request failed" in v.reasoning and "HTTP 529" in v.reasoning
    assert v.prompt_hash and v.judge == "llm:claude-sonnet-4-6"


def test_rerun_is_served_from_the_cache(fake_api, tmp_path, pair, monkeypatch):
    case, tr = pair
    fake_api.push(text(NO))
    v1 = make(fake_api, tmp_path).judge(case, "acknowledge", tr)
    monkeypatch.delenv("ANTHROPIC_API_KEY")  # a cached rerun needs no key
    v2 = make(fake_api, tmp_path).judge(case, "acknowledge", tr)
    assert v1 == v2 and verdict_to_dict(v1) == verdict_to_dict(v2) and v2.verdict == "not_adhere"
    assert len(fake_api.message_requests) == 1


def test_key_never_in_verdict_or_cache(fake_api, tmp_path, pair, caplog):
    case, tr = pair
    fake_api.push(error(429, "rate_limit_error", "wait"), text(YES))
    with caplog.at_level("DEBUG"):
        v = make(fake_api, tmp_path).judge(case, "acknowledge", tr)
    assert DUMMY_KEY not in json.dumps(verdict_to_dict(v)) and DUMMY_KEY not in caplog.text
    for f in (tmp_path / "cache").rglob("*"):
        if f.is_file():
            assert DUMMY_KEY not in f.read_text()


def test_missing_key_stops_the_run_instead_of_writing_error_verdicts(fake_api, tmp_path, pair, monkeypatch):
    case, tr = pair
    monkeypatch.delenv("ANTHROPIC_API_KEY")
    with pytest.raises(LLMConfigError, match="ANTHROPIC_API_KEY"):
        make(fake_api, tmp_path).judge(case, "acknowledge", tr)
    assert fake_api.requests == []


def test_baseline_is_judged_against_the_sibling_instruction(fake_api, tmp_path, pair):
    case, tr = pair
    base = replace(case, case_id="sketch__none", policy_name="none", system_instruction=None,
                   judge_instructions={"acknowledge": "Sibling text: acknowledge a stop word at once."})
    tr = replace(tr, case_id="sketch__none", words=tuple(replace(w, case_id="sketch__none") for w in tr.words),
                 user_turns=tuple(replace(p, case_id="sketch__none") for p in tr.user_turns))
    fake_api.push(text(YES))
    assert make(fake_api, tmp_path).judge(base, "acknowledge", tr).verdict == "adhere"
    assert "Sibling text: acknowledge a stop word at once." in fake_api.message_requests[0].body["messages"][0]["content"]


def test_unjudgeable_pairs_are_errors_without_a_request(fake_api, tmp_path, pair):
    case, tr = pair
    judge = make(fake_api, tmp_path)
    other = replace(tr, case_id="other__listen")
    assert judge.judge(case, "acknowledge", other).verdict == "error"
    assert judge.judge(case, "listen", tr).verdict == "error"  # not among the case's judge policies
    no_text = replace(case, judge_instructions={}, system_instruction=None)
    v = judge.judge(no_text, "acknowledge", tr)
    assert v.verdict == "error" and "no instruction text" in v.reasoning
    assert fake_api.requests == []


def test_prompt_hash_depends_on_model_and_temperature(tmp_path):
    h = LLMJudge(cache_dir=tmp_path).prompt_hash
    assert LLMJudge(cache_dir=tmp_path / "elsewhere", max_tokens=100).prompt_hash == h
    assert LLMJudge(model="claude-opus-4-1", cache_dir=tmp_path).prompt_hash != h
    assert LLMJudge(temperature=0.5, cache_dir=tmp_path).prompt_hash != h
    assert LLMJudge(model="claude-opus-4-1", cache_dir=tmp_path).id == "llm:claude-opus-4-1"


@pytest.mark.parametrize("answer,expected", [
    ('{"reasoning": "ok", "adherence": "yes"}', ("ok", "yes")),
    ('{"reasoning": "r", "adherence": " NO "}', ("r", "no")),
    ('```json\n{"reasoning": "fenced", "adherence": "no"}\n```', ("fenced", "no")),
    ('Sure.\n{"reasoning": "line one\nline two", "adherence": "yes"}\nDone.', ("line one\nline two", "yes")),
    ('{"reasoning": "the user said "wait" twice", "adherence": "yes"}', ('the user said "wait" twice', "yes")),
    ('{"note": {"x": 1}} then {"adherence": "no"}', ("", "no")),
])
def test_parse_answer_tolerates(answer, expected):
    assert parse_answer(answer) == expected


@pytest.mark.parametrize("answer", ["", "adherence: yes", '{"reasoning": "x"}', '{"adherence": "maybe"}',
                                    '{"adherence": "yes"} and also {"adherence": "no" ',
                                    '"adherence": "yes" ... "adherence": "no"'])
def test_parse_answer_rejects(answer):
    with pytest.raises(UnreadableAnswer):
        parse_answer(answer)


def _compose(judge: str, *overrides: str):
    GlobalHydra.instance().clear()
    try:
        with initialize_config_dir(config_dir=str(CONF_DIR), version_base=None):
            return compose("config", overrides=[f"judge={judge}", *overrides])
    finally:
        GlobalHydra.instance().clear()


def test_llm_config_pins_model_and_caches_under_out_root(tmp_path):
    cfg = _compose("llm", f"out_root={tmp_path}")
    assert cfg.judge.model == "claude-sonnet-4-6" and cfg.judge.temperature == 0.0 and cfg.judge.base_url is None
    judge = instantiate(cfg.judge)
    assert isinstance(judge, LLMJudge) and judge.client.cache_dir == tmp_path / "_cache" / "llm_judge"
    # the ensemble's llm member is kept equal to conf/judge/llm.yaml
    ens = _compose("ensemble", f"out_root={tmp_path}")
    member = OmegaConf.to_container(ens.judge.judges[1], resolve=True)
    assert member == OmegaConf.to_container(cfg.judge, resolve=True)
