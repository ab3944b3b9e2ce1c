"""Local stand-in for the OpenAI Realtime API (GA) WebSocket, with an xAI Grok Voice Agent dialect
(not OpenAI's or xAI's service).

Written from the event types of the openai SDK pinned in pyproject (`openai.types.realtime`) and
the notes in shared/reference/hosted-realtime.md (sections 2, 3, 7, 9). The client connects to
`GET /v1/realtime?model=<id>` with `Authorization: Bearer <key>` and speaks JSON events:

- OpenAI dialect: the server opens with `session.created`; the client's `session.update` is merged
  into the session and echoed as `session.updated`. Audio is PCM16 LE mono at 24 kHz only (any
  other rate is answered with an `invalid_value` error on `session.audio.{input,output}.format.rate`).
- xAI dialect: the server opens with `conversation.created` (then `session.created` only when
  `xai_session_created`), sends `ping` keep-alives, takes `voice` and `turn_detection` as top-level
  session fields (or under `audio`, as OpenAI has them), and PCM at 8000, 16000, 21050, 24000,
  32000, 44100 or 48000 Hz; `response.cancel` with nothing to cancel says "no active response".

Behind it, a scripted model: the user's audio (`input_audio_buffer.append`) feeds an energy gate
(`SpeechGate`, the server VAD); speech start gives `input_audio_buffer.speech_started`, its end
`speech_stopped`, `committed`, the user item, and (with `create_response`, the default) the next
scripted reply: `response.created`, the output item and content part, then per `chunk_s` of audio
the transcript pieces of the words that start in it (`response.output_audio_transcript.delta`)
followed by the audio (`response.output_audio.delta`), one chunk every `send_every_s` (faster than
real time, like the service), and the closing `*.done` events, `response.done` with `usage`, and
`rate_limits.updated`. User speech while the reply still plays by the server's reckoning is a
barge-in; with `interrupt_response` (the default) a reply still being sent is cancelled
(`response.done` with status `cancelled`, reason `turn_detected`) and nothing of it follows.
`conversation.item.truncate` is checked against the audio the server sent for that item.
With `turn_detection: null` the server only commits on `input_audio_buffer.commit` and answers on
`response.create`.

Every event the stand-in sends is validated with the SDK's own `RealtimeServerEvent` union (xAI-only
types such as `ping` by hand) and every client event with `RealtimeClientEvent`; since the SDK's
models accept unknown keys, `model_extra` must also be empty everywhere, save the few keys named
below. A failure is one line in `FakeRealtime.invalid` (and, for a client event, an `error` event).
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import copy
import functools
import json
import math
import time
import typing
import uuid
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import numpy as np
import pydantic
from aiohttp import WSMsgType, web
from fake_servers_common import Heard, Reply, SpeechGate
from openai.types.realtime import (
    RealtimeClientEvent,
    RealtimeServerEvent,
    RealtimeSessionCreateResponse,
)
from openai.types.realtime.realtime_audio_input_turn_detection import ServerVad

from fdeval.audio.resample import resample

OPENAI_RATES = (24000,)
XAI_RATES = (8000, 16000, 21050, 24000, 32000, 44100, 48000)
# Session fields the API's session object has (RealtimeSessionCreateResponse) but the SDK's
# SessionCreatedEvent / SessionUpdatedEvent type (RealtimeSessionCreateRequest) does not.
SESSION_OBJECT_EXTRAS = frozenset({"id", "object", "expires_at"})
# xAI: top-level session fields (OpenAI has them under audio.output / audio.input).
XAI_SESSION_EXTRAS = frozenset({"voice", "turn_detection"})
XAI_REASONING_EFFORTS = ("none", "high")  # session.reasoning.effort (OpenAI's type has no "none")
# xAI-only server events, checked by hand: field -> type.
XAI_ONLY_SERVER_EVENTS: dict[str, dict[str, type]] = {
    "ping": {"type": str, "event_id": str, "timestamp": int}
}
SESSION_EVENTS = ("session.update", "session.created", "session.updated")


# --- validation against the SDK's types -------------------------------------------------------


class Problem(NamedTuple):
    """Why an event is not a valid event of the SDK's union: `line` for `FakeRealtime.invalid`,
    the rest for the `error` event answering a client event."""

    line: str
    code: str
    param: str | None
    message: str


@functools.cache
def _adapter(side: str) -> pydantic.TypeAdapter:
    return pydantic.TypeAdapter(RealtimeServerEvent if side == "server" else RealtimeClientEvent)


@functools.cache
def _members(side: str) -> dict[str, type[pydantic.BaseModel]]:
    """The union's member classes by their `type` literal (for one-line error messages)."""
    out: dict[str, type[pydantic.BaseModel]] = {}

    def walk(tp) -> None:
        for arg in typing.get_args(tp):
            if isinstance(arg, type) and issubclass(arg, pydantic.BaseModel):
                for lit in typing.get_args(arg.model_fields["type"].annotation):
                    out[lit] = arg
            else:
                walk(arg)

    walk(RealtimeServerEvent if side == "server" else RealtimeClientEvent)
    return out


