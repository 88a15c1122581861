"""Micro-batching: concurrent requests share forward passes, off the event loop.

One worker task pulls submissions from a queue. It takes the oldest one plus everything already
queued (up to `max_batch_size` texts): requests that arrived while the previous batch was running
join for free, so under load batches fill themselves. It waits for more - at most `max_wait_ms`
*since the oldest submission arrived* - only while the batch is smaller than the previous one, so
a lone client pays no waiting at all, while a group of clients answered together is gathered
again as its next requests trickle in.

Closed-loop clients can also split into two groups that take turns: one group's batch runs
while the other group's requests queue up; those then run at once, and the first group sends
its next requests during that run - two half-size batches per round, each client waiting for
both (measured with 8 clients: 4 requests per forward call, p50 80-100 ms, against 56 ms with 8).
So requests already queued before the previous batch ended count as a second group: the batch
then also waits for the clients just answered, at most `max_wait_ms` after that batch ended,
and the two groups merge into one.

The collected submissions are grouped by threshold (a corrector call has one threshold) and each
group is one `correct_batch` call on a single inference thread, so torch gets the cores and the
event loop stays free to accept and parse the next requests.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

from corrector.result import Result

from .metrics import Metrics

log = logging.getLogger(__name__)


@runtime_checkable
class SupportsCorrectBatch(Protocol):
    """What the service needs from a corrector (`corrector.Corrector` fits)."""

    def correct_batch(self, texts: list[str], threshold: float | None = None) -> list[Result]: ...


class QueueFullError(RuntimeError):
    """The service is saturated; the client should retry later (HTTP 503)."""


class ShuttingDownError(RuntimeError):
    """The service stopped before this submission was corrected (HTTP 503)."""


@dataclass(eq=False)
class _Submission:
    texts: list[str]
    threshold: float | None
    future: asyncio.Future[list[Result]]
    enqueued: float = field(default_factory=time.perf_counter)


class Batcher:
    """Runs corrections for the routes, micro-batched or one request at a time."""

    def __init__(
        self,
        corrector: SupportsCorrectBatch,
        *,
        enabled: bool = True,
        max_batch_size: int = 32,
        max_wait_ms: float = 10.0,
        max_queue_texts: int = 2048,
        metrics: Metrics | None = None,
    ) -> None:
        self.corrector = corrector
        self.enabled = enabled
        self.max_batch_size = max_batch_size
        self.max_wait = max_wait_ms / 1000.0
        self.max_queue_texts = max_queue_texts
        self.metrics = metrics or Metrics()
        # One thread: torch already uses every core inside a forward pass, and two concurrent
        # passes on 2 cores only fight for them.
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="csc-inference")
        self._queue: asyncio.Queue[_Submission] = asyncio.Queue()
        self._queued_texts = 0
        self._expected_texts = 1
        self._last_end = float("-inf")  # when the previous batch's corrector calls ended
        self._worker: asyncio.Task[None] | None = None
        self._closed = False

    async def start(self) -> None:
        if self.enabled and self._worker is None:
            self._worker = asyncio.create_task(self._run_forever(), name="csc-batcher")

    async def stop(self) -> None:
        self._closed = True
        if self._worker is not None:
            self._worker.cancel()
            try:
                await self._worker
            except asyncio.CancelledError:
                pass
            self._worker = None
        while not self._queue.empty():
            pending = self._queue.get_nowait()
            if not pending.future.done():
                pending.future.set_exception(ShuttingDownError("the service is shutting down"))
        self._executor.shutdown(wait=True, cancel_futures=True)

    async def correct(self, texts: Sequence[str], threshold: float | None = None) -> list[Result]:
        """Results for `texts`, in order."""
        texts = list(texts)
        if not texts:
            return []
        if self._closed:
            raise ShuttingDownError("the service is shutting down")
        if self._queued_texts + len(texts) > self.max_queue_texts and self._queued_texts > 0:
            self.metrics.rejected.labels("queue_full").inc()
            raise QueueFullError(f"{self._queued_texts} texts are already waiting; try again shortly")
        if not self.enabled:
            # Unbatched: every request is its own corrector call, serialized on the one thread.
            self._queued_texts += len(texts)
            self.metrics.queue_depth.set(self._queued_texts)
            try:
                return await self._call(texts, threshold, n_requests=1, enqueued=time.perf_counter())
            finally:
                self._queued_texts -= len(texts)
                self.metrics.queue_depth.set(self._queued_texts)
        submission = _Submission(texts, threshold, asyncio.get_running_loop().create_future())
        self._queued_texts += len(texts)
        self.metrics.queue_depth.set(self._queued_texts)
        await self._queue.put(submission)
        return await submission.future

    async def _call(
        self, texts: list[str], threshold: float | None, *, n_requests: int, enqueued: float
    ) -> list[Result]:
        # Timed inside the thread so that waiting for the executor (the unbatched queue) counts
        # as queue wait, not inference.
        def run() -> tuple[list[Result], float, float]:
            start = time.perf_counter()
            out = self.corrector.correct_batch(texts, threshold=threshold)
            return out, start, time.perf_counter()

        results, start, end = await asyncio.get_running_loop().run_in_executor(self._executor, run)
        self.metrics.queue_wait.observe(start - enqueued)
        self.metrics.observe_batch(len(texts), n_requests, end - start)
        if len(results) != len(texts):
            raise RuntimeError(f"corrector returned {len(results)} results for {len(texts)} texts")
        return list(results)

    async def _collect(self) -> list[_Submission]:
        """The next batch: the oldest submission, everything already queued, and - only when the
        previous batch suggests more company is coming - whatever joins before the deadline."""
        first = await self._queue.get()
        batch, n_texts = [first], len(first.texts)
        target = deadline = None
        while n_texts < self.max_batch_size:
            try:
                item = self._queue.get_nowait()  # already waiting: free to include
            except asyncio.QueueEmpty:
                if target is None:
                    target, deadline = self._company_expected(batch)
                remaining = deadline - time.perf_counter()
                if n_texts >= target or remaining <= 0:
                    break
                try:
                    item = await asyncio.wait_for(self._queue.get(), remaining)
                except TimeoutError:
                    break
            batch.append(item)
            n_texts += len(item.texts)
        self._expected_texts = max(1, n_texts)
        return batch

    def _company_expected(self, queued: list[_Submission]) -> tuple[int, float]:
        """(texts to wait for, until when), given what was already queued.

        Expect as many texts as the previous batch had: a lone client (previous batch of one) then
        never waits, while closed-loop clients that were answered together, and are now sending
        their next requests a few hundred microseconds apart, are gathered again. When some of
        the queued texts were there before the previous batch ended, they are a second group of
        clients (module docstring): wait for the clients just answered as well.
        """
        carried = sum(len(s.texts) for s in queued if s.enqueued < self._last_end)
        if carried:
            return min(self.max_batch_size, self._expected_texts + carried), self._last_end + self.max_wait
        return min(self.max_batch_size, self._expected_texts), queued[0].enqueued + self.max_wait

    async def _run_forever(self) -> None:
        while True:
            batch = await self._collect()
            n_texts = sum(len(s.texts) for s in batch)
            self._queued_texts -= n_texts
            self.metrics.queue_depth.set(self._queued_texts)
            # A client that went away (cancelled future) costs no model time.
            live = [s for s in batch if not s.future.done()]
            groups: dict[float | None, list[_Submission]] = {}
            for submission in live:
                groups.setdefault(submission.threshold, []).append(submission)
            try:
                for threshold, group in groups.items():
                    await self._run_group(threshold, group)
                self._last_end = time.perf_counter()
            except Exception as exc:  # noqa: BLE001 - a bug here must not kill the worker
                # Without this, one unexpected error would end the worker task and every later
                # request would wait forever.
                log.exception("micro-batch worker error")
                for s in live:
                    if not s.future.done():
                        s.future.set_exception(exc)

    async def _run_group(self, threshold: float | None, group: list[_Submission]) -> None:
        texts = [text for s in group for text in s.texts]
        enqueued = min(s.enqueued for s in group)
        try:
            results = await self._call(texts, threshold, n_requests=len(group), enqueued=enqueued)
        except asyncio.CancelledError:
            for s in group:
                if not s.future.done():
                    s.future.set_exception(ShuttingDownError("the service is shutting down"))
            raise
        except Exception as exc:  # noqa: BLE001 - isolate the failure, see below
            if len(group) == 1:
                if not group[0].future.done():
                    group[0].future.set_exception(exc)
                return
            # One text that breaks the corrector must not take the other requests of the same
            # micro-batch down with it: retry each submission on its own.
            log.warning("batch of %d requests failed (%s); retrying one by one", len(group), exc)
            for s in group:
                await self._run_group(threshold, [s])
            return
        offset = 0
        for s in group:
            part = results[offset : offset + len(s.texts)]
            offset += len(s.texts)
            if not s.future.done():
                s.future.set_result(part)
