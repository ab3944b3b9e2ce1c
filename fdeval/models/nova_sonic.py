"""Amazon Nova 2 Sonic on Bedrock's bidirectional stream (`InvokeModelWithBidirectionalStream`),
through `aws-sdk-bedrock-runtime` (`fdeval[nova]`, pinned) and its CRT transport.

Only that client can stream both ways (boto3 removes the operation: HTTP/2 is needed) and it
requires Python 3.12: on an older interpreter the model cannot be built, in one line that says so.
Credentials come only from AWS's standard chain (environment, `AWS_PROFILE` or `model.profile`,
the shared files), never from the config; the region is a setting (`model.region`), and
`model.endpoint` overrides the service's URL (a proxy, a local stand-in).

The protocol (`NovaProtocol`, plain Python, no SDK): every event is `{"event": {<name>: {...}}}`.
The session opens with `sessionStart` (inference settings, the turn-taking sensitivity),
`promptStart` (text and 24 kHz LPCM audio out, the voice), the system prompt as a SYSTEM text
content, then one USER AUDIO content that stays open for the whole session: every frame is an
`audioInput` (16 kHz LPCM, base64; silence too). It closes with the audio `contentEnd`,
`promptEnd` and `sessionEnd`. The service answers with `completionStart`, per block a
`contentStart` (type, role, `generationStage` SPECULATIVE or FINAL), `textOutput` /
`audioOutput` (24 kHz LPCM, resampled to 16 kHz here), `contentEnd` (`stopReason`), `usageEvent`
and `completionEnd`. The assistant's SPECULATIVE text (what it plans to say, before its audio)
becomes text pieces; its FINAL text (what was actually spoken, after the audio or a barge-in) and
the user's transcript are logged as vendor events.

Barge-in: the service detects it and stops the answer itself, keeping the context; it signals it
with a `{ "interrupted" : true }` assistant text and/or an INTERRUPTED stop reason. Either one
makes the adapter emit `interrupted` once per answer: the orchestrator drops the unplayed audio.
Nova has no truncate: nothing is sent back. Streams close after 8 minutes (`max_session_s`): a
run whose cases could last longer is refused before any session (fdeval.engine.shared).

Not run against the service, nor yet against a stand-in: the SDK needs Python 3.12 and this
project's machines run 3.11 (the protocol half is unit-tested: tests/models/test_nova_protocol.py).
"""

from __future__ import annotations

import asyncio
import base64
import json
import logging
import sys
import time
import uuid
from typing import Any

import numpy as np

from fdeval.audio.resample import StreamResampler
from fdeval.errors import ConfigError
from fdeval.models.base import ModelEvent, ModelUnavailable
from fdeval.models.network import NetworkModel, NetworkSession, ServerConnectionError, plain

log = logging.getLogger("fdeval")

INPUT_RATE = 16000
OUTPUT_RATE = 24000
STREAM_LIMIT_S = 480.0  # "a stream that remains open for 8 minutes" (the SDK's docstring)
BARGE_IN_TEXT = '{ "interrupted" : true }'
# The AWS credential chain reads these: the only secrets a client process of this model is given.
AWS_VARIABLES = (
    "AWS_ACCESS_KEY_ID",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_SESSION_TOKEN",
    "AWS_PROFILE",
    "AWS_CONFIG_FILE",
    "AWS_SHARED_CREDENTIALS_FILE",
    "AWS_REGION",
    "AWS_DEFAULT_REGION",
)
SENSITIVITIES = ("HIGH", "MEDIUM", "LOW")


class NovaServiceError(ServerConnectionError):
    """Bedrock refused the stream or reported an error (infrastructure, never a verdict)."""


class NovaUnavailable(NovaServiceError, ModelUnavailable):
    """Bedrock was busy (throttled, unavailable, timed out) or dropped the stream: retried."""


