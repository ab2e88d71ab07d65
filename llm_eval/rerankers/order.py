"""The reranked order of one query's candidates (pure).

Candidates are sorted by the reranker's score, highest first; candidates of equal
score keep the first stage's order (a stable sort), and a query with any candidate the
reranker could not score keeps the first stage's order whole: a ranking half made of
scores and half of guesses would be neither stage's.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from llm_eval.runs import RankedResult


def reranked(
    candidates: Sequence[RankedResult], scores: Sequence[float | None]
) -> tuple[RankedResult, ...]:
    """The candidates by score, highest first, each carrying its reranker score; ties in
    the first stage's order. Any None score: the candidates as they came."""
    if any(score is None for score in scores):
        return tuple(candidates)
    order = sorted(range(len(candidates)), key=lambda i: -float(scores[i] or 0.0))
    return tuple(replace(candidates[i], score=scores[i]) for i in order)
