"""Numbers and sentences a reviewer who is not an ML engineer can read.

Proportion metrics that people think of as shares (recall, precision, hit rate) are
shown as percentages with deltas in percentage points; rank-based scores (MRR,
MAP, nDCG) as decimals.
"""

from __future__ import annotations

import math

from llm_eval.gate import GateResult
from llm_eval.metrics import parse_metric

MINUS = "−"
_PERCENT = {"recall", "precision", "hit_rate"}
_NAMES = {"mrr": "MRR", "map": "MAP", "ndcg": "nDCG", "ndcg_exp": "nDCG(exp)"}


def is_percent(metric: str) -> bool:
    """Whether the metric reads as a share of queries or documents."""
    return parse_metric(metric).family.name in _PERCENT


def display_name(metric: str) -> str:
    """`recall@5`, `MRR`, `nDCG@10`, `hit rate@5`."""
    parsed = parse_metric(metric)
    base = _NAMES.get(parsed.family.name, parsed.family.name.replace("_", " "))
    return base if parsed.k is None else f"{base}@{parsed.k}"


def value(metric: str, number: float | None) -> str:
    """`87.0%` or `0.583`; `n/a` when unknown."""
    if number is None or math.isnan(number):
        return "n/a"
    return f"{number * 100:.1f}%" if is_percent(metric) else f"{number:.3f}"


def delta(metric: str, number: float | None) -> str:
    """`+1.5 pp`, `−6.0 pp` or `−0.040`; `n/a` when unknown."""
    if number is None or math.isnan(number):
        return "n/a"
    sign = "+" if number >= 0 else MINUS
    if is_percent(metric):
        return f"{sign}{abs(number) * 100:.1f} pp"
    return f"{sign}{abs(number):.3f}"


def limit(metric: str, number: float) -> str:
    """A regression limit as a drop: `−3.0 pp` or `−0.050`."""
    return delta(metric, -number).replace("+", MINUS) if number == 0 else delta(metric, -number)


def sentence(result: GateResult) -> str:
    """One plain sentence for a gate that is not passing."""
    gate = result.gate
    metric = gate.metric
    subject = display_name(metric)
    if gate.scope.label() != "all queries":
        subject += f" ({gate.scope.label()})"
    if result.n == 0 or math.isnan(result.value):
        clauses = ["could not be computed: no scored query in its scope"]
    else:
        clauses = []
        if result.regression_ok is False and gate.regression_max is not None:
            clauses.append(
                f"dropped from {value(metric, result.baseline)} to {value(metric, result.value)} "
                f"({delta(metric, result.delta)}); at most {limit(metric, gate.regression_max)} "
                "is allowed"
            )
        if result.floor_ok is False and gate.threshold is not None:
            verb = "and is" if clauses else "is"
            clauses.append(
                f"{verb} {value(metric, result.value)}, below the floor "
                f"{value(metric, gate.threshold)}"
            )
    suffix = " (warning)" if gate.severity == "warning" else ""
    return f"{subject} {', '.join(clauses)}{suffix}"
