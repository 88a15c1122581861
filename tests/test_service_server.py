"""A real uvicorn server on 127.0.0.1 (random free port) under concurrent clients.

1. `python -m service` in a subprocess with the tiny random model: the CLI, the lifespan load
   and the real Corrector behind micro-batching, checked against the server's own batch answer.
2. uvicorn in a thread with `FakeCorrector`: exact expected answers for 32 concurrent clients,
   mixed thresholds and batch requests, and proof that requests really shared corrector calls.

Traffic goes to loopback only; every loop is bounded in count and every wait in time.
"""

from __future__ import annotations

import os
import queue
import re
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest
import uvicorn
from test_service import FakeCorrector, expected, strip_elapsed

from service.app import create_app
from service.protocol import uvicorn_options
from service.settings import Settings

ROOT = Path(__file__).resolve().parent.parent
SENTENCES = [
    "少先队员因该为老人让坐。",
    "今天天气很好，我们一起去公园散步。",
    "他的作业做得很认真。",
    "北京是中国的首都。",
    "我在2024年用iPhone打电话给Tom，他说应该没问题。",
    "下个星期我跟我朋友打算去法国玩儿。",
    "张三和李四在上海工作。",
    "我听说你找到新工作，我很高兴。",
]
REQUEST_TIMEOUT_S = 30.0


def _metric(text: str, name: str) -> float:
    match = re.search(rf"^{re.escape(name)} ([0-9.e+-]+)$", text, re.MULTILINE)
    assert match, f"{name} missing from /metrics"
    return float(match.group(1))


def run_clients(base_url: str, jobs: list[dict], clients: int) -> list[httpx.Response]:
    """POST every job to /correct from `clients` threads; responses in job order."""

    def worker(indexes: list[int]) -> list[tuple[int, httpx.Response]]:
        with httpx.Client(base_url=base_url, timeout=REQUEST_TIMEOUT_S) as client:
            return [(i, client.post("/correct", json=jobs[i])) for i in indexes]

    shards = [list(range(k, len(jobs), clients)) for k in range(clients)]
    with ThreadPoolExecutor(clients) as pool:
        done = [pair for part in pool.map(worker, shards) for pair in part]
    return [response for _, response in sorted(done, key=lambda pair: pair[0])]


@contextmanager
def service_subprocess(*args: str, startup_timeout_s: float = 300.0):
    """`python -m service --port 0 ...`; yields its base URL, read from uvicorn's start-up line."""
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "service", "--host", "127.0.0.1", "--port", "0", *args],
        cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )
    lines: queue.Queue[str] = queue.Queue()
    log: list[str] = []
    # A reader thread keeps the pipe drained (a full pipe would block the server) and lets the
    # start-up wait have a deadline.
    threading.Thread(target=lambda: [lines.put(line) for line in proc.stdout], daemon=True).start()
    try:
        deadline = time.monotonic() + startup_timeout_s
        url = None
        while url is None:
            if time.monotonic() > deadline or proc.poll() is not None:
                pytest.fail("service did not start:\n" + "".join(log[-30:]))
            try:
                line = lines.get(timeout=0.5)
            except queue.Empty:
                continue
            log.append(line)
            if match := re.search(r"Uvicorn running on (http://127\.0\.0\.1:\d+)", line):
                url = match.group(1)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=5)


@contextmanager
def service_thread(app):
    """uvicorn serving `app` in a thread on a free port; yields the base URL."""
    # With the limits `python -m service` runs with (service/protocol.py), from the app's settings.
    options = uvicorn_options(app.state.settings)
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning", **options))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            pytest.fail("uvicorn did not start in a thread")
        time.sleep(0.02)
    port = server.servers[0].sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=15)


