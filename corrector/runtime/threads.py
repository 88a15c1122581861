"""The batch threads: a process-wide pool of worker threads, each with its share of torch's
intra-op threads, on which a Corrector runs its batches in parallel.

Why: on 2 CPU cores two batches with one thread each beat one batch with two threads: a
sentence-length forward pass parallelises poorly, and the candidate and scoring stages (numpy,
Python) run on one core anyway. Measured on SIGHAN-15 with the shipped model at batch 32:
1.1-1.4x the sentences/s (fp32, bf16, int8; docs/history.md, Speed).
"""

from __future__ import annotations

import os
import threading
from concurrent.futures import ThreadPoolExecutor

import torch

_POOLS: dict[tuple[int, int], ThreadPoolExecutor] = {}
_POOLS_LOCK = threading.Lock()


def _forget_pools_after_fork() -> None:
    # A forked child has none of its parent's threads: a pool inherited from the parent would take
    # work and never run it. The child starts its own on first use.
    global _POOLS_LOCK
    _POOLS.clear()
    _POOLS_LOCK = threading.Lock()


os.register_at_fork(after_in_child=_forget_pools_after_fork)


def batch_pool(workers: int, threads_per_worker: int) -> ThreadPoolExecutor:
    """The process-wide pool of `workers` batch threads, each running torch with
    `threads_per_worker` intra-op threads. Shared by every Corrector of the process, so two
    correctors (or two service requests) do not oversubscribe the cores."""
    key = (workers, threads_per_worker)
    with _POOLS_LOCK:
        if key not in _POOLS:
            _POOLS[key] = _start_pool(workers, threads_per_worker)
        return _POOLS[key]


def _start_pool(workers: int, threads_per_worker: int) -> ThreadPoolExecutor:
    def limit_threads() -> None:
        # torch initialises a thread's intra-op thread count lazily from the process default on
        # its first parallel op; do that first, or it would later undo the setting below.
        torch.get_num_threads()
        torch.set_num_threads(threads_per_worker)

    pool = ThreadPoolExecutor(workers, thread_name_prefix="corrector-batch", initializer=limit_threads)
    previous = torch.get_num_threads()
    # Start every worker now (each blocks until all have started) ...
    started = threading.Barrier(workers + 1)
    waits = [pool.submit(started.wait) for _ in range(workers)]
    started.wait()
    for wait in waits:
        wait.result()
    # ... then restore the process default that set_num_threads changed with the workers' own.
    torch.set_num_threads(previous)
    return pool
