"""The run folder and the run context that every step is given.

`RunFolder` is the one owner of a run folder's layout and of what its files say:

    <run_dir>/run.json  model.json  fdeval.log  .hydra/  .lock
    <run_dir>/sessions/<case_id>.wav|.h5      stereo recording (ch0 user, ch1 model) + session log
    <run_dir>/sessions/<case_id>.error.json   why a case could not be recorded
    <run_dir>/<step folder>/<key>/<unit>.json  a case step's file (`<unit>.error.json` on failure)
    <run_dir>/scores/<key>/                    the metrics' tables
Generated benchmark data is shared by runs: <out_root>/<benchmark>/_data/<data_id>/.

The run folder's identity covers what can change a recording; the settings that only a later
step reads (the judge, the ASR, what a benchmark's step `owns`) are that step's: its files live in
`<folder>/<key>/`, the key a readable label (the judge's id, the ASR's name) and a hash of the
step's stamp and of the keys of the steps it reads, so a second judge's verdicts sit beside the
first one's and selecting either again redoes nothing. run.json names the folders of the last
launch's steps (`steps`) and describes every step folder launches have used (`step_folders`).

A file is reused only when it reads back whole and carries the identity it would be written with
now: a session the run's identity hash, the case's digest and the model's id; a step's file the
session it was made from and the step's own stamp (`provenance`). An unreadable file is made
again; one of another identity stops the run with one line naming the differing fields, unless
`resume=redo`. A session whose timing was broken is recorded, marked invalid, never used by a
later step, and recorded again on relaunch, at most `orchestrator.invalid_retries` times (the log's
`recording_attempt` counts its recordings); then it is kept as invalid.

`Run` is what a step sees: the config, the folder, the benchmark, the cases of this process (a
shard of them in an array task), and the components the config names (built on first use).
"""

from __future__ import annotations

import hashlib
import inspect
import json
import logging
import re
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

from hydra.errors import InstantiationException
from hydra.utils import get_class, instantiate
from omegaconf import DictConfig, OmegaConf
from tqdm import tqdm

import fdeval
from fdeval.cases.schema import case_to_dict
from fdeval.engine.identity import (
    STEP_GROUPS,
    ForeignArtifact,
    check_resume,
    data_dir,
    describe_diff,
    drop_paths,
    identity_hash,
    pick,
    result_config,
)
from fdeval.errors import ConfigError, FdevalError
from fdeval.files import file_sha256, write_json_atomic
from fdeval.recording import LOG_SCHEMA_VERSION, CorruptSession, check_session
from fdeval.settings import model_resources
from fdeval.types import TestCase

log = logging.getLogger("fdeval")

# What the engine does with a session and a step's files (turn manager, health rules, artifact
# rules, the folder layout): bumped when a change can alter a recording or what counts as done,
# so old folders are never resumed. 4: step files in `<folder>/<key>/`, judge and ASR outside
# the run identity.
ENGINE_VERSION = "4"
LABEL_CHARS = 40  # the readable part of a step folder's key


def build(node: Any) -> Any:
    """hydra's instantiate, but a constructor's user error stays a one-line FdevalError, and a key
    the constructor does not take is a ConfigError naming it and listing the valid ones."""
    try:
        return instantiate(node)
    except InstantiationException as e:
        cause = e.__cause__
        while cause is not None and not isinstance(cause, FdevalError):
            cause = cause.__cause__
        if cause is not None:
            raise cause from None
        unknown = re.search(r"unexpected keyword argument '(\w+)'", str(e.__cause__ or ""))
        if isinstance(e.__cause__, TypeError) and unknown and isinstance(node, DictConfig):
            target = str(node.get("_target_"))
            where = node._get_full_key(None) or "config"
            try:
                params = inspect.signature(get_class(target)).parameters
                valid = ", ".join(
                    sorted(
                        n for n, p in params.items() if p.kind is not p.VAR_KEYWORD and n != "self"
                    )
                )
            except (ValueError, TypeError, ImportError):
                valid = "?"
            raise ConfigError(
                f"{where}.{unknown.group(1)}: unknown key for {target}; valid: [{valid}]"
            ) from None
        raise


def short_hash(obj: Any) -> str:
    return hashlib.sha256(json.dumps(obj, sort_keys=True, default=str).encode()).hexdigest()[:12]


def owned_paths(benchmark: Any) -> tuple[str, ...]:
    """The config paths only later steps read: the step-only groups and what the benchmark's
    steps and metrics own (`Step.owns`). None of them is in the run identity."""
    paths = list(STEP_GROUPS)
    for s in [*benchmark.steps(), *benchmark.metrics()]:
        paths += [p for p in getattr(s, "owns", ()) if p not in paths]
    return tuple(paths)


