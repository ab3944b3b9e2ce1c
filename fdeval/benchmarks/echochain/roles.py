"""The LLM roles of EchoChain (planner, simulator, rubric drafter, rubric grader): their settings,
the client each one talks through, what each records, and the re-ask loop.

Every role is configured on its own under ``benchmark.<role>`` (the paper gives each role a model
of another vendor). A role node holds the keys of :data:`ROLE_KEYS`; :func:`check_role` validates
it and fills the defaults of :data:`ROLE_DEFAULTS` (the classifier's node has keys of its own and
is checked by ``classifier.make_classifier``). ``backend: offline`` needs no network (scripted
from the seeds, or a deterministic rule); every other backend (``anthropic``, ``openai``,
``vllm``, ``sglang``, ``gemini``: :data:`fdeval.llm.client.BACKENDS`) goes through
:class:`fdeval.llm.client.LLMClient`, so its answers are pinned (model, temperature,
max_tokens, seed and endpoint key the cache), cached under ``<cache_dir>/<role>`` and reused by a
rerun without a request, and its key comes from the environment only.

:data:`PAPER_ROLES` says which model the paper ran each role on; :func:`deviation` names how a
configured role differs from it (recorded in every results row and listed by ``stage=plan``).

:func:`ask_valid` is the one re-ask loop of every LLM role: it asks, hands the answer to the role's
strict parser, and on a parse error asks again (``attempt=n``: its own cache entry) with the reason
appended, up to ``max_attempts`` answers, before raising the role's infrastructure error.
"""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping, TypeVar

from fdeval.errors import ConfigError
from fdeval.llm.client import (
    BACKENDS as LLM_BACKENDS,
    MAX_TOKENS_PARAMS,
    LLMClient,
    LLMConfigError,
    LLMError,
    protocol_of,
    resolve_endpoint,
)

T = TypeVar("T")

BACKENDS = ("offline", *LLM_BACKENDS)
ROLES = ("planner", "simulator", "drafter", "grader")
ALL_ROLES = ("planner", "simulator", "classifier", "drafter", "grader")
# timeout_s and max_retries only decide whether a request succeeds, never what it answers, so
# they are not part of a role's identity. model null: the backend's default model (DEFAULT_MODELS),
# which only Anthropic has; every other backend needs the model named.
ROLE_DEFAULTS: dict[str, Any] = {
    "backend": "offline",
    "model": None,
    "temperature": 0.0,
    "max_tokens": 2048,
    "seed": 0,
    "base_url": None,
    "max_attempts": 3,
    "timeout_s": 60.0,
    "max_retries": 5,
    "max_tokens_param": "max_tokens",
    "reasoning_effort": None,
}
ROLE_KEYS = frozenset(ROLE_DEFAULTS)
DEFAULT_MODELS = {"anthropic": "claude-sonnet-4-6"}
OPENAI_ONLY = ("max_tokens_param", "reasoning_effort")  # settings of the OpenAI protocol alone
MAX_ATTEMPTS_LIMIT = 20


@dataclass(frozen=True)
class PaperRole:
    """The model the paper ran a role on (None: people did the role)."""

    role: str
    backend: str | None  # the fdeval backend that reaches that model
    model_prefix: (
        str | None
    )  # a model id starting with this is that model (a dated snapshot included)
    described: str


PAPER_ROLES = {
    "planner": PaperRole("planner", "openai", "gpt-5.2", "GPT-5.2 (§4.1)"),
    "simulator": PaperRole("simulator", "gemini", "gemini-3-pro", "Gemini 3 Pro (§4.1)"),
    "classifier": PaperRole("classifier", "openai", "gpt-5.2", "GPT-5.2 (§4.3)"),
    "drafter": PaperRole("drafter", None, None, "human annotators writing each rubric (§5)"),
    "grader": PaperRole("grader", None, None, "human annotators grading with the rubric (§5)"),
}


