"""App factory. `uvicorn service.app:app` serves the module-level `app`, configured from env vars.

The model is loaded once in the lifespan (before the server accepts connections) and shared by
every request through `app.state.batcher`; tests inject a corrector via `create_app(corrector=...)`.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from fastapi.staticfiles import StaticFiles
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from corrector import __version__ as VERSION
from corrector.runtime.allocator import freeze_startup_objects

from .batching import Batcher, QueueFullError, ShuttingDownError, SupportsCorrectBatch
from .metrics import Metrics, MetricsMiddleware
from .routes import InputError, router
from .schemas import ErrorItem, ErrorResponse, sanitize, summarize
from .settings import Settings

log = logging.getLogger("service")

STATIC_DIR = Path(__file__).resolve().parent / "static"
WARMUP_TEXT = "少先队员因该为老人让坐。"


# The automatic number of correction processes stops here: each holds a model (~700 MB resident
# with the shipped one), and a many-core machine is better served by more `--workers` as well.
MAX_AUTO_PROCESSES = 4


def correction_processes(settings: Settings) -> int:
    """How many correction processes `settings` asks for (`Settings.processes`; None: auto, the
    CPU cores per uvicorn worker, at most MAX_AUTO_PROCESSES, and 0 under two or off the CPU)."""
    if settings.processes is not None:
        return settings.processes
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    share = min(cores // settings.workers, MAX_AUTO_PROCESSES)
    return share if settings.device == "cpu" and share >= 2 else 0


def load_corrector(settings: Settings) -> SupportsCorrectBatch:
    """The real corrector for `settings.model` (None: the library's default model)."""
    options = {"traditional": settings.traditional, "passes": settings.passes}  # CorrectorConfig fields
    processes = correction_processes(settings)
    if processes:
        # The model lives in the correction processes only: this process parses, batches and
        # answers, and does not even import torch (~360 MB less).
        from corrector.runtime.processes import CorrectorSpec, ProcessCorrector

        spec = CorrectorSpec(settings.model, device=settings.device, quantize=settings.quantize, bf16=settings.bf16,
                             runtime=settings.runtime, config=options)
        return ProcessCorrector(spec, processes)

    import torch

    from corrector.pipeline import (  # imported here: tests with a fake never pay for it
        Corrector,
        CorrectorConfig,
    )

    # 0: the cores shared among the worker processes (2 cores, --workers 2: one thread each).
    torch.set_num_threads(settings.threads or max(1, torch.get_num_threads() // settings.workers))
    corrector = Corrector(settings.model, device=settings.device, quantize=settings.quantize, bf16=settings.bf16,
                          runtime=settings.runtime,
                          config=CorrectorConfig(**options))
    # The corrector's batch workers now hold their threads (2 cores: two workers of one). Every
    # other thread, above all the inference thread where a lone sentence runs, gets one: two
    # OpenMP threads there spin against the event loop and the clients on the same cores
    # (measured: 1 client p50 30 vs 18 ms, 8 unbatched clients 31 vs 57 req/s).
    torch.set_num_threads(1)
    return corrector


def corrector_name(obj: object) -> str | None:
    """A display name for /health: the corrector's `name`, or its model bundle's."""
    for candidate in (obj, getattr(obj, "bundle", None), getattr(obj, "model", None)):
        name = getattr(candidate, "name", None)
        if isinstance(name, str):
            return name
    return type(obj).__name__


def error_response(status: int, errors: list[ErrorItem], detail: str | None = None, **kw) -> JSONResponse:
    body = ErrorResponse(detail=detail or summarize(errors), errors=errors)
    return JSONResponse(body.model_dump(), status_code=status, **kw)


class BodySizeLimitMiddleware:
    """Refuses request bodies over `max_bytes` with 413 before anything parses them.

    Content-Length is checked first; a chunked or lying client is caught while the body streams
    in, so memory stays bounded either way. The buffered body is replayed to the app.
    """

    def __init__(self, app: ASGIApp, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] in ("GET", "HEAD", "OPTIONS"):
            await self.app(scope, receive, send)
            return
        declared = dict(scope["headers"]).get(b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > self.max_bytes:
            await self._reject(scope, receive, send)
            return
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.max_bytes:
                await self._reject(scope, receive, send)
                return
            chunks.append(chunk)
            if not message.get("more_body", False):
                break
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": b"".join(chunks), "more_body": False}
            return await receive()

        await self.app(scope, replay, send)

    async def _reject(self, scope: Scope, receive: Receive, send: Send) -> None:
        error = ErrorItem(
            loc=["body"], type="body_too_large", msg=f"request body exceeds the limit of {self.max_bytes} bytes"
        )
        # Connection: close, so the server does not have to read (and discard) the rest.
        response = error_response(413, [error], headers={"Connection": "close"})
        await response(scope, receive, send)


def _is_json_content_type(request: Request) -> bool:
    # FastAPI only parses application/json and */*+json bodies as JSON (none at all when the
    # header is missing), so anything else would fail validation with a misleading message.
    media = (request.headers.get("content-type") or "").split(";")[0].strip().lower()
    return media == "application/json" or (media.startswith("application/") and media.endswith("+json"))


# Messages for pydantic/FastAPI error types whose default wording does not say what to fix.
_CLEARER = {
    "string_unicode": "body is not valid Unicode (e.g. a lone surrogate escape such as \\ud800 in a key)",
    "model_attributes_type": "body must be a JSON object such as {\"text\": \"...\"}",
}


async def _validation_error(request: Request, exc: RequestValidationError) -> JSONResponse:
    if request.method == "POST" and not _is_json_content_type(request):
        error = ErrorItem(
            loc=["header", "content-type"],
            type="unsupported_media_type",
            msg=f"Content-Type is {request.headers.get('content-type')!r}; send the body as application/json",
        )
        return error_response(415, [error])
    errors: list[ErrorItem] = []
    for e in exc.errors():
        kind = str(e.get("type", "invalid"))
        loc = [sanitize(p) for p in e.get("loc", ())]
        msg = _CLEARER.get(kind, str(e.get("msg", "invalid value")))
        if kind == "json_invalid":
            # FastAPI puts the character offset in loc; say it in words instead.
            offset = loc[1] if len(loc) > 1 else None
            msg = f"invalid JSON at character {offset}: {(e.get('ctx') or {}).get('error', 'decode error')}"
            loc = ["body"]
        errors.append(ErrorItem(loc=loc, type=kind, msg=sanitize(msg)))
    status = 400 if any(e.type == "json_invalid" for e in errors) else 422
    return error_response(status, errors)


async def _input_error(request: Request, exc: InputError) -> JSONResponse:
    return error_response(422, exc.errors)


def loc_is_body(request: Request) -> bool:
    return request.method == "POST" and request.url.path == "/correct"


async def _http_error(request: Request, exc: StarletteHTTPException) -> JSONResponse:
    # FastAPI raises 400 "There was an error parsing the body" for bodies that are not UTF-8.
    kind, msg = f"http_{exc.status_code}", sanitize(str(exc.detail))
    if exc.status_code == 400 and loc_is_body(request):
        kind, msg = "invalid_body", "body could not be decoded; send UTF-8 encoded JSON"
    error = ErrorItem(loc=["request"], type=kind, msg=msg)
    return error_response(exc.status_code, [error], headers=getattr(exc, "headers", None))


async def _busy(request: Request, exc: Exception) -> JSONResponse:
    kind = "queue_full" if isinstance(exc, QueueFullError) else "shutting_down"
    error = ErrorItem(loc=["server"], type=kind, msg=str(exc))
    return error_response(503, [error], headers={"Retry-After": "1"})


async def _unexpected(request: Request, exc: Exception) -> JSONResponse:
    log.exception("unhandled error on %s %s", request.method, request.url.path, exc_info=exc)
    error = ErrorItem(loc=["server"], type="internal_error", msg="internal error while correcting; see server log")
    return error_response(500, [error])


def create_app(settings: Settings | None = None, corrector: SupportsCorrectBatch | None = None) -> FastAPI:
    """A configured service. `corrector=None` loads `settings.model` in the lifespan."""
    settings = settings or Settings()
    metrics = Metrics()

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        # Loading takes seconds: run it off the loop so the process stays responsive to signals.
        instance = corrector if corrector is not None else await asyncio.to_thread(load_corrector, settings)
        if settings.warmup:
            await asyncio.to_thread(instance.correct_batch, [WARMUP_TEXT])
        if corrector is None:
            # This process is ours and now holds all it will keep: spare every later request the
            # 200+ ms collector walks over the loaded libraries (corrector/allocator.py). A
            # corrector passed in belongs to the caller's process (tests), which we leave alone.
            frozen = freeze_startup_objects()
            log.info("%d start-up objects exempted from garbage collection", frozen)
        batcher = Batcher(
            instance,
            enabled=settings.batching,
            max_batch_size=settings.max_batch_size,
            max_wait_ms=settings.max_wait_ms,
            max_queue_texts=settings.max_queue_texts,
            metrics=metrics,
        )
        await batcher.start()
        app.state.model_name = corrector_name(instance)
        app.state.precision = getattr(instance, "precision", None)
        app.state.runtime = getattr(instance, "runtime", None)
        app.state.processes = getattr(instance, "processes", 0)  # a ProcessCorrector's
        app.state.batcher = batcher
        metrics.model_info.labels(app.state.model_name or "", VERSION).set(1)
        log.info("model %s ready (%s, %s, %s correction processes, batching=%s)", app.state.model_name,
                 app.state.precision, app.state.runtime, app.state.processes or "no", settings.batching)
        try:
            yield
        finally:
            app.state.batcher = None
            await batcher.stop()
            if corrector is None and hasattr(instance, "close"):
                instance.close()  # the correction processes (ProcessCorrector)

    app = FastAPI(
        title="Chinese spelling correction (中文拼写纠错)",
        version=VERSION,
        description="Corrects misspelt Chinese characters. See docs/service.md for limits and errors.",
        lifespan=lifespan,
    )
    app.state.settings = settings
    app.state.metrics = metrics
    app.state.batcher = None
    app.state.model_name = None
    app.state.precision = None
    app.state.runtime = None
    app.state.processes = 0

    app.include_router(router)
    app.mount("/static", StaticFiles(directory=STATIC_DIR), name="static")

    app.add_exception_handler(RequestValidationError, _validation_error)
    app.add_exception_handler(InputError, _input_error)
    app.add_exception_handler(StarletteHTTPException, _http_error)
    app.add_exception_handler(QueueFullError, _busy)
    app.add_exception_handler(ShuttingDownError, _busy)
    app.add_exception_handler(Exception, _unexpected)

    # Added last = outermost: metrics also count the 413s the size limit produces.
    app.add_middleware(BodySizeLimitMiddleware, max_bytes=settings.max_body_bytes)
    app.add_middleware(MetricsMiddleware, metrics=metrics)
    return app


app = create_app()
