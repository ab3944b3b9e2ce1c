"""First-use friction of the model adapters (issue 9, item 11), each as a user meets it.

- A network adapter whose client package is missing stops `python -m fdeval.launch` at once:
  exit 2, one line naming the model and the install command, no traceback, no session written.
  The missing package is SIMULATED: a sitecustomize on PYTHONPATH sets `sys.modules[name] = None`,
  which makes `import name` raise ImportError exactly as an absent package does (the real
  packages are installed here, and uninstalling them would break the other tests).
- FDEVAL_MOSHI_VENV naming a folder fdeval did not build is refused and left untouched; a venv
  fdeval built (its marker) is reused as it is.
- Lockstep Moshi with `model.hf_repo=null` loads local files with the hub unreachable (offline,
  empty cache); a missing required file is one line naming the key (moshi venv; skipped with the
  reason where it cannot be built).
- `model.port` alone means a server someone else runs on 127.0.0.1, whatever `model.server` says,
  and its identity claims no checkpoint or decoding (unless `model.checkpoint_label`).
- A model that cannot load fails every later session at once with the same error.
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from helpers.launching import run_launch
from helpers.moshi_fixtures import stream_tone
from fake_servers_common import free_port, model_from_yaml

from fdeval.models.base import NOT_STARTED
from fdeval.models.moshi import Moshi
from fdeval.models.moshi_env import (
    MOSHI_DEPS,
    MOSHI_VERSION,
    STAMP,
    TORCH,
    NotOurFolderError,
    ensure_moshi_venv,
)
from fdeval.models.servers import ServerError

HERE = Path(__file__).resolve().parent
CASE = "fresh_pasta_stop__none"
KEYS = ("GEMINI_API_KEY", "GOOGLE_API_KEY", "ANTHROPIC_API_KEY")


def launch(
    out_root: Path,
    *args: str,
    python: str = sys.executable,
    env: dict | None = None,
    cwd: Path | None = None,
) -> subprocess.CompletedProcess:
    env = {**{k: v for k, v in os.environ.items() if k not in KEYS}, **(env or {})}
    if os.environ.get("PYTHONPATH") and env.get("PYTHONPATH") != os.environ["PYTHONPATH"]:
        env["PYTHONPATH"] += os.pathsep + os.environ["PYTHONPATH"]
    return run_launch(
        [f"out_root={out_root}", "progress=false", f"benchmark.cases=[{CASE}]", *args],
        cwd or out_root.parent,
        timeout_s=900,
        env=env,
        python=python,
    )


def written(out_root: Path, model: str) -> list[str]:
    """Sessions and per-case error records under a model's run folders."""
    d = out_root / "instructfd" / model
    return sorted(
        str(p.relative_to(d))
        for p in d.rglob("*")
        if p.suffix in (".h5", ".wav") or p.name.endswith(".error.json")
    )


def one_line_error(proc: subprocess.CompletedProcess) -> str:
    assert proc.returncode == 2, (proc.returncode, proc.stdout[-2000:], proc.stderr[-3000:])
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in proc.stdout + proc.stderr, proc.stderr[-3000:]
    assert lines[0].startswith("fdeval: error: ")
    return lines[0].removeprefix("fdeval: error: ")


@pytest.fixture(scope="module")
def cases_root(tmp_path_factory) -> Path:
    """An out_root holding the one generated case the run stage below would play."""
    out = tmp_path_factory.mktemp("friction") / "outputs"
    proc = launch(out, "model=reference", "stage=generate")
    assert proc.returncode == 0, proc.stderr[-3000:]
    return out


# -- 1. missing client packages --------------------------------------------------------------
@pytest.mark.parametrize(
    "model, hidden, needs",
    [
        ("moshi", "sphn", "sphn and aiohttp: pip install 'fdeval[moshi-client]'"),
        ("personaplex", "aiohttp", "sphn and aiohttp: pip install 'fdeval[moshi-client]'"),
        ("minicpmo", "aiohttp", "aiohttp: pip install 'fdeval[minicpmo]'"),
        ("freezeomni", "socketio", "python-socketio and aiohttp: pip install 'fdeval[freezeomni]'"),
        ("funaudiochat", "sphn", "aiohttp and sphn: pip install 'fdeval[funaudiochat]'"),
        ("gemini", "google.genai", "google-genai: pip install 'fdeval[gemini]'"),
    ],
)
def test_missing_client_package_stops_the_run_before_any_case(
    cases_root, tmp_path, model, hidden, needs
):
    site = tmp_path / "hide"
    site.mkdir()
    # simulates the package not being installed: `import <hidden>` raises ImportError
    (site / "sitecustomize.py").write_text(f"import sys\nsys.modules[{hidden!r}] = None\n")
    t0 = time.monotonic()
    proc = launch(cases_root, f"model={model}", "stage=run", env={"PYTHONPATH": str(site)})
    msg = one_line_error(proc)
    assert msg.startswith(f"model={model} needs {needs} (import {hidden}:"), msg
    assert "session-seconds per wall-second" not in proc.stdout and "relaunch" not in proc.stderr
    assert written(cases_root, model) == []
    print(f"{model} without {hidden}: exit 2 in {time.monotonic() - t0:.1f} s: {msg}")


