"""Launch NVIDIA's PersonaPlex `moshi.server` (its fork of Moshi) unchanged, with fdeval's patches.

Run with the interpreter of a venv that holds NVIDIA/personaplex's `moshi` package (it installs as
`moshi-personaplex`, is not on PyPI, and imports as `moshi`); this file imports only the standard
library, torch, that package and its dependency huggingface_hub:

    <personaplex-venv>/bin/python fdeval/models/personaplex_launch.py --port P --static none \\
        --voice-prompt-dir DIR [--moshi-weight F --mimi-weight F --tokenizer F] [--device cpu] ...

Everything on the command line goes to `moshi.server` as is; its `main()` runs with the seed it sets
itself (`seed_all(42424242)` once at start). Before it starts, this launcher patches, each only
when asked:
- offline local files: when --moshi-weight, --mimi-weight and --tokenizer are all given, the
  server's one unconditional hub call, `hf_hub_download(<hf-repo>, "config.json")` (made only to
  count a download; the file is never read), returns None without reaching the hub. Every other
  hub call goes through unchanged (give --voice-prompt-dir and --static none to avoid them);
- decoding: FDEVAL_PERSONAPLEX_LM_GEN = a JSON object of `LMGen` arguments (`temp`, `temp_text`,
  `top_k`, `top_k_text`, `use_sampling`) merged into the server's own `LMGen(...)` construction,
  which passes none of them (its defaults: sampling, temp 0.8, temp_text 0.7, top_k 250,
  top_k_text 25). The fork's `sample_token` takes the argmax when `use_sampling` is false OR the
  temperature is 0, so {"temp": 0, "temp_text": 0} is greedy decoding;
- architecture (tests only): FDEVAL_PERSONAPLEX_ARCH = the path of a JSON object {"lm_kwargs":
  {...}, "mimi": {"seanet": {...}, "transformer": {...}, "quantizer": {...}}} that replaces the
  fork's module-level `loaders._lm_kwargs` / `_seanet_kwargs` / `_transformer_kwargs` /
  `_quantizer_kwargs` (its loaders build the 7B model from them), e.g. the tiny random checkpoint
  of `personaplex_tiny.py` (its get_moshi_lm still forces dep_q 16);
- token log: FDEVAL_PERSONAPLEX_TOKEN_LOG = a path to which every `LMGen.step` / `step_embeddings`
  call appends one JSON line {"session", "phase", "part", "call", "offset", "tokens"}: `session`
  counts `LMGen.reset_streaming` calls (0 = the warmup at start, then one per connection, health
  probes included); `phase` is "warmup", "prompt" (inside `step_system_prompts[_async]`, which the
  server runs before its 0x00 handshake) or "conversation" (after it); `part` names the prompt
  piece ("voice", "silence_after_voice", "text", "silence_after_text"); `offset` is the LMGen
  streaming offset after the call; `tokens` is the step's output, text token then the 16 audio
  tokens (8 of the model's voice, 8 of its user stream), or null while the delays hold it back;
- input log: FDEVAL_PERSONAPLEX_INPUT_LOG = a folder to which the PCM of every conversation frame
  that the server's Mimi encodes (what it decoded from the client's Opus stream, 1920 samples a
  frame) is appended as float32 little-endian, one file per session: `session-<n>.f32`.

The fork's warmup calls torch.cuda.synchronize only on a CUDA device, so `--device cpu` runs on a
torch without CUDA with no patch; the LM loads in bfloat16 (the server passes no dtype).
"""

from __future__ import annotations

import json
import os
import runpy
import sys

import huggingface_hub  # (a dependency of the fork: its server imports hf_hub_download from it)

# Run as a script, this file's folder (fdeval/models, which holds fdeval's own moshi.py) would come
# first on sys.path and shadow the real `moshi` package.
_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != _HERE]

LM_GEN_KEYS = {"use_sampling", "temp", "temp_text", "top_k", "top_k_text"}


def _note(msg: str) -> None:
    print(f"[fdeval] {msg}", file=sys.stderr, flush=True)


def _given(argv: list[str], flag: str) -> bool:
    return any(a == flag or a.startswith(flag + "=") for a in argv)


def apply_arch(path: str) -> None:
    """Replace the fork's module-level architecture dicts with those in the JSON file `path`."""
    from moshi.models import loaders

    with open(path) as f:
        arch = json.load(f)
    loaders._lm_kwargs = dict(arch["lm_kwargs"])
    for key, name in (
        ("seanet", "_seanet_kwargs"),
        ("transformer", "_transformer_kwargs"),
        ("quantizer", "_quantizer_kwargs"),
    ):
        if key in arch.get("mimi", {}):
            setattr(loaders, name, dict(arch["mimi"][key]))
    _note(f"architecture from {path}")


def _offline_config(argv: list[str]) -> None:
    if not all(_given(argv, f) for f in ("--moshi-weight", "--mimi-weight", "--tokenizer")):
        return
    original = huggingface_hub.hf_hub_download

    def hf_hub_download(repo_id, filename, *args, **kwargs):
        # moshi.server fetches "<hf-repo>/config.json" unconditionally, to count a download, and
        # never reads it; with all three model files local, only that call is answered here.
        if filename == "config.json":
            _note(f"skipped hf_hub_download({repo_id!r}, 'config.json'): local model files given")
            return None
        return original(repo_id, filename, *args, **kwargs)

    huggingface_hub.hf_hub_download = hf_hub_download  # server.py imports it from the package


