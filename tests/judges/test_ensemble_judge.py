"""EnsembleJudge: majority over non-error verdicts, the tie rule, provenance; with real member
judges (rules, and the LLM judge against the local fake Messages API) and fixed-answer members."""

from __future__ import annotations

import json

import pytest
from hydra import compose, initialize_config_dir
from hydra.core.global_hydra import GlobalHydra
from hydra.utils import instantiate

from helpers.fake_messages_server import fake_api, text  # noqa: F401
from judge_fixtures import Session

from fdeval.errors import ConfigError
from fdeval.benchmarks.instructfd.judges.base import Judge
from fdeval.benchmarks.instructfd.judges.ensemble import EnsembleJudge
from fdeval.benchmarks.instructfd.judges.llm import LLMJudge
from fdeval.benchmarks.instructfd.judges.rules import RulesJudge
from fdeval.launch import CONF_DIR


class Fixed(Judge):
    """A member that always gives one label (the vote logic is what is under test)."""

    version = "1"

    def __init__(self, name: str, label: str):
        self.id, self.label = name, label

    @property
    def prompt_hash(self) -> str:
        return f"hash-{self.id}"

    def judge(self, case, policy, transcript):
        return self.verdict(case.case_id, policy, self.label, f"{self.id} says {self.label}")


@pytest.fixture(scope="module")
def pair():
    s = (
        Session("quiet__listen", "listen")
        .user("so I have been thinking about moving to a new city next year", 0.2)
        .model("that sounds like a big step what draws you there", 4.5)
    )
    return s.build()


def vote(pair, *labels, tie_breaker=None):
    case, tr = pair
    ens = EnsembleJudge(
        [Fixed(f"j{i}", lab) for i, lab in enumerate(labels)], tie_breaker=tie_breaker
    )
    return ens.judge(case, "listen", tr)


@pytest.mark.parametrize(
    "labels,expected",
    [
        (("adhere", "adhere", "not_adhere"), "adhere"),
        (("not_adhere", "adhere", "not_adhere"), "not_adhere"),
        (("adhere", "error", "error"), "adhere"),  # errors do not vote
        (("not_adhere", "error"), "not_adhere"),
        (("error", "error", "error"), "error"),  # nothing to vote on
        (("adhere", "not_adhere"), "error"),  # tie
        (("adhere", "not_adhere", "error"), "error"),
    ],
)
def test_majority_over_non_error_verdicts(pair, labels, expected):
    v = vote(pair, *labels)
    assert v.verdict == expected
    assert (
        "Member verdicts: " + ", ".join(f"j{i}={lab}" for i, lab in enumerate(labels))
        in v.reasoning
    )
    for i, lab in enumerate(labels):
        assert f"j{i} says {lab}" in v.reasoning
    assert v.checks == {
        f"j{i} adheres": lab == "adhere" for i, lab in enumerate(labels) if lab != "error"
    }


def test_tie_reasoning_says_the_judges_disagree(pair):
    assert "disagree" in vote(pair, "adhere", "not_adhere").reasoning
    assert "every member judge answered error" in vote(pair, "error", "error").reasoning


@pytest.mark.parametrize("breaker", [1, "j1"])
def test_named_tie_breaker_decides_ties_only(pair, breaker):
    assert vote(pair, "adhere", "not_adhere", tie_breaker=breaker).verdict == "not_adhere"
    assert vote(pair, "adhere", "adhere", "not_adhere", tie_breaker=breaker).verdict == "adhere"
    assert (
        vote(pair, "adhere", "error", "not_adhere", tie_breaker=breaker).verdict == "error"
    )  # breaker errored


def test_provenance(pair):
    a = EnsembleJudge([Fixed("a", "adhere"), Fixed("b", "adhere")])
    assert a.id == "ensemble[a+b]"
    assert a.prompt_hash != EnsembleJudge([Fixed("a", "adhere"), Fixed("c", "adhere")]).prompt_hash
    assert (
        a.prompt_hash
        != EnsembleJudge([Fixed("a", "adhere"), Fixed("b", "adhere")], tie_breaker=0).prompt_hash
    )
    case, tr = pair
    v = a.judge(case, "listen", tr)
    assert (v.judge, v.prompt_hash) == (a.id, a.prompt_hash)


@pytest.mark.parametrize(
    "kw",
    [
        {"judges": []},
        {"judges": [Fixed("a", "adhere"), Fixed("a", "adhere")]},
        {"judges": [Fixed("a", "adhere")], "tie_breaker": 3},
        {"judges": [Fixed("a", "adhere")], "tie_breaker": "zz"},
        {"judges": ["rules"]},
    ],
)
def test_bad_ensembles_are_config_errors(kw):
    with pytest.raises(ConfigError):
        EnsembleJudge(**kw)


def test_members_from_configs_and_real_judges(fake_api, tmp_path, pair):
    case, tr = pair
    fake_api.push(text(json.dumps({"reasoning": "the model waited", "adherence": "yes"})))
    llm = {
        "_target_": "fdeval.benchmarks.instructfd.judges.llm.LLMJudge",
        "cache_dir": str(tmp_path),
        "base_url": fake_api.base_url,
    }
    ens = EnsembleJudge(
        [{"_target_": "fdeval.benchmarks.instructfd.judges.rules.RulesJudge"}, llm],
        tie_breaker="llm:claude-sonnet-4-6",
    )
    assert isinstance(ens.members[0], RulesJudge) and isinstance(ens.members[1], LLMJudge)
    v = ens.judge(case, "listen", tr)
    assert (
        v.verdict == "adhere"
        and "rules=adhere" in v.reasoning
        and "llm:claude-sonnet-4-6=adhere" in v.reasoning
    )
    assert "the model waited" in v.reasoning


def test_ensemble_config_composes(tmp_path):
    GlobalHydra.instance().clear()
    try:
        with initialize_config_dir(config_dir=str(CONF_DIR), version_base=None):
            cfg = compose("config", overrides=["judge=ensemble", f"out_root={tmp_path}"])
    finally:
        GlobalHydra.instance().clear()
    ens = instantiate(cfg.judge)
    assert isinstance(ens, EnsembleJudge) and [m.id for m in ens.members] == [
        "rules",
        "llm:claude-sonnet-4-6",
    ]
    assert ens.tie_breaker is None