def require_python(name: str) -> None:
    if sys.version_info < (3, 12):
        v = ".".join(map(str, sys.version_info[:3]))
        raise ConfigError(
            f"model={name} needs Python 3.12 or later (aws-sdk-bedrock-runtime, the only client that "
            f"streams both ways, requires it); this is Python {v}"
        )


class NovaProtocol:
    """Nova Sonic's events for one session, both ways, without a transport: what to send, and
    what the service's events mean (model events, vendor log lines, usage)."""

    def __init__(
        self, instruction: str | None, voice: str, inference: dict[str, Any], endpointing: str
    ):
        self.prompt_name = f"prompt-{uuid.uuid4().hex[:12]}"
        self.audio_name = f"audio-{uuid.uuid4().hex[:12]}"
        self.instruction, self.voice, self.inference, self.endpointing = (
            instruction,
            voice,
            inference,
            endpointing,
        )
        self.blocks: dict[str, dict[str, Any]] = {}  # contentId -> {type, role, stage}
        self.audio_block: str | None = (
            None  # the assistant's latest AUDIO content (the answer being spoken)
        )
        self.interrupted: set[str] = set()  # assistant AUDIO contents a barge-in stopped
        self.dropped_audio_s = 0.0
        self.usage: dict[str, float] = {
            "speech_in": 0,
            "speech_out": 0,
            "text_in": 0,
            "text_out": 0,
        }
        self.resample = StreamResampler(OUTPUT_RATE, INPUT_RATE)

    # -- what the client sends -------------------------------------------------------------------
    @staticmethod
    def event(name: str, body: dict[str, Any]) -> dict[str, Any]:
        return {"event": {name: body}}

    def opening(self) -> list[dict[str, Any]]:
        p = self.prompt_name
        out = [
            self.event(
                "sessionStart",
                {
                    "inferenceConfiguration": self.inference,
                    "turnDetectionConfiguration": {"endpointingSensitivity": self.endpointing},
                },
            ),
            self.event(
                "promptStart",
                {
                    "promptName": p,
                    "textOutputConfiguration": {"mediaType": "text/plain"},
                    "audioOutputConfiguration": {
                        "mediaType": "audio/lpcm",
                        "sampleRateHertz": OUTPUT_RATE,
                        "sampleSizeBits": 16,
                        "channelCount": 1,
                        "voiceId": self.voice,
                        "encoding": "base64",
                        "audioType": "SPEECH",
                    },
                },
            ),
        ]
        if self.instruction:
            name = f"system-{uuid.uuid4().hex[:12]}"
            out += [
                self.event(
                    "contentStart",
                    {
                        "promptName": p,
                        "contentName": name,
                        "type": "TEXT",
                        "interactive": False,
                        "role": "SYSTEM",
                        "textInputConfiguration": {"mediaType": "text/plain"},
                    },
                ),
                self.event(
                    "textInput", {"promptName": p, "contentName": name, "content": self.instruction}
                ),
                self.event("contentEnd", {"promptName": p, "contentName": name}),
            ]
        out.append(
            self.event(
                "contentStart",
                {
                    "promptName": p,
                    "contentName": self.audio_name,
                    "type": "AUDIO",
                    "interactive": True,
                    "role": "USER",
                    "audioInputConfiguration": {
                        "mediaType": "audio/lpcm",
                        "sampleRateHertz": INPUT_RATE,
                        "sampleSizeBits": 16,
                        "channelCount": 1,
                        "audioType": "SPEECH",
                        "encoding": "base64",
                    },
                },
            )
        )
        return out

    def audio(self, frame: np.ndarray) -> dict[str, Any]:
        pcm = (np.clip(np.asarray(frame, dtype=np.float32), -1.0, 1.0) * 32767.0).astype("<i2")
        return self.event(
            "audioInput",
            {
                "promptName": self.prompt_name,
                "contentName": self.audio_name,
                "content": base64.b64encode(pcm.tobytes()).decode("ascii"),
            },
        )

    def closing(self) -> list[dict[str, Any]]:
        p = self.prompt_name
        return [
            self.event("contentEnd", {"promptName": p, "contentName": self.audio_name}),
            self.event("promptEnd", {"promptName": p}),
            self.event("sessionEnd", {}),
        ]

    # -- what the service sends --------------------------------------------------------------------
    def handle(self, message: dict[str, Any], arrival: float) -> list[ModelEvent]:
        """The model events of one service event (`{"event": {name: body}}`)."""
        ((name, body),) = message["event"].items()
        out: list[ModelEvent] = []
        vendor = lambda what, detail="": out.append(  # noqa: E731
            ModelEvent("vendor", text=what, detail=detail, arrival_mono=arrival)
        )
        if name == "completionStart":
            vendor("completionStart", f"completion_id={body.get('completionId')}")
        elif name == "contentStart":
            extra = body.get("additionalModelFields")
            stage = (
                json.loads(extra).get("generationStage")
                if isinstance(extra, str) and extra
                else None
            )
            cid = body.get("contentId", "")
            self.blocks[cid] = {"type": body.get("type"), "role": body.get("role"), "stage": stage}
            if body.get("type") == "AUDIO" and body.get("role") == "ASSISTANT":
                self.audio_block = cid
        elif name == "textOutput":
            block = self.blocks.get(body.get("contentId", ""), {})
            role, text = body.get("role") or block.get("role"), body.get("content", "")
            if role == "ASSISTANT" and text.strip() == BARGE_IN_TEXT:
                self._interrupt(out, arrival)
            elif role == "ASSISTANT" and block.get("stage") == "SPECULATIVE":
                if text:
                    out.append(ModelEvent("text", text=text, arrival_mono=arrival))
            elif role == "ASSISTANT":
                vendor("spoken_text", text[:300])  # FINAL: what the service says was spoken
            elif role == "USER":
                vendor("user_text", text[:300])
        elif name == "audioOutput":
            pcm = (
                np.frombuffer(base64.b64decode(body["content"]), dtype="<i2").astype(np.float32)
                / 32768.0
            )
            if (
                body.get("contentId") in self.interrupted
            ):  # late audio of an answer the user interrupted
                self.dropped_audio_s += len(pcm) / OUTPUT_RATE
                return out
            samples = self.resample.push(pcm)
            if len(samples):
                out.append(
                    ModelEvent(
                        "audio", audio=samples, arrival_mono=arrival, item=body.get("contentId", "")
                    )
                )
        elif name == "contentEnd":
            reason = body.get("stopReason")
            block = self.blocks.get(body.get("contentId", ""), {})
            if reason == "INTERRUPTED" and block.get("role") == "ASSISTANT":
                self._interrupt(out, arrival)
        elif name == "usageEvent":
            delta = (body.get("details") or {}).get("delta") or {}
            for side, key in (("input", "in"), ("output", "out")):
                d = delta.get(side) or {}
                self.usage[f"speech_{key}"] += float(d.get("speechTokens", 0) or 0)
                self.usage[f"text_{key}"] += float(d.get("textTokens", 0) or 0)
        elif name == "completionEnd":
            vendor(
                "completionEnd",
                f"completion_id={body.get('completionId')} stop_reason={body.get('stopReason')}",
            )
        return out

    def _interrupt(self, out: list[ModelEvent], arrival: float) -> None:
        """One `interrupted` per answer, whichever of the two signals comes first."""
        if self.audio_block is None or self.audio_block in self.interrupted:
            return
        self.interrupted.add(self.audio_block)
        out.append(
            ModelEvent(
                "vendor",
                text="interrupted",
                detail=f"content_id={self.audio_block}",
                arrival_mono=arrival,
            )
        )
        out.append(ModelEvent("interrupted", arrival_mono=arrival))


