"""Metrics of the returned ranking itself: how its scores spread, how its order follows
the gold grades (pure).

- `score_discrimination@k`: the coefficient of variation (population standard
  deviation / |mean|) of the scores of the top k results. A retriever whose scores
  are all alike cannot be thresholded or fused by score. Needs at least two scored
  results and a mean other than 0; otherwise the query has no value.
- `rank_correlation@k`: Spearman's rho between the returned order and the gold
  grades of the top k results (a result without a label has grade 0; a unit
  repeated lower in the list counts only at its first rank, as trec_eval counts it).
  Ties get average ranks, as `scipy.stats.spearmanr` gives them. Undefined, so not
  scored, when fewer than two results are returned or all their grades are equal.

A query without a value is left out of the metric's mean, never scored as 0.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from llm_eval.metrics import Metric, parse_metric
from llm_eval.runs import Run


def ranking_metrics(metrics: Sequence[str]) -> list[Metric]:
    """The metrics of kind `ranking` among these names."""
    return [m for m in map(parse_metric, metrics) if m.kind == "ranking"]


def ranking_values(
    run: Run,
    qrels: Mapping[str, Mapping[str, int]],
    ranked: Mapping[str, Sequence[str]],
    metrics: Sequence[str],
) -> dict[str, dict[str, float]]:
    """`{query_id: {metric: value}}` for the gold queries the run answered.

    `qrels` and `ranked` are the matched run's (`llm_eval.matching`): each query's
    credited units and grades, and its results as units in rank order.
    """
    wanted = ranking_metrics(metrics)
    rows: dict[str, dict[str, float]] = {}
    if not wanted:  # no row to make: each query's labels are not read for nothing
        return rows
    for query_id, labels in qrels.items():
        answer = run.queries.get(query_id)
        if answer is None or answer.error is not None:
            continue
        row = {}
        for metric in wanted:
            if metric.family.name == "score_discrimination":
                scores = [r.score for r in answer.results[: metric.k]]
                number = coefficient_of_variation(scores)
            elif labels:  # rank correlation: queries with labels only
                units = list(ranked.get(query_id, ()))[: metric.k]
                number = spearman_with_grades(units, labels)
            else:
                number = None
            if number is not None:
                row[metric.name] = number
        if row:
            rows[query_id] = row
    return rows


def coefficient_of_variation(scores: Sequence[float | None]) -> float | None:
    """std / |mean| of the scores; None with fewer than two, a missing one, or mean 0."""
    if len(scores) < 2 or any(s is None for s in scores):
        return None
    values = np.array(scores, dtype=np.float64)
    mean = float(values.mean())
    if not np.isfinite(values).all() or mean == 0.0:
        return None
    return float(values.std() / abs(mean))


def spearman_with_grades(units: Sequence[str], labels: Mapping[str, int]) -> float | None:
    """Spearman's rho between rank order and grade; None when it is undefined."""
    if len(units) < 2:
        return None
    seen: set[str] = set()
    grades = []
    for unit in units:
        grades.append(labels.get(unit, 0) if unit not in seen else 0)
        seen.add(unit)
    grade = np.array(grades, dtype=np.float64)
    if np.all(grade == grade[0]):
        return None
    # Higher in the list = larger value, so that a ranking sorted by grade gives +1.
    position = -np.arange(len(units), dtype=np.float64)
    return _pearson(_average_ranks(position), _average_ranks(grade))


def _average_ranks(values: np.ndarray) -> np.ndarray:
    """1-based ranks, ties sharing the mean of the ranks they span."""
    order = np.argsort(values, kind="stable")
    ordered = values[order]
    ranks = np.empty(len(values), dtype=np.float64)
    start = 0
    while start < len(values):
        end = start
        while end + 1 < len(values) and ordered[end + 1] == ordered[start]:
            end += 1
        ranks[order[start : end + 1]] = (start + end) / 2 + 1
        start = end + 1
    return ranks


def _pearson(x: np.ndarray, y: np.ndarray) -> float:
    dx, dy = x - x.mean(), y - y.mean()
    return float((dx * dy).sum() / np.sqrt((dx * dx).sum() * (dy * dy).sum()))
