"""Load test of the REST service: requests/s and p50/p99 latency at 1, 8 and 32 clients,
with micro-batching on and off, in one run.

    python benchmarks/load_service.py --model data/model            # starts the server twice
    python benchmarks/load_service.py --tiny-model --duration 3     # random tiny model, smoke run
    python benchmarks/load_service.py --url http://127.0.0.1:8000   # a server you started
    python benchmarks/load_service.py --modes on --beside-big        # short requests beside a big one

Each client is a closed loop on one keep-alive connection: send one sentence, wait for the
answer, send the next. The sentences are real ones, a mix of lengths and errors: the sources of
SIGHAN-15's test set from the shared data ($CSC_SHARED_DATA, read at run time), else a few
built-in ones; each client walks through them from its own starting point (--text: one fixed
sentence instead). --beside-big adds a level where one more client sends a big request
(64 texts x 1,500 characters) again and again while the clients measure their short ones: what a
short request pays for sharing the service with a big one. The client is a small asyncio HTTP/1.1 writer/reader rather than httpx, on
uvloop where installed, so that on a 2-core machine the load generator takes as little CPU from the server as possible.
Traffic goes to loopback only and every level is bounded by --duration (and --max-requests).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from dataclasses import asdict, dataclass
from pathlib import Path
from urllib.parse import urlsplit

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_TEXT = "少先队员因该为老人让坐。"
SHARED_DATA = Path(os.environ.get("CSC_SHARED_DATA", ROOT.parent / "shared" / "data"))
SIGHAN_15_TEST = Path("csc") / "sighan" / "test2015.tsv"  # label, source, target per line
# Used when the shared data is not there: everyday sentences, some with a typical error.
BUILT_IN_SENTENCES = (
    "少先队员因该为老人让坐。",
    "今天天气很好，我们一起去公园散步。",
    "下个星期，我跟我朋唷打算去法国玩儿。",
    "我听说，你找到新工作，我很高兴。",
    "他的作业做得很认真，老师表扬了他。",
    "在这个时候，我们应该想办法解决问题，而不是抱怨。",
    "北京是中国的首都。",
    "我在2024年用iPhone打电话给Tom，他说应该没问题。",
)
BIG_TEXTS, BIG_CHARS = 64, 1500  # the big request: 96,000 characters, inside the default budget


def real_sentences(limit: int = 1000) -> tuple[list[str], str]:
    """(sentences, where from): SIGHAN-15 test sources from the shared data, else the built-in ones."""
    path = SHARED_DATA / SIGHAN_15_TEST
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError:
        return list(BUILT_IN_SENTENCES), "built-in sentences (no shared data)"
    sentences = [cols[1] for line in lines if len(cols := line.split("\t")) >= 2 and cols[1].strip()]
    return (sentences[:limit], str(path)) if sentences else (list(BUILT_IN_SENTENCES), "built-in sentences")


def big_payload(sentences: list[str]) -> bytes:
    text = "".join(sentences)
    text = (text * (BIG_CHARS // max(1, len(text)) + 1))[:BIG_CHARS]
    return json.dumps({"texts": [text] * BIG_TEXTS}, ensure_ascii=False).encode()


@dataclass
class LevelResult:
    mode: str
    clients: int
    requests: int
    errors: int
    seconds: float
    rps: float
    p50_ms: float
    p99_ms: float
    mean_batch_requests: float | None  # from /metrics: HTTP requests per corrector call
    big_requests: int | None = None  # beside-big levels: big requests answered meanwhile


def percentile(sorted_values: list[float], q: float) -> float:
    """Nearest-rank percentile of an already sorted list."""
    if not sorted_values:
        return float("nan")
    rank = max(1, min(len(sorted_values), round(q / 100 * len(sorted_values) + 0.5)))
    return sorted_values[rank - 1]


class Connection:
    """One keep-alive HTTP/1.1 connection that POSTs JSON and reads Content-Length bodies."""

    def __init__(self, host: str, port: int) -> None:
        self.host, self.port = host, port
        self.reader: asyncio.StreamReader | None = None
        self.writer: asyncio.StreamWriter | None = None

    async def post(self, path: str, payload: bytes) -> tuple[int, bytes]:
        if self.writer is None:
            self.reader, self.writer = await asyncio.open_connection(self.host, self.port)
        head = (
            f"POST {path} HTTP/1.1\r\nHost: {self.host}:{self.port}\r\n"
            f"Content-Type: application/json\r\nContent-Length: {len(payload)}\r\n\r\n"
        ).encode()
        self.writer.write(head + payload)
        await self.writer.drain()
        status_line = await self.reader.readline()
        if not status_line:
            raise ConnectionError("server closed the connection")
        status = int(status_line.split()[1])
        length, close = 0, False
        while (line := await self.reader.readline()) not in (b"\r\n", b""):
            name, _, value = line.partition(b":")
            name = name.strip().lower()
            if name == b"content-length":
                length = int(value)
            elif name == b"connection" and value.strip().lower() == b"close":
                close = True
        body = await self.reader.readexactly(length)
        if close:
            await self.close()
        return status, body

    async def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
            try:
                await self.writer.wait_closed()
            except OSError:
                pass
        self.reader = self.writer = None


async def run_level(url: str, payloads: list[bytes], clients: int, duration: float, warmup: float,
                    max_requests: int, big: bytes | None = None) -> tuple[list[float], int, float, int]:
    """Latencies (s) of successful requests, error count, measured seconds and big requests
    answered for one level. Client k sends payloads[k], payloads[k + clients], ... in turn; with
    `big`, one more client sends that, unmeasured, until the level ends."""
    parts = urlsplit(url)
    host, port = parts.hostname or "127.0.0.1", parts.port or 80
    latencies: list[float] = []
    errors = 0
    loop = asyncio.get_running_loop()
    measure_from = loop.time() + warmup
    stop_at = measure_from + duration

    big_done = 0

    async def big_client() -> None:
        nonlocal big_done
        conn = Connection(host, port)
        try:
            while loop.time() < stop_at:
                try:
                    status, _ = await asyncio.wait_for(conn.post("/correct", big), timeout=120)
                except (OSError, asyncio.TimeoutError, asyncio.IncompleteReadError, ValueError):
                    status = 0
                    await conn.close()
                big_done += status == 200
        finally:
            await conn.close()

    async def client(k: int) -> None:
        nonlocal errors
        conn = Connection(host, port)
        turn = k
        try:
            while loop.time() < stop_at and len(latencies) < max_requests:
                payload = payloads[turn % len(payloads)]
                turn += clients
                start = time.perf_counter()
                try:
                    status, _ = await asyncio.wait_for(conn.post("/correct", payload), timeout=30)
                except (OSError, asyncio.TimeoutError, asyncio.IncompleteReadError, ValueError):
                    status = 0
                    await conn.close()
                elapsed = time.perf_counter() - start
                if loop.time() - elapsed < measure_from:
                    continue  # started during warm-up
                if status == 200:
                    latencies.append(elapsed)
                else:
                    errors += 1
        finally:
            await conn.close()

    extra = [big_client()] if big is not None else []
    tasks = [asyncio.ensure_future(c) for c in (*extra, *(client(k) for k in range(clients)))]
    await asyncio.gather(*tasks[len(extra):])
    measured = min(loop.time(), stop_at) - measure_from
    if extra:  # the big request in flight is not waited for: the level is over
        tasks[0].cancel()
        await asyncio.gather(tasks[0], return_exceptions=True)
    return latencies, errors, measured, big_done


def http_get(url: str, timeout: float = 5.0) -> str:
    with urllib.request.urlopen(url, timeout=timeout) as response:  # noqa: S310 - loopback only
        return response.read().decode()


def batch_counters(url: str) -> tuple[float, float] | None:
    """(sum, count) of csc_batch_size_requests, to compute requests per corrector call."""
    try:
        text = http_get(url + "/metrics")
    except OSError:
        return None
    values = {}
    for name in ("csc_batch_size_requests_sum", "csc_batch_size_requests_count"):
        match = re.search(rf"^{name} ([0-9.e+-]+)$", text, re.MULTILINE)
        if not match:
            return None
        values[name] = float(match.group(1))
    return values["csc_batch_size_requests_sum"], values["csc_batch_size_requests_count"]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class Server:
    """`python -m service` on a free loopback port, stopped on exit."""

    def __init__(self, model: str, batching: bool, extra: list[str]) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        args = [sys.executable, "-m", "service", "--host", "127.0.0.1", "--port", str(self.port),
                "--model", model, "--log-level", "warning", "--no-access-log",
                "--batching" if batching else "--no-batching", *extra]
        self.log = tempfile.TemporaryFile()
        self.proc = subprocess.Popen(args, cwd=ROOT, stdout=self.log, stderr=subprocess.STDOUT)

    def wait_ready(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                self.log.seek(0)
                raise SystemExit("server exited during start-up:\n" + self.log.read().decode()[-3000:])
            try:
                if json.loads(http_get(self.url + "/health", timeout=1)).get("ready"):
                    return
            except (OSError, ValueError):
                pass
            time.sleep(0.25)
        self.stop()
        raise SystemExit(f"server not ready after {timeout:.0f}s")

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=5)
        self.log.close()


def run_on_fast_loop(coroutine):
    """asyncio.run on uvloop where it is installed (uvicorn's standard extra brings it): the
    client's share of the two cores it shares with the server, ~0.1 ms a request on asyncio's own
    loop, is on every request's path under load."""
    try:
        import uvloop
    except ImportError:
        return asyncio.run(coroutine)
    return uvloop.run(coroutine)


def measure(url: str, mode: str, args: argparse.Namespace, big: bytes | None = None) -> list[LevelResult]:
    payloads = [json.dumps({"text": text}, ensure_ascii=False).encode() for text in args.sentences]
    results = []
    for clients in args.big_clients if big is not None else args.clients:
        before = batch_counters(url)
        latencies, errors, seconds, big_done = run_on_fast_loop(
            run_level(url, payloads, clients, args.duration, args.warmup, args.max_requests, big)
        )
        after = batch_counters(url)
        mean_batch = None
        if before and after and after[1] > before[1]:
            mean_batch = round((after[0] - before[0]) / (after[1] - before[1]), 2)
        latencies.sort()
        result = LevelResult(
            mode=mode, clients=clients, requests=len(latencies), errors=errors, seconds=round(seconds, 2),
            rps=round(len(latencies) / seconds, 1) if seconds > 0 else 0.0,
            p50_ms=round(percentile(latencies, 50) * 1000, 2), p99_ms=round(percentile(latencies, 99) * 1000, 2),
            mean_batch_requests=mean_batch, big_requests=big_done if big is not None else None,
        )
        print(f"  {mode:<12} {clients:>3} clients: {result.rps:>8.1f} req/s  p50 {result.p50_ms:>7.2f} ms  "
              f"p99 {result.p99_ms:>7.2f} ms  errors {errors}  req/call {mean_batch}"
              + (f"  big requests answered {big_done}" if big is not None else ""), flush=True)
        results.append(result)
    return results


def build_tiny_model(directory: str) -> str:
    # The tests' recipe for a random 2-layer model, so the benchmark and the tests use the same one.
    sys.path.insert(0, str(ROOT / "tests"))
    from conftest import build_tiny_model as build

    return str(build(Path(directory)))


def report(results: list[LevelResult]) -> str:
    lines = ["| mode | clients | requests | req/s | p50 ms | p99 ms | errors | requests per forward call | big requests |",
             "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for r in results:
        lines.append(f"| {r.mode} | {r.clients} | {r.requests} | {r.rps} | {r.p50_ms} | {r.p99_ms} | {r.errors} | "
                     f"{r.mean_batch_requests if r.mean_batch_requests is not None else '-'} | "
                     f"{r.big_requests if r.big_requests is not None else '-'} |")
    by = {(r.mode, r.clients): r for r in results}
    if (on := by.get(("batching", 8))) is not None:
        lines.append(f"\n8 clients, batching: p50 {on.p50_ms} ms (goal <= 20), p99 {on.p99_ms} ms (goal <= 60)")
    on32, off32 = by.get(("batching", 32)), by.get(("no-batching", 32))
    if on32 and off32 and off32.rps > 0:
        lines.append(f"32 clients: batching gives {on32.rps / off32.rps:.2f}x the throughput of no batching (goal >= 3x)")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    target = p.add_mutually_exclusive_group()
    target.add_argument("--model", help="model directory (default: the library default, data/model)")
    target.add_argument("--tiny-model", action="store_true", help="build and serve a random tiny model")
    target.add_argument("--url", help="measure a running server instead of starting one")
    p.add_argument("--clients", type=int, nargs="+", default=[1, 8, 32])
    p.add_argument("--modes", nargs="+", choices=["on", "off"], default=["on", "off"],
                   help="micro-batching modes to start servers with (ignored with --url)")
    p.add_argument("--duration", type=float, default=5.0, help="measured seconds per level (default 5)")
    p.add_argument("--warmup", type=float, default=1.0, help="unmeasured seconds before each level")
    p.add_argument("--max-requests", type=int, default=100_000, help="cap on requests per level")
    p.add_argument("--text", help="one sentence every request sends (default: a mix of real sentences)")
    p.add_argument("--beside-big", action="store_true",
                   help=f"also measure short requests beside a big one ({BIG_TEXTS} texts x {BIG_CHARS} characters, "
                        "sent again and again by one more client)")
    p.add_argument("--big-clients", type=int, nargs="+", default=[1, 8],
                   help="short-request clients of the --beside-big levels (default 1 8)")
    p.add_argument("--startup-timeout", type=float, default=300.0)
    p.add_argument("--json", type=Path, help="also write the results here")
    p.add_argument("server_args", nargs="*", help="extra `python -m service` flags after --, e.g. -- --threads 2")
    args = p.parse_args(argv)
    if args.duration <= 0 or args.duration > 600:
        p.error("--duration must be in (0, 600] seconds")

    if args.text:
        args.sentences, source = [args.text], "--text"
    else:
        args.sentences, source = real_sentences()
    big = big_payload(args.sentences) if args.beside_big else None
    print(f"load_service: {os.cpu_count()} CPUs, {len(args.sentences)} sentences from {source}, clients "
          f"{args.clients}, {args.duration}s per level", flush=True)
    results: list[LevelResult] = []
    if args.url:
        url = args.url.rstrip("/")
        if urlsplit(url).hostname not in ("127.0.0.1", "localhost", "::1"):
            p.error("--url must be a loopback address")
        health = json.loads(http_get(url + "/health"))
        results = measure(url, "batching" if health.get("batching") else "no-batching", args)
        if big is not None:
            results += measure(url, "beside-big", args, big)
    else:
        with tempfile.TemporaryDirectory(prefix="csc-tiny-model-") as scratch:
            model = build_tiny_model(scratch) if args.tiny_model else args.model
            if not model:
                from corrector.runtime.models import default_model_path

                model = default_model_path()
            print(f"model: {model}", flush=True)
            for mode in args.modes:
                server = Server(model, batching=mode == "on", extra=args.server_args)
                try:
                    server.wait_ready(args.startup_timeout)
                    results += measure(server.url, "batching" if mode == "on" else "no-batching", args)
                    if big is not None and mode == "on":
                        results += measure(server.url, "beside-big", args, big)
                finally:
                    server.stop()
    print()
    print(report(results))
    if args.json:
        args.json.write_text(json.dumps([asdict(r) for r in results], indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
