"""Correction in worker processes: each process holds its own `Corrector`; a call's texts are
shared among them.

Why processes and not the corrector's batch threads (`CorrectorConfig.workers`): between its
ONNX Runtime passes a batch runs hundreds of small numpy, torch and Python steps, and each of them
takes and gives back the GIL, so two batch threads in one process mostly hand the GIL to each
other. Measured (2-core Zen 4, shipped model, eight copies of the service load test's
sentence, one torch thread per worker, median of 150 calls): one thread 23.0 ms for all eight,
15.2 ms for four; two threads with four each 19.5 ms (1.18x one thread); two processes with
four each 16.0 ms (1.44x) — the processes share nothing but the memory bus.

The cost: every process loads the model (start-up runs in parallel; memory is one corrector per
process) and a call pays a pickle round trip through a pipe (0.4 ms for one sentence, measured).

Results are the same as one `Corrector`'s: every text is corrected alone in the networks (ONNX
Runtime runs one sentence at a time; fp32 is batch-independent), so which process gets it does
not matter. With `runtime="torch"` int8 confidences can move by a few 1e-3 with a text's batch
mates, as they do in one process.
"""

from __future__ import annotations

import asyncio
import logging
import multiprocessing
import multiprocessing.util
import os
import signal
import threading
from bisect import bisect_left
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from itertools import accumulate, pairwise
from multiprocessing.connection import Connection
from typing import Any

from ..chunking import text_list
from ..result import Result

log = logging.getLogger(__name__)

# Start-up of one process (import torch, load and quantize the model) is not
# timed out by default: a hub id may first have to be downloaded, and a process that dies while
# starting is noticed at once (its pipe breaks), as is a model that cannot be loaded.
START_TIMEOUT_S: float | None = None


@dataclass
class CorrectorSpec:
    """How each worker process builds its `Corrector` (the constructor's picklable arguments)."""

    model: str | None = None
    device: str = "cpu"
    threshold: float | None = None
    quantize: bool | None = None
    bf16: bool = False
    runtime: str = "auto"
    # A CorrectorConfig, or a dict of its fields (then the parent need not import torch); its
    # `workers` is set to 1 in the process.
    config: Any = None
    kwargs: dict[str, Any] = field(default_factory=dict)  # any other Corrector argument
    warmup: str | None = "少先队员因该为老人让坐。"  # corrected once at start, so no request pays for lazy set-up

    def build(self):
        from ..pipeline import Corrector, CorrectorConfig

        config = CorrectorConfig(**self.config) if isinstance(self.config, dict) else self.config or CorrectorConfig()
        config = replace(config, workers=1)  # the processes are the parallelism
        return Corrector(self.model, device=self.device, threshold=self.threshold, quantize=self.quantize,
                         bf16=self.bf16, runtime=self.runtime, config=config, **self.kwargs)


def _serve(conn: Connection, spec: CorrectorSpec) -> None:
    """A worker process: build the corrector, say ready, then answer (texts, threshold) requests
    until the pipe closes or None arrives."""
    # Ctrl-C in a terminal, or a service manager's SIGTERM to the whole process group, reaches this
    # process too; the parent decides when it ends (it finishes the batch in flight, then closes
    # the pipe), and if the parent dies without doing so the pipe breaks and the loop ends.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    try:
        from .models import disable_loading_bars
        from .threads import set_threads

        # Loading bars, one set per process and restart, would only fill the caller's log.
        disable_loading_bars()
        # One core per process: no OpenMP team to spin against the others (torch, where it runs
        # the networks; the ONNX Runtime networks never import it).
        set_threads(1)
        from .allocator import collector_paused, freeze_startup_objects

        with collector_paused():  # start-up makes hardly any garbage (allocator.py)
            corrector = spec.build()
        if spec.warmup:
            corrector.correct(spec.warmup)

        freeze_startup_objects()  # as the service does for its own process (allocator.py)
        conn.send(("ready", {"name": corrector.bundle.name, "precision": corrector.precision,
                             "runtime": corrector.runtime, "threshold": corrector.threshold}))
    except BaseException as exc:  # noqa: BLE001 - reported to the parent, which raises it
        conn.send(("error", _picklable(exc)))
        return
    while True:
        try:
            request = conn.recv()
        except (EOFError, OSError):  # the parent is gone
            return
        if request is None:
            return
        texts, threshold = request
        try:
            conn.send(("ok", corrector.correct_batch(texts, threshold=threshold)))
        except Exception as exc:  # noqa: BLE001 - the caller gets it, the process serves on
            conn.send(("error", _picklable(exc)))


