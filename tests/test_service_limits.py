"""A real uvicorn server on 127.0.0.1, attacked with raw sockets (issue #69): bodies that cost
more to judge than to send, slow and idle clients, oversized heads, too many connections,
malformed HTTP and the error contract. Every wait is bounded; the limits are set small so
the tests take seconds.
"""

from __future__ import annotations

import json
import select
import socket
import threading
import time

import httpx
import pytest
from service_fakes import CostlyCorrector
from test_service import FakeCorrector, make_client
from test_service_server import service_thread

from service.app import create_app
from service.settings import Settings

HEAD_TIMEOUT_S = 0.6
BODY_TIMEOUT_S = 1.0


def _settings(**kw) -> Settings:
    kw.setdefault("warmup", False)
    kw.setdefault("head_timeout_s", HEAD_TIMEOUT_S)
    kw.setdefault("body_timeout_s", BODY_TIMEOUT_S)
    kw.setdefault("keep_alive_s", 1)
    return Settings(**kw)


def _server(corrector=None, **kw):
    return service_thread(create_app(_settings(**kw), corrector=corrector or FakeCorrector()))


def _connect(url: str, timeout: float = 10.0) -> socket.socket:
    host, port = url.removeprefix("http://").split(":")
    sock = socket.create_connection((host, int(port)), timeout=timeout)
    return sock


def _head(body: bytes, path: str = "/correct", extra: str = "") -> bytes:
    return (f"POST {path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n{extra}"
            f"Content-Length: {len(body)}\r\n\r\n").encode()