def _extras(obj, path: str = ""):
    """(path, key) of every key a validated model kept as an extra, at any depth."""
    if isinstance(obj, pydantic.BaseModel):
        for key in obj.model_extra or {}:
            yield path, key
        for name in type(obj).model_fields:
            yield from _extras(getattr(obj, name), f"{path}.{name}" if path else name)
    elif isinstance(obj, (list, tuple)):
        for i, v in enumerate(obj):
            yield from _extras(v, f"{path}[{i}]")
    elif isinstance(obj, dict):
        for k, v in obj.items():
            yield from _extras(v, f"{path}.{k}" if path else str(k))


def _loc(loc) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def _first_error(exc: pydantic.ValidationError) -> tuple[str, str, str]:
    """(code, param, message) of a validation error, in the API's words."""
    err = exc.errors()[0]
    param = _loc(err["loc"])
    if err["type"] == "missing":
        return "missing_required_parameter", param, f"Missing required parameter: '{param}'."
    return (
        "invalid_value",
        param,
        f"Invalid value for '{param}': {err['msg']} (got {err.get('input')!r}).",
    )


def _xai_probe(obj):
    """A copy with xAI-only PCM rates replaced by 24000, which the SDK's type allows (the stand-in
    checks the rate itself)."""
    if isinstance(obj, dict):
        out = {k: _xai_probe(v) for k, v in obj.items()}
        if out.get("type") == "audio/pcm" and out.get("rate") in XAI_RATES:
            out["rate"] = 24000
        return out
    if isinstance(obj, list):
        return [_xai_probe(v) for v in obj]
    return obj


def _xai_top_level(session: dict) -> str | None:
    """xAI's top-level `voice` and `turn_detection` (server_vad or null only), checked by hand."""
    if "voice" in session and not isinstance(session["voice"], str):
        return f"session.voice must be a string, got {session['voice']!r}"
    if "turn_detection" in session:
        td = session["turn_detection"]
        if td is None:
            return None
        try:
            m = ServerVad.model_validate(td)
        except pydantic.ValidationError as exc:
            return f"session.turn_detection: {_first_error(exc)[2]}"
        if m.model_extra:
            return f"session.turn_detection: unknown fields {sorted(m.model_extra)}"
    return None


def check_event(ev: Any, side: str, dialect: str = "openai") -> Problem | None:
    """None when `ev` (a decoded JSON event) is a valid event of the SDK's server (`side="server"`)
    or client union with no unknown keys anywhere, dialect allowances aside; else the problem."""
    if not isinstance(ev, dict):
        return Problem(
            f"{side}: not a JSON object: {str(ev)[:80]}",
            "invalid_json",
            None,
            "The event must be a JSON object.",
        )
    typ = ev.get("type")
    if dialect == "xai" and side == "server" and typ in XAI_ONLY_SERVER_EVENTS:
        spec = XAI_ONLY_SERVER_EVENTS[typ]
        if set(ev) != set(spec) or any(not isinstance(ev[k], t) for k, t in spec.items()):
            return Problem(
                f"server {typ}: fields {sorted(ev)} do not match {spec}", "invalid_value", None, ""
            )
        return None
    probe = ev
    if dialect == "xai":
        probe = _xai_probe(ev)
        if typ in SESSION_EVENTS and isinstance(ev.get("session"), dict):
            why = _xai_top_level(ev["session"])
            if why:
                return Problem(f"{side} {typ}: {why}", "invalid_value", "session", why)
            reasoning = probe["session"].get("reasoning")
            if isinstance(reasoning, dict) and reasoning.get("effort") in XAI_REASONING_EFFORTS:
                probe["session"]["reasoning"] = dict(
                    reasoning, effort="high"
                )  # xAI's "none" is not OpenAI's
    try:
        model = _adapter(side).validate_python(probe)
    except pydantic.ValidationError as exc:
        member = _members(side).get(typ) if isinstance(typ, str) else None
        if member is None:
            msg = f"Invalid value: {typ!r}. Supported values are the {side} event types."
            return Problem(f"{side} {typ!r}: unknown event type", "invalid_value", "type", msg)
        try:
            member.model_validate(probe)
            code, param, msg = _first_error(exc)
        except pydantic.ValidationError as exc2:
            code, param, msg = _first_error(exc2)
        return Problem(f"{side} {typ}: {msg}", code, param, msg)
    if getattr(model, "type", None) != typ:
        return Problem(
            f"{side} {typ}: validated as {type(model).__name__}", "invalid_value", "type", ""
        )
    allowed: dict[str, frozenset] = {}
    if typ in SESSION_EVENTS:
        allowed["session"] = (SESSION_OBJECT_EXTRAS if side == "server" else frozenset()) | (
            XAI_SESSION_EXTRAS if dialect == "xai" else frozenset()
        )
    bad = [f"{p}.{k}" if p else k for p, k in _extras(model) if k not in allowed.get(p, ())]
    if bad:
        return Problem(
            f"{side} {typ}: unknown fields {bad}",
            "unknown_parameter",
            bad[0],
            f"Unknown parameter: '{bad[0]}'.",
        )
    if side == "server" and typ in SESSION_EVENTS:
        # The session object itself, against the SDK's type of the API's session object.
        session = {
            k: v
            for k, v in probe["session"].items()
            if not (dialect == "xai" and k in XAI_SESSION_EXTRAS)
        }
        try:
            full = RealtimeSessionCreateResponse.model_validate(session)
        except pydantic.ValidationError as exc:
            msg = _first_error(exc)[2]
            return Problem(f"server {typ}: session object: {msg}", "invalid_value", "session", msg)
        bad = [f"{p}.{k}" if p else k for p, k in _extras(full)]
        if bad:
            return Problem(
                f"server {typ}: session object: unknown fields {bad}",
                "unknown_parameter",
                bad[0],
                "",
            )
    return None


