"""Service settings: command-line flags override `CSC_SERVICE_*` environment variables.

Environment variables are the only channel that reaches every uvicorn worker process
(`--workers N` re-imports `service.app` in each child), so `python -m service` turns its flags
into these variables before starting uvicorn; `uvicorn service.app:app` reads them directly.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

from corrector.runtime import RUNTIMES
from corrector.text.script import CHOICES as TRADITIONAL_CHOICES

ENV_PREFIX = "CSC_SERVICE_"


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix=ENV_PREFIX, extra="ignore")

    host: str = "127.0.0.1"
    port: int = Field(8000, ge=0, le=65535)
    workers: int = Field(1, ge=1, description="uvicorn worker processes; each loads its own model")
    log_level: str = "info"
    # One log line per request costs measurable CPU at thousands of requests/s; off for benchmarks.
    access_log: bool = True

    # None defers to the library default ($CORRECTOR_MODEL, else data/model).
    model: str | None = None
    device: str = "cpu"
    # CPU threads per worker process (numpy's BLAS; torch's where it runs the networks); 0: one
    # per core divided among the `workers` processes. The corrector's batch workers take them (2
    # cores: two batches at once, one thread each, so no thread team spins waiting for a core
    # that another busy thread holds); every other thread, the inference thread included, runs on
    # one (see docs/service.md, "Threads").
    threads: int = Field(0, ge=0)
    # Correction processes per worker (corrector/processes.py): each holds its own corrector on one
    # thread and takes a share of every micro-batch; 0: correct in the worker process itself,
    # on the corrector's batch threads (`threads`). None: the CPU cores divided among the
    # `workers`, at most 4 (a model each), where that makes two or more on the CPU, else 0.
    # Processes do not share the GIL: a micro-batch of 8 sentences on 2 cores in 15.8 instead of
    # 20.4 ms (docs/service.md).
    processes: int | None = Field(None, ge=0, le=64)
    # Correction passes (CorrectorConfig.passes). 1 here, where the library, CLI and evaluator do 3:
    # further passes correct the sentences with edits again (broad dev held out macro F1 50.9 vs
    # 46.7) but double that text's time, and a service answers one request at a time
    # (docs/service.md).
    passes: int = Field(1, ge=1, le=3)
    # int8 networks (quantization.py). None: the library default, int8 on CPU (same F1, ~1.4x the
    # throughput; a text gets the same corrections in any micro-batch, its confidences within a
    # few 1e-3). False: fp32, where a text's result is exactly the same in any micro-batch.
    quantize: bool | None = None
    # What runs the int8 networks: "onnxruntime" (corrector/runtime/onnx_networks.py, no torch: ~0.7x the
    # time per sentence, a text's result exactly the same in any micro-batch), "torch", or "auto":
    # onnxruntime where installed.
    runtime: Literal[RUNTIMES] = "auto"  # the choices the CLI and evaluator offer too
    # bf16 autocast for the networks instead of int8 (CPUs with AVX512-BF16/AMX, GPUs): same dev
    # F1, confidences move by up to a few 1e-2 (0.037 between a text alone and in a batch).
    bf16: bool = False
    # Traditional-script texts are corrected in simplified form and written back in this OpenCC
    # variant (corrector/script.py): "tw", "hk", "t"; "off": every text as written.
    traditional: Literal[TRADITIONAL_CHOICES] = "tw"
    # One tiny correction at start-up so the first real request does not pay for lazy init.
    warmup: bool = True

    # Micro-batching: requests queued while the model is busy share the next forward pass, up to
    # max_batch_size texts; the batcher also waits up to max_wait_ms (from the oldest request) for
    # company, but only while the batch is smaller than the previous one (see batching.py).
    batching: bool = True
    max_batch_size: int = Field(32, ge=1, le=1024)
    max_wait_ms: float = Field(10.0, ge=0, le=1000)
    # Texts waiting for the model beyond this are refused with 503 instead of queueing forever.
    max_queue_texts: int = Field(2048, ge=1)

    # Fairness (batching.py, pieces.py): texts longer than piece_chars are corrected in pieces cut
    # at sentence ends, and one corrector call takes pieces round-robin from every waiting request,
    # at most turn_chars characters from any one request (divided among the lanes, one call per
    # correction process at once), so a short request waits behind a big
    # one for about 1.5 such turns. Measured beside a 96,000-character request (2 shared cores,
    # load ~5), with the cap on the whole call: a short request's p50 300-350 ms at 512 against
    # 536-635 ms at 1024; the big one alone took 34.5-40.1 s against 30.8-34.4 s (more calls, each
    # waiting for the slower process's share).
    piece_chars: int = Field(256, ge=16)
    turn_chars: int = Field(512, ge=16)
    # Characters waiting for the model beyond this are refused with 503 (with max_queue_texts).
    max_queue_chars: int = Field(1_000_000, ge=1)

    # Input limits (see docs/service.md, "Bad input").
    max_text_chars: int = Field(10_000, ge=1)
    max_texts: int = Field(64, ge=1)
    # The cost budget of one request: characters of all its texts together, 413 beyond it.
    # 100,000 characters take ~8 s of the 2-core machine (~12,000 characters/s with two
    # correction processes); more belongs in several requests (or the CLI's --input).
    max_request_chars: int = Field(100_000, ge=1)
    # Seconds the whole request body may take to arrive after its head (408 after that).
    body_timeout_s: float = Field(10.0, gt=0, le=3600)
    # Slow and hostile clients (service/protocol.py): the request head must be complete this many
    # seconds after the connection opened (or after its first byte, on a kept-alive connection),
    # else 408; a head over max_head_bytes is answered 431; connections beyond max_connections
    # are answered 503 and closed (keep it below the process's open-file limit); a kept-alive
    # connection idle for keep_alive_s is closed (uvicorn's timeout_keep_alive).
    head_timeout_s: float = Field(10.0, gt=0, le=3600)
    max_head_bytes: int = Field(64 * 1024, ge=1024)
    max_connections: int = Field(1000, ge=1)
    keep_alive_s: int = Field(5, ge=1, le=3600)
    # Must fit max_texts * max_text_chars of CJK text (3 UTF-8 bytes a character) plus JSON.
    max_body_bytes: int = Field(4 * 1024 * 1024, ge=1024)
