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
from typing import Any

import numpy as np
import numpy.typing as npt

from llm_eval.criteria import Scope
from llm_eval.gold import GoldQuery
from llm_eval.metrics import parse_metric
from llm_eval.score_columns import IntArray, ScoreColumns
from llm_eval.service_metrics import ServiceRecord

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
    builds: tuple[PerQuery, ...] = ()
    """Each build's own per-query scores when the retriever was built more than once
    (`builds: K`); `per_query` then holds their means. Empty for one build."""

    @property
    def each_build(self) -> tuple[PerQuery, ...]:
        """The per-query scores of every build (`per_query` alone for one build)."""
        return self.builds or (self.per_query,)


def standard_scopes(queries: Sequence[GoldQuery]) -> list[tuple[str, str, Scope]]:
    """`(kind, name, scope)` for all queries, each tier (in file order), each tag (sorted)."""
    scopes = [("overall", "all queries", Scope())]
    scopes += [("tier", t, Scope(tier=t)) for t in dict.fromkeys(q.tier for q in queries)]
    tags = sorted({t for q in queries for t in q.tags})
    return scopes + [("tag", t, Scope(tags=(t,))) for t in tags]


def members(queries: Iterable[GoldQuery], scope: Scope) -> list[str]:
    """Ids of the queries inside a scope (tags match when the query has any of them)."""
    tier, tags = scope.tier, frozenset(scope.tags)
    if tier is not None:
        queries = [q for q in queries if q.tier == tier]
    if len(tags) == 1:  # a tag slice: the common case, and a million queries long
        (tag,) = tags
        return [q.query_id for q in queries if tag in q.tags]
    return [q.query_id for q in queries if not tags or not tags.isdisjoint(q.tags)]


def tag_members(queries: Iterable[GoldQuery], tags: Iterable[str]) -> dict[str, list[str]]:
    """`members(queries, Scope(tags=(tag,)))` of each of the tags, in one pass over the
    queries rather than one a tag: a gate's tag slices over a million queries."""
    wanted: dict[str, list[str]] = {tag: [] for tag in tags}
    lists_of: dict[tuple[str, ...], list[list[str]]] = {}
    for query in queries:
        lists = lists_of.get(query.tags)
        if lists is None:
            tagged = dict.fromkeys(query.tags)
            lists = lists_of[query.tags] = [wanted[tag] for tag in wanted if tag in tagged]
        for ids in lists:
            ids.append(query.query_id)
    return wanted


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
    """Per slice (`overall`, `tier:A`, `tag:x`), every metric's value over its queries.

    The same values as `value_over` on each slice's `members`, from one membership
    mask per slice and one column per metric: each query's row is read once, not once
    per slice. Means are `math.fsum` over the slice's values, as `mean_over` takes them
    (an exactly rounded sum, so the order the queries come in does not change a bit).
    """
    ids = [q.query_id for q in queries]
    at = table.per_query.places(ids) if isinstance(table.per_query, ScoreColumns) else None
    if at is not None:
        scored = at >= 0
    else:
        scored = np.fromiter((q in table.per_query for q in ids), dtype=bool, count=len(ids))
    masks = _scope_masks(queries)
    columns = {m: _Column.of(table, ids, m, at) for m in metrics}
    values = {}
    for name, mask in masks.items():
        values[name] = SliceValues(
            int(np.count_nonzero(mask & scored)),
            {m: column.over(mask) for m, column in columns.items()},
        )
    return values


BoolArray = npt.NDArray[np.bool_]


def _scope_masks(queries: Sequence[GoldQuery]) -> dict[str, BoolArray]:
    """`{"overall"|"tier:A"|"tag:x": mask}` over `queries`, in `standard_scopes`' order.

    The last tuple of queries' are kept: a gate asks for them twice (the slices now and
    the baseline's breakdown), each a pass over every query. They are read, never
    changed; a list may change, and is never kept."""
    if type(queries) is not tuple:
        return _masks_of(queries)
    if _last_masks[0] is not queries:
        _last_masks[:] = [queries, _masks_of(queries)]
    masks: dict[str, BoolArray] = _last_masks[1]
    return masks


_last_masks: list[Any] = [None, {}]
"""The queries last given to `_scope_masks` (held, so that their identity stays theirs)
and their masks."""


