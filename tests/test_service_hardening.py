"""A real uvicorn server on 127.0.0.1 under the abuse of issue #46: a big request beside short
ones, clients that go away, a handled 500 on a keep-alive connection, correction processes
killed with a request in flight.

The corrector is a stand-in that costs time per character like the real one (service_fakes.py)
or, for the crash tests, real correction processes (corrector/processes.py) that hold it.
"""

from __future__ import annotations

import http.client
import logging
import os
import signal
import socket
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest
from service_fakes import CostlyCorrector, SlowSpec
from test_service_server import _metric, service_thread

from corrector.runtime.processes import ProcessCorrector, WorkerCrashedError
from service.app import create_app
from service.settings import Settings

BIG = {"texts": ["因该" * 5000] * 16}  # 160,000 characters: 16 s of the stand-in's time
SHORT = {"text": "少先队员因该为老人让坐。"}


def _settings(**kw) -> Settings:
    kw.setdefault("warmup", False)
    kw.setdefault("max_request_chars", 1_000_000)
    return Settings(**kw)


def _send_big_and_abandon(url: str, after_s: float) -> None:
    """POST BIG on a raw socket and close it after `after_s`, without reading the answer."""
    host, port = url.removeprefix("http://").split(":")
    body = httpx.Request("POST", "/correct", json=BIG).read()
    with socket.create_connection((host, int(port))) as sock:
        sock.sendall(f"POST /correct HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n"
                     f"Content-Length: {len(body)}\r\n\r\n".encode() + body)
        time.sleep(after_s)


# --- 1. fair scheduling ----------------------------------------------------------------------


# The two fairness tests run the big request at 0.04 ms a character (6.4 s): long enough to be
# running through all their short requests, half the suite time of the stand-in's 0.1 ms.
BESIDE_S_PER_CHAR = 0.00004


def test_short_request_beside_a_big_one_answers_within_half_a_second():
    fake = CostlyCorrector(s_per_char=BESIDE_S_PER_CHAR)
    app = create_app(_settings(), corrector=fake)
    with service_thread(app) as url, ThreadPoolExecutor(1) as pool:
        big = pool.submit(httpx.post, f"{url}/correct", json=BIG, timeout=120)
        time.sleep(0.5)  # the big request is on the model now
        latencies = []
        with httpx.Client(base_url=url, timeout=30) as client:
            for _ in range(5):
                start = time.perf_counter()
                r = client.post("/correct", json=SHORT)
                latencies.append(time.perf_counter() - start)
                assert r.status_code == 200
        assert not big.done(), "the big request should still be running"
        assert max(latencies) <= 0.5, latencies
        answer = big.result(timeout=120)
    assert answer.status_code == 200
    assert [item["target"] for item in answer.json()] == ["应该" * 5000] * 16


def test_eight_clients_beside_a_big_one_p99_under_a_second():
    fake = CostlyCorrector(s_per_char=BESIDE_S_PER_CHAR)
    app = create_app(_settings(), corrector=fake)
    latencies: list[float] = []
    with service_thread(app) as url, ThreadPoolExecutor(9) as pool:
        big = pool.submit(httpx.post, f"{url}/correct", json=BIG, timeout=120)
        time.sleep(0.3)

        def client() -> None:
            with httpx.Client(base_url=url, timeout=30) as c:
                stop = time.monotonic() + 3
                while time.monotonic() < stop:
                    start = time.perf_counter()
                    assert c.post("/correct", json=SHORT).status_code == 200
                    latencies.append(time.perf_counter() - start)

        for f in [pool.submit(client) for _ in range(8)]:
            f.result()
        assert not big.done()
        big.result(timeout=120)
    latencies.sort()
    p99 = latencies[min(len(latencies) - 1, int(len(latencies) * 0.99))]
    assert len(latencies) > 40 and p99 <= 1.0, (len(latencies), p99)