@pytest.mark.parametrize("model", ["moshi_lockstep", "personaplex_lockstep"])
def test_lockstep_outside_the_moshi_venv_is_one_line(cases_root, model):
    if importlib.util.find_spec("moshi") is not None:
        pytest.skip("moshi is importable in this venv")
    msg = one_line_error(launch(cases_root, f"model={model}", "stage=run"))
    assert msg.startswith(
        f"model={model} needs moshi and torch: it runs inside the moshi venv: "
        "python -m fdeval.models.moshi_env --with-fdeval"
    ), msg
    assert written(cases_root, model) == []


# -- 2. FDEVAL_MOSHI_VENV --------------------------------------------------------------------
def _tree(d: Path) -> dict[str, int]:
    return {str(p.relative_to(d)): p.stat().st_mtime_ns for p in d.rglob("*")}


def test_moshi_venv_never_touches_a_folder_fdeval_did_not_build(tmp_path):
    venv = tmp_path / "my-venv"
    subprocess.run(
        [sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120
    )
    (venv / "my-notes.txt").write_text("mine")
    before = _tree(venv)
    proc = subprocess.run(
        [sys.executable, "-m", "fdeval.models.moshi_env"],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "FDEVAL_MOSHI_VENV": str(venv)},
    )
    msg = one_line_error(proc)
    assert msg.startswith(f"{venv}: an existing folder that fdeval did not build"), msg
    assert _tree(venv) == before and (venv / "my-notes.txt").read_text() == "mine"
    assert not (tmp_path / "my-venv.build.log").exists()  # nothing was run
    # the same from the API, and for a plain folder that is not a venv at all
    other = tmp_path / "data"
    other.mkdir()
    (other / "results.csv").write_text("1,2\n")
    with pytest.raises(NotOurFolderError, match="fdeval never deletes it"):
        ensure_moshi_venv(other)
    assert (other / "results.csv").read_text() == "1,2\n"


