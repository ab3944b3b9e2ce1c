"""TACT's composite metric on hand-written judged runs: median-of-3 selection, tables, provenance; posteriors.

The metric's tables are computed from judged files written here (`score_tables`, what the
`tact_composite` metric runs on the engine's done files); that the engine hands it exactly the
current files is the executor's business (tests/engine)."""

from __future__ import annotations

import csv
import json
import math
from types import SimpleNamespace

import numpy as np
import pytest
from omegaconf import OmegaConf

from fdeval.benchmarks.tact.benchmark import METRIC_VERSION, Tact
from fdeval.benchmarks.tact.composite import episode_scores
from fdeval.benchmarks.tact.episodes import episode_files
from fdeval.benchmarks.tact.synthetic import generate_synthetic
from fdeval.errors import ConfigError
from fdeval.benchmarks.tact.report import score_tables


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    root = tmp_path_factory.mktemp("tact_data")
    generate_synthetic(root, 8, seed=0)
    return root


def make_ctx(bench, data, run_dir):
    # a stand-in for the run: every session recorded
    return SimpleNamespace(
        run_dir=run_dir,
        data_dir=data,
        cases=bench.load(data),
        seed=0,
        model_id="fake:abc",
        cfg=OmegaConf.create({"model": {"name": "fake"}}),
        run_id="r0",
    )


def score(bench, ctx):
    """The metric on the judged files there are (the engine checks they are all there and current)."""
    judged = {
        c.case_id: json.loads((ctx.run_dir / "judged" / f"{c.case_id}.json").read_text())
        for c in ctx.cases
    }
    return score_tables(
        bench,
        judged,
        {"failed": [], "invalid": []},
        system="fake",
        seed=ctx.seed,
        model_id=ctx.model_id,
        run_id=ctx.run_id,
        data_dir=ctx.data_dir,
        scores_dir=ctx.run_dir / "scores",
    )


def write_judged(bench, ctx, onsets):
    """onsets[episode_id] = (r0, r1, r2); durations 1.5 s; no overlaps."""
    q, info = bench.posteriors(ctx.data_dir)
    eps = {e.episode_id: e for e in bench.episodes(ctx.data_dir)}
    for c in ctx.cases:
        eid, r = c.conversation_id, int(c.case_id[-1])
        y = onsets[eid][r]
        e = eps[eid]
        d = {
            "case_id": c.case_id,
            "episode_id": eid,
            "repeat": r,
            "category": e.category,
            "context_bucket": e.context_bucket,
            "posterior": list(q[eid]),
            "onset_s": None if math.isnan(y) else y,
            "duration_s": None if math.isnan(y) else 1.5,
            "overlaps": [],
            "slices": dict(e.slices),
        }
        (ctx.run_dir / "judged").mkdir(parents=True, exist_ok=True)
        (ctx.run_dir / "judged" / f"{c.case_id}.json").write_text(json.dumps(d))


