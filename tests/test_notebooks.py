"""Every notebook in notebooks/ runs top to bottom on real default-style runs made here.

The runs are real launches (subprocess, as a user starts them) into one tmp out_root: the
Instruct-FD default, a 2-point barge-in sweep on a 2-case subset (launchers/barge_in_sweep.py),
and EchoChain and TACT at reduced sizes (the notebooks read any size; the full defaults take
minutes on 2 cores). Each notebook is converted from its jupytext source and executed with
nbclient on a python3 kernel; a cell error fails the test, and each test checks a table or
figure the notebook produced.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import jupytext
import pytest
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError

from fdeval.engine.run import step_dir

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = ROOT / "notebooks"
SWEEP_CASES = "benchmark.cases=[balcony_tomatoes__continue,balcony_tomatoes__none]"

pytestmark = pytest.mark.slow


def child_env(**extra: str) -> dict[str, str]:
    """The environment for launches and kernels: no keys (nothing here calls an API)."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.endswith(("_API_KEY", "_TOKEN")) and not k.startswith("FDEVAL_")
    }
    return {**env, **extra}


def start(cwd: Path, *args: str) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, *args, "progress=false"],
        cwd=cwd,
        env=child_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def finish(proc: subprocess.Popen) -> None:
    out, _ = proc.communicate(timeout=900)
    assert proc.returncode == 0, out[-3000:]


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict[str, str]:
    tmp = tmp_path_factory.mktemp("nbruns")
    out = tmp / "outputs"
    launch = ["-m", "fdeval.launch", f"out_root={out}"]
    # Two chains at once: the sweep reuses the Instruct-FD data the default run generated.
    ec = start(tmp, *launch, "benchmark=echochain", "benchmark.n_conversations=2")
    ifd = start(tmp, *launch)
    finish(ifd)
    sweep = start(
        tmp,
        str(ROOT / "launchers" / "barge_in_sweep.py"),
        "--delays",
        "1,3",
        f"out_root={out}",
        SWEEP_CASES,
    )
    finish(ec)
    tact = start(tmp, *launch, "benchmark=tact", "benchmark.n_episodes=8", "benchmark.repeats=1")
    finish(sweep)
    finish(tact)

    def one(benchmark: str) -> str:
        (run,) = [
            p for p in (out / benchmark / "reference").iterdir() if (p / "run.json").is_file()
        ]
        return str(run)

    sweep_runs = [
        p
        for p in (out / "instructfd" / "reference").glob("orchestrator.barge_in_delay_s=*")
        if p.is_dir()
    ]
    assert len(sweep_runs) == 2
    return {
        "FDEVAL_OUT_ROOT": str(out),
        "FDEVAL_RUN_ECHOCHAIN": one("echochain"),
        "FDEVAL_RUN_TACT": one("tact"),
    }


def execute(name: str, env: dict[str, str]) -> list[dict]:
    """Run the notebook on a kernel that sees `env` (and no keys); return its outputs in order
    (a cell error raises CellExecutionError)."""
    nb = jupytext.read(NOTEBOOKS / f"{name}.py")
    client = NotebookClient(
        nb, kernel_name="python3", timeout=600, resources={"metadata": {"path": str(NOTEBOOKS)}}
    )
    client.execute(env=child_env(**env))
    return [o for c in nb.cells if c.cell_type == "code" for o in c.outputs]


def text(outputs: list[dict]) -> str:
    return "\n".join(o.get("text", "") + o.get("data", {}).get("text/plain", "") for o in outputs)


def tables(outputs: list[dict]) -> list[str]:
    return [o["data"]["text/html"] for o in outputs if "text/html" in o.get("data", {})]


def figures(outputs: list[dict]) -> int:
    return sum("image/png" in o.get("data", {}) for o in outputs)


