"""Retrievers: one interface, one module per kind, one registry.

A retriever turns gold queries into a `Run`. The config names a kind and its
settings; each kind declares its settings so the config is validated (with file,
line and key) before any work starts, and once: `RetrieverKind.checked` checks them
into a mapping (what the config keeps, fingerprints and merges variants over), and the
kind's `record` reads that mapping into a frozen record with a typed field per
setting, the one place a kind's settings are read by name. `build` and the kind's
other functions take the record.

Optional capabilities are part of the interface, with defaults in `BatchRetriever`:
a retriever may answer from a `ResultCache` (it says so with a `cache_identity`)
and reports each finished query through `on_done` (the progress bar). A kind may
read its answers from a file (`answers_file`: the baseline fingerprints its content)
and depend on files in the repository (`depends_on`: the pre-push hook watches them).
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Generic, Protocol, TypeVar

from llm_eval.errors import InputError
from llm_eval.gold import GoldQuery
from llm_eval.runs import RankedResult, Run
from llm_eval.settings import Setting, checked_settings


@dataclass(frozen=True, slots=True)
class Hits:
    """What one search returned."""

    results: tuple[RankedResult, ...]
    latency_ms: float
    answer: str | None = None
    """The answer the RAG system generated from these results, when it returns one
    (judged for faithfulness and answer relevance)."""
    cpu_ms: float | None = None
    """The CPU time this process spent on the search (`time.process_time`, all its
    threads), when the search ran here; None for a service's answer or a cached one."""


class ResultCache(Protocol):
    """Results stored by query text and top_k (see `llm_eval.retrieval_cache`)."""

    def get(self, query: str, top_k: int) -> Hits | None:
        """The stored results, or None."""
        ...

    def put(self, query: str, top_k: int, hits: Hits) -> None:
        """Store the results of a query that succeeded."""
        ...


class Retriever(Protocol):
    """Anything that answers gold queries with ranked results."""

    @property
    def cache_identity(self) -> Mapping[str, Any] | None:
        """What its answers depend on besides the corpus, the query and top_k (no
        secrets): the retrieval cache's key. None: its answers are never cached."""
        ...

    def retrieve(
        self,
        queries: Sequence[GoldQuery],
        top_k: int,
        cache: ResultCache | None = None,
        on_done: Callable[[], None] | None = None,
    ) -> Run:
        """Results for every query, at most `top_k` each, best first; answers from
        `cache` when given one; `on_done()` after each query."""
        ...


class BatchRetriever:
    """The defaults for a retriever that answers all queries at once (bm25, a run file):
    nothing to cache, and every query reported done when the batch is."""

    __slots__ = ()

    @property
    def cache_identity(self) -> Mapping[str, Any] | None:
        """Never cached: answering again costs no more than reading a cache."""
        return None

    def retrieve(
        self,
        queries: Sequence[GoldQuery],
        top_k: int,
        cache: ResultCache | None = None,
        on_done: Callable[[], None] | None = None,
    ) -> Run:
        """The batch's answers (`cache` is not used)."""
        run = self.answer_all(queries, top_k)
        if on_done is not None:
            for _ in queries:
                on_done()
        return run

    def answer_all(self, queries: Sequence[GoldQuery], top_k: int) -> Run:
        """Results for every query, at most `top_k` each, best first."""
        raise NotImplementedError


def held(retriever: Retriever) -> AbstractContextManager[Retriever]:
    """`retriever` with what it opens for each run (a connection pool, a server process)
    kept open across calls of `retrieve`, for a caller that asks a few queries at a
    time: its own `held()` when it has one, else the retriever as it is."""
    hold = getattr(retriever, "held", None)
    if hold is None:
        return nullcontext(retriever)
    found: AbstractContextManager[Retriever] = hold()
    return found


@dataclass(frozen=True, slots=True)
class RetrieverContext:
    """What a retriever may use besides its settings."""

    corpus_path: Path | None
    """The configured corpus (BEIR JSONL), when there is one."""
    cache_dir: Path
    """A folder under the output folder where the retriever may cache (e.g. an index)."""
    build: int = 0
    """Which build of the retriever this is (0 for the first), when it is built several
    times (`builds: K`): a kind that reads its answers from files takes the build's own."""


