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

import bisect
import itertools
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


@dataclass(frozen=True, slots=True)
class ThresholdSuggestion:
    """The `rejection_score_threshold` that best separates the top scores of answerable
    questions from those of rejection questions, and how well it does."""

    threshold: float | None
    """None when there is nothing to separate (`reason` says why)."""
    answerable_kept: int = 0
    """Answerable questions whose top score is at or above it (kept confident)."""
    answerable: int = 0
    unanswerable_rejected: int = 0
    """Rejection questions whose top score is below it (rejected)."""
    unanswerable: int = 0
    reason: str | None = None


def top_scores(gold: GoldSet, run: Run) -> tuple[tuple[float, ...], tuple[float, ...]]:
    """The top score of each answerable and of each rejection question the run answered
    with scored results (an abstention or an empty answer is rejected at any threshold,
    so it is left out)."""
    answerable: list[float] = []
    unanswerable: list[float] = []
    for query in gold.queries:
        answer = run.queries.get(query.query_id)
        if answer is None or answer.abstained:
            continue
        top = max((r.score for r in answer.results if r.score is not None), default=None)
        if top is not None:
            (unanswerable if query.is_rejection else answerable).append(top)
    return tuple(answerable), tuple(unanswerable)


def suggest_threshold(
    answerable: Sequence[float], unanswerable: Sequence[float]
) -> ThresholdSuggestion:
    """The threshold, between two neighbouring top scores, that classifies the
    most questions right in balance: the share of answerable questions kept plus the
    share of rejection questions rejected (Youden's J), the lower threshold on a tie, so
    that fewer answerable questions are lost. None when either side has no score, or
    when no threshold does better than none."""

    def none(reason: str) -> ThresholdSuggestion:
        return ThresholdSuggestion(
            None, answerable=len(answerable), unanswerable=len(unanswerable), reason=reason
        )

    if not unanswerable:
        return none("no rejection question has scores")
    if not answerable:
        return none("no answerable question has scores")
    values = sorted(set(answerable) | set(unanswerable))
    candidates = [_between(low, high) for low, high in itertools.pairwise(values)]

    kept_scores, rejected_scores = sorted(answerable), sorted(unanswerable)

    def kept(threshold: float) -> int:
        return len(kept_scores) - bisect.bisect_left(kept_scores, threshold)

    def rejected(threshold: float) -> int:
        return bisect.bisect_left(rejected_scores, threshold)

    def balance(threshold: float) -> float:
        return kept(threshold) / len(answerable) + rejected(threshold) / len(unanswerable)

    best = max(candidates, key=lambda t: (balance(t), -t), default=None)
    if best is None or balance(best) <= 1:  # no better than no threshold
        return none("the rejection questions score as high as the answerable ones")
    return ThresholdSuggestion(
        best,
        answerable_kept=kept(best),
        answerable=len(answerable),
        unanswerable_rejected=rejected(best),
        unanswerable=len(unanswerable),
    )


def _between(low: float, high: float) -> float:
    """The shortest decimal strictly between `low` and `high`, near their midpoint (or
    `high`, when they are neighbouring floats): a threshold that rejects a top score of
    `low` and keeps one of `high`."""
    middle = (low + high) / 2
    for digits in range(1, 18):
        rounded = float(f"{middle:.{digits}g}")
        if low < rounded < high:
            return rounded
    return high
