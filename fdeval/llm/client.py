"""A cached, retrying client for the Anthropic Messages API and OpenAI-compatible chat completions.

``LLMClient(model, temperature, max_tokens, cache_dir).complete(system, prompt)`` sends one user
message under a system prompt and returns the answer as an :class:`LLMResponse`.

* **Backend** (``backend=``): ``anthropic`` (default; the ``anthropic`` SDK, Messages API) or an
  OpenAI-compatible server: ``openai``, ``vllm``, ``sglang`` -- one protocol,
  ``POST {base_url}/chat/completions`` over the standard library (:mod:`fdeval.llm.openai_chat`),
  differing only in the default ``base_url`` (:data:`OPENAI_DEFAULT_URLS`). Callers see the same
  interface, retries, cache and run-stopping rules either way.
* **Gemini** (``backend=gemini``): ``POST {base_url}/models/{model}:generateContent``, also over the
  standard library (:mod:`fdeval.llm.gemini_text`), key in ``GEMINI_API_KEY`` or ``GOOGLE_API_KEY``
  (optional for a loopback endpoint), default endpoint
  ``https://generativelanguage.googleapis.com/v1beta``.
* **OpenAI reasoning models**: ``max_tokens_param="max_completion_tokens"`` sends the output bound
  under that name (GPT-5.x refuse ``max_tokens``) and ``reasoning_effort`` is sent when set; both
  key the cache when not at their default.
* **Key**: read from the environment only -- ``ANTHROPIC_API_KEY``, or ``OPENAI_API_KEY`` for the
  OpenAI protocol, where it is optional for a loopback endpoint (a local vLLM started without
  ``--api-key``) -- when a request actually has to go out (a fully cached rerun needs no key). It
  is never taken from a config, never logged, and never written to a cache file; error messages
  have it scrubbed.
* **Cache**: every answer is stored under ``cache_dir`` as one JSON file named by a content hash
  of (model, temperature, max_tokens, system, prompt, seed, endpoint; the protocol and ``top_p``
  when not the Anthropic default / null), written atomically
  (:mod:`fdeval.files`). A rerun with the same request reads the file and makes no call. Only
  successful answers are cached; failures are retried next time.
* **Endpoint**: ``base_url``, else (Anthropic) the environment variable ``ANTHROPIC_BASE_URL``,
  else :data:`DEFAULT_BASE_URL` (the SDK's default) -- or, for the OpenAI protocol, the backend's
  default in :data:`OPENAI_DEFAULT_URLS` (no environment variable) -- resolved once at
  construction and used explicitly, so the URL that keys the cache is the one requests go to. It is part of every
  cache key (:attr:`LLMClient.endpoint`): answers of one endpoint are never reused for another.
  The key is sent only to ``https`` endpoints, or over plain ``http`` to a loopback host
  (127.0.0.0/8, ``::1``, ``localhost``); any other endpoint is refused at construction.
* **Retries**: the SDK's own retries are off (``max_retries=0``); this module retries 408, 409,
  429 and 5xx answers, connection errors, timeouts and malformed answers (a body that is not a
  Messages API message or chat completion, e.g. a proxy's error page) up to ``max_retries`` times, with
  exponential backoff (``backoff_s * 2**k``, capped at ``max_backoff_s``, times a jitter factor in
  [0.5, 1) drawn from a generator seeded by ``seed`` and the request hash), and at least as long
  as a ``Retry-After`` header asks (capped too). Each retry is logged as a warning. Retries of one
  request end ``max_retry_s`` (default 60 s) after its first attempt failed: a retry that would
  start later is not made and the last one's timeout is cut to fit, so one request takes at most
  ``timeout_s + max_retry_s``.
* **Unavailable endpoint**: :class:`LLMUnavailable` (one line naming the endpoint and the last
  error) is raised, instead of an ordinary failure, once ``max_unreachable`` (default 3)
  consecutive attempts got no HTTP answer at all (connection refused or reset, unknown host,
  timeout), or ``max_failed_requests`` (default 3) consecutive requests failed after all their
  retries (429, 5xx, non-API bodies). With the default backoff a closed port is detected in
  about 1.5-3 s. Any HTTP answer resets the first count, any success the second; once raised,
  every later request of this client raises it at once, without sending anything.
* **Temperature, top_p** (Anthropic): sent when the installed SDK's ``messages.create`` takes the
  argument. SDK releases from 2.0 on target an API version without sampling parameters; with
  those they are not sent (a warning says so once per client), but still key the cache.
  ``None`` never sends one. OpenAI protocol: every non-null one is sent.
* **Seed**: the Messages API has no sampling seed; there ``seed`` only keys the cache (so that
  separate samples of one prompt can be drawn and kept) and seeds the retry jitter. The OpenAI
  protocol also sends it (vLLM honours a per-request seed, OpenAI treats it as best effort, a
  server may ignore it). The cache file records what was sent (``*_sent``).

The ``anthropic`` package is imported on the first Anthropic request that is not in the cache.
"""

