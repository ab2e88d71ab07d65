"""Means of per-query scores over slices of the gold set: overall, per tier, per tag."""

from __future__ import annotations

import math
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass

from llm_eval.config import Scope
from llm_eval.gold import GoldQuery

PerQuery = Mapping[str, Mapping[str, float]]
"""`{query_id: {metric: value}}`."""


@dataclass(frozen=True, slots=True)
class SliceMean:
    """The mean of one metric over the scored queries of a slice."""

    value: float
    n: int


def members(queries: Iterable[GoldQuery], scope: Scope) -> list[str]:
    """Ids of the queries inside a scope (tags match when the query has any of them)."""
    return [
        q.query_id
        for q in queries
        if (scope.tier is None or q.tier == scope.tier)
        and (not scope.tags or any(t in q.tags for t in scope.tags))
    ]


def mean_over(
    per_query: PerQuery, query_ids: Iterable[str], metric: str, only: Collection[str] | None = None
) -> SliceMean:
    """Mean of `metric` over the listed queries that were scored (and are in `only`)."""
    values = [
        row[metric]
        for qid in query_ids
        if (row := per_query.get(qid)) is not None
        and metric in row
        and (only is None or qid in only)
    ]
    if not values:
        return SliceMean(math.nan, 0)
    return SliceMean(math.fsum(values) / len(values), len(values))


def breakdown(
    queries: Sequence[GoldQuery], per_query: PerQuery, metrics: Sequence[str]
) -> dict[str, dict[str, float | int]]:
    """`{"overall"|"tier:A"|"tag:x": {"n": n, metric: mean, ...}}` for the report."""
    scopes: dict[str, Scope] = {"overall": Scope()}
    for tier in dict.fromkeys(q.tier for q in queries):
        scopes[f"tier:{tier}"] = Scope(tier=tier)
    for tag in sorted({t for q in queries for t in q.tags}):
        scopes[f"tag:{tag}"] = Scope(tags=(tag,))
    table: dict[str, dict[str, float | int]] = {}
    for name, scope in scopes.items():
        ids = members(queries, scope)
        row: dict[str, float | int] = {"n": sum(1 for q in ids if q in per_query)}
        for metric in metrics:
            row[metric] = mean_over(per_query, ids, metric).value
        table[name] = row
    return table
