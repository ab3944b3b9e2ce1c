"""Synthetic TACT episodes: espeak-ng probes with controlled intents and timing, fully offline.

Each episode is a short two-speaker exchange rendered with two espeak-ng voices into a stereo
context (one channel per speaker) that ends at the decision point:

* pause handling, backchanneling, smooth turn-taking: the other speaker's lead-in line, the
  focal speaker's reply after their floor-transfer offset, an intra-turn pause drawn from the
  speaker's pause distribution, then the *probe*, whose end is the decision point. The probe
  fixes the intent: a question ending (ans), an open question inviting thought (ref), a
  rhetorical aside (rhe), a filled pause or trailing conjunction mid-utterance (hold), a
  continuation with a "you know," tag or a list intonation (bck), a trailing-off (abn).
  Streamed as one take-turn.
* user interruption: the focal speaker asks something, the other speaker starts a long answer,
  and the focal speaker cuts in `barge_in_after_s` after that answer began; the cut-in is the
  probe. Replayed as a take-turn (the question) plus a barge-in that is injected at the same
  delay after the *system's* speech onset, so the system holds the floor when it comes.

Speakers come from a pool of `N_SPEAKERS` synthetic people drawn from the seed. Their slice
attributes follow a balanced design (`speaker_design`): within each gender the age band,
first-language region and rate tercile form an orthogonal array, so every pair of slice keys is
fully crossed over the pool and no slice is a relabelling of another (version 1 tied the rate
tercile to gender: mid/slow were exactly the m/f episodes). Their profile is
their generating parameters (what a profile estimates), and those parameters shape the audio: the
floor-transfer offset before their reply, their intra-turn pause, their speaking rate (espeak-ng
words per minute; the articulation rate is that rate times `SYLLABLES_PER_WORD`), the
floor-holding device their hold probes use, and whether a feedback token from the other speaker
appears in their pause. Gender picks the voice variant, first-language region the espeak-ng
accent (a proxy only), age band is metadata. SNR: white noise added to the focal channel at 15 dB
(mid) or 8 dB (low); high is clean.

Annotations: K annotators (3, 3, 3, 4 or 5; median 3) label each episode by drawing from the
probe's documented label distribution `LABEL_CONFUSION[true intent]`; each rates silence
acceptability as the beta of their own label plus N(0, 0.1) noise, clipped to [0, 1]; marks one
acceptable onset window, the central 80% of their label's onset law with N(0, 0.1) jitter at
each end; and marks each true completion point (the end of every complete focal sentence, and
the decision point for ans, ref, rhe and abn probes) with probability 0.85 and N(0, 0.05)
jitter. The human continuation is drawn from the reference law of the true intent (onset, or
none with probability beta) with a log-normal duration (`HUMAN_DURATION_MEDIAN_S`, log-sd 0.5),
followed up to `measure.LENGTH_HORIZON_S` after the decision point (version 1 cut it at T_h).

Everything is a function of (seed, episode index): episode i is the same whatever the size, so a
smaller set is a prefix of a larger one.
"""

from __future__ import annotations

import logging
import math
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import numpy as np
from tqdm import tqdm

from fdeval.audio.io import write_wav
from fdeval.audio.tts import EspeakTTS
from fdeval.audio.vad import SileroVAD

from .episodes import (
    Annotations,
    Episode,
    HistoryLine,
    HumanContinuation,
    ReplayTurn,
    SpeakerProfile,
    episode_files,
    write_episode,
)
from .laws import DOMAIN_S, reference_law
from .measure import LENGTH_HORIZON_S
from .profiles import vad_segments
from .scoring import CATEGORIES

log = logging.getLogger("fdeval")

GENERATOR_VERSION = "2"
N_SPEAKERS = 18  # two genders x a 9-row orthogonal array of (age band, region, rate tercile)
SYLLABLES_PER_WORD = 1.4
RATES_WPM = {"slow": 140, "mid": 165, "fast": 195}
REGION_VOICES = {"north_america": "en-us", "british_isles": "en", "caribbean": "en-029"}
# Variants without espeak-ng's "breath" noise (f2, f3 have it, seeded from the clock), so that the
# audio is bit-identical run to run.
GENDER_VARIANTS = {"f": "+f4", "m": "+m3"}
OTHER_VOICES = {"f": "en-us+m1", "m": "en-us+f1"}  # the other speaker: opposite-gender voice
AGE_BANDS = ("18-29", "30-49", "50+")
SNR_DB = {"high": None, "mid": 15.0, "low": 8.0}
SNR_SHARES = {"high": 0.5, "mid": 0.3, "low": 0.2}
K_CHOICES = (3, 3, 3, 4, 5)
LEAD_S = 0.1  # silence before the first line