def _masks_of(queries: Sequence[GoldQuery]) -> dict[str, BoolArray]:
    """`_scope_masks`, made."""
    tier_codes: dict[str, int] = {}
    tiers = np.fromiter(
        (tier_codes.setdefault(q.tier, len(tier_codes)) for q in queries),
        dtype=np.int64,
        count=len(queries),
    )
    # Queries share a few tuples of tags (the gold reader makes equal ones one): each
    # query is coded by its tuple, and a tag's mask is the codes of the tuples holding it.
    combination_codes: dict[tuple[str, ...], int] = {}
    combinations = np.fromiter(
        (combination_codes.setdefault(q.tags, len(combination_codes)) for q in queries),
        dtype=np.int64,
        count=len(queries),
    )
    holding: dict[str, list[int]] = {}
    for combination, code in combination_codes.items():
        for tag in dict.fromkeys(combination):
            holding.setdefault(tag, []).append(code)
    masks = {"overall": np.ones(len(queries), dtype=bool)}
    masks |= {f"tier:{tier}": tiers == code for tier, code in tier_codes.items()}
    return masks | {f"tag:{tag}": np.isin(combinations, holding[tag]) for tag in sorted(holding)}


@dataclass(frozen=True, slots=True)
class _Column:
    """One metric over the queries in gold order, as `value_over` reads it."""

    metric: str
    present: BoolArray
    """The query has a row holding the metric (a service record, for an aggregate)."""
    values: npt.NDArray[np.float64]
    """Its value (0 where absent), for a mean."""
    weights: npt.NDArray[np.float64] | None
    """Its weight, for a pooled mean."""
    records: Sequence[ServiceRecord | None] | None
    """Each query's service record, for an aggregate (None for a mean)."""

    @classmethod
    def of(
        cls, table: ScoreTable, ids: Sequence[str], metric: str, at: IntArray | None = None
    ) -> _Column:
        """The column of `metric` over `ids` (`at`: their places in the table's
        columns, when it is columns)."""
        parsed = parse_metric(metric)
        if parsed.family.pooling == "aggregate":
            records = [table.service.get(q) for q in ids]
            present = np.fromiter((r is not None for r in records), dtype=bool, count=len(ids))
            return cls(metric, present, np.zeros(len(ids)), None, records)
        weight = parsed.weight_key
        if weight is None and isinstance(table.per_query, ScoreColumns):
            places = table.per_query.places(ids) if at is None else at
            present, values = table.per_query.column_at(metric, places)
            return cls(metric, present, values, None, None)
        rows = [table.per_query.get(q) for q in ids]
        present = np.fromiter(
            (row is not None and metric in row for row in rows), dtype=bool, count=len(ids)
        )
        chosen = [row for row in rows if row is not None and metric in row]
        values = np.zeros(len(ids))
        values[present] = [row[metric] for row in chosen]
        if weight is None:
            return cls(metric, present, values, None, None)
        weights = np.zeros(len(ids))
        weights[present] = [row[weight] for row in chosen]
        return cls(metric, present, values, weights, None)

    def over(self, mask: BoolArray) -> SliceMean:
        """The metric over the queries in `mask` (those without a value left out)."""
        inside = mask & self.present
        if self.records is not None:
            chosen = [self.records[i] for i in np.flatnonzero(inside).tolist()]
            records = [r for r in chosen if r is not None]
            return SliceMean(parse_metric(self.metric).aggregate(records), len(records))
        count = int(np.count_nonzero(inside))
        if count == 0:
            return SliceMean(math.nan, 0)
        values = self.values[inside]
        if self.weights is None:
            return SliceMean(math.fsum(values.tolist()) / count, count)
        weights = self.weights[inside]
        total = math.fsum(weights.tolist())
        weighted = math.fsum((values * weights).tolist())
        return SliceMean(weighted / total if total else math.nan, count)


def breakdown(
    queries: Sequence[GoldQuery], table: ScoreTable, metrics: Sequence[str]
) -> dict[str, dict[str, float | int]]:
    """`{"overall"|"tier:A"|"tag:x": {"n": n, metric: mean, ...}}` for the baseline."""
    return {
        name: {"n": piece.n, **{m: mean.value for m, mean in piece.metrics.items()}}
        for name, piece in slice_values(queries, table, metrics).items()
    }
