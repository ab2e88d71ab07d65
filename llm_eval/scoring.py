"""Scoring a run on the gold set: per-query values of every metric (pure).

    measurement = score_run(gold, run, metrics, relevance_level, scoring)

Each query's results are credited by its matcher (ids, pages or passages), judged
as trec_eval judges ids, and joined by the rejection and context values of the
queries they score; nothing here reads a file.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from llm_eval.evaluation import Scores, parse_metrics, score_judgments
from llm_eval.gold import GoldSet
from llm_eval.judged.arithmetic import JudgeSummary
from llm_eval.judgments import judge_ranked
from llm_eval.matching import Ambiguity, MatchSettings, match_run
from llm_eval.metrics import parse_metric
from llm_eval.ranking import ranking_values
from llm_eval.rejection import RejectionOutcome, rejection_outcomes, rejection_values
from llm_eval.runs import Run
from llm_eval.score_columns import Column, ScoreColumns
from llm_eval.service_metrics import ServiceColumns, ServiceRecord
from llm_eval.slices import ScoreTable
from llm_eval.versions import ContextReport, Versions, inspect_run


@dataclass(frozen=True, slots=True)
class Scoring:
    """How results are judged beyond document ids."""

    matching: MatchSettings = field(default_factory=MatchSettings)
    rejection_score_threshold: float | None = None
    versions: Versions | None = None
    """Without it, no context metric can be scored."""


@dataclass(frozen=True, slots=True)
class Measurement:
    """Per-query scores of one run on the gold set."""

    per_query: Mapping[str, Mapping[str, float]]
    """`{query_id: {metric: value}}`: relevance metrics on the queries with a relevant
    document, rejection metrics on the rejection queries, context metrics (and the
    `positions@k` weight of stale_rate@k) on every query the run answered."""
    service: Mapping[str, ServiceRecord]
    """Per gold query the run answered: its latency and whether it failed."""
    first_relevant_rank: Mapping[str, int]
    """`{query_id: rank}`, 0 when no relevant document was retrieved."""
    missing: tuple[str, ...]
    rejection: tuple[str, ...]
    not_in_gold: int
    failed: Mapping[str, str]
    """`{query_id: error}`: gold queries the retriever failed on, left unscored."""
    matched_by: Mapping[str, str]
    """Per labelled gold query: the matcher that credits its results (id, page, text)."""
    credited: Mapping[str, int]
    """Per labelled gold query the run answered: the labels a result was credited to."""
    ambiguous: tuple[Ambiguity, ...]
    """Results within the page tolerance of two or more references."""
    rejections: tuple[RejectionOutcome, ...]
    """What the retriever did with each rejection query it did not fail on."""
    context: ContextReport | None
    """Stale hits and conflicts; None without a corpus-versions sidecar."""
    judge: JudgeSummary | None = None
    """The judge's cost and agreement with the gold labels; None when nothing was judged."""
    builds: tuple[Mapping[str, Mapping[str, float]], ...] = ()
    """Each build's per-query scores when the retriever was built more than once;
    `per_query` then holds their means, and the other fields are the first build's."""
    rerank_failed: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    """`{query_id: reasons}`: gold queries with pairs a reranker could not score (each
    kept the first stage's order, and is scored on it)."""

    @property
    def table(self) -> ScoreTable:
        """The per-query measurements, as slices read them."""
        return ScoreTable(self.per_query, self.service, self.builds)


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
    qrels = matched.qrels.without(failed) if failed else matched.qrels
    judgments = judge_ranked(qrels, matched.ranked, relevance_level)
    relevance = [m for m in metrics if parse_metric(m).kind == "relevance"]
    scores = score_judgments(judgments, parse_metrics(relevance))
    rejections = rejection_outcomes(gold, run, scoring.rejection_score_threshold)
    joined = [
        {o.query_id: rejection_values(o, metrics) for o in rejections},
        ranking_values(run, qrels, matched.ranked, metrics),
    ]
    context = None
    if scoring.versions is not None:
        rows, context = inspect_run(gold, run, scoring.versions, metrics)
        joined.append(rows)
    per_query = _per_query(scores, joined)
    rerank_failed = run.rerank_failed()
    # Which failures are gold queries', asked only when there are some (a dict of a
    # million gold ids would otherwise be made at the gate's peak).
    gold_ids = gold.by_id() if failed or rerank_failed else {}
    return Measurement(
        per_query=per_query,
        service=service_records(gold, run),
        first_relevant_rank=Column(judgments.query_ids, judgments.first_relevant_rank(), int),
        missing=judgments.missing,
        rejection=judgments.rejection,
        not_in_gold=judgments.not_in_gold,
        failed={q: e for q, e in failed.items() if q in gold_ids},
        rerank_failed={q: r for q, r in rerank_failed.items() if q in gold_ids},
        matched_by=matched.matched_by,
        credited=matched.credited,
        ambiguous=matched.ambiguous,
        rejections=rejections,
        context=context,
    )


def _per_query(
    scores: Scores, joined: Sequence[Mapping[str, dict[str, float]]]
) -> Mapping[str, Mapping[str, float]]:
    """The relevance scores with the other rows joined, as columns; made from the
    scores' own columns, without a dict per query, when nothing joins them."""
    if not any(any(rows.values()) for rows in joined):
        present = np.ones(scores.values.shape, dtype=bool)
        return ScoreColumns(scores.query_ids, scores.metric_names, scores.values, present)
    per_query = scores.to_dict()
    for rows in joined:
        _join_rows(per_query, rows)
    return ScoreColumns.from_rows(per_query)


def _join_rows(
    per_query: dict[str, dict[str, float]], rows: Mapping[str, dict[str, float]]
) -> None:
    """Add each query's values to its row of scores (queries without values get no row)."""
    for query_id, row in rows.items():
        if row:
            per_query.setdefault(query_id, {}).update(row)


def service_records(gold: GoldSet, run: Run) -> ServiceColumns:
    """What each gold query the run answered cost (queries it did not answer have none)."""
    ids: list[str] = []
    latencies: list[float | None] = []
    errors: list[bool] = []
    for query in gold.queries:
        answer = run.queries.get(query.query_id)
        if answer is not None:
            ids.append(query.query_id)
            latencies.append(answer.latency_ms)
            errors.append(answer.error is not None)
    return ServiceColumns(ids, latencies, errors)
