"""HTTP behaviour of the REST service: every endpoint, every bad-input case, micro-batching.

Most tests inject `FakeCorrector`, a deterministic stand-in, because they are about HTTP and
batching, not about what the model predicts. `test_tiny_model_*` run the real `Corrector` on the
tiny random model; `tests/test_service_server.py` reuses `FakeCorrector` for a real uvicorn.
"""

from __future__ import annotations

import asyncio
import json
import os
import threading
import time
from contextlib import contextmanager

import httpx
import pytest
from fastapi.testclient import TestClient

from corrector.result import Edit, Result
from service import app as app_module
from service.app import create_app
from service.schemas import CorrectResponse
from service.settings import Settings

SENTENCE = "少先队员因该为老人让坐。"
CORRECTED = "少先队员应该为老人让座。"


class FakeCorrector:
    """Fixes 因该→应该 always, and 坐→座 only when the threshold is at most 0.5 (default 0.5).

    Records every call so tests can see how requests were batched. `delay_s` per call makes
    concurrent requests pile up like they would behind a real forward pass; `fail_on` raises for
    texts containing that string, to test that one failing text does not sink its batch.
    """

    name = "fake-corrector"

    def __init__(self, delay_s: float = 0.0, fail_on: str | None = None) -> None:
        self.delay_s = delay_s
        self.fail_on = fail_on
        self.calls: list[tuple[list[str], float | None]] = []
        self._lock = threading.Lock()

    def correct_batch(self, texts: list[str], threshold: float | None = None) -> list[Result]:
        with self._lock:
            self.calls.append((list(texts), threshold))
        if self.delay_s:
            time.sleep(self.delay_s)
        if self.fail_on and any(self.fail_on in t for t in texts):
            raise ValueError(f"cannot handle {self.fail_on!r}")
        return [self.correct_one(t, threshold) for t in texts]

    @staticmethod
    def correct_one(text: str, threshold: float | None = None) -> Result:
        chars = list(text)
        edits = []
        for i, ch in enumerate(chars):
            if ch == "因" and i + 1 < len(chars) and chars[i + 1] == "该":
                edits.append(Edit(i, "因", "应", 0.9, "pinyin"))
            elif ch == "坐" and (threshold is None or threshold <= 0.5):
                edits.append(Edit(i, "坐", "座", 0.6, "shape"))
        for e in edits:
            chars[e.position] = e.target
        return Result(text, "".join(chars), edits)


def expected(text: str, threshold: float | None = None) -> dict:
    return FakeCorrector.correct_one(text, threshold).to_dict()


def strip_elapsed(item: dict) -> dict:
    assert isinstance(item.pop("elapsed_ms"), float)
    return item


@contextmanager
def make_client(corrector=None, **settings):
    settings.setdefault("warmup", False)
    app = create_app(Settings(**settings), corrector=corrector or FakeCorrector())
    with TestClient(app, raise_server_exceptions=False) as client:
        yield client


@pytest.fixture(autouse=True)
def thread_setting(monkeypatch):
    """`load_corrector` sets the process's thread count (runtime/threads.py): back after each test."""
    from corrector.runtime import threads

    monkeypatch.setattr(threads, "_threads", threads._threads)


@pytest.fixture
def client():
    with make_client() as c:
        yield c


def post_raw(client, body: bytes | str, content_type: str | None = "application/json"):
    headers = {"content-type": content_type} if content_type else {}
    return client.post("/correct", content=body, headers=headers)


# --- happy paths -------------------------------------------------------------------------


def test_correct_single_text(client):
    r = client.post("/correct", json={"text": SENTENCE})
    assert r.status_code == 200
    body = r.json()
    assert CorrectResponse.model_validate(body).model_dump() == body  # the documented schema, nothing else
    assert body["elapsed_ms"] >= 0
    assert strip_elapsed(body) == expected(SENTENCE)
    assert body["target"] == CORRECTED
    assert set(body["edits"][0]) == {"position", "source", "target", "confidence", "kind"}


def test_correct_batch_keeps_order(client):
    texts = [SENTENCE, "今天天气很好。", "因该", "他坐下了。"]
    r = client.post("/correct", json={"texts": texts})
    assert r.status_code == 200
    assert [strip_elapsed(item) for item in r.json()] == [expected(t) for t in texts]


