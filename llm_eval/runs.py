"""Runs: the ranked results a retriever returned for each query.

These are the records; `llm_eval.runs_io` reads and writes run files.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, overload

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


_SEPARATOR = "\x00"
"""What `IdResults` joins its ids with; ids that hold it are kept apart instead."""


class IdResults(Sequence[RankedResult]):
    """Results that are document ids alone (a run file's `"results": ["id", ...]`),
    kept as their ids: each `RankedResult` is made when it is read. A run of a million
    queries of ten ids would otherwise hold ten million records it never needs. The ids
    are held as one string, joined by a character no id holds (a tuple when one does):
    ten ids cost about 200 bytes so, against 750 as ten strings and their tuple."""

    __slots__ = ("_ids",)

    def __init__(self, doc_ids: Sequence[str]) -> None:
        joined = _SEPARATOR.join(doc_ids)
        whole = len(doc_ids) > 0 and joined.count(_SEPARATOR) == len(doc_ids) - 1
        self._ids: str | tuple[str, ...] = joined if whole else tuple(doc_ids)

    @property
    def doc_ids(self) -> tuple[str, ...]:
        """The ids in rank order."""
        ids = self._ids
        return tuple(ids.split(_SEPARATOR)) if type(ids) is str else ids  # type: ignore[return-value]

    @overload
    def __getitem__(self, index: int) -> RankedResult: ...

    @overload
    def __getitem__(self, index: slice) -> tuple[RankedResult, ...]: ...

    def __getitem__(self, index: int | slice) -> RankedResult | tuple[RankedResult, ...]:
        if isinstance(index, slice):
            return tuple(map(RankedResult, self.doc_ids[index]))
        return RankedResult(self.doc_ids[index])

    def __len__(self) -> int:
        ids = self._ids
        return len(ids) if isinstance(ids, tuple) else ids.count(_SEPARATOR) + 1

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

    def ranked(self) -> Rankings:
        """`{query_id: (doc_id, ...)}` in rank order, the input of `judge_ranked`, read
        from the results when a query is looked up (a million rankings are not held).

        Failed queries are left out: they have no ranking to judge.
        """
        return Rankings(self.queries)

    def failed(self) -> dict[str, str]:
        """`{query_id: error}` for the queries the retriever failed on."""
        return {qid: q.error for qid, q in self.queries.items() if q.error is not None}

    def rerank_failed(self) -> dict[str, tuple[str, ...]]:
        """`{query_id: reasons}` for the queries with a pair the reranker could not score."""
        return {qid: q.rerank_failures for qid, q in self.queries.items() if q.rerank_failures}


class Rankings(Mapping[str, tuple[str, ...]]):
    """`{query_id: (doc_id, ...)}` of a run's queries that did not fail, each ranking
    made from its results when it is looked up; `units` stands in for the rankings of
    the queries it holds (a matcher's units, `llm_eval.matching`)."""

    __slots__ = ("_queries", "_size", "_units")

    def __init__(
        self,
        queries: Mapping[str, QueryResults],
        units: Mapping[str, tuple[str, ...]] | None = None,
    ) -> None:
        self._queries = queries
        self._units = units or {}
        self._size: int | None = None

    def get(self, query_id: str, default: Any = None) -> Any:  # the one lookup of a miss
        if self._units and (unit := self._units.get(query_id)) is not None:
            return unit
        answer = self._queries.get(query_id)
        if answer is None or answer.error is not None:
            return default
        results = answer.results  # ids alone, the usual run: read without a call between
        return results.doc_ids if type(results) is IdResults else doc_ids_of(results)

    def __getitem__(self, query_id: str) -> tuple[str, ...]:
        found = self.get(query_id)
        if found is None:
            raise KeyError(query_id)
        return found

    def __contains__(self, query_id: object) -> bool:
        answer = self._queries.get(query_id) if isinstance(query_id, str) else None
        return answer is not None and answer.error is None

    def __iter__(self) -> Iterator[str]:
        return (q for q, answer in self._queries.items() if answer.error is None)

    def __len__(self) -> int:
        if self._size is None:
            self._size = sum(1 for answer in self._queries.values() if answer.error is None)
        return self._size
