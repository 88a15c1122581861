"""A Corrector's batch workers: how many batch threads it uses, when a call's chunks are split
among them, and the running of the batches (on the process-wide pools of runtime/threads.py, or
in the calling thread).

Kept out of pipeline.py: how batches are scheduled is independent of what a batch does, and a
Corrector only hands over its chunks and the function that corrects one batch of them.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TypeVar

from .threads import batch_pool, blas_threads, cpu_threads

# A call's texts are split among the batch workers only from this many per worker. Measured with
# the lean int8 encoder (median ms per call, SIGHAN-15 sentences, three runs): 4 texts 32-34 in
# one batch vs 40-42 split in two, 8 texts 53-59 vs 57-61, 16 texts 104-117 vs 94-99. (With
# transformers' encoder, whose per-op Python held the GIL longer, splitting lost up to 16 texts.)
MIN_SPLIT_ITEMS = 8
# The same with the encoders in ONNX Runtime, which runs one sentence at a time and releases the
# GIL while it does, so a batch saves nothing in the networks and two workers overlap well:
# split from 2 texts. Measured (median ms per call, calling thread on one torch thread as in the
# service, five runs): 2 texts 18.5 split vs 23.0 not, 4 texts 27.6 vs 32.6, 8 texts 49.4 vs 55.7.
MIN_SPLIT_ITEMS_ONNX = 1

T = TypeVar("T")  # a chunk: what run_batch takes


@dataclass(frozen=True)
class BatchWorkers:
    """The batch threads of one Corrector (read-only once built, so shared by its copies)."""

    count: int  # 1: every batch in the calling thread
    threads_per_worker: int
    min_split_items: int

    @classmethod
    def start(cls, workers: int | None, device_type: str, runtime: str) -> BatchWorkers:
        """`workers` threads (None: 2 on a CPU with >= 2 threads, else 1), their pool started now
        rather than during the first call."""
        count = workers or (2 if device_type == "cpu" and cpu_threads() >= 2 else 1)
        started = cls(count, max(1, cpu_threads() // count),
                      MIN_SPLIT_ITEMS_ONNX if runtime == "onnxruntime" else MIN_SPLIT_ITEMS)
        if count > 1:
            batch_pool(count, started.threads_per_worker)
        return started

    def run(self, items: list[T], batch_size: int, run_batch: Callable[[list[T]], list]) -> Iterator:
        """What `run_batch` returns for each batch of `items` (already in batch order), batch after
        batch; the batches run on the worker threads when there are enough of them."""
        if self.count > 1 and len(items) >= self.count * self.min_split_items:
            # Split so that every worker gets a share (32: 2 x 16). With the torch encoders fewer
            # texts stay one batch: two threads running small passes mostly wait for each other's
            # Python and small ops (ONNX Runtime releases the GIL for its passes: split from 2).
            batch_size = max(1, min(batch_size, math.ceil(len(items) / self.count)))
        groups = [items[first:first + batch_size] for first in range(0, len(items), batch_size)]
        with blas_threads(1):
            if self.count == 1 or len(groups) <= 1:
                for group in groups:
                    yield from run_batch(group)
                return
            pool = batch_pool(self.count, self.threads_per_worker)  # per call: a forked child starts its own
            jobs = [pool.submit(run_batch, group) for group in groups]
            try:
                for job in jobs:
                    yield from job.result()
            finally:
                for job in jobs:  # an error (or a caller that stops early): drop what has not started
                    job.cancel()
