"""Retrievers that answer one query at a time (http, python), run on a thread pool.

A kind supplies a `Searcher`: one query in, ranked results and their latency out, or
`QueryFailed` with the error to record. `PooledRetriever` runs it over the gold
queries on `concurrency` threads, answers from the retrieval cache when it is given
one, and reports each query as it finishes (for a progress bar). A query that fails
is recorded with its error and no results, never as an empty result.
"""

from __future__ import annotations

import numbers
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor, as_completed
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, replace
from typing import Any, Protocol

from llm_eval.environment import expand_environment
from llm_eval.finite import is_finite_number
from llm_eval.gold import GoldQuery
from llm_eval.retrievers import Hits, ResultCache
from llm_eval.runs import QueryResults, RankedResult, Run
from llm_eval.settings import Setting, whole_check

RESULT_FIELDS = ("doc_id", "score", "text", "document", "page")
"""What a hit may carry, as in a run file."""
MAX_CONCURRENCY = 256


class QueryFailed(Exception):
    """One query failed; the message is what the run records (`timeout`, `http 503`).

    The text before the first ": " is the kind of failure that summaries count.
    """


Search = Callable[[str, int], Hits]
"""Answers one query text with at most top_k results; raises QueryFailed."""


class Searcher(Protocol):
    """A kind's way of answering one query."""

    def session(self) -> AbstractContextManager[Search]:
        """The search function, with whatever it holds open (a connection pool) meanwhile."""
        ...


@dataclass(frozen=True, slots=True)
class PooledRetriever:
    """Runs a searcher over the gold queries, `concurrency` at a time."""

    searcher: Searcher
    concurrency: int
    cache_identity: Mapping[str, Any]
    """What the results depend on besides the corpus, the query and top_k (no secrets):
    the retrieval cache's key."""

    def retrieve(
        self,
        queries: Sequence[GoldQuery],
        top_k: int,
        cache: ResultCache | None = None,
        on_done: Callable[[], None] | None = None,
    ) -> Run:
        """Every query's results or error, in gold order; `on_done()` after each query."""
        with self.searcher.session() as search:
            return self._run(search, queries, top_k, cache, on_done)

    @contextmanager
    def held(self) -> Iterator[HeldRetriever]:
        """This retriever with its session (a connection pool, a server process) open
        across calls of `retrieve`, for a caller that asks a few queries at a time."""
        with self.searcher.session() as search:
            yield HeldRetriever(self, search)

    def _run(
        self,
        search: Search,
        queries: Sequence[GoldQuery],
        top_k: int,
        cache: ResultCache | None,
        on_done: Callable[[], None] | None,
    ) -> Run:
        answers: dict[str, QueryResults] = {}
        for answer in self._answers(search, queries, top_k, cache):
            answers[answer.query_id] = answer
            if on_done is not None:
                on_done()
        return Run({q.query_id: answers[q.query_id] for q in queries})

    def _answers(
        self,
        search: Search,
        queries: Sequence[GoldQuery],
        top_k: int,
        cache: ResultCache | None,
    ) -> Iterator[QueryResults]:
        def answer(query: GoldQuery) -> QueryResults:
            return answer_query(search, query, top_k, cache)

        if self.concurrency == 1:
            yield from map(answer, queries)
            return
        pool = ThreadPoolExecutor(self.concurrency, thread_name_prefix="llm-eval-retrieve")
        futures: list[Future[QueryResults]] = [pool.submit(answer, q) for q in queries]
        try:
            for future in as_completed(futures):
                # Process time counts every thread: with queries in flight at once it
                # would charge each query the others' work too, so none is kept.
                yield replace(future.result(), cpu_ms=None)
        finally:
            # On Ctrl-C or an error, queued queries are dropped instead of waited for.
            pool.shutdown(wait=False, cancel_futures=True)


@dataclass(frozen=True, slots=True)
class HeldRetriever:
    """A `PooledRetriever` whose session is open (`PooledRetriever.held`)."""

    pooled: PooledRetriever
    search: Search

    @property
    def concurrency(self) -> int:
        """The pool's threads."""
        return self.pooled.concurrency

    @property
    def cache_identity(self) -> Mapping[str, Any]:
        """The pooled retriever's."""
        return self.pooled.cache_identity

    def retrieve(
        self,
        queries: Sequence[GoldQuery],
        top_k: int,
        cache: ResultCache | None = None,
        on_done: Callable[[], None] | None = None,
    ) -> Run:
        """As `PooledRetriever.retrieve`, through the open session."""
        return self.pooled._run(self.search, queries, top_k, cache, on_done)


