"""The engine's read-side interface (fdeval/engine/review.py) and the step declarations (issue 28):
a label form checks a label by its fields; the generic review and report views every benchmark
gets; each benchmark in fdeval brings its own views; a step declares `uses` and `preflight` and
its stage is checked where it is declared and where it is registered."""

from __future__ import annotations

import inspect

import pytest
from omegaconf import OmegaConf

from fdeval.benchmarks.echochain.benchmark import EchoChain
from fdeval.benchmarks.echochain.review import EchoChainReview
from fdeval.benchmarks.instructfd.benchmark import InstructFD
from fdeval.benchmarks.instructfd.review import InstructFDReport, InstructFDReview
from fdeval.benchmarks.tact.benchmark import Tact
from fdeval.benchmarks.tact.records import TactCaseData
from fdeval.benchmarks.tact.review import TactReview
from fdeval.engine.driver import Tool, pipeline
from fdeval.engine.review import (
    NOTE,
    NO_KEY,
    Field,
    LabelError,
    LabelForm,
    ReportView,
    ReviewView,
    RunView,
    SessionView,
    benchmark_named,
)
from fdeval.engine.steps import STAGES, CaseStep, Result, Step
from fdeval.errors import ConfigError
from fdeval.orchestrator.config import DEFAULT_BARGE_IN_AFTER_S
from fdeval.settings import CONF_DIR
from fdeval.types import TestCase, Turn, plain

FORM = LabelForm(
    "demo",
    (
        Field(("label",), "choice", choices=("yes", "no")),
        Field(("grades", "c.1"), "choice", "c.1", ("pass", "fail"), optional=True),
        Field(("screening", "ok"), "check", "ok", group="screening"),
        Field(("kind",), "select", "kind", ("a", "b"), empty="(none)"),
        Field(("at_s",), "seconds", "at", mark=True),
        NOTE,
    ),
)


def test_a_form_checks_a_label_by_its_fields():
    good = {
        "label": "yes",
        "grades": {"c.1": "fail"},
        "screening": {"ok": True},
        "kind": None,
        "at_s": 1.5,
    }
    assert FORM.check(good) == {**good, "note": ""}
    # an unset optional choice is left out; a text field absent is ''
    assert FORM.check(
        {"label": "no", "screening": {"ok": False}, "kind": "a", "at_s": None, "note": "n"}
    ) == {"label": "no", "screening": {"ok": False}, "kind": "a", "at_s": None, "note": "n"}
    for bad, where in (
        ({**good, "label": "maybe"}, "field label: expected one of yes, no, got 'maybe'"),
        ({**good, "grades": {"c.1": "ok"}}, "field grades.c.1: expected one of pass, fail"),
        ({**good, "grades": {"c9": "pass"}}, "field grades.c9: not a field of this label"),
        ({**good, "screening": "yes"}, "field screening: expected an object"),
        ({**good, "screening": {"ok": 1}}, "field screening.ok: expected true or false, got 1"),
        ({**good, "kind": "c"}, "field kind: expected one of a, b or null, got 'c'"),
        ({**good, "at_s": -1}, "field at_s: expected seconds >= 0 or null, got -1"),
        ({**good, "at_s": True}, "field at_s: expected seconds >= 0 or null"),
        ({**good, "note": 3}, "field note: expected a string"),
        ({**good, "extra": 1}, "field extra: not a field of this label"),
    ):
        with pytest.raises(LabelError, match="^" + where.replace(".", r"\.").replace("(", r"\(")):
            FORM.check(bad)
    # what the page is sent: each field's path, name, type, choices and what to show
    d = FORM.to_dict()
    assert (
        d["kind"] == "demo"
        and d["fields"][1]["path"] == ["grades", "c.1"]
        and d["fields"][4]["mark"] is True
    )
    with pytest.raises(ValueError, match="type 'radio'"):
        Field(("x",), "radio")


def _session(case_id: str = "c0", results: dict | None = None, data=None) -> SessionView:
    return SessionView(
        TestCase(case_id, "conv", "demo", "s", None, (), 0, "1", data),
        None,
        None,
        "usable",
        "",
        None,
        results or {},
    )


def test_the_generic_views():
    view, s = ReviewView(), _session(results={"speech": [Result("c0", "", 1.5)]})
    run = RunView(None, "demo", "m", "m:1", "r", (s,))
    assert view.label_keys(run, s) == [NO_KEY] and not view.blind and view.instruction(s.case) == ""
    form = view.label_form(run, s)
    assert form.kind == "generic" and form.check({"label": "agree"}) == {
        "label": "agree",
        "note": "",
    }
    with pytest.raises(LabelError, match="field key: 'x' is not a label key of case c0 \\(case\\)"):
        view.check_key(run, s, "x")
    assert (
        view.validation([]) is None and view.human_study() is None and view.sections(run, s) == []
    )
    assert (
        run.review().label_form(run, s) == form
    )  # a view without a benchmark object: the generic one
    assert ReportView().cross_report([], None, {}) is None and ReportView().settings({"a": 1}) == {
        "a": 1
    }