def run_identity(cfg: DictConfig, benchmark: Any) -> dict[str, Any]:
    """Everything that can change a recording of this run (see `fdeval.engine.identity`)."""
    plain = OmegaConf.to_container(cfg, resolve=True)
    cases_dir = getattr(benchmark, "cases_dir", None)
    return {
        "config": drop_paths(result_config(plain), owned_paths(benchmark)),
        "benchmark": {
            "name": benchmark.name,
            "version": str(benchmark.version),
            "data_id": benchmark.data_id(int(cfg.seed)),
            "cases_dir": str(cases_dir) if cases_dir else None,
        },
        "code": {
            "fdeval": fdeval.__version__,
            "engine": ENGINE_VERSION,
            "session_log": LOG_SCHEMA_VERSION,
        },
    }


def step_dir(run_dir: str | Path, step_name: str) -> Path:
    """The folder where the last launch on `run_dir` keeps step `step_name`'s files (run.json's
    `steps`), for scripts and reports that read a run folder without rebuilding its steps, e.g.
    `step_dir(run, "score") / "ias.csv"` or `step_dir(run, "judge").glob("*@*.json")`."""
    steps, _ = RunFolder.recorded_steps(Path(run_dir))
    if not isinstance(steps.get(step_name), str):
        raise FdevalError(
            f"{run_dir}: run.json names no folder for step {step_name!r} (not a run folder of this "
            f"fdeval, or never launched with that step); relaunch the run"
        )
    return Path(run_dir) / steps[step_name]


def step_description(run_dir: str | Path, folder: str) -> dict[str, Any]:
    """run.json's description of step folder `folder` (e.g. "verdicts/rules-<hash>": which step,
    its stamp, the settings it is keyed by); {} when no launch described it."""
    _, made = RunFolder.recorded_steps(Path(run_dir))
    d = made.get(folder)
    return d if isinstance(d, dict) else {}


@dataclass(frozen=True)
class SessionState:
    """Whether a case's recording can be used: done | missing | failed | invalid | corrupt | foreign."""

    case_id: str
    state: str
    why: str = ""
    session_id: str = ""
    attempt: int = 0  # done or invalid: which recording of the case this is (1 = the first)


