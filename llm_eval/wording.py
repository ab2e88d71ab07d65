"""Numbers and sentences a reviewer who is not an ML engineer can read.

Proportion metrics that people think of as shares (recall, precision, hit rate,
error rate, rejection accuracy, stale and conflict rates) are shown as percentages
with deltas in percentage points; rank-based
scores (MRR, MAP, nDCG) as decimals; latencies in milliseconds.
"""

from __future__ import annotations

import math

from llm_eval.config import Gate
from llm_eval.gate import GateResult, SliceResult, allowed_change
from llm_eval.metrics import lower_is_better, parse_metric, query_metric
from llm_eval.service import SERVICE_METRICS
from llm_eval.stats import PairedResult, format_p

MINUS = "−"
_PERCENT = {"recall", "precision", "hit_rate"}
_NAMES = {"mrr": "MRR", "map": "MAP", "ndcg": "nDCG", "ndcg_exp": "nDCG(exp)"}


def _is_ms(metric: str) -> bool:
    service = SERVICE_METRICS.get(metric)
    return service is not None and service.unit == "ms"


def is_percent(metric: str) -> bool:
    """Whether the metric reads as a share of queries or documents."""
    if metric in SERVICE_METRICS:
        return SERVICE_METRICS[metric].unit == "share"
    if query_metric(metric) is not None:
        return True
    return parse_metric(metric).family.name in _PERCENT


def display_name(metric: str) -> str:
    """`recall@5`, `MRR`, `nDCG@10`, `hit rate@5`, `latency p95`, `stale rate@5`."""
    if metric in SERVICE_METRICS:
        return metric.replace("_", " ")
    parsed = query_metric(metric) or parse_metric(metric)
    base = _NAMES.get(parsed.family.name, parsed.family.name.replace("_", " "))
    return base if parsed.k is None else f"{base}@{parsed.k}"


def value(metric: str, number: float | None) -> str:
    """`87.0%`, `0.583` or `41.2 ms`; `n/a` when unknown."""
    if number is None or math.isnan(number):
        return "n/a"
    if _is_ms(metric):
        return f"{number:.1f} ms"
    return f"{number * 100:.1f}%" if is_percent(metric) else f"{number:.3f}"


def delta(metric: str, number: float | None) -> str:
    """`+1.5 pp`, `−6.0 pp`, `−0.040` or `+3.2 ms`; `n/a` when unknown."""
    if number is None or math.isnan(number):
        return "n/a"
    sign = "+" if number >= 0 else MINUS
    if _is_ms(metric):
        return f"{sign}{abs(number):.1f} ms"
    if is_percent(metric):
        return f"{sign}{abs(number) * 100:.1f} pp"
    return f"{sign}{abs(number):.3f}"


def limit(metric: str, number: float, relative: bool = False) -> str:
    """A regression limit as the move it allows: `−3.0 pp`, `−0.050`, `+20.0 ms`, `+20%`."""
    if relative:
        return f"+{number * 100:g}%"
    if lower_is_better(metric):
        return delta(metric, number)
    return delta(metric, -number).replace("+", MINUS) if number == 0 else delta(metric, -number)


def subject(metric: str, scope_label: str) -> str:
    """`recall@5 (tier A)`; no parentheses for all queries."""
    name = display_name(metric)
    return name if scope_label == "all queries" else f"{name} ({scope_label})"


def ci_range(metric: str, low: float | None, high: float | None) -> str:
    """`−8.1 to −3.9 pp` or `−0.150 to −0.100`; `n/a` when unknown."""
    if low is None or high is None:
        return "n/a"
    unit = " pp" if is_percent(metric) else ""
    return f"{delta(metric, low).removesuffix(unit)} to {delta(metric, high)}"


def limits_text(
    metric: str, threshold: float | None, regression_max: float | None, relative: bool = False
) -> str:
    """`≥ 38.0%, Δ ≥ −3.0 pp` (or `≤ 200.0 ms, Δ ≤ +20%`); empty when neither is set."""
    compare = "≤" if lower_is_better(metric) else "≥"
    parts = []
    if threshold is not None:
        parts.append(f"{compare} {value(metric, threshold)}")
    if regression_max is not None:
        parts.append(f"Δ {compare} {limit(metric, regression_max, relative)}")
    return ", ".join(parts)


