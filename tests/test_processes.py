"""ProcessCorrector: the corrector in worker processes gives what one Corrector gives, survives a
process's death and reports errors without losing the pool."""

from __future__ import annotations

import os
import signal

import pytest

from corrector.runtime.processes import CorrectorSpec, ProcessCorrector, shares

TEXTS = [
    "少先队员因该为老人让坐。",
    "我在2024年用iPhone打电话给Tom，他说因该没问题。",
    "",
    "今天天气很好，我们一起去公园散步。",
    "😀",
    "他的作业做得很认真。北京是中国的首都。张三和李四在上海工作。",
    "下个星期我跟我朋友打算去法国玩儿。",
]


def test_shares_cut_contiguous_runs_of_about_equal_length():
    texts = ["a" * n for n in (10, 10, 10, 10, 1, 1, 1, 37)]
    runs = shares(texts, 2)
    assert runs == [(0, 4), (4, 8)]  # 44 and 44 (a character each, one more a text)
    assert shares(texts, 1) == [(0, 8)]
    assert shares(["x"], 4) == [(0, 1)]  # never an empty run
    for parts in range(1, 10):
        runs = shares(texts, parts)
        assert len(runs) == min(parts, len(texts))
        assert runs[0][0] == 0 and runs[-1][1] == len(texts)
        assert all(start < end for start, end in runs)
        assert all(a[1] == b[0] for a, b in zip(runs, runs[1:], strict=False))
    assert shares(["", "", ""], 2) == [(0, 2), (2, 3)]  # empty texts still spread
    assert shares(["一二三"] * 8, 2) == [(0, 4), (4, 8)]


@pytest.fixture(scope="module")
def pool(trained_model_dir):
    with ProcessCorrector(CorrectorSpec(str(trained_model_dir)), processes=2) as corrector:
        yield corrector


def test_processes_give_what_one_corrector_gives(pool, trained_model_dir):
    from corrector.pipeline import Corrector, CorrectorConfig

    reference = Corrector(str(trained_model_dir), config=CorrectorConfig(workers=1))
    assert pool.processes == 2
    assert pool.name == reference.bundle.name and pool.threshold == reference.threshold
    assert (pool.precision, pool.runtime) == (reference.precision, reference.runtime)
    for threshold in (None, 0.0):
        want = [r.to_dict() for r in reference.correct_batch(TEXTS, threshold=threshold)]
        assert [r.to_dict() for r in pool.correct_batch(TEXTS, threshold=threshold)] == want
    fixed = pool.correct("少先队员因该为老人让坐。")
    assert fixed.target == "少先队员应该为老人让座。"
    assert pool.correct_batch([]) == []
    assert [r.to_dict() for r in pool.correct_batch(t for t in TEXTS)] == [r.to_dict() for r in reference.correct_batch(TEXTS)]
    with pytest.raises(TypeError, match="one str"):  # not a batch of its characters
        pool.correct_batch("今天天气很好。")


def test_an_error_reaches_the_caller_and_the_pool_serves_on(pool):
    with pytest.raises(TypeError):
        pool.correct_batch(["今天天气很好。", None])  # type: ignore[list-item]
    assert pool.correct("少先队员因该为老人让坐。").target == "少先队员应该为老人让座。"


def test_a_process_that_dies_is_started_again(pool):
    victim = pool._workers[0].process
    os.kill(victim.pid, signal.SIGKILL)
    victim.join(timeout=30)
    results = pool.correct_batch(["少先队员因该为老人让坐。"] * 4)
    assert [r.target for r in results] == ["少先队员应该为老人让座。"] * 4
    assert pool._workers[0].process.pid != victim.pid
    pool.wait_ready(timeout=120)  # started in the background while the other one served
    assert pool.ready_processes == 2


def test_a_process_that_dies_during_a_call_has_its_share_corrected_again(pool, monkeypatch):
    victim = pool._workers[0]
    send = victim.send

    def send_then_die(texts, threshold):
        send(texts, threshold)
        os.kill(victim.process.pid, signal.SIGKILL)  # while it corrects its share

    monkeypatch.setattr(victim, "send", send_then_die)
    # Its share is corrected again by the other process while a new one starts.
    results = pool.correct_batch(["少先队员因该为老人让坐。"] * 6)
    assert [r.target for r in results] == ["少先队员应该为老人让座。"] * 6
    # The other process's answer was read too, so the next call gets its own results.
    texts = ["今天天气很好。", "少先队员因该为老人让坐。", "北京是中国的首都。"]
    assert [r.source for r in pool.correct_batch(texts)] == texts
    assert pool._workers[0] is not victim


def test_awaited_calls_give_the_blocking_calls_results_and_leave_the_pipes_blocking(pool):
    """`correct_batch_async` on uvloop (the service's loop) answers like `correct_batch`, raises a
    process's error, and leaves every pipe usable by the blocking calls after it (uvloop made a
    watched pipe non-blocking: a thread's next read failed as if the process had died)."""
    import asyncio

    import uvloop

    async def calls():
        first = await pool.correct_batch_async(TEXTS[:3])
        both = await asyncio.gather(pool.correct_batch_async(TEXTS[3:5]), pool.correct_batch_async(TEXTS[5:]))
        with pytest.raises(TypeError):
            await pool.correct_batch_async(["今天天气很好。", None])  # type: ignore[list-item]
        return first + both[0] + both[1]

    awaited = uvloop.run(calls())
    assert [r.to_dict() for r in awaited] == [r.to_dict() for r in pool.correct_batch(TEXTS)]
    assert all(os.get_blocking(w.conn.fileno()) for w in pool._workers)
    assert [r.source for r in pool.correct_batch(TEXTS, max_processes=1)] == TEXTS


