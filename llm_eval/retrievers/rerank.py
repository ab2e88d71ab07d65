"""Two-stage retrieval: another retriever's candidates, reordered by a reranker.

    retriever:
      kind: rerank
      first: {kind: bm25, k1: 0.9, b: 0.4}     # any other kind
      candidates: 20                           # asked of the first stage
      reranker:
        type: llm                              # or cross-encoder, http (llm_eval.rerankers)
        base_url: http://127.0.0.1:8080/v1
        model: SmolLM2-135M-Instruct
        prompt: prompts/rerank-minimal.txt
        scale: 0-100

The first stage is asked for `candidates` results; the reranker scores each (query,
candidate text) pair, and the candidates are ordered by score, ties in the first
stage's order, and cut to top_k: the reranked list is the retriever's answer, so every
metric, the gate and the comment work on it unchanged. A query on which any pair could
not be scored keeps the first stage's order whole, and the failure is counted with its
reason on stderr (`rerank (llm): … 3 unreadable answer`) and kept with the query's
results (`QueryResults.rerank_failures`) for the report; a query the first stage
failed fails with its error (`timeout (from first): …`).

Scores are cached on disk under `<output>/cache/rerank/`, keyed by the reranker's
identity (its model's files or its endpoint and model, the prompt file's digest, the
scale, the sampling), the query and the document text, so a second run makes no
reranker call. Each cached score keeps what it cost when it was made, and a query's
latency is the first stage's plus the costs of its pairs' scores: a run answered from
the cache reports the latency of the run that scored it, and an experiment compares
the rerankers' costs rather than the cache's speed.
"""

from __future__ import annotations

import os
import sys
import threading
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from llm_eval.digest import digest
from llm_eval.endpoints.cache import read_entry, write_entry
from llm_eval.errors import InputError
from llm_eval.finite import is_finite_number
from llm_eval.gold import GoldQuery
from llm_eval.rerankers import Reranker, RerankerType, Scored, ScorePairs, reranker_type
from llm_eval.rerankers.order import reranked
from llm_eval.retrievers import (
    ResultCache,
    Retriever,
    RetrieverContext,
    RetrieverKind,
    held,
    retriever_kind,
)
from llm_eval.retrievers.fusion import ComponentSettings
from llm_eval.runs import QueryResults, RankedResult, Run
from llm_eval.settings import Setting, checked_settings, whole_check
from llm_eval.wording.english import plural

SCORE_FORMAT = 1
"""Part of every score's key: a new format of the entries leaves the old ones unread."""


def check_first(value: Any) -> str | None:
    """A mapping with a valid kind (not rerank) and its settings."""
    if not isinstance(value, dict) or "kind" not in value:
        return f"must be a retriever: a mapping with a `kind` key, got {value!r}"
    try:
        kind = retriever_kind(str(value["kind"]))
        if kind.name == "rerank":
            return "a rerank cannot rerank another rerank"
        kind.checked({k: v for k, v in value.items() if k != "kind"})
    except InputError as exc:
        return f"{exc.key}: {exc.reason}" if exc.key else exc.reason
    return None


def check_reranker(value: Any) -> str | None:
    """A mapping with a valid `type` and its settings (a prompt file read and checked)."""
    if not isinstance(value, dict) or "type" not in value:
        return f"must be a mapping with a `type` key (cross-encoder, llm, http), got {value!r}"
    try:
        _reranker_record(value)
    except InputError as exc:
        if exc.path is not None:  # about another file (a prompt's text): it names it
            raise
        return f"{exc.key}: {exc.reason}" if exc.key else exc.reason
    return None


def _reranker_record(value: Mapping[str, Any]) -> tuple[RerankerType[Any], object]:
    type_ = reranker_type(str(value["type"]))
    given = {k: v for k, v in value.items() if k != "type"}
    checked = checked_settings(given, type_.settings, environ=os.environ)
    return type_, type_.record(checked)


SETTINGS: Mapping[str, Setting] = {
    "first": Setting(
        None,
        check_first,
        "The first stage: any other retriever, {kind: ..., settings...}.",
        required=True,
        environ=False,  # read by the first stage's own kind
    ),
    "candidates": Setting(20, whole_check(1, 10_000), "Results asked of the first stage."),
    "reranker": Setting(
        None,
        check_reranker,
        "The second stage: {type: cross-encoder | llm | http, settings...}.",
        required=True,
        environ=False,  # read by the reranker's own type
    ),
}


@dataclass(frozen=True, slots=True)
class RerankerSettings:
    """The configured reranker: its type and that type's record."""

    type: RerankerType[Any]
    settings: object
    """The record `type.record` read from the reranker's checked settings."""


