"""Service metrics: latency percentiles and error rate. Lower is better.

They are computed from what the retriever reported per query (latency, or an error
instead of results), over a slice of queries, and gated like relevance metrics with
the direction reversed: `threshold` is a ceiling and `regression_max` the largest
allowed increase (in ms, in share points for error_rate, or relative as `+20%`).
Percentiles use linear interpolation between the closest ranks (numpy's default)
over the queries that answered; a query that failed has no latency.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True, slots=True)
class ServiceRecord:
    """What one query cost: its latency and whether it failed."""

    latency_ms: float | None
    error: bool = False


@dataclass(frozen=True, slots=True)
class ServiceMetric:
    """A registered service metric."""

    name: str
    unit: str
    """`ms` or `share` (a proportion, shown as a percentage)."""
    description: str
    aggregate: Callable[[list[ServiceRecord]], float]


def _percentile(q: float) -> Callable[[list[ServiceRecord]], float]:
    def aggregate(records: list[ServiceRecord]) -> float:
        latencies = [r.latency_ms for r in records if r.latency_ms is not None and not r.error]
        return float(np.percentile(latencies, q)) if latencies else math.nan

    return aggregate


def _error_rate(records: list[ServiceRecord]) -> float:
    return sum(r.error for r in records) / len(records) if records else math.nan


SERVICE_METRICS: dict[str, ServiceMetric] = {
    m.name: m
    for m in (
        ServiceMetric("latency_p50", "ms", "median retrieval latency", _percentile(50)),
        ServiceMetric("latency_p95", "ms", "95th-percentile retrieval latency", _percentile(95)),
        ServiceMetric("latency_p99", "ms", "99th-percentile retrieval latency", _percentile(99)),
        ServiceMetric("error_rate", "share", "share of queries that failed", _error_rate),
    )
}


def is_service_metric(name: str) -> bool:
    """Whether `name` (case-insensitive) is a service metric."""
    return name.strip().lower() in SERVICE_METRICS


def service_value(
    name: str, records: Mapping[str, ServiceRecord], query_ids: Iterable[str]
) -> tuple[float, int]:
    """The metric over the listed queries that have a record, and how many there were."""
    chosen = [records[q] for q in query_ids if q in records]
    return SERVICE_METRICS[name].aggregate(chosen), len(chosen)