# Intent mix of the probes per category (true intents).
CATEGORY_INTENTS: dict[str, dict[str, float]] = {
    "pause_handling": {"hold": 0.5, "abn": 0.3, "ref": 0.2},
    "backchanneling": {"bck": 0.7, "hold": 0.3},
    "smooth_turn_taking": {"ans": 0.5, "ref": 0.25, "rhe": 0.25},
    "user_interruption": {"ans": 0.5, "hold": 0.25, "abn": 0.25},
}
# Annotator label distribution given the probe's true intent (rows sum to 1).
LABEL_CONFUSION: dict[str, dict[str, float]] = {
    "ans": {"ans": 0.80, "ref": 0.15, "rhe": 0.05},
    "ref": {"ref": 0.70, "ans": 0.20, "hold": 0.10},
    "rhe": {"rhe": 0.70, "ans": 0.20, "ref": 0.10},
    "hold": {"hold": 0.80, "abn": 0.10, "bck": 0.10},
    "bck": {"bck": 0.75, "hold": 0.20, "ans": 0.05},
    "abn": {"abn": 0.70, "hold": 0.20, "ref": 0.10},
}
COMPLETE_AT_DECISION = {"ans", "ref", "rhe", "abn"}
HUMAN_DURATION_MEDIAN_S = {"ans": 2.5, "ref": 3.5, "rhe": 2.0, "hold": 1.5, "bck": 1.1, "abn": 3.0}

LEAD_INS = (
    "So, how was your weekend?",
    "What happened after that?",
    "How is the new job going?",
    "Tell me about the trip.",
)
REPLIES = (
    "Well, it was a pretty busy one.",
    "Honestly, it went better than I expected.",
    "Oh, it was quite a day.",
    "So, a lot has happened since then.",
)
FEEDBACK_TOKEN = "yeah"
PROBES: dict[tuple[str, str], tuple[str, ...]] = {
    ("pause_handling", "hold/filled_pause"): (
        "So the first thing I did was, um",
        "And then what we decided was, uh",
        "The reason I bring it up is, um",
    ),
    ("pause_handling", "hold/trailing_conjunction"): (
        "So I called the landlord again, and",
        "We tried the new place last week, but",
        "I had the whole thing planned out, so",
    ),
    ("pause_handling", "abn"): (
        "I was going to say that maybe the, well, never mind.",
        "It's just that, I don't know.",
        "And the other thing was, oh, forget it.",
    ),
    ("pause_handling", "ref"): (
        "I wonder what you would have done in my place.",
        "Honestly, how would you even start with something like that?",
    ),
    ("backchanneling", "bck"): (
        "So we drove all the way up to the lake, you know,",
        "And the whole team was waiting outside, right,",
        "So I get to the counter, and she looks at me,",
    ),
    ("backchanneling", "hold/filled_pause"): (
        "We packed bread, cheese, some fruit, and, uh",
        "First we went to the market, then to the, um",
    ),
    ("backchanneling", "hold/trailing_conjunction"): (
        "We packed bread, cheese, some fruit, and",
        "First we went to the market, and then",
    ),
    ("smooth_turn_taking", "ans"): (
        "What time does the pharmacy open tomorrow?",
        "Did you already send the invoice to them?",
        "Which train should I take to get there?",
        "Are you free on Thursday afternoon?",
    ),
    ("smooth_turn_taking", "ref"): (
        "What would you say was the biggest lesson from all of that?",
        "How do you think things will look ten years from now?",
        "If you could change one thing about your job, what would it be?",
    ),
    ("smooth_turn_taking", "rhe"): (
        "I mean, who has time for that these days, right?",
        "But then again, what can you do?",
        "Isn't it funny how these things work out?",
    ),
    ("user_interruption", "ans"): (
        "Wait, sorry, is that per month or per year?",
        "Hold on, which one do you mean?",
        "Sorry, what was that last part?",
    ),
    ("user_interruption", "hold/filled_pause"): (
        "No, no, let me finish, because the thing is, um",
        "Hang on, I wasn't done, what I mean is, uh",
    ),
    ("user_interruption", "hold/trailing_conjunction"): (
        "No, no, let me finish, because",
        "Hang on, I wasn't done, and",
    ),
    ("user_interruption", "abn"): (
        "Oh, but I thought, never mind, go on.",
        "Sorry, I, no, carry on.",
    ),
}
PROMPTS = (
    (
        "Can you explain how compound interest works?",
        "Sure. Compound interest means you earn interest on the interest you already have, so every year the "
        "balance grows a little faster than the year before, and over a long time that adds up to a lot.",
    ),
    (
        "How should I get started with running?",
        "Good question. Start with short easy runs three times a week, mix in some walking, and add a few "
        "minutes each week so your body has time to adapt before you push the distance.",
    ),
    (
        "What's the best way to learn to cook?",
        "I would pick five simple dishes you actually like, cook each of them a few times until you know them "
        "by heart, and then start changing one ingredient at a time to see what happens.",
    ),
)


