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

Fairness: a text longer than `piece_chars` is cut at sentence ends into pieces (service/pieces.py),
and a batch takes pieces round-robin from every waiting submission, up to `max_batch_size` pieces
in all and `turn_chars` characters from any one submission (its turn; one piece at least). A big
request (64 texts x 10,000 characters: ~100 s of one core) therefore runs as a string of short
calls, and a short request that arrives meanwhile rides in the next one instead of waiting for
all of it, while many short requests still share one call as before. A submission whose client
has gone away (its future cancelled) is dropped before its next piece runs.

The collected pieces are grouped by threshold (a corrector call has one threshold) and each
group is one corrector call off the event loop, so that it stays free to accept and parse the
next requests: awaited on the loop itself for a corrector that runs in processes
(`ProcessCorrector.correct_batch_async`, no thread in between), else `correct_batch` on an
inference thread.

Lanes: with a corrector that runs in several processes (`ProcessCorrector.processes`, one per
core), one batch per process runs at once, each on one process, and a lane that comes free
collects the next batch while the others run - rather than every batch shared among all the
processes. Closed-loop clients then settle into one group per process and no process idles
while the answered clients send again; a short request beside a big one gets the next free lane.
A lane takes about its share of what is in flight (the last batch of each lane, as one lane
expects its previous batch), at least its share of what is waiting. Measured in
docs/service.md ("Lanes").
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
from collections import deque
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

from corrector.result import Result
from corrector.runtime.processes import WorkerCrashedError

from .metrics import Metrics
from .pieces import join_results, split_into_pieces

log = logging.getLogger(__name__)


@runtime_checkable
class SupportsCorrectBatch(Protocol):
    """What the service needs from a corrector (`corrector.Corrector` fits). One that also has
    `processes` > 1 (`ProcessCorrector`) gets a lane per process, and its `correct_batch` must
    take `max_processes`."""

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
    piece_chars: int
    enqueued: float = field(default_factory=time.perf_counter)

    def __post_init__(self) -> None:
        # (text index, offset in that text, piece): what the corrector gets, in order.
        self.pieces = [(t, offset, piece) for t, text in enumerate(self.texts)
                       for offset, piece in split_into_pieces(text, self.piece_chars)]
        self.results: list[Result | None] = [None] * len(self.pieces)
        self.next_piece = 0  # the first piece not yet handed to a batch
        self.unanswered = len(self.pieces)

    @property
    def waiting(self) -> int:
        """Pieces not yet handed to a batch."""
        return len(self.pieces) - self.next_piece

    def answer(self, index: int, result: Result) -> None:
        self.results[index] = result
        self.unanswered -= 1
        if self.unanswered == 0 and not self.future.done():
            self.future.set_result(join_results(self.texts, self.pieces, self.results))

    def fail(self, exc: BaseException) -> None:
        if not self.future.done():
            self.future.set_exception(exc)


