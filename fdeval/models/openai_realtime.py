"""OpenAI Realtime (GA) and xAI's Grok Voice Agent over WebSocket, through the openai package's
realtime client (`fdeval[openai-realtime]`).

One adapter speaks both: xAI's Voice Agent API is a dialect of OpenAI's (same event names, same
client), and `dialect` covers what differs: the key variable and endpoint, where `voice` and
`turn_detection` sit in `session.update` (top level for xAI), the first server event
(`conversation.created` for xAI), the sample rates (OpenAI PCM16 at 24 kHz only; xAI 8-48 kHz),
no semantic VAD at xAI, keep-alive `ping` events, and the wording of benign errors.

A session: connect (`client.realtime.connect`, no reconnects: a silent reconnect would start a
new conversation mid-session), wait for the first server event, send `session.update` (the case's
instruction, the voice, PCM16 in and out, the turn detection) and wait for `session.updated`;
then every frame goes out as `input_audio_buffer.append`, silence too (the server's VAD needs the
stream). The reader turns `response.output_audio.delta` into audio events tagged with their item
id, transcript deltas into text pieces (`text_stream = "pieces"`), and keeps the vendor events
that matter in the session log (`ModelEvent("vendor")`: speech started/stopped with the server's
`audio_start_ms` / `audio_end_ms`, response ids and states, truncations, rate limits).

Barge-in: when the server hears the user start (`input_audio_buffer.speech_started`) while the
model's audio is queued or playing, the adapter emits `interrupted`: the orchestrator drops the
unplayed audio and tells the session, from its play record, how many ms of each item were played
(`DuplexSession.flushed`). The adapter then sends `conversation.item.truncate` with exactly that
`audio_end_ms` (an item of which nothing was played is deleted instead), so the server's context
holds what the user heard. With `interrupt_response` on, the server cancels the answer itself;
otherwise the adapter sends `response.cancel`. Audio deltas of a response that was interrupted
arrive late and are dropped (counted in the session report). With `turn_detection: null` the
adapter decides the turns itself with an energy gate on the user's audio: it commits the buffer
and sends `response.create` after `manual_silence_ms` of quiet, and a start of speech during the
answer is a barge-in as above.

Timing: these services send audio faster than real time, so "behind" is not a lag of the stream
as for a frame-per-frame model. A session is behind when an answer's audio stalls: a chunk of an
item arrives after the previous chunk of the same item finished playing, and the listener hears
a gap the model did not mean. The orchestrator measures that (health `model_lag`, per item) and
the usual pacing lag of the user's frames.

Usage and cost: OpenAI's `response.done` carries token usage (summed per session, priced by the
config's `prices` table per million tokens by kind); xAI bills audio minutes sent and received
(silence streamed counts) and item creates. `report()` gives usage, `cost_usd` and the price
table's date and source; the session log keeps it (`model_report`).

Keys come from the environment only (`OPENAI_API_KEY`, `XAI_API_KEY`), are passed to the client
explicitly (so `OPENAI_BASE_URL` and the other key cannot leak in), and are masked in library logs.
Tested with the real SDK against a local stand-in (tests/models/fake_servers_openai_realtime.py),
not against either vendor's service.
"""

from __future__ import annotations

import asyncio
import base64
import inspect
import json
import logging
import math
import os
import re
import time
from dataclasses import dataclass
from typing import Any

import numpy as np

from fdeval.audio.resample import StreamResampler
from fdeval.errors import ConfigError
from fdeval.models.base import ModelEvent, ModelUnavailable, PlayedFlush
from fdeval.models.network import (
    KeyMask,
    NetworkModel,
    NetworkSession,
    ServerConnectionError,
    plain,
)

log = logging.getLogger("fdeval")

SESSION_TYPES = (
    "openai.types.realtime.realtime_session_create_request"  # where the SDK lists deprecated ids
)
PLAY_SLACK_S = (
    0.2  # playback starts on the frame grid: a chunk may end up to a frame later than it arrived
)
WHOLE_TOLERANCE_MS = 2.0
DEFAULT_TURN_DETECTION = {
    "type": "server_vad",
    "threshold": 0.5,
    "prefix_padding_ms": 300,
    "silence_duration_ms": 500,
    "create_response": True,
    "interrupt_response": True,
}