class RunFolder:
    """A run folder's layout and the state of its files (see the module doc)."""

    def __init__(self, run_dir: Path, identity: dict[str, Any]):
        self.run_dir, self.identity = Path(run_dir), identity
        self.run_id = identity_hash(identity)

    # -- layout ------------------------------------------------------------------------------
    @property
    def sessions(self) -> Path:
        return self.run_dir / "sessions"

    def session_paths(self, case_id: str, folder: str = "sessions") -> tuple[Path, Path]:
        d = self.run_dir / folder
        return d / f"{case_id}.h5", d / f"{case_id}.wav"

    @staticmethod
    def error_path(path: Path) -> Path:
        """Where the error record of the unit whose file is `path` goes."""
        return path.with_name(path.name.removesuffix(".json") + ".error.json")

    @staticmethod
    def read_identity(run_dir: Path) -> dict[str, Any] | None:
        """The identity run.json records (array tasks may see another environment), or None."""
        try:
            d = json.loads((Path(run_dir) / "run.json").read_text())
        except (OSError, ValueError):
            return None
        ident = d.get("identity") if isinstance(d, dict) else None
        return ident if isinstance(ident, dict) else None

    @staticmethod
    def recorded_steps(run_dir: Path) -> tuple[dict[str, str], dict[str, Any]]:
        """run.json's step folders: {step: folder} of the last launch, {folder: description} of all."""
        try:
            d = json.loads((Path(run_dir) / "run.json").read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return {}, {}
        steps = d.get("steps") if isinstance(d, dict) else None
        made = d.get("step_folders") if isinstance(d, dict) else None
        return (steps if isinstance(steps, dict) else {}), (made if isinstance(made, dict) else {})

    def write_run_json(
        self,
        command_config: dict[str, Any],
        versions: dict[str, str],
        steps: dict[str, dict[str, Any]] | None = None,
    ) -> None:
        """`steps`: each step's folder description (`Run.describe_step`) for this launch; the
        descriptions of earlier launches' folders are kept beside them."""
        _, made = self.recorded_steps(self.run_dir)
        steps = steps or {}
        made.update(
            {d["folder"]: {k: v for k, v in d.items() if k != "folder"} for d in steps.values()}
        )
        write_json_atomic(
            self.run_dir / "run.json",
            {
                "run_id": self.run_id,
                "identity": self.identity,
                "command_config": command_config,
                "versions": versions,
                "steps": {name: d["folder"] for name, d in steps.items()},
                "step_folders": made,
            },
        )

    # -- the model ---------------------------------------------------------------------------
    def recorded_model(self) -> dict[str, Any] | None:
        f = self.run_dir / "model.json"
        try:
            d = json.loads(f.read_text())
        except FileNotFoundError:
            return None
        except (OSError, ValueError) as e:
            raise FdevalError(
                f"{f}: unreadable ({e}); delete it to record the model again"
            ) from None
        if not isinstance(d, dict) or not isinstance(d.get("model_id"), str):
            raise FdevalError(
                f"{f}: not a model record (no model_id); delete it to record the model again"
            )
        return d

    # -- sessions ----------------------------------------------------------------------------
    def session_state(
        self, case: TestCase, digest: str, model_id: str | None = None, folder: str = "sessions"
    ) -> SessionState:
        """Whether `case`'s recording is there, whole, and this run's (see the module doc).
        `folder`: a benchmark's own session step keeps its recordings there (e.g. EchoChain's
        half-duplex control sessions)."""
        h5, wav = self.session_paths(case.case_id, folder)
        cid = case.case_id
        if not h5.exists():
            err = h5.parent / f"{cid}.error.json"
            if err.exists():
                try:
                    why = json.loads(err.read_text()).get("error", "?")
                except (OSError, ValueError, AttributeError):
                    why = "unreadable error record"
                return SessionState(cid, "failed", str(why))
            return SessionState(cid, "missing")
        try:
            info = check_session(h5, wav)
        except CorruptSession as e:
            return SessionState(cid, "corrupt", str(e))
        attrs = info.attrs
        recorded = {"run_id": attrs.get("run_id"), "case_digest": attrs.get("case_digest")}
        current = {"run_id": self.run_id, "case_digest": digest}
        if model_id is not None:
            recorded["model_id"], current["model_id"] = attrs.get("model_id"), model_id
        if recorded != current:
            if recorded["run_id"] != current["run_id"]:
                try:
                    why = describe_diff(json.loads(attrs.get("run_identity", "{}")), self.identity)
                except ValueError:
                    why = f"run_id: {recorded['run_id']} -> {current['run_id']}"
            else:
                why = describe_diff(recorded, current)
            return SessionState(cid, "foreign", why)
        if not info.valid:
            return SessionState(
                cid,
                "invalid",
                str(attrs.get("invalid_reason", "invalid")),
                info.session_id,
                info.recording_attempt,
            )
        return SessionState(cid, "done", "", info.session_id, info.recording_attempt)

    # -- files derived from a session --------------------------------------------------------
    def read_derived(
        self, path: Path, session: SessionState, stamp: dict[str, Any] | None = None
    ) -> tuple[str, dict[str, Any] | None]:
        """(state, content) of a JSON file a step derived from `session`: done | missing |
        stale (made from an older session) | corrupt | foreign (another run, or other step
        settings than `stamp`)."""
        if not path.exists():
            return "missing", None
        try:
            d = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, ValueError, RecursionError):
            return "corrupt", None
        prov = d.get("provenance") if isinstance(d, dict) else None
        if not isinstance(prov, dict) or not isinstance(prov.get("run_id"), str):
            return "corrupt", None  # no run names it (e.g. `{}`): damaged, not another run's
        if prov.get("run_id") != self.run_id:
            return "foreign", d
        if prov.get("session_id") != session.session_id:
            return "stale", d
        if stamp is not None and prov.get("step") != stamp:
            return "foreign", d
        return "done", d

    def derived_state(
        self, path: Path, session: SessionState, stamp: dict[str, Any] | None = None
    ) -> str:
        return self.read_derived(path, session, stamp)[0]

    def provenance(
        self, session: SessionState, stamp: dict[str, Any] | None = None
    ) -> dict[str, Any]:
        prov: dict[str, Any] = {"run_id": self.run_id, "session_id": session.session_id}
        if stamp is not None:
            prov["step"] = stamp
        return prov


