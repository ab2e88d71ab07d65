"""The gate's pipeline as library functions: load and validate, retrieve, measure, compare.

    inputs = load_inputs(config_path, criteria_path)
    run = obtain_run(inputs, run_path)
    measurement = measure(inputs, run)
    comparison = compare(inputs, measurement, baseline, allow_gold_change=False)

Each step takes records and returns records; only `load_inputs` and `obtain_run`
touch files or the retriever.
"""

from __future__ import annotations

import itertools
import math
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
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
from llm_eval.errors import ComparisonError, ExternalError, InputError
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
from llm_eval.matching import Ambiguity, MatchSettings, match_run
from llm_eval.metrics import is_relevance_metric, metric_cutoff, pooling_weight
from llm_eval.output import plural
from llm_eval.rejection import RejectionOutcome, rejection_outcomes, rejection_values
from llm_eval.retrieval_cache import RetrievalCache, retriever_key
from llm_eval.retrievers import Retriever, RetrieverContext, retriever_kind
from llm_eval.retrievers.pool import PooledRetriever
from llm_eval.runs import Run, load_run
from llm_eval.service import ServiceRecord, is_service_metric
from llm_eval.slices import PerQuery, ScoreTable, members, value_over
from llm_eval.stats import PairedResult, minimum_detectable_drop, paired_tests, queries_needed
from llm_eval.versions import ContextReport, Versions, inspect_run, load_versions

DEFAULT_GATING_K = 5


@dataclass(frozen=True, slots=True)
class Inputs:
    """Validated config, criteria and gold set."""

    config: EvalConfig
    criteria: Criteria
    gold: GoldSet
    versions: Versions | None = None
    """The corpus-versions sidecar, when the config names one."""

    @property
    def metrics(self) -> tuple[str, ...]:
        """Metrics to compute: the reported ones, then the ones gates need."""
        return tuple(dict.fromkeys([*self.config.metrics, *self.criteria.metrics()]))

    @property
    def gating_k(self) -> int:
        """The cutoff at which a query counts as a hit: the first error gate's, or 5."""
        ordered = sorted(self.criteria.gates, key=lambda g: g.severity != "error")
        for gate in ordered:
            k = metric_cutoff(gate.metric) if is_relevance_metric(gate.metric) else None
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
    versions = load_versions(config.versions) if config.versions is not None else None
    return Inputs(config, criteria, gold, versions)


@dataclass(frozen=True, slots=True)
class RetrieveOptions:
    """How the configured retriever is run."""

    use_cache: bool = True
    """Answer from the retrieval cache (http and python retrievers), and fill it."""
    repeat: int = 1
    """Run every query this many times, bypassing the cache, to find unstable rankings."""
    progress: Callable[[int, int], None] | None = None
    """Called with (queries done, queries in all) as each query finishes."""


@dataclass(frozen=True, slots=True)
class Retrieval:
    """A run, and how it was obtained."""

    run: Run
    from_cache: int = 0
    """Queries answered from the retrieval cache."""
    repeat: int = 1
    unstable: tuple[str, ...] = ()
    """Queries whose rankings differed between the repeats, in gold order."""


def obtain_run(
    inputs: Inputs, run_path: Path | None, options: RetrieveOptions | None = None
) -> Run:
    """The precomputed run when given, else the configured retriever's results."""
    return obtain_retrieval(inputs, run_path, options).run


def obtain_retrieval(
    inputs: Inputs, run_path: Path | None, options: RetrieveOptions | None = None
) -> Retrieval:
    """`obtain_run`, with what happened while retrieving."""
    if run_path is not None:
        return Retrieval(load_run(run_path))
    return retrieve_gold(inputs.config, inputs.gold.queries, options or RetrieveOptions())


def retrieve_gold(
    config: EvalConfig, queries: Sequence[GoldQuery], options: RetrieveOptions
) -> Retrieval:
    """Run the configured retriever over the queries; ExternalError when too many fail."""
    retriever = build_retriever(config)
    assert config.retriever is not None  # build_retriever says so otherwise
    use_cache = options.use_cache and options.repeat == 1
    cache = _retrieval_cache(config, retriever) if use_cache else None
    done, total = itertools.count(1), len(queries) * options.repeat

    def finished() -> None:
        if options.progress is not None:
            options.progress(next(done), total)

    runs = [
        _retrieve_once(retriever, queries, config.top_k, cache, finished)
        for _ in range(options.repeat)
    ]
    check_error_rate(runs[0], queries, config.retriever.max_error_rate)
    hits = cache.hits if cache is not None else 0
    return Retrieval(runs[0], hits, options.repeat, unstable_queries(runs))


