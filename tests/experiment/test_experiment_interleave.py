"""An experiment's variants answer the gold queries in turns, query by query, so that a
burst of load on the machine falls on all of them alike; each still answers exactly as
it does alone."""

from __future__ import annotations

import shutil
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import pytest
from conftest import gold_query

from llm_eval import retrieval
from llm_eval.commands.experiment import plan
from llm_eval.config import EvalConfig
from llm_eval.gold import GoldSet
from llm_eval.gold_io import load_gold
from llm_eval.retrieval import (
    Contender,
    RetrieveOptions,
    interleaved_order,
    retrieve_gold,
    retrieve_interleaved,
)
from llm_eval.retrievers import Hits, ResultCache
from llm_eval.retrievers.fusion import Component, FusionRetriever
from llm_eval.retrievers.pool import PooledRetriever
from llm_eval.runs import QueryResults, RankedResult, Run
from llm_eval.scoring import score_run

REPO = Path(__file__).resolve().parents[2]
DEMO = REPO / "config" / "examples" / "experiment.yaml"


def test_every_round_asks_every_variant_once_in_a_seeded_order() -> None:
    rounds = interleaved_order(4, 10, 1, seed=3)
    assert len(rounds) == 10
    assert all(sorted(order) == [0, 1, 2, 3] for order in rounds)
    # Shuffled, so that no variant always goes first (after another one's warm-up).
    assert len({tuple(order) for order in rounds}) > 1
    assert {order[0] for order in rounds} == {0, 1, 2, 3}
    assert interleaved_order(4, 10, 1, seed=3) == rounds
    assert interleaved_order(4, 10, 1, seed=4) != rounds
    # Blocks of three queries: ceil(10 / 3) rounds.
    assert len(interleaved_order(2, 10, 3, seed=0)) == 4
    with pytest.raises(ValueError):
        interleaved_order(0, 10, 1, seed=0)


@dataclass
class Recording:
    """A retriever that notes which queries it was asked, in which call."""

    name: str
    calls: list[tuple[str, tuple[str, ...]]]
    concurrency: int = 1
    cache_identity: Mapping[str, Any] | None = field(default=None)

    def retrieve(
        self,
        queries: Sequence[Any],
        top_k: int,
        cache: ResultCache | None = None,
        on_done: Callable[[], None] | None = None,
    ) -> Run:
        self.calls.append((self.name, tuple(q.query_id for q in queries)))
        for _ in queries:
            if on_done is not None:
                on_done()
        return Run(
            {
                q.query_id: QueryResults(
                    q.query_id, (RankedResult(f"{self.name}-{q.query_id}"),), 1.0
                )
                for q in queries
            }
        )


def _contenders(names: Sequence[str]) -> list[Contender]:
    base = plan([DEMO]).base
    return [Contender(n, base) for n in names]


