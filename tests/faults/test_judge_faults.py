"""A judge that answers garbage, 429s, 500s or not at all, through a whole launch, on both local
stand-ins (tests/helpers: the Messages API and an OpenAI-compatible server such as vLLM).

A prepared run per stand-in (two cases, recorded and transcribed, judged once by the healthy
stand-in) is copied for each test with its verdicts, scores, views and judge cache removed: the
judge step is what is left to do. The stand-in then misbehaves for one launch, and each test checks
that what the judge could not decide is an `error` record (never `not_adhere`, never a model
failure) or a one-line stop naming the endpoint and the pair being judged, that every finished
output is byte-identical, and that the same command against the healthy stand-in completes.
The stand-in stays on one port for the module: the endpoint is part of the judge step's identity.
"""

from __future__ import annotations

import csv
import json
import shutil
from pathlib import Path

import pytest

from helpers import fake_messages_server as msg
from helpers import fake_openai_server as oai

from fdeval.engine.run import step_dir

from .conftest import TWO, assert_kept, digests, launch, one_line_error, run_dirs

YES = json.dumps({"reasoning": "Step 5: the model followed the instruction.", "adherence": "yes"})
PAIRS = ("fresh_pasta_stop__acknowledge@acknowledge", "job_offer_move__listen@listen")
# per stand-in: the server, its reply makers, the launch arguments that point the judge at it
STAND_INS = {
    "messages": (msg.FakeMessagesServer, msg, ["judge=llm"]),
    "openai": (
        oai.FakeOpenAIServer,
        oai,
        ["judge=llm", "judge.backend=vllm", "judge.model=fake-judge"],
    ),
}
# retry knobs (not part of the run's identity) that keep a failing judge to a fraction of a second
FAST = ["+judge.backoff_s=0.01", "+judge.max_backoff_s=0.02", "judge.max_retries=1"]


class Prepared:
    def __init__(self, server, replies, args: list[str], root: Path):
        self.server, self.replies, self.args, self.root = server, replies, args, root

    def healthy(self) -> None:
        self.server.queue.clear()
        self.server.responder = lambda body: self.replies.text(YES)

    def copy(self, dest: Path) -> Path:
        """A copy of the prepared run with the judge step (and what follows it) left to do."""
        shutil.copytree(self.root, dest)
        (d,) = run_dirs(dest / "outputs")
        for sub in ("verdicts", "scores", "timelines"):
            shutil.rmtree(d / sub)
        shutil.rmtree(dest / "outputs" / "_cache")
        return d


@pytest.fixture(scope="module", params=sorted(STAND_INS))
def prepared(request, tmp_path_factory):
    server_cls, replies, args = STAND_INS[request.param]
    with server_cls() as server:
        p = Prepared(
            server,
            replies,
            [TWO, *args, f"judge.base_url={server.base_url}"],
            tmp_path_factory.mktemp(f"judge-{request.param}"),
        )
        p.healthy()
        launch(p.root, *p.args, env=ENV)
        yield p


ENV = {"ANTHROPIC_API_KEY": msg.DUMMY_KEY}  # the Messages stand-in wants one; a loopback vLLM none


def verdicts(d: Path) -> dict[str, dict]:
    return {p.stem: json.loads(p.read_text()) for p in sorted(step_dir(d, "judge").glob("*.json"))}


def ias_overall(d: Path) -> dict[str, str]:
    with open(step_dir(d, "score") / "ias.csv", newline="") as f:
        return next(r for r in csv.DictReader(f) if r["instruction"] == "overall")


def relaunch_completes(p: Prepared, tmp: Path, d: Path, kept: dict[str, str]) -> None:
    """The same command against the healthy stand-in: every pair adheres, nothing finished changed."""
    p.healthy()
    launch(tmp, *p.args, *FAST, env=ENV)
    assert {k: v["verdict"] for k, v in verdicts(d).items()} == dict.fromkeys(PAIRS, "adhere")
    assert ias_overall(d)["n_error"] == "0" and ias_overall(d)["n_pass"] == "2"
    assert_kept(kept, digests(tmp / "outputs"))


