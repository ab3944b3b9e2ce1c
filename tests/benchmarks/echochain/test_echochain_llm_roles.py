"""`python -m fdeval.launch benchmark=echochain` with every role on a language model, on each protocol.

Three launches: all five roles (planner, simulator, classifier, drafter, grader) on a local
stand-in of the Messages API (tests/helpers/fake_messages_server.py), all five on one of the
OpenAI chat-completions API (fake_openai_server.py, as vLLM, SGLang or OpenAI serve it), and the
paper's preset `echochain_roles=paper` (planner, classifier, drafter, grader on chat completions,
the simulator on Gemini's generateContent: fake_gemini_text_server.py, checked against the
google-genai types). Each stand-in is a real HTTP server on 127.0.0.1; the hosted APIs cannot be
reached here. The stand-ins play each role: they tell them apart by their system prompts and
answers in that role's exact format, from what the request shows (topic, exchange number, the
barge-in, the assistant's continuation), so the verdicts and grades follow the reference agent's
real replies. One conversation's barge-in brings a constraint the reference agent recognises
(an allergy: it says "no peanuts"), the other a fact it cannot take up (a person's name), so the
run has one conversation that takes the barge-in up and one that does not."""

from __future__ import annotations

import csv
import json
import re
import shutil
import threading
from pathlib import Path

import pytest
from helpers import fake_gemini_text_server as gemini_api
from helpers import fake_openai_server as openai_api
from helpers.fake_messages_server import DUMMY_KEY, FakeMessagesServer, Reply, error, text
from test_echochain_launch import launch, runs

from fdeval.benchmarks.echochain.classifier import system_prompt as classifier_system
from fdeval.benchmarks.echochain.dialogue import (
    BLUEPRINT_SECTIONS,
    PLANNER_SYSTEM,
    SIMULATOR_SYSTEM,
)
from fdeval.benchmarks.echochain.rubrics import DRAFTER_SYSTEM, GRADER_SYSTEM
from fdeval.engine.run import step_dir
from fdeval.orchestrator.recorder import read_session_log

N = 2
ROLE_NAMES = ("planner", "simulator", "classifier", "drafter", "grader")
# the barge-in of the first and of the second conversation, each with its new evidence word
BARGE_INS = (
    ("Oh, wait, I should say I'm allergic to peanuts. Does that change what you'd do?", "peanuts"),
    (
        "Hmm, hang on, my cousin Theodora is joining me on this. Does that change what you'd do?",
        "Theodora",
    ),
)


def field(prompt: str, pattern: str) -> str:
    m = re.search(pattern, prompt, re.MULTILINE)
    if m is None:
        raise AssertionError(f"the request lacks {pattern!r}")
    return m.group(1).strip()


def evaluated_block(prompt: str) -> str:
    """The exchange under evaluation as the classifier / grader prompt renders it."""
    return prompt[prompt.index("(the exchange to evaluate) ---") :]


def says(text: str, word: str) -> bool:
    return re.search(r"(?<!\w)" + re.escape(word.lower()) + r"(?!\w)", text.lower()) is not None