@dataclass(frozen=True, slots=True)
class RerankSettings:
    """The checked settings of the rerank kind."""

    first: ComponentSettings
    """The first stage, read by its own kind."""
    candidates: int
    reranker: RerankerSettings

    @classmethod
    def from_checked(cls, values: Mapping[str, Any]) -> RerankSettings:
        """The record of checked settings, each stage's read by its own kind or type."""
        entry = values["first"]
        kind = retriever_kind(str(entry["kind"]))
        first = kind.record(kind.checked({k: v for k, v in entry.items() if k != "kind"}))
        try:
            type_, reranker = _reranker_record(values["reranker"])
        except InputError as exc:
            if exc.path is not None:
                raise
            where = f"{exc.key}: " if exc.key else ""
            raise InputError(f"{where}{exc.reason}", key="reranker") from None
        return cls(
            ComponentSettings("first", kind, first),
            values["candidates"],
            RerankerSettings(type_, reranker),
        )


@dataclass
class Tally:
    """What the reranker did in a run (thread-safe counters)."""

    pairs: int = 0
    scored: int = 0
    """Pairs the reranker was asked about (not in the cache)."""
    cached: int = 0
    failures: Counter[str] = field(default_factory=Counter)
    """Failed pairs by kind (the text before ': ')."""
    examples: dict[str, str] = field(default_factory=dict)
    """The first failure of each kind, whole."""
    kept: int = 0
    """Queries that kept the first stage's order for a failed pair."""
    queries: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def add(self, scores: Sequence[Scored], asked: int, kept: bool) -> None:
        """Count one query's pairs (`asked` of them not from the cache)."""
        with self._lock:
            self.queries += 1
            self.pairs += len(scores)
            self.scored += asked
            self.cached += len(scores) - asked
            self.kept += kept
            for scored in scores:
                if scored.failure is not None:
                    kind = scored.failure.partition(": ")[0]
                    self.failures[kind] += 1
                    self.examples.setdefault(kind, scored.failure)

    @property
    def readable(self) -> int:
        """Pairs with a score."""
        return self.pairs - sum(self.failures.values())

    def line(self, name: str) -> str:
        """One line for stderr: calls, cache, readable share, failures and fallbacks."""
        text = (
            f"rerank ({name}): {plural(self.pairs, 'pair', 'pairs')}, {self.scored} scored now and "
            f"{self.cached} from the cache; {self.readable} of {self.pairs} scored"
        )
        if self.failures:
            counts = ", ".join(f"{n} {kind}" for kind, n in self.failures.most_common())
            first = next(iter(self.examples.values()))
            text += (
                f"; failed: {counts} (first: {first}); {self.kept} of "
                f"{plural(self.queries, 'query', 'queries')} kept the first stage's order"
            )
        return text


@dataclass(frozen=True, slots=True)
class RerankRetriever:
    """The first stage's candidates, reordered by the reranker's cached scores."""

    first: Retriever
    candidates: int
    reranker: Reranker
    type_name: str
    cache_dir: Path | None
    report: Callable[[str], None] | None = None
    """Where the summary line of a session goes (stderr when None)."""

    @property
    def cache_identity(self) -> Mapping[str, Any] | None:
        """Not in the retrieval cache: the score cache keeps what the reranker costs."""
        return None

    def retrieve(
        self,
        queries: Sequence[GoldQuery],
        top_k: int,
        cache: ResultCache | None = None,
        on_done: Callable[[], None] | None = None,
    ) -> Run:
        """The reranked top_k of every query; the summary of the reranker's work after."""
        with self.held() as opened:
            return opened.retrieve(queries, top_k, cache, on_done)

    @contextmanager
    def held(self) -> Iterator[OpenRerank]:
        """This retriever with the first stage's session and the reranker's held open,
        for a caller that asks a few queries at a time; one summary line at the end."""
        tally = Tally()
        with held(self.first) as first, self.reranker.session() as score:
            yield OpenRerank(self, first, score, self.reranker.identity, tally)
        if tally.pairs:
            (self.report or _to_stderr)(tally.line(self.type_name))


