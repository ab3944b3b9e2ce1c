"""Slurm tasks hold only the keys their array's steps read (issue 24).

On the local Slurm: one launch with a random value planted in every credential variable fdeval
may meet, plus an unrelated secret-looking one and a plain one. The model is the reference agent
declaring that its sessions read GEMINI_API_KEY (as Gemini's adapter does), the judge the LLM judge
on the local Messages stand-in. While the arrays run, the test reads, from outside, the environment
every process of every task was started with (/proc/<pid>/environ of the pids `scontrol listpids`
gives, and their children): the run array holds GEMINI_API_KEY and no other key, the post
(transcribe+judge) array ANTHROPIC_API_KEY and no other, and the plain variable reaches both.
Each array's `--export` list in submitit's submission file names exactly those keys (the score
job none), and no planted value is in any file of the run (submission files, pickles, logs).
The rule itself (`array_keys`, `export_names`, the checks) is tested without Slurm.
"""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys
import threading
from pathlib import Path
from types import SimpleNamespace

import pytest
from faults.observe import descendants, leaks
from helpers.fake_messages_server import FakeMessagesServer, slow, text
from omegaconf import OmegaConf
from test_settings import compose_cfg
from test_slurm import REALTIME, SMALL

from fdeval.cluster import slurm
from fdeval.errors import ConfigError

CASE = "benchmark.cases=[fresh_pasta_stop__acknowledge]"
YES = json.dumps({"reasoning": "Step 5: the model followed the instruction.", "adherence": "yes"})
PLANTED = (
    "ANTHROPIC_API_KEY",
    "OPENAI_API_KEY",
    "GEMINI_API_KEY",
    "GOOGLE_API_KEY",
    "LAB_DB_PASSWORD",
)
PLAIN = "FDEVAL_SLURM_ENV_PLAIN"  # not a secret: every task must get it, as it gets PATH or HF_HOME
# what each array may hold of the planted keys: the model's declared key, the judge's key
ALLOWED = {"run": {"GEMINI_API_KEY"}, "post": {"ANTHROPIC_API_KEY"}, "score": set()}
KEYED_MODEL = '''
from fdeval.models.reference import ReferenceAgent


class KeyedReference(ReferenceAgent):
    """The reference agent, declaring that its sessions read GEMINI_API_KEY (as Gemini's do)."""

    env_keys = ("GEMINI_API_KEY",)
'''


class TaskWatch:
    """Samples, every `every_s`, the command line and start environment of every process of every
    running task of the arrays in `<run>/slurm/jobs.json`, keyed by phase."""

    def __init__(self, run_root: Path, every_s: float = 0.1):
        self.run_root, self.every_s = run_root, every_s
        self.seen: dict[str, dict[int, tuple[list[str], dict[str, str]]]] = {p: {} for p in ALLOWED}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="task-watch", daemon=True)
        self._thread.start()

    def _phases(self) -> dict[str, str]:
        files = list(self.run_root.glob("*/slurm/jobs.json"))
        return {j["job_id"]: j["phase"] for j in json.loads(files[0].read_text())} if files else {}

    def _loop(self) -> None:
        phases: dict[str, str] = {}
        while not self._stop.is_set():
            phases = phases or self._phases()
            if phases:
                out = subprocess.run(
                    ["squeue", "-h", "-j", ",".join(phases), "-o", "%A %F %T"],
                    capture_output=True,
                    text=True,
                ).stdout
                for raw, array, state in (
                    line.split() for line in out.splitlines() if line.strip()
                ):
                    if state == "RUNNING":
                        self._sample(phases[array], raw)
            self._stop.wait(self.every_s)

    def _sample(self, phase: str, raw_job: str) -> None:
        rows = subprocess.run(
            ["scontrol", "listpids", raw_job], capture_output=True, text=True
        ).stdout
        pids = [
            int(r.split()[0]) for r in rows.splitlines()[1:] if r.split() and r.split()[0].isdigit()
        ]
        for pid in {p for top in pids for p in (top, *descendants(top))}:
            try:
                cmd = [
                    c.decode(errors="replace")
                    for c in Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
                    if c
                ]
                env = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
            except OSError:  # gone already
                continue
            if cmd:  # (a zombie shows none)
                self.seen[phase][pid] = (
                    cmd,
                    dict(e.decode(errors="replace").partition("=")[::2] for e in env if e),
                )

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=30)