@dataclass(frozen=True)
class SyntheticSpeaker:
    speaker_id: str
    gender: str
    age_band: str
    l1_region: str
    rate: str  # slow | mid | fast
    profile: SpeakerProfile
    device: str  # the floor-holding device their hold probes use

    @property
    def voice(self) -> str:
        return REGION_VOICES[self.l1_region] + GENDER_VARIANTS[self.gender]

    @property
    def rate_wpm(self) -> int:
        return RATES_WPM[self.rate]


def speaker_design(j: int) -> tuple[str, str, str, str]:
    """(gender, age band, region, rate) of pool member j: members 0-8 are women, 9-17 men, and
    within each gender (age, region) runs over all 9 pairs with the rate from a Latin square
    ((age + region) mod 3 for women, (age + 2 region) mod 3 for men). Every pair of the four
    attributes is crossed, and the rate is no function of gender, age or region over the pool."""
    g, k = divmod(j % 18, 9)
    a, b = divmod(k, 3)
    rate = (a + b) % 3 if g == 0 else (a + 2 * b) % 3
    return ("f", "m")[g], AGE_BANDS[a], list(REGION_VOICES)[b], ("slow", "mid", "fast")[rate]


def synthetic_speakers(seed: int, n: int = N_SPEAKERS) -> list[SyntheticSpeaker]:
    """The speaker pool of a seed: slice attributes from `speaker_design`, behaviour drawn."""
    rng = np.random.default_rng([seed, 1_000_003])
    out = []
    for j in range(n):
        g, age, region, rate = speaker_design(j)
        fto = float(rng.uniform(0.05, 0.5))
        pause = float(rng.uniform(0.25, 0.9))
        devices = {
            "filled_pause": float(rng.uniform(0.0, 4.0)),
            "trailing_conjunction": float(rng.uniform(0.0, 3.0)),
        }
        profile = SpeakerProfile(
            evidence_min=float(rng.uniform(8.0, 20.0)),
            fto_median_s=fto,
            fto_p10_s=fto - 0.3,
            fto_p90_s=fto + 0.5,
            pause_median_s=pause,
            pause_p90_s=2.0 * pause,
            abstention_tolerance_s=float(rng.uniform(0.8, 2.5)),
            backchannel_solicitation_per_min=float(rng.uniform(1.0, 8.0)),
            backchannel_production_per_min=float(rng.uniform(1.0, 10.0)),
            articulation_rate_syl_s=RATES_WPM[rate] * SYLLABLES_PER_WORD / 60.0,
            floor_holding_per_min=devices,
        )
        out.append(
            SyntheticSpeaker(
                f"synspk{j:02d}", g, age, region, rate, profile, max(devices, key=devices.get)
            )
        )
    return out


@dataclass(frozen=True)
class Line:
    """One synthesized line placed on the context clock (seconds from the context start)."""

    speaker: str  # focal | other
    text: str
    start_s: float


@dataclass
class EpisodePlan:
    index: int
    episode_id: str
    category: str
    intent: str
    speaker: SyntheticSpeaker
    focal_channel: int
    snr: str
    rng_seed: list[int]
    probe: str = ""
    lines: list[Line] = field(default_factory=list)  # placed once audio lengths are known
    meta: dict[str, Any] = field(default_factory=dict)


def _choice(rng: np.random.Generator, shares: dict[str, float]) -> str:
    keys = list(shares)
    p = np.array([shares[k] for k in keys])
    return keys[int(rng.choice(len(keys), p=p / p.sum()))]