def test_keeps_the_median_scoring_run_and_writes_the_tables(data, tmp_path):
    bench = Tact(n_episodes=8, n_resamples=1000)
    ctx = make_ctx(bench, data, tmp_path)
    ids = sorted({c.conversation_id for c in ctx.cases})
    onsets = {eid: (0.3, math.nan, 2.0) if i % 2 else (4.5, 0.2, -1.0) for i, eid in enumerate(ids)}
    write_judged(bench, ctx, onsets)
    score(bench, ctx)
    rows = list(csv.DictReader((tmp_path / "scores" / "tact_episodes.csv").open()))
    assert [r["episode_id"] for r in rows] == ids
    for r in rows:
        comps = [float(r[f"composite_r{k}"]) for k in range(3)]
        kept = int(r["kept_repeat"])
        assert comps[kept] == pytest.approx(sorted(comps)[1])  # the median of three
        assert float(r["composite"]) == pytest.approx(comps[kept])
        y = onsets[r["episode_id"]][kept]
        assert (r["onset_s"] == "" and math.isnan(y)) or float(r["onset_s"]) == pytest.approx(y)
        assert (
            r["model_id"] == "fake:abc"
            and r["metric_version"] == METRIC_VERSION
            and r["seed"] == "0"
        )
    table = list(csv.DictReader((tmp_path / "scores" / "tact_composite.csv").open()))
    fake = {r["score"]: r for r in table if r["system"] == "fake"}
    assert list(fake) == [
        "S",
        "pause_handling",
        "backchanneling",
        "smooth_turn_taking",
        "user_interruption",
        "S_T (population)",
        "S_L (population)",
    ]
    s = fake["S"]
    assert (
        float(s["ci_low"]) <= float(s["estimate"]) <= float(s["ci_high"])
        and s["n_resamples"] == "1000"
    )
    assert (
        s["benchmark"] == "tact"
        and s["benchmark_version"] == bench.version
        and s["posterior_source"] == "annotators"
    )
    st = fake["S_T (population)"]  # the proper score, with its BCa interval
    assert (
        float(st["ci_low"]) <= float(st["estimate"]) <= float(st["ci_high"])
        and st["n_resamples"] == "1000"
    )
    assert fake["S_L (population)"]["ci_low"] == "" and fake["S_L (population)"]["estimate"] != ""
    systems = list(dict.fromkeys(r["system"] for r in table))
    assert systems == ["fake", "human (in-sample)", "human (held-out, 5-fold)"]
    human = {(r["system"], r["score"]): r for r in table if r["system"].startswith("human")}
    assert float(human[("human (in-sample)", "S_L (population)")]["estimate"]) == pytest.approx(1.0)
    assert float(human[("human (held-out, 5-fold)", "S_L (population)")]["estimate"]) < 1.0
    t1 = list(csv.DictReader((tmp_path / "scores" / "tact_table1.csv").open()))
    assert [r["system"] for r in t1] == systems
    assert all(0 <= float(r["binary_v1"]) <= 1 and r["latency_n"] != "" for r in t1)
    assert "| fake |" in (tmp_path / "scores" / "tact_table1.md").read_text()
    cells = list(csv.DictReader((tmp_path / "scores" / "tact_intents.csv").open()))
    assert {r["system"] for r in cells} == set(systems) and {r["category"] for r in cells} >= {
        "all"
    }
    assert (tmp_path / "scores" / "tact_intents.png").read_bytes().startswith(b"\x89PNG")
    # the categories average to S
    cats = [float(fake[c]["estimate"]) for c in list(fake)[1:5]]
    assert float(s["estimate"]) == pytest.approx(np.mean(cats), abs=2e-6)
    assert any(
        r["system"].startswith("human") for r in table
    )  # synthetic episodes carry continuations
    md = (tmp_path / "scores" / "tact_composite.md").read_text()
    assert md.startswith("# TACT composite") and "| fake | S |" in md and "model_id: fake:abc" in md
    slices = list(csv.DictReader((tmp_path / "scores" / "tact_slices.csv").open()))
    assert {r["slice"] for r in slices} == {
        "gender",
        "age_band",
        "l1_region",
        "snr",
        "rate_tercile",
    }
    assert [s for s in dict.fromkeys(r["system"] for r in slices)] == systems  # human rows too
    # a rerun gives the same bytes and leaves the files alone
    before = {p.name: p.stat().st_mtime_ns for p in (tmp_path / "scores").iterdir()}
    score(bench, ctx)
    assert {p.name: p.stat().st_mtime_ns for p in (tmp_path / "scores").iterdir()} == before


def test_tied_runs_keep_the_middle_repeat(data, tmp_path):
    """Equal composites sort stably in repeat order, so the middle repeat is the median."""
    bench = Tact(n_episodes=8, n_resamples=200)
    ctx = make_ctx(bench, data, tmp_path)
    write_judged(bench, ctx, {c.conversation_id: (0.4, 0.4, 0.4) for c in ctx.cases})
    score(bench, ctx)
    rows = list(csv.DictReader((tmp_path / "scores" / "tact_episodes.csv").open()))
    assert {r["kept_repeat"] for r in rows} == {"1"}


def test_a_skipped_session_leaves_its_episode_out(data, tmp_path):
    """An episode is scored on all of its runs or not at all."""
    bench = Tact(n_episodes=8, n_resamples=200)
    ctx = make_ctx(bench, data, tmp_path)
    write_judged(bench, ctx, {c.conversation_id: (0.4, 0.5, 0.6) for c in ctx.cases})
    judged = {
        c.case_id: json.loads((tmp_path / "judged" / f"{c.case_id}.json").read_text())
        for c in ctx.cases
    }
    gone = ctx.cases[0]
    del judged[gone.case_id]
    score_tables(
        bench,
        judged,
        {"failed": [gone.case_id], "invalid": []},
        system="fake",
        seed=0,
        model_id="fake:abc",
        run_id="r0",
        data_dir=data,
        scores_dir=tmp_path / "scores",
    )
    rows = list(csv.DictReader((tmp_path / "scores" / "tact_episodes.csv").open()))
    assert gone.conversation_id not in {r["episode_id"] for r in rows} and len(rows) == 7
    assert {r["episodes_left_out"] for r in rows} == {"1"}