def test_work_of_a_client_that_went_away_is_dropped():
    fake = CostlyCorrector(s_per_char=0.0001)
    app = create_app(_settings(), corrector=fake)
    with service_thread(app) as url:
        # Four big requests abandoned after 0.3 s each: 64 s of work if it were all run.
        threads = [threading.Thread(target=_send_big_and_abandon, args=(url, 0.3)) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        time.sleep(0.3)  # the piece in flight when they left finishes
        start = time.perf_counter()
        r = httpx.post(f"{url}/correct", json=SHORT, timeout=30)
        waited = time.perf_counter() - start
        metrics = httpx.get(f"{url}/metrics").text
    assert r.status_code == 200 and waited <= 0.5, waited
    assert fake.chars < 4 * 160_000 / 4, fake.chars  # far less than the abandoned work
    assert _metric(metrics, 'csc_http_requests_total{method="POST",path="/correct",status="client_closed"}') == 4


def test_request_over_the_cost_budget_is_413():
    app = create_app(_settings(max_request_chars=1000), corrector=CostlyCorrector(0))
    with service_thread(app) as url:
        r = httpx.post(f"{url}/correct", json={"texts": ["好" * 600, "好" * 600]})
        ok = httpx.post(f"{url}/correct", json={"texts": ["好" * 500, "好" * 500]})
    assert r.status_code == 413
    error = r.json()["errors"][0]
    assert error["type"] == "request_too_costly" and "1200 characters" in error["msg"] and "1000" in error["msg"]
    assert ok.status_code == 200


# --- 2. metrics: a client that went away is not a 500 ----------------------------------------


def test_truncated_bodies_count_as_client_closed_not_500():
    app = create_app(_settings(), corrector=CostlyCorrector(0))
    with service_thread(app) as url:
        host, port = url.removeprefix("http://").split(":")
        for _ in range(5):
            with socket.create_connection((host, int(port))) as sock:
                sock.sendall(b"POST /correct HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                             b"Content-Length: 100\r\n\r\n{\"text\": ")
                time.sleep(0.05)
        time.sleep(0.3)
        metrics = httpx.get(f"{url}/metrics").text
    assert 'status="500"' not in metrics
    assert _metric(metrics, 'csc_http_requests_total{method="POST",path="/correct",status="client_closed"}') == 5


# --- 3. a handled 500 leaves the connection usable, logged once ------------------------------


def test_a_500_keeps_the_connection_alive_and_logs_once(caplog):
    app = create_app(_settings(), corrector=CostlyCorrector(0, fail_on="炸"))
    with service_thread(app) as url, caplog.at_level(logging.ERROR):
        host, port = url.removeprefix("http://").split(":")
        conn = http.client.HTTPConnection(host, int(port), timeout=10)
        headers = {"Content-Type": "application/json"}
        conn.request("POST", "/correct", body='{"text": "炸"}'.encode(), headers=headers)
        r = conn.getresponse()
        assert r.status == 500 and b"internal_error" in r.read()
        sock = conn.sock
        for _ in range(200):
            conn.request("POST", "/correct", body='{"text": "因该"}'.encode(), headers=headers)
            r = conn.getresponse()
            assert r.status == 200 and "应该" in r.read().decode()
        assert conn.sock is sock  # the same connection throughout: never closed and reopened
        conn.close()
    tracebacks = [rec for rec in caplog.records if rec.exc_info and "炸" in str(rec.exc_info[1])]
    assert len(tracebacks) == 1, [rec.getMessage() for rec in caplog.records]


# --- 4. a correction process killed with a request in flight ---------------------------------


@pytest.fixture
def slow_processes():
    corrector = ProcessCorrector(SlowSpec(delay_s=0.6, build_s=3.0), processes=2)
    try:
        yield corrector
    finally:
        corrector.close()


def _pids(corrector: ProcessCorrector) -> list[int]:
    return [w.process.pid for w in corrector._workers]


def test_worker_killed_in_flight_is_retried_and_health_says_degraded(slow_processes):
    app = create_app(_settings(), corrector=slow_processes)
    with service_thread(app) as url, ThreadPoolExecutor(1) as pool:
        assert httpx.get(f"{url}/health").json()["status"] == "ok"
        texts = [f"{i}因该" for i in range(8)]
        pending = pool.submit(httpx.post, f"{url}/correct", json={"texts": texts}, timeout=60)
        time.sleep(0.3)  # both processes are inside their 0.6 s call
        os.kill(_pids(slow_processes)[0], signal.SIGKILL)
        r = pending.result(timeout=60)
        assert r.status_code == 200
        assert [item["target"] for item in r.json()] == [f"{i}应该" for i in range(8)]
        health = httpx.get(f"{url}/health").json()
        assert health["status"] == "degraded" and health["ready_processes"] == 1, health
        deadline = time.monotonic() + 120
        while httpx.get(f"{url}/health").json()["status"] != "ok":  # restarted in the background
            assert time.monotonic() < deadline, "the dead process was not restarted"
            time.sleep(0.2)
        assert httpx.get(f"{url}/health").json()["ready_processes"] == 2


def test_all_workers_killed_in_flight_answers_503_then_recovers(slow_processes):
    app = create_app(_settings(), corrector=slow_processes)
    with service_thread(app) as url, ThreadPoolExecutor(1) as pool:
        pending = pool.submit(httpx.post, f"{url}/correct", json={"texts": ["因该", "坐"]}, timeout=60)
        time.sleep(0.3)
        for pid in _pids(slow_processes):
            os.kill(pid, signal.SIGKILL)
        r = pending.result(timeout=60)
        assert r.status_code == 503 and r.headers["retry-after"] == "1"
        assert r.json()["errors"][0]["type"] == "worker_restarting"
        # Both replacements were started at once, before either was ready.
        workers = slow_processes._workers
        assert all(w.process.is_alive() for w in workers) and sum(w.info is None for w in workers) == 2
        deadline = time.monotonic() + 120
        while (r := httpx.post(f"{url}/correct", json=SHORT, timeout=60)).status_code != 200:
            assert r.status_code == 503 and time.monotonic() < deadline
            time.sleep(0.2)


def test_process_corrector_raises_worker_crashed_when_nothing_is_ready(slow_processes):
    for pid in _pids(slow_processes):
        os.kill(pid, signal.SIGKILL)
    time.sleep(0.2)
    with pytest.raises(WorkerCrashedError):
        slow_processes.correct_batch(["因该"])
    assert slow_processes.ready_processes == 0


# --- 9. the smaller ones ----------------------------------------------------------------------


@pytest.fixture
def client():
    from fastapi.testclient import TestClient

    with TestClient(create_app(_settings(), corrector=CostlyCorrector(0)), raise_server_exceptions=False) as c:
        yield c


def test_head_of_the_index_page_is_not_405(client):
    r = client.head("/")
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/html")


def test_utf16_body_is_400(client):
    for encoding in ("utf-16", "utf-16-le", "utf-32"):
        r = client.post("/correct", content='{"text": "因该"}'.encode(encoding),
                        headers={"content-type": "application/json"})
        assert r.status_code == 400 and r.json()["errors"][0]["type"] == "invalid_body", encoding
        assert "not UTF-8" in r.json()["detail"]


@pytest.mark.parametrize("raw,words", [
    ('{"text": "a", "threshold": ' + "1" * 5000 + "}", "number in the JSON body is too long"),
    ('{"text": "a", "x": ' + "[" * 100_000 + "]" * 100_000 + "}", "nested too deeply"),
])
def test_huge_number_or_deep_nesting_gets_an_accurate_message(client, raw, words):
    r = client.post("/correct", content=raw, headers={"content-type": "application/json"})
    assert r.status_code == 400 and words in r.json()["detail"], r.json()
    assert "UTF-8" not in r.json()["detail"]


def test_docs_page_needs_no_internet(client):
    page = client.get("/docs")
    assert page.status_code == 200 and "/docs-assets/swagger-ui-bundle.js" in page.text
    assert "cdn" not in page.text.lower()
    for asset in ("swagger-ui-bundle.js", "swagger-ui.css"):
        assert client.get(f"/docs-assets/{asset}").status_code == 200


def test_health_names_the_model_without_its_path(tmp_path):
    from fastapi.testclient import TestClient

    fake = CostlyCorrector(0)
    fake.name = str(tmp_path / "my-model")
    (tmp_path / "my-model").mkdir()
    with TestClient(create_app(_settings(), corrector=fake)) as c:
        body = c.get("/health").json()
    assert body["model"] == "my-model" and str(tmp_path) not in str(body)


def test_a_partial_body_times_out_with_408():
    app = create_app(_settings(body_timeout_s=0.5), corrector=CostlyCorrector(0))
    with service_thread(app) as url:
        host, port = url.removeprefix("http://").split(":")
        with socket.create_connection((host, int(port)), timeout=10) as sock:
            sock.sendall(b"POST /correct HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                         b"Content-Length: 100\r\n\r\n{\"text\": ")
            start = time.monotonic()
            answer = sock.recv(4096)
            waited = time.monotonic() - start
        assert answer.startswith(b"HTTP/1.1 408") and b"body_timeout" in answer
        assert 0.4 <= waited < 5


def test_pieces_cover_the_text_and_join_back():
    from service.pieces import join_results, split_into_pieces

    text = "少先队员因该为老人让坐。" * 30 + "没有标点的长句子" * 40 + "，好" * 50
    pieces = split_into_pieces(text, 64)
    assert "".join(p for _, p in pieces) == text and all(len(p) <= 64 for _, p in pieces)
    assert all(text[offset:offset + len(p)] == p for offset, p in pieces)
    assert pieces[0][1].endswith("。")  # cut after a sentence end where there is one
    fake = CostlyCorrector(0)
    results = [fake.correct_one(p) for _, p in pieces]
    joined = join_results([text], [(0, o, p) for o, p in pieces], results)[0]
    assert joined == fake.correct_one(text)


def test_service_log_has_no_loading_bars_and_shutdown_no_leak_warnings(tiny_model_dir):
    import re
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent
    proc = subprocess.Popen(
        [sys.executable, "-m", "service", "--host", "127.0.0.1", "--port", "0", "--model", str(tiny_model_dir),
         "--processes", "2"],
        cwd=root, env={**os.environ, "PYTHONUNBUFFERED": "1"}, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        text=True,
    )
    lines: list[str] = []
    try:
        deadline = time.monotonic() + 300
        url = None
        while url is None:
            line = proc.stdout.readline()
            assert line and time.monotonic() < deadline, "service did not start:\n" + "".join(lines[-30:])
            lines.append(line)
            if match := re.search(r"Uvicorn running on (http://127\.0\.0\.1:\d+)", line):
                url = match.group(1)
        assert httpx.post(f"{url}/correct", json=SHORT, timeout=60).status_code == 200
        proc.send_signal(signal.SIGTERM)
        rest, _ = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate(timeout=10)
    log = "".join(lines) + rest
    assert "Loading weights" not in log and "leaked semaphore" not in log and "Traceback" not in log, log[-3000:]
    assert "Application shutdown complete" in log


def test_a_turn_caps_one_request_per_call_not_the_call():
    import asyncio

    from service.batching import Batcher

    fake = CostlyCorrector(0)

    async def scenario() -> None:
        batcher = Batcher(fake, max_batch_size=32, turn_chars=512, piece_chars=256, max_wait_ms=0)
        await batcher.start()
        try:
            big = batcher.correct(["因该。" * 700] * 2)  # 4,200 characters in pieces of <= 256
            shorts = [batcher.correct([f"{i}号因该坐好，今天天气很好，我们去公园散步。"]) for i in range(20)]
            results = await asyncio.gather(big, *shorts)
        finally:
            await batcher.stop()
        assert [r.target for r in results[0]] == ["应该。" * 700] * 2

    asyncio.run(scenario())
    first = fake.calls[0][0]
    big_chars = sum(len(t) for t in first if t.startswith("因该。"))
    assert 0 < big_chars <= 512  # the big request's turn
    assert sum(1 for t in first if "号" in t) == 20  # every short one in the same call