# One piece of one submission, as it goes into a batch.
_Unit = tuple[_Submission, int]


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
        max_queue_chars: int | None = None,
        piece_chars: int = 256,
        turn_chars: int = 512,
        metrics: Metrics | None = None,
    ) -> None:
        self.corrector = corrector
        self.enabled = enabled
        self.max_batch_size = max_batch_size
        self.max_wait = max_wait_ms / 1000.0
        self.max_queue_texts = max_queue_texts
        self.max_queue_chars = max_queue_chars
        self.piece_chars = piece_chars
        self.turn_chars = turn_chars
        self.metrics = metrics or Metrics()
        # One lane per correction process; in-process, one: torch already uses every core inside a
        # forward pass, and two concurrent passes on 2 cores only fight for them.
        self.lanes = max(1, int(getattr(corrector, "processes", 1) or 1)) if enabled else 1
        self._executor = ThreadPoolExecutor(max_workers=self.lanes, thread_name_prefix="csc-inference")
        self._free_lanes: asyncio.Semaphore | None = None  # made in start(), on the serving loop
        self._running: set[asyncio.Task[None]] = set()  # the batches in flight, one per busy lane
        # A lane's batch runs on one process: the other lanes have theirs.
        self._call_options = {"max_processes": 1} if self.lanes > 1 else {}
        self._recent: deque[int] = deque([1], maxlen=self.lanes)  # the last batch sizes, one per lane
        self._queue: asyncio.Queue[_Submission] = asyncio.Queue()  # arrived, not yet seen by the worker
        self._active: deque[_Submission] = deque()  # seen, with pieces still to hand out
        self._queued_texts = 0
        self._queued_chars = 0
        self._last_end = float("-inf")  # when the previous batch's corrector calls ended
        self._worker: asyncio.Task[None] | None = None
        self._closed = False

    async def start(self) -> None:
        if self.enabled and self._worker is None:
            self._free_lanes = asyncio.Semaphore(self.lanes)
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
        for task in list(self._running):
            task.cancel()
        if self._running:
            await asyncio.gather(*self._running, return_exceptions=True)
        pending = list(self._active)
        while not self._queue.empty():
            pending.append(self._queue.get_nowait())
        for submission in pending:
            submission.fail(ShuttingDownError("the service is shutting down"))
        self._active.clear()
        self._executor.shutdown(wait=True, cancel_futures=True)

    def _check_room(self, texts: list[str]) -> None:
        chars = sum(len(t) for t in texts)
        full = None
        if self._queued_texts + len(texts) > self.max_queue_texts and self._queued_texts > 0:
            full = f"{self._queued_texts} texts are already waiting; try again shortly"
        elif (self.max_queue_chars is not None and self._queued_chars + chars > self.max_queue_chars
              and self._queued_chars > 0):
            full = f"{self._queued_chars} characters are already waiting; try again shortly"
        if full:
            self.metrics.rejected.labels("queue_full").inc()
            raise QueueFullError(full)

    def _account(self, texts: int, chars: int) -> None:
        self._queued_texts += texts
        self._queued_chars += chars
        self.metrics.queue_depth.set(self._queued_texts)

    async def correct(self, texts: Sequence[str], threshold: float | None = None) -> list[Result]:
        """Results for `texts`, in order. Cancelling the caller drops the texts' pieces that have
        not run yet."""
        texts = list(texts)
        if not texts:
            return []
        if self._closed:
            raise ShuttingDownError("the service is shutting down")
        self._check_room(texts)
        chars = sum(len(t) for t in texts)
        if not self.enabled:
            # Unbatched: every request is its own corrector call, serialized on the one thread.
            self._account(len(texts), chars)
            try:
                return await self._call(texts, threshold, n_requests=1, enqueued=time.perf_counter())
            finally:
                self._account(-len(texts), -chars)
        submission = _Submission(texts, threshold, asyncio.get_running_loop().create_future(), self.piece_chars)
        self._account(len(texts), chars)
        try:
            await self._queue.put(submission)
            return await submission.future
        finally:
            if not submission.future.done():
                submission.future.cancel()  # the caller went away: its pieces are dropped (_take)
            self._account(-len(texts), -chars)

    async def _call(
        self, texts: list[str], threshold: float | None, *, n_requests: int, enqueued: float
    ) -> list[Result]:
        # Timed inside the thread so that waiting for the executor (the unbatched queue) counts
        # as queue wait, not inference.
        def run() -> tuple[list[Result], float, float]:
            start = time.perf_counter()
            out = self.corrector.correct_batch(texts, threshold=threshold, **self._call_options)
            return out, start, time.perf_counter()

        if self.lanes > 1 and hasattr(self.corrector, "correct_batch_async"):
            # A lane's call awaits its process on the loop (ProcessCorrector), no thread between.
            start = time.perf_counter()
            results = await self.corrector.correct_batch_async(texts, threshold)
            end = time.perf_counter()
        else:
            results, start, end = await asyncio.get_running_loop().run_in_executor(self._executor, run)
        self.metrics.queue_wait.observe(max(0.0, start - enqueued))
        self.metrics.observe_batch(len(texts), n_requests, end - start)
        if len(results) != len(texts):
            raise RuntimeError(f"corrector returned {len(results)} results for {len(texts)} texts")
        return list(results)

    def _drain_arrivals(self) -> None:
        while True:
            try:
                self._active.append(self._queue.get_nowait())
            except asyncio.QueueEmpty:
                return

    def _waiting_pieces(self) -> int:
        return sum(s.waiting for s in self._active if not s.future.done())

    async def _collect(self) -> list[_Unit]:
        """The next batch: pieces of the waiting submissions and - only when the previous batch
        suggests more company is coming - of whatever joins before the deadline."""
        self._drain_arrivals()
        while not any(not s.future.done() for s in self._active):
            self._active.clear()
            self._active.append(await self._queue.get())
            self._drain_arrivals()
        target = deadline = None
        while (n_pieces := self._waiting_pieces()) < self.max_batch_size:
            if target is None:
                target, deadline = self._company_expected(list(self._active))
            remaining = deadline - time.perf_counter()
            if n_pieces >= target or remaining <= 0:
                break
            try:
                item = await asyncio.wait_for(self._queue.get(), remaining)
            except TimeoutError:
                break
            self._active.append(item)
            self._drain_arrivals()
        free = self.lanes - len(self._running)  # this lane among them
        limit = self.max_batch_size
        if self.lanes > 1:
            limit = min(limit, max(target or 1, math.ceil(self._waiting_pieces() / free)))
        batch = self._take(limit)
        self._recent.append(max(1, len(batch)))
        return batch

    def _take(self, limit: int | None = None) -> list[_Unit]:
        """Pieces round-robin from every live submission, oldest first, up to `max_batch_size`
        pieces in all and `turn_chars` characters from any one submission (one piece at least).
        Only a submission's share is capped, not the call's: 32 clients' sentences of ~30
        characters still go in one call (a cap on the call, 512, halved the batches and the
        throughput at 32 clients). Submissions whose client went away, and those with nothing
        left to hand out, leave the rotation."""
        limit = self.max_batch_size if limit is None else limit
        # A lane's call runs on one process, where one call used to be shared by all of them: a
        # turn per lane keeps the call a short request rides in as short as before.
        turn = max(1, self.turn_chars // self.lanes)
        batch: list[_Unit] = []
        turns: dict[_Submission, int] = {}  # characters each submission has in this batch
        progressed = True
        while progressed and len(batch) < limit:
            progressed = False
            for submission in [s for s in self._active if not s.future.done() and s.waiting]:
                if len(batch) >= limit:
                    break
                piece = submission.pieces[submission.next_piece][2]
                used = turns.get(submission, 0)
                if used and used + len(piece) > turn:
                    continue  # its turn in this call is over
                batch.append((submission, submission.next_piece))
                submission.next_piece += 1
                turns[submission] = used + len(piece)
                progressed = True
        self._active = deque(s for s in self._active if not s.future.done() and s.waiting)
        # The next batch starts with the submission after the first one served here, so that
        # several big requests share the batches too.
        if len(self._active) > 1 and batch and self._active[0] is batch[0][0]:
            self._active.rotate(-1)
        return batch

    def _company_expected(self, queued: list[_Submission]) -> tuple[int, float]:
        """(pieces to wait for, until when), given what was already queued.

        Expect as many pieces as the previous batch had (with lanes, a lane's share of the last
        batch of every lane): a lone client (previous batch of one) then never waits, while
        closed-loop clients that were answered together, and are now sending their next requests
        a few hundred microseconds apart, are gathered again. With one lane, when some of the
        queued pieces were there before the previous batch ended, they are a second group of
        clients (module docstring): wait for the clients just answered as well.
        """
        expected = math.ceil(sum(self._recent) / len(self._recent))
        carried = sum(s.waiting for s in queued if s.enqueued < self._last_end) if self.lanes == 1 else 0
        if carried:
            return min(self.max_batch_size, expected + carried), self._last_end + self.max_wait
        return min(self.max_batch_size, expected), queued[0].enqueued + self.max_wait

    async def _run_forever(self) -> None:
        assert self._free_lanes is not None
        while True:
            await self._free_lanes.acquire()
            try:
                batch = await self._collect()
            except BaseException:
                self._free_lanes.release()
                raise
            self._running.add(asyncio.create_task(self._run_batch(batch), name="csc-batch"))

    async def _run_batch(self, batch: list[_Unit]) -> None:
        assert self._free_lanes is not None
        groups: dict[float | None, list[_Unit]] = {}
        for unit in batch:
            groups.setdefault(unit[0].threshold, []).append(unit)
        try:
            for threshold, group in groups.items():
                await self._run_group(threshold, group)
            self._last_end = time.perf_counter()
        except Exception as exc:  # noqa: BLE001 - a bug here must not kill the worker
            # Without this, one unexpected error would fail silently and its requests would
            # wait forever.
            log.exception("micro-batch worker error")
            for submission, _ in batch:
                submission.fail(exc)
        finally:
            self._running.discard(asyncio.current_task())  # before the lane is free again
            self._free_lanes.release()

    async def _run_group(self, threshold: float | None, group: list[_Unit]) -> None:
        group = [(s, i) for s, i in group if not s.future.done()]  # e.g. failed in an earlier group
        if not group:
            return
        texts = [s.pieces[i][2] for s, i in group]
        submissions = list(dict.fromkeys(s for s, _ in group))
        enqueued = min(s.enqueued for s in submissions)
        try:
            results = await self._call(texts, threshold, n_requests=len(submissions), enqueued=enqueued)
        except asyncio.CancelledError:
            for s in submissions:
                s.fail(ShuttingDownError("the service is shutting down"))
            raise
        except Exception as exc:  # noqa: BLE001 - isolate the failure, see below
            if len(submissions) == 1 or isinstance(exc, WorkerCrashedError):
                # A crashed correction process was already retried once (corrector/processes.py):
                # trying each request again would only repeat it; they get 503s with Retry-After.
                for s in submissions:
                    s.fail(exc)
                return
            # One text that breaks the corrector must not take the other requests of the same
            # micro-batch down with it: retry each submission on its own.
            log.warning("batch of %d requests failed (%s); retrying one by one", len(submissions), exc)
            for s in submissions:
                await self._run_group(threshold, [unit for unit in group if unit[0] is s])
            return
        for (submission, index), result in zip(group, results, strict=True):
            submission.answer(index, result)