def _read_answer(sock: socket.socket) -> tuple[int, dict[str, str], bytes]:
    """One HTTP answer from `sock`: status, headers (lowercase names) and its body."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        assert chunk, f"connection closed without an answer: {data!r}"
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    headers = dict(line.lower().split(": ", 1) for line in lines[1:])
    length = int(headers.get("content-length", "0"))
    while len(body) < length:
        chunk = sock.recv(65536)
        assert chunk, "connection closed inside the answer"
        body += chunk
    return int(lines[0].split()[1]), headers, body[:length]


def _closed(sock: socket.socket) -> bool:
    """Whether the server closed `sock` (reads its end of stream; anything else sent fails)."""
    try:
        return sock.recv(1) == b""
    except ConnectionResetError:
        return True


def _error_type(body: bytes) -> str:
    answer = json.loads(body)
    assert answer["detail"] and answer["errors"], answer
    return answer["errors"][0]["type"]


# --- 1. bodies that cost more to judge than to send -----------------------------------------


def _time_beside_health(url: str, body: bytes) -> tuple[int, bytes, float, float]:
    """POST `body` on a raw socket while another client polls /health: the answer's status and
    body, its time, and the slowest /health meanwhile."""
    health: list[float] = []
    done = threading.Event()

    def poll() -> None:
        with httpx.Client(base_url=url, timeout=30) as client:
            client.get("/health")
            while not done.is_set():
                start = time.perf_counter()
                assert client.get("/health").status_code == 200
                health.append(time.perf_counter() - start)

    poller = threading.Thread(target=poll)
    poller.start()
    time.sleep(0.2)
    with _connect(url) as sock:
        sock.sendall(_head(body) + body)
        start = time.perf_counter()
        status, _, answer = _read_answer(sock)
        took = time.perf_counter() - start
    time.sleep(0.1)
    done.set()
    poller.join(timeout=30)
    return status, answer, took, max(health)


@pytest.mark.parametrize("body,kind", [
    (b'{"texts":[' + b"0," * 999_999 + b"0]}", "too_many_texts"),  # 2 MB: was 16.4 s, a 93 MB answer
    (b"{" + b",".join(b'"k%d":0' % i for i in range(358_000)) + b"}", "extra_forbidden"),  # was 6.5 s, 32 MB
    (b'{"text":[' + b"0," * 999_999 + b"0]}", "too_many_values"),
    (b"[" + b"0," * 999_999 + b"0]", "model_attributes_type"),
    (b'{"text":' + b"[" * 1_000_000 + b"]" * 1_000_000 + b"}", "invalid_body"),
], ids=["million-items", "358k-unknown-keys", "million-inside-text", "top-level-array", "deep"])
def test_hostile_bodies_are_judged_at_once_in_a_small_answer_beside_health(body, kind):
    with _server() as url:
        status, answer, took, slowest_health = _time_beside_health(url, body)
    assert status in (400, 422) and _error_type(answer) == kind
    assert len(answer) <= 10_000, len(answer)
    # Generous bounds for a shared 2-core machine; measured 20-60 ms and <= 10 ms (docs/service.md).
    assert took < 2.0 and slowest_health < 0.5, (took, slowest_health)


def test_error_lists_are_capped_and_input_is_not_echoed_unbounded():
    with make_client(max_texts=64) as client:
        answer = client.post("/correct", json={"texts": ["a\x00"] * 64})
        errors = answer.json()["errors"]
        assert answer.status_code == 422 and len(errors) == 21
        assert errors[-1]["type"] == "more_errors" and "44 more" in errors[-1]["msg"]
        long_key = "k" * 100_000
        answer = client.post("/correct", content=json.dumps({"text": "a", long_key: 1}),
                             headers={"content-type": "application/json"})
        assert answer.status_code == 422 and len(answer.content) < 2_000
        assert answer.json()["errors"][0]["type"] == "extra_forbidden"


def test_too_many_texts_is_the_only_problem_reported():
    with make_client(max_texts=3) as client:
        answer = client.post("/correct", json={"texts": [0] * 10})
        assert answer.status_code == 422
        assert [e["type"] for e in answer.json()["errors"]] == ["too_many_texts"]


# --- 3. slow, idle and greedy clients --------------------------------------------------------


def test_idle_connection_is_answered_408_at_the_head_deadline():
    with _server() as url, _connect(url) as sock:
        start = time.perf_counter()
        status, headers, body = _read_answer(sock)
        assert status == 408 and _error_type(body) == "head_timeout" and headers["connection"] == "close"
        assert HEAD_TIMEOUT_S * 0.9 < time.perf_counter() - start < HEAD_TIMEOUT_S + 2
        assert _closed(sock)


def _trickle(sock: socket.socket, data: bytes, every_s: float = 0.1) -> tuple[bytes, float]:
    """Send `data` a byte every `every_s` until the server answers; its answer and the time.
    Waits for the answer between bytes, so no byte is sent after it (which would make the
    closed server reset the connection and lose the answer)."""
    start = time.perf_counter()
    for byte in data:
        readable, _, _ = select.select([sock], [], [], every_s)
        if readable:
            break
        sock.send(bytes([byte]))
    else:
        select.select([sock], [], [], 10)
    answer = sock.recv(65536)
    return answer, time.perf_counter() - start


def test_trickled_head_is_cut_off_at_the_deadline():
    with _server() as url, _connect(url) as sock:
        answer, took = _trickle(sock, _head(b'{"text":"a"}'))  # 7 s for the whole head, once unlimited
    assert answer.startswith(b"HTTP/1.1 408"), answer
    assert took < HEAD_TIMEOUT_S + 2


def test_head_over_the_size_limit_is_431_and_closed():
    with _server(max_head_bytes=2048) as url, _connect(url) as sock:
        sock.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n")
        for _ in range(200):  # up to 1.6 MB of header, 8 KB at a time
            try:
                sock.sendall(b"X-Filler: " + b"a" * 8192 + b"\r\n")
            except OSError:
                break
        status, _, body = _read_answer(sock)
        assert status == 431 and _error_type(body) == "head_too_large"
        assert _closed(sock)
    with _server(max_head_bytes=2048) as url, _connect(url) as sock:  # under the limit: answered
        sock.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\nX-Filler: " + b"a" * 1500 + b"\r\n\r\n")
        assert _read_answer(sock)[0] == 200


def test_body_deadline_is_for_the_whole_body_not_each_part():
    body = b'{"text":"' + b"a" * 30 + b'"}'
    with _server() as url, _connect(url) as sock:
        sock.sendall(_head(body))
        answer, took = _trickle(sock, body)  # each byte well within the deadline, 4 s in all
    assert answer.startswith(b"HTTP/1.1 408"), answer
    assert took < BODY_TIMEOUT_S + 2


def test_idle_keep_alive_connection_is_closed():
    with _server(head_timeout_s=30) as url, _connect(url) as sock:
        sock.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
        assert _read_answer(sock)[0] == 200
        start = time.perf_counter()
        assert _closed(sock)  # keep_alive_s = 1
        assert time.perf_counter() - start < 5


def test_connections_over_the_cap_get_503_and_the_rest_are_served():
    with _server(max_connections=3, head_timeout_s=30) as url:
        held = [_connect(url) for _ in range(3)]
        try:
            with _connect(url) as extra:
                status, headers, body = _read_answer(extra)
                assert status == 503 and headers["retry-after"] == "1"
                assert _error_type(body) == "too_many_connections"
            held[0].sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
            assert _read_answer(held[0])[0] == 200
        finally:
            for sock in held:
                sock.close()
        time.sleep(0.2)
        assert httpx.get(f"{url}/health", timeout=10).status_code == 200
        metrics = httpx.get(f"{url}/metrics", timeout=10).text
    assert 'csc_rejected_total{reason="too_many_connections"} 1.0' in metrics


# --- 6. the error contract -------------------------------------------------------------------


def test_malformed_http_is_a_counted_json_400():
    with _server() as url:
        with _connect(url) as sock:
            sock.sendall(b"GARBAGE\x01 / HTTP/1.1\r\n\r\n")
            status, headers, body = _read_answer(sock)
        assert status == 400 and headers["content-type"] == "application/json"
        assert _error_type(body) == "invalid_http"
        metrics = httpx.get(f"{url}/metrics", timeout=10).text
    assert 'csc_http_requests_total{method="-",path="other",status="400"} 1.0' in metrics


@pytest.mark.parametrize("content_type", ["application/json", "text/plain"])
def test_client_gone_before_its_answer_is_counted_client_closed(content_type):
    """A client that sends a whole request and then its FIN (half-closed or gone) gets no answer:
    it is counted client_closed, not as the 200 or 415 nobody received."""
    body = json.dumps({"text": "因该"}).encode()
    with _server(CostlyCorrector(s_per_char=0.05)) as url:
        with _connect(url) as sock:
            # Corked, the request and its FIN leave in one segment: a client thread descheduled
            # between the two calls lets the server answer 415 before the FIN comes (seen once in
            # CI on 2 busy cores; the answer arrived where the close was asserted).
            if hasattr(socket, "TCP_CORK"):
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_CORK, 1)
            sock.sendall(_head(body).replace(b"application/json", content_type.encode()) + body)
            sock.shutdown(socket.SHUT_WR)
            assert _closed(sock)
        time.sleep(0.3)
        metrics = httpx.get(f"{url}/metrics", timeout=10).text
    counted = [line for line in metrics.splitlines() if line.startswith("csc_http_requests_total{")]
    assert counted == ['csc_http_requests_total{method="POST",path="/correct",status="client_closed"} 1.0']


def test_trailing_slash_is_404_without_a_redirect():
    with _server() as url, _connect(url) as sock:
        body = b'{"text":"a"}'
        sock.sendall(_head(body, path="/correct/", extra="Host: evil.example\r\n") + body)
        status, headers, answer = _read_answer(sock)
    assert status == 404 and "location" not in headers and _error_type(answer) == "http_404"


@pytest.mark.parametrize("raw,status,kind", [
    (b"", 400, "empty_body"),
    (b"  \n", 400, "empty_body"),
    (b'{"text": "a", "texts": null}', 422, "value_error"),
    (b'{"texts": [null]}', 422, "string_type"),
    (b'{"text": "a"', 400, "json_invalid"),
])
def test_error_contract(raw, status, kind):
    with make_client() as client:
        answer = client.post("/correct", content=raw, headers={"content-type": "application/json"})
    assert answer.status_code == status and _error_type(answer.content) == kind
    if kind == "string_type":
        assert answer.json()["errors"][0]["msg"] == "expected a string, got null"
    if kind == "json_invalid":
        assert answer.json()["errors"][0]["msg"].startswith("invalid JSON at line 1 column 13 (character 12): ")


def test_missing_content_type_is_named_in_words():
    with make_client() as client:
        answer = client.post("/correct", content=b'{"text":"a"}')
    assert answer.status_code == 415 and "None" not in answer.text
    assert "Content-Type header is missing" in answer.json()["errors"][0]["msg"]


def test_head_health_and_no_cdn_redoc():
    with make_client() as client:
        assert client.head("/health").status_code == 200
        assert client.get("/redoc").status_code == 404


def test_texts_corrected_counts_answered_texts_not_pieces_or_abandoned_work():
    with _server(CostlyCorrector(s_per_char=0.0001), piece_chars=256) as url:
        with httpx.Client(base_url=url, timeout=30) as client:
            assert client.post("/correct", json={"text": "因该。" * 3000}).status_code == 200  # 36 pieces
            body = json.dumps({"texts": ["因该。" * 3000] * 4}).encode()
            with _connect(url) as sock:  # 18 s of work, abandoned at once
                sock.sendall(_head(body) + body)
                time.sleep(0.3)
            time.sleep(0.5)  # the piece under way finishes; the rest are dropped
            metrics = client.get("/metrics").text
    assert "csc_texts_corrected_total 1.0" in metrics
