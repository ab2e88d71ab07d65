"""Slice values from columns are those of each slice's members, to the last bit."""

from __future__ import annotations

import math

import numpy as np
import pytest

from llm_eval.criteria import Scope
from llm_eval.gold import GoldQuery
from llm_eval.service_metrics import ServiceRecord
from llm_eval.slices import (
    ScoreTable,
    SliceMean,
    SliceValues,
    members,
    slice_values,
    standard_scopes,
    tag_members,
    value_over,
)

METRICS = ("recall@5", "mrr", "ndcg@10", "stale_rate@5", "latency_p95", "error_rate")


def query(index: int, tier: str, tags: tuple[str, ...]) -> GoldQuery:
    return GoldQuery(
        query_id=f"q{index}",
        query=f"question {index}",
        tier=tier,
        tags=tags,
        relevant=(("d", 1),),
        is_rejection=False,
        expected_answer=None,
        notes=None,
        path="gold.jsonl",
        line=index + 1,
    )


def random_project(seed: int, size: int) -> tuple[list[GoldQuery], ScoreTable]:
    """Queries with 0 to 5 tags drawn from a long tail of 150 (many held by one query,
    overlapping), in three tiers; rows that lack a metric, queries with no row, weights
    of zero, latencies missing, failures."""
    rng = np.random.default_rng(seed)
    tail = 1.0 / np.arange(1, 151) ** 1.5
    queries, per_query, service = [], {}, {}
    for i in range(size):
        count = int(rng.integers(0, 6))
        tags = tuple(f"t{t}" for t in rng.choice(150, size=count, p=tail / tail.sum()))
        queries.append(query(i, str(rng.choice(["A", "B", "C"])), tags))
        if rng.random() < 0.1:
            continue  # not scored at all
        row = {m: float(rng.random()) for m in METRICS[:3] if rng.random() < 0.9}
        row["mrr"] = 1.0 / int(rng.integers(1, 11)) if "mrr" in row else 0.0
        if rng.random() < 0.7:
            row["stale_rate@5"] = float(rng.random())
            row["positions@5"] = float(rng.integers(0, 6))
        per_query[f"q{i}"] = row
        if rng.random() < 0.9:
            latency = None if rng.random() < 0.05 else float(rng.gamma(2.0, 30.0))
            service[f"q{i}"] = ServiceRecord(latency, bool(rng.random() < 0.1))
    return queries, ScoreTable(per_query, service)


def same(a: SliceMean, b: SliceMean) -> bool:
    """Equal to the bit (NaN equal to NaN)."""
    return a.n == b.n and (a.value == b.value or (math.isnan(a.value) and math.isnan(b.value)))


@pytest.mark.parametrize(("seed", "size"), [(0, 1), (1, 7), (2, 60), (3, 400), (4, 3000)])
def test_slice_values_are_those_of_each_slices_members(seed: int, size: int) -> None:
    queries, table = random_project(seed, size)
    values = slice_values(queries, table, METRICS)
    scopes = standard_scopes(queries)
    assert list(values) == [k if k == "overall" else f"{k}:{name}" for k, name, _ in scopes]
    for (_, _, scope), piece in zip(scopes, values.values(), strict=True):
        ids = members(queries, scope)
        assert piece.n == sum(1 for q in ids if q in table.per_query)
        for metric in METRICS:
            expected = value_over(table, ids, metric)
            assert same(piece.metrics[metric], expected), (scope, metric)


@pytest.mark.parametrize(("seed", "size"), [(0, 1), (1, 7), (2, 60), (3, 3000)])
def test_the_members_of_every_tag_in_one_pass_are_those_of_each_tag(seed: int, size: int) -> None:
    """Tags held twice by a query, tags no query holds, a tag asked for twice."""
    queries, _ = random_project(seed, size)
    queries.append(query(size, "A", ("t1", "t1", "t2")))
    tags = ["t2", "t1", "nobody", *sorted({t for q in queries for t in q.tags}), "t1"]
    tagged = tag_members(queries, tags)
    assert set(tagged) == set(tags)
    for tag in tags:
        assert tagged[tag] == members(queries, Scope(tags=(tag,)))


def test_a_tag_whose_queries_are_not_scored_has_no_value() -> None:
    queries = [query(0, "A", ("only-unscored",)), query(1, "A", ("x", "x")), query(2, "B", ())]
    table = ScoreTable({"q1": {"mrr": 0.5}, "q2": {"mrr": 0.25}})
    values = slice_values(queries, table, ["mrr"])
    assert list(values) == ["overall", "tier:A", "tier:B", "tag:only-unscored", "tag:x"]
    assert values["tag:only-unscored"].n == 0
    assert math.isnan(values["tag:only-unscored"].metrics["mrr"].value)
    assert values["tag:x"].metrics["mrr"] == SliceMean(0.5, 1)
    assert values["overall"].metrics["mrr"] == SliceMean(0.375, 2)


def test_a_pooled_mean_with_no_positions_is_nan() -> None:
    queries = [query(0, "A", ("t",)), query(1, "A", ())]
    table = ScoreTable(
        {
            "q0": {"stale_rate@5": 0.0, "positions@5": 0.0},
            "q1": {"stale_rate@5": 0.5, "positions@5": 4.0},
        }
    )
    values = slice_values(queries, table, ["stale_rate@5"])
    assert math.isnan(values["tag:t"].metrics["stale_rate@5"].value)
    assert values["overall"].metrics["stale_rate@5"] == SliceMean(0.5, 2)


def test_no_queries() -> None:
    values = slice_values([], ScoreTable({}), ["mrr", "error_rate"])
    assert list(values) == ["overall"]
    assert values["overall"].n == 0
    assert values["overall"].metrics["mrr"].n == values["overall"].metrics["error_rate"].n == 0


def test_the_masks_kept_for_a_gold_set_are_never_another_sets() -> None:
    """A gate asks for the slices of one tuple of queries twice, and the masks are
    made once; another tuple, or a list that changed since, gets its own."""
    queries, table = random_project(5, 300)

    def alike(a: dict[str, SliceValues], b: dict[str, SliceValues]) -> bool:
        return list(a) == list(b) and all(
            a[k].n == b[k].n and all(same(a[k].metrics[m], b[k].metrics[m]) for m in METRICS)
            for k in a
        )

    whole = tuple(queries)
    assert alike(slice_values(whole, table, METRICS), slice_values(whole, table, METRICS))
    fewer = tuple(queries[:100])
    assert alike(slice_values(fewer, table, METRICS), slice_values(list(fewer), table, METRICS))
    assert not alike(slice_values(fewer, table, METRICS), slice_values(whole, table, METRICS))
    growing = list(fewer)
    before = slice_values(growing, table, METRICS)
    growing += queries[100:]
    assert alike(slice_values(growing, table, METRICS), slice_values(whole, table, METRICS))
    assert not alike(before, slice_values(growing, table, METRICS))