def test_read_run(runs):
    outs = execute("01_read_run", runs)
    run = Path(runs["FDEVAL_OUT_ROOT"]) / "instructfd" / "reference"
    (default,) = run.glob("default-*")
    n = len(list((default / "sessions").glob("*.h5")))
    assert n > 10 and f"{n} cases" in text(outs) and f"{{'usable': {n}}}" in text(outs)
    assert "bakery_phone_number__listen" in tables(outs)[0]  # the per-case table, one row per case
    assert figures(outs) == 1


def test_read_run_any_benchmark(runs):
    # The reader has no per-benchmark code: the same notebook opens a TACT run.
    outs = execute("01_read_run", {"FDEVAL_RUN": runs["FDEVAL_RUN_TACT"]})
    assert (
        "tact / reference" in text(outs)
        and "{'usable': 8}" in text(outs)
        and "posterior" in text(outs)
    )
    assert figures(outs) == 1


def test_instructfd_ias(runs):
    outs = execute("02_instructfd_ias", runs)
    ias_table, check = tables(outs)[0], text(outs)
    assert all(
        ins in ias_table
        for ins in ("listen", "backchannel", "interrupt", "continue", "acknowledge", "overall")
    )
    assert (
        "from verdicts" in check
    )  # the recomputation table (its equality with ias.csv is asserted in the notebook)
    assert figures(outs) == 1


def test_barge_in_sweep(runs):
    outs = execute("03_barge_in_sweep", runs)
    out = text(outs)
    assert "2 points: 1.0 s" in out and "3.0 s" in out
    assert "continue" in tables(outs)[0] and "overall" in tables(outs)[0]
    assert figures(outs) == 1


def test_tact_composites(runs):
    outs = execute("04_tact_composites", runs)
    assert "8 episodes" in text(outs)
    assert "user_interruption" in tables(outs)[0] and "recomputed" in tables(outs)[1]
    assert figures(outs) == 1


def test_echochain_mpr_mcp(runs):
    outs = execute("05_echochain_mpr_mcp", runs)
    assert "2 conversations" in text(outs)
    assert "mcp_pooled" in tables(outs)[0] and "mpr (recomputed)" in tables(outs)[1]
    assert figures(outs) == 1


def test_sweep_plots_one_sweep_and_names_the_others(runs, tmp_path):
    # A run whose identity differs in more than the delay (here: another code version) belongs to
    # another sweep: the two real points are plotted, the third is named as left out.
    sweep_runs = sorted(
        (Path(runs["FDEVAL_OUT_ROOT"]) / "instructfd" / "reference").glob("orchestrator.*")
    )
    other = tmp_path / "other-sweep-point"
    scores = step_dir(sweep_runs[0], "score").relative_to(
        sweep_runs[0]
    )  # where run.json says the table is
    (other / scores).mkdir(parents=True)
    shutil.copy(sweep_runs[0] / scores / "ias.csv", other / scores / "ias.csv")
    meta = json.loads((sweep_runs[0] / "run.json").read_text())
    meta["identity"]["config"]["orchestrator"]["barge_in_delay_s"] = 2
    meta["identity"]["code"] = {"changed": True}
    (other / "run.json").write_text(json.dumps(meta))
    outs = execute(
        "03_barge_in_sweep", {"FDEVAL_SWEEP_RUNS": os.pathsep.join(map(str, [*sweep_runs, other]))}
    )
    out = text(outs)
    assert "left out (another sweep" in out and "other-sweep-point" in out
    assert "2 points: 1.0 s" in out and "2.0 s ->" not in out
    assert figures(outs) == 1


def test_every_notebook_is_tested():
    tested = {
        n.removeprefix("test_") for n in globals() if n.startswith("test_")
    }  # test_<name> per <NN>_<name>.py
    names = {p.stem.split("_", 1)[1] for p in NOTEBOOKS.glob("[0-9]*.py")}
    assert names <= tested, names - tested


def test_missing_run_fails_the_notebook(tmp_path):
    # No run under this out_root: the first cell raises and the error names what to launch.
    with pytest.raises(CellExecutionError, match="no default instructfd run"):
        execute("02_instructfd_ias", {"FDEVAL_OUT_ROOT": str(tmp_path)})