def test_json_requests_are_read_once_without_the_route(monkeypatch):
    """Every JSON request to /correct (application/json or application/*+json, valid or not) is
    read once, by CorrectRequests, and never reaches the route; another media type reaches it
    and gets 415."""
    from service import app as app_module
    from service import routes

    reads, routed = [], []
    real_read = app_module.read_correct_request
    monkeypatch.setattr(app_module, "read_correct_request", lambda body, s: reads.append(body) or real_read(body, s))
    monkeypatch.setattr(routes, "check_request", lambda body, s: routed.append(body))
    with make_client() as client:
        body = {"texts": [SENTENCE, "今天"], "threshold": 0.4}
        plain = client.post("/correct", json=body)
        assert plain.status_code == 200 and len(reads) == 1
        merge = client.post("/correct", json=body, headers={"content-type": "application/merge-patch+json"})
        assert merge.status_code == 200 and len(reads) == 2
        assert [strip_elapsed(i) for i in merge.json()] == [strip_elapsed(i) for i in plain.json()]
        assert merge.headers["content-type"] == plain.headers["content-type"] == "application/json"
        assert client.post("/correct", json={"text": "a\u0000b"}).status_code == 422 and len(reads) == 3
        assert client.post("/correct", content=json.dumps(body), headers={"content-type": "text/plain"}).status_code == 415
    assert routed == []


def test_threshold_is_applied_per_request(client):
    low = client.post("/correct", json={"text": SENTENCE, "threshold": 0.2}).json()
    high = client.post("/correct", json={"text": SENTENCE, "threshold": 0.9}).json()
    assert low["target"] == CORRECTED
    assert high["target"] == "少先队员应该为老人让坐。"


@pytest.mark.parametrize(
    "text",
    ["", "   ", "😀", "😀🎉👍", "第一行\n第二行\t制表\r\n", "iPhone 15 Pro", "ＡＢＣ１２３", "𠀀𠀁"],
    ids=["empty", "spaces", "emoji", "emoji-only", "newline-tab", "ascii", "fullwidth", "ext-b"],
)
def test_legitimate_odd_inputs_come_back_unchanged(client, text):
    r = client.post("/correct", json={"text": text})
    assert r.status_code == 200, r.text
    assert strip_elapsed(r.json()) == {"source": text, "target": text, "edits": []}


def test_empty_list_gives_empty_list(client):
    r = client.post("/correct", json={"texts": []})
    assert r.status_code == 200 and r.json() == []


def test_text_at_the_length_limit_is_accepted():
    with make_client(max_text_chars=20) as client:
        r = client.post("/correct", json={"text": "因该" * 10})
        assert r.status_code == 200
        assert r.json()["target"] == "应该" * 10


# --- bad input ---------------------------------------------------------------------------

BAD_JSON_BODIES = [
    # (id, raw body, status, error type, loc)
    ("missing-fields", "{}", 422, "value_error", ["body"]),
    ("text-null", '{"text": null}', 422, "value_error", ["body"]),
    ("both-fields", '{"text": "a", "texts": ["b"]}', 422, "value_error", ["body"]),
    ("extra-field", '{"text": "a", "lang": "zh"}', 422, "extra_forbidden", ["body", "lang"]),
    ("text-number", '{"text": 123}', 422, "string_type", ["body", "text"]),
    ("text-list", '{"text": ["a"]}', 422, "string_type", ["body", "text"]),
    ("text-object", '{"text": {"a": 1}}', 422, "string_type", ["body", "text"]),
    ("texts-string", '{"texts": "abc"}', 422, "list_type", ["body", "texts"]),
    ("texts-item-number", '{"texts": ["ok", 5]}', 422, "string_type", ["body", "texts", 1]),
    ("body-array", '["a", "b"]', 422, "model_attributes_type", ["body"]),
    ("body-string", '"a"', 422, "model_attributes_type", ["body"]),
    ("threshold-high", '{"text": "a", "threshold": 1.5}', 422, "less_than_equal", ["body", "threshold"]),
    ("threshold-negative", '{"text": "a", "threshold": -0.1}', 422, "greater_than_equal", ["body", "threshold"]),
    ("threshold-string", '{"text": "a", "threshold": "high"}', 422, "float_type", ["body", "threshold"]),
    # Strict: no coercion of booleans or numeric strings to a threshold.
    ("threshold-true", '{"text": "a", "threshold": true}', 422, "float_type", ["body", "threshold"]),
    ("threshold-numeric-string", '{"text": "a", "threshold": "0.5"}', 422, "float_type", ["body", "threshold"]),
    ("threshold-nan", '{"text": "a", "threshold": NaN}', 422, "finite_number", ["body", "threshold"]),
    ("invalid-json", '{"text": ', 400, "json_invalid", ["body"]),
    ("trailing-garbage", '{"text": "a"} xyz', 400, "json_invalid", ["body"]),
    ("control-char", '{"text": "a\\u0000b"}', 422, "control_character", ["body", "text"]),
    ("bell-char", '{"text": "\\u0007"}', 422, "control_character", ["body", "text"]),
    ("c1-control", '{"text": "a\\u0085"}', 422, "control_character", ["body", "text"]),
    ("lone-surrogate", '{"text": "\\ud800"}', 422, "lone_surrogate", ["body", "text"]),
    ("lone-low-surrogate", '{"text": "好\\udc00"}', 422, "lone_surrogate", ["body", "text"]),
    ("surrogate-in-key", '{"\\ud800": 1, "text": "a"}', 422, "string_unicode", ["body"]),
]


