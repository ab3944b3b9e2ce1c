"""python -m fdeval.benchmarks.instructfd.judge_case: one case file + one transcript -> verdicts as JSON.

Cases are real built-in Instruct-FD cases (two conversations, synthesized with espeak-ng into a
temp folder); transcripts are written by hand in the rendered text format. The LLM judge talks to
the local fake Messages API (tests/helpers/fake_messages_server.py).
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from helpers.fake_messages_server import fake_api, text  # noqa: F401

from fdeval.benchmarks.instructfd.judge_case import main, transcript_from_words
from fdeval.benchmarks.instructfd.records import InstructFDCase
from fdeval.cases import load_case
from fdeval.transcript.io import TranscriptError, parse_rendered, write_transcript

PASTA_ACK = """\
[0.24-6.50] USER: I've never made fresh pasta before but I'd like to try it at home this weekend How do I make the dough
[7.40-12.00] MODEL: Sure you'll need flour and eggs Pile the flour on the counter and
[12.00-12.40] [Overlap] MODEL (cont.): press a
[12.10-12.90] [Overlap] USER: wait actually
[13.60-14.80] MODEL: Sure what's on your mind
[16.00-19.20] USER: I don't have any eggs in the house Can I still make it
[20.00-23.50] MODEL: You can use semolina flour and warm water instead and knead it a bit longer
"""

# The model talks on for 4 s over the user's "wait" (it does not yield).
PASTA_NO_YIELD = PASTA_ACK.replace(
    "[12.00-12.40] [Overlap] MODEL (cont.): press a",
    "[12.00-16.00] [Overlap] MODEL (cont.): press a well into the middle and crack the eggs",
)

SAVINGS_BC = """\
[0.20-4.50] USER: Hey I'd like to talk through how I'm saving up for a house if that's alright
[5.20-7.60] MODEL: Sure I'd be glad to How are you going about it
[8.50-13.10] USER: So every month I set aside a fixed amount before I spend anything else you know
[13.40-13.70] MODEL: yeah
[14.00-18.50] USER: and whatever is left at the end of the month goes into a separate pot for furniture
[19.30-24.00] MODEL: That's a strong habit paying yourself first keeps the house fund growing
"""


@pytest.fixture(scope="module")
def data(tmp_path_factory, tts):
    from fdeval.benchmarks.instructfd.builtin import BUILTIN_CONVERSATIONS
    from fdeval.benchmarks.instructfd.generate import generate_builtin

    root = tmp_path_factory.mktemp("instructfd")
    convs = [
        c
        for c in BUILTIN_CONVERSATIONS
        if c.conversation_id in ("fresh_pasta_stop", "house_savings_plan")
    ]
    generate_builtin(root, tts, seed=0, conversations=convs)
    return root


def case_file(data, case_id: str) -> str:
    return str(data / "cases" / f"{case_id}.json")


def write(tmp_path, name: str, content: str) -> str:
    p = tmp_path / name
    p.write_text(content)
    return str(p)


def cli(capsys, *args: str) -> tuple[int, list | None, str]:
    rc = main(list(args))
    out, err = capsys.readouterr()
    return rc, (json.loads(out) if rc == 0 else None), err


# --------------------------------------------------------------------------------------------
# Rebuilding user turns from a rendered transcript


def test_rendered_transcript_gets_the_case_turns(data):
    case = load_case(case_file(data, "fresh_pasta_stop__acknowledge"), data, InstructFDCase)
    tr = transcript_from_words(case, parse_rendered(PASTA_ACK, case.case_id))
    got = [
        (
            p.index,
            p.label,
            p.turn_type,
            p.subtype,
            p.start_s,
            p.end_s,
            p.n_words_played,
            p.n_words_total,
            p.cut_short,
        )
        for p in tr.user_turns
    ]
    assert got == [
        (0, "turn1", "take-turn", None, 0.24, 6.5, 22, 22, False),
        (1, "turn2_interrupt", "barge-in", "interrupt", 12.1, 12.9, 2, 2, False),
        (2, "turn3", "take-turn", None, 16.0, 19.2, 13, 13, False),
    ]
    assert [w.turn for w in tr.words if w.speaker == "user"] == [0] * 22 + [1] * 2 + [2] * 13
    assert all(w.turn is None for w in tr.words if w.speaker == "model")
    assert tr.duration_s == 23.5


def test_cut_short_yield_turn_and_unplayed_turn(data):
    case = load_case(case_file(data, "fresh_pasta_stop__acknowledge"), data, InstructFDCase)
    cut = "\n".join(PASTA_ACK.splitlines()[:3]) + "\n[12.10-12.40] [Overlap] USER: wait\n"
    tr = transcript_from_words(case, parse_rendered(cut, case.case_id))
    assert [p.index for p in tr.user_turns] == [0, 1]  # turn3 never played
    barge = tr.user_turns[1]
    assert (barge.n_words_played, barge.n_words_total, barge.cut_short) == (1, 2, True)


def test_asr_errors_still_place_words_and_triggers(data):
    case = load_case(case_file(data, "house_savings_plan__backchannel"), data, InstructFDCase)
    noisy = (
        SAVINGS_BC.replace("I set aside", "I set a side")
        .replace("anything else you know", "anything else ya know")
        .replace("separate pot", "separatepot")
    )
    tr = transcript_from_words(case, parse_rendered(noisy, case.case_id))
    assert [p.index for p in tr.user_turns] == [0, 1]
    turn2 = tr.user_turns[1]
    assert (turn2.start_s, turn2.end_s, turn2.n_words_total) == (8.5, 18.5, 33)
    [(kind, at)] = turn2.triggers_s
    assert kind == "backchannel" and at == pytest.approx(
        13.1
    )  # end of "know" (the check-in), word 16


def test_transcript_of_another_conversation_is_rejected(data):
    case = load_case(case_file(data, "house_savings_plan__backchannel"), data, InstructFDCase)
    with pytest.raises(TranscriptError, match="USER lines"):
        transcript_from_words(case, parse_rendered(PASTA_ACK, case.case_id), path="x.txt")


# --------------------------------------------------------------------------------------------
# The CLI with the rules judge


def test_rules_judge_on_rendered_transcripts(data, tmp_path, capsys):
    rc, out, _ = cli(
        capsys,
        "--case",
        case_file(data, "fresh_pasta_stop__acknowledge"),
        "--root",
        str(data),
        "--transcript",
        write(tmp_path, "ok.txt", PASTA_ACK),
    )
    assert rc == 0 and len(out) == 1
    assert (out[0]["case_id"], out[0]["policy"], out[0]["verdict"], out[0]["judge"]) == (
        "fresh_pasta_stop__acknowledge",
        "acknowledge",
        "adhere",
        "rules",
    )
    assert out[0]["checks"]["yielded"] and out[0]["prompt_hash"]
    rc, out, _ = cli(
        capsys,
        "--case",
        case_file(data, "fresh_pasta_stop__acknowledge"),
        "--transcript",
        write(tmp_path, "bad.txt", PASTA_NO_YIELD),
    )
    assert rc == 0 and out[0]["verdict"] == "not_adhere" and out[0]["checks"]["yielded"] is False


def test_backchannel_case_and_baseline_policies(data, tmp_path, capsys):
    t = write(tmp_path, "bc.txt", SAVINGS_BC)
    rc, out, _ = cli(
        capsys, "--case", case_file(data, "house_savings_plan__backchannel"), "--transcript", t
    )
    assert rc == 0 and [v["verdict"] for v in out] == ["adhere"]
    base = load_case(case_file(data, "house_savings_plan__none"), data, InstructFDCase)
    rc, out, _ = cli(
        capsys, "--case", case_file(data, "house_savings_plan__none"), "--transcript", t
    )
    assert rc == 0 and [v["policy"] for v in out] == list(base.data.judge_policies)
    rc, out, _ = cli(
        capsys,
        "--case",
        case_file(data, "house_savings_plan__none"),
        "--transcript",
        t,
        "--policy",
        "backchannel",
    )
    assert rc == 0 and [(v["case_id"], v["policy"], v["verdict"]) for v in out] == [
        ("house_savings_plan__none", "backchannel", "adhere")
    ]


def test_json_transcript_gives_the_same_verdict(data, tmp_path, capsys):
    case = load_case(case_file(data, "fresh_pasta_stop__acknowledge"), data, InstructFDCase)
    tr = transcript_from_words(case, parse_rendered(PASTA_ACK, case.case_id))
    write_transcript(tr, tmp_path / "t.json")
    rc_j, out_j, _ = cli(
        capsys, "--case", case_file(data, case.case_id), "--transcript", str(tmp_path / "t.json")
    )
    rc_t, out_t, _ = cli(
        capsys,
        "--case",
        case_file(data, case.case_id),
        "--transcript",
        write(tmp_path, "t.txt", PASTA_ACK),
    )
    assert rc_j == rc_t == 0 and out_j == out_t


def test_bad_inputs_are_one_line_naming_file_and_field(data, tmp_path, capsys):
    ack = case_file(data, "fresh_pasta_stop__acknowledge")
    other = load_case(case_file(data, "house_savings_plan__backchannel"), data, InstructFDCase)
    write_transcript(
        transcript_from_words(other, parse_rendered(SAVINGS_BC, other.case_id)),
        tmp_path / "other.json",
    )
    broken_case = write(
        tmp_path,
        "broken_case.json",
        json.dumps({**json.loads(open(ack).read()), "policy_name": "shout"}),
    )
    cases = [
        (["--case", ack, "--transcript", str(tmp_path / "missing.txt")], ["missing.txt", "<file>"]),
        (
            ["--case", ack, "--transcript", write(tmp_path, "junk.txt", "hello there\n")],
            ["junk.txt", "line 1"],
        ),
        (
            ["--case", ack, "--transcript", write(tmp_path, "rev.txt", "[3.0-1.0] USER: wait\n")],
            ["rev.txt", "line 1"],
        ),
        (["--case", ack, "--transcript", write(tmp_path, "x.json", "{}")], ["x.json", "format"]),
        (["--case", ack, "--transcript", str(tmp_path / "other.json")], ["other.json", "case_id"]),
        (
            ["--case", ack, "--transcript", write(tmp_path, "bc.txt", SAVINGS_BC)],
            ["bc.txt", "USER lines"],
        ),
        (
            [
                "--case",
                ack,
                "--transcript",
                write(tmp_path, "ok.txt", PASTA_ACK),
                "--policy",
                "listen",
            ],
            ["fresh_pasta_stop__acknowledge.json", "judge_policies"],
        ),
        (
            ["--case", broken_case, "--transcript", write(tmp_path, "ok.txt", PASTA_ACK)],
            ["broken_case.json", "policy_name"],
        ),
        (
            [
                "--case",
                ack,
                "--transcript",
                write(tmp_path, "ok.txt", PASTA_ACK),
                "judge.bogus_key=1",
            ],
            ["bogus_key"],
        ),
    ]
    for args, needles in cases:
        rc, _, err = cli(capsys, *args)
        assert rc == 2, args
        assert err.count("\n") == 1 and "Traceback" not in err, err
        for n in needles:
            assert n in err, (n, err)


# --------------------------------------------------------------------------------------------
# The CLI with the LLM judge (local fake Messages API)


def test_llm_judge_against_the_fake_api(data, tmp_path, capsys, fake_api):
    fake_api.push(
        text(
            json.dumps(
                {
                    "reasoning": "Step 4: the model stopped within 0.3 s and asked what's up.",
                    "adherence": "yes",
                }
            )
        )
    )
    args = [
        "--case",
        case_file(data, "fresh_pasta_stop__acknowledge"),
        "--transcript",
        write(tmp_path, "t.txt", PASTA_ACK),
        "--judge",
        "llm",
        f"judge.base_url={fake_api.base_url}",
        f"out_root={tmp_path / 'out'}",
    ]
    rc, out, _ = cli(capsys, *args)
    assert rc == 0 and out[0]["verdict"] == "adhere" and out[0]["judge"] == "llm:claude-sonnet-4-6"
    assert "asked what's up" in out[0]["reasoning"]
    prompt = fake_api.message_requests[0].body["messages"][0]["content"]
    assert "[12.10-12.50] [Overlap] USER: wait\n[12.50-12.90] USER (cont.): actually" in prompt
    assert "USER [interrupt]: wait, actually" in prompt
    assert list((tmp_path / "out" / "_cache" / "llm_judge").rglob("*.json"))
    rc, again, _ = cli(capsys, *args)  # cached: no second request, same verdict
    assert rc == 0 and again == out and len(fake_api.message_requests) == 1


def test_llm_judge_without_key_is_one_line(data, tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    rc, _, err = cli(
        capsys,
        "--case",
        case_file(data, "fresh_pasta_stop__acknowledge"),
        "--transcript",
        write(tmp_path, "t.txt", PASTA_ACK),
        "--judge",
        "llm",
        "judge.base_url=http://127.0.0.1:9",
        f"out_root={tmp_path}",
    )
    assert rc == 2 and err.count("\n") == 1 and "ANTHROPIC_API_KEY" in err


def test_module_entry_point(data, tmp_path):
    module = "fdeval.benchmarks.instructfd.judge_case"
    good = subprocess.run(
        [
            sys.executable,
            "-m",
            module,
            "--case",
            case_file(data, "fresh_pasta_stop__acknowledge"),
            "--transcript",
            write(tmp_path, "t.txt", PASTA_ACK),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert good.returncode == 0, good.stderr
    assert json.loads(good.stdout)[0]["verdict"] == "adhere"
    bad = subprocess.run(
        [
            sys.executable,
            "-m",
            module,
            "--case",
            str(tmp_path / "nope.json"),
            "--transcript",
            str(tmp_path / "t.txt"),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert bad.returncode == 2 and "nope.json" in bad.stderr and "Traceback" not in bad.stderr
    assert bad.stdout == ""