def plan_episode(seed: int, index: int, speakers: list[SyntheticSpeaker]) -> EpisodePlan:
    """Everything about episode `index` that needs no audio."""
    rng = np.random.default_rng([seed, index])
    category = CATEGORIES[index % len(CATEGORIES)]
    intent = _choice(rng, CATEGORY_INTENTS[category])
    speaker = speakers[int(rng.integers(len(speakers)))]
    key = (category, f"hold/{speaker.device}" if intent == "hold" else intent)
    probe = PROBES[key][int(rng.integers(len(PROBES[key])))]
    snr = _choice(rng, SNR_SHARES)
    return EpisodePlan(
        index,
        f"tact-s{seed}-{index:04d}",
        category,
        intent,
        speaker,
        index % 2,
        snr,
        [seed, index, 7],
        probe,
    )


def _texts(plan: EpisodePlan) -> list[tuple[str, str, int, str]]:
    """(voice, text, rate_wpm, speaker) of every line the episode needs, in order."""
    sp, rng = plan.speaker, np.random.default_rng(plan.rng_seed)
    other = OTHER_VOICES[sp.gender]
    if plan.category == "user_interruption":
        prompt, answer = PROMPTS[int(rng.integers(len(PROMPTS)))]
        return [
            (sp.voice, prompt, sp.rate_wpm, "focal"),
            (other, answer, 165, "other"),
            (sp.voice, plan.probe, sp.rate_wpm, "focal"),
        ]
    out = [
        (other, LEAD_INS[int(rng.integers(len(LEAD_INS)))], 165, "other"),
        (sp.voice, REPLIES[int(rng.integers(len(REPLIES)))], sp.rate_wpm, "focal"),
    ]
    if sp.profile.backchannel_solicitation_per_min >= 4.0:
        out.append((other, FEEDBACK_TOKEN, 165, "other"))
    out.append((sp.voice, plan.probe, sp.rate_wpm, "focal"))
    return out


class _Synth:
    """espeak-ng syntheses keyed by (voice, rate, text), made once, in parallel."""

    def __init__(self, sample_rate: int):
        self.sample_rate, self.cache = sample_rate, {}

    def prepare(self, keys: set[tuple[str, int, str]], workers: int, progress: bool) -> None:
        todo = sorted(k for k in keys if k not in self.cache)

        def one(k):
            voice, rate, text = k
            return k, EspeakTTS(
                voice=voice, rate_wpm=rate, sample_rate=self.sample_rate
            ).synthesize(text)

        with ThreadPoolExecutor(max(1, workers)) as pool:
            for k, syn in tqdm(
                pool.map(one, todo),
                total=len(todo),
                desc="tts",
                disable=not progress or len(todo) < 2,
                leave=False,
            ):
                self.cache[k] = syn

    def __getitem__(self, k):
        return self.cache[k]


def _place(x: np.ndarray, at_n: int, total: np.ndarray) -> None:
    n = min(len(x), len(total) - at_n)
    if n > 0:
        total[at_n : at_n + n] += x[:n]


def _annotations(
    rng: np.random.Generator, intent: str, context_s: float, complete_points: list[float]
) -> Annotations:
    """K synthetic annotators' labels, ratings, windows and marks (rules in the module docstring)."""
    k = int(rng.choice(K_CHOICES))
    labels = tuple(_choice(rng, LABEL_CONFUSION[intent]) for _ in range(k))
    silence, windows, marks = [], [], []
    for z in labels:
        law = reference_law(z)
        silence.append(float(np.clip(law.no_response_mass + rng.normal(0.0, 0.1), 0.0, 1.0)))
        lo_q, hi_q = law.base.cdf(DOMAIN_S[0]), law.base.cdf(DOMAIN_S[1])
        q10, q90 = law.base.ppf(lo_q + (hi_q - lo_q) * np.array([0.1, 0.9]))
        lo = float(np.clip(q10 + rng.normal(0, 0.1), *DOMAIN_S))
        hi = float(np.clip(q90 + rng.normal(0, 0.1), *DOMAIN_S))
        windows.append(((round(lo, 4), round(hi, 4)),) if hi > lo + 0.01 else ())
        m = sorted(
            round(float(np.clip(t + rng.normal(0, 0.05), -context_s, 0.0)), 4)
            for t in complete_points
            if rng.random() < 0.85
        )
        marks.append(tuple(m))
    return Annotations(labels, tuple(silence), tuple(windows), tuple(marks))


@dataclass(frozen=True)
class _Layout:
    """Where an episode's lines go on the context clock (seconds from the context start)."""

    placed: tuple[tuple[str, int, float], ...]  # (speaker, index into _texts(plan), start)
    replay_spans: tuple[
        tuple[str, float, float, float | None], ...
    ]  # kind, start, end, barge-in delay
    complete: tuple[float, ...]  # completion points
    decision_s: float
    meta: dict[str, Any]