def answer_query(
    search: Search, query: GoldQuery, top_k: int, cache: ResultCache | None
) -> QueryResults:
    """One query's results: from the cache, else searched (and then cached if it succeeded)."""
    hits = cache.get(query.query, top_k) if cache is not None else None
    if hits is None:
        try:
            hits = search(query.query, top_k)
        except QueryFailed as failure:
            return QueryResults(query.query_id, (), None, str(failure))
        if cache is not None:
            cache.put(query.query, top_k, hits)
    return QueryResults(
        query.query_id,
        hits.results[:top_k],
        hits.latency_ms,
        answer=hits.answer,
        cpu_ms=hits.cpu_ms,
    )


# --- hits from user code and services -------------------------------------------------


def ranked_result(
    get: Callable[[str], Any], where: str, keys: Sequence[str] | None = None
) -> RankedResult:
    """A hit read through `get(field)` (None when absent); QueryFailed naming a bad field.
    `keys`, the hit's own keys where a `fields` setting says where each field is: a
    missing doc id then says what the hit has, and which setting would read it."""
    doc_id = get("doc_id")
    if isinstance(doc_id, numbers.Integral) and not isinstance(doc_id, bool):
        doc_id = str(int(doc_id))
    if doc_id is None and keys is not None:
        raise QueryFailed(f"malformed result: {where}.doc_id missing{_doc_id_hint(keys)}")
    if not isinstance(doc_id, str) or not doc_id:
        raise _malformed(where, "doc_id", "missing or not a non-empty string", doc_id)
    return RankedResult(
        doc_id,
        _optional(get("score"), is_finite_number, float, where, "score", "a finite number"),
        _optional(get("text"), _is_text, str, where, "text", "a string"),
        _optional(get("document"), _is_text, str, where, "document", "a string"),
        _optional(get("page"), _is_whole, int, where, "page", "a whole number"),
    )


_ID_KEYS = ("id", "_id", "docid", "doc", "document_id", "documentId", "docId", "uid", "key")
"""Keys that commonly hold a search service's document id, the likeliest first."""
_KEYS_SHOWN = 8


def _doc_id_hint(keys: Sequence[str]) -> str:
    """` (the service's hits have: id, score); set fields.doc_id: id`."""
    names = [_shown_key(str(key)) for key in keys][:_KEYS_SHOWN]
    more = ", …" if len(keys) > _KEYS_SHOWN else ""
    have = f" (the service's hits have: {', '.join(names)}{more})" if names else " (empty hits)"
    guess = next((key for key in _ID_KEYS if key in keys), None)
    return have + (f"; set fields.doc_id: {guess}" if guess is not None else "")


def _shown_key(key: str) -> str:
    """A key as one short printable word (a service's keys are not trusted)."""
    shown = key if key.isprintable() else repr(key)
    return shown if len(shown) <= 40 else shown[:37] + "..."


def _optional(
    value: Any,
    accept: Callable[[Any], bool],
    convert: Callable[[Any], Any],
    where: str,
    name: str,
    expected: str,
) -> Any:
    if value is None:
        return None
    if not accept(value):
        raise _malformed(where, name, f"must be {expected}", value)
    return convert(value)


def _is_text(value: Any) -> bool:
    return isinstance(value, str)


def _is_whole(value: Any) -> bool:
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def _malformed(where: str, name: str, reason: str, value: Any) -> QueryFailed:
    shown = repr(value)
    shown = shown if len(shown) <= 40 else shown[:37] + "..."
    return QueryFailed(f"malformed result: {where}.{name} {reason}, got {shown}")


# --- settings shared by the per-query kinds -------------------------------------------


check_concurrency = whole_check(1, MAX_CONCURRENCY)
"""A whole number of parallel queries from 1 to MAX_CONCURRENCY."""


def check_cache_key(value: Any) -> str | None:
    """A string (it may hold ${ENV_VAR}), or null."""
    if value is not None and not isinstance(value, str):
        return f"expected a string, got {value!r}"
    return None


CACHE_KEY = Setting(
    None,
    check_cache_key,
    "Part of the retrieval cache's key: change it (e.g. ${INDEX_VERSION}) when the answers "
    "change in ways the cache cannot see.",
    environ=False,  # read where the cache's key is made
)


def resolved_cache_key(value: str | None, environ: Mapping[str, str]) -> str | None:
    """The `cache_key` setting with its environment variables read."""
    if value is None:
        return None
    return expand_environment(value, environ, "the cache_key setting", "cache_key")