def _picklable(exc: BaseException) -> BaseException:
    import pickle

    try:
        pickle.loads(pickle.dumps(exc))
        return exc
    except Exception:  # noqa: BLE001 - e.g. an exception class with required keyword arguments
        return RuntimeError(f"{type(exc).__name__}: {exc}")


class WorkerCrashedError(RuntimeError):
    """A correction process died while correcting and the texts could not be corrected again
    at once (no other process ready): retry shortly, the dead ones are being restarted."""


class _Worker:
    def __init__(self, context: multiprocessing.context.SpawnContext, spec: CorrectorSpec, index: int) -> None:
        self.conn, child = context.Pipe()
        self.process = context.Process(target=_serve, args=(child, spec), name=f"corrector-{index}", daemon=True)
        self.process.start()
        child.close()  # ours is closed in the child; the pipe breaks when the child dies
        self.info: dict | None = None  # its "ready" message, once received

    def ready(self, timeout: float | None) -> dict:
        if not self.conn.poll(timeout):
            self.process.kill()  # still loading: nothing to finish, and it reads no message until done
            self.stop()
            raise RuntimeError(f"correction process did not start within {timeout:g} s")
        self.info = self.receive()
        return self.info

    def poll_ready(self) -> bool:
        """Whether it has said ready (without waiting); a start-up error or death raises."""
        if self.info is None and self.conn.poll(0):
            self.info = self.receive()
        return self.info is not None

    def send(self, texts: list[str], threshold: float | None) -> None:
        self.conn.send((texts, threshold))

    def receive(self):
        """The process's answer: its results, or its error raised here."""
        try:
            status, value = self.conn.recv()
        except (EOFError, OSError):
            self.process.join(timeout=5)
            raise WorkerCrashedError(f"correction process {self.process.name} exited "
                                     f"(exit code {self.process.exitcode})") from None
        if status == "error":
            raise value
        return value

    @property
    def alive(self) -> bool:
        return self.process.is_alive() and not self.conn.closed

    def stop(self) -> None:
        _stop_all([self])


async def _readable(loop: asyncio.AbstractEventLoop, conn: Connection) -> None:
    """Returns once `conn` has data (or has ended) to read."""
    fd = conn.fileno()
    ready = loop.create_future()
    loop.add_reader(fd, lambda: ready.done() or ready.set_result(None))
    try:
        await ready
    finally:
        loop.remove_reader(fd)
        # uvloop leaves a watched descriptor non-blocking: the pipe's blocking reads (this call's
        # and the blocking calls' on threads) would fail with EAGAIN, read as a dead process.
        os.set_blocking(fd, True)


def _stop_all(workers: list[_Worker]) -> None:
    """Ask every process to end (all at once), wait up to 5 s, kill what is left."""
    for worker in workers:
        try:
            worker.conn.send(None)
        except (OSError, ValueError):  # already gone, or our end already closed
            pass
    for worker in workers:
        worker.process.join(timeout=5)
        if worker.process.is_alive():
            worker.process.kill()
            worker.process.join()
        worker.conn.close()


def shares(texts: Sequence[str], parts: int) -> list[tuple[int, int]]:
    """Cut `texts` into at most `parts` contiguous (start, end) runs of about equal work, a text
    weighing its characters plus one (every text has a fixed cost, the empty one too)."""
    parts = max(1, min(parts, len(texts)))
    done = list(accumulate(len(t) + 1 for t in texts))  # done[i]: the weight of texts[: i + 1]
    cuts = [0]
    for k in range(1, parts):
        # The first end whose runs so far weigh at least k/parts of all, each run keeping a text.
        end = bisect_left(done, done[-1] * k / parts) + 1
        cuts.append(min(max(end, cuts[-1] + 1), len(texts) - (parts - k)))
    cuts.append(len(texts))
    return list(pairwise(cuts))