def _retrieve_once(
    retriever: Retriever,
    queries: Sequence[GoldQuery],
    top_k: int,
    cache: RetrievalCache | None,
    finished: Callable[[], None],
) -> Run:
    if isinstance(retriever, PooledRetriever):  # answers query by query: cached, reported
        return retriever.retrieve(queries, top_k, cache, finished)
    run = retriever.retrieve(queries, top_k)
    for _ in queries:
        finished()
    return run


def _retrieval_cache(config: EvalConfig, retriever: Retriever) -> RetrievalCache | None:
    """The cache of a retriever that answers query by query (the others need none)."""
    if not isinstance(retriever, PooledRetriever):
        return None
    corpus = file_digest(config.corpus) if config.corpus is not None else None
    key = retriever_key(retriever.identity, corpus)
    return RetrievalCache(config.output / "cache" / "retrieval" / key)


def check_error_rate(run: Run, queries: Sequence[GoldQuery], limit: float) -> None:
    """ExternalError summarising the errors when more queries failed than `limit` allows."""
    answers = [run.queries.get(q.query_id) for q in queries]
    errors = [a.error for a in answers if a is not None and a.error is not None]
    share = len(errors) / len(queries) if queries else 0.0
    if share > limit:
        shown = f"{share * 100:.1f}".removesuffix(".0")
        raise ExternalError(
            f"retriever failed on {len(errors)} of {plural(len(queries), 'query', 'queries')} "
            f"({shown}% > max_error_rate {limit * 100:g}%): {count_errors(errors)}"
        )


def count_errors(errors: Iterable[str]) -> str:
    """`9 timeout, 3 http 503`: failures by kind (the text before ': '), most first."""
    kinds = Counter(error.split(": ", 1)[0] for error in errors)
    ordered = sorted(kinds.items(), key=lambda item: (-item[1], item[0]))
    return ", ".join(f"{count} {kind}" for kind, count in ordered)


def unstable_queries(runs: Sequence[Run]) -> tuple[str, ...]:
    """Queries whose ranked doc ids differ between runs (failed answers left out)."""
    unstable = []
    for query_id in runs[0].queries:
        answers = [run.queries.get(query_id) for run in runs]
        rankings = {a.doc_ids for a in answers if a is not None and a.error is None}
        if len(rankings) > 1:
            unstable.append(query_id)
    return tuple(unstable)


def retrieval_notes(retrieval: Retrieval) -> list[str]:
    """Sentences about failed queries, the cache and the repeats, for the commands' output."""
    total = len(retrieval.run.queries)
    failed = retrieval.run.failed()
    notes = []
    if failed:
        notes.append(
            f"The retriever failed on {len(failed)} of {plural(total, 'query', 'queries')} "
            f"({count_errors(failed.values())}): {_listed(list(failed))}; they are not "
            "scored, and count in error_rate."
        )
    if retrieval.from_cache:
        notes.append(
            f"{retrieval.from_cache} of {plural(total, 'query', 'queries')} answered from the "
            "retrieval cache (--no-cache asks the retriever again)."
        )
    if retrieval.repeat > 1:
        notes.append(_repeat_note(retrieval.unstable, retrieval.repeat, total))
    return notes


def _repeat_note(unstable: Sequence[str], repeat: int, total: int) -> str:
    if not unstable:
        return f"Rankings were the same in all {repeat} runs of every query."
    return (
        f"Rankings differed between {repeat} runs on {len(unstable)} of "
        f"{plural(total, 'query', 'queries')}: {_listed(unstable)}."
    )


def _listed(query_ids: Sequence[str], shown: int = 20) -> str:
    """`a, b, c and 5 more`."""
    text = ", ".join(query_ids[:shown])
    return text + (f" and {len(query_ids) - shown} more" if len(query_ids) > shown else "")


def build_retriever(config: EvalConfig) -> Retriever:
    """The configured retriever, ready to answer queries."""
    if config.retriever is None:
        raise InputError(
            "no retriever is configured; add `retriever:` or pass --run", path=config.path
        )
    kind = retriever_kind(config.retriever.kind)
    context = RetrieverContext(config.corpus, config.output / "cache")
    try:
        return kind.build(config.retriever.settings, context)
    except InputError as exc:
        raise config.retriever.locate(exc) from None


