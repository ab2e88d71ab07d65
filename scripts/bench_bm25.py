"""Benchmark the bm25 retriever against rank_bm25, a plain-Python BM25, in one run.

On the demo corpus and gold set (or any BEIR corpus and gold files) it times

1. the index build cold (empty cache: read, analyse, index, save) and warm (load
   from the cache), against rank_bm25's `BM25Okapi` reading and indexing the same
   corpus with the same analyzer;
2. retrieval of every gold query (top k, with the passage texts), against
   rank_bm25 scoring each query and sorting its top k;

prints best-of-N times, the speed-up (rank_bm25's time / ours; below 1 means
slower), and recall@5 / nDCG@10 of both as a sanity check (they differ a little:
rank_bm25's Okapi idf is not Lucene's).

Usage: python scripts/bench_bm25.py [--corpus gold/corpus.jsonl] [--gold FILE ...]
       [--synthetic DOCS] [--queries 300] [--top-k 10] [--repeat 3]
       python scripts/bench_bm25.py --memory DOCS [--queries 1000]
`--synthetic DOCS` writes a random BEIR corpus of DOCS passages and `--queries` queries
to a temporary folder and benchmarks on it instead. rank_bm25 is optional:
`pip install rank_bm25`.

`--memory DOCS` measures the peak resident memory of retrieval: each measurement is a
fresh interpreter that loads the cached index of a synthetic corpus and answers its
queries (its peak resident memory, VmHWM), at DOCS and DOCS / 2 documents and at `--queries`
and twice as many queries, and prints what 1,000 more queries and 100,000 more
documents add to the peak. `ms a query` is the mean latency the retriever measured
(analysis and ranking, each query alone).
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import bm25s
import numpy as np

import llm_eval
from llm_eval.corpus_io import iter_corpus
from llm_eval.gold import GoldSet
from llm_eval.gold_io import load_gold
from llm_eval.retrievers import RetrieverContext, bm25

DEMO_GOLD = ["gold/python-docs-A.jsonl", "gold/python-docs-B.jsonl"]
METRICS = ["recall@5", "ndcg@10"]


def best_of(repeat: int, work: Callable[[], Any]) -> tuple[float, Any]:
    """The shortest wall time of `repeat` runs, and the last result."""
    times, result = [], None
    for _ in range(repeat):
        start = time.perf_counter()
        result = work()
        times.append(time.perf_counter() - start)
    return min(times), result


def synthesize(folder: Path, docs: int, queries: int = 300, seed: int = 0) -> tuple[Path, Path]:
    """A BEIR corpus of random Zipf-distributed words and a gold file of queries over it."""
    rng = np.random.default_rng(seed)
    vocabulary = np.array([f"w{i}" for i in range(50_000)])
    corpus, gold = folder / "corpus.jsonl", folder / "gold.jsonl"
    with corpus.open("w", encoding="utf-8") as out:
        for i in range(docs):
            words = vocabulary[(rng.zipf(1.2, rng.integers(20, 200)) - 1) % len(vocabulary)]
            out.write(json.dumps({"_id": f"d{i}", "title": "", "text": " ".join(words)}) + "\n")
    with gold.open("w", encoding="utf-8") as out:
        for q in range(queries):
            words = vocabulary[rng.integers(0, 2_000, 5)]
            relevant = {f"d{rng.integers(docs)}": 1}
            record = {"query_id": f"q{q}", "query": " ".join(words), "relevant": relevant}
            out.write(json.dumps(record) + "\n")
    return corpus, gold


def ours(corpus: Path, gold: GoldSet, top_k: int, repeat: int) -> dict[str, Any]:
    """Cold build, warm build and retrieval times of the bm25 retriever, and its run."""
    config = bm25.BM25Config()

    def cold() -> bm25.BM25Retriever:
        with tempfile.TemporaryDirectory() as cache:
            return bm25.build(config, RetrieverContext(corpus, Path(cache)))

    with tempfile.TemporaryDirectory() as cache:
        context = RetrieverContext(corpus, Path(cache))
        bm25.build(config, context)
        warm, retriever = best_of(repeat, lambda: bm25.build(config, context))
        search, run = best_of(repeat, lambda: retriever.retrieve(gold.queries, top_k))
    build, _ = best_of(repeat, cold)
    scored = {q: {r.doc_id: r.score for r in res.results} for q, res in run.queries.items()}
    return {"cold": build, "warm": warm, "retrieve": search, "run": scored}


def peer(corpus: Path, gold: GoldSet, top_k: int, repeat: int) -> dict[str, Any] | None:
    """The same work with rank_bm25 (k1=0.9, b=0.4), or None when it is not installed."""
    try:
        from rank_bm25 import BM25Okapi
    except ImportError:
        return None
    analyzer = bm25.Analyzer.for_config(bm25.BM25Config())

    def index() -> tuple[Any, list[str], dict[str, str]]:
        documents = list(iter_corpus(corpus))
        terms = [analyzer.terms(f"{d.title} {d.text}") for d in documents]
        texts = {d.doc_id: d.text for d in documents}
        return BM25Okapi(terms, k1=0.9, b=0.4), [d.doc_id for d in documents], texts

    build, (model, doc_ids, texts) = best_of(repeat, index)

    def retrieve() -> dict[str, dict[str, float]]:
        run = {}
        for query in gold.queries:
            scores = model.get_scores(analyzer.terms(query.query))
            best = np.argsort(-scores, kind="stable")[:top_k]
            run[query.query_id] = {doc_ids[i]: float(scores[i]) for i in best if scores[i] > 0}
            _ = [texts[doc_ids[i]] for i in best]  # ours returns the texts too
        return run

    search, run = best_of(repeat, retrieve)
    return {"cold": build, "retrieve": search, "run": run}


def quality(gold: GoldSet, run: dict[str, dict[str, float]]) -> str:
    means = llm_eval.evaluate(gold.qrels(), run, METRICS).means()
    return " / ".join(f"{means[m]:.3f}" for m in METRICS)


def report(corpus: Path, gold: GoldSet, top_k: int, repeat: int) -> None:
    documents = sum(1 for _ in iter_corpus(corpus))
    queries = len(gold.queries)
    print(f"corpus {corpus}: {documents:,} documents; {queries} queries, top {top_k}")
    print(f"bm25s {bm25s.__version__}; best of {repeat}\n")
    a, b = ours(corpus, gold, top_k, repeat), peer(corpus, gold, top_k, repeat)
    print(f"{'':28}{'llm-eval bm25':>15}{'rank_bm25':>15}{'speed-up':>10}")
    rows = [
        ("index build, cold (s)", "cold", 1.0),
        ("index build, warm (s)", "warm", 1.0),
        ("retrieve all queries (s)", "retrieve", 1.0),
        ("  per query (ms)", "retrieve", 1000 / max(queries, 1)),
    ]
    for label, key, scale in rows:
        theirs = b.get(key) if b else None
        cells = f"{a[key] * scale:15.4f}"
        if theirs is None:
            cells += f"{'-':>15}{'-':>10}"
        else:
            cells += f"{theirs * scale:15.4f}{theirs / a[key]:9.1f}x"
        print(f"{label:28}{cells}")
    peer_quality = quality(gold, b["run"]) if b else "-"
    print(f"{'recall@5 / ndcg@10':28}{quality(gold, a['run']):>15}{peer_quality:>15}")
    if b is None:
        print("\nrank_bm25 is not installed (pip install rank_bm25): no peer figures")


def peak_mib(corpus: Path, gold: Path, cache: Path, top_k: int) -> tuple[float, float]:
    """Peak resident MiB of retrieval over the gold file, in a fresh interpreter, and
    the mean latency of its queries (ms)."""
    paths = [str(corpus), str(gold), str(cache)]
    command = [sys.executable, __file__, "--measure-peak", *paths, "--top-k", str(top_k)]
    peak, latency = subprocess.run(
        command, capture_output=True, text=True, check=True
    ).stdout.split()
    return float(peak), float(latency)


def measure_peak(corpus: Path, gold: Path, cache: Path, top_k: int) -> None:
    """(In the fresh interpreter) retrieve, then print the peak MiB."""
    retriever = bm25.build(bm25.BM25Config(), RetrieverContext(corpus, cache))
    run = retriever.retrieve(load_gold([gold]).queries, top_k)
    latencies = [answer.latency_ms or 0.0 for answer in run.queries.values()]
    print(high_water_mib(), sum(latencies) / len(latencies))


def high_water_mib() -> float:
    """This process's peak resident memory. Linux's VmHWM starts afresh at exec;
    getrusage's maxrss keeps the parent's peak at the fork, which hides the child's
    when the parent was larger."""
    status = Path("/proc/self/status")
    if status.exists():
        for line in status.read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def memory(docs: int, queries: int, top_k: int) -> None:
    """Peak memory at two corpus sizes and two query counts, and what each adds."""
    print(f"peak resident memory of retrieval (top {top_k}), a fresh interpreter each\n")
    print(f"{'documents':>10}{'queries':>9}{'peak (MiB)':>12}{'ms a query':>12}")
    peaks = {}
    with tempfile.TemporaryDirectory() as tmp:
        for size in (docs // 2, docs):
            folder = Path(tmp) / str(size)
            folder.mkdir()
            corpus, gold = synthesize(folder, size, 2 * queries)
            lines = gold.read_text("utf-8").splitlines(keepends=True)
            fewer = folder / "fewer.jsonl"
            fewer.write_text("".join(lines[:queries]), "utf-8")
            bm25.build(bm25.BM25Config(), RetrieverContext(corpus, folder / "cache"))
            for count, path in ((queries, fewer), (2 * queries, gold)):
                peaks[size, count], latency = peak_mib(corpus, path, folder / "cache", top_k)
                print(f"{size:10,}{count:9,}{peaks[size, count]:12.0f}{latency:12.2f}")
    per_queries = (peaks[docs, 2 * queries] - peaks[docs, queries]) * 1000 / queries
    per_docs = (peaks[docs, queries] - peaks[docs // 2, queries]) * 100_000 / (docs - docs // 2)
    print(f"\n1,000 more queries add {per_queries:.1f} MiB to the peak (at {docs:,} documents)")
    print(f"100,000 more documents add {per_docs:.0f} MiB to the peak (at {queries:,} queries)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", type=Path, default=Path("gold/corpus.jsonl"))
    parser.add_argument("--gold", nargs="+", default=DEMO_GOLD)
    parser.add_argument("--synthetic", type=int, metavar="DOCS")
    parser.add_argument("--memory", type=int, metavar="DOCS")
    parser.add_argument("--queries", type=int)
    parser.add_argument("--top-k", type=int, default=10)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--measure-peak", nargs=3, type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.measure_peak:
        measure_peak(*args.measure_peak, args.top_k)
    elif args.memory:
        memory(args.memory, args.queries or 1000, args.top_k)
    elif args.synthetic:
        with tempfile.TemporaryDirectory() as folder:
            corpus, gold = synthesize(Path(folder), args.synthetic, args.queries or 300)
            report(corpus, load_gold([gold]), args.top_k, args.repeat)
    else:
        report(args.corpus, load_gold(args.gold), args.top_k, args.repeat)


if __name__ == "__main__":
    main()
