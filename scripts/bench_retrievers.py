"""Benchmark the http retriever's concurrency against the ideal, in one run.

A local search service (in a process of its own, like a real service) answers every
request after a fixed delay (20 ms). The http retriever, as the gate builds it from
its settings, runs the same queries (1,400 by default) sequentially and at
concurrency 16. With requests that only wait, the ideal throughput at concurrency C
is C / delay (16 / 0.020 s = 800 queries/s); the script prints both times, the
queries per second and the share of that ideal reached (the target is 80% or more).

Usage: python scripts/bench_retrievers.py [--queries 1400] [--delay-ms 20]
       [--concurrency 16] [--skip-sequential]
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import tempfile
import time
from collections.abc import Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from llm_eval.gold import GoldQuery
from llm_eval.gold_io import load_gold
from llm_eval.retrievers import RetrieverContext, http

ANSWER = json.dumps(
    {"results": [{"doc_id": f"doc-{i}", "score": 10.0 - i, "text": "passage"} for i in range(10)]}
).encode()


class _Server(ThreadingHTTPServer):
    request_queue_size = 256
    daemon_threads = True


def serve(delay_s: float, ports: Any) -> None:
    """Answer every POST after `delay_s`, keeping connections alive (runs in a child process)."""

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        # Headers and body go out in two writes: with Nagle's algorithm the body waits
        # for the client's delayed ACK (~40 ms). Real servers set TCP_NODELAY too.
        disable_nagle_algorithm = True

        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            time.sleep(delay_s)
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(ANSWER)))
            self.end_headers()
            self.wfile.write(ANSWER)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = _Server(("127.0.0.1", 0), Handler)
    ports.put(server.server_address[1])
    server.serve_forever()


def gold_queries(count: int, folder: Path) -> Sequence[GoldQuery]:
    """`count` distinct queries, read through the gold loader."""
    path = folder / "gold.jsonl"
    lines = (
        json.dumps({"query_id": f"q{i}", "query": f"question {i}", "relevant": ["doc-1"]})
        for i in range(count)
    )
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return load_gold([path]).queries


def timed_run(url: str, queries: Sequence[GoldQuery], concurrency: int, cache: Path) -> float:
    """Seconds to answer every query at this concurrency; every query must succeed."""
    settings = {"url": url, "concurrency": concurrency, "retries": 0}
    retriever = http.KIND.create(settings, RetrieverContext(None, cache))
    started = time.perf_counter()
    run = retriever.retrieve(queries, 10)
    elapsed = time.perf_counter() - started
    failed = run.failed()
    if failed:
        raise SystemExit(f"{len(failed)} queries failed, e.g. {next(iter(failed.values()))}")
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--queries", type=int, default=1400)
    parser.add_argument("--delay-ms", type=float, default=20.0)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--skip-sequential", action="store_true")
    args = parser.parse_args()
    if args.delay_ms <= 0 or args.queries < 1 or args.concurrency < 1:
        parser.error("--delay-ms, --queries and --concurrency must be above 0")
    delay_s = args.delay_ms / 1000
    ports: Any = multiprocessing.Queue()
    server = multiprocessing.Process(target=serve, args=(delay_s, ports), daemon=True)
    server.start()
    url = f"http://127.0.0.1:{ports.get(timeout=10)}/search"
    try:
        with tempfile.TemporaryDirectory() as folder:
            queries = gold_queries(args.queries, Path(folder))
            timed_run(url, queries[:50], args.concurrency, Path(folder))  # warm up
            report(args, queries, url, Path(folder), delay_s)
    finally:
        server.terminate()
        server.join()


def report(
    args: argparse.Namespace, queries: Sequence[GoldQuery], url: str, cache: Path, delay_s: float
) -> None:
    """Time both runs and print the table."""
    n, c = len(queries), args.concurrency
    print(f"http retriever: {n} queries, server adds {args.delay_ms:g} ms a request")
    if not args.skip_sequential:
        sequential = timed_run(url, queries, 1, cache)
        ideal_1 = 1 / delay_s
        print(
            f"  sequential       {sequential:7.2f} s  {n / sequential:7.1f} queries/s  "
            f"ideal {ideal_1:5.1f}/s  {n / sequential / ideal_1:6.1%} of ideal"
        )
    parallel = timed_run(url, queries, c, cache)
    ideal = c / delay_s
    print(
        f"  concurrency {c:<4} {parallel:7.2f} s  {n / parallel:7.1f} queries/s  "
        f"ideal {ideal:5.1f}/s  {n / parallel / ideal:6.1%} of ideal"
    )
    if not args.skip_sequential:
        print(f"  speed-up at concurrency {c}: {sequential / parallel:.1f}x (ideal {c}x)")


if __name__ == "__main__":
    main()
