"""Comparing a measurement with the baseline: every gate decided, and what moved.

`compare` checks that the comparison is honest (same relevance level, same gold
set unless `--allow-gold-change`), then decides each gate on its scope, with the
paired test, tag slices and power from `llm_eval.gate` and `llm_eval.stats`.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from llm_eval.baseline import Baseline
from llm_eval.config import (
    Gate,
    Scope,
)
from llm_eval.errors import ComparisonError
from llm_eval.fingerprint import (
    GoldDiff,
    diff_gold,
    query_fingerprints,
)
from llm_eval.gate import GateResult, Power, SliceInput, SliceResult, decide, decide_slices
from llm_eval.gold import GoldQuery
from llm_eval.judgments import FloatArray
from llm_eval.metrics import pooling_weight
from llm_eval.output import plural
from llm_eval.pipeline import Inputs, Measurement
from llm_eval.service import is_service_metric
from llm_eval.slices import PerQuery, ScoreTable, members, value_over
from llm_eval.stats import PairedResult, minimum_detectable_drop, paired_tests, queries_needed


@dataclass(frozen=True, slots=True)
class Comparison:
    """Gate results, and what the comparison with the baseline was based on."""

    results: tuple[GateResult, ...]
    gold_diff: GoldDiff | None
    """None without a baseline."""
    compared_on: frozenset[str] | None
    """The queries compared when the gold set changed (None: all of them)."""


def check_comparable(
    inputs: Inputs, baseline: Baseline, allow_gold_change: bool
) -> tuple[GoldDiff, frozenset[str] | None]:
    """Refuse comparisons that would not be honest; say which queries can be compared."""
    if baseline.relevance_level != inputs.config.relevance_level:
        raise ComparisonError(
            f"the baseline was computed at relevance_level {baseline.relevance_level}, the "
            f"config sets {inputs.config.relevance_level}; refresh the baseline"
        )
    current = query_fingerprints(inputs.gold)
    diff = diff_gold(baseline.query_fingerprints, current)
    if diff.empty:
        return diff, None
    if not allow_gold_change:
        raise ComparisonError(
            f"the gold set differs from the baseline's ({describe_diff(diff)}); refresh the "
            "baseline, or pass --allow-gold-change to compare on the unchanged queries"
        )
    return diff, frozenset(diff.unchanged(current))


def describe_diff(diff: GoldDiff) -> str:
    """`2 added: a, b; 1 changed: c`."""
    parts = []
    for label, ids in (("added", diff.added), ("removed", diff.removed), ("changed", diff.changed)):
        if ids:
            shown = ", ".join(ids[:10]) + (f" and {len(ids) - 10} more" if len(ids) > 10 else "")
            parts.append(f"{plural(len(ids), 'query', 'queries')} {label}: {shown}")
    return "; ".join(parts)


def compare(
    inputs: Inputs,
    measurement: Measurement,
    baseline: Baseline | None,
    allow_gold_change: bool = False,
) -> Comparison:
    """Decide every gate on the current scores and, when there is one, the baseline."""
    diff, only = (None, None)
    if baseline is not None:
        diff, only = check_comparable(inputs, baseline, allow_gold_change)
    results = tuple(
        _decide_gate(inputs.gold.queries, gate, measurement.table, baseline, only)
        for gate in inputs.criteria.gates
    )
    return Comparison(results, diff, only)


def _decide_gate(
    queries: Sequence[GoldQuery],
    gate: Gate,
    now: ScoreTable,
    baseline: Baseline | None,
    only: frozenset[str] | None,
) -> GateResult:
    ids = members(queries, gate.scope)
    current = value_over(now, ids, gate.metric, only)
    before = _baseline_value(baseline, ids, gate.metric, only)
    if is_service_metric(gate.metric) or pooling_weight(gate.metric) is not None:
        # No paired test for latency percentiles or ratios pooled over positions.
        return decide(gate, current.value, current.n, before)
    pairs = _pairs(now.per_query, baseline, ids, gate.metric, only)
    test = _paired_test(gate, pairs)
    slices = _tag_slices(queries, gate, ids, now, baseline, only) if gate.per_tag else ()
    return decide(gate, current.value, current.n, before, test, slices, _power(gate, pairs))


def _baseline_value(
    baseline: Baseline | None, ids: list[str], metric: str, only: frozenset[str] | None
) -> float | None:
    if baseline is None or metric not in baseline.metrics:
        return None
    before = value_over(baseline.table, ids, metric, only)
    return None if before.n == 0 else before.value


def _pairs(
    now: PerQuery,
    baseline: Baseline | None,
    ids: Iterable[str],
    metric: str,
    only: frozenset[str] | None,
) -> tuple[FloatArray, FloatArray] | None:
    """Per-query (before, after) scores of the queries scored in both, or None."""
    if baseline is None or metric not in baseline.metrics:
        return None
    paired = [
        (baseline.per_query[q][metric], now[q][metric])
        for q in ids
        if metric in now.get(q, {})
        and metric in baseline.per_query.get(q, {})
        and (only is None or q in only)
    ]
    if len(paired) < 2:
        return None
    both = np.asarray(paired, dtype=np.float64)
    return both[:, 0], both[:, 1]


def _paired_test(gate: Gate, pairs: tuple[FloatArray, FloatArray] | None) -> PairedResult | None:
    if pairs is None:
        return None
    settings = gate.statistics
    before, after = pairs
    return paired_tests(before, after, resamples=settings.resamples, seed=settings.seed)[0]


def _power(gate: Gate, pairs: tuple[FloatArray, FloatArray] | None) -> Power | None:
    """Set when regression_max is below the drop the scope can detect."""
    if pairs is None or gate.regression_max is None or gate.regression_max <= 0:
        return None
    before = pairs[0]
    alpha = gate.statistics.alpha
    detectable = minimum_detectable_drop(before, alpha=alpha)
    if math.isnan(detectable) or gate.regression_max >= detectable:
        return None
    return Power(detectable, queries_needed(before, gate.regression_max, alpha=alpha))


def _tag_slices(
    queries: Sequence[GoldQuery],
    gate: Gate,
    ids: list[str],
    now: ScoreTable,
    baseline: Baseline | None,
    only: frozenset[str] | None,
) -> tuple[SliceResult, ...]:
    in_scope = set(ids)
    scoped = [q for q in queries if q.query_id in in_scope]
    tags = gate.per_tag_tags or tuple(sorted({t for q in scoped for t in q.tags}))
    inputs = []
    for tag in tags:
        tag_ids = members(scoped, Scope(tags=(tag,)))
        current = value_over(now, tag_ids, gate.metric, only)
        if current.n == 0:
            continue  # a tag of rejection queries only
        before = _baseline_value(baseline, tag_ids, gate.metric, only)
        test = _paired_test(gate, _pairs(now.per_query, baseline, tag_ids, gate.metric, only))
        inputs.append(SliceInput(tag, current.n, current.value, before, test))
    return decide_slices(gate, inputs)


@dataclass(frozen=True, slots=True)
class RankChange:
    """A query that crossed the gating cutoff between the baseline and now."""

    query_id: str
    rank_before: int
    rank_after: int
    """Ranks of the first relevant document; 0 means none was retrieved."""


def rank_changes(
    before: Mapping[str, int],
    after: Mapping[str, int],
    k: int,
    only: frozenset[str] | None = None,
) -> tuple[list[RankChange], list[RankChange]]:
    """Queries that went hit→miss and miss→hit at cutoff k, worst drop first."""

    def hit(rank: int) -> bool:
        return 0 < rank <= k

    lost, gained = [], []
    for qid, rank_after in after.items():
        if qid not in before or (only is not None and qid not in only):
            continue
        change = RankChange(qid, before[qid], rank_after)
        if hit(change.rank_before) and not hit(rank_after):
            lost.append(change)
        elif hit(rank_after) and not hit(change.rank_before):
            gained.append(change)
    lost.sort(key=lambda c: (c.rank_before, c.query_id))
    gained.sort(key=lambda c: (c.rank_after, c.query_id))
    return lost, gained
