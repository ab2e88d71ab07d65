"""Benchmark the judge's wall time against the ideal and against a bare client, in one run.

`scripts/stub_openai.py` runs in a process of its own on 127.0.0.1 and answers every
request after a fixed delay (200 ms, a model's latency). The judge, as the gate builds
it, judges the demo's first queries (`--queries`, 100 by default) on every judged
metric: context precision@5, context recall, context sufficiency, and, on an answer
written for each query (the first two sentences of its top result), faithfulness and
answer relevance, whose generated questions are embedded by the stub's /embeddings.
The cache starts empty, so every call is made.

The ideal wall time is what the limits allow when requests only wait: the chat calls
C at a time (the judge's `concurrency`), the embeddings batches C at a time (the
embeddings' own `concurrency`, the same C here), both at once, and never less than
the dependency chain (a question is generated before it is embedded: 2 calls):

    ideal = delay x max(chat calls / C, embeddings calls / C, chain)

The peer is a bare client in the same run: httpx with a pool of C threads for chat
calls and another for embeddings, making exactly the same number of calls of each
kind with nothing else to do. Each side's share of the ideal is printed (the target
for the judge is 90% or more). A latency benchmark against a sleeping server: wall
time is what it measures; it is not a test.

Usage: python scripts/bench_judge_wall.py [--queries 100] [--delay-ms 200]
       [--concurrency 8] [--rounds 1]
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import httpx

from llm_eval.config_io import load_config
from llm_eval.endpoints.chat import ChatClient
from llm_eval.endpoints.embeddings import EmbeddingClient
from llm_eval.endpoints.settings import EMBEDDING_SETTINGS, EmbeddingSettings
from llm_eval.gold import GoldSet
from llm_eval.gold_io import load_gold
from llm_eval.judge.calls import judge_run
from llm_eval.metrics import parse_metric
from llm_eval.retrieval import RetrieveOptions, retrieve_gold
from llm_eval.runs import Run

ROOT = Path(__file__).resolve().parent.parent
CONFIG = ROOT / "config" / "examples" / "judged.yaml"
METRICS = ("context_precision@5", "context_recall", "context_sufficiency", "faithfulness")
RELEVANCE = "answer_relevance"
CHAIN = 2
"""The longest chain of calls that wait for each other: a generated question, then its
embedding."""


@dataclass(frozen=True, slots=True)
class Timed:
    """One side's calls and wall time."""

    chat: int
    embeddings: int
    seconds: float


