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
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True, slots=True)
class ServiceRecord:
    """What one query cost: its latency and whether it failed."""

    latency_ms: float | None
    error: bool = False


def latency_percentile(q: float) -> Callable[[list[ServiceRecord]], float]:
    def aggregate(records: list[ServiceRecord]) -> float:
        latencies = [r.latency_ms for r in records if r.latency_ms is not None and not r.error]
        return float(np.percentile(latencies, q)) if latencies else math.nan

    return aggregate


def error_rate(records: list[ServiceRecord]) -> float:
    return sum(r.error for r in records) / len(records) if records else math.nan
