"""What every adapter that talks to its model over a connection shares, written once.

`NetworkModel` says where the model's server comes from: servers started in the job by a
`ServerPool` (`model.server`), a server someone else runs (`model.port`, whatever `model.server`
says), or a hosted API (neither). It declares the run's side of the contract from that:
`concurrency` (one session per pool instance), `set_run_dir` (server logs in the run folder),
`close` (stop the servers) and `case_retries`; it checks its client packages when it is built.

`NetworkSession` is one conversation. Shared here: taking a server from the pool (or the fixed
address) and giving it back exactly once; a reader task that stamps what arrives and queues it as
`ModelEvent`s; the first failure, which `send` / `receive` raise (after the events that came
before it); waits for the server's acknowledgements that end early when the session fails;
a close that is safe twice and on cancellation; and, for a pooled server, a lost connection
turned into `ServerDied` (a `ModelUnavailable`, so the run retries the case) carrying the
server's exit code and log tail. An adapter writes `_connect` (open, handshake, prompt; start the
reader with `_start_reader` when it wants one), `_send` (one frame), `_read` (or callbacks that
call `_emit` / `_fail`), and, if the protocol has them, `_goodbye` and `_disconnect`.
`WebSocketSession` adds one aiohttp WebSocket (Moshi, PersonaPlex, MiniCPM-o, Fun-Audio-Chat):
the adapter then writes `_on_message` instead of `_read`.
"""

from __future__ import annotations

import abc
import asyncio
import logging
import os
import re
import time
from dataclasses import replace
from pathlib import Path
from types import ModuleType
from typing import Any, Mapping, Sequence

import numpy as np

from fdeval.errors import ConfigError
from fdeval.models.base import (
    DuplexModel,
    DuplexSession,
    ModelEvent,
    ModelUnavailable,
    optional_import,
    pip_extra,
)
from fdeval.models.servers import Probe, ServerInstance, ServerPool, ServerSpec, lost
from fdeval.types import (
    plain,
)  # the adapters' one converter of config values (imported from here too)

log = logging.getLogger("fdeval")


class ServerConnectionError(ConnectionError):
    """A network model's server (or service) refused, failed or dropped a session: an
    infrastructure error, never a verdict. Each adapter raises its own subclass naming the server.
    With a server from the job's pool the session raises `ServerDied` in its place (retried)."""


class KeyMask(logging.Filter):
    """Keeps a hosted API's keys out of text: the values of the key `variables` (read when
    masking) and whatever `patterns` match (each regex's first group is kept, the rest becomes
    ***). As a logging filter on the libraries under an SDK (websockets logs request headers at
    DEBUG) it masks their records."""

    def __init__(self, variables: Sequence[str], patterns: Sequence[str] = ()):
        super().__init__()
        self.variables, self.patterns = tuple(variables), tuple(re.compile(p) for p in patterns)

    def mask(self, text: str) -> str:
        for var in self.variables:
            key = os.environ.get(var)
            if key:
                text = text.replace(key, "***")
        for pattern in self.patterns:
            text = pattern.sub(lambda m: m.group(1) + "***", text)
        return text

    def filter(self, record: logging.LogRecord) -> bool:
        msg = record.getMessage()
        masked = self.mask(msg)
        if masked != msg:
            record.msg, record.args = masked, ()
        return True

    def install(self, loggers: Sequence[str]) -> None:
        for name in loggers:
            logger = logging.getLogger(name)
            if self not in logger.filters:
                logger.addFilter(self)