@dataclass(frozen=True)
class Dialect:
    """What differs between OpenAI's Realtime API and a service that speaks a dialect of it."""

    name: str
    key_var: str
    base_url: str
    rates: tuple[int, ...]
    turn_types: tuple[str, ...]
    top_level_audio_fields: bool  # voice and turn_detection at the session's top level
    first_events: tuple[str, ...]
    benign_errors: tuple[str, ...]  # codes or message fragments that need no action


DIALECTS = {
    "openai": Dialect(
        "openai",
        "OPENAI_API_KEY",
        "wss://api.openai.com/v1",
        (24000,),
        ("server_vad", "semantic_vad"),
        False,
        ("session.created",),
        ("response_cancel_not_active",),
    ),
    "xai": Dialect(
        "xai",
        "XAI_API_KEY",
        "wss://api.x.ai/v1",
        (8000, 16000, 21050, 24000, 32000, 44100, 48000),
        ("server_vad",),
        True,
        ("conversation.created", "session.created"),
        ("response_cancel_not_active", "no active response", "already has an active response"),
    ),
}


class RealtimeServiceError(ServerConnectionError):
    """The realtime service refused the session or reported an error (an infrastructure error,
    never a verdict; not retried: a rejected key or a bad setting fails the same way again)."""


class RealtimeUnavailable(RealtimeServiceError, ModelUnavailable):
    """The service was busy (rate limited, HTTP 429 / 5xx) or dropped the connection: the run
    retries the case (`model.case_retries`), then records it as an infrastructure error."""


def sdk_deprecations(module: Any) -> dict[str, str]:
    """Model ids the installed openai package marks deprecated, with their announced shutdown
    date, read from the docstring of the session's `model` field in `module` (the package's
    `types.realtime.realtime_session_create_request`)."""
    try:
        text = inspect.getsource(module)
    except (OSError, TypeError):
        return {}
    out: dict[str, str] = {}
    block = text.partition("Deprecated values:")[2].partition('"""')[0]
    for ids, date in re.findall(
        r"-\s+((?:\"[^\"]+\",?\s*)+):\s*Announced shutdown date:\s*(\d{4}-\d{2}-\d{2})", block
    ):
        for mid in re.findall(r"\"([^\"]+)\"", ids):
            out[mid] = date
    return out


