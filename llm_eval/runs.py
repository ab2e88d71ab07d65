"""Runs: the ranked results a retriever returned for each query.

These are the records; `llm_eval.runs_io` reads and writes run files.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal, overload

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


class IdResults(Sequence[RankedResult]):
    """Results that are document ids alone (a run file's `"results": ["id", ...]`),
    kept as their ids: each `RankedResult` is made when it is read. A run of a million
    queries of ten ids would otherwise hold ten million records it never needs."""

    __slots__ = ("doc_ids",)

    def __init__(self, doc_ids: tuple[str, ...]) -> None:
        self.doc_ids = doc_ids

    @overload
    def __getitem__(self, index: int) -> RankedResult: ...

    @overload
    def __getitem__(self, index: slice) -> tuple[RankedResult, ...]: ...

    def __getitem__(self, index: int | slice) -> RankedResult | tuple[RankedResult, ...]:
        if isinstance(index, slice):
            return tuple(map(RankedResult, self.doc_ids[index]))
        return RankedResult(self.doc_ids[index])

    def __len__(self) -> int:
        return len(self.doc_ids)

    def __iter__(self) -> Iterator[RankedResult]:
        return map(RankedResult, self.doc_ids)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, IdResults):
            return self.doc_ids == other.doc_ids
        return isinstance(other, Sequence) and tuple(self) == tuple(other)

    def __hash__(self) -> int:
        return hash(tuple(self))

    def __repr__(self) -> str:
        return repr(tuple(self))


def doc_ids_of(results: Sequence[RankedResult]) -> tuple[str, ...]:
    """The results' document ids in rank order."""
    if isinstance(results, IdResults):
        return results.doc_ids
    return tuple(r.doc_id for r in results)


@dataclass(frozen=True, slots=True)
class QueryResults:
    """The ranked results for one query, best first."""

    query_id: str
    results: Sequence[RankedResult]
    """A tuple, or `IdResults` when the run file gave ids alone."""
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
        return doc_ids_of(self.results)


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