def test_each_benchmark_brings_its_views():
    assert (
        type(InstructFD().review()) is InstructFDReview
        and type(InstructFD().report()) is InstructFDReport
    )
    assert type(Tact().review()) is TactReview and type(Tact().report()) is ReportView
    assert type(EchoChain().review()) is EchoChainReview and EchoChain().review().blind
    # built as a reader builds a benchmark it has no run folder of (the study of a data folder)
    bench = benchmark_named("instructfd")
    assert bench.review().human_study().STEP_S == 2.0
    with pytest.raises(ConfigError, match="report.ci_method"):
        InstructFDReport().settings({"ci_method": "jackknife"})
    with pytest.raises(Exception, match="nosuch"):
        benchmark_named("nosuch")


def test_the_benchmarks_forms_keep_their_fields():
    keys = lambda form: [f.name for f in form.fields]  # noqa: E731
    turns = tuple(Turn("t0", i, f"t{i}", "take-turn", f"a{i}.wav", "hi", (), 1.0) for i in range(2))
    tact = SessionView(
        TestCase("t0", "e", "tact", "s", None, turns, 0, "1", TactCaseData(0.8, 2)),
        None,
        None,
        "usable",
        "",
        None,
        {},
    )
    (section,) = TactReview().sections(None, tact)
    assert section.title == "Decision point" and section.text.startswith(
        "0.80 s after the start of the last user turn"
    )
    assert keys(InstructFDReview().label_form(None, None)) == ["label", "note"]
    assert keys(TactReview().label_form(None, None)) == ["onset", "onset_s", "note"]
    ec = EchoChainReview().form([{"criterion_id": "c1", "text": "t"}], "automatic: none")
    assert (
        keys(ec)
        == [
            "screening.coherent",
            "screening.naturalistic",
            "screening.audio_quality",
            "screening.accepted",
            "grades.c1",
            "taxonomy",
            "screening.note",
        ]
        and ec.audit
    )


class _Probe(CaseStep):
    name, stage, folder = "probe", "judge", "probe"

    def make(self, run, unit):
        return {}


def test_a_step_declares_uses_and_preflight():
    s = _Probe()
    assert s.uses == () and s.preflight(None, {"probe"}) is None


def test_a_bad_stage_is_one_line_listing_the_stages():
    valid = ", ".join(STAGES)
    with pytest.raises(
        ConfigError, match=f"^step oops: stage 'judging' is not a stage; valid: {valid}$"
    ):

        class _Bad(Step):  # noqa: F841 - refused where it is declared
            name, stage = "oops", "judging"

    class _Later(_Probe):  # a stage set on the instance is checked where the benchmark registers it
        def __init__(self):
            self.stage = "scoring"

    class _Bench:
        name = "demo"

        def steps(self):
            return [_Later()]

        def metrics(self):
            return []

    with pytest.raises(
        ConfigError, match=f"^step probe: stage 'scoring' is not a stage; valid: {valid}$"
    ):
        pipeline(_Bench())
    assert (
        Tool("peek", lambda run: None).stage == ""
    )  # a tool (status, plan) has none: selected by name


def test_plain_is_the_one_converter_of_config_values():
    node = OmegaConf.create({"a": {"b": [1, "${x}"]}, "x": 2})
    assert plain(node.a) == {"b": [1, 2]} and plain(node.a.b) == [1, 2]
    d = {"k": [1]}
    assert (
        plain(d) is d and plain(None) is None
    )  # kept as given (it may hold what cannot be copied) ...
    p = plain(d, copy=True)  # ... or copied, for a caller that changes it
    p["k"].append(2)
    assert d == {"k": [1]}


def test_one_barge_in_default():
    """The barge-in delay a turn gets when nothing says otherwise has one source
    (fdeval.orchestrator.config.DEFAULT_BARGE_IN_AFTER_S): the benchmarks' constructors default to
    it, their YAML restates it (a key the command line can set), and the human study's stimuli and
    the turn manager place an interjection without a delay of its own by it (tests/review/test_study.py)."""
    for cls, name in ((EchoChain, "echochain"), (InstructFD, "instructfd")):
        assert (
            inspect.signature(cls).parameters["barge_in_after_s"].default
            == DEFAULT_BARGE_IN_AFTER_S
        )
        assert (
            OmegaConf.load(CONF_DIR / "benchmark" / f"{name}.yaml").barge_in_after_s
            == DEFAULT_BARGE_IN_AFTER_S
        )
