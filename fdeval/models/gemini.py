"""Gemini Live (native audio) through the google-genai SDK's Live API client.

What the adapter does, checked against google-genai 3.x (`google/genai/live.py`, `types.py`) and
the Live API guides:

- `genai.Client(api_key=KEY, http_options=HttpOptions(api_version=...))`, then
  `client.aio.live.connect(model=MODEL, config=LiveConnectConfig(...))`: one WebSocket
  (`BidiGenerateContent`) per session; the SDK sends the `setup` message and waits for
  `setupComplete`. The config: `response_modalities=["AUDIO"]`, the system instruction, the
  prebuilt voice (Instruct-FD A.8: Zephyr), `proactivity=ProactivityConfig(proactive_audio=True)`
  (the model may choose not to answer), input and output audio transcription, and
  `realtime_input_config` (default here: the server's automatic activity detection on, a user
  activity start interrupts the model: the API's defaults, written out so they are recorded).
- user audio: `send_realtime_input(audio=Blob(data=PCM16 LE, mime_type="audio/pcm;rate=16000"))`
  every frame (silence too: the server-side VAD needs the stream).
- server messages: `server_content.model_turn.parts[].inline_data` = PCM16 at 24 kHz
  (`audio/pcm;rate=24000`), sent faster than real time -> audio events, resampled to 16 kHz in
  the adapter (`DuplexModel` has one `sample_rate`, 16 kHz here); `server_content.
  output_transcription.text` -> text events, in arrival order with the audio, so a piece is
  placed where the audio received after it starts playing; `server_content.interrupted` (the
  server's VAD heard the user barge in) -> `ModelEvent("interrupted")`; `go_away` is logged.
  The SDK's `session.receive()` ends at each `turn_complete`, so it is called in a loop.
- text rule `text_stream = "pieces"`: the transcription deltas are fragments of one string
  ("Met", "amo", "rph" are seen), which Live API clients concatenate.
- the API key comes from the environment only, `GOOGLE_API_KEY` or `GEMINI_API_KEY` (the SDK's
  own order: the first wins when both are set); it is never read from the config, never part of
  the identity, never logged. Without one the model cannot be built: a one-line `ConfigError`.

The model id: A.8 names "gemini-2.5-flash" via the Live API; the Live API's native-audio 2.5 Flash
model for API keys is `gemini-2.5-flash-native-audio-preview-12-2025` (preview ids change: set
`model=` to the one current for your key). Proactive audio was documented on `v1alpha`, hence
`api_version: v1alpha`.

Tested with the real SDK against a local stand-in WebSocket server speaking the Live API's
BidiGenerateContent JSON (`tests/models/fake_servers_gemini.py`, reached through
`http_options.base_url`), not against Google's service or model.
"""

from __future__ import annotations

import asyncio
import logging
import os
import re
import time
from typing import Any

import numpy as np

from fdeval.audio.resample import StreamResampler
from fdeval.errors import ConfigError
from fdeval.models.base import ModelEvent
from fdeval.models.network import (
    KeyMask,
    NetworkModel,
    NetworkSession,
    ServerConnectionError,
    plain,
)

log = logging.getLogger("fdeval")

INPUT_RATE = 16000
OUTPUT_RATE = 24000
KEY_VARIABLES = ("GOOGLE_API_KEY", "GEMINI_API_KEY")
DEFAULT_MODEL = "gemini-2.5-flash-native-audio-preview-12-2025"
DEFAULT_REALTIME_INPUT = {
    "automatic_activity_detection": {"disabled": False},
    "activity_handling": "START_OF_ACTIVITY_INTERRUPTS",
}


class GeminiLiveError(ServerConnectionError):
    """The Live API refused or dropped the session (an infrastructure error)."""


def _api_key() -> str:
    for var in KEY_VARIABLES:
        if os.environ.get(var):
            return os.environ[var]
    raise ConfigError(
        "gemini: no API key: set GEMINI_API_KEY (or GOOGLE_API_KEY) in the environment "
        "(it is never read from the config)"
    )