class ProcessCorrector:
    """`correct` / `correct_batch` like a `Corrector`, run in `processes` worker processes.

    A call's texts are cut into contiguous runs of about equal length, one per idle ready process
    (at most `max_processes` of them), and the results come back in order. Calls from several
    threads run at once on different processes: a call waits only while every ready process is
    busy with another call. A process that dies is replaced at once, in the background (several
    at once in parallel), and the texts it held are corrected again on the processes that are
    ready (`WorkerCrashedError` when none is). `close()` (or `with`) stops the processes; without
    it they are stopped when this interpreter exits.
    """

    def __init__(self, spec: CorrectorSpec, processes: int = 2, start_timeout: float | None = START_TIMEOUT_S) -> None:
        if processes < 1:
            raise ValueError(f"processes must be >= 1, got {processes}")
        self.spec = spec
        self._context = multiprocessing.get_context("spawn")  # fork would copy torch's and ORT's threads
        self._pool = threading.Condition()  # guards _workers and _busy; notified when a call ends
        self._busy: set[_Worker] = set()  # the processes a call is using
        self._start_timeout = start_timeout
        self._workers = [_Worker(self._context, spec, k) for k in range(processes)]  # load in parallel
        # At interpreter exit, before multiprocessing terminates its daemon children (which ignore
        # SIGTERM, see _serve) and waits for them: end them through their pipes, even when the
        # caller never closed this corrector.
        self._finalizer = multiprocessing.util.Finalize(self, _stop_all, args=(self._workers,), exitpriority=10)
        try:
            infos = [w.ready(start_timeout) for w in self._workers]
        except BaseException:
            self.close()
            raise
        self.name: str = infos[0]["name"]
        self.precision: str = infos[0]["precision"]
        self.runtime: str = infos[0]["runtime"]
        self.threshold: float = infos[0]["threshold"]

    @property
    def processes(self) -> int:
        return len(self._workers)

    def correct(self, text: str, threshold: float | None = None) -> Result:
        return self.correct_batch([text], threshold=threshold)[0]

    def correct_batch(self, texts: Iterable[str], batch_size: int | None = None,
                      threshold: float | None = None, max_processes: int | None = None) -> list[Result]:
        """Like `Corrector.correct_batch` (`batch_size` is each process's own, from its config),
        on at most `max_processes` processes (None: every idle one).

        A process that dies during the call is replaced (started in the background) and its
        share is corrected once more on the processes that are ready; when none is, or the retry
        fails the same way, `WorkerCrashedError` says to come back shortly."""
        texts = text_list(texts)
        if not texts:
            return []
        results, failed = self._run(texts, threshold, max_processes)
        if failed:
            log.warning("a correction process died during a call; correcting its %d texts again",
                        sum(end - start for start, end in failed))
            for start, end in failed:
                again, still = self._run(texts[start:end], threshold, max_processes)
                if still:
                    raise WorkerCrashedError("correction processes died twice during one call; "
                                             "they are being restarted")
                for k, result in enumerate(again):
                    results[start + k] = result
        return results

    def _run(self, texts: list[str], threshold: float | None,
             max_processes: int | None) -> tuple[list, list[tuple[int, int]]]:
        """(results, failed runs): `texts` shared among the idle ready processes taken for this
        call; a run whose process died is in `failed` (its results None). Any other error of a
        process is raised once every busy process has answered."""
        workers = self._acquire(min(len(texts), max_processes or len(self._workers)))
        results: list = [None] * len(texts)
        failed: list[tuple[int, int]] = []
        busy = []
        error: BaseException | None = None
        try:
            for worker, run in zip(workers, shares(texts, len(workers)), strict=False):
                try:
                    worker.send(texts[run[0]:run[1]], threshold)
                except (OSError, ValueError):  # its pipe broke: it died since the check
                    failed.append(run)
                    continue
                busy.append((worker, run))
        finally:
            # Every process that got texts answers, even when another one failed: a pipe with
            # an unread answer would hand it to the next call.
            for worker, (start, end) in busy:
                try:
                    results[start:end] = worker.receive()
                except WorkerCrashedError:
                    failed.append((start, end))
                except BaseException as exc:  # noqa: BLE001 - the first error is raised below
                    error = error or exc
            self._release(workers)
        if error is not None:
            raise error
        return results, failed

    async def correct_batch_async(self, texts: Iterable[str], threshold: float | None = None) -> list[Result]:
        """`correct_batch(texts, threshold=threshold, max_processes=1)` for a caller on an asyncio
        loop: the texts go to one idle process and its answer is awaited on the loop (the pipe
        watched by it), with no thread in between. Where no process is idle, or the one taken dies,
        the call goes the blocking way on a thread (which waits, corrects again, or raises
        WorkerCrashedError).

        Why: the service's lanes handed every call to a thread and back (~0.5 ms of a ~17 ms call,
        and the serving process's CPU): 8-client load test, 6 runs alternated with the thread,
        p50 17.9-20.0 ms (mean 18.9) against 19.3-20.2 (19.7), 383-433 against 385-404 req/s."""
        texts = text_list(texts)
        if not texts:
            return []
        loop = asyncio.get_running_loop()
        if os.name == "nt":  # a pipe there is no descriptor a loop can watch
            return await loop.run_in_executor(None, self._blocking_call(texts, threshold))
        with self._pool:
            if not self._finalizer.still_active():
                raise RuntimeError("this ProcessCorrector is closed")
            taken = self._take_ready(1)
        if not taken:
            return await loop.run_in_executor(None, self._blocking_call(texts, threshold))
        worker, results = taken[0], None
        try:
            worker.send(texts, threshold)
        except (OSError, ValueError):  # its pipe broke: it died since it was taken
            self._release(taken)
        except BaseException:  # nothing was sent
            self._release(taken)
            raise
        else:
            try:
                await _readable(loop, worker.conn)
            except BaseException:  # cancelled while it corrects: its answer must be read before the pipe is used again
                threading.Thread(target=self._drain, args=(worker,), daemon=True).start()
                raise
            try:
                results = worker.receive()  # the process's own error is raised here, as by correct_batch
            except WorkerCrashedError:
                pass
            finally:
                self._release(taken)
        if results is None:
            log.warning("a correction process died during a call; correcting its %d texts again", len(texts))
            return await loop.run_in_executor(None, self._blocking_call(texts, threshold))
        return results

    def _blocking_call(self, texts: list[str], threshold: float | None):
        return lambda: self.correct_batch(texts, threshold=threshold, max_processes=1)

    def _drain(self, worker: _Worker) -> None:
        try:
            worker.receive()
        except BaseException:  # noqa: BLE001 - an answer nobody waits for any more
            pass
        self._release([worker])

    def _acquire(self, wanted: int) -> list[_Worker]:
        """Up to `wanted` idle ready processes, marked busy; waits while every ready one is busy.
        Raises WorkerCrashedError when none is ready and none is busy (all are starting)."""
        with self._pool:
            while True:
                if not self._finalizer.still_active():
                    raise RuntimeError("this ProcessCorrector is closed")
                taken = self._take_ready(wanted)
                if taken:
                    return taken
                if not self._busy:
                    raise WorkerCrashedError("no correction process is ready (restarting); try again shortly")
                # Woken when a call ends; polled meanwhile for a replacement that finished loading.
                self._pool.wait(timeout=0.05)

    def _take_ready(self, wanted: int) -> list[_Worker]:
        """Up to `wanted` (at least one) of the idle ready processes, marked busy; none when every
        ready one is busy. Dead idle ones are replaced first. The caller holds `_pool`."""
        self._replace_dead()
        ready = []
        for k, worker in enumerate(self._workers):
            if worker in self._busy:
                continue
            try:
                if worker.poll_ready():
                    ready.append(worker)
            except BaseException as exc:  # noqa: BLE001 - a replacement that failed to start
                log.error("correction process %s failed to start: %s", worker.process.name, exc)
                self._restart(k)
        taken = ready[:max(1, wanted)]
        self._busy.update(taken)
        return taken

    def _release(self, workers: list[_Worker]) -> None:
        with self._pool:
            self._busy.difference_update(workers)
            self._replace_dead()
            self._pool.notify_all()

    def _replace_dead(self) -> None:
        """Start a new process for every dead one that no call is using, all at once, without
        waiting for them: the live ones serve meanwhile (`ready_processes` counts them). The
        caller holds `_pool`."""
        for k, worker in enumerate(self._workers):
            if worker not in self._busy and not worker.alive:
                log.warning("correction process %s is gone (exit code %s); starting a new one",
                            worker.process.name, worker.process.exitcode)
                self._restart(k)

    def _restart(self, k: int) -> None:
        """Stop process `k` and start its replacement (not waited for). The caller holds `_pool`."""
        self._workers[k].stop()
        self._workers[k] = _Worker(self._context, self.spec, k)

    def wait_ready(self, timeout: float | None = None) -> None:
        """Block until every process is loaded, e.g. the replacements of dead ones."""
        with self._pool:
            self._replace_dead()
            for worker in self._workers:
                if worker.info is None:
                    worker.ready(timeout)

    @property
    def ready_processes(self) -> int:
        """Processes alive and loaded now (less than `processes` while some restart). Notices a
        replacement that has finished loading even between calls."""
        if self._pool.acquire(blocking=False):
            try:
                for worker in self._workers:
                    if worker in self._busy:
                        continue
                    try:
                        worker.poll_ready()
                    except BaseException:  # noqa: BLE001 - died while starting: the next call replaces it
                        pass
            finally:
                self._pool.release()
        return sum(1 for w in list(self._workers) if w.info is not None and w.process.is_alive())

    def close(self) -> None:
        with self._pool:
            while self._busy:  # not while a call is using the pipes
                self._pool.wait()
            self._finalizer()  # runs _stop_all once; later calls do nothing

    def __enter__(self) -> ProcessCorrector:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