class NetworkModel(DuplexModel):
    """A model reached over a connection (see the module docstring)."""

    client_modules: tuple[str, ...] = ()  # the optional packages its sessions import
    client_extra: str = ""  # fdeval's extra that installs them
    host: str | None = None
    port: int | None = None
    external: tuple[str, int] | None = None  # a server someone else runs: (host, port)
    spec: ServerSpec | None = None
    pool: ServerPool | None = None

    def client_module(self, module: str) -> ModuleType:
        """One of `client_modules`, imported, or a one-line ConfigError with the install command."""
        mod = optional_import(
            module, pip_extra(self.client_extra), f"model={self.name}", self.client_modules
        )
        assert mod is not None
        return mod

    def require_clients(self) -> None:
        """Import the client packages when the model is built, so a missing one stops the run at
        once with one line, not once per case."""
        for module in self.client_modules:
            self.client_module(module)

    def _init_server(
        self,
        server: Mapping[str, Any] | None,
        host: str | None,
        port: int | None,
        probe: Probe,
        placeholders: Mapping[str, str] | None = None,
        extra_env: Mapping[str, str] | None = None,
        extra_args: Sequence[str] = (),
    ) -> None:
        """`model.port` means a server someone else runs on `host` (default 127.0.0.1), whatever
        `model.server` says; otherwise the `server:` block is started by a pool (`extra_args`
        appended to its command); neither is a one-line error."""
        self.host = host or "127.0.0.1"
        self.port = int(port) if port is not None else None
        self.external = (self.host, self.port) if self.port is not None else None
        self.spec = self.pool = None
        if self.external is not None:
            if server is not None:
                log.info(
                    "%s: model.port given: using the server on %s:%d, model.server is not started",
                    self.name,
                    *self.external,
                )
            return
        try:
            spec = ServerSpec.from_config(plain(server))
        except ValueError as e:
            raise ConfigError(f"model.{e}") from None
        if spec is None:
            raise ConfigError(
                f"model.server: {self.name} needs a server: block, or model.port of a running server"
            )
        self.spec = replace(spec, command=tuple(spec.command) + tuple(str(a) for a in extra_args))
        self.pool = ServerPool(
            self.name, self.spec, probe, placeholders=placeholders, extra_env=extra_env
        )

    @property  # type: ignore[override]
    def concurrency(self) -> int:
        """One session per server instance; one for a fixed server or a hosted API."""
        return self.pool.size if self.pool is not None else 1

    def share(self, index: int, count: int) -> None:
        """A pooled model's process runs its share of the server instances; a fixed server or a
        hosted API holds one session (concurrency 1), which is never spread."""
        if self.pool is None:
            super().share(index, count)
        else:
            self.pool.share(index, count)

    def set_run_dir(self, path: Path) -> None:
        if self.pool is not None:
            self.pool.set_run_dir(path)

    def close(self) -> None:
        if self.pool is not None:
            self.pool.stop()


class NetworkSession(DuplexSession):
    """One conversation over the network (see the module docstring)."""

    error_type: type[ServerConnectionError] = ServerConnectionError
    # what the transport raises on a send once the connection is gone (then: the session's error)
    send_errors: tuple[type[BaseException], ...] = (ConnectionError, RuntimeError)

    def __init__(self, model: NetworkModel):
        self.model = model
        self.host, self.port = model.host, model.port
        self.frame_n = int(round(model.frame_s * model.sample_rate))
        self._pending: list[ModelEvent] = []
        self._error: ServerConnectionError | None = None
        self._waiting: set[asyncio.Event] = set()
        self._reader: asyncio.Task | None = None
        self._server: ServerInstance | None = None
        self._closing = False  # from here on, a dropped connection is ours, not a failure
        self._ended = False

    # -- what an adapter writes ---------------------------------------------------------------
    @abc.abstractmethod
    async def _connect(self) -> None:
        """Open the connection to `self.host` / `self.port` and set the session up; raise
        `self.error(...)` when the server refuses."""

    @abc.abstractmethod
    async def _send(self, frame: np.ndarray) -> None:
        """Send one frame (transport errors in `send_errors` become the session's error)."""

    async def _read(self) -> None:
        """The reader task's loop: queue what arrives (`_emit`) until the connection ends; an
        end without an error is the server closing the session."""
        raise NotImplementedError

    async def _goodbye(self) -> None:
        """The protocol's polite end (a stop message), when the session ends healthy."""

    async def _disconnect(self) -> None:
        """Close the connection; called once, also after a failure or a cancellation."""

    @property
    def url(self) -> str:
        return f"{self.host}:{self.port}"

    def where(self) -> str:
        return f"{self.model.name} server {self.url}"

    def describe(self, e: BaseException) -> str:
        """An exception's text for a message (Gemini masks its key here)."""
        return str(e)

    # -- shared -------------------------------------------------------------------------------
    def error(self, what: str) -> ServerConnectionError:
        return self.error_type(f"{self.where()}: {what}")

    def _emit(self, event: ModelEvent) -> None:
        self._pending.append(event)

    def _fail(self, error: ServerConnectionError) -> None:
        """Record the session's failure (the first one; none once it is closing) and wake the waits."""
        if self._error is None and not self._closing:
            self._error = error
            for ev in self._waiting:
                ev.set()

    def _check(self) -> None:
        if self._error is not None:
            raise self._error

    def _start_reader(self) -> None:
        self._reader = asyncio.create_task(self._run_reader(), name=f"{self.model.name} reader")

    async def _run_reader(self) -> None:
        try:
            await self._read()
        except asyncio.CancelledError:
            raise
        except ServerConnectionError as e:
            self._fail(e)
        except Exception as e:  # a broken frame or connection
            self._fail(self.error(f"connection lost ({type(e).__name__}: {self.describe(e)})"))
        else:
            self._fail(self.error("the server closed the connection"))

    async def _until(self, event: asyncio.Event, timeout_s: float, what: str) -> None:
        """Wait for the server's `what` (`event` set by the reader); the session's failure ends
        the wait at once with that error, and `timeout_s` without it is an error too."""
        self._waiting.add(event)
        try:
            await asyncio.wait_for(event.wait(), timeout_s)
        except TimeoutError:
            self._check()
            raise self.error(f"no {what} within {timeout_s:g} s") from None
        finally:
            self._waiting.discard(event)
        self._check()

    async def _send_failed(self, e: BaseException) -> ServerConnectionError:
        """The error for a send that failed: why the connection ended, if the reader saw it."""
        await asyncio.sleep(0.05)  # let the reader record the close
        self._check()
        return self.error(f"send failed: {type(e).__name__}: {self.describe(e)}")

    async def send_frame(self, frame: np.ndarray) -> None:
        self._check()
        try:
            await self._send(frame)
        except ServerConnectionError:
            raise
        except self.send_errors as e:
            raise await self._send_failed(e) from None

    async def receive(self) -> list[ModelEvent]:
        out, self._pending = self._pending, []
        if not out:  # what arrived before a failure is handed over first
            self._check()
        return out

    async def __aenter__(self) -> "NetworkSession":
        if self.model.pool is not None:
            self._server = await self.model.pool.acquire()
            self.host, self.port = self._server.host, self._server.port
        try:
            await self._connect()
        except BaseException as e:
            await self._end(e, goodbye=False)
            raise
        return self

    async def __aexit__(self, exc_type: Any, exc: BaseException | None, tb: Any) -> None:
        await self._end(exc)

    async def _end(self, exc: BaseException | None, goodbye: bool = True) -> None:
        """Close once: goodbye if healthy, stop the reader, disconnect, give the server back;
        with a pooled server, a connection error `exc` is raised again as `ServerDied`."""
        if self._ended:
            return
        self._ended = True
        try:
            # no goodbye to a failed connection or when cancelled (clean up at once)
            if goodbye and self._error is None and (exc is None or isinstance(exc, Exception)):
                try:
                    await self._goodbye()
                except Exception as e:  # closing anyway
                    log.debug("%s: goodbye: %s", self.where(), self.describe(e))
        finally:
            try:
                await self._close()
            finally:
                await self._give_back(exc)

    async def _close(self) -> None:
        self._closing = True
        cancelled: BaseException | None = None
        if self._reader is not None:
            self._reader.cancel()
            try:
                await asyncio.wait({self._reader})  # (never swallows a cancellation of this task)
            except asyncio.CancelledError as e:
                cancelled = e
        try:
            await self._disconnect()
        except asyncio.CancelledError as e:
            cancelled = cancelled or e
        except Exception as e:  # already gone
            log.debug("%s: disconnect: %s", self.where(), self.describe(e))
        if cancelled is not None:  # cleaned up first, then the cancellation goes on
            raise cancelled

    async def _give_back(self, exc: BaseException | None) -> None:
        inst, self._server = self._server, None
        if inst is None or self.model.pool is None:
            return
        try:
            if isinstance(exc, OSError) and not isinstance(exc, ModelUnavailable):
                raise await lost(
                    self.model.name, inst, f"{type(exc).__name__}: {self.describe(exc)}"
                ) from exc
        finally:
            self.model.pool.release(inst)