@dataclass(frozen=True, slots=True)
class OpenRerank:
    """A `RerankRetriever` whose sessions are open (`RerankRetriever.held`)."""

    owner: RerankRetriever
    first: Retriever
    score: ScorePairs
    identity: Mapping[str, Any]
    tally: Tally

    @property
    def cache_identity(self) -> Mapping[str, Any] | None:
        """Not in the retrieval cache (as the owner)."""
        return None

    def retrieve(
        self,
        queries: Sequence[GoldQuery],
        top_k: int,
        cache: ResultCache | None = None,
        on_done: Callable[[], None] | None = None,
    ) -> Run:
        """The reranked top_k of every query (`cache` is not used: scores have their own)."""
        first = self.first.retrieve(queries, self.owner.candidates)
        answers = {}
        for query in queries:
            answers[query.query_id] = self._rerank(query, first.queries.get(query.query_id), top_k)
            if on_done is not None:
                on_done()
        return Run(answers)

    def _rerank(self, query: GoldQuery, answer: QueryResults | None, top_k: int) -> QueryResults:
        if answer is None:
            return QueryResults(query.query_id, (), error="no answer (from first)")
        if answer.error is not None:
            kind, colon, detail = answer.error.partition(": ")
            error = f"{kind} (from first)" + (f": {detail}" if colon else "")
            return QueryResults(query.query_id, (), answer.latency_ms, error=error)
        candidates = _first_occurrences(answer.results)[: self.owner.candidates]
        scores = self.scores(query.query, candidates)
        results = reranked(candidates, [s.score for s in scores])[:top_k]
        cost = sum(s.cost_ms for s in scores)
        latency = None if answer.latency_ms is None else answer.latency_ms + cost
        failures = tuple(s.failure for s in scores if s.failure is not None)
        return QueryResults(
            query.query_id,
            results,
            latency,
            abstained=answer.abstained and not results,
            rerank_failures=failures,
        )

    def scores(self, query: str, candidates: Sequence[RankedResult]) -> list[Scored]:
        """Each candidate's score: from the cache, else asked (and kept when it is one)."""
        cache_dir = self.owner.cache_dir
        found: dict[int, Scored] = {}
        keys: dict[int, str] = {}
        for number, candidate in enumerate(candidates):
            if candidate.text is None:
                failure = f"no text: {candidate.doc_id} came without text to rerank"
                found[number] = Scored(None, 0.0, failure)
                continue
            keys[number] = score_key(self.identity, query, candidate.text)
            cached = _cached_score(read_entry(cache_dir, keys[number]))
            if cached is not None:
                found[number] = cached
        asked = [n for n in keys if n not in found]
        texts = [str(candidates[n].text) for n in asked]
        for number, scored in zip(asked, self.score(query, texts) if texts else [], strict=True):
            found[number] = scored
            if scored.score is not None:
                entry = {"score": scored.score, "cost_ms": scored.cost_ms}
                write_entry(cache_dir, keys[number], entry)
        scores = [found[n] for n in range(len(candidates))]
        self.tally.add(scores, len(asked), any(s.score is None for s in scores))
        return scores


def score_key(identity: Mapping[str, Any], query: str, text: str) -> str:
    """The score cache's key of one pair under a reranker's identity."""
    return digest({"reranker": identity, "query": query, "text": text, "format": SCORE_FORMAT})


def _cached_score(entry: Any) -> Scored | None:
    """A cached entry as a score; None when missing or damaged (scored again)."""
    if not isinstance(entry, dict):
        return None
    score, cost = entry.get("score"), entry.get("cost_ms")
    if not is_finite_number(score) or not is_finite_number(cost) or cost < 0:
        return None
    return Scored(float(score), float(cost))


def _first_occurrences(results: Sequence[RankedResult]) -> list[RankedResult]:
    seen: set[str] = set()
    kept = []
    for result in results:
        if result.doc_id not in seen:
            seen.add(result.doc_id)
            kept.append(result)
    return kept


def _to_stderr(line: str) -> None:
    print(line, file=sys.stderr)


def build(settings: RerankSettings, context: RetrieverContext) -> RerankRetriever:
    """The first stage and the reranker over it."""
    kind = settings.first.kind
    if kind.needs_corpus and context.corpus_path is None:
        raise InputError(
            f"first: the {kind.name} retriever needs a `corpus` file in the config", key="first"
        )
    first = kind.build(settings.first.settings, context)
    reranker = settings.reranker.type.build(settings.reranker.settings, context.cache_dir)
    return RerankRetriever(
        first,
        settings.candidates,
        reranker,
        settings.reranker.type.name,
        context.cache_dir / "rerank",
    )


def depends_on(settings: RerankSettings, root: Path) -> list[Path]:
    """The first stage's files and the reranker's (its prompt file)."""
    own = settings.reranker.type.files(settings.reranker.settings)
    return settings.first.kind.depends_on(settings.first.settings, root) + own


def elsewhere(settings: RerankSettings) -> str | None:
    """Always a wall-clock comparison: a cached score's cost was measured when it was made."""
    return "a reranker, whose scores' costs were measured when each was made (some cached)"


KIND = RetrieverKind(
    name="rerank",
    description="Two stages: another retriever's candidates, reordered by a reranker.",
    record=RerankSettings.from_checked,
    build=build,
    settings=SETTINGS,
    needs_corpus=False,
    depends_on=depends_on,
    elsewhere=elsewhere,
)