class OpenAIRealtime(NetworkModel):
    """A model on OpenAI's Realtime API (or a dialect of it: see `GrokVoice`)."""

    frame_s = 0.04
    clock = "realtime"
    text_stream = "pieces"
    client_modules = ("openai", "websockets.exceptions")
    client_extra = "openai-realtime"
    env_keys: tuple[str, ...] = ("OPENAI_API_KEY",)
    default_dialect = "openai"

    def __init__(
        self,
        name: str = "gpt_realtime",
        model: str = "gpt-realtime-2025-08-28",
        dialect: str | None = None,
        voice: str | None = "marin",
        base_prompt: str | None = None,
        turn_detection: dict[str, Any] | str | None = "default",
        input_rate: int = 24000,
        output_rate: int = 24000,
        input_transcription: str | None = None,
        reasoning: dict[str, Any] | None = None,
        base_url: str | None = None,
        concurrency: int = 1,
        case_retries: int = 2,
        connect_timeout_s: float = 30.0,
        connect_retries: int = 3,
        max_retry_after_s: float = 30.0,
        manual_silence_ms: int = 500,
        manual_threshold: float = 0.01,
        prices: dict[str, Any] | None = None,
        turn_silence_s: float | None = None,
        server: dict[str, Any] | None = None,
    ):
        self.name = name
        dialect = dialect or self.default_dialect
        if dialect not in DIALECTS:
            raise ConfigError(
                f"model.dialect: unknown dialect {dialect!r}; valid: {', '.join(DIALECTS)}"
            )
        self.dialect = DIALECTS[dialect]
        if self.dialect.key_var not in self.env_keys:
            raise ConfigError(
                f"model.dialect: {dialect} reads {self.dialect.key_var}; use the model config made for it "
                f"(model=grok_voice for xai, model=gpt_realtime for openai)"
            )
        self.require_clients()
        self.api_key()  # fail at once, naming the variable
        _KEYS.install(_MASKED_LOGGERS)
        self.model = str(model)
        self.voice = voice
        self.base_prompt = base_prompt
        td = plain(turn_detection)
        if td == "default":
            td = dict(DEFAULT_TURN_DETECTION)
        if td in (None, "none", "null"):
            td = None
        elif not isinstance(td, dict) or td.get("type") not in self.dialect.turn_types:
            raise ConfigError(
                f"model.turn_detection: {dialect} takes type {' or '.join(self.dialect.turn_types)}, or null "
                f"(manual turns); got {td!r}"
            )
        self.turn_detection: dict[str, Any] | None = td
        for field_name, rate in (("input_rate", input_rate), ("output_rate", output_rate)):
            if int(rate) not in self.dialect.rates:
                raise ConfigError(
                    f"model.{field_name}: {dialect} takes PCM16 at {', '.join(map(str, self.dialect.rates))} Hz; "
                    f"got {rate}"
                )
        self.sample_rate = int(input_rate)
        self.output_rate = int(output_rate)
        self.input_transcription = input_transcription
        self.reasoning = plain(reasoning)
        self.base_url = str(base_url or self.dialect.base_url).rstrip("/")
        if not re.match(r"^wss?://", self.base_url):
            raise ConfigError(
                f"model.base_url: a WebSocket URL (wss://... or ws://...) is needed; got {self.base_url!r}"
            )
        self._concurrency = int(concurrency)
        if self._concurrency < 1:
            raise ConfigError(f"model.concurrency: at least 1 session per key; got {concurrency}")
        self.case_retries = max(0, int(case_retries))
        self.connect_timeout_s = float(connect_timeout_s)
        self.connect_retries = max(0, int(connect_retries))
        self.max_retry_after_s = float(max_retry_after_s)
        self.manual_silence_ms = int(manual_silence_ms)
        self.manual_threshold = float(manual_threshold)
        self.prices = check_prices(plain(prices), self.dialect.name)
        self.turn_silence_s = turn_silence_s
        self.server = plain(server)  # always null: a hosted API
        shutdown = None
        if self.dialect.name == "openai":
            shutdown = sdk_deprecations(self.client_module(SESSION_TYPES)).get(self.model)
        if shutdown:
            log.warning(
                "%s: model id %s is deprecated in the openai package; its announced shutdown date is %s",
                self.name,
                self.model,
                shutdown,
            )

    # -- what the run asks -----------------------------------------------------------------------
    @property  # type: ignore[override]
    def concurrency(self) -> int:
        return self._concurrency

    def share(self, index: int, count: int) -> None:
        """Spread `model.concurrency` sessions over `count` client processes (they share the key)."""
        if count > self._concurrency:
            raise ConfigError(
                f"model.concurrency={self._concurrency} sessions cannot be spread over {count} client "
                "processes; lower orchestrator.client_processes or raise model.concurrency"
            )
        base, extra = divmod(self._concurrency, count)
        self._concurrency = base + (1 if index < extra else 0)

    def api_key(self) -> str:
        key = os.environ.get(self.dialect.key_var)
        if not key:
            raise ConfigError(
                f"{self.name}: no API key: set {self.dialect.key_var} in the environment "
                "(it is never read from the config)"
            )
        return key

    def identity(self) -> dict[str, Any]:
        openai = self.client_module("openai")
        # the endpoint is part of it: a proxy or a stand-in is not the vendor's service
        return {
            "name": self.name,
            "adapter": "openai-realtime",
            "dialect": self.dialect.name,
            "model": self.model,
            "endpoint": self.base_url,
            "voice": self.voice,
            "base_prompt": self.base_prompt,
            "turn_detection": self.turn_detection,
            "input_rate": self.sample_rate,
            "output_rate": self.output_rate,
            "input_transcription": self.input_transcription,
            "reasoning": self.reasoning,
            "openai": getattr(openai, "__version__", "?"),
            "frame_s": self.frame_s,
            "manual_turns": None
            if self.turn_detection
            else {"silence_ms": self.manual_silence_ms, "threshold": self.manual_threshold},
        }

    def prompt(self, instruction: str | None) -> str | None:
        if not instruction:
            return self.base_prompt
        return f"{self.base_prompt}\n{instruction}" if self.base_prompt else instruction

    def session_config(self, instruction: str | None) -> dict[str, Any]:
        """The `session` of `session.update`, in this dialect."""
        pcm_in = {"type": "audio/pcm", "rate": self.sample_rate}
        pcm_out = {"type": "audio/pcm", "rate": self.output_rate}
        audio_in: dict[str, Any] = {"format": pcm_in}
        audio_out: dict[str, Any] = {"format": pcm_out}
        s: dict[str, Any] = {
            "type": "realtime",
            "model": self.model,
            "output_modalities": ["audio"],
        }
        prompt = self.prompt(instruction)
        if prompt:
            s["instructions"] = prompt
        if self.input_transcription:
            audio_in["transcription"] = {"model": self.input_transcription}
        if self.dialect.top_level_audio_fields:
            if self.voice:
                s["voice"] = self.voice
            s["turn_detection"] = self.turn_detection
        else:
            if self.voice:
                audio_out["voice"] = self.voice
            audio_in["turn_detection"] = self.turn_detection
        s["audio"] = {"input": audio_in, "output": audio_out}
        if self.reasoning:
            s["reasoning"] = self.reasoning
        return s

    def client(self):
        openai = self.client_module("openai")
        http = re.sub(r"^ws", "http", self.base_url)
        # URLs and key passed explicitly: OPENAI_BASE_URL or another vendor's key cannot redirect a run
        return openai.AsyncOpenAI(
            api_key=self.api_key(), base_url=http, websocket_base_url=self.base_url, max_retries=0
        )

    def session(self, instruction: str | None, seed: int) -> RealtimeSession:
        return RealtimeSession(self, instruction)

    # -- cost --------------------------------------------------------------------------------------
    def cost_usd(self, usage: dict[str, float]) -> float | None:
        return session_cost(self.prices, usage)


