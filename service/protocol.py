"""uvicorn's httptools protocol with the limits a public server needs and uvicorn lacks.

uvicorn (0.54) has an idle keep-alive timeout and nothing else for slow or hostile clients:
idle connections and request heads dripped a byte every 0.8 s stayed open for ever (800 held,
no cap), a 200 MB request head was read whole and answered 200, a 128 MB one stalled the other
requests 15 s. `GuardedHttpToolsProtocol` keeps uvicorn's parser and request cycle and adds,
from the served app's `Settings`:

| limit | setting (default) | answer |
| --- | --- | --- |
| request head complete this long after the connection opened or its first byte | `head_timeout_s` (10) | 408, closed |
| request head size | `max_head_bytes` (65536) | 431, closed |
| open connections | `max_connections` (1000) | 503 + Retry-After, closed |
| malformed HTTP | — | 400 `invalid_http`, closed |

Each answer has the service's JSON error shape and is counted in `csc_http_requests_total`. The
whole-body deadline (408) and the body size (413) are the app's (BodySizeLimitMiddleware); the
idle keep-alive timeout is uvicorn's `timeout_keep_alive` (`keep_alive_s`). A request whose
client went away before its answer was complete is counted `client_closed`.
`python -m service` runs with it; `uvicorn service.app:app --http service.protocol:GuardedHttpToolsProtocol`
does the same by hand.
"""

from __future__ import annotations

import asyncio
import json
import logging
from dataclasses import dataclass
from typing import Any

from uvicorn.protocols.http.httptools_impl import STATUS_LINE, HttpToolsProtocol

from .metrics import CLIENT_GONE
from .schemas import ErrorItem, ErrorResponse, summarize
from .settings import Settings

log = logging.getLogger("service")
PROTOCOL = "service.protocol:GuardedHttpToolsProtocol"


@dataclass(frozen=True)
class Guard:
    """The limits of one served app, and its metrics (None: an app without them)."""

    head_timeout_s: float
    max_head_bytes: int
    max_connections: int
    metrics: Any = None

    def count(self, status: int, reason: str) -> None:
        if self.metrics is not None:
            self.metrics.requests.labels("other", "-", str(status)).inc()
            self.metrics.rejected.labels(reason).inc()


def uvicorn_options(settings: Settings) -> dict[str, Any]:
    """The uvicorn.run / uvicorn.Config arguments that put `settings`' connection limits in force."""
    return {"http": PROTOCOL, "timeout_keep_alive": settings.keep_alive_s}


def _served_state(app: Any) -> Any:
    """The state of the app uvicorn serves, found through the middlewares it wraps it in (each
    holds the next as `.app`); None for an app without one."""
    while app is not None and not hasattr(getattr(app, "state", None), "settings"):
        app = getattr(app, "app", None)
    return None if app is None else app.state


def _guard_for(app: Any, config: Any) -> Guard:
    """The Guard of the app uvicorn serves, made once per server config."""
    guard = getattr(config, "_csc_guard", None)
    if guard is None:
        state = _served_state(app)
        settings = getattr(state, "settings", None) or Settings()
        guard = Guard(settings.head_timeout_s, settings.max_head_bytes, settings.max_connections,
                      getattr(state, "metrics", None))
        config._csc_guard = guard
    return guard


def error_bytes(status: int, kind: str, msg: str, retry_after: bool = False) -> bytes:
    """A whole HTTP/1.1 answer in the service's JSON error shape, closing the connection."""
    error = ErrorItem(loc=["request"], type=kind, msg=msg)
    body = json.dumps(ErrorResponse(detail=summarize([error]), errors=[error]).model_dump()).encode()
    headers = [b"content-type: application/json", b"content-length: " + str(len(body)).encode(),
               b"connection: close", *([b"retry-after: 1"] if retry_after else [])]
    return STATUS_LINE[status] + b"\r\n".join(headers) + b"\r\n\r\n" + body


class GuardedHttpToolsProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol with a head deadline, a head size cap, a connection cap,
    JSON answers to malformed HTTP, and answers to half-closed clients (module docstring)."""

    def __init__(self, config: Any, server_state: Any, app_state: dict[str, Any],
                 _loop: asyncio.AbstractEventLoop | None = None) -> None:
        super().__init__(config, server_state, app_state, _loop)
        self.guard = _guard_for(self.app, config)
        self.head_timer: asyncio.TimerHandle | None = None
        self.head_bytes = -1  # bytes of the request head read so far; -1 outside a head

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        if len(self.connections) > self.guard.max_connections:
            log.warning("refused a connection: %d open, the limit is %d", len(self.connections) - 1,
                        self.guard.max_connections)
            self.refuse(503, "too_many_connections",
                        f"the server holds {self.guard.max_connections} connections; retry later", retry_after=True)
            return
        self.arm_head_timer()  # a new connection must send its first request head in time

    def connection_lost(self, exc: Exception | None) -> None:
        self.cancel_head_timer()
        # Requests whose answer was not complete when the client went away (its FIN: a client
        # that only half-closed counts as gone, as nginx and Go's net/http count it, so that
        # abandoned work is dropped) are counted client_closed, whatever status the app then
        # chose (uvicorn drops an answer to a closed connection without a word).
        for cycle in [self.cycle, *(cycle for cycle, _ in self.pipeline)]:
            if cycle is not None and not cycle.response_complete:
                cycle.scope[CLIENT_GONE] = True  # type: ignore[literal-required]
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        # Counted after parsing, and only for data that arrived inside an unfinished head: a
        # chunk that ends one request's body and starts the next head is not counted against it.
        inside_head = self.head_bytes >= 0
        super().data_received(data)
        if inside_head and self.head_bytes >= 0 and not self.transport.is_closing():
            self.head_bytes += len(data)
            if self.head_bytes > self.guard.max_head_bytes:
                self.refuse(431, "head_too_large",
                            f"the request head (line and headers) exceeds {self.guard.max_head_bytes} bytes")

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self.head_bytes = 0
        if self.head_timer is None:
            self.arm_head_timer()

    def on_headers_complete(self) -> None:
        self.head_bytes = -1
        self.cancel_head_timer()
        super().on_headers_complete()

    def send_400_response(self, msg: str) -> None:
        # uvicorn's answer to bytes httptools cannot parse is text/plain; the service's is JSON.
        self.refuse(400, "invalid_http", "malformed HTTP request")

    def arm_head_timer(self) -> None:
        self.head_timer = self.loop.call_later(self.guard.head_timeout_s, self.on_head_timeout)

    def cancel_head_timer(self) -> None:
        if self.head_timer is not None:
            self.head_timer.cancel()
            self.head_timer = None

    def on_head_timeout(self) -> None:
        self.head_timer = None
        if self.transport.is_closing():
            return
        if self.cycle is not None and not self.cycle.response_complete:
            self.arm_head_timer()  # a pipelined head waits while the request before it is answered
            return
        self.refuse(408, "head_timeout", f"the request head did not arrive within {self.guard.head_timeout_s:g} s")

    def refuse(self, status: int, kind: str, msg: str, retry_after: bool = False) -> None:
        """Answer `status` and close; only close where an earlier request's answer is under way."""
        self.cancel_head_timer()
        self.guard.count(status, kind)
        if self.cycle is None or self.cycle.response_complete:
            self.transport.write(error_bytes(status, kind, msg, retry_after))
        self.transport.close()