@pytest.mark.parametrize("raw,status,kind,loc", [b[1:] for b in BAD_JSON_BODIES], ids=[b[0] for b in BAD_JSON_BODIES])
def test_bad_json_bodies_get_a_clear_4xx(client, raw, status, kind, loc):
    r = post_raw(client, raw)
    assert r.status_code == status, r.text
    body = r.json()
    assert isinstance(body["detail"], str) and body["detail"]
    assert any(e["type"] == kind and e["loc"] == loc for e in body["errors"]), body


def test_valid_surrogate_pair_escape_is_accepted(client):
    r = post_raw(client, '{"text": "\\ud83d\\ude00"}')  # 😀 written as a JSON surrogate pair
    assert r.status_code == 200 and r.json()["target"] == "😀"


def test_body_that_is_not_utf8_is_400(client):
    r = post_raw(client, b'{"text": "\xff\xfe"}')
    assert r.status_code == 400
    assert r.json()["errors"][0]["type"] == "invalid_body"


@pytest.mark.parametrize("content_type", ["text/plain", "application/x-www-form-urlencoded", None])
def test_non_json_content_type_is_415(client, content_type):
    r = post_raw(client, '{"text": "a"}', content_type)
    assert r.status_code == 415
    assert r.json()["errors"][0]["type"] == "unsupported_media_type"


def test_json_with_charset_is_accepted(client):
    r = post_raw(client, '{"text": "因该"}', "application/json; charset=utf-8")
    assert r.status_code == 200


def test_text_over_the_limit_is_422():
    with make_client(max_text_chars=20) as client:
        r = client.post("/correct", json={"text": "好" * 21})
        assert r.status_code == 422
        (error,) = r.json()["errors"]
        assert error["type"] == "text_too_long" and "21" in error["msg"] and "20" in error["msg"]


def test_default_limit_is_ten_thousand_characters(client):
    assert client.post("/correct", json={"text": "好" * 10_001}).status_code == 422
    assert client.post("/correct", json={"text": "好" * 10_000}).status_code == 200


def test_too_many_texts_is_422():
    with make_client(max_texts=3) as client:
        r = client.post("/correct", json={"texts": ["a"] * 4})
        assert r.status_code == 422
        assert r.json()["errors"][0]["type"] == "too_many_texts"
        assert client.post("/correct", json={"texts": ["a"] * 3}).status_code == 200


def test_bad_batch_lists_every_bad_index_and_corrects_nothing():
    fake = FakeCorrector()
    with make_client(fake, max_text_chars=10) as client:
        texts = ["因该", "a\x00b", "好" * 11, "ok", 7, "\ud800"]
        r = post_raw(client, json.dumps({"texts": texts}))
        assert r.status_code == 422
        found = {(e["loc"][2], e["type"]) for e in r.json()["errors"]}
        assert found == {(1, "control_character"), (2, "text_too_long"), (4, "string_type"), (5, "lone_surrogate")}
        assert fake.calls == []  # validation happens before any model work
        # The client drops the bad ones and resends: the good ones are corrected as usual.
        r = client.post("/correct", json={"texts": ["因该", "ok"]})
        assert [item["target"] for item in r.json()] == ["应该", "ok"]