class GrokVoice(OpenAIRealtime):
    """xAI's Grok Voice Agent: the same adapter in the `xai` dialect, reading `XAI_API_KEY`."""

    env_keys = ("XAI_API_KEY",)
    default_dialect = "xai"

    def __init__(
        self,
        name: str = "grok_voice",
        model: str = "grok-voice-think-fast-1.0",
        dialect: str | None = "xai",
        voice: str | None = "eve",
        input_rate: int = 16000,
        output_rate: int = 16000,
        **kw: Any,
    ):
        super().__init__(
            name=name,
            model=model,
            dialect=dialect,
            voice=voice,
            input_rate=input_rate,
            output_rate=output_rate,
            **kw,
        )


# -- prices ------------------------------------------------------------------------------------
TOKEN_KINDS = ("audio_in", "audio_in_cached", "text_in", "text_in_cached", "audio_out", "text_out")


def check_prices(prices: dict[str, Any] | None, dialect: str) -> dict[str, Any] | None:
    """The config's price table, checked: it must say where and when its figures come from."""
    if prices is None:
        return None
    if not isinstance(prices, dict):
        raise ConfigError(f"model.prices: a mapping with date, source and rates; got {prices!r}")
    for k in ("date", "source"):
        if not prices.get(k):
            raise ConfigError(f"model.prices.{k}: say where the prices come from (date and source)")
    if dialect == "openai":
        rates = prices.get("usd_per_1m_tokens")
        missing = [k for k in TOKEN_KINDS if not isinstance(rates, dict) or k not in rates]
        if missing:
            raise ConfigError(f"model.prices.usd_per_1m_tokens: missing {', '.join(missing)}")
    elif "usd_per_audio_minute" not in prices:
        raise ConfigError(
            "model.prices.usd_per_audio_minute: missing (xAI bills audio minutes sent and received)"
        )
    return dict(prices)


def session_cost(prices: dict[str, Any] | None, usage: dict[str, float]) -> float | None:
    """USD for one session's usage under `prices` (None without a price table)."""
    if not prices:
        return None
    if "usd_per_1m_tokens" in prices:
        r = prices["usd_per_1m_tokens"]
        return sum(float(usage.get(k, 0)) * float(r[k]) for k in TOKEN_KINDS) / 1e6
    minutes = (float(usage.get("audio_sent_s", 0)) + float(usage.get("audio_received_s", 0))) / 60.0
    return minutes * float(prices["usd_per_audio_minute"]) + float(
        usage.get("item_creates", 0)
    ) * float(prices.get("usd_per_item_create", 0.0))


