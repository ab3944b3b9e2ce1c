"""Typed settings (fdeval/settings.py): one default per setting, every problem one line naming the key."""

from __future__ import annotations

import shutil
from dataclasses import fields

import pytest
from helpers.launching import run_launch
from hydra import compose, initialize_config_dir
from hydra.core.global_hydra import GlobalHydra
from omegaconf import OmegaConf

from fdeval import launch
from fdeval.engine.driver import prepare
from fdeval.engine.run import Run
from fdeval.errors import ConfigError
from fdeval.orchestrator.session import OrchestratorConfig
from fdeval.settings import (
    CONF_DIR,
    LauncherSettings,
    ModelResources,
    OrchestratorSettings,
    SlurmLauncherSettings,
    check_run_options,
    model_resources,
    orchestrator_settings,
    register,
)

ORCHESTRATOR_KEYS = (
    "clock, sample_rate, silence_s, trailing_silence_s, yield_after_s, barge_in_delay_s, max_session_s, "
    "vad_threshold, vad_min_silence_s, max_pacing_lag_s, max_model_lag_s, "
    "client_processes, client_cpu_s_per_session_s, client_cpu_share, invalid_retries"
)


def compose_cfg(*overrides: str, conf_dir=CONF_DIR):
    GlobalHydra.instance().clear()
    try:
        with initialize_config_dir(config_dir=str(conf_dir), version_base=None):
            return compose("config", overrides=list(overrides))
    finally:
        GlobalHydra.instance().clear()


def test_orchestrator_defaults_come_from_one_place():
    # the YAML only selects the schema: no number there can disagree with the code
    assert set(OmegaConf.load(CONF_DIR / "orchestrator" / "default.yaml")) == {"defaults"}
    cfg = compose_cfg()
    assert list(cfg.orchestrator) == [f.name for f in fields(OrchestratorSettings)]
    # the session's own defaults; 300 s is the session limit runs have always used (the YAML's value)
    assert orchestrator_settings(cfg.orchestrator) == OrchestratorConfig()
    assert cfg.orchestrator.max_session_s == 300.0 and cfg.orchestrator.clock == "auto"


@pytest.mark.parametrize(
    "override,message",
    [
        ("silence_s=-1", "orchestrator.silence_s: must be > 0, got -1"),
        ("trailing_silence_s=-0.5", "orchestrator.trailing_silence_s: must be >= 0, got -0.5"),
        ("yield_after_s=0", "orchestrator.yield_after_s: must be > 0, got 0"),
        ("barge_in_delay_s=-1", "orchestrator.barge_in_delay_s: must be >= 0, got -1"),
        ("max_session_s=inf", "orchestrator.max_session_s: must be > 0, got inf"),
        ("vad_threshold=1", "orchestrator.vad_threshold: must be in (0, 1), got 1"),
        ("vad_min_silence_s=-0.1", "orchestrator.vad_min_silence_s: must be >= 0, got -0.1"),
        (
            "sample_rate=8000",
            "orchestrator.sample_rate: must be 16000 (the rate Silero VAD runs at), got 8000",
        ),
        ("max_pacing_lag_s=0", "orchestrator.max_pacing_lag_s: must be > 0, got 0"),
        ("max_model_lag_s=nan", "orchestrator.max_model_lag_s: must be > 0, got nan"),
        ("invalid_retries=-1", "orchestrator.invalid_retries: must be >= 0, got -1"),
        ("clock=wall", "orchestrator.clock: unknown clock 'wall'; valid: auto, lockstep, realtime"),
    ],
)
def test_an_orchestrator_value_out_of_range_is_one_line_naming_it(override, message):
    cfg = compose_cfg(f"orchestrator.{override}")
    with pytest.raises(ConfigError) as e:
        orchestrator_settings(cfg.orchestrator)
    assert str(e.value) == message