def test_moshi_venv_reuses_one_fdeval_built(tmp_path):
    venv = tmp_path / "moshi-venv"
    subprocess.run(
        [sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120
    )
    (venv / STAMP).write_text(
        json.dumps(
            {"built_by": "fdeval", "moshi": MOSHI_VERSION, "torch": TORCH, "deps": MOSHI_DEPS}
        )
    )
    before = _tree(venv)
    assert ensure_moshi_venv(venv) == venv / "bin" / "python"
    assert _tree(venv) == before and not (tmp_path / "moshi-venv.build.log").exists()


# -- 3. lockstep Moshi from local files ------------------------------------------------------
OFFLINE = {
    "HF_HUB_OFFLINE": "1",
    "HF_ENDPOINT": "http://127.0.0.1:9",
}  # with an empty HF_HOME: no hub at all

LOCKSTEP = """
import asyncio, json, sys
import numpy as np
from fdeval.models.lockstep import ModelLoadError
from fdeval.models.moshi_lockstep import MoshiLockstep
args = json.loads(sys.argv[1])
mode = args.pop("mode")
m = MoshiLockstep(batch_size=1, device="cpu", dtype="float32", torch_threads=1, **args)
if mode == "checkpoint":  # what moshi's loader is given, without building the model
    from moshi.models import loaders
    info = m._checkpoint(loaders)
    print(json.dumps([str(info.moshi_weights), str(info.mimi_weights), str(info.tokenizer), info.lm_config]))
    sys.exit()
loads = []
real_load = m._load
m._load = lambda: loads.append(1) or real_load()

async def session():
    async with m.session(None, 0) as s:
        n = 0
        for _ in range(6):
            await s.send(np.zeros(1920, np.float32))
            n += len(await s.receive())
        return n

out = {"errors": [], "events": []}
for _ in range(2):
    try:
        out["events"].append(asyncio.run(session()))
    except ModelLoadError as e:
        out["errors"].append(str(e))
out["loads"], out["identity"] = len(loads), m.identity()
print(json.dumps(out))
"""


def _local_copy(tiny: dict, dest: Path) -> dict:
    """The tiny checkpoint in a folder of its own, its config naming Mimi's config by a relative
    name (as a checkpoint copied off the hub does): moshi's loader with hf_repo='' fetched that."""
    dest.mkdir()
    for key in ("moshi_weight", "mimi_weight", "tokenizer"):
        shutil.copy(tiny[key], dest / Path(tiny[key]).name)
    shutil.copy(Path(tiny["dir"]) / "mimi.json", dest / "mimi.json")
    config = json.loads(Path(tiny["config"]).read_text())
    config["mimi_config_name"] = "mimi.json"
    (dest / "config.json").write_text(json.dumps(config))
    return {
        "config_path": str(dest / "config.json"),
        "moshi_weight": str(dest / Path(tiny["moshi_weight"]).name),
        "mimi_weight": str(dest / Path(tiny["mimi_weight"]).name),
        "tokenizer": str(dest / Path(tiny["tokenizer"]).name),
    }


def _lockstep(py: Path, args: dict, tmp: Path, mode: str = "sessions"):
    env = {**os.environ, **OFFLINE, "HF_HOME": str(tmp / "hf-home")}
    proc = subprocess.run(
        [str(py), "-c", LOCKSTEP, json.dumps({"hf_repo": None, "mode": mode, **args})],
        capture_output=True,
        text=True,
        timeout=600,
        env=env,
        cwd=tmp,
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.mark.slow
def test_lockstep_loads_local_files_without_the_hub(moshi_python, tiny_moshi, tmp_path):
    files = _local_copy(tiny_moshi, tmp_path / "ckpt")
    out = _lockstep(moshi_python, files, tmp_path)
    assert out["errors"] == [] and out["loads"] == 1 and min(out["events"]) > 0
    ident = out["identity"]
    assert ident["hf_repo"] is None and set(ident["files"]) == {
        "config_path",
        "moshi_weight",
        "mimi_weight",
        "tokenizer",
    }
    # no config: Moshi 7B's architecture (lm_config None), every file the local one given
    no_config = {k: v for k, v in files.items() if k != "config_path"}
    assert _lockstep(moshi_python, no_config, tmp_path, mode="checkpoint") == [
        files["moshi_weight"],
        files["mimi_weight"],
        files["tokenizer"],
        None,
    ]


@pytest.mark.slow
@pytest.mark.parametrize(
    "change, key",
    [
        ({"tokenizer": None}, "model.tokenizer: required when model.hf_repo is null"),
        ({"mimi_weight": "/nonexistent/mimi.safetensors"}, "model.mimi_weight: no such file"),
    ],
)
def test_lockstep_missing_local_file_is_one_line(moshi_python, tiny_moshi, cases_root, change, key):
    files = {
        "config_path": tiny_moshi["config"],
        "moshi_weight": tiny_moshi["moshi_weight"],
        "mimi_weight": tiny_moshi["mimi_weight"],
        "tokenizer": tiny_moshi["tokenizer"],
        **change,
    }
    args = [f"model.{k}={'null' if v is None else v}" for k, v in files.items()]
    proc = launch(
        cases_root,
        "model=moshi_lockstep",
        "model.hf_repo=null",
        "model.device=cpu",
        *args,
        "stage=run",
        python=str(moshi_python),
        env=OFFLINE,
    )
    assert one_line_error(proc).startswith(key)
    assert written(cases_root, "moshi_lockstep") == []


@pytest.mark.slow
@pytest.mark.parametrize(
    "change, key",
    [
        ({"voice_prompt_dir": None}, "model.voice_prompt_dir: required when model.hf_repo is null"),
        (
            {"voice_prompt": "NATF9.pt"},
            "model.voice_prompt: no such file: {dir}/NATF9.pt (model.voice_prompt_dir)",
        ),
        ({"moshi_weight": "/nonexistent/model.safetensors"}, "model.moshi_weight: no such file"),
    ],
)
def test_personaplex_lockstep_missing_local_file_is_one_line(
    moshi_python, tiny_personaplex, cases_root, change, key
):
    tiny = tiny_personaplex
    files = {
        "config_path": tiny["config"],
        "moshi_weight": tiny["moshi_weight"],
        "mimi_weight": tiny["mimi_weight"],
        "tokenizer": tiny["tokenizer"],
        "voice_prompt_dir": tiny["voice_prompt_dir"],
        "voice_prompt": tiny["voice_wav"],
        **change,
    }
    args = [f"model.{k}={'null' if v is None else v}" for k, v in files.items()]
    proc = launch(
        cases_root,
        "model=personaplex_lockstep",
        "model.hf_repo=null",
        "model.device=cpu",
        *args,
        "stage=run",
        python=str(moshi_python),
        env=OFFLINE,
    )
    assert one_line_error(proc).startswith(key.format(dir=tiny["voice_prompt_dir"]))
    assert written(cases_root, "personaplex_lockstep") == []


# -- 6. a model that cannot load -------------------------------------------------------------
@pytest.mark.slow
def test_lockstep_load_failure_is_not_retried_per_case(moshi_python, tiny_moshi, tmp_path):
    files = _local_copy(tiny_moshi, tmp_path / "ckpt")
    Path(files["moshi_weight"]).write_bytes(os.urandom(4096))  # weights that do not load
    out = _lockstep(moshi_python, files, tmp_path)
    assert out["loads"] == 1 and out["events"] == [] and len(out["errors"]) == 2
    assert out["errors"][0] == out["errors"][1] and "could not be loaded" in out["errors"][0]
    print(out["errors"][0])


def test_server_that_cannot_start_fails_later_sessions_at_once(tmp_path):
    m = Moshi(
        server={
            "python": sys.executable,
            "command": ["{python}", "-c", "import sys; sys.exit(3)"],
            "start_attempts": 1,
            "startup_timeout_s": 10,
            "log_dir": str(tmp_path),
        },
        hf_repo=None,
        device="cpu",
    )

    async def session():
        async with m.session(None, 0):
            pass

    errors = []
    try:
        for _ in range(3):
            with pytest.raises(ServerError) as e:
                asyncio.run(session())
            errors.append(str(e.value))
    finally:
        m.close()
    assert errors[0] == errors[1] == errors[2] and "did not become healthy" in errors[0]
    # "at once": the later sessions get the first one's error without starting the server again (a
    # start would be logged; a wall-clock bound on the failure measured the machine too)
    assert (tmp_path / "moshi-0.log").read_text().count(
        ": start on "
    ) == 1  # started once, not per session


# -- 4 and 5. model.port: a server someone else runs -----------------------------------------
POOLED = ("moshi", "personaplex", "minicpmo", "freezeomni", "funaudiochat")


@pytest.mark.parametrize("name", POOLED)
def test_port_alone_means_an_external_server_that_claims_nothing(name):
    ext = model_from_yaml(name, port=8998, host=None)  # the yaml's server: block stays as it is
    assert ext.pool is None and ext.concurrency == 1
    ident = ext.identity()
    assert ident["server"] == "external 127.0.0.1:8998"
    assert ident["checkpoint"] == ident["decoding"] == NOT_STARTED
    assert not {"hf_repo", "files", "dtype", "server_python"} & set(ident)
    labelled = model_from_yaml(name, port=8998, checkpoint_label="my-finetune-v3").identity()
    assert labelled["checkpoint"] == "my-finetune-v3" and labelled["decoding"] == NOT_STARTED
    started = model_from_yaml(name)  # port null: the pool starts what the config says
    assert started.pool is not None and "server" not in started.identity()
    assert NOT_STARTED not in json.dumps(started.identity())
    assert model_from_yaml(name, checkpoint_label="x").identity()["checkpoint_label"] == "x"


def _wait_port(
    port: int, proc: subprocess.Popen, timeout_s: float = 300.0
) -> None:  # returns once it listens
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        assert proc.poll() is None, proc.stdout.read() if proc.stdout else ""
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return
        except OSError:
            time.sleep(0.05)
    raise AssertionError(f"no server on 127.0.0.1:{port} after {timeout_s:.0f} s")


def test_moshi_port_alone_talks_to_the_running_server(tmp_path):
    """model=moshi model.port=P (server: block as in the yaml, host not given): one session against
    a server that follows moshi.server's wire order on 127.0.0.1:P; nothing is started."""
    port = free_port()
    record = tmp_path / "record.jsonl"
    proc = subprocess.Popen(
        [
            sys.executable,
            str(HERE / "test_moshi_adapter.py"),
            "--port",
            str(port),
            "--busy-s",
            "0",
            "--record",
            str(record),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        _wait_port(port, proc)
        m = model_from_yaml("moshi", port=port)

        async def go():
            async with m.session("Only listen.", 0) as s:
                return await stream_tone(s, 10)

        try:
            batches = asyncio.run(go())
        finally:
            m.close()
    finally:
        proc.terminate()
        proc.wait(10)
    texts = [e.text for b in batches for e in b if e.kind == "text"]
    assert texts[:2] == [" p1", " p2"]
    assert json.loads(record.read_text().splitlines()[-1])["frames"] >= 9
    assert not (tmp_path / "servers").exists()