@dataclass
class Run:
    """What a step is given (see the module doc)."""

    cfg: DictConfig
    run_dir: Path
    out_root: Path
    shard: tuple[int, int] | None = None  # (index, count): this process handles cases[index::count]
    identity: dict[str, Any] | None = None  # computed from cfg when not given (run.json holds it)
    stats: dict[str, Any] = field(default_factory=dict)
    pipeline: list = field(default_factory=list)  # every step of this benchmark's run, in order

    def steps_named(self, names) -> list:
        return [s for s in self.pipeline if s.name in names]

    def file_of(self, step_name: str, case_id: str, key: str = "") -> Path:
        """Where case step `step_name` keeps its file for (case_id, key): a step reads an earlier
        step's output through this, never by a folder name of its own."""
        (step,) = self.steps_named((step_name,))
        return self.step_dir(step) / step.filename(case_id, key)

    # -- step folders ----------------------------------------------------------------------------
    @cached_property
    def result_config(self) -> dict[str, Any]:
        """The config as the identities see it (where-and-how keys dropped, endpoints resolved)."""
        return result_config(OmegaConf.to_container(self.cfg, resolve=True))

    def step_config(self, step: Any) -> dict[str, Any]:
        """The config paths `step` owns, with their values (None where absent)."""
        return {p: pick(self.result_config, p) for p in step.owns}

    def stamp(self, step: Any) -> dict[str, Any]:
        """What a step writes into each file's provenance: its name, version and settings' hash
        (its `identity` and the config it owns)."""
        cache = self.__dict__.setdefault("_stamps", {})
        if step.name not in cache:
            settings = {"identity": step.identity(self), "config": self.step_config(step)}
            cache[step.name] = {
                "name": step.name,
                "version": str(step.version),
                "settings": short_hash(settings),
            }
        return cache[step.name]

    def upstream(self, step: Any) -> list[Any]:
        """The steps with keyed folders of their own (case steps, aggregates) that `step` reads."""
        names = {s.name for s in self.pipeline}
        missing = [n for n in step.needs if n not in names]
        if missing:
            raise RuntimeError(
                f"step {step.name}: needs {missing}, which this run's pipeline does not hold"
            )
        return [u for u in self.steps_named(step.needs) if u.keyed]

    def step_label(self, step: Any) -> str:
        """The readable part of a step folder's key (`Step.label`), made safe for a folder name."""
        return re.sub(r"[^A-Za-z0-9._+=-]+", "_", step.label(self)).strip("._-")[:LABEL_CHARS]

    def step_key(self, step: Any) -> str:
        """The subfolder of `step`'s current settings: a readable label, then a hash of the step's
        stamp and of the keys of the steps it reads, so other settings anywhere upstream (a new
        judge, a new ASR) get a folder of their own and what the others made stays where it is."""
        cache = self.__dict__.setdefault("_keys", {})
        if step.name not in cache:
            after = {u.name: self.step_key(u) for u in self.upstream(step)}
            h = short_hash({"stamp": self.stamp(step), "after": after})
            label = self.step_label(step)
            cache[step.name] = f"{label}-{h}" if label else h
        return cache[step.name]

    def step_dir(self, step: Any) -> Path:
        """Where `step`'s files live under the current settings: `<run>/<folder>/<key>/`."""
        return self.run_dir / step.folder / self.step_key(step)

    def describe_step(self, step: Any) -> dict[str, Any]:
        """What run.json says of a step folder: where, which step, its stamp, the settings it was
        keyed by and the folders of the steps it reads (a report names the judge from it)."""
        return {
            "folder": f"{step.folder}/{self.step_key(step)}",
            "step": step.name,
            "stamp": self.stamp(step),
            "label": self.step_label(step),
            "identity": step.identity(self),
            "config": self.step_config(step),
            "after": {u.name: f"{u.folder}/{self.step_key(u)}" for u in self.upstream(step)},
        }

    @property
    def seed(self) -> int:
        return int(self.cfg.seed)

    @property
    def progress(self) -> bool:
        return bool(self.cfg.progress)

    @property
    def resume(self) -> str:
        return check_resume(self.cfg.get("resume", "auto"))

    @cached_property
    def benchmark(self):
        return build(self.cfg.benchmark)

    @cached_property
    def folder(self) -> RunFolder:
        ident = (
            self.identity if self.identity is not None else run_identity(self.cfg, self.benchmark)
        )
        return RunFolder(self.run_dir, ident)

    @property
    def run_id(self) -> str:
        return self.folder.run_id

    @cached_property
    def data_dir(self) -> Path:
        tts = OmegaConf.to_container(self.cfg.tts, resolve=True) if "tts" in self.cfg else None
        return data_dir(self.out_root, self.benchmark, self.seed, tts)

    @cached_property
    def case_root(self) -> Path:
        return self.benchmark.cases_dir or self.data_dir

    @cached_property
    def all_cases(self) -> list[TestCase]:
        cases = self.benchmark.load(self.data_dir)
        if not cases:
            raise ConfigError(f"{self.case_root}: the case set is empty; nothing to run")
        return cases

    @cached_property
    def cases(self) -> list[TestCase]:
        """The cases this process handles: all of them, or its shard of the stable order."""
        if self.shard is None:
            return self.all_cases
        i, n = self.shard
        return self.all_cases[i::n]

    # -- components the config names ---------------------------------------------------------
    def component(self, group: str) -> Any:
        """The object `cfg.<group>` builds (`_target_`), made once per run."""
        cache = self.__dict__.setdefault("_components", {})
        if group not in cache:
            if group not in self.cfg:
                raise ConfigError(f"{group}: this run's config has no '{group}' group")
            node = OmegaConf.to_container(self.cfg[group], resolve=True)
            if (
                group == "model"
            ):  # `resources` describes the model for stage=plan: checked, then not passed
                model_resources(node)
                node.pop("resources", None)
            cache[group] = build(node)
        return cache[group]

    def built(self, group: str) -> bool:
        return group in self.__dict__.get("_components", {})

    @property
    def model(self):
        return self.component("model")

    @cached_property
    def model_id(self) -> str:
        """Name plus a hash of the model's identity, as recorded in model.json by the run step.

        Later steps (and array tasks on CPU nodes) read it without loading the model. Where the
        model is loaded, its identity must match the folder's unless resume=redo."""
        recorded = self.folder.recorded_model()
        if recorded is not None and not self.built("model"):
            return recorded["model_id"]
        identity = self.model.identity()
        model_id = f"{self.cfg.model.name}:{short_hash(identity)}"
        if recorded is not None and recorded["model_id"] != model_id:
            if self.resume != "redo":
                raise ForeignArtifact(
                    f"{self.run_dir}: recorded with model {recorded['model_id']}, but the configured model is "
                    f"{model_id} ({describe_diff(recorded.get('identity'), identity)}); "
                    "pass resume=redo to record its sessions again"
                )
            log.warning(
                "run: model changed (%s -> %s): its sessions are recorded again",
                recorded["model_id"],
                model_id,
            )
        write_json_atomic(self.run_dir / "model.json", {"model_id": model_id, "identity": identity})
        return model_id

    # -- artifacts -----------------------------------------------------------------------------
    def case_digest(self, case: TestCase) -> str:
        """A hash of the case as loaded and of its turns' audio files."""
        cache = self.__dict__.setdefault("_digests", {})
        if case.case_id not in cache:
            h = hashlib.sha256(json.dumps(case_to_dict(case), sort_keys=True, default=str).encode())
            for turn in case.turns:
                h.update(file_sha256(self.case_root / turn.audio_path).encode())
            cache[case.case_id] = h.hexdigest()[:16]
        return cache[case.case_id]

    def session_state(self, case: TestCase, model_id: str | None = None) -> SessionState:
        return self.folder.session_state(case, self.case_digest(case), model_id)

    def refuse_foreign(self, what: str, names: list[str], why: str) -> None:
        """Stop with one line unless resume=redo (then the caller makes them again)."""
        if names and self.resume != "redo":
            raise ForeignArtifact(
                f"{self.run_dir}: {what} {names[0]} was made by another run ({why}); {len(names)} "
                "such file(s); pass resume=redo to make them again"
            )

    def scorable(
        self, step: str
    ) -> tuple[list[tuple[TestCase, SessionState]], dict[str, list[str]]]:
        """The cases with a usable session, and the others by state (what a later step skips).

        A case never run is an error (run the run step first); one whose session is unreadable
        too (the run step records it again). Failed and invalid sessions are skipped and counted."""
        ok, skipped = [], {"failed": [], "invalid": []}
        for c in self.cases:
            s = self.session_state(c)
            if s.state == "done":
                ok.append((c, s))
            elif s.state in skipped:
                skipped[s.state].append(c.case_id)
            elif s.state == "missing":
                raise FdevalError(
                    f"{step}: no session recorded for case {c.case_id}; run stage=run first"
                )
            else:
                raise FdevalError(
                    f"{step}: {self.run_dir}/sessions/{c.case_id}.h5 cannot be used ({s.why}); "
                    "run stage=run to record it again"
                )
        for state, ids in skipped.items():
            if ids:
                log.warning(
                    "%s: %d case(s) skipped, session %s (e.g. %s)", step, len(ids), state, ids[0]
                )
        return ok, skipped

    def bar(self, items: list, desc: str):
        return tqdm(
            items, desc=desc, unit="case", disable=not self.progress or len(items) < 2, leave=False
        )

    def close(self) -> None:
        if self.built("model"):
            self.model.close()