def test_a_plain_node_reads_the_same_as_the_composed_one():
    """A Slurm task rebuilds its config from YAML (no schema); tests pass dicts."""
    cfg = compose_cfg(
        "orchestrator.barge_in_delay_s=2",
        "orchestrator.clock=realtime",
        "orchestrator.silence_s=1.2",
    )
    typed = orchestrator_settings(cfg.orchestrator)
    assert typed.turns.barge_in_delay_s == 2.0 and typed.turns.silence_s == 1.2
    plain = OmegaConf.create(OmegaConf.to_yaml(cfg, resolve=True))
    assert OmegaConf.get_type(plain.orchestrator) is dict
    assert orchestrator_settings(plain.orchestrator) == typed
    assert orchestrator_settings({"barge_in_delay_s": 2, "silence_s": 1.2}) == typed
    with pytest.raises(
        ConfigError, match=r"^orchestrator\.silence_s: expected a number, got 'abc'$"
    ):
        orchestrator_settings({"silence_s": "abc"})
    with pytest.raises(ConfigError) as e:
        orchestrator_settings({"silence": 1.0})
    assert (
        str(e.value)
        == f"unknown key 'orchestrator.silence'; valid keys under 'orchestrator': {ORCHESTRATOR_KEYS}"
    )


@pytest.mark.parametrize(
    "overrides,message",
    [
        (["seed=-1"], "seed: must be a non-negative integer, got -1"),
        (["resume=again"], "resume: unknown mode 'again'; valid: auto, redo"),
        (["launcher.name=k8s"], "launcher.name: unknown launcher 'k8s'; valid: local, slurm"),
        (["launcher.cases_per_task=0"], "launcher.cases_per_task: must be >= 1, got 0"),
        (
            ["launcher=slurm", "launcher.gpus_per_task=-1"],
            "launcher.gpus_per_task: must be >= 0, got -1",
        ),
        (
            ["orchestrator.clock=wall"],
            "orchestrator.clock: unknown clock 'wall'; valid: auto, lockstep, realtime",
        ),
    ],
)
def test_run_options_are_checked_before_any_work(overrides, message):
    with pytest.raises(ConfigError) as e:
        check_run_options(compose_cfg(*overrides))
    assert str(e.value) == message


def test_run_options_come_back_typed_per_launcher():
    run = check_run_options(compose_cfg("seed=3", "resume=redo"))
    assert (run.options.seed, run.options.resume, run.options.progress) == (3, "redo", True)
    assert type(run.launcher) is LauncherSettings and run.launcher.name == "local"
    assert run.orchestrator.max_session_s == 300.0
    site = check_run_options(compose_cfg("launcher=h100x8"))
    assert type(site.launcher) is SlurmLauncherSettings and site.launcher.gpus_per_task == 8
    assert site.launcher.cpu_job["timeout_min"] == 720  # the profile's value over slurm.yaml's
    # a plain config (no schema) is checked by its launcher's name
    plain = OmegaConf.create(OmegaConf.to_yaml(compose_cfg("launcher=slurm"), resolve=True))
    assert type(check_run_options(plain).launcher) is SlurmLauncherSettings


def test_the_ensemble_members_are_the_judge_files_themselves(tmp_path):
    assert "judges" not in OmegaConf.load(CONF_DIR / "judge" / "ensemble.yaml")
    conf = tmp_path / "conf"
    shutil.copytree(CONF_DIR, conf)
    llm = conf / "judge" / "llm.yaml"
    llm.write_text(llm.read_text().replace("max_tokens: 4096", "max_tokens: 1234"))
    register(conf)
    try:
        ens = compose_cfg("judge=ensemble", f"out_root={tmp_path}", conf_dir=conf).judge
        alone = compose_cfg("judge=llm", f"out_root={tmp_path}", conf_dir=conf).judge
        rules = compose_cfg("judge=rules", f"out_root={tmp_path}", conf_dir=conf).judge
    finally:
        register()
    assert ens.judges[1].max_tokens == 1234
    assert [OmegaConf.to_container(j, resolve=True) for j in ens.judges] == [
        OmegaConf.to_container(rules, resolve=True),
        OmegaConf.to_container(alone, resolve=True),
    ]
    assert (
        ens.judges[1].cache_dir == f"{tmp_path}/_cache/llm_judge"
    )  # interpolations still point at the run's