class Roles:
    """The five roles played by the stand-in; what each answered is kept to check the outputs."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.topics: list[str] = []  # conversations in the order of their first simulator request
        self.counts = dict.fromkeys(ROLE_NAMES, 0)
        self.said: dict[tuple[str, int], dict] = {}  # (topic, exchange) -> the simulator's turn
        self.problems: list[str] = []
        self.systems = {
            PLANNER_SYSTEM: "planner",
            SIMULATOR_SYSTEM: "simulator",
            classifier_system(): "classifier",
            DRAFTER_SYSTEM: "drafter",
            GRADER_SYSTEM: "grader",
        }

    def answer(self, system: str, prompt: str) -> str:
        role = self.systems[system]
        with self.lock:
            self.counts[role] += 1
        return getattr(self, role)(prompt)

    # One responder per protocol. A request the stand-in cannot read is answered 400 (not
    # retried), so the run fails fast and the test names the problem, instead of a client
    # waiting on a crashed handler.
    def messages(self, body: dict) -> Reply:
        try:
            return text(self.answer(body["system"], body["messages"][-1]["content"]))
        except Exception as e:  # noqa: BLE001 (reported by the test)
            self.problems.append(f"{type(e).__name__}: {e}")
            return error(400, "invalid_request_error", f"the stand-in could not answer: {e}")

    def chat(self, body: dict) -> Reply:
        try:
            (system,), user = (
                [m["content"] for m in body["messages"] if m["role"] == "system"],
                body["messages"][-1],
            )
            return openai_api.text(self.answer(system, user["content"]))
        except Exception as e:  # noqa: BLE001
            self.problems.append(f"{type(e).__name__}: {e}")
            return openai_api.error(
                400, "invalid_request_error", f"the stand-in could not answer: {e}"
            )

    def generate(self, body: dict) -> Reply:
        try:
            system = body["systemInstruction"]["parts"][0]["text"]
            return gemini_api.text(
                self.answer(system, body["contents"][-1]["parts"][0]["text"]),
                thought="planning the next user turn",
            )
        except Exception as e:  # noqa: BLE001
            self.problems.append(f"{type(e).__name__}: {e}")
            return gemini_api.error(400, f"the stand-in could not answer: {e}")

    def planner(self, prompt: str) -> str:
        topic = field(prompt, r"^- Topic: (.*?) \|")
        done = prompt.count("USER (message): ")
        asked = re.findall(r"^USER \(message\): (.*)$", prompt, re.MULTILINE)
        body = {
            "CONTEXT ANALYSIS": f"{done} exchange(s) done about {topic}.",
            "OPENING APPROACH": "State the task plainly in the persona's voice.",
            "MIDDLE PHASE": "One follow-up per exchange, the barge-in bringing one new fact.",
            "CLOSING APPROACH": "Ask the assistant to pull its plan together.",
            "ADAPTIVE STRATEGY": "Stay on the part of the task the last barge-in changed.",
            "AUTHENTICITY PRINCIPLES": "Casual words, numbers spelled out, one task per turn.",
            "DO NOT REPEAT": "; ".join(asked) or "nothing asked yet",
        }
        return "\n\n".join(f"{k}:\n{body[k]}" for k in BLUEPRINT_SECTIONS)

    def simulator(self, prompt: str) -> str:
        topic, sub = field(prompt, r"^- Topic: (.*?) \|"), field(prompt, r"\| Subtopic: (.*)$")
        k = int(field(prompt, r"^- Current exchange: (\d+)$"))
        with self.lock:
            if topic not in self.topics:
                self.topics.append(topic)
            n = self.topics.index(topic)
        words = " ".join(re.findall(r"[A-Za-z]+", sub))  # spoken: no digits or signs
        if k == 1:
            turn = {
                "message": f"So, um, I need some advice about {words}. Where would you even start?"
            }
            answer = turn["message"]
        else:
            cut, _ = BARGE_INS[n % len(BARGE_INS)]
            turn = {
                "message": "Okay, mm-hmm, that helps. So what would you tackle first?",
                "barge_in": cut,
                "label": "Real-time Thought Process",
            }
            meta = json.dumps({"chosen_label": turn["label"], "interruption_text": cut})
            answer = f"{turn['message']}\n```json\n{meta}\n```"
        with self.lock:
            self.said[(topic, k)] = turn
        return answer

    @staticmethod
    def evidence(barge_in: str) -> str:
        return next(w for cut, w in BARGE_INS if cut == barge_in)

    def classifier(self, prompt: str) -> str:
        block = evaluated_block(prompt)
        k = int(field(prompt, r"^Evaluate exchange (\d+)"))
        cut = field(block, r"^USER \(barge-in, [^)]*\): (.*)$")
        before = field(block, r"^ASSISTANT \(before the barge-in\): (.*)$")
        after = field(block, r"^ASSISTANT \(continuation, from the barge-in on\): (.*)$")
        failed = not says(after, self.evidence(cut))
        return "\n".join(
            [
                f"FAILURE_DETECTED: {'YES' if failed else 'NO'}",
                f"FAILURE_TURN: {k if failed else 'N/A'}",
                f"FAILURE_TYPE: {'dsr_f1_ignores' if failed else 'N/A'}",
                f"EVIDENCE_INJECTION: {cut}",
                f"WHAT_ASSISTANT_SAID_BEFORE: {before}",
                f"ASSISTANT_RESPONSE_AFTER: {after}",
                "MEMORY_DEMONSTRATED: YES",
                f"INTEGRATION_QUALITY: {'NONE' if failed else 'GOOD'}",
                f"REASON: exchange {k}: the continuation {'never says' if failed else 'says'} the new fact.",
                "CONFIDENCE: HIGH",
            ]
        )

    def drafter(self, prompt: str) -> str:
        word = self.evidence(field(prompt, r"^User \(barge-in, [^)]*\): (.*)$"))
        task = field(
            prompt, r"^User \(message\): .*? (\w+) first\?$"
        )  # the follow-up's own task word
        return json.dumps(
            {
                "criteria": [
                    {
                        "text": f"The continuation says '{word}'",
                        "require_any": [word],
                        "scope": "continuation",
                    },
                    {"text": f"The reply says '{task}'", "require_any": [task], "scope": "answer"},
                ]
            }
        )

    def grader(self, prompt: str) -> str:
        block = evaluated_block(prompt)
        after = field(block, r"^ASSISTANT \(continuation, from the barge-in on\): (.*)$")
        before = field(block, r"^ASSISTANT \(before the barge-in\): (.*)$")
        grades = []
        for cid, scope, word in re.findall(
            r"^- (\S+) \(scope: (\w+)\): .*'(.+)'$", prompt, re.MULTILINE
        ):
            shown = after if scope == "continuation" else f"{before} {after}"
            ok = says(shown, word)
            grades.append(
                {
                    "criterion_id": cid,
                    "passed": ok,
                    "reason": f"{'says' if ok else 'never says'} {word!r}",
                }
            )
        return json.dumps({"grades": grades})


def verdicts(run: Path) -> dict[str, tuple]:
    out = {}
    for f in sorted(step_dir(run, "grade").glob("*.json")):
        d = json.loads(f.read_text())
        out[d["case_id"]] = (
            d["value"],
            d["flagged"],
            d["classifier"]["samples"],
            d["rubric"],
            d["grades"],
            d["control"]["grades"],
        )
    return out


def table_row(out: str, header: str, model: str) -> dict[str, str]:
    """The row of `model` in the markdown table of `out` whose header line starts with `header`."""
    lines = out.splitlines()
    at = next(i for i, line in enumerate(lines) if line.startswith(header))
    names = [c.strip() for c in lines[at].strip("|").split("|")]
    for line in lines[at + 2 :]:
        cells = [c.strip() for c in line.strip("|").split("|")]
        if not line.startswith("|"):
            break
        if cells[0] == model:
            return dict(zip(names, cells, strict=True))
    raise AssertionError(f"no row {model!r} under {header!r}")


KEYS = (DUMMY_KEY, openai_api.DUMMY_OPENAI_KEY, gemini_api.DUMMY_GEMINI_KEY)


def assert_no_key(root: Path) -> None:
    """No key reaches a file: outputs, logs, the answer cache, audio and HDF5 alike."""
    leaked = [
        p
        for p in root.rglob("*")
        if p.is_file() and any(k.encode() in p.read_bytes() for k in KEYS)
    ]
    assert not leaked, leaked


# protocol -> (stand-in class, the role each protocol serves, the Roles responder)
SETUPS = {
    "anthropic": {r: "anthropic" for r in ROLE_NAMES},
    "openai": {r: "openai" for r in ROLE_NAMES},
    "paper": {**{r: "openai" for r in ROLE_NAMES}, "simulator": "gemini"},
}
SERVERS = {
    "anthropic": (FakeMessagesServer, "messages"),
    "openai": (openai_api.FakeOpenAIServer, "chat"),
    "gemini": (gemini_api.FakeGeminiServer, "generate"),
}


@pytest.mark.parametrize("setup", list(SETUPS))
def test_every_role_on_a_language_model_runs_end_to_end_and_reruns_from_the_cache(
    tmp_path, monkeypatch, setup
):
    """anthropic / openai: every role on that backend; paper: the preset, as the paper ran its
    roles. Each stand-in gets a dummy key from the environment the launch inherits."""
    for var in (
        "ANTHROPIC_BASE_URL",
        "ANTHROPIC_AUTH_TOKEN",
        "GOOGLE_API_KEY",
        "HTTP_PROXY",
        "http_proxy",
    ):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("ANTHROPIC_API_KEY", DUMMY_KEY)
    monkeypatch.setenv("OPENAI_API_KEY", openai_api.DUMMY_OPENAI_KEY)
    monkeypatch.setenv("GEMINI_API_KEY", gemini_api.DUMMY_GEMINI_KEY)
    roles = Roles()
    servers = {}
    for protocol in sorted(set(SETUPS[setup].values())):
        cls, responder = SERVERS[protocol]
        servers[protocol] = cls().start()
        servers[protocol].responder = getattr(roles, responder)
    try:
        _run_and_rerun(tmp_path, setup, roles, servers)
    finally:
        for server in servers.values():
            server.stop()


def _run_and_rerun(tmp_path: Path, setup: str, roles: Roles, servers: dict) -> None:
    args = [
        f"benchmark.n_conversations={N}",
        "benchmark.max_exchanges=2",
        "benchmark.classifier.votes=1",
    ]
    if setup == "paper":
        args.append("echochain_roles=paper")
    for r, protocol in SETUPS[setup].items():
        if setup != "paper":
            args.append(f"benchmark.{r}.backend={protocol}")
        if protocol == "openai":
            args.append(
                f"benchmark.{r}.model=Qwen/Qwen3-8B"
                if setup != "paper"
                else f"benchmark.{r}.model=gpt-5.2-2025-12-11"
            )
        args.append(f"benchmark.{r}.base_url={servers[protocol].base_url}")
    proc = launch(tmp_path, *args)
    assert roles.problems == []
    requests = {p: list(s.message_requests) for p, s in servers.items()}
    n = sum(len(v) for v in requests.values())
    assert n == sum(roles.counts.values())  # every request was one of the five roles
    # per conversation: the first blueprint and one update, two user turns, one classifier
    # request (the grade step segments the log as the loop did, so its request is the loop's,
    # read from the cache), one rubric, and grades for two deliveries (live and half-duplex)
    assert roles.counts == {
        "planner": 2 * N,
        "simulator": 2 * N,
        "classifier": N,
        "drafter": N,
        "grader": 2 * N,
    }
    assert len(roles.topics) == N
    # each protocol's requests carry its key in its own header (the anthropic SDK's, whichever it uses)
    for protocol, reqs in requests.items():
        key, headers = {
            "anthropic": (DUMMY_KEY, ("x-api-key", "authorization")),
            "openai": (openai_api.DUMMY_OPENAI_KEY, ("authorization",)),
            "gemini": (gemini_api.DUMMY_GEMINI_KEY, ("x-goog-api-key",)),
        }[protocol]
        assert all(any(key in r.headers.get(h, "") for h in headers) for r in reqs), protocol
    if setup == "paper":  # GPT-5.2 takes max_completion_tokens and a reasoning effort
        assert all(
            r.body["model"] == "gpt-5.2-2025-12-11"
            and "max_tokens" not in r.body
            and r.body["reasoning_effort"] == "none"
            for r in requests["openai"]
        )
        assert {r.path for r in requests["gemini"]} == {
            "/v1beta/models/gemini-3-pro-preview:generateContent"
        }
        assert servers["gemini"].invalid == []
    if (
        setup == "paper"
    ):  # the plan of the same command counts what the run asked for; it sends nothing
        plan = launch(tmp_path, *args, "stage=plan").stdout
        for r in ROLE_NAMES:
            assert re.search(rf"\| LLM requests, {r} +\| at most {roles.counts[r]} \(", plan), (
                r,
                plan,
            )
        assert sum(len(s.message_requests) for s in servers.values()) == n

    (run,) = runs(tmp_path)
    data = tmp_path / "out" / "echochain" / "_data"
    evidence_taken = {}
    for f in sorted(step_dir(run, "grade").glob("*.json")):
        d = json.loads(f.read_text())
        cid, topic = d["case_id"], d["topic"]
        assert d["status"] == "ok" and d["rubric"]["source"] == "draft"
        assert d["classifier"]["classifier"]["backend"] == SETUPS[setup]["classifier"]
        seg = json.loads((step_dir(run, "segment") / f.name).read_text())
        (ex,) = [e for e in seg["exchanges"] if e["index"] == d["evaluated"]]
        for grades, shown in (
            (d["grades"], ex),
            (d["control"]["grades"], seg["control"]["exchanges"][-1]),
        ):
            for g, c in zip(
                grades, d["rubric"]["criteria"], strict=True
            ):  # each grade follows the reply shown
                said = (
                    shown["continuation"]
                    if c["scope"] == "continuation"
                    else f"{shown['answer_before']} {shown['continuation']}"
                )
                assert g["criterion_id"] == c["criterion_id"] and g["passed"] == says(
                    said, c["require_any"][0]
                )
        evidence_taken[topic] = (d["grades"][0]["passed"], d["control"]["grades"][0]["passed"])
        assert d["flagged"] == (
            not d["grades"][0]["passed"]
        )  # the classifier read the same continuation
        assert d["value"] == ("pass" if all(g["passed"] for g in d["grades"]) else "fail")
        # the conversation's words are the simulator's answers: exchange 1 in the case, 2 in the session
        (case,) = [json.loads(p.read_text()) for p in data.glob(f"*/cases/{cid}.json")]
        assert case["turns"][0]["text"] == roles.said[(topic, 1)]["message"]
        rec = read_session_log(run / "sessions" / f"{cid}.h5")["user_policy_record"]
        assert rec["said"]["1"]["message"] == roles.said[(topic, 1)]["message"]
        assert {k: rec["said"]["2"][k] for k in ("message", "barge_in", "barge_in_label")} == {
            "message": roles.said[(topic, 2)]["message"],
            "barge_in": roles.said[(topic, 2)]["barge_in"],
            "barge_in_label": roles.said[(topic, 2)]["label"],
        }
        assert all(
            rec["roles"][r]["backend"] == SETUPS[setup][r]
            for r in ("planner", "simulator", "classifier")
        )
    # live, the reference agent takes up the allergy it recognises and not the name it cannot; in the
    # half-duplex control the name arrives as a request of its own, whose words it repeats
    assert evidence_taken == {roles.topics[0]: (True, True), roles.topics[1]: (False, True)}
    rows = list(csv.DictReader((step_dir(run, "score") / "echochain_results.csv").open()))
    assert len(rows) == N and all(r["rubric_source"] == "draft" for r in rows)
    for r in (
        rows
    ):  # every results row names the backend of each role, and how each differs from the paper
        assert {k: v["backend"] for k, v in json.loads(r["roles"]).items()} == SETUPS[setup]
        deviating = {"drafter", "grader"} if setup == "paper" else set(ROLE_NAMES)
        assert set(json.loads(r["deviations"])) == deviating
    # the tables on stdout: one of two conversations passes every criterion, three of four pass;
    # the one interrupted failure is gone in the half-duplex control
    scores = table_row(proc.stdout, "| Model | Conversations | Scored | MPR |", "reference")
    assert (scores["MPR"].split()[0], scores["MCP (pooled)"].split()[0]) == ("50.0%", "75.0%")
    control = table_row(
        proc.stdout, "| Model | Conversations | Criteria | Failures (interrupted) |", "reference"
    )
    assert (control["Failures (interrupted)"], control["Failures (half-duplex)"]) == ("1", "0")
    assert_no_key(tmp_path / "out")

    # everything but the answer cache removed: the relaunch generates, records and grades
    # again, and every role's answer comes from the cache (the same requests as the first run)
    before = verdicts(run)
    for p in (tmp_path / "out").iterdir():
        if p.name != "_cache":
            shutil.rmtree(p)
    launch(tmp_path, *args, "resume=redo")
    assert sum(len(s.message_requests) for s in servers.values()) == n and verdicts(run) == before
    assert_no_key(tmp_path / "out")