def test_posteriors_annotator_only_and_fused(data, tmp_path):
    bench = Tact(n_episodes=8)
    q, info = bench.posteriors(data)
    e = bench.episodes(data)[0]
    counts = np.array(
        [e.annotations.labels.count(z) for z in ("ans", "ref", "rhe", "hold", "bck", "abn")]
    )
    np.testing.assert_allclose(q[e.episode_id], counts / counts.sum())
    assert info == {"posterior_source": "annotators"}
    with pytest.raises(ConfigError, match="have no judge_logits"):
        Tact(posterior="fused").posteriors(data)
    # give every episode judge logits (a copy of the data), one of them in the dev split
    copy = tmp_path / "data"
    copy.mkdir()
    (copy / "audio").symlink_to(data / "audio")
    for p in episode_files(data):
        d = json.loads(p.read_text())
        d["judge_logits"] = [
            3.0 if z == d["meta"]["true_intent"] else 0.0
            for z in ("ans", "ref", "rhe", "hold", "bck", "abn")
        ]
        d["split"] = "dev" if d["episode_id"].endswith("0000") else "test"
        (copy / "episodes").mkdir(parents=True, exist_ok=True)
        (copy / "episodes" / p.name).write_text(json.dumps(d))
    fused = Tact(posterior="fused", judge_weight=0.3)
    fq, finfo = fused.posteriors(copy)
    assert (
        finfo["posterior_source"] == "fused"
        and finfo["temperature_fit_on"] == "dev"
        and finfo["temperature"] > 0
    )
    row = fq[e.episode_id]
    assert row.sum() == pytest.approx(1.0) and np.all(row > 0)  # the judge gives full support
    assert row @ np.ones(6) == pytest.approx(1.0)
    assert np.all(row >= 0.7 * counts / counts.sum() - 1e-12)  # annotators keep 70% of the say


def test_config_errors_are_one_line():
    for kw, msg in [
        ({"source": "web"}, "benchmark.source: unknown source"),
        ({"n_episodes": 0}, "benchmark.n_episodes: must be a positive integer"),
        ({"source": "import"}, "benchmark.corpus: an annotation JSONL is required"),
        ({"posterior": "llm"}, "benchmark.posterior: unknown posterior"),
        ({"judge_weight": 2}, "benchmark.judge_weight: must be in [0, 1]"),
        ({"repeats": 0}, "benchmark.repeats: must be a positive integer"),
        ({"n_resamples": 10}, "benchmark.n_resamples: must be an integer >= 100"),
    ]:
        with pytest.raises(ConfigError, match=msg.replace("[", r"\[").replace("]", r"\]")):
            Tact(**kw)


def test_composite_of_a_perfectly_timed_system_beats_an_eager_one(data, tmp_path):
    """Sanity: onsets at each episode's per-episode optimum score higher than instant answers everywhere."""
    bench = Tact(n_episodes=8, n_resamples=200)
    ctx = make_ctx(bench, data, tmp_path)
    q, _ = bench.posteriors(data)
    from fdeval.benchmarks.tact.scoring import EpisodeScoreInput

    eps = bench.episodes(data)
    grid = np.linspace(-2, 5, 141)
    best = {}
    for e in eps:
        cand = [math.nan, *grid]
        inputs = [
            EpisodeScoreInput(e.episode_id, e.category, tuple(q[e.episode_id]), y) for y in cand
        ]
        s = episode_scores(inputs).timing
        best[e.episode_id] = cand[int(np.argmax(s))]
    write_judged(bench, ctx, {k: (v, v, v) for k, v in best.items()})
    score(bench, ctx)
    good = {
        r["score"]: float(r["estimate"] or "nan")
        for r in csv.DictReader((tmp_path / "scores" / "tact_composite.csv").open())
        if r["system"] == "fake"
    }
    eager_dir = tmp_path / "eager"
    ctx2 = make_ctx(bench, data, eager_dir)
    write_judged(bench, ctx2, {e.episode_id: (0.2, 0.2, 0.2) for e in eps})
    score(bench, ctx2)
    eager = {
        r["score"]: float(r["estimate"] or "nan")
        for r in csv.DictReader((eager_dir / "scores" / "tact_composite.csv").open())
        if r["system"] == "fake"
    }
    assert (
        good["smooth_turn_taking"] >= eager["smooth_turn_taking"]
        and good["pause_handling"] > eager["pause_handling"]
    )