def _decoding(LMGen) -> None:
    overrides = json.loads(os.environ.get("FDEVAL_PERSONAPLEX_LM_GEN", "") or "{}")
    if not overrides:
        return
    unknown = (
        set(overrides) - LM_GEN_KEYS if isinstance(overrides, dict) else {"(not a JSON object)"}
    )
    if unknown:
        raise SystemExit(
            f"FDEVAL_PERSONAPLEX_LM_GEN: unknown LMGen arguments {sorted(unknown)} "
            f"(known: {sorted(LM_GEN_KEYS)})"
        )
    init = LMGen.__init__

    def __init__(self, *args, **kwargs):
        init(self, *args, **{**kwargs, **overrides})
        _note(
            f"LMGen decoding: use_sampling={self.use_sampling} temp={self.temp} temp_text={self.temp_text} "
            f"top_k={self.top_k} top_k_text={self.top_k_text}"
        )

    LMGen.__init__ = __init__


# where the server is: session (LMGen.reset_streaming calls; 0 = the warmup), phase, prompt part
WHERE: dict = {"session": 0, "phase": "warmup", "part": None}


def _track_phases(LMGen) -> None:
    """Keep WHERE up to date by wrapping the LMGen methods that the server's phases call."""
    reset = LMGen.reset_streaming

    def reset_streaming(self, *args, **kwargs):
        WHERE.update(session=WHERE["session"] + 1, phase="prompt", part=None)
        return reset(self, *args, **kwargs)

    LMGen.reset_streaming = reset_streaming

    def part(name: str, label) -> None:
        method = getattr(LMGen, name)

        def enter() -> None:
            WHERE["part"] = label(WHERE["part"]) if callable(label) else label

        async def async_wrapper(self, *args, **kwargs):
            enter()
            return await method(self, *args, **kwargs)

        def wrapper(self, *args, **kwargs):
            enter()
            return method(self, *args, **kwargs)

        setattr(LMGen, name, async_wrapper if name.endswith("_async") else wrapper)

    for suffix in ("", "_async"):
        part(f"_step_voice_prompt{suffix}", "voice")
        part(f"_step_audio_silence{suffix}", lambda previous: f"silence_after_{previous}")
        part(f"_step_text_prompt{suffix}", "text")

    prompts, prompts_async = LMGen.step_system_prompts, LMGen.step_system_prompts_async

    def step_system_prompts(self, *args, **kwargs):
        WHERE.update(phase="prompt", part=None)
        out = prompts(self, *args, **kwargs)
        WHERE.update(phase="conversation", part=None)
        return out

    async def step_system_prompts_async(self, *args, **kwargs):
        WHERE.update(phase="prompt", part=None)
        out = await prompts_async(self, *args, **kwargs)
        WHERE.update(phase="conversation", part=None)  # the server sends its 0x00 handshake next
        return out

    LMGen.step_system_prompts, LMGen.step_system_prompts_async = (
        step_system_prompts,
        step_system_prompts_async,
    )


def _token_log(LMGen, path: str) -> None:
    def logged(name: str) -> None:
        method = getattr(LMGen, name)

        def wrapper(self, *args, **kwargs):
            out = method(self, *args, **kwargs)
            tokens = (
                out[0] if isinstance(out, tuple) else out
            )  # (step(return_embeddings=True): (out, emb))
            row = None if tokens is None else tokens[0, :, 0].tolist()
            with open(path, "a") as f:
                f.write(
                    json.dumps(
                        {
                            **WHERE,
                            "call": name,
                            "offset": int(self._streaming_state.offset),
                            "tokens": row,
                        }
                    )
                    + "\n"
                )
            return out

        setattr(LMGen, name, wrapper)

    logged("step")
    logged("step_embeddings")


def _input_log(folder: str) -> None:
    """Append the PCM of each conversation frame the server's Mimi encodes to
    <folder>/session-<n>.f32 (float32 little-endian, 1920 samples a frame)."""
    from moshi.models import loaders
    from moshi.models.compression import MimiModel

    os.makedirs(folder, exist_ok=True)
    main_mimi: dict = {}
    get_mimi = loaders.get_mimi

    def first_get_mimi(*args, **kwargs):
        model = get_mimi(*args, **kwargs)
        main_mimi.setdefault("model", model)  # the server builds `mimi` first, then `other_mimi`
        return model

    loaders.get_mimi = first_get_mimi
    encode = MimiModel.encode

    def logged_encode(self, x):
        if self is main_mimi.get("model") and WHERE["phase"] == "conversation":
            with open(os.path.join(folder, f"session-{WHERE['session']}.f32"), "ab") as f:
                f.write(x.detach().to("cpu").float().numpy().astype("<f4").tobytes())
        return encode(self, x)

    MimiModel.encode = logged_encode


def patch(argv: list[str]) -> None:
    from moshi.models import lm

    if not hasattr(lm.LMGen, "step_system_prompts"):
        raise SystemExit(
            f"{sys.executable}: its `moshi` ({os.path.dirname(lm.__file__)}) is not NVIDIA's PersonaPlex "
            "fork (no LMGen.step_system_prompts); run this launcher with a venv that has moshi-personaplex"
        )
    arch = os.environ.get("FDEVAL_PERSONAPLEX_ARCH")
    if arch:
        apply_arch(arch)
    _offline_config(argv)
    _decoding(lm.LMGen)
    token_log = os.environ.get("FDEVAL_PERSONAPLEX_TOKEN_LOG")
    input_log = os.environ.get("FDEVAL_PERSONAPLEX_INPUT_LOG")
    if token_log or input_log:
        _track_phases(lm.LMGen)
    if token_log:
        _token_log(lm.LMGen, token_log)
    if input_log:
        _input_log(input_log)


def main() -> None:
    patch(sys.argv[1:])
    sys.argv = ["moshi.server", *sys.argv[1:]]
    runpy.run_module("moshi.server", run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main()