def test_body_over_the_byte_limit_is_413():
    with make_client(max_body_bytes=1024) as client:
        r = client.post("/correct", json={"text": "a" * 2000})
        assert r.status_code == 413
        assert r.json()["errors"][0]["type"] == "body_too_large"
        assert client.post("/correct", json={"text": "a" * 500}).status_code == 200


def test_chunked_body_over_the_byte_limit_is_413():
    def chunks():  # no Content-Length: the limit must be enforced while streaming
        for _ in range(10):
            yield b"x" * 500

    with make_client(max_body_bytes=1024) as client:
        r = client.post("/correct", content=chunks(), headers={"content-type": "application/json"})
        assert r.status_code == 413


def test_unknown_path_and_wrong_method_are_json_errors(client):
    r = client.get("/nope")
    assert r.status_code == 404 and r.json()["errors"][0]["type"] == "http_404"
    r = client.get("/correct")
    assert r.status_code == 405 and "detail" in r.json()


# --- health, metrics, docs, page ---------------------------------------------------------


def test_health(client):
    r = client.get("/health")
    assert r.status_code == 200
    body = r.json()
    assert body["ready"] is True and body["status"] == "ok"
    assert body["model"] == "fake-corrector"
    assert body["version"] and body["batching"] is True
    assert body["processes"] == 0  # a corrector passed in runs in this process


def test_metrics_exposes_counts_latency_and_batch_sizes(client):
    client.post("/correct", json={"text": SENTENCE})
    client.post("/correct", json={"texts": ["因该", "坐", "好"]})
    client.post("/correct", json={"text": 1})
    r = client.get("/metrics")
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/plain")
    text = r.text
    assert 'csc_http_requests_total{method="POST",path="/correct",status="200"} 2.0' in text
    assert 'csc_http_requests_total{method="POST",path="/correct",status="422"} 1.0' in text
    assert 'csc_http_request_duration_seconds_bucket{le="0.02",path="/correct"}' in text
    assert "csc_batch_size_texts_count 2.0" in text
    assert "csc_batch_size_texts_sum 4.0" in text
    assert "csc_texts_corrected_total 4.0" in text
    assert 'csc_model_info{model="fake-corrector"' in text


def test_openapi_docs(client):
    assert client.get("/docs").status_code == 200
    spec = client.get("/openapi.json").json()
    assert {"/correct", "/health", "/metrics"} <= set(spec["paths"])
    request_schema = spec["components"]["schemas"]["CorrectRequest"]["properties"]
    assert request_schema["text"]["type"] == "string"


def test_index_page_and_static_files(client):
    r = client.get("/")
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/html")
    assert "<textarea" in r.text and "/static/app.js" in r.text
    assert client.get("/static/app.js").status_code == 200
    assert client.get("/static/style.css").status_code == 200


# --- lifespan and settings ---------------------------------------------------------------


def test_model_is_loaded_once_in_the_lifespan(monkeypatch):
    loads = []

    def fake_load(settings):
        loads.append(settings.model)
        return FakeCorrector()

    freezes = []
    monkeypatch.setattr(app_module, "load_corrector", fake_load)
    monkeypatch.setattr(app_module, "freeze_startup_objects", lambda: freezes.append(list(loads)) or 0)
    app = create_app(Settings(model="some/model-dir", warmup=True))
    assert loads == []  # building the app loads nothing
    with TestClient(app) as client:
        assert loads == ["some/model-dir"]
        assert freezes == [["some/model-dir"]]  # once, after the load
        for _ in range(3):
            assert client.post("/correct", json={"text": "因该"}).status_code == 200
    assert loads == ["some/model-dir"] and len(freezes) == 1


def test_an_injected_corrector_leaves_the_garbage_collector_alone(monkeypatch):
    freezes = []
    monkeypatch.setattr(app_module, "freeze_startup_objects", lambda: freezes.append(1) or 0)
    with TestClient(create_app(Settings(), corrector=FakeCorrector())) as client:
        assert client.post("/correct", json={"text": "因该"}).status_code == 200
    assert freezes == []