class NovaSonic(NetworkModel):
    """Amazon Nova 2 Sonic (hosted: nothing to launch)."""

    sample_rate = INPUT_RATE
    frame_s = 0.032  # the ~32 ms audio frames the service documents
    clock = "realtime"
    text_stream = "words"  # the SPECULATIVE text comes as whole sentences
    client_modules = (
        "aws_sdk_bedrock_runtime.client",
        "aws_sdk_bedrock_runtime.config",
        "aws_sdk_bedrock_runtime.models",
        "smithy_http.aio.crt",
    )
    client_extra = "nova"
    env_keys = AWS_VARIABLES
    max_session_s = STREAM_LIMIT_S

    def __init__(
        self,
        name: str = "nova_sonic",
        model: str = "amazon.nova-2-sonic-v1:0",
        region: str = "us-east-1",
        profile: str | None = None,
        endpoint: str | None = None,
        voice: str = "matthew",
        base_prompt: str | None = None,
        endpointing_sensitivity: str = "HIGH",
        inference: dict[str, Any] | None = None,
        ca_file: str | None = None,
        concurrency: int = 1,
        case_retries: int = 2,
        connect_timeout_s: float = 30.0,
        prices: dict[str, Any] | None = None,
        turn_silence_s: float | None = None,
        server: dict[str, Any] | None = None,
    ):
        self.name = name
        require_python(name)
        self.require_clients()
        if endpointing_sensitivity not in SENSITIVITIES:
            raise ConfigError(
                f"model.endpointing_sensitivity: one of {', '.join(SENSITIVITIES)}; got {endpointing_sensitivity!r}"
            )
        self.model, self.region, self.profile, self.endpoint = (
            str(model),
            str(region),
            profile,
            endpoint,
        )
        self.voice, self.base_prompt, self.endpointing = voice, base_prompt, endpointing_sensitivity
        self.inference = dict(
            plain(inference) or {"maxTokens": 1024, "topP": 0.9, "temperature": 0.7}
        )
        self.ca_file = ca_file
        self._concurrency = int(concurrency)
        self.case_retries = max(0, int(case_retries))
        self.connect_timeout_s = float(connect_timeout_s)
        self.prices = plain(prices)
        self.turn_silence_s = turn_silence_s
        self.server = plain(server)

    @property  # type: ignore[override]
    def concurrency(self) -> int:
        return self._concurrency

    def identity(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "adapter": "nova-sonic",
            "model": self.model,
            "region": self.region,
            "endpoint": self.endpoint,
            "voice": self.voice,
            "base_prompt": self.base_prompt,
            "endpointing_sensitivity": self.endpointing,
            "inference": self.inference,
            "sample_rate": INPUT_RATE,
            "output_sample_rate": OUTPUT_RATE,
            "frame_s": self.frame_s,
        }

    def prompt(self, instruction: str | None) -> str | None:
        if not instruction:
            return self.base_prompt
        return f"{self.base_prompt}\n{instruction}" if self.base_prompt else instruction

    def transport(self, crt: Any) -> Any:
        """The CRT HTTP/2 client; with `ca_file`, one that trusts that CA bundle (a proxy's, a local
        stand-in's). smithy-http 0.6 has no TLS setting yet, so its TLS context is replaced; a
        release without that attribute is refused in one line rather than silently not trusting."""
        transport = crt.AWSCRTHTTPClient()
        if self.ca_file:
            if not hasattr(transport, "_tls_ctx"):
                raise ConfigError(
                    "model.ca_file: the installed smithy-http has no TLS context to replace "
                    "(AWSCRTHTTPClient._tls_ctx); use the pinned aws-sdk-bedrock-runtime==0.12.0"
                )
            io = self.client_module("awscrt.io")
            opts = io.TlsContextOptions()
            opts.override_default_trust_store_from_path(None, str(self.ca_file))
            transport._tls_ctx = io.ClientTlsContext(opts)
        return transport

    def session(self, instruction: str | None, seed: int) -> NovaSession:
        return NovaSession(
            self,
            NovaProtocol(self.prompt(instruction), self.voice, self.inference, self.endpointing),
        )


