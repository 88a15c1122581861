"""`python -m service [--host H] [--port P] [--model DIR] [--workers N] ...`

Flags override `CSC_SERVICE_*` environment variables. They are written back into the
environment before uvicorn starts, because with `--workers N` every worker process builds its
own app from the environment (`service.app:app`).
"""

from __future__ import annotations

import argparse
import os
import sys

from corrector.runtime import RUNTIMES
from corrector.text.script import CHOICES as TRADITIONAL_CHOICES

from .protocol import uvicorn_options
from .settings import ENV_PREFIX, Settings


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m service", description="Chinese spelling correction REST service")
    p.add_argument("--host", help="bind address (default 127.0.0.1)")
    p.add_argument("--port", type=int, help="port (default 8000; 0 = any free port)")
    p.add_argument("--model", help="model directory or hub id (default $CORRECTOR_MODEL or data/model)")
    p.add_argument("--device", help="torch device (default cpu)")
    p.add_argument("--workers", type=int, help="worker processes, each with its own model (default 1)")
    p.add_argument("--threads", type=int, help="with --processes 0: torch threads per worker (default 0: the cores divided among the workers, "
                        "run as parallel batches)")
    p.add_argument("--processes", type=int,
                   help="correction processes per worker, each with its own model, sharing every micro-batch "
                        "(default: the cores per worker, at most 4, if that is 2 or more on the CPU; 0: correct in "
                        "the worker process, on --threads)")
    p.add_argument("--passes", type=int, choices=(1, 2, 3),
                   help="correction passes (default 1 here, for latency; 3, the library's default: the sentences with "
                        "edits are corrected again, broad dev macro F1 50.9 vs 46.7, twice their time)")
    p.add_argument("--quantize", action=argparse.BooleanOptionalAction, default=None,
                   help="int8 networks (default on CPU: ~1.4x the throughput, same F1); --no-quantize for fp32, "
                        "exactly batch-independent results")
    p.add_argument("--runtime", choices=RUNTIMES,
                   help="what runs the int8 networks' encoders (default auto: onnxruntime where installed)")
    p.add_argument("--bf16", action=argparse.BooleanOptionalAction, default=None,
                   help="bf16 autocast for the networks instead of int8 (CPUs with AVX512-BF16/AMX, GPUs): same "
                        "F1, confidences move by up to a few 1e-2 (default off)")
    p.add_argument("--traditional", choices=TRADITIONAL_CHOICES,
                   help="variant that traditional-script texts are written back in (default tw; off: no conversion)")
    p.add_argument("--batching", action=argparse.BooleanOptionalAction, default=None,
                   help="micro-batch concurrent requests (default on)")
    p.add_argument("--max-batch-size", type=int, help="most texts in one forward pass (default 32)")
    p.add_argument("--max-wait-ms", type=float, help="longest wait for a batch to fill (default 10)")
    p.add_argument("--max-text-chars", type=int, help="longest accepted text (default 10000)")
    p.add_argument("--max-texts", type=int, help="most texts per request (default 64)")
    p.add_argument("--max-body-bytes", type=int, help="largest accepted request body (default 4 MiB)")
    p.add_argument("--max-request-chars", type=int,
                   help="cost budget of one request: characters of all its texts together, 413 beyond "
                        "(default 100000)")
    p.add_argument("--piece-chars", type=int,
                   help="texts longer than this are corrected in pieces cut at sentence ends, which share "
                        "the model with other requests (default 256)")
    p.add_argument("--turn-chars", type=int,
                   help="most characters of one request in one corrector call (default 512)")
    p.add_argument("--body-timeout-s", type=float,
                   help="seconds the whole request body may take to arrive after its head, 408 after (default 10)")
    p.add_argument("--head-timeout-s", type=float,
                   help="seconds a request head (line and headers) may take to arrive, 408 after (default 10)")
    p.add_argument("--max-head-bytes", type=int, help="largest request head, 431 beyond (default 65536)")
    p.add_argument("--max-connections", type=int,
                   help="most open connections; more are answered 503 and closed (default 1000)")
    p.add_argument("--keep-alive-s", type=int, help="seconds an idle kept-alive connection stays open (default 5)")
    p.add_argument("--no-warmup", dest="warmup", action="store_false", default=None,
                   help="skip the warm-up correction at start-up")
    p.add_argument("--log-level", help="uvicorn log level (default info)")
    p.add_argument("--access-log", action=argparse.BooleanOptionalAction, default=None,
                   help="log every request (default on)")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    overrides = {k: v for k, v in vars(args).items() if v is not None}
    try:
        settings = Settings(**overrides)  # validates flags and env together, before any model load
    except ValueError as exc:
        sys.exit(f"invalid settings: {exc}")
    for name, value in settings.model_dump().items():
        if value is not None:
            os.environ[ENV_PREFIX + name.upper()] = str(value)

    import uvicorn

    # An import string (not an app object) so that --workers N can re-create the app in each child.
    uvicorn.run(
        "service.app:app",
        host=settings.host,
        port=settings.port,
        workers=settings.workers,
        log_level=settings.log_level,
        access_log=settings.access_log,
        **uvicorn_options(settings),  # the head deadline and size, the connection cap (protocol.py)
    )


if __name__ == "__main__":
    main()