def test_frozen_start_up_objects_leave_later_garbage_collectable():
    import gc
    import weakref

    from corrector.runtime.allocator import freeze_startup_objects

    try:
        frozen = freeze_startup_objects()
        # Frozen objects can still be freed by reference counting (a thread an earlier test's library
        # left, ray's, drops its last reference): the count may fall between the two reads, never rise.
        assert 0 < gc.get_freeze_count() <= frozen

        class Node:
            pass

        cycle = Node()
        cycle.self = cycle  # only the cyclic collector can free it
        alive = weakref.ref(cycle)
        del cycle
        gc.collect()
        assert alive() is None
    finally:
        gc.unfreeze()  # the rest of the test session collects as before


def test_settings_from_env(monkeypatch):
    monkeypatch.setenv("CSC_SERVICE_MAX_TEXT_CHARS", "5")
    monkeypatch.setenv("CSC_SERVICE_BATCHING", "false")
    monkeypatch.setenv("CSC_SERVICE_MODEL", "/tmp/m")
    s = Settings()
    assert (s.max_text_chars, s.batching, s.model) == (5, False, "/tmp/m")


def test_cli_flags_override_env_and_reach_uvicorn(monkeypatch):
    import uvicorn

    from service.__main__ import main

    captured = {}
    # main() writes every setting into os.environ; give it a throw-away copy so later tests'
    # Settings() do not see them.
    monkeypatch.setattr(os, "environ", os.environ.copy())
    monkeypatch.setenv("CSC_SERVICE_PORT", "9999")
    monkeypatch.setenv("CSC_SERVICE_MAX_WAIT_MS", "7")
    monkeypatch.setattr(uvicorn, "run", lambda app, **kw: captured.update(app=app, **kw))
    main(["--port", "8123", "--model", "/models/x", "--workers", "2", "--no-batching", "--quantize"])
    assert captured["app"] == "service.app:app"
    assert (captured["port"], captured["workers"], captured["host"]) == (8123, 2, "127.0.0.1")
    # Worker processes build their app from the environment, so flags must be written there.
    s = Settings()
    assert (s.port, s.model, s.batching, s.max_wait_ms, s.quantize) == (8123, "/models/x", False, 7.0, True)


def test_cli_rejects_invalid_settings(monkeypatch):
    from service.__main__ import main

    with pytest.raises(SystemExit, match="invalid settings"):
        main(["--max-batch-size", "0"])


# --- micro-batching (concurrent requests through the ASGI app, no sockets) ---------------


async def _concurrent_posts(app, bodies: list[dict]) -> list[httpx.Response]:
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
        async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
            return await asyncio.gather(*(client.post("/correct", json=b) for b in bodies))


def run_concurrently(fake: FakeCorrector, bodies: list[dict], **settings) -> list[httpx.Response]:
    settings.setdefault("warmup", False)
    app = create_app(Settings(**settings), corrector=fake)
    return asyncio.run(_concurrent_posts(app, bodies))


def test_concurrent_requests_share_corrector_calls():
    fake = FakeCorrector(delay_s=0.02)
    texts = [f"{i}号因该坐好" for i in range(24)]
    responses = run_concurrently(fake, [{"text": t} for t in texts], max_wait_ms=20, max_batch_size=8)
    assert all(r.status_code == 200 for r in responses)
    assert [r.json()["target"] for r in responses] == [expected(t)["target"] for t in texts]
    sizes = [len(call_texts) for call_texts, _ in fake.calls]
    assert sum(sizes) == 24 and max(sizes) <= 8
    assert len(fake.calls) < 24 and max(sizes) > 1


def test_batches_never_mix_thresholds():
    fake = FakeCorrector(delay_s=0.01)
    thresholds = [None, 0.2, 0.9, 0.5] * 6
    bodies = [{"text": f"{i}坐", **({"threshold": t} if t is not None else {})} for i, t in enumerate(thresholds)]
    responses = run_concurrently(fake, bodies, max_wait_ms=20)
    for body, r, t in zip(bodies, responses, thresholds, strict=True):
        assert strip_elapsed(r.json()) == expected(body["text"], t)
    for call_texts, threshold in fake.calls:
        for text in call_texts:
            assert thresholds[int(text[:-1])] == threshold
    assert any(len(call_texts) > 1 for call_texts, _ in fake.calls)