def test_variants_take_turns_query_by_query(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[tuple[str, tuple[str, ...]]] = []
    made = iter([Recording("a", calls), Recording("b", calls), Recording("c", calls)])
    monkeypatch.setattr(retrieval, "build_retriever", lambda config: next(made))
    queries = [gold_query(f"q{i}", (("d", 1),)) for i in range(5)]
    progress: list[tuple[int, int]] = []
    runs = retrieve_interleaved(
        _contenders("abc"),
        queries,
        RetrieveOptions(False, 1, lambda done, total: progress.append((done, total))),
        seed=1,
    )
    # All built first, then one query at a time, every variant per query, in the
    # order `interleaved_order` gives.
    expected = [
        ("abc"[v], (f"q{r}",))
        for r, order in enumerate(interleaved_order(3, 5, 1, 1))
        for v in order
    ]
    assert calls == expected
    assert progress == [(i, 15) for i in range(1, 16)]
    assert list(runs) == ["a", "b", "c"]
    assert list(runs["b"].run.queries) == [f"q{i}" for i in range(5)]
    assert runs["b"].run.queries["q3"].results[0].doc_id == "b-q3"


def test_a_pooled_variant_keeps_its_queries_in_flight(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[tuple[str, tuple[str, ...]]] = []
    made = iter([Recording("a", calls), Recording("b", calls, concurrency=2)])
    monkeypatch.setattr(retrieval, "build_retriever", lambda config: next(made))
    queries = [gold_query(f"q{i}", (("d", 1),)) for i in range(5)]
    retrieve_interleaved(_contenders("ab"), queries, RetrieveOptions(False), seed=0)
    # Rounds of two queries, the largest concurrency, for both.
    assert sorted(calls) == sorted(
        [(n, ("q0", "q1")) for n in "ab"]
        + [(n, ("q2", "q3")) for n in "ab"]
        + [(n, ("q4",)) for n in "ab"]
    )
    assert [c[1] for c in calls][::2] == [("q0", "q1"), ("q2", "q3"), ("q4",)]


def test_interleaved_answers_are_those_of_each_variant_alone(
    tmp_path: Path, demo_indexes: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(REPO)
    experiment = plan([DEMO])
    base: EvalConfig = replace(experiment.base, output=tmp_path)
    shutil.copytree(demo_indexes, tmp_path / "cache")
    gold = load_gold(base.gold)
    queries = gold.queries[:60]
    contenders = [
        Contender(v.name, replace(base, retriever=v.retriever, top_k=v.top_k))
        for v in experiment.variants
    ]
    together = retrieve_interleaved(contenders, queries, RetrieveOptions(False), seed=5)
    assert list(together) == [v.name for v in experiment.variants]
    for contender in contenders:
        alone = retrieve_gold(contender.config, queries, RetrieveOptions(False)).run
        mixed = together[contender.name].run
        assert list(mixed.queries) == list(alone.queries)
        for query_id, answer in alone.queries.items():
            other = mixed.queries[query_id]
            assert [(r.doc_id, r.score) for r in other.results] == [
                (r.doc_id, r.score) for r in answer.results
            ], (contender.name, query_id)
            assert other.error == answer.error
            assert other.latency_ms is not None and other.latency_ms > 0
        subset = GoldSet(tuple(queries))
        metrics = ["recall@5", "mrr", "ndcg@10"]
        ours = score_run(subset, mixed, metrics, 1).per_query
        theirs = score_run(subset, alone, metrics, 1).per_query
        assert ours == theirs


@dataclass
class Counting:
    """A searcher that counts the sessions it opens (an http pool, an MCP server)."""

    opened: list[str]
    name: str

    @contextmanager
    def session(self) -> Iterator[Callable[[str, int], Hits]]:
        self.opened.append(self.name)
        yield lambda query, top_k: Hits((RankedResult(f"{self.name}:{query}"),), 1.0)


def test_a_session_stays_open_across_the_turns(monkeypatch: pytest.MonkeyPatch) -> None:
    opened: list[str] = []
    pooled = PooledRetriever(Counting(opened, "http"), 1, {"kind": "test"})
    fused = FusionRetriever(
        (
            Component("a", PooledRetriever(Counting(opened, "a"), 1, {"kind": "a"}), 0.5),
            Component("b", PooledRetriever(Counting(opened, "b"), 1, {"kind": "b"}), 0.5),
        ),
        "rrf",
        60.0,
        "min-max",
        None,
    )
    made = iter([pooled, fused])
    monkeypatch.setattr(retrieval, "build_retriever", lambda config: next(made))
    queries = [gold_query(f"q{i}", (("d", 1),), text=f"text {i}") for i in range(6)]
    runs = retrieve_interleaved(_contenders("pf"), queries, RetrieveOptions(False), seed=0)
    # One session each for the whole run, not one per turn.
    assert sorted(opened) == ["a", "b", "http"]
    assert runs["p"].run.queries["q4"].results[0].doc_id == "http:text 4"
    assert {r.doc_id for r in runs["f"].run.queries["q4"].results} == {"a:text 4", "b:text 4"}
