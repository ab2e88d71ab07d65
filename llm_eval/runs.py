"""Runs: the ranked results a retriever returned for each query.

These are the records; `llm_eval.runs_io` reads and writes run files.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

RunFormat = Literal["auto", "jsonl", "trec"]


@dataclass(frozen=True, slots=True)
class RankedResult:
    """One retrieved document at one rank."""

    doc_id: str
    score: float | None = None
    text: str | None = None
    document: str | None = None
    """The source document (e.g. a PDF file name), for page-level matching."""
    page: int | None = None
    """The page in that document."""


@dataclass(frozen=True, slots=True)
class QueryResults:
    """The ranked results for one query, best first."""

    query_id: str
    results: tuple[RankedResult, ...]
    latency_ms: float | None = None
    error: str | None = None
    """Why the retriever failed on this query; a failed query has no results."""
    abstained: bool = False
    """The retriever chose not to answer (for rejection queries)."""
    answer: str | None = None
    """The answer the RAG system generated from these results, when the run has it."""
    cpu_ms: float | None = None
    """The CPU time this process spent answering (all its threads), when the retriever
    ran here one query at a time; None otherwise (a service, a run file, a pool of
    threads, where process time would mix queries). Not written to run files."""
    rerank_failures: tuple[str, ...] = ()
    """Why a second stage (a reranker) could not score pairs of this query, one reason a
    pair; the query kept the first stage's order. Not written to run files."""

    @property
    def doc_ids(self) -> tuple[str, ...]:
        """Document ids in rank order."""
        return tuple(r.doc_id for r in self.results)


@dataclass(frozen=True, slots=True)
class Run:
    """Results per query id."""

    queries: Mapping[str, QueryResults]

    def ranked(self) -> dict[str, tuple[str, ...]]:
        """`{query_id: (doc_id, ...)}` in rank order, the input of `judge_ranked`.

        Failed queries are left out: they have no ranking to judge.
        """
        return {qid: q.doc_ids for qid, q in self.queries.items() if q.error is None}

    def failed(self) -> dict[str, str]:
        """`{query_id: error}` for the queries the retriever failed on."""
        return {qid: q.error for qid, q in self.queries.items() if q.error is not None}

    def rerank_failed(self) -> dict[str, tuple[str, ...]]:
        """`{query_id: reasons}` for the queries with a pair the reranker could not score."""
        return {qid: q.rerank_failures for qid, q in self.queries.items() if q.rerank_failures}