# -- the session -------------------------------------------------------------------------------
class RealtimeSession(NetworkSession):
    error_type = RealtimeServiceError
    send_errors = (Exception,)  # websockets' ConnectionClosed and the SDK's errors
    model: OpenAIRealtime

    def __init__(self, model: OpenAIRealtime, instruction: str | None):
        super().__init__(model)
        self.instruction = instruction
        self._cm: Any = None
        self._conn: Any = None
        self._created = asyncio.Event()
        self._updated = asyncio.Event()
        self._resample = StreamResampler(model.output_rate, model.sample_rate)
        self._items: dict[str, dict[str, Any]] = {}  # assistant item id -> response id, ms received
        self._item_order: list[str] = []
        self._response: str | None = None  # the response in progress
        self._interrupted_responses: set[str] = set()
        self._audio_since_flush = False
        self._play_end_mono = 0.0  # when the audio received so far ends playing, at the earliest
        self._pending_truncate: set[str] = set()  # the items of the answer a barge-in interrupted
        self._cancel_wanted = False
        self._busy = ""
        self.usage: dict[str, float] = {k: 0 for k in TOKEN_KINDS}
        self.usage.update({"audio_sent_s": 0.0, "audio_received_s": 0.0, "item_creates": 0})
        self.counts: dict[str, int] = {}
        self.truncates: list[dict[str, Any]] = []
        self.dropped_audio_ms = 0.0
        self.n_responses = 0
        self.errors: list[str] = []
        # manual turns (turn_detection null): an energy gate on the user's audio
        self._gate_speaking = False
        self._gate_quiet_ms = 0.0
        self._gate_heard = False

    def where(self) -> str:
        return f"{self.model.name} ({self.model.dialect.name} realtime, {self.model.model})"

    def describe(self, e: BaseException) -> str:
        return _mask(str(e))

    # -- connect -----------------------------------------------------------------------------------
    async def _connect(self) -> None:
        m = self.model
        for attempt in range(m.connect_retries + 1):
            wait = await self._open()
            if wait is None:
                break
            if attempt == m.connect_retries:
                raise RealtimeUnavailable(
                    f"{self.where()}: {self._busy} (after {attempt + 1} tries)"
                )
            await asyncio.sleep(wait)
        self._start_reader()
        await self._until(
            self._created,
            m.connect_timeout_s,
            f"first event ({' or '.join(m.dialect.first_events)})",
        )
        await self._conn.session.update(session=m.session_config(self.instruction))
        await self._until(self._updated, m.connect_timeout_s, "session.updated")

    async def _open(self) -> float | None:
        """One connection try: None when open, else the seconds to wait before the next try."""
        m = self.model
        exceptions = self.model.client_module("websockets.exceptions")
        self._cm = m.client().realtime.connect(model=m.model)
        try:
            self._conn = await asyncio.wait_for(self._cm.__aenter__(), m.connect_timeout_s)
            return None
        except exceptions.InvalidStatus as e:
            self._cm = None
            status = e.response.status_code
            if status in (401, 403):
                raise self.error(
                    f"the service refused the key in {m.dialect.key_var} (HTTP {status})"
                ) from None
            if status == 429 or status >= 500:
                self._busy = f"the service is busy (HTTP {status})"
                return _retry_after(e.response.headers, m.max_retry_after_s)
            raise self.error(f"the service refused the session (HTTP {status})") from None
        except (
            OSError,
            TimeoutError,
            exceptions.InvalidHandshake,
            exceptions.ConnectionClosed,
        ) as e:
            self._cm = None
            self._busy = f"cannot connect ({type(e).__name__}: {_mask(str(e))})"
            return 1.0

    # -- receive -----------------------------------------------------------------------------------
    async def _read(self) -> None:
        exceptions = self.model.client_module("websockets.exceptions")
        try:
            while True:
                raw = await self._conn.recv_bytes()
                arrival = time.monotonic()
                try:
                    ev = json.loads(raw)
                    kind = ev["type"]
                except (ValueError, TypeError, KeyError):
                    raise self.error(f"malformed event from the service: {_snippet(raw)}") from None
                self.counts[kind] = self.counts.get(kind, 0) + 1
                try:
                    self._handle(kind, ev, arrival)
                except (KeyError, TypeError, ValueError, AttributeError) as e:
                    raise self.error(
                        f"malformed {kind} event ({type(e).__name__}: {e}): {_snippet(raw)}"
                    ) from None
        except exceptions.ConnectionClosed as e:
            code = e.rcvd.code if e.rcvd is not None else None
            raise RealtimeUnavailable(
                f"{self.where()}: the service closed the connection (close code {code})"
            ) from None

    def _vendor(self, name: str, arrival: float, detail: str = "") -> None:
        self._emit(ModelEvent("vendor", text=name, detail=detail, arrival_mono=arrival))

    def _handle(self, kind: str, ev: dict[str, Any], arrival: float) -> None:
        if kind in self.model.dialect.first_events:
            self._created.set()
        elif kind == "session.updated":
            self._check_rates(ev.get("session") or {})
            self._updated.set()
        elif kind == "response.output_audio.delta":
            self._audio(ev, arrival)
        elif kind == "response.output_audio_transcript.delta":
            if ev["response_id"] not in self._interrupted_responses and ev["delta"]:
                self._emit(ModelEvent("text", text=ev["delta"], arrival_mono=arrival))
        elif kind == "input_audio_buffer.speech_started":
            self._vendor(
                "speech_started",
                arrival,
                f"audio_start_ms={ev.get('audio_start_ms')} item_id={ev.get('item_id')}",
            )
            self._barge_in(arrival)
        elif kind == "input_audio_buffer.speech_stopped":
            self._vendor(
                "speech_stopped",
                arrival,
                f"audio_end_ms={ev.get('audio_end_ms')} item_id={ev.get('item_id')}",
            )
        elif kind == "response.created":
            self._response = ev["response"]["id"]
            self.n_responses += 1
            self._vendor("response.created", arrival, f"response_id={self._response}")
        elif kind == "response.done":
            self._done(ev["response"], arrival)
        elif kind == "conversation.item.truncated":
            self._vendor(
                "truncated", arrival, f"item_id={ev['item_id']} audio_end_ms={ev['audio_end_ms']}"
            )
        elif kind == "conversation.item.deleted":
            self._vendor("deleted", arrival, f"item_id={ev['item_id']}")
        elif kind == "rate_limits.updated":
            limits = " ".join(
                f"{r.get('name')}={r.get('remaining')}/{r.get('limit')}"
                for r in ev.get("rate_limits") or ()
            )
            self._vendor("rate_limits", arrival, limits)
        elif kind == "error":
            self._service_error(ev.get("error") or {}, arrival)

    def _check_rates(self, session: dict[str, Any]) -> None:
        """The service's echo of the session: PCM at the rates asked for, or the session fails
        (audio read at the wrong rate would be scored as the model's speech)."""
        audio = session.get("audio") or {}
        for side, want in (("input", self.model.sample_rate), ("output", self.model.output_rate)):
            fmt = (audio.get(side) or {}).get("format") or {}
            got = fmt.get("rate")
            if got is not None and int(got) != want:
                raise self.error(
                    f"the service set the {side} audio to {got} Hz, not the {want} Hz asked for "
                    f"(model.{side}_rate)"
                )

    def _audio(self, ev: dict[str, Any], arrival: float) -> None:
        rid, item = ev["response_id"], ev["item_id"]
        pcm = np.frombuffer(base64.b64decode(ev["delta"]), dtype="<i2").astype(np.float32) / 32768.0
        ms = 1000.0 * len(pcm) / self.model.output_rate
        if rid in self._interrupted_responses:  # late audio of an answer the user interrupted
            self.dropped_audio_ms += ms
            self._vendor("dropped_audio", arrival, f"response_id={rid} item_id={item} ms={ms:.1f}")
            return
        info = self._items.get(item)
        if info is None:
            info = self._items[item] = {"response_id": rid, "received_ms": 0.0}
            self._item_order.append(item)
        info["received_ms"] += ms
        self.usage["audio_received_s"] += ms / 1000.0
        samples = self._resample.push(pcm)
        self._play_end_mono = max(self._play_end_mono, arrival) + ms / 1000.0
        if len(samples):
            self._audio_since_flush = True
            self._emit(ModelEvent("audio", audio=samples, arrival_mono=arrival, item=item))

    def _barge_in(self, arrival: float) -> None:
        """The user started speaking (the server's VAD, or the manual gate): drop the model's
        queued audio if any; the items of the answer are truncated once the play record says what
        was heard (`flushed`)."""
        rid = self._response
        if rid is not None:
            self._interrupted_responses.add(rid)
        # audio that may still be queued or playing (a frame of scheduling slack): flush it
        if self._audio_since_flush and arrival < self._play_end_mono + PLAY_SLACK_S:
            self._audio_since_flush = False
            self._pending_truncate = {
                i for i, v in self._items.items() if v["response_id"] == rid or not v.get("settled")
            }
            self._emit(ModelEvent("interrupted", arrival_mono=arrival))
        elif rid is not None and not self._server_cancels():
            self._cancel_wanted = True

    def _server_cancels(self) -> bool:
        td = self.model.turn_detection
        return bool(td) and bool(td.get("interrupt_response", True))

    def _done(self, resp: dict[str, Any], arrival: float) -> None:
        rid, status = resp.get("id"), resp.get("status")
        self._vendor("response.done", arrival, f"response_id={rid} status={status}")
        if status in ("cancelled", "incomplete", "failed"):
            self._interrupted_responses.add(rid)
        if rid == self._response:
            self._response = None
        usage = resp.get("usage") or {}
        din, dout = usage.get("input_token_details") or {}, usage.get("output_token_details") or {}
        cached = din.get("cached_tokens_details") or {}
        c_audio, c_text = (
            float(cached.get("audio_tokens", 0) or 0),
            float(cached.get("text_tokens", 0) or 0),
        )
        self.usage["audio_in"] += float(din.get("audio_tokens", 0) or 0) - c_audio
        self.usage["audio_in_cached"] += c_audio
        self.usage["text_in"] += float(din.get("text_tokens", 0) or 0) - c_text
        self.usage["text_in_cached"] += c_text
        self.usage["audio_out"] += float(dout.get("audio_tokens", 0) or 0)
        self.usage["text_out"] += float(dout.get("text_tokens", 0) or 0)

    def _service_error(self, err: dict[str, Any], arrival: float) -> None:
        code, message = str(err.get("code") or ""), str(err.get("message") or "")
        self._vendor(
            "error", arrival, f"code={code} param={err.get('param')} message={message[:200]}"
        )
        if any(b == code or b in message.lower() for b in self.model.dialect.benign_errors):
            return
        self.errors.append(f"{code}: {message}")
        if err.get("param") == "audio_end_ms" or "truncat" in message.lower():
            log.warning("%s: the service rejected a truncate: %s", self.where(), message)
            return
        raise self.error(f"the service reported an error: {err.get('type')} {code}: {message}")

    # -- the play record ---------------------------------------------------------------------------
    async def flushed(self, flush: PlayedFlush) -> None:
        self._check()
        try:
            await self._tell_played(flush)
        except ServerConnectionError:
            raise
        except self.send_errors as e:  # the connection went while telling it: the session's error
            raise await self._send_failed(e) from None

    async def _tell_played(self, flush: PlayedFlush) -> None:
        """Truncate (or delete) each item of the interrupted answer to what the play record says
        was played; cancel the answer when the server does not."""
        items, self._pending_truncate = self._pending_truncate, set()
        for item in [i for i in self._item_order if i in items]:
            info = self._items[item]
            played_ms = 1000.0 * flush.played_s.get(item, 0.0)
            received_ms = info["received_ms"]
            end_ms = min(int(math.floor(played_ms + 1e-6)), int(math.floor(received_ms)))
            info["settled"] = True
            if played_ms >= received_ms - WHOLE_TOLERANCE_MS:
                continue  # played whole (the resampler holds back well under a ms): nothing to tell
            if end_ms <= 0:
                await self._conn.conversation.item.delete(item_id=item)
                row = {
                    "item_id": item,
                    "action": "delete",
                    "audio_end_ms": 0,
                    "played_ms": played_ms,
                    "received_ms": received_ms,
                }
            else:
                await self._conn.conversation.item.truncate(
                    item_id=item, content_index=0, audio_end_ms=end_ms
                )
                row = {
                    "item_id": item,
                    "action": "truncate",
                    "audio_end_ms": end_ms,
                    "played_ms": played_ms,
                    "received_ms": received_ms,
                }
            self.truncates.append(row)
            self._vendor(
                row["action"],
                time.monotonic(),
                f"item_id={item} audio_end_ms={end_ms} played_ms={played_ms:.3f} received_ms={received_ms:.1f}",
            )
        if not self._server_cancels() and self._response is not None:
            self._cancel_wanted = True

    # -- send --------------------------------------------------------------------------------------
    async def _send(self, frame: np.ndarray) -> None:
        pcm = (np.clip(np.asarray(frame, dtype=np.float32), -1.0, 1.0) * 32767.0).astype("<i2")
        if self._cancel_wanted:
            self._cancel_wanted = False
            await self._conn.response.cancel()
        await self._conn.input_audio_buffer.append(
            audio=base64.b64encode(pcm.tobytes()).decode("ascii")
        )
        self.usage["audio_sent_s"] += len(frame) / self.model.sample_rate
        if self.model.turn_detection is None:
            await self._manual_turns(frame)

    async def _manual_turns(self, frame: np.ndarray) -> None:
        """turn_detection null: the client decides the turns (an energy gate on the user's audio)."""
        m = self.model
        loud = (
            float(np.sqrt(np.mean(np.square(frame)))) > m.manual_threshold if len(frame) else False
        )
        if loud and not self._gate_speaking:
            self._gate_speaking, self._gate_quiet_ms, self._gate_heard = True, 0.0, True
            now = time.monotonic()
            self._vendor("client_speech_started", now)
            self._barge_in(now)
        elif self._gate_speaking:
            self._gate_quiet_ms = (
                0.0 if loud else self._gate_quiet_ms + 1000.0 * len(frame) / m.sample_rate
            )
            if self._gate_quiet_ms >= m.manual_silence_ms:
                self._gate_speaking = False
                await self._conn.input_audio_buffer.commit()
                await self._conn.response.create()
                self._vendor("client_commit", time.monotonic())

    async def _disconnect(self) -> None:
        if self._cm is not None:
            await asyncio.wait_for(self._cm.__aexit__(None, None, None), 5.0)

    # -- the report --------------------------------------------------------------------------------
    def report(self) -> dict[str, Any]:
        m = self.model
        usage = {k: round(v, 6) if isinstance(v, float) else v for k, v in self.usage.items()}
        cost = m.cost_usd(self.usage)
        return {
            "usage": usage,
            "cost_usd": None if cost is None else round(cost, 6),
            "prices": None
            if m.prices is None
            else {"date": m.prices["date"], "source": m.prices["source"]},
            "n_responses": self.n_responses,
            "truncates": self.truncates,
            "dropped_audio_ms": round(self.dropped_audio_ms, 3),
            "service_errors": self.errors,
            "events": dict(sorted(self.counts.items())),
        }


def _retry_after(headers: Any, cap_s: float) -> float:
    """Seconds to wait from a Retry-After header (seconds only), 1 s without one, at most `cap_s`."""
    try:
        value = float(headers.get("Retry-After", "1"))
    except (TypeError, ValueError):
        value = 1.0
    return max(0.0, min(value, cap_s))


def _snippet(raw: Any) -> str:
    text = raw.decode("utf-8", "replace") if isinstance(raw, (bytes, bytearray)) else str(raw)
    return _mask(text[:120].replace("\n", " "))


# -- keys out of logs ------------------------------------------------------------------------------
KEY_VARIABLES = tuple(d.key_var for d in DIALECTS.values())
_KEYS = KeyMask(KEY_VARIABLES, patterns=(r"(Bearer\s+)\S+",))
_MASKED_LOGGERS = (
    "websockets.client",
    "websockets.protocol",
    "websockets",
    "openai",
    "openai._base_client",
    "openai.resources.realtime.realtime",
    "httpx",
    "httpcore",
)
_mask = _KEYS.mask