from __future__ import annotations

import hashlib
import importlib.util
import inspect
import ipaddress
import json
import logging
import math
import os
import random
import re
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable
from urllib.parse import urlsplit

from fdeval.errors import FdevalError
from fdeval.files import write_json_atomic
from fdeval.llm import gemini_text
from fdeval.llm.openai_chat import AttemptFailed, ChatAnswer, opener, post_chat

log = logging.getLogger("fdeval.llm")

API_KEY_ENV = "ANTHROPIC_API_KEY"
BASE_URL_ENV = "ANTHROPIC_BASE_URL"
DEFAULT_BASE_URL = "https://api.anthropic.com"  # the SDK's own default
OPENAI_KEY_ENV = "OPENAI_API_KEY"
# backend -> default endpoint of the OpenAI chat-completions protocol (vllm serve / sglang.launch_server ports)
OPENAI_DEFAULT_URLS = {
    "openai": "https://api.openai.com/v1",
    "vllm": "http://127.0.0.1:8000/v1",
    "sglang": "http://127.0.0.1:30000/v1",
}
BACKENDS = ("anthropic", *OPENAI_DEFAULT_URLS, "gemini")
# OpenAI's reasoning models (GPT-5.x) take the output bound as max_completion_tokens, not max_tokens
MAX_TOKENS_PARAMS = ("max_tokens", "max_completion_tokens")
CACHE_FORMAT = "fdeval.llm_cache"
CACHE_FORMAT_VERSION = 2  # 2: the endpoint is part of the key
RETRY_STATUS = frozenset({408, 409, 429})  # plus every 5xx
CONFIG_STATUS = {
    401: "credentials rejected",
    403: "permission denied",
    404: "model or endpoint not found",
}


class LLMError(FdevalError):
    """A model request that failed (after retries, where a retry could help). One line."""


class LLMConfigError(LLMError):
    """A failure no retry can fix and that applies to every request: no key, no SDK, credentials
    rejected, unknown model or endpoint, a bad client setting."""


class LLMUnavailable(LLMConfigError):
    """The endpoint cannot be reached (see the module docstring): every further request would fail
    alike, so callers stop as for a config error instead of recording a failure per request."""

    def __init__(self, who: str, endpoint: str, reason: str, during: str | None = None):
        # `during`: the unit of work that was left undone (e.g. a case@policy pair), so the one line
        # says where the run stopped
        self.who, self.endpoint, self.reason, self.during = who, endpoint, reason, during
        at = f" while {during}" if during else ""
        super().__init__(
            f"{who}: endpoint {endpoint} unavailable ({reason}){at}; answers written so far are kept, "
            f"relaunch once it is reachable"
        )


@dataclass(frozen=True)
class LLMResponse:
    """One answer. `prompt_hash` is the request's content hash (its cache key); `model` is the
    model that answered (as the API reports it); `usage` holds token counts."""

    text: str
    model: str
    cached: bool
    prompt_hash: str
    usage: dict[str, int] = field(default_factory=dict, compare=False, hash=False)
    stop_reason: str | None = None


def protocol_of(backend: str) -> str:
    """``anthropic``, ``gemini`` or ``openai`` (the wire protocol of `backend`)."""
    return backend if backend in ("anthropic", "gemini") else "openai"


def key_variables(backend: str) -> tuple[str, ...]:
    """The environment variables a client of `backend` reads (its key; Anthropic's base URL too)."""
    protocol = protocol_of(backend)
    if protocol == "anthropic":
        return (API_KEY_ENV, BASE_URL_ENV)
    return gemini_text.KEY_VARIABLES if protocol == "gemini" else (OPENAI_KEY_ENV,)


