"""LLMJudge against local stand-ins of the Messages API (tests/helpers/fake_messages_server.py) and of
an OpenAI-compatible chat-completions server such as vLLM (tests/helpers/fake_openai_server.py).

The real anthropic SDK / the client's HTTP code talk over loopback to the fake servers, which
answer as scripted per test.
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir
from hydra.core.global_hydra import GlobalHydra
from hydra.utils import instantiate
from omegaconf import OmegaConf

from helpers.fake_messages_server import (
    DUMMY_KEY,
    FakeMessagesServer,
    drop,
    error,
    fake_api,  # noqa: F401  (a fixture, taken by name)
    raw,  # noqa: F401
    slow,
    text,
)
from helpers import fake_openai_server as oai
from helpers.fake_openai_server import DUMMY_OPENAI_KEY, FakeOpenAIServer, fake_openai  # noqa: F401
from helpers.llm_time import virtual_time
from judge_fixtures import Session

from fdeval.errors import FdevalError
from fdeval.benchmarks.instructfd.judges.base import verdict_to_dict, write_verdict
from fdeval.benchmarks.instructfd.judges.ensemble import EnsembleJudge
from fdeval.benchmarks.instructfd.judges.llm import (
    LLM_JUDGE_VERSION,
    RETRY_REMINDER,
    SYSTEM_PROMPT,
    JudgeUnavailable,
    LLMJudge,
    UnreadableAnswer,
    parse_answer,
    prompt_hash_of,
)
from fdeval.benchmarks.instructfd.judges.rules import RulesJudge
from fdeval.benchmarks.instructfd.reference import render_reference
from fdeval.launch import CONF_DIR
from fdeval.llm import LLMConfigError
from fdeval.llm.client import DEFAULT_BASE_URL
from fdeval.transcript.render import render

YES = json.dumps(
    {"reasoning": "Step 1: fine. Step 5: the model yielded and answered.", "adherence": "yes"}
)
NO = json.dumps({"reasoning": "Step 3: the model talked over the user for 4 s.", "adherence": "no"})


@pytest.fixture
def pair():
    """An acknowledge case: question, model answer, user 'wait' barge-in, model reply."""
    s = (
        Session("sketch__acknowledge", "acknowledge")
        .user("can you walk me through a simple way to start a character sketch", 0.2)
        .model("sure a simple way is to start with basic shapes", 4.0)
        .user("wait wait", 6.1, kind="interrupt")
        .model("oh sorry what's up", 8.0)
    )
    case, transcript = s.build()
    text = "Yield when the user cuts in and acknowledge them."
    return replace(
        case,
        system_instruction=text,
        data=replace(case.data, judge_instructions={"acknowledge": text}),
    ), transcript


def make(server, tmp_path, **kw) -> LLMJudge:
    kw = {
        "cache_dir": tmp_path / "cache",
        "base_url": server.base_url,
        "backoff_s": 0.001,
        "max_backoff_s": 0.01,
        **kw,
    }
    return LLMJudge(**kw)


def test_adhere_with_prompt_inputs_and_provenance(fake_api, tmp_path, pair):
    case, tr = pair
    fake_api.push(text(YES))
    judge = make(fake_api, tmp_path)
    v = judge.judge(case, "acknowledge", tr)
    assert v.verdict == "adhere"
    assert (v.judge, v.judge_version) == ("llm:claude-sonnet-4-6", LLM_JUDGE_VERSION)
    assert (
        v.prompt_hash
        == judge.prompt_hash
        == prompt_hash_of("claude-sonnet-4-6", 0.0, fake_api.base_url)
    )
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
    fake_api.push(
        text("I think the model did fine."), text('{"adherence": "maybe"}'), text("no json here")
    )
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


def test_missing_key_stops_the_run_instead_of_writing_error_verdicts(
    fake_api, tmp_path, pair, monkeypatch
):
    case, tr = pair
    monkeypatch.delenv("ANTHROPIC_API_KEY")
    with pytest.raises(LLMConfigError, match="ANTHROPIC_API_KEY"):
        make(fake_api, tmp_path).judge(case, "acknowledge", tr)
    assert fake_api.requests == []


def test_baseline_is_judged_against_the_sibling_instruction(fake_api, tmp_path, pair):
    case, tr = pair
    base = replace(
        case,
        case_id="sketch__none",
        system_instruction=None,
        data=replace(
            case.data,
            policy_name="none",
            judge_instructions={"acknowledge": "Sibling text: acknowledge a stop word at once."},
        ),
    )
    tr = replace(
        tr,
        case_id="sketch__none",
        words=tuple(replace(w, case_id="sketch__none") for w in tr.words),
        user_turns=tuple(replace(p, case_id="sketch__none") for p in tr.user_turns),
    )
    fake_api.push(text(YES))
    assert make(fake_api, tmp_path).judge(base, "acknowledge", tr).verdict == "adhere"
    assert (
        "Sibling text: acknowledge a stop word at once."
        in fake_api.message_requests[0].body["messages"][0]["content"]
    )


def test_unjudgeable_pairs_are_errors_without_a_request(fake_api, tmp_path, pair):
    case, tr = pair
    judge = make(fake_api, tmp_path)
    other = replace(tr, case_id="other__listen")
    assert judge.judge(case, "acknowledge", other).verdict == "error"
    assert judge.judge(case, "listen", tr).verdict == "error"  # not among the case's judge policies
    no_text = replace(case, data=replace(case.data, judge_instructions={}), system_instruction=None)
    v = judge.judge(no_text, "acknowledge", tr)
    assert v.verdict == "error" and "no instruction text" in v.reasoning
    assert fake_api.requests == []


def test_prompt_hash_depends_on_model_temperature_and_endpoint(tmp_path, monkeypatch):
    monkeypatch.delenv("ANTHROPIC_BASE_URL", raising=False)
    h = LLMJudge(cache_dir=tmp_path).prompt_hash
    assert LLMJudge(cache_dir=tmp_path / "elsewhere", max_tokens=100).prompt_hash == h
    assert LLMJudge(base_url=DEFAULT_BASE_URL + "/", cache_dir=tmp_path).prompt_hash == h
    assert LLMJudge(model="claude-opus-4-1", cache_dir=tmp_path).prompt_hash != h
    assert LLMJudge(temperature=0.5, cache_dir=tmp_path).prompt_hash != h
    assert LLMJudge(base_url="http://127.0.0.1:8080", cache_dir=tmp_path).prompt_hash != h
    monkeypatch.setenv("ANTHROPIC_BASE_URL", "https://proxy.example.com")
    assert LLMJudge(cache_dir=tmp_path).prompt_hash != h
    assert LLMJudge(model="claude-opus-4-1", cache_dir=tmp_path).id == "llm:claude-opus-4-1"


@pytest.mark.parametrize(
    "answer,expected",
    [
        ('{"reasoning": "ok", "adherence": "yes"}', ("ok", "yes")),
        ('{"reasoning": "r", "adherence": " NO "}', ("r", "no")),
        ('```json\n{"reasoning": "fenced", "adherence": "no"}\n```', ("fenced", "no")),
        (
            'Sure.\n{"reasoning": "line one\nline two", "adherence": "yes"}\nDone.',
            ("line one\nline two", "yes"),
        ),
        (
            '{"reasoning": "the user said "wait" twice", "adherence": "yes"}',
            ('the user said "wait" twice', "yes"),
        ),
        ('{"note": {"x": 1}} then {"adherence": "no"}', ("", "no")),
    ],
)
def test_parse_answer_tolerates(answer, expected):
    assert parse_answer(answer) == expected


@pytest.mark.parametrize(
    "answer",
    [
        "",
        "adherence: yes",
        '{"reasoning": "x"}',
        '{"adherence": "maybe"}',
        '{"adherence": "yes"} and also {"adherence": "no" ',
        '"adherence": "yes" ... "adherence": "no"',
    ],
)
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
    assert (
        cfg.judge.model == "claude-sonnet-4-6"
        and cfg.judge.temperature == 0.0
        and cfg.judge.base_url is None
    )
    judge = instantiate(cfg.judge)
    assert (
        isinstance(judge, LLMJudge) and judge.client.cache_dir == tmp_path / "_cache" / "llm_judge"
    )
    # the ensemble's llm member is kept equal to conf/judge/llm.yaml
    ens = _compose("ensemble", f"out_root={tmp_path}")
    member = OmegaConf.to_container(ens.judge.judges[1], resolve=True)
    assert member == OmegaConf.to_container(cfg.judge, resolve=True)


# ------------------------------------------------------------------------------------------------
# Identity, settings checked at construction, no I/O before judging


def test_identity_names_everything_that_changes_a_verdict(tmp_path, monkeypatch):
    monkeypatch.delenv("ANTHROPIC_BASE_URL", raising=False)
    base = LLMJudge(cache_dir=tmp_path)
    ident = base.identity()
    assert ident == json.loads(json.dumps(ident))  # JSON-ready
    assert ident == {
        "judge": "llm:claude-sonnet-4-6",
        "judge_version": LLM_JUDGE_VERSION,
        "prompt_hash": base.prompt_hash,
        "backend": "anthropic",
        "model": "claude-sonnet-4-6",
        "temperature": 0.0,
        "top_p": None,
        "max_tokens": 4096,
        "seed": None,
        "endpoint": DEFAULT_BASE_URL,
        "max_parse_retries": 2,
    }
    for kw in (
        {"model": "claude-opus-4-1"},
        {"temperature": 0.3},
        {"max_tokens": 512},
        {"seed": 1},
        {"base_url": "http://127.0.0.1:9"},
        {"max_parse_retries": 0},
        {"top_p": 0.9},
        {"backend": "vllm"},
    ):
        assert LLMJudge(cache_dir=tmp_path, **kw).identity() != ident, kw
    for kw in (
        {"cache_dir": tmp_path / "b"},
        {"timeout_s": 5.0},
        {"max_retries": 1},
        {"max_retry_s": 1.0},
        {"max_unreachable": 5},
    ):
        assert LLMJudge(**{"cache_dir": tmp_path, **kw}).identity() == ident, kw
    ens = EnsembleJudge([RulesJudge(), base])
    assert (
        ens.identity()["members"][1] == ident and ens.identity()["prompt_hash"] == ens.prompt_hash
    )


def test_construction_and_identity_do_no_network_io(tmp_path, monkeypatch):
    def no_network(*a, **k):
        raise AssertionError("network I/O while building the judge")

    monkeypatch.setattr(socket.socket, "connect", no_network)
    monkeypatch.setattr(socket, "getaddrinfo", no_network)
    monkeypatch.setenv("ANTHROPIC_API_KEY", DUMMY_KEY)
    judge = LLMJudge(cache_dir=tmp_path, base_url="https://api.anthropic.com")
    judge.identity()
    judge.check_ready()
    EnsembleJudge([RulesJudge(), judge]).check_ready()
    assert not (tmp_path / "cache").exists() and list(tmp_path.iterdir()) == []


def test_construction_imports_no_sdk_and_is_quick():
    """Quick by what it does, not by a wall-clock bound: constructing a judge and its identity import
    no module (no SDK, no HTTP stack) and open no connection (sockets are disabled around it)."""
    code = (
        "import json, socket, sys; from fdeval.benchmarks.instructfd.judges.llm import LLMJudge; "
        "before = set(sys.modules); socket.socket = socket.create_connection = None; "
        "j = LLMJudge(cache_dir='/nonexistent/x'); j.identity(); "
        "print(json.dumps(['anthropic' in sys.modules, sorted(set(sys.modules) - before)]))"
    )
    imported, new = json.loads(
        subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=300
        ).stdout
    )
    assert imported is False and new == [], (imported, new)


@pytest.mark.parametrize(
    "override,field",
    [
        ("judge.temperature=abc", "temperature"),
        ("judge.temperature=3", "temperature"),
        ("judge.max_tokens=-1", "max_tokens"),
        ("judge.max_tokens=1.5", "max_tokens"),
        ("judge.timeout_s=0", "timeout_s"),
        ("judge.max_parse_retries=x", "max_parse_retries"),
        ("judge.model=''", "model"),
        ("judge.max_retries=-2", "max_retries"),
        ("judge.seed=true", "seed"),
        ("judge.backend=llama", "backend"),
        ("judge.top_p=2", "top_p"),
        ("judge.base_url=http://judge.example.com", "base_url"),
        ("judge.base_url=5", "base_url"),
        ("judge.max_unreachable=0", "max_unreachable"),
        ("judge.max_retry_s=-1", "max_retry_s"),
    ],
)
def test_bad_judge_settings_fail_at_construction_naming_the_field(tmp_path, override, field):
    cfg = _compose("llm", f"out_root={tmp_path}", override)
    with pytest.raises(Exception) as e:
        instantiate(cfg.judge)
    cause = (
        e.value if isinstance(e.value, FdevalError) else e.value.__cause__
    )  # Hydra wraps constructor errors
    assert isinstance(cause, LLMConfigError), repr(e.value)
    assert str(cause).startswith(f"judge.{field}: ") and "\n" not in str(cause)


def test_ensemble_member_with_plain_http_endpoint_is_refused(tmp_path):
    cfg = _compose(
        "ensemble", f"out_root={tmp_path}", "judge.judges.1.base_url=http://10.1.2.3:8000"
    )
    with pytest.raises(Exception) as e:
        instantiate(cfg.judge)
    cause = e.value
    while cause is not None and not isinstance(cause, LLMConfigError):
        cause = cause.__cause__
    assert cause is not None and "refusing plain http to 10.1.2.3" in str(cause)


# ------------------------------------------------------------------------------------------------
# An endpoint that cannot be reached stops judging; answers of one endpoint stay with it


def make_pairs(n: int, pair) -> list:
    """`n` cases (ids case00__acknowledge, ...) with the transcript of `pair` and an instruction of
    their own, so that no two share a request (and a cache entry)."""
    case, tr = pair
    out = []
    for i in range(n):
        cid, instruction = f"case{i:02d}__acknowledge", f"{case.system_instruction} (variant {i})"
        out.append(
            (
                replace(
                    case,
                    case_id=cid,
                    system_instruction=instruction,
                    data=replace(case.data, judge_instructions={"acknowledge": instruction}),
                ),
                replace(
                    tr,
                    case_id=cid,
                    words=tuple(replace(w, case_id=cid) for w in tr.words),
                    user_turns=tuple(replace(p, case_id=cid) for p in tr.user_turns),
                ),
            )
        )
    return out


def judge_all(judge, pairs, out: Path) -> None:
    """What stage=judge does: one verdict file per pair, written as soon as it is decided."""
    for case, tr in pairs:
        path = out / f"{case.case_id}@acknowledge.json"
        if not path.exists():
            write_verdict(judge.judge(case, "acknowledge", tr), path)


def snapshot(d: Path) -> dict[str, tuple[bytes, int]]:
    return {p.name: (p.read_bytes(), p.stat().st_mtime_ns) for p in sorted(d.iterdir())}


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_endpoint_down_stops_the_run_in_seconds_with_one_line(
    fake_api, tmp_path, pair, monkeypatch
):
    pairs, out = make_pairs(20, pair), tmp_path / "verdicts"
    fake_api.responder = lambda body: text(YES)
    judge_all(make(fake_api, tmp_path), pairs[:5], out)  # an earlier launch wrote 5 verdicts
    before = snapshot(out)
    url = f"http://127.0.0.1:{closed_port()}"
    down = LLMJudge(
        cache_dir=tmp_path / "cache", base_url=url
    )  # default retries, backoff and bounds
    vt = virtual_time(monkeypatch)  # the judge client's own waits, not the machine's speed
    with pytest.raises(JudgeUnavailable) as e:
        judge_all(down, pairs, out)
    msg = str(e.value)
    # two backoff delays (0.5-1 s, 1-2 s) between three attempts, then it stops; before: ~24 s of
    # retries per verdict, 20 error verdicts, exit 0
    assert len(vt.sleeps) == 2 and sum(vt.sleeps) < 3.0, vt.sleeps
    assert "\n" not in msg and msg.startswith(
        f"judge llm:claude-sonnet-4-6: endpoint {url} unavailable "
    )
    assert (
        "3 consecutive attempts without an answer; last: connection error" in msg
        and DUMMY_KEY not in msg
    )
    assert isinstance(e.value, FdevalError)  # the launcher prints it as one line and exits 2
    assert snapshot(out) == before  # nothing rewritten, no error verdict for the 15 not reached


def test_endpoint_dropping_connections_mid_run_keeps_what_was_judged(fake_api, tmp_path, pair):
    pairs, out = make_pairs(10, pair), tmp_path / "verdicts"
    fake_api.push(*[text(YES)] * 4)
    fake_api.responder = lambda body: drop()
    with pytest.raises(JudgeUnavailable, match="connection error"):
        judge_all(make(fake_api, tmp_path), pairs, out)
    assert sorted(p.name for p in out.iterdir()) == [
        f"case{i:02d}__acknowledge@acknowledge.json" for i in range(4)
    ]
    assert {json.loads(p.read_text())["verdict"] for p in out.iterdir()} == {"adhere"}
    assert len(fake_api.message_requests) == 4 + 3


def test_timeouts_stop_the_run(fake_api, tmp_path, pair):
    fake_api.responder = lambda body: slow(3.0, text(YES))
    # (no wall-clock bound: attempts not cut at 0.3 s would get the answer, and no raise)
    with pytest.raises(JudgeUnavailable, match=r"no answer within 0\.3 s \(timeout\)"):
        judge_all(
            make(fake_api, tmp_path, timeout_s=0.3), make_pairs(5, pair), tmp_path / "verdicts"
        )
    assert not (tmp_path / "verdicts").exists()
    assert len(fake_api.message_requests) == 3


@pytest.mark.parametrize(
    "failure",
    [
        error(500, message="down"),
        error(429, "rate_limit_error", "slow down"),
        raw(502, b"<html>Bad Gateway</html>", "text/html"),
        raw(200, b"garbage", "text/plain"),
    ],
    ids=["500", "429", "502-html", "garbage"],
)
def test_failing_endpoint_gives_two_error_verdicts_then_stops(fake_api, tmp_path, pair, failure):
    pairs, out = make_pairs(20, pair), tmp_path / "verdicts"
    fake_api.responder = lambda body: failure
    with pytest.raises(JudgeUnavailable) as e:
        judge_all(make(fake_api, tmp_path, max_retries=1), pairs, out)
    assert "3 consecutive requests failed after their retries" in str(e.value) and "\n" not in str(
        e.value
    )
    written = sorted(out.iterdir())
    assert [p.name for p in written] == [
        "case00__acknowledge@acknowledge.json",
        "case01__acknowledge@acknowledge.json",
    ]
    for p in written:
        v = json.loads(p.read_text())
        assert v["verdict"] == "error" and "the request failed" in v["reasoning"]
    assert len(fake_api.message_requests) == 3 * 2


def test_unreadable_answers_stay_error_verdicts_and_do_not_stop_the_run(fake_api, tmp_path, pair):
    pairs, out = make_pairs(8, pair), tmp_path / "verdicts"
    fake_api.responder = lambda body: text("I would rather not say.")
    judge_all(make(fake_api, tmp_path, max_parse_retries=0), pairs, out)
    verdicts = [json.loads(p.read_text()) for p in sorted(out.iterdir())]
    assert len(verdicts) == 8 and {v["verdict"] for v in verdicts} == {"error"}
    assert all("no readable answer" in v["reasoning"] for v in verdicts)


def test_verdicts_and_cache_of_two_endpoints_stay_apart(fake_api, tmp_path, pair):
    case, tr = pair
    with FakeMessagesServer() as stand_in:
        stand_in.responder = lambda body: text(NO)
        fake_api.responder = lambda body: text(YES)
        first = make(stand_in, tmp_path).judge(case, "acknowledge", tr)
        real = make(fake_api, tmp_path)  # same cache folder, another endpoint
        second = real.judge(case, "acknowledge", tr)
        assert (first.verdict, second.verdict) == ("not_adhere", "adhere")
        assert first.prompt_hash != second.prompt_hash
        assert (
            make(stand_in, tmp_path).identity()["endpoint"]
            == stand_in.base_url
            != real.identity()["endpoint"]
        )
        assert len(stand_in.message_requests) == 1 and len(fake_api.message_requests) == 1
        # each endpoint's rerun is served from its own cache entry
        assert make(stand_in, tmp_path).judge(case, "acknowledge", tr) == first
        assert make(fake_api, tmp_path).judge(case, "acknowledge", tr) == second
        assert len(stand_in.message_requests) == 1 and len(fake_api.message_requests) == 1


def test_ensemble_stops_when_its_llm_member_is_unavailable(tmp_path, pair, monkeypatch):
    monkeypatch.setenv("ANTHROPIC_API_KEY", DUMMY_KEY)
    llm = LLMJudge(cache_dir=tmp_path, base_url=f"http://127.0.0.1:{closed_port()}", backoff_s=0.01)
    case, tr = pair
    with pytest.raises(JudgeUnavailable):
        EnsembleJudge([RulesJudge(), llm]).judge(case, "acknowledge", tr)


# ------------------------------------------------------------------------------------------------
# The judge on an OpenAI-compatible server (vLLM / SGLang / OpenAI), end to end on the stand-in

SERVED = "Qwen/Qwen2.5-72B-Instruct"


def make_oai(server, tmp_path, **kw) -> LLMJudge:
    kw = {
        "backend": "vllm",
        "model": SERVED,
        "base_url": server.base_url,
        "cache_dir": tmp_path / "cache",
        "backoff_s": 0.001,
        "max_backoff_s": 0.01,
        **kw,
    }
    return LLMJudge(**kw)


def test_openai_backend_verdicts_request_and_provenance(fake_openai, tmp_path, pair):
    pairs = make_pairs(3, pair)
    fake_openai.push(
        oai.text(YES),
        oai.text(f"My analysis follows.\n```json\n{NO}\n```"),
        oai.text('{"reasoning": "the "model" yielded", "adherence": "yes"}'),
    )
    judge = make_oai(fake_openai, tmp_path, seed=0)
    verdicts = [judge.judge(c, "acknowledge", t) for c, t in pairs]
    assert [v.verdict for v in verdicts] == ["adhere", "not_adhere", "adhere"]
    assert "talked over the user" in verdicts[1].reasoning
    ident = f"llm:{SERVED}@{fake_openai.base_url}"
    assert {(v.judge, v.prompt_hash) for v in verdicts} == {(ident, judge.prompt_hash)}
    assert judge.prompt_hash == prompt_hash_of(SERVED, 0.0, fake_openai.base_url, "openai")
    assert judge.prompt_hash != prompt_hash_of(
        SERVED, 0.0, fake_openai.base_url
    )  # the Anthropic API there
    assert (
        judge.identity()["backend"] == "openai"
        and judge.identity()["endpoint"] == fake_openai.base_url
    )
    req = fake_openai.chat_requests[0].body
    assert (req["model"], req["temperature"], req["max_tokens"], req["seed"]) == (
        SERVED,
        0.0,
        4096,
        0,
    )
    system, user = req["messages"]
    assert system == {"role": "system", "content": SYSTEM_PROMPT} and user["role"] == "user"
    assert (
        render(pairs[0][1]) in user["content"] and pairs[0][0].system_instruction in user["content"]
    )
    # a rerun comes from the cache, with no server at all
    fake_openai.stop()
    again = make_oai(fake_openai, tmp_path, seed=0)
    assert [again.judge(c, "acknowledge", t) for c, t in pairs] == verdicts
    assert len(fake_openai.chat_requests) == 3


@pytest.mark.parametrize(
    "replies,needle",
    [
        (
            [oai.error(500, message="engine dead")] * 2,
            "the request failed: judge: " + SERVED + ": failed after 2 attempt(s): HTTP 500",
        ),
        ([oai.error(429, "rate_limit", "queue full")] * 2, "HTTP 429 rate_limit: queue full"),
        ([oai.raw(200, b"{not json")] * 2, "malformed response: not JSON"),
        ([oai.raw(200, b'{"choices": [{"message": {"content": null}}]}')] * 2, "no text content"),
        (
            [oai.error(400, "BadRequestError", "prompt too long")],
            "request rejected: HTTP 400 BadRequestError: prompt too long",
        ),
        ([oai.text("I cannot decide.")] * 3, "no readable answer after 3 attempt(s)"),
        (
            [oai.text('{"reasoning": "Step 1: the', finish_reason="length")] * 3,
            "(the answer hit max_tokens)",
        ),
    ],
    ids=["500", "429", "not-json", "no-content", "400", "unreadable", "cut"],
)
def test_openai_failures_are_error_verdicts_never_not_adhere(
    fake_openai, tmp_path, pair, replies, needle
):
    case, tr = pair
    fake_openai.push(*replies)
    v = make_oai(fake_openai, tmp_path, max_retries=1).judge(case, "acknowledge", tr)
    assert v.verdict == "error" and needle in v.reasoning, v.reasoning
    assert v.judge == f"llm:{SERVED}@{fake_openai.base_url}" and v.prompt_hash
    assert len(fake_openai.chat_requests) == len(replies)


def test_openai_failing_server_stops_the_run_after_two_error_verdicts(fake_openai, tmp_path, pair):
    pairs, out = make_pairs(10, pair), tmp_path / "verdicts"
    fake_openai.responder = lambda body: oai.error(503, message="loading model")
    with pytest.raises(JudgeUnavailable) as e:
        judge_all(make_oai(fake_openai, tmp_path, max_retries=1), pairs, out)
    assert str(e.value).startswith(
        f"judge llm:{SERVED}@{fake_openai.base_url}: endpoint {fake_openai.base_url} "
    )
    assert [json.loads(p.read_text())["verdict"] for p in sorted(out.iterdir())] == [
        "error",
        "error",
    ]


def test_openai_closed_port_stops_the_run_in_seconds(tmp_path, pair, monkeypatch):
    url = f"http://127.0.0.1:{closed_port()}/v1"
    vt = virtual_time(monkeypatch)  # the judge client's own waits, not the machine's speed
    with pytest.raises(JudgeUnavailable, match="connection error"):
        judge_all(
            LLMJudge(backend="vllm", model=SERVED, base_url=url, cache_dir=tmp_path),
            make_pairs(5, pair),
            tmp_path / "verdicts",
        )
    # default backoff: two delays (0.5-1 s, 1-2 s) between three attempts, for the first verdict only
    assert len(vt.sleeps) == 2 and sum(vt.sleeps) < 3.0 and not (tmp_path / "verdicts").exists(), (
        vt.sleeps
    )


def test_openai_key_sent_when_set_and_never_in_verdicts_cache_or_logs(
    fake_openai, tmp_path, pair, caplog, monkeypatch
):
    monkeypatch.setenv("OPENAI_API_KEY", DUMMY_OPENAI_KEY)
    case, tr = pair
    fake_openai.push(
        oai.error(429, "rate_limit", f"key {DUMMY_OPENAI_KEY} throttled"), oai.text(YES)
    )
    with caplog.at_level("DEBUG"):
        v = make_oai(fake_openai, tmp_path).judge(case, "acknowledge", tr)
    assert (
        v.verdict == "adhere"
        and fake_openai.chat_requests[0].headers["authorization"] == f"Bearer {DUMMY_OPENAI_KEY}"
    )
    assert (
        DUMMY_OPENAI_KEY not in json.dumps(verdict_to_dict(v))
        and DUMMY_OPENAI_KEY not in caplog.text
    )
    files = [f for f in (tmp_path / "cache").rglob("*") if f.is_file()]
    assert files and all(DUMMY_OPENAI_KEY not in f.read_text() for f in files)


def test_openai_remote_endpoint_without_key_stops_before_any_request(tmp_path, pair, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    case, tr = pair
    judge = LLMJudge(backend="openai", model="gpt-4o-2024-08-06", cache_dir=tmp_path)
    with pytest.raises(LLMConfigError, match="OPENAI_API_KEY"):
        judge.check_ready()
    with pytest.raises(
        LLMConfigError, match="OPENAI_API_KEY"
    ):  # raised: the run stops, no error verdicts
        judge.judge(case, "acknowledge", tr)


def test_two_servers_of_one_model_keep_apart(fake_openai, tmp_path, pair):
    case, tr = pair
    with FakeOpenAIServer() as other:
        other.responder = lambda body: oai.text(NO)
        fake_openai.responder = lambda body: oai.text(YES)
        a = make_oai(fake_openai, tmp_path).judge(case, "acknowledge", tr)
        b = make_oai(other, tmp_path).judge(
            case, "acknowledge", tr
        )  # same cache folder, same model
        assert (a.verdict, b.verdict) == ("adhere", "not_adhere")
        assert a.judge != b.judge and a.prompt_hash != b.prompt_hash
        assert len(fake_openai.chat_requests) == len(other.chat_requests) == 1


def test_config_selects_a_vllm_judge_and_an_ensemble_member(fake_openai, tmp_path, pair):
    case, tr = pair
    over = ["judge.backend=vllm", f"judge.model={SERVED}", f"out_root={tmp_path}"]
    cfg = _compose("llm", *over)
    judge = instantiate(cfg.judge)
    assert (
        judge.endpoint == "http://127.0.0.1:8000/v1"
        and judge.id == f"llm:{SERVED}@http://127.0.0.1:8000/v1"
    )
    judge.check_ready()  # a loopback server needs no key
    cfg = _compose("llm", *over, f"judge.base_url={fake_openai.base_url}", "judge.max_retries=0")
    fake_openai.push(oai.text(NO))
    assert instantiate(cfg.judge).judge(case, "acknowledge", tr).verdict == "not_adhere"
    ens = _compose(
        "ensemble",
        f"out_root={tmp_path}",
        "judge.judges.1.backend=sglang",
        f"judge.judges.1.model={SERVED}",
    )
    member = instantiate(ens.judge).members[1]
    assert (
        member.endpoint == "http://127.0.0.1:30000/v1" and member.identity()["backend"] == "openai"
    )
