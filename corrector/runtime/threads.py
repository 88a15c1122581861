"""The batch threads: a process-wide pool of worker threads, each with its share of torch's
intra-op threads (where torch runs the networks), on which a Corrector runs its batches in parallel.

Why: on 2 CPU cores two batches with one thread each beat one batch with two threads: a
sentence-length forward pass parallelises poorly, and the candidate and scoring stages (numpy,
Python) run on one core anyway. Measured on SIGHAN-15 with the shipped model at batch 32:
1.1-1.4x the sentences/s (fp32, bf16, int8; docs/history.md, Speed).
"""

from __future__ import annotations

import contextlib
import functools
import os
import sys
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

_threads: int | None = None  # set_threads
_torch_pending = False  # set_threads was called before torch was imported: apply_to_torch applies it
_blas_lock = threading.Lock()
_blas_users = 0  # calls inside `blas_threads`
_blas_limit = None  # the limit they hold (threadpoolctl's, restored by the last one out)
_POOLS: dict[tuple[int, int], ThreadPoolExecutor] = {}
_POOLS_LOCK = threading.Lock()


def _forget_pools_after_fork() -> None:
    # A forked child has none of its parent's threads: a pool inherited from the parent would take
    # work and never run it. The child starts its own on first use.
    global _POOLS_LOCK
    _POOLS.clear()
    _POOLS_LOCK = threading.Lock()


os.register_at_fork(after_in_child=_forget_pools_after_fork)


def set_threads(threads: int) -> None:
    """The CPU threads the correction may use (`--threads`): torch's too, now where it is loaded,
    else when the model loader imports it (`apply_to_torch`)."""
    global _threads, _torch_pending
    _threads = threads
    torch = sys.modules.get("torch")
    _torch_pending = torch is None
    if torch is not None:
        torch.set_num_threads(threads)
    controller = _blas_controller()
    if controller is not None:
        controller.limit(limits=threads, user_api="blas")  # for the process: not restored


def apply_to_torch() -> None:
    """torch's intra-op threads as `set_threads` said, if it said so before torch was imported
    (called by the model loader once torch is, before any batch thread starts)."""
    global _torch_pending
    if _torch_pending and _threads is not None:
        import torch

        torch.set_num_threads(_threads)
        _torch_pending = False


def cpu_threads() -> int:
    """The CPU threads the correction may use: `set_threads`'s, else torch's intra-op threads
    where torch is loaded, else the CPUs this process may run on."""
    if _threads is not None:
        return _threads
    torch = sys.modules.get("torch")
    if torch is not None:
        return torch.get_num_threads()
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


@functools.cache
def _blas_controller():
    """threadpoolctl's view of the BLAS libraries loaded (numpy's OpenBLAS), or None without it.
    Made on first use: it scans the process's libraries (~0.1 s). numpy is imported first: a
    controller made before numpy has loaded its BLAS would never see it (`--threads 1` given to a
    process that had not imported numpy yet left OpenBLAS on every core)."""
    try:
        from threadpoolctl import ThreadpoolController
    except ImportError:
        return None
    import numpy  # noqa: F401 - loads the BLAS the controller is to find

    return ThreadpoolController()


@contextlib.contextmanager
def blas_threads(threads: int) -> Iterator[None]:
    """numpy's BLAS on `threads` threads while batches run (the heads and the generator's output
    layer are numpy matmuls of at most a few hundred rows, onnx_networks.py): a BLAS that starts a
    thread per core spins them against each other and against everything else on the machine.
    SIGHAN-15, 2 cores: two batch workers at batch 32, 99-113 sentences per CPU-second against
    163 with one BLAS thread; one sentence at a time, p50 22-24 ms against 10-11 ms (a busy
    machine). Overlapping calls share one limit; the last one out restores the process's own
    setting."""
    global _blas_users, _blas_limit
    controller = _blas_controller()
    if controller is None:
        yield
        return
    with _blas_lock:
        if _blas_users == 0:
            _blas_limit = controller.limit(limits=threads, user_api="blas")
        _blas_users += 1
    try:
        yield
    finally:
        with _blas_lock:
            _blas_users -= 1
            if _blas_users == 0:
                _blas_limit.restore_original_limits()
                _blas_limit = None


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
    torch = sys.modules.get("torch")  # the ONNX Runtime networks run without: one thread per session
    if torch is None:
        return ThreadPoolExecutor(workers, thread_name_prefix="corrector-batch")

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