class WebSocketSession(NetworkSession):
    """A `NetworkSession` over one aiohttp WebSocket: the adapter writes `_on_message`."""

    send_errors = (ConnectionError, RuntimeError, OSError)
    _http: Any = None
    _ws: Any = None
    WSMsgType: Any = None  # aiohttp's message types, once connected

    async def _open_ws(
        self, url: str, timeout_s: float | None = None, max_msg_size: int = 0
    ) -> Any:
        aiohttp = self.model.client_module("aiohttp")
        self.WSMsgType = aiohttp.WSMsgType
        self._http = aiohttp.ClientSession()
        connect = self._http.ws_connect(url, max_msg_size=max_msg_size, autoping=True)
        try:
            self._ws = await (asyncio.wait_for(connect, timeout_s) if timeout_s else connect)
        except aiohttp.WSServerHandshakeError as e:
            raise self.refused(e.status) from None
        except (aiohttp.ClientError, OSError) as e:  # (TimeoutError is an OSError)
            raise self.error(f"cannot connect ({type(e).__name__}: {e})") from None
        return self._ws

    def refused(self, status: int) -> ServerConnectionError:
        """The error for a WebSocket upgrade answered with HTTP `status`."""
        return self.error(f"WebSocket handshake failed (HTTP {status})")

    def closed_why(self, code: int | None) -> str:
        return f"the server closed the connection (close code {code})"

    @abc.abstractmethod
    def _on_message(self, msg: Any, arrival: float) -> None:
        """Handle one message (raise `self.error(...)` for a failure the server reports)."""

    async def _read(self) -> None:
        async for msg in self._ws:
            if msg.type == self.WSMsgType.ERROR:
                break
            self._on_message(msg, time.monotonic())
        raise self.error(self.closed_why(self._ws.close_code))

    async def _disconnect(self) -> None:
        try:
            if self._ws is not None and not self._ws.closed:
                await asyncio.wait_for(self._ws.close(), 5.0)
        finally:
            if self._http is not None:
                await self._http.close()
