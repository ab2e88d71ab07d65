"""How steady a reranker's scores are when the same pair is asked again (pure).

Each (query, candidate) pair is scored `repeats` times (each repeat a call of its own,
with its own seed). For each pair whose answers were all readable:

- the sample variance (n − 1) of its normalised scores, in [0, 1] units: the mean
  and the largest over the pairs;
- for each two candidates of the same query, whether their order flips: one repeat
  puts the first above the second and another the second above the first (a tie in
  a repeat flips nothing). The share of such candidate pairs is what reranking feels:
  a flipped pair is a ranking that depends on the draw.

The verdict is `consistent` when that share is at most the threshold. Unreadable
answers are counted, and their pairs left out of both figures.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

DEFAULT_MAX_FLIPS = 0.05
"""A candidate pair in twenty may flip between repeats."""


@dataclass(frozen=True, slots=True)
class Consistency:
    """The consistency figures of one reranker over the same pairs."""

    pairs: int
    """(query, candidate) pairs asked."""
    repeats: int
    unreadable: int
    """Answers (of pairs × repeats) that were no score."""
    mean_variance: float | None
    """None when no pair had all its answers readable."""
    max_variance: float | None
    compared: int
    """Candidate pairs of the same query compared for flips."""
    flipped: int
    max_flips: float

    @property
    def flip_share(self) -> float | None:
        """The share of compared candidate pairs whose order flips; None with none."""
        return self.flipped / self.compared if self.compared else None

    @property
    def consistent(self) -> bool:
        """Whether the flip share is within the threshold (and there was one to measure)."""
        share = self.flip_share
        return share is not None and share <= self.max_flips


def consistency(
    scores: Mapping[str, Sequence[Sequence[float | None]]],
    max_flips: float = DEFAULT_MAX_FLIPS,
) -> Consistency:
    """The figures of `scores`: per query, per candidate, its score in each repeat
    (None: unreadable)."""
    candidates = [list(map(list, per_query)) for per_query in scores.values()]
    rows = [row for per_query in candidates for row in per_query]
    repeats = max((len(row) for row in rows), default=0)
    unreadable = sum(score is None for row in rows for score in row)
    readable = [np.array(row, dtype=float) for row in rows if None not in row]
    variances = [float(np.var(row, ddof=1)) for row in readable if len(row) > 1]
    compared = flipped = 0
    for per_query in candidates:
        whole = [np.array(row, dtype=float) for row in per_query if None not in row]
        for first, second in itertools.combinations(whole, 2):
            signs = np.sign(first - second)
            compared += 1
            flipped += bool((signs > 0).any() and (signs < 0).any())
    return Consistency(
        pairs=len(rows),
        repeats=repeats,
        unreadable=unreadable,
        mean_variance=float(np.mean(variances)) if variances else None,
        max_variance=max(variances) if variances else None,
        compared=compared,
        flipped=flipped,
        max_flips=max_flips,
    )


def consistency_line(name: str, figures: Consistency) -> str:
    """One line: the verdict, the flip share against its limit, the variances and the
    unreadable answers."""
    share = figures.flip_share
    verdict = "consistent" if figures.consistent else "not consistent"
    flips = "no pair to compare" if share is None else f"{share:.1%} of candidate pairs flip"
    variance = (
        "no readable pair"
        if figures.mean_variance is None or figures.max_variance is None
        else f"score variance mean {figures.mean_variance:.4f}, max {figures.max_variance:.4f}"
    )
    answers = figures.pairs * figures.repeats
    return (
        f"{name}: {verdict}: {flips} between {figures.repeats} repeats "
        f"(limit {figures.max_flips:.0%}); {variance}; "
        f"{answers - figures.unreadable} of {answers} answers readable"
    )