_KEYS = KeyMask(KEY_VARIABLES, patterns=(r"([?&]key=)[^&\s]+",))
_MASKED_LOGGERS = (
    "websockets.client",
    "websockets.protocol",
    "websockets",
    "google_genai",
    "google_genai.live",
    "httpx",
    "httpcore",
)


class GeminiLive(NetworkModel):
    """A Gemini Live API model (hosted: no server to launch, no pool)."""

    sample_rate = INPUT_RATE
    frame_s = 0.04
    clock = "realtime"
    text_stream = "pieces"
    client_modules = ("google.genai",)
    client_extra = "gemini"
    env_keys = KEY_VARIABLES

    def __init__(
        self,
        name: str = "gemini",
        model: str = DEFAULT_MODEL,
        voice: str | None = "Zephyr",
        base_prompt: str | None = None,
        proactive_audio: bool = True,
        input_transcription: bool = True,
        output_transcription: bool = True,
        realtime_input_config: dict[str, Any] | None = None,
        api_version: str | None = "v1alpha",
        http_options: dict[str, Any] | None = None,
        connect_timeout_s: float = 30.0,
        turn_silence_s: float | None = None,
        server: dict[str, Any] | None = None,
    ):
        self.name = name
        self.require_clients()
        _api_key()  # fail at once, naming the variable
        _KEYS.install(_MASKED_LOGGERS)
        self.model = model
        self.voice = voice
        self.base_prompt = base_prompt
        self.proactive_audio = bool(proactive_audio)
        self.input_transcription, self.output_transcription = (
            bool(input_transcription),
            bool(output_transcription),
        )
        ric = plain(realtime_input_config)
        self.realtime_input_config = dict(DEFAULT_REALTIME_INPUT if ric is None else ric)
        self.api_version = api_version
        self.http_options = dict(
            plain(http_options) or {}
        )  # e.g. base_url of a proxy; tests use a local server
        self.connect_timeout_s = float(connect_timeout_s)
        self.turn_silence_s = turn_silence_s
        self.server = plain(server)  # always null: a hosted API

    def sdk(self) -> tuple[Any, Any]:
        """google.genai and google.genai.types."""
        return self.client_module("google.genai"), self.client_module("google.genai.types")

    def identity(self) -> dict[str, Any]:
        genai, _ = self.sdk()
        return {
            "name": self.name,
            "adapter": "gemini-live",
            "model": self.model,
            "voice": self.voice,
            "base_prompt": self.base_prompt,
            "proactive_audio": self.proactive_audio,
            "input_transcription": self.input_transcription,
            "output_transcription": self.output_transcription,
            "realtime_input_config": self.realtime_input_config,
            "api_version": self.api_version,
            "google_genai": getattr(genai, "__version__", "?"),
            "sample_rate": self.sample_rate,
            "output_sample_rate": OUTPUT_RATE,
            "frame_s": self.frame_s,
        }

    def prompt(self, instruction: str | None) -> str | None:
        if not instruction:
            return self.base_prompt
        return f"{self.base_prompt}\n{instruction}" if self.base_prompt else instruction

    def connect_config(self, instruction: str | None):
        """The LiveConnectConfig of a session (what the SDK sends as `setup`)."""
        _, types = self.sdk()
        kw: dict[str, Any] = {"response_modalities": ["AUDIO"]}
        prompt = self.prompt(instruction)
        if prompt:
            kw["system_instruction"] = prompt
        if self.voice:
            kw["speech_config"] = types.SpeechConfig(
                voice_config=types.VoiceConfig(
                    prebuilt_voice_config=types.PrebuiltVoiceConfig(voice_name=self.voice)
                )
            )
        if self.proactive_audio:
            kw["proactivity"] = types.ProactivityConfig(proactive_audio=True)
        if self.input_transcription:
            kw["input_audio_transcription"] = types.AudioTranscriptionConfig()
        if self.output_transcription:
            kw["output_audio_transcription"] = types.AudioTranscriptionConfig()
        if self.realtime_input_config:
            kw["realtime_input_config"] = types.RealtimeInputConfig(**self.realtime_input_config)
        return types.LiveConnectConfig(**kw)

    def client(self):
        genai, types = self.sdk()
        opts = dict(self.http_options)
        if self.api_version:
            opts.setdefault("api_version", self.api_version)
        return genai.Client(api_key=_api_key(), http_options=types.HttpOptions(**opts))

    def session(self, instruction: str | None, seed: int) -> GeminiLiveSession:
        return GeminiLiveSession(self, instruction)


