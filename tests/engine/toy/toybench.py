"""A toy benchmark that lives outside fdeval: one module, one YAML (conf/benchmark/toy.yaml).

Its cases are short spoken questions; its one evaluation step (`speech`, stage judge) measures
how long the model spoke in each session (from the played model channel's VAD segments); its
metric (`toy_speech`) is the mean and the count of sessions where the model said anything.
With `echo: true` its user is interactive (`user_policy`): after the question it says back, once,
what the model said in reply (espeak-ng, written during the session).
It exists to show that a benchmark plugs into the engine with no edit to fdeval itself.
"""

from __future__ import annotations

import asyncio
import csv
import json
import os
from pathlib import Path

from fdeval.audio.io import write_wav
from fdeval.engine.benchmark import Benchmark
from fdeval.engine.executor import results
from fdeval.engine.steps import CaseStep, Metric, Result
from fdeval.orchestrator.policy import UserPolicy, UserTurn
from fdeval.recording import read_session
from fdeval.types import TestCase, Turn, WordTiming

QUESTIONS = ("what time is it", "tell me a story", "how far is the moon", "name a colour")


class Speech(CaseStep):
    name = "speech"
    stage = "judge"
    folder = "speech"
    version = "1"

    def __init__(self, min_segment_s: float):
        self.min_segment_s = min_segment_s
        self.attempts: dict[str, int] = {}

    def identity(self, run):
        return {"min_segment_s": self.min_segment_s}

    def make(self, run, unit):
        if unit.case_id in os.environ.get("TOY_FAIL_CASES", "").split(
            ","
        ):  # a fault injected by the tests
            self.attempts[unit.case_id] = self.attempts.get(unit.case_id, 0) + 1
            raise ConnectionError(
                f"injected fault #{self.attempts[unit.case_id]} for {unit.case_id}"
            )
        log = read_session(run.folder.session_paths(unit.case_id)[0], tables=("vad_segments",))
        segs = [
            (s.start_s, s.end_s)
            for s in log.vad_segments
            if s.end_s - s.start_s >= self.min_segment_s
        ]
        spoke_s = round(sum(b - a for a, b in segs), 6)
        return Result(
            unit.case_id, "", spoke_s, f"{len(segs)} segment(s) of model speech"
        ).to_dict()


class SpeechMetric(Metric):
    name = "toy_speech"
    needs = ("speech",)
    tables = ("toy_speech",)

    def compute(self, run, scores_dir: Path) -> str:
        res = results(run, "speech")
        ok = [r for r in res if r.status == "ok"]
        mean = sum(r.value for r in ok) / len(ok) if ok else float("nan")
        row = {
            "n": len(ok),
            "n_spoke": sum(r.value > 0 for r in ok),
            "mean_speech_s": round(mean, 6),
            "run_id": run.run_id,
        }
        scores_dir.mkdir(parents=True, exist_ok=True)
        with (scores_dir / "toy_speech.csv").open("w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=list(row))
            w.writeheader()
            w.writerow(row)
        return f"toy: {row['n_spoke']}/{row['n']} sessions with model speech, mean {mean:.2f} s"


class EchoUser(UserPolicy):
    """Asks the case's question, then repeats the model's answer back to it once."""

    name = "echo"

    def __init__(self, case: TestCase, audio, tts):
        self.case, self.audio, self.tts, self.echoed = case, audio, tts, False

    async def next_turns(self, conversation):
        if not conversation.user:
            return (UserTurn(self.case.turns[0], self.audio[0]),)
        text = conversation.model_text_since(conversation.user[-1].end_s)
        if self.echoed or not text:
            return ()
        self.echoed = True
        syn = await asyncio.to_thread(self.tts.synthesize, text)
        words = tuple(WordTiming(w.text, w.start_s, w.end_s) for w in syn.words)
        turn = Turn(
            self.case.case_id,
            conversation.next_index,
            "echo",
            "take-turn",
            "",
            syn.text,
            words,
            syn.duration_s,
            5.0,
        )
        return (UserTurn(turn, syn.samples),)


class Toy(Benchmark):
    name = "toy"
    version = "1"

    def __init__(
        self, name: str = "toy", n_cases: int = 2, min_segment_s: float = 0.2, echo: bool = False
    ):
        self.name, self.n_cases, self.min_segment_s, self.echo = (
            name,
            int(n_cases),
            float(min_segment_s),
            bool(echo),
        )

    def user_policy(self, case, audio, run):
        return EchoUser(case, audio, run.component("tts")) if self.echo else None

    def data_id(self, seed: int) -> str:
        return f"toy-n{self.n_cases}"

    def generate(self, data_dir: Path, tts, seed: int, progress: bool) -> None:
        for k in range(self.n_cases):
            wav = data_dir / "audio" / f"q{k}.wav"
            meta = data_dir / "audio" / f"q{k}.json"
            if meta.exists():
                continue
            syn = tts.synthesize(QUESTIONS[k % len(QUESTIONS)])
            write_wav(wav, syn.samples, syn.sample_rate)
            meta.write_text(
                json.dumps(
                    {
                        "text": syn.text,
                        "duration_s": syn.duration_s,
                        "words": [[w.text, w.start_s, w.end_s] for w in syn.words],
                    }
                )
            )

    def load(self, data_dir: Path) -> list[TestCase]:
        cases = []
        for k in range(self.n_cases):
            meta = json.loads((data_dir / "audio" / f"q{k}.json").read_text())
            cid = f"toy{k}"
            words = tuple(WordTiming(*w) for w in meta["words"])
            turn = Turn(
                cid,
                0,
                "question",
                "take-turn",
                f"audio/q{k}.wav",
                meta["text"],
                words,
                meta["duration_s"],
                10.0,
            )
            cases.append(TestCase(cid, cid, "toy", "question", None, (turn,)))
        return cases

    def steps(self):
        return [Speech(self.min_segment_s)]

    def metrics(self):
        return [SpeechMetric()]