# --- what the stand-in records ----------------------------------------------------------------


class Truncate(NamedTuple):
    item_id: str
    audio_end_ms: int
    sent_ms: float | None  # ms of audio the server had sent for the item; None: no such audio item
    accepted: bool
    t: float  # time.monotonic()


class Delete(NamedTuple):
    item_id: str
    accepted: bool
    t: float


class Cancel(NamedTuple):
    response_id: str | None
    reason: str  # "turn_detected" (server VAD), "client_cancelled" (response.cancel), "not_active"
    t: float


class SpeechStart(NamedTuple):
    audio_start_ms: int
    t: float
    barge_in: bool  # while a reply was still playing by the server's reckoning


@dataclass
class ResponseRecord:
    id: str
    item_id: str
    status: str = "in_progress"  # then "completed" or "cancelled"
    sent_samples: int = 0
    rate: int = 24000
    words: int = 0
    t_created: float = 0.0
    t_first_delta: float | None = None
    t_done: float | None = None
    finishing: bool = False  # all audio sent; closing events under way (no longer cancellable)

    @property
    def sent_ms(self) -> float:
        return 1000.0 * self.sent_samples / self.rate

    @property
    def sent_s(self) -> float:
        return self.sent_samples / self.rate


@dataclass
class SessionRecord:
    model: str | None
    authorization: str | None
    headers: dict[str, str]
    query: dict[str, str]
    dialect: str
    t_start: float
    session_updates: list[dict] = field(default_factory=list)  # the `session` payloads, as sent
    client_events: Counter = field(default_factory=Counter)  # type -> count
    server_events: list[tuple[float, str]] = field(default_factory=list)  # (t, type), all sent
    audio_in: list[tuple[float, int, int]] = field(default_factory=list)  # (t, n_samples, rate)
    truncates: list[Truncate] = field(default_factory=list)
    deletes: list[Delete] = field(default_factory=list)
    cancels: list[Cancel] = field(default_factory=list)
    item_creates: list[dict] = field(default_factory=list)  # the `item` payloads
    speech_starts: list[SpeechStart] = field(default_factory=list)
    speech_stops: list[tuple[int, float]] = field(default_factory=list)  # (audio_end_ms, t)
    responses: list[ResponseRecord] = field(default_factory=list)
    errors: list[dict] = field(default_factory=list)  # the `error` objects sent
    heard: dict = field(default_factory=lambda: Heard().record())  # set when the session ends
    closed_by_server: int | None = None  # close code, when the server closed (close_after_s)
    malformed_sent: float | None = None
    t_end: float | None = None


def _id(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex[:22]}"


def _deep_merge(base: dict, update: dict) -> dict:
    out = dict(base)
    for k, v in update.items():
        out[k] = (
            _deep_merge(out[k], v)
            if isinstance(v, dict) and isinstance(out.get(k), dict)
            else copy.deepcopy(v)
        )
    return out


# --- the server -------------------------------------------------------------------------------


@dataclass
class FakeRealtime:
    replies: list[Reply]
    dialect: str = "openai"  # "openai" | "xai"
    api_key: str | None = None  # expected in `Authorization: Bearer <key>`; None: any
    reject_status: int | None = None  # answer the first `reject_times` upgrades with this status
    reject_times: int = 1
    close_after_s: float | None = None  # close with 1011 that many seconds into each session
    malformed_after_s: float | None = None  # send one malformed audio delta then (unvalidated)
    chunk_s: float = 0.2  # reply audio per delta
    send_every_s: float = 0.05  # between deltas (0.2 / 0.05: 4x real time)
    ping_every_s: float | None = 0.5  # xai only
    xai_session_created: bool = False  # xai: also send session.created after conversation.created
    # what it recorded
    sessions: list[SessionRecord] = field(default_factory=list)
    invalid: list[str] = field(default_factory=list)
    barge_ins: int = 0
    connections: int = 0  # upgrade requests, rejected ones included
    rejected: list[int] = field(default_factory=list)  # HTTP statuses answered instead of upgrading
    _pcm_cache: dict = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        if self.dialect not in ("openai", "xai"):
            raise ValueError(f"dialect must be 'openai' or 'xai', got {self.dialect!r}")
        if not self.replies:
            raise ValueError("at least one reply")

    @property
    def rates(self) -> tuple[int, ...]:
        return XAI_RATES if self.dialect == "xai" else OPENAI_RATES

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_get("/v1/realtime", self.realtime)
        return app

    def reply_pcm(self, reply: Reply, rate: int) -> np.ndarray:
        """The reply as PCM16 at `rate` (cached per reply and rate)."""
        key = (id(reply), rate)
        if key not in self._pcm_cache:
            x = (
                reply.samples
                if reply.sample_rate == rate
                else resample(reply.samples, reply.sample_rate, rate)
            )
            self._pcm_cache[key] = (np.clip(np.asarray(x, np.float32), -1, 1) * 32767).astype("<i2")
        return self._pcm_cache[key]

    async def realtime(self, request: web.Request):
        self.connections += 1
        auth = request.headers.get("Authorization")
        if self.api_key is not None and auth != f"Bearer {self.api_key}":
            self.rejected.append(401)
            return web.json_response(
                {
                    "error": {
                        "message": "Incorrect API key provided. You can find your API key in your account settings.",
                        "type": "invalid_request_error",
                        "code": "invalid_api_key",
                        "param": None,
                    }
                },
                status=401,
            )
        if (
            self.reject_status is not None
            and sum(s == self.reject_status for s in self.rejected) < self.reject_times
        ):
            status = self.reject_status
            self.rejected.append(status)
            if status == 429:
                body = {
                    "message": "Rate limit reached for requests. Please try again in 1s.",
                    "type": "requests",
                    "code": "rate_limit_exceeded",
                    "param": None,
                }
            else:
                body = {
                    "message": "The server had an error while processing your request.",
                    "type": "server_error",
                    "code": None,
                    "param": None,
                }
            return web.json_response(
                {"error": body},
                status=status,
                headers={"Retry-After": "1"} if status == 429 else None,
            )
        model = request.query.get("model")
        if not model:
            self.rejected.append(400)
            return web.json_response(
                {
                    "error": {
                        "message": "Missing required parameter: 'model'.",
                        "type": "invalid_request_error",
                        "code": "missing_required_parameter",
                        "param": "model",
                    }
                },
                status=400,
            )
        ws = web.WebSocketResponse(max_msg_size=2**25)
        await ws.prepare(request)
        rec = SessionRecord(
            model=model,
            authorization=auth,
            headers=dict(request.headers),
            query=dict(request.query),
            dialect=self.dialect,
            t_start=time.monotonic(),
        )
        self.sessions.append(rec)
        await _Session(self, ws, rec).run()
        return ws


