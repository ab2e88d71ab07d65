"""One column's paired test, as the gate asks it: the p-values of both one-sided nulls
at any worsening, and its confidence bounds found by bisection on them.

The tests themselves are `exact_test.py` (0/1 scores) and `betting.py` (graded
scores); `stats.column_test` picks one. Bounds are bracketed at the limit first, so a
bound lies beyond the limit exactly when that side's test rejects. A bound can reach
the end of the possible range (the data say nothing on that side); it is then marked
open, and it is always a finite number.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]

BISECTION_STEPS = 22
"""Halvings of the range when a bound is searched: 2 / 2^22 < 5e-7, far below any shown
digit (0.1 pp is 1e-3); the bound returned is the rejected end of the last bracket, so
stopping earlier only widens it by that much."""
EDGE = 1e-9
"""How close to the end of the range a tested value may come."""


class ColumnTest:
    """One column's test: p-values of both one-sided nulls at any worsening delta."""

    span: float
    """Width of the range the worsening lies in, halved: it lies in [-span, span]."""

    @property
    def queries(self) -> ColumnTest:
        """The test of the queries' part: this one, unless it is joined with the
        variance between builds (`llm_eval.builds.WithBuilds`)."""
        return self

    def p_beyond(self, delta: float) -> float:
        """p-value against "the mean worsening is at most delta"."""
        raise NotImplementedError

    def p_within(self, delta: float) -> float:
        """p-value against "the mean worsening is at least delta"."""
        raise NotImplementedError

    def bounds(self, margin: float, level: float) -> tuple[float, float, bool, bool]:
        """One-sided `level` bounds (low, high, low_open, high_open), bracketed at the
        margin so that low > margin exactly when p_beyond(margin) <= level, and high <
        margin exactly when p_within(margin) <= level."""
        edge = self.span * (1.0 - EDGE)
        margin = min(max(margin, -edge), edge)
        low, low_open = _bound(self.p_beyond, margin, level, -edge)
        high, high_open = _bound(self.p_within, margin, level, edge)
        return low, high, low_open, high_open


def _bound(
    p_value: Callable[[float], float], margin: float, level: float, end: float
) -> tuple[float, bool]:
    """The bound where `p_value` crosses `level`, found by bisection between the margin
    and whichever end of the range lies on the other side of the crossing. Returns the
    rejected side of the final bracket, and whether the bound is the range's end."""
    rejected_at_margin = p_value(margin) <= level
    far = -end if rejected_at_margin else end
    if rejected_at_margin and p_value(far) <= level:
        return far, False  # rejected everywhere up to the end: the bound is the end itself
    if not rejected_at_margin and p_value(far) > level:
        return far, True  # nothing rejected: the data cannot bound this side
    inside, outside = (margin, far) if rejected_at_margin else (far, margin)
    return bisect(lambda delta: p_value(delta) <= level, inside, outside), False


def bisect(
    holds: Callable[[float], bool], inside: float, outside: float, steps: int = BISECTION_STEPS
) -> float:
    """Halve [inside, outside], where `holds` is true at `inside` and false at `outside`
    and changes once between them; returns the end of the last bracket where it holds."""
    for _ in range(steps):
        middle = (inside + outside) / 2.0
        if holds(middle):
            inside = middle
        else:
            outside = middle
    return inside
