"""Rejection queries: questions the corpus cannot answer, which the retriever should decline.

A rejection query (`is_rejection: true`, or no relevant document of any kind) is
rejected correctly when the retriever abstains (`"abstain": true` in the run), returns
no results, or, with a `rejection_score_threshold`, its top score (the highest score
among its results) is below the threshold. Otherwise it was answered with confident
results.

`rejection_accuracy` is the share of rejection queries rejected correctly and
`false_confidence_rate` the share answered confidently: each query scores 1 on one
of them and 0 on the other. A rejection query missing from the run counts as not
rejected, as a missing query scores 0 on relevance metrics; one the retriever failed
on is left out (error_rate counts it).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from llm_eval.gold import GoldSet
from llm_eval.runs import QueryResults, Run


@dataclass(frozen=True, slots=True)
class RejectionOutcome:
    """What the retriever did with one rejection query."""

    query_id: str
    rejected: bool
    reason: str
    """`abstained`, `no results`, `low score`, `confident` or `missing from the run`."""
    top_score: float | None = None
    """The highest score among the results, when they have scores."""


def judge_rejection(
    query_id: str, answer: QueryResults | None, score_threshold: float | None
) -> RejectionOutcome:
    """Whether the retriever declined the query, and how."""
    if answer is None:
        return RejectionOutcome(query_id, False, "missing from the run")
    top = max((r.score for r in answer.results if r.score is not None), default=None)
    if answer.abstained:
        return RejectionOutcome(query_id, True, "abstained", top)
    if not answer.results:
        return RejectionOutcome(query_id, True, "no results")
    if score_threshold is not None and top is not None and top < score_threshold:
        return RejectionOutcome(query_id, True, "low score", top)
    return RejectionOutcome(query_id, False, "confident", top)


def rejection_outcomes(
    gold: GoldSet, run: Run, score_threshold: float | None = None
) -> tuple[RejectionOutcome, ...]:
    """One outcome per rejection query of the gold set the retriever did not fail on."""
    failed = run.failed()
    return tuple(
        judge_rejection(q.query_id, run.queries.get(q.query_id), score_threshold)
        for q in gold.queries
        if q.is_rejection and q.query_id not in failed
    )


_VALUES: dict[str, Callable[[RejectionOutcome], float]] = {
    "rejection_accuracy": lambda outcome: float(outcome.rejected),
    "false_confidence_rate": lambda outcome: float(not outcome.rejected),
}


def rejection_values(outcome: RejectionOutcome, metrics: Sequence[str]) -> dict[str, float]:
    """The query's value of each rejection metric among `metrics` (canonical names)."""
    return {m: _VALUES[m](outcome) for m in metrics if m in _VALUES}