@pytest.mark.parametrize(
    "arg,message",
    [
        (
            "launcher.nope=1",
            "unknown key 'launcher.nope'; valid keys under 'launcher': name, cases_per_task, "
            "gpus_per_task, instances_per_task",
        ),
        (
            "orchestrator.nope=1",
            f"unknown key 'orchestrator.nope'; valid keys under 'orchestrator': {ORCHESTRATOR_KEYS}",
        ),
        (
            "model.nope=1",
            "unknown key 'model.nope'; valid keys under 'model': _target_, name, voice, rate_wpm, "
            "sample_rate, frame_s, vad_threshold, policy_overrides, concurrency, compute_s_per_frame, resources",
        ),
        (
            "nope=1",
            "unknown key 'nope'; valid keys at the top level: model, benchmark, stage, launcher, orchestrator, "
            "tts, asr, judge, report, seed, out_root, run_tag, resume, progress",
        ),
        ("seed=1.5", "seed: expected an integer, got 1.5"),
        ("progress=maybe", "progress: expected true or false, got 'maybe'"),
        (
            "orchestrator.barge_in_delay_s=soon",
            "orchestrator.barge_in_delay_s: expected a number, got 'soon'",
        ),
    ],
)
def test_check_overrides_names_the_key(tmp_path, capsys, arg, message):
    with pytest.raises(SystemExit) as e:
        launch.check_overrides([f"out_root={tmp_path}", arg])
    assert e.value.code == 2 and capsys.readouterr().err == f"fdeval: error: {message}\n"


@pytest.mark.parametrize(
    "arg,message",
    [
        ("orchestrator.silence_s=abc", "orchestrator.silence_s: expected a number, got 'abc'"),
        (
            "judge=ensemble judge.judges.1.temperatur=0",
            "unknown key 'judge.judges[1].temperatur'; valid keys under "
            "'judge.judges[1]': _target_, backend, model, temperature, top_p, seed, max_tokens, cache_dir, base_url, "
            "max_parse_retries, max_retries, timeout_s, max_retry_s, max_unreachable, max_failed_requests",
        ),
    ],
)
def test_a_wrong_type_or_key_on_the_command_line_exits_2_with_one_line(tmp_path, arg, message):
    proc = run_launch([f"out_root={tmp_path / 'outputs'}", *arg.split()], tmp_path, timeout_s=900)
    assert proc.returncode == 2 and proc.stderr == f"fdeval: error: {message}\n", proc.stderr
    assert not (tmp_path / "outputs").exists()  # nothing was made


def test_model_resources_are_typed_and_checked():
    """`model.resources` (what stage=plan sizes a model by) has a schema: every shipped model's
    block reads through it, a missing block is the defaults, a bad value or key is one line naming
    it, and the engine checks it before any work and when it builds the model, instead of dropping it."""
    for f in sorted((CONF_DIR / "model").glob("*.yaml")):
        node = OmegaConf.load(f)
        if "resources" in node:
            assert isinstance(model_resources(node), ModelResources), f.name
    assert model_resources({"name": "m"}) == ModelResources(0.0, True, 1.0, 0.0)
    ref = model_resources(compose_cfg().model)
    assert (ref.gpu_mem_gb, ref.realtime, ref.lockstep_speed) == (0, False, 100)
    for res, message in (
        ({"gpu_mem_gb": -1}, "model.resources.gpu_mem_gb: must be >= 0, got -1"),
        ({"lockstep_speed": 0}, "model.resources.lockstep_speed: must be > 0, got 0"),
        ({"realtime": "sometimes"}, "model.resources.realtime: expected true or false"),
        ({"gpu_mem": 8}, "unknown key 'model.resources.gpu_mem'"),
    ):
        with pytest.raises(ConfigError, match=message):
            model_resources({"resources": res})
    cfg = compose_cfg("out_root=/nonexistent/never-written", "+model.resources.startup=5")
    with pytest.raises(ConfigError, match="unknown key 'model.resources.startup'"):
        prepare(cfg, "t")
    with pytest.raises(ConfigError, match="unknown key 'model.resources.startup'"):
        Run(cfg, CONF_DIR, CONF_DIR).component("model")