def interval(
    metric: str, test: PairedResult, p_label: str = "", p_value: float | None = None
) -> str:
    """`95% CI −8.1 to −3.9 pp, p < 0.001` (the p-value may be replaced, e.g. Holm's)."""
    p_text = format_p(test.p_value if p_value is None else p_value)
    return f"95% CI {ci_range(metric, test.ci_low, test.ci_high)}, {p_label}{p_text}"


def _judgement(significant: bool | None, significance_on: bool, alpha: float) -> str:
    if significant is None or not significance_on:
        return ""
    if significant:
        return ": significant"
    return f": not significant at alpha {alpha:g}, so it only warns"


def _drop_clause(
    gate: Gate,
    before: float | None,
    after: float,
    test: PairedResult | None,
    judgement: str,
    holm_p: float | None = None,
) -> str:
    """`dropped from A to B (Δ, CI, p): significant; at most −3.0 pp is allowed`."""
    metric = gate.metric
    change = delta(metric, None if before is None else after - before)
    details = change
    if test is not None:
        label = "Holm-adjusted " if holm_p is not None else ""
        details = f"{change}, {interval(metric, test, label, holm_p)}"
    assert gate.regression_max is not None
    allowed = limit(metric, gate.regression_max, gate.regression_relative)
    if gate.regression_relative and before is not None:
        allowed += f" ({delta(metric, allowed_change(gate, before))})"
    verb = "rose" if lower_is_better(metric) else "dropped"
    return (
        f"{verb} from {value(metric, before)} to {value(metric, after)} ({details}){judgement}; "
        f"at most {allowed} is allowed"
    )


def main_check_failed(result: GateResult) -> bool:
    """Whether the gate's own scope (not its tag slices) misses a limit."""
    return (
        result.floor_ok is False
        or result.regression_ok is False
        or result.n == 0
        or math.isnan(result.value)
    )


def sentence(result: GateResult) -> str | None:
    """One plain sentence for a gate whose own scope misses a limit, else None."""
    if not main_check_failed(result):
        return None
    gate = result.gate
    metric = gate.metric
    if result.n == 0 or math.isnan(result.value):
        clauses = ["could not be computed: no scored query in its scope"]
    else:
        clauses = []
        if result.regression_ok is False and gate.regression_max is not None:
            judgement = _judgement(
                result.significant, gate.statistics.significance, gate.statistics.alpha
            )
            clauses.append(
                _drop_clause(gate, result.baseline, result.value, result.test, judgement)
            )
        if result.floor_ok is False and gate.threshold is not None:
            verb = "and is" if clauses else "is"
            where = "above the ceiling" if lower_is_better(metric) else "below the floor"
            clauses.append(
                f"{verb} {value(metric, result.value)}, {where} {value(metric, gate.threshold)}"
            )
    suffix = " (warning)" if gate.severity == "warning" else ""
    return f"{subject(metric, gate.scope.label())} {', '.join(clauses)}{suffix}"


def slice_sentence(result: GateResult, piece: SliceResult) -> str | None:
    """A sentence for a tag slice that is too small to judge or whose drop is too large."""
    gate = result.gate
    metric = gate.metric
    name = subject(metric, f"tag {piece.tag}")
    if not piece.judged:
        return f"{name}: too few queries (n={piece.n}) to judge"
    if not piece.exceeded or gate.regression_max is None:
        return None
    alpha = gate.statistics.alpha
    adjusted = piece.p_adjusted if piece.p_adjusted is not None else math.nan
    significant = adjusted < alpha
    judgement = _judgement(significant, gate.statistics.significance, alpha)
    clause = _drop_clause(gate, piece.baseline, piece.value, piece.test, judgement, adjusted)
    suffix = " (warning)" if gate.severity == "warning" else ""
    return f"{name} {clause}{suffix}"


def power_sentence(result: GateResult) -> str | None:
    """A warning when regression_max is smaller than the scope can detect."""
    power = result.power
    gate = result.gate
    if power is None or gate.regression_max is None:
        return None
    metric = gate.metric
    more = max(0, power.queries_needed - result.n)
    return (
        f"{subject(metric, gate.scope.label())}: with {result.n} queries, drops smaller than "
        f"{delta(metric, power.detectable_drop).lstrip('+')} are not reliably detected (80% "
        f"power, alpha {gate.statistics.alpha:g}), but regression_max is "
        f"{delta(metric, gate.regression_max).lstrip('+')}; about {more} more queries would "
        "be needed"
    )
