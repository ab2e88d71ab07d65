"""Service metrics: latency percentiles and error rate, over what each query cost.

They are registered in `llm_eval.metrics`; lower is better.

They are computed from what the retriever reported per query (latency, or an error
instead of results), over a slice of queries, and gated like relevance metrics with
the direction reversed: `threshold` is a ceiling and `regression_max` the largest
allowed increase (in ms, in share points for error_rate, or relative as `+20%`).
Percentiles use linear interpolation between the closest ranks (numpy's default)
over the queries that answered; a query that failed has no latency.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from llm_eval.score_columns import places_of


@dataclass(frozen=True, slots=True)
class ServiceRecord:
    """What one query cost: its latency and whether it failed."""

    latency_ms: float | None
    error: bool = False


class ServiceColumns(Mapping[str, ServiceRecord]):
    """`{query_id: ServiceRecord}` held as two columns (a latency, NaN for none, and a
    flag per query), each record made when it is read: a million queries' records and
    their floats would take about 130 MB, their columns 9 MB beside the places, which
    the tables of the same queries share (`places_of`)."""

    __slots__ = ("_errors", "_latencies", "_places")

    def __init__(
        self, query_ids: Sequence[str], latencies: Iterable[float | None], errors: Iterable[bool]
    ) -> None:
        self._places = places_of(query_ids)
        size = len(self._places.query_ids)
        read = (math.nan if latency is None else latency for latency in latencies)
        self._latencies = np.fromiter(read, np.float64, size)
        self._errors = np.fromiter(errors, np.bool_, size)

    def __getitem__(self, query_id: str) -> ServiceRecord:
        place = self._places[query_id]
        latency = float(self._latencies[place])
        return ServiceRecord(None if math.isnan(latency) else latency, bool(self._errors[place]))

    def __contains__(self, query_id: object) -> bool:
        return query_id in self._places

    def __iter__(self) -> Iterator[str]:
        return iter(self._places.query_ids)

    def __len__(self) -> int:
        return len(self._places.query_ids)


def latency_percentile(q: float) -> Callable[[list[ServiceRecord]], float]:
    def aggregate(records: list[ServiceRecord]) -> float:
        latencies = [r.latency_ms for r in records if r.latency_ms is not None and not r.error]
        return float(np.percentile(latencies, q)) if latencies else math.nan

    return aggregate


def error_rate(records: list[ServiceRecord]) -> float:
    return sum(r.error for r in records) / len(records) if records else math.nan