def deviation(role: str, identity: Mapping[str, Any]) -> str | None:
    """How role `role`, as its `identity` (:func:`role_identity`) says it runs, differs from the
    paper (:data:`PAPER_ROLES`): one line, or None when it runs on the paper's model."""
    paper = PAPER_ROLES[role]
    backend, model = identity.get("backend"), identity.get("model")
    used = "the offline rules" if backend == "offline" else f"{model} ({backend})"
    if paper.model_prefix is None:
        return f"{used} instead of {paper.described}"
    if backend == paper.backend and isinstance(model, str) and model.startswith(paper.model_prefix):
        return None
    return f"{used} instead of {paper.described}"


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _is_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def _check_value(key: str, v: Any) -> str | None:
    """Why `v` is not a valid value of `key` (None when it is)."""
    if key == "backend":
        return None if v in BACKENDS else f"unknown backend {v!r}; valid: {list(BACKENDS)}"
    if key == "model":
        ok = (
            v is None
            or isinstance(v, str)
            and v.strip() != ""
            and not any(c.isspace() or not c.isprintable() for c in v)
        )
        return (
            None
            if ok
            else f"must be a model id without spaces, or null (the backend's default), got {v!r}"
        )
    if key == "temperature":
        return (
            None
            if v is None or (_is_number(v) and 0 <= v <= 2)
            else f"must be a number in [0, 2] or null, got {v!r}"
        )
    if key == "max_tokens":
        return (
            None
            if _is_int(v) and 1 <= v <= 1_000_000
            else f"must be an integer in [1, 1000000], got {v!r}"
        )
    if key == "seed":
        return None if _is_int(v) else f"must be an integer, got {v!r}"
    if key == "base_url":
        return (
            None
            if v is None or (isinstance(v, str) and v.strip())
            else f"must be a URL or null, got {v!r}"
        )
    if key == "max_attempts":
        ok = _is_int(v) and 1 <= v <= MAX_ATTEMPTS_LIMIT
        return None if ok else f"must be an integer in [1, {MAX_ATTEMPTS_LIMIT}], got {v!r}"
    if key == "timeout_s":
        return None if _is_number(v) and v > 0 else f"must be a number > 0, got {v!r}"
    if key == "max_retries":
        return (
            None if _is_int(v) and 0 <= v <= 1000 else f"must be an integer in [0, 1000], got {v!r}"
        )
    if key == "max_tokens_param":
        return (
            None
            if v in MAX_TOKENS_PARAMS
            else f"must be one of {list(MAX_TOKENS_PARAMS)}, got {v!r}"
        )
    if key == "reasoning_effort":
        ok = v is None or (isinstance(v, str) and v.isidentifier())
        return (
            None if ok else f"must be a word such as none, low, medium or high, or null, got {v!r}"
        )
    raise AssertionError(key)  # every key of ROLE_KEYS has a check above


def check_role(name: str, settings: Mapping) -> dict:
    """The validated settings of role `name` (``benchmark.<name>``), defaults filled in.

    Raises :class:`ConfigError` ``benchmark.<name>.<key>: <why>`` for an unknown key (listing the
    valid ones) or a bad value (naming what is valid)."""
    if not isinstance(settings, Mapping):
        raise ConfigError(
            f"benchmark.{name}: must be a mapping of role settings, got {type(settings).__name__}"
        )
    valid = sorted(ROLE_KEYS)
    out = dict(ROLE_DEFAULTS)
    for key, value in settings.items():
        if key not in valid:
            raise ConfigError(f"benchmark.{name}.{key}: unknown key; valid: [{', '.join(valid)}]")
        why = _check_value(str(key), value)
        if why is not None:
            raise ConfigError(f"benchmark.{name}.{key}: {why}")
        out[str(key)] = value
    if out["temperature"] is not None:
        out["temperature"] = float(out["temperature"])
    backend = out["backend"]
    if backend != "offline" and out["model"] is None:
        if backend not in DEFAULT_MODELS:
            raise ConfigError(
                f"benchmark.{name}.model: required for backend {backend} (the model id the endpoint "
                f"serves; the paper's models are the preset echochain_roles=paper)"
            )
        out["model"] = DEFAULT_MODELS[backend]
    for key in OPENAI_ONLY:
        if out[key] != ROLE_DEFAULTS[key] and protocol_of(backend) != "openai":
            raise ConfigError(
                f"benchmark.{name}.{key}: a setting of the OpenAI protocol (backend openai, vllm or "
                f"sglang), not of {backend}"
            )
    return out


def case_seed(seed: int, case_id: str | None) -> int:
    """The cache seed of one conversation: the role's seed mixed with the case id, so that two
    conversations drawn from one scenario seed are separate samples, while a rerun of a case
    reuses its own answers."""
    if case_id is None:
        return seed
    digest = hashlib.sha256(f"{seed}:{case_id}".encode("utf-8")).hexdigest()
    return int(digest[:12], 16)


def role_client(
    name: str, settings: Mapping, cache_dir: Path, case_id: str | None = None
) -> LLMClient:
    """An :class:`LLMClient` with role `name`'s pinned settings, caching under ``cache_dir/<name>``.
    With `case_id`, the cache seed is :func:`case_seed` of the role's seed and the case. No I/O;
    a setting the client refuses (e.g. plain http to a remote host) is a ConfigError."""
    s = check_role(name, settings)
    try:
        return LLMClient(
            s["model"],
            s["temperature"],
            s["max_tokens"],
            Path(cache_dir) / name,
            seed=case_seed(s["seed"], case_id),
            base_url=s["base_url"],
            max_retries=s["max_retries"],
            timeout_s=float(s["timeout_s"]),
            name=f"benchmark.{name}",
            backend=s["backend"],
            max_tokens_param=s["max_tokens_param"],
            reasoning_effort=s["reasoning_effort"],
        )
    except LLMConfigError as e:
        raise ConfigError(str(e)) from None


class RoleError(Exception):
    """A role produced no usable output within its attempts, or its request failed: an
    infrastructure error of the conversation, recorded as an error and never as a failure of the
    model under test. Deliberately not an FdevalError (it is no user error)."""

    def __init__(self, message: str, case_id: str | None = None, exchange: int | None = None):
        self.case_id, self.exchange = case_id, exchange
        super().__init__(message)