def test_batching_off_runs_one_request_per_call():
    fake = FakeCorrector(delay_s=0.005)
    bodies = [{"text": "因该"}] * 6 + [{"texts": ["坐", "因该"]}]
    responses = run_concurrently(fake, bodies, batching=False)
    assert all(r.status_code == 200 for r in responses)
    assert sorted(len(t) for t, _ in fake.calls) == [1] * 6 + [2]


def test_one_failing_text_does_not_sink_its_micro_batch():
    fake = FakeCorrector(delay_s=0.01, fail_on="炸")
    texts = ["因该", "坐", "炸", "好", "因该坐"]
    responses = run_concurrently(fake, [{"text": t} for t in texts], max_wait_ms=30)
    statuses = [r.status_code for r in responses]
    assert statuses == [200, 200, 500, 200, 200]
    assert responses[2].json()["errors"][0]["type"] == "internal_error"
    assert [r.json()["target"] for r in responses if r.status_code == 200] == ["应该", "座", "好", "应该座"]
    assert any(len(t) > 1 for t, _ in fake.calls)  # they really were batched together first


def test_full_queue_answers_503_with_retry_after():
    fake = FakeCorrector(delay_s=0.05)
    responses = run_concurrently(fake, [{"texts": ["a", "b", "c"]}] * 6, max_queue_texts=4, max_wait_ms=0)
    statuses = sorted(r.status_code for r in responses)
    assert 200 in statuses and 503 in statuses and set(statuses) <= {200, 503}
    busy = next(r for r in responses if r.status_code == 503)
    assert busy.headers["retry-after"] == "1" and busy.json()["errors"][0]["type"] == "queue_full"


# --- the real Corrector on the tiny random model -----------------------------------------


@pytest.fixture(scope="module")
def tiny_client(tiny_model_dir):
    pytest.importorskip("corrector.pipeline", reason="corrector.pipeline (the real Corrector) is not there yet")
    import torch

    threads = torch.get_num_threads()  # the lifespan sets torch's thread count process-wide
    app = create_app(Settings(model=str(tiny_model_dir), warmup=True))
    try:
        with TestClient(app) as client:
            yield client
    finally:
        torch.set_num_threads(threads)


def test_threads_go_to_the_corrector_batch_workers(tiny_model_dir):
    import torch

    from service.app import load_corrector

    threads = torch.get_num_threads()
    try:
        corrector = load_corrector(Settings(model=str(tiny_model_dir), threads=2, processes=0))
        # Two single-threaded batch workers; the loading thread (and the inference thread the
        # batcher starts later) runs torch on one thread.
        assert corrector.workers == 2
        assert torch.get_num_threads() == 1
        assert corrector.correct_batch(["今天天气很好。", "北京是中国的首都。"] * 3)[0].source == "今天天气很好。"
        # --workers 2 with the default --threads 0 on two cores: one thread per process, no pool.
        torch.set_num_threads(2)
        assert load_corrector(Settings(model=str(tiny_model_dir), workers=2, processes=0)).workers == 1
    finally:
        torch.set_num_threads(threads)


def test_correction_processes_default_to_the_cores_per_worker(monkeypatch):
    from service import app as app_module

    monkeypatch.setattr(app_module.os, "sched_getaffinity", lambda pid: {0, 1}, raising=False)
    assert app_module.correction_processes(Settings()) == 2  # 2 cores, 1 worker
    assert app_module.correction_processes(Settings(workers=2)) == 0  # a core each: in-process
    assert app_module.correction_processes(Settings(device="cuda")) == 0
    assert app_module.correction_processes(Settings(processes=3, workers=2)) == 3  # asked for
    monkeypatch.setattr(app_module.os, "sched_getaffinity", lambda pid: {0}, raising=False)
    assert app_module.correction_processes(Settings()) == 0
    monkeypatch.setattr(app_module.os, "sched_getaffinity", lambda pid: set(range(64)), raising=False)
    assert app_module.correction_processes(Settings()) == app_module.MAX_AUTO_PROCESSES  # a model each
    assert app_module.correction_processes(Settings(workers=16)) == 4


