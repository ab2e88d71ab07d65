"""Metric values over slices of the gold set: overall, per tier, per tag.

Relevance metrics are means of per-query scores; service metrics (latency
percentiles, error rate) are aggregated from per-query service records.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from llm_eval.config import Scope
from llm_eval.gold import GoldQuery
from llm_eval.service import ServiceRecord, is_service_metric, service_value

PerQuery = Mapping[str, Mapping[str, float]]
"""`{query_id: {metric: value}}`."""


@dataclass(frozen=True, slots=True)
class SliceMean:
    """The mean of one metric over the scored queries of a slice."""

    value: float
    n: int


@dataclass(frozen=True, slots=True)
class ScoreTable:
    """Everything measured per query: relevance scores and service records."""

    per_query: PerQuery
    service: Mapping[str, ServiceRecord] = field(default_factory=dict)


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


def value_over(
    table: ScoreTable, query_ids: Iterable[str], metric: str, only: Collection[str] | None = None
) -> SliceMean:
    """The metric over the listed queries (and in `only`): a mean, or a service aggregate."""
    if not is_service_metric(metric):
        return mean_over(table.per_query, query_ids, metric, only)
    chosen = [q for q in query_ids if only is None or q in only]
    value, n = service_value(metric, table.service, chosen)
    return SliceMean(value, n)


def breakdown(
    queries: Sequence[GoldQuery], table: ScoreTable, metrics: Sequence[str]
) -> dict[str, dict[str, float | int]]:
    """`{"overall"|"tier:A"|"tag:x": {"n": n, metric: mean, ...}}` for the report."""
    scopes: dict[str, Scope] = {"overall": Scope()}
    for tier in dict.fromkeys(q.tier for q in queries):
        scopes[f"tier:{tier}"] = Scope(tier=tier)
    for tag in sorted({t for q in queries for t in q.tags}):
        scopes[f"tag:{tag}"] = Scope(tags=(tag,))
    rows: dict[str, dict[str, float | int]] = {}
    for name, scope in scopes.items():
        ids = members(queries, scope)
        row: dict[str, float | int] = {"n": sum(1 for q in ids if q in table.per_query)}
        for metric in metrics:
            row[metric] = value_over(table, ids, metric).value
        rows[name] = row
    return rows