class _Session:
    """One WebSocket session: its config, conversation, VAD and the reply being sent."""

    def __init__(self, fake: FakeRealtime, ws: web.WebSocketResponse, rec: SessionRecord):
        self.fake, self.ws, self.rec = fake, ws, rec
        self.xai = fake.dialect == "xai"
        self.lock = asyncio.Lock()
        self.heard = Heard()
        self.conversation_id = _id("conv")
        self.session = self._default_session(rec.model)
        self.items: dict[str, dict] = {}  # id -> {"role", "response"}
        self.last_item: str | None = None
        self.in_s = 0.0  # seconds of input audio in the session
        self.buf_start_s = 0.0  # where the uncommitted input buffer starts
        self.gate: SpeechGate | None = None
        self.gate_offset_s = 0.0  # session seconds before the current gate started
        self.user_item: str | None = None  # the item of the speech in progress
        self.n_reply = 0
        self.task: asyncio.Task | None = None  # the reply being sent
        self.active: ResponseRecord | None = None
        self.text_words = 0  # words of text items created (input text tokens)
        self.pieces: list[str] = []  # transcript pieces of the reply being sent

    # the session's config

    def _default_session(self, model: str) -> dict:
        td = {
            "type": "server_vad",
            "threshold": 0.5,
            "prefix_padding_ms": 300,
            "silence_duration_ms": 500,
            "idle_timeout_ms": None,
            "create_response": True,
            "interrupt_response": True,
        }
        pcm = {"type": "audio/pcm", "rate": 24000}
        s = {
            "type": "realtime",
            "object": "realtime.session",
            "id": _id("sess"),
            "model": model,
            "output_modalities": ["audio"],
            "instructions": "",
            "tools": [],
            "tool_choice": "auto",
            "max_output_tokens": "inf",
            "tracing": None,
            "truncation": "auto",
            "prompt": None,
            "expires_at": int(time.time()) + 3600,
            "audio": {
                "input": {
                    "format": dict(pcm),
                    "transcription": None,
                    "noise_reduction": None,
                    "turn_detection": td,
                },
                "output": {"format": dict(pcm), "voice": "marin", "speed": 1.0},
            },
        }
        if self.xai:  # xAI's own shape: voice and turn_detection at the top
            del s["audio"]["input"]["turn_detection"], s["audio"]["output"]["voice"]
            s["voice"], s["turn_detection"] = "eve", {k: v for k, v in td.items() if v is not None}
        return s

    def _fmt(self, side: str) -> dict:
        return self.session["audio"][side]["format"]

    @property
    def in_rate(self) -> int:
        return int(self._fmt("input").get("rate", 24000))

    @property
    def out_rate(self) -> int:
        return int(self._fmt("output").get("rate", 24000))

    @property
    def td(self) -> dict | None:
        return (
            self.session.get("turn_detection")
            if self.xai
            else self.session["audio"]["input"].get("turn_detection")
        )

    def _voice(self):
        return (
            self.session.get("voice") if self.xai else self.session["audio"]["output"].get("voice")
        )

    # sending

    async def send(self, ev: dict, validate: bool = True) -> None:
        ev.setdefault("event_id", _id("event"))
        if validate:
            problem = check_event(ev, "server", self.fake.dialect)
            if problem:
                self.fake.invalid.append(problem.line)
        if ev["type"] == "error":
            self.rec.errors.append(ev["error"])
        # Shielded: a reply task cancelled mid-send still sends (and counts) that event whole,
        # before whatever the canceller sends next (the lock is FIFO).
        await asyncio.shield(self._send_text(ev["type"], json.dumps(ev)))

    async def _send_text(self, typ: str, text: str) -> None:
        async with self.lock:
            if self.ws.closed:
                return
            try:
                await self.ws.send_str(text)
            except ConnectionError:
                return
            self.rec.server_events.append((time.monotonic(), typ))

    async def error(
        self,
        code: str | None,
        message: str,
        param: str | None = None,
        client_event_id: str | None = None,
        etype: str = "invalid_request_error",
    ) -> None:
        await self.send(
            {
                "type": "error",
                "error": {
                    "type": etype,
                    "code": code,
                    "message": message,
                    "param": param,
                    "event_id": client_event_id,
                },
            }
        )

    # the session

    async def run(self) -> None:
        side_tasks = []
        if self.xai:
            await self.send(
                {
                    "type": "conversation.created",
                    "conversation": {"id": self.conversation_id, "object": "realtime.conversation"},
                }
            )
            if self.fake.xai_session_created:
                await self.send({"type": "session.created", "session": copy.deepcopy(self.session)})
            if self.fake.ping_every_s:
                side_tasks.append(asyncio.create_task(self._pinger(self.fake.ping_every_s)))
        else:
            await self.send({"type": "session.created", "session": copy.deepcopy(self.session)})
        if self.fake.close_after_s is not None:
            side_tasks.append(asyncio.create_task(self._closer(self.fake.close_after_s)))
        if self.fake.malformed_after_s is not None:
            side_tasks.append(asyncio.create_task(self._malformed(self.fake.malformed_after_s)))
        try:
            async for msg in self.ws:
                if msg.type == WSMsgType.TEXT:
                    await self.on_text(msg.data)
                elif msg.type == WSMsgType.BINARY:
                    self.fake.invalid.append(
                        "client: a binary message (the API takes JSON text events)"
                    )
                    await self.error(
                        "invalid_json", "Binary messages are not supported; send JSON text events."
                    )
        finally:
            for t in side_tasks + ([self.task] if self.task else []):
                t.cancel()
            await asyncio.gather(
                *side_tasks, *([self.task] if self.task else []), return_exceptions=True
            )
            self.rec.heard = self.heard.record()
            self.rec.t_end = time.monotonic()

    async def _pinger(self, every_s: float) -> None:
        while True:
            await asyncio.sleep(every_s)
            await self.send({"type": "ping", "timestamp": int(time.time() * 1000)})

    async def _closer(self, after_s: float) -> None:
        await asyncio.sleep(after_s)
        if self.task:
            self.task.cancel()
        self.rec.closed_by_server = 1011
        async with self.lock:
            await self.ws.close(code=1011, message=b"Internal server error")

    async def _malformed(self, after_s: float) -> None:
        await asyncio.sleep(after_s)
        self.rec.malformed_sent = time.monotonic()
        await self.send(
            {
                "type": "response.output_audio.delta",
                "item_id": self.active.item_id if self.active else _id("item"),
                "output_index": 0,
                "content_index": 0,
            },
            validate=False,
        )

    async def on_text(self, data: str) -> None:
        try:
            ev = json.loads(data)
        except ValueError:
            self.fake.invalid.append(f"client: not JSON: {data[:80]!r}")
            await self.error("invalid_json", "We could not parse the JSON body of your request.")
            return
        typ = ev.get("type") if isinstance(ev, dict) else None
        self.rec.client_events[typ] += 1
        cid = (
            ev.get("event_id")
            if isinstance(ev, dict) and isinstance(ev.get("event_id"), str)
            else None
        )
        problem = check_event(ev, "client", self.fake.dialect)
        if problem:
            self.fake.invalid.append(problem.line)
        if typ == "session.update" and isinstance(ev.get("session"), dict):
            bad_rate = self._rate_problem(ev["session"])
            if bad_rate:
                param, rate = bad_rate
                supported = ", ".join(f"'{r}'" for r in self.fake.rates)
                await self.error(
                    "invalid_value",
                    f"Invalid value: '{rate}'. Supported values are: {supported}.",
                    param,
                    cid,
                )
                return
        if problem:
            await self.error(problem.code, problem.message, problem.param, cid)
            return
        handler = {
            "session.update": self.on_session_update,
            "input_audio_buffer.append": self.on_append,
            "input_audio_buffer.commit": self.on_commit,
            "input_audio_buffer.clear": self.on_clear,
            "conversation.item.create": self.on_item_create,
            "conversation.item.delete": self.on_item_delete,
            "conversation.item.truncate": self.on_truncate,
            "response.create": self.on_response_create,
            "response.cancel": self.on_response_cancel,
        }.get(typ)
        if handler is None:
            await self.error(
                "unsupported_event", f"The stand-in does not handle '{typ}'.", "type", cid
            )
            return
        await handler(ev, cid)

    def _rate_problem(self, session: dict) -> tuple[str, Any] | None:
        for side in ("input", "output"):
            fmt = ((session.get("audio") or {}).get(side) or {}).get("format")
            if (
                isinstance(fmt, dict)
                and fmt.get("type", "audio/pcm") == "audio/pcm"
                and "rate" in fmt
                and fmt["rate"] not in self.fake.rates
            ):
                return f"session.audio.{side}.format.rate", fmt["rate"]
        return None

    async def on_session_update(self, ev: dict, cid: str | None) -> None:
        update = copy.deepcopy(ev["session"])
        self.rec.session_updates.append(copy.deepcopy(ev["session"]))
        for side in ("input", "output"):
            fmt = ((update.get("audio") or {}).get(side) or {}).get("format")
            if isinstance(fmt, dict) and fmt.get("type", "audio/pcm") != "audio/pcm":
                await self.error(
                    "unsupported_in_standin",
                    f"The stand-in speaks audio/pcm only, not {fmt['type']}.",
                    f"session.audio.{side}.format.type",
                    cid,
                )
                return
        if self.xai:  # keep xAI's top-level fields canonical, wherever the client put them
            audio = update.get("audio") or {}
            if "turn_detection" in (audio.get("input") or {}) and "turn_detection" not in update:
                update["turn_detection"] = audio["input"].pop("turn_detection")
            if "voice" in (audio.get("output") or {}) and "voice" not in update:
                update["voice"] = audio["output"].pop("voice")
            if (
                isinstance(update.get("turn_detection"), dict)
                and update["turn_detection"].get("type") != "server_vad"
            ):
                await self.error(
                    "invalid_value",
                    "Only server_vad turn detection (or null) is supported.",
                    "session.turn_detection.type",
                    cid,
                )
                return
        old_rate = self.in_rate
        self.session = _deep_merge(self.session, update)
        if self.in_rate != old_rate:
            self.gate = None  # a new one at the new rate, from the next audio on
        if self.gate is not None:
            self.gate.end_silence_s = self._silence_s()
        await self.send({"type": "session.updated", "session": copy.deepcopy(self.session)})

    def _silence_s(self) -> float:
        td = self.td or {}
        return (td.get("silence_duration_ms") or 500) / 1000.0

    # input audio and the VAD

    async def on_append(self, ev: dict, cid: str | None) -> None:
        try:
            raw = base64.b64decode(ev["audio"], validate=True)
        except (binascii.Error, ValueError):
            self.fake.invalid.append("client input_audio_buffer.append: audio is not base64")
            await self.error(
                "invalid_value",
                "Invalid 'audio'. Expected base64-encoded audio bytes.",
                "audio",
                cid,
            )
            return
        if len(raw) % 2:
            self.fake.invalid.append(
                f"client input_audio_buffer.append: odd byte count {len(raw)} for PCM16"
            )
            await self.error(
                "invalid_value",
                "Invalid 'audio': PCM16 audio has an even number of bytes.",
                "audio",
                cid,
            )
            return
        rate, now = self.in_rate, time.monotonic()
        pcm = np.frombuffer(raw, dtype="<i2").astype(np.float32) / 32768.0
        self.heard.add(pcm)
        self.rec.audio_in.append((now, len(pcm), rate))
        before_s, self.in_s = self.in_s, self.in_s + len(pcm) / rate
        if self.td is None:  # manual turns: no VAD (a later one starts afresh)
            self.gate = None
            return
        if self.gate is None:
            self.gate = SpeechGate(rate, block=rate // 100, end_silence_s=self._silence_s())
            self.gate_offset_s = before_s
        for what, t in self.gate.push(pcm):
            t_s = self.gate_offset_s + t
            if what == "start":
                await self.on_speech_start(int(round(t_s * 1000)), now)
            else:
                end_s = t_s + self.gate.block / rate - self.gate.end_silence_s
                await self.on_speech_end(int(round(max(end_s, 0.0) * 1000)))

    def _playing(self, now: float) -> bool:
        """Is a reply still playing by the server's reckoning (being sent, or its sent audio not yet
        played out in wall time; a cancelled one is over)?"""
        if self.task is not None and not self.task.done():
            return True
        last = self.rec.responses[-1] if self.rec.responses else None
        return bool(
            last
            and last.status == "completed"
            and last.t_first_delta is not None
            and now < last.t_first_delta + last.sent_s
        )

    async def on_speech_start(self, ms: int, now: float) -> None:
        barge = self._playing(now)
        self.user_item = _id("item")
        self.rec.speech_starts.append(SpeechStart(ms, now, barge))
        await self.send(
            {
                "type": "input_audio_buffer.speech_started",
                "audio_start_ms": ms,
                "item_id": self.user_item,
            }
        )
        if barge:
            self.fake.barge_ins += 1
            if (self.td or {}).get("interrupt_response", True) and self._cancellable():
                await self.cancel("turn_detected")

    async def on_speech_end(self, ms: int) -> None:
        item = self.user_item or _id("item")
        self.user_item = None
        self.rec.speech_stops.append((ms, time.monotonic()))
        await self.send(
            {"type": "input_audio_buffer.speech_stopped", "audio_end_ms": ms, "item_id": item}
        )
        await self.commit(item)
        if (self.td or {}).get("create_response", True) and not self._busy():
            await self.start_response()

    async def commit(self, item_id: str) -> None:
        prev, self.last_item = self.last_item, item_id
        self.items[item_id] = {"role": "user"}
        self.buf_start_s = self.in_s
        await self.send(
            {"type": "input_audio_buffer.committed", "item_id": item_id, "previous_item_id": prev}
        )
        user = {
            "id": item_id,
            "object": "realtime.item",
            "type": "message",
            "role": "user",
            "status": "completed",
            "content": [{"type": "input_audio", "transcript": None}],
        }
        await self.send({"type": "conversation.item.added", "item": user, "previous_item_id": prev})
        await self.send({"type": "conversation.item.done", "item": user, "previous_item_id": prev})
        if self.session["audio"]["input"].get("transcription"):
            await self.send(
                {
                    "type": "conversation.item.input_audio_transcription.completed",
                    "item_id": item_id,
                    "content_index": 0,
                    "transcript": "(user)",
                    "usage": {"type": "duration", "seconds": round(self.in_s, 3)},
                }
            )

    async def on_commit(self, ev: dict, cid: str | None) -> None:
        have_ms = (self.in_s - self.buf_start_s) * 1000
        if have_ms < 100:
            await self.error(
                "input_audio_buffer_commit_empty",
                f"Error committing input audio buffer: buffer too small. Expected at least 100ms of "
                f"audio, but buffer only has {have_ms:.2f}ms of audio.",
                None,
                cid,
            )
            return
        await self.commit(self.user_item or _id("item"))
        self.user_item = None

    async def on_clear(self, ev: dict, cid: str | None) -> None:
        self.buf_start_s = self.in_s
        await self.send({"type": "input_audio_buffer.cleared"})

    # conversation items

    async def on_item_create(self, ev: dict, cid: str | None) -> None:
        item = copy.deepcopy(ev["item"])
        self.rec.item_creates.append(copy.deepcopy(ev["item"]))
        item.setdefault("id", _id("item"))
        if item["id"] in self.items:
            await self.error(
                "invalid_value", f"Item with id '{item['id']}' already exists.", "item.id", cid
            )
            return
        item.setdefault("object", "realtime.item")
        item.setdefault("status", "completed")
        for part in item.get("content") or []:
            self.text_words += len(str(part.get("text") or "").split())
        prev = ev.get("previous_item_id", self.last_item)
        self.items[item["id"]] = {"role": item.get("role")}
        self.last_item = item["id"]
        await self.send({"type": "conversation.item.added", "item": item, "previous_item_id": prev})
        await self.send({"type": "conversation.item.done", "item": item, "previous_item_id": prev})

    async def on_item_delete(self, ev: dict, cid: str | None) -> None:
        iid = ev["item_id"]
        ok = iid in self.items
        self.rec.deletes.append(Delete(iid, ok, time.monotonic()))
        if not ok:
            await self.error(
                "invalid_value", f"Item with item_id '{iid}' not found.", "item_id", cid
            )
            return
        del self.items[iid]
        await self.send({"type": "conversation.item.deleted", "item_id": iid})

    async def on_truncate(self, ev: dict, cid: str | None) -> None:
        iid, end_ms, ci = ev["item_id"], ev["audio_end_ms"], ev["content_index"]
        resp = (self.items.get(iid) or {}).get("response")
        sent_ms = resp.sent_ms if resp is not None else None
        if resp is None:
            why = (
                "item_id",
                f"Item with item_id '{iid}' not found."
                if iid not in self.items
                else f"Item '{iid}' has no audio content to truncate.",
            )
        elif ci != 0:
            why = (
                "content_index",
                f"Invalid 'content_index': item '{iid}' has one content part (index 0).",
            )
        elif end_ms < 0 or end_ms * resp.rate > resp.sent_samples * 1000:
            why = (
                "audio_end_ms",
                f"Audio content of {sent_ms:.0f}ms is already shorter than {end_ms}ms "
                f"(item '{iid}' has {sent_ms:.0f}ms of audio).",
            )
        else:
            why = None
        self.rec.truncates.append(Truncate(iid, end_ms, sent_ms, why is None, time.monotonic()))
        if why:
            await self.error("invalid_value", why[1], why[0], cid)
            return
        await self.send(
            {
                "type": "conversation.item.truncated",
                "item_id": iid,
                "content_index": ci,
                "audio_end_ms": end_ms,
            }
        )

    # responses

    def _busy(self) -> bool:
        return self.task is not None and not self.task.done()

    def _cancellable(self) -> bool:
        return self._busy() and self.active is not None and not self.active.finishing

    async def on_response_create(self, ev: dict, cid: str | None) -> None:
        if self._busy():
            msg = (
                "Conversation already has an active response in progress: "
                f"{self.active.id if self.active else ''}. Wait until the response is finished before "
                "creating a new one."
            )
            await self.error("conversation_already_has_active_response", msg, None, cid)
            return
        await self.start_response()

    async def on_response_cancel(self, ev: dict, cid: str | None) -> None:
        rid = ev.get("response_id")
        if self._busy() and self.active is not None and self.active.finishing:
            await asyncio.wait([self.task])  # about to complete: let it
        if self._cancellable() and rid in (None, self.active.id):
            await self.cancel("client_cancelled")
            return
        self.rec.cancels.append(Cancel(rid, "not_active", time.monotonic()))
        msg = "no active response" if self.xai else "Cancellation failed: no active response found"
        await self.error("response_cancel_not_active", msg, None, cid)

    async def start_response(self) -> None:
        reply = self.fake.replies[self.n_reply % len(self.fake.replies)]
        self.n_reply += 1
        rr = ResponseRecord(
            id=_id("resp"), item_id=_id("item"), rate=self.out_rate, t_created=time.monotonic()
        )
        self.rec.responses.append(rr)
        self.active, self.pieces = rr, []
        await self.send({"type": "response.created", "response": self._response_obj(rr, [])})
        self.task = asyncio.create_task(self._play(rr, reply))

    def _item(self, rr: ResponseRecord, status: str, transcript: str | None) -> dict:
        content = [] if transcript is None else [{"type": "output_audio", "transcript": transcript}]
        return {
            "id": rr.item_id,
            "object": "realtime.item",
            "type": "message",
            "role": "assistant",
            "status": status,
            "content": content,
        }

    def _response_obj(
        self,
        rr: ResponseRecord,
        output: list,
        usage: dict | None = None,
        status_details: dict | None = None,
    ) -> dict:
        return {
            "id": rr.id,
            "object": "realtime.response",
            "status": rr.status,
            "status_details": status_details,
            "output": output,
            "conversation_id": self.conversation_id,
            "output_modalities": ["audio"],
            "max_output_tokens": "inf",
            "metadata": None,
            "usage": usage,
            "audio": {"output": {"format": dict(self._fmt("output")), "voice": self._voice()}},
        }

    def _usage(self, rr: ResponseRecord) -> dict:
        in_audio = int(self.in_s * 10)
        in_text = len(str(self.session.get("instructions") or "").split()) + self.text_words
        out_audio = int(rr.sent_s * 20)
        inp, out = in_audio + in_text, out_audio + rr.words
        return {
            "total_tokens": inp + out,
            "input_tokens": inp,
            "output_tokens": out,
            "input_token_details": {
                "audio_tokens": in_audio,
                "text_tokens": in_text,
                "image_tokens": 0,
                "cached_tokens": 0,
                "cached_tokens_details": {"audio_tokens": 0, "text_tokens": 0, "image_tokens": 0},
            },
            "output_token_details": {"audio_tokens": out_audio, "text_tokens": rr.words},
        }

    async def _rate_limits(self, usage: dict) -> None:
        n = len(self.rec.responses)
        used = sum(r.words + int(r.sent_s * 20) for r in self.rec.responses) + usage["input_tokens"]
        await self.send(
            {
                "type": "rate_limits.updated",
                "rate_limits": [
                    {
                        "name": "requests",
                        "limit": 5000,
                        "remaining": 5000 - n,
                        "reset_seconds": 0.012,
                    },
                    {
                        "name": "tokens",
                        "limit": 400000,
                        "remaining": 400000 - used,
                        "reset_seconds": 0.9,
                    },
                ],
            }
        )

    async def _play(self, rr: ResponseRecord, reply: Reply) -> None:
        rate = rr.rate
        pcm = self.fake.reply_pcm(reply, rate)
        step = max(1, int(round(self.fake.chunk_s * rate)))
        base = {"response_id": rr.id, "item_id": rr.item_id, "output_index": 0, "content_index": 0}
        prev, self.last_item = self.last_item, rr.item_id
        self.items[rr.item_id] = {"role": "assistant", "response": rr}
        await self.send(
            {
                "type": "response.output_item.added",
                "response_id": rr.id,
                "output_index": 0,
                "item": self._item(rr, "in_progress", None),
            }
        )
        await self.send(
            {
                "type": "conversation.item.added",
                "item": self._item(rr, "in_progress", None),
                "previous_item_id": prev,
            }
        )
        await self.send(
            {
                "type": "response.content_part.added",
                **base,
                "part": {"type": "audio", "transcript": ""},
            }
        )
        for i in range(0, len(pcm), step):
            t0 = i / rate
            t1 = (i + step) / rate if i + step < len(pcm) else math.inf
            for w in reply.words_between(t0, t1):
                piece = w if not self.pieces else " " + w
                self.pieces.append(piece)
                rr.words += 1
                await self.send(
                    {"type": "response.output_audio_transcript.delta", **base, "delta": piece}
                )
            chunk = pcm[i : i + step]
            if rr.t_first_delta is None:
                rr.t_first_delta = time.monotonic()
            rr.sent_samples += len(chunk)  # counted before the send: a shielded send completes
            await self.send(
                {
                    "type": "response.output_audio.delta",
                    **base,
                    "delta": base64.b64encode(chunk.tobytes()).decode(),
                }
            )
            await asyncio.sleep(self.fake.send_every_s)
        rr.finishing = True
        transcript = "".join(self.pieces)
        await self.send({"type": "response.output_audio.done", **base})
        await self.send(
            {"type": "response.output_audio_transcript.done", **base, "transcript": transcript}
        )
        await self.send(
            {
                "type": "response.content_part.done",
                **base,
                "part": {"type": "audio", "transcript": transcript},
            }
        )
        done_item = self._item(rr, "completed", transcript)
        await self.send(
            {
                "type": "response.output_item.done",
                "response_id": rr.id,
                "output_index": 0,
                "item": done_item,
            }
        )
        await self.send(
            {"type": "conversation.item.done", "item": done_item, "previous_item_id": prev}
        )
        rr.status, rr.t_done = "completed", time.monotonic()
        usage = self._usage(rr)
        await self.send(
            {"type": "response.done", "response": self._response_obj(rr, [done_item], usage)}
        )
        await self._rate_limits(usage)
        self.active = None

    async def cancel(self, reason: str) -> None:
        """Stop the reply being sent and say so (`response.done`, status cancelled)."""
        rr, task = self.active, self.task
        task.cancel()
        await asyncio.wait([task])
        rr.status, rr.t_done = "cancelled", time.monotonic()
        self.rec.cancels.append(Cancel(rr.id, reason, rr.t_done))
        item = self._item(rr, "incomplete", "".join(self.pieces))
        usage = self._usage(rr)
        await self.send(
            {
                "type": "response.done",
                "response": self._response_obj(
                    rr, [item], usage, status_details={"type": "cancelled", "reason": reason}
                ),
            }
        )
        await self._rate_limits(usage)
        self.active = None