class GeminiLiveSession(NetworkSession):
    error_type = GeminiLiveError
    send_errors = (Exception,)  # websockets' ConnectionClosed and the SDK's errors
    model: GeminiLive

    def __init__(self, model: GeminiLive, instruction: str | None):
        super().__init__(model)
        self.instruction = instruction
        self._cm: Any = None
        self._live: Any = None
        self._out: dict[int, StreamResampler] = {}
        self._audio_since_flush = False
        self.user_transcript: list[str] = []  # the server's transcription of what it heard
        self.n_interrupted = 0

    def where(self) -> str:
        return f"gemini live ({self.model.model})"

    def describe(self, e: BaseException) -> str:
        return _clean(e)

    async def _connect(self) -> None:
        m = self.model
        self._cm = m.client().aio.live.connect(
            model=m.model, config=m.connect_config(self.instruction)
        )
        try:
            self._live = await asyncio.wait_for(self._cm.__aenter__(), m.connect_timeout_s)
        except Exception as e:  # the SDK raises APIError, websockets' and OS errors
            self._cm = None
            raise self.error(f"cannot open a session ({type(e).__name__}: {_clean(e)})") from None
        self._types = m.sdk()[1]
        self._start_reader()

    async def _read(self) -> None:
        while True:  # the SDK's receive() ends at each turn_complete
            async for msg in self._live.receive():
                self._handle(msg, time.monotonic())

    def _handle(self, msg, arrival: float) -> None:
        sc = msg.server_content
        if sc is not None:
            if sc.interrupted:
                self.n_interrupted += 1
                self._out.clear()
                if self._audio_since_flush:
                    self._audio_since_flush = False
                    self._emit(ModelEvent("interrupted", arrival_mono=arrival))
            if sc.output_transcription is not None and sc.output_transcription.text:
                self._emit(
                    ModelEvent("text", text=sc.output_transcription.text, arrival_mono=arrival)
                )
            if sc.input_transcription is not None and sc.input_transcription.text:
                self.user_transcript.append(sc.input_transcription.text)
            if sc.model_turn is not None:
                for part in sc.model_turn.parts or ():
                    blob = part.inline_data
                    if (
                        blob is None
                        or not blob.data
                        or not (blob.mime_type or "").startswith("audio/pcm")
                    ):
                        continue
                    rate = _rate(blob.mime_type)
                    pcm = np.frombuffer(blob.data, dtype="<i2").astype(np.float32) / 32768.0
                    res = self._out.setdefault(rate, StreamResampler(rate, INPUT_RATE))
                    samples = res.push(pcm)
                    if len(samples):
                        self._audio_since_flush = True
                        self._emit(ModelEvent("audio", audio=samples, arrival_mono=arrival))
        if msg.go_away is not None:
            log.warning(
                "gemini live: the server will close this session soon (time left %s)",
                msg.go_away.time_left,
            )

    async def _send(self, frame: np.ndarray) -> None:
        pcm = (np.clip(np.asarray(frame, dtype=np.float32), -1.0, 1.0) * 32767.0).astype("<i2")
        await self._live.send_realtime_input(
            audio=self._types.Blob(data=pcm.tobytes(), mime_type=f"audio/pcm;rate={INPUT_RATE}")
        )

    async def _disconnect(self) -> None:
        if self._cm is not None:
            await asyncio.wait_for(self._cm.__aexit__(None, None, None), 5.0)


def _rate(mime_type: str) -> int:
    m = re.search(r"rate=(\d+)", mime_type or "")
    return int(m.group(1)) if m else OUTPUT_RATE


def _clean(e: BaseException) -> str:
    """An error's text with any API key in it masked (the SDK puts keys in headers, not URLs,
    but a proxy's or a library's message might echo one)."""
    return _KEYS.mask(str(e))