def test_service_with_correction_processes(trained_model_dir):
    import torch

    threads = torch.get_num_threads()
    app = create_app(Settings(model=str(trained_model_dir), processes=2, traditional="hk"))
    try:
        with TestClient(app) as client:
            pool = app.state.batcher.corrector
            assert pool.processes == 2 and pool.spec.config == {"traditional": "hk", "passes": 1}
            health = client.get("/health").json()
            assert health["ready"] is True and health["model"] == trained_model_dir.name
            assert health["processes"] == 2
            body = client.post("/correct", json={"texts": ["少先队员因该为老人让坐。", "今天天气很好。"] * 2}).json()
            assert [item["target"] for item in body] == ["少先队员应该为老人让座。", "今天天气很好。"] * 2
            processes = [w.process for w in pool._workers]
        # Shutting the app down stops its correction processes.
        assert not any(p.is_alive() for p in processes)
    finally:
        torch.set_num_threads(threads)


def test_precision_settings_reach_the_corrector(tiny_model_dir):
    import torch

    from service.app import load_corrector

    threads = torch.get_num_threads()
    try:
        default = load_corrector(Settings(model=str(tiny_model_dir), processes=0))
        fp32 = load_corrector(Settings(model=str(tiny_model_dir), quantize=False, processes=0))
        bf16 = load_corrector(Settings(model=str(tiny_model_dir), bf16=True, processes=0))
    finally:
        torch.set_num_threads(threads)

    assert default.precision == "int8"  # the CPU default
    assert fp32.precision == "fp32"
    assert bf16.bundle.bf16 and bf16.precision == "bf16"
    assert default.correct("少先队员因该为老人让坐").source == "少先队员因该为老人让坐"


def test_traditional_setting_reaches_the_corrector(tiny_model_dir, monkeypatch):
    import torch

    from service.app import load_corrector

    threads = torch.get_num_threads()
    try:
        assert load_corrector(Settings(model=str(tiny_model_dir), processes=0)).script.variant == "tw"
        assert load_corrector(Settings(model=str(tiny_model_dir), traditional="hk", processes=0)).script.variant == "hk"
        assert load_corrector(Settings(model=str(tiny_model_dir), traditional="off", processes=0)).script is None
        # One correction pass by default here (latency); the library's default is two.
        assert load_corrector(Settings(model=str(tiny_model_dir), processes=0)).config.passes == 1
        assert load_corrector(Settings(model=str(tiny_model_dir), processes=0, passes=2)).config.passes == 2
    finally:
        torch.set_num_threads(threads)
    monkeypatch.setenv("CSC_SERVICE_TRADITIONAL", "jp")
    with pytest.raises(ValueError, match="traditional"):
        Settings()


def test_tiny_model_health_names_the_model(tiny_client, tiny_model_dir):
    body = tiny_client.get("/health").json()
    assert body["ready"] is True and body["model"] == tiny_model_dir.name
    assert body["precision"] == "int8"  # the default on CPU


def test_tiny_model_single_and_batch_agree(tiny_client):
    texts = [SENTENCE, "今天天气很好，我们一起去公园散步。", "我在2024年用iPhone打电话给Tom。"]
    batch = tiny_client.post("/correct", json={"texts": texts})
    assert batch.status_code == 200
    singles = [tiny_client.post("/correct", json={"text": t}).json() for t in texts]
    for text, item, single in zip(texts, batch.json(), singles, strict=True):
        assert item["source"] == text and len(item["target"]) == len(text)
        assert strip_elapsed(item) == strip_elapsed(single)
        for edit in item["edits"]:
            assert text[edit["position"]] == edit["source"] and 0.0 <= edit["confidence"] <= 1.0


@pytest.mark.parametrize("text", ["", "😀🎉", "   ", "abc 123"], ids=["empty", "emoji", "spaces", "ascii"])
def test_tiny_model_leaves_non_chinese_unchanged(tiny_client, text):
    r = tiny_client.post("/correct", json={"text": text})
    assert r.status_code == 200
    assert strip_elapsed(r.json()) == {"source": text, "target": text, "edits": []}


def test_tiny_model_accepts_a_text_at_the_default_limit(tiny_client):
    text = ("少先队员因该为老人让坐。" * 900)[:10_000]
    r = tiny_client.post("/correct", json={"text": text})
    assert r.status_code == 200
    assert r.json()["source"] == text and len(r.json()["target"]) == len(text)


# --- the batcher's waiting policy ----------------------------------------------------------


