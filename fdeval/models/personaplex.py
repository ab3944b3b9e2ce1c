"""PersonaPlex (NVIDIA/personaplex, personaplex-7b-v1): NVIDIA's fork of the Moshi server.

PROTOCOL-TESTED ONLY: no PersonaPlex weights are available where fdeval is developed, so this
adapter is tested against a local server that speaks PersonaPlex's protocol as read in
`moshi/moshi/server.py` of NVIDIA/personaplex, never against the real model.

What differs from Moshi (`fdeval.models.moshi`), from that code:
- the query parameters `text_prompt` (the system instruction, may be empty) and `voice_prompt` (a
  file name inside the server's `--voice-prompt-dir`; Instruct-FD uses NATF0) are both required;
- the server runs the voice prompt, silence, the text prompt and silence through the model BEFORE
  it sends the 0x00 handshake, and drops whatever the client sends in that phase: the client
  sends nothing before the handshake, and the handshake can take a while (`handshake_timeout_s`);
- text pieces are sent when a frame is decoded and its audio shortly after by a separate loop, so
  a text piece arrives before its audio (`text_follows_audio = False`);
- `--host` is not passed on by its server (it listens on all interfaces); its `seed` query
  parameter is read from the wrong place in the code read, so no seed is sent.
Checked against the real server on a tiny random checkpoint (tests/models/test_personaplex_server.py):
- an EMPTY text prompt makes the server's handler fail (it iterates `text_prompt_tokens`, None
  for an empty prompt) before the handshake, so the health probe sends a short instruction;
- by default the server is started through `personaplex_launch.py` (placeholder `{launcher}`),
  which hands the decoding (Instruct-FD A.8: temp 0.8, temp_text 0.7, top_k 250, top_k_text 25,
  also the fork's own defaults) to the server's LMGen, which has no flags for them.
Same text rule as Moshi, `text_stream = "pieces"` (its server also sends `id_to_piece`, "▁" -> " ").
Same framing (`fdeval.models.kindbyte`), 24 kHz Ogg/Opus, 80 ms frames, realtime clock; 5.0 s of
model silence completes a turn (Instruct-FD A.8). It must run in its own venv (it installs as
`moshi-personaplex` but imports as `moshi`, pinning an older torch and sphn).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Mapping, Sequence

from fdeval.models.base import server_identity
from fdeval.models.moshi import ADAPTER_VERSION, KindByteServerModel, handshake, hf_revision

LAUNCHER = str(Path(__file__).with_name("personaplex_launch.py"))
# the server fails on an empty text prompt (see the module docstring): the health probe sends this
PROBE_TEXT_PROMPT = "You enjoy having a good conversation."


class PersonaPlex(KindByteServerModel):
    text_follows_audio = False

    def __init__(
        self,
        name: str = "personaplex",
        turn_silence_s: float | None = 5.0,
        server: Mapping[str, Any] | None = None,
        voice_prompt: str = "NATF0.pt",
        hf_repo: str | None = "nvidia/personaplex-7b-v1",
        voice_prompt_dir: str | None = None,
        device: str = "cuda",
        extra_args: Sequence[str] = (),
        host: str | None = "127.0.0.1",
        port: int | None = None,
        handshake_timeout_s: float = 900.0,
        case_retries: int = 2,
        checkpoint_label: str | None = None,
        temp: float = 0.8,
        temp_text: float = 0.7,
        top_k: int = 250,
        top_k_text: int = 25,
    ):
        self.voice_prompt = voice_prompt
        self.hf_repo, self.voice_prompt_dir, self.device = hf_repo, voice_prompt_dir, device
        self.extra_args = [str(a) for a in extra_args]
        self.decoding = {
            "temp": float(temp),
            "temp_text": float(temp_text),
            "top_k": int(top_k),
            "top_k_text": int(top_k_text),
        }
        super().__init__(
            name,
            turn_silence_s,
            server,
            host,
            port,
            handshake_timeout_s,
            case_retries,
            checkpoint_label=checkpoint_label,
        )

    def _init_server(self, server, host, port, probe, placeholders=None, **kwargs) -> None:
        # `{launcher}` in server.command is PersonaPlex's launcher, not Moshi's
        super()._init_server(
            server,
            host,
            port,
            probe,
            placeholders={**(placeholders or {}), "launcher": LAUNCHER},
            **kwargs,
        )

    def server_args(self) -> list[str]:
        args: list[str] = []
        if self.hf_repo:
            args += ["--hf-repo", self.hf_repo]
        if self.voice_prompt_dir:
            args += ["--voice-prompt-dir", self.voice_prompt_dir]
        return args + ["--device", self.device, *self.extra_args]

    def server_env(self) -> dict[str, str]:
        return {
            "FDEVAL_PERSONAPLEX_LM_GEN": json.dumps(self.decoding)
        }  # read by personaplex_launch.py

    def query(self, instruction: str | None, seed: int) -> dict[str, str]:
        return {"text_prompt": instruction or "", "voice_prompt": self.voice_prompt}

    async def probe(self, host: str, port: int) -> None:
        await handshake(
            host,
            port,
            self.path,
            self.query(PROBE_TEXT_PROMPT, 0),
            timeout_s=self.handshake_timeout_s,
        )

    def identity(self) -> dict[str, Any]:
        ident: dict[str, Any] = {
            "name": self.name,
            "kind": "personaplex-server",
            "adapter_version": ADAPTER_VERSION,
            "protocol": "websocket /api/chat kind-byte, Ogg/Opus 24 kHz, 80 ms frames, text_prompt + voice_prompt",
            "voice_prompt": self.voice_prompt,
            "turn_silence_s": self.turn_silence_s,
            "tested": "protocol only",
        }
        if (
            self.external is None
        ):  # the client sends the voice prompt; the rest is an external server's own
            ident.update(
                hf_repo=self.hf_repo,
                hf_revision=hf_revision(self.hf_repo) if self.hf_repo else None,
                decoding=self.decoding
                if self._launched()
                else "server defaults (the fork's: temp 0.8, temp_text 0.7, top_k 250, top_k_text 25)",
            )
        return server_identity(ident, self.external, self.checkpoint_label)

    def _launched(self) -> bool:
        """Whether the server command runs personaplex_launch.py (which applies self.decoding)."""
        return self.spec is not None and any(
            "{launcher}" in str(a) or str(a) == LAUNCHER for a in self.spec.command
        )
