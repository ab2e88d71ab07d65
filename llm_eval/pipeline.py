"""The gate's pipeline as library functions: load and validate, retrieve, measure, compare.

    inputs = load_inputs(config_path, criteria_path)
    run = obtain_run(inputs, run_path)
    measurement = measure(inputs, run)
    comparison = compare(inputs, measurement, baseline, allow_gold_change=False)

Each step takes records and returns records; only `load_inputs` and `obtain_run`
touch files or the retriever.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from llm_eval.baseline import Baseline
from llm_eval.config import (
    Criteria,
    EvalConfig,
    Gate,
    Scope,
    check_against_config,
    check_against_gold,
    load_config,
    load_criteria,
)
from llm_eval.errors import ComparisonError, InputError
from llm_eval.evaluation import parse_metrics, score_judgments
from llm_eval.fingerprint import (
    GoldDiff,
    diff_gold,
    digest,
    file_digest,
    gold_fingerprint,
    query_fingerprints,
)
from llm_eval.gate import GateResult, Power, SliceInput, SliceResult, decide, decide_slices
from llm_eval.gold import GoldQuery, GoldSet, load_gold
from llm_eval.judgments import FloatArray, judge_ranked
from llm_eval.metrics import metric_cutoff
from llm_eval.output import plural
from llm_eval.retrievers import Retriever, RetrieverContext, retriever_kind
from llm_eval.runs import Run, load_run
from llm_eval.service import ServiceRecord, is_service_metric
from llm_eval.slices import PerQuery, ScoreTable, members, value_over
from llm_eval.stats import PairedResult, minimum_detectable_drop, paired_tests, queries_needed

DEFAULT_GATING_K = 5


@dataclass(frozen=True, slots=True)
class Inputs:
    """Validated config, criteria and gold set."""

    config: EvalConfig
    criteria: Criteria
    gold: GoldSet

    @property
    def metrics(self) -> tuple[str, ...]:
        """Metrics to compute: the reported ones, then the ones gates need."""
        return tuple(dict.fromkeys([*self.config.metrics, *self.criteria.metrics()]))

    @property
    def gating_k(self) -> int:
        """The cutoff at which a query counts as a hit: the first error gate's, or 5."""
        ordered = sorted(self.criteria.gates, key=lambda g: g.severity != "error")
        for gate in ordered:
            k = metric_cutoff(gate.metric)
            if k is not None:
                return k
        return DEFAULT_GATING_K


def load_inputs(config_path: str | Path, criteria_path: str | Path) -> Inputs:
    """Read config, criteria and gold set; check them against each other before any work."""
    config = load_config(config_path)
    criteria = load_criteria(criteria_path)
    check_against_config(criteria, config)
    gold = load_gold(config.gold)
    check_against_gold(criteria, gold)
    return Inputs(config, criteria, gold)


def obtain_run(inputs: Inputs, run_path: Path | None) -> Run:
    """The precomputed run when given, else the configured retriever's results."""
    if run_path is not None:
        return load_run(run_path)
    return build_retriever(inputs.config).retrieve(inputs.gold.queries, inputs.config.top_k)


def build_retriever(config: EvalConfig) -> Retriever:
    """The configured retriever, ready to answer queries."""
    if config.retriever is None:
        raise InputError(
            "no retriever is configured; add `retriever:` or pass --run", path=config.path
        )
    kind = retriever_kind(config.retriever.kind)
    context = RetrieverContext(config.corpus, config.output / "cache")
    return kind.build(config.retriever.settings, context)


@dataclass(frozen=True, slots=True)
class Measurement:
    """Per-query scores of one run on the gold set."""

    per_query: dict[str, dict[str, float]]
    """`{query_id: {metric: value}}` over queries with a relevant document."""
    service: dict[str, ServiceRecord]
    """Per gold query the run answered: its latency and whether it failed."""
    first_relevant_rank: dict[str, int]
    """`{query_id: rank}`, 0 when no relevant document was retrieved."""
    missing: tuple[str, ...]
    rejection: tuple[str, ...]
    not_in_gold: int
    failed: dict[str, str]
    """`{query_id: error}`: gold queries the retriever failed on, left unscored."""

    @property
    def table(self) -> ScoreTable:
        """The per-query measurements, as slices read them."""
        return ScoreTable(self.per_query, self.service)


def measure(inputs: Inputs, run: Run) -> Measurement:
    """Score every gold query on every metric the report and the gates need."""
    return score_run(inputs.gold, run, inputs.metrics, inputs.config.relevance_level)


def score_run(gold: GoldSet, run: Run, metrics: Sequence[str], relevance_level: int) -> Measurement:
    """Score every gold query of a run on the given metrics.

    Queries the retriever failed on are not scored (a failure is not an empty
    result): they are listed in `failed` and counted by the error_rate metric.
    """
    failed = run.failed()
    qrels = {q: row for q, row in gold.qrels().items() if q not in failed}
    judgments = judge_ranked(qrels, run.ranked(), relevance_level)
    relevance = [m for m in metrics if not is_service_metric(m)]
    scores = score_judgments(judgments, parse_metrics(relevance))
    ranks = judgments.first_relevant_rank().tolist()
    return Measurement(
        per_query=scores.to_dict(),
        service=service_records(gold, run),
        first_relevant_rank=dict(zip(judgments.query_ids, ranks, strict=True)),
        missing=judgments.missing,
        rejection=judgments.rejection,
        not_in_gold=judgments.not_in_gold,
        failed={q: e for q, e in failed.items() if q in gold.by_id()},
    )


def service_records(gold: GoldSet, run: Run) -> dict[str, ServiceRecord]:
    """What each gold query the run answered cost (queries it did not answer have none)."""
    records = {}
    for query in gold.queries:
        answer = run.queries.get(query.query_id)
        if answer is not None:
            records[query.query_id] = ServiceRecord(answer.latency_ms, answer.error is not None)
    return records


def fingerprints(inputs: Inputs, run_path: Path | None) -> dict[str, str | None]:
    """Fingerprints of what a baseline depends on."""
    config = inputs.config
    if run_path is not None:
        retriever: str | None = "run:" + file_digest(run_path)
    elif config.retriever is not None:
        settings = {"kind": config.retriever.kind, **config.retriever.settings}
        retriever = digest({"retriever": settings, "top_k": config.top_k})
    else:
        retriever = None
    gates = [
        {
            "name": g.name,
            "metric": g.metric,
            "threshold": g.threshold,
            "regression_max": g.regression_max,
            "severity": g.severity,
            "scope": g.scope.key(),
        }
        for g in inputs.criteria.gates
    ]
    return {
        "gold": gold_fingerprint(query_fingerprints(inputs.gold)),
        "corpus": file_digest(config.corpus) if config.corpus is not None else None,
        "retriever": retriever,
        "criteria": digest(gates),
    }


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
    if is_service_metric(gate.metric):
        return decide(gate, current.value, current.n, before)  # no paired test for latency
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
        if q in now and q in baseline.per_query and (only is None or q in only)
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
