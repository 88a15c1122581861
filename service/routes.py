"""HTTP routes. Thin: validation lives in `schemas`, batching in `batching`, correction in `corrector`."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

from fastapi import APIRouter, Request, Response
from fastapi.responses import FileResponse, JSONResponse
from starlette.types import Receive

from corrector import __version__ as VERSION

from .batching import Batcher, ShuttingDownError
from .parsing import check_request
from .schemas import CorrectRequest, CorrectResponse, ErrorResponse, HealthResponse

INDEX_HTML = Path(__file__).resolve().parent / "static" / "index.html"

router = APIRouter()

_ERRORS = {
    400: {"model": ErrorResponse, "description": "Body empty, not valid JSON, or not UTF-8."},
    408: {"model": ErrorResponse, "description": "Body not complete within body_timeout_s."},
    413: {"model": ErrorResponse, "description": "Body larger than max_body_bytes, or more characters than "
                                                 "max_request_chars in all."},
    415: {"model": ErrorResponse, "description": "Body is not application/json."},
    422: {"model": ErrorResponse, "description": "Every problem of the request, with its index."},
    503: {"model": ErrorResponse, "description": "Queue full, a correction process restarting, or shutting "
                                                 "down; retry after Retry-After seconds."},
}


class ClientDisconnected(Exception):
    """The client went away before its answer was ready: nothing is sent (app.ErrorMiddleware)."""


async def _disconnected(receive: Receive) -> None:
    """Returns once the client has closed the connection. The body has been read by then, so
    the next message the server has for this request is its disconnect."""
    while (await receive())["type"] != "http.disconnect":
        pass


async def _unless_disconnected(receive: Receive, work: asyncio.Future):
    """`work`'s result, or ClientDisconnected (with `work` cancelled, so the batcher drops its
    pieces that have not run) as soon as the client goes away."""
    watcher = asyncio.ensure_future(_disconnected(receive))
    try:
        await asyncio.wait({work, watcher}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        watcher.cancel()
        if not work.done():
            work.cancel()
    if not work.done() or work.cancelled():
        raise ClientDisconnected()
    return work.result()


def _batcher(request: Request) -> Batcher:
    batcher = request.app.state.batcher
    if batcher is None:  # only between shutdown start and process exit
        raise ShuttingDownError("the model is not loaded")
    return batcher


async def corrected(body: CorrectRequest, batcher: Batcher, receive: Receive) -> JSONResponse:
    """The answer to a checked request: its texts corrected, in order, each with the request's
    `elapsed_ms`; ClientDisconnected if the client goes away first (its work is dropped)."""
    start = time.perf_counter()
    work = asyncio.ensure_future(batcher.correct(body.all_texts(), body.threshold))
    results = await _unless_disconnected(receive, work)
    elapsed_ms = round((time.perf_counter() - start) * 1000, 3)
    batcher.metrics.texts.inc(len(results))  # texts answered, not the pieces a long one was cut into
    items = [{**result.to_dict(), "elapsed_ms": elapsed_ms} for result in results]
    # Answered as built: FastAPI would validate these dicts against `response_model` (which stays
    # the documented schema) before encoding them, 13 % of a request's time in the serving
    # process (load test, instant corrector: 2,680-2,740 vs 2,280-2,460 req/s on one core).
    return JSONResponse(items if body.is_batch else items[0])


@router.post(
    "/correct",
    response_model=CorrectResponse | list[CorrectResponse],
    responses=_ERRORS,
    summary="Correct one text (`text`) or several (`texts`, answered as a list in the same order)",
)
async def correct(body: CorrectRequest, request: Request) -> JSONResponse:
    # A JSON body never gets here: app.CorrectRequests reads it once and answers it with the same
    # calls. This route documents the endpoint (and FastAPI answers other media types 415).
    check_request(body, request.app.state.settings)
    return await corrected(body, _batcher(request), request.receive)


@router.head("/health", include_in_schema=False)  # probes that only look at the status line
@router.get("/health", response_model=HealthResponse, responses={503: {"model": HealthResponse}})
async def health(request: Request) -> JSONResponse:
    settings = request.app.state.settings
    ready = request.app.state.batcher is not None
    processes = request.app.state.processes
    # Correction processes alive and loaded; fewer than `processes` while dead ones restart.
    live = getattr(request.app.state.corrector, "ready_processes", processes) if ready else 0
    body = HealthResponse(
        status=("ok" if live >= processes else "degraded") if ready else "unavailable",
        ready=ready,
        ready_processes=live,
        model=request.app.state.model_name,
        precision=request.app.state.precision,
        runtime=request.app.state.runtime,
        processes=request.app.state.processes,
        version=VERSION,
        batching=settings.batching,
        max_batch_size=settings.max_batch_size,
        max_wait_ms=settings.max_wait_ms,
    )
    return JSONResponse(body.model_dump(), status_code=200 if ready else 503)


@router.get("/metrics", include_in_schema=True, summary="Prometheus metrics (text exposition format)")
async def metrics(request: Request) -> Response:
    payload, content_type = request.app.state.metrics.render()
    return Response(payload, media_type=content_type)


@router.api_route("/", methods=["GET", "HEAD"], include_in_schema=False)
async def index() -> FileResponse:
    return FileResponse(INDEX_HTML, media_type="text/html; charset=utf-8")
