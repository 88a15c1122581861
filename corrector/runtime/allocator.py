"""Process-wide memory settings for long-running work: keep the memory the process frees for its
next use instead of returning it to the OS, and keep the garbage collector off what loading made.

glibc's malloc serves blocks above a (dynamic, 128 KiB to 32 MiB) threshold with mmap and unmaps
them on free, and trims the heap top above 128 KiB. A training or inference step allocates and
frees the same large activations every time, so with the defaults each step page-faults them
afresh and the kernel zero-fills every page: on this project's CPU pre-training step that was
~20% of the time (`python -m corrector.pretrain bench`: 1,531 -> 1,925 tok/s at 1 thread).
PyTorch has no caching allocator on the CPU, and jemalloc/tcmalloc (the usual advice) need
LD_PRELOAD, so `models.load_model` (CLI, service, evaluator) and the trainers call
`retain_freed_memory()` instead: batched correction ~25% faster on CPU. Blocks above 32 MiB (the
most glibc allows) are still mapped per use; the pre-training step avoids making them.

Python's cyclic garbage collector walks every tracked object it has promoted to its oldest
generation whenever that generation has grown by a quarter. After a model is loaded that is
~400,000 objects, nearly all of them torch's and transformers' functions, classes and tables, none
of which will ever become garbage; each such walk took 220-280 ms on this project's 2-core CPU,
once every few seconds under load, and stalled every request in flight with it (the service at
32 clients: a whole batch answered in ~380 ms instead of ~100). `freeze_startup_objects()`
moves them out of the collector's sight once start-up is done (`gc.freeze`, the standard remedy
for long-running servers); objects made later are collected as before. During start-up itself the
same walks ran ~600 times (importing torch, reading jieba's and the model's tables), 0.24 s of a
one-sentence CLI call, for garbage that start-up hardly makes: `collector_paused()` around it.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import gc
import sys
from collections.abc import Iterator

_M_TRIM_THRESHOLD = -1
_M_TOP_PAD = -2
_M_MMAP_THRESHOLD = -3
_MMAP_THRESHOLD_MAX = 32 * 1024 * 1024  # glibc's ceiling on 64-bit (HEAP_MAX_SIZE / 2)
_TOP_PAD = 64 * 1024 * 1024
_NEVER_TRIM = 2**31 - 1  # mallopt takes an int

_applied = False


def retain_freed_memory() -> bool:
    """Tune glibc malloc for repeated large tensor allocations (process-wide, idempotent).

    True where applied; False on other C libraries (macOS, Windows, musl), where it does nothing.
    The process keeps its peak heap instead of shrinking after each step: right for a trainer or
    a long-running service, which reach the same peak again on the next step or batch."""
    global _applied
    if _applied:
        return True
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    ok = all(mallopt(option, value) == 1 for option, value in (
        (_M_MMAP_THRESHOLD, _MMAP_THRESHOLD_MAX),
        (_M_TRIM_THRESHOLD, _NEVER_TRIM),
        (_M_TOP_PAD, _TOP_PAD),
    ))
    _applied = ok
    return ok


def release_free_memory() -> bool:
    """Give the heap's free memory back to the OS now (glibc `malloc_trim`); False elsewhere.

    For a long run over varied input (the CLI's `--input`, between blocks): with
    `retain_freed_memory` the heap never shrinks, and texts of new lengths leave free pieces
    that later allocations do not fit, so the process grew block after block with the same
    Python objects (~402,000) throughout. Measured on SIGHAN's sentences twice over, 19 blocks of
    1,024 lines: 870 -> 1,106 MB; with this after each block 780 -> 806 MB.
    Within a block the retained memory still serves every batch."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        return bool(ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6").malloc_trim(0))
    except (OSError, AttributeError):
        return False


def freeze_startup_objects() -> int:
    """Collect garbage once, then exempt every surviving object from later collections
    (process-wide; for a server after its model is loaded and warmed up). Returns how many
    objects are frozen. Frozen objects are never collected, so cycles among them that become
    garbage later would stay: call it once, when what exists is what the process keeps."""
    gc.collect()
    gc.freeze()
    return gc.get_freeze_count()


@contextlib.contextmanager
def collector_paused() -> Iterator[None]:
    """The cyclic garbage collector off for the block (start-up: imports and model loading, which
    make objects that live on, not cyclic garbage), on again after it if it was on."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()