def test_500s_garbage_and_unreadable_answers_are_error_records_and_the_relaunch_completes(
    prepared, tmp_path
):
    """The first pair gets a 500, then (its one retry) a proxy's HTML page: the request failed, an
    `error` record, asked again on relaunch. The second gets well-formed answers that hold no
    verdict: an answer is cached like any (a judged run stays reproducible), re-asked
    `max_parse_retries` (2) times, then `error`; the relaunch reads the same answers from the cache
    (docs/llm-judge.md, Caching): the same error, no request."""
    d = prepared.copy(tmp_path / "run")
    tmp = tmp_path / "run"
    before = digests(tmp / "outputs")
    unreadable = prepared.replies.text("I would rather not say.")
    prepared.server.responder = (
        None  # only these; another request gets 400 and shows in the verdicts
    )
    prepared.server.push(
        prepared.replies.error(500, message="upstream exploded"),
        msg.raw(200, b"<html>garbage from a proxy</html>", "text/html"),
        *[unreadable] * 3,
    )
    n0 = len(prepared.server.message_requests)
    proc = launch(
        tmp, *prepared.args, *FAST, env=ENV
    )  # 1 failed request: under max_failed_requests (3)
    assert len(prepared.server.message_requests) - n0 == 5 and not prepared.server.queue
    got = verdicts(d)
    assert {k: v["verdict"] for k, v in got.items()} == dict.fromkeys(PAIRS, "error")
    assert all(f"{v['case_id']}@{v['policy']}" == k for k, v in got.items())
    failed, unread = got[PAIRS[0]]["reasoning"], got[PAIRS[1]]["reasoning"]
    assert (
        "the request failed" in failed
        and "failed after 2 attempt(s)" in failed
        and "malformed response" in failed
    )
    assert (
        "no readable answer after 3 attempt(s)" in unread
        and "delete those files under judge.cache_dir" in unread
    )
    cached = unread.split("The answers are cached (", 1)[1].split(")", 1)[0].split(", ")
    assert len(cached) == 3 and all(
        list((tmp / "outputs/_cache").rglob(f"{k}*.json")) for k in cached
    )
    row = ias_overall(d)
    assert (
        row["n_error"] == "2" and row["n_pass"] == "0"
    )  # left out of the rate, not model failures
    assert (
        "not_adhere" not in (step_dir(d, "score") / "results.csv").read_text()
        and "{'error': 2}" in proc.stdout
    )
    assert_kept(before, digests(tmp / "outputs"))
    prepared.healthy()
    launch(tmp, *prepared.args, *FAST, env=ENV)
    assert len(prepared.server.message_requests) - n0 == 6  # the failed pair only
    again = verdicts(d)
    assert again[PAIRS[0]]["verdict"] == "adhere" and again[PAIRS[1]]["reasoning"] == unread
    assert ias_overall(d)["n_error"] == "1" and ias_overall(d)["n_pass"] == "1"
    assert_kept(before, digests(tmp / "outputs"))
    # what its reasoning says to do: without those cached answers the pair is asked anew
    for k in cached:
        (f,) = (tmp / "outputs/_cache").rglob(f"{k}*.json")
        f.unlink()
    relaunch_completes(prepared, tmp, d, before)


def test_429s_stop_the_launch_with_one_line_naming_endpoint_and_pair(prepared, tmp_path):
    d = prepared.copy(tmp_path / "run")
    tmp = tmp_path / "run"
    before = digests(tmp / "outputs")
    prepared.server.responder = lambda body: prepared.replies.error(
        429, "rate_limit_error", "slow down", headers={"retry-after": "0"}
    )
    err = one_line_error(
        launch(tmp, *prepared.args, *FAST, "judge.max_failed_requests=2", env=ENV, check=False)
    )
    assert (
        prepared.server.base_url in err
        and "HTTP 429" in err
        and "2 consecutive requests failed" in err
    )
    assert PAIRS[1] in err, err  # the pair it was judging when it stopped
    # the first pair's failure is its error record; the second got none; the score was not written
    got = verdicts(d)
    assert list(got) == [PAIRS[0]] and got[PAIRS[0]]["verdict"] == "error"
    assert not (step_dir(d, "score") / "ias.csv").exists()
    assert_kept(before, digests(tmp / "outputs"))
    relaunch_completes(prepared, tmp, d, before)


def test_timeouts_stop_the_launch_with_one_line_and_no_verdict(prepared, tmp_path):
    d = prepared.copy(tmp_path / "run")
    tmp = tmp_path / "run"
    before = digests(tmp / "outputs")
    prepared.server.responder = lambda body: msg.slow(1.5, prepared.replies.text(YES))
    err = one_line_error(
        launch(
            tmp,
            *prepared.args,
            *FAST,
            "judge.timeout_s=0.3",
            "judge.max_retries=5",
            env=ENV,
            check=False,
        )
    )
    assert prepared.server.base_url in err and "no answer within 0.3 s (timeout)" in err
    assert "3 consecutive attempts without an answer" in err and PAIRS[0] in err, err
    assert verdicts(d) == {}  # nothing decided, nothing recorded as a failure
    assert_kept(before, digests(tmp / "outputs"))
    relaunch_completes(prepared, tmp, d, before)
