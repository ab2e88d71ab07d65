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
       [--synthetic DOCS] [--top-k 10] [--repeat 3]
`--synthetic DOCS` writes a random BEIR corpus of DOCS passages and 300 queries to a
temporary folder and benchmarks on it instead. rank_bm25 is optional:
`pip install rank_bm25`.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import bm25s
import numpy as np

import llm_eval
from llm_eval.corpus import iter_corpus
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


def synthesize(folder: Path, docs: int, seed: int = 0) -> tuple[Path, Path]:
    """A BEIR corpus of random Zipf-distributed words and a gold file of queries over it."""
    rng = np.random.default_rng(seed)
    vocabulary = np.array([f"w{i}" for i in range(50_000)])
    corpus, gold = folder / "corpus.jsonl", folder / "gold.jsonl"
    with corpus.open("w", encoding="utf-8") as out:
        for i in range(docs):
            words = vocabulary[(rng.zipf(1.2, rng.integers(20, 200)) - 1) % len(vocabulary)]
            out.write(json.dumps({"_id": f"d{i}", "title": "", "text": " ".join(words)}) + "\n")
    with gold.open("w", encoding="utf-8") as out:
        for q in range(300):
            words = vocabulary[rng.integers(0, 2_000, 5)]
            relevant = {f"d{rng.integers(docs)}": 1}
            record = {"query_id": f"q{q}", "query": " ".join(words), "relevant": relevant}
            out.write(json.dumps(record) + "\n")
    return corpus, gold


def ours(corpus: Path, gold: GoldSet, top_k: int, repeat: int) -> dict[str, Any]:
    """Cold build, warm build and retrieval times of the bm25 retriever, and its run."""
    settings = {name: setting.default for name, setting in bm25.SETTINGS.items()}

    def cold() -> bm25.BM25Retriever:
        with tempfile.TemporaryDirectory() as cache:
            return bm25.build(settings, RetrieverContext(corpus, Path(cache)))

    with tempfile.TemporaryDirectory() as cache:
        context = RetrieverContext(corpus, Path(cache))
        bm25.build(settings, context)
        warm, retriever = best_of(repeat, lambda: bm25.build(settings, context))
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", type=Path, default=Path("gold/corpus.jsonl"))
    parser.add_argument("--gold", nargs="+", default=DEMO_GOLD)
    parser.add_argument("--synthetic", type=int, metavar="DOCS")
    parser.add_argument("--top-k", type=int, default=10)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    if args.synthetic:
        with tempfile.TemporaryDirectory() as folder:
            corpus, gold = synthesize(Path(folder), args.synthetic)
            report(corpus, load_gold([gold]), args.top_k, args.repeat)
    else:
        report(args.corpus, load_gold(args.gold), args.top_k, args.repeat)


if __name__ == "__main__":
    main()