class OfflineRole:
    """Base of a role on the ``offline`` backend: checked settings, and an identity whose prompt
    hash covers :attr:`TEMPLATES` (its version and the rules it applies)."""

    role = ""
    TEMPLATES: tuple[str, ...] = ()

    def __init__(self, settings: Mapping | None = None):
        self.settings = check_role(self.role, settings or {"backend": "offline"})

    def identity(self) -> dict:
        return role_identity(self.role, self.settings, prompt_hash(*self.TEMPLATES))


class LLMRole:
    """Base of a role on an LLM backend (any but ``offline``): its checked settings and its clients (one per
    conversation where :attr:`per_case`, else one). Builds a first client at once, so a bad
    setting is reported before any work."""

    role = ""
    per_case = False  # planner and simulator: True (see case_seed)
    TEMPLATES: tuple[str, ...] = ()  # everything the prompts are made of (the prompt hash)

    def __init__(self, settings: Mapping, cache_dir: Path):
        self.settings = check_role(self.role, settings)
        self.cache_dir = Path(cache_dir)
        self._clients: dict[str | None, LLMClient] = {
            None: role_client(self.role, self.settings, self.cache_dir)
        }

    def client(self, case_id: str | None = None) -> LLMClient:
        key = case_id if self.per_case else None
        if key not in self._clients:
            self._clients[key] = role_client(self.role, self.settings, self.cache_dir, key)
        return self._clients[key]

    def identity(self) -> dict:
        return role_identity(self.role, self.settings, prompt_hash(REASK_NOTE, *self.TEMPLATES))

    def check_ready(self) -> None:
        """Raise LLMConfigError if an uncached request could not go out (no key, no SDK); no I/O."""
        self._clients[None].check_ready()


def role_identity(name: str, settings: Mapping, prompt_hash: str) -> dict:
    """What can change the role's output, JSON-ready, recorded in every results row: backend,
    model, temperature, max_tokens, seed, max_attempts, endpoint, the OpenAI protocol's settings
    where not at their default, and the prompt hash. An offline role calls no model: its model
    fields are None and its prompt hash covers its own templates."""
    s = check_role(name, settings)
    out: dict[str, Any] = {"role": name, "backend": s["backend"], "prompt_hash": prompt_hash}
    if s["backend"] == "offline":
        out.update(
            model=None,
            temperature=None,
            max_tokens=None,
            seed=None,
            max_attempts=None,
            endpoint=None,
        )
    else:
        out.update(
            model=s["model"],
            temperature=s["temperature"],
            max_tokens=s["max_tokens"],
            seed=s["seed"],
            max_attempts=s["max_attempts"],
            endpoint=resolve_endpoint(s["base_url"], f"benchmark.{name}.base_url", s["backend"]),
        )
        out.update({k: s[k] for k in OPENAI_ONLY if s[k] != ROLE_DEFAULTS[k]})
    return out


def prompt_hash(*templates: str) -> str:
    """A short sha256 (16 hex digits) of the templates, in order."""
    blob = json.dumps(list(templates), ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()[:16]


def make_role(
    name: str,
    settings: Mapping,
    cache_dir: Path,
    offline: Callable[[dict], T],
    llm: Callable[[dict, Path], T],
) -> T:
    """Role `name` on the backend its settings name (validated by :func:`check_role`)."""
    s = check_role(name, settings)
    return offline(s) if s["backend"] == "offline" else llm(s, Path(cache_dir))


# ------------------------------------------------------------------------------------------------
# Strict answers and the re-ask loop

REASK_NOTE = (
    "\n\n[YOUR PREVIOUS ANSWER WAS REJECTED]\n{reason}\n"
    "Write the whole answer again, following the output format exactly."
)


def ask_valid(
    client: LLMClient,
    system: str,
    prompt: str,
    parse: Callable[[str], T],
    *,
    max_attempts: int,
    fail: Callable[[str], Exception],
) -> tuple[T, tuple[str, ...]]:
    """``(parse(answer), reasons of the rejected answers)``: asks, and while `parse` raises
    ValueError asks again with the reason appended (``attempt=n``), `max_attempts` answers at most.

    Then raises ``fail(message)``, the role's infrastructure error; so does a request that failed
    after the client's own retries (:class:`LLMError`). :class:`LLMConfigError` (no key,
    credentials rejected, endpoint unavailable) propagates: every further request would fail alike.
    """
    errors: list[str] = []
    for attempt in range(max_attempts):
        text = prompt if attempt == 0 else prompt + REASK_NOTE.format(reason=errors[-1])
        try:
            answer = client.complete(system, text, attempt=attempt).text
        except LLMConfigError:
            raise
        except LLMError as e:
            raise fail(f"request failed: {e}") from e
        try:
            return parse(answer), tuple(errors)
        except ValueError as e:
            errors.append(str(e))
    raise fail(f"no valid answer in {max_attempts} attempt(s); last: {errors[-1]}")