def test_lone_request_does_not_wait_for_company():
    from service.batching import Batcher

    async def scenario() -> float:
        batcher = Batcher(FakeCorrector(), max_wait_ms=1000)
        await batcher.start()
        try:
            start = time.perf_counter()
            await batcher.correct(["因该"])
            return time.perf_counter() - start
        finally:
            await batcher.stop()

    assert asyncio.run(scenario()) < 0.5  # far below max_wait: nothing suggested more was coming


def test_clients_answered_together_are_gathered_again():
    from service.batching import Batcher

    fake = FakeCorrector()

    async def scenario() -> None:
        batcher = Batcher(fake, max_wait_ms=2000)
        await batcher.start()
        try:
            # Four requests queued at once form one batch: "expect four next time".
            await asyncio.gather(*(batcher.correct([f"{i}"]) for i in range(4)))

            async def late(i: int) -> None:
                await asyncio.sleep(0.05 * i)  # the next round trickles in over 150 ms
                await batcher.correct([f"late{i}"])

            await asyncio.gather(*(late(i) for i in range(4)))
        finally:
            await batcher.stop()

    asyncio.run(scenario())
    assert [len(texts) for texts, _ in fake.calls] == [4, 4]


def test_closed_loop_clients_taking_turns_merge_into_one_batch():
    from service.batching import Batcher

    fake = FakeCorrector(delay_s=0.03)

    async def scenario() -> None:
        batcher = Batcher(fake, max_wait_ms=20)
        await batcher.start()
        try:
            async def client(i: int, start_s: float) -> None:
                await asyncio.sleep(start_s)
                for round_ in range(6):  # closed loop: the next request once the answer is in
                    await batcher.correct([f"{i}-{round_}"])

            # Four clients start together and four more while their first batch runs: without the
            # merge the two groups would take turns for good (batches of 4, 4, 4, ...).
            await asyncio.gather(*(client(i, 0.0) for i in range(4)), *(client(i, 0.01) for i in range(4, 8)))
        finally:
            await batcher.stop()

    asyncio.run(scenario())
    sizes = [len(texts) for texts, _ in fake.calls]
    # The late group queued behind the first batch, so the second batch waited for the first group's
    # next requests too: one batch of 8 per round from then on; the first group finishes a round early.
    assert sizes == [4, 8, 8, 8, 8, 8, 4], sizes


class TwoProcessFake(FakeCorrector):
    """A FakeCorrector that says it runs in two processes (as `ProcessCorrector`): records how
    many calls run at once and the `max_processes` each got."""

    processes = 2

    def __init__(self, delay_s: float) -> None:
        super().__init__(delay_s=delay_s)
        self.running = self.most_running = 0
        self.max_processes: list[int | None] = []

    def correct_batch(self, texts: list[str], threshold: float | None = None,
                      max_processes: int | None = None) -> list[Result]:
        with self._lock:
            self.running += 1
            self.most_running = max(self.most_running, self.running)
            self.max_processes.append(max_processes)
        try:
            return super().correct_batch(texts, threshold)
        finally:
            with self._lock:
                self.running -= 1


def test_lanes_run_a_batch_per_process_at_once_and_clients_settle_into_one_group_each():
    from service.batching import Batcher

    fake = TwoProcessFake(delay_s=0.03)

    async def scenario() -> float:
        batcher = Batcher(fake, max_wait_ms=20)
        assert batcher.lanes == 2
        await batcher.start()
        try:
            async def client(i: int) -> None:
                for round_ in range(8):  # closed loop
                    assert (await batcher.correct([f"{i}因该{round_}"]))[0].target == f"{i}应该{round_}"

            start = time.perf_counter()
            await asyncio.gather(*(client(i) for i in range(8)))
            return time.perf_counter() - start
        finally:
            await batcher.stop()

    elapsed = asyncio.run(scenario())
    sizes = [len(texts) for texts, _ in fake.calls]
    assert sum(sizes) == 64
    assert fake.most_running == 2 and set(fake.max_processes) == {1}  # each batch on one process
    assert sorted(sizes)[len(sizes) // 2] == 4, sizes  # two groups of four, one per lane
    # 16 calls of 30 ms two at a time, against 8 calls of all eight one after another: the lanes
    # are not slower for the clients, and never idle together while the others send again.
    assert elapsed < 8 * 0.03 * 1.8, elapsed
