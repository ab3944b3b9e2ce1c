"""The LLM text backend (condenser + turn agent), driven by a FAKE client.

`ScriptedClient` below is a stand-in for fdeval.llm.client.LLMClient (tested on its own): it
never calls a model; it answers each prompt from the prompt's own text (copying the turn to
annotate and inserting a marker), so the tests exercise prompt building, answer parsing,
validation, retries and assembly. Nothing here needs a network or an API key. The last test puts
the real client between them: ScriptedClient's answers served by the local chat-completions
stand-in (tests/helpers/fake_openai_server.py) on 127.0.0.1, as a vLLM server would.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

import pytest

from helpers import fake_openai_server as oai
from helpers.fake_openai_server import fake_openai  # noqa: F401

from fdeval.benchmarks.instructfd.builtin import validate_conversation
from fdeval.benchmarks.instructfd.llm_backend import (
    LLMTextBackend,
    annotate_prompt,
    condense_prompt,
    make_llm_backend,
    parse_answer,
    speak_prompt,
)
from fdeval.benchmarks.instructfd.markers import parse_markers
from fdeval.benchmarks.instructfd.personas import load_personas
from fdeval.benchmarks.instructfd.pipeline import (
    DraftRejected,
    GenerationConfig,
    plan_scenario,
)
from fdeval.benchmarks.instructfd.specs import SPECS, check_against_spec


@dataclass
class FakeResponse:
    text: str
    model: str = "fake"
    cached: bool = False
    prompt_hash: str = "0"


class ScriptedClient:
    """FAKE LLM client (see the module docstring). `broken` answers are returned first, in order."""

    def __init__(
        self, seed: int = 0, broken: list[str] | None = None, error: Exception | None = None
    ):
        self.seed, self.broken, self.error = seed, list(broken or []), error
        self.calls: list[tuple[str, str, int]] = []

    def complete(self, system: str, prompt: str, *, attempt: int = 0) -> FakeResponse:
        self.calls.append((system, prompt, attempt))
        if self.error is not None:
            raise self.error
        if self.broken:
            return FakeResponse(self.broken.pop(0))
        return FakeResponse(json.dumps(self._answer(prompt)))

    def _answer(self, prompt: str) -> dict:
        if "[PERSONA]" in prompt:
            name = prompt.split("[PERSONA]\n", 1)[1].split()[0].rstrip(",")
            return {"grounding": f"{name} calls in about the scenario."}
        if "[TURN TO ANNOTATE]" in prompt:
            raw = prompt.split("[TURN TO ANNOTATE]\n", 1)[1].split("\n\n[OUTPUT]", 1)[0]
            kind = (
                "backchannel"
                if "<backchannel:" in prompt.split("[MARKERS]", 1)[1].split("[PLACEMENT]")[0]
                else "interrupt"
            )
            words = raw.split()
            cut = next((i for i, w in enumerate(words) if w.startswith("<pause:")), len(words) // 2)
            cut = (
                max(cut, 6) if "You are the USER" in prompt and kind == "interrupt" else max(cut, 1)
            )
            marker = f"<{kind}: {'mm-hmm' if kind == 'backchannel' else 'wait, hold on a second'}>"
            out = " ".join(words[:cut] + [marker] + words[cut:])
            if "<take-turn: REPLY>" in prompt:
                out += " <take-turn: That makes sense, tell me more.>"
            return {"content": out}
        if "<pause: SECONDS>" in prompt and "Use at least one" in prompt:
            return {
                "content": "So the first thing I did was call the office, um <pause: 1.2> and then I "
                "waited for them to call me back about the whole thing."
            }
        if "You are the ASSISTANT" in prompt:
            return {
                "content": "Sure, the first step is to get everything you need in one place. After that, take it "
                "one small piece at a time so nothing gets missed."
            }
        return {
            "content": "Hi, I'd like some help with something I've been putting off for a while."
        }


def make_backend(client_kwargs=None, **kw) -> tuple[LLMTextBackend, list[ScriptedClient]]:
    made: list[ScriptedClient] = []

    def factory(seed: int) -> ScriptedClient:
        c = ScriptedClient(seed, **(client_kwargs or {}))
        made.append(c)
        return c

    backend = LLMTextBackend(
        factory, {"model": "fake-model", "temperature": 0.8, "max_tokens": 512, "seed": 7}, **kw
    )
    return backend, made


@pytest.mark.parametrize(
    "scenario",
    [
        "User Attention Check",
        "Safety Correction",
        "Cognitive Pause",
        "User Continuer",
        "Add Constraint",
        "Short Stop Repair",
    ],
)
def test_turn_agent_writes_a_valid_conversation(scenario: str) -> None:
    backend, clients = make_backend()
    persona = load_personas()[4]
    spec = SPECS[scenario]
    d = backend.draft(spec, 2, 0, persona)
    check_against_spec(d.lines, spec)
    validate_conversation(d.conversation())
    assert d.conversation_id == f"{spec.slug}_002" and d.grounding.startswith(persona.first_name)
    calls = clients[0].calls
    assert "[PERSONA]" in calls[0][1] and persona.describe() in calls[0][1]
    turn_prompts = [p for _, p, _ in calls[1:]]
    for section in ("[TASK]", "[SCENARIO]", "[RULES]", "[HISTORY]", "[OUTPUT]"):
        assert all(section in p for p in turn_prompts)
    assert all(d.grounding in p and spec.description in p for p in turn_prompts)
    assert any(spec.turns[0].hint in p for p in turn_prompts)
    if spec.cut_in:
        assert any("[TURN TO ANNOTATE]" in p for p in turn_prompts)
    if scenario == "User Attention Check":  # the take-turn reply became the model's line
        assert d.lines[3] == ("model", "That makes sense, tell me more.")
    if scenario == "Add Constraint":  # the model yields: nothing after the user's interrupt
        assert d.lines[1][1].endswith("<interrupt: wait, hold on a second>")


def test_invalid_answers_are_asked_again_then_the_conversation_is_discarded() -> None:
    backend, clients = make_backend({"broken": ["not json", '{"grounding": "Two. Sentences."}']})
    d = backend.draft(SPECS["Cognitive Pause"], 0, 0, load_personas()[0])
    attempts = [a for _, _, a in clients[0].calls[:3]]
    assert attempts == [0, 1, 2]
    assert "[NOTE]" in clients[0].calls[1][1] and "no JSON object" in clients[0].calls[1][1]
    assert "exactly one sentence" in clients[0].calls[2][1]
    assert d.lines

    backend, _ = make_backend({"broken": ["{}"] * 3}, max_attempts=3)
    with pytest.raises(DraftRejected) as ei:
        backend.draft(SPECS["Cognitive Pause"], 0, 0, load_personas()[0])
    assert ei.value.reason == "llm_invalid"


def test_annotation_must_copy_the_turn() -> None:
    # the annotation drops a word: rejected, then asked again
    spec = SPECS["Factual Misinformation"]
    backend, clients = make_backend()
    real = ScriptedClient._answer

    def sloppy_once(self, prompt):
        ans = real(self, prompt)
        if "[TURN TO ANNOTATE]" in prompt and not any("[NOTE]" in p for _, p, _ in self.calls):
            ans["content"] = ans["content"].replace("first ", "", 1)
        return ans

    ScriptedClient._answer = sloppy_once
    try:
        d = backend.draft(spec, 1, 0, load_personas()[1])
    finally:
        ScriptedClient._answer = real
    notes = [p for _, p, _ in clients[0].calls if "[NOTE]" in p]
    assert len(notes) == 1 and "copy the original words exactly" in notes[0]
    check_against_spec(d.lines, spec)


def test_client_errors_discard_and_counts_reach_the_plan() -> None:
    from fdeval.llm.client import LLMConfigError, LLMError

    backend, _ = make_backend({"error": LLMError("llm: HTTP 529 overloaded after 5 retries")})
    cfg = GenerationConfig(per_scenario=2, pool_factor=1.0, scenarios=("Hearing Check",))
    plan = plan_scenario(SPECS["Hearing Check"], cfg, backend, load_personas())
    assert plan.order == [] and plan.discards == {"llm_error": 4} and plan.attempts == 4
    backend, _ = make_backend({"error": LLMConfigError("llm: no API key")})
    with pytest.raises(LLMConfigError):
        backend.draft(SPECS["Hearing Check"], 0, 0, load_personas()[0])


def test_concurrent_writing_gives_the_same_pool() -> None:
    cfg = GenerationConfig(per_scenario=3, scenarios=("Topic Redirect",))
    one, _ = make_backend()
    many, _ = make_backend(concurrency=3)
    a = plan_scenario(SPECS["Topic Redirect"], cfg, one, load_personas())
    b = plan_scenario(SPECS["Topic Redirect"], cfg, many, load_personas())
    assert a.order == b.order and len(a.order) == cfg.pool_size


def test_each_candidate_gets_its_own_client_seed() -> None:
    backend, clients = make_backend()
    p = load_personas()[0]
    for seed, index in ((0, 0), (0, 1), (1, 0)):
        backend.draft(SPECS["Cognitive Pause"], index, seed, p)
    seeds = [c.seed for c in clients]
    assert len(set(seeds)) == 3
    backend.draft(SPECS["Cognitive Pause"], 1, 0, p)
    assert clients[-1].seed == seeds[1]  # deterministic
    assert backend.identity()["model"] == "fake-model" and backend.identity()["prompt_version"]


def test_parse_answer_and_prompts_are_self_contained() -> None:
    assert parse_answer('```json\n{"content": "hi  there"}\n```', "content") == ("hi there", "")
    assert parse_answer('Sure! {"content": ""}', "content")[0] is None
    assert parse_answer("{broken", "content")[0] is None
    spec = SPECS["Word Retrieval Assist"]
    p = load_personas()[3]
    assert spec.description in condense_prompt(spec, p) and '{"grounding":' in condense_prompt(
        spec, p
    )
    sp = speak_prompt(spec, "G.", spec.turns[2], 3, ["USER: hi", "ASSISTANT: hello"])
    assert "<pause: SECONDS>" in sp and "USER: hi\nASSISTANT: hello" in sp and "[TURN 3]" in sp
    ap = annotate_prompt(
        spec, "G.", spec.turns[2], "so I need the, um <pause: 1.0> thing", [], by="model"
    )
    assert "<interrupt: WHAT YOU SAY>" in ap and "so I need the, um <pause: 1.0> thing" in ap
    assert spec.cut_in_hint in ap
    # the prompt examples are valid marker syntax
    for name, spec_ in SPECS.items():
        for t in spec_.turns:
            if t.cut_in:
                for by in ("model", "user"):
                    example = (
                        annotate_prompt(spec_, "G.", t, "x", [], by)
                        .split("[EXAMPLE]", 1)[1]
                        .split("[RULES]")[0]
                    )
                    for m in re.findall(r'"content": "([^"]+)"', example):
                        assert parse_markers(m).markers, (name, by)


def test_make_llm_backend_builds_the_project_client(tmp_path) -> None:
    from fdeval.benchmarks.instructfd.llm_backend import make_llm_backend
    from fdeval.llm.client import LLMClient

    backend = make_llm_backend(
        {
            "model": "claude-sonnet-4-6",
            "temperature": 0.8,
            "max_tokens": 1024,
            "seed": 0,
            "max_attempts": 2,
            "concurrency": 2,
        },
        tmp_path / "cache",
    )
    client = backend._factory(123)
    assert isinstance(client, LLMClient)
    assert (client.model, client.temperature, client.max_tokens, client.seed) == (
        "claude-sonnet-4-6",
        0.8,
        1024,
        123,
    )
    assert client.cache_dir == tmp_path / "cache"
    assert backend.max_attempts == 2 and backend.concurrency == 2


def test_turn_agent_on_an_openai_compatible_server(fake_openai, tmp_path) -> None:
    # ScriptedClient's answers, sent by the stand-in server; the real LLMClient in between
    fake_openai.responder = lambda body: oai.text(
        json.dumps(ScriptedClient()._answer(body["messages"][-1]["content"]))
    )
    settings = {
        "backend": "vllm",
        "model": "served-model",
        "temperature": 0.8,
        "top_p": 0.95,
        "max_tokens": 512,
        "seed": 7,
        "base_url": fake_openai.base_url,
    }
    spec, persona = SPECS["User Attention Check"], load_personas()[4]
    d = make_llm_backend(settings, tmp_path / "cache").draft(spec, 2, 0, persona)
    check_against_spec(d.lines, spec)
    sent = [r.body for r in fake_openai.chat_requests]
    assert sent and {(b["model"], b["temperature"], b["top_p"], b["max_tokens"]) for b in sent} == {
        ("served-model", 0.8, 0.95, 512)
    }
    assert (
        len({b["seed"] for b in sent}) == 1
    )  # one client seed per candidate conversation, sent with each request
    again = make_llm_backend(settings, tmp_path / "cache")
    assert again.draft(spec, 2, 0, persona) == d and len(fake_openai.chat_requests) == len(
        sent
    )  # from the cache
    ident = again.identity()
    assert (ident["backend"], ident["base_url"], ident["top_p"]) == (
        "vllm",
        fake_openai.base_url,
        0.95,
    )