S = TypeVar("S")
"""A kind's record of its checked settings."""


def _no_file(settings: object) -> Path | None:
    return None


def _no_files(settings: object, root: Path) -> list[Path]:
    return []


def _not_known(settings: object) -> bool:
    return False


def _any_number(settings: object) -> int | None:
    return None


@dataclass(frozen=True, slots=True)
class RetrieverKind(Generic[S]):
    """A registered kind of retriever, whose checked settings it reads into an `S`."""

    name: str
    description: str
    record: Callable[[Mapping[str, Any]], S]
    """Reads checked settings (every declared one present) into the kind's record: the
    only code that reads them by name."""
    build: Callable[[S, RetrieverContext], Retriever]
    """Builds the retriever from the record of its checked settings."""
    settings: Mapping[str, Setting] = field(default_factory=dict)
    needs_corpus: bool = False
    answers_file: Callable[[S], Path | None] = _no_file
    """The file its answers are read from, when they are (a run file): the baseline
    fingerprints the file's content rather than the settings."""
    depends_on: Callable[[S, Path], list[Path]] = _no_files
    """Files inside the repository (given its root) that its answers depend on."""
    check_together: Callable[[S], None] | None = None
    """Checks settings that depend on each other (InputError naming the key), after
    each was checked alone; None: they are independent."""
    elsewhere: Callable[[S], str | None] | None = None
    """None when a retriever of these settings searches in this process (its CPU time
    is its work), else where it searches, in words; unset: in another process."""
    deterministic: Callable[[S], bool] = _not_known
    """Whether every build of a retriever of these settings answers every query the
    same (then one build stands for any number); unset: not known to."""
    builds_held: Callable[[S], int | None] = _any_number
    """How many builds the settings hold answers for (one run file each); None: any
    number can be built."""
    fresh_process: bool = False
    """Whether each of several builds runs in a process of its own, so that state a
    module keeps (a seed fixed at import, a cached index) cannot make builds alike."""

    def searched_elsewhere(self, settings: S) -> str | None:
        """None when a retriever of these settings does its searching in this process,
        else why its work is elsewhere, in words (an experiment's choice of clock)."""
        if self.elsewhere is None:
            return f"an {self.name} retriever, whose work happens in another process"
        return self.elsewhere(settings)

    def checked(
        self, settings: Mapping[str, Any], read: frozenset[str] = frozenset()
    ) -> dict[str, Any]:
        """Every declared setting, given or default, checked; InputError naming a bad one
        (`read`: as `checked_settings`)."""
        values = checked_settings(settings, self.settings, read, environ=os.environ)
        if self.check_together is not None:
            self.check_together(self.record(values))
        return values

    def create(self, settings: Mapping[str, Any], context: RetrieverContext) -> Retriever:
        """The retriever for these settings, checked once here."""
        return self.build(self.record(self.checked(settings)), context)


_KINDS: dict[str, str] = {
    "bm25": "bm25",
    "run": "runfile",
    "http": "http",
    "python": "python",
    "fusion": "fusion",
    "embedding": "embedding",
    "mcp": "mcp",
    "rerank": "rerank",
}
"""Kind name → the module of `llm_eval.retrievers` that defines its `KIND`; imported
only when the kind is asked for, so `--help` loads none of them."""


def retriever_kind(name: str) -> RetrieverKind[Any]:
    """Look up a kind by name; an unknown name is an error listing the valid ones."""
    module = _KINDS.get(name)
    if module is None:
        raise InputError(f"unknown retriever kind {name!r}; valid kinds: {', '.join(_KINDS)}")
    kind: RetrieverKind[Any] = importlib.import_module(f"{__name__}.{module}").KIND
    return kind


def retriever_kinds() -> list[RetrieverKind[Any]]:
    """Every registered kind, in registry order."""
    return [retriever_kind(name) for name in _KINDS]