def test_an_awaited_call_whose_process_dies_is_corrected_again(pool, monkeypatch):
    import uvloop

    pool.wait_ready(timeout=120)
    victim = next(w for w in pool._workers)
    send = victim.send

    def send_then_die(texts, threshold):
        send(texts, threshold)
        os.kill(victim.process.pid, signal.SIGKILL)  # while it corrects

    monkeypatch.setattr(victim, "send", send_then_die)
    results = uvloop.run(pool.correct_batch_async(["少先队员因该为老人让坐。"] * 3))
    assert [r.target for r in results] == ["少先队员应该为老人让座。"] * 3
    assert victim not in pool._workers  # replaced


def test_an_awaited_call_cancelled_mid_way_leaves_no_answer_behind(pool, monkeypatch):
    """A cancelled awaited call (the service shutting down) has its answer read and its process
    freed: the next calls get their own results."""
    import asyncio

    import uvloop

    from corrector.runtime import processes

    async def cancel_one():
        waiting = asyncio.Event()
        readable = processes._readable

        async def watched(loop, conn):
            waiting.set()
            await readable(loop, conn)

        monkeypatch.setattr(processes, "_readable", watched)
        task = asyncio.ensure_future(pool.correct_batch_async(["少先队员因该为老人让坐。"] * 4))
        await waiting.wait()  # sent, its answer awaited
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        monkeypatch.setattr(processes, "_readable", readable)

    uvloop.run(cancel_one())
    assert [r.source for r in pool.correct_batch(TEXTS)] == TEXTS
    assert [r.source for r in uvloop.run(pool.correct_batch_async(TEXTS[:2]))] == TEXTS[:2]


def test_a_closed_pool_refuses_calls_instead_of_starting_processes_again(trained_model_dir):
    pool = ProcessCorrector(CorrectorSpec(str(trained_model_dir)), processes=1)
    process = pool._workers[0].process
    pool.close()
    assert not process.is_alive()
    with pytest.raises(RuntimeError, match="closed"):
        pool.correct("少先队员因该为老人让坐。")
    pool.close()  # twice is fine


def test_a_model_that_cannot_load_stops_start_up_with_its_reason(tmp_path):
    with pytest.raises(Exception, match="missing"):
        ProcessCorrector(CorrectorSpec(str(tmp_path / "missing")), processes=1)


def test_interrupts_are_left_to_the_parent(pool):
    # Ctrl-C reaches the whole process group; the processes serve on until the parent closes them.
    for worker in pool._workers:
        os.kill(worker.process.pid, signal.SIGINT)
        os.kill(worker.process.pid, signal.SIGTERM)
    assert pool.correct_batch(["少先队员因该为老人让坐。"] * 2)[1].target == "少先队员应该为老人让座。"
    assert all(worker.process.is_alive() for worker in pool._workers)


def test_a_program_that_never_closes_the_pool_still_exits(trained_model_dir):
    # The processes ignore SIGTERM, so multiprocessing's exit handler must not be what ends them.
    import subprocess
    import sys

    program = ("from corrector.runtime.processes import CorrectorSpec, ProcessCorrector\n"
               "if __name__ == '__main__':\n"
               f"    pool = ProcessCorrector(CorrectorSpec({str(trained_model_dir)!r}), processes=2)\n"
               "    print(pool.correct('少先队员因该为老人让坐。').target)\n")
    done = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "少先队员应该为老人让座。"


def test_a_process_that_does_not_start_in_time_is_stopped(trained_model_dir):
    with pytest.raises(RuntimeError, match="did not start within"):
        ProcessCorrector(CorrectorSpec(str(trained_model_dir)), processes=1, start_timeout=0.01)


def test_calls_from_several_threads_run_at_once_on_different_processes():
    """The service's lanes (service/batching.py): a call on one process does not wait for a call
    on the other; a third call waits for the first process to come free."""
    import threading
    import time

    from service_fakes import SlowSpec

    with ProcessCorrector(SlowSpec(delay_s=0.5), processes=2) as pool:
        finished: list[float] = []
        start = time.perf_counter()

        def call(text: str) -> None:
            assert pool.correct_batch([text], max_processes=1)[0].target == text.replace("因该", "应该")
            finished.append(time.perf_counter() - start)

        threads = [threading.Thread(target=call, args=(f"{k}因该",)) for k in range(3)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=30)
        finished.sort()
        assert len(finished) == 3
        assert finished[1] < 0.9  # the first two ran side by side (0.5 s each)
        assert finished[2] >= 0.9  # the third waited for a free process
        # Without max_processes a call shares its texts among every idle process.
        start = time.perf_counter()
        assert len(pool.correct_batch(["因该"] * 4)) == 4
        assert time.perf_counter() - start < 0.9