def request_hash(
    model: str,
    temperature: float | None,
    max_tokens: int,
    system: str,
    prompt: str,
    seed: int | None,
    attempt: int = 0,
    *,
    endpoint: str,
    protocol: str = "anthropic",
    top_p: float | None = None,
    options: dict[str, Any] | None = None,
) -> str:
    """The content hash (sha256, hex) that names a request's cache file.

    `endpoint` is the resolved API URL (:func:`resolve_endpoint`). `attempt` > 0 (a re-ask after
    an unusable answer) gets its own entry; 0 adds nothing to the key, nor do the ``anthropic``
    protocol, ``top_p=None`` and empty `options` (keys of caches written before they existed stay
    valid). `options`: the protocol's request settings that are not at their default
    (``max_tokens_param``, ``reasoning_effort``).
    """
    payload: dict[str, Any] = {
        "model": model,
        "temperature": None if temperature is None else float(temperature),
        "max_tokens": int(max_tokens),
        "system": system,
        "prompt": prompt,
        "seed": seed,
        "endpoint": endpoint,
    }
    if attempt:
        payload["attempt"] = int(attempt)
    if protocol != "anthropic":
        payload["protocol"] = protocol
    if top_p is not None:
        payload["top_p"] = float(top_p)
    if options:
        payload["options"] = dict(options)
    blob = json.dumps(payload, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


def _one_line(text: str, limit: int = 240) -> str:
    text = re.sub(r"\s+", " ", str(text)).strip()
    return text if len(text) <= limit else text[: limit - 3] + "..."


def is_loopback_host(host: str) -> bool:
    """127.0.0.0/8, ::1 or localhost (no name resolution: a name that merely resolves there is not)."""
    host = host.strip("[]").lower().rstrip(".")
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def resolve_endpoint(
    base_url: str | None, field: str = "llm.base_url", backend: str = "anthropic"
) -> str:
    """The normalised URL requests go to: `base_url`, else (``anthropic``) ``$ANTHROPIC_BASE_URL``,
    else :data:`DEFAULT_BASE_URL`; for the OpenAI-protocol backends, else
    :data:`OPENAI_DEFAULT_URLS`. Raises :class:`LLMConfigError` (naming `field` or the environment
    variable) for a URL that is not http(s) with a host, or a plain-http one to a non-loopback
    host, where the key would travel in clear text."""
    source = field
    if base_url is None and backend == "gemini":
        base_url = gemini_text.DEFAULT_URL
    elif base_url is None and backend != "anthropic":
        base_url = OPENAI_DEFAULT_URLS[backend]
    if base_url is None:
        env = os.environ.get(BASE_URL_ENV, "").strip()
        base_url, source = (
            (env, f"environment variable {BASE_URL_ENV}") if env else (DEFAULT_BASE_URL, field)
        )
    # The value is never echoed: a mistyped key or a password in the URL must not reach a log.
    try:
        parts = urlsplit(base_url.strip())
        host, port = parts.hostname or "", parts.port
    except ValueError as e:
        raise LLMConfigError(f"{source}: not a valid URL ({e})") from None
    scheme = parts.scheme.lower()
    if scheme not in ("http", "https") or not host:
        raise LLMConfigError(f"{source}: expected an http:// or https:// URL with a host")
    if parts.username or parts.password or parts.query or parts.fragment:
        raise LLMConfigError(f"{source}: the URL must not carry credentials, a query or a fragment")
    if scheme == "http" and not is_loopback_host(host):
        raise LLMConfigError(
            f"{source}: refusing plain http to {host}: the API key is sent only over https, "
            f"or over http to a loopback host (127.0.0.0/8, ::1, localhost)"
        )
    netloc = f"[{host}]" if ":" in host else host
    if port is not None and port != {"http": 80, "https": 443}[scheme]:
        netloc += f":{port}"
    return f"{scheme}://{netloc}{parts.path.rstrip('/')}"


def _import_anthropic():
    try:
        import anthropic
    except ImportError:
        raise LLMConfigError(
            "llm: the 'anthropic' package is not installed; pip install anthropic"
        ) from None
    return anthropic


class LLMClient:
    """Cached, retrying access to one model at fixed sampling settings (see the module docstring)."""

    def __init__(
        self,
        model: str,
        temperature: float | None,
        max_tokens: int,
        cache_dir: str | os.PathLike,
        seed: int | None = None,
        base_url: str | None = None,
        max_retries: int = 5,
        timeout_s: float = 60.0,
        *,
        backoff_s: float = 1.0,
        max_backoff_s: float = 30.0,
        max_retry_s: float = 60.0,
        max_unreachable: int = 3,
        max_failed_requests: int = 3,
        name: str = "llm",
        backend: str = "anthropic",
        top_p: float | None = None,
        max_tokens_param: str = "max_tokens",
        reasoning_effort: str | None = None,
    ):
        # Every setting is checked here, without I/O, so a caller can report a bad one before work.
        def bad(field: str, want: str, value: Any) -> LLMConfigError:
            return LLMConfigError(
                f"{name}.{field}: must be {want}, got {_one_line(repr(value), 80)}"
            )

        def number(v: Any) -> bool:
            return not isinstance(v, bool) and isinstance(v, (int, float)) and math.isfinite(v)

        def integer(v: Any) -> bool:
            return not isinstance(v, bool) and isinstance(v, int)

        if backend not in BACKENDS:
            raise bad("backend", f"one of {list(BACKENDS)}", backend)
        if (
            not isinstance(model, str)
            or not model.strip()
            or any(c.isspace() or not c.isprintable() for c in model)
        ):
            raise bad("model", "a non-empty model id without spaces", model)
        if temperature is not None and (not number(temperature) or not 0 <= temperature <= 2):
            raise bad("temperature", "a number in [0, 2] or null", temperature)
        if top_p is not None and (not number(top_p) or not 0 < top_p <= 1):
            raise bad("top_p", "a number in (0, 1] or null", top_p)
        if not integer(max_tokens) or not 1 <= max_tokens <= 1_000_000:
            raise bad("max_tokens", "an integer in [1, 1000000]", max_tokens)
        if seed is not None and not integer(seed):
            raise bad("seed", "an integer or null", seed)
        for field_, value, low in (
            ("max_retries", max_retries, 0),
            ("max_unreachable", max_unreachable, 1),
            ("max_failed_requests", max_failed_requests, 1),
        ):
            if not integer(value) or not low <= value <= 1000:
                raise bad(field_, f"an integer in [{low}, 1000]", value)
        for field_, value in (
            ("backoff_s", backoff_s),
            ("max_backoff_s", max_backoff_s),
            ("max_retry_s", max_retry_s),
        ):
            if not number(value) or value < 0:
                raise bad(field_, "a finite number >= 0", value)
        if not number(timeout_s) or timeout_s <= 0:
            raise bad("timeout_s", "a finite number > 0", timeout_s)
        if base_url is not None and (not isinstance(base_url, str) or not base_url.strip()):
            raise bad("base_url", "a URL or null", base_url)
        if max_tokens_param not in MAX_TOKENS_PARAMS:
            raise bad("max_tokens_param", f"one of {list(MAX_TOKENS_PARAMS)}", max_tokens_param)
        if reasoning_effort is not None and (
            not isinstance(reasoning_effort, str) or not reasoning_effort.isidentifier()
        ):
            raise bad(
                "reasoning_effort",
                "a word such as none, low, medium or high, or null",
                reasoning_effort,
            )
        if protocol_of(backend) != "openai" and (
            max_tokens_param != "max_tokens" or reasoning_effort is not None
        ):
            raise LLMConfigError(
                f"{name}: max_tokens_param and reasoning_effort are settings of the OpenAI protocol "
                f"(backend openai, vllm or sglang), not of {backend}"
            )
        if (
            not isinstance(cache_dir, (str, os.PathLike))
            or str(cache_dir).strip() == ""
            or "\0" in str(cache_dir)
        ):
            raise bad("cache_dir", "a folder path", cache_dir)
        self.name = name
        self.backend = backend
        self.protocol = protocol_of(backend)
        self.model = model
        self.temperature = None if temperature is None else float(temperature)
        self.top_p = None if top_p is None else float(top_p)
        self.max_tokens = max_tokens
        self.max_tokens_param = max_tokens_param
        self.reasoning_effort = reasoning_effort
        self.cache_dir = Path(cache_dir).expanduser()
        self.seed = seed
        self.base_url = base_url
        self.endpoint = resolve_endpoint(base_url, f"{name}.base_url", backend)
        self.loopback = is_loopback_host(urlsplit(self.endpoint).hostname or "")
        self.max_retries = max_retries
        self.timeout_s = float(timeout_s)
        self.backoff_s = float(backoff_s)
        self.max_backoff_s = float(max_backoff_s)
        self.max_retry_s = float(max_retry_s)
        self.max_unreachable = max_unreachable
        self.max_failed_requests = max_failed_requests
        self._sdk_client: Any = None
        self._key: str | None = None
        self._sends_temperature: bool | None = None
        self._sends_top_p: bool | None = None
        self._opener: Any = None
        self._lock = threading.Lock()  # the failure counts below are shared by concurrent requests
        self._unreachable = 0  # consecutive attempts without an HTTP answer
        self._failed = 0  # consecutive requests that failed after their retries
        self._unavailable: LLMUnavailable | None = None

    def __repr__(self) -> str:  # never shows the key
        return (
            f"LLMClient(backend={self.backend!r}, model={self.model!r}, temperature={self.temperature!r}, "
            f"max_tokens={self.max_tokens}, cache_dir={str(self.cache_dir)!r}, seed={self.seed!r}, "
            f"endpoint={self.endpoint!r})"
        )

    def check_ready(self) -> None:
        """Raise :class:`LLMConfigError` now if an uncached request could not be sent: no key in the
        environment (not needed by an OpenAI-protocol loopback endpoint) or no ``anthropic``
        package. No network I/O; nothing is imported."""
        if self.protocol == "openai":
            self._openai_key()
            return
        if self.protocol == "gemini":
            self._gemini_key()
            return
        if importlib.util.find_spec("anthropic") is None:
            raise LLMConfigError(
                f"{self.name}: the 'anthropic' package is not installed; pip install anthropic"
            )
        if not os.environ.get(API_KEY_ENV, "").strip():
            raise LLMConfigError(
                f"{self.name}: no API key: set the environment variable {API_KEY_ENV} "
                f"to call {self.model} at {self.endpoint}"
            )

    # ----------------------------------------------------------------------------------------
    def request_hash(self, system: str, prompt: str, attempt: int = 0) -> str:
        return request_hash(
            self.model,
            self.temperature,
            self.max_tokens,
            system,
            prompt,
            self.seed,
            attempt,
            endpoint=self.endpoint,
            protocol=self.protocol,
            top_p=self.top_p,
            options=self.options,
        )

    @property
    def options(self) -> dict[str, Any]:
        """The protocol settings not at their default (they key the cache, see :func:`request_hash`)."""
        out: dict[str, Any] = {}
        if self.max_tokens_param != "max_tokens":
            out["max_tokens_param"] = self.max_tokens_param
        if self.reasoning_effort is not None:
            out["reasoning_effort"] = self.reasoning_effort
        return out

    def cache_path(self, key: str) -> Path:
        return self.cache_dir / key[:2] / f"{key}.json"

    def complete(self, system: str, prompt: str, *, attempt: int = 0) -> LLMResponse:
        """The model's answer to `prompt` under `system`, from the cache when it holds it.

        `attempt` > 0 asks the same request again under its own cache entry (used to re-ask after
        an answer that could not be used). Raises :class:`LLMError` / :class:`LLMConfigError` /
        :class:`LLMUnavailable`.
        """
        if not isinstance(system, str) or not isinstance(prompt, str):
            raise TypeError("system and prompt must be strings")
        key = self.request_hash(system, prompt, attempt)
        path = self.cache_path(key)
        hit = self._read_cache(path, key)
        if hit is not None:
            log.debug("llm: cache hit %s", key[:16])
            return hit
        answer = self._create(system, prompt, key)
        served = answer.model or self.model
        openai = self.protocol == "openai"
        direct = (
            self.protocol != "anthropic"
        )  # every set sampling value is sent (the SDK path checks)
        # one stop vocabulary for callers: the OpenAI protocol's "length" is a cut at max_tokens
        stop = "max_tokens" if openai and answer.finish_reason == "length" else answer.finish_reason
        sent = {
            "temperature": self.temperature is not None
            and (direct or bool(self._sends_temperature)),
            "top_p": self.top_p is not None and (direct or bool(self._sends_top_p)),
            "seed": direct and self.seed is not None,
        }
        response = {
            "id": answer.id,
            "model": served,
            "stop_reason": stop,
            "usage": answer.usage,
            "text": answer.text,
        }
        if openai:
            response["finish_reason"] = answer.finish_reason
        entry = {
            "format": CACHE_FORMAT,
            "format_version": CACHE_FORMAT_VERSION,
            "key": key,
            "request": {
                "backend": self.protocol,
                "endpoint": self.endpoint,
                "model": self.model,
                "temperature": self.temperature,
                "temperature_sent": sent["temperature"],
                "top_p": self.top_p,
                "top_p_sent": sent["top_p"],
                "max_tokens": self.max_tokens,
                "seed": self.seed,
                "seed_sent": sent["seed"],
                "attempt": attempt,
                **self.options,
                "system": system,
                "prompt": prompt,
            },
            "response": response,
            "sdk": {"http": "urllib"} if direct else {"anthropic": self._sdk_version()},
        }
        write_json_atomic(path, entry)
        return LLMResponse(answer.text, served, False, key, answer.usage, stop)

    # ----------------------------------------------------------------------------------------
    def _read_cache(self, path: Path, key: str) -> LLMResponse | None:
        if not path.is_file():
            return None
        try:
            d = json.loads(path.read_text(encoding="utf-8"))
            resp = d["response"]
            req = d.get("request", {})
            if (
                d.get("format") != CACHE_FORMAT
                or d.get("key") != key
                or not isinstance(resp.get("text"), str)
                or req.get("endpoint") != self.endpoint
                or req.get("backend", "anthropic") != self.protocol
            ):
                raise ValueError("not a cache entry for this request")
            usage = {str(k): int(v) for k, v in (resp.get("usage") or {}).items()}
            return LLMResponse(
                resp["text"],
                str(resp.get("model") or self.model),
                True,
                key,
                usage,
                resp.get("stop_reason"),
            )
        except (OSError, ValueError, KeyError, TypeError, AttributeError) as e:
            log.warning(
                "llm: ignoring unreadable cache file %s (%s); asking the model again",
                path,
                _one_line(e, 120),
            )
            return None

    @staticmethod
    def _usage(message: Any) -> dict[str, int]:
        u = getattr(message, "usage", None)
        out: dict[str, int] = {}
        for name in (
            "input_tokens",
            "output_tokens",
            "cache_creation_input_tokens",
            "cache_read_input_tokens",
        ):
            v = getattr(u, name, None)
            if isinstance(v, int) and not isinstance(v, bool):
                out[name] = v
        return out

    @staticmethod
    def _sdk_version() -> str | None:
        try:
            import anthropic

            return str(anthropic.__version__)
        except Exception:  # noqa: BLE001 - provenance only
            return None

    def _scrub(self, text: str) -> str:
        return text.replace(self._key, "***") if self._key else text

    def _client(self) -> Any:
        if self._sdk_client is None:
            anthropic = _import_anthropic()
            key = os.environ.get(API_KEY_ENV, "").strip()
            if not key:
                raise LLMConfigError(
                    f"llm: no API key: set the environment variable {API_KEY_ENV} "
                    f"to call {self.model} (cached answers need no key)"
                )
            self._key = key
            # the resolved endpoint, passed explicitly: the SDK must not pick another from the environment
            self._sdk_client = anthropic.Anthropic(
                api_key=key, base_url=self.endpoint, max_retries=0, timeout=self.timeout_s
            )
            try:
                params = inspect.signature(self._sdk_client.messages.create).parameters
                self._sends_temperature, self._sends_top_p = (
                    "temperature" in params,
                    "top_p" in params,
                )
            except (TypeError, ValueError):
                self._sends_temperature = self._sends_top_p = True
            for what, value, sent in (
                ("temperature", self.temperature, self._sends_temperature),
                ("top_p", self.top_p, self._sends_top_p),
            ):
                if value is not None and not sent:
                    log.warning(
                        "llm: anthropic %s takes no sampling %s; %s=%g is not sent (it still keys the cache)",
                        self._sdk_version(),
                        what,
                        what,
                        value,
                    )
        return self._sdk_client

    def _gemini_key(self) -> str | None:
        """``$GEMINI_API_KEY`` (else ``$GOOGLE_API_KEY``), or None at a loopback endpoint without
        one; else LLMConfigError."""
        key = next(
            (v for v in (os.environ.get(n, "").strip() for n in gemini_text.KEY_VARIABLES) if v),
            None,
        )
        if key is None and not self.loopback:
            raise LLMConfigError(
                f"{self.name}: no API key: set the environment variable GEMINI_API_KEY (or "
                f"GOOGLE_API_KEY) to call {self.model} at {self.endpoint} (a loopback server needs none)"
            )
        return key

    def _openai_key(self) -> str | None:
        """``$OPENAI_API_KEY``, or None at a loopback endpoint without one; else LLMConfigError."""
        key = os.environ.get(OPENAI_KEY_ENV, "").strip() or None
        if key is None and not self.loopback:
            raise LLMConfigError(
                f"{self.name}: no API key: set the environment variable {OPENAI_KEY_ENV} "
                f"to call {self.model} at {self.endpoint} (a loopback server needs none)"
            )
        return key

    def _delay(self, k: int, rng: random.Random, retry_after: float | None) -> float:
        delay = min(self.max_backoff_s, self.backoff_s * (2**k)) * (0.5 + 0.5 * rng.random())
        if retry_after is not None:
            delay = max(delay, min(retry_after, self.max_backoff_s))
        return delay

    def _count_failure(self, unanswered: bool, why: str) -> None:
        """Count an attempt without an HTTP answer (`unanswered`) or a request that failed after its
        retries; raise :class:`LLMUnavailable` once either count reaches its bound."""
        with self._lock:
            if unanswered:
                self._unreachable += 1
                n, bound, what = (
                    self._unreachable,
                    self.max_unreachable,
                    "attempts without an answer",
                )
            else:
                self._failed += 1
                n, bound, what = (
                    self._failed,
                    self.max_failed_requests,
                    "requests failed after their retries",
                )
            if n >= bound and self._unavailable is None:
                self._unavailable = LLMUnavailable(
                    self.name, self.endpoint, f"{n} consecutive {what}; last: {why}"
                )
            error = self._unavailable
        if error is not None:
            raise error

    def _answered(self, ok: bool) -> None:
        with self._lock:
            self._unreachable = 0
            if ok:
                self._failed = 0

    def _create(self, system: str, prompt: str, key: str) -> ChatAnswer:
        """One request through the backend's sender, with the retry loop of the module docstring."""
        if self._unavailable is not None:
            raise self._unavailable
        send = {
            "openai": self._openai_sender,
            "gemini": self._gemini_sender,
            "anthropic": self._anthropic_sender,
        }[self.protocol](system, prompt)
        rng = random.Random(f"{self.seed}:{key}")
        why = ""
        deadline: float | None = None  # end of the retry window, set when the first attempt fails
        made = 0
        while True:
            timeout = self.timeout_s  # a retry gets at most what is left of the window
            if deadline is not None:
                timeout = max(0.05, min(self.timeout_s, deadline - time.monotonic()))
            made += 1
            try:
                answer = send(timeout)
                self._answered(True)
                return answer
            except AttemptFailed as f:
                why, retry_after = self._scrub(_one_line(f.why, 200)), f.retry_after
                if f.unanswered:
                    self._count_failure(True, why)
                else:
                    self._answered(False)
                    if f.status in CONFIG_STATUS:
                        raise LLMConfigError(
                            f"{self.name}: {self.model} at {self.endpoint}: "
                            f"{CONFIG_STATUS[f.status]}: {why}"
                        ) from None
                    if f.status and not (f.status in RETRY_STATUS or f.status >= 500):
                        raise LLMError(
                            f"{self.name}: {self.model}: request rejected: {why}"
                        ) from None
            now = time.monotonic()
            if deadline is None:
                deadline = now + self.max_retry_s
            delay = self._delay(made - 1, rng, retry_after)
            if made > self.max_retries or now + delay >= deadline:
                break
            log.warning(
                "llm: %s: %s; retry %d/%d in %.2f s", self.model, why, made, self.max_retries, delay
            )
            time.sleep(delay)
        self._count_failure(False, why)
        raise LLMError(f"{self.name}: {self.model}: failed after {made} attempt(s): {why}")

    def _anthropic_sender(self, system: str, prompt: str) -> Callable[[float], ChatAnswer]:
        client = self._client()
        anthropic = _import_anthropic()
        params: dict[str, Any] = {
            "model": self.model,
            "max_tokens": self.max_tokens,
            "system": system,
            "messages": [{"role": "user", "content": prompt}],
        }
        if self.temperature is not None and self._sends_temperature:
            params["temperature"] = self.temperature
        if self.top_p is not None and self._sends_top_p:
            params["top_p"] = self.top_p

        def send(timeout: float) -> ChatAnswer:
            try:
                message = client.messages.create(**params, timeout=timeout)
            except anthropic.APIStatusError as e:
                status = int(getattr(e, "status_code", 0) or 0)
                raise AttemptFailed(
                    self._status_text(e, status), status=status, retry_after=self._retry_after(e)
                ) from None
            except anthropic.APITimeoutError:
                raise AttemptFailed(
                    f"no answer within {timeout:g} s (timeout)", unanswered=True
                ) from None
            except anthropic.APIConnectionError as e:
                raise AttemptFailed(
                    f"connection error: {e.__cause__ or e}", unanswered=True
                ) from None
            except (
                anthropic.APIResponseValidationError,
                ValueError,
            ) as e:  # a body that is not the API's JSON
                raise AttemptFailed(f"malformed response: {e}") from None
            if getattr(message, "type", None) != "message" or not isinstance(
                getattr(message, "content", None), list
            ):
                raise AttemptFailed(
                    f"malformed response: not a Messages API message ({_one_line(repr(message), 80)})"
                )
            text = "".join(
                getattr(b, "text", "")
                for b in message.content
                if getattr(b, "type", None) == "text"
            )
            return ChatAnswer(
                text,
                getattr(message, "model", None) or None,
                getattr(message, "stop_reason", None),
                self._usage(message),
                getattr(message, "id", None),
            )

        return send

    def _openai_sender(self, system: str, prompt: str) -> Callable[[float], ChatAnswer]:
        key = self._openai_key()
        self._key = key
        if self._opener is None:
            self._opener = opener(self.loopback)
        messages = ([{"role": "system", "content": system}] if system else []) + [
            {"role": "user", "content": prompt}
        ]
        body: dict[str, Any] = {
            "model": self.model,
            "messages": messages,
            self.max_tokens_param: self.max_tokens,
            "stream": False,
        }
        for name, value in (
            ("temperature", self.temperature),
            ("top_p", self.top_p),
            ("seed", self.seed),
            ("reasoning_effort", self.reasoning_effort),
        ):
            if value is not None:
                body[name] = value
        return lambda timeout: post_chat(self.endpoint, body, key, timeout, open_=self._opener)

    def _gemini_sender(self, system: str, prompt: str) -> Callable[[float], ChatAnswer]:
        key = self._gemini_key()
        self._key = key
        if self._opener is None:
            self._opener = opener(self.loopback)
        body = gemini_text.generate_body(
            system,
            prompt,
            temperature=self.temperature,
            max_tokens=self.max_tokens,
            seed=self.seed,
            top_p=self.top_p,
        )
        return lambda timeout: gemini_text.post_generate(
            self.endpoint, self.model, body, key, timeout, open_=self._opener
        )

    @staticmethod
    def _status_text(e: Any, status: int) -> str:
        body = getattr(e, "body", None)
        err = body.get("error") if isinstance(body, dict) else None
        if isinstance(err, dict) and (err.get("message") or err.get("type")):
            return _one_line(
                f"HTTP {status} {err.get('type') or ''}: {err.get('message') or ''}", 200
            )
        return _one_line(f"HTTP {status}: {getattr(e, 'message', None) or e}", 200)

    @staticmethod
    def _retry_after(e: Any) -> float | None:
        try:
            value = e.response.headers.get("retry-after")
            return max(float(value), 0.0) if value is not None else None
        except (AttributeError, TypeError, ValueError):
            return None
