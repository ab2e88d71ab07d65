"""Metric values over slices of the gold set: overall, per tier, per tag.

Relevance, rejection and context metrics are means of per-query scores (a metric
pooled over positions, stale_rate@k, is the mean weighted by each query's
`positions@k`); service metrics (latency percentiles, error rate) are aggregated
from per-query service records.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from llm_eval.criteria import Scope
from llm_eval.gold import GoldQuery
from llm_eval.metrics import parse_metric
from llm_eval.service import ServiceRecord

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


def standard_scopes(queries: Sequence[GoldQuery]) -> list[tuple[str, str, Scope]]:
    """`(kind, name, scope)` for all queries, each tier (in file order), each tag (sorted)."""
    scopes = [("overall", "all queries", Scope())]
    scopes += [("tier", t, Scope(tier=t)) for t in dict.fromkeys(q.tier for q in queries)]
    tags = sorted({t for q in queries for t in q.tags})
    return scopes + [("tag", t, Scope(tags=(t,))) for t in tags]


def members(queries: Iterable[GoldQuery], scope: Scope) -> list[str]:
    """Ids of the queries inside a scope (tags match when the query has any of them)."""
    return [
        q.query_id
        for q in queries
        if (scope.tier is None or q.tier == scope.tier)
        and (not scope.tags or any(t in q.tags for t in scope.tags))
    ]


def mean_over(
    per_query: PerQuery,
    query_ids: Iterable[str],
    metric: str,
    only: Collection[str] | None = None,
    weight: str | None = None,
) -> SliceMean:
    """Mean of `metric` over the listed queries that were scored (and are in `only`).

    With `weight`, the mean weighted by that entry of each query's row (NaN when the
    weights sum to 0).
    """
    rows = [
        row
        for qid in query_ids
        if (row := per_query.get(qid)) is not None
        and metric in row
        and (only is None or qid in only)
    ]
    if not rows:
        return SliceMean(math.nan, 0)
    if weight is None:
        return SliceMean(math.fsum(row[metric] for row in rows) / len(rows), len(rows))
    total = math.fsum(row[weight] for row in rows)
    weighted = math.fsum(row[metric] * row[weight] for row in rows)
    return SliceMean(weighted / total if total else math.nan, len(rows))


def value_over(
    table: ScoreTable, query_ids: Iterable[str], metric: str, only: Collection[str] | None = None
) -> SliceMean:
    """The metric over the listed queries (and in `only`): a mean, or a service aggregate."""
    parsed = parse_metric(metric)
    if parsed.family.pooling != "aggregate":
        return mean_over(table.per_query, query_ids, metric, only, parsed.weight_key)
    records = [
        table.service[q] for q in query_ids if q in table.service and (only is None or q in only)
    ]
    return SliceMean(parsed.aggregate(records), len(records))


@dataclass(frozen=True, slots=True)
class SliceValues:
    """Every metric over one slice."""

    n: int
    """Queries of the slice scored on any metric."""
    metrics: Mapping[str, SliceMean]
    """Per metric its value and the queries it is over."""


def slice_values(
    queries: Sequence[GoldQuery], table: ScoreTable, metrics: Sequence[str]
) -> dict[str, SliceValues]:
    """Per slice (`overall`, `tier:A`, `tag:x`), every metric's value over its queries."""
    values = {}
    for kind, label, scope in standard_scopes(queries):
        name = kind if kind == "overall" else f"{kind}:{label}"
        ids = members(queries, scope)
        n = sum(1 for q in ids if q in table.per_query)
        values[name] = SliceValues(n, {m: value_over(table, ids, m) for m in metrics})
    return values


def breakdown(
    queries: Sequence[GoldQuery], table: ScoreTable, metrics: Sequence[str]
) -> dict[str, dict[str, float | int]]:
    """`{"overall"|"tier:A"|"tag:x": {"n": n, metric: mean, ...}}` for the baseline."""
    return {
        name: {"n": piece.n, **{m: mean.value for m, mean in piece.metrics.items()}}
        for name, piece in slice_values(queries, table, metrics).items()
    }