def _layout(plan: EpisodePlan, lengths_s: list[float], rng: np.random.Generator) -> _Layout:
    """Place the lines of `_texts(plan)`, each `lengths_s[i]` long; draws the timing from `rng`."""
    sp = plan.speaker.profile
    placed: list[tuple[str, int, float]] = []
    complete: list[float] = []
    meta: dict[str, Any] = {}
    if plan.category == "user_interruption":
        prompt, _, cut = lengths_s
        t = LEAD_S
        placed.append(("focal", 0, t))
        prompt_end = t + prompt
        complete.append(prompt_end)
        ans_start = prompt_end + 0.3
        placed.append(("other", 1, ans_start))
        after = float(rng.uniform(1.2, 2.2))
        cut_start = ans_start + after
        placed.append(("focal", 2, cut_start))
        decision = cut_start + cut
        replay_spans = [
            ("take-turn", 0.0, min(prompt_end + 0.05, cut_start), None),
            ("barge-in", cut_start, decision, after),
        ]
    else:
        t = LEAD_S
        placed.append(("other", 0, t))
        fto = float(np.clip(rng.normal(sp.fto_median_s, 0.15), 0.05, 1.0))
        reply_start = t + lengths_s[0] + fto
        placed.append(("focal", 1, reply_start))
        reply_end = reply_start + lengths_s[1]
        complete.append(reply_end)
        pause = float(np.clip(sp.pause_median_s * math.exp(rng.normal(0.0, 0.3)), 0.15, 1.6))
        if len(lengths_s) == 4 and pause >= 0.5:  # the other speaker's feedback token in the pause
            placed.append(("other", 2, reply_end + 0.1))
        probe_start = reply_end + pause
        placed.append(("focal", len(lengths_s) - 1, probe_start))
        decision = probe_start + lengths_s[-1]
        replay_spans = [("take-turn", 0.0, decision, None)]
        meta = {"fto_s": round(fto, 4), "pause_s": round(pause, 4)}
    if plan.intent in COMPLETE_AT_DECISION:
        complete.append(decision)
    return _Layout(tuple(placed), tuple(replay_spans), tuple(complete), decision, meta)


def planned_replay(
    plan: EpisodePlan, estimate_s: Callable[[str, int, str], float]
) -> tuple[tuple[ReplayTurn, str], ...]:
    """The episode's replay pieces without audio (`stage=plan`), each line as long as
    `estimate_s(voice, rate_wpm, text)` says, with the focal text each piece carries; the
    timing draws are `render_episode`'s."""
    texts = _texts(plan)
    lay = _layout(
        plan,
        [estimate_s(v, r, t) for v, t, r, _ in texts],
        np.random.default_rng(plan.rng_seed + [1]),
    )
    out = []
    for k, (kind, a, b, after) in enumerate(lay.replay_spans):
        said = " ".join(
            texts[i][1] for who, i, start in lay.placed if who == "focal" and a <= start < b
        )
        out.append(
            (
                ReplayTurn(
                    kind,
                    f"audio/{plan.episode_id}.turn{k}.wav",
                    round(a - lay.decision_s, 6),
                    round(b - lay.decision_s, 6),
                    None if after is None else round(after, 4),
                ),
                said,
            )
        )
    return tuple(out)


