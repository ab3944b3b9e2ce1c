"""EchoChain's role settings, planner, user simulator and responder prompt.

The LLM paths run the real anthropic SDK against a local stand-in of the Messages API
(tests/helpers/fake_messages_server.py, 127.0.0.1 only, dummy key): nothing reaches a hosted model.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from helpers.fake_messages_server import DUMMY_KEY, error, fake_api, text  # noqa: F401

from echochain_fixtures import SEED, exchange
from fdeval.benchmarks.echochain import dialogue, roles
from fdeval.benchmarks.echochain.classifier import Exchange
from fdeval.benchmarks.echochain.dialogue import (
    BLUEPRINT_SECTIONS,
    RESPONDER_MARKER,
    RESPONDER_PROMPT,
    Blueprint,
    LLMPlanner,
    LLMSimulator,
    OfflinePlanner,
    OfflineSimulator,
    PlannerError,
    SimulatorError,
    make_planner,
    make_simulator,
    parse_blueprint,
    parse_simulator_output,
    responder_prompt,
)
from fdeval.benchmarks.echochain.seeds import MAX_OPENER_SHARE, load_seeds, mentions, opener_shares
from fdeval.benchmarks.echochain.taxonomy import BARGE_IN_LABELS
from fdeval.errors import ConfigError, FdevalError
from fdeval.llm.client import LLMConfigError

CASE = "case-1"
GOOD_2 = (
    "Okay, that sounds good. So, um... what would you serve as the main course?\n"
    '```json\n{"chosen_label": "Further Inquiry", '
    '"interruption_text": "Oh wait, what if my budget is only fifty dollars now?"}\n```'
)


def llm_settings(server, **kw) -> dict:
    return {
        "backend": "anthropic",
        "base_url": server.base_url,
        "max_attempts": 3,
        "timeout_s": 5.0,
        "max_retries": 0,
        "temperature": 0.7,
        **kw,
    }


def cache_texts(root: Path) -> list[str]:
    return [p.read_text(encoding="utf-8") for p in sorted(root.rglob("*.json"))]


def prompt_of(request) -> str:
    return request.body["messages"][0]["content"]


def good_blueprint(note: str = "") -> str:
    return "\n\n".join(
        f"{name}:\nPlan for {name.lower()} {note}".strip() for name in BLUEPRINT_SECTIONS
    )


# ------------------------------------------------------------------------------------------------
# roles.py: settings, clients, identities


def test_check_role_fills_defaults_and_keeps_values():
    s = roles.check_role("planner", {"backend": "anthropic", "temperature": 1, "seed": 7})
    assert (
        s["backend"] == "anthropic"
        and s["temperature"] == 1.0
        and isinstance(s["temperature"], float)
    )
    assert s["seed"] == 7 and s["max_attempts"] == roles.ROLE_DEFAULTS["max_attempts"]
    assert set(s) == roles.ROLE_KEYS


@pytest.mark.parametrize(
    "settings, expected",
    [
        (
            {"tempo": 1},
            "benchmark.simulator.tempo: unknown key; valid: [backend, base_url, max_attempts, max_retries, "
            "max_tokens, max_tokens_param, model, reasoning_effort, seed, temperature, timeout_s]",
        ),
        (
            {"backend": "bedrock"},
            "benchmark.simulator.backend: unknown backend 'bedrock'; valid: ['offline', 'anthropic', "
            "'openai', 'vllm', 'sglang', 'gemini']",
        ),
        (
            {"backend": "vllm"},
            "benchmark.simulator.model: required for backend vllm (the model id the endpoint serves; "
            "the paper's models are the preset echochain_roles=paper)",
        ),
        (
            {"backend": "gemini", "model": "gemini-3-pro-preview", "reasoning_effort": "low"},
            "benchmark.simulator.reasoning_effort: a setting of the OpenAI protocol "
            "(backend openai, vllm or sglang), not of gemini",
        ),
        (
            {"temperature": "hot"},
            "benchmark.simulator.temperature: must be a number in [0, 2] or null, got 'hot'",
        ),
        (
            {"temperature": 3},
            "benchmark.simulator.temperature: must be a number in [0, 2] or null, got 3",
        ),
        (
            {"max_attempts": 0},
            "benchmark.simulator.max_attempts: must be an integer in [1, 20], got 0",
        ),
        (
            {"max_tokens": True},
            "benchmark.simulator.max_tokens: must be an integer in [1, 1000000], got True",
        ),
        ({"seed": 1.5}, "benchmark.simulator.seed: must be an integer, got 1.5"),
        (
            {"model": "claude sonnet"},
            "benchmark.simulator.model: must be a model id without spaces, or null (the "
            "backend's default), got 'claude sonnet'",
        ),
    ],
)
def test_check_role_errors_name_role_key_and_valid_values(settings, expected):
    with pytest.raises(ConfigError) as e:
        roles.check_role("simulator", settings)
    assert str(e.value) == expected and "\n" not in str(e.value)


def test_a_client_setting_the_client_refuses_is_a_config_error_at_construction(tmp_path):
    with pytest.raises(ConfigError, match=r"^benchmark\.planner\.base_url: refusing plain http"):
        make_planner({"backend": "anthropic", "base_url": "http://example.com"}, tmp_path)


def test_role_client_is_pinned_and_caches_per_role(tmp_path):
    s = {
        "backend": "anthropic",
        "model": "claude-x",
        "temperature": 0.3,
        "max_tokens": 99,
        "seed": 4,
        "base_url": "http://127.0.0.1:9",
    }
    c = roles.role_client("drafter", s, tmp_path)
    assert (c.model, c.temperature, c.max_tokens, c.seed) == ("claude-x", 0.3, 99, 4)
    assert c.cache_dir == tmp_path / "drafter" and c.endpoint == "http://127.0.0.1:9"
    # conversations drawn from one seed are separate samples; a case keeps its own seed
    a, b = (roles.role_client("drafter", s, tmp_path, case).seed for case in ("c1", "c2"))
    assert a != b and a == roles.role_client("drafter", s, tmp_path, "c1").seed


def test_identities_record_what_changes_the_output():
    offline = OfflinePlanner().identity()
    assert (
        offline["backend"] == "offline"
        and offline["model"] is None
        and len(offline["prompt_hash"]) == 16
    )
    s = {
        "backend": "anthropic",
        "model": "claude-x",
        "temperature": 0.7,
        "seed": 3,
        "base_url": "http://127.0.0.1:9",
    }
    ident = roles.role_identity("planner", s, roles.prompt_hash("a", "b"))
    assert {
        k: ident[k] for k in ("backend", "model", "temperature", "max_tokens", "seed", "endpoint")
    } == {
        "backend": "anthropic",
        "model": "claude-x",
        "temperature": 0.7,
        "max_tokens": 2048,
        "seed": 3,
        "endpoint": "http://127.0.0.1:9",
    }
    assert roles.prompt_hash("a", "b") != roles.prompt_hash("ab") != roles.prompt_hash("b", "a")


# ------------------------------------------------------------------------------------------------
# Offline planner and simulator


def test_offline_simulator_plays_the_seed_script():
    sim = make_simulator({"backend": "offline"}, Path("unused"))
    assert isinstance(sim, OfflineSimulator)
    bp = OfflinePlanner().plan(SEED, (), None, CASE)
    history: tuple = ()
    for step in SEED.exchanges:
        m = sim.next_message(SEED, bp, history, step.index, CASE)
        assert (m.case_id, m.exchange, m.text, m.barge_in_label, m.barge_in) == (
            CASE,
            step.index,
            step.message,
            step.barge_in_label,
            step.barge_in,
        )
        history += (exchange(step.index, "Sure, here is an idea."),)
    assert history[0].barge_in is None  # exchange one is never interrupted
    with pytest.raises(SimulatorError, match="scripts 3 exchange"):
        sim.next_message(SEED, bp, history, 4, CASE)
    with pytest.raises(ValueError, match="exchange 3 after 1"):
        sim.next_message(SEED, bp, history[:1], 3, CASE)


def test_offline_blueprint_is_a_strategy_that_follows_the_conversation():
    planner = OfflinePlanner()
    first = planner.plan(SEED, (), None, CASE)
    assert (first.case_id, first.version) == (CASE, 1)
    assert (
        parse_blueprint(first.text) == first.text
    )  # the LLM planner's output contract holds for it too
    for part in (
        SEED.persona,
        SEED.topic,
        SEED.subtopic,
        "Nothing has been said yet",
        "Real-time Thought Process",
    ):
        assert part in first.text
    ex1 = exchange(1, "A simple menu could be a roast chicken dinner with salad.")
    second = planner.plan(SEED, (ex1,), first, CASE)
    assert second.version == 2 and second.text != first.text
    do_not_repeat = second.text.split("DO NOT REPEAT:")[1]
    assert SEED.exchanges[0].message in do_not_repeat and "1 of 3 exchanges are done" in second.text
    assert "exchange 2 of 3" in second.text and "Real-time Thought Process" in second.text
    # it adapts to what the responder did with the barge-in
    ignored = planner.plan(SEED, (ex1, exchange(2, "Sure, the beef stew it is.")), second, CASE)
    taken = planner.plan(
        SEED, (ex1, exchange(2, "Then a lentil curry works for everyone.")), second, CASE
    )
    assert (
        "did not take the new information up" in ignored.text
        and "did not show the update" in ignored.text
    )
    assert (
        "took the new information up (lentil)" in taken.text
        and "folded in the barge-in" in taken.text
    )
    assert ignored.version == taken.version == 3


def test_a_presupposing_barge_in_follows_the_earlier_replies_never_the_current_one():
    seed = next(s for s in load_seeds() if s.seed_id == "support-phone-battery")
    step, sim, bp = seed.exchanges[1], OfflineSimulator(), Blueprint(CASE, 1, "unused")
    assert step.barge_in_presupposes and step.barge_in_fallback
    silent = (
        Exchange(
            CASE,
            1,
            seed.exchanges[0].message,
            "",
            None,
            None,
            "Screen brightness is the usual culprit.",
        ),
    )
    told = (
        Exchange(
            CASE, 1, seed.exchanges[0].message, "", None, None, "Background GPS use drains it fast."
        ),
    )
    assert sim.next_message(seed, bp, silent, 2, CASE).barge_in == step.barge_in_fallback
    assert sim.next_message(seed, bp, told, 2, CASE).barge_in == step.barge_in
    assert (
        sim.next_message(seed, bp, told, 2, "case-2").barge_in == step.barge_in
    )  # the history decides, nothing else


def _play(seed, advice: bool) -> list:
    """One offline conversation over `seed`: (script step, user turn, the assistant text the turn was
    written after) per exchange. With `advice` every reply mentions every word the seed's wordings
    presuppose (before its barge-in), without it none does."""
    sim, bp = OfflineSimulator(), Blueprint(CASE, 1, "unused")
    words = sorted(
        {w for s in seed.exchanges for w in s.message_presupposes + s.barge_in_presupposes}
    )
    said = "Here is one way to go about it." + (
        f" Think about {', '.join(words)}." if advice and words else ""
    )
    assert not mentions(said, words) or advice
    history: tuple = ()
    turns = []
    for step in seed.exchanges:
        m = sim.next_message(seed, bp, history, step.index, CASE)
        turns.append((step, m, dialogue.assistant_said(history)))
        cut = m.barge_in is not None
        history += (
            Exchange(
                CASE,
                step.index,
                m.text,
                said if cut else "",
                m.barge_in,
                m.barge_in_label,
                "That should settle it." if cut else said,
            ),
        )
        parse_blueprint(OfflinePlanner().plan(seed, history, None, CASE).text)
    return turns


def test_scan_of_the_shipped_pool_presuppositions_and_openers():
    """The offline simulator over every exchange of every shipped seed, once after replies that gave
    every piece of advice a scripted wording presupposes and once after replies that gave none: a
    presupposing wording is spoken only in the first run (its fallback in the second), and no opener
    (``seeds.opener``) begins more than MAX_OPENER_SHARE of the later messages, of all messages or
    of the barge-ins in either run. No model, no audio: it runs in well under a second."""
    seeds = load_seeds()
    assert len(seeds) == 48
    for advice in (True, False):
        spoken: dict[str, list[str]] = {"later messages": [], "messages": [], "barge-ins": []}
        leaning = 0
        for seed in seeds:
            turns = _play(seed, advice)
            assert turns == _play(seed, advice)  # same history, same words
            for step, m, said in turns:
                assert (m.text, m.barge_in) == step.wording(
                    said
                ) and m.barge_in_label == step.barge_in_label
                for utterance, wording, words, fallback in (
                    (m.text, step.message, step.message_presupposes, step.message_fallback),
                    (m.barge_in, step.barge_in, step.barge_in_presupposes, step.barge_in_fallback),
                ):
                    if words:
                        assert utterance == (wording if advice else fallback), (
                            seed.seed_id,
                            step.index,
                            advice,
                        )
                        assert utterance != wording or mentions(said, words), (
                            seed.seed_id,
                            step.index,
                        )
                        leaning += utterance == wording
                spoken["messages"].append(m.text)
                if step.index > 1:
                    spoken["later messages"].append(m.text)
                    spoken["barge-ins"].append(m.barge_in)
        assert leaning == (
            13 if advice else 0
        )  # the shipped pool's presupposing barge-ins (docs/echochain.md)
        for kind, texts in spoken.items():
            top, share = next(iter(opener_shares(texts).items()))
            assert share <= MAX_OPENER_SHARE, (advice, kind, top, share)


# ------------------------------------------------------------------------------------------------
# Validation of the simulator's output


@pytest.mark.parametrize(
    "answer, ex, reason",
    [
        ("I have six friends and 2 of them are vegan. What should I cook?", 1, "digit '2'"),
        ("Okay. So. I have friends. What should I cook?", 1, "4 sentences"),
        (
            'Okay, what about dessert?\n```json\n{"chosen_label": "Sudden Topic Change", '
            '"interruption_text": "Wait, none of them eat sugar now."}\n```',
            2,
            "chosen_label: 'Sudden Topic Change'",
        ),
        ("Okay, what about dessert?", 2, "missing the ```json block"),
        (
            'Hi there, can you help me plan dinner?\n```json\n{"chosen_label": "Further Inquiry", '
            '"interruption_text": "Wait, two are vegan."}\n```',
            1,
            "exchange 1 has no barge-in",
        ),
        (
            'Okay, what about dessert?\n```json\n{"chosen_label": "Further Inquiry", '
            '"interruption_text": "Okay, what about dessert?"}\n```',
            2,
            "repeats the message",
        ),
        (
            'Okay, so what would you make for dessert?\n```json\n{"chosen_label": "Further Inquiry", '
            '"interruption_text": "What would you make for dessert?"}\n```',
            2,
            "repeats the message",
        ),
        (
            "Great, can you send an email to my friends with the menu?",
            1,
            "asks for sending messages",
        ),
        (
            "Sounds good, could you book a table for us at eight?",
            1,
            "asks for purchases or bookings",
        ),
        ("Hmm, can you put the menu in bullet points?", 1, "asks for visual formatting"),
        ("What's the current weather in Lisbon?", 1, "asks for real-time data"),
        ("I'm driving right now, so what should I cook tonight?", 1, "asks for driving"),
        (
            'Okay, what about dessert?\n```json\n{"chosen_label": "Further Inquiry", "interruption_text": '
            '"Wait. Two are vegan. And one is gluten free."}\n```',
            2,
            "interruption_text: 3 sentences",
        ),
        ("Okay, what about [DISH]?", 1, "contains '['"),
        ("User: Hey, can you help me plan dinner?", 1, "starts with a label"),
        (
            'Okay, what about dessert?\n```json\n{"chosen_label": "Further Inquiry", '
            '"interruption_text": "Wait, two are vegan."}\n```\nHope that helps!',
            2,
            "nothing may follow",
        ),
        (
            'Okay, what about dessert?\n```json\n{"chosen_label": "Further Inquiry", '
            '"interruption_text": "Wait, two are vegan.", "timing": "early"}\n```',
            2,
            "exactly chosen_label",
        ),
        (
            'Okay, what about dessert?\n```json\n{"chosen_label": "Further Inquiry" '
            '"interruption_text": "Wait."}\n```',
            2,
            "not valid JSON",
        ),
    ],
)
def test_simulator_output_is_rejected_with_a_reason(answer, ex, reason):
    with pytest.raises(ValueError) as e:
        parse_simulator_output(answer, ex)
    assert reason in str(e.value)


def test_simulator_output_that_repeats_an_earlier_message_is_rejected():
    with pytest.raises(ValueError, match="repeats an earlier user message"):
        parse_simulator_output("Hey, so what should I cook?", 1, ("hey so what should I cook",))


def test_simulator_output_accepted_and_advice_about_a_forbidden_kind_passes():
    m = parse_simulator_output(GOOD_2, 2)
    assert (m.exchange, m.barge_in_label) == (2, "Further Inquiry")
    assert m.text == "Okay, that sounds good. So, um... what would you serve as the main course?"
    assert m.barge_in == "Oh wait, what if my budget is only fifty dollars now?"
    # asking for advice about an email is no request to send one
    ok = parse_simulator_output(
        "Should I send a thank-you email after the interview, or is that too much?", 1
    )
    assert ok.barge_in is None and ok.barge_in_label is None
    for label in BARGE_IN_LABELS:
        block = json.dumps(
            {"chosen_label": label, "interruption_text": "Hang on, my knee is sore today."}
        )
        assert (
            parse_simulator_output(
                f"Okay, and the way down?\n```json\n{block}\n```", 3
            ).barge_in_label
            == label
        )


# ------------------------------------------------------------------------------------------------
# LLM simulator and planner against the local Messages API stand-in


def test_llm_simulator_reasks_after_a_bad_answer_and_a_rerun_reads_the_cache(fake_api, tmp_path):
    fake_api.push(text("Sure! I have 6 friends coming.\n"), text(GOOD_2))
    sim = make_simulator(llm_settings(fake_api), tmp_path)
    assert isinstance(sim, LLMSimulator)
    history = (exchange(1, "A roast chicken dinner with a green salad would be simple."),)
    bp = Blueprint(CASE, 2, good_blueprint("keep it on the menu"))
    m = sim.next_message(SEED, bp, history, 2, CASE)
    assert (m.case_id, m.exchange, m.barge_in_label) == (CASE, 2, "Further Inquiry")
    first, second = fake_api.message_requests
    p = prompt_of(first)
    for part in (
        SEED.topic,
        SEED.persona,
        SEED.exchanges[0].message,
        "roast chicken dinner",
        bp.text,
        "Current exchange: 2",
        '"interruption_text"',
        *BARGE_IN_LABELS.values(),
    ):
        assert part in p
    assert "REJECTED" not in p
    assert "REJECTED" in prompt_of(second) and "digit" in prompt_of(second)  # the reason goes back
    assert first.body["system"] == dialogue.SIMULATOR_SYSTEM
    # a new simulator on the same cache makes no request
    again = make_simulator(llm_settings(fake_api), tmp_path).next_message(
        SEED, bp, history, 2, CASE
    )
    assert again == m and len(fake_api.message_requests) == 2
    files = cache_texts(tmp_path / "simulator")
    assert len(files) == 2 and not any(DUMMY_KEY in f for f in files)
    assert DUMMY_KEY not in json.dumps(sim.identity())


def test_llm_simulator_gives_up_with_a_simulator_error(fake_api, tmp_path):
    fake_api.push(*(text("Okay, what about dessert?") for _ in range(3)))
    sim = make_simulator(llm_settings(fake_api), tmp_path)
    bp = Blueprint(CASE, 1, good_blueprint())
    with pytest.raises(SimulatorError) as e:
        sim.next_message(SEED, bp, (exchange(1, "Here is a menu."),), 2, CASE)
    assert not isinstance(e.value, FdevalError)  # infrastructure, not a user error
    assert (e.value.case_id, e.value.exchange) == (CASE, 2)
    assert "no valid answer in 3 attempt(s)" in str(e.value) and "missing the ```json block" in str(
        e.value
    )
    assert len(fake_api.message_requests) == 3


def test_llm_request_failures_a_failed_request_is_a_simulator_error_a_rejected_key_stops(
    fake_api, tmp_path
):
    sim = make_simulator(llm_settings(fake_api), tmp_path)
    bp = Blueprint(CASE, 1, good_blueprint())
    fake_api.push(error(400, "invalid_request_error", "bad request"))
    with pytest.raises(SimulatorError, match="request failed"):
        sim.next_message(SEED, bp, (), 1, CASE)
    fake_api.push(error(401, "authentication_error", "invalid x-api-key"))
    with pytest.raises(LLMConfigError, match="credentials rejected"):
        sim.next_message(SEED, bp, (), 1, "case-2")


def test_llm_planner_prompt_reask_and_versions(fake_api, tmp_path):
    bad = "Here is my plan: keep it natural."
    fake_api.push(text(bad), text(good_blueprint("first")), text(good_blueprint("second")))
    planner = make_planner(llm_settings(fake_api), tmp_path)
    assert isinstance(planner, LLMPlanner)
    first = planner.plan(SEED, (), None, CASE)
    assert first.version == 1 and "Plan for context analysis first" in first.text
    ex1 = exchange(1, "A roast chicken dinner would be easy.")
    second = planner.plan(SEED, (ex1,), first, CASE)
    assert second.version == 2 and "second" in second.text
    reqs = fake_api.message_requests
    assert len(reqs) == 3 and "missing the section CONTEXT ANALYSIS" in prompt_of(reqs[1])
    p0, p2 = prompt_of(reqs[0]), prompt_of(reqs[2])
    for part in (
        SEED.topic,
        SEED.subtopic,
        SEED.topic_description,
        SEED.persona,
        "Dual-Stream Reasoning",
        "DSR-F4",
    ):
        assert part in p0
    assert "nothing has been said yet" in p0 and "(none yet" in p0
    assert (
        "roast chicken dinner" in p2 and first.text in p2
    )  # updated from the history and the current blueprint
    fake_api.push(*(text(bad) for _ in range(3)))
    with pytest.raises(PlannerError) as e:
        planner.plan(SEED, (), None, "case-9")
    assert isinstance(e.value, SimulatorError) and not isinstance(e.value, FdevalError)


def test_parse_blueprint_requires_every_section_in_order():
    with pytest.raises(ValueError, match="section MIDDLE PHASE is empty"):
        parse_blueprint(good_blueprint().replace("Plan for middle phase", ""))
    swapped = (
        good_blueprint()
        .replace("OPENING APPROACH:", "XX:")
        .replace("MIDDLE PHASE:", "OPENING APPROACH:")
        .replace("XX:", "MIDDLE PHASE:")
    )
    with pytest.raises(ValueError, match="in this order"):
        parse_blueprint(swapped)
    assert parse_blueprint("**" + good_blueprint().replace("\n\n", "\n\n## ")).startswith(
        "**CONTEXT"
    )


# ------------------------------------------------------------------------------------------------
# Responder prompt


def test_responder_prompt_live_and_text_forms():
    assert RESPONDER_MARKER == "You are the voice assistant in a live spoken conversation"
    assert RESPONDER_PROMPT.startswith(RESPONDER_MARKER) and responder_prompt() == RESPONDER_PROMPT
    full = responder_prompt("Exchange 1\nUser: hi", "What about dessert?", 2)
    assert full.startswith(RESPONDER_PROMPT) and RESPONDER_MARKER in full
    assert "User: hi" in full and "What about dessert?" in full and "CURRENT EXCHANGE: 2" in full
    replay = responder_prompt("Exchange 1\nUser: hi", None, 2)  # the current message comes as audio
    assert "CURRENT MESSAGE" not in replay and "User: hi" in replay


def test_history_text_for_the_responder_leaves_the_labels_out():
    h = (exchange(1, "A menu."), exchange(2, "Lentils.", before="For the main"))
    assert "Real-time Thought Process" in dialogue.history_text(h)
    plain = dialogue.history_text(h, labels=False)
    assert (
        "Real-time Thought Process" not in plain
        and "For the main" in plain
        and SEED.exchanges[1].barge_in in plain
    )
    assert dialogue.history_text(()) == "(nothing has been said yet)"
