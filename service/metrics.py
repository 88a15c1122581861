"""Prometheus metrics, one registry per app so tests can build many apps in one process.

With `--workers N` each worker process has its own registry and a scrape reaches one of them;
see docs/service.md (open problems) for the multi-process caveat.
"""

from __future__ import annotations

import time

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
)
from starlette.types import ASGIApp, Message, Receive, Scope, Send

# Latency buckets in seconds: fine below 100 ms where the service's goals are (p50 20 ms, p99 60 ms).
LATENCY_BUCKETS = (0.002, 0.005, 0.01, 0.015, 0.02, 0.03, 0.04, 0.06, 0.08, 0.1, 0.15, 0.25, 0.5, 1, 2.5, 5, 10)
BATCH_BUCKETS = (1, 2, 4, 8, 12, 16, 24, 32, 48, 64, 128, 256)

# Bounded label values: anything else is counted as "other" so random URLs cannot grow the registry.
KNOWN_PATHS = frozenset({"/", "/correct", "/health", "/metrics", "/docs", "/openapi.json"})


class Metrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.requests = Counter(
            "csc_http_requests_total", "HTTP requests by path, method and status", ["path", "method", "status"],
            registry=self.registry,
        )
        self.latency = Histogram(
            "csc_http_request_duration_seconds", "HTTP request latency by path", ["path"],
            buckets=LATENCY_BUCKETS, registry=self.registry,
        )
        self.texts = Counter("csc_texts_corrected_total", "Texts corrected and answered", registry=self.registry)
        self.batch_size = Histogram(
            "csc_batch_size_texts", "Texts per corrector call (micro-batch size)",
            buckets=BATCH_BUCKETS, registry=self.registry,
        )
        self.batch_requests = Histogram(
            "csc_batch_size_requests", "HTTP requests sharing one corrector call",
            buckets=BATCH_BUCKETS, registry=self.registry,
        )
        self.inference = Histogram(
            "csc_inference_duration_seconds", "Wall time of one corrector call",
            buckets=LATENCY_BUCKETS, registry=self.registry,
        )
        self.queue_wait = Histogram(
            "csc_queue_wait_seconds", "Time a request waited before its corrector call started",
            buckets=LATENCY_BUCKETS, registry=self.registry,
        )
        self.queue_depth = Gauge("csc_queue_texts", "Texts waiting for or in the corrector", registry=self.registry)
        self.rejected = Counter(
            "csc_rejected_total", "Requests refused before correction, by reason", ["reason"],
            registry=self.registry,
        )
        self.model_info = Gauge(
            "csc_model_info", "Loaded model (value 1)", ["model", "version"], registry=self.registry
        )

    def observe_batch(self, n_texts: int, n_requests: int, seconds: float) -> None:
        self.batch_size.observe(n_texts)
        self.batch_requests.observe(n_requests)
        self.inference.observe(seconds)

    def render(self) -> tuple[bytes, str]:
        return generate_latest(self.registry), CONTENT_TYPE_LATEST


# The status label of a request whose client went away before any answer was sent (nginx's 499):
# nothing was answered, so it is neither a success nor a server error.
CLIENT_CLOSED = "client_closed"
# Set in a request's scope by the server protocol (protocol.py) when its connection was lost
# before the answer was complete: whatever the app answered, nobody received it.
CLIENT_GONE = "csc.client_gone"


class MetricsMiddleware:
    """Counts every HTTP request and times it, including ones rejected by other middleware.

    A request the app raised on before answering counts as 500; one whose client disconnected
    before an answer started counts as `client_closed`, whatever the app did then.
    """

    def __init__(self, app: ASGIApp, metrics: Metrics) -> None:
        self.app = app
        self.metrics = metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        path = scope["path"] if scope["path"] in KNOWN_PATHS else "other"
        status: int | str | None = None  # None until an answer starts
        disconnected = False
        start = time.perf_counter()

        async def receive_wrapper() -> Message:
            nonlocal disconnected
            message = await receive()
            if message["type"] == "http.disconnect":
                disconnected = True
            return message

        async def send_wrapper(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            await self.app(scope, receive_wrapper, send_wrapper)
        except BaseException:
            if status is None and not disconnected:
                status = 500  # what the client sees when the app raises before answering
            raise
        finally:
            if status is None:
                status = CLIENT_CLOSED if disconnected else 500
            elif scope.get(CLIENT_GONE):
                status = CLIENT_CLOSED
            self.metrics.latency.labels(path).observe(time.perf_counter() - start)
            self.metrics.requests.labels(path, scope["method"], str(status)).inc()