def render_episode(plan: EpisodePlan, synth: _Synth, root: Path, vad=None) -> Episode:
    """Synthesize, place and mix the episode's lines, write its audio, and build the Episode."""
    sr = synth.sample_rate
    rng = np.random.default_rng(plan.rng_seed + [1])
    texts = _texts(plan)
    syn = [synth[(v, r, t)] for v, t, r, _ in texts]
    lay = _layout(plan, [x.duration_s for x in syn], rng)
    placed = [(who, syn[i], start) for who, i, start in lay.placed]  # (speaker, synthesis, start)
    replay_spans, complete, decision = lay.replay_spans, list(lay.complete), lay.decision_s
    plan.meta.update(lay.meta)
    n = int(round(decision * sr))
    decision = n / sr
    chans = {"focal": np.zeros(n, np.float32), "other": np.zeros(n, np.float32)}
    for who, s, start in placed:
        _place(s.samples, int(round(start * sr)), chans[who])
    focal_clean = chans["focal"].copy()
    snr_db = SNR_DB[plan.snr]
    if snr_db is not None:
        rms = float(
            np.sqrt(
                np.mean(np.concatenate([s.samples for who, s, _ in placed if who == "focal"]) ** 2)
            )
        )
        noise = np.random.default_rng(plan.rng_seed + [2]).normal(0.0, rms / 10 ** (snr_db / 20), n)
        chans["focal"] = (chans["focal"] + noise).astype(np.float32)
    stereo = np.zeros((n, 2), np.float32)
    stereo[:, plan.focal_channel] = chans["focal"]
    stereo[:, 1 - plan.focal_channel] = chans["other"]
    eid = plan.episode_id
    write_wav(root / "audio" / f"{eid}.wav", stereo, sr)
    rel = lambda t: round(t - decision, 4)  # noqa: E731
    replay = []
    for k, (kind, a, b, after) in enumerate(replay_spans):
        i0, i1 = int(round(a * sr)), int(round(b * sr))
        path = f"audio/{eid}.turn{k}.wav"
        write_wav(root / path, chans["focal"][i0:i1], sr)
        replay.append(
            ReplayTurn(
                kind,
                path,
                round(i0 / sr - decision, 6),
                round(i1 / sr - decision, 6),
                None if after is None else round(after, 4),
            )
        )
    focal_speech = tuple(
        (rel(a), rel(min(b, decision)))
        for a, b in vad_segments(focal_clean, sr, vad)
        if a < decision
    )
    focal_speech = tuple((a, b) for a, b in focal_speech if b > a)
    history = []
    for who, s, start in sorted(placed, key=lambda p: p[2]):
        words = [w for w in s.words if start + w.start_s < decision - 1e-6]
        if not words:
            continue
        end = min(start + words[-1].end_s, decision)
        history.append(
            HistoryLine(
                who, " ".join(w.text for w in words), rel(start + words[0].start_s), rel(end)
            )
        )
    context_s = decision
    ann = _annotations(rng, plan.intent, context_s, [rel(t) for t in complete])
    law = reference_law(plan.intent)
    onset = float(law.sample(rng, 1)[0])
    human = HumanContinuation(None, None)
    if math.isfinite(onset):
        dur = float(rng.lognormal(math.log(HUMAN_DURATION_MEDIAN_S[plan.intent]), 0.5))
        human = HumanContinuation(round(onset, 4), round(min(dur, LENGTH_HORIZON_S - onset), 4))
    spk = plan.speaker
    slices = {
        "gender": spk.gender,
        "age_band": spk.age_band,
        "l1_region": spk.l1_region,
        "snr": plan.snr,
        "rate_tercile": spk.rate,
    }
    meta = {
        "generator": f"tact-synthetic-{GENERATOR_VERSION}",
        "true_intent": plan.intent,
        "probe": plan.probe,
        "snr_db": snr_db,
        "voice": spk.voice,
        "rate_wpm": spk.rate_wpm,
        **plan.meta,
    }
    ep = Episode(
        eid,
        "synthetic",
        plan.category,
        f"audio/{eid}.wav",
        plan.focal_channel,
        sr,
        round(context_s, 6),
        tuple(replay),
        focal_speech,
        tuple(history),
        spk.speaker_id,
        spk.profile,
        ann,
        slices,
        plan.category,
        "test",
        None,
        human,
        meta,
    )
    write_episode(ep, root)
    return ep


def generate_synthetic(
    root: str | Path,
    n_episodes: int,
    seed: int,
    sample_rate: int = 16000,
    workers: int = 2,
    progress: bool = False,
) -> int:
    """Write `n_episodes` synthetic episodes under `root`; episodes already written are kept.

    Returns how many were written now.
    """
    root = Path(root)
    done = {p.stem for p in episode_files(root)} if (root / "episodes").is_dir() else set()
    speakers = synthetic_speakers(seed)
    plans = [plan_episode(seed, i, speakers) for i in range(n_episodes)]
    plans = [p for p in plans if p.episode_id not in done]
    if not plans:
        return 0
    synth = _Synth(sample_rate)
    synth.prepare({(v, r, t) for p in plans for v, t, r, _ in _texts(p)}, workers, progress)
    vad = SileroVAD()
    for p in tqdm(plans, desc="episodes", disable=not progress or len(plans) < 2, leave=False):
        render_episode(p, synth, root, vad)
    return len(plans)


__all__ = [
    "CATEGORY_INTENTS",
    "GENERATOR_VERSION",
    "LABEL_CONFUSION",
    "PROBES",
    "generate_synthetic",
    "plan_episode",
    "planned_replay",
    "speaker_design",
    "synthetic_speakers",
]