def test_cli_server_with_tiny_model_under_concurrent_clients(tiny_model_dir):
    pytest.importorskip("corrector.pipeline", reason="corrector.pipeline (the real Corrector) is not there yet")
    # threshold 0 makes the random model propose edits, so the comparison has something to compare.
    jobs = [{"text": SENTENCES[i % len(SENTENCES)][: 6 + i % 20], "threshold": 0.0} for i in range(40)]
    jobs += [{"texts": SENTENCES, "threshold": 0.0}] * 2
    with service_subprocess("--model", str(tiny_model_dir), "--threads", "1", "--max-wait-ms", "5") as url:
        health = httpx.get(f"{url}/health", timeout=REQUEST_TIMEOUT_S).json()
        assert health["ready"] is True and health["model"] == tiny_model_dir.name

        start = time.monotonic()
        responses = run_clients(url, jobs, clients=16)
        assert time.monotonic() - start < 180  # generous: the CPU may be shared with training
        assert [r.status_code for r in responses] == [200] * len(jobs)

        # Reference: the same server, every distinct text in one request.
        distinct = sorted({j["text"] for j in jobs if "text" in j} | set(SENTENCES))
        reference = httpx.post(
            f"{url}/correct", json={"texts": distinct, "threshold": 0.0}, timeout=REQUEST_TIMEOUT_S
        ).json()
        by_text = {item["source"]: strip_elapsed(item) for item in reference}

        for job, response in zip(jobs, responses, strict=True):
            got = response.json()
            items = got if "texts" in job else [got]
            sent = job.get("texts") or [job["text"]]
            assert [item["source"] for item in items] == sent  # order kept, nothing mixed up
            for item in items:
                want = by_text[item["source"]]
                assert item["target"] == want["target"]
                assert [(e["position"], e["target"]) for e in item["edits"]] == [
                    (e["position"], e["target"]) for e in want["edits"]
                ]
                for e, w in zip(item["edits"], want["edits"], strict=True):
                    assert e["confidence"] == pytest.approx(w["confidence"], abs=1e-4)

        metrics = httpx.get(f"{url}/metrics", timeout=REQUEST_TIMEOUT_S).text
        assert 'status="500"' not in metrics
        # Mean requests per corrector call above 1: concurrent clients shared forward passes.
        calls = _metric(metrics, "csc_batch_size_requests_count")
        assert _metric(metrics, "csc_batch_size_requests_sum") > calls


def test_threaded_server_32_clients_exact_results_and_shared_batches():
    fake = FakeCorrector(delay_s=0.005)
    app = create_app(Settings(warmup=False, max_wait_ms=5, max_batch_size=32), corrector=fake)
    thresholds = [None, 0.2, 0.9]
    jobs: list[dict] = []
    for i in range(256):
        threshold = thresholds[i % 3]
        extra = {"threshold": threshold} if threshold is not None else {}
        if i % 16 == 0:
            jobs.append({"texts": [f"{i}-{k}因该坐" for k in range(5)], **extra})
        else:
            jobs.append({"text": f"{i}号{SENTENCES[i % len(SENTENCES)]}", **extra})

    with service_thread(app) as url:
        start = time.monotonic()
        responses = run_clients(url, jobs, clients=32)
        elapsed = time.monotonic() - start
        metrics = httpx.get(f"{url}/metrics", timeout=REQUEST_TIMEOUT_S).text

    assert elapsed < 60
    assert [r.status_code for r in responses] == [200] * len(jobs)
    for job, response in zip(jobs, responses, strict=True):
        threshold = job.get("threshold")
        if "texts" in job:
            assert [strip_elapsed(x) for x in response.json()] == [expected(t, threshold) for t in job["texts"]]
        else:
            assert strip_elapsed(response.json()) == expected(job["text"], threshold)

    # Every corrector call used one threshold, the one each of its texts was sent with.
    sent_threshold = {t: j.get("threshold") for j in jobs for t in (j.get("texts") or [j["text"]])}
    for call_texts, threshold in fake.calls:
        assert {sent_threshold[t] for t in call_texts} == {threshold}
    assert len(fake.calls) < len(jobs) / 2  # shared forward passes, not one call per request
    assert 'status="500"' not in metrics
