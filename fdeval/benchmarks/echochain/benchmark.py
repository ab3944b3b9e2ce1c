"""EchoChain as an engine benchmark: does a model update its reasoning when the user barges in?

`python -m fdeval.launch benchmark=echochain` runs (docs/echochain.md):

* generate: one conversation per scenario seed drawn from the pool (`seeds.rotate`), each with its
  own user voice and its assigned responder; the planner's first blueprint and the simulator's
  exchange-1 message are written now and the message synthesized (the case's one scripted turn);
* run (shared): the live loop as the user policy (`policy.EchoChainUser`): after every exchange
  the in-loop classifier (interrupted exchanges), the planner's update, and the next message with
  its barge-in, both synthesized before the exchange starts; the barge-in is injected
  `barge_in_after_s` after the assistant's speech onset; a flagged conversation stops;
* control (stage run): the evaluated exchange again, with the barge-in's content delivered as an
  ordinary turn after the assistant's complete answer (the half-duplex control);
* segment (stage transcribe) -> `exchanges/`; grade (stage judge) -> `graded/`: the final
  classifier votes, the rubric (hand-written for the shipped seeds, an LLM draft otherwise) and
  its grades for the interrupted and the control delivery, the automatic taxonomy label;
* score: MPR / MCP, failures per taxonomy type, the half-duplex comparison (`scoring.py`), with
  imported human review labels applied (`review.py`).

`benchmark.mode=replay benchmark.replay_from=[RUN_DIR, ...]` replays the flagged exchanges of other
runs to this run's model (`replay.py`): the same user audio under the same timing rule, the
history before it as text.
"""

from __future__ import annotations

import copy
from dataclasses import replace
import hashlib
import json
import logging
import random
from pathlib import Path
from typing import Any, Callable, Mapping

from fdeval.audio.io import write_wav
from fdeval.cases.schema import load_cases, write_case
from fdeval.engine.benchmark import Benchmark, PlannedRequests
from fdeval.engine.steps import Metric, Step
from fdeval.errors import ConfigError
from fdeval.orchestrator.config import DEFAULT_BARGE_IN_AFTER_S
from fdeval.settings import OrchestratorSettings, typed
from fdeval.types import TestCase, Turn, WordTiming, plain

from .classifier import make_classifier
from .dialogue import make_planner, make_simulator, responder_prompt
from .policy import EchoChainUser
from .records import EchoChainCase
from .replay import generate_replay, replay_data_id
from .review import EchoChainReview
from .roles import check_role, deviation
from .rubrics import make_drafter, make_grader
from .seeds import SHIPPED, load_pool, pool_hash, rotate
from .steps import CONTROL_HISTORIES, Grade, HalfDuplexControl, Scores, Segment

log = logging.getLogger("fdeval")

BENCHMARK_VERSION = "1.0"
MODES = ("live", "replay")
SCORE_ON = ("all", "flagged")
ROLES = ("planner", "simulator", "classifier", "drafter", "grader")


def short_digest(obj: Any) -> str:
    return hashlib.sha256(json.dumps(obj, sort_keys=True, default=str).encode()).hexdigest()[:12]


def voiced(tts: Any, voice: str) -> Any:
    """The run's TTS with another voice (one voice per conversation, §4.2)."""
    if not hasattr(tts, "voice"):
        raise ConfigError(
            f"benchmark.voices: the TTS backend {type(tts).__name__} has no voices; set benchmark.voices: []"
        )
    t = copy.copy(tts)
    t.voice = voice
    return t