def _export_names(submission: Path) -> set[str]:
    (line,) = [
        ln for ln in submission.read_text().splitlines() if ln.startswith("#SBATCH --export=")
    ]
    return set(line.split("=", 1)[1].strip("'").split(","))


@pytest.mark.slurm
def test_each_array_task_holds_only_the_keys_its_steps_read(tmp_path, local_slurm):
    keys = {name: f"plant-{name.lower()}-{secrets.token_hex(16)}" for name in PLANTED}
    plain = f"plain-{secrets.token_hex(8)}"
    (tmp_path / "keyed_model.py").write_text(KEYED_MODEL)
    env = {
        k: v for k, v in os.environ.items() if not k.startswith("ANTHROPIC_")
    }  # the SDK's own settings too
    path = os.pathsep.join(
        filter(None, [str(tmp_path), env.get("PYTHONPATH")])
    )  # keyed_model, here and in the tasks
    env.update(keys, **{PLAIN: plain, "PYTHONPATH": path})
    with FakeMessagesServer() as judge:
        # each answer takes 3 s: the post task lives long enough to be read from outside
        judge.responder = lambda body: slow(3.0, text(YES))
        cmd = [
            sys.executable,
            "-m",
            "fdeval.launch",
            f"out_root={tmp_path / 'outputs'}",
            "progress=false",
            "launcher=slurm",
            "launcher.wait=true",
            *SMALL,
            CASE,
            *REALTIME,
            "model._target_=keyed_model.KeyedReference",
            "judge=llm",
            f"judge.base_url={judge.base_url}",
        ]
        proc = subprocess.Popen(
            cmd, cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        watch = TaskWatch(tmp_path / "outputs" / "instructfd" / "reference")
        try:
            stdout, stderr = proc.communicate(timeout=600)
        finally:
            watch.stop()
            if proc.poll() is None:
                proc.kill()
    assert proc.returncode == 0, f"exit {proc.returncode}\n{stdout[-3000:]}\n{stderr[-3000:]}"
    (run,) = (tmp_path / "outputs" / "instructfd" / "reference").iterdir()
    assert list((run / "verdicts").rglob("*.json")) and (run / "scores").is_dir()
    # the judge's key reached the post array: its requests carried it
    sent = [
        r.headers.get("x-api-key") or r.headers.get("authorization", "")
        for r in judge.message_requests
    ]
    assert sent and all(keys["ANTHROPIC_API_KEY"] in s for s in sent)

    for phase in ("run", "post"):
        procs = watch.seen[phase]
        tasks = [e for c, e in procs.values() if any("submitit.core._submit" in part for part in c)]
        assert tasks, f"no {phase} task was seen running: {procs}"
        for name in ALLOWED[phase]:
            assert all(e.get(name) == keys[name] for e in tasks), (
                f"{phase} task lacks {name}, which its steps read"
            )
        assert all(e.get(PLAIN) == plain for e in tasks), (
            f"{phase} task lacks the plain variable {PLAIN}"
        )
    for phase, procs in watch.seen.items():  # every process of every task seen, children included
        held = {
            (" ".join(c)[:100], name)
            for c, e in procs.values()
            for name, v in keys.items()
            if name not in ALLOWED[phase] and (name in e or v in e.values())
        }
        assert not held, f"{phase} array: {sorted(held)}"

    jobs = json.loads((run / "slurm" / "jobs.json").read_text())
    assert [j["phase"] for j in jobs] == ["run", "post", "score"]
    for j in jobs:
        submissions = list((run / "slurm").glob(f"{j['job_id']}*/*_submission.sh"))
        assert submissions, j
        for names in map(_export_names, submissions):
            assert names & set(PLANTED) == ALLOWED[j["phase"]], (
                j["phase"],
                sorted(names & set(PLANTED)),
            )
            assert PLAIN in names and "PATH" in names
    assert leaks(tmp_path, keys) == []
    assert not [name for name, v in keys.items() if v in stdout + stderr]


def _keys(*overrides: str) -> dict[str, tuple[str, ...]]:
    cfg = compose_cfg("launcher=slurm", *overrides)
    return {
        placement: slurm.array_keys(cfg, placement)
        for placement in ("gpu_array", "cpu_array", "cpu_job")
    }


ANTHROPIC = ("ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL")


@pytest.mark.parametrize(
    "overrides, run, post",
    [
        ((), (), ()),
        (("judge=llm",), (), ANTHROPIC),
        (("judge=ensemble",), (), ANTHROPIC),  # its llm member
        (
            ("model=gemini", "judge=llm", "judge.backend=vllm", "judge.model=x"),
            ("GEMINI_API_KEY", "GOOGLE_API_KEY"),
            ("OPENAI_API_KEY",),
        ),
        (
            ("benchmark.text_backend=anthropic",),
            (),
            (),
        ),  # benchmark.llm writes cases: generate runs where the command does
        (
            ("benchmark=echochain", "benchmark.simulator.backend=anthropic"),
            ANTHROPIC,
            ANTHROPIC,
        ),  # a role in the loop
        (("model=moshi", "+model.server.pass_env=[HF_TOKEN]"), ("HF_TOKEN",), ()),
    ],
)
def test_array_keys_are_the_model_and_judge_keys_of_each_array(overrides, run, post):
    assert _keys(*overrides) == {"gpu_array": run, "cpu_array": post, "cpu_job": ()}


def test_export_env_adds_names_to_every_array():
    assert set(_keys("launcher.export_env=[WANDB_API_KEY]").values()) == {("WANDB_API_KEY",)}


def test_llm_server_pass_env_reaches_only_the_arrays_that_start_it():
    server = "launcher.llm_server={command:[vllm,serve,m],arrays:[post],pass_env:[HF_TOKEN]}"
    assert _keys(server) == {"gpu_array": (), "cpu_array": ("HF_TOKEN",), "cpu_job": ()}


def test_export_names_are_every_variable_but_the_secrets_not_kept():
    environ = {
        "PATH": "/bin",
        "HF_HOME": "/hf",
        "https_proxy": "http://p",
        "OMP_NUM_THREADS": "4",
        "BASH_FUNC_module%%": "() { :; }",
        "ANTHROPIC_API_KEY": "a",
        "OPENAI_API_KEY": "o",
        "LAB_DB_PASSWORD": "p",
        "HF_TOKEN": "t",
        "SLURM_CONF": "/etc/slurm.conf",
        "A,B": "1",
    }
    assert slurm.export_names(("ANTHROPIC_API_KEY", "GEMINI_API_KEY"), environ) == [
        "ANTHROPIC_API_KEY",
        "BASH_FUNC_module%%",
        "HF_HOME",
        "OMP_NUM_THREADS",
        "PATH",
        "https_proxy",
    ]


@pytest.mark.parametrize(
    "override, message",
    [
        ("+launcher.sbatch_extra.export=ALL", "launcher.sbatch_extra.export: "),
        ("+launcher.sbatch_extra.get-user-env=true", "launcher.sbatch_extra.get-user-env: "),
        (
            "launcher.export_env=['A,B']",
            "launcher.export_env: a list of environment variable names",
        ),
        (
            "launcher.llm_server={command:[vllm],arrays:[gpu]}",
            "launcher.llm_server.arrays: a non-empty list",
        ),
    ],
)
def test_settings_that_would_pass_other_variables_are_refused(override, message):
    with pytest.raises(ConfigError, match="^" + message.replace(".", r"\.")):
        slurm.check(compose_cfg("launcher=slurm", override).launcher)


def test_sbatch_export_of_the_shell_is_withheld_while_submitting(monkeypatch):
    # sbatch lets $SBATCH_EXPORT override the script's --export
    monkeypatch.setenv("SBATCH_EXPORT", "ALL")
    with slurm._sbatch_env():
        assert "SBATCH_EXPORT" not in os.environ
    assert os.environ["SBATCH_EXPORT"] == "ALL"


def test_a_task_drops_the_secrets_it_was_not_given_before_its_steps(monkeypatch):
    """sbatch loads the node's login environment too: a key from there reaches no step or child."""
    for name in ("GEMINI_API_KEY", "ANTHROPIC_API_KEY", "LAB_DB_PASSWORD"):
        monkeypatch.setenv(name, "x")
    seen = {}

    def run_steps(cfg, run_dir, steps, shard):
        seen.update(os.environ)
        return SimpleNamespace(stats={})

    monkeypatch.setattr(slurm, "run_steps", run_steps)
    monkeypatch.setattr(slurm, "_ignore_late_warning", lambda: None)
    slurm.ShardTask(OmegaConf.to_yaml({}), "/nowhere", ("run",), 1, ("GEMINI_API_KEY",))(0)
    assert "GEMINI_API_KEY" in seen and not {"ANTHROPIC_API_KEY", "LAB_DB_PASSWORD"} & set(seen)
    assert (
        os.environ["ANTHROPIC_API_KEY"] == "x"
    )  # restored: the task's own process is done with its steps