def start_stub(delay_ms: float) -> tuple[subprocess.Popen[str], str]:
    """The stub in a process of its own, and its /v1 root."""
    stub = str(ROOT / "scripts" / "stub_openai.py")
    process = subprocess.Popen(
        [sys.executable, stub, "--port", "0", "--delay-ms", str(delay_ms)],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert process.stdout is not None
    first = process.stdout.readline()
    found = re.search(r"(http://127\.0\.0\.1:\d+/v1)", first)
    if found is None:
        process.kill()
        raise SystemExit(f"bench_judge_wall: the stub did not start: {first!r}")
    return process, found.group(1)


def demo_run(queries: int) -> tuple[GoldSet, Run]:
    """The demo's first `queries` judgeable queries, their BM25 results, and an answer
    for each: the first two sentences of its top result."""
    config = load_config(CONFIG)
    gold = load_gold(config.gold)
    chosen = tuple(q for q in gold.queries if not q.is_rejection)[:queries]
    run = retrieve_gold(config, chosen, RetrieveOptions(use_cache=False)).run
    answered = {
        qid: replace(found, answer=_two_sentences(found.results[0].text or ""))
        for qid, found in run.queries.items()
        if found.results
    }
    return replace(gold, queries=chosen), Run({**run.queries, **answered})


def _two_sentences(text: str) -> str:
    return " ".join(re.split(r"(?<=[.!?])\s+", " ".join(text.split()))[:2])


def time_judge(gold: GoldSet, run: Run, url: str, concurrency: int) -> Timed:
    """The judge over the run with a fresh cache."""
    config = load_config(CONFIG)
    assert config.judge is not None
    chat_settings = replace(config.judge, base_url=url, concurrency=concurrency)
    embed_defaults = {name: setting.default for name, setting in EMBEDDING_SETTINGS.items()}
    embed_settings = EmbeddingSettings.create(
        embed_defaults | {"base_url": url, "model": "stub-embed", "concurrency": concurrency}
    )
    metrics = [parse_metric(m) for m in (*METRICS, RELEVANCE)]
    with tempfile.TemporaryDirectory() as folder:
        client = ChatClient(chat_settings, Path(folder) / "judge")
        embeddings = EmbeddingClient(embed_settings, Path(folder) / "embeddings")
        start = time.perf_counter()
        outcome = judge_run(gold, run, metrics, client, lambda q, r: None, 1, embeddings)
        seconds = time.perf_counter() - start
    if outcome.unscored or client.usage.failed or embeddings.usage.failed:
        raise SystemExit(f"bench_judge_wall: the judge left queries unscored: {outcome.unscored}")
    return Timed(client.usage.calls, embeddings.usage.calls, seconds)


CHAT = {
    "model": "stub-judge",
    "messages": [
        {"role": "system", "content": "Judge the passage."},
        {
            "role": "user",
            "content": "task: chunk_relevance\n<question>\nsort a list\n</question>\n"
            "<passage>\nsorted() returns a new sorted list.\n</passage>",
        },
    ],
}
EMBED = {"model": "stub-embed", "input": ["how do I sort a list?"] * 32}


def time_peer(url: str, concurrency: int, chat: int, embeddings: int) -> Timed:
    """A bare client making `chat` and `embeddings` calls, each kind `concurrency` at a
    time, both at once."""
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)

    def calls(path: str, body: dict[str, Any], count: int) -> None:
        with (
            httpx.Client(limits=limits, timeout=60) as http,
            ThreadPoolExecutor(concurrency) as pool,
        ):
            for response in pool.map(lambda _: http.post(url + path, json=body), range(count)):
                response.raise_for_status()

    start = time.perf_counter()
    with ThreadPoolExecutor(2) as both:
        done = [
            both.submit(calls, "/chat/completions", CHAT, chat),
            both.submit(calls, "/embeddings", EMBED, embeddings),
        ]
        for future in done:
            future.result()
    return Timed(chat, embeddings, time.perf_counter() - start)


def ideal(timed: Timed, delay_s: float, concurrency: int, chain: int) -> tuple[float, float]:
    """The ideal wall time from the calls, and from the dependency chain."""
    return delay_s * max(timed.chat, timed.embeddings) / concurrency, delay_s * chain


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--queries", type=int, default=100, help="Demo queries judged.")
    parser.add_argument("--delay-ms", type=float, default=200.0, help="The stub's latency.")
    parser.add_argument("--concurrency", type=int, default=8, help="Calls in flight per kind.")
    parser.add_argument("--rounds", type=int, default=1, help="Judge and peer, alternated.")
    args = parser.parse_args()
    delay_s = args.delay_ms / 1000
    gold, run = demo_run(args.queries)
    process, url = start_stub(args.delay_ms)
    try:
        print(
            f"{len(gold.queries)} demo queries, {args.delay_ms:g} ms an answer, "
            f"concurrency {args.concurrency}"
        )
        print(
            f"{'round':>5}  {'side':<5}  {'chat':>5}  {'embed':>5}  {'wall s':>7}  "
            f"{'calls s':>7}  {'chain s':>7}  {'of ideal':>8}"
        )
        for number in range(1, args.rounds + 1):
            judged = time_judge(gold, run, url, args.concurrency)
            peer = time_peer(url, args.concurrency, judged.chat, judged.embeddings)
            for side, timed, chain in (("judge", judged, CHAIN), ("peer", peer, 1)):
                by_calls, by_chain = ideal(timed, delay_s, args.concurrency, chain)
                share = max(by_calls, by_chain) / timed.seconds
                print(
                    f"{number:>5}  {side:<5}  {timed.chat:>5}  {timed.embeddings:>5}  "
                    f"{timed.seconds:>7.2f}  {by_calls:>7.2f}  {by_chain:>7.2f}  {share:>8.1%}"
                )
    finally:
        process.terminate()
        process.wait()


if __name__ == "__main__":
    main()