class EchoChain(Benchmark):
    name = "echochain"
    version = BENCHMARK_VERSION

    def __init__(
        self,
        name: str = "echochain",
        mode: str = "live",
        n_conversations: int = 6,
        seed_files: list[str] | None = None,
        max_exchanges: int = 3,
        barge_in_after_s: float = DEFAULT_BARGE_IN_AFTER_S,
        turn_timeout_s: float = 60.0,
        voices: list[str] | None = None,
        responders: list[str] | None = None,
        model_name: str = "",
        half_duplex: bool = True,
        control_history: str = "text",
        score_on: str = "all",
        replay_from: list[str] | None = None,
        n_resamples: int = 2000,
        confidence: float = 0.95,
        cases: list[str] | None = None,
        cache_dir: str | None = None,
        **roles: Any,
    ):
        def bad(key: str, why: str, value: Any) -> ConfigError:
            return ConfigError(f"benchmark.{key}: {why}, got {value!r}")

        unknown = sorted(set(roles) - set(ROLES))
        if unknown:
            raise ConfigError(
                f"benchmark: unknown key(s) {unknown}; the LLM roles are {list(ROLES)}"
            )
        if mode not in MODES:
            raise bad("mode", f"expected one of {list(MODES)}", mode)
        if (
            isinstance(n_conversations, bool)
            or not isinstance(n_conversations, int)
            or n_conversations < 1
        ):
            raise bad("n_conversations", "must be a positive integer", n_conversations)
        if (
            isinstance(max_exchanges, bool)
            or not isinstance(max_exchanges, int)
            or max_exchanges < 2
        ):
            raise bad(
                "max_exchanges",
                "must be an integer >= 2 (exchange 1 is never interrupted)",
                max_exchanges,
            )
        if not float(barge_in_after_s) >= 0:
            raise bad("barge_in_after_s", "must be >= 0", barge_in_after_s)
        if not float(turn_timeout_s) > 0:
            raise bad("turn_timeout_s", "must be > 0", turn_timeout_s)
        if score_on not in SCORE_ON:
            raise bad("score_on", f"expected one of {list(SCORE_ON)}", score_on)
        if isinstance(n_resamples, bool) or not isinstance(n_resamples, int) or n_resamples < 100:
            raise bad("n_resamples", "must be an integer >= 100", n_resamples)
        if not 0.0 < float(confidence) < 1.0:
            raise bad("confidence", "must be in (0, 1)", confidence)
        self.name, self.mode = name, mode
        self.n_conversations, self.max_exchanges = int(n_conversations), int(max_exchanges)
        self.barge_in_after_s, self.turn_timeout_s = float(barge_in_after_s), float(turn_timeout_s)
        self.voices = [str(v) for v in (voices or [])]
        self.responders = [str(r) for r in responders] if responders else None
        self.model_name = str(model_name)
        if (
            self.responders
            and self.model_name
            and self.model_name not in self.responders
            and mode == "live"
        ):
            raise bad(
                "responders",
                f"this run's model {self.model_name!r} is not among them",
                self.responders,
            )
        self.half_duplex, self.score_on = bool(half_duplex), score_on
        if control_history not in CONTROL_HISTORIES:
            raise bad(
                "control_history", f"expected one of {list(CONTROL_HISTORIES)}", control_history
            )
        self.control_history = control_history
        self.replay_from = [Path(p).expanduser().resolve() for p in (replay_from or [])]
        if mode == "replay" and not self.replay_from:
            raise bad(
                "replay_from",
                "mode=replay needs the run folders whose flagged exchanges it replays",
                replay_from,
            )
        for p in self.replay_from:
            if not (p / "run.json").is_file():
                raise bad("replay_from", f"{p} is not a run folder (no run.json)", str(p))
        self.n_resamples, self.confidence = int(n_resamples), float(confidence)
        self.case_ids = list(cases) if cases else None
        self.seed_files = [
            SHIPPED if str(f) == SHIPPED else str(Path(f).expanduser().resolve())
            for f in (seed_files or [SHIPPED])
        ]
        self.cache_dir = (
            Path(cache_dir).expanduser() if cache_dir else Path(".fdeval_cache/echochain")
        )
        # the classifier's node has keys of its own (votes, decision rule), checked by make_classifier
        self.roles = {
            r: plain(roles.get(r) or {"backend": "offline"}, copy=True)
            if r == "classifier"
            else check_role(r, plain(roles.get(r) or {"backend": "offline"}, copy=True))
            for r in ROLES
        }
        self.cases_dir = None
        self._seeds = load_pool(
            self.seed_files
        )  # validated now: a bad user file is one line before any work
        self._built: dict[str, Any] = {}
        self.role("classifier")  # validates its settings now (no I/O)
        offline_script = self.roles["simulator"]["backend"] == "offline"
        for r in ("classifier", "drafter", "grader"):
            if self.roles[r]["backend"] == "offline" and not offline_script:
                raise ConfigError(
                    f"benchmark.{r}.backend: offline needs the scripted conversations of the seeds "
                    f"(benchmark.simulator.backend=offline); with an LLM simulator use an LLM {r}"
                )

    # -- roles ----------------------------------------------------------------------------------
    def role(self, name: str) -> Any:
        """The planner / simulator / classifier / drafter / grader, built once."""
        if name not in self._built:
            make = {
                "planner": make_planner,
                "simulator": make_simulator,
                "classifier": make_classifier,
                "drafter": make_drafter,
                "grader": make_grader,
            }[name]
            self._built[name] = make(self.roles[name], self.cache_dir)
        return self._built[name]

    def role_identities(self) -> dict[str, Any]:
        return {r: self.role(r).identity() for r in ROLES}

    def role_deviations(self) -> dict[str, str]:
        """Role -> how it differs from the paper's set-up (roles.PAPER_ROLES); a role on the
        paper's model is not listed."""
        return {r: d for r, ident in self.role_identities().items() if (d := deviation(r, ident))}

    # -- data -------------------------------------------------------------------------------------
    def data_id(self, seed: int) -> str:
        if self.mode == "replay":
            return replay_data_id(self)
        made_by = {
            "pool": pool_hash(self._seeds),
            "planner": self.role("planner").identity(),
            "simulator": self.role("simulator").identity(),
            "voices": self.voices,
            "responders": self.responders,
            "max_exchanges": self.max_exchanges,
            "timeout_s": self.turn_timeout_s,
        }
        return f"live-v{self.version}-n{self.n_conversations}-seed{seed}-{short_digest(made_by)}"

    def responder_for(self, conversation_id: str, seed: int) -> str:
        """The responder a conversation is assigned to: uniform at random, seeded (§4.3)."""
        if not self.responders:
            return self.model_name
        rng = random.Random(f"{seed}:{conversation_id}:responder")
        return rng.choice(sorted(self.responders))

    def _conversations(self, seed: int) -> list[tuple[str, Any]]:
        """(case id, scenario seed) of each live conversation `generate` writes."""
        return [
            (f"ec{k:03d}-{s.seed_id}", s)
            for k, s in enumerate(rotate(self._seeds, self.n_conversations, seed))
        ]

    def planned_case_ids(self, seed: int) -> list[str] | None:
        return [cid for cid, _ in self._conversations(seed)] if self.mode == "live" else None

    def generate(self, data_dir: Path, tts: Any, seed: int, progress: bool) -> None:
        if self.mode == "replay":
            generate_replay(self, data_dir, tts, seed)
            return
        cases_dir = data_dir / "cases"
        cases_dir.mkdir(parents=True, exist_ok=True)
        planner, simulator = self.role("planner"), self.role("simulator")
        made = 0
        for cid, s in self._conversations(seed):
            path = cases_dir / f"{cid}.json"
            if path.exists():
                continue
            rng = random.Random(f"{seed}:{cid}:voice")
            voice = rng.choice(self.voices) if self.voices else str(getattr(tts, "voice", ""))
            blueprint = planner.plan(s, (), None, cid)
            msg = simulator.next_message(s, blueprint, (), 1, cid)
            speaker = voiced(tts, voice) if self.voices else tts
            syn = speaker.synthesize(msg.text)
            rel = f"audio/{cid}/ex1_message.wav"
            write_wav(data_dir / rel, syn.samples, syn.sample_rate)
            words = tuple(WordTiming(w.text, w.start_s, w.end_s) for w in syn.words)
            turn = Turn(
                cid,
                0,
                "ex1_message",
                "take-turn",
                rel,
                syn.text,
                words,
                syn.duration_s,
                self.turn_timeout_s,
            )
            record = EchoChainCase(
                "live", s, voice, self.responder_for(cid, seed), self.max_exchanges, blueprint.text
            )
            case = TestCase(
                cid,
                cid,
                "echochain",
                s.topic,
                responder_prompt(),
                (turn,),
                seed=seed,
                version=self.version,
                data=record,
            )
            write_case(case, path)
            made += 1
        log.info("echochain: %d new conversation(s) in %s", made, data_dir)

    def case_specs(
        self, data_dir: Path, seed: int, speech_s: Callable[[str], float] | None
    ) -> list[TestCase] | None:
        """Live conversations as `generate` writes them, without audio: the planner's first
        blueprint and the simulator's exchange-1 message, the message as long as the run's TTS
        would say it. With LLM roles the seed's scripted exchange-1 message stands in for the one
        the simulator will write (its length is what is sized), so a plan sends no request and
        needs no key. A replay's cases are cut from other runs' recordings (None: generated)."""
        if self.mode != "live" or speech_s is None:
            return None
        if (
            self.roles["simulator"]["backend"] == "offline"
            and self.roles["planner"]["backend"] == "offline"
        ):
            planner, simulator = self.role("planner"), self.role("simulator")
        else:
            planner, simulator = (
                make_planner({"backend": "offline"}, self.cache_dir),
                make_simulator({"backend": "offline"}, self.cache_dir),
            )
        cases = []
        for cid, s in self._conversations(seed):
            responder = self.responder_for(cid, seed)
            if self.responders and responder != self.model_name:
                continue  # another model's conversation (as `load` leaves it out)
            voice = random.Random(f"{seed}:{cid}:voice").choice(self.voices) if self.voices else ""
            blueprint = planner.plan(s, (), None, cid)
            msg = simulator.next_message(s, blueprint, (), 1, cid)
            turn = Turn(
                cid,
                0,
                "ex1_message",
                "take-turn",
                f"audio/{cid}/ex1_message.wav",
                msg.text,
                (),
                speech_s(msg.text),
                self.turn_timeout_s,
            )
            record = EchoChainCase("live", s, voice, responder, self.max_exchanges, blueprint.text)
            cases.append(
                TestCase(
                    cid,
                    cid,
                    "echochain",
                    s.topic,
                    responder_prompt(),
                    (turn,),
                    seed=seed,
                    version=self.version,
                    data=record,
                )
            )
        if not cases:
            raise ConfigError(
                f"{data_dir}: no EchoChain conversation for model {self.model_name!r} "
                f"(responders: {self.responders})"
            )
        return self.select(sorted(cases, key=lambda c: c.case_id), self.case_ids)

    def load(self, data_dir: Path) -> list[TestCase]:
        cases_dir = data_dir / "cases"
        if not cases_dir.is_dir():
            raise ConfigError(
                f"no EchoChain cases in {data_dir}; run stage=generate (or stage=all) first"
            )
        cases = load_cases(cases_dir, data_dir, EchoChainCase)
        if self.mode == "live" and self.responders:
            cases = [c for c in cases if c.data.responder == self.model_name]
        elif self.mode == "replay":
            # a replayed exchange goes to every configured model but the one it was recorded with
            cases = [c for c in cases if c.data.responder != self.model_name]
        if not cases:
            raise ConfigError(
                f"{data_dir}: no EchoChain conversation for model {self.model_name!r} "
                f"(responders: {self.responders})"
            )
        return self.select(cases, self.case_ids)

    # -- engine hooks ---------------------------------------------------------------------------
    def user_policy(self, case: TestCase, audio: list, run: Any) -> Any:
        if case.data.mode != "live":
            return None  # a replayed exchange is scripted audio
        tts = run.component("tts")
        sr = (
            typed(run.cfg.orchestrator, OrchestratorSettings, "orchestrator")
            .to_config()
            .sample_rate
        )
        return EchoChainUser(
            case, audio, self, voiced(tts, case.data.voice) if self.voices else tts, sr
        )

    def planned_turns(self, case: TestCase) -> tuple[Turn, ...]:
        """For `stage=plan`: the live session's turns to come (each later message as long as the
        first, each barge-in half of it) and, with the control, its two turns."""
        first = case.turns[0]
        if case.data.mode != "live":
            return case.turns
        turns = [first]
        for _ in range(2, self.max_exchanges + 1):
            turns.append(replace(first, index=len(turns)))
            turns.append(
                replace(
                    first,
                    index=len(turns),
                    turn_type="barge-in",
                    duration_s=first.duration_s / 2,
                    barge_in_after_s=self.barge_in_after_s,
                    barge_in_handling="hold",
                    subtype="interrupt",
                )
            )
        if self.half_duplex:
            turns += [
                replace(first, index=len(turns)),
                replace(first, index=len(turns) + 1, duration_s=first.duration_s / 2),
            ]
        return tuple(turns)

    def planned_requests(self, cases: list[TestCase]) -> list[PlannedRequests]:
        """Per role, the most requests the run makes (docs/echochain.md, "Roles"): a conversation
        that is never flagged runs all `max_exchanges` exchanges, each with a planner update and a
        simulator turn (a flagged one stops sooner); each interrupted exchange is classified with
        `votes` samples; the evaluated exchange gets one rubric, graded once per delivery (live,
        and the half-duplex control). A replayed exchange has no planner or simulator and is
        classified once."""
        live = sum(1 for c in cases if c.data.mode == "live")
        replayed = len(cases) - live
        e, k, deliveries = (
            self.max_exchanges,
            int(self.role("classifier").votes),
            1 + int(self.half_duplex),
        )
        per = {
            "planner": (e, 0),
            "simulator": (e, 0),
            "classifier": (k * (e - 1), k),
            "drafter": (1, 1),
            "grader": (deliveries, deliveries),
        }
        out = []
        for r, ident in self.role_identities().items():
            n = 0 if ident["backend"] == "offline" else live * per[r][0] + replayed * per[r][1]
            out.append(
                PlannedRequests(
                    r, ident["backend"], ident.get("model") or "rules", n, deviation(r, ident) or ""
                )
            )
        return out

    def steps(self) -> list[Step]:
        return [
            *([HalfDuplexControl(self)] if self.half_duplex else []),
            Segment(self),
            Grade(self),
        ]

    def metrics(self) -> list[Metric]:
        return [Scores(self)]

    def review(self) -> EchoChainReview:
        return EchoChainReview()

    def settings(self) -> Mapping[str, Any]:
        """What the results rows carry about how conversations were made and judged."""
        return {
            "barge_in_after_s": self.barge_in_after_s,
            "max_exchanges": self.max_exchanges,
            "score_on": self.score_on,
            "roles": self.role_identities(),
        }
