"""BM25 over the configured corpus: the embedded default retriever (bm25s + PyStemmer).

The defaults reproduce the BM25 behind the published BEIR baselines (Pyserini's
"flat" indexes: title and text in one field, Lucene's `BM25Similarity` with
k1=0.9, b=0.4, Lucene's `EnglishAnalyzer`), as closely as bm25s allows. One job a
module:

- `settings`: the settings, their checks and `BM25Config`;
- `analyzer`: text to index terms (tokens, stopwords, Porter stemming as Lucene's);
- `index`: the in-memory index and batch ranking (pure);
- `store`: reading the corpus into an index and caching it on disk;
- here: the retriever kind that puts them together.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from llm_eval.errors import ExternalError, InputError
from llm_eval.gold import GoldQuery
from llm_eval.progress import Progress
from llm_eval.retrievers import BatchRetriever, RetrieverContext, RetrieverKind
from llm_eval.retrievers.bm25.analyzer import Analyzer, make_stemmer, porter_measure
from llm_eval.retrievers.bm25.index import Index, IntArray, ScoreArray, rank
from llm_eval.retrievers.bm25.settings import METHODS, SETTINGS, BM25Config
from llm_eval.retrievers.bm25.store import open_index, texts_of
from llm_eval.runs import QueryResults, RankedResult, Run

__all__ = [
    "KIND",
    "METHODS",
    "SETTINGS",
    "Analyzer",
    "BM25Config",
    "BM25Retriever",
    "make_stemmer",
    "porter_measure",
]


@dataclass(frozen=True, slots=True)
class BM25Retriever(BatchRetriever):
    """Answers gold queries from a BM25 index of the corpus."""

    index: Index
    analyzer: Analyzer
    corpus: Path
    folder: Path
    """The index's folder in the cache, which also keeps the documents' texts."""

    def answer_all(self, queries: Sequence[GoldQuery], top_k: int) -> Run:
        """At most `top_k` documents a query, best first, each with its corpus text."""
        if top_k < 1:
            raise ValueError(f"top_k must be at least 1, got {top_k}")
        ranked: list[tuple[IntArray, ScoreArray]] = []
        latencies, cpu = [], []
        try:
            for query in queries:
                # Timed alone, so that latency percentiles describe queries, not a batch's
                # mean; its CPU time too, which a busy machine's scheduler does not stretch.
                started, spent = time.perf_counter(), time.process_time()
                terms = self.index.term_ids(self.analyzer.terms(query.query))
                ranked.append(rank(self.index, terms, top_k))
                latencies.append((time.perf_counter() - started) * 1000)
                cpu.append((time.process_time() - spent) * 1000)
        except MemoryError:
            raise ExternalError(
                f"the bm25 retriever ran out of memory at query {len(ranked) + 1:,} of "
                f"{len(queries):,} over {len(self.index.doc_ids):,} documents (top_k "
                f"{top_k:,}); lower top_k in the config or split the corpus"
            ) from None
        # Passage texts are read from the corpus file once for all queries, not timed:
        # a deployed index keeps them in memory.
        returned = (i for docs, _ in ranked for i in docs.tolist())
        texts = texts_of(self.folder, self.corpus, self.index, returned)
        return Run(
            {
                query.query_id: QueryResults(
                    query.query_id, self._results(docs, scores, texts), latency_ms, cpu_ms=cpu_ms
                )
                for query, (docs, scores), latency_ms, cpu_ms in zip(
                    queries, ranked, latencies, cpu, strict=True
                )
            }
        )

    def _results(
        self, docs: IntArray, scores: ScoreArray, texts: Mapping[str, str]
    ) -> tuple[RankedResult, ...]:
        ids = [self.index.doc_ids[i] for i in docs.tolist()]
        return tuple(
            RankedResult(doc_id, score, texts[doc_id])
            for doc_id, score in zip(ids, scores.tolist(), strict=True)
        )


def build(config: BM25Config, context: RetrieverContext) -> BM25Retriever:
    """Open (or build and cache) the index of the configured corpus."""
    if context.corpus_path is None:
        raise InputError("the bm25 retriever needs a `corpus` file in the config")
    analyzer = Analyzer.for_config(config)
    try:
        with Progress(unit="documents") as progress:
            index, folder = open_index(
                context.corpus_path, config, analyzer, context.cache_dir / "bm25", progress.update
            )
    except MemoryError:
        size = context.corpus_path.stat().st_size / 2**20
        raise ExternalError(
            f"{context.corpus_path}: the bm25 retriever ran out of memory indexing the "
            f"corpus ({size:,.0f} MiB); split the corpus or give the process more memory"
        ) from None
    return BM25Retriever(index, analyzer, context.corpus_path, folder)


KIND = RetrieverKind(
    name="bm25",
    description="Lucene-style BM25 over the corpus (bm25s); the index is cached.",
    record=BM25Config.from_checked,
    build=build,
    settings=SETTINGS,
    needs_corpus=True,
    elsewhere=lambda config: None,
    deterministic=lambda config: True,
)
