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
from fastapi.openapi.docs import get_swagger_ui_html
from fastapi.responses import HTMLResponse, JSONResponse
from fastapi.staticfiles import StaticFiles
from starlette.datastructures import Headers
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from corrector import __version__ as VERSION
from corrector.runtime.allocator import freeze_startup_objects
from corrector.runtime.processes import WorkerCrashedError

from .batching import Batcher, QueueFullError, ShuttingDownError, SupportsCorrectBatch
from .metrics import Metrics, MetricsMiddleware
from .parsing import RequestError, echo, read_correct_request, validation_errors
from .routes import ClientDisconnected, corrected, router
from .schemas import ErrorItem, ErrorResponse, summarize
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

    from corrector.pipeline import (  # imported here: tests with a fake never pay for it
        Corrector,
        CorrectorConfig,
    )
    from corrector.runtime.models import disable_loading_bars
    from corrector.runtime.threads import cpu_threads, set_threads

    disable_loading_bars()  # "Loading weights" bars would fill the service log on every start
    # 0: the cores shared among the worker processes (2 cores, --workers 2: one thread each).
    set_threads(settings.threads or max(1, cpu_threads() // settings.workers))
    corrector = Corrector(settings.model, device=settings.device, quantize=settings.quantize, bf16=settings.bf16,
                          runtime=settings.runtime,
                          config=CorrectorConfig(**options))
    # The corrector's batch workers now hold their threads (2 cores: two workers of one). Every
    # other thread, above all the inference thread where a lone sentence runs, gets one: two
    # OpenMP threads there spin against the event loop and the clients on the same cores
    # (measured: 1 client p50 30 vs 18 ms, 8 unbatched clients 31 vs 57 req/s).
    set_threads(1)
    return corrector


def corrector_name(obj: object) -> str | None:
    """A display name for /health: the corrector's `name`, or its model bundle's. A local model
    directory is named by its last component only: an absolute path tells a client how the
    server's disk is laid out, and nothing it needs."""
    for candidate in (obj, getattr(obj, "bundle", None), getattr(obj, "model", None)):
        name = getattr(candidate, "name", None)
        if isinstance(name, str):
            return Path(name).name if os.path.isabs(name) or os.path.isdir(name) else name
    return type(obj).__name__


def error_response(status: int, errors: list[ErrorItem], detail: str | None = None, **kw) -> JSONResponse:
    body = ErrorResponse(detail=detail or summarize(errors), errors=errors)
    return JSONResponse(body.model_dump(), status_code=status, **kw)


class BodySizeLimitMiddleware:
    """Refuses request bodies over `max_bytes` with 413 before anything parses them, bodies not
    complete `timeout_s` after their request head with 408, and JSON bodies that are not UTF-8
    with 400.

    Content-Length is checked first; a chunked or lying client is caught while the body streams
    in, so memory stays bounded either way. The deadline is for the whole body, not for each
    part: 13 bytes dripped over 42 s used to be accepted, and 60 clients dripping nearly 4 MiB
    each held 240 MB for as long as they liked. The buffered body is replayed to the app.
    """

    def __init__(self, app: ASGIApp, max_bytes: int, timeout_s: float = 10.0) -> None:
        self.app = app
        self.max_bytes = max_bytes
        self.timeout_s = timeout_s

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
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.timeout_s
        while True:
            try:
                message = await asyncio.wait_for(receive(), max(0.0, deadline - loop.time()))
            except TimeoutError:
                error = ErrorItem(loc=["body"], type="body_timeout",
                                  msg=f"the request body did not arrive within {self.timeout_s:g} s")
                await error_response(408, [error], headers={"Connection": "close"})(scope, receive, send)
                return
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
        body = b"".join(chunks)
        if not _is_utf8(body):
            # json.loads would guess UTF-16 or UTF-32 from the first bytes and accept them.
            error = ErrorItem(loc=["body"], type="invalid_body", msg="body is not UTF-8; send UTF-8 encoded JSON")
            await error_response(400, [error])(scope, receive, send)
            return
        await self.app(scope, replaying(body, receive), send)

    async def _reject(self, scope: Scope, receive: Receive, send: Send) -> None:
        error = ErrorItem(
            loc=["body"], type="body_too_large", msg=f"request body exceeds the limit of {self.max_bytes} bytes"
        )
        # Connection: close, so the server does not have to read (and discard) the rest.
        response = error_response(413, [error], headers={"Connection": "close"})
        await response(scope, receive, send)


def replaying(body: bytes, receive: Receive) -> Receive:
    """A receive callable that gives the whole `body` as its first message, then `receive`'s."""
    replayed = False

    async def replay() -> Message:
        nonlocal replayed
        if not replayed:
            replayed = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replay


def _is_utf8(body: bytes) -> bool:
    try:
        body.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


class ErrorMiddleware:
    """Answers any exception the app did not handle with a JSON 500, logged once, and lets the
    connection live on.

    `add_exception_handler(Exception, ...)` goes to Starlette's ServerErrorMiddleware, which
    answers and then re-raises: uvicorn logged the traceback a second time and closed the
    keep-alive connection (4 of 200 follow-up requests on it failed). Here the exception ends.
    """

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = False

        async def send_wrapper(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        try:
            await self.app(scope, receive, send_wrapper)
        except ClientDisconnected:
            return  # nobody to answer; MetricsMiddleware counts it as client_closed
        except Exception:
            log.exception("unhandled error on %s %s", scope["method"], scope["path"])
            if started:
                raise  # half an answer is out: only closing the connection tells the client
            error = ErrorItem(loc=["server"], type="internal_error", msg="internal error while correcting; see server log")
            await error_response(500, [error])(scope, receive, send)


class CorrectRequests:
    """Answers every JSON `POST /correct` itself (Content-Type application/json or
    application/*+json): the body is read once (`parsing.read_correct_request`, bounded in cost
    whatever it holds), every error answered from there, the rest corrected with the route's own
    call, without FastAPI's per-request machinery in between (routing, dependency solving, the
    exception middleware, its response handling). The route sees only bodies of other types (415).

    Why here: under load the serving process shares the 2 cores with the correction processes,
    and its Python runs from a cache they keep evicting (0.6-0.7 ms a request there against 0.2
    ms alone), while each lane's round trip to its clients waits on it. Alone (instant corrector)
    0.21 -> 0.12 ms of CPU a request; 8-client load test, alternated with the route alone:
    387-416 against 366-395 req/s, p50 18.7-20.3 against 19.6-21.3 ms. A body over
    THREAD_PARSE_BYTES is parsed on a thread, so the event loop keeps answering meanwhile (ijson's
    walk of a body with many commas gives up the GIL between its events).
    Sits inside ErrorMiddleware (an unexpected error is still a logged 500) and the body limits.
    """

    THREAD_PARSE_BYTES = 256 * 1024

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if (scope["type"] != "http" or scope["method"] != "POST" or scope["path"] != "/correct"
                or "app" not in scope or not _is_json_media(Headers(scope=scope).get("content-type"))):
            await self.app(scope, receive, send)
            return
        state = scope["app"].state
        chunks = []
        while True:  # one message: BodySizeLimitMiddleware has read the body and replays it whole
            message = await receive()
            if message["type"] != "http.request":
                return  # the client went away; MetricsMiddleware counts it
            chunks.append(message.get("body", b""))
            if not message.get("more_body", False):
                break
        body = b"".join(chunks)
        try:
            if len(body) > self.THREAD_PARSE_BYTES:
                request = await asyncio.to_thread(read_correct_request, body, state.settings)
            else:
                request = read_correct_request(body, state.settings)
            if state.batcher is None:  # only between shutdown start and process exit
                raise ShuttingDownError("the model is not loaded")
            response = await corrected(request, state.batcher, receive)
        except RequestError as exc:
            response = error_response(exc.status, exc.errors)
        except (QueueFullError, ShuttingDownError, WorkerCrashedError) as exc:
            response = _busy_response(exc)
        await response(scope, receive, send)


def _media_type(content_type: str | None) -> str:
    """The media type of a Content-Type value, lowercased, without its parameters."""
    return (content_type or "").split(";")[0].strip().lower()


def _is_json_media(content_type: str | None) -> bool:
    # FastAPI only parses application/json and */*+json bodies as JSON (none at all when the
    # header is missing), so anything else would fail validation with a misleading message.
    media = _media_type(content_type)
    return media == "application/json" or (media.startswith("application/") and media.endswith("+json"))


async def _validation_error(request: Request, exc: RequestValidationError) -> JSONResponse:
    content_type = request.headers.get("content-type")
    if request.method == "POST" and not _is_json_media(content_type):
        what = f"Content-Type is {echo(content_type)!r}" if content_type else "the Content-Type header is missing"
        error = ErrorItem(loc=["header", "content-type"], type="unsupported_media_type",
                          msg=f"{what}; send the body as application/json")
        return error_response(415, [error])
    # FastAPI's locations start with where the value was ("body", "query"); validation_errors adds "body".
    errors = [{**e, "loc": tuple(e.get("loc", ()))[1:]} for e in exc.errors()]
    return error_response(422, validation_errors(errors))


async def _request_error(request: Request, exc: RequestError) -> JSONResponse:
    return error_response(exc.status, exc.errors)


async def _http_error(request: Request, exc: StarletteHTTPException) -> JSONResponse:
    error = ErrorItem(loc=["request"], type=f"http_{exc.status_code}", msg=echo(str(exc.detail)))
    return error_response(exc.status_code, [error], headers=getattr(exc, "headers", None))


async def _busy(request: Request, exc: Exception) -> JSONResponse:
    return _busy_response(exc)


def _busy_response(exc: Exception) -> JSONResponse:
    kinds = {QueueFullError: "queue_full", WorkerCrashedError: "worker_restarting"}
    kind = kinds.get(type(exc), "shutting_down")
    if kind == "worker_restarting":
        log.warning("answered 503: %s", exc)
    error = ErrorItem(loc=["server"], type=kind, msg=str(exc))
    return error_response(503, [error], headers={"Retry-After": "1"})


def _offline_docs(app: FastAPI) -> None:
    """/docs from Swagger UI's files in the `swagger-ui-bundle` package, served here: FastAPI's
    own page loads them from a CDN and is blank without Internet access."""
    try:
        from swagger_ui_bundle import swagger_ui_path
    except ImportError:  # not installed: FastAPI's CDN page
        log.info("swagger-ui-bundle is not installed: /docs loads Swagger UI from a CDN")
        return
    app.mount("/docs-assets", StaticFiles(directory=swagger_ui_path), name="docs-assets")

    @app.get("/docs", include_in_schema=False)
    async def docs() -> HTMLResponse:
        return get_swagger_ui_html(openapi_url=app.openapi_url or "/openapi.json", title=f"{app.title} - docs",
                                   swagger_js_url="/docs-assets/swagger-ui-bundle.js",
                                   swagger_css_url="/docs-assets/swagger-ui.css",
                                   swagger_favicon_url="/docs-assets/favicon-32x32.png")


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
            max_queue_chars=settings.max_queue_chars,
            piece_chars=settings.piece_chars,
            turn_chars=settings.turn_chars,
            metrics=metrics,
        )
        await batcher.start()
        app.state.model_name = corrector_name(instance)
        app.state.precision = getattr(instance, "precision", None)
        app.state.runtime = getattr(instance, "runtime", None)
        app.state.processes = getattr(instance, "processes", 0)  # a ProcessCorrector's
        app.state.batcher = batcher
        app.state.corrector = instance
        metrics.model_info.labels(app.state.model_name or "", VERSION).set(1)
        log.info("model %s ready (%s, %s, %s correction processes, batching=%s)", app.state.model_name,
                 app.state.precision, app.state.runtime, app.state.processes or "no", settings.batching)
        try:
            yield
        finally:
            app.state.batcher = None
            app.state.corrector = None
            await batcher.stop()
            if corrector is None and hasattr(instance, "close"):
                instance.close()  # the correction processes (ProcessCorrector)

    app = FastAPI(
        title="Chinese spelling correction (中文拼写纠错)",
        version=VERSION,
        description="Corrects misspelt Chinese characters. See docs/service.md for limits and errors.",
        lifespan=lifespan,
        docs_url=None,  # _offline_docs
        redoc_url=None,  # ReDoc loads its script from a CDN: /docs is the offline page
        # POST /correct/ would be redirected (307) to a Location built from the client's Host header.
        redirect_slashes=False,
    )
    app.state.settings = settings
    app.state.metrics = metrics
    app.state.batcher = None
    app.state.corrector = None
    app.state.model_name = None
    app.state.precision = None
    app.state.runtime = None
    app.state.processes = 0

    app.include_router(router)
    app.mount("/static", StaticFiles(directory=STATIC_DIR), name="static")
    _offline_docs(app)

    app.add_exception_handler(RequestValidationError, _validation_error)
    app.add_exception_handler(RequestError, _request_error)
    app.add_exception_handler(StarletteHTTPException, _http_error)
    app.add_exception_handler(QueueFullError, _busy)
    app.add_exception_handler(ShuttingDownError, _busy)
    app.add_exception_handler(WorkerCrashedError, _busy)

    # Added last = outermost: metrics also count the 413s the size limit produces.
    app.add_middleware(CorrectRequests)
    app.add_middleware(ErrorMiddleware)
    app.add_middleware(BodySizeLimitMiddleware, max_bytes=settings.max_body_bytes,
                       timeout_s=settings.body_timeout_s)
    app.add_middleware(MetricsMiddleware, metrics=metrics)
    return app


app = create_app()