class NovaSession(NetworkSession):
    error_type = NovaServiceError
    send_errors = (Exception,)
    model: NovaSonic

    def __init__(self, model: NovaSonic, protocol: NovaProtocol):
        super().__init__(model)
        self.protocol = protocol
        self._stream: Any = None

    def where(self) -> str:
        return f"{self.model.name} (bedrock {self.model.region}, {self.model.model})"

    async def _connect(self) -> None:
        m = self.model
        client_mod, config_mod = (
            m.client_module("aws_sdk_bedrock_runtime.client"),
            m.client_module("aws_sdk_bedrock_runtime.config"),
        )
        models, crt = (
            m.client_module("aws_sdk_bedrock_runtime.models"),
            m.client_module("smithy_http.aio.crt"),
        )
        kw: dict[str, Any] = {"region": m.region, "transport": m.transport(crt)}
        if m.endpoint:
            kw["endpoint_uri"] = m.endpoint
        try:
            cfg = await config_mod.AsyncBedrockRuntimeConfig.resolve(profile=m.profile, **kw)
            client = client_mod.AsyncBedrockRuntimeClient(config=cfg)
            self._stream = await asyncio.wait_for(
                client.invoke_model_with_bidirectional_stream(
                    models.InvokeModelWithBidirectionalStreamOperationInput(model_id=m.model)
                ),
                m.connect_timeout_s,
            )
        except Exception as e:  # credentials, endpoint, TLS: the SDK's and CRT's own errors
            raise NovaUnavailable(
                f"{self.where()}: cannot open the stream ({type(e).__name__}: {e})"
            ) from None
        self._models = models
        for ev in self.protocol.opening():
            await self._put(ev)
        self._start_reader()

    async def _put(self, event: dict[str, Any]) -> None:
        part = self._models.BidirectionalInputPayloadPart(bytes_=json.dumps(event).encode("utf-8"))
        await self._stream.input_stream.send(
            self._models.InvokeModelWithBidirectionalStreamInputChunk(value=part)
        )

    async def _read(self) -> None:
        _, output = await self._stream.await_output()
        while True:
            ev = await output.receive()
            if ev is None:
                raise NovaUnavailable(f"{self.where()}: the service closed the stream")
            value = getattr(ev, "value", None)
            data = getattr(value, "bytes_", None)
            if data is None:  # one of the stream's exception members
                kind = type(ev).__name__.removeprefix("InvokeModelWithBidirectionalStreamOutput")
                busy = kind in (
                    "ThrottlingException",
                    "ServiceUnavailableException",
                    "ModelTimeoutException",
                    "InternalServerException",
                )
                err = NovaUnavailable if busy else NovaServiceError
                raise err(f"{self.where()}: {kind}: {getattr(value, 'message', value)}")
            try:
                message = json.loads(data)
                events = self.protocol.handle(message, time.monotonic())
            except (ValueError, KeyError, TypeError, AttributeError) as e:
                raise self.error(
                    f"malformed event ({type(e).__name__}: {e}): {data[:120]!r}"
                ) from None
            for e in events:
                self._emit(e)

    async def _send(self, frame: np.ndarray) -> None:
        await self._put(self.protocol.audio(frame))

    async def _goodbye(self) -> None:
        for ev in self.protocol.closing():
            await self._put(ev)

    async def _disconnect(self) -> None:
        if self._stream is not None:
            await asyncio.wait_for(self._stream.input_stream.close(), 5.0)

    def report(self) -> dict[str, Any]:
        usage = dict(self.protocol.usage)
        p = self.model.prices
        cost = None
        if p and p.get("usd_per_1k_tokens"):
            r = p["usd_per_1k_tokens"]
            cost = round(sum(usage[k] * float(r.get(k, 0)) for k in usage) / 1000.0, 6)
        return {
            "usage": usage,
            "cost_usd": cost,
            "prices": None if not p else {"date": p.get("date"), "source": p.get("source")},
            "interrupted_answers": len(self.protocol.interrupted),
            "dropped_audio_ms": round(1000 * self.protocol.dropped_audio_s, 3),
        }
