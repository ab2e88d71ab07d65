"""Comparing a measurement with the baseline: every gate decided, and what moved.

`compare` checks that the comparison is honest (same relevance level, same gold
set unless `--allow-gold-change`), then decides each gate on its scope, with the
paired test, tag slices and power from `llm_eval.gate` and `llm_eval.stats`.
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Iterable, Iterator, Mapping, MutableMapping, Sequence
from dataclasses import dataclass, replace

import numpy as np

from llm_eval.baseline import Baseline, Reference
from llm_eval.bounds import ColumnTest
from llm_eval.builds import BuildSpread, build_spread, joined_test
from llm_eval.criteria import Gate, Statistics
from llm_eval.errors import ComparisonError
from llm_eval.fingerprint import GoldDiff, diff_gold, query_fingerprints
from llm_eval.gate import (
    TOLERANCE,
    DriftResult,
    GateResult,
    LabelCoverage,
    Power,
    SliceInput,
    allowed_change,
    decide,
    decide_drift,
    decide_slices,
    with_drift,
    worsening_pair,
)
from llm_eval.gold import GoldQuery, has_negatives
from llm_eval.inputs import Inputs
from llm_eval.judged.correction import Corrected, correct
from llm_eval.judgments import FloatArray
from llm_eval.metrics import coverage_metric, parse_metric
from llm_eval.power import gate_power
from llm_eval.score_columns import BoolArray, Column, FoundPlaces
from llm_eval.scoring import Measurement
from llm_eval.slices import PerQuery, ScoreTable, members, tag_members, value_over
from llm_eval.stats import (
    MarginTest,
    column_test,
    holm,
    holm_levels,
    tested_margin,
)
from llm_eval.wording.english import listed, plural


@dataclass(frozen=True, slots=True)
class Comparison:
    """Gate results, and what the comparison with the baseline was based on."""

    results: tuple[GateResult, ...]
    gold_diff: GoldDiff | None
    """None without a baseline."""
    compared_on: frozenset[str] | None
    """The queries compared when the gold set changed (None: all of them)."""
    gold_accepted: bool = True
    """False when the gold set changed and the change was not accepted
    (`--allow-gold-change`): the verdict is then `gold_changed`."""


def check_comparable(inputs: Inputs, baseline: Baseline) -> tuple[GoldDiff, frozenset[str] | None]:
    """Refuse comparisons that cannot be honest; say which queries can be compared (None:
    all of them, the gold set is the baseline's)."""
    if baseline.relevance_level != inputs.config.relevance_level:
        raise ComparisonError(
            f"{_baseline_name(baseline)}: relevance_level: the baseline was computed at "
            f"relevance_level {baseline.relevance_level}, the config sets "
            f"{inputs.config.relevance_level}; refresh the baseline"
        )
    current = query_fingerprints(inputs.gold)
    diff = diff_gold(baseline.query_fingerprints, current)
    if diff.empty:
        return diff, None
    return diff, frozenset(diff.unchanged(current))


def describe_diff(diff: GoldDiff) -> str:
    """`2 added: a, b; 1 changed: c`."""
    parts = []
    for label, ids in (("added", diff.added), ("removed", diff.removed), ("changed", diff.changed)):
        if ids:
            parts.append(f"{plural(len(ids), 'query', 'queries')} {label}: {listed(ids)}")
    return "; ".join(parts)


def compare(
    inputs: Inputs,
    measurement: Measurement,
    baseline: Baseline | None,
    allow_gold_change: bool = False,
    references: Mapping[str, Reference] | None = None,
    powers: MutableMapping[str, Power] | None = None,
) -> Comparison:
    """Decide every gate on the current scores and, when there is one, the baseline;
    a gate with `drift_max` also against its reference baseline (`references`, by gate
    name; every such gate needs one). `powers`: the power statements' figures already
    known, by `power.power_key` (those computed are added)."""
    diff, only = (None, None)
    if baseline is not None:
        diff, only = check_comparable(inputs, baseline)
    labels = measurement.judge.labels if measurement.judge is not None else {}
    results = decide_gates(
        inputs.gold.queries,
        inputs.criteria.gates,
        measurement.table,
        baseline,
        only,
        labels,
        inputs.gating_k,
        powers,
    )
    results = tuple(
        _with_reference(inputs, r, measurement.table, (references or {}).get(r.gate.name))
        for r in results
    )
    accepted = allow_gold_change or diff is None or diff.empty
    return Comparison(results, diff, only, accepted)


def _with_reference(
    inputs: Inputs, result: GateResult, now: ScoreTable, reference: Reference | None
) -> GateResult:
    """The gate's result with its drift check, when it sets `drift_max`."""
    if result.gate.drift is None:
        return result
    if reference is None:
        raise result.gate.drift.where.error("no reference baseline was read for this gate")
    return with_drift(result, drift_check(inputs, result.gate, now, reference))


def drift_check(inputs: Inputs, gate: Gate, now: ScoreTable, reference: Reference) -> DriftResult:
    """The gate's scope now against the reference baseline, paired over the queries
    that did not change since, and tested against `drift_max` as the regression check
    is tested against `regression_max`."""
    assert gate.drift is not None
    _, only = check_comparable(inputs, reference.baseline)
    ids = members(inputs.gold.queries, gate.scope)
    piece = _scope(None, ids, gate.metric, now, reference.baseline, only)
    if piece.pairs is None:
        return decide_drift(gate, piece.value, 0, None, None, reference.commit)
    margin = None
    settings = gate.statistics
    if settings.significance and parse_metric(gate.metric).testable:
        before, after = worsening_pair(gate.metric, *piece.pairs)
        span = parse_metric(gate.metric).span
        test = column_test(before, after, settings.alpha, settings.seed, span)
        margin = tested_margin(test, before, after, gate.drift.limit, settings.alpha)
    base = float(piece.pairs[0].mean())
    return decide_drift(gate, piece.value, piece.n, base, margin, reference.commit)


@dataclass(frozen=True, slots=True)
class _Scope:
    """One scope a gate judges: its own (tag None) or one of its tag slices."""

    tag: str | None
    n: int
    value: float
    pairs: tuple[FloatArray, FloatArray] | None
    """Per-query (before, after) scores of the queries scored now, without a baseline None."""
    spread: BuildSpread | None = None
    """How the builds' means spread, when either side was measured on several builds."""


def decide_gates(
    queries: Sequence[GoldQuery],
    gates: Sequence[Gate],
    now: ScoreTable,
    baseline: Baseline | None,
    only: frozenset[str] | None,
    labels: PerQuery | None = None,
    default_k: int = 5,
    powers: MutableMapping[str, Power] | None = None,
) -> tuple[GateResult, ...]:
    """Every gate's verdict. The tests against the limits run batched across gates.
    `labels` are the judged metrics the human labels give per query (`JudgeSummary`):
    a gate on one of them checks its floor on the corrected value. A gate whose value
    moved gets `judged@k` beside it (at its cutoff, else `default_k`), when measured.
    `powers`: as `compare` takes them."""
    found = FoundPlaces()  # each scope's places in the tables, for every gate reading them
    plans = [(gate, _scopes(queries, gate, now, baseline, only, found)) for gate in gates]
    margins = _margin_tests(plans)
    results = []
    for gate, scopes in plans:
        fixed = _corrected(gate, queries, now, only, labels or {})
        result = _decide_gate(gate, scopes, now, baseline, only, queries, margins, fixed, powers)
        coverage = _coverage(result, queries, now, baseline, only, default_k, found)
        results.append(replace(result, coverage=coverage))
    return tuple(results)


def _moved(result: GateResult) -> bool:
    """Whether the gate's value moved from the baseline's."""
    if result.margin is not None:
        return result.margin.changed > 0
    return result.delta is not None and abs(result.delta) > TOLERANCE


def _coverage(
    result: GateResult,
    queries: Sequence[GoldQuery],
    now: ScoreTable,
    baseline: Baseline | None,
    only: frozenset[str] | None,
    default_k: int,
    found: FoundPlaces,
) -> LabelCoverage | None:
    """judged@k over the gate's scored queries, now and at the baseline, when the gate's
    value moved and judged@k was measured."""
    gate = result.gate
    metric = coverage_metric(gate.metric, default_k)
    if metric is None or baseline is None or not _moved(result):
        return None
    in_scope = [q for q in members(queries, gate.scope) if only is None or q in only]
    gated, _ = found.column(now.per_query, gate.metric, in_scope)
    measured, values = found.column(now.per_query, metric, in_scope)
    chosen = gated & measured
    if not chosen.any():
        return None
    ids = [in_scope[i] for i in np.flatnonzero(chosen).tolist()]
    value = float(np.mean(values[chosen]))
    known, before_values = found.column(baseline.per_query, metric, ids)
    before = float(np.mean(before_values)) if known.all() else None
    readable = has_negatives(queries)  # when no query has negatives, none of these has
    if readable:
        by_id = {query.query_id: query for query in queries}
        readable = has_negatives(by_id[q] for q in ids if q in by_id)
    return LabelCoverage(metric, value, before, readable)


def _corrected(
    gate: Gate,
    queries: Sequence[GoldQuery],
    now: ScoreTable,
    only: frozenset[str] | None,
    labels: PerQuery,
) -> Corrected | None:
    """The gate's judged metric over its scope corrected by the human labels, when the
    labels give it."""
    metric = gate.metric
    if not labels:  # the common case: nothing to correct, and no row to read
        return None
    ids = [q for q in members(queries, gate.scope) if only is None or q in only]
    predicted = {q: row[metric] for q in ids if metric in (row := now.per_query.get(q, {}))}
    given = {q: labels[q][metric] for q in predicted if metric in labels.get(q, {})}
    settings = gate.statistics
    return correct(metric, predicted, given, settings.alpha, settings.seed) if given else None


def _scopes(
    queries: Sequence[GoldQuery],
    gate: Gate,
    now: ScoreTable,
    baseline: Baseline | None,
    only: frozenset[str] | None,
    found: FoundPlaces,
) -> list[_Scope]:
    """The gate's own scope, then (with per_tag) each tag's; none for metrics that have
    no paired test (latency percentiles, ratios pooled over positions)."""
    if not parse_metric(gate.metric).pairable:
        return []
    ids = members(queries, gate.scope)
    scopes = [_scope(None, ids, gate.metric, now, baseline, only, found)]
    if gate.per_tag:
        scoped = queries
        if len(ids) < len(queries):  # else every query is in scope
            in_scope = set(ids)
            scoped = [q for q in queries if q.query_id in in_scope]
        tags = gate.per_tag_tags or tuple(sorted({t for q in scoped for t in q.tags}))
        tagged = tag_members(scoped, tags)
        for tag in tags:
            piece = _scope(tag, tagged[tag], gate.metric, now, baseline, only, found)
            if piece.n:
                scopes.append(piece)  # else a tag of rejection queries only
    return scopes


def _scope(
    tag: str | None,
    ids: list[str],
    metric: str,
    now: ScoreTable,
    baseline: Baseline | None,
    only: frozenset[str] | None,
    found: FoundPlaces | None = None,
) -> _Scope:
    paired = _paired(now.per_query, baseline, ids, metric, only, found or FoundPlaces())
    if paired is None:
        current = value_over(now, ids, metric, only)
        return _Scope(tag, current.n, current.value, None)
    assert baseline is not None  # paired queries need one
    chosen, pairs = paired
    spread = None
    if len(baseline.table.each_build) > 1 or len(now.each_build) > 1:  # else none to read
        paired_ids = [ids[i] for i in np.flatnonzero(chosen).tolist()]
        spread = build_spread(baseline.table.each_build, now.each_build, paired_ids, metric)
    # Value and baseline over the same paired queries: a query the retriever failed
    # on now leaves both sides, never only one.
    return _Scope(tag, len(pairs[1]), float(pairs[1].mean()), pairs, spread)


@dataclass(frozen=True, slots=True)
class _Tested:
    """A scope's test against its limit, with its Holm adjustment when it is a slice."""

    margin: MarginTest
    p_adjusted: float | None = None
    level: float | None = None


def _margin_tests(
    plans: Sequence[tuple[Gate, list[_Scope]]],
) -> dict[tuple[str, str | None], _Tested]:
    """The test against the limit of every scope with pairs, keyed (gate name, tag).

    A gate's own scope is tested at alpha. Its judged tag slices (enough queries, some
    change) form one Holm family: their p-values are adjusted together, and each
    slice's interval is drawn at the level that agrees with its adjusted decision
    (`stats.holm_levels`); a slice outside the family keeps an interval at alpha.
    """
    results: dict[tuple[str, str | None], _Tested] = {}
    for gate, scopes in plans:
        settings = gate.statistics
        testable = parse_metric(gate.metric).testable
        if gate.regression_max is None or not testable or not settings.significance:
            continue  # the point estimate decides: no test to run or to report
        span = parse_metric(gate.metric).span
        test_of = functools.partial(_test_of, settings=settings, span=span)

        # A slice of the family keeps its p-value until the family is adjusted, and its
        # test is made again then: a betting test holds 256 bytes a query, and a family
        # of tags over a million queries would hold every tag's at once.
        family: list[tuple[_Scope, FloatArray, FloatArray, float]] = []
        raw: list[float] = []
        for piece in scopes:
            if piece.pairs is None:
                continue
            before, after = worsening_pair(gate.metric, *piece.pairs)
            limit = allowed_change(gate, float(piece.pairs[0].mean()))
            in_family = piece.tag is not None and piece.n >= settings.min_n
            if in_family and np.any(before != after):
                family.append((piece, before, after, limit))
                raw.append(test_of(piece, before, after).p_beyond(limit))
                continue
            margin = _tested(
                piece, test_of(piece, before, after), before, after, limit, settings.alpha
            )
            results[(gate.name, piece.tag)] = _Tested(margin)
        adjusted, levels = holm(raw), holm_levels(raw, settings.alpha)
        for (piece, before, after, limit), p, level in zip(family, adjusted, levels, strict=True):
            margin = _tested(piece, test_of(piece, before, after), before, after, limit, level)
            results[(gate.name, piece.tag)] = _Tested(margin, p, level)
    return results


def _test_of(
    piece: _Scope, before: FloatArray, after: FloatArray, settings: Statistics, span: float
) -> ColumnTest:
    """The test of a scope's pairs against its limit, its builds' spread joined."""
    queries_test = column_test(before, after, settings.alpha, settings.seed, span)
    return joined_test(queries_test, piece.spread, before - after)


def _tested(
    piece: _Scope,
    test: ColumnTest,
    before: FloatArray,
    after: FloatArray,
    limit: float,
    level: float,
) -> MarginTest:
    """`tested_margin`, with the builds it compared when there were several."""
    margin = tested_margin(test, before, after, limit, level)
    spread = piece.spread
    if spread is None:
        return margin
    return replace(
        margin,
        builds=(len(spread.before), len(spread.after)),
        build_sd=spread.sd,
        build_values=spread.after,
    )


def _decide_gate(
    gate: Gate,
    scopes: Sequence[_Scope],
    now: ScoreTable,
    baseline: Baseline | None,
    only: frozenset[str] | None,
    queries: Sequence[GoldQuery],
    margins: Mapping[tuple[str, str | None], _Tested],
    corrected: Corrected | None = None,
    powers: MutableMapping[str, Power] | None = None,
) -> GateResult:
    if not scopes:  # no paired test: the point estimate against the baseline's value
        ids = members(queries, gate.scope)
        current = value_over(now, ids, gate.metric, only)
        base = _baseline_value(baseline, ids, gate.metric, only)
        return decide(gate, current.value, current.n, base, corrected=corrected)
    own, *tags = scopes
    if own.pairs is None:
        return decide(gate, own.value, own.n, None, corrected=corrected)
    base_value = float(own.pairs[0].mean())
    tested = margins.get((gate.name, None))
    margin = None if tested is None else tested.margin
    slices = decide_slices(gate, [_slice_input(gate, piece, margins) for piece in tags])
    result = decide(
        gate,
        own.value,
        own.n,
        base_value,
        slices if gate.per_tag else (),
        margin=margin,
        corrected=corrected,
    )
    power = None
    if gate.regression_max is not None:
        limit = allowed_change(gate, base_value)
        power = gate_power(gate, *own.pairs, limit, known=powers, spread=own.spread)
    return replace(result, power=power)


def _slice_input(
    gate: Gate, piece: _Scope, margins: Mapping[tuple[str, str | None], _Tested]
) -> SliceInput:
    base = None if piece.pairs is None else float(piece.pairs[0].mean())
    assert piece.tag is not None
    tested = margins.get((gate.name, piece.tag))
    if tested is None:
        return SliceInput(piece.tag, piece.n, piece.value, base, None)
    return SliceInput(
        piece.tag, piece.n, piece.value, base, tested.margin, tested.p_adjusted, tested.level
    )


def _baseline_value(
    baseline: Baseline | None, ids: list[str], metric: str, only: frozenset[str] | None
) -> float | None:
    if baseline is None or metric not in baseline.metrics:
        return None
    before = value_over(baseline.table, ids, metric, only)
    return None if before.n == 0 else before.value


def _paired(
    now: PerQuery,
    baseline: Baseline | None,
    ids: Sequence[str],
    metric: str,
    only: frozenset[str] | None,
    found: FoundPlaces,
) -> tuple[BoolArray, tuple[FloatArray, FloatArray]] | None:
    """Which of `ids` are scored now, and their (baseline, now) scores, or None without a
    baseline or without such a query. Every query scored now must have its baseline
    score: a baseline that lacks the metric or a query's row cannot be compared with
    (ComparisonError)."""
    if baseline is None:
        return None
    if metric not in baseline.metrics:
        raise ComparisonError(
            f"{_baseline_name(baseline)}: metrics: the baseline has no {metric!r} "
            "(it was made with other ship criteria); refresh the baseline"
        )
    scored, after = found.column(now, metric, ids)
    if only is not None:
        scored &= np.fromiter((q in only for q in ids), dtype=bool, count=len(ids))
    known, before = found.column(baseline.per_query, metric, ids)
    lacking = [ids[i] for i in np.flatnonzero(scored & ~known).tolist()]
    if lacking:
        raise ComparisonError(
            f"{_baseline_name(baseline)}: per_query: no {metric!r} score for "
            f"{plural(len(lacking), 'query', 'queries')} in scope ({', '.join(lacking[:5])}"
            f"{', …' if len(lacking) > 5 else ''}); refresh the baseline"
        )
    if not scored.any():
        return None
    return scored, (before[scored], after[scored])


def _baseline_name(baseline: Baseline) -> str:
    return baseline.source or "the baseline"


@dataclass(frozen=True, slots=True)
class RankChange:
    """A query that crossed the gating cutoff between the baseline and now."""

    query_id: str
    rank_before: int
    rank_after: int
    """Ranks of the first relevant document; 0 means none was retrieved."""


def _changed_columns(
    before: Column, after: Column, k: int, only: frozenset[str] | None
) -> Iterator[tuple[str, int, int]]:
    """`(query_id, rank before, rank after)` of the queries of `after` (and `only`)
    that `before` ranks too and that crossed the cutoff, in `after`'s order: from the
    columns, without a lookup a query when both list the same queries."""
    ids = after.places.query_ids
    ranks_after = after.array
    if before.places is after.places:
        at = np.arange(len(ids))
    else:
        at = np.fromiter(map(before.places.get, ids, itertools.repeat(-1)), np.int64, len(ids))
    known = at >= 0
    if only is not None:
        known &= np.fromiter((q in only for q in ids), dtype=bool, count=len(ids))
    ranks_before = np.zeros_like(ranks_after)
    ranks_before[known] = before.array[at[known]]
    hit_before = (ranks_before > 0) & (ranks_before <= k)
    crossed = known & (hit_before != ((ranks_after > 0) & (ranks_after <= k)))
    for i in np.flatnonzero(crossed).tolist():
        yield ids[i], int(ranks_before[i]), int(ranks_after[i])


def rank_changes(
    before: Mapping[str, int],
    after: Mapping[str, int],
    k: int,
    only: frozenset[str] | None = None,
) -> tuple[list[RankChange], list[RankChange]]:
    """Queries that went hit→miss and miss→hit at cutoff k, worst drop first."""

    lost: list[RankChange] = []
    gained: list[RankChange] = []
    if isinstance(before, Column) and isinstance(after, Column):
        changes: Iterable[tuple[str, int, int]] = _changed_columns(before, after, k, only)
    else:
        changes = (
            (qid, rank_before, rank_after)
            for qid, rank_after in after.items()
            if (rank_before := before.get(qid)) is not None
            and (only is None or qid in only)
            and (0 < rank_before <= k) != (0 < rank_after <= k)
        )
    for qid, rank_before, rank_after in changes:  # a change is made for these alone
        change = RankChange(qid, rank_before, rank_after)
        (lost if 0 < rank_before <= k else gained).append(change)
    lost.sort(key=lambda c: (c.rank_before, c.query_id))
    gained.sort(key=lambda c: (c.rank_after, c.query_id))
    return lost, gained