@dataclass(frozen=True, slots=True)
class Measurement:
    """Per-query scores of one run on the gold set."""

    per_query: dict[str, dict[str, float]]
    """`{query_id: {metric: value}}`: relevance metrics on the queries with a relevant
    document, rejection metrics on the rejection queries, context metrics (and the
    `positions@k` weight of stale_rate@k) on every query the run answered."""
    service: dict[str, ServiceRecord]
    """Per gold query the run answered: its latency and whether it failed."""
    first_relevant_rank: dict[str, int]
    """`{query_id: rank}`, 0 when no relevant document was retrieved."""
    missing: tuple[str, ...]
    rejection: tuple[str, ...]
    not_in_gold: int
    failed: dict[str, str]
    """`{query_id: error}`: gold queries the retriever failed on, left unscored."""
    matched_by: dict[str, str]
    """Per labelled gold query: the matcher that credits its results (id, page, text)."""
    credited: dict[str, int]
    """Per labelled gold query the run answered: the labels a result was credited to."""
    ambiguous: tuple[Ambiguity, ...]
    """Results within the page tolerance of two or more references."""
    rejections: tuple[RejectionOutcome, ...]
    """What the retriever did with each rejection query it did not fail on."""
    context: ContextReport | None
    """Stale hits and conflicts; None without a corpus-versions sidecar."""

    @property
    def table(self) -> ScoreTable:
        """The per-query measurements, as slices read them."""
        return ScoreTable(self.per_query, self.service)


@dataclass(frozen=True, slots=True)
class Scoring:
    """How results are judged beyond document ids."""

    matching: MatchSettings = field(default_factory=MatchSettings)
    rejection_score_threshold: float | None = None
    versions: Versions | None = None
    """Without it, no context metric can be scored."""


def measure(inputs: Inputs, run: Run) -> Measurement:
    """Score every gold query on every metric the report and the gates need."""
    config = inputs.config
    scoring = Scoring(config.matching, config.rejection_score_threshold, inputs.versions)
    return score_run(inputs.gold, run, inputs.metrics, config.relevance_level, scoring)


def score_run(
    gold: GoldSet,
    run: Run,
    metrics: Sequence[str],
    relevance_level: int,
    scoring: Scoring | None = None,
) -> Measurement:
    """Score every gold query of a run on the given metrics.

    Each query's results are credited by its matcher (`llm_eval.matching`: ids, pages
    or passages) and judged as trec_eval judges ids. Rejection and context metrics join
    the rows of the queries they score. Queries the retriever failed on are not scored
    (a failure is not an empty result): they are listed in `failed` and counted by the
    error_rate metric.
    """
    scoring = scoring or Scoring()
    failed = run.failed()
    matched = match_run(gold, run, scoring.matching)
    qrels = {q: row for q, row in matched.qrels.items() if q not in failed}
    judgments = judge_ranked(qrels, matched.ranked, relevance_level)
    relevance = [m for m in metrics if is_relevance_metric(m)]
    per_query = score_judgments(judgments, parse_metrics(relevance)).to_dict()
    rejections = rejection_outcomes(gold, run, scoring.rejection_score_threshold)
    _join_rows(per_query, {o.query_id: rejection_values(o, metrics) for o in rejections})
    context = None
    if scoring.versions is not None:
        rows, context = inspect_run(gold, run, scoring.versions, metrics)
        _join_rows(per_query, rows)
    ranks = judgments.first_relevant_rank().tolist()
    return Measurement(
        per_query=per_query,
        service=service_records(gold, run),
        first_relevant_rank=dict(zip(judgments.query_ids, ranks, strict=True)),
        missing=judgments.missing,
        rejection=judgments.rejection,
        not_in_gold=judgments.not_in_gold,
        failed={q: e for q, e in failed.items() if q in gold.by_id()},
        matched_by=matched.matched_by,
        credited=matched.credited,
        ambiguous=matched.ambiguous,
        rejections=rejections,
        context=context,
    )


def _join_rows(
    per_query: dict[str, dict[str, float]], rows: Mapping[str, dict[str, float]]
) -> None:
    """Add each query's values to its row of scores (queries without values get no row)."""
    for query_id, row in rows.items():
        if row:
            per_query.setdefault(query_id, {}).update(row)


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
